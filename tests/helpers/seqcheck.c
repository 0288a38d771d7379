// SPDX-License-Identifier: GPL-2.0-only
/*
 * seqcheck: the client of the failover test.  Connects to seqsrv, reads
 * "N TAG PAD" lines for --duration seconds (or until SIGINT), and checks
 * the sequence: every N is the previous + 1, every line well-formed.
 * Prints a JSON verdict on stdout; progress on stderr ("first N" once the
 * first value arrived).  Exit 0 only if the sequence was contiguous and
 * the connection never dropped.
 *
 * max_stall_ms is the largest gap between two consecutive arrivals —
 * what the client saw of a failover.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_sig(int s)
{
	(void)s;
	stop = 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool well_formed(const char *l, unsigned long long *n)
{
	char *end;

	if (*l < '0' || *l > '9')
		return false;
	*n = strtoull(l, &end, 10);
	if (*end != ' ')
		return false;
	l = end + 1;
	if (strspn(l, "0123456789abcdef") != 16 || l[16] != ' ')
		return false;
	l += 17;
	return strspn(l, ".") == strlen(l) && strlen(l) <= 12;
}

int main(int argc, char **argv)
{
	const char *host = "127.0.0.1";
	int port = 7000, fd = -1;
	double duration = 30, connect_timeout = 20, stall_timeout = 20;
	unsigned long long values = 0, first = 0, last = 0, gaps = 0, dups = 0,
		regressions = 0, corrupt = 0, after_stall = 0, stall_after = 0;
	double t_end, last_arrival = 0, max_stall = 0, t0;
	bool lost = false, connected = false;
	char buf[65536], line[256];
	size_t ll = 0;
	struct sockaddr_in sa = { .sin_family = AF_INET };

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--host"))
			host = argv[i + 1];
		else if (!strcmp(argv[i], "--port"))
			port = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--duration"))
			duration = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--connect-timeout"))
			connect_timeout = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--stall-timeout"))
			stall_timeout = atof(argv[i + 1]);
	}
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	sa.sin_port = htons((unsigned short)port);
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "seqcheck: bad address %s\n", host);
		return 2;
	}
	t0 = now_s();
	/* Retry until the guest listens, within the connect deadline. */
	while (!stop && now_s() - t0 < connect_timeout) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			connected = true;
			break;
		}
		close(fd);
		fd = -1;
		usleep(200000);
	}
	if (!connected) {
		fprintf(stderr, "seqcheck: could not connect to %s:%d in %.0f s\n",
			host, port, connect_timeout);
		printf("{\"values\":0,\"connection_lost\":true,\"error\":\"connect\"}\n");
		return 1;
	}
	fprintf(stderr, "seqcheck: connected to %s:%d\n", host, port);
	t_end = now_s() + duration;
	while (!stop && now_s() < t_end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		double t;
		ssize_t r;

		if (poll(&p, 1, 100) < 0 && errno != EINTR)
			break;
		t = now_s();
		if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) {
			if (last_arrival && t - last_arrival > stall_timeout) {
				fprintf(stderr, "seqcheck: nothing for %.0f s\n", stall_timeout);
				lost = true;
				break;
			}
			continue;
		}
		r = read(fd, buf, sizeof(buf));
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			fprintf(stderr, "seqcheck: connection %s after %llu\n",
				r == 0 ? "closed" : strerror(errno), last);
			lost = true;
			break;
		}
		for (ssize_t i = 0; i < r; i++) {
			unsigned long long n;

			if (buf[i] != '\n') {
				if (ll < sizeof(line) - 1)
					line[ll++] = buf[i];
				else
					ll = sizeof(line);	/* overlong: corrupt */
				continue;
			}
			if (ll >= sizeof(line) - 1 || (line[ll] = 0, !well_formed(line, &n))) {
				corrupt++;
				fprintf(stderr, "seqcheck: malformed line after %llu\n", last);
				ll = 0;
				continue;
			}
			ll = 0;
			if (values == 0) {
				first = n;
				fprintf(stderr, "first %llu\n", n);
			} else if (n == last + 1) {
				/* in order */
			} else if (n == last) {
				dups++;
			} else if (n < last) {
				regressions++;
			} else {
				gaps++;
			}
			if (values && n != last + 1)
				fprintf(stderr, "seqcheck: %llu after %llu\n", n, last);
			if (last_arrival && t - last_arrival > max_stall) {
				max_stall = t - last_arrival;
				stall_after = last;
				after_stall = 0;
			}
			after_stall++;
			last_arrival = t;
			last = n;
			values++;
		}
	}
	close(fd);
	printf("{\"values\":%llu,\"first\":%llu,\"last\":%llu,\"gaps\":%llu,"
	       "\"dups\":%llu,\"regressions\":%llu,\"corrupt\":%llu,"
	       "\"max_stall_ms\":%.1f,\"max_stall_after\":%llu,"
	       "\"values_after_stall\":%llu,\"connection_lost\":%s}\n",
	       values, first, last, gaps, dups, regressions, corrupt,
	       max_stall * 1000, stall_after, after_stall, lost ? "true" : "false");
	return (gaps || dups || regressions || corrupt || lost || !values) ? 1 : 0;
}

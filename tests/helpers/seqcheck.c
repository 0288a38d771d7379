// SPDX-License-Identifier: GPL-2.0-only
/*
 * seqcheck: the client of the failover test.  Connects to seqsrv, reads
 * "N TAG PAD" lines for --duration seconds (or until SIGINT), and checks
 * the sequence: every N is the previous + 1, every line well-formed.
 * Prints a JSON verdict on stdout; progress on stderr ("first N" once the
 * first value arrived).  Exit 0 only if the sequence was contiguous and
 * the connection never dropped.
 *
 * max_stall_ms is the largest gap between two consecutive arrivals, or
 * between the last arrival and the end — what the client saw of a
 * failover; values_after_stall is 0 if nothing came after it.
 *
 * SIGUSR1 records a mark: seqcheck prints "mark K mono=S real=S after=N"
 * on stderr (CLOCK_MONOTONIC and CLOCK_REALTIME seconds, N the last value
 * received) and the JSON lists every mark with next_ms, the time from the
 * mark to the next value that arrived (-1: none).  A harness signals just
 * before it pulls the power; next_ms is then the outage the client saw.
 * Each mark also has stall_ms: the largest gap between two consecutive
 * arrivals (or from the last one to the end) whose end falls within
 * --mark-window seconds (default 5) after the mark: the stall an event
 * that begins at the mark (a planned switchover) caused, apart from
 * others in the same run; stall_end_ms is when it ended, after the mark.
 * stall_guest_ms (and max_stall_guest_ms for max_stall_ms) is how long
 * the guest itself ran between the two values around that stall, from
 * the guest's clock in them (seqsrv.c; -1: not known): what is left of
 * the stall is time the guest was stopped or its output held.
 * at_real is the mark's wall-clock time (CLOCK_REALTIME seconds).
 *
 * --timeline FILE writes the values' arrival rate over the run, for the
 * drill report's plot: "REAL_S VALUES_PER_S" per 100 ms bin from the
 * connection on (REAL_S the bin's start, CLOCK_REALTIME seconds).
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

#define MAX_MARKS 16

struct mark {
	double at;			/* monotonic seconds */
	double at_real;			/* the same, CLOCK_REALTIME */
	unsigned long long after;	/* last value before the mark */
	double next;			/* arrival of the next value; 0: none */
	double stall;			/* longest gap ending in its window */
	double stall_end;		/* when it ended (monotonic s) */
	double stall_guest;		/* the guest's own time in it; <0: unknown */
};

static volatile sig_atomic_t stop;
static volatile sig_atomic_t mark_pending;

static void on_usr1(int s)
{
	(void)s;
	mark_pending = 1;
}

static void on_sig(int s)
{
	(void)s;
	stop = 1;
}

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_s(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* Take a pending SIGUSR1 mark (called from the loop, not the handler). */
static void take_mark(struct mark *marks, int *n, unsigned long long last)
{
	double mono, real;

	if (!mark_pending)
		return;
	mark_pending = 0;
	mono = now_s();
	real = clock_s(CLOCK_REALTIME);
	fprintf(stderr, "mark %d mono=%.6f real=%.6f after=%llu\n", *n, mono,
		real, last);
	if (*n >= MAX_MARKS)
		return;
	marks[*n] = (struct mark){ .at = mono, .at_real = real, .after = last,
				   .stall_guest = -1 };
	(*n)++;
}

/* "N TAG GUEST_US PAD" (seqsrv.c); *guest_us is 0 for an older
 * seqsrv's "N TAG PAD". */
static bool well_formed(const char *l, unsigned long long *n,
			unsigned long long *guest_us)
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
	*guest_us = 0;
	if (*l >= '0' && *l <= '9') {
		*guest_us = strtoull(l, &end, 10);
		if (*end != ' ')
			return false;
		l = end + 1;
	}
	return strspn(l, ".") == strlen(l) && strlen(l) <= 12;
}

int main(int argc, char **argv)
{
	const char *host = "127.0.0.1";
	int port = 7000, fd = -1;
	double duration = 30, connect_timeout = 20, stall_timeout = 20;
	double mark_window = 5;
	unsigned long long values = 0, first = 0, last = 0, gaps = 0, dups = 0,
		regressions = 0, corrupt = 0, after_stall = 0, stall_after = 0;
	unsigned long long guest_us = 0, last_guest_us = 0;
	double t_end, last_arrival = 0, max_stall = 0, max_stall_guest = -1, t0;
	double g;
	bool lost = false, connected = false;
	char buf[65536], line[256];
	size_t ll = 0;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct sigaction usr1 = { .sa_handler = on_usr1 };
	struct mark marks[MAX_MARKS];
	int nmarks = 0;
	const char *timeline = NULL;
	unsigned *bins = NULL;
	size_t nbins = 0;
	double conn_mono = 0, conn_real = 0;

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
		else if (!strcmp(argv[i], "--mark-window"))
			mark_window = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--timeline"))
			timeline = argv[i + 1];
	}
	if (timeline) {
		nbins = (size_t)(duration * 10) + 2;
		bins = calloc(nbins, sizeof(*bins));
		if (!bins || duration <= 0 || duration > 86400) {
			fprintf(stderr, "seqcheck: --timeline wants a duration in 0..86400 s\n");
			return 2;
		}
	}
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	/* No SA_RESTART: the signal interrupts poll() and is taken at once. */
	sigaction(SIGUSR1, &usr1, NULL);
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
	conn_mono = now_s();
	conn_real = clock_s(CLOCK_REALTIME);
	t_end = now_s() + duration;
	while (!stop && now_s() < t_end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		double t;
		ssize_t r;

		if (poll(&p, 1, 100) < 0 && errno != EINTR)
			break;
		take_mark(marks, &nmarks, last);
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
			if (ll >= sizeof(line) - 1 || (line[ll] = 0, !well_formed(line, &n, &guest_us))) {
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
			/* the guest's running time between the two values */
			g = guest_us && last_guest_us && guest_us >= last_guest_us ?
			    (double)(guest_us - last_guest_us) / 1e6 : -1;
			if (last_arrival && t - last_arrival > max_stall) {
				max_stall = t - last_arrival;
				max_stall_guest = g;
				stall_after = last;
				after_stall = 0;
			}
			after_stall++;
			for (int m = 0; m < nmarks; m++) {
				if (!marks[m].next)
					marks[m].next = t;
				if (last_arrival && t <= marks[m].at + mark_window &&
				    t - last_arrival > marks[m].stall) {
					marks[m].stall = t - last_arrival;
					marks[m].stall_end = t;
					marks[m].stall_guest = g;
				}
			}
			last_arrival = t;
			last_guest_us = guest_us;
			last = n;
			values++;
			if (bins) {
				size_t b = (size_t)((t - conn_mono) * 10);

				if (b < nbins)
					bins[b]++;
			}
		}
	}
	take_mark(marks, &nmarks, last);
	close(fd);
	/* Silence up to the end counts too: a server that died for good
	 * must not pass as one that never stalled. */
	if (last_arrival && now_s() - last_arrival > max_stall) {
		max_stall = now_s() - last_arrival;
		max_stall_guest = -1;
		stall_after = last;
		after_stall = 0;
	}
	for (int m = 0; m < nmarks; m++) {
		double end = now_s();

		if (end > marks[m].at + mark_window)
			end = marks[m].at + mark_window;
		if (last_arrival && end - last_arrival > marks[m].stall) {
			marks[m].stall = end - last_arrival;
			marks[m].stall_end = end;
			marks[m].stall_guest = -1;
		}
	}
	if (bins) {
		FILE *tf = fopen(timeline, "w");
		size_t used = (size_t)((now_s() - conn_mono) * 10) + 1;

		if (!tf) {
			fprintf(stderr, "seqcheck: %s: %s\n", timeline, strerror(errno));
		} else {
			fprintf(tf, "# real_s values_per_s (100 ms bins)\n");
			for (size_t b = 0; b < used && b < nbins; b++)
				fprintf(tf, "%.3f %u\n", conn_real + (double)b / 10, bins[b] * 10);
			fclose(tf);
		}
		free(bins);
	}
	printf("{\"values\":%llu,\"first\":%llu,\"last\":%llu,\"gaps\":%llu,"
	       "\"dups\":%llu,\"regressions\":%llu,\"corrupt\":%llu,"
	       "\"max_stall_ms\":%.1f,\"max_stall_guest_ms\":%.1f,"
	       "\"max_stall_after\":%llu,"
	       "\"values_after_stall\":%llu,\"connection_lost\":%s,"
	       "\"reconnects\":0,\"marks\":[",
	       values, first, last, gaps, dups, regressions, corrupt,
	       max_stall * 1000, max_stall_guest < 0 ? -1.0 : max_stall_guest * 1000,
	       stall_after, after_stall, lost ? "true" : "false");
	for (int m = 0; m < nmarks; m++)
		printf("%s{\"after\":%llu,\"next_ms\":%.1f,\"stall_ms\":%.1f,"
		       "\"stall_guest_ms\":%.1f,"
		       "\"stall_end_ms\":%.1f,\"at_real\":%.3f}",
		       m ? "," : "", marks[m].after,
		       marks[m].next ? (marks[m].next - marks[m].at) * 1000 : -1.0,
		       marks[m].stall * 1000,
		       marks[m].stall_guest < 0 ? -1.0 : marks[m].stall_guest * 1000,
		       marks[m].stall_end ? (marks[m].stall_end - marks[m].at) * 1000 :
		       -1.0, marks[m].at_real);
	printf("]}\n");
	return (gaps || dups || regressions || corrupt || lost || !values) ? 1 : 0;
}

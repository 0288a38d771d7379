// SPDX-License-Identifier: GPL-2.0-only
/*
 * linegap: host side of the freeze test.  Connects to a QEMU serial
 * socket, and from the moment a line matching --start appears, measures
 * the largest gap (host monotonic time) between consecutive lines for
 * --duration seconds.  Prints {"lines":N,"max_gap_ms":G}.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	const char *path = NULL, *start = "tick ";
	double duration = 10, t_end = 0, last = 0, max_gap = 0, t0;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	unsigned long long lines = 0;
	char buf[4096], line[256];
	size_t ll = 0;
	int fd = -1, started = 0;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--socket"))
			path = argv[i + 1];
		else if (!strcmp(argv[i], "--duration"))
			duration = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--start"))
			start = argv[i + 1];
	}
	if (!path || strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "usage: linegap --socket PATH [--duration S] [--start PREFIX]\n");
		return 2;
	}
	strcpy(sa.sun_path, path);
	t0 = now_s();
	while (now_s() - t0 < 10) {
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		close(fd);
		fd = -1;
		usleep(50000);
	}
	if (fd < 0) {
		fprintf(stderr, "linegap: cannot connect to %s\n", path);
		return 1;
	}
	/* Wait at most 60 s for the first matching line, then measure. */
	t_end = now_s() + 60;
	while (now_s() < t_end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		poll(&p, 1, 50);
		if (!(p.revents & POLLIN))
			continue;
		r = read(fd, buf, sizeof(buf));
		if (r <= 0)
			break;
		for (ssize_t i = 0; i < r; i++) {
			double t;

			if (buf[i] != '\n') {
				if (ll < sizeof(line) - 1)
					line[ll++] = buf[i];
				continue;
			}
			line[ll] = 0;
			ll = 0;
			t = now_s();
			if (!started) {
				if (strncmp(line, start, strlen(start)) != 0)
					continue;
				started = 1;
				t_end = t + duration;
				fprintf(stderr, "linegap: started\n");
			} else if (t - last > max_gap) {
				max_gap = t - last;
			}
			last = t;
			lines++;
		}
	}
	printf("{\"lines\":%llu,\"max_gap_ms\":%.1f}\n", lines, max_gap * 1000);
	return started ? 0 : 1;
}

// SPDX-License-Identifier: GPL-2.0-only
/*
 * seqsrv: runs in the test guest.  Accepts one TCP client and sends it
 * "N TAG GUEST_US PAD\n" for N = 1, 2, 3, ... every --interval-us, forever.
 *
 * GUEST_US is the guest's CLOCK_MONOTONIC in microseconds when the line
 * was made.  The guest's clock does not advance while its VM is stopped
 * (QEMU's virtual clock under TCG, kvmclock restored across a migration
 * under KVM), so across a client's stall the difference of two values'
 * GUEST_US is the time the guest ran meanwhile: the rest of the stall is
 * time it did not run or its output was held (seqcheck: stall_guest_ms).
 *
 * TAG is drawn from the clock for every line and padded to a length that
 * depends on it.  If output of an execution that was later rolled back
 * ever reached the client (an output-commit violation), the restored
 * guest regenerates those lines with other tags and other lengths; the
 * client's TCP keeps the bytes it already had and appends the rest, so
 * the stream it reads misaligns and seqcheck sees a malformed line or a
 * broken sequence.  With fixed-width lines that violation would be
 * invisible.
 *
 * --disk DEVICE: before line N is sent, record N is written to DEVICE
 * with O_DIRECT and synced (fdatasync), in diskseq's format (4 KiB at
 * N * 4096: "RDBSEQ01", N little endian, N's low byte repeated).  Every
 * value a client received was then on stable storage first; after a
 * failover, `diskseq --check` reads the records back from the disk the
 * surviving copy writes (tests/xen/drill-dom0.sh).
 *
 * --disk repeated (up to 8): record N goes to the ((N - 1) mod K)-th of
 * the K devices, still at N * 4096, each synced before the next record
 * is written: one ordered log striped over several disks, as a DBMS's
 * WAL and data files are.  `diskseq --check-set` reads the set back; a
 * later record on one disk with an earlier one missing on another is a
 * state the guest never had (tests/e2e/multi-disk.sh).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "seqrec.h"

static unsigned long long rnd(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((unsigned long long)ts.tv_nsec * 2654435761ull) ^
		((unsigned long long)ts.tv_sec << 32) ^ (unsigned long long)getpid();
}

int main(int argc, char **argv)
{
	int port = 7000, interval_us = 1000, one = 1, l, c;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	unsigned long long n = 0;
	const char *disks[8];
	int dfds[8], ndisks = 0;
	uint8_t *rec = NULL;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--port"))
			port = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--interval-us"))
			interval_us = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--disk") && ndisks < 8)
			disks[ndisks++] = argv[i + 1];
	}
	if (ndisks && posix_memalign((void **)&rec, 4096, SEQREC_SIZE))
		return 1;
	for (int k = 0; k < ndisks; k++) {
		/* (a block device may still be probed at boot: wait 10 s) */
		for (int t = 0; t < 100; t++) {
			dfds[k] = open(disks[k], O_RDWR | O_DIRECT);
			if (dfds[k] >= 0 || errno != ENOENT)
				break;
			usleep(100000);
		}
		if (dfds[k] < 0) {
			printf("seqsrv: %s: %s\n", disks[k], strerror(errno));
			return 1;
		}
	}
	l = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa.sin_port = htons((unsigned short)port);
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(l, 1) < 0) {
		perror("seqsrv: listen");
		return 1;
	}
	printf("seqsrv: listening on %d\n", port);
	fflush(stdout);
	c = accept(l, NULL, NULL);
	if (c < 0) {
		perror("seqsrv: accept");
		return 1;
	}
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	printf("seqsrv: client connected\n");
	fflush(stdout);
	for (;;) {
		static const char pad[] = "................";
		unsigned long long r = rnd();
		char line[96];
		struct timespec now;
		int len;

		clock_gettime(CLOCK_MONOTONIC, &now);
		len = snprintf(line, sizeof(line), "%llu %016llx %llu %.*s\n", ++n,
			       r, (unsigned long long)now.tv_sec * 1000000ull +
			       (unsigned long long)now.tv_nsec / 1000,
			       (int)(r % 13), pad);
		const char *p = line;

		if (ndisks) {		/* record n, this line's, first */
			int k = (int)((n - 1) % (unsigned)ndisks);

			seqrec_fill(rec, n);
			if (pwrite(dfds[k], rec, SEQREC_SIZE, (off_t)(n * SEQREC_SIZE)) !=
			    SEQREC_SIZE || fdatasync(dfds[k]) < 0) {
				printf("seqsrv: record %llu on %s: %s\n", n, disks[k],
				       strerror(errno));
				return 1;
			}
		}
		while (len > 0) {
			ssize_t w = write(c, p, (size_t)len);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				printf("seqsrv: write failed at %llu: %s\n", n,
				       strerror(errno));
				return 1;
			}
			p += w;
			len -= (int)w;
		}
		usleep((useconds_t)interval_us);
	}
}

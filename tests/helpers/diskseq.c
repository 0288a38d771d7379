// SPDX-License-Identifier: GPL-2.0-only
/*
 * diskseq: runs in the test guest; writes numbered 4 KiB records to a
 * block device, each with O_DIRECT followed by fdatasync(), and prints
 * "durable N" only once the sync of record N returned: from then on the
 * guest was told N is on stable storage.  The host reads the records back
 * from the disk image after a power loss (tests/e2e/flush-durable.sh).
 *
 *   diskseq DEVICE [INTERVAL_MS]
 *
 * Record N lives at byte N * 4096: "RDBSEQ01", N (8 bytes, little
 * endian), then N's low byte repeated.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int interval_ms = argc > 2 ? atoi(argv[2]) : 10, fd;
	uint8_t *rec;
	off_t size;

	if (argc < 2) {
		fprintf(stderr, "usage: diskseq DEVICE [INTERVAL_MS]\n");
		return 2;
	}
	fd = open(argv[1], O_RDWR | O_DIRECT);
	if (fd < 0 || (size = lseek(fd, 0, SEEK_END)) < 0 ||
	    posix_memalign((void **)&rec, 4096, 4096)) {
		printf("diskseq: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	printf("diskseq: %s, %lld bytes\n", argv[1], (long long)size);
	for (uint64_t n = 1; (off_t)((n + 1) * 4096) <= size; n++) {
		memset(rec, (int)(n & 0xff), 4096);
		memcpy(rec, "RDBSEQ01", 8);
		for (int i = 0; i < 8; i++)
			rec[8 + i] = (uint8_t)(n >> (8 * i));
		if (pwrite(fd, rec, 4096, (off_t)(n * 4096)) != 4096 ||
		    fdatasync(fd) < 0) {
			printf("diskseq: record %llu: %s\n",
			       (unsigned long long)n, strerror(errno));
			fflush(stdout);
			return 1;
		}
		printf("durable %llu\n", (unsigned long long)n);
		fflush(stdout);
		usleep((useconds_t)interval_ms * 1000);
	}
	printf("diskseq: device full\n");
	return 0;
}

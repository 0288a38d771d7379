// SPDX-License-Identifier: GPL-2.0-only
/*
 * diskseq: runs in the test guest; writes numbered 4 KiB records to a
 * block device, each with O_DIRECT followed by fdatasync(), and prints
 * "durable N" only once the sync of record N returned: from then on the
 * guest was told N is on stable storage.  The host reads the records back
 * from the disk image after a power loss (tests/e2e/flush-durable.sh).
 *
 *   diskseq DEVICE [INTERVAL_MS]
 *   diskseq --check IMAGE LAST
 *   diskseq --check-set LAST IMAGE...
 *
 * --check (on a host, over a disk image or replica): records 1..LAST
 * must all be there, intact.  Prints {"checked", "missing",
 * "first_missing", "highest"} (highest: the last record of the unbroken
 * run from 1, which may go past LAST) and exits 0 only if none is
 * missing.
 *
 * --check-set: the same over the records seqsrv --disk striped over K
 * disks (record N on image (N - 1) mod K), plus "after_gap": records
 * found past the first missing one (a later record on one disk beside
 * an earlier one missing on another).
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

#include "seqrec.h"

static int check(const char *path, uint64_t last)
{
	uint64_t missing = 0, first_missing = 0, highest = 0;
	static uint8_t rec[SEQREC_SIZE];
	int fd = open(path, O_RDONLY);

	if (fd < 0) {
		fprintf(stderr, "diskseq: %s: %s\n", path, strerror(errno));
		return 2;
	}
	for (uint64_t n = 1;; n++) {
		ssize_t r = pread(fd, rec, sizeof(rec), (off_t)(n * SEQREC_SIZE));
		int ok = r == (ssize_t)sizeof(rec) && seqrec_ok(rec, n);

		if (r < 0) {
			fprintf(stderr, "diskseq: %s: %s\n", path, strerror(errno));
			return 2;
		}
		if (ok && highest == n - 1)
			highest = n;
		if (n <= last && !ok && missing++ == 0)
			first_missing = n;
		if (n >= last && (!ok || r == 0))
			break;
	}
	close(fd);
	printf("{\"checked\":%llu,\"missing\":%llu,\"first_missing\":%llu,"
	       "\"highest\":%llu}\n", (unsigned long long)last,
	       (unsigned long long)missing, (unsigned long long)first_missing,
	       (unsigned long long)highest);
	return missing ? 1 : 0;
}

static int check_set(uint64_t last, char **paths, int k)
{
	uint64_t missing = 0, first_missing = 0, highest = 0, after_gap = 0;
	static uint8_t rec[SEQREC_SIZE];
	int fds[8], absent_run = 0;

	if (k < 1 || k > 8) {
		fprintf(stderr, "diskseq: 1 to 8 images\n");
		return 2;
	}
	for (int i = 0; i < k; i++) {
		fds[i] = open(paths[i], O_RDONLY);
		if (fds[i] < 0) {
			fprintf(stderr, "diskseq: %s: %s\n", paths[i], strerror(errno));
			return 2;
		}
	}
	/* past LAST, until every disk had 64 absent records in a row */
	for (uint64_t n = 1; n <= last || absent_run < 64 * k; n++) {
		int fd = fds[(n - 1) % (uint64_t)k];
		ssize_t r = pread(fd, rec, sizeof(rec), (off_t)(n * SEQREC_SIZE));
		int ok = r == (ssize_t)sizeof(rec) && seqrec_ok(rec, n);

		if (r < 0) {
			fprintf(stderr, "diskseq: record %llu: %s\n",
				(unsigned long long)n, strerror(errno));
			return 2;
		}
		absent_run = ok ? 0 : absent_run + 1;
		if (ok && highest == n - 1)
			highest = n;
		else if (ok)
			after_gap++;
		if (n <= last && !ok && missing++ == 0)
			first_missing = n;
	}
	for (int i = 0; i < k; i++)
		close(fds[i]);
	printf("{\"checked\":%llu,\"missing\":%llu,\"first_missing\":%llu,"
	       "\"highest\":%llu,\"after_gap\":%llu,\"disks\":%d}\n",
	       (unsigned long long)last, (unsigned long long)missing,
	       (unsigned long long)first_missing, (unsigned long long)highest,
	       (unsigned long long)after_gap, k);
	return missing || after_gap ? 1 : 0;
}

int main(int argc, char **argv)
{
	int interval_ms = argc > 2 ? atoi(argv[2]) : 10, fd;
	uint8_t *rec;
	off_t size;

	if (argc == 4 && !strcmp(argv[1], "--check"))
		return check(argv[2], strtoull(argv[3], NULL, 10));
	if (argc >= 4 && !strcmp(argv[1], "--check-set"))
		return check_set(strtoull(argv[2], NULL, 10), argv + 3, argc - 3);
	if (argc < 2) {
		fprintf(stderr, "usage: diskseq DEVICE [INTERVAL_MS] | "
			"diskseq --check IMAGE LAST\n");
		return 2;
	}
	fd = open(argv[1], O_RDWR | O_DIRECT);
	if (fd < 0 || (size = lseek(fd, 0, SEEK_END)) < 0 ||
	    posix_memalign((void **)&rec, 4096, SEQREC_SIZE)) {
		printf("diskseq: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	printf("diskseq: %s, %lld bytes\n", argv[1], (long long)size);
	for (uint64_t n = 1; (off_t)((n + 1) * SEQREC_SIZE) <= size; n++) {
		seqrec_fill(rec, n);
		if (pwrite(fd, rec, SEQREC_SIZE, (off_t)(n * SEQREC_SIZE)) != SEQREC_SIZE ||
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

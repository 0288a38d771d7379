// SPDX-License-Identifier: GPL-2.0-only
/*
 * albench: what the activity log (actlog.h) costs a guest's write.
 *
 *   albench [DIR] [--adds N]  ->  JSON on stdout
 *
 * In DIR (default /var/tmp: a real filesystem, not tmpfs), a sparse
 * image of 4 GiB and its log; the log armed, then N (default 1000)
 * changes each to an extent not in the log — each one bitmap page
 * written and the log fdatasync()ed, what a write to a cold extent
 * waits for — and N changes to extents in the log (no I/O).  Reports
 * p50/p99/max in microseconds, and the arming (image sync and three log
 * syncs).
 */
#define RDB_COMPONENT "albench"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "actlog.h"
#include "log.h"

#define DISK (4ull << 30)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void die(const char *msg)
{
	fprintf(stderr, "albench: %s\n", msg);
	exit(1);
}

static void print_stats(const char *name, uint64_t *ns, int n, const char *tail)
{
	qsort(ns, (size_t)n, sizeof(*ns), cmp);
	printf("  \"%s\": {\"n\": %d, \"p50_us\": %.1f, \"p99_us\": %.1f, "
	       "\"max_us\": %.1f}%s\n", name, n, ns[n / 2] / 1e3,
	       ns[n * 99 / 100] / 1e3, ns[n - 1] / 1e3, tail);
}

int main(int argc, char **argv)
{
	const char *dir = "/var/tmp";
	char img[512], log[512], err[300];
	struct rdb_actlog al;
	struct statfs sf;
	uint64_t *ns, t0, arm_ns;
	int n = 1000, fd;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--adds") == 0 && i + 1 < argc)
			n = atoi(argv[++i]);
		else
			dir = argv[i];
	}
	if (n < 1 || (uint64_t)n >= DISK >> RDB_ACTLOG_SHIFT)
		die("--adds: 1 to 4095");
	rdb_log_setup("albench", RDB_LOG_WARN);
	snprintf(img, sizeof(img), "%s/albench-%d.img", dir, (int)getpid());
	snprintf(log, sizeof(log), "%s/albench-%d.al", dir, (int)getpid());
	fd = open(img, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)DISK) < 0)
		die(strerror(errno));
	ns = calloc((size_t)n, sizeof(*ns));
	if (!ns)
		die("out of memory");
	rdb_actlog_init(&al);
	if (rdb_actlog_open(&al, "bench", log, fd, DISK, (uint32_t)n + 1,
			    err, sizeof(err)) < 0)
		die(err);
	t0 = now_ns();
	if (rdb_actlog_before(&al, true, 1, 0, 0, 4096) < 0)
		die("arming failed");
	arm_ns = now_ns() - t0;
	rdb_actlog_after(&al, 0, 4096, 1);
	if (rdb_actlog_armed_gen(&al) != 1)
		die("not armed");
	for (int i = 0; i < n; i++) {
		uint64_t off = (uint64_t)(i + 1) << RDB_ACTLOG_SHIFT;

		t0 = now_ns();
		if (rdb_actlog_before(&al, true, 1, 0, off, 4096) < 0)
			die("an add failed");
		ns[i] = now_ns() - t0;
		rdb_actlog_after(&al, off, 4096, 2 + (uint64_t)i);
	}
	if (al.st.adds != (uint64_t)n + 1 || rdb_actlog_armed_gen(&al) != 1)
		die("the adds did not all go to the log");
	printf("{\n  \"dir\": \"%s\",\n", dir);
	if (statfs(dir, &sf) == 0)
		printf("  \"fs_type\": \"0x%lx\",\n", (unsigned long)sf.f_type);
	printf("  \"arm_us\": %.1f,\n", arm_ns / 1e3);
	print_stats("add_cold_extent", ns, n, ",");
	for (int i = 0; i < n; i++) {
		uint64_t off = ((uint64_t)(i + 1) << RDB_ACTLOG_SHIFT) + 8192;

		t0 = now_ns();
		rdb_actlog_before(&al, true, 1, 0, off, 4096);
		ns[i] = now_ns() - t0;
		rdb_actlog_after(&al, off, 4096, 2 + (uint64_t)(n + i));
	}
	print_stats("change_in_logged_extent", ns, n, "");
	printf("}\n");
	rdb_actlog_dispose(&al);
	close(fd);
	unlink(img);
	unlink(log);
	free(ns);
	return 0;
}

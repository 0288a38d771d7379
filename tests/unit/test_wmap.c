// SPDX-License-Identifier: GPL-2.0-only
/*
 * The written map (wmap.h): marks across block and word boundaries,
 * large ranges, runs, the file kept across opens and refused for another
 * disk, and marks from another process while this one snapshots and
 * takes: no mark is ever lost or seen to go away.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wmap.h"

#define B RDB_WMAP_BLOCK
#define DISK (1000 * B + 512)		/* 1001 blocks, the last partial */

static char dir[64], path[128];

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/rdb-wmap-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/wmap", dir);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static uint64_t count(struct rdb_wmap *m)
{
	struct rdb_wmap_snap s;
	uint64_t n;

	assert_int_equal(rdb_wmap_snapshot(m, &s), 0);
	n = s.nr_set;
	rdb_wmap_snap_dispose(&s);
	return n;
}

static void test_marks(void **state)
{
	struct rdb_wmap m;
	struct rdb_wmap_snap s;
	uint64_t from = 0, first, n;
	char err[200];

	(void)state;
	assert_int_equal(rdb_wmap_open(&m, path, DISK, true, err, sizeof(err)), 0);
	assert_int_equal(m.nr_blocks, 1001);
	assert_int_equal(count(&m), 0);
	rdb_wmap_mark(&m, B - 1, 2);		/* blocks 0 and 1 */
	rdb_wmap_mark(&m, 5 * B, B);		/* exactly block 5 */
	rdb_wmap_mark(&m, 63 * B + 100, B);	/* 63 and 64: two words */
	rdb_wmap_mark(&m, 7 * B, 0);		/* nothing */
	assert_int_equal(count(&m), 5);
	assert_int_equal(rdb_wmap_snapshot(&m, &s), 0);
	assert_true(rdb_wmap_snap_test(&s, 0));
	assert_true(rdb_wmap_snap_test(&s, 1));
	assert_false(rdb_wmap_snap_test(&s, 2));
	assert_false(rdb_wmap_snap_test(&s, 4));
	assert_true(rdb_wmap_snap_test(&s, 5));
	assert_false(rdb_wmap_snap_test(&s, 6));
	assert_true(rdb_wmap_snap_test(&s, 63));
	assert_true(rdb_wmap_snap_test(&s, 64));
	assert_false(rdb_wmap_snap_test(&s, 65));
	/* the runs */
	assert_true(rdb_wmap_snap_next(&s, &from, &first, &n));
	assert_int_equal(first, 0);
	assert_int_equal(n, 2);
	assert_true(rdb_wmap_snap_next(&s, &from, &first, &n));
	assert_int_equal(first, 5);
	assert_int_equal(n, 1);
	assert_true(rdb_wmap_snap_next(&s, &from, &first, &n));
	assert_int_equal(first, 63);
	assert_int_equal(n, 2);
	assert_false(rdb_wmap_snap_next(&s, &from, &first, &n));
	rdb_wmap_snap_dispose(&s);
	/* a large range over many words, and one past the end: cut at the
	 * disk's end, the partial last block included */
	rdb_wmap_mark(&m, 100 * B + 1, 600 * B);	/* 100..700 */
	rdb_wmap_mark(&m, 990 * B, 100 * B);		/* 990..1000 */
	rdb_wmap_mark(&m, DISK, B);			/* nothing */
	assert_int_equal(rdb_wmap_snapshot(&m, &s), 0);
	assert_int_equal(s.nr_set, 5 + 601 + 11);
	from = 6;
	assert_true(rdb_wmap_snap_next(&s, &from, &first, &n));
	assert_int_equal(first, 63);
	assert_true(rdb_wmap_snap_next(&s, &from, &first, &n));
	assert_int_equal(first, 100);
	assert_int_equal(n, 601);
	assert_true(rdb_wmap_snap_next(&s, &from, &first, &n));
	assert_int_equal(first, 990);
	assert_int_equal(n, 11);
	assert_false(rdb_wmap_snap_next(&s, &from, &first, &n));
	rdb_wmap_snap_dispose(&s);
	/* everything, then reset */
	rdb_wmap_mark(&m, 0, DISK);
	assert_int_equal(count(&m), 1001);
	rdb_wmap_reset(&m);
	assert_int_equal(count(&m), 0);
	rdb_wmap_close(&m);
	rdb_wmap_close(&m);
}

/* Against a brute-force array, random marks. */
static void test_random_marks(void **state)
{
	static bool want[1001];
	struct rdb_wmap m;
	struct rdb_wmap_snap s;
	unsigned seed = 7;
	uint64_t from = 0, first, n, runs = 0;
	char err[200];

	(void)state;
	memset(want, 0, sizeof(want));
	assert_int_equal(rdb_wmap_open(&m, path, DISK, true, err, sizeof(err)), 0);
	for (int i = 0; i < 300; i++) {
		uint64_t off = (uint64_t)rand_r(&seed) % DISK;
		uint64_t len = 1 + (uint64_t)rand_r(&seed) % (rand_r(&seed) % 4 ?
							      3 * B : 80 * B);

		rdb_wmap_mark(&m, off, len);
		if (len > DISK - off)
			len = DISK - off;
		for (uint64_t b = off / B; b <= (off + len - 1) / B; b++)
			want[b] = true;
	}
	assert_int_equal(rdb_wmap_snapshot(&m, &s), 0);
	for (uint64_t b = 0; b < 1001; b++)
		assert_int_equal(rdb_wmap_snap_test(&s, b), want[b]);
	/* the runs cover exactly the set blocks */
	n = 0;
	while (rdb_wmap_snap_next(&s, &from, &first, &runs)) {
		assert_true(first == 0 || !want[first - 1]);
		for (uint64_t b = first; b < first + runs; b++)
			assert_true(want[b]);
		assert_true(first + runs == 1001 || !want[first + runs]);
		n += runs;
	}
	assert_int_equal(n, s.nr_set);
	rdb_wmap_snap_dispose(&s);
	rdb_wmap_close(&m);
}

/* The file outlives its users: reopened, its bits are there; another
 * disk size, or not a map, is refused; missing without create: ENOENT. */
static void test_reopen(void **state)
{
	struct rdb_wmap m, m2;
	char err[200];
	int fd;

	(void)state;
	assert_int_equal(rdb_wmap_open(&m, path, DISK, false, err, sizeof(err)),
			 -ENOENT);
	assert_int_equal(rdb_wmap_open(&m, path, DISK, true, err, sizeof(err)), 0);
	rdb_wmap_mark(&m, 10 * B, 3 * B);
	/* a second mapping of the same file sees them at once */
	assert_int_equal(rdb_wmap_open(&m2, path, DISK, true, err, sizeof(err)), 0);
	assert_int_equal(count(&m2), 3);
	rdb_wmap_mark(&m2, 20 * B, B);
	assert_int_equal(count(&m), 4);
	rdb_wmap_close(&m);
	rdb_wmap_close(&m2);
	assert_int_equal(rdb_wmap_open(&m, path, DISK, true, err, sizeof(err)), 0);
	assert_int_equal(count(&m), 4);
	rdb_wmap_close(&m);
	assert_int_equal(rdb_wmap_open(&m, path, DISK + B, true, err,
				       sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "for a disk of"));
	assert_int_equal(rdb_wmap_open(&m, path, 0, true, err, sizeof(err)),
			 -EINVAL);
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "garbage", 7, 0), 7);
	close(fd);
	assert_int_equal(rdb_wmap_open(&m, path, DISK, true, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "not a written map"));
}

/*
 * Another process marks blocks one by one, in order, while this one
 * snapshots: a snapshot never loses a block an earlier one had, and the
 * last one has all.  Then it marks while this one takes (copy and
 * clear): every block turns up in some take, none is lost.
 */
#define NMARK 1001

static void child_marks(int rounds)
{
	struct rdb_wmap m;
	char err[200];

	if (rdb_wmap_open(&m, path, DISK, false, err, sizeof(err)) < 0)
		_exit(1);
	for (int round = 0; round < rounds; round++)
		for (uint64_t b = 0; b < NMARK; b++) {
			rdb_wmap_mark(&m, b * B + round, 1);
			/* slow enough for this to overlap the other side's
			 * copies */
			for (volatile int i = 0; i < 2000; i++)
				;
		}
	rdb_wmap_close(&m);
	_exit(0);
}

static void test_marks_from_another_process(void **state)
{
	static bool seen[NMARK];
	struct rdb_wmap m;
	struct rdb_wmap_snap s, prev;
	char err[200];
	int status, snaps = 0;
	pid_t pid;

	(void)state;
	assert_int_equal(rdb_wmap_open(&m, path, DISK, true, err, sizeof(err)), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		child_marks(20);
	memset(&prev, 0, sizeof(prev));
	for (;;) {
		bool done = waitpid(pid, &status, WNOHANG) == pid;

		assert_int_equal(rdb_wmap_snapshot(&m, &s), 0);
		for (uint64_t b = 0; prev.words && b < NMARK; b++)
			if (rdb_wmap_snap_test(&prev, b))
				assert_true(rdb_wmap_snap_test(&s, b));
		rdb_wmap_snap_dispose(&prev);
		prev = s;
		snaps++;
		if (done)
			break;
	}
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(prev.nr_set, NMARK);
	rdb_wmap_snap_dispose(&prev);

	/* take while it marks: the union of the takes has every block */
	rdb_wmap_reset(&m);
	memset(seen, 0, sizeof(seen));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		child_marks(1);		/* each block once: none may be lost */
	for (;;) {
		bool done = waitpid(pid, &status, WNOHANG) == pid;

		assert_int_equal(rdb_wmap_take(&m, &s), 0);
		for (uint64_t b = 0; b < NMARK; b++)
			seen[b] |= rdb_wmap_snap_test(&s, b);
		rdb_wmap_snap_dispose(&s);
		if (done)
			break;
	}
	assert_int_equal(WEXITSTATUS(status), 0);
	for (uint64_t b = 0; b < NMARK; b++)
		assert_true(seen[b]);
	assert_int_equal(count(&m), 0);		/* the last take had the rest */
	print_message("wmap: %d snapshots while another process marked\n", snaps);
	rdb_wmap_close(&m);
}

/* Threads marking the same words at once: no mark lost (fetch_or). */
static struct rdb_wmap shared_map;

static void *mark_every_other(void *arg)
{
	uint64_t parity = (uint64_t)(uintptr_t)arg;

	for (uint64_t b = parity; b < 1001; b += 4)
		rdb_wmap_mark(&shared_map, b * B, 1);
	return NULL;
}

static void test_threads(void **state)
{
	pthread_t t[4];
	char err[200];

	(void)state;
	assert_int_equal(rdb_wmap_open(&shared_map, path, DISK, true, err,
				       sizeof(err)), 0);
	for (uintptr_t i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, mark_every_other,
						(void *)i), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(count(&shared_map), 1001);
	rdb_wmap_close(&shared_map);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_marks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_random_marks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_marks_from_another_process,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

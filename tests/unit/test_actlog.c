// SPDX-License-Identifier: GPL-2.0-only
/* The activity log (actlog.h) and the written map (wmap.h): arming,
 * adding before a change, retiring only what is committed and synced,
 * invalidation, full logs, the file read back as the backup reads it;
 * the written map's marks across words and its reopening.
 * RDB-WRAP: fdatasync */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actlog.h"
#include "wmap.h"

#define MIB (1ull << 20)
#define DISK (64 * MIB)

int __real_fdatasync(int fd);
static int syncs;

int __wrap_fdatasync(int fd)
{
	syncs++;
	return __real_fdatasync(fd);
}

static char dir[64], logp[96], imgp[96], mapp[96];
static int img;

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/rdb-actlog-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(logp, sizeof(logp), "%s/disk.al", dir);
	snprintf(imgp, sizeof(imgp), "%s/disk.img", dir);
	snprintf(mapp, sizeof(mapp), "%s/written.map", dir);
	img = open(imgp, O_RDWR | O_CREAT | O_TRUNC, 0600);
	return img >= 0 && ftruncate(img, DISK) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	close(img);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* What another process (the backup's daemon) reads: generation, extents. */
static uint64_t on_disk(uint64_t *ext, uint32_t *n)
{
	struct rdb_actlog_view v;
	uint64_t *e, gen;
	char err[256];

	assert_int_equal(rdb_actlog_read(logp, DISK, &v, err, sizeof(err)), 0);
	assert_int_equal(rdb_actlog_view_extents(&v, &e, n), 0);
	memcpy(ext, e, *n * sizeof(*e));
	free(e);
	gen = v.generation;
	rdb_actlog_view_dispose(&v);
	return gen;
}

static void test_arm_add_retire(void **state)
{
	struct rdb_actlog al;
	uint64_t ext[64], gen;
	uint32_t n;
	char err[256];
	int s0;

	unlink(logp);
	assert_int_equal(rdb_actlog_open(&al, logp, DISK, 8, err, sizeof(err)), 0);
	assert_true(on_disk(ext, &n) == 0);		/* a new log: no base */

	/* the protection's first change arms it: image synced, then the log */
	s0 = syncs;
	assert_int_equal(rdb_actlog_before_change(&al, img, 7, 3 * MIB + 10,
						  2 * MIB, 0, 0), 0);
	assert_int_equal(syncs - s0, 2);
	gen = on_disk(ext, &n);
	assert_true(gen == 7);
	assert_int_equal(n, 3);				/* extents 3, 4, 5 */
	assert_true(ext[0] == 3 && ext[2] == 5);
	rdb_actlog_after_change(&al, 3 * MIB + 10, 2 * MIB, 1, 100);

	/* a change within logged extents costs nothing; a new one a sync */
	s0 = syncs;
	assert_int_equal(rdb_actlog_before_change(&al, img, 7, 4 * MIB, 4096, 1, 0), 0);
	assert_int_equal(syncs - s0, 0);
	rdb_actlog_after_change(&al, 4 * MIB, 4096, 2, 200);
	assert_int_equal(rdb_actlog_before_change(&al, img, 7, 9 * MIB, 4096, 2, 0), 0);
	assert_int_equal(syncs - s0, 1);
	rdb_actlog_after_change(&al, 9 * MIB, 4096, 3, UINT64_MAX);	/* not in the ring */
	assert_int_equal(al.active, 4);

	/* nothing committed: nothing retires */
	assert_false(rdb_actlog_retirable(&al, 0));
	rdb_actlog_retire(&al, 3, 99);
	assert_int_equal(al.active, 4);
	/* committed up to 150: extents 3 and 5 (last change at 100), not 4
	 * (200) nor 9 (never in the ring) */
	assert_true(rdb_actlog_retirable(&al, 150));
	/* a sync that began before their last change does not retire them */
	rdb_actlog_retire(&al, 0, 150);
	assert_int_equal(al.active, 4);
	rdb_actlog_retire(&al, 3, 150);
	assert_int_equal(al.active, 2);
	assert_true(on_disk(ext, &n) == 7);
	assert_int_equal(n, 2);
	assert_true(ext[0] == 4 && ext[1] == 9);
	rdb_actlog_retire(&al, 3, UINT64_MAX - 1);
	assert_int_equal(al.active, 1);			/* 9 never goes */

	/* reopened (a restart after a power pull): kept as it is */
	rdb_actlog_close(&al);
	assert_int_equal(rdb_actlog_open(&al, logp, DISK, 8, err, sizeof(err)), 0);
	assert_true(al.generation == 7);
	assert_int_equal(al.active, 1);
	assert_false(rdb_actlog_retirable(&al, UINT64_MAX - 1));

	/* a change while not recording: invalid before it happens, and a
	 * later change of the same protection does not arm it again */
	assert_int_equal(rdb_actlog_invalidate(&al), 0);
	assert_true(on_disk(ext, &n) == 0);
	assert_int_equal(rdb_actlog_before_change(&al, img, 7, 0, 4096, 5, 0), 0);
	assert_true(on_disk(ext, &n) == 0);
	/* a new protection arms it afresh */
	assert_int_equal(rdb_actlog_before_change(&al, img, 8, 0, 4096, 5, 0), 0);
	assert_true(on_disk(ext, &n) == 8);
	assert_int_equal(n, 1);
	rdb_actlog_close(&al);

	/* another disk's log is no base; reopened for this one it is reset */
	{
		struct rdb_actlog_view v;

		assert_true(rdb_actlog_read(logp, DISK * 2, &v, err, sizeof(err)) < 0);
		assert_int_equal(rdb_actlog_open(&al, logp, DISK * 2, 8, err,
						 sizeof(err)), 0);
		assert_true(al.generation == 0);
		rdb_actlog_close(&al);
	}
}

static void test_full_log(void **state)
{
	struct rdb_actlog al;
	uint64_t ext[64];
	uint32_t n;
	char err[256];

	unlink(logp);
	assert_int_equal(rdb_actlog_open(&al, logp, DISK, 2, err, sizeof(err)), 0);
	assert_int_equal(rdb_actlog_before_change(&al, img, 3, 0, 4096, 0, 0), 0);
	rdb_actlog_after_change(&al, 0, 4096, 1, 10);
	assert_int_equal(rdb_actlog_before_change(&al, img, 3, MIB, 4096, 1, 0), 0);
	rdb_actlog_after_change(&al, MIB, 4096, 2, 20);
	/* full; extent 0 is committed (10 <= 15): the image is synced now
	 * and it makes room */
	assert_int_equal(rdb_actlog_before_change(&al, img, 3, 2 * MIB, 4096, 2, 15), 0);
	assert_int_equal(al.full_stalls, 1);
	assert_true(on_disk(ext, &n) == 3);
	assert_int_equal(n, 2);
	assert_true(ext[0] == 1 && ext[1] == 2);
	rdb_actlog_after_change(&al, 2 * MIB, 4096, 3, 30);
	/* full and nothing committed: given up for the protection */
	assert_int_equal(rdb_actlog_before_change(&al, img, 3, 3 * MIB, 4096, 3, 15), 0);
	assert_true(on_disk(ext, &n) == 0);
	assert_int_equal(al.invalidations, 1);
	assert_int_equal(rdb_actlog_before_change(&al, img, 3, 4 * MIB, 4096, 4, 15), 0);
	assert_true(on_disk(ext, &n) == 0);
	rdb_actlog_close(&al);
}

static void test_damaged_header_is_no_base(void **state)
{
	struct rdb_actlog al;
	struct rdb_actlog_view v;
	char err[256];
	int fd;

	unlink(logp);
	assert_int_equal(rdb_actlog_open(&al, logp, DISK, 8, err, sizeof(err)), 0);
	assert_int_equal(rdb_actlog_before_change(&al, img, 5, 0, 4096, 0, 0), 0);
	rdb_actlog_close(&al);
	fd = open(logp, O_RDWR);
	assert_int_equal(pwrite(fd, "X", 1, 17), 1);	/* in the generation */
	close(fd);
	assert_true(rdb_actlog_read(logp, DISK, &v, err, sizeof(err)) < 0);
	assert_true(strstr(err, "no activity log") != NULL);
}

static void test_written_map(void **state)
{
	struct rdb_wmap m;
	uint64_t bits[(DISK / 4096 + 63) / 64], n;
	char err[256];

	assert_int_equal(rdb_wmap_create_file(mapp, DISK, err, sizeof(err)), 0);
	assert_int_equal(rdb_wmap_open(&m, mapp, DISK, err, sizeof(err)), 0);
	rdb_wmap_mark(&m, 0, 1);			/* block 0 */
	rdb_wmap_mark(&m, 4095, 2);			/* blocks 0, 1 */
	rdb_wmap_mark(&m, 63 * 4096, 3 * 4096);		/* 63..65: two words */
	rdb_wmap_mark(&m, 1000 * 4096, 200 * 4096);	/* 1000..1199 */
	rdb_wmap_mark(&m, DISK - 1, 100);		/* the last, clipped */
	rdb_wmap_mark(&m, DISK, 4096);			/* beyond: nothing */
	rdb_wmap_close(&m);
	/* a second server on the same map marks on (nothing cleared) */
	assert_int_equal(rdb_wmap_open(&m, mapp, DISK, err, sizeof(err)), 0);
	rdb_wmap_mark(&m, 5 * 4096, 4096);
	rdb_wmap_close(&m);
	memset(bits, 0, sizeof(bits));
	assert_int_equal(rdb_wmap_read_file(mapp, DISK, bits, &n, err,
					    sizeof(err)), 0);
	assert_true(n == 2 + 3 + 200 + 1 + 1);
	assert_true(bits[0] == (3ull | 1ull << 5 | 1ull << 63));
	assert_true(bits[1] == 3ull);
	assert_true(bits[DISK / 4096 / 64 - 1] == 1ull << 63);
	/* another disk's size is refused */
	assert_int_equal(rdb_wmap_open(&m, mapp, DISK / 2, err, sizeof(err)), -EINVAL);
	assert_int_equal(rdb_wmap_create_file(mapp, 1000, err, sizeof(err)), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arm_add_retire),
		cmocka_unit_test(test_full_log),
		cmocka_unit_test(test_damaged_header_is_no_base),
		cmocka_unit_test(test_written_map),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

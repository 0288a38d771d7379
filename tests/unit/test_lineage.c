// SPDX-License-Identifier: GPL-2.0-only
/* Lineage records: every role round-trips, a base survives, a missing
 * record is -ENOENT, a damaged one -EBADMSG and never half-read, and a
 * save replaces the record whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lineage.h"

static char dir[64];

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/rdb-lineage-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_missing_is_enoent(void **state)
{
	struct rdb_lineage l;
	char err[256] = "";

	assert_int_equal(rdb_lineage_load(dir, "vm1", &l, err, sizeof(err)),
			 -ENOENT);
	assert_int_equal(l.role, RDB_LINEAGE_NONE);
	assert_int_equal(rdb_lineage_remove(dir, "vm1"), 0);
}

static void test_roles_round_trip(void **state)
{
	struct rdb_lineage in = { 0 }, out;
	char err[256] = "";

	in.role = RDB_LINEAGE_PRIMARY;
	in.generation = 0xfedcba9876543210ull;
	snprintf(in.disk, sizeof(in.disk), "/srv/vm1.img");
	snprintf(in.actlog, sizeof(in.actlog), "/var/lib/remusdb/vm1/disk.al");
	in.log_gen = 0x187654321ull;
	snprintf(in.peer, sizeof(in.peer), "10.0.0.2:7788");
	assert_int_equal(rdb_lineage_save(dir, "vm1", &in, err, sizeof(err)), 0);
	assert_int_equal(rdb_lineage_load(dir, "vm1", &out, err, sizeof(err)), 0);
	assert_int_equal(out.role, RDB_LINEAGE_PRIMARY);
	assert_true(out.generation == in.generation);
	assert_string_equal(out.disk, in.disk);
	assert_string_equal(out.actlog, in.actlog);
	assert_true(out.log_gen == in.log_gen);
	assert_string_equal(out.peer, in.peer);
	assert_false(out.has_base);

	/* a survivor's: restored, then primary with that as its base */
	memset(&in, 0, sizeof(in));
	in.role = RDB_LINEAGE_RESTORED;
	in.generation = 1;
	in.epoch = 123456789012ull;
	snprintf(in.disk, sizeof(in.disk), "/b/vm1/disk.img");
	snprintf(in.wmap, sizeof(in.wmap), "/b/vm1/written.map");
	assert_int_equal(rdb_lineage_save(dir, "vm1", &in, err, sizeof(err)), 0);
	assert_int_equal(rdb_lineage_load(dir, "vm1", &out, err, sizeof(err)), 0);
	assert_int_equal(out.role, RDB_LINEAGE_RESTORED);
	assert_true(out.epoch == in.epoch);
	assert_string_equal(out.wmap, in.wmap);

	in.role = RDB_LINEAGE_PRIMARY;
	in.generation = 2;
	snprintf(in.actlog, sizeof(in.actlog), "/b/vm1/disk.al");
	in.has_base = true;
	in.base_generation = 1;
	in.base_epoch = 123456789012ull;
	snprintf(in.base_wmap, sizeof(in.base_wmap), "%s", in.wmap);
	in.wmap[0] = 0;
	assert_int_equal(rdb_lineage_save(dir, "vm1", &in, err, sizeof(err)), 0);
	assert_int_equal(rdb_lineage_load(dir, "vm1", &out, err, sizeof(err)), 0);
	assert_int_equal(out.role, RDB_LINEAGE_PRIMARY);
	assert_true(out.has_base);
	assert_true(out.base_generation == 1);
	assert_true(out.base_epoch == 123456789012ull);
	assert_string_equal(out.base_wmap, "/b/vm1/written.map");

	in.role = RDB_LINEAGE_REPLICA;
	in.has_base = false;
	assert_int_equal(rdb_lineage_save(dir, "vm1", &in, err, sizeof(err)), 0);
	assert_int_equal(rdb_lineage_load(dir, "vm1", &out, err, sizeof(err)), 0);
	assert_int_equal(out.role, RDB_LINEAGE_REPLICA);
	assert_false(out.has_base);

	assert_int_equal(rdb_lineage_remove(dir, "vm1"), 0);
	assert_int_equal(rdb_lineage_load(dir, "vm1", &out, err, sizeof(err)),
			 -ENOENT);
}

static void put(const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/vm2", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/vm2/lineage.json", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_damaged_refused_whole(void **state)
{
	static const char *const bad[] = {
		"",
		"{",
		"[]",
		"{\"role\":\"primary\",\"generation\":\"12\"}",	/* no disk */
		"{\"role\":\"primary\",\"generation\":\"12\",\"disk\":\"/d\"}",	/* no log */
		"{\"role\":\"primary\",\"generation\":\"12\",\"disk\":\"/d\","
		"\"activity_log\":\"/a\"}",			/* no log generation */
		"{\"role\":\"boss\",\"generation\":\"12\",\"disk\":\"/d\"}",
		"{\"role\":\"replica\",\"generation\":\"zz\",\"disk\":\"/d\"}",
		"{\"role\":\"replica\",\"generation\":\"\",\"disk\":\"/d\"}",
		"{\"role\":\"restored\",\"generation\":\"1\",\"disk\":\"/d\","
		"\"written_map\":\"/w\"}",			/* no epoch */
		"{\"role\":\"restored\",\"generation\":\"1\",\"epoch\":-1,"
		"\"disk\":\"/d\",\"written_map\":\"/w\"}",
		"{\"role\":\"replica\",\"generation\":\"1\",\"disk\":\"/d\","
		"\"base\":{\"generation\":\"1\"}}",		/* a half base */
	};
	struct rdb_lineage l;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		put(bad[i]);
		err[0] = 0;
		assert_int_equal(rdb_lineage_load(dir, "vm2", &l, err, sizeof(err)),
				 -EBADMSG);
		assert_int_equal(l.role, RDB_LINEAGE_NONE);
		assert_true(err[0] != 0);
	}
	put("{\"role\":\"replica\",\"generation\":\"ff\",\"disk\":\"/d\"}");
	assert_int_equal(rdb_lineage_load(dir, "vm2", &l, err, sizeof(err)), 0);
	assert_true(l.generation == 0xff);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_missing_is_enoent),
		cmocka_unit_test(test_roles_round_trip),
		cmocka_unit_test(test_damaged_refused_whole),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

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
	snprintf(in.d[0].disk, sizeof(in.d[0].disk), "/srv/vm1.img");
	snprintf(in.d[0].actlog, sizeof(in.d[0].actlog), "/var/lib/remusdb/vm1/disk.al");
	in.d[0].log_gen = 0x187654321ull;
	snprintf(in.peer, sizeof(in.peer), "10.0.0.2:7788");
	assert_int_equal(rdb_lineage_save(dir, "vm1", &in, err, sizeof(err)), 0);
	assert_int_equal(rdb_lineage_load(dir, "vm1", &out, err, sizeof(err)), 0);
	assert_int_equal(out.role, RDB_LINEAGE_PRIMARY);
	assert_true(out.generation == in.generation);
	assert_string_equal(out.d[0].disk, in.d[0].disk);
	assert_string_equal(out.d[0].actlog, in.d[0].actlog);
	assert_true(out.d[0].log_gen == in.d[0].log_gen);
	assert_string_equal(out.peer, in.peer);
	assert_false(out.has_base);

	/* a survivor's: restored, then primary with that as its base */
	memset(&in, 0, sizeof(in));
	in.role = RDB_LINEAGE_RESTORED;
	in.generation = 1;
	in.epoch = 123456789012ull;
	snprintf(in.d[0].disk, sizeof(in.d[0].disk), "/b/vm1/disk.img");
	snprintf(in.d[0].wmap, sizeof(in.d[0].wmap), "/b/vm1/written.map");
	assert_int_equal(rdb_lineage_save(dir, "vm1", &in, err, sizeof(err)), 0);
	assert_int_equal(rdb_lineage_load(dir, "vm1", &out, err, sizeof(err)), 0);
	assert_int_equal(out.role, RDB_LINEAGE_RESTORED);
	assert_true(out.epoch == in.epoch);
	assert_string_equal(out.d[0].wmap, in.d[0].wmap);

	in.role = RDB_LINEAGE_PRIMARY;
	in.generation = 2;
	snprintf(in.d[0].actlog, sizeof(in.d[0].actlog), "/b/vm1/disk.al");
	in.has_base = true;
	in.base_generation = 1;
	in.base_epoch = 123456789012ull;
	snprintf(in.d[0].base_wmap, sizeof(in.d[0].base_wmap), "%s", in.d[0].wmap);
	in.d[0].wmap[0] = 0;
	assert_int_equal(rdb_lineage_save(dir, "vm1", &in, err, sizeof(err)), 0);
	assert_int_equal(rdb_lineage_load(dir, "vm1", &out, err, sizeof(err)), 0);
	assert_int_equal(out.role, RDB_LINEAGE_PRIMARY);
	assert_true(out.has_base);
	assert_true(out.base_generation == 1);
	assert_true(out.base_epoch == 123456789012ull);
	assert_string_equal(out.d[0].base_wmap, "/b/vm1/written.map");

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

static void put(const char *text);

/* Every disk has its own entry; disk 0's stays at the top level, where a
 * record of one disk always had it (such a record loads as one disk). */
static void test_several_disks(void **state)
{
	struct rdb_lineage in = { 0 }, out;
	char err[256] = "", path[128], *text;
	FILE *f;
	long n;

	in.role = RDB_LINEAGE_PRIMARY;
	in.generation = 7;
	in.ndisks = 3;
	in.has_base = true;
	in.base_generation = 6;
	in.base_epoch = 99;
	for (unsigned k = 0; k < 3; k++) {
		snprintf(in.d[k].disk, sizeof(in.d[k].disk), "/srv/vm1-%u.img", k);
		snprintf(in.d[k].actlog, sizeof(in.d[k].actlog), "/s/vm1/disk%u.al", k);
		in.d[k].log_gen = 0x100 + k;
		snprintf(in.d[k].base_wmap, sizeof(in.d[k].base_wmap),
			 "/s/vm1/written%u.map", k);
	}
	assert_int_equal(rdb_lineage_save(dir, "vm1", &in, err, sizeof(err)), 0);
	assert_int_equal(rdb_lineage_load(dir, "vm1", &out, err, sizeof(err)), 0);
	assert_int_equal(out.ndisks, 3);
	assert_true(out.has_base && out.base_generation == 6 && out.base_epoch == 99);
	for (unsigned k = 0; k < 3; k++) {
		assert_string_equal(out.d[k].disk, in.d[k].disk);
		assert_string_equal(out.d[k].actlog, in.d[k].actlog);
		assert_true(out.d[k].log_gen == in.d[k].log_gen);
		assert_string_equal(out.d[k].base_wmap, in.d[k].base_wmap);
	}
	/* disk 0 where a one-disk record has it */
	snprintf(path, sizeof(path), "%s/vm1/lineage.json", dir);
	f = fopen(path, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)n + 1);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	assert_non_null(strstr(text, "\"disk\": \"/srv/vm1-0.img\""));
	assert_non_null(strstr(text, "\"more_disks\""));
	free(text);

	/* restored: each disk's written map */
	memset(&in, 0, sizeof(in));
	in.role = RDB_LINEAGE_RESTORED;
	in.generation = 8;
	in.epoch = 5;
	in.ndisks = 2;
	for (unsigned k = 0; k < 2; k++) {
		snprintf(in.d[k].disk, sizeof(in.d[k].disk), "/b/disk%u.img", k);
		snprintf(in.d[k].wmap, sizeof(in.d[k].wmap), "/b/written%u.map", k);
	}
	assert_int_equal(rdb_lineage_save(dir, "vm1", &in, err, sizeof(err)), 0);
	assert_int_equal(rdb_lineage_load(dir, "vm1", &out, err, sizeof(err)), 0);
	assert_int_equal(out.ndisks, 2);
	assert_string_equal(out.d[1].wmap, "/b/written1.map");
	assert_false(out.has_base);

	/* a record of one disk, as an earlier remusdbd wrote it */
	put("{\"role\":\"restored\",\"generation\":\"1\",\"epoch\":4,"
	    "\"disk\":\"/d\",\"written_map\":\"/w\"}");
	assert_int_equal(rdb_lineage_load(dir, "vm2", &out, err, sizeof(err)), 0);
	assert_int_equal(out.ndisks, 1);
	assert_string_equal(out.d[0].wmap, "/w");
	assert_int_equal(rdb_lineage_remove(dir, "vm1"), 0);
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
		"{\"role\":\"replica\",\"generation\":\"1\",\"disk\":\"/d\","
		"\"more_disks\":{}}",				/* not a list */
		"{\"role\":\"replica\",\"generation\":\"1\",\"disk\":\"/d\","
		"\"more_disks\":[{}]}",				/* a disk without a path */
		"{\"role\":\"primary\",\"generation\":\"1\",\"disk\":\"/d\","
		"\"activity_log\":\"/a\",\"activity_log_generation\":\"2\","
		"\"more_disks\":[{\"disk\":\"/e\"}]}",		/* disk 1 without a log */
		"{\"role\":\"replica\",\"generation\":\"1\",\"disk\":\"/d\","
		"\"more_disks\":[{\"disk\":\"/1\"},{\"disk\":\"/2\"},{\"disk\":\"/3\"},"
		"{\"disk\":\"/4\"},{\"disk\":\"/5\"},{\"disk\":\"/6\"},{\"disk\":\"/7\"},"
		"{\"disk\":\"/8\"}]}",				/* 9 disks */
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
		cmocka_unit_test(test_several_disks),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

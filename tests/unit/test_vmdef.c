// SPDX-License-Identifier: GPL-2.0-only
/* VM definitions (vmdef.h): a save round-trips, a later save replaces the
 * earlier one whole, remove forgets it, they come back in name order, and
 * a damaged or foreign file is reported, skipped and left untouched. */
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

#include "vmdef.h"

static char dir[64];

struct seen {
	unsigned n, bad;
	char names[8][65];
	enum rdb_vmdef_intent intent[8];
	char disk[8][64];
	long long restored_epoch[8];	/* -1: no restored object */
	char restored_disk1[8][64];
	char bad_path[4][600], bad_why[4][300];
};

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/rdb-vmdef-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void on_each(void *opaque, const struct rdb_vmdef *def)
{
	struct seen *s = opaque;
	const char *disk = json_string_value(json_object_get(def->config, "disk"));

	assert_true(s->n < 8);
	snprintf(s->names[s->n], sizeof(s->names[0]), "%s", def->name);
	s->intent[s->n] = def->intent;
	snprintf(s->disk[s->n], sizeof(s->disk[0]), "%s", disk ? disk : "");
	s->restored_epoch[s->n] = def->restored ? json_integer_value(
		json_object_get(def->restored, "epoch")) : -1;
	if (def->restored) {
		const char *d1 = json_string_value(json_array_get(
			json_object_get(def->restored, "disks"), 1));

		snprintf(s->restored_disk1[s->n], sizeof(s->restored_disk1[0]),
			 "%s", d1 ? d1 : "");
	}
	assert_true(def->saved[0] != 0);
	s->n++;
}

static void on_bad(void *opaque, const char *path, const char *why)
{
	struct seen *s = opaque;

	assert_true(s->bad < 4);
	snprintf(s->bad_path[s->bad], sizeof(s->bad_path[0]), "%s", path);
	snprintf(s->bad_why[s->bad], sizeof(s->bad_why[0]), "%s", why);
	s->bad++;
}

static void save(const char *name, enum rdb_vmdef_intent intent,
		 const char *disk)
{
	json_t *cfg = json_pack("{s:s, s:s}", "name", name, "disk", disk);
	char err[300] = "";

	assert_int_equal(rdb_vmdef_save(dir, name, intent, cfg, err,
					sizeof(err)), 0);
	json_decref(cfg);
}

static void put_file(const char *vm, const char *text)
{
	char p[300];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, vm);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/%s/definition.json", dir, vm);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_none(void **state)
{
	struct seen s = { 0 };
	char missing[100];

	assert_int_equal(rdb_vmdef_each(dir, on_each, on_bad, &s), 0);
	assert_int_equal(s.n + s.bad, 0);
	snprintf(missing, sizeof(missing), "%s/nothing-here", dir);
	assert_int_equal(rdb_vmdef_each(missing, on_each, on_bad, &s), 0);
	assert_int_equal(rdb_vmdef_remove(dir, "vm1"), 0);
}

static void test_round_trip_order_replace_remove(void **state)
{
	struct seen s = { 0 };
	struct stat st;
	char p[300];

	save("vm2", RDB_VMDEF_PROTECTED, "/srv/vm2.img");
	save("vm1", RDB_VMDEF_ATTACHED, "/srv/old.img");
	save("vm1", RDB_VMDEF_PROTECTED, "/srv/vm1.img");	/* replaces */
	/* a VM directory without a definition (a backup's RAM images) */
	snprintf(p, sizeof(p), "%s/vm3", dir);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(rdb_vmdef_each(dir, on_each, on_bad, &s), 2);
	assert_int_equal(s.bad, 0);
	assert_string_equal(s.names[0], "vm1");
	assert_int_equal(s.intent[0], RDB_VMDEF_PROTECTED);
	assert_string_equal(s.disk[0], "/srv/vm1.img");
	assert_string_equal(s.names[1], "vm2");
	/* no temporary file left beside it, and it is not world-readable */
	snprintf(p, sizeof(p), "%s/vm1/definition.json.tmp", dir);
	assert_int_equal(stat(p, &st), -1);
	snprintf(p, sizeof(p), "%s/vm1/definition.json", dir);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 077, 0);

	assert_int_equal(rdb_vmdef_remove(dir, "vm1"), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(rdb_vmdef_each(dir, on_each, on_bad, &s), 1);
	assert_string_equal(s.names[0], "vm2");
}

static void test_bad_files_reported_and_kept(void **state)
{
	static const char *const texts[] = {
		"{ \"format\": 1, \"name\": \"vmA\", \"intent\": \"protected\", \"config\": ",
		"{ \"format\": 2, \"name\": \"vmB\", \"intent\": \"protected\", \"config\": {} }",
		"{ \"format\": 1, \"name\": \"other\", \"intent\": \"protected\", \"config\": {} }",
		"{ \"format\": 1, \"name\": \"vmD\", \"intent\": \"running\", \"config\": {} }",
	};
	static const char *const vms[] = { "vmA", "vmB", "vmC", "vmD" };
	struct seen s = { 0 };
	char p[300], buf[200];
	FILE *f;

	for (unsigned i = 0; i < 4; i++)
		put_file(vms[i], texts[i]);
	save("vmE", RDB_VMDEF_ATTACHED, "/srv/e.img");
	assert_int_equal(rdb_vmdef_each(dir, on_each, on_bad, &s), 1);
	assert_string_equal(s.names[0], "vmE");
	assert_int_equal(s.bad, 4);
	assert_non_null(strstr(s.bad_path[0], "vmA/definition.json"));
	assert_non_null(strstr(s.bad_why[0], "not JSON"));
	assert_non_null(strstr(s.bad_why[1], "format"));
	assert_non_null(strstr(s.bad_why[2], "name"));
	assert_non_null(strstr(s.bad_why[3], "intent"));
	/* left as they were */
	snprintf(p, sizeof(p), "%s/vmB/definition.json", dir);
	f = fopen(p, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, texts[1]);
}

/* A VM a failover restored here: its definition carries what the restore
 * made, and only a restored one does; a later protect replaces it. */
static void test_restored(void **state)
{
	json_t *cfg = json_pack("{s:s, s:s}", "name", "vm1", "disk", "/srv/p.img");
	json_t *r = json_pack("{s:I, s:I, s:[s, s], s:[{s:i, s:I}]}",
			      "generation", (json_int_t)0x1234, "epoch",
			      (json_int_t)77, "disks", "/st/vm1/disk.img",
			      "/st/vm1/disk1.img", "servers", "pid", 4242,
			      "start", (json_int_t)99);
	struct seen s = { 0 };
	char err[300] = "";

	/* restored wants what the restore made; the others want none */
	assert_int_equal(rdb_vmdef_save(dir, "vm1", RDB_VMDEF_RESTORED, cfg, err,
					sizeof(err)), -EINVAL);
	assert_int_equal(rdb_vmdef_save_restored(dir, "vm1", cfg, NULL, err,
						 sizeof(err)), -EINVAL);
	assert_int_equal(rdb_vmdef_save_restored(dir, "vm1", cfg, r, err,
						 sizeof(err)), 0);
	save("vm2", RDB_VMDEF_ATTACHED, "/srv/vm2.img");
	assert_int_equal(rdb_vmdef_each(dir, on_each, on_bad, &s), 2);
	assert_int_equal(s.bad, 0);
	assert_int_equal(s.intent[0], RDB_VMDEF_RESTORED);
	assert_string_equal(rdb_vmdef_intent_name(s.intent[0]), "restored");
	assert_int_equal(s.restored_epoch[0], 77);
	assert_string_equal(s.restored_disk1[0], "/st/vm1/disk1.img");
	assert_string_equal(s.disk[0], "/srv/p.img");
	assert_int_equal(s.restored_epoch[1], -1);
	/* the operator's protect NAME of it: protected, nothing restored */
	save("vm1", RDB_VMDEF_PROTECTED, "/st/vm1/disk.img");
	memset(&s, 0, sizeof(s));
	assert_int_equal(rdb_vmdef_each(dir, on_each, on_bad, &s), 2);
	assert_int_equal(s.intent[0], RDB_VMDEF_PROTECTED);
	assert_int_equal(s.restored_epoch[0], -1);
	/* files that mix them up are reported, not read */
	put_file("vm3", "{ \"format\": 1, \"name\": \"vm3\", \"intent\": "
		 "\"restored\", \"config\": {} }");
	put_file("vm4", "{ \"format\": 1, \"name\": \"vm4\", \"intent\": "
		 "\"attached\", \"config\": {}, \"restored\": {} }");
	memset(&s, 0, sizeof(s));
	assert_int_equal(rdb_vmdef_each(dir, on_each, on_bad, &s), 2);
	assert_int_equal(s.bad, 2);
	assert_non_null(strstr(s.bad_why[0], "restored"));
	assert_non_null(strstr(s.bad_why[1], "restored"));
	json_decref(cfg);
	json_decref(r);
}

static void test_bad_names_refused(void **state)
{
	json_t *cfg = json_object();
	char err[300] = "";

	assert_int_equal(rdb_vmdef_save(dir, "../x", RDB_VMDEF_ATTACHED, cfg,
					err, sizeof(err)), -EINVAL);
	assert_int_equal(rdb_vmdef_save(dir, "", RDB_VMDEF_ATTACHED, cfg,
					err, sizeof(err)), -EINVAL);
	assert_int_equal(rdb_vmdef_save(dir, "vm1", RDB_VMDEF_ATTACHED, NULL,
					err, sizeof(err)), -EINVAL);
	assert_int_equal(rdb_vmdef_remove(dir, "a/b"), -EINVAL);
	json_decref(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_none, setup, teardown),
		cmocka_unit_test_setup_teardown(test_round_trip_order_replace_remove,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_files_reported_and_kept,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_restored, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_names_refused, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

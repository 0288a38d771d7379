// SPDX-License-Identifier: GPL-2.0-only
/* A VM's state changes across restarts (history.h): appended in order,
 * the last N read back oldest first, rotated at its bound with the one
 * before kept, a damaged line skipped and counted, names that are no
 * VM's refused. */
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

#include "history.h"

static char dir[64];

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/rdb-test-history-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void add(const char *from, const char *to, const char *reason)
{
	char err[300] = "";

	if (rdb_history_append(dir, "vm1", from, to, "primary", 1.5, reason,
			       err, sizeof(err)) < 0)
		fail_msg("append: %s", err);
}

static const char *field(json_t *list, size_t i, const char *key)
{
	return json_string_value(json_object_get(json_array_get(list, i), key));
}

static void test_appended_and_read_back(void **state)
{
	json_t *list;
	size_t bad = 9;
	char err[300];

	assert_int_equal(rdb_history_read(dir, "vm1", 0, &list, &bad, err,
					  sizeof(err)), -ENOENT);
	add("unprotected", "protecting", "operator protect");
	add("protecting", "protected", "backup committed the initial state");
	add("protected", "deciding", "replication link: \"quoted\"\nnewline");
	assert_int_equal(rdb_history_read(dir, "vm1", 0, &list, &bad, err,
					  sizeof(err)), 0);
	assert_int_equal(bad, 0);
	assert_int_equal(json_array_size(list), 3);
	assert_string_equal(field(list, 0, "to"), "protecting");
	assert_string_equal(field(list, 2, "reason"),
			    "replication link: \"quoted\"\nnewline");
	assert_string_equal(field(list, 2, "role"), "primary");
	assert_non_null(strstr(field(list, 0, "time"), "Z"));
	assert_true(json_real_value(json_object_get(json_array_get(list, 1),
						    "after_s")) == 1.5);
	json_decref(list);
	/* the last 2, oldest first */
	assert_int_equal(rdb_history_read(dir, "vm1", 2, &list, &bad, err,
					  sizeof(err)), 0);
	assert_int_equal(json_array_size(list), 2);
	assert_string_equal(field(list, 0, "to"), "protected");
	assert_string_equal(field(list, 1, "to"), "deciding");
	json_decref(list);
}

static void test_damaged_line_skipped(void **state)
{
	char path[200], err[300];
	json_t *list;
	size_t bad = 0;
	FILE *f;

	add("a", "b", "one");
	snprintf(path, sizeof(path), "%s/vm1/history.jsonl", dir);
	f = fopen(path, "a");
	assert_non_null(f);
	fputs("{\"torn\": \n", f);	/* a line a power loss cut */
	fclose(f);
	add("b", "c", "two");
	assert_int_equal(rdb_history_read(dir, "vm1", 0, &list, &bad, err,
					  sizeof(err)), 0);
	assert_int_equal(bad, 1);
	assert_int_equal(json_array_size(list), 2);
	assert_string_equal(field(list, 1, "reason"), "two");
	json_decref(list);
}

static void test_rotated_at_its_bound(void **state)
{
	char reason[200], path[200], err[300];
	struct stat sb;
	json_t *list;
	size_t bad, n = 0, kept;

	memset(reason, 'r', sizeof(reason) - 1);
	reason[sizeof(reason) - 1] = 0;
	snprintf(path, sizeof(path), "%s/vm1/history.jsonl.1", dir);
	/* past the bound twice: two rotations, the oldest file dropped */
	while (n < 3 * RDB_HISTORY_MAX_BYTES / 250) {
		add("x", "y", reason);
		n++;
	}
	assert_int_equal(stat(path, &sb), 0);
	assert_true(sb.st_size >= RDB_HISTORY_MAX_BYTES);
	assert_int_equal(rdb_history_read(dir, "vm1", 0, &list, &bad, err,
					  sizeof(err)), 0);
	kept = json_array_size(list);
	assert_true(kept < n);
	assert_true(kept > RDB_HISTORY_MAX_BYTES / 300);
	assert_int_equal(bad, 0);
	json_decref(list);
}

static void test_names_that_are_no_vms(void **state)
{
	const char *const bad_names[] = { "", ".", "..", "../etc", "a/b" };
	char err[300];
	json_t *list;
	size_t bad;

	for (size_t i = 0; i < sizeof(bad_names) / sizeof(*bad_names); i++) {
		assert_int_equal(rdb_history_read(dir, bad_names[i], 0, &list,
						  &bad, err, sizeof(err)), -EINVAL);
		assert_int_equal(rdb_history_append(dir, bad_names[i], "a", "b",
						    "primary", 0, "", err,
						    sizeof(err)), -EINVAL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_appended_and_read_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_damaged_line_skipped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rotated_at_its_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_names_that_are_no_vms, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

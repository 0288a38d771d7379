// SPDX-License-Identifier: GPL-2.0-only
/* The metrics file's publisher: text handed over is written whole by its
 * thread (the file appears by rename, never half), the last text handed
 * over is what the file holds after stop, and a write that fails is
 * reported, not lost track of. */
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
#include <time.h>
#include <unistd.h>

#include "filepub.h"

static char dir[] = "/tmp/rdb-filepub-XXXXXX";

static int setup(void **state)
{
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[64];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static char *dupstr(const char *s)
{
	char *d = strdup(s);

	assert_non_null(d);
	return d;
}

static char *slurp(const char *path)
{
	static char buf[256];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* the result once the thread has written, within 5 s */
static int wait_result(struct rdb_filepub *fp)
{
	struct timespec ms = { 0, 1000000 };
	int rc;

	for (int i = 0; i < 5000 && (rc = rdb_filepub_result(fp)) == 1; i++)
		nanosleep(&ms, NULL);
	return rc;
}

static void test_written_by_rename(void **state)
{
	char path[128], tmp[140];
	struct rdb_filepub *fp;
	struct stat st;

	snprintf(path, sizeof(path), "%s/metrics.prom", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	assert_int_equal(rdb_filepub_start(&fp, path), 0);
	assert_int_equal(rdb_filepub_result(fp), 1);	/* nothing yet */
	rdb_filepub_submit(fp, dupstr("a 1\n"), 4);
	assert_int_equal(wait_result(fp), 0);
	assert_string_equal(slurp(path), "a 1\n");
	assert_int_equal(stat(tmp, &st), -1);		/* renamed away */
	rdb_filepub_stop(fp);
	rdb_filepub_stop(NULL);
}

static void test_last_text_wins(void **state)
{
	char path[128], text[32];
	struct rdb_filepub *fp;

	snprintf(path, sizeof(path), "%s/last.prom", dir);
	assert_int_equal(rdb_filepub_start(&fp, path), 0);
	for (int i = 0; i < 200; i++) {
		int n = snprintf(text, sizeof(text), "v %d\n", i);

		rdb_filepub_submit(fp, dupstr(text), (size_t)n);
	}
	rdb_filepub_stop(fp);	/* what waits is written before it stops */
	assert_string_equal(slurp(path), "v 199\n");
}

static void test_failure_reported(void **state)
{
	char path[128];
	struct rdb_filepub *fp;

	snprintf(path, sizeof(path), "%s/no/such/dir/m.prom", dir);
	assert_int_equal(rdb_filepub_start(&fp, path), 0);
	rdb_filepub_submit(fp, dupstr("x 1\n"), 4);
	assert_int_equal(wait_result(fp), -ENOENT);
	rdb_filepub_stop(fp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_written_by_rename),
		cmocka_unit_test(test_last_text_wins),
		cmocka_unit_test(test_failure_reported),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

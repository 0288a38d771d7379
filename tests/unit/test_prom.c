// SPDX-License-Identifier: GPL-2.0-only
/* The metrics registry: samples added VM by VM come out grouped by family
 * under one HELP and TYPE each, labels escaped, histograms cumulative,
 * errors latched with nothing written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "prom.h"

/* The registry printed into a string (freed by the caller); NULL and
 * *rc_out set when the write failed. */
static char *render(const struct rdb_prom *p, int *rc_out)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	*rc_out = rdb_prom_write(p, f);
	fclose(f);
	return buf;
}

static void test_grouped_across_vms(void **state)
{
	struct rdb_prom p;
	int rc;
	char *out;

	rdb_prom_init(&p);
	rdb_prom_set_base(&p, "vm", "a", "role", "primary", NULL);
	rdb_prom_add(&p, "x_total", RDB_PROM_COUNTER, "Xs.", 1, NULL);
	rdb_prom_add(&p, "y", RDB_PROM_GAUGE, "Y now.", 0.25, "k", "v", NULL);
	rdb_prom_set_base(&p, "vm", "b", "role", "backup", NULL);
	rdb_prom_add(&p, "x_total", RDB_PROM_COUNTER, "Xs.", 7, NULL);
	rdb_prom_add(&p, "y", RDB_PROM_GAUGE, "Y now.", 3, "k", "w", NULL);
	rdb_prom_set_base(&p, NULL);
	rdb_prom_add(&p, "z", RDB_PROM_GAUGE, "Z.", 1, NULL);
	out = render(&p, &rc);
	assert_int_equal(rc, 0);
	assert_string_equal(out,
		"# HELP x_total Xs.\n"
		"# TYPE x_total counter\n"
		"x_total{vm=\"a\",role=\"primary\"} 1\n"
		"x_total{vm=\"b\",role=\"backup\"} 7\n"
		"# HELP y Y now.\n"
		"# TYPE y gauge\n"
		"y{vm=\"a\",role=\"primary\",k=\"v\"} 0.25\n"
		"y{vm=\"b\",role=\"backup\",k=\"w\"} 3\n"
		"# HELP z Z.\n"
		"# TYPE z gauge\n"
		"z 1\n");
	free(out);
	rdb_prom_dispose(&p);
}

static void test_label_values_escaped(void **state)
{
	struct rdb_prom p;
	char small[4];
	int rc;
	char *out;

	assert_int_equal(rdb_prom_escape(small, sizeof(small), "a\"b\\c"), 7);
	assert_string_equal(small, "a\\\"");
	rdb_prom_init(&p);
	rdb_prom_set_base(&p, "vm", "q\"\\\n", NULL);
	rdb_prom_add(&p, "g", RDB_PROM_GAUGE, "Back\\slash\nnewline.", 1,
		     "reason", "say \"hi\"", NULL);
	out = render(&p, &rc);
	assert_int_equal(rc, 0);
	assert_string_equal(out,
		"# HELP g Back\\\\slash\\nnewline.\n"
		"# TYPE g gauge\n"
		"g{vm=\"q\\\"\\\\\\n\",reason=\"say \\\"hi\\\"\"} 1\n");
	free(out);
	rdb_prom_dispose(&p);
}

static void test_histogram_cumulative(void **state)
{
	struct rdb_prom_hist h = { 0 };
	struct rdb_prom p;
	int rc;
	char *out, *line;

	rdb_prom_hist_observe(&h, 500000);		/* 0.5 ms: le 0.001 */
	rdb_prom_hist_observe(&h, 1000000);		/* exactly 1 ms: le 0.001 */
	rdb_prom_hist_observe(&h, 4000000);		/* le 0.005 */
	rdb_prom_hist_observe(&h, 60000000000ull);	/* 60 s: +Inf only */
	rdb_prom_init(&p);
	rdb_prom_set_base(&p, "vm", "a", NULL);
	rdb_prom_add_hist(&p, "pause_seconds", "Pauses.", &h, NULL);
	out = render(&p, &rc);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, "# TYPE pause_seconds histogram\n"));
	assert_non_null(strstr(out, "pause_seconds_bucket{vm=\"a\",le=\"0.001\"} 2\n"));
	assert_non_null(strstr(out, "pause_seconds_bucket{vm=\"a\",le=\"0.002\"} 2\n"));
	assert_non_null(strstr(out, "pause_seconds_bucket{vm=\"a\",le=\"0.005\"} 3\n"));
	assert_non_null(strstr(out, "pause_seconds_bucket{vm=\"a\",le=\"10\"} 3\n"));
	assert_non_null(strstr(out, "pause_seconds_bucket{vm=\"a\",le=\"+Inf\"} 4\n"));
	assert_non_null(strstr(out, "pause_seconds_sum{vm=\"a\"} 60.0055\n"));
	assert_non_null(strstr(out, "pause_seconds_count{vm=\"a\"} 4\n"));
	/* buckets never decrease down the listing */
	{
		double last = -1;

		for (line = strstr(out, "_bucket"); line; line = strstr(line + 1, "_bucket")) {
			double v = strtod(strchr(line, ' ') + 1, NULL);

			assert_true(v >= last);
			last = v;
		}
	}
	free(out);
	rdb_prom_dispose(&p);
}

static void test_family_redefined_is_refused(void **state)
{
	struct rdb_prom p;
	int rc;
	char *out;

	rdb_prom_init(&p);
	rdb_prom_add(&p, "x_total", RDB_PROM_COUNTER, "Xs.", 1, NULL);
	rdb_prom_add(&p, "x_total", RDB_PROM_GAUGE, "Xs.", 2, NULL);
	rdb_prom_add(&p, "later", RDB_PROM_GAUGE, "After the error.", 2, NULL);
	out = render(&p, &rc);
	assert_int_equal(rc, -EINVAL);
	assert_true(!out || !out[0]);
	free(out);
	rdb_prom_dispose(&p);

	/* a histogram is added only through rdb_prom_add_hist */
	rdb_prom_init(&p);
	rdb_prom_add(&p, "h", RDB_PROM_HISTOGRAM, "H.", 1, NULL);
	out = render(&p, &rc);
	assert_int_equal(rc, -EINVAL);
	free(out);
	rdb_prom_dispose(&p);
}

static void test_base_too_long_is_refused(void **state)
{
	char name[300];
	struct rdb_prom p;
	int rc;
	char *out;

	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	rdb_prom_init(&p);
	rdb_prom_set_base(&p, "vm", name, NULL);
	rdb_prom_add(&p, "g", RDB_PROM_GAUGE, "G.", 1, NULL);
	out = render(&p, &rc);
	assert_int_equal(rc, -ENAMETOOLONG);
	free(out);
	rdb_prom_dispose(&p);
}

static void test_many_families_and_samples(void **state)
{
	struct rdb_prom p;
	char name[32], vm[16];
	int rc;
	char *out;

	rdb_prom_init(&p);
	for (int v = 0; v < 20; v++) {
		snprintf(vm, sizeof(vm), "vm%d", v);
		rdb_prom_set_base(&p, "vm", vm, "role", "primary", NULL);
		for (int i = 0; i < 70; i++) {
			snprintf(name, sizeof(name), "m%d", i);
			rdb_prom_add(&p, name, RDB_PROM_GAUGE, "M.", v, NULL);
		}
	}
	out = render(&p, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(p.nfam, 70);
	/* one TYPE line per family, 20 samples under each */
	{
		size_t types = 0;

		for (char *c = strstr(out, "# TYPE"); c; c = strstr(c + 1, "# TYPE"))
			types++;
		assert_int_equal(types, 70);
	}
	assert_non_null(strstr(out, "# TYPE m69 gauge\nm69{vm=\"vm0\",role=\"primary\"} 0\n"
				    "m69{vm=\"vm1\",role=\"primary\"} 1\n"));
	free(out);
	rdb_prom_dispose(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grouped_across_vms),
		cmocka_unit_test(test_label_values_escaped),
		cmocka_unit_test(test_histogram_cumulative),
		cmocka_unit_test(test_family_redefined_is_refused),
		cmocka_unit_test(test_base_too_long_is_refused),
		cmocka_unit_test(test_many_families_and_samples),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

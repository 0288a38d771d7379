// SPDX-License-Identifier: GPL-2.0-only
/* CPU lists (`cpus`, `guest_cpus`): the kernel's notation both ways, bad
 * lists refused, and a process's CPUs read back from /proc. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cpulist.h"

static void round_trip(const char *in, const char *canonical, int count)
{
	cpu_set_t s;
	char out[128];

	assert_int_equal(rdb_cpulist_parse(in, &s), 0);
	assert_int_equal(CPU_COUNT(&s), count);
	assert_string_equal(rdb_cpulist_format(&s, out, sizeof(out)), canonical);
}

static void test_parse_and_format(void **state)
{
	round_trip("", "", 0);
	round_trip("0", "0", 1);
	round_trip("0-1", "0-1", 2);
	round_trip("3,0-1", "0-1,3", 3);
	round_trip("1,2,3,7", "1-3,7", 4);
	round_trip("5-5", "5", 1);
	round_trip("0-1023", "0-1023", 1024);
}

static void test_refused(void **state)
{
	const char *bad[] = { ",", "0,", ",0", "a", "1-", "-1", "2-1", "0 1",
			      "0;1", "1024", "99999999999999999999", "0-1-2",
			      " 0", "0 " };
	cpu_set_t s;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (rdb_cpulist_parse(bad[i], &s) != -EINVAL)
			fail_msg("accepted \"%s\"", bad[i]);
	}
}

static void test_truncated_format_stays_a_string(void **state)
{
	cpu_set_t s;
	char out[6];

	assert_int_equal(rdb_cpulist_parse("0,2,4,6,8,10", &s), 0);
	rdb_cpulist_format(&s, out, sizeof(out));
	assert_true(strlen(out) < sizeof(out));
	assert_string_equal(out, "0,2,4");
}

static void test_of_process_is_our_affinity(void **state)
{
	cpu_set_t mine, got;

	assert_int_equal(sched_getaffinity(0, sizeof(mine), &mine), 0);
	assert_int_equal(rdb_cpulist_of_process(getpid(), &got), 0);
	assert_true(CPU_EQUAL(&mine, &got));
	assert_int_equal(rdb_cpulist_of_process(0x3fffffff, &got), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_and_format),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_truncated_format_stays_a_string),
		cmocka_unit_test(test_of_process_is_our_affinity),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

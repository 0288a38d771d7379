// SPDX-License-Identifier: GPL-2.0-only
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "qemu/restore.h"
#include "watchdog.h"

static const uint8_t CONFIG[] = { 0x07, 0, 0, 0, 2, 'p', 'c' };
static const uint8_t DEV[] = { 0x04, 0, 0, 0, 3, 1, 'x', 0, 0, 0, 0, 0, 0, 0, 1, 0x00 };

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void test_stream_layout(void **state)
{
	static uint8_t rom[2 * 4096];
	struct rdb_restore_block blocks[2] = {
		{ "pc.ram", 1ULL << 30, true, NULL },	/* 1 GiB: never in the stream */
		{ "pc.bios", sizeof(rom), false, rom },
	};
	struct rdb_restore_spec spec = { CONFIG, sizeof(CONFIG), blocks, 2, DEV, sizeof(DEV) };
	uint8_t *s;
	size_t n, at;

	memset(rom + 4096, 0x99, 4096);	/* page 0 zero, page 1 data */
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), 0);
	/* The shared 1 GiB block costs nothing: the stream stays small. */
	assert_true(n < 3 * 4096 + 512);
	assert_int_equal(be32(s), 0x5145564d);
	assert_int_equal(be32(s + 4), 3);
	assert_memory_equal(s + 8, CONFIG, sizeof(CONFIG));
	at = 8 + sizeof(CONFIG);
	/* the capability subsection the incoming QEMU validates */
	assert_int_equal(s[at], 0x05);
	assert_int_equal(s[at + 1], strlen("configuration/capabilities"));
	assert_memory_equal(s + at + 2, "configuration/capabilities", s[at + 1]);
	assert_non_null(memmem(s, n, "x-ignore-shared", 15));
	/* both blocks are listed, only pc.bios has pages */
	assert_non_null(memmem(s, n, "pc.ram", 6));
	assert_non_null(memmem(s, n, "pc.bios", 7));
	/* the device state, then a vmdesc the loader can read */
	assert_non_null(memmem(s, n, DEV, sizeof(DEV)));
	assert_memory_equal(s + n - strlen("{\"page_size\": 4096, \"devices\": []}") - 5,
			    "\x06", 1);
	free(s);
}

static void test_invalid_specs(void **state)
{
	static uint8_t rom[4096];
	struct rdb_restore_block ok = { "pc.bios", 4096, false, rom };
	struct rdb_restore_block nodata = { "pc.bios", 4096, false, NULL };
	struct rdb_restore_spec spec = { CONFIG, sizeof(CONFIG), &ok, 1, DEV, sizeof(DEV) };
	uint8_t *s;
	size_t n;

	spec.nblocks = 0;
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EINVAL);
	spec.nblocks = 1;
	spec.devstate_len = sizeof(DEV) - 1;	/* no EOF at the end */
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EINVAL);
	spec.devstate_len = sizeof(DEV);
	spec.blocks = &nodata;
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EINVAL);
	spec.blocks = &ok;
	spec.config = DEV;	/* not a configuration section */
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EINVAL);
}

static void test_restore_argv(void **state)
{
	char *common[] = { "-m", "256" };
	char **argv;
	int i;

	assert_int_equal(rdb_restore_argv("qemu", common, 2, "/s/pc.ram.img", 256 << 20,
					  "/r/q", "/r/n", "/s/console", &argv), 0);
	assert_string_equal(argv[0], "qemu");
	assert_string_equal(argv[2], "256");
	for (i = 0; argv[i]; i++)
		;
	assert_string_equal(argv[i - 2], "-incoming");
	assert_string_equal(argv[i - 1], "defer");
	assert_string_equal(argv[4], "memory-backend-file,id=pc.ram,size=268435456,mem-path=/s/pc.ram.img,share=on");
	rdb_restore_argv_free(argv);
}

static void test_watchdog_trips_only_when_armed_and_late(void **state)
{
	struct rdb_wd_slot s;
	uint64_t ms = RDB_NS_PER_MS;

	memset(&s, 0, sizeof(s));
	atomic_store(&s.deadline_ns, 500 * ms);
	assert_false(rdb_watchdog_should_trip(&s, 0, 10000 * ms));	/* not armed */
	atomic_store(&s.armed, 1);
	assert_false(rdb_watchdog_should_trip(&s, 1000 * ms, 1400 * ms));
	assert_false(rdb_watchdog_should_trip(&s, 1000 * ms, 1500 * ms));
	assert_true(rdb_watchdog_should_trip(&s, 1000 * ms, 1501 * ms));
	/* a beat newer than "now" (read race) is not late */
	assert_false(rdb_watchdog_should_trip(&s, 2000 * ms, 1999 * ms));
	atomic_store(&s.tripped_at_ns, 1);
	assert_false(rdb_watchdog_should_trip(&s, 0, 10000 * ms));	/* once */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_layout),
		cmocka_unit_test(test_invalid_specs),
		cmocka_unit_test(test_restore_argv),
		cmocka_unit_test(test_watchdog_trips_only_when_armed_and_late),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

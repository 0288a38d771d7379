// SPDX-License-Identifier: GPL-2.0-only
/* XOR+RLE page deltas: round trips, worst cases, size against the
 * byte-loop baseline, and the decoder refusing corrupt input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xorrle.h"

#define PG 4096

static uint8_t oldp[PG], newp[PG], work[PG], enc[2 * PG + 64], enc2[2 * PG + 64];

static void round_trip(size_t expect_max)
{
	long n = rdb_xorrle_encode(oldp, newp, PG, enc, sizeof(enc));
	long b = rdb_xorrle_encode_byteloop(oldp, newp, PG, enc2, sizeof(enc2));

	assert_true(n >= 0);
	assert_true(b >= 0);
	if (expect_max)
		assert_true((size_t)n <= expect_max);
	/* never larger than the byte loop of the same grammar */
	assert_true(n <= b);
	assert_int_equal(rdb_xorrle_check(PG, enc, (size_t)n), 0);
	memcpy(work, oldp, PG);
	assert_int_equal(rdb_xorrle_decode(work, PG, enc, (size_t)n), 0);
	assert_memory_equal(work, newp, PG);
	/* the baseline's output is in the same grammar */
	memcpy(work, oldp, PG);
	assert_int_equal(rdb_xorrle_decode(work, PG, enc2, (size_t)b), 0);
	assert_memory_equal(work, newp, PG);
}

static void fill_random(uint8_t *p, size_t n, unsigned *seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rand_r(seed);
}

static void test_identical_is_empty(void **state)
{
	(void)state;
	memset(oldp, 0x33, PG);
	memcpy(newp, oldp, PG);
	assert_int_equal(rdb_xorrle_encode(oldp, newp, PG, enc, sizeof(enc)), 0);
	round_trip(0);
}

static void test_all_zero_pages(void **state)
{
	(void)state;
	memset(oldp, 0, PG);
	memset(newp, 0, PG);
	round_trip(0);
	newp[PG - 1] = 1;	/* last byte only */
	round_trip(4 + 1);
	newp[PG - 1] = 0;
	newp[0] = 9;		/* first byte only */
	round_trip(3);
}

static void test_small_changes(void **state)
{
	unsigned seed = 1;

	(void)state;
	fill_random(oldp, PG, &seed);
	memcpy(newp, oldp, PG);
	/* a page LSN (8 bytes at 0) and a tuple counter (4 bytes at 3000) */
	for (int i = 0; i < 8; i++)
		newp[i] ^= (uint8_t)(0x11 + i);
	newp[3000] ^= 0x01;
	newp[3002] ^= 0x80;
	round_trip(32);
}

static void test_every_byte_differs(void **state)
{
	(void)state;
	memset(oldp, 0x00, PG);
	memset(newp, 0xff, PG);
	round_trip(PG + 4);
	/* with dlen < PG the encoder gives up early */
	assert_int_equal(rdb_xorrle_encode(oldp, newp, PG, enc, PG - 1), -ENOSPC);
	assert_int_equal(rdb_xorrle_encode_byteloop(oldp, newp, PG, enc, PG - 1), -ENOSPC);
}

static void test_alternating_bytes(void **state)
{
	(void)state;
	memset(oldp, 0, PG);
	for (int i = 0; i < PG; i++)
		newp[i] = i % 2 ? 0xaa : 0;
	/* one literal (single zero gaps are kept inside it): ~PG + 4 */
	round_trip(PG + 4);
	for (int i = 0; i < PG; i++)
		newp[i] = i % 4 == 0 ? 0x55 : 0;	/* gaps of 3: split */
	round_trip(PG);
}

static void test_random_model(void **state)
{
	unsigned seed = 42;

	(void)state;
	for (int round = 0; round < 3000; round++) {
		int changes = rand_r(&seed) % 40;

		fill_random(oldp, PG, &seed);
		if (round % 3 == 0)
			memset(oldp, 0, PG);
		memcpy(newp, oldp, PG);
		for (int c = 0; c < changes; c++) {
			size_t at = (size_t)rand_r(&seed) % PG;
			size_t n = 1 + (size_t)rand_r(&seed) % (round % 5 == 0 ? 300 : 12);

			for (size_t k = 0; k < n && at + k < PG; k++)
				newp[at + k] = (uint8_t)rand_r(&seed);
		}
		round_trip(0);
	}
}

static void test_decoder_rejects_corrupt(void **state)
{
	uint8_t bad[16];
	unsigned seed = 7;

	(void)state;
	/* run past the page */
	bad[0] = 0x80; bad[1] = 0x20;	/* zrun 4096 */
	bad[2] = 1; bad[3] = 0xff;
	assert_int_equal(rdb_xorrle_check(PG, bad, 4), -EINVAL);
	/* literal longer than the input */
	bad[0] = 0; bad[1] = 5; bad[2] = 1;
	assert_int_equal(rdb_xorrle_check(PG, bad, 3), -EINVAL);
	/* empty literal, and a zero gap between pairs: not canonical */
	bad[0] = 3; bad[1] = 0;
	assert_int_equal(rdb_xorrle_check(PG, bad, 2), -EINVAL);
	bad[0] = 0; bad[1] = 1; bad[2] = 9; bad[3] = 0; bad[4] = 1; bad[5] = 9;
	assert_int_equal(rdb_xorrle_check(PG, bad, 6), -EINVAL);
	/* truncated and overlong varints */
	bad[0] = 0x80;
	assert_int_equal(rdb_xorrle_check(PG, bad, 1), -EINVAL);
	memset(bad, 0x80, 6);
	assert_int_equal(rdb_xorrle_check(PG, bad, 6), -EINVAL);
	/* a lone zrun with nothing after it */
	bad[0] = 5;
	assert_int_equal(rdb_xorrle_check(PG, bad, 1), -EINVAL);
	/* random garbage never crashes, and check == decode's verdict */
	for (int i = 0; i < 20000; i++) {
		size_t n = (size_t)rand_r(&seed) % 40;

		fill_random(enc, n, &seed);
		memset(work, 0, PG);
		assert_int_equal(rdb_xorrle_check(PG, enc, n),
				 rdb_xorrle_decode(work, PG, enc, n));
	}
	/* a valid delta for a smaller page than claimed */
	memset(oldp, 0, PG);
	memset(newp, 0, PG);
	newp[PG - 1] = 1;
	{
		long n = rdb_xorrle_encode(oldp, newp, PG, enc, sizeof(enc));

		assert_true(n > 0);
		assert_int_equal(rdb_xorrle_check(PG / 2, enc, (size_t)n), -EINVAL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_identical_is_empty),
		cmocka_unit_test(test_all_zero_pages),
		cmocka_unit_test(test_small_changes),
		cmocka_unit_test(test_every_byte_differs),
		cmocka_unit_test(test_alternating_bytes),
		cmocka_unit_test(test_random_model),
		cmocka_unit_test(test_decoder_rejects_corrupt),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

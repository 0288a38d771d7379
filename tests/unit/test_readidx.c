// SPDX-License-Identifier: GPL-2.0-only
/* The read index of disk read tracking: insert and lookup, invalidation
 * by overlapping writes (partial, unaligned, wide), eviction order, and a
 * model check against a brute-force oracle over random read/write
 * sequences. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "readidx.h"

#define B RDB_READIDX_BLOCK
/* bytes for n entries (create's sizing: 56 bytes an entry) */
#define FOR_ENTRIES(n) ((uint64_t)(n) * 56)
#define ANY UINT64_MAX

static void test_insert_lookup(void **state)
{
	struct rdb_readidx *ix;
	uint64_t blk, h;

	(void)state;
	assert_int_equal(rdb_readidx_create(&ix, FOR_ENTRIES(64)), 0);
	assert_false(rdb_readidx_lookup(ix, 0xabc, ANY, &blk, NULL));
	rdb_readidx_insert(ix, 7, 0xabc, 0);
	rdb_readidx_insert(ix, 9, 0xdef, 0);
	assert_true(rdb_readidx_lookup(ix, 0xabc, ANY, &blk, NULL));
	assert_int_equal(blk, 7);
	assert_true(rdb_readidx_lookup(ix, 0xdef, ANY, &blk, NULL));
	assert_int_equal(blk, 9);
	/* the same block read again with other contents: only the new */
	rdb_readidx_insert(ix, 7, 0x123, 0);
	assert_false(rdb_readidx_lookup(ix, 0xabc, ANY, &blk, NULL));
	assert_true(rdb_readidx_get(ix, 7, &h));
	assert_int_equal(h, 0x123);
	/* two blocks with the same contents: the most recent is found, the
	 * other once the recent one is written */
	rdb_readidx_insert(ix, 20, 0x555, 0);
	rdb_readidx_insert(ix, 21, 0x555, 0);
	assert_true(rdb_readidx_lookup(ix, 0x555, ANY, &blk, NULL));
	assert_int_equal(blk, 21);
	rdb_readidx_invalidate(ix, 0, 21 * B, B);
	assert_true(rdb_readidx_lookup(ix, 0x555, ANY, &blk, NULL));
	assert_int_equal(blk, 20);
	rdb_readidx_clear(ix);
	assert_false(rdb_readidx_lookup(ix, 0x555, ANY, &blk, NULL));
	assert_false(rdb_readidx_get(ix, 9, NULL));
	rdb_readidx_destroy(ix);
}

/* A read tagged with a later epoch is not seen by an earlier epoch's
 * lookup (the encoder of epoch N runs while the guest is in N+1). */
static void test_epoch_tags(void **state)
{
	struct rdb_readidx *ix;
	uint64_t blk;

	(void)state;
	assert_int_equal(rdb_readidx_create(&ix, FOR_ENTRIES(64)), 0);
	rdb_readidx_insert(ix, 4, 0x77, 10);
	assert_false(rdb_readidx_lookup(ix, 0x77, 9, &blk, NULL));
	assert_true(rdb_readidx_lookup(ix, 0x77, 10, &blk, NULL));
	/* same contents in an older block and a newer one: each epoch sees
	 * the one it may */
	rdb_readidx_insert(ix, 5, 0x88, 3);
	rdb_readidx_insert(ix, 6, 0x88, 12);
	assert_true(rdb_readidx_lookup(ix, 0x88, 11, &blk, NULL));
	assert_int_equal(blk, 5);
	assert_true(rdb_readidx_lookup(ix, 0x88, 12, &blk, NULL));
	assert_int_equal(blk, 6);
	assert_false(rdb_readidx_lookup(ix, 0x88, 2, &blk, NULL));
	rdb_readidx_destroy(ix);
}

static void test_invalidate_overlaps(void **state)
{
	struct rdb_readidx *ix;
	struct rdb_readidx_stats st;

	(void)state;
	assert_int_equal(rdb_readidx_create(&ix, FOR_ENTRIES(64)), 0);
	for (uint64_t b = 0; b < 10; b++)
		rdb_readidx_insert(ix, b, 0x1000 + b, 0);
	/* 10 bytes inside block 3, unaligned: block 3 only */
	rdb_readidx_invalidate(ix, 0, 3 * B + 100, 10);
	assert_false(rdb_readidx_get(ix, 3, NULL));
	assert_true(rdb_readidx_get(ix, 2, NULL));
	assert_true(rdb_readidx_get(ix, 4, NULL));
	/* 2 bytes across the 4|5 boundary: both */
	rdb_readidx_invalidate(ix, 0, 5 * B - 1, 2);
	assert_false(rdb_readidx_get(ix, 4, NULL));
	assert_false(rdb_readidx_get(ix, 5, NULL));
	assert_true(rdb_readidx_get(ix, 6, NULL));
	/* one 512-byte sector at the end of block 6 */
	rdb_readidx_invalidate(ix, 0, 7 * B - 512, 512);
	assert_false(rdb_readidx_get(ix, 6, NULL));
	assert_true(rdb_readidx_get(ix, 7, NULL));
	/* an empty range touches nothing */
	rdb_readidx_invalidate(ix, 0, 7 * B, 0);
	assert_true(rdb_readidx_get(ix, 7, NULL));
	/* a trim far wider than the index: walks the entries */
	rdb_readidx_invalidate(ix, 0, 8 * B - 1, 1ull << 40);
	assert_false(rdb_readidx_get(ix, 7, NULL));
	assert_false(rdb_readidx_get(ix, 8, NULL));
	assert_false(rdb_readidx_get(ix, 9, NULL));
	assert_true(rdb_readidx_get(ix, 0, NULL));
	assert_true(rdb_readidx_get(ix, 2, NULL));
	rdb_readidx_stats(ix, &st);
	assert_int_equal(st.entries, 3);
	assert_int_equal(st.invalidated, 7);
	assert_int_equal(st.inserts, 10);
	/* another disk's blocks of the same numbers: a change of one disk
	 * leaves the other's alone, a narrow range and a wide one */
	for (uint64_t b = 0; b < 10; b++)
		rdb_readidx_insert(ix, rdb_readidx_key(1, b), 0x2000 + b, 0);
	rdb_readidx_invalidate(ix, 0, 2 * B, B);
	assert_false(rdb_readidx_get(ix, 2, NULL));
	assert_true(rdb_readidx_get(ix, rdb_readidx_key(1, 2), NULL));
	rdb_readidx_invalidate(ix, 1, 3 * B, B);
	assert_false(rdb_readidx_get(ix, rdb_readidx_key(1, 3), NULL));
	assert_true(rdb_readidx_get(ix, rdb_readidx_key(1, 4), NULL));
	rdb_readidx_invalidate(ix, 0, 0, 1ull << 40);
	assert_false(rdb_readidx_get(ix, 0, NULL));
	assert_true(rdb_readidx_get(ix, rdb_readidx_key(1, 0), NULL));
	assert_true(rdb_readidx_get(ix, rdb_readidx_key(1, 9), NULL));
	rdb_readidx_invalidate(ix, 1, 0, 1ull << 40);
	rdb_readidx_stats(ix, &st);
	assert_int_equal(st.entries, 0);
	rdb_readidx_destroy(ix);
}

static void test_eviction(void **state)
{
	struct rdb_readidx *ix;
	struct rdb_readidx_stats st;
	uint64_t blk;

	(void)state;
	assert_int_equal(rdb_readidx_create(&ix, 10), -EINVAL);
	assert_int_equal(rdb_readidx_create(&ix, FOR_ENTRIES(16)), 0);
	rdb_readidx_stats(ix, &st);
	assert_int_equal(st.capacity, 16);
	assert_true(st.mem_bytes <= FOR_ENTRIES(16));
	for (uint64_t b = 0; b < 16; b++)
		rdb_readidx_insert(ix, b, 0x100 + b, 0);
	/* a hit makes block 0 the most recent: block 1 goes first */
	assert_true(rdb_readidx_lookup(ix, 0x100, ANY, &blk, NULL));
	rdb_readidx_insert(ix, 100, 0x900, 0);
	assert_false(rdb_readidx_get(ix, 1, NULL));
	assert_true(rdb_readidx_get(ix, 0, NULL));
	rdb_readidx_insert(ix, 101, 0x901, 0);
	assert_false(rdb_readidx_get(ix, 2, NULL));
	assert_false(rdb_readidx_lookup(ix, 0x101, ANY, &blk, NULL));
	rdb_readidx_stats(ix, &st);
	assert_int_equal(st.entries, 16);
	assert_int_equal(st.evicted, 2);
	rdb_readidx_destroy(ix);
}

/*
 * The oracle: each block's contents (an id standing for its hash) and
 * whether the last thing that happened to it was a read.  A lookup may
 * only name a block whose current contents are the ones looked up and
 * whose last event was a read; with room for every block it must find
 * one whenever the oracle has one.
 */
#define NBLK 48

static void model_run(unsigned seed, uint64_t cap_entries)
{
	struct rdb_readidx *ix;
	uint64_t content[NBLK], readepoch[NBLK], next_id = 1, epoch = 1;
	bool readlast[NBLK];
	bool complete = cap_entries >= NBLK;

	assert_int_equal(rdb_readidx_create(&ix, FOR_ENTRIES(cap_entries)), 0);
	for (int b = 0; b < NBLK; b++) {
		content[b] = next_id++;
		readlast[b] = false;
	}
	for (int step = 0; step < 20000; step++) {
		int op = rand_r(&seed) % 10;

		if (op < 4) {			/* a read of whole blocks */
			int b = rand_r(&seed) % NBLK, n = 1 + rand_r(&seed) % 4;

			for (int k = b; k < b + n && k < NBLK; k++) {
				rdb_readidx_insert(ix, (uint64_t)k, content[k], epoch);
				readlast[k] = true;
				readepoch[k] = epoch;
			}
			if (rand_r(&seed) % 8 == 0)
				epoch++;	/* a checkpoint */
		} else if (op < 7) {		/* a write, any alignment */
			uint64_t off = (uint64_t)rand_r(&seed) % (NBLK * B);
			uint64_t len = 1 + (uint64_t)rand_r(&seed) % (3 * B);

			if (off + len > NBLK * B)
				len = NBLK * B - off;
			for (uint64_t k = off / B; k <= (off + len - 1) / B; k++) {
				/* sometimes contents another block has */
				content[k] = rand_r(&seed) % 4 == 0 ?
					content[rand_r(&seed) % NBLK] : next_id++;
				readlast[k] = false;
			}
			rdb_readidx_invalidate(ix, 0, off, len);
		} else {			/* a dirty page's lookup, for an
						 * epoch being encoded while
						 * the guest may be ahead */
			uint64_t h = content[rand_r(&seed) % NBLK], blk;
			uint64_t e = epoch - (uint64_t)(rand_r(&seed) % 2);
			bool want = false, got = rdb_readidx_lookup(ix, h, e, &blk, NULL);

			for (int k = 0; k < NBLK; k++)
				want |= readlast[k] && content[k] == h &&
					readepoch[k] <= e;
			if (got) {
				assert_true(blk < NBLK);
				assert_true(readlast[blk]);
				assert_true(content[blk] == h);
				assert_true(readepoch[blk] <= e);
			}
			if (complete)
				assert_true(got == want);
		}
		/* and every entry the index holds is a true one */
		if (step % 997 == 0) {
			for (int k = 0; k < NBLK; k++) {
				uint64_t h;

				if (rdb_readidx_get(ix, (uint64_t)k, &h)) {
					assert_true(readlast[k]);
					assert_true(h == content[k]);
				} else if (complete) {
					assert_false(readlast[k]);
				}
			}
		}
	}
	rdb_readidx_destroy(ix);
}

static void test_model(void **state)
{
	(void)state;
	for (unsigned seed = 1; seed <= 6; seed++) {
		model_run(seed, 64);	/* room for all: sound and complete */
		model_run(seed, 16);	/* evicting: sound */
	}
}

static void test_hash(void **state)
{
	uint8_t a[B], b[B];

	(void)state;
	memset(a, 7, sizeof(a));
	memcpy(b, a, sizeof(b));
	assert_true(rdb_readidx_hash(a, 1) == rdb_readidx_hash(b, 1));
	assert_true(rdb_readidx_hash(a, 1) != rdb_readidx_hash(a, 2));
	b[B - 1] ^= 1;
	assert_true(rdb_readidx_hash(a, 1) != rdb_readidx_hash(b, 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_insert_lookup),
		cmocka_unit_test(test_epoch_tags),
		cmocka_unit_test(test_invalidate_overlaps),
		cmocka_unit_test(test_eviction),
		cmocka_unit_test(test_model),
		cmocka_unit_test(test_hash),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: GPL-2.0-only
/* The page cache: LRU eviction order, hits and misses, drop, a model check
 * against a plain list over random operations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "pagecache.h"

static void test_eviction_order(void **state)
{
	struct rdb_pagecache pc;
	uint32_t blk;
	uint64_t off;

	(void)state;
	assert_int_equal(rdb_pagecache_init(&pc, 3), 0);
	memset(rdb_pagecache_put(&pc, 0, 0), 'a', RDB_PAGE_SIZE);
	memset(rdb_pagecache_put(&pc, 0, 4096), 'b', RDB_PAGE_SIZE);
	memset(rdb_pagecache_put(&pc, 1, 0), 'c', RDB_PAGE_SIZE);
	assert_int_equal(pc.n, 3);
	assert_true(rdb_pagecache_lru(&pc, &blk, &off));
	assert_int_equal(blk, 0);
	assert_int_equal(off, 0);
	/* a hit makes (0,0) the most recent: (0,4096) is next out */
	assert_int_equal(rdb_pagecache_get(&pc, 0, 0)[0], 'a');
	memset(rdb_pagecache_put(&pc, 2, 8192), 'd', RDB_PAGE_SIZE);
	assert_int_equal(pc.evictions, 1);
	assert_null(rdb_pagecache_get(&pc, 0, 4096));
	assert_int_equal(rdb_pagecache_get(&pc, 1, 0)[0], 'c');
	assert_int_equal(rdb_pagecache_get(&pc, 2, 8192)[0], 'd');
	assert_int_equal(rdb_pagecache_get(&pc, 0, 0)[4095], 'a');
	assert_int_equal(pc.hits, 4);
	assert_int_equal(pc.misses, 1);
	/* same key, different block: distinct */
	assert_null(rdb_pagecache_get(&pc, 3, 0));
	/* drop frees a slot without evicting */
	rdb_pagecache_drop(&pc, 1, 0);
	assert_int_equal(pc.n, 2);
	assert_null(rdb_pagecache_get(&pc, 1, 0));
	rdb_pagecache_put(&pc, 5, 0);
	assert_int_equal(pc.evictions, 1);
	rdb_pagecache_dispose(&pc);
}

static void test_zero_capacity(void **state)
{
	struct rdb_pagecache pc;

	(void)state;
	assert_int_equal(rdb_pagecache_init(&pc, 0), 0);
	assert_null(rdb_pagecache_put(&pc, 0, 0));
	assert_null(rdb_pagecache_get(&pc, 0, 0));
	rdb_pagecache_drop(&pc, 0, 0);
	rdb_pagecache_dispose(&pc);
	rdb_pagecache_dispose(&pc);
}

/* Model: an array ordered most recent first. */
static void test_model(void **state)
{
	enum { CAP = 37, KEYS = 120 };
	struct rdb_pagecache pc;
	uint64_t model[CAP];
	int n = 0;
	unsigned seed = 3;

	(void)state;
	assert_int_equal(rdb_pagecache_init(&pc, CAP), 0);
	for (int step = 0; step < 200000; step++) {
		uint32_t blk = (uint32_t)rand_r(&seed) % 3;
		uint64_t off = (uint64_t)(rand_r(&seed) % (KEYS / 3)) * 4096;
		uint64_t key = (uint64_t)blk << 32 | off / 4096;
		int op = rand_r(&seed) % 10, at = -1;

		for (int i = 0; i < n; i++)
			if (model[i] == key)
				at = i;
		if (op < 5) {		/* get */
			uint8_t *p = rdb_pagecache_get(&pc, blk, off);

			assert_true((p != NULL) == (at >= 0));
			if (p) {
				assert_int_equal(p[0], (uint8_t)key);
				assert_int_equal(p[4095], (uint8_t)(key >> 8));
			}
			if (at < 0)
				continue;
		} else if (op < 9) {	/* put */
			uint8_t *p = rdb_pagecache_put(&pc, blk, off);

			p[0] = (uint8_t)key;
			p[4095] = (uint8_t)(key >> 8);
			if (at < 0) {
				if (n == CAP)
					n--;	/* the last (least recent) goes */
				at = n++;
				model[at] = key;
			}
		} else {		/* drop */
			rdb_pagecache_drop(&pc, blk, off);
			if (at >= 0) {
				memmove(model + at, model + at + 1,
					(size_t)(n - at - 1) * sizeof(*model));
				n--;
			}
			continue;
		}
		/* move to the front */
		memmove(model + 1, model, (size_t)at * sizeof(*model));
		model[0] = key;
		assert_int_equal(pc.n, n);
		if (n) {
			uint32_t b;
			uint64_t o;

			assert_true(rdb_pagecache_lru(&pc, &b, &o));
			assert_int_equal((uint64_t)b << 32 | o / 4096, model[n - 1]);
		}
	}
	rdb_pagecache_dispose(&pc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_eviction_order),
		cmocka_unit_test(test_zero_capacity),
		cmocka_unit_test(test_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

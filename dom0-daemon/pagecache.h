/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The primary's cache of page versions last sent to the backup, keyed by
 * (RAM block, offset): what an XOR delta is computed against.  LRU with a
 * fixed number of pages (a share of guest RAM, see page_cache_percent);
 * the backup keeps no cache — its RAM image holds the same versions.
 *
 * Not thread-safe: each encoder worker owns one cache (a shard of the
 * pages, by hash), so no lock is ever taken on the hot path.
 */
#ifndef RDB_PAGECACHE_H
#define RDB_PAGECACHE_H

#include <stddef.h>
#include <stdint.h>

#include "ramblock.h"

struct rdb_pagecache_ent;

/* A page's identity: block and page number in one word. */
static inline uint64_t rdb_page_key(uint32_t block, uint64_t offset)
{
	return (uint64_t)block << 44 | offset / RDB_PAGE_SIZE;
}

struct rdb_pagecache {
	uint32_t cap, n;
	uint8_t *data;			/* cap * RDB_PAGE_SIZE */
	struct rdb_pagecache_ent *ents;
	uint32_t *buckets, mask;
	uint32_t mru, lru, free_head;	/* UINT32_MAX: none */
	uint64_t hits, misses, evictions;
};

/* cap_pages == 0 is a valid, always-missing cache.  -ENOMEM. */
int rdb_pagecache_init(struct rdb_pagecache *pc, uint32_t cap_pages);
void rdb_pagecache_dispose(struct rdb_pagecache *pc);	/* idempotent */
/* The cached version, made most recent, or NULL (a miss); counted. */
uint8_t *rdb_pagecache_get(struct rdb_pagecache *pc, uint32_t block,
			   uint64_t offset);
/* The slot for this page, to be filled with the version being sent:
 * the existing one, or a new one (the least recent is evicted).  NULL if
 * the cache holds nothing (cap 0). */
uint8_t *rdb_pagecache_put(struct rdb_pagecache *pc, uint32_t block,
			   uint64_t offset);
/* Forgets a page (its version could not be sent as cached). */
void rdb_pagecache_drop(struct rdb_pagecache *pc, uint32_t block,
			uint64_t offset);
/* Key of the least recently used page, for tests; 0 if empty. */
int rdb_pagecache_lru(const struct rdb_pagecache *pc, uint32_t *block,
		      uint64_t *offset);

#endif

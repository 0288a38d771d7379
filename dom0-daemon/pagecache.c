// SPDX-License-Identifier: GPL-2.0-only
#include "pagecache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

struct rdb_pagecache_ent {
	uint64_t key;
	uint32_t prev, next;	/* LRU list: prev = more recent */
	uint32_t hnext;		/* hash chain */
	uint32_t used;
};

static uint32_t hash(const struct rdb_pagecache *pc, uint64_t key)
{
	key *= 0x9e3779b97f4a7c15ULL;
	return (uint32_t)(key >> 32) & pc->mask;
}

int rdb_pagecache_init(struct rdb_pagecache *pc, uint32_t cap)
{
	uint32_t nb = 1;

	memset(pc, 0, sizeof(*pc));
	pc->mru = pc->lru = pc->free_head = NONE;
	pc->cap = cap;
	if (cap == 0)
		return 0;
	while (nb < cap && nb < (1u << 30))
		nb <<= 1;
	pc->mask = nb - 1;
	pc->data = malloc((size_t)cap * RDB_PAGE_SIZE);
	pc->ents = calloc(cap, sizeof(*pc->ents));
	pc->buckets = malloc((size_t)nb * sizeof(*pc->buckets));
	if (!pc->data || !pc->ents || !pc->buckets) {
		rdb_pagecache_dispose(pc);
		return -ENOMEM;
	}
	memset(pc->buckets, 0xff, (size_t)nb * sizeof(*pc->buckets));
	for (uint32_t i = 0; i < cap; i++)
		pc->ents[i].next = i + 1 < cap ? i + 1 : NONE;
	pc->free_head = 0;
	return 0;
}

void rdb_pagecache_dispose(struct rdb_pagecache *pc)
{
	free(pc->data);
	free(pc->ents);
	free(pc->buckets);
	memset(pc, 0, sizeof(*pc));
	pc->mru = pc->lru = pc->free_head = NONE;
}

static uint32_t find(const struct rdb_pagecache *pc, uint64_t key)
{
	if (!pc->cap)
		return NONE;
	for (uint32_t i = pc->buckets[hash(pc, key)]; i != NONE; i = pc->ents[i].hnext)
		if (pc->ents[i].key == key)
			return i;
	return NONE;
}

static void unlink_lru(struct rdb_pagecache *pc, uint32_t i)
{
	struct rdb_pagecache_ent *e = &pc->ents[i];

	if (e->prev != NONE)
		pc->ents[e->prev].next = e->next;
	else
		pc->mru = e->next;
	if (e->next != NONE)
		pc->ents[e->next].prev = e->prev;
	else
		pc->lru = e->prev;
}

static void push_mru(struct rdb_pagecache *pc, uint32_t i)
{
	struct rdb_pagecache_ent *e = &pc->ents[i];

	e->prev = NONE;
	e->next = pc->mru;
	if (pc->mru != NONE)
		pc->ents[pc->mru].prev = i;
	pc->mru = i;
	if (pc->lru == NONE)
		pc->lru = i;
}

static void unhash(struct rdb_pagecache *pc, uint32_t i)
{
	uint32_t *at = &pc->buckets[hash(pc, pc->ents[i].key)];

	while (*at != i)
		at = &pc->ents[*at].hnext;
	*at = pc->ents[i].hnext;
}

uint8_t *rdb_pagecache_get(struct rdb_pagecache *pc, uint32_t block,
			   uint64_t offset)
{
	uint32_t i = find(pc, rdb_page_key(block, offset));

	if (i == NONE) {
		pc->misses++;
		return NULL;
	}
	pc->hits++;
	if (pc->mru != i) {
		unlink_lru(pc, i);
		push_mru(pc, i);
	}
	return pc->data + (size_t)i * RDB_PAGE_SIZE;
}

uint8_t *rdb_pagecache_put(struct rdb_pagecache *pc, uint32_t block,
			   uint64_t offset)
{
	uint64_t key = rdb_page_key(block, offset);
	uint32_t i = find(pc, key), b;

	if (!pc->cap)
		return NULL;
	if (i != NONE) {
		if (pc->mru != i) {
			unlink_lru(pc, i);
			push_mru(pc, i);
		}
		return pc->data + (size_t)i * RDB_PAGE_SIZE;
	}
	if (pc->free_head != NONE) {
		i = pc->free_head;
		pc->free_head = pc->ents[i].next;
		pc->n++;
	} else {
		i = pc->lru;		/* evict the least recent */
		unlink_lru(pc, i);
		unhash(pc, i);
		pc->evictions++;
	}
	pc->ents[i].key = key;
	pc->ents[i].used = 1;
	b = hash(pc, key);
	pc->ents[i].hnext = pc->buckets[b];
	pc->buckets[b] = i;
	push_mru(pc, i);
	return pc->data + (size_t)i * RDB_PAGE_SIZE;
}

void rdb_pagecache_drop(struct rdb_pagecache *pc, uint32_t block,
			uint64_t offset)
{
	uint32_t i = find(pc, rdb_page_key(block, offset));

	if (i == NONE)
		return;
	unlink_lru(pc, i);
	unhash(pc, i);
	pc->ents[i].used = 0;
	pc->ents[i].next = pc->free_head;
	pc->free_head = i;
	pc->n--;
}

int rdb_pagecache_lru(const struct rdb_pagecache *pc, uint32_t *block,
		      uint64_t *offset)
{
	if (pc->lru == NONE)
		return 0;
	*block = (uint32_t)(pc->ents[pc->lru].key >> 44);
	*offset = (pc->ents[pc->lru].key & ((1ULL << 44) - 1)) * RDB_PAGE_SIZE;
	return 1;
}

// SPDX-License-Identifier: GPL-2.0-only
#include "readidx.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include <xxhash.h>

#define NIL UINT32_MAX

struct ent {
	uint64_t hash, block, tag;
	uint32_t hnext, bnext;		/* chains of the two tables */
	uint32_t prev, next;		/* LRU (most recent at head); free list */
};

struct rdb_readidx {
	pthread_mutex_t mu;
	uint32_t cap, nb;		/* entries; buckets (a power of 2) */
	uint32_t n, head, tail, free;
	struct ent *e;
	uint32_t *hb, *bb;		/* heads: by contents hash, by block */
	struct rdb_readidx_stats st;
};

static uint32_t bslot(const struct rdb_readidx *ix, uint64_t block)
{
	return (uint32_t)((block * 0x9e3779b97f4a7c15ULL) >> 32) & (ix->nb - 1);
}

static uint32_t hslot(const struct rdb_readidx *ix, uint64_t hash)
{
	return (uint32_t)(hash ^ (hash >> 32)) & (ix->nb - 1);
}

int rdb_readidx_create(struct rdb_readidx **out, uint64_t max_bytes)
{
	struct rdb_readidx *ix;
	uint64_t cap = max_bytes / (sizeof(struct ent) + 4 * sizeof(uint32_t));
	uint32_t nb = 1;

	if (cap < 16)
		return -EINVAL;
	if (cap > NIL / 2)
		cap = NIL / 2;
	while (nb < cap)
		nb <<= 1;
	ix = calloc(1, sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	ix->cap = (uint32_t)cap;
	ix->nb = nb;
	ix->e = malloc(cap * sizeof(*ix->e));
	ix->hb = malloc(nb * sizeof(*ix->hb));
	ix->bb = malloc(nb * sizeof(*ix->bb));
	if (!ix->e || !ix->hb || !ix->bb) {
		free(ix->e);
		free(ix->hb);
		free(ix->bb);
		free(ix);
		return -ENOMEM;
	}
	pthread_mutex_init(&ix->mu, NULL);
	ix->st.capacity = cap;
	ix->st.mem_bytes = cap * sizeof(*ix->e) + 2ull * nb * sizeof(uint32_t);
	rdb_readidx_clear(ix);
	*out = ix;
	return 0;
}

void rdb_readidx_destroy(struct rdb_readidx *ix)
{
	if (!ix)
		return;
	pthread_mutex_destroy(&ix->mu);
	free(ix->e);
	free(ix->hb);
	free(ix->bb);
	free(ix);
}

static void lru_unlink(struct rdb_readidx *ix, uint32_t i)
{
	struct ent *x = &ix->e[i];

	if (x->prev != NIL)
		ix->e[x->prev].next = x->next;
	else
		ix->head = x->next;
	if (x->next != NIL)
		ix->e[x->next].prev = x->prev;
	else
		ix->tail = x->prev;
}

static void lru_push(struct rdb_readidx *ix, uint32_t i)
{
	struct ent *x = &ix->e[i];

	x->prev = NIL;
	x->next = ix->head;
	if (ix->head != NIL)
		ix->e[ix->head].prev = i;
	ix->head = i;
	if (ix->tail == NIL)
		ix->tail = i;
}

/* Takes entry i out of both tables and the LRU, onto the free list. */
static void remove_ent(struct rdb_readidx *ix, uint32_t i)
{
	struct ent *x = &ix->e[i];
	uint32_t *pp;

	for (pp = &ix->hb[hslot(ix, x->hash)]; *pp != i; pp = &ix->e[*pp].hnext)
		;
	*pp = x->hnext;
	for (pp = &ix->bb[bslot(ix, x->block)]; *pp != i; pp = &ix->e[*pp].bnext)
		;
	*pp = x->bnext;
	lru_unlink(ix, i);
	x->next = ix->free;
	ix->free = i;
	ix->n--;
}

static uint32_t find_block(const struct rdb_readidx *ix, uint64_t block)
{
	uint32_t i = ix->bb[bslot(ix, block)];

	while (i != NIL && ix->e[i].block != block)
		i = ix->e[i].bnext;
	return i;
}

void rdb_readidx_insert(struct rdb_readidx *ix, uint64_t block, uint64_t hash,
			uint64_t tag)
{
	uint32_t i, h, b;

	pthread_mutex_lock(&ix->mu);
	ix->st.inserts++;
	i = find_block(ix, block);
	if (i != NIL)
		remove_ent(ix, i);	/* read again: the newer contents count */
	if (ix->free == NIL) {
		remove_ent(ix, ix->tail);
		ix->st.evicted++;
	}
	i = ix->free;
	ix->free = ix->e[i].next;
	h = hslot(ix, hash);
	b = bslot(ix, block);
	ix->e[i] = (struct ent){ .hash = hash, .block = block, .tag = tag,
				 .hnext = ix->hb[h], .bnext = ix->bb[b] };
	ix->hb[h] = i;
	ix->bb[b] = i;
	lru_push(ix, i);
	ix->n++;
	pthread_mutex_unlock(&ix->mu);
}

void rdb_readidx_invalidate(struct rdb_readidx *ix, unsigned dev, uint64_t off,
			    uint64_t len)
{
	uint64_t first, last;

	if (!len)
		return;
	first = off / RDB_READIDX_BLOCK;
	last = (off + len - 1) / RDB_READIDX_BLOCK;
	if (first > RDB_READIDX_BLOCK_MASK)
		return;
	if (last > RDB_READIDX_BLOCK_MASK)
		last = RDB_READIDX_BLOCK_MASK;
	first = rdb_readidx_key(dev, first);
	last = rdb_readidx_key(dev, last);
	pthread_mutex_lock(&ix->mu);
	if (last - first >= ix->n) {
		/* a range wider than the index holds (a big trim): walk the
		 * entries instead of the blocks */
		for (uint32_t i = ix->head, next; i != NIL; i = next) {
			next = ix->e[i].next;
			if (ix->e[i].block >= first && ix->e[i].block <= last) {
				remove_ent(ix, i);
				ix->st.invalidated++;
			}
		}
	} else {
		for (uint64_t blk = first; blk <= last; blk++) {
			uint32_t i = find_block(ix, blk);

			if (i != NIL) {
				remove_ent(ix, i);
				ix->st.invalidated++;
			}
		}
	}
	pthread_mutex_unlock(&ix->mu);
}

bool rdb_readidx_lookup(struct rdb_readidx *ix, uint64_t hash,
			uint64_t max_tag, uint64_t *block, uint64_t *tag)
{
	uint32_t i;

	pthread_mutex_lock(&ix->mu);
	ix->st.lookups++;
	i = ix->hb[hslot(ix, hash)];
	while (i != NIL && (ix->e[i].hash != hash || ix->e[i].tag > max_tag))
		i = ix->e[i].hnext;
	if (i != NIL) {
		ix->st.hits++;
		*block = ix->e[i].block;
		if (tag)
			*tag = ix->e[i].tag;
		lru_unlink(ix, i);
		lru_push(ix, i);
	}
	pthread_mutex_unlock(&ix->mu);
	return i != NIL;
}

bool rdb_readidx_get(struct rdb_readidx *ix, uint64_t block, uint64_t *hash)
{
	uint32_t i;

	pthread_mutex_lock(&ix->mu);
	i = find_block(ix, block);
	if (i != NIL && hash)
		*hash = ix->e[i].hash;
	pthread_mutex_unlock(&ix->mu);
	return i != NIL;
}

void rdb_readidx_clear(struct rdb_readidx *ix)
{
	pthread_mutex_lock(&ix->mu);
	for (uint32_t k = 0; k < ix->nb; k++)
		ix->hb[k] = ix->bb[k] = NIL;
	for (uint32_t k = 0; k < ix->cap; k++)
		ix->e[k].next = k + 1 < ix->cap ? k + 1 : NIL;
	ix->free = 0;
	ix->head = ix->tail = NIL;
	ix->n = 0;
	pthread_mutex_unlock(&ix->mu);
}

void rdb_readidx_stats(struct rdb_readidx *ix, struct rdb_readidx_stats *st)
{
	pthread_mutex_lock(&ix->mu);
	*st = ix->st;
	st->entries = ix->n;
	pthread_mutex_unlock(&ix->mu);
}

uint64_t rdb_readidx_hash(const void *block, uint64_t seed)
{
	return XXH3_64bits_withSeed(block, RDB_READIDX_BLOCK, seed);
}

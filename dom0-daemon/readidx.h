/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The read index of disk read tracking (docs/read-tracking.md): which
 * 4 KiB disk blocks the guest read, by a fast hash of their contents.
 *
 * The disk server hashes every whole, aligned 4 KiB block a read returns
 * and passes (block, hash) on through its ring; remusdbd inserts them
 * here in ring order, and every write or zero of the guest, in the same
 * order, first removes the blocks it overlaps (any overlap: a partial or
 * unaligned write removes each block it touches).  So an entry always
 * means "the last thing that happened to this block was a read that
 * returned contents with this hash".  Each entry is tagged with the epoch
 * the read belongs to, and a lookup for epoch N takes only entries of
 * epoch <= N: the encoders work on N while the guest already runs in
 * N+1, and a block written and read again in N+1 would otherwise name
 * contents the replica does not have at N's commit.  The encoder threads
 * look a dirty page's hash up: a hit names a block that holds the page's
 * contents as of the epoch, which the encoder also confirms against the
 * image (a hash collision) and the backup verifies with SHA-256.
 *
 * Memory is fixed at creation (max_bytes): the least recently inserted or
 * found entry goes when it is full.  Several blocks may hold the same
 * contents; a lookup finds the most recent.  Every call takes the
 * index's mutex: the loop inserts and invalidates while encoder threads
 * look up.
 */
#ifndef RDB_READIDX_H
#define RDB_READIDX_H

#include <stdbool.h>
#include <stdint.h>

#define RDB_READIDX_BLOCK 4096u

/* One index serves every disk of a VM: an entry's block is a key, the
 * disk's device index above bit RDB_READIDX_DEV_SHIFT and the block
 * (disk offset / 4096) below it. */
#define RDB_READIDX_DEV_SHIFT 48
#define RDB_READIDX_BLOCK_MASK ((1ull << RDB_READIDX_DEV_SHIFT) - 1)

static inline uint64_t rdb_readidx_key(unsigned dev, uint64_t block)
{
	return (uint64_t)dev << RDB_READIDX_DEV_SHIFT | block;
}

struct rdb_readidx;

struct rdb_readidx_stats {
	uint64_t capacity, entries, mem_bytes;
	uint64_t inserts, invalidated, evicted, lookups, hits;
};

/* -EINVAL if max_bytes holds fewer than 16 entries, -ENOMEM. */
int rdb_readidx_create(struct rdb_readidx **out, uint64_t max_bytes);
void rdb_readidx_destroy(struct rdb_readidx *ix);	/* NULL is fine */

/* The block (its key: rdb_readidx_key) was read in epoch tag and holds
 * contents of hash. */
void rdb_readidx_insert(struct rdb_readidx *ix, uint64_t block, uint64_t hash,
			uint64_t tag);
/* Bytes [off, off + len) of disk dev change: every block they touch is
 * forgotten. */
void rdb_readidx_invalidate(struct rdb_readidx *ix, unsigned dev, uint64_t off,
			    uint64_t len);
/* A block (its key) whose last event was a read, in an epoch <= max_tag,
 * of contents with this hash; *tag: that read's epoch (tag may be
 * NULL). */
bool rdb_readidx_lookup(struct rdb_readidx *ix, uint64_t hash,
			uint64_t max_tag, uint64_t *block, uint64_t *tag);
/* Whether block has an entry, and its hash (tests, status). */
bool rdb_readidx_get(struct rdb_readidx *ix, uint64_t block, uint64_t *hash);
void rdb_readidx_clear(struct rdb_readidx *ix);
void rdb_readidx_stats(struct rdb_readidx *ix, struct rdb_readidx_stats *st);

/* The index's hash of 4096 bytes (XXH3, keyed by seed). */
uint64_t rdb_readidx_hash(const void *block, uint64_t seed);

#endif

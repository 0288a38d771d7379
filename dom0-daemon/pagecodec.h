/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The per-page choice of encoding (RemusDB's checkpoint compression):
 *
 *   every byte the same       -> ZERO (fill byte)
 *   a disk block the guest read and nobody wrote since, holding exactly
 *   these contents (disk read tracking, docs/read-tracking.md)
 *                             -> DISKREF (the block's offset + SHA-256),
 *                                unless an XOR+RLE delta is smaller still
 *   cached (sent before)      -> XOR+RLE delta against the cached version,
 *                                if it is smaller than the page
 *   otherwise                 -> LZ4, if it saves at least a quarter
 *   otherwise                 -> RAW
 *
 * and the cache then holds the version sent.  `allowed` is what the
 * backup granted (RDB_FEATURE_*); without XORRLE no cache is consulted.
 */
#ifndef RDB_PAGECODEC_H
#define RDB_PAGECODEC_H

#include <stdint.h>

#include "buf.h"
#include "pagecache.h"
#include "proto.h"
#include "readidx.h"

/* Disks read tracking can cover (diskbuf.h's RDB_DISKS_MAX, checked in
 * primary_send.c). */
#define RDB_RT_DISKS_MAX 8

struct rdb_codec_stats {
	uint64_t pages[RDB_PAGE_ENC__MAX];	/* records per encoding */
	uint64_t out_bytes[RDB_PAGE_ENC__MAX];	/* their body bytes */
	uint64_t in_bytes;			/* RDB_PAGE_SIZE per page */
	uint64_t cache_hits, cache_misses;
	uint64_t encode_ns;
	/* read tracking: index hits; hits the image did not confirm (the
	 * block changed since, or a hash collision); confirmed blocks sent
	 * as an XOR+RLE delta because that was smaller; references to a
	 * block read in an earlier epoch than the page's (copies of what was
	 * read, not the read's own target page); hits whose block the
	 * host's page cache did not hold (not read from the disk: sent as
	 * pages) */
	uint64_t rt_hits, rt_unconfirmed, rt_delta_smaller, rt_older_reads;
	uint64_t rt_uncached;
	uint64_t rt_refs[RDB_RT_DISKS_MAX];	/* DISKREF pages, by disk */
};

/* Disk read tracking for the encoder: the read index, its hash key, and
 * each disk's image (an fd to read a candidate block back and compare; a
 * read-only map of it to ask the page cache whether it holds the block
 * without reading it; NULL: reads may wait for the disk). */
/* A tracked disk's image, where a candidate block is confirmed. */
struct rdb_rt_disk {
	int fd;
	const void *map;	/* read-only, to ask the page cache (or NULL) */
	uint64_t len;		/* the map's */
};

/* Read tracking over disks 0..ndisks-1 (by device index: the index's
 * keys and the DISKREF's disk name them).  ndisks > 1 only with
 * RDB_FEATURE_DISKREF_DEVS granted. */
struct rdb_rt {
	struct rdb_readidx *ix;
	uint64_t seed;
	struct rdb_rt_disk disk[RDB_RT_DISKS_MAX];
	unsigned ndisks;
	uint64_t epoch;		/* being encoded: reads of later ones do not count */
};

/* Appends one wire record (offset:u64 enc:u8 body) for page to out and
 * updates the cache.  rt: NULL, or read tracking (with DISKREF allowed).
 * Returns the body's byte count (what EPOCH_END counts), or -ENOMEM. */
long rdb_page_encode(struct rdb_pagecache *pc, uint32_t allowed,
		     const struct rdb_rt *rt, uint32_t block, uint64_t offset,
		     const uint8_t *page, struct rdb_buf *out,
		     struct rdb_codec_stats *st);
void rdb_codec_stats_add(struct rdb_codec_stats *to,
			 const struct rdb_codec_stats *from);

#endif

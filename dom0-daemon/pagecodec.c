// SPDX-License-Identifier: GPL-2.0-only
#include "pagecodec.h"
#include "xorrle.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <lz4.h>
#include <openssl/evp.h>

#include "fileio.h"

/* LZ4 must save at least this much of a page to be worth decoding. */
#define LZ4_MAX_OUT (RDB_PAGE_SIZE * 3 / 4)

static int uniform(const uint8_t *p)
{
	uint64_t w, first;

	memcpy(&first, p, 8);
	if (first != (uint64_t)p[0] * 0x0101010101010101ULL)
		return 0;
	for (size_t i = 8; i < RDB_PAGE_SIZE; i += 8) {
		memcpy(&w, p + i, 8);
		if (w != first)
			return 0;
	}
	return 1;
}

/*
 * The image's block at off, if the host's page cache holds it: 1 (read),
 * 0 (not cached: no disk read for it), < 0 (an error).  An encoder waits
 * for nothing: the loop waits for the encoders at the next epoch's end,
 * and on a host whose disk is saturated one read took hundreds of ms.  A
 * page whose block is not cached goes as a page.  The map is asked first
 * (mincore reads nothing; a read that misses, even RWF_NOWAIT's, starts
 * the block's I/O, whose submission can wait on a full queue), the read
 * does not wait either (the block may have gone meanwhile).
 */
static int block_cached(const struct rdb_rt_disk *d, uint8_t *blk, uint64_t off)
{
	struct iovec iov = { blk, RDB_PAGE_SIZE };
	unsigned char in;
	ssize_t n;

	if (d->map && off + RDB_PAGE_SIZE <= d->len &&
	    mincore((void *)((const uint8_t *)d->map + off), RDB_PAGE_SIZE,
		    &in) == 0 && !(in & 1))
		return 0;
	n = preadv2(d->fd, &iov, 1, (off_t)off, RWF_NOWAIT);
	if (n == RDB_PAGE_SIZE)
		return 1;
	if (n >= 0 || errno == EAGAIN)
		return 0;
	if (errno == EOPNOTSUPP || errno == EINVAL)	/* no RWF_NOWAIT here */
		return rdb_pread_all(d->fd, blk, RDB_PAGE_SIZE, off) < 0 ?
			-EIO : 1;
	return -errno;
}

/*
 * A block of the disk that holds exactly this page, as far as the read
 * index knows (its last event was a read of these contents) and as the
 * image holds it now.  The image may be ahead of the epoch being encoded
 * (the guest runs on): a block written since differs and is refused here,
 * or, rewritten with the same bytes, still holds them at the epoch's
 * commit.  The backup checks the SHA-256 all the same.
 */
static bool disk_block_of(const struct rdb_rt *rt, const uint8_t *page,
			  unsigned *dev, uint64_t *disk_off, bool *older,
			  struct rdb_codec_stats *st)
{
	uint8_t blk[RDB_PAGE_SIZE];
	uint64_t key, b, tag;

	if (!rdb_readidx_lookup(rt->ix, rdb_readidx_hash(page, rt->seed),
				rt->epoch, &key, &tag))
		return false;
	st->rt_hits++;
	*dev = (unsigned)(key >> RDB_READIDX_DEV_SHIFT);
	b = key & RDB_READIDX_BLOCK_MASK;
	if (*dev >= rt->ndisks) {	/* (the index has no other disks) */
		st->rt_unconfirmed++;
		return false;
	}
	switch (block_cached(&rt->disk[*dev], blk, b * RDB_PAGE_SIZE)) {
	case 1:
		break;
	case 0:
		st->rt_uncached++;
		return false;
	default:
		st->rt_unconfirmed++;
		return false;
	}
	if (memcmp(blk, page, RDB_PAGE_SIZE)) {
		st->rt_unconfirmed++;
		return false;
	}
	if (b * RDB_PAGE_SIZE > RDB_DISKREF_OFF_MASK) {	/* (64 PiB) */
		st->rt_unconfirmed++;
		return false;
	}
	*disk_off = b * RDB_PAGE_SIZE;
	/* read in an earlier epoch: this page was not that read's target
	 * (a target is dirty, and sent, in the epoch of the read), but a
	 * copy of it — what the paper's DMA rule could not reference */
	*older = tag < rt->epoch;
	return true;
}

long rdb_page_encode(struct rdb_pagecache *pc, uint32_t allowed,
		     const struct rdb_rt *rt, uint32_t block, uint64_t offset,
		     const uint8_t *page, struct rdb_buf *out,
		     struct rdb_codec_stats *st)
{
	uint8_t tmp[RDB_PAGE_LZ4_MAX], md[EVP_MAX_MD_SIZE];
	enum rdb_page_enc enc = RDB_PAGE_RAW;
	uint8_t *old = NULL, *slot;
	uint64_t disk_off = 0;
	bool ref = false, older = false;
	unsigned mdlen = 0, dev = 0;
	long n = -1, body;
	int rc;

	st->in_bytes += RDB_PAGE_SIZE;
	if (uniform(page)) {
		rc = rdb_proto_page_record_append(out, offset, NULL, page[0]);
		enc = RDB_PAGE_ZERO;
		body = 1;
		goto sent;
	}
	if (allowed & RDB_FEATURE_XORRLE) {
		old = rdb_pagecache_get(pc, block, offset);
		if (old) {
			/* Both pages come from memory, not a cache (the guest's
			 * QEMU evicts them between epochs): ask for every line
			 * at once rather than stall on each in turn. */
			for (size_t k = 0; k < RDB_PAGE_SIZE; k += 64) {
				__builtin_prefetch(old + k);
				__builtin_prefetch(page + k);
			}
			st->cache_hits++;
			n = rdb_xorrle_encode(old, page, RDB_PAGE_SIZE, tmp,
					      RDB_PAGE_XORRLE_MAX - 3);
			if (n == 0) {
				/* unchanged (QEMU sent it anyway): an empty
				 * delta is not a valid body; one byte is */
				tmp[0] = 0;
				tmp[1] = 1;
				tmp[2] = 0;
				n = 3;
			}
			if (n > 0)
				enc = RDB_PAGE_XORRLE;
		} else {
			st->cache_misses++;
		}
	}
	/* The read index only when a reference could be smaller than what
	 * we have: most pages of a database's epoch change a few bytes, and
	 * their delta beats a reference without the page's hash and lookup
	 * (~0.5 us a page, issue 30).  rt_delta_smaller counts those. */
	if (rt && (allowed & RDB_FEATURE_DISKREF)) {
		if (enc == RDB_PAGE_XORRLE && 2 + n <= RDB_PAGE_DISKREF_BODY)
			st->rt_delta_smaller++;
		else
			ref = disk_block_of(rt, page, &dev, &disk_off, &older, st);
	}
	if (ref && EVP_Digest(page, RDB_PAGE_SIZE, md, &mdlen, EVP_sha256(),
			      NULL) && mdlen == RDB_DISKREF_HASH_LEN) {
		/* (disk 0's offset as it always was; another's names it,
		 * RDB_FEATURE_DISKREF_DEVS: rt has other disks only then) */
		rc = rdb_proto_page_record_append_diskref(out, offset,
			(uint64_t)dev << RDB_DISKREF_DEV_SHIFT | disk_off, md);
		if (rc == 0 && older)
			st->rt_older_reads++;
		if (rc == 0)
			st->rt_refs[dev]++;
		enc = RDB_PAGE_DISKREF;
		body = RDB_PAGE_DISKREF_BODY;
		goto sent;
	}
	if (enc == RDB_PAGE_RAW && (allowed & RDB_FEATURE_LZ4)) {
		n = LZ4_compress_default((const char *)page, (char *)tmp,
					 RDB_PAGE_SIZE, LZ4_MAX_OUT);
		if (n > 0)
			enc = RDB_PAGE_LZ4;
	}
	if (enc == RDB_PAGE_RAW) {
		rc = rdb_proto_page_record_append(out, offset, page, 0);
		body = RDB_PAGE_SIZE;
	} else {
		rc = rdb_proto_page_record_append_enc(out, offset, enc, tmp,
						      (size_t)n);
		body = 2 + n;
	}
sent:
	if (rc < 0)
		return rc;
	st->pages[enc]++;
	st->out_bytes[enc] += (uint64_t)body;
	/* The backup now has this version: remember it for the next delta. */
	if (allowed & RDB_FEATURE_XORRLE) {
		slot = old ? old : rdb_pagecache_put(pc, block, offset);
		if (slot)
			memcpy(slot, page, RDB_PAGE_SIZE);
	}
	return body;
}

void rdb_codec_stats_add(struct rdb_codec_stats *to,
			 const struct rdb_codec_stats *from)
{
	for (int i = 0; i < RDB_PAGE_ENC__MAX; i++) {
		to->pages[i] += from->pages[i];
		to->out_bytes[i] += from->out_bytes[i];
	}
	to->in_bytes += from->in_bytes;
	to->cache_hits += from->cache_hits;
	to->cache_misses += from->cache_misses;
	to->encode_ns += from->encode_ns;
	to->rt_hits += from->rt_hits;
	to->rt_unconfirmed += from->rt_unconfirmed;
	to->rt_uncached += from->rt_uncached;
	to->rt_delta_smaller += from->rt_delta_smaller;
	to->rt_older_reads += from->rt_older_reads;
	for (int i = 0; i < RDB_RT_DISKS_MAX; i++)
		to->rt_refs[i] += from->rt_refs[i];
}

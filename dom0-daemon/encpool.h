/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Checkpoint compression off the pause path: a pool of encoder threads.
 *
 * The primary copies an epoch's pages into memory during the pause (wire
 * records RAW/ZERO, in runs of one RAM block), lets the guest run, and
 * submits them here.  Each worker owns a shard of the pages — by a hash
 * of (block, offset) — and that shard's page cache, so no lock is taken
 * per page and a page's versions always meet the same cache in order.
 * Each worker writes its records (rdb_page_encode) and their runs into
 * its own output; when the last one finishes, the pool writes to the
 * notify fd (an eventfd in the daemon's loop) and the main thread frames
 * the outputs.  One epoch at a time: submit only when idle.
 */
#ifndef RDB_ENCPOOL_H
#define RDB_ENCPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "pagecodec.h"

struct rdb_page_run {
	uint32_t block, count;
	size_t start, len;	/* bytes of the records buffer */
};

struct rdb_enc_out {
	struct rdb_buf recs;
	struct rdb_page_run *runs;
	size_t nruns, cap_runs;
	uint64_t nrecs, body_bytes;
	uint64_t digest;	/* VERIFY granted: rdb_page_digest summed */
	int err;		/* -ENOMEM */
};

struct rdb_encpool;

/* nworkers 1..64; cache_pages split evenly among them; allowed: the
 * granted RDB_FEATURE_* bits; notify_fd gets an 8-byte 1 per epoch done
 * (-1: none, use rdb_encpool_wait). */
int rdb_encpool_create(struct rdb_encpool **out, unsigned nworkers,
		       uint32_t cache_pages, uint32_t allowed, int notify_fd);
void rdb_encpool_destroy(struct rdb_encpool *pool);	/* NULL is fine */
/* Disk read tracking for the next epochs (rt copied; NULL: off).  Waits
 * for the epoch in progress. */
void rdb_encpool_set_rt(struct rdb_encpool *pool, const struct rdb_rt *rt);
/* Starts encoding epoch's records; they and runs must stay valid until
 * done.  -EBUSY. */
int rdb_encpool_submit(struct rdb_encpool *pool, uint64_t epoch,
		       const uint8_t *records, const struct rdb_page_run *runs,
		       size_t nruns);
bool rdb_encpool_busy(struct rdb_encpool *pool);
/* Fault injection (tests): the epoch under way, or else the next,
 * finishes ns late. */
void rdb_encpool_fault_delay(struct rdb_encpool *pool, uint64_t ns);
void rdb_encpool_wait(struct rdb_encpool *pool);
unsigned rdb_encpool_nworkers(const struct rdb_encpool *pool);
/* Valid when idle, until the next submit. */
const struct rdb_enc_out *rdb_encpool_out(const struct rdb_encpool *pool,
					  unsigned w);
/* Cumulative statistics of every worker (when idle). */
void rdb_encpool_stats(const struct rdb_encpool *pool,
		       struct rdb_codec_stats *sum);

#endif

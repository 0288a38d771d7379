/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Output commit: guest frames held per epoch.  A frame read while epoch N
 * is open goes out only once the backup has committed N.  Epochs only grow
 * in arrival order, so releasing N pops a prefix of the queue.
 *
 * The queue is bounded: past max_bytes a NEW frame is dropped (TCP will
 * retransmit it); an old one is never released early.
 */
#ifndef RDB_NETBUF_H
#define RDB_NETBUF_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define RDB_NETBUF_DEFAULT_MAX (64u << 20)

struct rdb_netbuf {
	struct rdb_buf q;	/* records: epoch:u64 held_ns:u64 len:u32 frame */
	size_t max_bytes;
	uint64_t frames, bytes;			/* held now */
	uint64_t released, dropped;
	uint64_t max_hold_ns;			/* longest hold seen */
};

int rdb_netbuf_init(struct rdb_netbuf *nb, size_t max_bytes);	/* 0 = default */
void rdb_netbuf_dispose(struct rdb_netbuf *nb);
/* 0, or -ENOBUFS when the frame was dropped. */
int rdb_netbuf_hold(struct rdb_netbuf *nb, uint64_t epoch,
		    const uint8_t *frame, size_t len);
/* Calls sink for every frame of epoch <= upto, oldest first. */
void rdb_netbuf_release(struct rdb_netbuf *nb, uint64_t upto,
			void (*sink)(void *, const uint8_t *, size_t),
			void *opaque);
uint64_t rdb_netbuf_frames(const struct rdb_netbuf *nb);
uint64_t rdb_netbuf_bytes(const struct rdb_netbuf *nb);

#endif

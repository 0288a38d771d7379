/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Output commit (Remus): the guest's outgoing frames held per epoch.
 *
 * A frame read from the guest while epoch N is open is tagged N and goes
 * out only when the backup has acknowledged N (rdb_netbuf_release(nb, N)).
 * Epochs arrive in non-decreasing order, so the frames of epochs <= N are
 * always a prefix of the queue: release pops from the head, hold pushes at
 * the tail, both O(1) amortised, and frames leave in arrival order.
 *
 * Storage is one ring of records, grown by doubling up to max_bytes (the
 * hard bound on the ring's memory).  A frame that does not fit is dropped
 * and counted; TCP retransmits it.  A held frame is never released early
 * to make room: that would break output commit.
 */
#ifndef RDB_NETBUF_H
#define RDB_NETBUF_H

#include <stddef.h>
#include <stdint.h>

#define RDB_NETBUF_DEFAULT_MAX (64u << 20)

/* A sink must not call back into the netbuf that is releasing. */
typedef void (*rdb_netbuf_sink)(void *opaque, const uint8_t *frame,
				size_t len);

struct rdb_netbuf {
	/* Records live in [head, tail), or, once the writer has wrapped,
	 * in [head, wrap) then [0, tail); wrap is SIZE_MAX when unwrapped. */
	uint8_t *ring;
	size_t cap, max_cap;
	size_t head, tail, wrap;
	size_t live;			/* bytes of records in the ring */
	uint64_t last_epoch;		/* epoch of the newest held frame */

	uint64_t frames, bytes;		/* held now (bytes: frame bytes) */
	uint64_t released, released_bytes;
	uint64_t dropped, dropped_bytes;	/* refused by hold */
	uint64_t discarded;		/* thrown away by drop_after/clear */
	uint64_t last_release_max_hold_ns;	/* longest hold, last release */
	uint64_t max_hold_ns;		/* longest hold ever released */
};

/* max_bytes bounds the ring's memory; 0 means RDB_NETBUF_DEFAULT_MAX.
 * Allocates nothing until the first frame. */
int rdb_netbuf_init(struct rdb_netbuf *nb, size_t max_bytes);
void rdb_netbuf_dispose(struct rdb_netbuf *nb);		/* idempotent */

/*
 * Holds a copy of frame as output of epoch.  Returns 0; -ENOBUFS when it
 * does not fit under the bound, -ENOMEM when growing the ring failed,
 * -EINVAL when len is 0 or above UINT32_MAX, or when epoch is older than
 * the newest held frame's (it would be stuck behind it).  Every refusal
 * counts in dropped; the caller need not check.
 */
int rdb_netbuf_hold(struct rdb_netbuf *nb, uint64_t epoch,
		    const uint8_t *frame, size_t len);

/*
 * The backup has committed every epoch <= upto: calls sink for each held
 * frame of those epochs, oldest first, then forgets it.  Returns how many
 * frames went out (0 when none were held); the longest of their holds is
 * in last_release_max_hold_ns (0 when none).
 */
uint64_t rdb_netbuf_release(struct rdb_netbuf *nb, uint64_t upto,
			    rdb_netbuf_sink sink, void *opaque);

/* Epochs after epoch will never be committed: forgets their frames and
 * returns how many there were. */
uint64_t rdb_netbuf_drop_after(struct rdb_netbuf *nb, uint64_t epoch);
/* Forgets every held frame (on the backup after failover, that output
 * belongs to a dead primary's uncommitted epoch).  Keeps the memory. */
uint64_t rdb_netbuf_clear(struct rdb_netbuf *nb);

uint64_t rdb_netbuf_frames(const struct rdb_netbuf *nb);
uint64_t rdb_netbuf_bytes(const struct rdb_netbuf *nb);

#endif

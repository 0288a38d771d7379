/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Output commit under commit protection (mode = commit-protection): the
 * guest's frames held per TCP flow instead of per epoch.
 *
 * A frame from the guest, read while epoch N is open, leaves at once
 * unless one of these holds it until the backup has committed N:
 *
 *   marked   the guest module marked it: a protected socket's packet (a
 *            commit acknowledgement);
 *   behind   its flow (TCP 5-tuple) has a held frame: it waits behind it,
 *            marked or not, so the flow's bytes keep their order; it
 *            leaves when everything before it in its flow has left (and,
 *            if it needs a commit itself, its epoch is committed);
 *   synack   the guest accepting a connection: a client must not learn of
 *            a connection the backup may not have;
 *   ack      an acknowledgement that tells the client something new (its
 *            ACK number is beyond every one the flow has sent) on a frame
 *            that carries no new sequence space (a pure ACK, a window
 *            update, a retransmission).  It does not block its flow; if a
 *            later frame of the flow leaves first, carrying a newer ACK,
 *            it is redundant and dropped.
 *
 * Why the last two: after a failover the backup must be able to tell,
 * from what a client says, whether the client saw anything the restored
 * guest did not do.  Bytes the guest sent unprotected are visible in the
 * client's ACK number; an acknowledgement of the client's bytes is not.
 * Held this way, a client can only have had its bytes acknowledged
 * beyond the checkpoint by a frame that also carried new bytes of the
 * guest's — which its ACK number then shows (see flowcheck.h).
 *
 * Frames that are not TCP (ARP, ICMP, UDP) always leave at once; a marked
 * frame that cannot be read as TCP is held in one shared flow.
 *
 * The flow table also records each flow's addresses and sequence state so
 * the primary can send them to the backup with every epoch
 * (rdb_flowbuf_take_changes): the backup checks the flows after a
 * failover.  Flows end on a RST or when both sides have sent FIN; when
 * the table is full the least recently active flow with nothing held is
 * forgotten.  Memory is bounded: held frame bytes by max_bytes (a frame
 * that does not fit is dropped and counted; TCP retransmits it; one that
 * waited for a commit keeps its place, empty, so its flow still waits for
 * that epoch), flows by max_flows.
 */
#ifndef RDB_FLOWBUF_H
#define RDB_FLOWBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flowrec.h"
#include "netbuf.h"

#define RDB_FLOWBUF_DEFAULT_FLOWS 65536u

struct rdb_flowbuf_stats {
	uint64_t now_frames, now_bytes;		/* left at once */
	uint64_t marked_frames, marked_bytes;	/* held: marked */
	uint64_t behind_frames, behind_bytes;	/* held: behind a held frame */
	uint64_t synack_frames;			/* held: connection accepts */
	uint64_t ack_frames;			/* held: new acknowledgements */
	uint64_t released, released_bytes;	/* held frames that left */
	uint64_t superseded;			/* held acks made redundant */
	uint64_t dropped, dropped_bytes;	/* refused: over the bound */
	uint64_t placeholders;			/* dropped, their place kept */
	uint64_t discarded;			/* thrown away (drop_after/clear) */
	uint64_t untracked;			/* TCP frames of no flow (table full) */
	uint64_t flows_created, flows_ended, flows_evicted;
	uint64_t last_release_max_hold_ns, max_hold_ns;
};

struct rdb_flow;
struct rdb_held;

struct rdb_flowbuf {
	size_t max_bytes;
	uint32_t max_flows;
	struct rdb_flow **buckets;
	uint32_t nbuckets, nflows;
	struct rdb_flow *lru_head, *lru_tail;	/* most recent first */
	struct rdb_flow *dirty;			/* changed since take_changes */
	struct rdb_flow *opaque;		/* marked frames that are not TCP */
	struct rdb_flowkey *removed;		/* ended since take_changes */
	size_t nremoved, cap_removed;
	/* held frames needing a commit, in arrival order (epochs rise) */
	struct rdb_held *commit_head, *commit_tail;
	uint64_t frames, bytes;			/* held now */
	struct rdb_flowbuf_stats st;
};

/* 0 for max_bytes / max_flows: the defaults.  Allocates nothing yet. */
int rdb_flowbuf_init(struct rdb_flowbuf *fb, size_t max_bytes, uint32_t max_flows);
void rdb_flowbuf_dispose(struct rdb_flowbuf *fb);	/* idempotent */

/*
 * A frame from the guest, read while epoch is open; marked: the guest
 * module's mark (already stripped from frame).  It goes to sink now, or is
 * copied and held (see above).
 */
void rdb_flowbuf_from_guest(struct rdb_flowbuf *fb, uint64_t epoch, bool marked,
			    const uint8_t *frame, size_t len,
			    rdb_netbuf_sink sink, void *opaque);
/* A frame from the network to the guest: only observed (a peer's FIN or
 * RST ends its flow). */
void rdb_flowbuf_from_wire(struct rdb_flowbuf *fb, const uint8_t *frame,
			   size_t len);
/* The backup committed every epoch <= upto: held frames that may now
 * leave go to sink, each flow's in order.  Returns how many left. */
uint64_t rdb_flowbuf_release(struct rdb_flowbuf *fb, uint64_t upto,
			     rdb_netbuf_sink sink, void *opaque);
/* Epochs after epoch will never be committed: forgets their held frames
 * (a suffix of every flow's queue) and returns how many there were. */
uint64_t rdb_flowbuf_drop_after(struct rdb_flowbuf *fb, uint64_t epoch);
/* Forgets every held frame; keeps the flows. */
uint64_t rdb_flowbuf_clear(struct rdb_flowbuf *fb);

/*
 * The flows that changed (new, sequence state moved) or ended since the
 * last call, for the epoch being closed: cb once per record, REMOVEs
 * first.  Returns how many records.
 */
size_t rdb_flowbuf_take_changes(struct rdb_flowbuf *fb,
				void (*cb)(void *opaque, const struct rdb_flow_rec *r),
				void *opaque);

/*
 * A new protection: forgets every flow and held frame (kept are the
 * bounds and the counters).  What the table learned before is stale: the
 * guest's flows moved on while it ran unprotected, unseen.  A flow is
 * learned again from its next frame, and the backup hears of it with
 * that frame's epoch.
 */
void rdb_flowbuf_forget_flows(struct rdb_flowbuf *fb);
/* take_changes for a backup that does not take flow records: the changes
 * are forgotten, so they do not pile up. */
void rdb_flowbuf_forget_changes(struct rdb_flowbuf *fb);

uint64_t rdb_flowbuf_frames(const struct rdb_flowbuf *fb);
uint64_t rdb_flowbuf_bytes(const struct rdb_flowbuf *fb);
uint32_t rdb_flowbuf_flows(const struct rdb_flowbuf *fb);

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The backup's view of the guest's TCP flows under commit protection,
 * and what it does with them after a failover.
 *
 * While the VM is protected, the primary sends with every epoch the flows
 * that changed (FLOWS records, flowrec.h); the backup applies them when
 * it commits the epoch, so this table is the flows as of the committed
 * checkpoint, with snd_ref: the guest's highest sequence number sent + 1
 * in each, as of that checkpoint (the primary tags frames exactly: see
 * primary.c, on_epoch_end).
 *
 * After a failover the restored guest runs from that checkpoint, but under
 * commit protection the dead primary may have released output of later
 * epochs: a client can have seen bytes the restored guest never sent (and,
 * through those frames' ACK numbers, had its own bytes acknowledged).
 * Such a flow would stall until a TCP timeout.  So, for every flow:
 *
 *   1. The guest's output on it is held, so the client learns nothing new
 *      until the check is done.
 *   2. A probe goes to each end: one byte far below its receive window
 *      (2^30 back), which TCP must answer with an ACK carrying its
 *      current SND.NXT and RCV.NXT and drops (RFC 793 "unacceptable
 *      segment"; what keepalives rely on).  Up to 5 probes, 200 ms apart.
 *   3. Whatever the client sends first tells its RCV.NXT (ACK number) and
 *      the highest byte it holds out of order (SACK).  If either is
 *      beyond snd_ref, the client has seen what the restored guest never
 *      sent: the flow is inconsistent.  It is reset at both ends — a RST
 *      to the client with SEQ = its RCV.NXT, and one into the guest with
 *      SEQ = the guest's RCV.NXT from its probe answer — so both get an
 *      error at once.  Otherwise the flow is consistent: held frames go
 *      on and the flow is left alone from then on.
 *      (The other direction, client bytes acknowledged beyond the
 *      checkpoint, shows in the same numbers because the primary's
 *      flowbuf never lets such an acknowledgement out alone: flowbuf.h.)
 *   4. A client that never answers (gone, or unreachable) is given up on
 *      after 1 s: held frames go on, the flow is counted as unanswered.
 *
 * Separately, a fence: with fence on, the clients' TCP input reaches the
 * guest only once the guest has acknowledged the failover event (its
 * DBMS's abort generation has moved: guest-kmod/include/uapi/remusdb.h)
 * or the fence's deadline passed.  A COMMIT retransmitted by a client
 * can then never be processed by a transaction that should have been
 * aborted.
 *
 * Flows not in the table (a flow the primary had forgotten, one that was
 * never seen) are checked when they first show: from the guest's probe
 * answer instead of snd_ref.  New connections (SYN) are not checked.
 * Non-TCP traffic always passes.  Held frames are bounded (8 MiB); frames
 * over the bound are dropped (TCP retransmits them).
 */
#ifndef RDB_FLOWCHECK_H
#define RDB_FLOWCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flowrec.h"

struct rdb_flowcheck_ops {
	void (*to_wire)(void *opaque, const uint8_t *frame, size_t len);
	void (*to_guest)(void *opaque, const uint8_t *frame, size_t len);
	void *opaque;
};

struct rdb_flowcheck_stats {
	uint64_t checked;		/* flows whose check ended */
	uint64_t consistent, reset, unanswered;
	uint64_t probes;		/* probe segments sent, both ways */
	uint64_t held_out, held_in;	/* frames held (guest's, clients') */
	uint64_t dropped;		/* held frames thrown away */
	uint64_t fence_ns;		/* how long client input was fenced */
	bool fence_timed_out;
	uint64_t check_ns;		/* start to the last verdict */
};

struct fc_flow;
struct fc_frame;

struct rdb_flowcheck {
	char vm[65];
	uint32_t max_flows;
	struct fc_flow **buckets;
	uint32_t nbuckets, nflows;
	struct fc_flow *all;		/* every flow, for start and tick */
	/* after failover */
	bool started, fence;
	struct rdb_flowcheck_ops ops;
	uint64_t start_ns, fence_ns, fence_deadline_ns, lazy_until_ns;
	struct fc_frame *fence_head, *fence_tail;	/* clients' input */
	size_t held_bytes;
	unsigned probing;		/* flows whose check is under way */
	/* the guest's MAC (from the table or its frames): a frame to any
	 * other is not the guest's to check */
	uint8_t guest_mac[6];
	bool have_guest_mac;
	struct rdb_flowcheck_stats st;
};

int rdb_flowcheck_init(struct rdb_flowcheck *fc, const char *vm,
		       uint32_t max_flows);
void rdb_flowcheck_dispose(struct rdb_flowcheck *fc);	/* idempotent */

/* While protected: one record of a committed epoch. */
void rdb_flowcheck_apply(struct rdb_flowcheck *fc, const struct rdb_flow_rec *r);
uint32_t rdb_flowcheck_flows(const struct rdb_flowcheck *fc);

/*
 * At a failover, before the guest's NIC carries anything: from now on the
 * known flows are held and checked.  fence: hold the clients' TCP input
 * until rdb_flowcheck_lift_fence, or fence_ns after the guest runs.
 */
void rdb_flowcheck_start(struct rdb_flowcheck *fc,
			 const struct rdb_flowcheck_ops *ops, bool fence,
			 uint64_t fence_ns, uint64_t now_ns);
/* The restored guest runs: the probes go out, the deadlines start. */
void rdb_flowcheck_guest_running(struct rdb_flowcheck *fc, uint64_t now_ns);
/* A frame from the guest / from the network: true if the caller passes it
 * on now; false if it was taken (held, or dropped). */
bool rdb_flowcheck_from_guest(struct rdb_flowcheck *fc, const uint8_t *frame,
			      size_t len, uint64_t now_ns);
bool rdb_flowcheck_from_wire(struct rdb_flowcheck *fc, const uint8_t *frame,
			     size_t len, uint64_t now_ns);
/* A check under way (a flow probed, or the fence up): the caller's
 * timer must tick it (a flow can show up after the last tick ended). */
bool rdb_flowcheck_pending(const struct rdb_flowcheck *fc);
/* The guest acknowledged the failover event. */
void rdb_flowcheck_lift_fence(struct rdb_flowcheck *fc, uint64_t now_ns);
/* Probes again, ends checks past their deadline, lifts a fence past its
 * own.  Returns when it wants to be called next (ns from now), or 0 when
 * nothing is pending. */
uint64_t rdb_flowcheck_tick(struct rdb_flowcheck *fc, uint64_t now_ns);

#endif

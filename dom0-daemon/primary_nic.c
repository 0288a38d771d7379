// SPDX-License-Identifier: GPL-2.0-only
/*
 * The primary's NIC device (primary_dev.h): guest frames -> held -> tap;
 * tap -> guest at once.  Each NIC holds its own output: under commit
 * protection a flow held on one NIC never delays another NIC's frames.
 */
#define RDB_COMPONENT "primary"
#include "primary_dev.h"
#include "clock.h"
#include "log.h"
#include "remusdb.h"
#include "vm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void wire_sink(void *opaque, const uint8_t *frame, size_t len)
{
	struct rdb_pri_nic *n = opaque;

	rdb_nic_to_wire(&n->nic, frame, len);
}

/*
 * A frame from the guest.  Packets the guest module marked (a protected
 * socket's: see guest-kmod/include/uapi/remusdb.h) are counted and the
 * mark stripped here, before anything can leave the host.  Then the
 * role's gate says where it goes: in plain mode every frame waits for
 * its epoch; under commit protection the flow buffer decides (flowbuf.h).
 */
void rdb_pri_nic_from_guest(void *opaque, const uint8_t *frame, size_t len)
{
	static uint8_t copy[RDB_NET_MAX_FRAME];
	struct rdb_pri_nic *n = opaque;
	const struct rdb_ckdev_host *h = n->dev.host;
	uint8_t dscp = (uint8_t)*n->dscp;
	bool marked = false;

	if (remusdb_frame_marked(frame, len, dscp) && len <= sizeof(copy)) {
		memcpy(copy, frame, len);
		remusdb_frame_strip(copy, len, dscp);
		frame = copy;
		marked = true;
		n->dev.st->marked_frames++;
	}
	switch (h->gate(h->opaque)) {
	case RDB_OUT_DROP:
		return;		/* the other copy runs: nothing leaves here */
	case RDB_OUT_WIRE:
		/* unprotected, or before the initial state's stop: whatever
		 * it tells of is in every state the backup could run */
		rdb_nic_to_wire(&n->nic, frame, len);
		return;
	case RDB_OUT_FLOW:
		rdb_flowbuf_from_guest(&n->fb, n->dev.ck->open_epoch, marked,
				       frame, len, wire_sink, n);
		return;
	case RDB_OUT_HOLD:	/* held whatever the mode: I6 */
	case RDB_OUT_EPOCH:
		rdb_netbuf_hold(&n->nb, n->dev.ck->open_epoch, frame, len);
		return;
	}
}

/* A frame from the network, on its way to the guest: the role may take
 * it; the flow buffer learns of flows the peer ends. */
static bool from_wire(void *opaque, const uint8_t *frame, size_t len)
{
	struct rdb_pri_nic *n = opaque;
	const struct rdb_ckdev_host *h = n->dev.host;

	if (h->from_wire && !h->from_wire(h->opaque, n->dev.index, frame, len))
		return false;
	if (n->dev.ck->cp && n->dev.ck->active)
		rdb_flowbuf_from_wire(&n->fb, frame, len);
	return true;
}

static void flow_rec_collect(void *opaque, const struct rdb_flow_rec *r)
{
	struct rdb_buf *b = opaque;

	rdb_buf_append(b, r, sizeof(*r));
}

/*
 * Epoch N's FLOWS, queued with N's other frames: the flows that changed
 * while N was open.  Called while the VM is stopped, after the frames
 * it sent before stopping were read.
 */
static int put_flows(struct rdb_pri_nic *n, uint64_t epoch)
{
	struct rdb_ckpt *ck = n->dev.ck;
	struct rdb_buf recs;
	size_t k, per = RDB_PROTO_MAX_PAYLOAD / RDB_FLOWREC_LEN - 1;
	int rc = 0;

	rdb_buf_init(&recs);
	k = rdb_flowbuf_take_changes(&n->fb, flow_rec_collect, &recs);
	if (recs.len != k * sizeof(struct rdb_flow_rec)) {
		rdb_buf_dispose(&recs);
		return -ENOMEM;
	}
	for (size_t at = 0; rc == 0 && at < k; at += per) {
		size_t m = k - at < per ? k - at : per;

		rc = rdb_proto_put_flows(n->dev.host->epoch_out(n->dev.host->opaque),
					 n->dev.index, epoch, (const struct rdb_flow_rec *)recs.data + at,
					 m);
		ck->epoch_recs++;
		ck->epoch_bytes += 4 + m * RDB_FLOWREC_LEN;
	}
	rdb_buf_dispose(&recs);
	return rc;
}

/* ---- hooks ---- */

static int nic_start(struct rdb_ckdev *dev, char *err, size_t errlen)
{
	struct rdb_pri_nic *n = (struct rdb_pri_nic *)dev;

	(void)err;
	(void)errlen;
	/* Flows learned in an earlier protection are stale (nothing held:
	 * that protection's end released it). */
	rdb_flowbuf_forget_flows(&n->fb);
	return 0;
}

/* The VM is still stopped: every frame it sent so far is epoch <= N.
 * Under commit protection that must hold exactly (the backup's flow
 * check compares against it): read what QEMU already wrote. */
static int nic_checkpoint(struct rdb_ckdev *dev, uint64_t epoch)
{
	struct rdb_pri_nic *n = (struct rdb_pri_nic *)dev;

	if (!dev->ck->cp)
		return 0;
	rdb_nic_poll_guest(&n->nic);
	if (dev->ck->features & RDB_FEATURE_FLOWS)
		return put_flows(n, epoch);
	rdb_flowbuf_forget_changes(&n->fb);
	return 0;
}

static bool nic_in_use(const struct rdb_ckdev *dev)
{
	return rdb_nic_connected(&((const struct rdb_pri_nic *)dev)->nic);
}

static void nic_close(struct rdb_ckdev *dev)
{
	rdb_pri_nic_free((struct rdb_pri_nic *)dev);
}

static void nic_status(const struct rdb_ckdev *dev, json_t *o)
{
	const struct rdb_pri_nic *n = (const struct rdb_pri_nic *)dev;

	json_object_set_new(o, "socket", json_string(n->nic.path));
	json_object_set_new(o, "client_connected",
			    json_boolean(rdb_nic_connected(&n->nic)));
	json_object_set_new(o, "held_frames",
			    json_integer((json_int_t)rdb_pri_nic_held_frames(n)));
	json_object_set_new(o, "held_bytes",
			    json_integer((json_int_t)rdb_pri_nic_held_bytes(n)));
	/* held for an epoch and released at its ACK (plain Remus) */
	json_object_set_new(o, "released_frames",
			    json_integer((json_int_t)n->nb.released));
	if (dev->ck->cp)
		json_object_set_new(o, "flows", json_integer(
			(json_int_t)rdb_flowbuf_flows(&n->fb)));
}

static void nic_metrics(const struct rdb_ckdev *dev, struct rdb_prom *m)
{
	const struct rdb_pri_nic *n = (const struct rdb_pri_nic *)dev;

	rdb_prom_add(m, "remusdb_nic_output_held_frames", RDB_PROM_GAUGE,
		     "Guest packets of one NIC held until their checkpoint commits.",
		     (double)rdb_pri_nic_held_frames(n), "nic", dev->id, NULL);
	rdb_prom_add(m, "remusdb_nic_connected", RDB_PROM_GAUGE,
		     "1 when the hypervisor is connected to the NIC's socket.",
		     rdb_nic_connected(&n->nic) ? 1.0 : 0.0, "nic", dev->id, NULL);
}

static const struct rdb_ckdev_ops nic_ops = {
	.kind = "nic",
	.start = nic_start,
	.checkpoint = nic_checkpoint,
	/* committed: the role releases output itself, in its order (a
	 * decision or a handover may hold it past the ACK) */
	.in_use = nic_in_use,
	.close = nic_close,
	.status = nic_status,
	.metrics = nic_metrics,
};

/* ---- the role's calls ---- */

int rdb_pri_nic_new(struct rdb_pri_nic **out, unsigned index, const char *vm,
		    const uint32_t *dscp, struct rdb_ckpt *ck,
		    const struct rdb_ckdev_host *host, struct rdb_vm_stats *st)
{
	struct rdb_pri_nic *n = calloc(1, sizeof(*n));
	int rc;

	if (!n)
		return -ENOMEM;
	rdb_ckdev_init(&n->dev, &nic_ops, index, vm, ck, host, st);
	n->dscp = dscp;
	rdb_nic_init(&n->nic);
	rc = rdb_netbuf_init(&n->nb, 0);
	if (rc == 0)
		rc = rdb_flowbuf_init(&n->fb, 0, 0);
	if (rc < 0) {
		rdb_netbuf_dispose(&n->nb);
		free(n);
		return rc;
	}
	*out = n;
	return 0;
}

int rdb_pri_nic_open(struct rdb_pri_nic *n, struct rdb_evloop *loop,
		     const char *sock_path, const char *tap, char *err,
		     size_t errlen)
{
	int rc = rdb_nic_open(&n->nic, loop, n->dev.vm, sock_path, tap,
			      rdb_pri_nic_from_guest, n, err, errlen);

	if (rc == 0)
		rdb_nic_set_wire_filter(&n->nic, from_wire);
	return rc;
}

void rdb_pri_nic_adopted(struct rdb_pri_nic *n)
{
	rdb_nic_set_wire_filter(&n->nic, from_wire);
}

void rdb_pri_nic_free(struct rdb_pri_nic *n)
{
	if (!n)
		return;
	rdb_nic_close(&n->nic);
	rdb_netbuf_dispose(&n->nb);
	rdb_flowbuf_dispose(&n->fb);
	free(n);
}

void rdb_pri_nic_release(struct rdb_pri_nic *n, uint64_t upto,
			 rdb_netbuf_sink sink, void *opaque)
{
	if (!sink) {
		sink = wire_sink;
		opaque = n;
	}
	rdb_flowbuf_release(&n->fb, upto, sink, opaque);
	rdb_netbuf_release(&n->nb, upto, sink, opaque);
}

void rdb_pri_nic_release_held(struct rdb_pri_nic *n, rdb_netbuf_sink sink,
			      void *opaque)
{
	if (!sink) {
		sink = wire_sink;
		opaque = n;
	}
	rdb_netbuf_release(&n->nb, UINT64_MAX, sink, opaque);
}

uint64_t rdb_pri_nic_discard(struct rdb_pri_nic *n)
{
	return rdb_netbuf_clear(&n->nb) + rdb_flowbuf_clear(&n->fb);
}

uint64_t rdb_pri_nic_discard_held(struct rdb_pri_nic *n)
{
	return rdb_netbuf_clear(&n->nb);
}

void rdb_pri_nic_hold(struct rdb_pri_nic *n, uint64_t epoch,
		      const uint8_t *frame, size_t len)
{
	rdb_netbuf_hold(&n->nb, epoch, frame, len);
}

void rdb_pri_nic_to_guest(struct rdb_pri_nic *n, const uint8_t *frame,
			  size_t len)
{
	rdb_nic_to_guest(&n->nic, frame, len);
}

void rdb_pri_nic_to_wire(struct rdb_pri_nic *n, const uint8_t *frame,
			 size_t len)
{
	rdb_nic_to_wire(&n->nic, frame, len);
}

uint64_t rdb_pri_nic_held_frames(const struct rdb_pri_nic *n)
{
	return rdb_netbuf_frames(&n->nb) + rdb_flowbuf_frames(&n->fb);
}

uint64_t rdb_pri_nic_held_bytes(const struct rdb_pri_nic *n)
{
	return rdb_netbuf_bytes(&n->nb) + rdb_flowbuf_bytes(&n->fb);
}

bool rdb_pri_nic_connected(const struct rdb_pri_nic *n)
{
	return rdb_nic_connected(&n->nic);
}

void rdb_pri_nic_add_flow_stats(const struct rdb_pri_nic *n,
				struct rdb_flowbuf_stats *sum, uint64_t *flows)
{
	const struct rdb_flowbuf_stats *s = &n->fb.st;

	sum->now_frames += s->now_frames;
	sum->now_bytes += s->now_bytes;
	sum->marked_frames += s->marked_frames;
	sum->marked_bytes += s->marked_bytes;
	sum->behind_frames += s->behind_frames;
	sum->behind_bytes += s->behind_bytes;
	sum->synack_frames += s->synack_frames;
	sum->ack_frames += s->ack_frames;
	sum->released += s->released;
	sum->released_bytes += s->released_bytes;
	sum->superseded += s->superseded;
	sum->dropped += s->dropped;
	sum->dropped_bytes += s->dropped_bytes;
	sum->placeholders += s->placeholders;
	sum->discarded += s->discarded;
	sum->untracked += s->untracked;
	sum->flows_created += s->flows_created;
	sum->flows_ended += s->flows_ended;
	sum->flows_evicted += s->flows_evicted;
	if (s->last_release_max_hold_ns > sum->last_release_max_hold_ns)
		sum->last_release_max_hold_ns = s->last_release_max_hold_ns;
	if (s->max_hold_ns > sum->max_hold_ns)
		sum->max_hold_ns = s->max_hold_ns;
	*flows += rdb_flowbuf_flows(&n->fb);
}

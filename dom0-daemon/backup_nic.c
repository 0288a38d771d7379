// SPDX-License-Identifier: GPL-2.0-only
/*
 * The backup's NIC device (backup_dev.h): one of the VM's NICs here.
 * Under commit protection it keeps its guest's flows as of the committed
 * epoch (the stage applies each epoch's FLOWS to it), checked after a
 * failover (flowcheck.h): each NIC's own, so a flow held on one NIC
 * never delays another's.  After a failover it carries the restored
 * guest's frames between its socket and this host's tap, holding what
 * the guest sends until the restore is known to have worked.
 */
#define RDB_COMPONENT "backup"
#include "backup_dev.h"
#include "clock.h"
#include "daemon.h"
#include "flowcheck.h"
#include "log.h"
#include "nic.h"
#include "role.h"
#include "vm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The restored guest's frames held until its restore ends, every NIC's
 * together (struct rdb_bakrun's held_bytes). */
#define GUEST_HELD_MAX (8u << 20)

struct bak_nic {
	struct rdb_bakdev dev;
	struct rdb_nic nic;
	struct rdb_flowcheck fc;
	bool open;			/* on its socket and this host's tap */
	bool ticking;			/* the restored guest runs: its check's
					 * ticks are due (host->tick_soon) */
	/* what the restored guest sent on it while its restore's outcome
	 * was unknown (host->run->held): u64 length, bytes */
	struct rdb_buf held;
	uint64_t held_frames, held_dropped;
};

static struct bak_nic *nic_of(const struct rdb_bakdev *dev)
{
	return (struct bak_nic *)dev;
}

static bool cp(const struct bak_nic *n)
{
	return rdb_vm_config_commit_protection(&n->dev.host->vm->cfg);
}

/* Its check under way (a flow probed, or its fence up). */
static bool fc_pending(const struct bak_nic *n)
{
	return n->fc.started && rdb_flowcheck_pending(&n->fc);
}

/* A flow that shows up after the check's last tick gets its deadline
 * and its probes from a new tick. */
static void fc_rearm(struct bak_nic *n)
{
	const struct rdb_bakdev_host *h = n->dev.host;

	if (!n->ticking || !fc_pending(n))
		return;
	if (h->tick_soon(h->opaque) < 0)
		LOGVM(WARN, h->vm->name, "no timer for the flow check: a late "
		      "flow's check has no deadline");
}

/* After failover nothing waits for a checkpoint: there is no backup.
 * Under commit protection the flow check may hold a frame a while. */
static void on_guest_frame(void *opaque, const uint8_t *frame, size_t len)
{
	struct bak_nic *n = opaque;
	struct rdb_bakrun *run = n->dev.host->run;

	if (run->running_ns) {
		/* how long the restored guest took to say anything (under
		 * TCG: its code translated afresh, tens of ms) */
		LOGVM(INFO, n->dev.host->vm->name, "the restored guest's first "
		      "frame, %.1f ms after it runs", (double)(rdb_now_ns() -
		      run->running_ns) / RDB_NS_PER_MS);
		run->running_ns = 0;
	}
	if (run->held) {
		uint64_t hdr = len;
		size_t at = n->held.len;

		if (run->held_bytes + sizeof(hdr) + len > GUEST_HELD_MAX ||
		    rdb_buf_append(&n->held, &hdr, sizeof(hdr)) < 0 ||
		    rdb_buf_append(&n->held, frame, len) < 0) {
			n->held.len = at;
			n->held_dropped++;	/* TCP sends it again */
		} else {
			run->held_bytes += sizeof(hdr) + len;
			n->held_frames++;
		}
		return;
	}
	/* (without commit protection no flow check started: all pass) */
	if (rdb_flowcheck_from_guest(&n->fc, frame, len, rdb_now_ns()))
		rdb_nic_to_wire(&n->nic, frame, len);
	fc_rearm(n);
}

static bool on_wire_frame(void *opaque, const uint8_t *frame, size_t len)
{
	struct bak_nic *n = opaque;
	bool pass = rdb_flowcheck_from_wire(&n->fc, frame, len, rdb_now_ns());

	fc_rearm(n);
	return pass;
}

static void fc_to_wire(void *opaque, const uint8_t *frame, size_t len)
{
	struct bak_nic *n = opaque;

	rdb_nic_to_wire(&n->nic, frame, len);
}

static void fc_to_guest(void *opaque, const uint8_t *frame, size_t len)
{
	struct bak_nic *n = opaque;

	rdb_nic_to_guest(&n->nic, frame, len);
}

/* Every NIC's check in one: counts summed, times the longest. */
static void fc_stats(struct rdb_bakdev *const *v, unsigned nv,
		     struct rdb_flowcheck_stats *sum, uint64_t *flows)
{
	memset(sum, 0, sizeof(*sum));
	*flows = 0;
	for (unsigned k = 0; k < nv; k++) {
		const struct rdb_flowcheck *fc = &nic_of(v[k])->fc;
		const struct rdb_flowcheck_stats *s = &fc->st;

		sum->checked += s->checked;
		sum->consistent += s->consistent;
		sum->reset += s->reset;
		sum->unanswered += s->unanswered;
		sum->probes += s->probes;
		sum->held_out += s->held_out;
		sum->held_in += s->held_in;
		sum->dropped += s->dropped;
		if (s->fence_ns > sum->fence_ns)
			sum->fence_ns = s->fence_ns;
		sum->fence_timed_out = sum->fence_timed_out || s->fence_timed_out;
		if (s->check_ns > sum->check_ns)
			sum->check_ns = s->check_ns;
		*flows += rdb_flowcheck_flows(fc);
	}
}

/* The first NIC's check started: every NIC's did (rollback). */
static bool fc_started(struct rdb_bakdev *const *v, unsigned nv)
{
	return nv && nic_of(v[0])->fc.started;
}

static void log_flowcheck(const struct rdb_bakdev_host *h,
			  struct rdb_bakdev *const *v, unsigned nv)
{
	struct rdb_flowcheck_stats sum;
	const struct rdb_flowcheck_stats *st = &sum;
	uint64_t flows;

	fc_stats(v, nv, &sum, &flows);
	LOGVM(INFO, h->vm->name, "TCP flows after the failover (%u NIC%s): %llu "
	      "checked in %.0f ms, %llu consistent, %llu reset at both ends, "
	      "%llu unanswered; clients' input fenced %.0f ms%s", nv,
	      nv == 1 ? "" : "s", (unsigned long long)st->checked,
	      (double)st->check_ns / RDB_NS_PER_MS,
	      (unsigned long long)st->consistent, (unsigned long long)st->reset,
	      (unsigned long long)st->unanswered,
	      (double)st->fence_ns / RDB_NS_PER_MS,
	      st->fence_timed_out ? " (deadline: no answer from the guest)" : "");
}

/* ---- hooks ---- */

/* Every flow of the committed epoch is held and checked from here on:
 * the restored guest may have forgotten what an epoch that never
 * committed told a client (commit protection only). */
static void nic_rollback(struct rdb_bakdev *dev, uint64_t t0)
{
	struct bak_nic *n = nic_of(dev);
	const struct rdb_vm_config *cfg = &dev->host->vm->cfg;
	struct rdb_flowcheck_ops ops = {
		.to_wire = fc_to_wire, .to_guest = fc_to_guest, .opaque = n,
	};

	if (!cp(n))
		return;
	rdb_flowcheck_start(&n->fc, &ops, cfg->event_port,
			    (uint64_t)cfg->failover_fence_ms * RDB_NS_PER_MS, t0);
}

/* The guest's NIC k opened here on its socket (run_dir/NAME.net,
 * NAME.net1, ...: what the restore gives QEMU) and this host's tap. */
static int nic_open(struct rdb_bakdev *dev)
{
	struct bak_nic *n = nic_of(dev);
	const struct rdb_bakdev_host *h = dev->host;
	const struct rdb_vm *vm = h->vm;
	unsigned k = dev->index;
	struct rdb_nic_spec sp;
	char path[108], sock[200], err[256];
	int rc;

	if (rdb_vm_config_nic(&vm->cfg, k, sock, sizeof(sock), &sp) < 0) {
		LOGVM(ERROR, vm->name, "NIC %u: its extra_nic is malformed", k);
		return -EINVAL;
	}
	if (k == 0)
		snprintf(path, sizeof(path), "%s/%s.net", h->d->cfg.run_dir,
			 vm->name);
	else
		snprintf(path, sizeof(path), "%s/%s.net%u", h->d->cfg.run_dir,
			 vm->name, k);
	rc = rdb_nic_open(&n->nic, h->d->loop, vm->name, path, sp.backup_tap,
			  on_guest_frame, n, err, sizeof(err));
	if (rc < 0) {
		LOGVM(ERROR, vm->name, "guest NIC %u on the backup: %s", k, err);
		return rc;
	}
	n->open = true;
	rc = rdb_daemon_share_with_qemu(h->d, path, -1);
	if (rc == 0 && cp(n))
		rdb_nic_set_wire_filter(&n->nic, on_wire_frame);
	return rc;
}

static void nic_close(struct rdb_bakdev *dev)
{
	struct bak_nic *n = nic_of(dev);

	rdb_nic_close(&n->nic);
	n->open = false;
}

static void nic_restore(const struct rdb_bakdev *dev, struct rdb_bakdev_restore *r)
{
	const struct bak_nic *n = nic_of(dev);

	if (n->open && r->nnets < RDB_NICS_MAX)
		r->nets[r->nnets++] = n->nic.path;
}

static bool nic_to_wire(struct rdb_bakdev *dev, const uint8_t *frame, size_t len)
{
	struct bak_nic *n = nic_of(dev);

	if (!n->open)
		return false;
	rdb_nic_to_wire(&n->nic, frame, len);
	return true;
}

static bool nic_to_guest(struct rdb_bakdev *dev, const uint8_t *frame,
			 size_t len)
{
	struct bak_nic *n = nic_of(dev);

	if (!n->open)
		return false;
	rdb_nic_to_guest(&n->nic, frame, len);
	return true;
}

/* The guest's helper answered the failover event once its DBMS could see
 * it (remusdb.h): the fence comes down. */
static void nic_acked(struct rdb_bakdev *dev)
{
	rdb_flowcheck_lift_fence(&nic_of(dev)->fc, rdb_now_ns());
}

static bool nic_pending(const struct rdb_bakdev *dev, char *why, size_t whylen)
{
	if (!fc_pending(nic_of(dev)))
		return false;
	snprintf(why, whylen, "the flow check after its failover still runs "
		 "(up to failover_fence_ms)");
	return true;
}

/* Into the primary's NIC device k (dst[k]), with QEMU connected and the
 * frames in flight queued; one for each of the guest's NICs. */
static int nic_hand_over(struct rdb_bakdev *dev, const struct rdb_nic_dst *dst,
			 unsigned ndst, struct rdb_handover *h, char *err,
			 size_t errlen)
{
	struct bak_nic *n = nic_of(dev);
	const struct rdb_vm *vm = dev->host->vm;
	unsigned k = dev->index, nnics = rdb_vm_config_nnics(&vm->cfg);

	if (ndst != nnics) {
		snprintf(err, errlen, "VM %s: the restored guest has %u NIC(s) "
			 "here, its VM file %u", vm->name, nnics, ndst);
		return -EINVAL;
	}
	if (rdb_nic_move(dst[k].nic, &n->nic, dst[k].from_guest,
			 dst[k].opaque) < 0) {
		snprintf(err, errlen, "handing the guest's NICs over: event loop");
		return -ENOMEM;
	}
	n->open = false;
	return 0;
}

static void nic_hand_back(struct rdb_bakdev *dev, const struct rdb_nic_dst *dst,
			  unsigned ndst)
{
	struct bak_nic *n = nic_of(dev);
	unsigned k = dev->index;

	if (rdb_nic_move(&n->nic, dst[k].nic, on_guest_frame, n) < 0) {
		LOGVM(ERROR, dev->host->vm->name, "NIC %u could not be taken "
		      "back from the primary role", k);
		return;
	}
	n->open = true;
	if (cp(n))
		rdb_nic_set_wire_filter(&n->nic, on_wire_frame);
}

/* (closed already: the role closes its devices before it frees them) */
static void nic_free(struct rdb_bakdev *dev)
{
	struct bak_nic *n = nic_of(dev);

	rdb_flowcheck_dispose(&n->fc);
	rdb_buf_dispose(&n->held);
	free(n);
}

/* ---- per kind ---- */

/* The restored guest runs: every NIC's check probes and counts from now
 * (under commit protection, the check armed at the failover). */
static void nics_running(const struct rdb_bakdev_host *h,
			 struct rdb_bakdev *const *v, unsigned nv)
{
	if (!fc_started(v, nv))
		return;
	for (unsigned k = 0; k < nv; k++) {
		rdb_flowcheck_guest_running(&nic_of(v[k])->fc, rdb_now_ns());
		nic_of(v[k])->ticking = true;
	}
	if (h->tick_soon(h->opaque) < 0) {
		LOGVM(WARN, h->vm->name, "no timer for the flow check: lifting "
		      "its fence now");
		for (unsigned k = 0; k < nv; k++)
			nic_acked(v[k]);
	}
}

/* The restore's outcome is known: the frames its guest sent meanwhile
 * go out (ok), each through its NIC's flow check, or are dropped. */
static void nics_release(const struct rdb_bakdev_host *h,
			 struct rdb_bakdev *const *v, unsigned nv, bool ok)
{
	uint64_t frames = 0, lost = 0;

	for (unsigned k = 0; k < nv; k++) {
		frames += nic_of(v[k])->held_frames;
		lost += nic_of(v[k])->held_dropped;
	}
	if (!ok && frames + lost > 0)
		LOGVM(WARN, h->vm->name, "dropped the %llu frame(s) the failed "
		      "restore's guest sent (none reached the wire)",
		      (unsigned long long)(frames + lost));
	for (unsigned k = 0; k < nv; k++) {
		struct bak_nic *n = nic_of(v[k]);

		while (ok && n->held.len >= sizeof(uint64_t)) {
			uint64_t len;

			memcpy(&len, n->held.data, sizeof(len));
			rdb_buf_consume(&n->held, sizeof(len));
			on_guest_frame(n, n->held.data, (size_t)len);
			rdb_buf_consume(&n->held, (size_t)len);
		}
		rdb_buf_dispose(&n->held);
		n->held_frames = n->held_dropped = 0;
	}
	if (ok && lost)
		LOGVM(WARN, h->vm->name, "%llu frame(s) the restored guest sent "
		      "before its restore ended did not fit in %u MiB and were "
		      "dropped", (unsigned long long)lost, GUEST_HELD_MAX >> 20);
}

/* Every NIC's check; the soonest any of them wants.  All done: the
 * summary, one line for the VM. */
static uint64_t nics_tick(const struct rdb_bakdev_host *h,
			  struct rdb_bakdev *const *v, unsigned nv)
{
	uint64_t next = 0;

	for (unsigned k = 0; k < nv; k++) {
		uint64_t x = rdb_flowcheck_tick(&nic_of(v[k])->fc, rdb_now_ns());

		if (x && (!next || x < next))
			next = x;
	}
	if (!next)
		log_flowcheck(h, v, nv);
	return next;
}

static void nics_status(const struct rdb_bakdev_host *h,
			struct rdb_bakdev *const *v, unsigned nv, json_t *o)
{
	struct rdb_flowcheck_stats sum;
	const struct rdb_flowcheck_stats *st = &sum;
	unsigned open = 0;
	bool all = true;
	uint64_t flows;
	json_t *by;

	for (unsigned k = 0; k < nv; k++) {
		if (!nic_of(v[k])->open)
			continue;
		open++;
		all = all && rdb_nic_connected(&nic_of(v[k])->nic);
	}
	json_object_set_new(o, "guest_nic_connected", json_boolean(open && all));
	json_object_set_new(o, "nics", json_integer((json_int_t)open));
	if (!rdb_vm_config_commit_protection(&h->vm->cfg))
		return;
	fc_stats(v, nv, &sum, &flows);
	json_object_set_new(o, "flows", json_pack(
		"{s:I, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:b, s:f}",
		"known", (json_int_t)flows,
		"check_started", fc_started(v, nv),
		"checked", (json_int_t)st->checked,
		"consistent", (json_int_t)st->consistent,
		"reset", (json_int_t)st->reset,
		"unanswered", (json_int_t)st->unanswered,
		"probes", (json_int_t)st->probes,
		"held_out", (json_int_t)st->held_out,
		"held_in", (json_int_t)st->held_in,
		"dropped", (json_int_t)st->dropped,
		"fence_ms", (double)st->fence_ns / RDB_NS_PER_MS,
		"fence_timed_out", st->fence_timed_out,
		"check_ms", (double)st->check_ns / RDB_NS_PER_MS));
	by = json_array();
	for (unsigned k = 0; by && k < nv; k++)
		json_array_append_new(by, json_integer((json_int_t)
			rdb_flowcheck_flows(&nic_of(v[k])->fc)));
	json_object_set_new(json_object_get(o, "flows"), "known_by_nic", by);
}

/* The flow check's series (commit protection only). */
static void nics_metrics(const struct rdb_bakdev_host *h,
			 struct rdb_bakdev *const *v, unsigned nv,
			 struct rdb_prom *p)
{
	const enum rdb_prom_type C = RDB_PROM_COUNTER, G = RDB_PROM_GAUGE;
	static const char *const H = "Flows checked at failover, by verdict.";
	struct rdb_flowcheck_stats sum;
	const struct rdb_flowcheck_stats *st = &sum;
	uint64_t flows;

	if (!rdb_vm_config_commit_protection(&h->vm->cfg))
		return;
	fc_stats(v, nv, &sum, &flows);
	rdb_prom_add(p, "remusdb_flows_known", G,
		     "TCP flows known to the backup's failover check.",
		     (double)flows, NULL);
	rdb_prom_add(p, "remusdb_failover_flows_total", C, H,
		     (double)st->consistent, "verdict", "consistent", NULL);
	rdb_prom_add(p, "remusdb_failover_flows_total", C, H,
		     (double)st->reset, "verdict", "reset", NULL);
	rdb_prom_add(p, "remusdb_failover_flows_total", C, H,
		     (double)st->unanswered, "verdict", "unanswered", NULL);
	rdb_prom_add(p, "remusdb_failover_fence_seconds", G,
		     "How long the last failover fenced unchecked flows.",
		     (double)st->fence_ns / RDB_NS_PER_S, NULL);
}

const struct rdb_bakdev_ops rdb_bak_nic_ops = {
	.kind = "nic",
	.rollback = nic_rollback,
	.open = nic_open,
	.close = nic_close,
	.restore = nic_restore,
	.to_wire = nic_to_wire,
	.to_guest = nic_to_guest,
	.acked = nic_acked,
	.pending = nic_pending,
	.hand_over = nic_hand_over,
	.hand_back = nic_hand_back,
	.free = nic_free,
	.running = nics_running,
	.release = nics_release,
	.tick = nics_tick,
	.status = nics_status,
	.metrics = nics_metrics,
};

int rdb_bak_nic_add(struct rdb_bakdevs *t, struct rdb_stage *st, unsigned index)
{
	const struct rdb_bakdev_host *host = t->host;
	struct bak_nic *n;
	int rc;

	if (index >= RDB_NICS_MAX)
		return -EINVAL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	rdb_bakdev_init(&n->dev, &rdb_bak_nic_ops, index, host);
	rdb_nic_init(&n->nic);
	rdb_flowcheck_init(&n->fc, host->vm->name, 0);
	rdb_buf_init(&n->held);
	rc = rdb_bakdevs_add(t, &n->dev);
	if (rc < 0) {
		nic_free(&n->dev);
		return rc;
	}
	st->flows[index] = &n->fc;
	return 0;
}

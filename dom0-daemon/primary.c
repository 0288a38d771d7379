// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "primary"
#include "primary_int.h"
#include "role.h"
#include "cpulist.h"
#include "actlog.h"
#include "bgjob.h"
#include "lineage.h"
#include "wmap.h"
#include "linksec.h"
#include "qcow2.h"
#include "roimage.h"
#include "tlsrelay.h"

#include <errno.h>
#include <pthread.h>
#include <sys/random.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* stop-late-in-initial-state: how long the daemon works on after QEMU
 * stopped the guest, before it stalls */
#define FAULT_INITIAL_BUSY_NS (400 * RDB_NS_PER_MS)
/* slow-checkpoint: the next pause lasts this long (its resume is late,
 * the daemon beating meanwhile), as a slow hypervisor's would;
 * slow-checkpoint=MS sets it, within these bounds */
#define FAULT_SLOW_PAUSE_NS (1200 * RDB_NS_PER_MS)
#define FAULT_SLOW_PAUSE_MIN_MS 100
#define FAULT_SLOW_PAUSE_MAX_MS 10000
/* A checkpoint's wait for the encoders this long is logged. */
#define ENCODER_WAIT_LOG_NS (100 * RDB_NS_PER_MS)
/* Fault slow-encode: the encoders finish an epoch this late. */
#define FAULT_SLOW_ENCODE_NS (600 * RDB_NS_PER_MS)

static int start_colo(struct rdb_primary *p, char *err, size_t errlen);
static void drop(struct rdb_primary *p, const char *why, bool backup_stopped);
static void colo_cancel(struct rdb_primary *p);

/* ---- COLO parser callbacks (the VM may be stopped: stay in memory) ---- */

static int record_page(struct rdb_primary *p, uint32_t block, uint64_t offset,
		       const uint8_t *data, uint8_t fill);

static int on_config(void *opaque, const uint8_t *section, size_t len)
{
	struct rdb_primary *p = opaque;

	free(p->config_section);
	p->config_section = malloc(len);
	if (!p->config_section)
		return -ENOMEM;
	memcpy(p->config_section, section, len);
	p->config_len = len;
	return 0;
}

/* The read-only images the VM's QEMU arguments name, and the backing
 * files of its qcow2 disks (qcow2.h), fingerprinted for the backup to
 * check its own files against (roimage.h).  One that cannot be read
 * here is logged and left out: QEMU opened it already. */
static json_t *readonly_images(struct rdb_vm *vm)
{
	struct rdb_roimage ro[RDB_ROIMAGE_MAX + RDB_QCOW2_CHAIN_MAX];
	char chain[RDB_QCOW2_CHAIN_MAX][512];
	json_t *a = json_array();
	unsigned n = 0, nb;
	char err[600];

	if (rdb_roimages_list(vm->cfg.qemu_arg.v, vm->cfg.qemu_arg.n, ro, &n,
			      err, sizeof(err)) < 0)
		n = 0;	/* (the config check refused that already) */
	for (unsigned k = 0; k < rdb_vm_config_ndisks(&vm->cfg); k++) {
		const char *path = rdb_vm_config_disk_image(&vm->cfg, k);

		if (rdb_qcow2_backing_chain(path, chain, RDB_QCOW2_CHAIN_MAX, &nb,
					    err, sizeof(err)) < 0) {
			LOGVM(WARN, vm->name, "disk %u's backing files: %s (the "
			      "backup cannot check its copies)", k, err);
			continue;
		}
		for (unsigned i = 0; i < nb && n < RDB_ROIMAGE_MAX + RDB_QCOW2_CHAIN_MAX;
		     i++) {
			memset(&ro[n], 0, sizeof(ro[n]));
			snprintf(ro[n].path, sizeof(ro[n].path), "%s", chain[i]);
			n++;
		}
	}
	for (unsigned i = 0; a && i < n; i++) {
		if (rdb_roimage_fingerprint(&ro[i], err, sizeof(err)) < 0) {
			LOGVM(WARN, vm->name, "read-only image: %s (the backup "
			      "cannot check its copy)", err);
			continue;
		}
		json_array_append_new(a, json_pack("{s:s, s:I, s:s}", "path",
						   ro[i].path, "size",
						   (json_int_t)ro[i].size,
						   "sha256", ro[i].sha256));
	}
	return a;
}

static int on_ram_blocks(void *opaque, const struct rdb_ram_block *blocks,
			 size_t n)
{
	struct rdb_primary *p = opaque;
	struct rdb_vm *vm = p->vm;

	json_t *j = rdb_vm_config_to_json(&vm->cfg);
	char *text, gen[17];
	int rc;

	/* What the backup needs to take part in the failover decision
	 * (witness.h) and to tell protections apart (the failover event);
	 * not a config option: the backup takes it out before applying. */
	snprintf(gen, sizeof(gen), "%016llx", (unsigned long long)p->generation);
	if (j)
		json_object_set_new(j, "_protection", json_pack("{s:s, s:s, s:s, s:s, s:o}",
				    "generation", gen, "on_peer_loss",
				    rdb_peer_loss_name(vm->peer_loss), "registered",
				    p->registered, "primary", p->d->node,
				    "readonly", readonly_images(vm)));
	text = j ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	if (!text)
		return -ENOMEM;
	LOGVM(INFO, vm->name, "initial stream: %zu RAM blocks", n);
	rc = rdb_proto_put_vm_setup(&p->out, blocks, n, p->config_section,
				    p->config_len, text);
	free(text);
	if (rc == 0) {
		uint64_t ram = 0;

		for (size_t i = 0; i < n; i++)
			ram += blocks[i].used_length;
		rc = rdb_pri_start_pool(p, ram);
		if (rc < 0)
			LOGVM(ERROR, vm->name, "encoder pool: %s", strerror(-rc));
	}
	return rc;
}

static int on_page(void *opaque, uint32_t block, uint64_t offset,
		   const uint8_t *data, uint8_t fill)
{
	struct rdb_primary *p = opaque;
	uint64_t t0 = p->ck.in_pause ? rdb_now_ns() : 0;
	int rc = record_page(p, block, offset, data, fill);

	if (t0)
		p->pause_work_ns += rdb_now_ns() - t0;
	return rc;
}

static int record_page(struct rdb_primary *p, uint32_t block, uint64_t offset,
		       const uint8_t *data, uint8_t fill)
{
	int rc;

	struct rdb_page_run *r;
	size_t before = p->batch.len;

	/* The initial copy (no pause) is streamed in bounded pieces. */
	if (!p->ck.in_pause && p->batch.len >= PAGES_BATCH_BYTES) {
		rc = rdb_pri_batch_flush(p);
		if (rc < 0)
			return rc;
		before = 0;
	}
	p->batch_epoch = p->vm->st.checkpoints;
	rc = rdb_proto_page_record_append(&p->batch, offset, data, fill);
	if (rc < 0)
		return rc;
	r = p->nruns ? &p->runs[p->nruns - 1] : NULL;
	if (!r || r->block != block) {
		if (p->nruns == p->cap_runs) {
			size_t n = p->cap_runs ? p->cap_runs * 2 : 16;
			struct rdb_page_run *a = realloc(p->runs, n * sizeof(*a));

			if (!a)
				return -ENOMEM;
			p->runs = a;
			p->cap_runs = n;
		}
		r = &p->runs[p->nruns++];
		*r = (struct rdb_page_run){ .block = block, .start = before };
	}
	r->count++;
	r->len += p->batch.len - before;
	p->epoch_pages++;
	p->epoch_bytes += data ? RDB_PAGE_SIZE : 1;
	p->vm->st.pages++;
	return 0;
}

/* One write: one wake-up of the hypervisor. */
static int hv_reply(struct rdb_primary *p, enum rdb_hv_reply r)
{
	uint8_t b[RDB_HV_REPLY_MAX_BYTES];
	size_t n = p->hv->reply(r, b);

	if (p->mig_fd < 0)
		return -ENOTCONN;
	return rdb_sock_write_all(p->mig_fd, b, n, rdb_now_ns() + RDB_NS_PER_S);
}

/* The guest stops for checkpoint epoch. */
static int take_checkpoint(struct rdb_primary *p, uint64_t epoch)
{
	int rc;

	rc = hv_reply(p, RDB_HV_STOP);
	if (rc < 0)
		return rc;
	/* The VM stops now, until our RESUME. */
	p->ckpt_start_ns = rdb_now_ns();
	rdb_watchdog_guest_stopped(p->d->wd, p->vm->wd_slot, p->ckpt_start_ns);
	p->pause_work_ns = 0;
	p->ck.in_pause = true;
	rdb_pri_peer_want_write(p);
	if (p->fault_stop_in_pause) {
		p->fault_stop_in_pause = false;
		LOGVM(WARN, p->vm->name,
		      "fault injection: stopping remusdbd inside the pause of epoch %llu",
		      (unsigned long long)epoch);
		raise(SIGSTOP);
	}
	return 0;
}

/*
 * The hypervisor asks for the next checkpoint.  While the encoders still
 * work on the last epoch, the STOP waits for them (pri_encoded): the
 * guest runs on meanwhile and the hypervisor waits, so this loop never
 * waits for the pool (it held the loop 561 ms once, at protection's
 * start, and the watchdog tripped).  The wait has the bound of a pause:
 * on_heartbeat drops protection past PAUSE_OVERRUN_FACTOR times
 * checkpoint_deadline_ms.
 */
static int on_checkpoint_request(void *opaque, uint64_t epoch)
{
	struct rdb_primary *p = opaque;

	if (p->encoding) {
		p->stop_waits = true;
		p->stop_epoch = epoch;
		p->stop_asked_ns = rdb_now_ns();
		p->vm->st.encoder_waits++;
		return 0;
	}
	return take_checkpoint(p, epoch);
}

/* The pool framed an epoch: a checkpoint that waited for it is taken. */
static void pri_encoded(struct rdb_primary *p)
{
	struct rdb_vm *vm = p->vm;
	uint64_t waited;
	char why[160];
	int rc;

	if (!p->stop_waits || !p->ck.active)
		return;
	p->stop_waits = false;
	waited = rdb_now_ns() - p->stop_asked_ns;
	vm->st.encoder_wait_ns += waited;
	if (waited >= ENCODER_WAIT_LOG_NS)
		LOGVM(INFO, vm->name, "checkpoint of epoch %llu waited %.0f ms "
		      "for the encoders to finish epoch %llu (the guest ran "
		      "meanwhile)", (unsigned long long)p->stop_epoch,
		      (double)waited / RDB_NS_PER_MS,
		      (unsigned long long)p->stop_epoch - 1);
	rc = take_checkpoint(p, p->stop_epoch);
	if (rc < 0) {
		snprintf(why, sizeof(why), "cannot tell %s to take checkpoint "
			 "%llu: %s", p->hv->name,
			 (unsigned long long)p->stop_epoch, strerror(-rc));
		rdb_pri_drop_protection(p, why);
	}
}

int rdb_pri_resume_after_epoch(struct rdb_primary *p)
{
	return hv_reply(p, RDB_HV_RESUME);
}

/*
 * A pause longer than checkpoint_deadline_ms with this daemon running
 * (the watchdog covers a stalled one: I5) is the hypervisor's own pace:
 * a burst of dirty pages, a slow disk drain, a host short of CPU.  One
 * is logged and counted; protection drops when PAUSE_OVERRUNS_MAX of
 * them fall within PAUSE_OVERRUN_WINDOW_NS (the checkpoints cost more
 * than the operator allows), or when one pause reaches
 * PAUSE_OVERRUN_FACTOR times the deadline (on_heartbeat).  A single
 * late checkpoint is no reason to leave the VM unprotected: the next is
 * usually short again.  The drop itself waits for the heartbeat tick
 * (this runs inside the stream's parser).
 */
static void pause_overran(struct rdb_primary *p, uint64_t epoch,
			  uint64_t pause_ns, uint64_t now)
{
	struct rdb_vm *vm = p->vm;
	const unsigned n = PAUSE_OVERRUNS_MAX;

	vm->st.deadline_misses++;
	memmove(p->overrun_ns + 1, p->overrun_ns, (n - 1) * sizeof(p->overrun_ns[0]));
	p->overrun_ns[0] = now;
	LOGVM(WARN, vm->name, "checkpoint of epoch %llu paused the guest %.0f ms, "
	      "over checkpoint_deadline_ms (%u ms; %s's own pace, or a host "
	      "short of CPU: remusdbd did not stall)", (unsigned long long)epoch,
	      (double)pause_ns / RDB_NS_PER_MS, vm->cfg.checkpoint_deadline_ms,
	      p->hv->name);
	if (p->overrun_ns[n - 1] && now - p->overrun_ns[n - 1] <= PAUSE_OVERRUN_WINDOW_NS)
		snprintf(p->overrun_why, sizeof(p->overrun_why), "%u checkpoints "
			 "over checkpoint_deadline_ms (%u ms) within %.0f s",
			 n, vm->cfg.checkpoint_deadline_ms,
			 (double)(now - p->overrun_ns[n - 1]) / RDB_NS_PER_S);
}

/* The guest runs again after the pause of epoch (in_pause): the pause is
 * recorded (work_ns of it ours) and checked against the deadline.  Its
 * length. */
static uint64_t pause_ended(struct rdb_primary *p, uint64_t epoch,
			    uint64_t now, uint64_t work_ns)
{
	struct rdb_vm *vm = p->vm;
	uint64_t pause_ns = now - p->ckpt_start_ns;

	rdb_vm_pause_recorded(vm, pause_ns, work_ns);
	p->ck.in_pause = false;
	if (pause_ns > (uint64_t)vm->cfg.checkpoint_deadline_ms * RDB_NS_PER_MS)
		pause_overran(p, epoch, pause_ns, now);
	return pause_ns;
}

/*
 * Fault slow-checkpoint: the guest's resume comes FAULT_SLOW_PAUSE_NS
 * after its pause began, from a timer, as beside a hypervisor slow to
 * finish a checkpoint: this daemon runs all along (heartbeats go to the
 * backup, its frames are read), so only the pause is long.
 */
static uint64_t on_slow_resume(struct rdb_evloop *loop, uint64_t id,
			       void *opaque)
{
	struct rdb_primary *p = opaque;
	struct rdb_vm *vm = p->vm;
	struct rdb_epoch_rec *r = &vm->st.epochs[p->slow_epoch % RDB_PAUSE_RING];
	uint64_t now, pause_ns;
	int rc;

	(void)loop;
	(void)id;
	p->slow_timer = 0;
	/* dropped meanwhile: QEMU left the checkpoints, the guest runs */
	if (!p->ck.active || !p->ck.in_pause)
		return 0;
	rc = rdb_pri_resume_after_epoch(p);
	if (rc < 0) {
		rdb_pri_drop_protection(p, "resuming the guest after a "
					"checkpoint failed");
		return 0;
	}
	now = rdb_now_ns();
	rdb_watchdog_guest_stopped(p->d->wd, vm->wd_slot, 0);
	pause_ns = pause_ended(p, p->slow_epoch, now, p->pause_work_ns);
	if (r->valid && r->epoch == p->slow_epoch)
		r->pause_ns = pause_ns;
	return 0;
}

static int slow_resume_arm(struct rdb_primary *p, uint64_t epoch)
{
	uint64_t now = rdb_now_ns(), at = p->ckpt_start_ns + p->fault_slow_pause_ns;

	LOGVM(WARN, p->vm->name, "fault injection: the pause of epoch %llu "
	      "lasts %.0f ms (remusdbd runs meanwhile)",
	      (unsigned long long)epoch,
	      (double)p->fault_slow_pause_ns / RDB_NS_PER_MS);
	p->slow_epoch = epoch;
	return rdb_evloop_add_timer(p->d->loop, at > now ? at - now : 1,
				    on_slow_resume, p, &p->slow_timer);
}


static int on_epoch_end(void *opaque, uint64_t epoch, const uint8_t *dev,
			size_t len)
{
	struct rdb_primary *p = opaque;
	struct rdb_vm *vm = p->vm;
	uint64_t now, pause_ns, t0 = rdb_now_ns();
	bool handover, slow = false;
	int rc;

	if (p->fault_stop_in_initial && epoch == 0) {
		uint64_t since = p->initial_stop_ns ? p->initial_stop_ns : t0;

		p->fault_stop_in_initial = false;
		/* a daemon slow to take the last of it (it still beats),
		 * that then stalls */
		while (rdb_now_ns() - since < p->fault_initial_busy_ns) {
			rdb_watchdog_beat(p->d->wd);
			usleep(5000);
		}
		LOGVM(WARN, vm->name, "fault injection: stopping remusdbd while "
		      "QEMU waits for the initial state to be taken (%.0f ms "
		      "after QEMU stopped the guest)",
		      (double)(rdb_now_ns() - since) / RDB_NS_PER_MS);
		raise(SIGSTOP);
	}
	/* Every device's epoch closes while the guest is stopped: disks
	 * first (QEMU drained them before it sent this), then NICs. */
	{
		uint64_t t1 = rdb_now_ns();

		rc = rdb_ckdevs_checkpoint(&p->devs, epoch);
		if (rc < 0)
			return rc;
		p->pause_work_ns += rdb_now_ns() - t1;
	}
	p->ck.open_epoch = epoch + 1;
	/* From the initial state's stop on, output waits for its epoch's
	 * acknowledgement (guest_frame). */
	p->initial_open = false;
	/* Let the guest run first; framing and sending the epoch follow.
	 * A handover's epoch is the guest's last here: it stays stopped. */
	handover = rdb_pri_handover_at(p, epoch);
	if (p->fault_slow_checkpoint && epoch > 0 && p->ck.in_pause &&
	    !handover) {
		p->fault_slow_checkpoint = false;
		rc = slow_resume_arm(p, epoch);
		if (rc < 0)
			return rc;
		slow = true;
	}
	if (epoch == 0)
		rc = hv_reply(p, RDB_HV_START);
	else
		rc = handover || slow ? 0 : rdb_pri_resume_after_epoch(p);
	if (rc < 0)
		return rc;
	now = rdb_now_ns();
	/* runs again (a handover's guest stays stopped on purpose: its
	 * stalls are bounded by the beat alone, as before it stopped) */
	if (!slow)
		rdb_watchdog_guest_stopped(p->d->wd, vm->wd_slot, 0);
	if (epoch == 0 && p->initial_stop_ns) {
		vm->st.initial_stop_ns = now - p->initial_stop_ns;
		LOGVM(INFO, vm->name, "initial state taken: %s stopped the guest "
		      "%.1f ms for the last of it (%zu KiB queued for the "
		      "backup at the stop)", p->hv->name,
		      (double)vm->st.initial_stop_ns / RDB_NS_PER_MS,
		      p->initial_stop_queued >> 10);
	}
	pause_ns = 0;
	if (handover) {
		p->ck.in_pause = false;	/* (not a pause: not recorded) */
	} else if (slow) {
		/* recorded when the guest resumes (on_slow_resume) */
	} else if (p->ck.in_pause) {
		pause_ns = pause_ended(p, epoch, now, p->pause_work_ns + (now - t0));
	}
	rdb_vm_epoch_ended(vm, epoch, now, pause_ns);
	if (p->cap_left && epoch > 0)
		rdb_pri_capture_epoch(p, epoch);
	if (p->pool && epoch > 0) {
		rc = rdb_pri_submit_epoch(p, epoch, dev, len);
	} else {
		rc = rdb_pri_batch_flush(p);
		if (rc == 0)
			rc = rdb_proto_put_devstate(&p->out, epoch, dev, len);
		if (rc == 0)
			rc = rdb_proto_put_epoch_end(&p->out, epoch,
						     p->epoch_pages + p->ck.epoch_recs,
						     p->epoch_bytes + p->ck.epoch_bytes + len);
		rdb_vm_epoch_framed(vm, epoch, p->epoch_bytes + p->ck.epoch_bytes +
				    len);
		vm->st.bytes += len;
	}
	if (rc < 0)
		return rc;
	p->epoch_pages = p->epoch_bytes = 0;
	p->ck.epoch_recs = p->ck.epoch_bytes = 0;
	if (vm->st.checkpoints == 0)
		vm->st.first_ckpt_ns = now;
	if (epoch == 0)
		vm->st.initial_mem_bytes = vm->st.bytes - vm->st.colo_start_bytes;
	vm->st.last_ckpt_ns = now;
	vm->st.checkpoints = epoch + 1;
	if (handover) {
		rc = rdb_pri_handover_queue(p);
		if (rc < 0)
			return rc;
	}
	if (p->out.len > PEER_QUEUE_MAX)
		return -ENOBUFS;
	rdb_pri_peer_want_write(p);
	return 0;
}

/* QEMU stopped the guest to send the last of the initial state: until
 * our START it is frozen, and the watchdog counts from here. */
static int on_initial_stop(void *opaque)
{
	struct rdb_primary *p = opaque;

	p->initial_stop_ns = rdb_now_ns();
	p->initial_stop_queued = p->out.len;
	rdb_watchdog_guest_stopped(p->d->wd, p->vm->wd_slot, p->initial_stop_ns);
	return 0;
}

static const struct rdb_hv_stream_cb stream_cb = {
	.config = on_config,
	.ram_blocks = on_ram_blocks,
	.page = on_page,
	.epoch_end = on_epoch_end,
	.checkpoint_request = on_checkpoint_request,
	.initial_stop = on_initial_stop,
};

/* ---- devices: what they ask of the primary (ckdev.h) ---- */

static struct rdb_buf *dev_epoch_out(void *opaque)
{
	return rdb_pri_epoch_out(opaque);
}

static struct rdb_buf *dev_link_out(void *opaque)
{
	return &((struct rdb_primary *)opaque)->out;
}

static size_t dev_queued(void *opaque)
{
	struct rdb_primary *p = opaque;

	return p->out.len + p->held.len;
}

static void dev_want_write(void *opaque)
{
	rdb_pri_peer_want_write(opaque);
}

static void dev_fail(void *opaque, const char *why)
{
	rdb_pri_drop_protection(opaque, why);
}

/* A device finished its initial work (the disk copy): once every one
 * has, checkpoints start; their initial state closes epoch 0. */
static void dev_ready(void *opaque)
{
	struct rdb_primary *p = opaque;
	char err[512] = "", why[600];
	int rc;

	if (p->devs_starting) {
		p->devs_ready_early++;	/* ready within its own start */
		return;
	}
	if (!p->ck.active || !p->devs_pending || --p->devs_pending)
		return;
	rc = start_colo(p, err, sizeof(err));
	if (rc < 0) {
		snprintf(why, sizeof(why), "starting checkpoints: %s",
			 err[0] ? err : strerror(-rc));
		rdb_pri_drop_protection(p, why);
	}
}

/* Where a guest frame goes now, on every NIC. */
static enum rdb_out_gate dev_gate(void *opaque)
{
	struct rdb_primary *p = opaque;

	if (rdb_pri_fenced(p))
		return RDB_OUT_DROP;	/* the other copy runs */
	if (rdb_pri_deciding(p) || rdb_pri_owner_held(p))
		return RDB_OUT_HOLD;	/* held whatever the mode: I6 */
	if (!p->ck.active || p->initial_open)
		return RDB_OUT_WIRE;
	return p->ck.cp ? RDB_OUT_FLOW : RDB_OUT_EPOCH;
}

/* A frame from the network for the guest: kept for the host that takes
 * the VM while it is stopped for a handover. */
static bool dev_from_wire(void *opaque, unsigned nic, const uint8_t *frame,
			  size_t len)
{
	return !rdb_pri_handover_input(opaque, nic, frame, len);
}

/* ---- QEMU's migration socket ---- */

static void close_mig(struct rdb_primary *p)
{
	if (p->mig_more_timer)
		rdb_evloop_del_timer(p->d->loop, p->mig_more_timer);
	p->mig_more_timer = 0;
	if (p->mig_fd >= 0) {
		rdb_evloop_del_fd(p->d->loop, p->mig_fd);
		/* The watchdog holds a duplicate (watchdog.h): only a shutdown
		 * ends the stream for QEMU, whose write may be blocked in it. */
		shutdown(p->mig_fd, SHUT_RDWR);
		close(p->mig_fd);
		p->mig_fd = -1;
	}
}

/* The stream's share of the loop per wakeup (the rest waits in the
 * socket; the loop comes back at once): heartbeats, ACKs and other VMs'
 * work get their turn.  Parsing and framing a read is slow where the
 * daemon itself runs emulated (a Xen test host's dom0 under TCG). */
#define MIG_SLICE_NS (20 * RDB_NS_PER_MS)
#define SLOW_FEED_NS (1 * RDB_NS_PER_S)

static void on_mig(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque);

/* What may wait for the backup before QEMU's stream is left unread
 * (primary_int.h), and what lets it be read again. */
static size_t high_water(const struct rdb_primary *p)
{
	return p->initial_open ? INITIAL_HIGH_WATER : PEER_HIGH_WATER;
}

static size_t low_water(const struct rdb_primary *p)
{
	return p->initial_open ? INITIAL_LOW_WATER : PEER_LOW_WATER;
}

/* QEMU stopped the guest for the last of the initial state: it is taken
 * whole at once (QEMU bounds it by its downtime limit, at the pace it
 * measured), so that the guest runs again; its output waits for the
 * backup's commit of it anyway. */
static bool initial_stopped(const struct rdb_primary *p)
{
	return p->initial_open && p->initial_stop_ns;
}

static bool mig_pending(const struct rdb_primary *p)
{
	return p->hv->stream_pending && p->stream &&
	       p->hv->stream_pending(p->stream);
}

/* The parser kept work back (a backend's bounded share per feed): it is
 * taken at the loop's next turn, even if the socket stays quiet. */
static uint64_t on_mig_more(struct rdb_evloop *loop, uint64_t id, void *opaque)
{
	struct rdb_primary *p = opaque;

	(void)id;
	p->mig_more_timer = 0;
	if (p->mig_fd >= 0 && !p->mig_throttled)
		on_mig(loop, p->mig_fd, RDB_EV_READ, p);
	return 0;
}

/*
 * One read of the checkpoint stream.  recvmsg, not read: QEMU may pass a
 * RAM block's memory fd with a byte of the stream (x-colo-mapped-ram),
 * which a read() would drop; it goes to the stream before the bytes.
 * -EPROTO (p->mig_err says why) when an fd came and was not taken.
 */
static ssize_t mig_read(struct rdb_primary *p, int fd, uint8_t *buf, size_t len)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * RDB_MAX_RAM_BLOCKS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr m = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl.b, .msg_controllen = sizeof(ctl.b),
	};
	ssize_t r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
	int bad = 0;

	if (r < 0)
		return r;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int f;

			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(f));
			if (bad || !p->hv->stream_take_fd) {
				close(f);
				bad = bad ? bad : -EPROTO;
			} else if (p->hv->stream_take_fd(p->stream, f) < 0) {
				bad = -EPROTO;
			}
		}
	}
	if (!bad && (m.msg_flags & MSG_CTRUNC))
		bad = -ENOBUFS;
	if (bad) {
		snprintf(p->mig_err, sizeof(p->mig_err), "checkpoint stream: %s",
			 bad == -ENOBUFS ? "more file descriptors passed at once "
			 "than RAM blocks" : !p->hv->stream_take_fd ?
			 "a file descriptor passed, which this hypervisor's "
			 "stream does not take" : p->hv->stream_error(p->stream));
		return -EPROTO;
	}
	return r;
}

static void on_mig(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct rdb_primary *p = opaque;
	uint64_t until = rdb_now_ns() + MIG_SLICE_NS;
	uint8_t buf[256 * 1024];
	ssize_t r;
	int rc, reads = 0;
	bool drained = false;

	/* (A short read took all the socket had: the next read would find it
	 * empty, and the loop's poll says when there is more.) */
	for (int i = 0; reads < 8 && !drained &&
	     (i == 0 || rdb_now_ns() < until); i++) {
		uint64_t f0, pages0 = p->vm->st.pages, ckpts0 = p->vm->st.checkpoints;

		/* (An error or hangup is read at once: it is reported even
		 * with no events asked for, and would spin the loop.) */
		if (!p->ck.in_pause && !initial_stopped(p) &&
		    p->out.len > high_water(p) && !(ev & RDB_EV_ERROR)) {
			if (!p->throttle_logged)
				LOGVM(INFO, p->vm->name, "checkpoint stream "
				      "throttled to the replication link's pace "
				      "(%zu MiB queued)", p->out.len >> 20);
			p->throttle_logged = true;
			rdb_evloop_mod_fd(loop, fd, 0);
			p->mig_throttled = true;
			return;
		}
		f0 = rdb_now_ns();
		if (mig_pending(p)) {
			/* what was read before goes first: the socket stays
			 * full meanwhile, and the hypervisor waits */
			rc = p->hv->stream_feed(p->stream, NULL, 0);
		} else {
			r = mig_read(p, fd, buf, sizeof(buf));
			if (r == -EPROTO) {
				rdb_pri_drop_protection(p, p->mig_err);
				close_mig(p);
				return;
			}
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				return;
			if (r <= 0) {
				if (p->ck.active)
					rdb_pri_drop_protection(p, r == 0 ?
						"QEMU closed the checkpoint stream" :
						"checkpoint stream read error");
				close_mig(p);
				return;
			}
			reads++;
			drained = (size_t)r < sizeof(buf);
			p->mig_rx_ns = rdb_now_ns();
			rc = p->hv->stream_feed(p->stream, buf, (size_t)r);
		}
		/* what one feed did, when it held the loop long (for the
		 * evloop's warning: pages, or a checkpoint's end) */
		if (rdb_now_ns() - f0 > SLOW_FEED_NS)
			LOGVM(WARN, p->vm->name, "one feed of the checkpoint "
			      "stream took %.0f ms: %llu pages, %llu checkpoint "
			      "ends", (double)(rdb_now_ns() - f0) / RDB_NS_PER_MS,
			      (unsigned long long)(p->vm->st.pages - pages0),
			      (unsigned long long)(p->vm->st.checkpoints - ckpts0));
		/* taking the stream is a sign of life (the watchdog must see
		 * a stall, not a busy read of a checkpoint) */
		rdb_watchdog_beat(p->d->wd);
		if (rc < 0) {
			char why[256];

			snprintf(why, sizeof(why), "checkpoint stream: %s",
				 rc == -EPROTO ? p->hv->stream_error(p->stream) :
				 strerror(-rc));
			rdb_pri_drop_protection(p, why);
			close_mig(p);
			return;
		}
	}
	if (mig_pending(p) && !p->mig_more_timer &&
	    rdb_evloop_add_timer(loop, 0, on_mig_more, p, &p->mig_more_timer) < 0)
		LOGVM(WARN, p->vm->name, "no timer for the checkpoint stream's "
		      "parsed backlog: it waits for the stream's next bytes");
}

static void on_mig_accept(struct rdb_evloop *loop, int fd, unsigned ev,
			  void *opaque)
{
	struct rdb_primary *p = opaque;
	int c = rdb_sock_accept(fd);

	if (c < 0)
		return;
	if (p->mig_fd >= 0) {
		LOGVM(WARN, p->vm->name, "second migration connection refused");
		close(c);
		return;
	}
	p->mig_fd = c;
	if (rdb_evloop_add_fd(loop, c, RDB_EV_READ, on_mig, p) < 0) {
		close(c);
		p->mig_fd = -1;
		rdb_pri_drop_protection(p, "cannot watch the checkpoint stream");
		return;
	}
	/* The watchdog gets its own handle on the stream: the one thing it
	 * can still cut when QEMU is blocked on it (see watchdog.h). */
	if (p->vm->wd_slot >= 0 &&
	    rdb_watchdog_pass_fd(p->d->wd, p->vm->wd_slot, c) < 0)
		LOGVM(WARN, p->vm->name, "watchdog did not get the stream socket");
	/* One connection per protection: no one else may attach. */
	rdb_evloop_del_fd(loop, p->mig_listen_fd);
	close(p->mig_listen_fd);
	p->mig_listen_fd = -1;
	unlink(p->mig_path);
	LOGVM(INFO, p->vm->name, "QEMU connected its checkpoint stream");
}

/* ---- the backup link ---- */

/*
 * The backup committed the resync: its disk is this protection's replica
 * now, and our restored lineage (the base) is spent.  The record says
 * "primary of this protection" only (lineage.h).
 */
static void resync_committed(struct rdb_primary *p)
{
	struct rdb_lineage l;
	char err[300] = "";

	if (rdb_lineage_load(p->d->cfg.state_dir, p->vm->name, &l, err,
			     sizeof(err)) < 0 || l.role != RDB_LINEAGE_PRIMARY ||
	    l.generation != p->generation)
		return;
	l.has_base = false;
	if (rdb_lineage_save(p->d->cfg.state_dir, p->vm->name, &l, err,
			     sizeof(err)) < 0)
		LOGVM(WARN, p->vm->name, "lineage record: %s", err);
	for (unsigned i = 0; i < p->ndisks; i++) {
		p->disks[i]->base_gen = p->disks[i]->base_epoch = 0;
		p->disks[i]->base_wmap[0] = 0;
	}
}

/* This daemon's failure timing, as TIMING says it (proto.h) */
static struct rdb_timing my_timing(const struct rdb_daemon *d)
{
	return (struct rdb_timing){
		.heartbeat_ms = d->cfg.heartbeat_ms,
		.failover_timeout_ms = d->cfg.failover_timeout_ms,
		.ack_timeout_ms = rdb_daemon_ack_timeout_ms(&d->cfg),
	};
}

/* The backup's TIMING, checked against ours: refused (protection
 * dropped, saying why), a warning, or nothing to say. */
static void on_timing(struct rdb_primary *p, const struct rdb_frame *f)
{
	struct rdb_timing mine = my_timing(p->d), peer;
	char why[400];
	int rc;

	if (!(p->ck.features & RDB_FEATURE_TIMING) ||
	    rdb_msg_timing_parse(f, &peer) < 0) {
		rdb_pri_drop_protection(p, "the backup's TIMING is malformed or "
					"was not agreed");
		return;
	}
	rc = rdb_timing_check(&mine, &peer, "backup", why, sizeof(why));
	if (rc < 0) {
		char w[500];

		snprintf(w, sizeof(w), "timing refused: %s", why);
		rdb_pri_drop_protection(p, w);
	} else if (rc > 0) {
		LOGVM(WARN, p->vm->name, "timing: %s", why);
	}
}

static void on_peer_msg(struct rdb_primary *p, const struct rdb_frame *f)
{
	struct rdb_vm *vm = p->vm;

	rdb_peer_heard(&p->peer, rdb_watchdog_host_stall_ns(p->d->wd), rdb_now_ns());
	switch (f->type) {
	case RDB_MSG_ACK: {
		const char *why;

		if (rdb_proto_ack_check(f->epoch, vm->st.checkpoints,
					vm->st.last_ack_ns != 0,
					vm->st.committed_epoch, &why) < 0) {
			rdb_pri_drop_protection(p, why);
			return;
		}
		vm->st.committed_epoch = f->epoch;
		vm->st.last_ack_ns = p->peer.heard_ns;
		rdb_vm_epoch_acked(vm, f->epoch, p->peer.heard_ns);
		rdb_pri_release_output(p, f->epoch);
		rdb_ckdevs_committed(&p->devs, f->epoch);
		if (vm->state == RDB_VM_PROTECTING) {
			uint64_t now = p->peer.heard_ns;

			vm->st.initial_ns = now - vm->st.protect_start_ns;
			if (vm->st.colo_start_ns)
				vm->st.initial_mem_ns = now - vm->st.colo_start_ns;
			for (unsigned i = 0; i < p->ndisks; i++)
				if (p->disks[i]->base_gen) {
					resync_committed(p);
					break;
				}
			for (unsigned i = 0; i < p->ndisks; i++)
				p->disks[i]->cont = false;
			rdb_vm_set_state(vm, RDB_VM_PROTECTED, "backup committed "
					 "the initial state%s", vm->st.resynced ?
					 " (a resync)" : "");
			rdb_pri_auto_protected(p);
		}
		break;
	}
	case RDB_MSG_HEARTBEAT:
		break;
	case RDB_MSG_DISK_BASE: {
		int rc = rdb_ckdevs_peer_msg(&p->devs, "disk", f);

		if (rc == 0)
			rc = -EPROTO;	/* no disk waited for it */
		if (rc < 0)
			rdb_pri_drop_protection(p, rc == -EPROTO ?
				"the backup's DISK_BASE does not answer our "
				"DISK_SETUP" : "resync: out of memory");
		break;
	}
	case RDB_MSG_HANDOVER:
		rdb_pri_handover_answer(p, f);
		break;
	case RDB_MSG_TIMING:
		on_timing(p, f);
		break;
	case RDB_MSG_ERROR: {
		char text[256], why[300];

		rdb_msg_text_parse(f, text, sizeof(text));
		snprintf(why, sizeof(why), "backup reported: %s", text);
		/* It gave up and will not go live: no decision needed. */
		drop(p, why, true);
		break;
	}
	default:
		rdb_pri_drop_protection(p, "backup sent an unexpected message");
	}
}

void rdb_pri_close_peer(struct rdb_primary *p)
{
	if (p->peer_fd >= 0) {
		rdb_evloop_del_fd(p->d->loop, p->peer_fd);
		close(p->peer_fd);
		p->peer_fd = -1;
	}
}

/* Reads and handles what the backup sent; 0, or the reason it failed. */
static int peer_read(struct rdb_primary *p)
{
	struct rdb_frame f;
	int rc = rdb_proto_decoder_read_fd(&p->dec, p->peer_fd);

	/* Frames already received are handled even if the link just died:
	 * an ERROR from the backup says why better than our EPIPE would. */
	for (;;) {
		int r2 = rdb_proto_decoder_next(&p->dec, &f);

		if (r2 < 0)
			return r2;
		if (r2 == 0)
			break;
		on_peer_msg(p, &f);
		if (p->peer_fd < 0)
			return 0;
	}
	return rc == -EAGAIN ? 0 : rc;
}

static void peer_failed(struct rdb_primary *p, int rc)
{
	char why[300];

	snprintf(why, sizeof(why), "replication link: %s",
		 rc == -EPROTO ? rdb_proto_decoder_error(&p->dec) :
		 rc == -ECONNRESET ? "backup closed the connection" :
		 strerror(-rc));
	/* FIN or RST: the backup's host is up, its remusdbd went away (a
	 * restart): protected to it again on its own (primary_auto.c) */
	p->arp.gone = rc == -ECONNRESET || rc == -EPIPE;
	rdb_pri_drop_protection(p, why);
}

static void on_peer(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct rdb_primary *p = opaque;
	int rc = 0;

	if (ev & RDB_EV_READ) {
		rc = peer_read(p);
		if (p->peer_fd < 0)
			return;
		if (rc < 0) {
			peer_failed(p, rc);
			return;
		}
	}
	if ((ev & RDB_EV_WRITE) && rdb_pri_may_send(p)) {
		rc = rdb_pri_peer_flush(p);
		if (rc < 0) {
			/* The backup may have said why before it hung up. */
			int r2 = peer_read(p);

			if (p->peer_fd >= 0)
				peer_failed(p, r2 < 0 ? r2 : rc);
			return;
		}
	}
	if (p->mig_throttled && p->out.len < low_water(p) && p->mig_fd >= 0) {
		p->mig_throttled = false;
		p->mig_unthrottled_ns = rdb_now_ns();
		rdb_evloop_mod_fd(loop, p->mig_fd, RDB_EV_READ);
		on_mig(loop, p->mig_fd, RDB_EV_READ, p);
	}
}

/* ---- timers ---- */

/*
 * A hypervisor may send the initial state and never a checkpoint after
 * it (QEMU 10.0.0-10.0.6 never enters COLO: hypervisor/qemu/README.md).
 * That is a stream silent for COLO_START_DEADLINE_NS after epoch 0 — not
 * one this daemon does not read (throttled to the link's pace: a slow
 * link is no broken hypervisor), nor one still sending.  True: dropped.
 */
static bool colo_never_started(struct rdb_primary *p, uint64_t now)
{
	struct rdb_vm *vm = p->vm;
	uint64_t since = vm->st.first_ckpt_ns;
	char why[400];

	if (vm->st.checkpoints != 1 || p->mig_throttled)
		return false;
	if (p->mig_rx_ns > since)
		since = p->mig_rx_ns;
	if (p->mig_unthrottled_ns > since)
		since = p->mig_unthrottled_ns;
	if (now - since <= COLO_START_DEADLINE_NS +
	    3ULL * vm->cfg.checkpoint_ms * RDB_NS_PER_MS)
		return false;
	snprintf(why, sizeof(why), "%s sent the initial state, then nothing "
		 "for %llu s and no checkpoint: %s", p->hv->name,
		 (unsigned long long)((now - since) / RDB_NS_PER_S),
		 p->hv->no_checkpoint_hint ? p->hv->no_checkpoint_hint :
		 "it does not checkpoint");
	rdb_pri_drop_protection(p, why);
	return true;
}

/*
 * The backup may answer heartbeats and still not commit (its replica's
 * disk stuck, a commit that never ends): output then stays held with no
 * alarm, the stream throttled to the link's pace.  Past ack_timeout_ms
 * for the oldest unacknowledged checkpoint (once the initial state is
 * committed: its copy may take long) the backup counts as lost, and the
 * decision settles which host runs the VM, as for silence.  A handover
 * has its own deadline (primary_migrate.c).  True: dropped.
 */
static bool ack_overdue(struct rdb_primary *p, uint64_t now)
{
	struct rdb_vm *vm = p->vm;
	uint64_t limit = rdb_daemon_ack_timeout_ms(&p->d->cfg);
	uint64_t since, epoch = 0;
	char why[200];

	if (!vm->st.last_ack_ns || p->ho.phase == RDB_HO_SENT)
		return false;
	since = rdb_vm_unacked_since(vm, &epoch);
	if (!since)
		return false;
	/* epochs that ended while the initial state was still being
	 * committed wait from its commit on, not from their end */
	if (since < vm->st.protect_start_ns + vm->st.initial_ns)
		since = vm->st.protect_start_ns + vm->st.initial_ns;
	if (now - since <= limit * RDB_NS_PER_MS)
		return false;
	vm->st.ack_timeouts++;
	LOGVM(ERROR, vm->name, "ALARM: epoch %llu has waited %llu ms for the "
	      "backup's acknowledgement (ack_timeout_ms %llu, counted from the "
	      "initial state's commit at the earliest; the backup last "
	      "acknowledged epoch %llu %llu ms ago): its output is held all the "
	      "while", (unsigned long long)epoch,
	      (unsigned long long)((now - since) / RDB_NS_PER_MS),
	      (unsigned long long)limit,
	      (unsigned long long)vm->st.committed_epoch,
	      (unsigned long long)((now - vm->st.last_ack_ns) / RDB_NS_PER_MS));
	snprintf(why, sizeof(why), "the backup did not acknowledge epoch %llu "
		 "within ack_timeout_ms (%llu ms)", (unsigned long long)epoch,
		 (unsigned long long)limit);
	rdb_pri_drop_protection(p, why);
	return true;
}

static uint64_t on_heartbeat(struct rdb_evloop *loop, uint64_t id, void *opaque)
{
	struct rdb_primary *p = opaque;
	struct rdb_vm *vm = p->vm;
	uint64_t now = rdb_now_ns();
	uint64_t timeout = (uint64_t)p->d->cfg.failover_timeout_ms * RDB_NS_PER_MS;
	uint64_t period = (uint64_t)p->d->cfg.heartbeat_ms * RDB_NS_PER_MS;

	/* The initial copy keeps both daemons and the link busy for
	 * seconds; silence then is slowness, not death. */
	if (vm->state == RDB_VM_PROTECTING && timeout < INITIAL_SYNC_SILENCE_NS)
		timeout = INITIAL_SYNC_SILENCE_NS;
	if (vm->wd_slot >= 0 && rdb_watchdog_tripped(p->d->wd, vm->wd_slot))
		rdb_pri_drop_protection(p, "watchdog");
	if (!p->ck.active)
		return (uint64_t)p->d->cfg.heartbeat_ms * RDB_NS_PER_MS;
	/* Our own loop may have been busy (initial state): what the backup
	 * sent meanwhile is still in the socket, and it is not silence. */
	if (p->peer_fd >= 0 && now - p->peer.heard_ns > timeout / 2) {
		on_peer(loop, p->peer_fd, RDB_EV_READ, p);
		now = rdb_now_ns();
	}
	if (p->peer_fd >= 0) {
		enum rdb_peer_verdict v;
		uint64_t stalled;

		v = rdb_peer_judge(&p->peer, rdb_watchdog_host_stall_ns(p->d->wd),
				   now, timeout, period, &stalled);
		rdb_peer_tell(&p->peer, v, RDB_COMPONENT, vm->name, "backup", now,
			      stalled, timeout, &p->d->peer_stall_waits);
		switch (v) {
		case RDB_PEER_RECHECK:
			rdb_proto_put_heartbeat(&p->out, ++p->hb_seq, now);
			rdb_pri_peer_want_write(p);
			return RDB_PEER_RECHECK_NS;
		case RDB_PEER_SILENT: {
			char why[128];

			snprintf(why, sizeof(why), "backup silent for %llu ms",
				 (unsigned long long)((now - p->peer.heard_ns) /
						      RDB_NS_PER_MS));
			rdb_pri_drop_protection(p, why);
			break;
		}
		case RDB_PEER_STALLED:
			/* it lives, as far as this host can tell */
		case RDB_PEER_HEARD:
			rdb_proto_put_heartbeat(&p->out, ++p->hb_seq, now);
			rdb_pri_peer_want_write(p);
			break;
		}
	}
	if (colo_never_started(p, now))
		return 0;
	rdb_pri_handover_tick(p, now);
	if (!p->ck.active || ack_overdue(p, now))
		return (uint64_t)p->d->cfg.heartbeat_ms * RDB_NS_PER_MS;
	if (p->overrun_why[0]) {
		rdb_pri_drop_protection(p, p->overrun_why);
	} else if (p->stop_waits && now - p->stop_asked_ns >
		   PAUSE_OVERRUN_FACTOR * (uint64_t)vm->cfg.checkpoint_deadline_ms *
		   RDB_NS_PER_MS) {
		char why[160];

		snprintf(why, sizeof(why), "the encoders have taken %.0f ms "
			 "more over epoch %llu, over %u x checkpoint_deadline_ms "
			 "(%u ms): checkpoints cannot keep up",
			 (double)(now - p->stop_asked_ns) / RDB_NS_PER_MS,
			 (unsigned long long)p->stop_epoch - 1,
			 PAUSE_OVERRUN_FACTOR, vm->cfg.checkpoint_deadline_ms);
		rdb_pri_drop_protection(p, why);
	} else if (p->ck.in_pause && now - p->ckpt_start_ns >
		   PAUSE_OVERRUN_FACTOR * (uint64_t)vm->cfg.checkpoint_deadline_ms *
		   RDB_NS_PER_MS) {
		char why[160];

		vm->st.deadline_misses++;
		snprintf(why, sizeof(why), "a checkpoint has paused the guest "
			 "%.0f ms, over %u x checkpoint_deadline_ms (%u ms)",
			 (double)(now - p->ckpt_start_ns) / RDB_NS_PER_MS,
			 PAUSE_OVERRUN_FACTOR, vm->cfg.checkpoint_deadline_ms);
		rdb_pri_drop_protection(p, why);
	}
	return (uint64_t)p->d->cfg.heartbeat_ms * RDB_NS_PER_MS;
}

/*
 * Replication ends: the guest's flushes, answered while the backup's
 * replica carried them, must be durable here before held output tells a
 * client about them.  If the image cannot be synced they may be durable
 * nowhere: the guest is paused and its held output discarded (its TCP
 * would otherwise send it again, unheld).  Returns false then.
 */
static bool end_replication(struct rdb_primary *p)
{
	struct rdb_vm *vm = p->vm;
	uint64_t n;
	int rc;

	if (rdb_ckdevs_unreplicate(&p->devs) == 0)
		return true;
	rc = p->ctl ? p->hv->stop(p->ctl, rdb_now_ns() + RDB_NS_PER_S) :
		      -ENOTCONN;
	n = rdb_pri_discard_output(p);
	if (rc < 0)
		LOGVM(ERROR, vm->name, "the disk image could not be synced and "
		      "the guest could not be paused (%s): its writes since "
		      "protection began may not be durable", strerror(-rc));
	else
		LOGVM(ERROR, vm->name, "the disk image could not be synced: "
		      "the guest is paused, %llu held frames discarded; its "
		      "writes since protection began may not be durable",
		      (unsigned long long)n);
	return false;
}

/*
 * Protection ends without a failover: COLO is stopped in QEMU so the
 * guest runs on by itself.  Output held for epochs the backup will now
 * never acknowledge is released only once this host may run the VM: at
 * once when the backup cannot go live (it said it stopped, it never got
 * a checkpoint, or on_peer_loss = unsafe-auto); otherwise after the
 * decision (primary_decide.c).
 */
static void drop(struct rdb_primary *p, const char *why, bool backup_stopped)
{
	struct rdb_vm *vm = p->vm;
	bool durable, decide, gone = p->arp.gone;
	int rc;

	p->arp.gone = false;
	if (!p->ck.active)
		return;
	/* Handing over: the guest is stopped, and may stay so. */
	if (rdb_pri_handover_lost(p, why))
		return;
	/* Whatever we noticed first, a watchdog trip is the real story. */
	if (vm->wd_slot >= 0 && rdb_watchdog_tripped(p->d->wd, vm->wd_slot)) {
		vm->st.watchdog_trips++;
		why = "the watchdog dropped protection while remusdbd was stalled";
		gone = false;
	}
	/* only the backup's remusdbd going away is protected again on its
	 * own; any other cause ends a window of attempts (primary_auto.c) */
	if (gone)
		rdb_pri_auto_arm(p, why);
	else
		rdb_pri_auto_cancel(p, why);
	p->ck.active = false;
	p->ck.in_pause = false;
	p->stop_waits = false;
	/* The VM runs on here: each disk's activity log is kept (before
	 * recording stops) if the backup's replica is a base to resync to
	 * (primary_dev.h) */
	for (unsigned i = 0; i < p->ndisks; i++)
		rdb_pri_disk_keep(p->disks[i], true, vm->st.initial_ns ?
				  p->generation : 0, vm->st.committed_epoch);
	rdb_ckdevs_stop(&p->devs);
	rdb_pri_stop_pool(p);
	if (vm->wd_slot >= 0) {
		rdb_watchdog_disarm(p->d->wd, vm->wd_slot);
		vm->wd_slot = -1;
	}
	/* QEMU may be blocked writing a checkpoint into the stream, holding
	 * its big lock (QMP would not answer): closing the stream fails that
	 * write, and QEMU leaves COLO with the guest running (as the
	 * watchdog does, watchdog.h).  A start still under way sends
	 * nothing more. */
	colo_cancel(p);
	close_mig(p);
	if (p->ctl) {
		/* short: with the stream shut down QEMU leaves COLO by itself;
		 * this is for a QEMU that was not blocked in it, and must not
		 * stall the loop QEMU's disk may be waiting on */
		rc = p->hv->checkpoint_end(p->ctl, rdb_now_ns() +
					   200 * RDB_NS_PER_MS);
		if (rc < 0 && rc != -EREMOTEIO)
			LOGVM(WARN, vm->name, "ending checkpoints in %s: %s",
			      p->hv->name, strerror(-rc));
	}
	durable = end_replication(p);
	/* No checkpoint sent: the backup has nothing to go live from. */
	decide = durable && !backup_stopped && vm->st.checkpoints > 0 &&
		 vm->peer_loss != RDB_PEER_LOSS_UNSAFE_AUTO;
	if (durable && !decide)
		rdb_pri_release_output(p, UINT64_MAX);
	close_mig(p);
	if (p->peer_fd >= 0) {
		rdb_proto_put_error(&p->out, "primary dropped protection");
		rdb_buf_write_fd(&p->out, p->peer_fd);
		rdb_pri_close_peer(p);
	}
	if (!durable)
		rdb_vm_set_state(vm, RDB_VM_FAILED, "%s; the disk image could "
				 "not be synced: guest paused, for the operator",
				 why);
	else if (decide)
		rdb_pri_decide_start(p, why);
	else
		rdb_vm_set_state(vm, RDB_VM_DEGRADED, "%s", why);
}

void rdb_pri_drop_protection(struct rdb_primary *p, const char *why)
{
	drop(p, why, false);
}

/* ---- setup and teardown ---- */

static uint32_t offered_features(const struct rdb_primary *p)
{
	return (p->vm->cfg.compression ? CODEC_FEATURES : 0) |
	       (p->vm->cfg.read_tracking && p->ndisks ?
		RDB_FEATURE_DISKREF | RDB_FEATURE_DISKREF_DEVS : 0) |
	       (p->vm->cfg.verify_pages ? RDB_FEATURE_VERIFY : 0) |
	       (p->ndisks ? RDB_FEATURE_RESYNC : 0) |
	       RDB_FEATURE_HANDOVER | RDB_FEATURE_TIMING |
	       (p->ck.cp ? RDB_FEATURE_FLOWS : 0);
}

/*
 * Connecting to the backup runs on a thread of its own: name resolution,
 * the TCP connect, the link's TLS handshake and HELLO/HELLO_ACK may take
 * up to SETUP_DEADLINE_NS, and an unreachable backup of one VM must not
 * stall every other VM's checkpoints and heartbeats.  The job touches
 * nothing of the primary's; the loop takes its result (connected()).
 */
struct connect_job {
	struct rdb_primary *p;		/* NULL: the protection was undone */
	char peer[128], name[65];
	uint32_t offered;
	struct rdb_linksec *ls;
	struct rdb_bgjob *job;
	/* results */
	int rc, fd;
	bool refused;			/* the backup answered HELLO with no */
	uint32_t features;
	struct rdb_proto_decoder dec;	/* what followed HELLO_ACK stays here */
	char err[600], link[256];
};

static void connect_run(void *opaque)
{
	struct connect_job *j = opaque;
	uint64_t deadline = rdb_now_ns() + SETUP_DEADLINE_NS;
	struct rdb_tlsrelay *relay = NULL;
	char peer[200], why[256];
	struct rdb_buf out;
	struct rdb_frame f;
	int fd, rc;

	rdb_buf_init(&out);
	rc = rdb_sock_connect_tcp(j->peer, deadline, &fd);
	if (rc < 0) {
		snprintf(j->err, sizeof(j->err), "cannot reach backup %s: %s",
			 j->peer, strerror(-rc));
		goto done;
	}
	/* With a link key, TLS runs in a relay thread and the fd is its
	 * plaintext end: the HELLO waits there until the backup proved it
	 * holds the key, and nothing it sends arrives before that. */
	snprintf(peer, sizeof(peer), "backup %.100s (%s)", j->peer, j->name);
	rc = rdb_linksec_open(j->ls, RDB_LINK_CONNECT, fd, deadline, peer,
			      &j->fd, &relay);
	if (rc < 0) {
		snprintf(j->err, sizeof(j->err), "replication link to backup %s: %s",
			 j->peer, strerror(-rc));
		goto done;
	}
	rc = rdb_proto_put_hello_features(&out, j->name, j->offered);
	if (rc == 0)
		rc = rdb_buf_write_all_fd(&out, j->fd, deadline);
	while (rc == 0) {
		rc = rdb_proto_decoder_next(&j->dec, &f);
		if (rc > 0)
			break;
		if (rc == 0)
			rc = rdb_proto_decoder_read_fd_deadline(&j->dec, j->fd,
								deadline);
	}
	if (rc < 0) {
		int lrc = rdb_linksec_failure(relay, why, sizeof(why));

		if (lrc < 0)
			snprintf(j->err, sizeof(j->err), "replication link to "
				 "backup %s: %s", j->peer, why);
		else if (lrc == 0)
			snprintf(j->err, sizeof(j->err), "replication link to "
				 "backup %s: TLS handshake not finished in time: "
				 "the backup is silent", j->peer);
		else if (!relay && rdb_linksec_looks_like_tls(j->dec.in.data,
							       j->dec.in.len))
			snprintf(j->err, sizeof(j->err), "replication link to "
				 "backup %s: it answers in TLS, it requires the "
				 "link key; this host runs with link_security = "
				 "insecure", j->peer);
		else
			snprintf(j->err, sizeof(j->err), "handshake with backup "
				 "%s: %s", j->peer, rc == -EPROTO ?
				 rdb_proto_decoder_error(&j->dec) : strerror(-rc));
		goto done;
	}
	if (f.type != RDB_MSG_HELLO_ACK) {
		char text[256];

		/* HELLO_NAK or ERROR carry the reason; anything else is no
		 * answer to HELLO, and its payload is no text. */
		if (rdb_msg_text_parse(&f, text, sizeof(text)) == 0)
			snprintf(j->err, sizeof(j->err), "backup %s refused %s: %s",
				 j->peer, j->name, text);
		else
			snprintf(j->err, sizeof(j->err), "backup %s answered HELLO "
				 "for %s with %s, not HELLO_ACK", j->peer, j->name,
				 rdb_msg_name(f.type));
		rc = -ECONNREFUSED;
		j->refused = true;
		goto done;
	}
	rc = rdb_proto_check_hello_ack_features(&f, j->offered, &j->features);
	if (rc < 0) {
		snprintf(j->err, sizeof(j->err), "backup %s: unsupported protocol",
			 j->peer);
		goto done;
	}
	if (!relay || rdb_tlsrelay_status(relay, why, sizeof(why)) != 1)
		why[0] = 0;
	snprintf(j->link, sizeof(j->link), "%s%s%.200s, protocol v%u",
		 rdb_linksec_describe(j->ls), why[0] ? ", " : "", why,
		 rdb_msg_hello_ack_version(&f));
done:
	rdb_tlsrelay_put(relay);
	rdb_buf_dispose(&out);
	j->rc = rc;
}

static void connect_job_free(struct connect_job *j)
{
	if (j->fd >= 0)
		close(j->fd);
	rdb_proto_decoder_dispose(&j->dec);
	free(j);
}

static void connected(struct rdb_primary *p, struct connect_job *j);

static void on_connect_done(void *opaque)
{
	struct connect_job *j = opaque;

	if (j->p) {
		j->p->connect_job = NULL;
		connected(j->p, j);
	}
	connect_job_free(j);
}

/* Undoes a connect under way: its result will be dropped (the job frees
 * itself when its thread is done, within SETUP_DEADLINE_NS). */
static void connect_cancel(struct rdb_primary *p)
{
	if (p->connect_job) {
		p->connect_job->p = NULL;
		p->connect_job = NULL;
	}
}

static int connect_start(struct rdb_primary *p)
{
	struct rdb_vm *vm = p->vm;
	struct connect_job *j = calloc(1, sizeof(*j));
	int rc;

	if (!j)
		return -ENOMEM;
	j->p = p;
	j->fd = -1;
	j->ls = p->d->linksec;
	j->offered = offered_features(p);
	snprintf(j->peer, sizeof(j->peer), "%s", vm->cfg.peer);
	snprintf(j->name, sizeof(j->name), "%s", vm->name);
	rdb_proto_decoder_init(&j->dec);
	rc = rdb_bgjob_start(p->d->loop, connect_run, on_connect_done, j, &j->job);
	if (rc < 0) {
		rdb_proto_decoder_dispose(&j->dec);
		free(j);
		return rc;
	}
	p->connect_job = j;
	return 0;
}

/*
 * Starting COLO in QEMU runs on a thread of its own too: QMP's connect,
 * greeting, capabilities and `migrate` may take up to SETUP_DEADLINE_NS
 * when QEMU is slow to answer (busy, swapping, stopped by a debugger), and
 * this loop must meanwhile keep every other VM's checkpoints, heartbeats
 * and disk going.  The loop first sets up what QEMU's stream will reach
 * (the listener, the parser): QEMU connects to it as soon as `migrate` is
 * taken, before the answer.  The job has a QMP connection of its own and
 * hands it to the primary when done; after a cancel it sends nothing more
 * and its connection is shut down, so QEMU's QMP is free at once for the
 * decision's stop or cont (primary_decide.c).
 */
struct colo_job {
	struct rdb_primary *p;		/* NULL: the protection was undone */
	const struct rdb_hv_ops *hv;
	char qmp_path[108], name[65], stream_path[108];
	unsigned checkpoint_ms, ckpt_flags;
	struct rdb_bgjob *job;
	pthread_mutex_t lock;		/* cancelled, live_fd */
	bool cancelled;
	int live_fd;			/* the QMP fd, once connected */
	/* results */
	struct rdb_hv_ctl *ctl;
	int rc;
	char err[600];
};

static void colo_run(void *opaque)
{
	struct colo_job *j = opaque;
	uint64_t deadline = rdb_now_ns() + SETUP_DEADLINE_NS;
	bool cancelled;
	int rc;

	rc = j->hv->ctl_open(&j->ctl, j->qmp_path, j->name, deadline, j->err,
			     sizeof(j->err));
	if (rc < 0)
		goto done;
	pthread_mutex_lock(&j->lock);
	cancelled = j->cancelled;
	if (!cancelled)
		j->live_fd = j->hv->ctl_fd(j->ctl);
	pthread_mutex_unlock(&j->lock);
	if (cancelled) {
		rc = -ECANCELED;
		goto done;
	}
	rc = j->hv->checkpoint_start(j->ctl, j->stream_path, j->checkpoint_ms,
				     j->ckpt_flags, deadline);
	if (rc < 0)
		snprintf(j->err, sizeof(j->err), "%s: %s", j->hv->name,
			 rc == -EREMOTEIO ? j->hv->ctl_error(j->ctl) :
			 strerror(-rc));
done:
	j->rc = rc;
}

static void colo_job_free(struct colo_job *j)
{
	j->hv->ctl_close(j->ctl);
	pthread_mutex_destroy(&j->lock);
	free(j);
}

/*
 * Placement: QEMU and remusdbd sharing a CPU lengthens every pause (the
 * daemon answers inside it and QEMU waits for the CPU, docs/performance.md).
 * Only said when the operator pinned the daemon (`cpus`): unpinned, all
 * share, and that is the default they chose.
 */
static void check_placement(struct rdb_primary *p)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	cpu_set_t q, shared;
	char a[256], b[256];

	if (getsockopt(p->hv->ctl_fd(p->ctl), SOL_SOCKET, SO_PEERCRED, &cr,
		       &len) < 0 || cr.pid <= 0)
		return;
	p->qemu_pid = cr.pid;
	if (rdb_cpulist_of_process(cr.pid, &q) < 0)
		return;
	CPU_AND(&shared, &q, &p->d->cpus);
	if (p->d->cfg.cpus[0] && CPU_COUNT(&shared))
		LOGVM(WARN, p->vm->name, "QEMU (pid %d) may run on CPUs %s, "
		      "which remusdbd is pinned to (cpus = %s): each checkpoint "
		      "pause then waits for the CPU between them; pin QEMU "
		      "elsewhere (libvirt <emulatorpin> and <vcpupin>, or "
		      "taskset), see docs/performance.md", (int)cr.pid,
		      rdb_cpulist_format(&shared, a, sizeof(a)), p->d->cfg.cpus);
	else
		LOGVM(INFO, p->vm->name, "QEMU (pid %d) runs on CPUs %s, "
		      "remusdbd on CPUs %s", (int)cr.pid,
		      rdb_cpulist_format(&q, a, sizeof(a)),
		      rdb_cpulist_format(&p->d->cpus, b, sizeof(b)));
}

static void colo_started(struct rdb_primary *p, struct colo_job *j)
{
	char why[700];

	if (j->rc < 0) {
		snprintf(why, sizeof(why), "starting checkpoints: %s",
			 j->err[0] ? j->err : strerror(-j->rc));
		if (p->ndisks)
			rdb_pri_drop_protection(p, why);
		else
			rdb_pri_protect_failed(p, why);
		return;
	}
	/* The control connection is the primary's from here (stop, cont,
	 * checkpoint_end); none was open, the job held the hypervisor's. */
	p->hv->ctl_close(p->ctl);
	p->ctl = j->ctl;
	j->ctl = NULL;
	check_placement(p);
}

static void on_colo_done(void *opaque)
{
	struct colo_job *j = opaque;

	if (j->p) {
		j->p->colo_job = NULL;
		colo_started(j->p, j);
	}
	colo_job_free(j);
}

/* Undoes a start under way: no command is sent after this, QEMU's QMP is
 * let go, and the job frees itself when its thread is done. */
static void colo_cancel(struct rdb_primary *p)
{
	struct colo_job *j = p->colo_job;

	if (!j)
		return;
	pthread_mutex_lock(&j->lock);
	j->cancelled = true;
	if (j->live_fd >= 0)
		shutdown(j->live_fd, SHUT_RDWR);
	pthread_mutex_unlock(&j->lock);
	j->p = NULL;
	p->colo_job = NULL;
}

static int start_colo(struct rdb_primary *p, char *err, size_t errlen)
{
	struct rdb_vm *vm = p->vm;
	struct colo_job *j;
	int rc;

	vm->st.colo_start_ns = rdb_now_ns();
	vm->st.colo_start_bytes = vm->st.bytes;
	p->initial_stop_ns = 0;
	snprintf(p->mig_path, sizeof(p->mig_path), "%s/%s.colo",
		 p->d->cfg.run_dir, vm->name);
	rc = rdb_sock_listen_unix(p->mig_path, &p->mig_listen_fd);
	if (rc < 0) {
		snprintf(err, errlen, "listen on %s: %s", p->mig_path, strerror(-rc));
		return rc;
	}
	rc = rdb_daemon_share_with_qemu(p->d, p->mig_path, -1);
	if (rc < 0) {
		snprintf(err, errlen, "%s for qemu_group: %s", p->mig_path,
			 strerror(-rc));
		return rc;
	}
	rc = rdb_evloop_add_fd(p->d->loop, p->mig_listen_fd, RDB_EV_READ,
			       on_mig_accept, p);
	if (rc < 0)
		return rc;
	p->hv->stream_free(p->stream);
	p->stream = NULL;
	rc = p->hv->stream_new(&p->stream, &stream_cb, p);
	if (rc < 0)
		return rc;
	/* Armed before QEMU may connect its stream (on_mig_accept hands the
	 * watchdog its duplicate): the initial state's stop is bounded too. */
	if (vm->cfg.watchdog_qmp && vm->cfg.watchdog_qmp[0] &&
	    !strcmp(p->hv->name, "qemu") && access(vm->cfg.watchdog_qmp, F_OK) < 0) {
		/* (a socket QEMU was not started with: it would fail only
		 * when the guest needs it) */
		LOGVM(WARN, vm->name, "watchdog_qmp %s: %s: no watchdog for this "
		      "guest, a stalled remusdbd could freeze it (QEMU needs "
		      "-qmp unix:%s,server=on,wait=off)", vm->cfg.watchdog_qmp,
		      strerror(errno), vm->cfg.watchdog_qmp);
	} else if (vm->cfg.watchdog_qmp && vm->cfg.watchdog_qmp[0]) {
		rc = rdb_watchdog_arm(p->d->wd, vm->name, p->hv, vm->cfg.watchdog_qmp,
				      (uint64_t)vm->cfg.checkpoint_deadline_ms *
				      RDB_NS_PER_MS);
		if (rc < 0)
			LOGVM(WARN, vm->name, "no watchdog slot: %s", strerror(-rc));
		else
			vm->wd_slot = rc;
	} else {
		LOGVM(WARN, vm->name, "no watchdog_qmp socket configured: a "
		      "stalled remusdbd could freeze this guest");
	}

	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->p = p;
	j->live_fd = -1;
	pthread_mutex_init(&j->lock, NULL);
	j->checkpoint_ms = vm->cfg.checkpoint_ms;
	j->ckpt_flags = vm->cfg.shared_ram ? RDB_HV_CKPT_SHARED_RAM : 0;
	snprintf(j->qmp_path, sizeof(j->qmp_path), "%s", vm->cfg.qmp);
	snprintf(j->name, sizeof(j->name), "%s", vm->name);
	snprintf(j->stream_path, sizeof(j->stream_path), "%s", p->mig_path);
	j->hv = p->hv;
	rc = rdb_bgjob_start(p->d->loop, colo_run, on_colo_done, j, &j->job);
	if (rc < 0) {
		pthread_mutex_destroy(&j->lock);
		free(j);
		snprintf(err, errlen, "starting COLO: %s", strerror(-rc));
		return rc;
	}
	p->colo_job = j;
	return 0;
}

/* Undoes everything protect set up (not the disk and NIC of an attached
 * VM); idempotent.  Not a state change: callers say what happened.
 * Output held for a pending decision, or by a fenced copy, is discarded,
 * never released.  False: the disk could not be synced (end_replication). */
bool rdb_pri_protection_cleanup(struct rdb_primary *p)
{
	struct rdb_vm *vm = p->vm;
	struct rdb_evloop *loop = p->d->loop;
	bool durable;

	rdb_pri_register_cancel(p);
	rdb_pri_decide_cancel(p);
	/* Output held until the witness says who owns the VM stays held:
	 * only its answer (or the operator) lets it go, not the end of a
	 * protection that never started. */
	rdb_pri_owner_check_pause(p);
	rdb_pri_guest_control_stop(p);
	connect_cancel(p);
	colo_cancel(p);
	if (rdb_pri_fenced(p))
		rdb_pri_discard_output(p);

	p->ck.active = false;
	p->ck.in_pause = false;
	p->stop_waits = false;
	p->devs_pending = 0;
	rdb_ckdevs_stop(&p->devs);
	if (vm->wd_slot >= 0) {
		rdb_watchdog_disarm(p->d->wd, vm->wd_slot);
		vm->wd_slot = -1;
	}
	if (p->hb_timer)
		rdb_evloop_del_timer(loop, p->hb_timer);
	if (p->slow_timer)
		rdb_evloop_del_timer(loop, p->slow_timer);
	p->hb_timer = p->slow_timer = 0;
	durable = end_replication(p);
	if (durable && !rdb_pri_owner_held(p))
		rdb_pri_release_output(p, UINT64_MAX);
	close_mig(p);
	rdb_pri_close_peer(p);
	if (p->mig_listen_fd >= 0) {
		rdb_evloop_del_fd(loop, p->mig_listen_fd);
		close(p->mig_listen_fd);
		unlink(p->mig_path);
		p->mig_listen_fd = -1;
	}
	p->hv->ctl_close(p->ctl);
	p->ctl = NULL;
	p->hv->stream_free(p->stream);
	p->stream = NULL;
	rdb_buf_reset(&p->out);
	rdb_buf_reset(&p->batch);
	p->nruns = 0;
	rdb_proto_decoder_dispose(&p->dec);
	rdb_proto_decoder_init(&p->dec);
	rdb_ckdevs_reset(&p->devs);
	rdb_pri_stop_pool(p);
	rdb_buf_reset(&p->enc_batch);
	p->ck.features = 0;
	p->epoch_pages = p->epoch_bytes = 0;
	p->ck.epoch_recs = p->ck.epoch_bytes = 0;
	p->ck.open_epoch = 0;
	p->protect_started = false;
	return durable;
}

static int protect_again(struct rdb_primary *p, char *err, size_t errlen)
{
	struct rdb_vm_config cfg;
	/* its own config, as it runs: protect takes an owned copy */
	int rc = rdb_vm_config_copy(&p->vm->cfg, &cfg, err, errlen);

	if (rc == 0)
		rc = rdb_primary_protect(p->d, &cfg, err, errlen);
	rdb_config_dispose(&rdb_vm_config_table, &cfg);
	return rc;
}

/* A primary for vm, nothing open yet. */
/* The lifecycle the primary's parts ask things of (primary_int.h). */
static const struct rdb_pri_life life = {
	.drop_protection = rdb_pri_drop_protection,
	.protection_cleanup = rdb_pri_protection_cleanup,
	.close_peer = rdb_pri_close_peer,
	.resume_after_epoch = rdb_pri_resume_after_epoch,
	.encoded = pri_encoded,
	.protect_registered = rdb_pri_protect_registered,
	.protect_failed = rdb_pri_protect_failed,
	.protect = protect_again,
};

static struct rdb_primary *primary_alloc(struct rdb_daemon *d, struct rdb_vm *vm)
{
	struct rdb_primary *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->life = &life;
	vm->pri = p;
	p->vm = vm;
	p->d = d;
	p->mig_listen_fd = p->mig_fd = -1;
	p->dev_host = (struct rdb_ckdev_host){
		.opaque = p,
		.epoch_out = dev_epoch_out,
		.link_out = dev_link_out,
		.queued = dev_queued,
		.want_write = dev_want_write,
		.fail = dev_fail,
		.ready = dev_ready,
		.gate = dev_gate,
		.from_wire = dev_from_wire,
	};
	p->peer_fd = -1;
	rdb_buf_init(&p->out);
	rdb_buf_init(&p->batch);
	rdb_buf_init(&p->enc_batch);
	rdb_buf_init(&p->held);
	for (unsigned k = 0; k < RDB_NICS_MAX; k++) {
		rdb_buf_init(&p->ho.frames[k]);
		rdb_buf_init(&p->ho.input[k]);
	}
	p->pool_fd = -1;
	p->cap_fd = -1;
	rdb_hv_proc_init(&p->restored_qemu);
	p->hv = rdb_vm_hv(vm);
	p->event_fd = -1;
	rdb_proto_decoder_init(&p->dec);
	return p;
}

/* The device table in the pipeline's order: disks, then NICs (an
 * epoch's close drains the disks QEMU drained, then reads the NICs). */
static void order_devices(struct rdb_primary *p)
{
	p->devs.n = 0;
	for (unsigned i = 0; i < p->ndisks; i++)
		rdb_ckdevs_add(&p->devs, &p->disks[i]->dev);
	for (unsigned i = 0; i < p->nnics; i++)
		rdb_ckdevs_add(&p->devs, &p->nics[i]->dev);
}

/* A new NIC device, nothing open yet. */
static int add_nic(struct rdb_primary *p, struct rdb_pri_nic **out)
{
	int rc;

	if (p->ndisks + p->nnics == RDB_CKDEV_MAX)
		return -ENOSPC;
	rc = rdb_pri_nic_new(out, p->nnics, p->vm->name,
			     &p->vm->cfg.protect_dscp, &p->ck,
			     &p->dev_host, &p->vm->st);
	if (rc < 0)
		return rc;
	p->nics[p->nnics++] = *out;
	order_devices(p);
	return 0;
}

/*
 * Disk k of a VM attached here, when this host's lineage record says a
 * failover restored the VM here from epoch E of protection G and the
 * guest's writes since are in a written map (restored), or that a
 * protection from that base has not committed its resync yet (primary
 * with a base): that map, G and E, so the disk's server records on and a
 * protect copies only what may differ (docs/resync.md).  Every disk has
 * such a base, each on the same image as recorded, or none has: NULL.
 */
static const char *restored_base(const struct rdb_lineage *l,
				 const struct rdb_vm_config *cfg, unsigned k,
				 uint64_t *gen, uint64_t *epoch)
{
	unsigned n = rdb_vm_config_ndisks(cfg);
	bool restored = l && l->role == RDB_LINEAGE_RESTORED;
	bool based = l && l->role == RDB_LINEAGE_PRIMARY && l->has_base;

	if ((!restored && !based) || l->ndisks != n || k >= n)
		return NULL;
	for (unsigned i = 0; i < n; i++) {
		const struct rdb_lineage_disk *ld = &l->d[i];
		const char *image = rdb_vm_config_disk_image(cfg, i);

		if (!image || strcmp(ld->disk, image) != 0 ||
		    !(restored ? ld->wmap : ld->base_wmap)[0])
			return NULL;
	}
	*gen = restored ? l->generation : l->base_generation;
	*epoch = restored ? l->epoch : l->base_epoch;
	return restored ? l->d[k].wmap : l->d[k].base_wmap;
}

/* Serves the VM's next disk: the first is cfg.disk on cfg.disk_socket,
 * the others cfg.extra_disk, then cfg.nvram, on disk_socket with their
 * number appended;
 * each with its activity log in the state directory (disk.al, disk1.al,
 * ...) and, for a restored VM, the disk's written map (wmap, or
 * NULL).  base_gen, base_epoch: what the VM was restored from (0: not). */
static int open_disk(struct rdb_primary *p, const char *wmap,
		     uint64_t base_gen, uint64_t base_epoch,
		     const struct rdb_lineage *l, char *err, size_t errlen)
{
	struct rdb_vm *vm = p->vm;
	unsigned n = p->ndisks;
	const char *image = rdb_vm_config_disk_image(&vm->cfg, n);
	struct rdb_pri_disk *k;
	char dir[400], al[512], sock[300];
	int rc;

	if (p->ndisks + p->nnics == RDB_CKDEV_MAX)
		return -ENOSPC;
	snprintf(dir, sizeof(dir), "%s/%s", p->d->cfg.state_dir, vm->name);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -errno;
	}
	rc = rdb_pri_disk_new(&k, p->ndisks, vm->name, p->d->loop, &p->ck,
			      &p->dev_host, &vm->st);
	if (rc < 0)
		return rc;
	p->disks[p->ndisks++] = k;
	order_devices(p);
	if (wmap) {
		k->base_gen = base_gen;
		k->base_epoch = base_epoch;
		snprintf(k->base_wmap, sizeof(k->base_wmap), "%s", wmap);
	}
	rdb_lineage_disk_file(al, sizeof(al), p->d->cfg.state_dir, vm->name, n,
			      "disk", "al");
	/* This host's image was the primary's of the recorded protection
	 * (its daemon stopped, or the disk was detached): the log goes on
	 * for it, kept from the first change, and protecting the VM again to
	 * that backup resyncs what it sets (its replica's epoch is unknown
	 * here: 0, the backup checks its own) */
	if (!wmap && l && l->role == RDB_LINEAGE_PRIMARY && n < l->ndisks &&
	    l->d[n].log_gen && strcmp(l->d[n].disk, image) == 0 &&
	    strcmp(l->d[n].actlog, al) == 0) {
		k->cont_gen = l->generation;
		k->cont_epoch = 0;
		k->cont_log_gen = k->log_gen = l->d[n].log_gen;
	}
	if (n)
		snprintf(sock, sizeof(sock), "%s%u", vm->cfg.disk_socket, n);
	else
		snprintf(sock, sizeof(sock), "%s", vm->cfg.disk_socket);
	rc = rdb_pri_disk_open(k, image, sock, al,
			       vm->cfg.activity_log_extents, wmap,
			       (uint64_t)vm->cfg.disk_ring_mb << 20,
			       (uint64_t)vm->cfg.checkpoint_deadline_ms *
			       RDB_NS_PER_MS, err, errlen);
	if (rc == 0 && (rc = rdb_daemon_share_with_qemu(p->d, sock, -1)) < 0)
		snprintf(err, errlen, "%s for qemu_group: %s", sock,
			 strerror(-rc));
	return rc;
}

/* A hypervisor whose NIC does not connect by itself (hv.h nic_attach):
 * connected once the NIC listens.  It holds the event loop, once per
 * attach, for at most half the failover timeout, so the backups of this
 * daemon's other VMs do not take the wait for its death (the Xen test
 * host under TCG answers in 0.2-0.3 s). */
static int attach_guest_nic(struct rdb_daemon *d, struct rdb_vm *vm,
			    struct rdb_primary *p, char *err, size_t errlen)
{
	char log[300];

	snprintf(log, sizeof(log), "%s/%s.nic.log", d->cfg.run_dir, vm->name);
	return p->hv->nic_attach(vm->name, vm->cfg.net_socket, log,
				 rdb_now_ns() + (uint64_t)d->cfg.failover_timeout_ms *
				 RDB_NS_PER_MS / 2, err, errlen);
}

/* nic_later: an attach before the domain exists (its disk must be served
 * before xl creates it) relays its NIC at protect instead. */
static int attach(struct rdb_daemon *d, struct rdb_vm_config *cfg,
		  bool nic_later, char *err, size_t errlen,
		  struct rdb_vm **vm_out)
{
	struct rdb_primary *p;
	struct rdb_pri_nic *n;
	struct rdb_vm *vm;
	int rc;

	if (rdb_vm_find(d, cfg->name)) {
		snprintf(err, errlen, "VM %s is already known to this daemon",
			 cfg->name);
		return -EEXIST;
	}
	vm = rdb_vm_new(d, cfg->name, RDB_ROLE_PRIMARY);
	p = vm ? primary_alloc(d, vm) : NULL;
	if (vm)
		vm->teardown = rdb_primary_teardown;
	if (!vm || !p) {
		rdb_vm_free(vm);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rdb_config_dispose(&rdb_vm_config_table, &vm->cfg);
	vm->cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	p->hv = rdb_vm_hv(vm);
	rc = add_nic(p, &n);
	if (rc == 0)
		rc = rdb_pri_nic_open(n, d->loop, vm->cfg.net_socket, vm->cfg.tap,
				      err, errlen);
	if (rc == 0 && (rc = rdb_daemon_share_with_qemu(d, vm->cfg.net_socket,
							 -1)) < 0)
		snprintf(err, errlen, "%s for qemu_group: %s",
			 vm->cfg.net_socket, strerror(-rc));
	if (rc == 0 && p->hv->nic_attach) {
		rc = attach_guest_nic(d, vm, p, err, errlen);
		if (rc == -ENOENT && nic_later) {
			LOGVM(INFO, vm->name, "NIC: no domain %s yet (%s): its "
			      "NIC is relayed when it is protected", vm->name, err);
			err[0] = 0;
			p->nic_pending = true;
			rc = 0;
		}
	}
	/* the other NICs (extra_nic): QEMU connects them by itself */
	for (unsigned k = 1; rc == 0 && k < rdb_vm_config_nnics(&vm->cfg); k++) {
		struct rdb_nic_spec sp;
		char sock[200];

		rc = rdb_vm_config_nic(&vm->cfg, k, sock, sizeof(sock), &sp);
		if (rc == 0)
			rc = add_nic(p, &n);
		if (rc == 0)
			rc = rdb_pri_nic_open(n, d->loop, sock, sp.tap, err, errlen);
		if (rc == 0 && (rc = rdb_daemon_share_with_qemu(d, sock, -1)) < 0)
			snprintf(err, errlen, "%s for qemu_group: %s", sock,
				 strerror(-rc));
	}
	if (rc == 0) {
		struct rdb_lineage l;
		char e2[300] = "";
		bool have = rdb_lineage_load(d->cfg.state_dir, vm->name, &l, e2,
					     sizeof(e2)) == 0;

		for (unsigned k = 0; rc == 0 && k < rdb_vm_config_ndisks(&vm->cfg);
		     k++) {
			uint64_t gen = 0, epoch = 0;
			const char *wmap = restored_base(have ? &l : NULL, &vm->cfg,
							 k, &gen, &epoch);

			rc = open_disk(p, wmap, gen, epoch, have ? &l : NULL,
				       err, errlen);
		}
		if (rc == 0 && p->ndisks && p->disks[0]->base_gen)
			LOGVM(INFO, vm->name, "its disks are those restored here "
			      "from epoch %llu of protection %016llx: what the guest "
			      "wrote since is recorded on (a protect copies only "
			      "what may differ)", (unsigned long long)
			      p->disks[0]->base_epoch,
			      (unsigned long long)p->disks[0]->base_gen);
	}
	if (rc < 0) {
		if (!err[0])
			snprintf(err, errlen, "%s", strerror(-rc));
		LOGVM(ERROR, vm->name, "attach failed: %s", err);
		rdb_primary_teardown(vm);
		rdb_vm_free(vm);
		return rc;
	}
	*vm_out = vm;
	return 0;
}

int rdb_primary_attach(struct rdb_daemon *d, struct rdb_vm_config *cfg,
		       char *err, size_t errlen)
{
	struct rdb_vm *vm;
	int rc = attach(d, cfg, true, err, errlen, &vm);

	if (rc < 0)
		return rc;
	if (vm->pri->ndisks) {
		char more[64] = "";

		if (vm->pri->ndisks > 1)
			snprintf(more, sizeof(more), " (and %u more disk(s))",
				 vm->pri->ndisks - 1);
		rdb_vm_set_state(vm, RDB_VM_UNPROTECTED, "attached: disk %s "
				 "(%llu MiB) served on %s%s, not protected yet",
				 vm->cfg.disk,
				 (unsigned long long)(vm->pri->disks[0]->disk.size >> 20),
				 vm->cfg.disk_socket, more);
	} else {
		rdb_vm_set_state(vm, RDB_VM_UNPROTECTED, "attached: no disk, "
				 "not protected yet");
	}
	rdb_pri_owner_hold(vm->pri, "attached");
	rdb_pri_owner_check(vm->pri);
	return 0;
}

int rdb_primary_readopt(struct rdb_daemon *d, struct rdb_vm_config *cfg,
			bool protect, char *err, size_t errlen)
{
	char name[sizeof(((struct rdb_vm *)0)->name)];
	struct rdb_vm *vm;
	int rc;

	snprintf(name, sizeof(name), "%s", cfg->name);
	rc = rdb_primary_attach(d, cfg, err, errlen);
	if (rc < 0)
		return rc;
	vm = rdb_vm_find(d, name);
	vm->readopted = true;
	vm->pri->readopt_protect = protect;
	return 0;
}

void rdb_primary_readopt_tick(struct rdb_vm *vm)
{
	struct rdb_primary *p = vm->pri;
	char err[512] = "";
	int rc;

	if (!p || !p->readopt_protect)
		return;
	if (rdb_pri_owner_held(p) || rdb_pri_registering(p))
		return;		/* the witness has not answered yet */
	p->readopt_protect = false;
	if (rdb_pri_fenced(p) || rdb_pri_deciding(p) ||
	    (vm->state != RDB_VM_UNPROTECTED && vm->state != RDB_VM_DEGRADED)) {
		LOGVM(INFO, vm->name, "re-adopted: not protected again by "
		      "remusdbd, the VM is %s (%s)", rdb_vm_state_name(vm->state),
		      vm->state_reason);
		return;
	}
	LOGVM(INFO, vm->name, "re-adopted: the witness says this host runs the "
	      "VM; protecting it again, as recorded");
	rc = p->life->protect(p, err, sizeof(err));
	if (rc < 0)
		LOGVM(ERROR, vm->name, "re-adopted, but protecting it again "
		      "failed: %s", err[0] ? err : strerror(-rc));
}

/*
 * This host's image is the primary's of the new protection, its activity
 * log about to be armed for it (lineage.h): after a power pull here the
 * backup can protect the VM back to this image and resync only what the
 * log names.  A restored VM keeps its base until the resync commits.
 * Failing costs only that: a later resync copies the whole disk.
 */
static void record_primary(struct rdb_primary *p)
{
	struct rdb_vm *vm = p->vm;
	struct rdb_lineage l = { 0 };
	char err[300] = "";
	const char *why = NULL;

	l.role = RDB_LINEAGE_PRIMARY;
	l.generation = p->generation;
	snprintf(l.peer, sizeof(l.peer), "%s", vm->cfg.peer ? vm->cfg.peer : "");
	l.ndisks = p->ndisks;
	if (p->ndisks > RDB_LINEAGE_DISKS)
		why = "more disks than a lineage record names";
	for (unsigned i = 0; !why && i < p->ndisks; i++) {
		const struct rdb_pri_disk *k = p->disks[i];
		struct rdb_lineage_disk *ld = &l.d[i];

		if (!k->actlog_path[0]) {
			why = "no activity log";
			break;
		}
		ld->log_gen = k->log_gen;
		snprintf(ld->disk, sizeof(ld->disk), "%.255s",
			 rdb_vm_config_disk_image(&vm->cfg, i));
		snprintf(ld->actlog, sizeof(ld->actlog), "%.255s", k->actlog_path);
		/* the restored lineage the disks came from, all of them
		 * restored together (a disk without a written map is copied
		 * whole, and keeps no base) */
		if (k->base_gen && !k->cont) {
			l.has_base = true;
			l.base_generation = k->base_gen;
			l.base_epoch = k->base_epoch;
			snprintf(ld->base_wmap, sizeof(ld->base_wmap), "%.255s",
				 k->base_wmap);
		}
	}
	if (why || rdb_lineage_save(p->d->cfg.state_dir, vm->name, &l, err,
				    sizeof(err)) < 0)
		LOGVM(WARN, vm->name, "no lineage record (%s): after a failover "
		      "these images cannot be resynced, only copied whole",
		      why ? why : err);
}

static int start_protection(struct rdb_primary *p, char *err, size_t errlen)
{
	struct rdb_vm *vm = p->vm;
	int rc;

	p->protect_started = true;
	p->ck.cp = rdb_vm_config_commit_protection(&vm->cfg);
	/* Each disk's activity log is armed for this protection's
	 * generation before its first change is recorded (actlog.h); the
	 * lineage record names every disk (lineage.h). */
	for (unsigned i = 0; i < p->ndisks; i++)
		if (!rdb_pri_disk_continue(p->disks[i]))
			p->disks[i]->log_gen =
				rdb_pri_disk_next_log_gen(p->disks[i]);
	if (p->ndisks)
		record_primary(p);
	/* Late checkpoints of an earlier protection are not this one's. */
	memset(p->overrun_ns, 0, sizeof(p->overrun_ns));
	p->overrun_why[0] = 0;
	/* Epochs count from 0 again in a new protection (a new COLO run). */
	vm->st.checkpoints = 0;
	vm->st.committed_epoch = 0;
	vm->st.first_ckpt_ns = vm->st.last_ckpt_ns = vm->st.last_ack_ns = 0;
	rc = connect_start(p);
	if (rc < 0)
		snprintf(err, errlen, "cannot start connecting to backup %s: %s",
			 vm->cfg.peer, strerror(-rc));
	return rc;
}

/* The backup answered (or not): protection goes on from here. */
static int link_up(struct rdb_primary *p, struct connect_job *j, char *err,
		   size_t errlen)
{
	struct rdb_daemon *d = p->d;
	struct rdb_vm *vm = p->vm;
	int rc;

	if (j->rc < 0) {
		snprintf(err, errlen, "%s", j->err[0] ? j->err : strerror(-j->rc));
		return j->rc;
	}
	p->peer_fd = j->fd;
	j->fd = -1;
	rdb_proto_decoder_dispose(&p->dec);
	p->dec = j->dec;
	rdb_proto_decoder_init(&j->dec);
	p->ck.features = j->features;
	if (p->ck.cp && !(p->ck.features & RDB_FEATURE_FLOWS))
		LOGVM(WARN, vm->name, "backup %s does not take flow records: after "
		      "a failover it cannot reset TCP flows the primary's "
		      "unprotected output made inconsistent", vm->cfg.peer);
	LOGVM(INFO, vm->name, "replication link to backup %s: %s", vm->cfg.peer,
	      j->link);
	rdb_peer_heard(&p->peer, rdb_watchdog_host_stall_ns(p->d->wd), rdb_now_ns());
	rc = rdb_evloop_add_fd(d->loop, p->peer_fd, RDB_EV_READ, on_peer, p);
	if (rc == 0)
		rc = rdb_evloop_add_timer(d->loop,
					  (uint64_t)d->cfg.heartbeat_ms * RDB_NS_PER_MS,
					  on_heartbeat, p, &p->hb_timer);
	if (rc < 0)
		return rc;
	/* our failure timing first: the backup checks it, and answers with
	 * its own (proto.h, TIMING) */
	if (p->ck.features & RDB_FEATURE_TIMING) {
		struct rdb_timing t = my_timing(d);

		rc = rdb_proto_put_timing(&p->out, &t);
		if (rc < 0)
			return rc;
		rdb_pri_peer_want_write(p);
	}
	p->ck.active = true;
	p->initial_open = true;
	/* Every device records from here on: a disk's changes reach the
	 * backup after its copy's chunk of their range, or in it.  Output
	 * leaves and the guest's flushes are synced here until the guest
	 * stops for the initial state (on_epoch_end); from then on the
	 * backup's replica carries them (disk.h) and output waits for the
	 * backup's acknowledgement.  Checkpoints start once every device's
	 * initial work (a disk's copy) is queued: dev_ready. */
	vm->st.resync_bytes = vm->st.resync_blocks = vm->st.copy_ns = 0;
	vm->st.resynced = false;
	p->devs_starting = true;
	p->devs_ready_early = 0;
	rc = rdb_ckdevs_start(&p->devs, err, errlen);
	p->devs_starting = false;
	if (rc < 0)
		return rc;
	p->devs_pending = (unsigned)rc - p->devs_ready_early;
	if (p->devs_pending == 0)
		return start_colo(p, err, errlen);
	return 0;
}

static void log_protecting(struct rdb_primary *p);

static void connected(struct rdb_primary *p, struct connect_job *j)
{
	char err[640] = "";
	int rc = link_up(p, j, err, sizeof(err));

	if (rc < 0) {
		if (!err[0])
			snprintf(err, sizeof(err), "%s", strerror(-rc));
		p->arp.refused = j->refused;
		rdb_pri_protect_failed(p, err);
	}
	/* logged once connected (connected()) */
}

static void log_protecting(struct rdb_primary *p)
{
	struct rdb_vm *vm = p->vm;

	LOGVM(INFO, vm->name, "protecting: backup %s, mode %s, checkpoint every "
	      "%u ms, deadline %u ms%s, on_peer_loss = %s, generation %016llx",
	      vm->cfg.peer, vm->cfg.mode, vm->cfg.checkpoint_ms,
	      vm->cfg.checkpoint_deadline_ms,
	      p->ndisks ? ", disk replicated" : "",
	      rdb_peer_loss_name(vm->peer_loss), (unsigned long long)p->generation);
	if (p->ck.cp && !vm->cfg.event_port)
		LOGVM(WARN, vm->name, "commit-protection without event_port: after "
		      "a failover the guest's DBMS cannot learn it and abort "
		      "the transactions that had not asked to commit");
}

static int begin_protection(struct rdb_vm *vm, enum rdb_peer_loss peer_loss,
			    bool attached, char *err, size_t errlen);

/*
 * A protection that did not start is undone; the VM is left unprotected
 * (or failed: its image could not be synced).  Output held until the
 * witness says who owns the VM stays held, and the check asks on: a
 * protect that failed (the witness unreachable, say) is no answer.
 */
static void protect_failed_state(struct rdb_primary *p, const char *err)
{
	struct rdb_vm *vm = p->vm;
	double next_s = 0;
	bool again = rdb_pri_auto_failed(p, err, &next_s);

	if (!rdb_pri_protection_cleanup(p))
		rdb_vm_set_state(vm, RDB_VM_FAILED, "protect failed: %s; the disk "
				 "image could not be synced: guest paused, for "
				 "the operator", err);
	else if (rdb_pri_owner_held(p))
		rdb_vm_set_state(vm, RDB_VM_UNPROTECTED, "protect failed: %s; "
				 "output held until the witness says who owns "
				 "the VM", err);
	else if (again)
		/* (degraded: unprotected by no one's wish) */
		rdb_vm_set_state(vm, RDB_VM_DEGRADED, "re-protect attempt %u "
				 "failed: %s; the next in %.0f s", p->arp.attempts,
				 err, next_s);
	else
		rdb_vm_set_state(vm, RDB_VM_UNPROTECTED, "protect failed: %s", err);
	rdb_pri_owner_check(p);
}

int rdb_primary_protect(struct rdb_daemon *d, struct rdb_vm_config *cfg,
			char *err, size_t errlen)
{
	struct rdb_vm *vm = rdb_vm_find(d, cfg->name);
	bool attached = vm != NULL;
	enum rdb_peer_loss peer_loss;
	int rc;

	if (vm && (vm->role != RDB_ROLE_PRIMARY || !vm->pri)) {
		snprintf(err, errlen, "VM %s is known here as a %s", cfg->name,
			 rdb_vm_role_name(vm->role));
		return -EEXIST;
	}
	/* Protected now, or on the way: nothing to do, and its mode stays
	 * (the guest's DBMS and the backup work to it).  Degraded or
	 * unprotected: protect again from scratch (a new backup link, the
	 * whole disk copied again, a new COLO run in the same QEMU), in the
	 * mode asked now. */
	if (vm && (rdb_pri_deciding(vm->pri) || rdb_pri_fenced(vm->pri))) {
		snprintf(err, errlen, "VM %s is %s: %s", cfg->name,
			 rdb_vm_state_name(vm->state), vm->pri->ho.phase == RDB_HO_MIGRATED ?
			 "it was handed over to its backup and runs there" :
			 vm->pri->ho.phase == RDB_HO_STOPPED ?
			 "its guest is stopped (a handover the link cut short)" :
			 rdb_pri_fenced(vm->pri) ?
			 "it lost the failover decision and its guest is "
			 "stopped (the backup's copy runs)" :
			 "which host runs it is being decided");
		return -EBUSY;
	}
	{
		/* the policy as it will be: the request's, else as attached */
		const char *pl = cfg->on_peer_loss && cfg->on_peer_loss[0] ?
			cfg->on_peer_loss : vm && vm->cfg.on_peer_loss ?
			vm->cfg.on_peer_loss : "";
		struct rdb_vm_config t = { .name = cfg->name, .on_peer_loss = (char *)pl };

		rc = rdb_vm_config_peer_loss(&t, d->witness != NULL, &peer_loss,
					     err, errlen);
		if (rc < 0)
			return rc;
	}
	if (vm && (vm->pri->ck.active || rdb_pri_registering(vm->pri) ||
		   (vm->state != RDB_VM_UNPROTECTED && vm->state != RDB_VM_DEGRADED))) {
		const char *now = vm->cfg.mode ? vm->cfg.mode : "plain";
		const char *want = cfg->mode ? cfg->mode : "plain";

		if (strcmp(now, want))
			snprintf(err, errlen, "VM %s is %s in mode %s: a protected "
				 "VM's mode cannot change; unprotect it, then "
				 "protect it with mode = %s", cfg->name,
				 rdb_vm_state_name(vm->state), now, want);
		else
			snprintf(err, errlen, "VM %s is already %s on this host "
				 "(mode %s)", cfg->name,
				 rdb_vm_state_name(vm->state), now);
		return -EEXIST;
	}
	if (vm && rdb_pri_owner_held(vm->pri) && peer_loss != RDB_PEER_LOSS_WITNESS) {
		snprintf(err, errlen, "VM %s is attached with its output held until "
			 "the witness says who owns it (%s); with on_peer_loss = %s "
			 "protection would not ask it: wait for its answer, or let "
			 "the output go with `remusdbctl unprotect --force %s` (only "
			 "if no other host runs it)", cfg->name, vm->state_reason,
			 rdb_peer_loss_name(peer_loss), cfg->name);
		return -EBUSY;
	}
	if (!vm) {
		rc = attach(d, cfg, false, err, errlen, &vm);
		if (rc < 0)
			return rc;
		/* This daemon never ran the VM: until the witness says who
		 * owns it (its answer to this protection's registration, or,
		 * with on_peer_loss manual or unsafe-auto, to a read of the
		 * VM's key), the guest's output is held. */
		rdb_pri_owner_hold(vm->pri, "protect");
		if (peer_loss != RDB_PEER_LOSS_WITNESS)
			rdb_pri_owner_check(vm->pri);
	} else {
		bool again = vm->pri->protect_started;

		if (vm->pri->nic_pending) {
			/* attached before its domain was created */
			rc = attach_guest_nic(d, vm, vm->pri, err, errlen);
			if (rc < 0) {
				LOGVM(ERROR, vm->name, "protect: NIC: %s", err);
				return rc;
			}
			vm->pri->nic_pending = false;
		}

		rc = rdb_vm_config_take_protection(&vm->cfg, cfg);
		if (rc < 0) {
			snprintf(err, errlen, "out of memory");
			return rc;
		}
		rdb_pri_protection_cleanup(vm->pri);
		if (vm->pri->arp.attempting)
			rdb_vm_set_state(vm, RDB_VM_PROTECTING, "protecting again "
					 "on its own (attempt %u): the backup's "
					 "remusdbd went away", vm->pri->arp.attempts);
		else
			rdb_vm_set_state(vm, RDB_VM_PROTECTING, "operator protect%s",
					 again ? " (again, after it was dropped)" : "");
	}
	return begin_protection(vm, peer_loss, attached, err, errlen);
}

/* Protection of an attached VM starts: a new generation, the witness's
 * word on it if that is the policy, then the backup. */
static int begin_protection(struct rdb_vm *vm, enum rdb_peer_loss peer_loss,
			    bool attached, char *err, size_t errlen)
{
	struct rdb_daemon *d = vm->pri->d;
	int rc;

	vm->peer_loss = peer_loss;
	vm->pri->registered[0] = 0;
	vm->st.protect_start_ns = rdb_now_ns();
	vm->st.colo_start_ns = vm->st.initial_mem_bytes = 0;
	vm->st.initial_ns = vm->st.initial_mem_ns = vm->st.initial_stop_ns = 0;
	/* A new protection, told apart from every other one (the witness's
	 * decision, the guest's failover event): 64 random bits. */
	if (getrandom(&vm->pri->generation, sizeof(vm->pri->generation), 0) !=
	    (ssize_t)sizeof(vm->pri->generation))
		vm->pri->generation = rdb_now_ns() ^ ((uint64_t)getpid() << 40);
	if (peer_loss == RDB_PEER_LOSS_WITNESS) {
		/* Protection starts once the witness has this generation
		 * (rdb_pri_protect_registered), without blocking the loop. */
		rc = rdb_pri_register(vm->pri);
		if (rc == 0) {
			LOGVM(INFO, vm->name, "registering protection generation "
			      "%016llx at the witness %s",
			      (unsigned long long)vm->pri->generation,
			      rdb_witness_endpoints(d->witness));
			return 0;
		}
		snprintf(err, errlen, "cannot ask the witness: %s", strerror(-rc));
	} else {
		rc = start_protection(vm->pri, err, errlen);
	}
	if (rc < 0) {
		if (!err[0])
			snprintf(err, errlen, "%s", strerror(-rc));
		LOGVM(ERROR, vm->name, "protect failed: %s", err);
		if (!attached) {
			rdb_primary_teardown(vm);
			rdb_vm_free(vm);
		} else {
			protect_failed_state(vm->pri, err);
		}
		return rc;
	}
	LOGVM(INFO, vm->name, "connecting to backup %s", vm->cfg.peer);
	return 0;
}

/* Options of a restored VM that are this host's, not the operator's. */
static const char *const own_keys[] = {
	"name", "qmp", "watchdog_qmp", "net_socket", "disk", "disk_socket",
	"extra_disk", "extra_nic", "nvram", "qemu_arg",
};

/* The VM file of the restored VM as this host serves it: the primary's
 * (prim, as the backup received it), with this host's sockets and tap
 * (its disks are set after: the replicas); need_peer: a protect's, which
 * names the new backup. */
static int survivor_config(struct rdb_daemon *d, const struct rdb_vm_config *prim,
			   const char *name, json_t *set, bool need_peer,
			   struct rdb_vm_config *cfg, char *err, size_t errlen)
{
	const char *own_tap = prim->backup_tap && prim->backup_tap[0] ?
		prim->backup_tap : prim->tap;
	char path[600], old_tap[64];
	const char *key;
	json_t *v;
	int rc;

	snprintf(old_tap, sizeof(old_tap), "%s", prim->tap ? prim->tap : "");
	rc = rdb_vm_config_copy(prim, cfg, err, errlen);
	if (rc < 0)
		return rc;
	json_object_foreach(set, key, v) {
		const char *val = json_string_value(v);

		for (size_t i = 0; i < sizeof(own_keys) / sizeof(own_keys[0]); i++)
			if (!strcmp(key, own_keys[i])) {
				snprintf(err, errlen, "%s of a restored VM is this "
					 "host's: remusdbd sets it", key);
				return -EINVAL;
			}
		if (!val) {
			snprintf(err, errlen, "%s: expected a string", key);
			return -EINVAL;
		}
		rc = rdb_config_set(&rdb_vm_config_table, cfg, key, val, err, errlen);
		if (rc < 0)
			return rc;
	}
#define SET(k, fmt, ...) do {						\
		snprintf(path, sizeof(path), fmt, __VA_ARGS__);		\
		rc = rdb_config_set(&rdb_vm_config_table, cfg, k, path, err, errlen); \
		if (rc < 0)						\
			return rc;					\
	} while (0)
	SET("qmp", "%s/%s.qmp", d->cfg.run_dir, name);
	SET("watchdog_qmp", "%s/%s.wd.qmp", d->cfg.run_dir, name);
	SET("net_socket", "%s/%s.net", d->cfg.run_dir, name);
	SET("tap", "%s", own_tap);
	/* the new backup is the old primary, or a host like it: its tap is
	 * the one the primary used */
	if (!json_object_get(set, "backup_tap"))
		SET("backup_tap", "%s", old_tap);
	/* the other NICs likewise: this host's tap is the one its
	 * extra_nic gave the backup, the new backup's the old primary's */
	{
		struct rdb_strlist old = cfg->extra_nic;

		memset(&cfg->extra_nic, 0, sizeof(cfg->extra_nic));
		for (size_t i = 0; rc == 0 && i < old.n; i++) {
			struct rdb_nic_spec sp;

			rc = rdb_nic_spec_parse(old.v[i], &sp, err, errlen);
			if (rc == 0)
				snprintf(path, sizeof(path), "tap=%s,backup_tap=%s%s%s",
					 sp.backup_tap[0] ? sp.backup_tap : sp.tap,
					 sp.tap, sp.mac[0] ? ",mac=" : "", sp.mac);
			if (rc == 0)
				rc = rdb_config_set(&rdb_vm_config_table, cfg,
						    "extra_nic", path, err, errlen);
		}
		rdb_strlist_clear(&old);
		if (rc < 0)
			return rc;
	}
	if (cfg->disk && cfg->disk[0])
		SET("disk_socket", "%s/%s.disk", d->cfg.run_dir, name);
#undef SET
	if (need_peer && (!cfg->peer || !cfg->peer[0])) {
		snprintf(err, errlen, "protecting the restored VM %s needs "
			 "peer=HOST:PORT (its new backup)", name);
		return -EINVAL;
	}
	return rdb_vm_config_check(cfg, err, errlen);
}

int rdb_primary_restored_begin(struct rdb_daemon *d, struct rdb_vm *vm,
			       json_t *set, struct rdb_nic_dst *dst,
			       unsigned *ndst, char *err, size_t errlen)
{
	enum rdb_peer_loss peer_loss;
	struct rdb_vm_config cfg;
	struct rdb_primary *p;
	struct rdb_pri_nic *n = NULL;
	int rc;

	rc = survivor_config(d, &vm->cfg, vm->name, set, true, &cfg, err, errlen);
	if (rc == 0) {
		struct rdb_vm_config t = { .name = cfg.name,
					   .on_peer_loss = cfg.on_peer_loss };

		rc = rdb_vm_config_peer_loss(&t, d->witness != NULL, &peer_loss,
					     err, errlen);
	}
	if (rc < 0) {
		rdb_config_dispose(&rdb_vm_config_table, &cfg);
		return rc;
	}
	p = primary_alloc(d, vm);
	rc = p ? 0 : -ENOMEM;
	for (unsigned k = 0; rc == 0 && k < rdb_vm_config_nnics(&cfg); k++) {
		rc = add_nic(p, &n);
		if (rc == 0)
			dst[k] = (struct rdb_nic_dst){ &n->nic,
						       rdb_pri_nic_from_guest, n };
	}
	if (rc < 0) {
		rdb_primary_restored_abort(vm);
		rdb_config_dispose(&rdb_vm_config_table, &cfg);
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	*ndst = p->nnics;
	p->adopt_cfg = cfg;
	p->adopt_peer_loss = peer_loss;
	return 0;
}

void rdb_primary_restored_abort(struct rdb_vm *vm)
{
	struct rdb_primary *p = vm->pri;

	if (!p)
		return;
	rdb_ckdevs_close(&p->devs);
	rdb_config_dispose(&rdb_vm_config_table, &p->adopt_cfg);
	rdb_proto_decoder_dispose(&p->dec);
	free(p);
	vm->pri = NULL;
}

/* The replicas (paths, disk 0 first), as a restored VM's images on this
 * host (the old primary's extra_disk and nvram named that host's); the
 * variable store is the last of them. */
static int replica_disks(struct rdb_vm_config *cfg, const char *const *paths,
			 unsigned n, char *err, size_t errlen)
{
	bool nvram = cfg->nvram && cfg->nvram[0];
	int rc = 0;

	rdb_strlist_clear(&cfg->extra_disk);
	if (n)
		rc = rdb_config_set(&rdb_vm_config_table, cfg, "disk", paths[0],
				    err, errlen);
	for (unsigned k = 1; rc == 0 && k < n; k++)
		rc = rdb_config_set(&rdb_vm_config_table, cfg,
				    nvram && k == n - 1 ? "nvram" : "extra_disk",
				    paths[k], err, errlen);
	return rc;
}

int rdb_primary_restored_adopt(struct rdb_vm *vm, const struct rdb_handover *h,
			       char *err, size_t errlen)
{
	struct rdb_primary *p = vm->pri;
	struct rdb_daemon *d = p->d;
	struct rdb_vm_config cfg = p->adopt_cfg;
	char disk[512] = "";
	int rc = 0;

	memset(&p->adopt_cfg, 0, sizeof(p->adopt_cfg));
	for (unsigned k = 0; k < p->nnics; k++)
		rdb_pri_nic_adopted(p->nics[k]);
	vm->role = RDB_ROLE_PRIMARY;
	vm->teardown = rdb_primary_teardown;
	p->restored_qemu = h->qemu;
	p->event_fd = h->event_fd;
	/* the replicas, as this host's images now (the old primary's
	 * extra_disk and nvram named that host's); the variable store is
	 * the last of them */
	{
		const char *paths[RDB_DISKS_MAX];

		for (unsigned k = 0; k < h->ndisks; k++)
			paths[k] = h->disk_paths[k];
		if (h->ndisks)
			snprintf(disk, sizeof(disk), "%s", h->disk_paths[0]);
		rc = replica_disks(&cfg, paths, h->ndisks, err, errlen);
	}
	rdb_config_dispose(&rdb_vm_config_table, &vm->cfg);
	vm->cfg = cfg;
	/* each disk with its written map, the base of its resync (one
	 * without is copied whole to the new backup) */
	for (unsigned k = 0; rc == 0 && k < h->ndisks; k++)
		rc = open_disk(p, h->wmap_paths[k][0] ? h->wmap_paths[k] : NULL,
			       h->generation, h->epoch, NULL, err, errlen);
	if (rc < 0) {
		LOGVM(ERROR, vm->name, "the restored VM's disk %s could not be "
		      "served by its new disk server: %s", disk, err);
		rdb_vm_set_state(vm, RDB_VM_FAILED, "taking over the restored VM: "
				 "%s (QEMU holds its disk requests, up to 15 s)",
				 err);
		return rc;
	}
	LOGVM(INFO, vm->name, "the VM restored here (epoch %llu of protection "
	      "%016llx) is this host's primary now: disk %s, QEMU pid %d",
	      (unsigned long long)h->epoch, (unsigned long long)h->generation,
	      disk[0] ? disk : "(none)", (int)h->qemu.pid);
	{
		/* the VM file as this host serves it, for the operator's
		 * later protect (after an unprotect) or attach */
		char path[600], e2[300];

		snprintf(path, sizeof(path), "%s/%s/vm.conf", d->cfg.state_dir,
			 vm->name);
		if (rdb_vm_config_write_file(&vm->cfg, path, e2, sizeof(e2)) < 0)
			LOGVM(WARN, vm->name, "the VM file as served here: %s", e2);
		else
			LOGVM(INFO, vm->name, "the VM file as served here: %s "
			      "(remusdbctl protect/attach take it)", path);
	}
	rdb_vm_set_state(vm, RDB_VM_PROTECTING, "operator protect: the VM "
			 "restored here, to backup %s", vm->cfg.peer);
	return begin_protection(vm, p->adopt_peer_loss, true, err, errlen);
}

int rdb_primary_readopt_restored(struct rdb_daemon *d,
				 const struct rdb_vm_config *prim,
				 json_t *restored, char *err, size_t errlen)
{
	json_t *disks = json_object_get(restored, "disks");
	const char *paths[RDB_DISKS_MAX];
	struct rdb_vm_config cfg;
	unsigned n = 0;
	size_t i;
	json_t *v;
	int rc;

	json_array_foreach(disks, i, v) {
		if (!json_is_string(v) || n == RDB_DISKS_MAX) {
			snprintf(err, errlen, "its recorded replicas are malformed");
			return -EINVAL;
		}
		paths[n++] = json_string_value(v);
	}
	rc = survivor_config(d, prim, prim->name, NULL, false, &cfg, err, errlen);
	if (rc == 0)
		rc = replica_disks(&cfg, paths, n, err, errlen);
	if (rc == 0)
		rc = rdb_vm_config_check(&cfg, err, errlen);
	if (rc == 0)
		rc = rdb_primary_readopt(d, &cfg, false, err, errlen);
	rdb_config_dispose(&rdb_vm_config_table, &cfg);
	return rc;
}

int rdb_primary_protect_named(struct rdb_daemon *d, struct rdb_vm *vm,
			      json_t *set, char *err, size_t errlen)
{
	struct rdb_vm_config cfg;
	const char *key;
	json_t *v;
	int rc;

	if (vm->role != RDB_ROLE_PRIMARY || !vm->pri) {
		snprintf(err, errlen, "VM %s is not this host's", vm->name);
		return -EINVAL;
	}
	rc = rdb_vm_config_copy(&vm->cfg, &cfg, err, errlen);
	if (rc < 0)
		return rc;
	json_object_foreach(set, key, v) {
		const char *val = json_string_value(v);

		for (size_t i = 0; rc == 0 && i < sizeof(own_keys) / sizeof(own_keys[0]);
		     i++)
			if (!strcmp(key, own_keys[i])) {
				snprintf(err, errlen, "%s of an attached VM is as "
					 "attached: protect its VM file to change "
					 "it", key);
				rc = -EINVAL;
			}
		if (rc == 0 && !val) {
			snprintf(err, errlen, "%s: expected a string", key);
			rc = -EINVAL;
		}
		if (rc == 0)
			rc = rdb_config_set(&rdb_vm_config_table, &cfg, key, val,
					    err, errlen);
		if (rc < 0)
			break;
	}
	if (rc == 0 && (!cfg.peer || !cfg.peer[0])) {
		snprintf(err, errlen, "protecting %s needs peer=HOST:PORT (its "
			 "backup)", vm->name);
		rc = -EINVAL;
	}
	if (rc == 0)
		rc = rdb_vm_config_check(&cfg, err, errlen);
	if (rc == 0)
		rc = rdb_primary_protect(d, &cfg, err, errlen);
	rdb_config_dispose(&rdb_vm_config_table, &cfg);
	return rc;
}

void rdb_pri_protect_failed(struct rdb_primary *p, const char *err)
{
	LOGVM(ERROR, p->vm->name, "protect failed: %s", err);
	protect_failed_state(p, err);
}

void rdb_pri_protect_registered(struct rdb_primary *p)
{
	char err[300] = "";
	int rc = start_protection(p, err, sizeof(err));

	if (rc < 0) {
		if (!err[0])
			snprintf(err, sizeof(err), "%s", strerror(-rc));
		rdb_pri_protect_failed(p, err);
		return;
	}
	log_protecting(p);
}

int rdb_primary_unprotect(struct rdb_vm *vm, bool force, char *msg,
			  size_t msglen)
{
	struct rdb_primary *p = vm->pri;

	if (!p)
		return -ENOENT;
	/* the operator's word now: no protect from the re-adoption, nor
	 * again on its own */
	p->readopt_protect = false;
	rdb_pri_auto_cancel(p, "operator unprotect");
	if (rdb_pri_deciding(p) && !force) {
		snprintf(msg, msglen, "%s is deciding which host runs it (%s); "
			 "`remusdbctl unprotect --force %s` runs it here now, "
			 "unprotected: only if the backup's copy is certainly not "
			 "running", vm->name, vm->state_reason, vm->name);
		return -EBUSY;
	}
	if (rdb_pri_owner_held(p) && !force) {
		snprintf(msg, msglen, "%s's output is held until the witness says "
			 "who owns it (%s); `remusdbctl unprotect --force %s` lets "
			 "it go now: only if no other host runs it", vm->name,
			 vm->state_reason, vm->name);
		return -EBUSY;
	}
	if (rdb_pri_owner_held(p)) {
		LOGVM(WARN, vm->name, "the operator lets the VM's held output go "
		      "without the witness's word (unprotect --force)");
		if (rdb_pri_registering(p))
			rdb_pri_protection_cleanup(p);	/* protect cancelled */
		rdb_pri_owner_let_go(p, "the operator's unprotect --force");
		if (vm->state == RDB_VM_UNPROTECTED)	/* (no state change) */
			snprintf(vm->state_reason, sizeof(vm->state_reason), "%s; "
				 "output let go by the operator (unprotect "
				 "--force)", p->owner_reason);
		else
			rdb_vm_set_state(vm, RDB_VM_UNPROTECTED, "%s; output let go "
					 "by the operator (unprotect --force)",
					 p->owner_reason);
		snprintf(msg, msglen, "%s: its held output let go, without the "
			 "witness's word", vm->name);
		return 0;
	}
	if (p->ho.phase == RDB_HO_MIGRATED) {
		snprintf(msg, msglen, "%s was handed over to %s and runs there; "
			 "nothing of it runs here (this entry goes when the VM "
			 "is protected back to this host)", vm->name, vm->cfg.peer);
		return -EPERM;
	}
	if (p->ho.phase == RDB_HO_STOPPED && !force) {
		snprintf(msg, msglen, "%s was being handed over when the link "
			 "broke: its guest is stopped here because the backup may "
			 "run it; `remusdbctl unprotect --force %s` resumes it "
			 "here (two copies if the backup's runs)", vm->name,
			 vm->name);
		return -EPERM;
	}
	if (p->ho.phase == RDB_HO_STOPPED) {
		/* closing the stream lets QEMU leave COLO: the guest runs */
		rdb_pri_ho_enter(p, RDB_HO_NONE);
		rdb_pri_dec_enter(p, RDB_DEC_NONE);
		rdb_pri_protection_cleanup(p);
		rdb_vm_set_state(vm, RDB_VM_UNPROTECTED, "operator unprotect "
				 "--force: the guest stopped at the handover runs "
				 "again here");
		return 0;
	}
	if (rdb_pri_fenced(p) && !force) {
		snprintf(msg, msglen, "%s lost the failover decision: its guest is "
			 "stopped because the backup runs it; `remusdbctl "
			 "unprotect --force %s` resumes it here (two copies if "
			 "the backup's runs)", vm->name, vm->name);
		return -EPERM;
	}
	if (rdb_pri_deciding(p)) {
		rdb_pri_decided_run(p, "the operator decided (unprotect --force)");
		rdb_vm_set_state(vm, RDB_VM_UNPROTECTED, "operator unprotect --force");
		return 0;
	}
	if (rdb_pri_fenced(p)) {
		char e[300] = "";
		int rc = p->ctl ? 0 :
			p->hv->ctl_open(&p->ctl, vm->cfg.qmp, vm->name,
					rdb_now_ns() + 2 * RDB_NS_PER_S, e, sizeof(e));

		if (rc == 0)
			rc = p->hv->cont(p->ctl, rdb_now_ns() + 2 * RDB_NS_PER_S);
		if (rc < 0) {
			snprintf(msg, msglen, "cannot resume the guest: %s",
				 e[0] ? e : rc == -EREMOTEIO ?
				 p->hv->ctl_error(p->ctl) : strerror(-rc));
			return rc;
		}
		rdb_pri_dec_enter(p, RDB_DEC_NONE);
		rdb_vm_set_state(vm, RDB_VM_UNPROTECTED, "operator unprotect --force: "
				 "the fenced guest runs again");
		return 0;
	}
	if (rdb_pri_registering(p)) {
		rdb_pri_protection_cleanup(p);
		rdb_vm_set_state(vm, RDB_VM_UNPROTECTED, "operator unprotect");
		return 0;
	}
	if (p->ck.active) {
		if (p->peer_fd >= 0) {
			rdb_proto_put_unprotect(&p->out, vm->name);
			rdb_buf_write_all_fd(&p->out, p->peer_fd,
					     rdb_now_ns() + RDB_NS_PER_S);
		}
		/* Tell the backup first: otherwise it would see a failure. */
		rdb_pri_close_peer(p);
		rdb_pri_drop_protection(p, "operator unprotect");
		/* no protection to resync to: the logs go as before */
		for (unsigned i = 0; i < p->ndisks; i++)
			rdb_pri_disk_keep(p->disks[i], false, 0, 0);
		if (rdb_pri_deciding(p)) {
			/* the backup may not have heard us: it ends as decided */
			p->unprotect_pending = true;
			snprintf(msg, msglen, "%s: output held until the witness "
				 "confirms this host runs it", vm->name);
			return 0;
		}
	}
	rdb_vm_set_state(vm, RDB_VM_UNPROTECTED, "operator unprotect");
	return 0;
}

int rdb_primary_detach(struct rdb_vm *vm, bool force, char *msg,
		       size_t msglen)
{
	struct rdb_primary *p = vm->pri;
	char name[sizeof(vm->name)], was[32];
	bool qemu_on;

	if (!p)
		return -ENOENT;
	switch (vm->state) {
	case RDB_VM_UNPROTECTED:
	case RDB_VM_DEGRADED:
	case RDB_VM_FENCED:
	case RDB_VM_FAILED:
	case RDB_VM_MIGRATED:
		if (!rdb_pri_registering(p) && !p->ck.active && !rdb_pri_deciding(p) &&
		    p->ho.phase != RDB_HO_PREPARING && p->ho.phase != RDB_HO_SENT)
			break;
		/* fall through */
	default:
		snprintf(msg, msglen, "%s is %s: `remusdbctl unprotect %s` first",
			 vm->name, rdb_vm_state_name(vm->state), vm->name);
		return -EBUSY;
	}
	qemu_on = rdb_ckdevs_in_use(&p->devs);
	if (qemu_on && !force) {
		snprintf(msg, msglen, "%s's QEMU still uses the %s remusdbd serves: "
			 "shut the VM down first (virsh shutdown %s), or --force "
			 "(its disk and network then fail under it)", vm->name,
			 p->ndisks ? "disk and NIC" : "NIC", vm->name);
		return -EBUSY;
	}
	snprintf(name, sizeof(name), "%s", vm->name);
	snprintf(was, sizeof(was), "%s", rdb_vm_state_name(vm->state));
	rdb_primary_teardown(vm);
	rdb_vm_free(vm);
	if (qemu_on)
		LOGVM(WARN, name, "detached (was %s) with --force: its QEMU, still "
		      "connected, lost its disk and NIC", was);
	else
		LOGVM(INFO, name, "detached (was %s): its disk and NIC are no "
		      "longer served", was);
	return 0;
}

void rdb_primary_teardown(struct rdb_vm *vm)
{
	struct rdb_primary *p = vm->pri;

	if (!p)
		return;
	/* Leaving while COLO runs would leave QEMU waiting for us. */
	if (p->ck.active)
		rdb_pri_drop_protection(p, "remusdbd is shutting down");
	rdb_pri_protection_cleanup(p);
	rdb_pri_capture_stop(p, "VM torn down");
	rdb_ckdevs_close(&p->devs);
	p->ndisks = p->nnics = 0;
	if (p->event_fd >= 0)
		close(p->event_fd);
	/* a restored QEMU outlives us, as it outlived the backup role */
	rdb_proto_decoder_dispose(&p->dec);
	rdb_buf_dispose(&p->out);
	rdb_buf_dispose(&p->batch);
	rdb_buf_dispose(&p->enc_batch);
	rdb_buf_dispose(&p->held);
	for (unsigned k = 0; k < RDB_NICS_MAX; k++) {
		rdb_buf_dispose(&p->ho.frames[k]);
		rdb_buf_dispose(&p->ho.input[k]);
	}
	free(p->enc_runs);
	free(p->enc_dev);
	free(p->runs);
	free(p->config_section);
	free(p);
	vm->pri = NULL;
}

int rdb_primary_inject(struct rdb_vm *vm, const char *fault)
{
	if (!vm->pri)
		return -ENOENT;
	if (strcmp(fault, "stop-in-pause") == 0) {
		vm->pri->fault_stop_in_pause = true;
		return 0;
	}
	if (strcmp(fault, "stop-in-disk-pause") == 0) {
		vm->pri->ck.fault_stop_in_disk_pause = true;
		return 0;
	}
	if (strcmp(fault, "stop-in-initial-state") == 0) {
		vm->pri->fault_stop_in_initial = true;
		vm->pri->fault_initial_busy_ns = 0;
		return 0;
	}
	if (strcmp(fault, "slow-encode") == 0) {
		if (!vm->pri->pool)
			return -ENOENT;
		rdb_encpool_fault_delay(vm->pri->pool, FAULT_SLOW_ENCODE_NS);
		return 0;
	}
	if (strncmp(fault, "slow-checkpoint", 15) == 0) {
		uint64_t ns = FAULT_SLOW_PAUSE_NS;

		if (fault[15] == '=') {
			char *end;
			unsigned long ms;

			errno = 0;
			ms = strtoul(fault + 16, &end, 10);
			if (errno || end == fault + 16 || *end ||
			    ms < FAULT_SLOW_PAUSE_MIN_MS || ms > FAULT_SLOW_PAUSE_MAX_MS)
				return -EINVAL;
			ns = (uint64_t)ms * RDB_NS_PER_MS;
		} else if (fault[15]) {
			return -EINVAL;
		}
		vm->pri->fault_slow_pause_ns = ns;
		vm->pri->fault_slow_checkpoint = true;
		return 0;
	}
	if (strcmp(fault, "stop-late-in-initial-state") == 0) {
		vm->pri->fault_stop_in_initial = true;
		vm->pri->fault_initial_busy_ns = FAULT_INITIAL_BUSY_NS;
		return 0;
	}
	return -EINVAL;
}

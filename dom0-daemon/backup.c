// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "backup"
#include "backup.h"
#include "backup_dev.h"
#include "bakdev.h"
#include "clock.h"
#include "cpulist.h"
#include "daemon.h"
#include "roimage.h"
#include "bgjob.h"
#include "lineage.h"
#include "linksec.h"
#include "log.h"
#include "proto.h"
#include "ramimage.h"
#include "replmark.h"
#include "sockutil.h"
#include "stage.h"
#include "tlsrelay.h"
#include "vm.h"
#include "vmdef.h"
#include "witness.h"
#include "watchdog.h"
#include "hv.h"
#include "remusdb.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define HELLO_DEADLINE_NS (5 * RDB_NS_PER_S)
/* A restore's steps (starting the hypervisor, loading the state, the
 * NIC) are bounded by this, plus twice what taking the initial state
 * took this host (restore_deadline): restoring moves the same RAM, and
 * a host emulated or slow takes as much longer for both. */
#define RESTORE_DEADLINE_NS (20 * RDB_NS_PER_S)
#define RESTORE_DEADLINE_MAX_NS (600 * RDB_NS_PER_S)
#define INITIAL_SYNC_SILENCE_NS (10 * RDB_NS_PER_S)
/* While an epoch's disk step runs (commit_start), the link is read into
 * the decoder up to this much; then TCP pushes back on the primary. */
#define COMMIT_READ_MAX (64u << 20)
/* A disk step this long is logged (the ACK waited for it). */
#define SLOW_COMMIT_NS RDB_NS_PER_S
/* fault injection slow-replica: the next disk step starts this late */
#define FAULT_SLOW_REPLICA_NS (3 * RDB_NS_PER_S)
/* A failover waits this long for an epoch's disk step (or a prepare)
 * still running when it began, beyond the restore's own deadline (which
 * bounds a prepare); then it fails: the replica is in no known state. */
#define FAILOVER_WAIT_NS (10 * RDB_NS_PER_S)

struct commit_job;

/*
 * A switchover on the backup's side, its phases and their legal changes
 * in one table (bak_ho_next):
 *   none -> asked (HANDOVER REQUEST: the claim at the witness under way)
 *   -> planned (claimed: the restore is a handover's; after it, the last
 *   failover was one) | none (refused, or the link broke: a decision like
 *   any other); planned -> none (the restore failed: the VM given back).
 */
enum bak_ho_phase {
	BAK_HO_NONE,
	BAK_HO_ASKED,
	BAK_HO_PLANNED,
	BAK_HO__MAX
};

/*
 * The backup's failover, in phases (written in fo_enter only; its table
 * is bak_fo_next):
 *   none -> deciding (the primary lost, or a handover asked: the claim at
 *   the witness under way) -> none (won, lost, refused, or given up: the
 *   teardown, --force); none -> waiting (failing over: an epoch's disk
 *   step or a handover's prepare still runs on its thread) -> none (it
 *   went on, or the wait ran out).
 */
enum bak_fo_phase {
	BAK_FO_NONE,
	BAK_FO_DECIDING,
	BAK_FO_WAITING,
	BAK_FO__MAX
};

/*
 * The backup's copy of the VM, in phases (written in copy_enter only; its
 * table is bak_copy_next):
 *   awaiting (linked, no VM_SETUP yet) -> setup (the primary's config
 *   taken, the NICs and the RAM image ready: the initial state streams
 *   in) -> consistent (an epoch committed: the RAM image, the device
 *   state and every disk are exactly that epoch, a state to go live
 *   from).  Consistent stays so: each later epoch replaces it whole.
 */
enum bak_copy_phase {
	BAK_COPY_AWAITING,
	BAK_COPY_SETUP,
	BAK_COPY_CONSISTENT,
	BAK_COPY__MAX
};

struct rdb_backup {
	struct rdb_vm *vm;
	struct rdb_daemon *d;
	int fd;
	struct rdb_buf out;
	struct rdb_proto_decoder dec;
	struct rdb_peer_det peer;	/* the primary's silence (watchdog.h) */
	uint64_t hb_timer, hb_seq;
	uint64_t linger_timer;		/* closing after an ERROR: see refuse_link */
	int linger_fd;
	/* This host refused the primary's stream and told it so (ERROR):
	 * the primary then releases its held output without a decision and
	 * runs on, so this protection never goes live here but by the
	 * operator's --force (refuse_link). */
	bool gave_up;
	char gave_up_why[200];
	/* frames left in the decoder when a slice of the loop ran out: the
	 * link is not read meanwhile (see link_frames) */
	bool backlog;
	uint64_t slice_timer;
	int link_rc;			/* a read's error, due when frames resume */
	/* An epoch's disk step (replica writes, fdatasync) on a thread: the
	 * loop serves heartbeats meanwhile; the frames after the EPOCH_END
	 * wait for it (commit_start, on_commit_done). */
	struct commit_job *commit_job;

	enum bak_copy_phase copy_phase;
	struct rdb_vm_setup setup;	/* from VM_SETUP */
	uint64_t setup_ns;		/* when VM_SETUP came */
	uint64_t initial_take_ns;	/* VM_SETUP to epoch 0 committed */
	struct rdb_ramimage img;	/* open from the setup phase on */
	struct rdb_stage st;
	/* the VM's devices here (bakdev.h): its NICs, from VM_SETUP (each
	 * one's flow check in st.flows), then its disks, in DISK_SETUP's
	 * order (each one's buffer in st.disks, all committed as one:
	 * stage.h) */
	struct rdb_bakdevs devs;
	struct rdb_bakdev_host host;	/* what they get of this role */
	struct rdb_bakrun run;		/* a restore under way, as they see it */
	bool replica_recorded;		/* lineage says "replica" of this one */
	/* whether the replicas are whole at an epoch (replmark.h): opened
	 * at the first DISK_SETUP, written by the disk steps */
	struct rdb_replmark mark;
	int event_fd;			/* after failover: the event port's socket */
	struct rdb_buf event_in;	/* the guest's answers on it */

	/* one timer ticks the devices' own checks after a failover (each
	 * NIC's flow check: host.tick_soon) */
	uint64_t dev_timer;
	uint64_t event_gen;		/* the failover event's generation */

	/* after failover: the restored VM's hypervisor (QEMU) process */
	const struct rdb_hv_ops *hv;
	struct rdb_hv_restored rs;

	/* The failover decision (witness.h): the primary's protection
	 * generation and the value it registered, from VM_SETUP. */
	uint64_t generation;
	char registered[RDB_WITNESS_VALUE_MAX];
	char primary_node[65];
	enum bak_fo_phase fo_phase;	/* deciding: may we go live? */
	int64_t witness_req;
	uint64_t decide_timer, decide_start_ns, retry_at_ns;
	unsigned decide_attempts;
	char decide_why[200];
	char witness_error[256];
	/* a planned switchover (primary_migrate.c): the primary stopped its
	 * guest after epoch ho_epoch and asks this host to run it (ho_phase:
	 * its table is bak_ho_next) */
	enum bak_ho_phase ho_phase;
	bool prepared;			/* its QEMU waits (handover_prepare) */
	uint64_t ho_epoch;
	/* OUTPUT of epoch ho_out_epoch, by NIC (the frames' device) */
	struct rdb_buf ho_out[RDB_NICS_MAX];
	uint64_t ho_out_epoch, ho_out_frames;
	bool fault_restore_fail;	/* tests: rdb_backup_inject */
	bool fault_restore_fail_late;	/* ... after its guest ran 1 s */
	bool fault_handover_cut;	/* the link cut as a handover arrives */
	bool fault_slow_replica;	/* the next disk step 3 s late */
	bool fault_kill_in_apply;	/* SIGKILL inside the next disk step */
	struct restore_job *restore_job;	/* a restore under way */
	/* A failover waits for an epoch's disk step or a handover's prepare
	 * still running on their threads (never joined on the loop: a hung
	 * replica must not stop every other VM's heartbeats), at most the
	 * restore's deadline + FAILOVER_WAIT_NS (fo_wait_timer): fo_phase
	 * waiting. */
	uint64_t fo_wait_timer;
	/* a commit still running when the link closed: its stage is
	 * discarded once it is done (stage_drop) */
	bool drop_after_commit;
	uint64_t failover_t0;
	/* the last failover as remusdbctl drill reports it: how long the
	 * primary had been silent when it began, of which deciding took
	 * fo_decide_ns (0: no decision) */
	uint64_t fo_silent_ns, fo_decide_ns;
};

static const char *const bak_copy_names[BAK_COPY__MAX] = {
	[BAK_COPY_AWAITING] = "awaiting",
	[BAK_COPY_SETUP] = "setup",
	[BAK_COPY_CONSISTENT] = "consistent",
};

#define TO(ph) (1u << BAK_COPY_##ph)
static const uint32_t bak_copy_next[BAK_COPY__MAX] = {
	[BAK_COPY_AWAITING] = TO(SETUP),
	[BAK_COPY_SETUP] = TO(CONSISTENT),
	[BAK_COPY_CONSISTENT] = 0,
};
#undef TO

static void copy_enter(struct rdb_backup *b, enum bak_copy_phase to)
{
	b->copy_phase = rdb_vm_phase_change(b->vm, "copy", "backup.c",
					    bak_copy_names, bak_copy_next,
					    BAK_COPY__MAX, b->copy_phase, to);
}

/* An epoch is committed here: there is a state to go live from. */
static bool consistent(const struct rdb_backup *b)
{
	return b->copy_phase == BAK_COPY_CONSISTENT;
}

static const char *const bak_ho_names[BAK_HO__MAX] = {
	[BAK_HO_NONE] = "none",
	[BAK_HO_ASKED] = "asked",
	[BAK_HO_PLANNED] = "planned",
};

/* The switchover's phases and the changes each may make (above): the one
 * place they are written. */
#define TO(ph) (1u << BAK_HO_##ph)
static const uint32_t bak_ho_next[BAK_HO__MAX] = {
	[BAK_HO_NONE] = TO(ASKED),
	[BAK_HO_ASKED] = TO(PLANNED) | TO(NONE),
	[BAK_HO_PLANNED] = TO(NONE),
};
#undef TO

static void ho_enter(struct rdb_backup *b, enum bak_ho_phase to)
{
	b->ho_phase = rdb_vm_phase_change(b->vm, "switchover", "backup.c",
					  bak_ho_names, bak_ho_next, BAK_HO__MAX,
					  b->ho_phase, to);
}

static const char *const bak_fo_names[BAK_FO__MAX] = {
	[BAK_FO_NONE] = "none",
	[BAK_FO_DECIDING] = "deciding",
	[BAK_FO_WAITING] = "waiting",
};

#define TO(ph) (1u << BAK_FO_##ph)
static const uint32_t bak_fo_next[BAK_FO__MAX] = {
	[BAK_FO_NONE] = TO(DECIDING) | TO(WAITING),
	[BAK_FO_DECIDING] = TO(NONE),
	[BAK_FO_WAITING] = TO(NONE),
};
#undef TO

static void fo_enter(struct rdb_backup *b, enum bak_fo_phase to)
{
	b->fo_phase = rdb_vm_phase_change(b->vm, "failover", "backup.c",
					  bak_fo_names, bak_fo_next, BAK_FO__MAX,
					  b->fo_phase, to);
}

static bool deciding(const struct rdb_backup *b)
{
	return b->fo_phase == BAK_FO_DECIDING;
}

static bool fo_waiting(const struct rdb_backup *b)
{
	return b->fo_phase == BAK_FO_WAITING;
}

/* The handed-over output, every NIC's: emptied, or freed (dispose). */
static void ho_out_reset(struct rdb_backup *b, bool dispose)
{
	for (unsigned k = 0; k < RDB_NICS_MAX; k++)
		if (dispose)
			rdb_buf_dispose(&b->ho_out[k]);
		else
			rdb_buf_reset(&b->ho_out[k]);
	b->ho_out_frames = 0;
}

/* A connection that has not said HELLO yet (with a link key: whose TLS
 * handshake may still run, in its relay). */
struct pending {
	struct rdb_daemon *d;
	int fd;
	struct rdb_proto_decoder dec;
	uint64_t timer;
	struct rdb_tlsrelay *relay;
	char peer[80];
};

/* The link's frames are not waited for any more (it closes). */
static void slice_reset(struct rdb_backup *b)
{
	if (b->slice_timer)
		rdb_evloop_del_timer(b->d->loop, b->slice_timer);
	b->slice_timer = 0;
	b->backlog = false;
	b->link_rc = 0;
}

static void commit_settle(struct rdb_backup *b);

/* The link closes; an epoch's disk step still running goes on (its end
 * is taken on the loop, on_commit_done): not waited for here. */
static void close_link(struct rdb_backup *b)
{
	slice_reset(b);
	if (b->fd >= 0) {
		rdb_evloop_del_fd(b->d->loop, b->fd);
		close(b->fd);
		b->fd = -1;
	}
	if (b->linger_fd >= 0) {
		rdb_evloop_del_fd(b->d->loop, b->linger_fd);
		close(b->linger_fd);
		b->linger_fd = -1;
	}
}

static void want_write(struct rdb_backup *b)
{
	if (b->fd >= 0)
		rdb_evloop_mod_fd(b->d->loop, b->fd,
				  (b->backlog ? 0 : RDB_EV_READ) |
				  (b->out.len ? RDB_EV_WRITE : 0));
}

/* The uncommitted epoch is dropped: now, or when a disk step that runs
 * is done (its thread owns the stage until then). */
static void stage_drop(struct rdb_backup *b)
{
	if (b->commit_job)
		b->drop_after_commit = true;
	else
		rdb_stage_discard(&b->st);
}

/* The link is unusable: protection of this VM is over, no failover. */
static void link_lost(struct rdb_backup *b, const char *why)
{
	close_link(b);
	stage_drop(b);
	rdb_vm_set_state(b->vm, RDB_VM_DEGRADED, "%s", why);
}

static uint64_t on_linger_end(struct rdb_evloop *loop, uint64_t id, void *opaque)
{
	struct rdb_backup *b = opaque;

	b->linger_timer = 0;
	close_link(b);
	return 0;
}

static void on_linger(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct rdb_backup *b = opaque;
	uint8_t sink[65536];
	ssize_t r = read(fd, sink, sizeof(sink));

	if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
		rdb_evloop_del_timer(loop, b->linger_timer);
		b->linger_timer = 0;
		close_link(b);
	}
}

/*
 * We refuse what the primary sent: tell it why, then stop.  The primary
 * may be mid-way through a large write; closing now, with its bytes
 * unread, would send a RST that can destroy our ERROR before it is read.
 * So: ERROR, FIN (shutdown for writing), and discard its input for a
 * short while before closing.
 */
static void refuse_link(struct rdb_backup *b, const char *why)
{
	int fd = b->fd;

	/* before the ERROR can be read: from here on this host does not go
	 * live from this protection (the primary releases on the ERROR) */
	b->gave_up = true;
	snprintf(b->gave_up_why, sizeof(b->gave_up_why), "%s", why);
	commit_settle(b);
	slice_reset(b);
	rdb_proto_put_error(&b->out, why);
	rdb_buf_write_fd(&b->out, fd);
	shutdown(fd, SHUT_WR);
	rdb_stage_discard(&b->st);
	rdb_vm_set_state(b->vm, RDB_VM_DEGRADED, "%s", why);
	rdb_evloop_del_fd(b->d->loop, fd);
	if (rdb_evloop_add_fd(b->d->loop, fd, RDB_EV_READ, on_linger, b) < 0 ||
	    rdb_evloop_add_timer(b->d->loop, 2 * RDB_NS_PER_S, on_linger_end, b,
				 &b->linger_timer) < 0) {
		rdb_evloop_del_fd(b->d->loop, fd);
		close(fd);
		b->fd = -1;
		return;
	}
	/* The link is over for protection: heartbeats and failover ignore it. */
	b->fd = -1;
	b->linger_fd = fd;
}

static int vm_dir(struct rdb_backup *b, char *dir, size_t len)
{
	snprintf(dir, len, "%s/%s", b->d->cfg.state_dir, b->vm->name);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* s is printable ASCII only: a peer's string that may reach our logs. */
static bool printable(const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x20 || c > 0x7e)
			return false;
	}
	return true;
}

static const char *shown(const char *s)
{
	return printable(s) ? s : "(non-printable bytes)";
}

/* The primary's "_protection": its generation, on_peer_loss, its node
 * name and the value it registered at the witness ("" when it registered
 * none).  A policy this backup cannot follow (witness, and it has none)
 * refuses the VM, as does a node name or a registered value that is not
 * one: the name goes into our logs, the value to the witness at a
 * failover. */
static int take_protection(struct rdb_backup *b, json_t *o)
{
	struct rdb_vm *vm = b->vm;
	const char *gen = json_string_value(json_object_get(o, "generation"));
	const char *pl = json_string_value(json_object_get(o, "on_peer_loss"));
	const char *reg = json_string_value(json_object_get(o, "registered"));
	const char *pri = json_string_value(json_object_get(o, "primary"));
	struct rdb_witness_value v;
	char *end;

	if (!gen || !pl || !reg || !pri) {
		snprintf(b->st.err, sizeof(b->st.err), "VM_SETUP carries no "
			 "protection generation and on_peer_loss: the primary's "
			 "remusdbd is older than this backup's");
		return -EPROTO;
	}
	if (!rdb_witness_node_valid(pri)) {
		snprintf(b->st.err, sizeof(b->st.err), "VM_SETUP names the "
			 "primary %.64s: not a node name (1-64 of A-Z a-z 0-9 . _ -)",
			 shown(pri));
		return -EPROTO;
	}
	if (reg[0] && (!printable(reg) ||
		       rdb_witness_value_parse(reg, strlen(reg), &v) < 0)) {
		snprintf(b->st.err, sizeof(b->st.err), "VM_SETUP's registered "
			 "witness value is not one: %.100s", shown(reg));
		return -EPROTO;
	}
	b->generation = strtoull(gen, &end, 16);
	if (*end || !gen[0]) {
		snprintf(b->st.err, sizeof(b->st.err), "bad generation %.40s",
			 shown(gen));
		return -EPROTO;
	}
	if (!strcmp(pl, "witness")) {
		vm->peer_loss = RDB_PEER_LOSS_WITNESS;
		if (!b->d->witness) {
			snprintf(b->st.err, sizeof(b->st.err), "on_peer_loss = "
				 "witness, but this backup (%.40s) has no witness "
				 "configured", b->d->node);
			LOGVM(ERROR, vm->name, "%s", b->st.err);
			return -EPROTO;
		}
	} else if (!strcmp(pl, "manual")) {
		vm->peer_loss = RDB_PEER_LOSS_MANUAL;
	} else if (!strcmp(pl, "unsafe-auto")) {
		vm->peer_loss = RDB_PEER_LOSS_UNSAFE_AUTO;
	} else {
		snprintf(b->st.err, sizeof(b->st.err), "unknown on_peer_loss %.40s",
			 shown(pl));
		return -EPROTO;
	}
	/* the read-only images a failover would open here (roimage.h) */
	{
		json_t *ro = json_object_get(o, "readonly"), *im;
		size_t i;

		json_array_foreach(ro, i, im) {
			struct rdb_roimage want = { 0 };
			const char *path = json_string_value(json_object_get(im, "path"));
			const char *sha = json_string_value(json_object_get(im, "sha256"));
			json_t *size = json_object_get(im, "size");
			char why[700];

			if (!path || !sha || strlen(sha) != 64 || !json_is_integer(size) ||
			    strlen(path) >= sizeof(want.path)) {
				snprintf(b->st.err, sizeof(b->st.err), "VM_SETUP: a "
					 "malformed read-only image");
				return -EPROTO;
			}
			snprintf(want.path, sizeof(want.path), "%s", path);
			snprintf(want.sha256, sizeof(want.sha256), "%s", sha);
			want.size = (uint64_t)json_integer_value(size);
			if (rdb_roimage_verify(&want, why, sizeof(why)) < 0) {
				LOGVM(ERROR, vm->name, "refusing the protection: %s "
				      "(a failover would run the guest on it)", why);
				snprintf(b->st.err, sizeof(b->st.err), "%.159s", why);
				return -EPROTO;
			}
			LOGVM(INFO, vm->name, "read-only image %s: the same here "
			      "(%llu bytes)", path, (unsigned long long)want.size);
		}
	}
	snprintf(b->registered, sizeof(b->registered), "%s", reg);
	snprintf(b->primary_node, sizeof(b->primary_node), "%s", pri);
	LOGVM(INFO, vm->name, "protection generation %016llx from %s, "
	      "on_peer_loss = %s", (unsigned long long)b->generation, pri, pl);
	return 0;
}

static int handle_setup(struct rdb_backup *b, const struct rdb_frame *f)
{
	struct rdb_vm *vm = b->vm;
	char dir[512], err[256];
	json_t *j;
	int rc;

	/* (one VM_SETUP per link; one that failed refused the link) */
	if (b->copy_phase != BAK_COPY_AWAITING || b->setup_ns)
		return -EPROTO;
	rc = rdb_msg_vm_setup_parse(f, &b->setup);
	if (rc < 0)
		return rc;
	b->setup_ns = rdb_now_ns();
	/* The VM's own config comes from the primary; the backup keeps its
	 * defaults for anything the primary did not set. */
	j = json_loads(b->setup.vm_json, 0, NULL);
	rc = take_protection(b, json_object_get(j, "_protection"));
	if (rc == 0) {
		json_object_del(j, "_protection");
		rc = rdb_vm_config_from_json(j, &vm->cfg, err, sizeof(err));
		if (rc < 0) {
			LOGVM(ERROR, vm->name, "VM config from the primary: %s", err);
			snprintf(b->st.err, sizeof(b->st.err), "VM config: %.140s", err);
		}
	}
	json_decref(j);
	if (rc < 0)
		return -EPROTO;
	b->hv = rdb_vm_hv(vm);
	/* The disks' epoch bound is the primary's config: their DISK_SETUP
	 * may have come first (a primary starts each disk's copy at once),
	 * with this host's default. */
	for (unsigned k = 0; k < b->st.ndisks; k++)
		b->st.disks[k]->max_bytes = (uint64_t)vm->cfg.disk_epoch_max_mb << 20;
	/* each NIC's FLOWS to its own flow check (config.c: <= RDB_NICS_MAX) */
	b->st.nflows = rdb_vm_config_nnics(&vm->cfg);
	if (b->st.nflows > RDB_NICS_MAX)
		return -EPROTO;
	for (unsigned k = 0; k < b->st.nflows; k++) {
		rc = rdb_bak_nic_add(&b->devs, &b->st, k);
		if (rc < 0)
			return rc;
	}
	rc = vm_dir(b, dir, sizeof(dir));
	if (rc < 0)
		return rc;
	rc = rdb_ramimage_open(dir, b->setup.blocks, b->setup.nblocks, &b->img);
	if (rc < 0) {
		LOGVM(ERROR, vm->name, "RAM image in %s: %s", dir,
		      rc == -ENOSPC ? "no space left on device" : strerror(-rc));
		return rc;
	}
	copy_enter(b, BAK_COPY_SETUP);
	/* libvirt's QEMU maps it on a restore through libvirt */
	for (size_t i = 0; i < b->img.n; i++)
		if (rdb_daemon_share_with_qemu(b->d, b->img.b[i].path,
					       b->img.b[i].fd) < 0)
			return -EACCES;
	LOGVM(INFO, vm->name, "RAM image ready in %s (%zu blocks)", dir,
	      b->setup.nblocks);
	return 0;
}

/* DISK_SETUP: the next disk's replica, a device of the VM's (its
 * kind: backup_disk.c).  The VM's replica marker is opened first: what
 * it says before the first disk's setup marks the set applying is
 * whether this host's replicas are whole. */
static int handle_disk_setup(struct rdb_backup *b, const struct rdb_frame *f)
{
	if (b->mark.fd < 0 && !b->mark.dead) {
		char dir[400], path[512];
		int rc = vm_dir(b, dir, sizeof(dir));

		if (rc < 0)
			return rc;
		snprintf(path, sizeof(path), "%s/%s", dir, RDB_REPLMARK_FILE);
		if (rdb_replmark_open(&b->mark, path) < 0)
			LOGVM(WARN, b->vm->name, "%s: this host's replicas of the "
			      "VM are not kept for a resync", b->mark.err);
	}
	return rdb_bak_disk_setup(&b->devs, &b->st, f, consistent(b));
}

/*
 * Before the first commit of a protection: this host's disk is a replica
 * from here on, no base for anyone (a resync that was interrupted before
 * it could be offered again: see docs/resync.md).
 */
static int record_replica(struct rdb_backup *b)
{
	struct rdb_vm *vm = b->vm;
	struct rdb_lineage l = { 0 };
	char err[300] = "";
	int rc;

	if (b->replica_recorded)
		return 0;
	l.role = RDB_LINEAGE_REPLICA;
	l.generation = b->generation;
	/* (only a restored record's entry can fail: one without its map) */
	rdb_bakdevs_record(&b->devs, &l);
	if (!l.ndisks)
		return 0;	/* no replica here: nothing to record */
	snprintf(l.peer, sizeof(l.peer), "%s", b->primary_node);
	rc = rdb_lineage_save(b->d->cfg.state_dir, vm->name, &l, err, sizeof(err));
	if (rc < 0) {
		LOGVM(ERROR, vm->name, "lineage record: %s", err);
		return rc;
	}
	b->replica_recorded = true;
	rdb_bakdevs_recorded(&b->devs);
	return 0;
}

/*
 * The rest of epoch N's commit once its disk step is done (rc_disk):
 * the pages, then the ACK.  The primary releases N's output on that ACK,
 * so it follows the replica's writes and syncs, wherever they ran.
 */
static int commit_finish(struct rdb_backup *b, uint64_t epoch, uint64_t pages,
			 uint64_t bytes, uint64_t t0, int rc)
{
	struct rdb_vm *vm = b->vm;

	if (rc == 0)
		rc = rdb_stage_commit_apply(&b->st, epoch, &b->img);
	rdb_vm_commit_recorded(vm, rdb_now_ns() - t0);
	if (rc < 0) {
		LOGVM(ERROR, vm->name, "epoch %llu not committed: %s",
		      (unsigned long long)epoch, rdb_stage_error(&b->st));
		return rc;
	}
	/* Committed: the image, device state and disk are exactly epoch N. */
	if (!consistent(b) && b->setup_ns)
		b->initial_take_ns = rdb_now_ns() - b->setup_ns;
	copy_enter(b, BAK_COPY_CONSISTENT);
	{
		struct rdb_bakdev_sum s;

		rdb_bakdevs_counters(&b->devs, &s);
		if (s.n) {
			vm->st.disk_bytes = s.applied;
			vm->st.disk_syncs = s.syncs;
		}
	}
	vm->st.committed_epoch = epoch;
	vm->st.pages += pages;
	vm->st.bytes += bytes;
	if (vm->st.checkpoints == 0)
		vm->st.first_ckpt_ns = rdb_now_ns();
	vm->st.last_ckpt_ns = rdb_now_ns();
	vm->st.checkpoints = epoch + 1;
	rc = rdb_proto_put_ack(&b->out, epoch);
	if (rc < 0)
		return rc;
	want_write(b);
	if (vm->state == RDB_VM_PROTECTING)
		rdb_vm_set_state(vm, RDB_VM_PROTECTED,
				 "initial state committed (%llu pages)",
				 (unsigned long long)pages);
	return 0;
}

/*
 * An epoch's disk step runs on a thread of its own.  A replica's
 * fdatasync waits for the host's disk, and behind another writer that
 * took over a second (seen in CI): on the loop, that was a backup whose
 * heartbeats stopped, and the primary dropped protection ("backup silent
 * for 1007 ms") with nothing wrong but a slow disk.  While the thread
 * runs it owns the replicas (the disks in b->devs) and b->st's error;
 * the loop leaves the stage alone (the link's later frames wait in the
 * decoder, read up to COMMIT_READ_MAX so the primary is heard) and sends
 * heartbeats.  on_commit_done finishes on the loop (lib/bgjob.h);
 * anything that must see the commit settled (the link closing, a
 * failover, teardown) joins the thread there instead (commit_settle).
 */
struct commit_job {
	struct rdb_backup *b;
	struct rdb_bgjob *job;
	uint64_t epoch, pages, bytes, t0;
	uint64_t late_ns;		/* fault injection: slow-replica */
	struct rdb_diskbuf *kill_at;	/* fault injection: kill-in-apply */
	bool record;			/* first commit: record_replica first */
	/* what status shows of the replica meanwhile (the thread changes it) */
	struct rdb_bakdev_sum at;
	int rc;
	uint64_t disk_ns;
};

static int record_replica(struct rdb_backup *b);

/*
 * Epoch N's disk step proper: the replicas are marked applying before
 * any of N's writes reaches them (epoch 0's reached them as they came:
 * marked at DISK_SETUP, again here with the protection's generation),
 * whole at N once every write and sync of it succeeded on every disk.
 * A step that failed leaves them marked applying: torn, at no epoch.
 * cut (fault injection kill-in-apply, kill_target): one write of the
 * epoch reaches that replica, then the daemon is killed, as a crash
 * inside the replay would be.
 */
static int disk_step(struct rdb_backup *b, uint64_t epoch,
		     struct rdb_diskbuf *cut)
{
	struct rdb_bakdev_sum s;
	int rc;

	rc = rdb_bak_disks_applying(&b->host, b->generation, epoch);
	if (rc < 0) {
		snprintf(b->st.err, sizeof(b->st.err), "the replica marker "
			 "could not be written");
		return rc;
	}
	if (cut)
		cut->stop_after_write = true;
	rc = rdb_stage_commit_disk(&b->st);
	if (cut && !cut->stop_after_write) {
		LOGVM(WARN, b->vm->name, "fault injection: remusdbd kills itself "
		      "inside epoch %llu's replica writes, one write of it "
		      "applied (%s): the replicas are torn, their marker says "
		      "applying", (unsigned long long)epoch,
		      rdb_diskbuf_error(cut));
		raise(SIGKILL);
	}
	if (cut)
		cut->stop_after_write = false;
	rdb_bakdevs_counters(&b->devs, &s);
	if (rc == 0 && s.consistent)
		rdb_bak_disks_done(&b->host, b->generation, epoch);
	return rc;
}

static void commit_run(void *opaque)
{
	struct commit_job *j = opaque;
	uint64_t t = rdb_now_ns();

	/* its fsyncs took 300 ms on the loop on a host with a busy disk */
	if (j->record) {
		j->rc = record_replica(j->b);
		if (j->rc < 0) {
			snprintf(j->b->st.err, sizeof(j->b->st.err), "the lineage "
				 "record (\"replica\") could not be written");
			j->disk_ns = rdb_now_ns() - t;
			return;
		}
	}

	if (j->late_ns) {
		struct timespec ts = { .tv_sec = (time_t)(j->late_ns / RDB_NS_PER_S),
				       .tv_nsec = (long)(j->late_ns % RDB_NS_PER_S) };

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	j->rc = disk_step(j->b, j->epoch, j->kill_at);
	j->disk_ns = rdb_now_ns() - t;
}

/* The thread is done (joined): its commit finished; its rc. */
static int commit_take(struct rdb_backup *b, struct commit_job *j)
{
	int rc;

	b->commit_job = NULL;
	if (j->rc == 0 && j->disk_ns >= SLOW_COMMIT_NS)
		LOGVM(WARN, b->vm->name, "epoch %llu: the disk replica's writes "
		      "and sync took %.0f ms; its acknowledgement waited, the "
		      "link was served meanwhile", (unsigned long long)j->epoch,
		      (double)j->disk_ns / RDB_NS_PER_MS);
	else if (j->rc == 0 && j->epoch == 0)
		LOGVM(INFO, b->vm->name, "initial state: the disk replicas "
		      "synced in %.0f ms", (double)j->disk_ns / RDB_NS_PER_MS);
	rc = commit_finish(b, j->epoch, j->pages, j->bytes, j->t0, j->rc);
	free(j);
	return rc;
}

/* Whatever must see the last EPOCH_END settled waits for its thread. */
static void commit_settle(struct rdb_backup *b)
{
	struct commit_job *j = b->commit_job;

	if (j) {
		rdb_bgjob_join(j->job);
		commit_take(b, j);
	}
}

static void link_frames(struct rdb_backup *b, int rc);
static void failover_resume(struct rdb_backup *b);

static void on_commit_done(void *opaque)
{
	struct commit_job *j = opaque;
	struct rdb_backup *b = j->b;
	uint64_t epoch = j->epoch;
	int rc;

	rc = commit_take(b, j);
	if (b->drop_after_commit) {
		b->drop_after_commit = false;
		rdb_stage_discard(&b->st);
	}
	if (fo_waiting(b)) {
		failover_resume(b);
		return;
	}
	if (b->fd < 0)
		return;
	if (rc < 0) {
		char why[300];

		snprintf(why, sizeof(why), "EPOCH_END of epoch %llu: %s",
			 (unsigned long long)epoch, b->st.err[0] ? b->st.err :
			 strerror(-rc));
		refuse_link(b, why);
		return;
	}
	rc = b->link_rc;
	b->link_rc = 0;
	link_frames(b, rc);
}

/* kill-in-apply fires on the first epoch with a write to replay: the
 * first replica that has one (taken on the loop, where the fault is
 * armed; the disk step may run on its thread). */
static struct rdb_diskbuf *kill_target(struct rdb_backup *b)
{
	if (!b->fault_kill_in_apply)
		return NULL;
	for (unsigned k = 0; k < b->st.ndisks; k++)
		if (b->st.disks[k]->data_bytes) {
			b->fault_kill_in_apply = false;
			return b->st.disks[k];
		}
	return NULL;
}

/* 0: the disk step runs (or ran here, if no thread could); < 0: failed. */
static int commit_start(struct rdb_backup *b, uint64_t epoch, uint64_t pages,
			uint64_t bytes, uint64_t t0)
{
	struct commit_job *j = calloc(1, sizeof(*j));
	struct rdb_diskbuf *kill_at = kill_target(b);
	int rc = -ENOMEM;

	if (j) {
		j->b = b;
		j->epoch = epoch;
		j->pages = pages;
		j->bytes = bytes;
		j->t0 = t0;
		j->late_ns = b->fault_slow_replica ? FAULT_SLOW_REPLICA_NS : 0;
		j->kill_at = kill_at;
		j->record = !b->replica_recorded;
		rdb_bakdevs_counters(&b->devs, &j->at);
		/* (b->commit_job before the thread can end: done runs on
		 * this loop, after this returns) */
		b->commit_job = j;
		rc = rdb_bgjob_start(b->d->loop, commit_run, on_commit_done, j,
				     &j->job);
	}
	if (rc == 0) {
		b->fault_slow_replica = false;
		return 0;
	}
	b->commit_job = NULL;
	free(j);
	LOGVM(WARN, b->vm->name, "epoch %llu: no thread for the disk step "
	      "(%s): it runs on the event loop", (unsigned long long)epoch,
	      strerror(-rc));
	rc = record_replica(b);
	return commit_finish(b, epoch, pages, bytes, t0, rc < 0 ? rc :
			     disk_step(b, epoch, kill_at));
}

static int handle_epoch_end(struct rdb_backup *b, const struct rdb_frame *f)
{
	struct rdb_vm *vm = b->vm;
	uint64_t pages, bytes, t0 = rdb_now_ns();
	int rc;

	rc = rdb_msg_epoch_end_parse(f, &pages, &bytes);
	if (rc < 0)
		return rc;
	/* (a first commit records the replica first: in commit_start) */
	rc = rdb_stage_commit_check(&b->st, f->epoch, pages, bytes);
	if (rc < 0) {
		LOGVM(ERROR, vm->name, "epoch %llu not committed: %s",
		      (unsigned long long)f->epoch, rdb_stage_error(&b->st));
		return rc;
	}
	if (b->st.ndisks)
		return commit_start(b, f->epoch, pages, bytes, t0);
	return commit_finish(b, f->epoch, pages, bytes, t0, 0);
}

static int handle_handover(struct rdb_backup *b, const struct rdb_frame *f);
static int handle_output(struct rdb_backup *b, const struct rdb_frame *f);
static void prepared(struct rdb_backup *b, int rc);
static int handover_prepare(struct rdb_backup *b);

/*
 * The primary's TIMING (proto.h): refused when its heartbeats would be
 * judged silence here (the link refused, the primary told why), a
 * warning when the two hosts' silence limits differ; then ours.
 */
static int handle_timing(struct rdb_backup *b, const struct rdb_frame *f)
{
	const struct rdb_daemon_config *c = &b->d->cfg;
	struct rdb_timing mine = {
		.heartbeat_ms = c->heartbeat_ms,
		.failover_timeout_ms = c->failover_timeout_ms,
		.ack_timeout_ms = rdb_daemon_ack_timeout_ms(c),
	}, peer;
	char why[400];
	int rc;

	if (!(b->st.features & RDB_FEATURE_TIMING) ||
	    rdb_msg_timing_parse(f, &peer) < 0)
		return -EPROTO;
	rc = rdb_timing_check(&mine, &peer, "primary", why, sizeof(why));
	if (rc < 0) {
		snprintf(b->st.err, sizeof(b->st.err), "timing refused: %.140s",
			 why);
		LOGVM(ERROR, b->vm->name, "timing refused: %s", why);
		return -EINVAL;
	}
	if (rc > 0)
		LOGVM(WARN, b->vm->name, "timing: %s", why);
	rc = rdb_proto_put_timing(&b->out, &mine);
	if (rc == 0)
		want_write(b);
	return rc;
}

static int handle_msg(struct rdb_backup *b, const struct rdb_frame *f)
{
	int rc;

	switch (f->type) {
	case RDB_MSG_VM_SETUP:
		return handle_setup(b, f);
	case RDB_MSG_PAGES:
		if (b->copy_phase == BAK_COPY_AWAITING)
			return -EPROTO;
		rc = rdb_stage_add_pages(&b->st, f, &b->img);
		return rc;
	case RDB_MSG_DISK_SETUP:
		/* (its changes: rdb_stage_add_disk) */
		return handle_disk_setup(b, f);
	case RDB_MSG_DISK_WRITE:
	case RDB_MSG_DISK_ZERO:
	case RDB_MSG_DISK_FLUSH:
		rc = rdb_stage_add_disk(&b->st, f);
		if (rc < 0)
			LOGVM(ERROR, b->vm->name, "%s of epoch %llu: %s",
			      rdb_msg_name(f->type), (unsigned long long)f->epoch,
			      rdb_stage_error(&b->st));
		else
			b->vm->st.disk_ops++;
		return rc;
	case RDB_MSG_VERIFY: {
		uint64_t digest, n;

		if (rdb_msg_verify_parse(f, &digest, &n) < 0)
			return -EPROTO;
		return rdb_stage_set_verify(&b->st, f->epoch, digest, n);
	}
	case RDB_MSG_FLOWS:
		rc = rdb_stage_add_flows(&b->st, f);
		if (rc < 0)
			LOGVM(ERROR, b->vm->name, "FLOWS of epoch %llu: %s",
			      (unsigned long long)f->epoch, rdb_stage_error(&b->st));
		return rc;
	case RDB_MSG_DEVSTATE:
		return rdb_stage_set_devstate(&b->st, f->epoch, f->payload, f->len);
	case RDB_MSG_EPOCH_END:
		return handle_epoch_end(b, f);
	case RDB_MSG_HANDOVER:
		return handle_handover(b, f);
	case RDB_MSG_TIMING:
		return handle_timing(b, f);
	case RDB_MSG_OUTPUT:
		return handle_output(b, f);
	case RDB_MSG_HEARTBEAT:
		return 0;
	case RDB_MSG_UNPROTECT:
		close_link(b);
		stage_drop(b);
		rdb_vm_set_state(b->vm, RDB_VM_UNPROTECTED,
				 "primary unprotected the VM");
		return 0;
	case RDB_MSG_ERROR:
		link_lost(b, "primary dropped protection");
		return 0;
	default:
		return -EPROTO;
	}
}

/*
 * The loop's share for the link's frames at a time.  One read takes up
 * to 4 MiB, which an initial copy of mostly zero pages fills with the
 * whole of a guest's RAM: applied in one go, it held the loop (heartbeats,
 * ACKs of other VMs, the control socket) for hundreds of ms.  What is left
 * when the slice ends waits in the decoder; the link is not read until it
 * is taken (TCP pushes back on the primary), and a timer comes back to it
 * once the loop has served everything else.
 */
#define LINK_SLICE_NS (20 * RDB_NS_PER_MS)

static uint64_t on_link_slice(struct rdb_evloop *loop, uint64_t id, void *opaque)
{
	struct rdb_backup *b = opaque;
	int rc = b->link_rc;

	b->slice_timer = 0;
	b->link_rc = 0;
	if (b->fd >= 0 && b->backlog)
		link_frames(b, rc);
	return 0;
}

/* A frame, or frames waiting: the primary is not silent (on_heartbeat). */
static void heard(struct rdb_backup *b)
{
	rdb_peer_heard(&b->peer, rdb_watchdog_host_stall_ns(b->d->wd),
		       rdb_now_ns());
}

/* The link while an epoch's disk step runs: read, not handled, so the
 * primary is heard; past COMMIT_READ_MAX, or after an error (due when
 * the frames resume), not read at all. */
static void commit_read(struct rdb_backup *b, int fd)
{
	int rc;

	if (b->backlog) {
		heard(b);	/* as in on_link */
		return;
	}
	rc = rdb_proto_decoder_read_fd(&b->dec, fd);
	if (rc == 0)
		heard(b);
	else if (rc != -EAGAIN)
		b->link_rc = rc;
	if (b->link_rc || b->dec.in.len >= COMMIT_READ_MAX) {
		b->backlog = true;
		want_write(b);
	}
}

static void on_link(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct rdb_backup *b = opaque;
	int rc = 0;

	if (ev & RDB_EV_WRITE) {
		rc = rdb_buf_write_fd(&b->out, fd);
		if (rc < 0 && rc != -EAGAIN) {
			link_lost(b, "replication link write failed");
			return;
		}
		want_write(b);
	}
	if (!(ev & RDB_EV_READ))
		return;
	if (b->commit_job) {
		commit_read(b, fd);
		return;
	}
	if (b->backlog) {
		/* frames wait here: the primary is not silent (on_heartbeat) */
		heard(b);
		return;
	}
	rc = rdb_proto_decoder_read_fd(&b->dec, fd);
	if (rc == 0)
		heard(b);
	link_frames(b, rc);
}

/* The frames in the decoder, for one slice of the loop; rc is the read's. */
static void link_frames(struct rdb_backup *b, int rc)
{
	uint64_t until = rdb_now_ns() + LINK_SLICE_NS;
	struct rdb_frame f;

	while (rc >= 0 || rc == -EAGAIN || rc == -ECONNRESET) {
		int r2;

		if (b->commit_job) {
			/* the frames after an EPOCH_END wait for its disk step */
			if (rc < 0 && rc != -EAGAIN)
				b->link_rc = rc;
			return;
		}
		if (rdb_now_ns() >= until) {
			/* a read error or end is due when the frames resume */
			if (rc < 0 && rc != -EAGAIN)
				b->link_rc = rc;
			b->backlog = true;
			want_write(b);
			if (!b->slice_timer &&
			    rdb_evloop_add_timer(b->d->loop, 0, on_link_slice, b,
						 &b->slice_timer) < 0)
				link_lost(b, "out of memory");
			return;
		}
		r2 = rdb_proto_decoder_next(&b->dec, &f);
		if (r2 < 0) {
			rc = r2;
			break;
		}
		if (r2 == 0)
			break;
		r2 = handle_msg(b, &f);
		if (b->fd < 0)
			return;
		if (r2 < 0) {
			char why[300];

			snprintf(why, sizeof(why), "%s of epoch %llu: %s",
				 rdb_msg_name(f.type), (unsigned long long)f.epoch,
				 b->st.err[0] ? b->st.err :
				 r2 == -EPROTO ? "malformed or out of order" :
				 strerror(-r2));
			refuse_link(b, why);
			return;
		}
	}
	if (b->backlog) {
		b->backlog = false;
		want_write(b);
	}
	if (rc == -ECONNRESET) {
		link_lost(b, "primary closed the replication link (host alive: no failover)");
	} else if (rc < 0 && rc != -EAGAIN) {
		char why[300];

		snprintf(why, sizeof(why), "replication link: %s",
			 rc == -EPROTO ? rdb_proto_decoder_error(&b->dec) :
			 strerror(-rc));
		link_lost(b, why);
	}
}

/* ---- the failover decision (witness.h, docs/failure-modes.md) ---- */

#define DECIDE_TICK_NS (100 * RDB_NS_PER_MS)
#define WITNESS_RETRY_NS (500 * RDB_NS_PER_MS)

static void decide_end(struct rdb_backup *b)
{
	if (deciding(b))
		fo_enter(b, BAK_FO_NONE);
	if (b->decide_timer)
		rdb_evloop_del_timer(b->d->loop, b->decide_timer);
	b->decide_timer = 0;
	if (b->witness_req > 0)
		rdb_witness_cancel(b->d->witness, b->witness_req);
	b->witness_req = 0;
}

static void backup_claim(struct rdb_backup *b);
static void handover_decided(struct rdb_backup *b,
			     const struct rdb_witness_result *r);

static void on_claim(void *opaque, const struct rdb_witness_result *r)
{
	struct rdb_backup *b = opaque;
	struct rdb_vm *vm = b->vm;
	char why[400];

	b->witness_req = 0;
	if (!deciding(b))
		return;
	if (b->ho_phase == BAK_HO_ASKED) {
		handover_decided(b, r);
		return;
	}
	switch (r->outcome) {
	case RDB_WITNESS_WON:
		decide_end(b);
		vm->st.decisions_won++;
		snprintf(why, sizeof(why), "%s; won the failover decision at the "
			 "witness after %.0f ms", b->decide_why,
			 (double)(rdb_now_ns() - b->decide_start_ns) / RDB_NS_PER_MS);
		rdb_backup_failover(vm, why);
		break;
	case RDB_WITNESS_LOST:
		decide_end(b);
		vm->st.decisions_lost++;
		rdb_vm_set_state(vm, RDB_VM_DEGRADED, "%s; the primary won the "
				 "failover decision (the witness holds: %s): it "
				 "runs on, this host does not", b->decide_why,
				 r->holder);
		break;
	case RDB_WITNESS_ERROR:
		vm->st.witness_errors++;
		if (strcmp(r->error, b->witness_error) != 0 ||
		    b->decide_attempts % 20 == 0)
			LOGVM(WARN, vm->name, "the witness did not decide (try %u): "
			      "%s; not failing over without it (remusdbctl "
			      "failover --force %s is the operator's call)",
			      b->decide_attempts, r->error, vm->name);
		snprintf(b->witness_error, sizeof(b->witness_error), "%s", r->error);
		b->retry_at_ns = rdb_now_ns() + WITNESS_RETRY_NS;
		break;
	}
}

static void backup_claim(struct rdb_backup *b)
{
	int64_t id;

	b->decide_attempts++;
	id = rdb_witness_claim(b->d->witness, b->vm->name, b->registered,
			       b->d->node, on_claim, b);
	if (id < 0)
		b->retry_at_ns = rdb_now_ns() + WITNESS_RETRY_NS;
	else
		b->witness_req = id;
}

static uint64_t on_decide_tick(struct rdb_evloop *loop, uint64_t id, void *opaque)
{
	struct rdb_backup *b = opaque;

	if (!deciding(b)) {
		b->decide_timer = 0;
		return 0;
	}
	if (b->vm->peer_loss == RDB_PEER_LOSS_WITNESS && b->witness_req == 0 &&
	    rdb_now_ns() >= b->retry_at_ns)
		backup_claim(b);
	return DECIDE_TICK_NS;
}

/* The primary is gone (silent): go live only as on_peer_loss says. */
static void primary_lost(struct rdb_backup *b, const char *why)
{
	struct rdb_vm *vm = b->vm;

	if (b->ho_phase == BAK_HO_ASKED) {
		/* the link broke mid-handover: a decision like any other
		 * (a claim already won is recognised as won, witness.h) */
		ho_enter(b, BAK_HO_NONE);
		decide_end(b);
	}
	if (vm->peer_loss == RDB_PEER_LOSS_UNSAFE_AUTO) {
		rdb_backup_failover(vm, why);
		return;
	}
	if (deciding(b))
		return;
	/* Whatever the primary sends from now on is too late.  (An epoch
	 * whose disk step runs commits or fails on its own: the decision
	 * does not wait for it, the failover does.) */
	close_link(b);
	stage_drop(b);
	fo_enter(b, BAK_FO_DECIDING);
	b->decide_start_ns = rdb_now_ns();
	b->decide_attempts = 0;
	b->retry_at_ns = 0;
	b->witness_error[0] = 0;
	snprintf(b->decide_why, sizeof(b->decide_why), "%s", why);
	vm->st.decisions++;
	if (vm->peer_loss == RDB_PEER_LOSS_MANUAL) {
		rdb_vm_set_state(vm, RDB_VM_DECIDING, "%s; on_peer_loss = manual: "
				 "not failing over by itself (remusdbctl failover "
				 "--force %s, once the primary %s is certainly down)",
				 why, vm->name, b->primary_node);
		return;
	}
	rdb_vm_set_state(vm, RDB_VM_DECIDING, "%s; asking the witness whether "
			 "this host may run the VM", why);
	if (rdb_evloop_add_timer(b->d->loop, DECIDE_TICK_NS, on_decide_tick, b,
				 &b->decide_timer) < 0)
		LOGVM(ERROR, vm->name, "no timer for witness retries");
	backup_claim(b);
}

int rdb_backup_operator_failover(struct rdb_vm *vm, bool force, char *msg,
				 size_t msglen)
{
	struct rdb_backup *b = vm->bak;
	int rc;

	if (!b)
		return -ENOENT;
	if (b->gave_up && !force) {
		snprintf(msg, msglen, "this host gave up backing up %s (%s) and "
			 "told the primary %s, which then released its held output "
			 "and ran on unprotected: a copy started here would run "
			 "from an older checkpoint (acknowledged commits lost), or "
			 "beside the primary's; --force is the operator's call, "
			 "only once that copy is certainly gone", vm->name,
			 b->gave_up_why, b->primary_node);
		return -EPERM;
	}
	if (force || vm->peer_loss == RDB_PEER_LOSS_UNSAFE_AUTO) {
		decide_end(b);
		rc = rdb_backup_failover(vm, force ? "operator failover --force "
					 "(no witness decision)" : "operator failover");
		if (rc < 0)
			snprintf(msg, msglen, "failover: %s", strerror(-rc));
		return rc;
	}
	if (vm->peer_loss == RDB_PEER_LOSS_MANUAL) {
		snprintf(msg, msglen, "on_peer_loss = manual: failing over is the "
			 "operator's decision, said with --force (only once the "
			 "primary %s is certainly down)", b->primary_node);
		return -EPERM;
	}
	if (!consistent(b) && !b->commit_job) {
		snprintf(msg, msglen, "no committed checkpoint to fail over to");
		return -ENODATA;
	}
	if (vm->state == RDB_VM_FAILED_OVER || vm->state == RDB_VM_FAILING_OVER)
		return -EALREADY;
	primary_lost(b, "operator failover");
	snprintf(msg, msglen, "asking the witness: this host goes live if it "
		 "wins the decision (remusdbctl status %s)", vm->name);
	return 0;
}

/* ---- a planned switchover: the primary hands the VM over ---- */

static int handover_refuse(struct rdb_backup *b, uint64_t epoch, const char *why)
{
	int rc;

	LOGVM(WARN, b->vm->name, "handover at epoch %llu refused: %s",
	      (unsigned long long)epoch, why);
	rc = rdb_proto_put_handover(&b->out, epoch, RDB_HANDOVER_REFUSED, why);
	if (rc == 0)
		want_write(b);
	return rc;
}

/*
 * A handover's link once this host went for the VM: no protection link
 * any more (heartbeats and failover ignore it: b->fd is -1).  While the
 * restore runs it only waits for TAKEN or REFUSED to be sent (the old
 * primary keeps its guest stopped, resumable, until then); after TAKEN
 * the old primary passes on what came for the guest there after it
 * stopped (INPUT), then closes: its frames are read here for at most 2 s
 * from then (handover_answer_last).
 */
static void drain_end(struct rdb_backup *b)
{
	if (b->linger_timer)
		rdb_evloop_del_timer(b->d->loop, b->linger_timer);
	b->linger_timer = 0;
	close_link(b);
}

static void on_drain(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct rdb_backup *b = opaque;
	struct rdb_output_iter it;
	struct rdb_frame f;
	const uint8_t *fr;
	size_t len;
	uint64_t n = 0;
	int rc = rdb_proto_decoder_read_fd(&b->dec, fd);

	while (rdb_proto_decoder_next(&b->dec, &f) == 1) {
		struct rdb_bakdev *dev = f.type == RDB_MSG_INPUT ?
			rdb_bakdevs_net(&b->devs, f.device) : NULL;

		if (!dev || rdb_msg_output_begin(&f, &it) < 0)
			continue;	/* heartbeats, and nothing else matters */
		while (rdb_msg_output_next(&it, &fr, &len) == 1)
			n += dev->ops->to_guest(dev, fr, len);
	}
	if (n)
		LOGVM(INFO, b->vm->name, "gave the guest %llu frames that reached "
		      "the old primary after its guest stopped",
		      (unsigned long long)n);
	if (rc < 0 && rc != -EAGAIN)
		drain_end(b);
}

static uint64_t on_drain_end(struct rdb_evloop *loop, uint64_t id, void *opaque)
{
	struct rdb_backup *b = opaque;

	b->linger_timer = 0;
	drain_end(b);
	return 0;
}

static void drain_start(struct rdb_backup *b)
{
	int fd = b->fd;

	rdb_evloop_del_fd(b->d->loop, fd);
	b->fd = -1;
	b->linger_fd = fd;
	if (rdb_evloop_add_fd(b->d->loop, fd, RDB_EV_READ, on_drain, b) < 0) {
		close(fd);
		b->linger_fd = -1;
	}
}

/* The last word to the old primary on the handover's link (TAKEN, or
 * REFUSED with why); then it is drained for 2 s, or closed. */
static void handover_answer_last(struct rdb_backup *b,
				 enum rdb_handover_verb verb, const char *why)
{
	int rc;

	if (b->linger_fd < 0)
		return;		/* the primary hung up: it decides at the witness */
	rc = rdb_proto_put_handover(&b->out, b->ho_epoch, verb, why);
	/* A refusal whose claim went back: this host gave the protection up
	 * (nothing of the VM runs here, and no failover without --force),
	 * and says so, as refuse_link does: the primary runs on unprotected
	 * without a decision, under any on_peer_loss. */
	if (rc == 0 && b->gave_up && verb == RDB_HANDOVER_REFUSED)
		rc = rdb_proto_put_error(&b->out, b->gave_up_why);
	if (rc < 0 || rdb_buf_write_all_fd(&b->out, b->linger_fd, rdb_now_ns() +
					   200 * RDB_NS_PER_MS) < 0)
		LOGVM(WARN, b->vm->name, "the old primary may not hear that this "
		      "host %s the VM: it decides at the witness, or waits for "
		      "the operator", verb == RDB_HANDOVER_TAKEN ? "runs" :
		      "does not run");
	if (verb == RDB_HANDOVER_TAKEN &&
	    rdb_evloop_add_timer(b->d->loop, 2 * RDB_NS_PER_S, on_drain_end, b,
				 &b->linger_timer) == 0)
		return;
	drain_end(b);
}

/* This host goes for the VM from the handed-over epoch: it restores it,
 * and TAKEN goes to the old primary once the guest runs here (restored):
 * until then the old copy stays stopped and resumable. */
static void handover_go(struct rdb_backup *b)
{
	struct rdb_vm *vm = b->vm;
	char why[300];

	ho_enter(b, BAK_HO_PLANNED);
	snprintf(why, sizeof(why), "planned migration: the primary %s stopped "
		 "the guest after epoch %llu and handed it over", b->primary_node,
		 (unsigned long long)b->ho_epoch);
	rdb_backup_failover(vm, why);
}

static void handover_decided(struct rdb_backup *b,
			     const struct rdb_witness_result *r)
{
	char why[400];

	decide_end(b);
	switch (r->outcome) {
	case RDB_WITNESS_WON:
		b->vm->st.decisions_won++;
		handover_go(b);
		return;
	case RDB_WITNESS_LOST:
		b->vm->st.decisions_lost++;
		snprintf(why, sizeof(why), "the witness names another owner: %s",
			 r->holder);
		break;
	case RDB_WITNESS_ERROR:
		b->vm->st.witness_errors++;
		snprintf(why, sizeof(why), "the witness did not answer: %s",
			 r->error);
		break;
	}
	ho_enter(b, BAK_HO_NONE);
	ho_out_reset(b, false);		/* the primary sends it after all */
	if (handover_refuse(b, b->ho_epoch, why) < 0)
		link_lost(b, "out of memory refusing a handover");
}

/* OUTPUT: the primary's held output of the epoch it hands over, kept
 * until this host goes live (then sent before the guest runs) or not;
 * each NIC's on that NIC. */
static int handle_output(struct rdb_backup *b, const struct rdb_frame *f)
{
	struct rdb_output_iter it;
	const uint8_t *fr;
	size_t len;
	uint64_t n = 0;
	int rc;

	if (!(b->st.features & RDB_FEATURE_HANDOVER) || b->ho_phase == BAK_HO_ASKED ||
	    !consistent(b) || f->epoch != b->vm->st.committed_epoch ||
	    f->device >= rdb_vm_config_nnics(&b->vm->cfg) ||
	    rdb_msg_output_begin(f, &it) < 0)
		return -EPROTO;
	while ((rc = rdb_msg_output_next(&it, &fr, &len)) == 1)
		n++;
	if (rc < 0)
		return rc;
	if (b->ho_out_epoch != f->epoch)
		ho_out_reset(b, false);
	b->ho_out_epoch = f->epoch;
	b->ho_out_frames += n;
	return rdb_buf_append(&b->ho_out[f->device], f->payload, f->len);
}

/*
 * A RARP from the guest's MAC, as QEMU's announce-self sends, from this
 * host's NIC: switches learn at once that frames for the guest come here
 * now, before the restored guest says anything.  Sent once this host
 * won the VM (what clients send meanwhile waits in the NIC for the
 * guest, instead of reaching the copy that stopped).
 */
static void announce_early(struct rdb_backup *b)
{
	struct rdb_bakdev *dev;
	uint8_t f[60] = { 0 };
	unsigned m[6];

	if (!b->vm->cfg.mac || sscanf(b->vm->cfg.mac, "%x:%x:%x:%x:%x:%x",
				      &m[0], &m[1], &m[2], &m[3], &m[4],
				      &m[5]) != 6)
		return;
	memset(f, 0xff, 6);			/* broadcast */
	for (int i = 0; i < 6; i++) {
		f[6 + i] = (uint8_t)m[i];	/* source: the guest */
		f[22 + i] = (uint8_t)m[i];	/* sender hardware address */
		f[32 + i] = (uint8_t)m[i];	/* target hardware address */
	}
	f[12] = 0x80; f[13] = 0x35;		/* RARP */
	f[15] = 1;				/* Ethernet */
	f[16] = 0x08; f[17] = 0x00;		/* IPv4 */
	f[18] = 6; f[19] = 4;
	f[21] = 3;				/* reverse request */
	dev = rdb_bakdevs_net(&b->devs, 0);	/* the guest's first NIC's */
	if (dev)
		dev->ops->to_wire(dev, f, sizeof(f));
}

/* The handed-over output leaves from here: the client's answers to it
 * then come to this host, where the guest is about to run. */
static void send_handed_output(struct rdb_backup *b)
{
	struct rdb_bakdev *dev;
	bool sent = false;
	char by[64] = "";
	size_t at = 0;

	for (unsigned k = 0; b->ho_out_epoch == b->vm->st.committed_epoch &&
	     (dev = rdb_bakdevs_net(&b->devs, k)); k++) {
		struct rdb_frame f = { .type = RDB_MSG_OUTPUT,
				       .payload = b->ho_out[k].data,
				       .len = (uint32_t)b->ho_out[k].len };
		struct rdb_output_iter it;
		const uint8_t *fr;
		size_t len;
		unsigned n = 0;

		if (b->ho_out[k].len && rdb_msg_output_begin(&f, &it) == 0)
			while (rdb_msg_output_next(&it, &fr, &len) == 1)
				n += dev->ops->to_wire(dev, fr, len);
		sent = sent || n;
		if (at < sizeof(by))
			at += (size_t)snprintf(by + at, sizeof(by) - at, "%s%u",
					       k ? ", " : "", n);
	}
	if (sent)
		LOGVM(INFO, b->vm->name, "sent the %llu output frames the primary "
		      "handed over with epoch %llu (by NIC: %s)",
		      (unsigned long long)b->ho_out_frames,
		      (unsigned long long)b->ho_out_epoch, by);
	ho_out_reset(b, true);
}

static int handle_handover(struct rdb_backup *b, const struct rdb_frame *f)
{
	struct rdb_vm *vm = b->vm;
	enum rdb_handover_verb verb;
	char why[260];

	if (!(b->st.features & RDB_FEATURE_HANDOVER) ||
	    rdb_msg_handover_parse(f, &verb, why, sizeof(why)) < 0)
		return -EPROTO;
	if (verb == RDB_HANDOVER_PREPARE && b->ho_phase != BAK_HO_ASKED && !deciding(b))
		return handover_prepare(b);
	if (verb != RDB_HANDOVER_REQUEST || b->ho_phase == BAK_HO_ASKED || deciding(b))
		return -EPROTO;
	if (!consistent(b) || f->epoch != vm->st.committed_epoch ||
	    vm->state != RDB_VM_PROTECTED) {
		snprintf(why, sizeof(why), "this host is %s with epoch %llu "
			 "committed, not the %llu handed over",
			 rdb_vm_state_name(vm->state),
			 (unsigned long long)vm->st.committed_epoch,
			 (unsigned long long)f->epoch);
		return handover_refuse(b, f->epoch, why);
	}
	if (b->fault_handover_cut) {
		/* the worst moment: the primary's guest is stopped, epoch N
		 * is committed here, nobody has answered */
		b->fault_handover_cut = false;
		LOGVM(WARN, vm->name, "fault injection: the replication link is "
		      "cut as the handover of epoch %llu arrives",
		      (unsigned long long)f->epoch);
		primary_lost(b, "the replication link was cut (fault injection) "
			     "as the primary handed the VM over");
		return 0;
	}
	ho_enter(b, BAK_HO_ASKED);
	b->ho_epoch = f->epoch;
	if (b->ho_out_epoch != f->epoch)
		ho_out_reset(b, false);		/* of another epoch: stale */
	LOGVM(INFO, vm->name, "the primary %s hands the VM over after epoch "
	      "%llu (planned migration)%s", b->primary_node,
	      (unsigned long long)f->epoch,
	      vm->peer_loss == RDB_PEER_LOSS_WITNESS ? ": claiming it at the "
	      "witness" : "");
	if (vm->peer_loss != RDB_PEER_LOSS_WITNESS) {
		handover_go(b);
		return 0;
	}
	/* one claim: an error refuses (the primary's guest runs on there) */
	fo_enter(b, BAK_FO_DECIDING);
	b->decide_start_ns = rdb_now_ns();
	b->decide_attempts = 0;
	b->witness_error[0] = 0;
	snprintf(b->decide_why, sizeof(b->decide_why), "planned migration");
	backup_claim(b);
	if (b->witness_req == 0)
		handover_decided(b, &(struct rdb_witness_result){
			.outcome = RDB_WITNESS_ERROR,
			.error = "the request could not be made" });
	return 0;
}

static uint64_t on_heartbeat(struct rdb_evloop *loop, uint64_t id, void *opaque)
{
	struct rdb_backup *b = opaque;
	struct rdb_vm *vm = b->vm;
	uint64_t now = rdb_now_ns();
	uint64_t timeout = (uint64_t)b->d->cfg.failover_timeout_ms * RDB_NS_PER_MS;
	uint64_t period = (uint64_t)b->d->cfg.heartbeat_ms * RDB_NS_PER_MS;
	enum rdb_peer_verdict v;
	uint64_t stalled;

	/* Before the initial state is in, there is nothing to fail over to,
	 * and a busy initial copy is not a dead primary. */
	if (!consistent(b) && timeout < INITIAL_SYNC_SILENCE_NS)
		timeout = INITIAL_SYNC_SILENCE_NS;
	if (b->fd < 0) {
		/* a handover's restore: the old primary, its guest stopped,
		 * waits for the answer and hears that this host lives */
		if (b->ho_phase == BAK_HO_PLANNED && b->linger_fd >= 0 &&
		    vm->state == RDB_VM_FAILING_OVER) {
			rdb_proto_put_heartbeat(&b->out, ++b->hb_seq, now);
			rdb_buf_write_fd(&b->out, b->linger_fd);
			return period;
		}
		return vm->state == RDB_VM_FAILED_OVER ? 0 : period;
	}
	/* Silence is an empty socket, not a loop that was busy elsewhere. */
	if (now - b->peer.heard_ns > timeout / 2) {
		on_link(loop, b->fd, RDB_EV_READ, b);
		if (b->fd < 0)
			return 0;
		now = rdb_now_ns();
	}
	v = rdb_peer_judge(&b->peer, rdb_watchdog_host_stall_ns(b->d->wd), now,
			   timeout, period, &stalled);
	rdb_peer_tell(&b->peer, v, RDB_COMPONENT, vm->name, "primary", now,
		      stalled, timeout, &b->d->peer_stall_waits);
	switch (v) {
	case RDB_PEER_RECHECK:
		return RDB_PEER_RECHECK_NS;
	case RDB_PEER_STALLED:
		break;
	case RDB_PEER_SILENT: {
		char why[160];

		snprintf(why, sizeof(why), "primary silent for %llu ms",
			 (unsigned long long)((now - b->peer.heard_ns) / RDB_NS_PER_MS));
		if (consistent(b))
			primary_lost(b, why);
		else
			link_lost(b, "primary silent before the initial state was committed");
		return 0;
	}
	case RDB_PEER_HEARD:
		break;
	}
	rdb_proto_put_heartbeat(&b->out, ++b->hb_seq, now);
	want_write(b);
	return period;
}

/* ---- failover ---- */

/* The restore's outcome is known: what its guest sent meanwhile goes
 * out (release), each device's through it, or is dropped. */
static void guest_held_end(struct rdb_backup *b, bool release)
{
	if (!b->run.held)
		return;
	b->run.held = false;
	rdb_bakdevs_release(&b->devs, release);
	b->run.held_bytes = 0;
}

/* The devices' checks after a failover (host.tick_soon), the soonest any
 * of them wants. */
static uint64_t on_dev_tick(struct rdb_evloop *loop, uint64_t id, void *opaque)
{
	struct rdb_backup *b = opaque;
	uint64_t next;

	(void)loop;
	(void)id;
	next = rdb_bakdevs_tick(&b->devs);
	if (!next)
		b->dev_timer = 0;
	return next;
}

/* The guest's helper answers the failover event once its DBMS can see
 * it (remusdb.h): the devices hear it (a NIC's fence comes down). */
static void on_event_port(struct rdb_evloop *loop, int fd, unsigned ev,
			  void *opaque)
{
	struct rdb_backup *b = opaque;
	uint8_t buf[512];
	ssize_t r = read(fd, buf, sizeof(buf));
	char *nl;

	if (r <= 0) {
		if (r == 0 || (errno != EAGAIN && errno != EINTR))
			rdb_evloop_mod_fd(loop, fd, 0);
		return;
	}
	if (rdb_buf_append(&b->event_in, buf, (size_t)r) < 0)
		return;
	while (b->event_in.len &&
	       (nl = memchr(b->event_in.data, '\n', b->event_in.len))) {
		size_t n = (size_t)((uint8_t *)nl - b->event_in.data);
		unsigned long long gen;
		char line[160];

		snprintf(line, sizeof(line), "%.*s", (int)n, (char *)b->event_in.data);
		rdb_buf_consume(&b->event_in, n + 1);
		if (sscanf(line, "REMUSDB-FAILOVER-ACK generation=%llu", &gen) != 1)
			continue;
		if (gen != b->event_gen) {
			LOGVM(WARN, b->vm->name, "the guest acknowledged failover "
			      "event generation %llu, not %llu (the one sent): "
			      "ignored", gen, (unsigned long long)b->event_gen);
			continue;
		}
		LOGVM(INFO, b->vm->name, "the guest acknowledged failover "
		      "event generation %llu", gen);
		rdb_bakdevs_acked(&b->devs);
	}
	if (b->event_in.len > 4096)
		rdb_buf_reset(&b->event_in);
}

/*
 * The restored VM's lineage, before its guest can write: each replica is
 * the protection's committed state at this epoch, plus what its written
 * map (fresh, all clear) will say the guest wrote.  With both, the VM
 * can be protected again to the old primary by copying only what may
 * differ (docs/resync.md).  Failing here costs only that: the failover
 * goes on.  wmap_ready: the written maps were made fresh already (a
 * prepared handover: before its disk servers started).  Every replica
 * has one, or none counts: the record names them all.
 */
static void record_restored(struct rdb_backup *b, bool wmap_ready)
{
	struct rdb_vm *vm = b->vm;
	struct rdb_lineage l = { 0 };
	char err[300] = "";
	int rc;

	rc = wmap_ready ? 0 : rdb_bakdevs_fresh(&b->devs, err, sizeof(err));
	if (rc == 0) {
		l.role = RDB_LINEAGE_RESTORED;
		l.generation = b->generation;
		l.epoch = vm->st.committed_epoch;
		rc = rdb_bakdevs_record(&b->devs, &l);
		if (rc == 0 && !l.ndisks)
			return;		/* no replica here: nothing to record */
	}
	if (rc == 0) {
		snprintf(l.peer, sizeof(l.peer), "%s", b->primary_node);
		rc = rdb_lineage_save(b->d->cfg.state_dir, vm->name, &l, err,
				      sizeof(err));
	}
	if (rc < 0) {
		LOGVM(WARN, vm->name, "no record of what the restored guest "
		      "writes (%s): protecting it again will copy every disk "
		      "whole", err[0] ? err : strerror(-rc));
		rdb_bakdevs_forget(&b->devs);
	}
}

/* The devices' step of a failover on the restore's thread: the replicas,
 * as of the last committed epoch, made durable and served to the
 * restored QEMU (already served, when a handover prepared them). */
static int failover_devs(struct rdb_backup *b)
{
	int rc = rdb_bakdevs_check(&b->devs);

	if (rc == 0)
		rc = rdb_bakdevs_sync(&b->devs);
	if (rc < 0)
		return rc;
	record_restored(b, b->prepared);
	return b->prepared ? 0 : rdb_bakdevs_serve(&b->devs);
}

/*
 * Tells the guest it now runs from epoch N (guest-kmod/include/uapi/
 * remusdb.h): one line into the failover event port.  QEMU keeps it until
 * the guest's helper opens the port; the socket stays open for the VM's
 * life so the line is not lost with a hang-up.  A failure is logged, not
 * fatal: the VM runs either way.
 */
static void send_failover_event(struct rdb_backup *b, const char *path,
				uint64_t epoch)
{
	struct rdb_vm *vm = b->vm;
	/* unique across protections (the primary's random generation), so
	 * a guest can tell this failover from one of an earlier protection */
	uint64_t gen = b->generation ? b->generation :
		       vm->st.transitions[RDB_VM_FAILED_OVER] + 1;
	char line[128];
	int n, rc;

	unsigned flags = rdb_vm_config_commit_protection(&vm->cfg) ?
		REMUSDB_EVENT_ABORT : 0;

	b->event_gen = gen;
	n = snprintf(line, sizeof(line), "REMUSDB-FAILOVER epoch=%llu "
		     "generation=%llu flags=%u\n", (unsigned long long)epoch,
		     (unsigned long long)gen, flags);
	rc = rdb_sock_connect_unix(path, rdb_now_ns() + RDB_NS_PER_S, &b->event_fd);
	if (rc == 0)
		rc = rdb_sock_write_all(b->event_fd, line, (size_t)n,
					rdb_now_ns() + RDB_NS_PER_S);
	if (rc < 0)
		LOGVM(WARN, vm->name, "failover event to the guest (%s): %s", path,
		      strerror(-rc));
	else
		LOGVM(INFO, vm->name, "failover event sent to the guest: epoch %llu, "
		      "generation %llu%s", (unsigned long long)epoch,
		      (unsigned long long)gen, flags & REMUSDB_EVENT_ABORT ?
		      ", abort what was not committing" : "");
	/* (the socket is non-blocking: rdb_sock_connect_unix) */
	if (rc == 0 && rdb_evloop_add_fd(b->d->loop, b->event_fd, RDB_EV_READ,
					 on_event_port, b) < 0)
		LOGVM(WARN, vm->name, "cannot watch the failover event port: "
		      "the guest's answer will not be seen");
}

/* The restored VM's sockets and files: NAME.* in run_dir, NAME/ in
 * state_dir; what its devices add (the replicas' drives, once served,
 * and the NICs' sockets, once open); and what the backend is asked to
 * start. */
struct restore_req {
	char qmp[108], wd[108], in[108], ev[108], ser[108];
	char log[512], con[512], dir[512];
	struct rdb_bakdev_restore dv;
	struct rdb_hv_restore r;
};

/* The restore's deadline from now (RESTORE_DEADLINE_NS, scaled). */
static uint64_t restore_deadline(const struct rdb_backup *b)
{
	uint64_t ns = RESTORE_DEADLINE_NS + 2 * b->initial_take_ns;

	return rdb_now_ns() + (ns < RESTORE_DEADLINE_MAX_NS ? ns :
			       RESTORE_DEADLINE_MAX_NS);
}

static void restore_req(struct rdb_backup *b, struct restore_req *q)
{
	struct rdb_vm *vm = b->vm;
	struct rdb_daemon *d = b->d;
	const char *run = d->cfg.run_dir, *state = d->cfg.state_dir;
	const char *n = vm->name;

	snprintf(q->qmp, sizeof(q->qmp), "%s/%s.qmp", run, n);
	snprintf(q->wd, sizeof(q->wd), "%s/%s.wd.qmp", run, n);
	snprintf(q->in, sizeof(q->in), "%s/%s.incoming", run, n);
	snprintf(q->ev, sizeof(q->ev), "%s/%s.event", run, n);
	snprintf(q->ser, sizeof(q->ser), "%s/%s.serial.sock", run, n);
	snprintf(q->log, sizeof(q->log), "%s/%s/qemu.log", state, n);
	snprintf(q->con, sizeof(q->con), "%s/%s/console.log", state, n);
	snprintf(q->dir, sizeof(q->dir), "%s/%s", state, n);
	rdb_bakdevs_restore(&b->devs, &q->dv);
	q->r = (struct rdb_hv_restore){
		.vm = n,
		.binary = d->cfg.qemu_binary,
		.args = vm->cfg.qemu_arg.v,
		.nargs = vm->cfg.qemu_arg.n,
		.ram_image = rdb_ramimage_path(&b->img, b->hv->main_block),
		.ctl_path = q->qmp,
		.wd_ctl_path = q->wd,
		.incoming_path = q->in,
		.net_path = q->dv.nnets ? q->dv.nets[0] : "",
		.more_nets = q->dv.nets + 1,
		.nmore_nets = q->dv.nnets ? q->dv.nnets - 1 : 0,
		.disk_path = q->dv.ndrives ? q->dv.disk_sock : NULL,
		.disk_arg = q->dv.ndrives ? q->dv.drives[0] : NULL,
		.more_drives = q->dv.drives + 1,
		.nmore_drives = q->dv.ndrives ? q->dv.ndrives - 1 : 0,
		.event_path = vm->cfg.event_port ? q->ev : NULL,
		.console_path = q->con,
		.serial_path = q->ser,
		.log_path = q->log,
		.work_dir = q->dir,
		.libvirt_uri = vm->cfg.libvirt_restore,
		.cpus = &d->guest_cpus,
		.cpus_chosen = d->cfg.guest_cpus[0] != 0,
	};
	for (size_t i = 0; i < b->setup.nblocks; i++)
		if (strcmp(b->setup.blocks[i].idstr, b->hv->main_block) == 0)
			q->r.ram_bytes = b->setup.blocks[i].used_length;
}

/*
 * Starts the hypervisor process that will run the VM here, waiting for
 * its state on run_dir/NAME.incoming: the RAM image mapped, the replicas'
 * drives (served already) and the NICs attached.  Nothing of the guest
 * runs yet.  A handover does this ahead of time (prepare), a failover at
 * once.
 */
static int restore_spawn(struct rdb_backup *b)
{
	struct rdb_vm *vm = b->vm;
	struct restore_req q;
	char err[700];
	int rc;

	restore_req(b, &q);
	if (!q.r.ram_image) {
		LOGVM(ERROR, vm->name, "no %s block to restore from",
		      b->hv->main_block);
		return -ENOENT;
	}
	rc = b->hv->restore_prepare(&q.r, &b->rs,
				    restore_deadline(b), err,
				    sizeof(err));
	if (rc < 0) {
		LOGVM(ERROR, vm->name, "restore: %s", err);
		return rc;
	}
	return 0;
}

/* Loads the last committed epoch into what restore_spawn started; the
 * guest runs on return 0. */
static int restore_load(struct rdb_backup *b)
{
	struct rdb_vm *vm = b->vm;
	const struct rdb_committed *c = rdb_stage_committed(&b->st);
	const uint8_t **data;
	struct rdb_hv_state st;
	struct restore_req q;
	char err[700];
	int rc;

	data = calloc(b->setup.nblocks ? b->setup.nblocks : 1, sizeof(*data));
	if (!data)
		return -ENOMEM;
	for (size_t i = 0; i < b->setup.nblocks; i++)
		data[i] = rdb_ramimage_base(&b->img, i);
	st = (struct rdb_hv_state){
		.config = b->setup.config,
		.config_len = b->setup.config_len,
		.blocks = b->setup.blocks,
		.nblocks = b->setup.nblocks,
		.block_data = data,
		.devstate = c->devstate,
		.devstate_len = c->devstate_len,
	};
	/* (a Xen domain's config takes the replica here: xl restore
	 * creates it with its state) */
	restore_req(b, &q);
	rc = b->hv->restore_load(&q.r, &b->rs, &st,
				 restore_deadline(b), err,
				 sizeof(err));
	if (rc == 0 && b->hv->nic_attach) {
		/* (its NIC socket listens: opened at the failover).  The
		 * guest runs already and is the VM's only copy now: a NIC
		 * that cannot be attached is the operator's to mend, not a
		 * reason to kill it. */
		char log[300], why[300];

		snprintf(log, sizeof(log), "%s/%s.nic.log", b->d->cfg.run_dir,
			 vm->name);
		if (b->hv->nic_attach(vm->name, q.r.net_path, log,
				      restore_deadline(b), why, sizeof(why)) < 0)
			LOGVM(ERROR, vm->name, "the restored guest runs with its "
			      "NIC not connected to this daemon: %s (see %s)",
			      why, log);
	}
	if (rc < 0)
		LOGVM(ERROR, vm->name, "restore: %s", err);
	/* (the failover event goes out from the loop: restored()) */
	free(data);
	return rc;
}

/* Starts QEMU (unless a handover prepared it) and loads the last
 * committed epoch; the guest runs on return 0. */
static int restore_vm(struct rdb_backup *b, uint64_t t0)
{
	uint64_t ctl_ns = 0, t2;
	int rc = 0;

	if (!b->prepared) {
		rc = restore_spawn(b);
		ctl_ns = b->rs.ctl_ns;
	}
	if (rc < 0)
		return rc;
	if (b->fault_restore_fail) {
		b->fault_restore_fail = false;
		LOGVM(WARN, b->vm->name, "fault injection: the restore fails after "
		      "QEMU started");
		return -EIO;
	}
	t2 = rdb_now_ns();
	rc = restore_load(b);
	if (rc == 0 && b->fault_restore_fail_late) {
		/* as a restore whose last step (a status query, announce)
		 * fails after QEMU started the guest */
		b->fault_restore_fail_late = false;
		LOGVM(WARN, b->vm->name, "fault injection: the restored guest "
		      "runs 1 s, then its restore fails");
		usleep(1000000);
		return -EIO;
	}
	if (rc == 0)
		LOGVM(INFO, b->vm->name, "restore: %s %s %.1f ms after the decision "
		      "(control up in %.1f ms); state of %zu KiB built in %.1f ms, "
		      "fed in %.1f ms, the guest running %.1f ms later",
		      b->hv->name, b->prepared ? "prepared, used" : "started",
		      (double)(t2 - t0) / RDB_NS_PER_MS,
		      (double)ctl_ns / RDB_NS_PER_MS, b->rs.stream_bytes >> 10,
		      (double)(b->rs.built_ns - t2) / RDB_NS_PER_MS,
		      (double)(b->rs.fed_ns - b->rs.built_ns) / RDB_NS_PER_MS,
		      (double)(rdb_now_ns() - b->rs.fed_ns) / RDB_NS_PER_MS);
	return rc;
}

/*
 * The restore runs on a thread of its own: starting QEMU, its QMP, the
 * stream and waiting for the guest to run can take seconds (up to
 * restore_deadline()), and this daemon's loop serves every other VM's
 * heartbeats meanwhile.  While it runs the thread owns b->rs; nothing else of the VM changes (its state is failing-over,
 * which every other path leaves alone), and restored() finishes on the
 * loop.
 */
struct restore_job {
	struct rdb_backup *b;
	struct rdb_bgjob *job;
	uint64_t t0;
	bool prepare;			/* restore_spawn only: a handover's;
					 * else failover_devs first */
	int rc;
	/* what status shows of the replica meanwhile (the thread may sync
	 * it and start its server): as it was when the job began */
	struct rdb_bakdev_sum at;
};

static void restore_run(void *opaque)
{
	struct restore_job *j = opaque;
	int rc = 0;

	/* the replica's sync waits for this host's disk: here, not on the
	 * loop that serves every other VM */
	if (!j->prepare)
		rc = failover_devs(j->b);
	if (rc == 0)
		rc = j->prepare ? restore_spawn(j->b) : restore_vm(j->b, j->t0);
	j->rc = rc;
}

/*
 * A handover's restore failed: this host runs nothing.  The old primary
 * keeps its stopped copy until told; the claim won at the witness goes
 * back to the registered value first, so that its own decision there
 * lets it run on (a REFUSED it never reads ends the same way: it claims).
 */
static void on_claim_returned(void *opaque, const struct rdb_witness_result *r)
{
	struct rdb_backup *b = opaque;
	char why[400];

	b->witness_req = 0;
	if (r->outcome == RDB_WITNESS_WON)
		snprintf(why, sizeof(why), "the restore failed here (%.100s)%s: "
			 "the VM runs on there", b->decide_why,
			 b->vm->peer_loss == RDB_PEER_LOSS_WITNESS ? "; the "
			 "witness's claim is given back" : "");
	else
		snprintf(why, sizeof(why), "the restore failed here (%.100s); the "
			 "claim at the witness could not be given back (%.200s): "
			 "ask the witness", b->decide_why,
			 r->outcome == RDB_WITNESS_LOST ? r->holder : r->error);
	if (r->outcome == RDB_WITNESS_WON) {
		LOGVM(WARN, b->vm->name, "handover of epoch %llu refused: %s",
		      (unsigned long long)b->ho_epoch, why);
		b->gave_up = true;
		snprintf(b->gave_up_why, sizeof(b->gave_up_why), "the handover's "
			 "restore failed here (%.100s)", b->decide_why);
	} else
		LOGVM(ERROR, b->vm->name, "handover of epoch %llu refused: %s",
		      (unsigned long long)b->ho_epoch, why);
	handover_answer_last(b, RDB_HANDOVER_REFUSED, why);
}

static void handover_undo(struct rdb_backup *b, const char *err)
{
	struct rdb_vm *vm = b->vm;
	int64_t id = -1;

	ho_enter(b, BAK_HO_NONE);
	snprintf(b->decide_why, sizeof(b->decide_why), "%s", err);
	if (vm->peer_loss == RDB_PEER_LOSS_WITNESS)
		id = rdb_witness_return(b->d->witness, vm->name, b->registered,
					b->d->node, on_claim_returned, b);
	if (id > 0) {
		b->witness_req = id;
		return;
	}
	on_claim_returned(b, &(struct rdb_witness_result){
		.outcome = vm->peer_loss == RDB_PEER_LOSS_WITNESS ?
			   RDB_WITNESS_ERROR : RDB_WITNESS_WON,
		.error = "the request could not be made" });
}

static void failover_failed(struct rdb_backup *b, int rc)
{
	struct rdb_vm *vm = b->vm;

	int pid = (int)b->rs.proc.pid;
	bool may_run;

	/* A half-restored guest must not run on: it is no copy of anything
	 * (and would hold the RAM image and the replica).  Nothing it sent
	 * left this host (run.held). */
	guest_held_end(b, false);
	may_run = rdb_hv_restored_dispose(b->hv, &b->rs, true) < 0;
	if (pid > 0)
		LOGVM(ERROR, vm->name, "%s the %s of the failed restore (pid %d)",
		      may_run ? "could not show gone" : "killed",
		      b->hv->restored_reprotect ? "QEMU" : "watch", pid);
	rdb_bakdevs_unserve(&b->devs);
	rdb_vm_set_state(vm, RDB_VM_FAILED, "restore from epoch %llu failed: "
			 "%s%s", (unsigned long long)vm->st.committed_epoch,
			 strerror(-rc), may_run ? "; its guest may still run "
			 "here" : "");
	if (b->ho_phase == BAK_HO_PLANNED && may_run) {
		/* The old copy must not resume beside one that may run: the
		 * claim stays here, the old primary hears nothing and loses
		 * its decision (fenced, stopped).  The operator finds which
		 * copy is left. */
		ho_enter(b, BAK_HO_NONE);
		LOGVM(ERROR, vm->name, "handover of epoch %llu: the failed "
		      "restore's guest could not be shown gone, so the VM stays "
		      "claimed by this host and the old primary stays stopped "
		      "(fenced): once no guest runs here, `remusdbctl unprotect "
		      "--force` there resumes it",
		      (unsigned long long)b->ho_epoch);
		drain_end(b);
	} else if (b->ho_phase == BAK_HO_PLANNED) {
		handover_undo(b, strerror(-rc));
	}
}

static void record_restored_def(struct rdb_backup *b);

/* The restore thread is done: the guest runs, or the failover failed. */
static void on_restore_done(void *opaque)
{
	struct restore_job *j = opaque;
	struct rdb_backup *b = j->b;
	struct rdb_vm *vm = b->vm;
	bool prepare = j->prepare;
	int rc = j->rc;
	char ev_path[108];

	b->restore_job = NULL;
	free(j);
	if (prepare) {
		prepared(b, rc);
		failover_resume(b);	/* one waited for it */
		return;
	}
	b->prepared = false;	/* used (or killed: failover_failed) */
	if (rc < 0) {
		failover_failed(b, rc);
		return;
	}
	if (vm->cfg.event_port && b->ho_phase != BAK_HO_PLANNED) {
		snprintf(ev_path, sizeof(ev_path), "%s/%s.event", b->d->cfg.run_dir,
			 vm->name);
		send_failover_event(b, ev_path, rdb_stage_committed(&b->st)->epoch);
	}
	rdb_bakdevs_running(&b->devs);
	vm->st.failover_ns = rdb_now_ns() - b->failover_t0;
	b->run.running_ns = b->rs.running_ns ? b->rs.running_ns : rdb_now_ns();
	guest_held_end(b, true);
	/* the old primary may let its stopped copy go now */
	if (b->ho_phase == BAK_HO_PLANNED)
		handover_answer_last(b, RDB_HANDOVER_TAKEN, NULL);
	rdb_vm_set_state(vm, RDB_VM_FAILED_OVER,
			 "running from epoch %llu, restored in %.1f ms",
			 (unsigned long long)vm->st.committed_epoch,
			 (double)vm->st.failover_ns / RDB_NS_PER_MS);
	record_restored_def(b);
}

/*
 * The VM runs here now: a daemon that starts after this one re-adopts it
 * (vmdef.h), from the primary's config as received, the replicas and
 * their servers, and the protection and epoch it was restored from.
 * Not recorded: logged (a restart of remusdbd would leave the restored
 * guest's network unrelayed), the VM runs on.
 */
static void record_restored_def(struct rdb_backup *b)
{
	struct rdb_vm *vm = b->vm;
	json_t *cfg = rdb_vm_config_to_json(&vm->cfg);
	json_t *r = json_pack("{s:I, s:I, s:[], s:[]}", "generation",
			      (json_int_t)b->generation, "epoch",
			      (json_int_t)vm->st.committed_epoch, "disks",
			      "servers");
	char err[400] = "";
	int rc = cfg && r ? rdb_bakdevs_restored(&b->devs, r) : -ENOMEM;

	if (rc == 0)
		rc = rdb_vmdef_save_restored(b->d->cfg.state_dir, vm->name, cfg,
					     r, err, sizeof(err));
	if (rc < 0)
		LOGVM(ERROR, vm->name, "the restored VM's definition was not "
		      "recorded (%s): a restart of remusdbd here will not "
		      "re-adopt it", err[0] ? err : strerror(-rc));
	json_decref(cfg);
	json_decref(r);
}

static int restore_start(struct rdb_backup *b, uint64_t t0, bool prepare)
{
	struct restore_job *j = calloc(1, sizeof(*j));
	int rc;

	if (!j)
		return -ENOMEM;
	j->b = b;
	j->t0 = t0;
	j->prepare = prepare;
	rdb_bakdevs_counters(&b->devs, &j->at);
	b->restore_job = j;
	/* the guest may run before the restore is known to have worked */
	if (!prepare)
		b->run.held = true;
	rc = rdb_bgjob_start(b->d->loop, restore_run, on_restore_done, j, &j->job);
	if (rc < 0) {
		b->restore_job = NULL;
		b->run.held = false;
		free(j);
	}
	return rc;
}

/* Waits for a restore under way (teardown only: the thread uses b); a
 * prepare's outcome is taken as on the loop. */
static void restore_wait(struct rdb_backup *b)
{
	struct restore_job *j = b->restore_job;
	bool prepare;
	int rc;

	if (!j)
		return;
	rdb_bgjob_join(j->job);
	b->restore_job = NULL;
	prepare = j->prepare;
	rc = j->rc;
	free(j);
	if (prepare)
		prepared(b, rc);
}

/* Undoes a prepare: its QEMU (its guest never ran), the replica's
 * server, the NIC. */
static void unprepare(struct rdb_backup *b)
{
	rdb_hv_restored_dispose(b->hv, &b->rs, true);
	rdb_bakdevs_unserve(&b->devs);
	rdb_bakdevs_close(&b->devs);
	b->prepared = false;
}

static void ready_answer(struct rdb_backup *b, const char *why)
{
	if (b->fd < 0 || b->vm->state != RDB_VM_PROTECTED)
		return;		/* nothing to hand over to here any more */
	if (rdb_proto_put_handover(&b->out, 0, RDB_HANDOVER_READY, why) == 0)
		want_write(b);
}

/* The prepare job is done: its QEMU waits for a stream, or it failed. */
static void prepared(struct rdb_backup *b, int rc)
{
	struct rdb_vm *vm = b->vm;
	char why[200];

	if (rc < 0) {
		unprepare(b);
		snprintf(why, sizeof(why), "no QEMU prepared (%s): the handover "
			 "will start one", strerror(-rc));
		LOGVM(WARN, vm->name, "%s", why);
		ready_answer(b, why);
		return;
	}
	b->prepared = true;
	LOGVM(INFO, vm->name, "a QEMU waits for the handover (pid %d)",
	      (int)b->rs.proc.pid);
	ready_answer(b, "");
}

/*
 * HANDOVER(prepare): the primary is about to hand the VM over.  What a
 * restore needs before the state is final starts now, on the restore
 * thread: the replica's disk server, the NIC, a QEMU waiting for its
 * incoming stream.  The handover then only loads the last epoch into it
 * (restore_load).  Answered with READY, prepared or not (a failed
 * prepare leaves a plain restore).  A failover meanwhile uses it too.
 */
static int handover_prepare(struct rdb_backup *b)
{
	struct rdb_vm *vm = b->vm;
	char err[300] = "";
	int rc;

	if (b->restore_job)
		return 0;		/* READY when it is done */
	if (b->prepared) {
		ready_answer(b, "");
		return 0;
	}
	if (!consistent(b) || vm->state != RDB_VM_PROTECTED) {
		snprintf(err, sizeof(err), "not prepared: this host is %s",
			 rdb_vm_state_name(vm->state));
		ready_answer(b, err);
		return 0;
	}
	if (rdb_bakdevs_fresh(&b->devs, err, sizeof(err)) < 0)
		LOGVM(WARN, vm->name, "no written map (%s): protecting the "
		      "VM again after the handover copies every disk "
		      "whole", err);
	/* (the replicas' marker still says whole: the QEMU prepared waits
	 * for its state and writes nothing, epochs go on committing into
	 * them; failover_go marks them served before a guest runs) */
	rc = rdb_bakdevs_serve(&b->devs);
	if (rc == 0)
		rc = rdb_bakdevs_open(&b->devs);
	if (rc == 0)
		rc = restore_start(b, rdb_now_ns(), true);
	if (rc < 0) {
		prepared(b, rc);
		return 0;
	}
	LOGVM(INFO, vm->name, "preparing for a handover: replica served, NIC "
	      "open, a QEMU starting");
	return 0;
}

/*
 * The failover proper, once nothing runs on a thread for the VM: the
 * epoch in flight discarded, the NIC, then (on the restore thread) the
 * replica made durable and served, QEMU started and the last committed
 * epoch loaded.
 */
static int failover_go(struct rdb_backup *b)
{
	struct rdb_vm *vm = b->vm;
	int rc;

	if (!consistent(b)) {
		LOGVM(ERROR, vm->name, "cannot fail over: no committed checkpoint");
		failover_failed(b, -ENODATA);
		return -ENODATA;
	}
	rc = rdb_bakdevs_check(&b->devs);
	if (rc < 0) {
		failover_failed(b, rc);
		return rc;
	}
	/* The epoch in flight never committed: it must leave no trace. */
	rdb_stage_discard(&b->st);
	/* The replicas are the restored guest's from here on, written by
	 * it: never a resync base for the primary again. */
	if (b->st.ndisks)
		rdb_bak_disks_served(&b->host, b->generation,
				     vm->st.committed_epoch);
	/* A handover lost no epoch: nothing to roll back (under commit
	 * protection, every NIC's flows checked through that NIC). */
	if (b->ho_phase != BAK_HO_PLANNED)
		rdb_bakdevs_rollback(&b->devs, b->failover_t0);
	/* A prepared handover's NIC is open: the output goes first, so the
	 * network learns where the guest is now before the disk's sync
	 * (what clients send it meanwhile reaches the stopped old copy) */
	if (b->ho_phase == BAK_HO_PLANNED && b->prepared) {
		announce_early(b);
		send_handed_output(b);
	}
	rc = b->prepared ? 0 : rdb_bakdevs_open(&b->devs);
	if (rc == 0 && !(b->ho_phase == BAK_HO_PLANNED && b->prepared))
		announce_early(b);
	if (rc == 0 && b->ho_phase == BAK_HO_PLANNED)
		send_handed_output(b);	/* (cold: sent now; else nothing left) */
	ho_out_reset(b, true);
	if (rc == 0)
		rc = restore_start(b, b->failover_t0, false);
	if (rc < 0) {
		failover_failed(b, rc);
		return rc;
	}
	return 0;
}

/* What a waiting failover waited for is done: it goes on. */
static void failover_resume(struct rdb_backup *b)
{
	if (!fo_waiting(b) || b->commit_job || b->restore_job)
		return;
	fo_enter(b, BAK_FO_NONE);
	if (b->fo_wait_timer)
		rdb_evloop_del_timer(b->d->loop, b->fo_wait_timer);
	b->fo_wait_timer = 0;
	LOGVM(INFO, b->vm->name, "the failover goes on after %.0f ms of waiting "
	      "(epoch %llu committed here)",
	      (double)(rdb_now_ns() - b->failover_t0) / RDB_NS_PER_MS,
	      (unsigned long long)b->vm->st.committed_epoch);
	failover_go(b);
}

static uint64_t on_failover_wait(struct rdb_evloop *loop, uint64_t id,
				 void *opaque)
{
	struct rdb_backup *b = opaque;

	(void)loop;
	(void)id;
	b->fo_wait_timer = 0;
	if (!fo_waiting(b))
		return 0;
	fo_enter(b, BAK_FO_NONE);
	rdb_vm_set_state(b->vm, RDB_VM_FAILED, "failover: %s still running after "
			 "%.0f s; the replica is in no known state and is not "
			 "served (the operator decides)", b->commit_job ?
			 "an epoch's replica writes and sync" :
			 "the start of a QEMU prepared for a handover",
			 (double)(rdb_now_ns() - b->failover_t0) / RDB_NS_PER_S);
	if (b->ho_phase == BAK_HO_PLANNED)
		handover_undo(b, "its QEMU did not start in time");
	return 0;
}

int rdb_backup_failover(struct rdb_vm *vm, const char *why)
{
	struct rdb_backup *b = vm->bak;
	uint64_t t0 = rdb_now_ns();

	if (!b)
		return -ENOENT;
	if (vm->state == RDB_VM_FAILED_OVER || vm->state == RDB_VM_FAILING_OVER)
		return -EALREADY;
	/* (an epoch whose disk step runs may be the first committed one;
	 * its end tells whether the replica is whole: failover_go) */
	if (!consistent(b) && !b->commit_job) {
		LOGVM(ERROR, vm->name, "cannot fail over: no committed checkpoint");
		return -ENODATA;
	}
	if (!b->commit_job && rdb_bakdevs_check(&b->devs) < 0) {
		failover_failed(b, -EIO);
		return -EIO;
	}
	b->fo_silent_ns = t0 - b->peer.heard_ns;
	b->fo_decide_ns = vm->state == RDB_VM_DECIDING ? t0 - b->decide_start_ns : 0;
	rdb_vm_set_state(vm, RDB_VM_FAILING_OVER, "%s", why);
	b->failover_t0 = t0;
	if (b->ho_phase == BAK_HO_PLANNED && b->fd >= 0)
		drain_start(b);
	else
		close_link(b);
	/*
	 * An epoch whose disk step runs is committed (or not) first: its
	 * replica writes cannot be taken back.  A prepare under way: its
	 * QEMU will do (or it failed).  Both end on the loop, which serves
	 * every other VM meanwhile.
	 */
	if (b->commit_job || b->restore_job) {
		uint64_t wait = restore_deadline(b) - t0 + FAILOVER_WAIT_NS;

		LOGVM(INFO, vm->name, "the failover waits for %s (at most %llu s)",
		      b->commit_job ? "the last epoch's replica writes and sync" :
		      "the QEMU being prepared for a handover",
		      (unsigned long long)(wait / RDB_NS_PER_S));
		fo_enter(b, BAK_FO_WAITING);
		if (rdb_evloop_add_timer(b->d->loop, wait, on_failover_wait, b,
					 &b->fo_wait_timer) < 0)
			LOGVM(ERROR, vm->name, "no timer bounds the failover's wait");
		return 0;
	}
	return failover_go(b);
}

/* ---- what the devices get of the role (bakdev.h) ---- */

static struct rdb_buf *dev_link_out(void *opaque)
{
	struct rdb_backup *b = opaque;

	return &b->out;
}

static void dev_want_write(void *opaque)
{
	want_write(opaque);
}

static int dev_vm_dir(void *opaque, char *dir, size_t len)
{
	return vm_dir(opaque, dir, len);
}

static void dev_fail(void *opaque, const char *why)
{
	struct rdb_backup *b = opaque;

	rdb_vm_set_state(b->vm, RDB_VM_FAILED, "%s", why);
}

static int dev_tick_soon(void *opaque)
{
	struct rdb_backup *b = opaque;

	if (b->dev_timer)
		return 0;
	return rdb_evloop_add_timer(b->d->loop, RDB_NS_PER_MS, on_dev_tick, b,
				    &b->dev_timer);
}

/* While an epoch's disk step or a restore runs, its thread owns the
 * replicas' counters (and the restore their servers). */
static void dev_owned(void *opaque, struct rdb_bakdev_owned *out)
{
	const struct rdb_backup *b = opaque;
	const struct commit_job *j = b->commit_job;
	const struct restore_job *r = b->restore_job;

	memset(out, 0, sizeof(*out));
	out->commit = j != NULL;
	out->restore = r != NULL;
	out->restore_devs = r && !r->prepare;
	if (j)
		out->at = j->at;
	else if (r)
		out->at = r->at;
}

/* ---- accepting primaries ---- */

static struct rdb_backup *backup_new(struct rdb_daemon *d, const char *name)
{
	struct rdb_vm *vm = rdb_vm_new(d, name, RDB_ROLE_BACKUP);
	struct rdb_backup *b = calloc(1, sizeof(*b));

	if (!vm || !b) {
		free(b);
		rdb_vm_free(vm);
		return NULL;
	}
	vm->bak = b;
	vm->teardown = rdb_backup_teardown;
	b->vm = vm;
	b->d = d;
	b->fd = b->linger_fd = -1;
	b->host = (struct rdb_bakdev_host){
		.opaque = b,
		.d = d,
		.vm = vm,
		.run = &b->run,
		.link_out = dev_link_out,
		.want_write = dev_want_write,
		.vm_dir = dev_vm_dir,
		.fail = dev_fail,
		.tick_soon = dev_tick_soon,
		.owned = dev_owned,
	};
	rdb_replmark_init(&b->mark);
	b->host.mark = &b->mark;
	rdb_bakdevs_init(&b->devs, &b->host);
	/* (the order of the kinds' fields in status) */
	rdb_bakdevs_kind(&b->devs, &rdb_bak_nic_ops);
	rdb_bakdevs_kind(&b->devs, &rdb_bak_disk_ops);
	b->event_fd = -1;
	b->hv = rdb_vm_hv(vm);
	rdb_hv_restored_init(&b->rs);
	rdb_buf_init(&b->out);
	rdb_proto_decoder_init(&b->dec);
	rdb_stage_init(&b->st);
	rdb_buf_init(&b->event_in);
	return b;
}

static void pending_free(struct pending *pc, bool close_fd)
{
	rdb_evloop_del_fd(pc->d->loop, pc->fd);
	rdb_evloop_del_timer(pc->d->loop, pc->timer);
	if (close_fd)
		close(pc->fd);
	rdb_tlsrelay_put(pc->relay);
	rdb_proto_decoder_dispose(&pc->dec);
	free(pc);
}

static uint64_t on_pending_timeout(struct rdb_evloop *loop, uint64_t id,
				   void *opaque)
{
	struct pending *pc = opaque;
	char why[256];

	if (rdb_linksec_failure(pc->relay, why, sizeof(why)) == 0)
		LOG(WARN, "connection from %s: TLS handshake not finished "
		    "within %llu s: closed", pc->peer,
		    (unsigned long long)(HELLO_DEADLINE_NS / RDB_NS_PER_S));
	else
		LOG(WARN, "connection from %s sent no HELLO in time: closed",
		    pc->peer);
	pc->timer = 0;
	pending_free(pc, true);
	return 0;
}

static void refuse(struct pending *pc, const char *why)
{
	struct rdb_buf out;

	rdb_buf_init(&out);
	if (rdb_proto_put_hello_nak(&out, why) == 0)
		rdb_buf_write_all_fd(&out, pc->fd, rdb_now_ns() + RDB_NS_PER_S);
	rdb_buf_dispose(&out);
	LOG(WARN, "refused a primary (%s): %s", pc->peer, why);
	pending_free(pc, true);
}

static void on_pending(struct rdb_evloop *loop, int fd, unsigned ev,
		       void *opaque)
{
	struct pending *pc = opaque;
	struct rdb_daemon *d = pc->d;
	char name[65], why[300], from[80];
	struct rdb_backup *b;
	struct rdb_vm *old;
	struct rdb_frame f;
	uint32_t features;
	int rc, version;

	rc = rdb_proto_decoder_read_fd(&pc->dec, fd);
	if (rc < 0 && rc != -EAGAIN) {
		/* A failed handshake ends here: nothing of the peer's was read. */
		if (rdb_linksec_failure(pc->relay, why, sizeof(why)) < 0)
			LOG(WARN, "refused a connection from %s: %s", pc->peer, why);
		pending_free(pc, true);
		return;
	}
	rc = rdb_proto_decoder_next(&pc->dec, &f);
	if (rc == 0)
		return;
	/* Plaintext here (no relay), TLS there: say so. */
	if (rc < 0 && !pc->relay &&
	    rdb_linksec_looks_like_tls(pc->dec.in.data, pc->dec.in.len)) {
		refuse(pc, "the primary speaks TLS, it holds a link key; this "
		       "host runs with link_security = insecure");
		return;
	}
	if (rc < 0 || f.type != RDB_MSG_HELLO) {
		refuse(pc, rc < 0 ? rdb_proto_decoder_error(&pc->dec) :
		       "expected HELLO");
		return;
	}
	rc = rdb_msg_hello_parse(&f, name, sizeof(name));
	features = rdb_msg_hello_features(&f);	/* f dies with the decoder */
	version = rc == 0 ? rdb_msg_hello_version(&f) : 0;
	if (rc < 0) {
		refuse(pc, rc == -EPROTONOSUPPORT ?
		       "no common protocol version" : "malformed HELLO");
		return;
	}
	old = rdb_vm_find(d, name);
	/* A restored copy of the VM may run here (failed over, or failed
	 * after its QEMU started: the restore, its disk server): a new
	 * protection would recreate the RAM image that QEMU maps. */
	if (old && old->role == RDB_ROLE_BACKUP && old->bak &&
	    !old->bak->restore_job && old->bak->rs.proc.pid > 0 &&
	    !(old->bak->prepared && old->state != RDB_VM_FAILED_OVER &&
	      old->state != RDB_VM_FAILING_OVER) &&
	    rdb_hv_poll_exit(&old->bak->rs.proc, &(int){ 0 }) == 0) {
		snprintf(why, sizeof(why), "a restored copy of VM %s runs on this "
			 "host (QEMU pid %d, state %s): stop it before protecting "
			 "the VM here again", name, (int)old->bak->rs.proc.pid,
			 rdb_vm_state_name(old->state));
		refuse(pc, why);
		return;
	}
	/* A stale copy this host attached and fenced (the witness named
	 * the peer as the VM's owner): the owner now protects the VM to
	 * us, and the stale copy's disk and NIC give way. */
	if (old && old->role == RDB_ROLE_PRIMARY &&
	    (old->state == RDB_VM_FENCED || old->state == RDB_VM_MIGRATED)) {
		LOGVM(WARN, name, "the VM's owner %s protects it to this host: "
		      "the %s copy attached here is detached (its disk and "
		      "NIC released)", pc->peer, old->state == RDB_VM_MIGRATED ?
		      "handed-over" : "fenced stale");
		old->teardown(old);
		rdb_vm_free(old);
		old = NULL;
	}
	if (old && (old->role != RDB_ROLE_BACKUP ||
		    old->state == RDB_VM_FAILED_OVER ||
		    old->state == RDB_VM_FAILING_OVER ||
		    (old->bak && old->bak->fd >= 0))) {
		snprintf(why, sizeof(why), "VM %s is %s here as %s", name,
			 rdb_vm_state_name(old->state),
			 rdb_vm_role_name(old->role));
		refuse(pc, why);
		return;
	}
	if (old && old->bak && (old->bak->restore_job ||
				(old->bak->commit_job && rdb_now_ns() -
				 old->bak->commit_job->t0 > SLOW_COMMIT_NS))) {
		/* its teardown would wait for that thread on this loop, which
		 * serves every other VM (a disk step a second old may hang on
		 * its replica): the operator protects again once it ended */
		snprintf(why, sizeof(why), "VM %s's %s still runs here: protect "
			 "again once it ends (the backup's status shows it)", name,
			 old->bak->restore_job ? "restore" :
			 "last epoch's disk step, slow on its replica,");
		refuse(pc, why);
		return;
	}
	if (old) {
		/* A new protection of a VM whose link died: start afresh. */
		rdb_backup_teardown(old);
		rdb_vm_free(old);
	}
	/* This host backs the VM up now: a definition of it as this host's
	 * to run (vmdef.h, a copy it ran before) must not be re-adopted. */
	rdb_vmdef_forget(d->cfg.state_dir, name);
	b = backup_new(d, name);
	if (!b) {
		refuse(pc, "backup out of memory");
		return;
	}
	b->fd = fd;
	rdb_proto_decoder_move(&b->dec, &pc->dec);
	snprintf(from, sizeof(from), "%s", pc->peer);
	pending_free(pc, false);
	heard(b);
	/* Every page encoding we know of is granted if offered. */
	b->st.features = features & RDB_FEATURES_KNOWN;
	if (rdb_proto_put_hello_ack_version(&b->out, (unsigned)version,
					    b->st.features) < 0 ||
	    rdb_evloop_add_fd(d->loop, fd, RDB_EV_READ | RDB_EV_WRITE, on_link, b) < 0 ||
	    rdb_evloop_add_timer(d->loop, (uint64_t)d->cfg.heartbeat_ms * RDB_NS_PER_MS,
				 on_heartbeat, b, &b->hb_timer) < 0) {
		link_lost(b, "cannot set up the replication link");
		return;
	}
	LOGVM(INFO, name, "primary %s connected (%s, protocol v%d): backing "
	      "up%s%s%s%s%s", from, rdb_linksec_describe(d->linksec), version,
	      b->st.features & RDB_FEATURE_XORRLE ? ", XOR+RLE deltas" : "",
	      b->st.features & RDB_FEATURE_LZ4 ? ", LZ4" : "",
	      b->st.features & RDB_FEATURE_DISKREF ? ", disk references" : "",
	      b->st.features & RDB_FEATURE_VERIFY ? ", page verification" : "",
	      b->st.features & RDB_FEATURE_FLOWS ? ", flow records" : "");
	/* Frames that came with the HELLO are already buffered. */
	on_link(loop, fd, RDB_EV_READ, b);
}

/* "10.0.0.1:41234": who connected, for the log. */
static void peer_name(int fd, char *buf, size_t len)
{
	struct sockaddr_storage sa;
	socklen_t sl = sizeof(sa);
	char host[64], port[16];

	if (getpeername(fd, (struct sockaddr *)&sa, &sl) < 0 ||
	    getnameinfo((struct sockaddr *)&sa, sl, host, sizeof(host), port,
			sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		snprintf(buf, len, "an unknown address");
	else
		snprintf(buf, len, sa.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s",
			 host, port);
}

static void on_accept(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct rdb_daemon *d = opaque;
	struct pending *pc;
	int c = rdb_sock_accept(fd), rc;

	if (c < 0)
		return;
	pc = calloc(1, sizeof(*pc));
	if (!pc) {
		close(c);
		return;
	}
	pc->d = d;
	peer_name(c, pc->peer, sizeof(pc->peer));
	/* With a link key the handshake runs in a relay thread, bounded
	 * like the HELLO: a peer that says nothing holds no one up. */
	rc = rdb_linksec_open(d->linksec, RDB_LINK_ACCEPT, c,
			      rdb_now_ns() + HELLO_DEADLINE_NS, pc->peer,
			      &pc->fd, &pc->relay);
	if (rc < 0) {
		LOG(WARN, "connection from %s: %s: closed", pc->peer, strerror(-rc));
		free(pc);
		return;
	}
	rdb_proto_decoder_init(&pc->dec);
	if (rdb_evloop_add_fd(loop, pc->fd, RDB_EV_READ, on_pending, pc) < 0 ||
	    rdb_evloop_add_timer(loop, HELLO_DEADLINE_NS, on_pending_timeout,
				 pc, &pc->timer) < 0)
		pending_free(pc, true);
}

int rdb_backup_listen(struct rdb_daemon *d)
{
	int rc = rdb_sock_listen_tcp(d->cfg.listen, &d->repl_listen_fd);

	if (rc < 0) {
		LOG(ERROR, "cannot listen for primaries on %s: %s",
		    d->cfg.listen, strerror(-rc));
		return rc;
	}
	LOG(INFO, "listening for primaries on %s", d->cfg.listen);
	return rdb_evloop_add_fd(d->loop, d->repl_listen_fd, RDB_EV_READ,
				 on_accept, d);
}

void rdb_backup_stop_listening(struct rdb_daemon *d)
{
	if (d->repl_listen_fd >= 0) {
		rdb_evloop_del_fd(d->loop, d->repl_listen_fd);
		close(d->repl_listen_fd);
		d->repl_listen_fd = -1;
	}
}

void rdb_backup_teardown(struct rdb_vm *vm)
{
	struct rdb_backup *b = vm->bak;
	struct rdb_evloop *loop;

	if (!b)
		return;
	loop = b->d->loop;
	/* a failover waiting for the threads below goes no further */
	if (fo_waiting(b))
		fo_enter(b, BAK_FO_NONE);
	if (b->fo_wait_timer)
		rdb_evloop_del_timer(loop, b->fo_wait_timer);
	b->fo_wait_timer = 0;
	commit_settle(b);
	restore_wait(b);
	decide_end(b);
	/* a QEMU prepared for a handover that did not come: its guest
	 * never ran, it goes with the backup role */
	if (b->prepared && vm->state != RDB_VM_FAILED_OVER &&
	    vm->state != RDB_VM_FAILING_OVER)
		unprepare(b);
	if (b->hb_timer)
		rdb_evloop_del_timer(loop, b->hb_timer);
	if (b->linger_timer)
		rdb_evloop_del_timer(loop, b->linger_timer);
	close_link(b);
	rdb_bakdevs_close(&b->devs);
	/* A restored guest is the VM now: it outlives the daemon's teardown. */
	rdb_hv_restored_dispose(b->hv, &b->rs, false);
	rdb_stage_dispose(&b->st);
	/* The replica's server, like the restored QEMU, outlives us. */
	if (b->event_fd >= 0) {
		rdb_evloop_del_fd(loop, b->event_fd);
		close(b->event_fd);
	}
	if (b->dev_timer)
		rdb_evloop_del_timer(loop, b->dev_timer);
	rdb_buf_dispose(&b->event_in);
	rdb_bakdevs_free(&b->devs);
	/* (what it says stays: whole at the last epoch, or not) */
	rdb_replmark_close(&b->mark);
	/* (both safe on what was never opened, or opened in part) */
	rdb_ramimage_close(&b->img);
	rdb_vm_setup_dispose(&b->setup);
	rdb_proto_decoder_dispose(&b->dec);
	rdb_buf_dispose(&b->out);
	ho_out_reset(b, true);
	free(b);
	vm->bak = NULL;
}

int rdb_backup_hand_over(struct rdb_vm *vm, const struct rdb_nic_dst *dst,
			 unsigned ndst, struct rdb_handover *h, char *err,
			 size_t errlen)
{
	struct rdb_backup *b = vm->bak;
	char why[200];
	int status, rc;

	memset(h, 0, sizeof(*h));
	h->event_fd = -1;
	rdb_hv_proc_init(&h->qemu);
	if (b && !b->hv->restored_reprotect) {
		snprintf(err, errlen, "VM %s: a restored %s guest cannot be "
			 "protected again from this host (not supported yet)",
			 vm->name, b->hv->name);
		return -EOPNOTSUPP;
	}
	if (!b || vm->state != RDB_VM_FAILED_OVER || b->restore_job ||
	    b->rs.proc.pid <= 0 || rdb_hv_poll_exit(&b->rs.proc, &status) != 0) {
		snprintf(err, errlen, "VM %s is %s here, not a restored VM that "
			 "runs", vm->name, rdb_vm_state_name(vm->state));
		return -EINVAL;
	}
	if (rdb_bakdevs_pending(&b->devs, why, sizeof(why))) {
		snprintf(err, errlen, "VM %s: %s: try again in a moment",
			 vm->name, why);
		return -EAGAIN;
	}
	/* The devices first: the only step that can fail (a NIC moving into
	 * the primary's), and nothing else is undone if it does (those
	 * handed over already come back). */
	rc = rdb_bakdevs_hand_over(&b->devs, dst, ndst, h, err, errlen);
	if (rc < 0)
		return rc;
	h->qemu = b->rs.proc;
	rdb_hv_proc_init(&b->rs.proc);
	if (b->event_fd >= 0) {
		rdb_evloop_del_fd(b->d->loop, b->event_fd);
		h->event_fd = b->event_fd;
		b->event_fd = -1;
	}
	h->generation = b->generation;
	h->epoch = vm->st.committed_epoch;
	/* QEMU holds the guest's disk requests (reconnect-delay) until the
	 * primary's disk server takes the socket over. */
	rdb_bakdevs_unserve(&b->devs);
	rdb_hv_restored_dispose(b->hv, &b->rs, false);
	rdb_backup_teardown(vm);
	return 0;
}

void rdb_backup_housekeeping(struct rdb_vm *vm)
{
	struct rdb_backup *b = vm->bak;
	int status = 0;

	if (!b || b->restore_job || b->rs.proc.pid <= 0)
		return;
	if (b->prepared && vm->state != RDB_VM_FAILED_OVER &&
	    vm->state != RDB_VM_FAILING_OVER) {
		if (rdb_hv_poll_exit(&b->rs.proc, &status) == 1) {
			LOGVM(WARN, vm->name, "the QEMU prepared for a handover "
			      "exited (status 0x%x): a failover or handover "
			      "starts another", status);
			unprepare(b);
		}
		return;
	}
	if (rdb_hv_poll_exit(&b->rs.proc, &status) == 1) {
		rdb_vm_set_state(vm, RDB_VM_FAILED, "the restored %s "
				 "(status 0x%x; see %s/%s/qemu.log)",
				 b->hv->restored_ended, status,
				 b->d->cfg.state_dir, vm->name);
		rdb_hv_restored_dispose(b->hv, &b->rs, false);
		rdb_bakdevs_unserve(&b->devs);
		return;
	}
	rdb_bakdevs_poll(&b->devs);
}

void rdb_backup_metrics(const struct rdb_vm *vm, struct rdb_prom *p)
{
	const struct rdb_backup *b = vm->bak;
	const enum rdb_prom_type C = RDB_PROM_COUNTER, G = RDB_PROM_GAUGE;

	if (!b)
		return;
	rdb_prom_add(p, "remusdb_peer_link_up", G,
		     "1 while the replication link from the primary is connected.",
		     b->fd >= 0, NULL);
	rdb_prom_add(p, "remusdb_peer_last_heard_seconds", G,
		     "Seconds since the primary was last heard on the replication link.",
		     (double)(rdb_now_ns() - b->peer.heard_ns) / RDB_NS_PER_S, NULL);
	if (b->st.features & RDB_FEATURE_DISKREF)
		rdb_prom_add(p, "remusdb_diskref_pages_verified_total", C,
			     "Disk-reference pages checked against the replica.",
			     (double)b->st.diskrefs, NULL);
	rdb_bakdevs_metrics(&b->devs, p);
}

void rdb_backup_status(const struct rdb_vm *vm, json_t *o)
{
	const struct rdb_backup *b = vm->bak;

	if (!b)
		return;
	json_object_set_new(o, "link_up", json_boolean(b->fd >= 0));
	json_object_set_new(o, "last_heard_ms", json_integer((json_int_t)
			    ((rdb_now_ns() - b->peer.heard_ns) / RDB_NS_PER_MS)));
	json_object_set_new(o, "qemu_pid", json_integer(b->rs.proc.pid));
	/* whose QEMU runs the restored VM: libvirt's domain or remusdbd's */
	if (b->rs.proc.pid > 0)
		json_object_set_new(o, "restored_by", json_string(
			b->rs.via_libvirt ? "libvirt" : "remusdbd"));
	json_object_set_new(o, "mode", json_string(vm->cfg.mode ? vm->cfg.mode : "plain"));
	if (b->failover_t0)
		json_object_set_new(o, "last_failover", json_pack(
			"{s:b, s:f, s:f, s:f, s:f, s:I}",
			"planned", b->ho_phase == BAK_HO_PLANNED,
			"primary_silent_ms", (double)b->fo_silent_ns / RDB_NS_PER_MS,
			"decision_ms", (double)b->fo_decide_ns / RDB_NS_PER_MS,
			"restore_ms", (double)vm->st.failover_ns / RDB_NS_PER_MS,
			"silent_to_running_ms", vm->st.failover_ns ?
				(double)(b->fo_silent_ns + vm->st.failover_ns) / RDB_NS_PER_MS : -1.0,
			"epoch", (json_int_t)vm->st.committed_epoch));
	if (b->st.features & RDB_FEATURE_DISKREF) {
		json_t *by = json_array();

		json_object_set_new(o, "diskref_pages_verified",
				    json_integer((json_int_t)b->st.diskrefs));
		for (unsigned k = 0; by && k < b->st.ndisks; k++)
			json_array_append_new(by, json_integer((json_int_t)b->st.diskrefs_dev[k]));
		if (by)
			json_object_set_new(o, "diskref_pages_verified_by_disk", by);
	}
	if (b->st.features & RDB_FEATURE_VERIFY)
		json_object_set_new(o, "epochs_verified",
				    json_integer((json_int_t)b->st.verified));
	/* the NICs' (guest_nic_connected, nics, flows), the disks' (disk,
	 * disks) */
	rdb_bakdevs_status(&b->devs, o);
}

int rdb_backup_inject(struct rdb_vm *vm, const char *fault)
{
	if (!vm->bak)
		return -ENOENT;
	if (strcmp(fault, "restore-fail") == 0) {
		vm->bak->fault_restore_fail = true;
		return 0;
	}
	if (strcmp(fault, "restore-fail-late") == 0) {
		vm->bak->fault_restore_fail_late = true;
		return 0;
	}
	if (strcmp(fault, "handover-cut") == 0) {
		vm->bak->fault_handover_cut = true;
		return 0;
	}
	if (strcmp(fault, "slow-replica") == 0 && vm->bak->st.ndisks) {
		vm->bak->fault_slow_replica = true;
		return 0;
	}
	/* the next epoch with a write to replay: its first write reaches
	 * a replica, then remusdbd is killed (SIGKILL) in the disk step:
	 * torn replicas, their marker at applying */
	if (strcmp(fault, "kill-in-apply") == 0 && vm->bak->st.ndisks) {
		vm->bak->fault_kill_in_apply = true;
		return 0;
	}
	/* the next epoch with a change on the VM's last disk fails its
	 * replay at that disk's first record, as a replica's I/O error
	 * would (diskbuf.h): the disks before it are written by then */
	if (strcmp(fault, "replica-eio") == 0 && vm->bak->st.ndisks) {
		struct rdb_stage *st = &vm->bak->st;

		commit_settle(vm->bak);	/* its thread owns the replicas */
		st->disks[st->ndisks - 1]->fail_at = 1;
		return 0;
	}
	return -EINVAL;
}

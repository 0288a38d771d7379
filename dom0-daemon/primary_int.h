/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The primary role's private parts, shared by primary.c (protection, the
 * checkpoint stream, network, the link), primary_send.c (framing epochs
 * for the backup, compression, capture) and primary_status.c.  Nothing
 * outside these files includes it.
 */
#ifndef RDB_PRIMARY_INT_H
#define RDB_PRIMARY_INT_H

#include "clock.h"
#include "daemon.h"
#include "disk.h"
#include "encpool.h"
#include "fileio.h"
#include "flowbuf.h"
#include "log.h"
#include "netbuf.h"
#include "netstream.h"
#include "nic.h"
#include "proto.h"
#include "sockutil.h"
#include "vm.h"
#include "watchdog.h"
#include "witness.h"
#include "remusdb.h"
#include "hv.h"
#include "primary.h"
#include "primary_dev.h"

#include <stdbool.h>
#include <stdint.h>

/* A PAGES message carries at most this much page payload. */
#define PAGES_BATCH_BYTES (1u << 20)
/* ... and of at most this many pages: 1 MiB of compressed records can be
 * most of a guest's RAM (zero or LZ4 pages of tens of bytes), which the
 * backup applies in one go between two turns of its loop (backup.c,
 * LINK_SLICE_NS): 4096 pages into a fresh image take ~35 ms there. */
#define PAGES_BATCH_PAGES 4096u
_Static_assert(PAGES_BATCH_PAGES <= RDB_PROTO_MAX_FRAME_PAGES,
	       "a PAGES frame the backup would refuse");
#define PEER_QUEUE_MAX RDB_PRI_QUEUE_MAX	/* primary_dev.h */
/* Outside a pause, QEMU's stream is not read while this much waits for
 * the backup: the initial copy (and checkpoints after it) slow down to
 * the link's speed instead of filling our memory. */
#define PEER_HIGH_WATER (64u << 20)
#define PEER_LOW_WATER RDB_PRI_LOW_WATER
/* ... and while the initial state is taken, far less: when QEMU stops
 * the guest for the last of it, the guest's output waits for all that
 * is queued to reach the backup (up to PEER_HIGH_WATER: 0.3-1 s of
 * the link here).  Held to this, QEMU runs at the link's pace, its
 * estimate of the bandwidth is the link's, and the stop finds little
 * queued. */
#define INITIAL_HIGH_WATER (4u << 20)
#define INITIAL_LOW_WATER (2u << 20)
#define SETUP_DEADLINE_NS (5 * RDB_NS_PER_S)
/* Protection drops after this many pauses over checkpoint_deadline_ms
 * within PAUSE_OVERRUN_WINDOW_NS, or one of PAUSE_OVERRUN_FACTOR times
 * it (primary.c, pause_overran). */
#define PAUSE_OVERRUNS_MAX 3
#define PAUSE_OVERRUN_WINDOW_NS (30 * RDB_NS_PER_S)
#define PAUSE_OVERRUN_FACTOR 4
/* From the end of the initial state to the first checkpoint. */
#define COLO_START_DEADLINE_NS (10 * RDB_NS_PER_S)
/* Peer silence tolerated while the initial state is copied. */
#define INITIAL_SYNC_SILENCE_NS (10 * RDB_NS_PER_S)
/* The page encodings among the features (the rest: FLOWS). */
#define CODEC_FEATURES (RDB_FEATURE_XORRLE | RDB_FEATURE_LZ4)
/* What the encoder pool runs for: compression, disk read tracking. */
#define POOL_FEATURES (CODEC_FEATURES | RDB_FEATURE_DISKREF)
/* Handed to the pool too: the page digests of VERIFY (a test mode). */
#define POOL_ALLOWED (POOL_FEATURES | RDB_FEATURE_VERIFY)

struct rdb_primary;

/*
 * What the primary's parts (primary_decide.c, primary_migrate.c,
 * primary_send.c) ask of its lifecycle, which primary.c owns: through
 * this table, set once by primary.c, never by name.  The parts sit below
 * primary.c; nothing they define calls back into it, so the files form
 * no circle (tests/file-cycles.sh).
 */
struct rdb_pri_life {
	/* protection ends (why: for the log and status) */
	void (*drop_protection)(struct rdb_primary *p, const char *why);
	/* what a protection left is cleaned up: false if the VM is gone */
	bool (*protection_cleanup)(struct rdb_primary *p);
	void (*close_peer)(struct rdb_primary *p);
	/* the guest stopped for the last epoch's state runs again */
	int (*resume_after_epoch)(struct rdb_primary *p);
	/* the encoders finished an epoch (on the loop, after framing it) */
	void (*encoded)(struct rdb_primary *p);
	/* the witness registered the protection: it starts; or it could
	 * not, and the VM is left unprotected */
	void (*protect_registered)(struct rdb_primary *p);
	void (*protect_failed)(struct rdb_primary *p, const char *err);
	/* protect again as configured (the VM's own config, as the
	 * operator's protect of it would): 0, or why not in err */
	int (*protect)(struct rdb_primary *p, char *err, size_t errlen);
};

/*
 * A planned switchover (primary_migrate.c), its phases and their legal
 * changes in one table there (rdb_pri_ho_enter):
 *   none -> preparing (migrate) -> wanted (the backup prepared, or 10 s
 *   passed) -> sent (at a checkpoint: HANDOVER) -> migrated (TAKEN) |
 *   none (REFUSED, or the link lost and the witness to decide) | stopped
 *   (the link lost, no witness: the guest kept stopped) -> none (operator
 *   unprotect --force); preparing and wanted -> none (protection ends).
 */
/*
 * The failover decision's phase (primary_decide.c), its legal changes in
 * one table there (rdb_pri_dec_enter):
 *   none -> deciding (protection dropped, the peer lost: every output
 *   frame held) -> paused (no decision within hold_bound_ms: the guest
 *   paused too); deciding, paused -> none (won: the output leaves; or
 *   cancelled) | fenced (lost: the guest stopped, its output dropped);
 *   none -> fenced (the witness names another owner at attach or
 *   protect; a switchover's end); fenced -> none (operator unprotect
 *   --force).
 */
enum rdb_dec_phase {
	RDB_DEC_NONE,
	RDB_DEC_DECIDING,
	RDB_DEC_PAUSED,
	RDB_DEC_FENCED,
	RDB_DEC__MAX
};

/*
 * This host's right to run the VM (primary_decide.c), its phases and
 * their legal changes in one table there (rdb_pri_own_enter).  With a
 * witness, a VM attached or protected here (not restored here) may be a
 * copy that lost: its output is held until the witness says who owns it
 * (held); a protection registers its generation there first
 * (registering), and that answer settles a hold too:
 *   free -> held (attach, or protect of a VM this daemon never ran) |
 *   registering (protect); held -> free (the witness says no other host
 *   owns it, or the operator lets it go; or another host does: the
 *   decision's fenced) | held+registering (protect); registering -> free
 *   (registered, refused, failed or cancelled); held+registering -> free
 *   (registered: the output leaves; refused: fenced) | held (failed or
 *   cancelled: the attach check asks on).
 */
enum rdb_own_phase {
	RDB_OWN_FREE,
	RDB_OWN_HELD,
	RDB_OWN_REGISTERING,
	RDB_OWN_HELD_REGISTERING,
	RDB_OWN__MAX
};

enum rdb_ho_phase {
	RDB_HO_NONE,
	RDB_HO_PREPARING,	/* migrate: the backup prepares */
	RDB_HO_WANTED,		/* at the next checkpoint */
	RDB_HO_SENT,		/* HANDOVER sent: the guest stays stopped */
	RDB_HO_STOPPED,		/* link lost in it: kept stopped (FENCED) */
	RDB_HO_MIGRATED,	/* the backup runs it; QEMU killed here */
	RDB_HO__MAX
};

struct rdb_pri_handover {
	enum rdb_ho_phase phase;
	uint64_t epoch, start_ns, sent_ns;
	/* by NIC: output handed over (OUTPUT format), and what came for
	 * the guest after it stopped (INPUT format); counts of all NICs */
	struct rdb_buf frames[RDB_NICS_MAX];
	uint64_t nframes;
	struct rdb_buf input[RDB_NICS_MAX];
	uint64_t ninput;
};

struct rdb_primary {
	const struct rdb_pri_life *life;	/* primary.c's */
	struct rdb_vm *vm;
	struct rdb_daemon *d;
	pid_t qemu_pid;			/* from QMP's SO_PEERCRED; 0: unknown */
	/* The pipeline's state, as the devices read it (ckdev.h): active
	 * = protection runs (disk copy, then COLO): disk changes are
	 * replicated, output is held (from the initial state's stop on). */
	struct rdb_ckpt ck;
	/* Protection runs, and the guest has not stopped for the initial
	 * state yet: its output leaves at once and its disk's flushes are
	 * synced here.  Whatever the guest did so far is in the initial
	 * state; before that state is committed no failover can happen. */
	bool initial_open;
	bool protect_started;		/* protect was asked and not undone */
	/* re-adopted at start as protected (vmdef.h): protect once the
	 * witness has said this host owns the VM (rdb_primary_readopt_tick) */
	bool readopt_protect;
	/* protected again on its own after the backup's remusdbd went away
	 * (primary_auto.c); gone: the drop under way is that */
	struct rdb_pri_auto {
		bool pending;		/* attempts to come, within the window */
		bool attempting;	/* the protection under way is one */
		bool gone;		/* set by the link's end, read by drop */
		bool refused;		/* the attempt's backup said no */
		unsigned attempts;
		uint64_t since_ns, next_ns;
		char why[200];		/* what dropped protection */
		/* counters: protected again, attempts that failed, windows
		 * given up, refusals */
		uint64_t protected, failed, gave_up, refusals;
	} arp;

	/* The checkpoint devices, in the pipeline's order (disks, then
	 * NICs), and the same by kind; devs_pending: devices whose initial
	 * work (the disk copy) is not done, before checkpoints start. */
	struct rdb_ckdevs devs;
	struct rdb_ckdev_host dev_host;
	struct rdb_pri_disk *disks[RDB_CKDEV_MAX];
	struct rdb_pri_nic *nics[RDB_CKDEV_MAX];
	unsigned ndisks, nnics, devs_pending;
	bool devs_starting;		/* within rdb_ckdevs_start */
	unsigned devs_ready_early;	/* ready before it returned */
	bool nic_pending;	/* attached before its domain: NIC relayed at protect */
	/* a restored VM protected again from here: its QEMU is ours to
	 * reap, its failover event port stays open (reprotect) */
	struct rdb_hv_proc restored_qemu;
	int event_fd;
	/* between rdb_primary_restored_begin and _adopt (role.c): the VM
	 * file it will run with, its on_peer_loss */
	struct rdb_vm_config adopt_cfg;
	enum rdb_peer_loss adopt_peer_loss;

	/* the hypervisor (QEMU) */
	const struct rdb_hv_ops *hv;	/* the VM's backend, at protect */
	struct rdb_hv_ctl *ctl;		/* its control, NULL: not open */
	struct colo_job *colo_job;	/* starting COLO: see start_colo */
	int mig_listen_fd, mig_fd;
	bool mig_throttled;		/* not reading: see PEER_HIGH_WATER */
	uint64_t mig_more_timer;	/* the stream's parser has work left */
	/* the stream's last bytes, and its last release from throttling:
	 * no checkpoint after the initial state counts from the later */
	uint64_t mig_rx_ns, mig_unthrottled_ns;
	bool throttle_logged;
	char mig_path[108];
	struct rdb_hv_stream *stream;	/* the checkpoint stream's parser */

	/* backup */
	struct connect_job *connect_job;	/* connecting: see connect_start */
	int peer_fd;
	struct rdb_buf out;
	struct rdb_proto_decoder dec;
	struct rdb_peer_det peer;	/* the backup's silence (watchdog.h) */
	uint64_t hb_seq;

	/* the checkpoint in flight */
	uint64_t ckpt_start_ns;
	uint64_t pause_work_ns;		/* our callbacks' time in this pause */
	/* the last pauses over checkpoint_deadline_ms, newest first: see
	 * pause_overran; overrun_why set: protection drops at the tick */
	uint64_t overrun_ns[PAUSE_OVERRUNS_MAX];
	char overrun_why[160];
	uint64_t epoch_pages, epoch_bytes;	/* page records, their bodies */
	/*
	 * Page records of the epoch being received, in wire format, and the
	 * runs of consecutive records of one block (each run becomes PAGES
	 * messages).  In a pause, records only accumulate here; framing them
	 * waits until the guest runs.  The initial copy is streamed instead.
	 */
	struct rdb_buf batch;
	struct rdb_page_run *runs;
	size_t nruns, cap_runs;
	uint64_t batch_epoch;
	uint8_t *config_section;
	size_t config_len;

	uint64_t hb_timer, deadline_timer;
	bool fault_stop_in_pause;
	bool fault_stop_in_initial;	/* before taking epoch 0 (QEMU waits) */
	char mig_err[300];		/* why the stream's read failed */
	bool fault_slow_checkpoint;	/* the next pause lasts */
	uint64_t fault_slow_pause_ns;	/* ... this long */
	uint64_t slow_timer, slow_epoch;	/* ... resumed from this timer */
	uint64_t fault_initial_busy_ns;	/* ... after working (and beating) this
					 * long since QEMU stopped the guest */
	/* QEMU stopped the guest for the last of the initial state then
	 * (0: not yet, or its stream does not show it) */
	uint64_t initial_stop_ns;
	size_t initial_stop_queued;	/* for the backup, at that stop */

	/*
	 * Compression (features granted by the backup): epoch N's records
	 * are handed to the encoder pool once the guest runs again; until
	 * the pool is done, frames of later epochs (the guest's disk writes)
	 * wait in `held` so that the backup still sees N whole before N+1.
	 */
	struct rdb_encpool *pool;
	struct rdb_readidx *ridx;	/* disk read tracking (DISKREF granted) */
	/* its maps of the tracked disks' images (pagecodec.c) */
	const void *rt_map[RDB_DISKS_MAX];
	uint64_t rt_map_len[RDB_DISKS_MAX];
	unsigned rt_ndisks;		/* disks tracked: 0..rt_ndisks-1 */
	int pool_fd;			/* eventfd: the pool finished an epoch */
	bool encoding;
	uint64_t enc_epoch;
	struct rdb_buf enc_batch, held;
	struct rdb_page_run *enc_runs;
	size_t enc_nruns, enc_cap_runs;
	uint8_t *enc_dev;
	size_t enc_dev_len, enc_dev_cap;
	uint64_t enc_disk_recs, enc_disk_bytes;
	/* QEMU asked for checkpoint stop_epoch while the pool still encoded
	 * the last one: its STOP waits for the pool (the guest runs, the
	 * loop does not wait), since stop_asked_ns */
	bool stop_waits;
	uint64_t stop_epoch, stop_asked_ns;

	/*
	 * The failover decision (primary_decide.c): this protection's
	 * generation and the value registered for it at the witness; a
	 * decision under way holds every output frame.
	 */
	uint64_t generation;
	char registered[RDB_WITNESS_VALUE_MAX];
	/* protect waits for the witness; output held until it says who
	 * owns the VM (below) */
	enum rdb_own_phase own_phase;
	char owner_reason[32];		/* how it came: "attached", "protect" */
	uint64_t attach_timer;		/* the check's next try (no answer yet) */
	unsigned attach_attempts;
	enum rdb_dec_phase dec_phase;	/* the decision's (below) */
	bool unprotect_pending;		/* operator unprotect waits on it */
	uint64_t decide_start_ns, decide_timer, retry_at_ns;
	int64_t witness_req;
	unsigned decide_attempts;
	char decide_why[200];
	char witness_error[256];
	/* the guest stopped or resumed without blocking (primary_decide.c) */
	bool guest_want_stopped, guest_confirmed;
	uint64_t guest_cmd_ns, guest_want_ns, guest_timer;

	struct rdb_pri_handover ho;	/* a planned switchover's */

	/* capture mode: see rdb_primary_capture */
	int cap_fd;
	uint64_t cap_left;
};

/* primary.c (the parts call these through p->life) */
void rdb_pri_drop_protection(struct rdb_primary *p, const char *why);

/* primary_auto.c: protecting again on its own after the backup's
 * remusdbd went away (auto_reprotect_s).  arm: a drop whose cause was
 * that (the link closed by the backup's host); cancel: any other drop,
 * the operator's unprotect; protected: the initial state committed;
 * failed: a protection that did not start, returns true when another
 * attempt is scheduled (the VM stays degraded, next_in_s says when). */
void rdb_pri_auto_arm(struct rdb_primary *p, const char *why);
void rdb_pri_auto_cancel(struct rdb_primary *p, const char *why);
void rdb_pri_auto_protected(struct rdb_primary *p);
bool rdb_pri_auto_failed(struct rdb_primary *p, const char *err,
			 double *next_in_s);

/* primary_output.c */
/* Every NIC's held output of epochs <= upto leaves. */
void rdb_pri_release_output(struct rdb_primary *p, uint64_t upto);
/* Every NIC's held output is dropped: the number of frames. */
uint64_t rdb_pri_discard_output(struct rdb_primary *p);
uint64_t rdb_pri_held_frames(const struct rdb_primary *p);
uint64_t rdb_pri_held_bytes(const struct rdb_primary *p);

/* primary.c (the parts call these through p->life) */
/* The witness registered this protection: it starts (connects to the
 * backup...); or it could not, and the VM is left unprotected. */
void rdb_pri_protect_registered(struct rdb_primary *p);
void rdb_pri_protect_failed(struct rdb_primary *p, const char *err);
bool rdb_pri_protection_cleanup(struct rdb_primary *p);

/* primary_decide.c */
void rdb_pri_decide_start(struct rdb_primary *p, const char *why);
void rdb_pri_decided_run(struct rdb_primary *p, const char *how);
void rdb_pri_decide_cancel(struct rdb_primary *p);
int rdb_pri_register(struct rdb_primary *p);
void rdb_pri_register_cancel(struct rdb_primary *p);
/* This host's right to run the VM is not known: its output is held
 * from now on (with a witness; without one, nothing happens).  reason:
 * how the VM came here, for status. */
void rdb_pri_owner_hold(struct rdb_primary *p, const char *reason);
/* Asks the witness who owns the held VM (and again until it answers),
 * unless a registration is under way (its answer is the check). */
void rdb_pri_owner_check(struct rdb_primary *p);
/* Stops asking; the output stays held. */
void rdb_pri_owner_check_pause(struct rdb_primary *p);
/* The operator's word: the held output leaves, nothing more is asked. */
void rdb_pri_owner_let_go(struct rdb_primary *p, const char *why);
void rdb_pri_guest_control_stop(struct rdb_primary *p);

/* primary_send.c */
/* The link may be written: not in a checkpoint pause but a long one. */
bool rdb_pri_may_send(const struct rdb_primary *p);
void rdb_pri_peer_want_write(struct rdb_primary *p);
int rdb_pri_peer_flush(struct rdb_primary *p);
int rdb_pri_batch_flush(struct rdb_primary *p);
struct rdb_buf *rdb_pri_epoch_out(struct rdb_primary *p);
int rdb_pri_submit_epoch(struct rdb_primary *p, uint64_t epoch,
			 const uint8_t *dev, size_t len);
int rdb_pri_start_pool(struct rdb_primary *p, uint64_t ram_bytes);
void rdb_pri_stop_pool(struct rdb_primary *p);
void rdb_pri_capture_stop(struct rdb_primary *p, const char *why);
void rdb_pri_capture_epoch(struct rdb_primary *p, uint64_t epoch);

/* primary.c (the parts call these through p->life) */
void rdb_pri_close_peer(struct rdb_primary *p);
/* The guest stopped after the last epoch's state was taken runs again
 * (COLO's RECEIVED + LOADED). */
int rdb_pri_resume_after_epoch(struct rdb_primary *p);

/* primary_migrate.c: a planned switchover */
/* True: epoch is the handover's (the guest stays stopped after it). */
/* The decision's phase changes to `to`, by its table (primary_decide.c);
 * one the table does not list is logged as a bug (and made). */
void rdb_pri_dec_enter(struct rdb_primary *p, enum rdb_dec_phase to);
void rdb_pri_own_enter(struct rdb_primary *p, enum rdb_own_phase to);
/* Output held until the witness says who owns the VM; a registration at
 * the witness under way. */
static inline bool rdb_pri_owner_held(const struct rdb_primary *p)
{
	return p->own_phase == RDB_OWN_HELD ||
	       p->own_phase == RDB_OWN_HELD_REGISTERING;
}
static inline bool rdb_pri_registering(const struct rdb_primary *p)
{
	return p->own_phase == RDB_OWN_REGISTERING ||
	       p->own_phase == RDB_OWN_HELD_REGISTERING;
}
/* Deciding (output held, maybe the guest paused); fenced (this copy lost:
 * it emits nothing). */
static inline bool rdb_pri_deciding(const struct rdb_primary *p)
{
	return p->dec_phase == RDB_DEC_DECIDING || p->dec_phase == RDB_DEC_PAUSED;
}
static inline bool rdb_pri_fenced(const struct rdb_primary *p)
{
	return p->dec_phase == RDB_DEC_FENCED;
}
/* The switchover's phase changes to `to`, by its table; one the table
 * does not list is logged as a bug (and made). */
void rdb_pri_ho_enter(struct rdb_primary *p, enum rdb_ho_phase to);
bool rdb_pri_handover_at(struct rdb_primary *p, uint64_t epoch);
/* HANDOVER(request) behind that epoch's frames. */
int rdb_pri_handover_queue(struct rdb_primary *p);
void rdb_pri_handover_answer(struct rdb_primary *p, const struct rdb_frame *f);
/* Protection is being dropped: true if a handover in flight took it
 * over (the guest kept stopped); false: drop on as usual. */
bool rdb_pri_handover_lost(struct rdb_primary *p, const char *why);
void rdb_pri_handover_tick(struct rdb_primary *p, uint64_t now);
/* A frame for the guest while it is stopped for a handover: kept for the
 * host that takes the VM (true), or not handover time (false). */
bool rdb_pri_handover_input(struct rdb_primary *p, unsigned nic,
			    const uint8_t *frame, size_t len);

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A protected VM as remusdbd sees it: its role on this host, its state,
 * and the numbers an operator reads at 3 a.m.
 *
 * States (both roles):
 *
 *   PROTECTING ──initial sync committed──► PROTECTED
 *   PROTECTED  ──backup lost / deadline / daemon stall──► DEGRADED (primary)
 *   PROTECTED  ──primary silent > failover timeout──► FAILING_OVER ──► FAILED_OVER (backup)
 *   PROTECTED  ──peer lost (on_peer_loss = witness | manual)──► DECIDING
 *   DECIDING   ──won──► DEGRADED (primary) / FAILING_OVER (backup)
 *   DECIDING   ──lost──► FENCED (primary: guest stopped) / DEGRADED (backup)
 *   PROTECTED  ──operator migrate──► MIGRATING (primary: guest stopped
 *              after its last epoch) ──backup took it──► MIGRATED, or
 *              ──refused──► PROTECTED; the backup goes FAILING_OVER ──►
 *              FAILED_OVER as for a failover, from that epoch
 *   any        ──operator unprotect──► UNPROTECTED
 *   any        ──unrecoverable error──► FAILED
 *
 * Every transition goes through rdb_vm_set_state(): it is logged with the
 * VM's name and the reason, and counted per target state.
 */
#ifndef RDB_VM_H
#define RDB_VM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "config.h"
#include "hv.h"
#include "pagecodec.h"
#include "prom.h"

enum rdb_vm_role {
	RDB_ROLE_PRIMARY,
	RDB_ROLE_BACKUP,
	RDB_ROLE__MAX
};

enum rdb_vm_state {
	RDB_VM_PROTECTING,
	RDB_VM_PROTECTED,
	RDB_VM_DEGRADED,
	RDB_VM_FAILING_OVER,
	RDB_VM_FAILED_OVER,
	RDB_VM_UNPROTECTED,
	RDB_VM_FAILED,
	RDB_VM_DECIDING,	/* peer lost: who runs is being decided */
	RDB_VM_FENCED,		/* the other side runs: this copy stopped */
	RDB_VM_MIGRATING,	/* primary: handing the VM over (migrate) */
	RDB_VM_MIGRATED,	/* primary: the backup runs it; QEMU quit here */
	RDB_VM_STATE__MAX
};

/* The last RDB_PAUSE_RING pauses, for p50/p99 on demand. */
#define RDB_PAUSE_RING 4096

/* One checkpoint as the primary saw it (remusdbctl epochs, the drill
 * report): kept for the last RDB_PAUSE_RING epochs, by epoch. */
struct rdb_epoch_rec {
	uint64_t epoch;
	uint64_t end_ns;	/* its pause ended (monotonic) */
	uint64_t pause_ns;	/* the guest's pause; 0: none (a handover) */
	uint64_t bytes;		/* its frames' payload, as in EPOCH_END */
	uint64_t ack_ns;	/* pause end -> ACK, once acked */
	bool acked, valid;
};

struct rdb_vm_stats {
	uint64_t transitions[RDB_VM_STATE__MAX];
	uint64_t unlisted_changes;	/* not in vm.c's table: a bug */
	uint64_t checkpoints;		/* epochs whose state reached us */
	uint64_t committed_epoch;	/* primary: last ACKed; backup: last applied */
	uint64_t pages;			/* pages sent (primary) / applied (backup) */
	uint64_t bytes;			/* replication payload bytes */
	uint64_t disk_ops;		/* disk changes replicated (primary) */
	uint64_t disk_bytes;		/* their write data (primary) / applied (backup) */
	struct rdb_codec_stats codec;	/* primary, compression on */
	uint64_t marked_frames;		/* primary: protected packets seen (mark stripped) */
	uint64_t pause_ns[RDB_PAUSE_RING];	/* request → our LOADED */
	uint64_t work_ns[RDB_PAUSE_RING];	/* our own work inside it */
	uint64_t npause;
	/* primary: end of checkpoint N's pause -> the backup's ACK(N): how
	 * long held output waits beyond its epoch */
	uint64_t ack_ns[RDB_PAUSE_RING];
	uint64_t nack;
	/* backup: how long committing an epoch took (disk replay, its
	 * syncs, pages), the part of ack_ms spent here */
	uint64_t commit_ns[RDB_PAUSE_RING];
	uint64_t ncommit;
	uint64_t disk_syncs;		/* backup: fdatasyncs of the replica */
	uint64_t first_ckpt_ns, last_ckpt_ns;
	uint64_t last_ack_ns;
	uint64_t failover_ns;		/* backup: detection → guest running */
	uint64_t watchdog_trips;
	/* the failover decision (both roles): started, won, lost; failed
	 * requests to the witness; primary: guest pauses at the hold bound */
	uint64_t decisions, decisions_won, decisions_lost;
	uint64_t witness_errors, hold_pauses;
	uint64_t deadline_misses;
	/* primary: checkpoints whose STOP waited for the encoders, and the
	 * time they waited (the guest ran) */
	uint64_t encoder_waits, encoder_wait_ns;
	uint64_t ack_timeouts;		/* primary: ack_timeout_ms passed */
	/* primary: the last initial copy's bytes (data + zeroes sent), its
	 * blocks that could differ, and how long it took to queue */
	uint64_t resync_bytes, resync_blocks, copy_ns;
	bool resynced;			/* the last copy was a resync */
	/* primary: the last protection's start, its COLO start (the memory
	 * copy), epoch 0's page bytes and the time to its ACK (0: not yet) */
	uint64_t protect_start_ns, colo_start_ns, initial_mem_bytes;
	uint64_t colo_start_bytes;	/* st.bytes then (the count goes on) */
	uint64_t initial_ns, initial_mem_ns;
	uint64_t initial_stop_ns;	/* the guest stopped for epoch 0's last */
	/* since the VM was added: pauses, ACK waits (primary), commits
	 * (backup), for the metrics file's histograms */
	struct rdb_prom_hist pause_hist, ack_hist, commit_hist;
	struct rdb_epoch_rec epochs[RDB_PAUSE_RING];	/* by epoch % ring */
};

struct rdb_daemon;
struct rdb_primary;
struct rdb_backup;

struct rdb_vm {
	char name[65];
	enum rdb_vm_role role;
	enum rdb_vm_state state;
	uint64_t state_since_ns;
	char state_reason[160];
	struct rdb_vm_config cfg;	/* primary: as protected; backup: from VM_SETUP */
	struct rdb_vm_stats st;
	struct rdb_daemon *d;
	struct rdb_primary *pri;	/* role == PRIMARY */
	struct rdb_backup *bak;		/* role == BACKUP */
	/* Ends the role's part (not the VM entry): set with the role, for
	 * code that must not name a role's files (backup.c ending a stale
	 * primary copy: role.h) */
	void (*teardown)(struct rdb_vm *vm);
	int wd_slot;			/* watchdog slot, -1 if none */
	enum rdb_peer_loss peer_loss;	/* as resolved at protect / setup */
	bool readopted;			/* from its definition at start (vmdef.h) */
	bool history_failed;		/* said once: history.h */
	struct rdb_vm *next;
};

const char *rdb_vm_state_name(enum rdb_vm_state s);
/*
 * A concern's phase within the lifecycle (the decision's, a switchover's)
 * changes from `from` to `to` by its own table: next[p] has bit q set
 * when phase p may change to q (n phases, named by names[]).  Returns the
 * phase to keep: `to`, or `from` for a `to` out of range.  A change the
 * table does not list is logged as a bug ("<what> phase A -> B is not in
 * the lifecycle's table (<where>)"), counted as the VM's unlisted
 * changes, and made all the same, as rdb_vm_set_state does.
 */
unsigned rdb_vm_phase_change(struct rdb_vm *vm, const char *what,
			     const char *where, const char *const *names,
			     const uint32_t *next, unsigned n, unsigned from,
			     unsigned to);
/* The lifecycle's table (vm.c): may a VM in state from change to to? */
bool rdb_vm_state_change_legal(enum rdb_vm_state from, enum rdb_vm_state to);
const char *rdb_vm_role_name(enum rdb_vm_role r);

/* Allocates and links a VM into the daemon's list; NULL on ENOMEM. */
struct rdb_vm *rdb_vm_new(struct rdb_daemon *d, const char *name,
			  enum rdb_vm_role role);
struct rdb_vm *rdb_vm_find(struct rdb_daemon *d, const char *name);
/* The VM's hypervisor backend (its config's `hypervisor`). */
const struct rdb_hv_ops *rdb_vm_hv(const struct rdb_vm *vm);
/* Unlinks and frees; the role's own state must be torn down first. */
void rdb_vm_free(struct rdb_vm *vm);

void rdb_vm_set_state(struct rdb_vm *vm, enum rdb_vm_state s,
		      const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Called after a checkpoint's pause ended (we sent LOADED): its length,
 * and the time our own code ran inside it. */
void rdb_vm_pause_recorded(struct rdb_vm *vm, uint64_t pause_ns,
			   uint64_t work_ns);
/* Called after checkpoint epoch's pause ended (pause_ns: its length, 0
 * when the guest was not paused for it), after its EPOCH_END was framed
 * with bytes of payload, and when its ACK came. */
void rdb_vm_epoch_ended(struct rdb_vm *vm, uint64_t epoch, uint64_t now_ns,
			uint64_t pause_ns);
void rdb_vm_epoch_framed(struct rdb_vm *vm, uint64_t epoch, uint64_t bytes);
void rdb_vm_epoch_acked(struct rdb_vm *vm, uint64_t epoch, uint64_t now_ns);
/* Primary: the oldest epoch not acknowledged yet and when its pause
 * ended (its output has been held since): 0 and *epoch_out untouched
 * when every epoch that ended is acknowledged.  An epoch whose record
 * the ring no longer holds counts as ended when the oldest recorded one
 * did (a bound: it ended earlier), or at 1 if none is. */
uint64_t rdb_vm_unacked_since(const struct rdb_vm *vm, uint64_t *epoch_out);
/* p in [0,100]; 0 when nothing recorded. */
uint64_t rdb_vm_pause_percentile(const struct rdb_vm *vm, unsigned p);
uint64_t rdb_vm_ack_percentile(const struct rdb_vm *vm, unsigned p);
void rdb_vm_commit_recorded(struct rdb_vm *vm, uint64_t ns);
uint64_t rdb_vm_commit_percentile(const struct rdb_vm *vm, unsigned p);
uint64_t rdb_vm_work_percentile(const struct rdb_vm *vm, unsigned p);
/* The last count (at most RDB_PAUSE_RING) epochs' records, oldest first,
 * as columns: {"epoch": [...], "t": [unix seconds at pause end], "pause_ms",
 * "bytes", "ack_ms" (null: not acknowledged)}. NULL on ENOMEM. */
json_t *rdb_vm_epochs_json(const struct rdb_vm *vm, unsigned count);

json_t *rdb_vm_status_json(const struct rdb_vm *vm);
/* Appends Prometheus text-format lines for this VM to f. */
/* Adds the VM's samples to the registry, with labels vm and role. */
void rdb_vm_metrics(const struct rdb_vm *vm, struct rdb_prom *p);

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The primary role: one protected VM running on this host.
 *
 * Per checkpoint N (Remus epoch; docs/architecture.md, "The epoch, on the
 * primary"):
 *   QEMU ──REQUEST──►            we answer REPLY, the VM stops
 *   QEMU ──pages, devstate──►    parsed into memory, queued for the backup
 *   epoch_end(N)                 frames read from now on are epoch N+1;
 *                                we answer RECEIVED + LOADED: the VM runs
 *   backup ──ACK(N)──►           frames of epochs <= N go out to the tap
 * Nothing slow runs between REQUEST and LOADED: sending to the backup
 * happens from the event loop while the guest runs.
 */
#ifndef RDB_PRIMARY_H
#define RDB_PRIMARY_H

#include <stddef.h>
#include <stdint.h>

#include <stdio.h>

#include <jansson.h>

#include "prom.h"

#include "netstream.h"

struct rdb_daemon;
struct rdb_handover;
struct rdb_nic_dst;
struct rdb_nic;
struct rdb_vm;
struct rdb_vm_config;

/*
 * Attach: the VM becomes known, unprotected, with its disk (if it has
 * one) served on disk_socket and its NIC relayed — what its QEMU needs
 * before it can start.  The config is moved in.
 *
 * Protect: starts protecting the VM.  An attached VM keeps the config it
 * was attached with (cfg must name it); an unknown one is attached
 * first.  With a disk, the whole disk is copied to the backup (holes and
 * zero blocks skipped) while the guest runs, then COLO starts; both are
 * epoch 0.  On failure err says why: an unknown VM leaves nothing behind,
 * an attached one stays attached (unprotected).
 */
int rdb_primary_attach(struct rdb_daemon *d, struct rdb_vm_config *cfg,
		       char *err, size_t errlen);
/*
 * A VM restored here becomes this host's primary (role.c,
 * rdb_role_reprotect).  begin: the request checked (set: the operator's
 * options), the primary made with empty NICs the backup's move into
 * (dst[0..*ndst), RDB_NICS_MAX of them at most); abort: that
 * undone; adopt: what the backup handed over is served here (the NIC,
 * the disk, the restored QEMU), and protection begins.
 */
int rdb_primary_restored_begin(struct rdb_daemon *d, struct rdb_vm *vm,
			       json_t *set, struct rdb_nic_dst *dst,
			       unsigned *ndst, char *err, size_t errlen);
void rdb_primary_restored_abort(struct rdb_vm *vm);
int rdb_primary_restored_adopt(struct rdb_vm *vm, const struct rdb_handover *h,
			       char *err, size_t errlen);
int rdb_primary_protect(struct rdb_daemon *d, struct rdb_vm_config *cfg,
			char *err, size_t errlen);
/*
 * Re-adoption at start (vmdef.h): the VM attached as rdb_primary_attach
 * does (its output held until the witness says who owns it); protect:
 * protected again once the witness has said this host owns it, never
 * before (a copy that lost the VM while this daemon was down is fenced
 * instead).  rdb_primary_readopt_tick does that step; remusdbd calls it
 * for every primary VM from its housekeeping.
 */
int rdb_primary_readopt(struct rdb_daemon *d, struct rdb_vm_config *cfg,
			bool protect, char *err, size_t errlen);
void rdb_primary_readopt_tick(struct rdb_vm *vm);
/*
 * Re-adoption of a VM a failover restored here (vmdef.h, restored): its
 * QEMU runs on; it is attached as this host's, from the primary's config
 * prim with this host's sockets and taps and the recorded replicas as
 * its disks, each disk's written map recording on (the lineage record),
 * its output held until the witness says this host owns it.  Protected
 * by the operator's `remusdbctl protect NAME peer=HOST`.
 */
int rdb_primary_readopt_restored(struct rdb_daemon *d,
				 const struct rdb_vm_config *prim,
				 json_t *restored, char *err, size_t errlen);
/* remusdbctl protect NAME KEY=VALUE...: an attached VM of this host
 * protected with its config and set (peer at least). */
int rdb_primary_protect_named(struct rdb_daemon *d, struct rdb_vm *vm,
			      json_t *set, char *err, size_t errlen);
/*
 * After the backup's remusdbd went away (it closed the replication link:
 * a restart, an upgrade, a crash), the VM is protected to it again on its
 * own, retried with a growing interval for auto_reprotect_s; remusdbd
 * calls this for every primary VM from its housekeeping (primary_auto.c).
 */
void rdb_primary_auto_tick(struct rdb_vm *vm);
/* Operator unprotect: COLO stops cleanly, held output is released. */
/* force: also when a decision is pending (runs here now) or was lost
 * (resumes the fenced guest).  msg: why not, or what happens next. */
/* migrate NAME: hand the protected VM over to its backup at the next
 * checkpoint (primary_migrate.c); msg says what happens next. */
int rdb_primary_migrate(struct rdb_vm *vm, char *msg, size_t msglen);
int rdb_primary_unprotect(struct rdb_vm *vm, bool force, char *msg,
			  size_t msglen);
/*
 * detach NAME: this daemon forgets an attached VM that is not protected
 * (its disk and NIC no longer served; the VM entry freed).  Refused while
 * a protection is under way (unprotect first) and, without force, while
 * its QEMU is still connected to the disk or NIC (shut the VM down
 * first).  0: vm is freed.  msg: why not.
 */
int rdb_primary_detach(struct rdb_vm *vm, bool force, char *msg,
		       size_t msglen);
/* Frees everything; idempotent on vm->pri == NULL. */
void rdb_primary_teardown(struct rdb_vm *vm);
void rdb_primary_status(const struct rdb_vm *vm, json_t *o);
/* Prometheus lines of commit protection's output path (nothing in plain
 * mode). */
void rdb_primary_metrics(const struct rdb_vm *vm, struct rdb_prom *p);
/*
 * Capture mode (benchmarks): the next `epochs` checkpoints' dirty pages,
 * as QEMU sent them, are appended to path (created; mode 0600), after
 * the pause of each.  Format (host byte order):
 *   "RDBCORP1" { "EPOC" epoch:u64 nruns:u32
 *                { block:u32 count:u32 len:u64 records[len] }*nruns }*
 * records are the protocol's page records (offset:u64 BE, enc, body).
 * It holds guest memory: treat the file like the guest's RAM.
 */
int rdb_primary_capture(struct rdb_vm *vm, const char *path, uint64_t epochs,
			char *err, size_t errlen);
/* Fault injection for tests: stop this process inside the next pause. */
int rdb_primary_inject(struct rdb_vm *vm, const char *fault);

#endif

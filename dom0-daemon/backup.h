/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The backup role: this host keeps a committed copy of a VM that runs on
 * a primary, and brings it back to life when the primary goes silent.
 *
 *   PAGES/DEVSTATE of epoch N  staged in memory, nothing applied
 *   EPOCH_END(N)               complete? apply to the RAM image and swap
 *                              the device state (commit), then ACK(N)
 *   silence > failover_timeout drop the staged epoch, start QEMU from the
 *                              image + last device state, announce the MAC
 *
 * A connection the primary closes (FIN/RST) is not taken as a failure:
 * a kernel that can close a socket is alive, and failing over then would
 * run the VM twice.  Only silence — what a power loss looks like — fails
 * over by itself; `remusdbctl failover` covers the rest.
 */
#ifndef RDB_BACKUP_H
#define RDB_BACKUP_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "nic.h"
#include "prom.h"
#include "proc.h"
#include "role.h"

struct rdb_daemon;
struct rdb_vm;

/* Opens the replication listener (daemon config "listen"). */
int rdb_backup_listen(struct rdb_daemon *d);
void rdb_backup_stop_listening(struct rdb_daemon *d);

/* Operator failover (also used on detection). */
int rdb_backup_failover(struct rdb_vm *vm, const char *why);
/* remusdbctl failover [--force]: with on_peer_loss = witness, decides
 * first (msg says so); --force goes live at once (the operator's word
 * that the primary is dead). */
/* Tests (allow_fault_injection): "restore-fail" makes the next restore
 * fail once its QEMU runs, "restore-fail-late" 1 s after its guest runs. */
int rdb_backup_inject(struct rdb_vm *vm, const char *fault);
int rdb_backup_operator_failover(struct rdb_vm *vm, bool force, char *msg,
				 size_t msglen);
void rdb_backup_teardown(struct rdb_vm *vm);
/* Prometheus lines of the flow check (commit protection only). */
void rdb_backup_metrics(const struct rdb_vm *vm, struct rdb_prom *p);
void rdb_backup_status(const struct rdb_vm *vm, json_t *o);
/* What a restored VM's new primary role takes over (role.c). */
/*
 * The restored VM is protected again from this host: its NICs go to
 * dst[0..ndst) (one for each, in order: -EINVAL otherwise), the replica's disk
 * server stops (QEMU holds disk requests until the caller's disk server
 * takes the socket), and the backup role is torn down without touching
 * the guest.  -EINVAL unless the VM failed over here and runs; -EAGAIN
 * while its flow check fences.
 */
int rdb_backup_hand_over(struct rdb_vm *vm, const struct rdb_nic_dst *dst,
			 unsigned ndst, struct rdb_handover *h, char *err,
			 size_t errlen);
/* Periodic: notices a restored QEMU that exited (and reaps it). */
void rdb_backup_housekeeping(struct rdb_vm *vm);

#endif

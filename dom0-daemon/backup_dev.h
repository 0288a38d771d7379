/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The backup's device kinds (bakdev.h): a disk (backup_disk.c) and a NIC
 * (backup_nic.c).  They know the role only through struct
 * rdb_bakdev_host and struct rdb_bakrun, never backup.c: that calls
 * them, not the other way round.  Their own structs are theirs alone.
 */
#ifndef RDB_BACKUP_DEV_H
#define RDB_BACKUP_DEV_H

#include <stdbool.h>

#include "bakdev.h"
#include "proto.h"
#include "stage.h"

/* The kinds, for rdb_bakdevs_kind. */
extern const struct rdb_bakdev_ops rdb_bak_disk_ops;
extern const struct rdb_bakdev_ops rdb_bak_nic_ops;

/*
 * DISK_SETUP: the primary's disk f->device (they come in order, 0 first)
 * gets a replica here — a fresh one of its size, all zeroes (sparse),
 * that the initial copy fills, or with feature RESYNC and a base this
 * host holds for it (its old image as the primary, or its replica of
 * that protection, whole), that copy, of which the primary sends only
 * what may differ (DISK_BASE goes back on the link either way under
 * RESYNC).  The set is marked applying first (host->mark).
 * The device joins t and its buffer the stage (st->disks[f->device]).
 * -EPROTO out of order: not the next disk, or after the initial state
 * began (committed: an epoch was).
 */
int rdb_bak_disk_setup(struct rdb_bakdevs *t, struct rdb_stage *st,
		       const struct rdb_frame *f, bool committed);

/*
 * The VM's set of replicas, as its marker (host->mark, replmark.h) tells
 * it: applying before a write of epoch epoch of protection gen reaches
 * any of them (0 for a replica made or kept at DISK_SETUP, whose
 * protection VM_SETUP may not have named yet); < 0, logged: they must
 * not be written.  done once every write and sync of that epoch
 * succeeded on every disk, served when they go to a restored guest;
 * a failure is logged, and leaves the set claiming nothing.
 */
int rdb_bak_disks_applying(const struct rdb_bakdev_host *h, uint64_t gen,
			   uint64_t epoch);
void rdb_bak_disks_done(const struct rdb_bakdev_host *h, uint64_t gen,
			uint64_t epoch);
void rdb_bak_disks_served(const struct rdb_bakdev_host *h, uint64_t gen,
			  uint64_t epoch);

/*
 * VM_SETUP: the guest's NIC index (each the config names, in order) is a
 * device of the VM here: nothing open until a failover (or a handover's
 * prepare), its flow check in the stage (st->flows[index]) for the FLOWS
 * of each committed epoch.
 */
int rdb_bak_nic_add(struct rdb_bakdevs *t, struct rdb_stage *st,
		    unsigned index);

#endif

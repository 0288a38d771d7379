/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Role changes: a VM's role on this host (primary.h, backup.h) becomes
 * another here, in one place (role.c), from what the old role hands
 * over.  The roles never call into each other (docs/architecture.md,
 * "Roles"; tests/file-cycles.sh).
 */
#ifndef RDB_ROLE_H
#define RDB_ROLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "config.h"
#include "diskbuf.h"
#include "netstream.h"
#include "proc.h"

struct rdb_nic;

struct rdb_daemon;

/* Where one of a restored guest's NICs goes: the primary's NIC device
 * (empty), with its new callbacks. */
struct rdb_nic_dst {
	struct rdb_nic *nic;
	rdb_frame_cb from_guest;
	void *opaque;
};

/* What a backup whose VM failed over here hands to the primary role
 * that protects the restored VM again. */
struct rdb_handover {
	struct rdb_hv_proc qemu;	/* the restored QEMU: reap it */
	int event_fd;			/* the failover event port, kept open */
	unsigned ndisks;
	/* the replicas the guest runs on, disk 0 first */
	char disk_paths[RDB_DISKS_MAX][512];
	/* what it wrote since the restore, each disk (empty: unknown) */
	char wmap_paths[RDB_DISKS_MAX][512];
	uint64_t generation, epoch;	/* restored from: protection, epoch */
};

/*
 * remusdbctl protect NAME KEY=VALUE...: a VM that failed over to this
 * host is protected again, to peer (required).  Its VM file is the old
 * primary's with this host's sockets, disk and tap (set may change the
 * operator's options: peer, mode, checkpoint_ms, ...).  The restored
 * QEMU runs on throughout: its NIC and disk pass from the backup role to
 * the primary role.  When the new backup holds the old primary's image,
 * only what may differ is copied (docs/resync.md).
 */
int rdb_role_reprotect(struct rdb_daemon *d, const char *name, json_t *set,
		       char *err, size_t errlen);

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Checkpoint devices: the parts of a protected VM, beside its memory and
 * CPU state, that take part in every epoch — each disk, each NIC.  The
 * shape is Xen libxl's checkpoint device table: a role holds an array of
 * instances, each instance names its kind's table of hooks, and the
 * checkpoint pipeline calls the hooks of every instance in turn.  Nothing
 * in the pipeline names "the disk" or "the NIC" (docs/architecture.md,
 * "Checkpoint devices").
 *
 * A device never calls into its role's files: what it needs of the role
 * (where this epoch's frames go, how protection fails, whether output
 * may leave) comes through struct rdb_ckdev_host, and what it must know
 * of the pipeline (is protection on, which epoch is open, what the backup
 * granted) it reads from struct rdb_ckpt, which the role keeps.
 *
 * Primary-side epoch timeline, for a device (docs/architecture.md, "The
 * epoch, on the primary"):
 *   start        the link to the backup is up: record from now on, queue
 *                setup frames; initial work (the disk copy) may follow,
 *                the device says so by returning 1 and calls ready() once
 *                it is done (checkpoints start when every device is)
 *   checkpoint   inside the pause of epoch N, the guest stopped: all the
 *                device saw from the guest so far belongs to N or before
 *   committed    the backup committed N (its ACK): what N held may go
 *   stop         protection ends, failover or not: record no more
 *   unreplicate  nothing more reaches the backup: what the guest was told
 *                is durable must be durable here (a disk's sync); < 0:
 *                it is not, and held output must never leave
 *   reset        the protection's own state is dropped (idempotent)
 *   close        the device is no longer served (the VM is forgotten)
 * Hooks a kind does not need are NULL.
 */
#ifndef RDB_CKDEV_H
#define RDB_CKDEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "buf.h"
#include "prom.h"
#include "proto.h"

struct rdb_ckdev;
struct rdb_vm_stats;

/* Where the guest's output goes now (a NIC asks for every frame). */
enum rdb_out_gate {
	RDB_OUT_WIRE,		/* unprotected: at once */
	RDB_OUT_EPOCH,		/* plain Remus: held until its epoch commits */
	RDB_OUT_FLOW,		/* commit protection: the flow buffer decides */
	RDB_OUT_HOLD,		/* a decision is pending: held whatever the mode */
	RDB_OUT_DROP,		/* the other copy runs: nothing leaves (I6) */
};

/* The pipeline's state, as devices read it (kept by the role). */
struct rdb_ckpt {
	bool active;		/* protection runs: changes are replicated */
	bool in_pause;		/* between the checkpoint's REQUEST and LOADED */
	bool cp;		/* mode = commit-protection */
	uint32_t features;	/* what the backup granted (proto.h) */
	uint64_t open_epoch;	/* what the guest does now belongs to it */
	/* the devices' frames of the open epoch (records, bytes): the
	 * devices add, the role reads and clears them at the epoch's end */
	uint64_t epoch_recs, epoch_bytes;
	/* fault injection (tests): stop this process at a disk change
	 * inside a pause */
	bool fault_stop_in_disk_pause;
};

/* What a role gives its devices. */
struct rdb_ckdev_host {
	void *opaque;
	/* Frames of the open epoch are appended here (the role may keep
	 * them back behind an earlier epoch still being encoded). */
	struct rdb_buf *(*epoch_out)(void *opaque);
	/* Frames that go to the backup as they are (setup, the disk copy). */
	struct rdb_buf *(*link_out)(void *opaque);
	/* Bytes queued for the backup, not yet on the link. */
	size_t (*queued)(void *opaque);
	void (*want_write)(void *opaque);
	/* Protection cannot go on (why: for the log and status). */
	void (*fail)(void *opaque, const char *why);
	/* A device's initial work (start returned 1) is done. */
	void (*ready)(void *opaque);
	enum rdb_out_gate (*gate)(void *opaque);
	/* A frame from the network for the guest of NIC nic: false, the
	 * role took it (it does not reach the guest). */
	bool (*from_wire)(void *opaque, unsigned nic, const uint8_t *frame,
			  size_t len);
};

struct rdb_ckdev_ops {
	const char *kind;		/* "disk", "nic" */
	int (*start)(struct rdb_ckdev *dev, char *err, size_t errlen);
	int (*checkpoint)(struct rdb_ckdev *dev, uint64_t epoch);
	void (*committed)(struct rdb_ckdev *dev, uint64_t epoch);
	/* A frame from the backup addressed to devices of this kind:
	 * 1 taken, 0 not this device's, < 0 a protocol error. */
	int (*peer_msg)(struct rdb_ckdev *dev, const struct rdb_frame *f);
	void (*stop)(struct rdb_ckdev *dev);
	int (*unreplicate)(struct rdb_ckdev *dev);
	void (*reset)(struct rdb_ckdev *dev);
	/* The VM's hypervisor uses the device now. */
	bool (*in_use)(const struct rdb_ckdev *dev);
	void (*close)(struct rdb_ckdev *dev);
	/* Its object in status (o is the device's own, "kind" and "id" set). */
	void (*status)(const struct rdb_ckdev *dev, json_t *o);
	/* Its metrics, labelled with the VM and the device's id. */
	void (*metrics)(const struct rdb_ckdev *dev, struct rdb_prom *m);
};

/* An instance: the first member of a kind's own struct. */
struct rdb_ckdev {
	const struct rdb_ckdev_ops *ops;
	const struct rdb_ckdev_host *host;
	struct rdb_ckpt *ck;
	struct rdb_vm_stats *st;	/* the VM's counters (vm.h) */
	char vm[65];
	char id[16];			/* "disk0", "nic1": unique in its VM */
	unsigned index;			/* among its kind's instances */
};

#define RDB_CKDEV_MAX 16

/* Fills an instance's common part: its id is the kind and index
 * ("disk0"). */
void rdb_ckdev_init(struct rdb_ckdev *dev, const struct rdb_ckdev_ops *ops,
		    unsigned index, const char *vm, struct rdb_ckpt *ck,
		    const struct rdb_ckdev_host *host, struct rdb_vm_stats *st);

/* A role's devices, in the order the pipeline calls them. */
struct rdb_ckdevs {
	struct rdb_ckdev *v[RDB_CKDEV_MAX];
	unsigned n;
};

/* -ENOSPC past RDB_CKDEV_MAX. */
int rdb_ckdevs_add(struct rdb_ckdevs *t, struct rdb_ckdev *dev);
/* The n-th instance of kind (NULL: none). */
struct rdb_ckdev *rdb_ckdevs_find(const struct rdb_ckdevs *t,
				  const char *kind, unsigned n);
unsigned rdb_ckdevs_count(const struct rdb_ckdevs *t, const char *kind);
/*
 * Every device's start: 0 all ready, the number of devices with initial
 * work under way (each calls host->ready once when done, possibly before
 * this returns), or the first error (the failing device and those
 * started before it are stopped, last first).
 */
int rdb_ckdevs_start(struct rdb_ckdevs *t, char *err, size_t errlen);
/* Every device's checkpoint; stops at the first error. */
int rdb_ckdevs_checkpoint(struct rdb_ckdevs *t, uint64_t epoch);
void rdb_ckdevs_committed(struct rdb_ckdevs *t, uint64_t epoch);
/* To the devices of kind until one takes it: 1 taken, 0 none did. */
int rdb_ckdevs_peer_msg(struct rdb_ckdevs *t, const char *kind,
			const struct rdb_frame *f);
void rdb_ckdevs_stop(struct rdb_ckdevs *t);
/* Every device's; the first error (all are called). */
int rdb_ckdevs_unreplicate(struct rdb_ckdevs *t);
void rdb_ckdevs_reset(struct rdb_ckdevs *t);
bool rdb_ckdevs_in_use(const struct rdb_ckdevs *t);
/* Closes every device and empties t (close frees an instance). */
void rdb_ckdevs_close(struct rdb_ckdevs *t);
/* A JSON array: one object per device (kind, id, and its status). */
json_t *rdb_ckdevs_status(const struct rdb_ckdevs *t);
void rdb_ckdevs_metrics(const struct rdb_ckdevs *t, struct rdb_prom *m);

#endif

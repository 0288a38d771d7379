/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The backup's devices: a backed-up VM's disks and NICs on this host, as
 * instances in a table (the shape of ckdev.h, the primary's).  Each
 * instance names its kind's table of hooks, the backup role calls the
 * hooks of every instance in turn, and nothing in the role's pipeline
 * names "the disk" or "the NIC" (docs/architecture.md, "The backup's
 * devices").  Hooks a kind does not need are NULL.
 *
 * A device never calls into the role's file: what it needs of the role
 * (the link to the primary, the VM's directory, a timer, how the VM
 * fails) comes through struct rdb_bakdev_host, and what it must know of
 * a restore under way it reads from struct rdb_bakrun, which the role
 * keeps.
 *
 * A device's life on the backup:
 *   setup      the kind's own constructor, from the frame that brings the
 *              device (a disk: DISK_SETUP; the NICs: VM_SETUP): a disk's
 *              replica (or this host's old image) and its buffer in the
 *              stage, a NIC's flow check in the stage
 *   stage, commit
 *              stage.c, over the buffers the devices put there: every
 *              disk's changes of an epoch are replayed as one apply
 *              (diskbuf.h rdb_diskbuf_apply_set), never per device
 *   record, recorded
 *              the VM's lineage record (lineage.h) names every replica:
 *              each device writes its entry; after a "replica" record
 *              is saved, recorded
 *   failover   on the loop: check (a torn replica is never served),
 *              rollback (an epoch may be lost: a NIC's flow check), open
 *              (a NIC on its socket and tap); then on the restore's
 *              thread: check, sync, the written maps (fresh, record),
 *              serve (a disk's replica to the restored QEMU), restore
 *              (each adds its drive or NIC socket to the hypervisor's
 *              process).  A handover's prepare does fresh, serve and
 *              open on the loop ahead of time.
 *   running    the restored guest runs; release: what it sent meanwhile
 *              leaves, or is dropped when the restore failed (I6)
 *   hand_over  a restored VM protected again (role.h): a NIC moves into
 *              the primary's NIC device, a disk hands over its path and
 *              written map; unserve: its server stops
 *   free       the role is torn down (a restored guest's disk server and
 *              QEMU outlive it)
 *
 * Most hooks are per instance.  A few are per kind (running, release,
 * tick, status, metrics): what they log or show sums over the kind's
 * instances (one line for every NIC's flow check, one "disk" object for
 * the set of replicas), so the kind's hook is called once, with all of
 * them in order, for every kind the role registered.
 */
#ifndef RDB_BAKDEV_H
#define RDB_BAKDEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "buf.h"
#include "config.h"
#include "diskbuf.h"
#include "prom.h"

struct rdb_bakdev;
struct rdb_daemon;
struct rdb_handover;
struct rdb_lineage;
struct rdb_nic_dst;
struct rdb_replmark;
struct rdb_vm;

/* A restore under way, as devices read it (kept by the role). */
struct rdb_bakrun {
	/* The restored guest may run, its restore not known to have
	 * worked: what it sends is held (a restore that fails after its
	 * guest ran must leave no trace on the wire: the old copy may
	 * resume from the same epoch). */
	bool held;
	size_t held_bytes;		/* ... that much, every device's */
	uint64_t running_ns;		/* the restored guest runs since, and
					 * has sent nothing yet (0: not so) */
};

/* A replica's counters, summed over the devices that have one. */
struct rdb_bakdev_sum {
	unsigned n;			/* devices counted */
	uint64_t buffered;		/* the epoch in flight's write bytes */
	uint64_t applied, syncs;
	bool consistent;		/* every one (true when n == 0) */
};

/* What a thread that owns the devices now leaves status to show. */
struct rdb_bakdev_owned {
	bool commit;			/* an epoch's disk step runs */
	bool restore;			/* a restore (or a prepare) runs */
	bool restore_devs;		/* ... one whose own step syncs and
					 * serves the replicas */
	struct rdb_bakdev_sum at;	/* the counters when it began */
};

/* What a role gives its devices. */
struct rdb_bakdev_host {
	void *opaque;
	struct rdb_daemon *d;		/* its loop, run_dir, state_dir */
	const struct rdb_vm *vm;	/* its name, the primary's config */
	struct rdb_bakrun *run;
	/* Frames to the primary (DISK_BASE), and the link told of them. */
	struct rdb_buf *(*link_out)(void *opaque);
	void (*want_write)(void *opaque);
	/* The VM's directory in state_dir, made if it is not there. */
	int (*vm_dir)(void *opaque, char *dir, size_t len);
	/* The VM's replica marker (replmark.h), opened by the role before
	 * the first DISK_SETUP and closed by it: what it said then (found)
	 * tells whether this host's replicas are whole, and every write of
	 * them is marked first (backup_dev.h rdb_bak_disks_applying). */
	struct rdb_replmark *mark;
	/* The restored guest lost a device: the VM failed (why: the
	 * state's reason). */
	void (*fail)(void *opaque, const char *why);
	/* The kinds' tick hooks are due in 1 ms (nothing if they are due
	 * already); < 0: no timer. */
	int (*tick_soon)(void *opaque);
	/* Whether a thread owns the devices now (status must not read what
	 * it changes), and what they showed when it began. */
	void (*owned)(void *opaque, struct rdb_bakdev_owned *out);
};

/* What the devices add to the restored VM's hypervisor process (hv.h
 * struct rdb_hv_restore), in device order: each disk its drive, each NIC
 * its stream socket. */
struct rdb_bakdev_restore {
	const char *disk_sock;		/* the first drive's server socket */
	const char *drives[RDB_DISKS_MAX];
	unsigned ndrives;
	const char *nets[RDB_NICS_MAX];
	unsigned nnets;
};

struct rdb_bakdev_ops {
	const char *kind;		/* "disk", "nic" */

	/* ---- per instance ---- */
	/* Its entry in the VM's lineage record l (l->role says which kind
	 * of record); -ENOENT: a restored record, and it has no written
	 * map.  On the commit's or the restore's thread. */
	int (*record)(const struct rdb_bakdev *dev, struct rdb_lineage *l);
	/* The "replica" record is saved: this host's copy of the device
	 * is a replica from now on.  On the commit's thread. */
	void (*recorded)(struct rdb_bakdev *dev);
	/* Adds its replica's counters to s. */
	void (*counters)(const struct rdb_bakdev *dev, struct rdb_bakdev_sum *s);
	/* -EIO, logged: an epoch's replay left it torn, it is at no
	 * committed epoch and must not be served. */
	int (*check)(struct rdb_bakdev *dev);
	/* Made durable as of the last committed epoch (logged on error). */
	int (*sync)(struct rdb_bakdev *dev);
	/* Its written map, fresh: the guest's writes from this restore on
	 * (err says why not); forget: none (a new protection of the
	 * restored VM copies it whole). */
	int (*fresh)(struct rdb_bakdev *dev, char *err, size_t errlen);
	void (*forget)(struct rdb_bakdev *dev);
	/* Served to the restored guest (logged on error); unserve: not any
	 * more (its server stopped). */
	int (*serve)(struct rdb_bakdev *dev);
	void (*unserve)(struct rdb_bakdev *dev);
	/* The guest is restored past what an epoch that never committed
	 * did (a failover, not a handover); t0: when it began. */
	void (*rollback)(struct rdb_bakdev *dev, uint64_t t0);
	/* Opened for the restored guest, on the loop (logged on error);
	 * close: not any more (idempotent). */
	int (*open)(struct rdb_bakdev *dev);
	void (*close)(struct rdb_bakdev *dev);
	/* Adds what the restored guest's hypervisor is given of it. */
	void (*restore)(const struct rdb_bakdev *dev, struct rdb_bakdev_restore *r);
	/* A frame of the guest's network, out from this host / in to the
	 * guest, now: false if the device is not open here. */
	bool (*to_wire)(struct rdb_bakdev *dev, const uint8_t *frame, size_t len);
	bool (*to_guest)(struct rdb_bakdev *dev, const uint8_t *frame, size_t len);
	/* The guest acknowledged the failover event (its DBMS saw it). */
	void (*acked)(struct rdb_bakdev *dev);
	/* Its own work after the failover still runs (why: for the
	 * operator): the restored VM cannot change roles yet. */
	bool (*pending)(const struct rdb_bakdev *dev, char *why, size_t whylen);
	/* Handed to the primary role that protects the restored VM again
	 * (role.h; dst: its NIC devices, in order).  hand_back: undone,
	 * for a device handed over before one that failed. */
	int (*hand_over)(struct rdb_bakdev *dev, const struct rdb_nic_dst *dst,
			 unsigned ndst, struct rdb_handover *h, char *err,
			 size_t errlen);
	void (*hand_back)(struct rdb_bakdev *dev, const struct rdb_nic_dst *dst,
			  unsigned ndst);
	/* What a new daemon re-adopting the restored VM needs of it
	 * (vmdef.h): a disk appends its replica's path to o's "disks" and
	 * its server to "servers". */
	int (*restored)(const struct rdb_bakdev *dev, json_t *o);
	/* Periodic, while the restored guest runs: a server of it that
	 * exited fails the VM (host->fail). */
	void (*poll)(struct rdb_bakdev *dev);
	/* Frees the instance (what outlives the role is left running). */
	void (*free)(struct rdb_bakdev *dev);

	/* ---- per kind: v[0..n) are the kind's instances, in order ---- */
	/* The restored guest runs. */
	void (*running)(const struct rdb_bakdev_host *h,
			struct rdb_bakdev *const *v, unsigned n);
	/* Its restore's outcome is known (host->run->held just ended):
	 * what the guest sent meanwhile leaves (ok) or is dropped. */
	void (*release)(const struct rdb_bakdev_host *h,
			struct rdb_bakdev *const *v, unsigned n, bool ok);
	/* After host->tick_soon: when it wants to be called next (ns from
	 * now), 0 when nothing is due. */
	uint64_t (*tick)(const struct rdb_bakdev_host *h,
			 struct rdb_bakdev *const *v, unsigned n);
	/* Its fields in the role's status object o / its series. */
	void (*status)(const struct rdb_bakdev_host *h,
		       struct rdb_bakdev *const *v, unsigned n, json_t *o);
	void (*metrics)(const struct rdb_bakdev_host *h,
			struct rdb_bakdev *const *v, unsigned n,
			struct rdb_prom *p);
};

/* An instance: the first member of a kind's own struct. */
struct rdb_bakdev {
	const struct rdb_bakdev_ops *ops;
	const struct rdb_bakdev_host *host;
	char id[16];			/* "disk0", "nic1": unique in its VM */
	unsigned index;			/* among its kind's instances: the
					 * device field of its frames */
};

/* Every disk and every NIC a VM may have, and kinds to spare. */
#define RDB_BAKDEV_MAX (RDB_DISKS_MAX + RDB_NICS_MAX)
#define RDB_BAKDEV_KINDS 4

/* Fills an instance's common part: its id is the kind and index. */
void rdb_bakdev_init(struct rdb_bakdev *dev, const struct rdb_bakdev_ops *ops,
		     unsigned index, const struct rdb_bakdev_host *host);

/* A role's devices, in the order its pipeline calls them, and the kinds
 * whose per-kind hooks it calls (in the order registered). */
struct rdb_bakdevs {
	const struct rdb_bakdev_host *host;
	struct rdb_bakdev *v[RDB_BAKDEV_MAX];
	unsigned n;
	const struct rdb_bakdev_ops *kinds[RDB_BAKDEV_KINDS];
	unsigned nkinds;
};

void rdb_bakdevs_init(struct rdb_bakdevs *t, const struct rdb_bakdev_host *host);
/* A kind whose per-kind hooks are called, with or without instances;
 * -ENOSPC past RDB_BAKDEV_KINDS. */
int rdb_bakdevs_kind(struct rdb_bakdevs *t, const struct rdb_bakdev_ops *ops);
/* -ENOSPC past RDB_BAKDEV_MAX, -EINVAL for a kind not registered. */
int rdb_bakdevs_add(struct rdb_bakdevs *t, struct rdb_bakdev *dev);
/* The n-th device of the guest's network (one with to_wire): the one a
 * frame whose device field is n names (OUTPUT, INPUT); NULL: none. */
struct rdb_bakdev *rdb_bakdevs_net(const struct rdb_bakdevs *t, unsigned n);

/* Every device's part of a restored VM's definition (o: its "restored"
 * object, with "disks" and "servers" arrays); the first error. */
int rdb_bakdevs_restored(const struct rdb_bakdevs *t, json_t *o);
/* Every device's entry; the first error (the rest are not called). */
int rdb_bakdevs_record(const struct rdb_bakdevs *t, struct rdb_lineage *l);
void rdb_bakdevs_recorded(struct rdb_bakdevs *t);
/* The replicas' counters, summed (s is set, not added to). */
void rdb_bakdevs_counters(const struct rdb_bakdevs *t, struct rdb_bakdev_sum *s);
/* Each stops at the first device that fails, and returns its error. */
int rdb_bakdevs_check(struct rdb_bakdevs *t);
int rdb_bakdevs_sync(struct rdb_bakdevs *t);
int rdb_bakdevs_serve(struct rdb_bakdevs *t);
int rdb_bakdevs_open(struct rdb_bakdevs *t);
/* Every written map fresh, or (the first failure's error) none: the
 * record names them all. */
int rdb_bakdevs_fresh(struct rdb_bakdevs *t, char *err, size_t errlen);
void rdb_bakdevs_forget(struct rdb_bakdevs *t);
void rdb_bakdevs_unserve(struct rdb_bakdevs *t);
void rdb_bakdevs_rollback(struct rdb_bakdevs *t, uint64_t t0);
void rdb_bakdevs_close(struct rdb_bakdevs *t);
void rdb_bakdevs_restore(const struct rdb_bakdevs *t, struct rdb_bakdev_restore *r);
void rdb_bakdevs_acked(struct rdb_bakdevs *t);
/* The first device whose work still runs (why: its reason). */
bool rdb_bakdevs_pending(const struct rdb_bakdevs *t, char *why, size_t whylen);
/* Every device handed over, or none: those handed over before one that
 * failed are handed back, last first; its error. */
int rdb_bakdevs_hand_over(struct rdb_bakdevs *t, const struct rdb_nic_dst *dst,
			  unsigned ndst, struct rdb_handover *h, char *err,
			  size_t errlen);
void rdb_bakdevs_poll(struct rdb_bakdevs *t);
/* Frees every device and empties t. */
void rdb_bakdevs_free(struct rdb_bakdevs *t);

/* The per-kind hooks, kind by kind. */
void rdb_bakdevs_running(struct rdb_bakdevs *t);
void rdb_bakdevs_release(struct rdb_bakdevs *t, bool ok);
/* The soonest any kind wants to be called again; 0: none. */
uint64_t rdb_bakdevs_tick(struct rdb_bakdevs *t);
void rdb_bakdevs_status(const struct rdb_bakdevs *t, json_t *o);
void rdb_bakdevs_metrics(const struct rdb_bakdevs *t, struct rdb_prom *p);

#endif

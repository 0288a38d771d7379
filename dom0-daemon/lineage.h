/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Where this host's copy of a VM's disk comes from: a small record per
 * VM, <state_dir>/<vm>/lineage.json, kept durable (written to a
 * temporary file, synced, renamed, directory synced), so that it
 * survives the power pull it exists for.
 *
 * When a VM fails over, each host holds a copy of its disk that is
 * nearly the other's: the survivor's replica as of the committed epoch
 * it restored from, plus what the guest wrote since (its written map,
 * wmap.h); the old primary's image, equal to that committed state except
 * in the extents its activity log names (actlog.h).  Protecting the
 * survivor back to the old primary then needs only those blocks
 * (docs/resync.md).  The record says which copy this is:
 *
 *   primary   this host's image (disk) is the primary's of protection
 *             generation G; its activity log (actlog) bounds what may
 *             differ from the backup's committed state.  Written before
 *             the disk records its first change for G.
 *   restored  this host restored the VM from committed epoch E of G;
 *             its disk equals G's committed state at E except the blocks
 *             its written map (wmap) names.  Written before the restored
 *             guest runs.
 *   replica   this host's disk (disk) is a backup's replica of G: no
 *             base for anyone (it is not the primary's, and it changes
 *             at every commit).  Written before the first epoch is
 *             applied to an image that was a base.
 *
 * A survivor protecting again keeps its restored lineage as the `base`
 * of its new primary record until the new backup has committed the
 * resync: a protection that fails half way can be started again from the
 * same base.
 *
 * A VM with several disks has one entry per disk, in device order: disk
 * 0's at the record's top level (as a record of one disk always was),
 * the others in "more_disks".  Every disk is resynced on its own entry.
 */
#ifndef RDB_LINEAGE_H
#define RDB_LINEAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum rdb_lineage_role {
	RDB_LINEAGE_NONE = 0,
	RDB_LINEAGE_PRIMARY,
	RDB_LINEAGE_RESTORED,
	RDB_LINEAGE_REPLICA,
};

/* Each disk's part of the record, by device index (disk 0 first, in the
 * VM's order: disk, extra_disk, nvram). */
#define RDB_LINEAGE_DISKS 8
struct rdb_lineage_disk {
	char disk[256];			/* the disk image this is about */
	char actlog[256];		/* primary: its activity log */
	uint64_t log_gen;		/* primary: the log's generation for G */
	char wmap[256];			/* restored: its written map */
	char base_wmap[256];		/* primary with a base: the base's */
};

struct rdb_lineage {
	enum rdb_lineage_role role;
	uint64_t generation;		/* the protection's (G) */
	uint64_t epoch;			/* restored: the epoch restored from */
	char peer[128];			/* the other host, for the log */
	/* primary, until the resync committed: the restored lineage its
	 * disks came from (role RESTORED, generation, epoch, and each
	 * disk's base_wmap) */
	bool has_base;
	uint64_t base_generation, base_epoch;
	unsigned ndisks;		/* at least 1 in a loaded record */
	struct rdb_lineage_disk d[RDB_LINEAGE_DISKS];
};

const char *rdb_lineage_role_name(enum rdb_lineage_role r);

/* The path of a file of the VM's disk k in the state directory, named
 * the same by every role: <state_dir>/<vm>/<stem>.<ext> for disk 0,
 * <stem><k>.<ext> for the others (the activity logs disk.al, disk1.al,
 * ...; a restore's written maps written.map, written1.map, ...). */
void rdb_lineage_disk_file(char *buf, size_t len, const char *state_dir,
			   const char *vm, unsigned k, const char *stem,
			   const char *ext);

/* 0 and *out, -ENOENT when the VM has no record here, -EBADMSG for a
 * record that cannot be read (err says why). */
int rdb_lineage_load(const char *state_dir, const char *vm,
		     struct rdb_lineage *out, char *err, size_t errlen);
/* Replaces the record, durably. */
int rdb_lineage_save(const char *state_dir, const char *vm,
		     const struct rdb_lineage *l, char *err, size_t errlen);
/* Removes it, durably; no record is fine. */
int rdb_lineage_remove(const char *state_dir, const char *vm);

#endif

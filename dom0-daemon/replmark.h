/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The replica marker: whether a backed-up VM's set of disk replicas on
 * this host is whole at a committed epoch, as of this boot.  A backup
 * whose primary protects the VM again (the link lost, or this host's
 * remusdbd restarted) may then keep its replicas and be sent only what
 * may have changed since (backup_disk.c, docs/resync.md).
 *
 * File <state_dir>/<vm>/replica.mark, one record of RDB_REPLMARK_LEN
 * bytes of text:
 *
 *   RDBRMARK 1 <boot_id> <generation:%016llx> <epoch:%llu> <state>
 *
 * padded with spaces, its last byte '\n'.  state: applying (an epoch's
 * writes may be in the replicas in part: they are at no epoch), done
 * (every write and sync of that epoch succeeded: the set is that epoch
 * of that protection), served (a restored guest may write the replicas).
 *
 * Every record is written with one pwrite at offset 0 and never synced,
 * on purpose: it says only what holds while this boot lasts.  The page
 * cache holds it and the replicas' writes alike; a process killed
 * (SIGKILL) after its pwrite returned leaves the record whole (a write
 * of one page is not cut by a signal), one killed before leaves the
 * record before it.  A host that crashed changes its boot id
 * (/proc/sys/kernel/random/boot_id), so a record from before claims
 * nothing, whatever reached the disk of it or of the replicas.
 *
 * Fail safe: a record that cannot be written is replaced by no marker
 * at all (the file removed), which says nothing; only when neither can
 * be done is the caller told not to write the replicas.
 */
#ifndef RDB_REPLMARK_H
#define RDB_REPLMARK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDB_REPLMARK_FILE "replica.mark"
#define RDB_REPLMARK_LEN 256

enum rdb_replmark_state {
	RDB_REPLMARK_APPLYING,
	RDB_REPLMARK_DONE,
	RDB_REPLMARK_SERVED,
};

/* What a record says. */
struct rdb_replmark_view {
	bool valid;			/* a well-formed record was read */
	bool same_boot;			/* ... written in this boot */
	bool done;			/* state done */
	enum rdb_replmark_state state;
	uint64_t gen, epoch;
	char boot[40];
	char why[700];			/* !valid: why not */
};

struct rdb_replmark {
	int fd;				/* -1: not open */
	/* A record could not be written: the file was removed (or that
	 * was tried), and nothing is written any more. */
	bool dead;
	char path[512];			/* "": never opened */
	char boot[40];			/* this boot's id, in every record */
	/* The record as open found it, before anything was written. */
	struct rdb_replmark_view found;
	char err[700];
};

/* This boot's id, "" trimmed of its newline; 0 or a negative errno. */
int rdb_replmark_boot_id(char *buf, size_t len);

/* The record at path, compared with this boot's id; 0, or a negative
 * errno with out->why (missing: -ENOENT; malformed: -EBADMSG). */
int rdb_replmark_read(const char *path, struct rdb_replmark_view *out);

/*
 * Whether v vouches for a replica set whole at an epoch >= min_epoch of
 * protection gen in this boot; false: why (for the operator).
 */
bool rdb_replmark_vouches(const struct rdb_replmark_view *v, uint64_t gen,
			  uint64_t min_epoch, char *why, size_t whylen);

void rdb_replmark_init(struct rdb_replmark *m);
/*
 * Reads the record at path into m->found, then opens it for writing
 * (created, 0600, if missing; nothing written yet).  < 0 (m->err):
 * the marker is dead from now on (see applying).
 */
int rdb_replmark_open(struct rdb_replmark *m, const char *path);
/*
 * Before any write of epoch epoch of protection gen reaches a replica
 * (epoch 0: the initial copy, or a replica made or attached for it).
 * The replicas may be written on 0: the record says applying (or the
 * marker is dead and its file gone), and on 1: the record could not be
 * written just now and the file was removed instead (m->err says why;
 * the marker is dead: it claims nothing from now on).  < 0: neither
 * (m->err): the file may still say done, the replicas must not be
 * written.
 */
int rdb_replmark_applying(struct rdb_replmark *m, uint64_t gen, uint64_t epoch);
/* After every write and sync of that epoch succeeded, on every disk.
 * 0: written, or nothing to write (a dead marker).  < 0 (m->err): the
 * write failed just now; the marker is dead, and what is left of the
 * file says applying, or is malformed. */
int rdb_replmark_done(struct rdb_replmark *m, uint64_t gen, uint64_t epoch);
/* The replicas go to a restored guest, which writes them: the record
 * says so, and the set is never a base again.  Returns as applying. */
int rdb_replmark_served(struct rdb_replmark *m, uint64_t gen, uint64_t epoch);
void rdb_replmark_close(struct rdb_replmark *m);	/* idempotent */

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The backup's disk replica and the write buffer of the epoch in flight.
 *
 * The primary streams every guest disk change (WRITE, ZERO, FLUSH) tagged
 * with its epoch.  The backup keeps epoch N's changes here, in arrival
 * order, and applies them to the replica only when N commits, so the
 * replica always equals the primary's disk as of the last committed
 * checkpoint (I4).  A failover discards what is buffered.
 *
 * Applying is a replay: records go to the replica in order with pwrite /
 * fallocate, and a FLUSH anywhere in the epoch ends the apply with one
 * fdatasync.  A replay that stopped midway (a write error, a full disk)
 * leaves the records buffered, and replaying them again from the first
 * gives exactly the state a single uninterrupted apply would have: each
 * record sets its range to fixed bytes, so earlier partial work is simply
 * overwritten in the same order.  Until that second apply succeeds the
 * replica is marked inconsistent (rdb_diskbuf_consistent) and must not be
 * served.
 *
 * Record, host byte order: op:u8 offset:u64 length:u64 [data if WRITE].
 */
#ifndef RDB_DISKBUF_H
#define RDB_DISKBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

enum rdb_disk_op {
	RDB_DISK_WRITE = 1,
	RDB_DISK_ZERO = 2,	/* also TRIM: the primary's trim reads back zero */
	RDB_DISK_FLUSH = 3,
};

struct rdb_diskbuf {
	int fd;			/* the replica; -1 if none */
	uint64_t size;
	struct rdb_buf recs;
	uint64_t nrecs;		/* records buffered (the epoch's disk ops) */
	uint64_t data_bytes;	/* WRITE payload buffered */
	uint64_t max_bytes;	/* buffer bound; exceeding it is -EFBIG */
	bool flush;		/* a FLUSH is buffered */
	bool consistent;	/* false after an apply that stopped midway */
	bool torn;		/* such an epoch was discarded: only a fresh
				 * replica (create/attach) is consistent again */
	/* statistics */
	uint64_t applied_recs, applied_bytes, syncs;
	uint64_t wb_pending;	/* initial copy's bytes since a writeback */
	/* Test hook: the apply fails with -EIO before record number
	 * fail_at (1-based) of the next apply; 0 disables. */
	uint64_t fail_at;
	bool fail_sync;		/* test hook: the next apply's sync fails */
	/* Test hook: the next apply stops with -EINTR right after its
	 * first WRITE reached the replica (what follows is not written). */
	bool stop_after_write;
	char err[200];
};

void rdb_diskbuf_init(struct rdb_diskbuf *db, uint64_t max_bytes);
/* Creates (or truncates) the replica at path, sparse, size bytes. */
int rdb_diskbuf_create(struct rdb_diskbuf *db, const char *path,
		       uint64_t size);
/* Uses an open file of size bytes as the replica (taken over: closed by
 * dispose). */
void rdb_diskbuf_attach_fd(struct rdb_diskbuf *db, int fd, uint64_t size);
void rdb_diskbuf_dispose(struct rdb_diskbuf *db);	/* idempotent */

/* 0 if [off, off+len) lies in the disk and len > 0; -ERANGE otherwise. */
int rdb_diskbuf_check_range(const struct rdb_diskbuf *db, uint64_t off,
			    uint64_t len);
/*
 * Buffers one change (len = data length for WRITE, range length for
 * ZERO, 0 for FLUSH).  -ERANGE for a range outside the disk, -EFBIG when
 * the epoch would exceed max_bytes, -ENOMEM.  Nothing is buffered on error.
 */
int rdb_diskbuf_add(struct rdb_diskbuf *db, enum rdb_disk_op op, uint64_t off,
		    uint64_t len, const uint8_t *data);
/* Applies one change to the replica at once (the initial copy, epoch 0,
 * and the apply below).  0 or a negative errno, message in err. */
int rdb_diskbuf_apply_one(struct rdb_diskbuf *db, enum rdb_disk_op op,
			  uint64_t off, uint64_t len, const uint8_t *data);
/* The initial copy wrote len bytes with apply_one: every
 * RDB_DISKBUF_WRITEBACK_BYTES the replica's writeback is started
 * (sync_file_range, not waited for).  The copy writes each block once,
 * so this costs no extra I/O, and the sync at epoch 0's commit, which
 * the guest's output waits for, finds little left to write (it had the
 * whole disk's data to write: 260-320 ms for 170 MiB here). */
#define RDB_DISKBUF_WRITEBACK_BYTES (8u << 20)
void rdb_diskbuf_initial_written(struct rdb_diskbuf *db, uint64_t len);
/* Replays the buffered epoch in order, syncs if it held a FLUSH, and
 * empties the buffer.  On error the buffer is kept (replay again or
 * discard) and the replica is marked inconsistent. */
int rdb_diskbuf_apply(struct rdb_diskbuf *db);
/*
 * The epoch of several disks, committed as one (I4 over every disk of
 * the VM): replays every disk's records, then syncs those with a FLUSH,
 * and empties the buffers only when all of it succeeded.  On error all
 * the buffers are kept (replay the set again, or discard it) and every
 * disk of the set is inconsistent: one disk at epoch N beside another
 * at N - 1 is no state the primary ever had.  *failed (if not NULL):
 * the index of the disk whose write or sync failed.
 */
#define RDB_DISKS_MAX 8
int rdb_diskbuf_apply_set(struct rdb_diskbuf *const *set, unsigned n,
			  unsigned *failed);
/* Drops the buffered epoch (it never committed).  If it had been
 * applied in part, the replica stays inconsistent for good. */
void rdb_diskbuf_discard(struct rdb_diskbuf *db);
/*
 * Reads [off, off+len) as the replica will hold it once the buffered
 * epoch is applied: the replica, then every buffered change that overlaps
 * it, in order (disk read tracking resolves its references with this).
 * -ERANGE outside the disk, -EIO for a torn replica or a short file.
 */
int rdb_diskbuf_read_applied(struct rdb_diskbuf *db, uint64_t off,
			     uint8_t *buf, uint64_t len);
/* fdatasync of the replica (before it is served after failover). */
int rdb_diskbuf_sync(struct rdb_diskbuf *db);
bool rdb_diskbuf_consistent(const struct rdb_diskbuf *db);
const char *rdb_diskbuf_error(const struct rdb_diskbuf *db);

#endif

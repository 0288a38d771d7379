/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The primary's activity log (DRBD's activity log is the model): which
 * 1 MiB extents of its image may differ from the backup's committed
 * state, kept durable so that it outlives a power pull.  After one, the
 * backup runs the VM; when the old primary's host comes back, the VM is
 * protected back to its old image, and only these extents (with what the
 * survivor wrote since) are copied (docs/resync.md).
 *
 * What it guarantees, for a log whose header names generation G (G != 0,
 * a protection): every extent NOT set in the log, as the log is on disk,
 * holds on the image, as the image is on disk, what the backup's replica
 * holds in it at every commit of G after the extent's last change.  The
 * disk server (disksrv.c) keeps it so:
 *
 *   arm(G)       at the protection's first recorded change: the image is
 *                synced, then the log is written with G and the change's
 *                extents, then synced.  (The backup's initial copy reads
 *                the whole image after recording began: everything before
 *                is in its epoch 0.)
 *   add          before a change reaches the image: its extents not yet
 *                in the log are set and the log synced.
 *   retire       an extent whose last change is in an epoch the backup
 *                committed (its ring position <= committed_pos) and was
 *                complete before an image sync began, leaves the log once
 *                that sync is done (cleared lazily: a stale bit is safe).
 *   invalidate   a change while not recording (protection ended), or a
 *                full log with nothing to retire: generation 0, synced,
 *                before the change; never armed again for that G.
 *
 * File: a 4 KiB header (magic "RDBACTL1", version, generation, disk size,
 * extent shift, extents, CRC32C of those), then one bit per extent, in
 * whole 4 KiB pages.  A page torn by the power loss holds old and new
 * sectors; old bits set are a superset of what may differ, so a torn
 * page is safe and the bitmap carries no checksum.  A header that fails
 * its CRC reads as generation 0 (a full copy, never a wrong resync).
 *
 * Cost: one fdatasync of the log per change to an extent not in it, and
 * an image fdatasync per retire round (on a thread, every second).
 */
#ifndef RDB_ACTLOG_H
#define RDB_ACTLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDB_ACTLOG_SHIFT 20u		/* 1 MiB extents */
#define RDB_ACTLOG_HDR 4096u

struct rdb_actlog {
	int fd;
	char path[256];
	uint64_t disk_size, nextents;
	uint64_t generation;		/* valid for, on disk; 0: none */
	uint64_t broken_gen;		/* given up for: never armed again */
	uint32_t max;			/* extents it may hold */
	uint64_t active;		/* extents set now */
	uint8_t *bits;			/* as on disk (after our writes) */
	size_t bits_len;		/* whole pages */
	uint8_t *dirty_pages;		/* pages cleared, not written yet */
	uint64_t *last_seq, *last_pos;	/* per extent */
	uint64_t adds, log_syncs, retired, full_stalls, invalidations;
};

void rdb_actlog_init(struct rdb_actlog *al);
/* Opens the log at path (created with generation 0 if missing); a valid
 * log of this disk size is kept as it is, anything else reset to 0. */
int rdb_actlog_open(struct rdb_actlog *al, const char *path,
		    uint64_t disk_size, uint32_t max, char *err, size_t errlen);
void rdb_actlog_close(struct rdb_actlog *al);	/* idempotent */

/*
 * Before a change of [off, off+len) reaches the image (img_fd), while the
 * backup records changes for protection gen: arms the log for gen, or
 * adds the change's extents, durably.  A full log retires what it can
 * (syncing the image now) and is given up for gen if that is not enough.
 * committed_pos: see rdb_actlog_retire.  0, or a negative errno if the
 * log could not be written: the change must not be made as if logged.
 */
int rdb_actlog_before_change(struct rdb_actlog *al, int img_fd, uint64_t gen,
			     uint64_t off, uint64_t len, uint64_t seq,
			     uint64_t committed_pos);
/* Before a change while nothing records: the log stops being valid. */
int rdb_actlog_invalidate(struct rdb_actlog *al);
/* After the change (sequence number seq, counted by the caller) is in
 * the image, and in the ring up to pos (UINT64_MAX: not in the ring). */
void rdb_actlog_after_change(struct rdb_actlog *al, uint64_t off, uint64_t len,
			     uint64_t seq, uint64_t pos);
/* Whether an image sync now would let some extent retire. */
bool rdb_actlog_retirable(const struct rdb_actlog *al, uint64_t committed_pos);
/* An image sync that began after change synced_seq completed is done:
 * extents whose last change is <= synced_seq and whose ring position is
 * <= committed_pos leave the log (written without a sync). */
void rdb_actlog_retire(struct rdb_actlog *al, uint64_t synced_seq,
		       uint64_t committed_pos);

/* The log as another process left it (the backup side, no server). */
struct rdb_actlog_view {
	uint64_t generation;		/* 0: invalid, missing, other size */
	uint32_t shift;
	uint64_t nextents;
	uint8_t *bits;
};
int rdb_actlog_read(const char *path, uint64_t disk_size,
		    struct rdb_actlog_view *out, char *err, size_t errlen);
/* The set extents, ascending (malloc'd into *ext_out). */
int rdb_actlog_view_extents(const struct rdb_actlog_view *v, uint64_t **ext_out,
			    uint32_t *count_out);
void rdb_actlog_view_dispose(struct rdb_actlog_view *v);

#endif

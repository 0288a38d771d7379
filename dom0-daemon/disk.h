/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A VM's disk as remusdbd serves it: an image file exported over NBD on a
 * unix socket that QEMU's `-drive driver=nbd,server.type=unix,...` (or
 * -blockdev) connects to — by a disk server process of its own
 * (disksrv.h), so that QEMU's disk requests never wait on this daemon's
 * event loop.
 *
 * While the owner records (rdb_disk_set_recording: from the start of
 * protection), every change that reached the image is reported to its
 * hook in the order the server completed them: the server puts each in a
 * shared ring (diskring.h) before QEMU gets its reply, and this side
 * takes them from the ring when the server says so, or when the owner
 * asks (rdb_disk_drain: before an epoch is closed, which makes "completed
 * before the pause" mean "sent in that epoch").  A change that failed
 * locally is answered with an NBD error; what of it reached the image is
 * reported all the same.  If the server could not pass every change on
 * (the ring stayed full: this daemon stalled), the lost hook says so.
 *
 * FLUSH and FUA writes: fdatasync()ed before they are answered — unless
 * the disk is replicated (rdb_disk_set_replicated): then the backup's
 * replica carries the guest's flushes (it applies a flush as an
 * fdatasync before it acknowledges the epoch, and every output that
 * could tell a client a flush happened waits for that acknowledgement),
 * and the image is synced once, when replication ends, before any held
 * output may leave.
 */
#ifndef RDB_DISK_H
#define RDB_DISK_H

#include <stdbool.h>
#include <stdint.h>

#include "diskbuf.h"
#include "diskring.h"
#include "disksrv.h"
#include "readidx.h"
#include "evloop.h"

typedef void (*rdb_disk_hook)(void *opaque, enum rdb_disk_op op,
			      uint64_t off, uint64_t len, const uint8_t *data);
/* The server stopped passing changes on (why: for the log), or exited. */
typedef void (*rdb_disk_lost_hook)(void *opaque, const char *why);

/* The disk server's program: remusdbd itself (--disk-server), unless a
 * test points it elsewhere. */
extern const char *rdb_disk_server_exe;

struct rdb_disk {
	char vm[65];
	char image[256];
	char sock_path[108];
	int img_fd;			/* ours: the initial copy, syncs */
	int notify_fd, life_fd, ring_fd;
	int pid;			/* the disk server's */
	uint64_t size, ring_bytes, room_wait_ns;
	struct rdb_evloop *loop;
	struct rdb_dring ring;
	void *map;
	size_t map_len;
	rdb_disk_hook hook;
	rdb_disk_lost_hook lost;
	void *opaque;
	bool replicated;
	bool lost_seen;
	struct rdb_readidx *ridx;	/* disk read tracking, or NULL */
	unsigned ridx_dev;		/* ... its entries' device index */
	uint64_t read_epoch;		/* the epoch reads drained now belong to */
	uint64_t synced_changes;	/* writes + zeroes at our last sync */
	uint64_t syncs, restarts, started_ns;
	/* what the server keeps beside the image (disksrv.h), for its
	 * restarts too; "": nothing */
	char al_path[256], wmap_path[256];
	uint32_t al_max;
};

void rdb_disk_init(struct rdb_disk *dk);
/*
 * Opens image (which must exist; its size is the disk's), syncs it, and
 * starts its server on sock_path with a ring of ring_bytes; the server
 * waits at most room_wait_ns for room (then gives up on the replica).
 * logs: the activity log and written map the server keeps (files
 * created if missing; the log's state and counters in the ring's al_*
 * fields), or NULL for none.  Returns once the socket accepts
 * connections.  hook may be NULL.
 */
int rdb_disk_open(struct rdb_disk *dk, struct rdb_evloop *loop,
		  const char *vm, const char *image, const char *sock_path,
		  uint64_t ring_bytes, uint64_t room_wait_ns,
		  const struct rdb_disk_logs *logs,
		  rdb_disk_hook hook, rdb_disk_lost_hook lost, void *opaque,
		  char *err, size_t errlen);
/*
 * Disk read tracking (readidx.h): the server hashes the blocks the guest
 * reads (with seed) while recording, and the drain keeps ix up to date,
 * reads in and changes out, in the order they happened, under dev (the
 * disk's device index: one index serves every disk of the VM).  NULL
 * stops it.  ix is cleared here and whenever recording starts or stops
 * (all of it: entries are hints, and a disk not recording would leave
 * its own stale).
 */
void rdb_disk_set_read_tracking(struct rdb_disk *dk, struct rdb_readidx *ix,
				unsigned dev, uint64_t seed);
/* Stops the server (it exits when its end of our socketpair closes). */
void rdb_disk_close(struct rdb_disk *dk);	/* idempotent */
bool rdb_disk_connected(const struct rdb_disk *dk);
/*
 * Serves image on sock_path from a server process without a ring, until
 * that is killed: after failover the restored QEMU opens its disk before
 * it answers QMP, and the disk must outlive the daemon as the restored
 * QEMU does.  written_map: a written map (wmap.h) the server marks every
 * change in (created if missing, its bits kept if there), or NULL.
 * Returns once the socket accepts connections.
 */
int rdb_disk_serve_child(const char *vm, const char *image,
			 const char *sock_path, const char *written_map,
			 int *pid_out, char *err, size_t errlen);
/*
 * on: the server puts every change in the ring from now on (what it had
 * there is dropped first); off: it stops.
 */
void rdb_disk_set_recording(struct rdb_disk *dk, bool on);
/* Reports every change in the ring to the hook now. */
void rdb_disk_drain(struct rdb_disk *dk);
/*
 * on: a backup's replica carries the guest's flushes from now on (call it
 * before any output may be released on the backup's acknowledgement).
 * off: the image is fdatasync()ed now if anything was written since its
 * last sync (call it before held output is released without the backup);
 * returns that sync's result.
 */
int rdb_disk_set_replicated(struct rdb_disk *dk, bool on);
/* Reads len bytes at off from the image (the initial copy). */
int rdb_disk_pread(struct rdb_disk *dk, uint64_t off, uint8_t *dst,
		   uint64_t len);
/*
 * The activity log (actlog.h).  set_log_generation: the generation the
 * log is armed for once changes are recorded (call before
 * rdb_disk_set_recording(on); greater than any before for this image);
 * set_committed_pos: every change up to this ring position is in an
 * epoch the backup committed (monotonic: a lower one is ignored);
 * ring_pos: the position drained so far (after rdb_disk_drain at an
 * epoch's close: that epoch's end).
 */
void rdb_disk_set_log_generation(struct rdb_disk *dk, uint64_t gen);
void rdb_disk_set_committed_pos(struct rdb_disk *dk, uint64_t pos);
uint64_t rdb_disk_ring_pos(const struct rdb_disk *dk);
/*
 * keep_log: while not recording, the server keeps the log armed for the
 * last generation set (each change's extents set, never retired) instead
 * of invalidating it at the first change (actlog.h, rdb_actlog_keep).
 * adopt_log: the log's extents go to the backup in the epoch being
 * built (a resync from the log): what never reached it counts as put at
 * the ring's head now, returned (rdb_actlog_adopt).
 */
void rdb_disk_keep_log(struct rdb_disk *dk, bool keep);
uint64_t rdb_disk_adopt_log(struct rdb_disk *dk);
/* The server's counters. */
const struct rdb_dring_shared *rdb_disk_stats(const struct rdb_disk *dk);

#endif

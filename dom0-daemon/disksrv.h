/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The disk server: a VM's image exported over NBD on a unix socket, in a
 * process of its own (remusdbd --disk-server, spawned by disk.h), so that
 * QEMU's disk never waits on remusdbd's event loop.  QEMU's stop-and-copy
 * drains the guest's disk requests under its big lock: served from the
 * daemon's loop, a stalled daemon froze the guest beyond the watchdog's
 * reach (I5).  One NBD client at a time; a new connection replaces a
 * dead one (QEMU reconnecting).
 *
 * Every change that reached the image goes into the ring (diskring.h)
 * while remusdbd asks for it (`record`), after it succeeded locally and
 * before QEMU gets its reply.  A change that failed locally is answered
 * with an NBD error — and whatever of it may have reached the image (a
 * write that failed part way, or whose FUA sync failed) is read back and
 * put in the ring all the same, so the replica never misses what the
 * image holds.
 *
 * No room in the ring (remusdbd stopped or stalled): the server waits at
 * most room_wait_ns (the VM's checkpoint deadline), then gives up on the
 * replica — `lost` says why, recording stops, the guest's flushes are
 * local again and the image is synced — and answers.  remusdbd drops
 * protection when it sees `lost`.  The guest's disk is never held longer.
 *
 * FLUSH and FUA: fdatasync()ed before the reply, unless `replicated`:
 * then the backup's replica carries the guest's flushes (disk.h).
 *
 * For a resync after a failover (docs/resync.md) it may keep, beside the
 * image: a written map (wmap.h), every block a change may touch marked
 * before the change reaches the image; and, with a ring, an activity log
 * (actlog.h), the extents a change touches set durably before it reaches
 * the image while recording, retired by image syncs in a thread of its
 * own once the backup committed them (the ring's al_* fields).
 */
#ifndef RDB_DISKSRV_H
#define RDB_DISKSRV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "actlog.h"
#include "diskring.h"
#include "evloop.h"
#include "nbd.h"
#include "wmap.h"

/* What a disk server keeps beside the image; NULL paths: nothing. */
struct rdb_disk_logs {
	const char *activity_log;	/* actlog.h; needs a ring */
	uint32_t activity_log_max;	/* extents; 0: RDB_ACTLOG_MAX_DEFAULT */
	const char *written_map;	/* wmap.h */
	/* keep the activity log armed for this generation from the first
	 * change on (the ring's al_gen and al_keep set before the server
	 * serves): a re-adopted primary's log, so that protecting the VM
	 * again resyncs its extents (0: not) */
	uint64_t keep_gen;
};

struct rdb_disksrv {
	char vm[65];
	char image[256];
	int img_fd, listen_fd, client_fd, notify_fd;
	uint64_t size;
	struct rdb_evloop *loop;
	struct rdb_nbd_server nbd;
	bool nbd_init;
	struct rdb_dring ring;		/* sh: shared, or `own` without a ring */
	bool has_ring;
	bool dirty;			/* written since the image's last sync */
	struct rdb_dring_shared own;
	struct rdb_wmap wmap;
	bool has_wmap;
	struct rdb_actlog al;
	bool has_al;
	/* the log's retire syncs: requests to the thread, results back */
	pthread_t rt_thread;
	bool rt_started;
	int rt_req[2], rt_done[2];
	uint64_t rt_covered, rt_timer;
	uint64_t al_adopt_seen;		/* the ring's al_adopt_req last done */
};

/* Opens a VM's disk image read-write: a regular file whose size, a
 * non-zero multiple of 512, is the disk's; a qcow2 file is extended
 * first to the size it may grow to, and one remusdbd cannot serve is
 * refused (qcow2.h).  0, or an error in err. */
int rdb_disk_open_image(const char *image, int *fd_out, uint64_t *size_out,
			char *err, size_t errlen);

/*
 * One disk server per image.  A server holds a write lock (an open file
 * description's, F_OFD_SETLK, on one byte at 2^62: not QEMU's image
 * locking bytes, so qemu-img still opens it) for as long as it runs, and
 * refuses to start on an image another holds: a server left running (a
 * VM restored on this host before the daemon restarted: its replica's
 * server outlives the daemon) keeps serving its QEMU, and a second one
 * on the same image would take writes nobody replicates.
 * rdb_disk_image_lock: that lock on fd (0, or -EBUSY / an errno with
 * err).  rdb_disk_image_free: 0 when no server holds image's lock
 * (waiting up to wait_ns for one on its way out), -EBUSY with err
 * otherwise.
 */
int rdb_disk_image_lock(int fd, const char *image, char *err, size_t errlen);
int rdb_disk_image_free(const char *image, uint64_t wait_ns, char *err,
			size_t errlen);

/*
 * Serves image (opened here read-write; its size, a non-zero multiple of
 * 512, is the disk's) to clients of listen_fd, which it takes over.
 * ring_map: an initialised ring mapping (diskring.h), or NULL to serve
 * without one (the backup's replica after a failover); notify_fd: an
 * eventfd written after every change put in the ring, or -1; logs: what
 * to keep beside the image, or NULL.
 */
int rdb_disksrv_start(struct rdb_disksrv *s, struct rdb_evloop *loop,
		      const char *vm, const char *image, int listen_fd,
		      void *ring_map, int notify_fd,
		      const struct rdb_disk_logs *logs, char *err, size_t errlen);
void rdb_disksrv_stop(struct rdb_disksrv *s);	/* idempotent */

/*
 * remusdbd --disk-server VM IMAGE LISTEN_FD RING_FD NOTIFY_FD LIFE_FD
 *          [--activity-log PATH [--activity-log-max N]] [--written-map PATH]:
 * the process (fds by number, -1 for none).  It runs until LIFE_FD (its
 * end of a socketpair with remusdbd) reads EOF — or, without one, until
 * it is killed.
 */
int rdb_disksrv_main(int argc, char **argv);

#endif

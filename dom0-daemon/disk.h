/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A VM's disk as remusdbd serves it: an image file exported over NBD on a
 * unix socket that QEMU's `-drive driver=nbd,server.type=unix,...` (or
 * -blockdev) connects to.  One QEMU at a time; a new connection replaces
 * a dead one (QEMU reconnecting).
 *
 * Every change that reaches the image is reported to the owner's hook
 * after it succeeded locally and before QEMU gets its reply: the primary
 * streams it to the backup in that order, which is what makes "completed
 * before the pause" mean "sent in that epoch".  A change that failed
 * locally is answered with an NBD error and never reported.
 *
 * FLUSH and FUA writes: fdatasync()ed before they are answered — unless
 * the disk is replicated (rdb_disk_set_replicated): then the backup's
 * replica carries the guest's flushes (it applies a flush as an
 * fdatasync before it acknowledges the epoch, and every output that
 * could tell a client a flush happened waits for that acknowledgement),
 * and the image is synced once, when replication ends, before any held
 * output may leave.  A flush then costs the guest no local sync inside a
 * checkpoint's drain, and the daemon's event loop never waits on one.
 */
#ifndef RDB_DISK_H
#define RDB_DISK_H

#include <stdbool.h>
#include <stdint.h>

#include "diskbuf.h"
#include "evloop.h"
#include "nbd.h"

typedef void (*rdb_disk_hook)(void *opaque, enum rdb_disk_op op,
			      uint64_t off, uint64_t len, const uint8_t *data);

struct rdb_disk {
	char vm[65];
	char image[256];
	char sock_path[108];
	int img_fd, listen_fd, client_fd;
	uint64_t size;
	struct rdb_evloop *loop;
	struct rdb_nbd_server nbd;
	bool nbd_init;
	rdb_disk_hook hook;
	void *opaque;
	bool replicated;		/* flushes carried by the backup */
	bool dirty;			/* written since the image's last sync */
	/* statistics */
	uint64_t reads, writes, zeroes, flushes, errors, connects;
	uint64_t syncs;			/* fdatasync()s of the image */
	uint64_t read_bytes, written_bytes;
};

void rdb_disk_init(struct rdb_disk *dk);
/* Opens image (which must exist; its size is the disk's) and listens on
 * sock_path.  hook may be NULL. */
int rdb_disk_open(struct rdb_disk *dk, struct rdb_evloop *loop,
		  const char *vm, const char *image, const char *sock_path,
		  rdb_disk_hook hook, void *opaque, char *err, size_t errlen);
void rdb_disk_close(struct rdb_disk *dk);	/* idempotent */
bool rdb_disk_connected(const struct rdb_disk *dk);
/*
 * Serves image on sock_path from a child process of its own, until that
 * is killed: after failover the restored QEMU opens its disk before it
 * answers QMP, so the daemon's loop (waiting for that QMP) cannot serve
 * it; and the disk must outlive the daemon as the restored QEMU does.
 * Returns once the socket accepts connections (or with an error).
 */
int rdb_disk_serve_child(const char *vm, const char *image,
			 const char *sock_path, int *pid_out, char *err,
			 size_t errlen);
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

#endif

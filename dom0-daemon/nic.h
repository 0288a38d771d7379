/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A guest NIC's path through remusdbd: QEMU's `-netdev stream` socket on
 * one side (QEMU connects to us, and reconnects), the host's tap device on
 * the other.  Frames from the network reach the guest at once; frames
 * from the guest go to the owner's callback, which decides whether they
 * are held for a checkpoint (primary) or sent now (rdb_nic_to_wire).
 */
#ifndef RDB_NIC_H
#define RDB_NIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "evloop.h"
#include "netstream.h"

struct rdb_nic {
	struct rdb_evloop *loop;
	char vm[65];
	char path[108];
	int listen_fd, fd, tap_fd;
	struct rdb_netstream ns;
	rdb_frame_cb from_guest;
	void *opaque;
	/* optional: sees each frame from the network first; false = taken */
	bool (*from_wire)(void *opaque, const uint8_t *frame, size_t len);
};

/* Sets every field to "nothing open"; call before open or close. */
void rdb_nic_init(struct rdb_nic *n);
/* Listens on sock_path for QEMU and attaches to the tap; err says what
 * failed. */
int rdb_nic_open(struct rdb_nic *n, struct rdb_evloop *loop, const char *vm,
		 const char *sock_path, const char *tap, rdb_frame_cb from_guest,
		 void *opaque, char *err, size_t errlen);
void rdb_nic_close(struct rdb_nic *n);	/* idempotent */
/*
 * Hands an open NIC to a new owner without closing anything (QEMU stays
 * connected, frames in flight stay queued): dst takes src's sockets and
 * tap, with new callbacks and no wire filter; src is left as after
 * rdb_nic_init.  A restored VM protected again: the backup's NIC becomes
 * the primary's.  Fails only if the loop cannot take the fds back: then
 * src is as it was (its fds, callbacks, filter) and dst as after init.
 */
int rdb_nic_move(struct rdb_nic *dst, struct rdb_nic *src,
		 rdb_frame_cb from_guest, void *opaque);
/* Frames from the network go to f first (opaque as given at open); f
 * returns false for a frame it took.  NULL: straight to the guest. */
void rdb_nic_set_wire_filter(struct rdb_nic *n,
			     bool (*f)(void *opaque, const uint8_t *frame, size_t len));
/* Reads what QEMU has written so far and hands it to from_guest, now
 * (the primary calls it while the VM is stopped, so frames the guest sent
 * before a checkpoint belong to that checkpoint's epoch). */
void rdb_nic_poll_guest(struct rdb_nic *n);
/* A frame to the guest, queued now (drops if QEMU is not connected). */
void rdb_nic_to_guest(struct rdb_nic *n, const uint8_t *frame, size_t len);
/* A guest frame out to the network, now (drops, never blocks). */
void rdb_nic_to_wire(struct rdb_nic *n, const uint8_t *frame, size_t len);
bool rdb_nic_connected(const struct rdb_nic *n);

#endif

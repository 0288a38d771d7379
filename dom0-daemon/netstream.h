/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * QEMU's `-netdev stream` framing on the daemon's side of the socket:
 *
 *   stream = frame*      frame = length:be32 bytes[length]
 *
 * Reading hands each whole Ethernet frame to a callback; writing queues
 * frames for the guest and flushes as the socket allows.  A guest that
 * does not read its NIC makes us drop frames (as a NIC would), never
 * block.
 */
#ifndef RDB_NETSTREAM_H
#define RDB_NETSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define RDB_NET_MAX_FRAME 65536u
#define RDB_NET_MAX_QUEUED (4u << 20)

typedef void (*rdb_frame_cb)(void *opaque, const uint8_t *frame, size_t len);

struct rdb_netstream {
	struct rdb_buf in, out;
	uint64_t frames_in, frames_out, dropped_out;
};

void rdb_netstream_init(struct rdb_netstream *ns);
void rdb_netstream_dispose(struct rdb_netstream *ns);	/* idempotent */
/* Forget partial frames: the connection was replaced. */
void rdb_netstream_reset(struct rdb_netstream *ns);
/* 0, or -EAGAIN (nothing to read), -ECONNRESET (EOF), -EPROTO (bad length). */
int rdb_netstream_read(struct rdb_netstream *ns, int fd, rdb_frame_cb cb,
		       void *opaque);
/* Decodes bytes already in hand (tests, and read's back end). */
int rdb_netstream_decode(struct rdb_netstream *ns, const uint8_t *p, size_t n,
			 rdb_frame_cb cb, void *opaque);
void rdb_netstream_queue(struct rdb_netstream *ns, const uint8_t *frame,
			 size_t len);
/* 0 when everything went out, -EAGAIN when some is left, or an error. */
int rdb_netstream_flush(struct rdb_netstream *ns, int fd);
size_t rdb_netstream_pending(const struct rdb_netstream *ns);

#endif

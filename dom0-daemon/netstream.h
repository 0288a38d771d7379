/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * QEMU's `-netdev stream` framing, on the daemon's side of the socket
 * (QEMU 10.0 net/stream.c + net/net.c net_fill_rstate, no vnet header):
 *
 *   stream = frame*
 *   frame  = length:be32 bytes[length]      1 <= length <= RDB_NET_MAX_FRAME
 *
 * Reading hands each whole Ethernet frame to a callback, whatever the
 * split of the bytes.  A length of 0 or above the bound is a protocol
 * error (-EPROTO): the stream cannot be resynchronised, so the owner
 * drops the connection and QEMU reconnects (reconnect-ms).  The decoder
 * then refuses everything until rdb_netstream_reset.
 *
 * Writing queues frames for the guest and flushes as the non-blocking
 * socket allows.  A guest that does not drain its NIC makes us drop
 * frames past RDB_NET_MAX_QUEUED, as a NIC would; nothing here blocks.
 */
#ifndef RDB_NETSTREAM_H
#define RDB_NETSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* QEMU's NET_BUFSIZE (4096 + 65536): the largest frame its own decoder
 * accepts; a longer one makes it drop the connection. */
#define RDB_NET_MAX_FRAME (65536u + 4096u)
#define RDB_NET_MAX_QUEUED (4u << 20)

typedef void (*rdb_frame_cb)(void *opaque, const uint8_t *frame, size_t len);

struct rdb_netstream {
	struct rdb_buf in, out;
	bool broken;			/* saw a bad length; reset to reuse */
	uint64_t frames_in, bytes_in;	/* decoded from QEMU */
	uint64_t frames_out, bytes_out;	/* queued for QEMU */
	uint64_t dropped_out, dropped_out_bytes;	/* refused by queue */
};

void rdb_netstream_init(struct rdb_netstream *ns);
void rdb_netstream_dispose(struct rdb_netstream *ns);	/* idempotent */
/* The connection was replaced: forgets partial input and everything
 * queued (a frame half-written to the old socket cannot be finished). */
void rdb_netstream_reset(struct rdb_netstream *ns);

/* Reads what the non-blocking fd has (bounded work per call) and calls
 * cb for each whole frame.  0 after reading something; -EAGAIN when
 * nothing was there; -ECONNRESET on EOF; -EPROTO on a bad length;
 * -ENOMEM; another negative errno from read. */
int rdb_netstream_read(struct rdb_netstream *ns, int fd, rdb_frame_cb cb,
		       void *opaque);
/* Decodes n bytes already in hand; 0, -EPROTO or -ENOMEM. */
int rdb_netstream_decode(struct rdb_netstream *ns, const uint8_t *p, size_t n,
			 rdb_frame_cb cb, void *opaque);

/* Queues one frame for the guest: 0, or the frame is dropped and counted:
 * -EINVAL (len 0 or above RDB_NET_MAX_FRAME), -ENOBUFS (queue full),
 * -ENOMEM. */
int rdb_netstream_queue(struct rdb_netstream *ns, const uint8_t *frame,
			size_t len);
/* Call when fd is writable.  0 when everything went out, -EAGAIN when
 * some is left (wait for writability), another negative errno when the
 * peer is gone. */
int rdb_netstream_flush(struct rdb_netstream *ns, int fd);
/* Bytes queued and not yet written. */
size_t rdb_netstream_pending(const struct rdb_netstream *ns);

#endif

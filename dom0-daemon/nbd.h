/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * NBD server, fixed newstyle, simple replies: a pure state machine that
 * QEMU's `-drive driver=nbd` talks to.  Bytes in, replies out (into
 * `out`), storage through an ops table.  Grammar (all big-endian):
 *
 *   server greeting = "NBDMAGIC" "IHAVEOPT" flags:u16 (FIXED_NEWSTYLE|NO_ZEROES)
 *   client flags    = u32 (must have FIXED_NEWSTYLE)
 *   option          = "IHAVEOPT" opt:u32 len:u32 data[len]
 *     EXPORT_NAME 1 : data = name; reply size:u64 tflags:u16 [124 zero bytes]
 *                     then transmission (no error path: unknown name closes)
 *     GO 7 / INFO 6 : data = namelen:u32 name nreq:u16 info:u16*nreq
 *                     reply INFO(EXPORT) [INFO(BLOCK_SIZE)] ACK; GO then transmits
 *     LIST 3        : reply SERVER(namelen:u32 name) ACK
 *     ABORT 2       : reply ACK, close
 *     others        : reply ERR_UNSUP
 *   option reply    = 0x3e889045565a9:u64 opt:u32 type:u32 len:u32 data[len]
 *   request         = 0x25609513:u32 flags:u16 type:u16 cookie:u64 off:u64 len:u32
 *                     [len bytes if WRITE]
 *   simple reply    = 0x67446698:u32 error:u32 cookie:u64 [len bytes if READ ok]
 *
 * Every request is validated before it reaches storage: a range past the
 * end or overflowing, a zero or oversized length, unknown flags or type
 * get an NBD error (EINVAL/ENOSPC/ENOTSUP), never a crash.  A WRITE too
 * big to take is a protocol error: its payload cannot be skipped safely.
 */
#ifndef RDB_NBD_H
#define RDB_NBD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define RDB_NBD_MAX_REQUEST (32u << 20)	/* QEMU's NBD_MAX_BUFFER_SIZE */
#define RDB_NBD_MAX_OPTION 4096

/* Storage behind the export; each returns 0 or a negative errno. */
struct rdb_nbd_ops {
	int (*read)(void *opaque, uint64_t off, uint32_t len, uint8_t *dst);
	int (*write)(void *opaque, uint64_t off, uint32_t len,
		     const uint8_t *src, bool fua);
	int (*flush)(void *opaque);
	int (*trim)(void *opaque, uint64_t off, uint32_t len);
	int (*write_zeroes)(void *opaque, uint64_t off, uint32_t len,
			    bool may_trim);
};

enum rdb_nbd_phase {
	RDB_NBD_CLIENT_FLAGS,
	RDB_NBD_OPTIONS,
	RDB_NBD_TRANSMISSION,
	RDB_NBD_CLOSED,
};

struct rdb_nbd_server {
	enum rdb_nbd_phase phase;
	char export_name[256];
	uint64_t size;
	bool no_zeroes;
	const struct rdb_nbd_ops *ops;
	void *opaque;
	struct rdb_buf in;
	struct rdb_buf out;	/* bytes for the client, in order */
	uint64_t requests, errors;
	char err[160];
};

/* Queues the server greeting into out. */
int rdb_nbd_server_init(struct rdb_nbd_server *s, const char *export_name,
			uint64_t size, const struct rdb_nbd_ops *ops,
			void *opaque);
void rdb_nbd_server_dispose(struct rdb_nbd_server *s);	/* idempotent */
/* 0: keep going; 1: the client ended the session cleanly (DISC, ABORT);
 * -EPROTO: broken client, close the connection (see the error). */
int rdb_nbd_server_feed(struct rdb_nbd_server *s, const uint8_t *p, size_t n);
const char *rdb_nbd_server_error(const struct rdb_nbd_server *s);
/* NBD's error number for a negative errno. */
uint32_t rdb_nbd_errno(int neg_errno);

#endif

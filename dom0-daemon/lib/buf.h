/* SPDX-License-Identifier: GPL-2.0-only */
/* A growable byte queue: append at the tail, consume from the head. */
#ifndef RDB_BUF_H
#define RDB_BUF_H

#include <stddef.h>
#include <stdint.h>

struct rdb_buf {
	uint8_t *data;		/* unconsumed bytes start here ... */
	size_t len;		/* ... and this many follow */
	uint8_t *mem;
	size_t cap;
};

void rdb_buf_init(struct rdb_buf *b);
void rdb_buf_dispose(struct rdb_buf *b);	/* idempotent */
void rdb_buf_reset(struct rdb_buf *b);
/* Room for n more bytes at the tail; returns where they go, NULL on ENOMEM. */
uint8_t *rdb_buf_reserve(struct rdb_buf *b, size_t n);
int rdb_buf_append(struct rdb_buf *b, const void *p, size_t n);
void rdb_buf_consume(struct rdb_buf *b, size_t n);
/* Sends what the socket takes now: 0 when empty after, -EAGAIN when bytes
 * remain, another negative errno when the peer is gone. */
int rdb_buf_write_fd(struct rdb_buf *b, int fd);
/* Sends everything before deadline_ns or fails (-ETIMEDOUT). */
int rdb_buf_write_all_fd(struct rdb_buf *b, int fd, uint64_t deadline_ns);

#endif

// SPDX-License-Identifier: GPL-2.0-only
#include "buf.h"
#include "sockutil.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

void rdb_buf_init(struct rdb_buf *b)
{
	memset(b, 0, sizeof(*b));
}

void rdb_buf_dispose(struct rdb_buf *b)
{
	free(b->mem);
	memset(b, 0, sizeof(*b));
}

void rdb_buf_reset(struct rdb_buf *b)
{
	b->data = b->mem;
	b->len = 0;
}

uint8_t *rdb_buf_reserve(struct rdb_buf *b, size_t n)
{
	size_t head = b->data ? (size_t)(b->data - b->mem) : 0;
	size_t need, cap;
	uint8_t *m;

	/* No size_t wrap-around below: a request this large fails outright. */
	if (n > SIZE_MAX / 4 - b->len - head)
		return NULL;
	need = b->len + n;
	/* A fresh buffer allocates even for n == 0: NULL means ENOMEM. */
	if (b->mem && head + need <= b->cap)
		return b->data + b->len;
	/* Sliding back when at least half as much was consumed as is left:
	 * each byte moved was paid for by half a byte consumed.  Otherwise
	 * the buffer doubles, and many appends fit before the next copy.
	 * (Copying into a buffer of the same size each time it filled, a
	 * queue kept near its high water, as a throttled stream's is, was
	 * copied whole every few appends: 60 MiB per 4 MiB sent.) */
	if (b->mem && need <= b->cap && 2 * head >= b->len) {
		memmove(b->mem, b->data, b->len);
		b->data = b->mem;
		return b->data + b->len;
	}
	cap = b->cap ? 2 * b->cap : 4096;
	while (cap < need)
		cap *= 2;
	m = malloc(cap);
	if (!m)
		return NULL;
	if (b->len)
		memcpy(m, b->data, b->len);
	free(b->mem);
	b->mem = m;
	b->data = m;
	b->cap = cap;
	return b->data + b->len;
}

int rdb_buf_append(struct rdb_buf *b, const void *p, size_t n)
{
	uint8_t *dst = rdb_buf_reserve(b, n);

	if (!dst)
		return -ENOMEM;
	memcpy(dst, p, n);
	b->len += n;
	return 0;
}

void rdb_buf_consume(struct rdb_buf *b, size_t n)
{
	if (n >= b->len) {
		rdb_buf_reset(b);
		return;
	}
	b->data += n;
	b->len -= n;
}

int rdb_buf_write_fd(struct rdb_buf *b, int fd)
{
	while (b->len) {
		ssize_t r = send(fd, b->data, b->len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (r > 0) {
			rdb_buf_consume(b, (size_t)r);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return -EAGAIN;
		return r < 0 ? -errno : -EPIPE;
	}
	return 0;
}

int rdb_buf_write_all_fd(struct rdb_buf *b, int fd, uint64_t deadline_ns)
{
	int rc = rdb_sock_write_all(fd, b->data, b->len, deadline_ns);

	if (rc == 0)
		rdb_buf_reset(b);
	return rc;
}

// SPDX-License-Identifier: GPL-2.0-only
/* The framing grammar is in netstream.h. */
#include "netstream.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* Bytes asked of read() at a time, and reads per call: other VMs share
 * the event loop, so one busy guest gets at most 2 MiB per wakeup. */
#define READ_CHUNK ((size_t)64 << 10)
#define READS_PER_CALL 32

void rdb_netstream_init(struct rdb_netstream *ns)
{
	memset(ns, 0, sizeof(*ns));
	rdb_buf_init(&ns->in);
	rdb_buf_init(&ns->out);
}

void rdb_netstream_dispose(struct rdb_netstream *ns)
{
	rdb_buf_dispose(&ns->in);
	rdb_buf_dispose(&ns->out);
	ns->broken = false;
}

void rdb_netstream_reset(struct rdb_netstream *ns)
{
	rdb_buf_reset(&ns->in);
	rdb_buf_reset(&ns->out);
	ns->broken = false;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
		(uint32_t)p[2] << 8 | p[3];
}

/* Hands out every whole frame in ns->in; a partial one stays. */
static int drain(struct rdb_netstream *ns, rdb_frame_cb cb, void *opaque)
{
	while (ns->in.len >= 4) {
		uint32_t len = get_be32(ns->in.data);

		if (len == 0 || len > RDB_NET_MAX_FRAME) {
			ns->broken = true;
			return -EPROTO;
		}
		if (ns->in.len - 4 < len)
			break;
		ns->frames_in++;
		ns->bytes_in += len;
		cb(opaque, ns->in.data + 4, len);
		rdb_buf_consume(&ns->in, 4 + (size_t)len);
	}
	return 0;
}

int rdb_netstream_decode(struct rdb_netstream *ns, const uint8_t *p, size_t n,
			 rdb_frame_cb cb, void *opaque)
{
	if (ns->broken)
		return -EPROTO;
	/* (rdb_buf_reserve answers NULL for 0 bytes on a fresh buffer) */
	if (n == 0)
		return 0;
	if (rdb_buf_append(&ns->in, p, n) < 0)
		return -ENOMEM;
	return drain(ns, cb, opaque);
}

int rdb_netstream_read(struct rdb_netstream *ns, int fd, rdb_frame_cb cb,
		       void *opaque)
{
	int got = 0;

	if (ns->broken)
		return -EPROTO;
	for (int i = 0; i < READS_PER_CALL; i++) {
		uint8_t *dst = rdb_buf_reserve(&ns->in, READ_CHUNK);
		ssize_t r;
		int rc;

		if (!dst)
			return -ENOMEM;
		r = read(fd, dst, READ_CHUNK);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0) {
			if (errno == EINTR) {
				i--;
				continue;
			}
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return got ? 0 : -EAGAIN;
			return -errno;
		}
		got = 1;
		ns->in.len += (size_t)r;
		rc = drain(ns, cb, opaque);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int rdb_netstream_queue(struct rdb_netstream *ns, const uint8_t *frame,
			size_t len)
{
	uint8_t *p;

	if (len == 0 || len > RDB_NET_MAX_FRAME) {
		ns->dropped_out++;
		ns->dropped_out_bytes += len;
		return -EINVAL;
	}
	if (ns->out.len + 4 + len > RDB_NET_MAX_QUEUED) {
		ns->dropped_out++;
		ns->dropped_out_bytes += len;
		return -ENOBUFS;
	}
	/* Header and frame in one reservation: never a header alone. */
	p = rdb_buf_reserve(&ns->out, 4 + len);
	if (!p) {
		ns->dropped_out++;
		ns->dropped_out_bytes += len;
		return -ENOMEM;
	}
	p[0] = (uint8_t)(len >> 24);
	p[1] = (uint8_t)(len >> 16);
	p[2] = (uint8_t)(len >> 8);
	p[3] = (uint8_t)len;
	memcpy(p + 4, frame, len);
	ns->out.len += 4 + len;
	ns->frames_out++;
	ns->bytes_out += len;
	return 0;
}

int rdb_netstream_flush(struct rdb_netstream *ns, int fd)
{
	return rdb_buf_write_fd(&ns->out, fd);
}

size_t rdb_netstream_pending(const struct rdb_netstream *ns)
{
	return ns->out.len;
}

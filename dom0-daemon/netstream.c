// SPDX-License-Identifier: GPL-2.0-only
#include "netstream.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

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
}

void rdb_netstream_reset(struct rdb_netstream *ns)
{
	rdb_buf_reset(&ns->in);
	rdb_buf_reset(&ns->out);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
		(uint32_t)p[2] << 8 | p[3];
}

static int drain(struct rdb_netstream *ns, rdb_frame_cb cb, void *opaque)
{
	while (ns->in.len >= 4) {
		uint32_t len = get32(ns->in.data);

		if (len == 0 || len > RDB_NET_MAX_FRAME)
			return -EPROTO;
		if (ns->in.len < 4u + len)
			break;
		ns->frames_in++;
		cb(opaque, ns->in.data + 4, len);
		rdb_buf_consume(&ns->in, 4u + len);
	}
	return 0;
}

int rdb_netstream_decode(struct rdb_netstream *ns, const uint8_t *p, size_t n,
			 rdb_frame_cb cb, void *opaque)
{
	if (rdb_buf_append(&ns->in, p, n) < 0)
		return -ENOMEM;
	return drain(ns, cb, opaque);
}

int rdb_netstream_read(struct rdb_netstream *ns, int fd, rdb_frame_cb cb,
		       void *opaque)
{
	/* Bounded work per wakeup: other VMs share the loop. */
	for (int i = 0; i < 32; i++) {
		uint8_t *dst = rdb_buf_reserve(&ns->in, 65536);
		ssize_t r;
		int rc;

		if (!dst)
			return -ENOMEM;
		r = read(fd, dst, 65536);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN && i > 0 ? 0 : -errno;
		}
		ns->in.len += (size_t)r;
		rc = drain(ns, cb, opaque);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void rdb_netstream_queue(struct rdb_netstream *ns, const uint8_t *frame,
			 size_t len)
{
	uint8_t h[4] = { (uint8_t)(len >> 24), (uint8_t)(len >> 16),
			 (uint8_t)(len >> 8), (uint8_t)len };

	if (len == 0 || len > RDB_NET_MAX_FRAME ||
	    ns->out.len + 4 + len > RDB_NET_MAX_QUEUED) {
		ns->dropped_out++;
		return;
	}
	if (rdb_buf_append(&ns->out, h, 4) < 0) {
		ns->dropped_out++;
		return;
	}
	if (rdb_buf_append(&ns->out, frame, len) < 0) {
		/* Never leave a header without its frame. */
		ns->out.len -= 4;
		ns->dropped_out++;
		return;
	}
	ns->frames_out++;
}

int rdb_netstream_flush(struct rdb_netstream *ns, int fd)
{
	return rdb_buf_write_fd(&ns->out, fd);
}

size_t rdb_netstream_pending(const struct rdb_netstream *ns)
{
	return ns->out.len;
}

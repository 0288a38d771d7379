// SPDX-License-Identifier: GPL-2.0-only
#include "netbuf.h"
#include "clock.h"

#include <errno.h>
#include <string.h>

#define REC_HDR 20

int rdb_netbuf_init(struct rdb_netbuf *nb, size_t max_bytes)
{
	memset(nb, 0, sizeof(*nb));
	rdb_buf_init(&nb->q);
	nb->max_bytes = max_bytes ? max_bytes : RDB_NETBUF_DEFAULT_MAX;
	return 0;
}

void rdb_netbuf_dispose(struct rdb_netbuf *nb)
{
	rdb_buf_dispose(&nb->q);
	nb->frames = nb->bytes = 0;
}

int rdb_netbuf_hold(struct rdb_netbuf *nb, uint64_t epoch,
		    const uint8_t *frame, size_t len)
{
	uint64_t now = rdb_now_ns();
	uint32_t l = (uint32_t)len;
	uint8_t *p;

	if (nb->q.len + REC_HDR + len > nb->max_bytes) {
		nb->dropped++;
		return -ENOBUFS;
	}
	p = rdb_buf_reserve(&nb->q, REC_HDR + len);
	if (!p) {
		nb->dropped++;
		return -ENOBUFS;
	}
	/* Host byte order: the records never leave this process. */
	memcpy(p, &epoch, 8);
	memcpy(p + 8, &now, 8);
	memcpy(p + 16, &l, 4);
	memcpy(p + REC_HDR, frame, len);
	nb->q.len += REC_HDR + len;
	nb->frames++;
	nb->bytes += len;
	return 0;
}

void rdb_netbuf_release(struct rdb_netbuf *nb, uint64_t upto,
			void (*sink)(void *, const uint8_t *, size_t),
			void *opaque)
{
	uint64_t now = rdb_now_ns();

	while (nb->q.len >= REC_HDR) {
		uint64_t epoch, held;
		uint32_t l;

		memcpy(&epoch, nb->q.data, 8);
		if (epoch > upto)
			break;
		memcpy(&held, nb->q.data + 8, 8);
		memcpy(&l, nb->q.data + 16, 4);
		sink(opaque, nb->q.data + REC_HDR, l);
		if (now - held > nb->max_hold_ns)
			nb->max_hold_ns = now - held;
		rdb_buf_consume(&nb->q, REC_HDR + l);
		nb->frames--;
		nb->bytes -= l;
		nb->released++;
	}
}

uint64_t rdb_netbuf_frames(const struct rdb_netbuf *nb)
{
	return nb->frames;
}

uint64_t rdb_netbuf_bytes(const struct rdb_netbuf *nb)
{
	return nb->bytes;
}

// SPDX-License-Identifier: GPL-2.0-only
#include "diskring.h"
#include "diskbuf.h"

#include <errno.h>
#include <string.h>

#define REC (sizeof(struct rdb_dring_rec))

static uint64_t span(uint32_t op, uint32_t len)
{
	uint64_t n = op == RDB_DISK_WRITE || op == RDB_DRING_READ ? len : 0;

	return REC + ((n + 15) & ~(uint64_t)15);
}

size_t rdb_dring_map_size(uint64_t size)
{
	return RDB_DRING_HDR_SIZE + (size_t)size;
}

void rdb_dring_init(struct rdb_dring *r, void *map, uint64_t size)
{
	_Static_assert(sizeof(struct rdb_dring_shared) <= RDB_DRING_HDR_SIZE,
		       "header page");
	_Static_assert(sizeof(struct rdb_dring_rec) == 16, "record header");
	r->sh = map;
	r->data = (uint8_t *)map + RDB_DRING_HDR_SIZE;
	r->sh->size = size & ~(uint64_t)15;
	atomic_store(&r->sh->head, 0);
	atomic_store(&r->sh->tail, 0);
}

void rdb_dring_attach(struct rdb_dring *r, void *map)
{
	r->sh = map;
	r->data = (uint8_t *)map + RDB_DRING_HDR_SIZE;
}

uint64_t rdb_dring_used(const struct rdb_dring *r)
{
	if (!r->sh)
		return 0;
	return atomic_load(&r->sh->head) - atomic_load(&r->sh->tail);
}

int rdb_dring_put(struct rdb_dring *r, uint32_t op, uint64_t off,
		  uint32_t len, const uint8_t *data)
{
	uint64_t size = r->sh->size;
	uint64_t head = atomic_load_explicit(&r->sh->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&r->sh->tail, memory_order_acquire);
	uint64_t pos = head % size, need = span(op, len), pad = 0;
	struct rdb_dring_rec h = { op, len, off };

	/* only a record's data is bounded: a ZERO of any length is one */
	if (((op == RDB_DISK_WRITE || op == RDB_DRING_READ) &&
	     len > RDB_DRING_REC_MAX) || need > size / 2)
		return -EMSGSIZE;
	if (size - pos < need)
		pad = size - pos;	/* a multiple of 16, at least 16 */
	if (size - (head - tail) < pad + need)
		return -ENOSPC;
	if (pad) {
		struct rdb_dring_rec p = { RDB_DRING_PAD, 0, 0 };

		memcpy(r->data + pos, &p, REC);
		pos = 0;
	}
	memcpy(r->data + pos, &h, REC);
	if ((op == RDB_DISK_WRITE || op == RDB_DRING_READ) && len)
		memcpy(r->data + pos + REC, data, len);
	/* release: the record's bytes before the new head */
	atomic_store_explicit(&r->sh->head, head + pad + need,
			      memory_order_release);
	return 0;
}

const struct rdb_dring_rec *rdb_dring_peek(struct rdb_dring *r)
{
	uint64_t size = r->sh->size;

	for (;;) {
		uint64_t tail = atomic_load_explicit(&r->sh->tail, memory_order_relaxed);
		uint64_t head = atomic_load_explicit(&r->sh->head, memory_order_acquire);
		const struct rdb_dring_rec *h;

		if (tail == head)
			return NULL;
		h = (const struct rdb_dring_rec *)(r->data + tail % size);
		if (h->op != RDB_DRING_PAD)
			return h;
		atomic_store_explicit(&r->sh->tail, tail + (size - tail % size),
				      memory_order_release);
	}
}

void rdb_dring_pop(struct rdb_dring *r)
{
	uint64_t tail = atomic_load_explicit(&r->sh->tail, memory_order_relaxed);
	const struct rdb_dring_rec *h =
		(const struct rdb_dring_rec *)(r->data + tail % r->sh->size);

	/* release: done with the record's bytes before the producer reuses them */
	atomic_store_explicit(&r->sh->tail, tail + span(h->op, h->len),
			      memory_order_release);
}

// SPDX-License-Identifier: GPL-2.0-only
/*
 * The ring of held frames.  Record grammar (host byte order: records never
 * leave this process):
 *
 *   ring   = record* [unused]          (up to two runs, see netbuf.h)
 *   record = epoch:u64 held_at_ns:u64 len:u32 zero:u32 frame[len] pad[0-7]
 *
 * Records start 8-byte aligned and are never split at the ring's end:
 * when the next record does not fit there, the writer leaves the end
 * unused, remembers where the upper run stops (wrap) and goes on at 0.
 * wrap == SIZE_MAX when the records are one run.  Empty means
 * head == tail == 0 and wrap == SIZE_MAX.
 */
#include "netbuf.h"
#include "clock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct rec {
	uint64_t epoch;
	uint64_t held_at_ns;
	uint32_t len;
	uint32_t zero;
};

#define REC_HDR sizeof(struct rec)
#define MIN_CAP ((size_t)64 << 10)

_Static_assert(sizeof(struct rec) == 24, "record header is 24 bytes");

static size_t rec_size(size_t len)
{
	return (REC_HDR + len + 7) & ~(size_t)7;
}

static int wrapped(const struct rdb_netbuf *nb)
{
	return nb->wrap != SIZE_MAX;
}

static void set_empty(struct rdb_netbuf *nb)
{
	nb->head = nb->tail = 0;
	nb->wrap = SIZE_MAX;
	nb->live = 0;
	nb->frames = nb->bytes = 0;
	nb->last_epoch = 0;
}

int rdb_netbuf_init(struct rdb_netbuf *nb, size_t max_bytes)
{
	memset(nb, 0, sizeof(*nb));
	set_empty(nb);
	nb->max_cap = (max_bytes ? max_bytes : RDB_NETBUF_DEFAULT_MAX) &
		      ~(size_t)7;
	return 0;
}

void rdb_netbuf_dispose(struct rdb_netbuf *nb)
{
	free(nb->ring);
	nb->ring = NULL;
	nb->cap = 0;
	set_empty(nb);
}

/* Where a record of sz bytes goes, or SIZE_MAX when there is no room
 * without growing.  Claims the space. */
static size_t place(struct rdb_netbuf *nb, size_t sz)
{
	size_t pos;

	if (!wrapped(nb)) {
		if (nb->cap - nb->tail >= sz) {
			pos = nb->tail;
		} else if (nb->head >= sz) {
			/* The upper run ends here; the rest of the ring's
			 * end stays unused until the reader passes it. */
			nb->wrap = nb->tail;
			pos = 0;
		} else {
			return SIZE_MAX;
		}
	} else if (nb->head - nb->tail >= sz) {
		pos = nb->tail;
	} else {
		return SIZE_MAX;
	}
	nb->tail = pos + sz;
	nb->live += sz;
	return pos;
}

/* A bigger ring holding the same records, linear from 0. */
static int grow(struct rdb_netbuf *nb, size_t sz)
{
	size_t cap = nb->cap ? nb->cap * 2 : MIN_CAP, upper;
	uint8_t *m;

	while (cap < nb->live + sz && cap < nb->max_cap)
		cap *= 2;
	if (cap > nb->max_cap)
		cap = nb->max_cap;
	if (cap <= nb->cap || cap < nb->live + sz)
		return -ENOBUFS;
	m = malloc(cap);
	if (!m)
		return -ENOMEM;
	upper = (wrapped(nb) ? nb->wrap : nb->tail) - nb->head;
	if (nb->live) {
		memcpy(m, nb->ring + nb->head, upper);
		if (wrapped(nb))
			memcpy(m + upper, nb->ring, nb->tail);
	}
	free(nb->ring);
	nb->ring = m;
	nb->cap = cap;
	nb->head = 0;
	nb->tail = nb->live;
	nb->wrap = SIZE_MAX;
	return 0;
}

static int refuse(struct rdb_netbuf *nb, size_t len, int rc)
{
	nb->dropped++;
	nb->dropped_bytes += len;
	return rc;
}

int rdb_netbuf_hold(struct rdb_netbuf *nb, uint64_t epoch,
		    const uint8_t *frame, size_t len)
{
	struct rec r = { .epoch = epoch, .len = (uint32_t)len };
	size_t sz, pos;
	int rc;

	if (len == 0 || len > UINT32_MAX)
		return refuse(nb, len, -EINVAL);
	if (nb->frames && epoch < nb->last_epoch)
		return refuse(nb, len, -EINVAL);
	sz = rec_size(len);
	pos = place(nb, sz);
	if (pos == SIZE_MAX) {
		rc = grow(nb, sz);
		if (rc < 0)
			return refuse(nb, len, rc);
		/* Linear now, with cap - live >= sz free at the end. */
		pos = place(nb, sz);
	}
	r.held_at_ns = rdb_now_ns();
	memcpy(nb->ring + pos, &r, REC_HDR);
	memcpy(nb->ring + pos + REC_HDR, frame, len);
	nb->frames++;
	nb->bytes += len;
	nb->last_epoch = epoch;
	return 0;
}

uint64_t rdb_netbuf_release(struct rdb_netbuf *nb, uint64_t upto,
			    rdb_netbuf_sink sink, void *opaque)
{
	uint64_t now = rdb_now_ns(), n = 0;

	nb->last_release_max_hold_ns = 0;
	while (nb->live) {
		struct rec r;
		uint64_t held;
		size_t sz;

		memcpy(&r, nb->ring + nb->head, REC_HDR);
		if (r.epoch > upto)
			break;
		sink(opaque, nb->ring + nb->head + REC_HDR, r.len);
		held = now > r.held_at_ns ? now - r.held_at_ns : 0;
		if (held > nb->last_release_max_hold_ns)
			nb->last_release_max_hold_ns = held;
		sz = rec_size(r.len);
		nb->head += sz;
		nb->live -= sz;
		nb->frames--;
		nb->bytes -= r.len;
		nb->released++;
		nb->released_bytes += r.len;
		n++;
		if (!nb->live) {
			set_empty(nb);
		} else if (wrapped(nb) && nb->head == nb->wrap) {
			/* The upper run is done; the lower one is next. */
			nb->head = 0;
			nb->wrap = SIZE_MAX;
		}
	}
	if (nb->last_release_max_hold_ns > nb->max_hold_ns)
		nb->max_hold_ns = nb->last_release_max_hold_ns;
	return n;
}

uint64_t rdb_netbuf_drop_after(struct rdb_netbuf *nb, uint64_t epoch)
{
	uint64_t kept = 0, kept_bytes = 0, last = 0, gone;
	size_t pos = nb->head, kept_live = 0;
	int upper = 1;

	while (kept_live < nb->live) {
		struct rec r;

		if (upper && wrapped(nb) && pos == nb->wrap) {
			pos = 0;
			upper = 0;
		}
		memcpy(&r, nb->ring + pos, REC_HDR);
		if (r.epoch > epoch)
			break;
		kept++;
		kept_bytes += r.len;
		kept_live += rec_size(r.len);
		last = r.epoch;
		pos += rec_size(r.len);
	}
	if (kept_live == nb->live)
		return 0;
	gone = nb->frames - kept;
	nb->discarded += gone;
	if (!kept) {
		set_empty(nb);
		return gone;
	}
	/* The kept records end at pos; nothing lies beyond it now. */
	if (upper) {
		nb->tail = pos;
		nb->wrap = SIZE_MAX;
	} else if (pos == 0) {
		nb->tail = nb->wrap;
		nb->wrap = SIZE_MAX;
	} else {
		nb->tail = pos;
	}
	nb->live = kept_live;
	nb->frames = kept;
	nb->bytes = kept_bytes;
	nb->last_epoch = last;
	return gone;
}

uint64_t rdb_netbuf_clear(struct rdb_netbuf *nb)
{
	uint64_t gone = nb->frames;

	nb->discarded += gone;
	set_empty(nb);
	return gone;
}

uint64_t rdb_netbuf_frames(const struct rdb_netbuf *nb)
{
	return nb->frames;
}

uint64_t rdb_netbuf_bytes(const struct rdb_netbuf *nb)
{
	return nb->bytes;
}

// SPDX-License-Identifier: GPL-2.0-only
/* RDB-WRAP: rdb_now_ns */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "netbuf.h"

static uint64_t now_ns;

uint64_t __wrap_rdb_now_ns(void)
{
	return now_ns;
}

/* Every frame starts with a u32 id and is filled with (id & 0xff), so the
 * sink can check identity, order and content. */
struct sink {
	unsigned n;
	uint32_t ids[4096];
	size_t lens[4096];
};

static void fill(uint8_t *f, uint32_t id, size_t len)
{
	memset(f, (int)(id & 0xff), len);
	if (len >= 4)
		memcpy(f, &id, 4);
}

static void sink(void *o, const uint8_t *f, size_t len)
{
	struct sink *s = o;
	uint32_t id = 0;

	assert_true(s->n < 4096);
	assert_true(len >= 4);
	memcpy(&id, f, 4);
	for (size_t i = 4; i < len; i++)
		assert_int_equal(f[i], id & 0xff);
	s->ids[s->n] = id;
	s->lens[s->n++] = len;
}

static int hold_id(struct rdb_netbuf *nb, uint64_t epoch, uint32_t id,
		   size_t len)
{
	uint8_t f[2000];

	assert_true(len <= sizeof(f));
	fill(f, id, len);
	return rdb_netbuf_hold(nb, epoch, f, len);
}

static void test_later_epochs_stay_held(void **state)
{
	struct rdb_netbuf nb;
	struct sink s = { 0 };

	rdb_netbuf_init(&nb, 0);
	/* epochs 1 1 2 2 3: ids 0..4 */
	assert_int_equal(hold_id(&nb, 1, 0, 60), 0);
	assert_int_equal(hold_id(&nb, 1, 1, 1514), 0);
	assert_int_equal(hold_id(&nb, 2, 2, 61), 0);
	assert_int_equal(hold_id(&nb, 2, 3, 62), 0);
	assert_int_equal(hold_id(&nb, 3, 4, 63), 0);
	assert_int_equal(rdb_netbuf_release(&nb, 1, sink, &s), 2);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.ids[0], 0);
	assert_int_equal(s.ids[1], 1);
	assert_int_equal(s.lens[1], 1514);
	/* N+1 and later are still held */
	assert_int_equal(rdb_netbuf_frames(&nb), 3);
	assert_int_equal(rdb_netbuf_bytes(&nb), 61 + 62 + 63);
	assert_int_equal(rdb_netbuf_release(&nb, 2, sink, &s), 2);
	assert_int_equal(s.ids[2], 2);
	assert_int_equal(s.ids[3], 3);
	assert_int_equal(rdb_netbuf_frames(&nb), 1);
	/* an epoch acknowledged twice releases nothing new */
	assert_int_equal(rdb_netbuf_release(&nb, 2, sink, &s), 0);
	assert_int_equal(rdb_netbuf_release(&nb, 5, sink, &s), 1);
	assert_int_equal(s.ids[4], 4);
	assert_int_equal(nb.released, 5);
	assert_int_equal(nb.released_bytes, 60 + 1514 + 61 + 62 + 63);
	assert_int_equal(rdb_netbuf_frames(&nb), 0);
	assert_int_equal(rdb_netbuf_bytes(&nb), 0);
	rdb_netbuf_dispose(&nb);
	rdb_netbuf_dispose(&nb);	/* idempotent */
}

static void test_release_of_nothing(void **state)
{
	struct rdb_netbuf nb;
	struct sink s = { 0 };

	rdb_netbuf_init(&nb, 0);
	assert_int_equal(rdb_netbuf_release(&nb, 7, sink, &s), 0);
	assert_null(nb.ring);	/* nothing allocated for nothing held */
	assert_int_equal(hold_id(&nb, 8, 1, 100), 0);
	assert_int_equal(rdb_netbuf_release(&nb, 7, sink, &s), 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(nb.last_release_max_hold_ns, 0);
	rdb_netbuf_dispose(&nb);
}

static void test_clear_on_failover(void **state)
{
	struct rdb_netbuf nb;
	struct sink s = { 0 };

	rdb_netbuf_init(&nb, 0);
	for (uint32_t i = 0; i < 10; i++)
		assert_int_equal(hold_id(&nb, 3 + i / 4, i, 100 + i), 0);
	assert_int_equal(rdb_netbuf_clear(&nb), 10);
	assert_int_equal(nb.discarded, 10);
	assert_int_equal(rdb_netbuf_frames(&nb), 0);
	assert_int_equal(rdb_netbuf_bytes(&nb), 0);
	assert_int_equal(rdb_netbuf_release(&nb, UINT64_MAX, sink, &s), 0);
	assert_int_equal(s.n, 0);
	/* usable again, from any epoch */
	assert_int_equal(hold_id(&nb, 1, 42, 64), 0);
	assert_int_equal(rdb_netbuf_release(&nb, 1, sink, &s), 1);
	assert_int_equal(s.ids[0], 42);
	assert_int_equal(nb.released, 1);
	rdb_netbuf_dispose(&nb);
}

static void test_drop_after_keeps_committable_prefix(void **state)
{
	struct rdb_netbuf nb;
	struct sink s = { 0 };

	rdb_netbuf_init(&nb, 0);
	assert_int_equal(hold_id(&nb, 1, 0, 80), 0);
	assert_int_equal(hold_id(&nb, 2, 1, 81), 0);
	assert_int_equal(hold_id(&nb, 3, 2, 82), 0);
	assert_int_equal(hold_id(&nb, 3, 3, 83), 0);
	assert_int_equal(rdb_netbuf_drop_after(&nb, 3), 0);
	assert_int_equal(rdb_netbuf_drop_after(&nb, 1), 3);
	assert_int_equal(nb.discarded, 3);
	assert_int_equal(rdb_netbuf_frames(&nb), 1);
	assert_int_equal(rdb_netbuf_bytes(&nb), 80);
	/* epoch 2 may be reopened after its frames were dropped */
	assert_int_equal(hold_id(&nb, 2, 4, 84), 0);
	assert_int_equal(rdb_netbuf_release(&nb, 2, sink, &s), 2);
	assert_int_equal(s.ids[0], 0);
	assert_int_equal(s.ids[1], 4);
	assert_int_equal(rdb_netbuf_drop_after(&nb, 0), 0);
	rdb_netbuf_dispose(&nb);
}

static void test_bad_frames_refused(void **state)
{
	struct rdb_netbuf nb;
	uint8_t f[64] = { 0 };

	rdb_netbuf_init(&nb, 0);
	assert_int_equal(rdb_netbuf_hold(&nb, 1, f, 0), -EINVAL);
	assert_int_equal(hold_id(&nb, 5, 1, 64), 0);
	/* older than a held frame: it would wait behind epoch 5 */
	assert_int_equal(hold_id(&nb, 4, 2, 64), -EINVAL);
	assert_int_equal(nb.dropped, 2);
	assert_int_equal(nb.dropped_bytes, 64);
	assert_int_equal(rdb_netbuf_frames(&nb), 1);
	rdb_netbuf_dispose(&nb);
}

static void test_overflow_drops_new_frame_only(void **state)
{
	struct rdb_netbuf nb;
	struct sink s = { 0 };
	uint32_t held = 0;
	int rc;

	rdb_netbuf_init(&nb, 64 << 10);
	/* 1000-byte frames take 1024-byte records: 64 fit exactly. */
	while ((rc = hold_id(&nb, 1, held, 1000)) == 0)
		held++;
	assert_int_equal(rc, -ENOBUFS);
	assert_int_equal(held, 64);
	assert_true(nb.cap <= (64 << 10));
	/* later frames keep being refused, the held ones stay */
	assert_int_equal(hold_id(&nb, 2, 999, 100), -ENOBUFS);
	assert_int_equal(nb.dropped, 2);
	assert_int_equal(nb.dropped_bytes, 1100);
	assert_int_equal(rdb_netbuf_release(&nb, 0, sink, &s), 0);
	assert_int_equal(rdb_netbuf_frames(&nb), 64);
	assert_int_equal(rdb_netbuf_release(&nb, 1, sink, &s), 64);
	for (uint32_t i = 0; i < 64; i++)
		assert_int_equal(s.ids[i], i);
	/* room again */
	assert_int_equal(hold_id(&nb, 2, 1000, 1000), 0);
	rdb_netbuf_dispose(&nb);
}

static void test_hold_time_counters(void **state)
{
	struct rdb_netbuf nb;
	struct sink s = { 0 };

	rdb_netbuf_init(&nb, 0);
	now_ns = 1000;
	assert_int_equal(hold_id(&nb, 1, 0, 64), 0);
	now_ns = 1500;
	assert_int_equal(hold_id(&nb, 1, 1, 64), 0);
	now_ns = 2000;
	assert_int_equal(hold_id(&nb, 2, 2, 64), 0);
	now_ns = 26000;
	assert_int_equal(rdb_netbuf_release(&nb, 1, sink, &s), 2);
	assert_int_equal(nb.last_release_max_hold_ns, 25000);
	assert_int_equal(nb.max_hold_ns, 25000);
	now_ns = 4000;		/* (a clock cannot go back; stays sane anyway) */
	assert_int_equal(rdb_netbuf_release(&nb, 2, sink, &s), 1);
	assert_int_equal(nb.last_release_max_hold_ns, 2000);
	assert_int_equal(nb.max_hold_ns, 25000);
	assert_int_equal(rdb_netbuf_release(&nb, 9, sink, &s), 0);
	assert_int_equal(nb.last_release_max_hold_ns, 0);
	assert_int_equal(nb.released, 3);
	assert_int_equal(nb.released_bytes, 192);
	rdb_netbuf_dispose(&nb);
}

/* The upper run ends exactly at the ring's end, then the writer wraps. */
static void test_wrap_at_exact_end(void **state)
{
	struct rdb_netbuf nb;
	struct sink s = { 0 };

	rdb_netbuf_init(&nb, 4096);
	for (uint32_t i = 0; i < 4; i++)	/* 4 x 1024-byte records */
		assert_int_equal(hold_id(&nb, 1, i, 1000), 0);
	assert_int_equal(nb.cap, 4096);
	assert_int_equal(nb.tail, 4096);
	assert_int_equal(hold_id(&nb, 2, 4, 1000), -ENOBUFS);
	assert_int_equal(rdb_netbuf_release(&nb, 1, sink, &s), 4);
	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(hold_id(&nb, 2, 10 + i, 1000), 0);
	assert_int_equal(rdb_netbuf_release(&nb, 2, sink, &s), 4);
	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(hold_id(&nb, 3 + i, 20 + i, 1000), 0);
	assert_int_equal(rdb_netbuf_release(&nb, 3, sink, &s), 1);
	/* the freed first slot takes the next record: the ring wraps */
	assert_int_equal(hold_id(&nb, 7, 24, 1000), 0);
	assert_int_equal(nb.wrap, 4096);
	assert_int_equal(hold_id(&nb, 7, 25, 1000), -ENOBUFS);
	/* drop_after cutting exactly at the wrap point */
	assert_int_equal(rdb_netbuf_drop_after(&nb, 6), 1);
	assert_int_equal(hold_id(&nb, 8, 26, 1000), 0);
	assert_int_equal(rdb_netbuf_release(&nb, UINT64_MAX, sink, &s), 4);
	{
		const uint32_t want[] = { 0, 1, 2, 3, 10, 11, 12, 13,
					  20, 21, 22, 23, 26 };

		assert_int_equal(s.n, 13);
		for (unsigned i = 0; i < 13; i++)
			assert_int_equal(s.ids[i], want[i]);
	}
	rdb_netbuf_dispose(&nb);
}

/*
 * The ring against a plain array model: random holds, releases and
 * drops in a small bound so the ring wraps, fills and grows often.
 */
struct model {
	uint32_t id[8192];
	uint64_t epoch[8192];
	size_t len[8192];
	unsigned head, tail;
};

static uint32_t rnd_state = 12345;

static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 8;
}

static void test_ring_matches_model(void **state)
{
	static struct model m;
	struct rdb_netbuf nb;
	struct sink s;
	uint64_t epoch = 1, committed = 0;
	uint32_t id = 0;
	unsigned ops = 0, wraps = 0, drops = 0;

	rdb_netbuf_init(&nb, 8 << 10);
	for (ops = 0; ops < 200000; ops++) {
		uint32_t op = rnd() % 100;

		if (op < 60) {
			size_t len = 4 + rnd() % (rnd() % 4 ? 200 : 1500);
			size_t before_wrap = nb.wrap;
			int rc = hold_id(&nb, epoch, id, len);

			if (rc == 0) {
				assert_true(m.tail < 8192);
				m.id[m.tail] = id;
				m.epoch[m.tail] = epoch;
				m.len[m.tail++] = len;
				if (before_wrap == SIZE_MAX && nb.wrap != SIZE_MAX)
					wraps++;
			} else {
				assert_int_equal(rc, -ENOBUFS);
				drops++;
			}
			id++;
		} else if (op < 75) {
			epoch++;
		} else if (op < 95) {
			uint64_t upto = committed + rnd() % (epoch - committed + 1);
			unsigned want = 0;

			while (m.head + want < m.tail &&
			       m.epoch[m.head + want] <= upto)
				want++;
			s.n = 0;
			assert_int_equal(rdb_netbuf_release(&nb, upto, sink, &s),
					 want);
			for (unsigned i = 0; i < want; i++) {
				assert_int_equal(s.ids[i], m.id[m.head + i]);
				assert_int_equal(s.lens[i], m.len[m.head + i]);
			}
			m.head += want;
			committed = upto;
		} else {
			/* abandon the open epoch */
			unsigned keep = m.head;

			while (keep < m.tail && m.epoch[keep] <= epoch - 1)
				keep++;
			assert_int_equal(rdb_netbuf_drop_after(&nb, epoch - 1),
					 m.tail - keep);
			m.tail = keep;
		}
		if (m.head == m.tail)
			m.head = m.tail = 0;
		assert_int_equal(rdb_netbuf_frames(&nb), m.tail - m.head);
		assert_true(nb.cap <= (8 << 10));
	}
	print_message("ops %u wraps %u drops %u\n", ops, wraps, drops);
	/* the run exercised what it is meant to */
	assert_true(wraps > 100);
	assert_true(drops > 100);
	rdb_netbuf_dispose(&nb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_later_epochs_stay_held),
		cmocka_unit_test(test_release_of_nothing),
		cmocka_unit_test(test_clear_on_failover),
		cmocka_unit_test(test_drop_after_keeps_committable_prefix),
		cmocka_unit_test(test_bad_frames_refused),
		cmocka_unit_test(test_overflow_drops_new_frame_only),
		cmocka_unit_test(test_hold_time_counters),
		cmocka_unit_test(test_wrap_at_exact_end),
		cmocka_unit_test(test_ring_matches_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

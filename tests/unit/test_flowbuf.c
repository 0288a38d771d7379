// SPDX-License-Identifier: GPL-2.0-only
/* RDB-WRAP: rdb_now_ns */
/*
 * Commit protection's per-flow release: what leaves at once, what waits,
 * for which ACK, in which order; and a model check of its invariants
 * over random traffic.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "flowbuf.h"
#include "tcpseg.h"

static uint64_t now_ns;

uint64_t __wrap_rdb_now_ns(void)
{
	return now_ns;
}

/* Frames carry their id in the IPv4 identification field and the TCP
 * window (flowbuf reads neither), so pure ACKs are identifiable too. */
#define MAXF 8192

struct sink {
	unsigned n;
	uint32_t ids[MAXF];
};

static uint32_t frame_id(const uint8_t *f)
{
	return (uint32_t)(f[18] << 8 | f[19]) << 16 | (uint32_t)(f[48] << 8 | f[49]);
}

static void sink(void *o, const uint8_t *f, size_t len)
{
	struct sink *s = o;

	assert_true(s->n < MAXF);
	assert_true(len >= 54);
	s->ids[s->n++] = frame_id(f);
}

static const uint8_t gmac[6] = { 0x52, 0x54, 0, 0x52, 0x44, 1 };
static const uint8_t pmac[6] = { 2, 0, 0, 0, 0, 7 };

/* Flow k: guest 10.0.0.100:5432 <-> 10.0.1.k:40000+k. */
static size_t mk(uint8_t *buf, int k, bool to_guest, uint32_t id, uint32_t seq,
		 uint32_t ack, uint8_t flags, size_t plen)
{
	struct rdb_tcp_ends e = { .family = 4, .sport = 5432,
				  .dport = (uint16_t)(40000 + k) };
	static const uint8_t data[1500];
	size_t n;

	memcpy(e.src_mac, gmac, 6);
	memcpy(e.dst_mac, pmac, 6);
	e.src_ip[0] = 10;
	e.src_ip[3] = 100;
	e.dst_ip[0] = 10;
	e.dst_ip[2] = 1;
	e.dst_ip[3] = (uint8_t)k;
	if (to_guest) {
		struct rdb_tcp_ends r;

		rdb_tcp_ends_reverse(&e, &r);
		e = r;
	}
	n = rdb_tcpseg_build(buf, 2000, &e, seq, ack, flags, (uint16_t)id, data, plen);
	assert_true(n > 0);
	buf[18] = (uint8_t)(id >> 24);
	buf[19] = (uint8_t)(id >> 16);
	return n;
}

/* The guest sends on flow k: data of plen bytes at seq (ACK ack). */
static void g(struct rdb_flowbuf *fb, struct sink *s, uint64_t epoch, bool marked,
	      int k, uint32_t id, uint32_t seq, uint32_t ack, uint8_t flags,
	      size_t plen)
{
	uint8_t buf[2000];
	size_t n = mk(buf, k, false, id, seq, ack, flags, plen);

	rdb_flowbuf_from_guest(fb, epoch, marked, buf, n, sink, s);
}

static void expect(const struct sink *s, unsigned from, const uint32_t *ids,
		   unsigned n)
{
	assert_int_equal(s->n, from + n);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(s->ids[from + i], ids[i]);
}

#define A RDB_TCP_ACK
#define AP (RDB_TCP_ACK | RDB_TCP_PSH)

static void test_unmarked_of_quiet_flow_leaves_at_once(void **state)
{
	struct rdb_flowbuf fb;
	struct sink s = { 0 };
	uint8_t arp[60] = { 0 };

	rdb_flowbuf_init(&fb, 0, 0);
	/* the guest answers a query: new data, its ACK new too */
	g(&fb, &s, 1, false, 1, 1, 1000, 500, AP, 100);
	g(&fb, &s, 1, false, 1, 2, 1100, 520, AP, 100);
	expect(&s, 0, (uint32_t[]){ 1, 2 }, 2);
	/* non-TCP: at once, marked or not */
	arp[12] = 8;
	arp[13] = 6;
	rdb_flowbuf_from_guest(&fb, 1, false, arp, sizeof(arp), sink, &s);
	assert_int_equal(s.n, 3);
	assert_int_equal(fb.st.now_frames, 3);
	assert_int_equal(rdb_flowbuf_frames(&fb), 0);
	rdb_flowbuf_dispose(&fb);
}

static void test_order_within_a_flow(void **state)
{
	struct rdb_flowbuf fb;
	struct sink s = { 0 };

	rdb_flowbuf_init(&fb, 0, 0);
	g(&fb, &s, 5, false, 1, 1, 1000, 500, AP, 100);		/* out */
	g(&fb, &s, 5, true, 1, 2, 1100, 520, AP, 30);		/* commit ack */
	g(&fb, &s, 5, false, 1, 3, 1130, 520, AP, 40);		/* behind */
	g(&fb, &s, 6, false, 1, 4, 1170, 540, AP, 50);		/* behind */
	g(&fb, &s, 6, true, 1, 5, 1220, 560, AP, 30);		/* marked, epoch 6 */
	g(&fb, &s, 7, false, 1, 6, 1250, 560, AP, 10);		/* behind it */
	expect(&s, 0, (uint32_t[]){ 1 }, 1);
	assert_int_equal(fb.st.marked_frames, 2);
	assert_int_equal(fb.st.behind_frames, 3);
	assert_int_equal(rdb_flowbuf_frames(&fb), 5);
	assert_int_equal(rdb_flowbuf_bytes(&fb), 5 * 54 + 30 + 40 + 50 + 30 + 10);
	/* ACK(4): nothing */
	assert_int_equal(rdb_flowbuf_release(&fb, 4, sink, &s), 0);
	/* ACK(5): the epoch-5 commit ack and what follows it up to the next
	 * marked frame (epoch 6, not committed) */
	assert_int_equal(rdb_flowbuf_release(&fb, 5, sink, &s), 3);
	expect(&s, 0, (uint32_t[]){ 1, 2, 3, 4 }, 4);
	/* ACK(7) covers the rest, in order */
	assert_int_equal(rdb_flowbuf_release(&fb, 7, sink, &s), 2);
	expect(&s, 0, (uint32_t[]){ 1, 2, 3, 4, 5, 6 }, 6);
	assert_int_equal(rdb_flowbuf_frames(&fb), 0);
	assert_int_equal(rdb_flowbuf_bytes(&fb), 0);
	/* quiet again: the next unmarked frame leaves at once */
	g(&fb, &s, 8, false, 1, 7, 1260, 560, AP, 10);
	expect(&s, 6, (uint32_t[]){ 7 }, 1);
	rdb_flowbuf_dispose(&fb);
}

static void test_held_frame_blocks_only_its_flow(void **state)
{
	struct rdb_flowbuf fb;
	struct sink s = { 0 };

	rdb_flowbuf_init(&fb, 0, 0);
	g(&fb, &s, 3, true, 1, 1, 1000, 500, AP, 30);	/* flow 1 held */
	g(&fb, &s, 3, false, 2, 2, 7000, 900, AP, 30);	/* flow 2 out */
	g(&fb, &s, 3, false, 1, 3, 1030, 500, AP, 30);	/* flow 1 behind */
	g(&fb, &s, 4, false, 3, 4, 9000, 100, AP, 30);	/* flow 3 out */
	g(&fb, &s, 4, true, 2, 5, 7030, 900, AP, 30);	/* flow 2 held */
	g(&fb, &s, 4, false, 3, 6, 9030, 100, AP, 30);	/* flow 3 out */
	expect(&s, 0, (uint32_t[]){ 2, 4, 6 }, 3);
	assert_int_equal(rdb_flowbuf_release(&fb, 3, sink, &s), 2);
	expect(&s, 3, (uint32_t[]){ 1, 3 }, 2);
	assert_int_equal(rdb_flowbuf_release(&fb, 4, sink, &s), 1);
	expect(&s, 5, (uint32_t[]){ 5 }, 1);
	assert_int_equal(rdb_flowbuf_flows(&fb), 3);
	rdb_flowbuf_dispose(&fb);
}

static void test_release_at_ack_only(void **state)
{
	struct rdb_flowbuf fb;
	struct sink s = { 0 };

	rdb_flowbuf_init(&fb, 0, 0);
	now_ns = 1000;
	for (uint32_t e = 10; e < 20; e++)
		g(&fb, &s, e, true, (int)e, e, 1000, 1, AP, 20);
	assert_int_equal(s.n, 0);
	now_ns = 5000;
	for (uint32_t e = 10; e < 20; e++) {
		assert_int_equal(rdb_flowbuf_release(&fb, e, sink, &s), 1);
		assert_int_equal(s.ids[s.n - 1], e);
		/* an ACK for an epoch already released changes nothing */
		assert_int_equal(rdb_flowbuf_release(&fb, e, sink, &s), 0);
	}
	assert_int_equal(fb.st.released, 10);
	assert_int_equal(fb.st.max_hold_ns, 4000);
	rdb_flowbuf_dispose(&fb);
}

static void test_discard_at_drop(void **state)
{
	struct rdb_flowbuf fb;
	struct sink s = { 0 };

	rdb_flowbuf_init(&fb, 0, 0);
	g(&fb, &s, 5, true, 1, 1, 1000, 500, AP, 30);
	g(&fb, &s, 6, false, 1, 2, 1030, 500, AP, 30);
	g(&fb, &s, 6, true, 2, 3, 5000, 100, AP, 30);
	g(&fb, &s, 7, false, 2, 4, 5030, 100, AP, 30);
	g(&fb, &s, 7, false, 3, 5, 100, 2000, A, 0);	/* held ack, epoch 7 */
	/* epochs after 6 will never be committed: ids 4 and 5 go */
	assert_int_equal(rdb_flowbuf_drop_after(&fb, 6), 2);
	assert_int_equal(rdb_flowbuf_frames(&fb), 3);
	assert_int_equal(rdb_flowbuf_release(&fb, 100, sink, &s), 3);
	expect(&s, 0, (uint32_t[]){ 1, 2, 3 }, 3);
	/* clear: everything held goes, nothing leaves */
	g(&fb, &s, 8, true, 1, 6, 1060, 500, AP, 30);
	g(&fb, &s, 8, false, 1, 7, 1090, 500, AP, 30);
	assert_int_equal(rdb_flowbuf_clear(&fb), 2);
	assert_int_equal(rdb_flowbuf_release(&fb, 100, sink, &s), 0);
	assert_int_equal(s.n, 3);
	assert_int_equal(fb.st.discarded, 4);
	rdb_flowbuf_dispose(&fb);
}

static void test_new_acks_held_without_blocking(void **state)
{
	struct rdb_flowbuf fb;
	struct sink s = { 0 };

	rdb_flowbuf_init(&fb, 0, 0);
	/* the guest's answer, then the client's next query acknowledged by a
	 * pure ACK (delayed ACK, answer not ready yet): the ACK waits */
	g(&fb, &s, 1, false, 1, 1, 1000, 500, AP, 100);
	g(&fb, &s, 2, false, 1, 2, 1100, 600, A, 0);
	expect(&s, 0, (uint32_t[]){ 1 }, 1);
	assert_int_equal(fb.st.ack_frames, 1);
	/* a pure ACK that tells nothing new leaves at once */
	g(&fb, &s, 2, false, 1, 3, 1100, 500, A, 0);
	expect(&s, 1, (uint32_t[]){ 3 }, 1);
	/* the answer is new data: not blocked by the held ACK */
	g(&fb, &s, 2, false, 1, 4, 1100, 600, AP, 50);
	expect(&s, 2, (uint32_t[]){ 4 }, 1);
	/* at ACK(2) the held ACK is redundant: a later frame carried it */
	assert_int_equal(rdb_flowbuf_release(&fb, 2, sink, &s), 0);
	assert_int_equal(fb.st.superseded, 1);
	assert_int_equal(s.n, 3);
	/* a held ACK nobody superseded leaves at its ACK */
	g(&fb, &s, 3, false, 1, 5, 1150, 700, A, 0);
	assert_int_equal(rdb_flowbuf_release(&fb, 3, sink, &s), 1);
	expect(&s, 3, (uint32_t[]){ 5 }, 1);
	/* a retransmission (no new sequence) with a new ACK waits too */
	g(&fb, &s, 4, false, 1, 6, 1100, 800, AP, 50);
	assert_int_equal(s.n, 4);
	assert_int_equal(rdb_flowbuf_release(&fb, 4, sink, &s), 1);
	rdb_flowbuf_dispose(&fb);
}

static void test_synack_held_syn_not(void **state)
{
	struct rdb_flowbuf fb;
	struct sink s = { 0 };

	rdb_flowbuf_init(&fb, 0, 0);
	/* a client connects: the guest's SYN-ACK waits for its epoch */
	g(&fb, &s, 9, false, 1, 1, 777, 1001, RDB_TCP_SYN | A, 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(fb.st.synack_frames, 1);
	assert_int_equal(rdb_flowbuf_release(&fb, 9, sink, &s), 1);
	/* the guest connects out: its SYN leaves at once */
	g(&fb, &s, 9, false, 2, 2, 555, 0, RDB_TCP_SYN, 0);
	expect(&s, 1, (uint32_t[]){ 2 }, 1);
	rdb_flowbuf_dispose(&fb);
}

struct recs {
	unsigned n, removes;
	struct rdb_flow_rec r[64];
};

static void take(void *o, const struct rdb_flow_rec *r)
{
	struct recs *rs = o;

	if (r->op == RDB_FLOW_REMOVE)
		rs->removes++;
	if (rs->n < 64)
		rs->r[rs->n++] = *r;
}

static void test_flow_records_and_ends(void **state)
{
	struct rdb_flowbuf fb;
	struct sink s = { 0 };
	struct recs rs = { 0 };
	uint8_t buf[2000];
	size_t n;

	rdb_flowbuf_init(&fb, 0, 0);
	g(&fb, &s, 1, false, 1, 1, 1000, 500, AP, 100);
	g(&fb, &s, 1, false, 2, 2, 3000, 40, AP, 10);
	g(&fb, &s, 1, false, 1, 3, 1100, 510, AP, 100);
	assert_int_equal(rdb_flowbuf_take_changes(&fb, take, &rs), 2);
	for (unsigned i = 0; i < rs.n; i++) {
		const struct rdb_flow_rec *r = &rs.r[i];

		assert_int_equal(r->op, RDB_FLOW_UPSERT);
		assert_int_equal(r->key.family, 4);
		assert_int_equal(r->key.guest_port, 5432);
		assert_memory_equal(r->guest_mac, gmac, 6);
		assert_memory_equal(r->peer_mac, pmac, 6);
		assert_true(r->have_ack);
		if (r->key.peer_port == 40001) {
			assert_int_equal(r->snd_ref, 1200);
			assert_int_equal(r->rcv_ref, 510);
		} else {
			assert_int_equal(r->key.peer_port, 40002);
			assert_int_equal(r->snd_ref, 3010);
		}
	}
	/* nothing changed: nothing to send */
	rs.n = 0;
	assert_int_equal(rdb_flowbuf_take_changes(&fb, take, &rs), 0);
	/* flow 1: FIN both ways ends it; flow 2: the peer's RST ends it */
	g(&fb, &s, 2, false, 1, 4, 1200, 510, RDB_TCP_FIN | A, 0);
	n = mk(buf, 1, true, 5, 510, 1201, RDB_TCP_FIN | A, 0);
	rdb_flowbuf_from_wire(&fb, buf, n);
	n = mk(buf, 2, true, 6, 40, 3010, RDB_TCP_RST, 0);
	rdb_flowbuf_from_wire(&fb, buf, n);
	assert_int_equal(rdb_flowbuf_flows(&fb), 0);
	assert_int_equal(fb.st.flows_ended, 2);
	rs.n = rs.removes = 0;
	assert_int_equal(rdb_flowbuf_take_changes(&fb, take, &rs), 2);
	assert_int_equal(rs.removes, 2);
	rdb_flowbuf_dispose(&fb);
}

/* A new protection forgets the flows (they moved on unseen while the
 * guest ran unprotected) and learns each again from its next frame; a
 * backup that takes no records does not make them pile up. */
static void test_new_protection_forgets_flows(void **state)
{
	struct rdb_flowbuf fb;
	struct sink s = { 0 };
	struct recs rs = { 0 };

	rdb_flowbuf_init(&fb, 0, 0);
	g(&fb, &s, 1, false, 1, 1, 1000, 500, AP, 100);
	g(&fb, &s, 1, false, 2, 2, 3000, 40, AP, 10);
	assert_int_equal(fb.st.flows_created, 2);
	rdb_flowbuf_forget_flows(&fb);
	assert_int_equal(rdb_flowbuf_flows(&fb), 0);
	assert_int_equal(fb.st.flows_created, 2);	/* counters kept */
	assert_int_equal(rdb_flowbuf_take_changes(&fb, take, &rs), 0);
	/* flow 1 moved on by 3 GiB meanwhile: learned anew, where it is */
	g(&fb, &s, 2, false, 1, 3, 1000 + 3u * (1u << 30), 600, AP, 50);
	assert_int_equal(s.n, 3);			/* left at once */
	assert_int_equal(rdb_flowbuf_take_changes(&fb, take, &rs), 1);
	assert_int_equal(rs.r[0].op, RDB_FLOW_UPSERT);
	assert_int_equal(rs.r[0].key.peer_port, 40001);
	assert_int_equal(rs.r[0].snd_ref, 1050 + 3u * (1u << 30));
	assert_int_equal(rs.r[0].rcv_ref, 600);
	/* changes not taken by a backup are forgotten, not kept */
	g(&fb, &s, 3, false, 2, 4, 3010, 40, RDB_TCP_RST, 0);
	assert_int_equal(fb.nremoved, 1);
	rdb_flowbuf_forget_changes(&fb);
	assert_int_equal(fb.nremoved, 0);
	rs.n = 0;
	assert_int_equal(rdb_flowbuf_take_changes(&fb, take, &rs), 0);
	rdb_flowbuf_dispose(&fb);
}

static void test_flow_with_held_frames_ends_after_release(void **state)
{
	struct rdb_flowbuf fb;
	struct sink s = { 0 };

	rdb_flowbuf_init(&fb, 0, 0);
	g(&fb, &s, 1, true, 1, 1, 1000, 500, AP, 10);
	g(&fb, &s, 1, false, 1, 2, 1010, 500, RDB_TCP_RST, 0);	/* behind */
	assert_int_equal(rdb_flowbuf_flows(&fb), 1);
	assert_int_equal(rdb_flowbuf_release(&fb, 1, sink, &s), 2);
	expect(&s, 0, (uint32_t[]){ 1, 2 }, 2);
	assert_int_equal(rdb_flowbuf_flows(&fb), 0);
	rdb_flowbuf_dispose(&fb);
}

static void test_bounds(void **state)
{
	struct rdb_flowbuf fb;
	struct sink s = { 0 };

	/* 3 flows at most; 210 bytes of held frames */
	rdb_flowbuf_init(&fb, 210, 3);
	g(&fb, &s, 1, true, 1, 1, 1000, 500, AP, 20);		/* 74 bytes */
	g(&fb, &s, 1, true, 2, 2, 1000, 500, AP, 20);		/* 74 */
	g(&fb, &s, 1, true, 3, 3, 1000, 500, AP, 60);		/* over: dropped */
	assert_int_equal(fb.st.dropped, 1);
	assert_int_equal(fb.st.placeholders, 1);
	assert_int_equal(rdb_flowbuf_frames(&fb), 2);
	/* its place is kept: TCP's copy of it, unmarked now, waits for
	 * epoch 1 all the same */
	g(&fb, &s, 2, false, 3, 9, 1000, 500, AP, 1);
	assert_int_equal(s.n, 0);
	assert_int_equal(fb.st.behind_frames, 1);
	/* every flow holds something: a fourth flow is not tracked; unmarked,
	 * it leaves at once */
	g(&fb, &s, 2, false, 4, 4, 1000, 500, AP, 20);
	assert_int_equal(fb.st.untracked, 1);
	expect(&s, 0, (uint32_t[]){ 4 }, 1);
	/* epoch 1 committed: the frames and the copy leave, the kept place
	 * does not */
	assert_int_equal(rdb_flowbuf_release(&fb, 2, sink, &s), 3);
	expect(&s, 1, (uint32_t[]){ 1, 2, 9 }, 3);
	assert_int_equal(rdb_flowbuf_frames(&fb), 0);
	assert_int_equal(rdb_flowbuf_bytes(&fb), 0);
	/* nothing held: flow 4 takes the least recent flow's place */
	g(&fb, &s, 3, false, 4, 5, 1020, 500, AP, 1);
	assert_int_equal(fb.st.flows_evicted, 1);
	assert_int_equal(rdb_flowbuf_flows(&fb), 3);
	/* full of flows with held frames: a marked frame of a new flow goes
	 * to the shared queue (here over the bound: its place kept there),
	 * an unmarked one leaves untracked */
	g(&fb, &s, 3, true, 2, 6, 1020, 500, AP, 1);
	g(&fb, &s, 3, true, 3, 7, 1061, 500, AP, 1);
	g(&fb, &s, 3, true, 4, 10, 1021, 500, AP, 1);
	g(&fb, &s, 3, true, 1, 11, 1020, 500, AP, 1);
	assert_int_equal(rdb_flowbuf_frames(&fb), 3);
	assert_int_equal(fb.st.placeholders, 2);
	g(&fb, &s, 3, false, 5, 8, 1000, 500, AP, 1);
	assert_int_equal(fb.st.untracked, 3);
	assert_int_equal(s.ids[s.n - 1], 8);
	assert_int_equal(rdb_flowbuf_release(&fb, 3, sink, &s), 3);
	expect(&s, 6, (uint32_t[]){ 6, 7, 10 }, 3);
	rdb_flowbuf_dispose(&fb);
}

/*
 * The model check: random traffic on 6 flows (new data, pure ACKs,
 * retransmissions, marked frames), random epochs and ACKs, now and then
 * a drop_after.  The model predicts, for each frame, whether it is held
 * (and whether it blocks its flow) and checks what leaves:
 *   I1   no marked frame left before its epoch was committed;
 *   held an ACK newer than any that left its flow, on a frame without new
 *        data, left only once its epoch was committed;
 *   ord  frames with new data left in the order they were made, per flow;
 *   beh  nothing left ahead of an earlier marked frame of its flow still
 *        held;
 *   now  a frame of a flow with nothing blocking held, unmarked, that
 *        tells no new ACK or brings new data, left at once;
 *   live after an ACK of the newest epoch nothing is held;
 *   acct the buffer holds no more than the model says.
 */
#define NF 6
#define NM 200000

struct mframe {
	int flow;
	uint64_t epoch;
	bool marked, newseq, blocking;
	bool gone;
	uint32_t seq_end;
	size_t len;
};

static struct mframe mf[NM];
static unsigned nmf;

struct mflow {
	uint32_t snd, ack;		/* guest's next seq, its ACK number */
	uint32_t ack_out;		/* highest ACK that left */
	bool ack_out_valid;
	uint32_t last_seq_left;		/* ord */
	bool any_left;
	unsigned blocked;		/* blocking frames still held */
	bool any_made;
	unsigned marked_q[4096], mq_head, mq_tail;	/* held marked ids */
};

static uint64_t committed;
static struct mflow mfl[NF];
static unsigned outst[NM], nout;	/* ids held (model) */

static void gone(struct mframe *m, unsigned id)
{
	struct mflow *fl = &mfl[m->flow];

	m->gone = true;
	if (m->blocking)
		fl->blocked--;
	if (m->marked) {
		assert_true(fl->mq_head != fl->mq_tail);
		assert_int_equal(fl->marked_q[fl->mq_head % 4096], id);
		fl->mq_head++;
	}
}

static void msink(void *o, const uint8_t *f, size_t len)
{
	uint32_t id = frame_id(f);
	struct mframe *m;
	struct mflow *fl;
	struct rdb_tcpseg sg;

	(void)o;
	assert_true(id < nmf);
	m = &mf[id];
	assert_false(m->gone);
	fl = &mfl[m->flow];
	assert_int_equal(rdb_tcpseg_parse(f, len, &sg), 1);
	/* beh: the oldest held marked frame of the flow is this one or later */
	if (fl->mq_head != fl->mq_tail)
		assert_true(fl->marked_q[fl->mq_head % 4096] >= id);
	/* I1 */
	if (m->marked)
		assert_true(m->epoch <= committed);
	/* held */
	if (!m->newseq && (!fl->ack_out_valid || rdb_seq_after(sg.ack, fl->ack_out)) &&
	    m->epoch > committed)
		fail_msg("frame %u (flow %d, epoch %llu, marked %d, blocking %d, "
			 "payload %u, ack %u) left before its epoch was committed "
			 "(%llu; ack_out %u)", id, m->flow,
			 (unsigned long long)m->epoch, m->marked, m->blocking,
			 sg.payload_len, sg.ack, (unsigned long long)committed,
			 fl->ack_out);
	if (!fl->ack_out_valid || rdb_seq_after(sg.ack, fl->ack_out)) {
		fl->ack_out = sg.ack;
		fl->ack_out_valid = true;
	}
	/* ord */
	if (m->newseq) {
		if (fl->any_left)
			assert_true(rdb_seq_after(m->seq_end, fl->last_seq_left));
		fl->last_seq_left = m->seq_end;
		fl->any_left = true;
	}
	gone(m, id);
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static void compact(void)
{
	unsigned k = 0;

	for (unsigned i = 0; i < nout; i++)
		if (!mf[outst[i]].gone)
			outst[k++] = outst[i];
	nout = k;
}

static void test_model_check(void **state)
{
	struct rdb_flowbuf fb;
	uint64_t epoch = 1, holds = 0, nows = 0;
	uint8_t buf[2000];

	rdb_flowbuf_init(&fb, 8u << 20, 0);
	nmf = nout = 0;
	committed = 0;
	memset(mfl, 0, sizeof(mfl));
	for (int i = 0; i < NF; i++) {
		mfl[i].snd = (uint32_t)i * 0x40000000u - 5000;	/* wraps */
		mfl[i].ack = 100;
	}
	while (nmf < NM) {
		unsigned r = (unsigned)(rnd() % 100);

		if (r < 75) {
			int k = (int)(rnd() % NF);
			struct mflow *fl = &mfl[k];
			struct mframe *m = &mf[nmf];
			unsigned kind = (unsigned)(rnd() % 10), id = nmf;
			size_t plen = 0, n;
			uint32_t seq = fl->snd;
			bool acknew;

			memset(m, 0, sizeof(*m));
			m->flow = k;
			m->epoch = epoch;
			if (rnd() % 4 == 0)
				fl->ack += (uint32_t)(rnd() % 300);
			/* (the first frame of a flow is new data by definition:
			 * the buffer has seen nothing before it) */
			if (!fl->any_made)
				kind = 1;
			fl->any_made = true;
			if (kind < 6) {			/* new data */
				plen = 1 + rnd() % 200;
				fl->snd += (uint32_t)plen;
				m->newseq = true;
				m->marked = kind == 0;
			} else if (kind == 8) {		/* retransmission */
				plen = 10;
				seq = fl->snd - 10;
			} else if (kind == 9) {		/* a marked pure ACK */
				m->marked = true;
			}
			m->seq_end = seq + (uint32_t)plen;
			acknew = !fl->ack_out_valid || rdb_seq_after(fl->ack, fl->ack_out);
			m->blocking = fl->blocked > 0 || m->marked;
			if (m->blocking)
				fl->blocked++;
			if (m->marked) {
				assert_true(fl->mq_tail - fl->mq_head < 4096);
				fl->marked_q[fl->mq_tail++ % 4096] = id;
			}
			n = mk(buf, k, false, id, seq, fl->ack, plen ? AP : A, plen);
			m->len = n;
			nmf++;
			outst[nout++] = id;
			rdb_flowbuf_from_guest(&fb, epoch, m->marked, buf, n, msink, NULL);
			/* now */
			if (!m->blocking && (m->newseq || !acknew)) {
				assert_true(m->gone);
				nows++;
			} else {
				assert_false(m->gone);
				holds++;
			}
		} else if (r < 88) {
			epoch++;
		} else if (r < 99) {
			uint64_t upto = committed + rnd() % (epoch - committed + 1);

			committed = upto;
			rdb_flowbuf_release(&fb, committed, msink, NULL);
			/* superseded held ACKs vanish without leaving: they
			 * are non-blocking, unmarked, of committed epochs */
			for (unsigned i = 0; i < nout; i++) {
				struct mframe *m = &mf[outst[i]];

				if (!m->gone && m->epoch <= committed) {
					assert_false(m->blocking);
					m->gone = true;
				}
			}
		} else {
			uint64_t keep = committed + rnd() % (epoch - committed + 1);

			rdb_flowbuf_drop_after(&fb, keep);
			/* whatever was held of the later epochs is gone, newest
			 * first per flow (marked ids leave the queue's tail) */
			for (unsigned i = nout; i-- > 0;) {
				struct mframe *m = &mf[outst[i]];
				struct mflow *fl = &mfl[m->flow];

				if (m->gone || m->epoch <= keep)
					continue;
				m->gone = true;
				if (m->blocking)
					fl->blocked--;
				if (m->marked) {
					assert_int_equal(fl->marked_q[(fl->mq_tail - 1) % 4096],
							 outst[i]);
					fl->mq_tail--;
				}
			}
			epoch = keep + 1;
		}
		compact();
		/* acct */
		assert_true(rdb_flowbuf_frames(&fb) <= nout);
	}
	/* live */
	committed = epoch;
	rdb_flowbuf_release(&fb, epoch, msink, NULL);
	assert_int_equal(rdb_flowbuf_frames(&fb), 0);
	assert_int_equal(rdb_flowbuf_bytes(&fb), 0);
	for (int i = 0; i < NF; i++)
		assert_int_equal(mfl[i].mq_head, mfl[i].mq_tail);
	/* every kind of case was exercised */
	assert_true(nows > 10000 && holds > 10000);
	assert_true(fb.st.marked_frames > 1000);
	assert_true(fb.st.behind_frames > 1000);
	assert_true(fb.st.ack_frames > 1000);
	assert_true(fb.st.superseded > 100);
	assert_true(fb.st.discarded > 100);
	rdb_flowbuf_dispose(&fb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unmarked_of_quiet_flow_leaves_at_once),
		cmocka_unit_test(test_order_within_a_flow),
		cmocka_unit_test(test_held_frame_blocks_only_its_flow),
		cmocka_unit_test(test_release_at_ack_only),
		cmocka_unit_test(test_discard_at_drop),
		cmocka_unit_test(test_new_acks_held_without_blocking),
		cmocka_unit_test(test_synack_held_syn_not),
		cmocka_unit_test(test_flow_records_and_ends),
		cmocka_unit_test(test_new_protection_forgets_flows),
		cmocka_unit_test(test_flow_with_held_frames_ends_after_release),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_model_check),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

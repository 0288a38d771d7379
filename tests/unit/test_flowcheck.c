// SPDX-License-Identifier: GPL-2.0-only
/*
 * The backup's flow check after a failover: probes, the verdict from what
 * the client says, resets with exact sequence numbers, the fence.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "clock.h"
#include "flowcheck.h"
#include "tcpseg.h"

#define MS (1000ull * 1000)

struct side {
	unsigned n;
	struct rdb_tcpseg seg[64];
	uint8_t raw[64][128];
	size_t len[64];
};

static struct side wire, guest;

static void rec(struct side *s, const uint8_t *f, size_t len)
{
	assert_true(s->n < 64);
	if (len <= 128)
		memcpy(s->raw[s->n], f, len);
	s->len[s->n] = len;
	if (rdb_tcpseg_parse(f, len, &s->seg[s->n]) != 1)
		memset(&s->seg[s->n], 0, sizeof(s->seg[0]));
	s->n++;
}

static void to_wire(void *o, const uint8_t *f, size_t len)
{
	rec(&wire, f, len);
}

static void to_guest(void *o, const uint8_t *f, size_t len)
{
	rec(&guest, f, len);
}

static const struct rdb_flowcheck_ops ops = { to_wire, to_guest, NULL };

static const uint8_t gmac[6] = { 0x52, 0x54, 0, 0x52, 0x44, 1 };
static const uint8_t pmac[6] = { 2, 0, 0, 0, 0, 7 };

/* Flow k: guest 10.77.0.100:5432 <-> 10.77.0.k:40000+k */
static struct rdb_flow_rec flow(int k, uint32_t snd_ref, uint32_t rcv_ref)
{
	struct rdb_flow_rec r = { .op = RDB_FLOW_UPSERT, .snd_ref = snd_ref,
				  .rcv_ref = rcv_ref, .have_ack = true };

	r.key.family = 4;
	r.key.guest_ip[0] = 10;
	r.key.guest_ip[1] = 77;
	r.key.guest_ip[3] = 100;
	r.key.peer_ip[0] = 10;
	r.key.peer_ip[1] = 77;
	r.key.peer_ip[3] = (uint8_t)k;
	r.key.guest_port = 5432;
	r.key.peer_port = (uint16_t)(40000 + k);
	memcpy(r.guest_mac, gmac, 6);
	memcpy(r.peer_mac, pmac, 6);
	return r;
}

/* A segment on flow k, from the guest or from the client. */
static size_t seg(uint8_t *buf, int k, bool from_guest, uint32_t seq,
		  uint32_t ack, uint8_t flags, size_t plen,
		  const uint32_t *sack, int nsack)
{
	struct rdb_flow_rec r = flow(k, 0, 0);
	struct rdb_tcp_ends e = { .family = 4 };
	static const uint8_t data[1500];
	size_t n;

	memcpy(e.src_mac, from_guest ? gmac : pmac, 6);
	memcpy(e.dst_mac, from_guest ? pmac : gmac, 6);
	memcpy(e.src_ip, from_guest ? r.key.guest_ip : r.key.peer_ip, 16);
	memcpy(e.dst_ip, from_guest ? r.key.peer_ip : r.key.guest_ip, 16);
	e.sport = from_guest ? r.key.guest_port : r.key.peer_port;
	e.dport = from_guest ? r.key.peer_port : r.key.guest_port;
	n = rdb_tcpseg_build(buf, 2000, &e, seq, ack, flags, 100, data, plen);
	if (nsack) {
		/* rebuild with a SACK option: 2 NOPs + kind 5, by hand */
		uint8_t tmp[2000];
		size_t ol = 4 + 8 * (size_t)nsack, l4 = 34;

		memcpy(tmp, buf, n);
		memcpy(buf, tmp, l4 + 20);
		buf[l4 + 20] = 1;
		buf[l4 + 21] = 1;
		buf[l4 + 22] = 5;
		buf[l4 + 23] = (uint8_t)(2 + 8 * nsack);
		for (int i = 0; i < nsack; i++)
			for (int j = 0; j < 2; j++) {
				uint32_t v = sack[2 * i + j];
				uint8_t *q = buf + l4 + 24 + 8 * i + 4 * j;

				q[0] = (uint8_t)(v >> 24);
				q[1] = (uint8_t)(v >> 16);
				q[2] = (uint8_t)(v >> 8);
				q[3] = (uint8_t)v;
			}
		memcpy(buf + l4 + 20 + ol, tmp + l4 + 20, plen);
		buf[l4 + 12] = (uint8_t)((20 + ol) / 4) << 4;
		n += ol;
		buf[16] = (uint8_t)((n - 14) >> 8);
		buf[17] = (uint8_t)(n - 14);
	}
	return n;
}

static bool from_guest(struct rdb_flowcheck *fc, int k, uint32_t seq,
		       uint32_t ack, uint8_t flags, size_t plen, uint64_t now)
{
	uint8_t buf[2000];
	size_t n = seg(buf, k, true, seq, ack, flags, plen, NULL, 0);

	return rdb_flowcheck_from_guest(fc, buf, n, now);
}

static bool from_client(struct rdb_flowcheck *fc, int k, uint32_t seq,
			uint32_t ack, uint8_t flags, size_t plen,
			const uint32_t *sack, int nsack, uint64_t now)
{
	uint8_t buf[2000];
	size_t n = seg(buf, k, false, seq, ack, flags, plen, sack, nsack);

	return rdb_flowcheck_from_wire(fc, buf, n, now);
}

static void reset_sides(void)
{
	memset(&wire, 0, sizeof(wire));
	memset(&guest, 0, sizeof(guest));
}

static void setup_two(struct rdb_flowcheck *fc)
{
	struct rdb_flow_rec a = flow(1, 1000, 500), b = flow(2, 7000, 900);

	reset_sides();
	rdb_flowcheck_init(fc, "vm1", 0);
	rdb_flowcheck_apply(fc, &a);
	rdb_flowcheck_apply(fc, &b);
	assert_int_equal(rdb_flowcheck_flows(fc), 2);
}

static void test_consistent_and_inconsistent(void **state)
{
	struct rdb_flowcheck fc;

	setup_two(&fc);
	rdb_flowcheck_start(&fc, &ops, true, 1000 * MS, 0);
	assert_int_equal(wire.n + guest.n, 0);
	rdb_flowcheck_guest_running(&fc, 0);
	/* one probe to each end of each flow: one byte, 2^30 below */
	assert_int_equal(wire.n, 2);
	assert_int_equal(guest.n, 2);
	for (unsigned i = 0; i < 2; i++) {
		const struct rdb_tcpseg *w = &wire.seg[i], *g = &guest.seg[i];
		uint32_t sref = w->ends.dport == 40001 ? 1000 : 7000;
		uint32_t rref = g->ends.sport == 40001 ? 500 : 900;

		assert_int_equal(w->payload_len, 1);
		assert_int_equal(w->seq, sref - (1u << 30));
		assert_int_equal(w->flags, RDB_TCP_ACK);
		assert_memory_equal(w->ends.src_mac, gmac, 6);
		assert_memory_equal(w->ends.dst_mac, pmac, 6);
		assert_int_equal(w->ends.sport, 5432);
		assert_int_equal(g->payload_len, 1);
		assert_int_equal(g->seq, rref - (1u << 30));
		assert_memory_equal(g->ends.dst_mac, gmac, 6);
		assert_int_equal(g->ends.dport, 5432);
	}
	reset_sides();
	/* the restored guest sends on A: held until A is judged */
	assert_false(from_guest(&fc, 1, 1000, 500, RDB_TCP_ACK | RDB_TCP_PSH, 50, 1 * MS));
	/* its answer to our probe: taken */
	assert_false(from_guest(&fc, 1, 1050, 500, RDB_TCP_ACK, 0, 1 * MS));
	assert_int_equal(wire.n, 0);
	/* the client of A has seen exactly what the checkpoint had */
	assert_false(from_client(&fc, 1, 500, 1000, RDB_TCP_ACK, 0, NULL, 0, 2 * MS));
	assert_int_equal(wire.n, 1);			/* the held data left */
	assert_int_equal(wire.seg[0].payload_len, 50);
	assert_int_equal(guest.n, 0);			/* fenced */
	assert_int_equal(fc.st.consistent, 1);

	/* the client of B has seen 100 bytes more: reset, once the guest's
	 * RCV.NXT is known from its answer */
	assert_false(from_client(&fc, 2, 930, 7100, RDB_TCP_ACK, 0, NULL, 0, 3 * MS));
	assert_int_equal(fc.st.reset, 0);
	assert_false(from_guest(&fc, 2, 7000, 950, RDB_TCP_ACK, 0, 4 * MS));
	assert_int_equal(fc.st.reset, 1);
	assert_int_equal(wire.n, 2);
	assert_int_equal(wire.seg[1].flags, RDB_TCP_RST);
	assert_int_equal(wire.seg[1].seq, 7100);	/* the client's RCV.NXT */
	assert_int_equal(guest.n, 1);
	assert_int_equal(guest.seg[0].flags, RDB_TCP_RST);
	assert_int_equal(guest.seg[0].seq, 950);	/* the guest's RCV.NXT */
	assert_int_equal(guest.seg[0].ends.sport, 40002);
	/* later guest frames of B go nowhere; the client's held frame neither */
	assert_false(from_guest(&fc, 2, 7000, 950, RDB_TCP_ACK | RDB_TCP_PSH, 10, 5 * MS));
	assert_int_equal(wire.n, 2);

	/* the guest acknowledged the failover event: A's input goes in */
	rdb_flowcheck_lift_fence(&fc, 50 * MS);
	assert_int_equal(guest.n, 2);
	assert_int_equal(guest.seg[1].ends.sport, 40001);
	assert_int_equal(fc.st.fence_ns, 50 * MS);
	assert_false(fc.st.fence_timed_out);
	/* A carries on untouched */
	assert_true(from_guest(&fc, 1, 1050, 520, RDB_TCP_ACK | RDB_TCP_PSH, 5, 60 * MS));
	assert_false(from_client(&fc, 1, 520, 1055, RDB_TCP_ACK, 0, NULL, 0, 60 * MS));
	assert_int_equal(guest.n, 3);
	/* a new connection on B's ports is let through */
	assert_false(from_client(&fc, 2, 1, 0, RDB_TCP_SYN, 0, NULL, 0, 70 * MS));
	assert_int_equal(guest.n, 4);
	assert_true(from_guest(&fc, 2, 99, 2, RDB_TCP_SYN | RDB_TCP_ACK, 0, 70 * MS));
	/* nothing pending */
	assert_int_equal(rdb_flowcheck_tick(&fc, 80 * MS), 0);
	rdb_flowcheck_dispose(&fc);
}

static void test_sack_shows_what_the_client_holds(void **state)
{
	struct rdb_flowcheck fc;
	uint32_t beyond[2] = { 1100, 1200 }, dsack[2] = { 1000 - (1u << 30), 1001 - (1u << 30) };

	setup_two(&fc);
	rdb_flowcheck_start(&fc, &ops, false, 0, 0);
	rdb_flowcheck_guest_running(&fc, 0);
	reset_sides();
	/* A: a D-SACK of our probe byte says nothing: consistent */
	assert_false(from_client(&fc, 1, 500, 1000, RDB_TCP_ACK, 0, dsack, 1, 1 * MS));
	assert_int_equal(fc.st.consistent, 1);
	/* B: RCV.NXT at the checkpoint, but bytes beyond it held out of order */
	beyond[0] = 7100;
	beyond[1] = 7200;
	assert_false(from_client(&fc, 2, 900, 7000, RDB_TCP_ACK, 0, beyond, 1, 1 * MS));
	assert_false(from_guest(&fc, 2, 7000, 900, RDB_TCP_ACK, 0, 2 * MS));
	assert_int_equal(fc.st.reset, 1);
	assert_int_equal(wire.seg[wire.n - 1].flags, RDB_TCP_RST);
	assert_int_equal(wire.seg[wire.n - 1].seq, 7000);
	rdb_flowcheck_dispose(&fc);
}

static void test_unanswered_and_fence_deadline(void **state)
{
	struct rdb_flowcheck fc;
	uint64_t t = 0, next;

	setup_two(&fc);
	rdb_flowcheck_start(&fc, &ops, true, 300 * MS, 0);
	rdb_flowcheck_guest_running(&fc, 0);
	reset_sides();
	assert_false(from_guest(&fc, 1, 1000, 500, RDB_TCP_ACK | RDB_TCP_PSH, 20, 1 * MS));
	/* probes every 200 ms, 5 in all, then the check gives up at 1 s */
	while ((next = rdb_flowcheck_tick(&fc, t)))
		t += next;
	assert_true(t >= 1000 * MS && t < 1100 * MS);
	/* 4 more probes to each end of each flow */
	assert_int_equal(fc.st.probes, 4 + 4 * 4);
	assert_int_equal(fc.st.unanswered, 2);
	/* the held frame went on when A was given up */
	assert_int_equal(wire.seg[wire.n - 1].payload_len, 20);
	assert_true(fc.st.fence_timed_out);
	assert_int_equal(fc.st.fence_ns, 300 * MS);
	rdb_flowcheck_dispose(&fc);
}

static void test_guest_or_client_without_the_connection(void **state)
{
	struct rdb_flowcheck fc;

	setup_two(&fc);
	rdb_flowcheck_start(&fc, &ops, false, 0, 0);
	rdb_flowcheck_guest_running(&fc, 0);
	reset_sides();
	/* A: the restored guest answers our probe with a RST */
	assert_false(from_guest(&fc, 1, 1000 - (1u << 30) + 1, 0, RDB_TCP_RST, 0, 1 * MS));
	assert_false(from_client(&fc, 1, 500, 1000, RDB_TCP_ACK, 0, NULL, 0, 2 * MS));
	assert_int_equal(fc.st.reset, 1);
	assert_int_equal(wire.n, 1);
	assert_int_equal(wire.seg[0].flags, RDB_TCP_RST);
	assert_int_equal(wire.seg[0].seq, 1000);
	assert_int_equal(guest.n, 0);
	/* B: the client answers with a RST; the guest gets one */
	assert_false(from_client(&fc, 2, 900, 0, RDB_TCP_RST, 0, NULL, 0, 3 * MS));
	assert_false(from_guest(&fc, 2, 7000, 910, RDB_TCP_ACK, 0, 4 * MS));
	assert_int_equal(fc.st.reset, 2);
	assert_int_equal(guest.n, 1);
	assert_int_equal(guest.seg[0].flags, RDB_TCP_RST);
	assert_int_equal(guest.seg[0].seq, 910);
	rdb_flowcheck_dispose(&fc);
}

static void test_flows_not_in_the_table(void **state)
{
	struct rdb_flowcheck fc;
	uint8_t arp[60] = { 0 };

	reset_sides();
	rdb_flowcheck_init(&fc, "vm1", 0);
	rdb_flowcheck_start(&fc, &ops, false, 0, 0);
	rdb_flowcheck_guest_running(&fc, 0);
	/* non-TCP passes */
	arp[12] = 8;
	arp[13] = 6;
	assert_true(rdb_flowcheck_from_guest(&fc, arp, sizeof(arp), 0));
	assert_true(rdb_flowcheck_from_wire(&fc, arp, sizeof(arp), 0));
	/* a client frame of an unknown flow: the guest is probed below the
	 * client's sequence; its answer is the reference */
	assert_false(from_client(&fc, 3, 3000, 6000, RDB_TCP_ACK | RDB_TCP_PSH, 10,
				 NULL, 0, 1 * MS));
	assert_int_equal(guest.n, 1);
	assert_int_equal(guest.seg[0].seq, 3000 - (1u << 30));
	assert_int_equal(guest.seg[0].payload_len, 1);
	assert_false(from_guest(&fc, 3, 6000, 3000, RDB_TCP_ACK, 0, 2 * MS));
	assert_int_equal(fc.st.consistent, 1);
	assert_int_equal(guest.n, 2);		/* the client's frame went in */
	assert_int_equal(guest.seg[1].payload_len, 10);
	/* an unknown flow whose client is ahead of the guest */
	assert_false(from_client(&fc, 4, 10, 501, RDB_TCP_ACK, 0, NULL, 0, 3 * MS));
	assert_false(from_guest(&fc, 4, 400, 10, RDB_TCP_ACK, 0, 4 * MS));
	assert_int_equal(fc.st.reset, 1);
	/* a new connection is not checked */
	assert_false(from_client(&fc, 5, 1, 0, RDB_TCP_SYN, 0, NULL, 0, 5 * MS));
	assert_int_equal(guest.seg[guest.n - 1].flags, RDB_TCP_SYN);
	rdb_flowcheck_dispose(&fc);
}

/* A flow that shows up after every other check ended makes the check
 * pending again (the backup's timer is re-armed on it) and is given up
 * on at its deadline; a frame flooded to another host's MAC is not the
 * guest's: passed on (to be dropped by the guest), never probed. */
static void test_late_flows_and_other_hosts(void **state)
{
	struct rdb_flowcheck fc;
	uint8_t buf[2000];
	size_t n;

	setup_two(&fc);
	rdb_flowcheck_start(&fc, &ops, false, 0, 0);
	rdb_flowcheck_guest_running(&fc, 0);
	assert_true(rdb_flowcheck_pending(&fc));
	/* both flows' clients and the guest answer: the check is over */
	assert_false(from_client(&fc, 1, 500, 1000, RDB_TCP_ACK, 0, NULL, 0, 1 * MS));
	assert_false(from_client(&fc, 2, 900, 7000, RDB_TCP_ACK, 0, NULL, 0, 1 * MS));
	assert_int_equal(fc.st.consistent, 2);
	assert_false(rdb_flowcheck_pending(&fc));
	assert_int_equal(rdb_flowcheck_tick(&fc, 2 * MS), 0);
	/* to another host's MAC: not a flow of the guest's */
	n = seg(buf, 3, false, 3000, 6000, RDB_TCP_ACK, 10, NULL, 0);
	buf[5] ^= 0x40;
	reset_sides();
	assert_false(rdb_flowcheck_from_wire(&fc, buf, n, 3 * MS));
	assert_int_equal(guest.n, 1);		/* passed on as it is */
	assert_int_equal(guest.seg[0].payload_len, 10);
	assert_false(rdb_flowcheck_pending(&fc));
	assert_int_equal(rdb_flowcheck_flows(&fc), 2);
	/* a late flow of the guest's: pending until its deadline */
	reset_sides();
	assert_false(from_client(&fc, 4, 10, 501, RDB_TCP_ACK, 0, NULL, 0, 100 * MS));
	assert_int_equal(guest.n, 1);		/* the probe */
	assert_true(rdb_flowcheck_pending(&fc));
	assert_true(rdb_flowcheck_tick(&fc, 101 * MS) > 0);
	assert_int_equal(rdb_flowcheck_tick(&fc, 1200 * MS), 0);
	assert_int_equal(fc.st.unanswered, 1);
	assert_false(rdb_flowcheck_pending(&fc));
	rdb_flowcheck_dispose(&fc);
}

static void test_table_follows_committed_records(void **state)
{
	struct rdb_flowcheck fc;
	struct rdb_flow_rec a = flow(1, 1000, 500), rm = flow(1, 0, 0);

	rdb_flowcheck_init(&fc, "vm1", 2);
	rdb_flowcheck_apply(&fc, &a);
	a.snd_ref = 2000;
	rdb_flowcheck_apply(&fc, &a);		/* an update, not a new flow */
	assert_int_equal(rdb_flowcheck_flows(&fc), 1);
	rm.op = RDB_FLOW_REMOVE;
	rdb_flowcheck_apply(&fc, &rm);
	assert_int_equal(rdb_flowcheck_flows(&fc), 0);
	for (int k = 1; k <= 3; k++) {
		struct rdb_flow_rec r = flow(k, 1, 1);

		rdb_flowcheck_apply(&fc, &r);
	}
	assert_int_equal(rdb_flowcheck_flows(&fc), 2);	/* bounded */
	reset_sides();
	rdb_flowcheck_start(&fc, &ops, false, 0, 0);
	rdb_flowcheck_guest_running(&fc, 0);
	rdb_flowcheck_apply(&fc, &a);			/* too late: ignored */
	assert_int_equal(rdb_flowcheck_flows(&fc), 2);
	rdb_flowcheck_dispose(&fc);
	rdb_flowcheck_dispose(&fc);			/* idempotent */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_consistent_and_inconsistent),
		cmocka_unit_test(test_sack_shows_what_the_client_holds),
		cmocka_unit_test(test_unanswered_and_fence_deadline),
		cmocka_unit_test(test_guest_or_client_without_the_connection),
		cmocka_unit_test(test_flows_not_in_the_table),
		cmocka_unit_test(test_late_flows_and_other_hosts),
		cmocka_unit_test(test_table_follows_committed_records),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

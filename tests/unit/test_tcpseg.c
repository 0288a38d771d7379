// SPDX-License-Identifier: GPL-2.0-only
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "tcpseg.h"

static const uint8_t mac_a[6] = { 0x52, 0x54, 0x00, 0x52, 0x44, 0x01 };
static const uint8_t mac_b[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x07 };

static void ends4(struct rdb_tcp_ends *e)
{
	static const uint8_t a[4] = { 10, 77, 0, 100 }, b[4] = { 10, 77, 0, 1 };

	memset(e, 0, sizeof(*e));
	e->family = 4;
	memcpy(e->src_mac, mac_a, 6);
	memcpy(e->dst_mac, mac_b, 6);
	memcpy(e->src_ip, a, 4);
	memcpy(e->dst_ip, b, 4);
	e->sport = 5432;
	e->dport = 40001;
}

static void ends6(struct rdb_tcp_ends *e)
{
	static const uint8_t a[16] = { 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x64 };
	static const uint8_t b[16] = { 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01 };

	memset(e, 0, sizeof(*e));
	e->family = 6;
	memcpy(e->src_mac, mac_a, 6);
	memcpy(e->dst_mac, mac_b, 6);
	memcpy(e->src_ip, a, 16);
	memcpy(e->dst_ip, b, 16);
	e->sport = 3306;
	e->dport = 50000;
}

/* An independent, byte-at-a-time Internet checksum: 0 over a correct
 * header (or pseudo-header + segment). */
static uint16_t naive_sum(const uint8_t *p, size_t n, uint32_t start)
{
	uint64_t s = start;

	for (size_t i = 0; i < n; i++)
		s += (i & 1) ? p[i] : (uint32_t)p[i] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static void check_sums(const uint8_t *f, size_t len)
{
	size_t o = 14;
	uint32_t pseudo = 0;
	size_t l4;

	if (f[12] == 0x81) {
		o = 18;
	}
	if ((f[o] >> 4) == 4) {
		size_t tot = (size_t)(f[o + 2] << 8 | f[o + 3]);

		assert_int_equal(naive_sum(f + o, 20, 0), 0);
		for (int i = 12; i < 20; i += 2)
			pseudo += (uint32_t)(f[o + i] << 8 | f[o + i + 1]);
		pseudo += 6 + (uint32_t)(tot - 20);
		l4 = o + 20;
		assert_int_equal(naive_sum(f + l4, tot - 20, pseudo), 0);
		assert_int_equal(o + tot, len);
	} else {
		size_t plen = (size_t)(f[o + 4] << 8 | f[o + 5]);

		for (int i = 8; i < 40; i += 2)
			pseudo += (uint32_t)(f[o + i] << 8 | f[o + i + 1]);
		pseudo += 6 + (uint32_t)plen;
		l4 = o + 40;
		assert_int_equal(naive_sum(f + l4, plen, pseudo), 0);
		assert_int_equal(l4 + plen, len);
	}
}

static void round_trip(struct rdb_tcp_ends *e, size_t plen)
{
	uint8_t buf[2000], payload[1500];
	struct rdb_tcpseg s;
	size_t n;

	for (size_t i = 0; i < plen; i++)
		payload[i] = (uint8_t)(i * 7 + 3);
	n = rdb_tcpseg_build(buf, sizeof(buf), e, 0xfffffff0u, 0x12345678u,
			     RDB_TCP_ACK | RDB_TCP_PSH, 502, payload, plen);
	assert_true(n > 0);
	check_sums(buf, n);
	assert_int_equal(rdb_tcpseg_parse(buf, n, &s), 1);
	assert_int_equal(s.ends.family, e->family);
	assert_memory_equal(s.ends.src_ip, e->src_ip, e->family == 4 ? 4 : 16);
	assert_memory_equal(s.ends.dst_ip, e->dst_ip, e->family == 4 ? 4 : 16);
	assert_memory_equal(s.ends.src_mac, e->src_mac, 6);
	assert_memory_equal(s.ends.dst_mac, e->dst_mac, 6);
	assert_int_equal(s.ends.vlan, e->vlan);
	assert_int_equal(s.ends.vlan_tci, e->vlan_tci);
	assert_int_equal(s.ends.sport, e->sport);
	assert_int_equal(s.ends.dport, e->dport);
	assert_int_equal(s.seq, 0xfffffff0u);
	assert_int_equal(s.ack, 0x12345678u);
	assert_int_equal(s.flags, RDB_TCP_ACK | RDB_TCP_PSH);
	assert_int_equal(s.window, 502);
	assert_int_equal(s.payload_len, plen);
	assert_int_equal(rdb_tcpseg_seqlen(&s), plen);
	/* padding after the IP packet (short Ethernet frames) is ignored */
	memset(buf + n, 0, 20);
	assert_int_equal(rdb_tcpseg_parse(buf, n + 20, &s), 1);
	assert_int_equal(s.payload_len, plen);
}

static void test_build_parse_v4_v6_vlan(void **state)
{
	struct rdb_tcp_ends e;

	for (size_t plen = 0; plen <= 1460; plen += 73) {
		ends4(&e);
		round_trip(&e, plen);
		ends6(&e);
		round_trip(&e, plen);
		ends4(&e);
		e.vlan = true;
		e.vlan_tci = 0x0123;
		round_trip(&e, plen);
	}
	ends4(&e);
	round_trip(&e, 1);	/* odd length: the last byte pads the sum */
}

static void test_reverse(void **state)
{
	struct rdb_tcp_ends e, r, rr;

	ends6(&e);
	rdb_tcp_ends_reverse(&e, &r);
	assert_memory_equal(r.src_ip, e.dst_ip, 16);
	assert_memory_equal(r.dst_mac, e.src_mac, 6);
	assert_int_equal(r.sport, e.dport);
	rdb_tcp_ends_reverse(&r, &rr);
	assert_memory_equal(&rr, &e, sizeof(e));
}

/* A SYN-ACK with MSS, SACK-permitted, timestamps, and a SACK block
 * segment with NOPs, as a Linux guest sends them. */
static void test_options_and_flags(void **state)
{
	struct rdb_tcp_ends e;
	uint8_t buf[200];
	struct rdb_tcpseg s;
	size_t n;
	uint8_t *t;

	ends4(&e);
	n = rdb_tcpseg_build(buf, sizeof(buf), &e, 100, 0, RDB_TCP_SYN | RDB_TCP_FIN,
			     0, NULL, 0);
	assert_int_equal(rdb_tcpseg_parse(buf, n, &s), 1);
	assert_int_equal(rdb_tcpseg_seqlen(&s), 2);

	/* hand-built: 20-byte IP, TCP with 12 bytes of options:
	 * NOP NOP SACK(10: one block) */
	memset(buf, 0, sizeof(buf));
	memcpy(buf, mac_b, 6);
	memcpy(buf + 6, mac_a, 6);
	buf[12] = 0x08;
	buf[14] = 0x45;
	buf[17] = 20 + 32;
	buf[23] = 6;
	t = buf + 34;
	t[12] = 8 << 4;
	t[13] = RDB_TCP_ACK;
	t[20] = 1;
	t[21] = 1;
	t[22] = 5;
	t[23] = 10;
	t[24] = 0x00; t[25] = 0x00; t[26] = 0x10; t[27] = 0x00;
	t[28] = 0x00; t[29] = 0x00; t[30] = 0x20; t[31] = 0x00;
	assert_int_equal(rdb_tcpseg_parse(buf, 34 + 32, &s), 1);
	assert_int_equal(s.nsack, 1);
	assert_int_equal(s.sack[0][0], 0x1000);
	assert_int_equal(s.sack[0][1], 0x2000);
	assert_int_equal(s.payload_len, 0);
	/* a SACK option running past the header: ignored, segment kept */
	t[23] = 18;
	assert_int_equal(rdb_tcpseg_parse(buf, 34 + 32, &s), 1);
	assert_int_equal(s.nsack, 0);
}

static void test_not_tcp_and_malformed(void **state)
{
	struct rdb_tcp_ends e;
	uint8_t buf[200], arp[60] = { 0 };
	struct rdb_tcpseg s;
	size_t n;

	arp[12] = 0x08;
	arp[13] = 0x06;
	assert_int_equal(rdb_tcpseg_parse(arp, sizeof(arp), &s), 0);
	assert_int_equal(rdb_tcpseg_parse(arp, 10, &s), 0);

	ends4(&e);
	n = rdb_tcpseg_build(buf, sizeof(buf), &e, 1, 2, RDB_TCP_ACK, 1, NULL, 0);
	/* UDP */
	buf[23] = 17;
	assert_int_equal(rdb_tcpseg_parse(buf, n, &s), 0);
	buf[23] = 6;
	/* a fragment (MF) */
	buf[20] = 0x20;
	assert_int_equal(rdb_tcpseg_parse(buf, n, &s), 0);
	buf[20] = 0x40;
	/* total length beyond the frame */
	assert_int_equal(rdb_tcpseg_parse(buf, n - 1, &s), -EINVAL);
	/* data offset below 5, and beyond the packet */
	buf[34 + 12] = 4 << 4;
	assert_int_equal(rdb_tcpseg_parse(buf, n, &s), -EINVAL);
	buf[34 + 12] = 15 << 4;
	assert_int_equal(rdb_tcpseg_parse(buf, n, &s), -EINVAL);
	/* cap too small to build */
	assert_int_equal(rdb_tcpseg_build(buf, 50, &e, 1, 2, 0, 0, NULL, 0), 0);

	/* IPv6 with a hop-by-hop header before TCP, and a fragment header */
	ends6(&e);
	n = rdb_tcpseg_build(buf + 8, sizeof(buf) - 8, &e, 9, 10, RDB_TCP_ACK, 1, NULL, 0);
	memmove(buf, buf + 8, 54);		/* eth + ipv6 */
	buf[54] = 6;				/* next: TCP */
	buf[55] = 0;				/* 8 bytes */
	memset(buf + 56, 0, 6);
	buf[20] = 0;				/* IPv6 next header: hop-by-hop */
	buf[19] = 28;				/* payload length 8 + 20 */
	assert_int_equal(rdb_tcpseg_parse(buf, n + 8, &s), 1);
	assert_int_equal(s.seq, 9);
	buf[20] = 44;				/* fragment */
	assert_int_equal(rdb_tcpseg_parse(buf, n + 8, &s), 0);
}

static void test_serial_arithmetic(void **state)
{
	assert_true(rdb_seq_after(5, 0xfffffff0u));
	assert_true(rdb_seq_before(0xfffffff0u, 5));
	assert_false(rdb_seq_after(7, 7));
	assert_true(rdb_seq_after(0x80000000u - 1, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build_parse_v4_v6_vlan),
		cmocka_unit_test(test_reverse),
		cmocka_unit_test(test_options_and_flags),
		cmocka_unit_test(test_not_tcp_and_malformed),
		cmocka_unit_test(test_serial_arithmetic),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: GPL-2.0-only
/*
 * The classification shared by remusdb.ko's marking and remusdbd
 * (guest-kmod/include/uapi/remusdb.h): what is marked, what is not,
 * and that stripping restores a valid IPv4 header checksum and leaves
 * the rest of the packet alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "remusdb.h"

static uint16_t ip_csum(const uint8_t *h, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i < n; i += 2)
		s += (uint32_t)(h[i] << 8 | h[i + 1]);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* Ethernet + IPv4 (+ 8 bytes of "TCP"), valid checksum. */
static size_t v4(uint8_t *f, int vlan, uint16_t frag_off)
{
	size_t o = 12;
	uint16_t c;

	memset(f, 0, 128);
	if (vlan) {
		f[o++] = 0x81; f[o++] = 0x00; f[o++] = 0x00; f[o++] = 0x05;
	}
	f[o++] = 0x08; f[o++] = 0x00;
	f[o] = 0x45; f[o + 2] = 0; f[o + 3] = 28; f[o + 4] = 0x12; f[o + 5] = 0x34;
	f[o + 6] = (uint8_t)(frag_off >> 8); f[o + 7] = (uint8_t)frag_off;
	f[o + 8] = 64; f[o + 9] = 6;
	f[o + 12] = 10; f[o + 13] = 77; f[o + 15] = 100;
	f[o + 16] = 10; f[o + 17] = 77; f[o + 19] = 10;
	c = ip_csum(f + o, 20);
	f[o + 10] = (uint8_t)(c >> 8); f[o + 11] = (uint8_t)c;
	memset(f + o + 20, 0xab, 8);
	return o + 28;
}

static size_t v6(uint8_t *f, uint8_t dscp, uint8_t ecn)
{
	uint8_t tc = (uint8_t)(dscp << 2 | ecn);

	memset(f, 0, 128);
	f[12] = 0x86; f[13] = 0xdd;
	f[14] = (uint8_t)(0x60 | tc >> 4);
	f[15] = (uint8_t)(tc << 4 | 0x0a);	/* flow label bits kept */
	f[20] = 6;
	memset(f + 54, 0xcd, 8);
	return 62;
}

static void test_ipv4(void **state)
{
	uint8_t f[128], g[128];
	size_t n;

	(void)state;
	for (int vlan = 0; vlan < 2; vlan++) {
		size_t o = vlan ? 18 : 14;

		n = v4(f, vlan, 0x4000);	/* DF only */
		assert_int_equal(remusdb_frame_marked(f, n, REMUSDB_DSCP_DEFAULT), 0);
		assert_int_equal(remusdb_frame_strip(f, n, REMUSDB_DSCP_DEFAULT), 0);
		n = v4(f, vlan, 0xc000);	/* DF + the mark */
		memcpy(g, f, n);
		assert_int_equal(remusdb_frame_marked(f, n, REMUSDB_DSCP_DEFAULT), 1);
		assert_int_equal(remusdb_frame_strip(f, n, REMUSDB_DSCP_DEFAULT), 1);
		assert_int_equal(remusdb_frame_marked(f, n, REMUSDB_DSCP_DEFAULT), 0);
		/* the checksum is right again, and only flags + checksum moved */
		assert_int_equal(ip_csum(f + o, 20), 0);
		assert_int_equal(f[o + 6], 0x40);
		assert_memory_equal(f, g, o + 6);
		assert_memory_equal(f + o + 12, g + o + 12, n - o - 12);
		/* the same as building it unmarked */
		v4(g, vlan, 0x4000);
		assert_memory_equal(f, g, n);
	}
	/* every 16-bit checksum value round trips (RFC 1624 corner cases) */
	for (unsigned id = 0; id < 65536; id += 7) {
		n = v4(f, 0, 0xa000);
		f[18] = (uint8_t)(id >> 8); f[19] = (uint8_t)id;
		{
			uint16_t c;

			f[24] = f[25] = 0;
			c = ip_csum(f + 14, 20);
			f[24] = (uint8_t)(c >> 8); f[25] = (uint8_t)c;
		}
		assert_int_equal(remusdb_frame_strip(f, n, REMUSDB_DSCP_DEFAULT), 1);
		assert_int_equal(ip_csum(f + 14, 20), 0);
	}
}

static void test_ipv6(void **state)
{
	uint8_t f[128], g[128];
	size_t n;

	(void)state;
	n = v6(f, 0, 0);
	assert_int_equal(remusdb_frame_marked(f, n, REMUSDB_DSCP_DEFAULT), 0);
	n = v6(f, 0x2e, 0);			/* EF: not ours */
	assert_int_equal(remusdb_frame_marked(f, n, REMUSDB_DSCP_DEFAULT), 0);
	n = v6(f, REMUSDB_DSCP_DEFAULT, 2);	/* ours, ECT(0) */
	assert_int_equal(remusdb_frame_marked(f, n, REMUSDB_DSCP_DEFAULT), 1);
	assert_int_equal(remusdb_frame_marked(f, n, 0x10), 0);	/* other codepoint configured */
	assert_int_equal(remusdb_frame_strip(f, n, REMUSDB_DSCP_DEFAULT), 1);
	v6(g, 0, 2);				/* ECN and flow label kept */
	assert_memory_equal(f, g, n);
}

static void test_not_ip_or_short(void **state)
{
	uint8_t f[128];
	size_t n = v4(f, 0, 0x8000);

	(void)state;
	for (size_t k = 0; k < 34; k++)
		assert_int_equal(remusdb_frame_marked(f, k, REMUSDB_DSCP_DEFAULT), 0);
	assert_int_equal(remusdb_frame_marked(f, n, REMUSDB_DSCP_DEFAULT), 1);
	f[12] = 0x08; f[13] = 0x06;		/* ARP */
	assert_int_equal(remusdb_frame_marked(f, n, REMUSDB_DSCP_DEFAULT), 0);
	f[12] = 0x08; f[13] = 0x00;
	f[14] = 0x65;				/* version 6 in an IPv4 ethertype */
	assert_int_equal(remusdb_frame_marked(f, n, REMUSDB_DSCP_DEFAULT), 0);
	n = v6(f, REMUSDB_DSCP_DEFAULT, 0);
	assert_int_equal(remusdb_frame_marked(f, 53, REMUSDB_DSCP_DEFAULT), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ipv4),
		cmocka_unit_test(test_ipv6),
		cmocka_unit_test(test_not_ip_or_short),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: GPL-2.0-only
/* A Xen vif's frames finished for the daemon (xen/vif_frame.h): a partial
 * TCP or UDP checksum, as netfront offloads it, comes out as the sum the
 * frame would have had with no offload (expected values computed apart,
 * with a one's-complement sum in Python over the same bytes); GSO frames
 * and checksum places outside the frame are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "xen/vif_frame.h"

/* Ethernet + IPv4 (10.77.0.100 -> 10.77.0.10) + TCP 7000 -> 40000 with
 * 18 bytes of data; TCP checksum field (offset 50) zero */
static const char tcp_hex[] =
	"52540012345600163e00000108004500003a00014000400625b60a4d00640a4d000a"
	"1b589c40000003e8000007d05018faf00000000031323334350a31323334360a3132"
	"3334370a";
#define TCP_FULL 0x0d20u	/* the finished checksum */
#define TCP_PSEUDO 0x1534u	/* the pseudo-header's sum, as offloaded */
/* ... + UDP 5353 -> 53 with 3 bytes (odd length); checksum at 40 */
static const char udp_hex[] =
	"52540012345600163e00000108004500001f00024000401125c50a4d00640a4d000a"
	"14e90035000b0000616263";
#define UDP_FULL 0x1150u
#define UDP_PSEUDO 0x1524u

static size_t frame(uint8_t *buf, const char *hex, uint8_t flags,
		    uint8_t gso, uint16_t start, uint16_t off, uint16_t pseudo)
{
	struct rdb_vnet_hdr h = { .flags = flags, .gso_type = gso,
				  .csum_start = start, .csum_offset = off };
	size_t n = strlen(hex) / 2;

	memcpy(buf, &h, RDB_VNET_HDR_LEN);
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		sscanf(hex + 2 * i, "%2x", &v);
		buf[RDB_VNET_HDR_LEN + i] = (uint8_t)v;
	}
	buf[RDB_VNET_HDR_LEN + start + off] = (uint8_t)(pseudo >> 8);
	buf[RDB_VNET_HDR_LEN + start + off + 1] = (uint8_t)pseudo;
	return RDB_VNET_HDR_LEN + n;
}

static uint16_t at(const uint8_t *buf, size_t off)
{
	return (uint16_t)(buf[RDB_VNET_HDR_LEN + off] << 8 |
			  buf[RDB_VNET_HDR_LEN + off + 1]);
}

static void test_tcp_partial_finished(void **state)
{
	uint8_t buf[128];
	size_t n = frame(buf, tcp_hex, RDB_VNET_F_NEEDS_CSUM, 0, 34, 16,
			 TCP_PSEUDO);

	(void)state;
	assert_int_equal(rdb_vif_frame_finish(buf, n), RDB_VIF_FRAME_OK);
	assert_int_equal(at(buf, 50), TCP_FULL);
	assert_int_equal(buf[0] & RDB_VNET_F_NEEDS_CSUM, 0);
	/* the IPv4 header's own checksum is untouched */
	assert_int_equal(at(buf, 24), 0x25b6);
}

static void test_udp_odd_length(void **state)
{
	uint8_t buf[128];
	size_t n = frame(buf, udp_hex, RDB_VNET_F_NEEDS_CSUM, 0, 34, 6,
			 UDP_PSEUDO);

	(void)state;
	assert_int_equal(rdb_vif_frame_finish(buf, n), RDB_VIF_FRAME_OK);
	assert_int_equal(at(buf, 40), UDP_FULL);
}

static void test_finished_frame_unchanged(void **state)
{
	uint8_t buf[128], copy[128];
	size_t n = frame(buf, tcp_hex, 0, 0, 34, 16, TCP_FULL);

	(void)state;
	memcpy(copy, buf, n);
	assert_int_equal(rdb_vif_frame_finish(buf, n), RDB_VIF_FRAME_OK);
	assert_memory_equal(buf, copy, n);
}

static void test_refused(void **state)
{
	uint8_t buf[128];
	size_t n;

	(void)state;
	n = frame(buf, tcp_hex, RDB_VNET_F_NEEDS_CSUM, 1 /* TCPV4 */, 34, 16,
		  TCP_PSEUDO);
	assert_int_equal(rdb_vif_frame_finish(buf, n), RDB_VIF_FRAME_GSO);
	/* the checksum's place past the frame's end */
	n = frame(buf, udp_hex, RDB_VNET_F_NEEDS_CSUM, 0, 34, 6, UDP_PSEUDO);
	buf[RDB_VNET_HDR_LEN - 4] = 44;		/* csum_start = 44 */
	buf[RDB_VNET_HDR_LEN - 3] = 0;
	buf[RDB_VNET_HDR_LEN - 2] = 0;		/* csum_offset = 0x100 */
	buf[RDB_VNET_HDR_LEN - 1] = 1;
	assert_int_equal(rdb_vif_frame_finish(buf, n), RDB_VIF_FRAME_BAD);
}

static void test_zero_sum_is_ffff(void **state)
{
	/* 0xffff + 0x0000 sums to 0xffff, whose complement is 0: sent as
	 * 0xffff (UDP's "no checksum" is 0) */
	uint8_t buf[RDB_VNET_HDR_LEN + 20] = { 0 };
	struct rdb_vnet_hdr h = { .flags = RDB_VNET_F_NEEDS_CSUM,
				  .csum_start = 14, .csum_offset = 2 };

	(void)state;
	memcpy(buf, &h, RDB_VNET_HDR_LEN);
	buf[RDB_VNET_HDR_LEN + 14] = 0xff;
	buf[RDB_VNET_HDR_LEN + 15] = 0xff;
	assert_int_equal(rdb_vif_frame_finish(buf, sizeof(buf)), RDB_VIF_FRAME_OK);
	assert_int_equal(at(buf, 16), 0xffff);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tcp_partial_finished),
		cmocka_unit_test(test_udp_odd_length),
		cmocka_unit_test(test_finished_frame_unchanged),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_zero_sum_is_ffff),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

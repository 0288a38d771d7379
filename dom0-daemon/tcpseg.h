/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * TCP segments in Ethernet frames, as commit protection needs them: the
 * flow a frame belongs to, its sequence numbers and flags (read), and
 * whole segments with correct checksums (written: the backup's probes
 * and resets after a failover).  Pure functions over (frame, len).
 *
 * Frame grammar accepted (everything else is "not TCP"):
 *   frame = eth [vlan] (ipv4 | ipv6) tcp payload [padding]
 *   eth   = dst:6 src:6 type:2          type 0x0800, 0x86dd, or 0x8100
 *   vlan  = tci:2 type:2                 (one 802.1Q tag)
 *   ipv4  = IHL >= 5, total length within the frame, not a fragment
 *   ipv6  = 40 bytes, then hop-by-hop / routing / destination options
 *           headers skipped, a fragment header is "not TCP"
 *   tcp   = data offset >= 5, within the IP payload; SACK blocks read
 *           from the options
 */
#ifndef RDB_TCPSEG_H
#define RDB_TCPSEG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDB_TCP_FIN 0x01
#define RDB_TCP_SYN 0x02
#define RDB_TCP_RST 0x04
#define RDB_TCP_PSH 0x08
#define RDB_TCP_ACK 0x10

#define RDB_TCPSEG_MAX_SACK 4

/* One side of a connection and the other: who sends, to whom. */
struct rdb_tcp_ends {
	uint8_t family;			/* 4 or 6 */
	bool vlan;
	uint16_t vlan_tci;
	uint8_t src_mac[6], dst_mac[6];
	uint8_t src_ip[16], dst_ip[16];	/* IPv4: the first 4 bytes */
	uint16_t sport, dport;
};

struct rdb_tcpseg {
	struct rdb_tcp_ends ends;
	uint32_t seq, ack;
	uint8_t flags;			/* RDB_TCP_* */
	uint16_t window;
	uint32_t payload_len;
	uint8_t nsack;
	uint32_t sack[RDB_TCPSEG_MAX_SACK][2];	/* [left, right) */
};

/*
 * 1: frame carries a TCP segment, *seg filled; 0: it does not (not IP,
 * not TCP, a fragment, too short to tell); -EINVAL: it claims to be TCP
 * but its headers contradict its length.
 */
int rdb_tcpseg_parse(const uint8_t *frame, size_t len, struct rdb_tcpseg *seg);

/* Sequence space the segment occupies: payload, plus one for SYN and FIN. */
uint32_t rdb_tcpseg_seqlen(const struct rdb_tcpseg *seg);

/* The same connection seen from the other end (MACs, IPs, ports swapped). */
void rdb_tcp_ends_reverse(const struct rdb_tcp_ends *in, struct rdb_tcp_ends *out);

/*
 * Writes one Ethernet frame carrying a TCP segment from e->src to e->dst
 * (IPv4 with DF, TTL 64; IPv6 hop limit 64; no TCP options) with correct
 * IP and TCP checksums.  Returns its length, or 0 if cap is too small.
 */
size_t rdb_tcpseg_build(uint8_t *buf, size_t cap, const struct rdb_tcp_ends *e,
			uint32_t seq, uint32_t ack, uint8_t flags, uint16_t window,
			const uint8_t *payload, size_t plen);

/* Serial-number arithmetic (RFC 1982) over 32-bit sequence numbers. */
static inline bool rdb_seq_after(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

static inline bool rdb_seq_before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

/* "10.0.0.1:5432" or "[fd00::1]:5432" */
void rdb_tcp_addr_str(uint8_t family, const uint8_t *ip, uint16_t port,
		      char *out, size_t outlen);

#endif

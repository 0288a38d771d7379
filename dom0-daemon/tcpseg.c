// SPDX-License-Identifier: GPL-2.0-only
#include "tcpseg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* SACK blocks from the options; anything malformed ends the scan (the
 * segment itself stays valid: options are advisory here). */
static void read_options(const uint8_t *o, size_t len, struct rdb_tcpseg *seg)
{
	size_t i = 0;

	while (i < len) {
		uint8_t kind = o[i], olen;

		if (kind == 0)
			return;
		if (kind == 1) {
			i++;
			continue;
		}
		if (i + 1 >= len)
			return;
		olen = o[i + 1];
		if (olen < 2 || i + olen > len)
			return;
		if (kind == 5 && (olen - 2) % 8 == 0) {
			for (size_t b = i + 2; b + 8 <= (size_t)i + olen &&
			     seg->nsack < RDB_TCPSEG_MAX_SACK; b += 8) {
				seg->sack[seg->nsack][0] = be32(o + b);
				seg->sack[seg->nsack][1] = be32(o + b + 4);
				seg->nsack++;
			}
		}
		i += olen;
	}
}

int rdb_tcpseg_parse(const uint8_t *f, size_t len, struct rdb_tcpseg *seg)
{
	size_t o = 14, l4, l4len, thl;
	uint16_t type;
	uint8_t proto;

	memset(seg, 0, sizeof(*seg));
	if (len < 14)
		return 0;
	memcpy(seg->ends.dst_mac, f, 6);
	memcpy(seg->ends.src_mac, f + 6, 6);
	type = be16(f + 12);
	if (type == 0x8100) {
		if (len < 18)
			return 0;
		seg->ends.vlan = true;
		seg->ends.vlan_tci = be16(f + 14);
		type = be16(f + 16);
		o = 18;
	}
	if (type == 0x0800) {
		size_t ihl, tot;

		if (len < o + 20 || (f[o] >> 4) != 4)
			return 0;
		ihl = (size_t)(f[o] & 0x0f) * 4;
		tot = be16(f + o + 2);
		if (ihl < 20 || tot < ihl || o + tot > len)
			return f[o + 9] == 6 ? -EINVAL : 0;
		/* MF set or an offset: a fragment, not a whole segment */
		if (be16(f + o + 6) & 0x3fff)
			return 0;
		proto = f[o + 9];
		seg->ends.family = 4;
		memcpy(seg->ends.src_ip, f + o + 12, 4);
		memcpy(seg->ends.dst_ip, f + o + 16, 4);
		l4 = o + ihl;
		l4len = tot - ihl;
	} else if (type == 0x86dd) {
		size_t plen;

		if (len < o + 40 || (f[o] >> 4) != 6)
			return 0;
		plen = be16(f + o + 4);
		if (o + 40 + plen > len)
			return -EINVAL;
		seg->ends.family = 6;
		memcpy(seg->ends.src_ip, f + o + 8, 16);
		memcpy(seg->ends.dst_ip, f + o + 24, 16);
		proto = f[o + 6];
		l4 = o + 40;
		l4len = plen;
		/* hop-by-hop 0, routing 43, destination options 60 */
		while (proto == 0 || proto == 43 || proto == 60) {
			size_t hl;

			if (l4len < 8)
				return -EINVAL;
			hl = ((size_t)f[l4 + 1] + 1) * 8;
			if (hl > l4len)
				return -EINVAL;
			proto = f[l4];
			l4 += hl;
			l4len -= hl;
		}
	} else {
		return 0;
	}
	if (proto != 6)
		return 0;
	if (l4len < 20)
		return -EINVAL;
	thl = (size_t)(f[l4 + 12] >> 4) * 4;
	if (thl < 20 || thl > l4len)
		return -EINVAL;
	seg->ends.sport = be16(f + l4);
	seg->ends.dport = be16(f + l4 + 2);
	seg->seq = be32(f + l4 + 4);
	seg->ack = be32(f + l4 + 8);
	seg->flags = f[l4 + 13] & 0x3f;
	seg->window = be16(f + l4 + 14);
	seg->payload_len = (uint32_t)(l4len - thl);
	read_options(f + l4 + 20, thl - 20, seg);
	return 1;
}

uint32_t rdb_tcpseg_seqlen(const struct rdb_tcpseg *seg)
{
	return seg->payload_len + !!(seg->flags & RDB_TCP_SYN) +
	       !!(seg->flags & RDB_TCP_FIN);
}

void rdb_tcp_ends_reverse(const struct rdb_tcp_ends *in, struct rdb_tcp_ends *out)
{
	struct rdb_tcp_ends r = *in;

	memcpy(r.src_mac, in->dst_mac, 6);
	memcpy(r.dst_mac, in->src_mac, 6);
	memcpy(r.src_ip, in->dst_ip, 16);
	memcpy(r.dst_ip, in->src_ip, 16);
	r.sport = in->dport;
	r.dport = in->sport;
	*out = r;
}

/* One's-complement sum of len bytes, folded later. */
static uint32_t sum16(uint32_t sum, const uint8_t *p, size_t len)
{
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += be16(p + i);
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

size_t rdb_tcpseg_build(uint8_t *buf, size_t cap, const struct rdb_tcp_ends *e,
			uint32_t seq, uint32_t ack, uint8_t flags, uint16_t window,
			const uint8_t *payload, size_t plen)
{
	size_t o = e->vlan ? 18 : 14, iplen = e->family == 4 ? 20 : 40;
	size_t l4 = o + iplen, total = l4 + 20 + plen;
	uint32_t sum = 0;
	uint8_t *t;

	if (total > cap || plen > 65535 - 60)
		return 0;
	memset(buf, 0, l4 + 20);
	memcpy(buf, e->dst_mac, 6);
	memcpy(buf + 6, e->src_mac, 6);
	if (e->vlan) {
		put16(buf + 12, 0x8100);
		put16(buf + 14, e->vlan_tci);
	}
	put16(buf + o - 2, e->family == 4 ? 0x0800 : 0x86dd);
	if (e->family == 4) {
		uint8_t *ip = buf + o;

		ip[0] = 0x45;
		put16(ip + 2, (uint16_t)(20 + 20 + plen));
		put16(ip + 6, 0x4000);		/* DF */
		ip[8] = 64;
		ip[9] = 6;
		memcpy(ip + 12, e->src_ip, 4);
		memcpy(ip + 16, e->dst_ip, 4);
		put16(ip + 10, fold(sum16(0, ip, 20)));
		sum = sum16(sum, e->src_ip, 4);
		sum = sum16(sum, e->dst_ip, 4);
	} else {
		uint8_t *ip = buf + o;

		ip[0] = 0x60;
		put16(ip + 4, (uint16_t)(20 + plen));
		ip[6] = 6;
		ip[7] = 64;
		memcpy(ip + 8, e->src_ip, 16);
		memcpy(ip + 24, e->dst_ip, 16);
		sum = sum16(sum, e->src_ip, 16);
		sum = sum16(sum, e->dst_ip, 16);
	}
	sum += 6 + (uint32_t)(20 + plen);
	t = buf + l4;
	put16(t, e->sport);
	put16(t + 2, e->dport);
	put32(t + 4, seq);
	put32(t + 8, ack);
	t[12] = 5 << 4;
	t[13] = flags;
	put16(t + 14, window);
	if (plen)
		memcpy(t + 20, payload, plen);
	sum = sum16(sum, t, 20 + plen);
	put16(t + 16, fold(sum));
	return total;
}

void rdb_tcp_addr_str(uint8_t family, const uint8_t *ip, uint16_t port,
		      char *out, size_t outlen)
{
	char a[INET6_ADDRSTRLEN] = "?";

	inet_ntop(family == 4 ? AF_INET : AF_INET6, ip, a, sizeof(a));
	snprintf(out, outlen, family == 4 ? "%s:%u" : "[%s]:%u", a, port);
}

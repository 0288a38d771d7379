/* SPDX-License-Identifier: (GPL-2.0-only WITH Linux-syscall-note) OR MIT */
/*
 * RemusDB commit protection: the contract between the guest kernel module
 * (remusdb.ko), the DBMS patches, the tests and the host daemon (remusdbd).
 * One header decides what "protected" and "marked" mean on both sides.
 *
 * Socket option (a private range registered with nf_register_sockopt):
 *
 *   int on = 1;
 *   setsockopt(fd, SOL_IP,   REMUSDB_SO_PROTECT, &on, sizeof(on));  IPv4 TCP
 *   setsockopt(fd, SOL_IPV6, REMUSDB_SO_PROTECT, &on, sizeof(on));  IPv6 TCP
 *   getsockopt(fd, SOL_IP or SOL_IPV6, REMUSDB_SO_PROTECT, &on, &len);
 *
 * on = 1 protects the socket, 0 unprotects it.  Errors: ENOPROTOOPT (the
 * module is not loaded), EOPNOTSUPP (not a TCP socket), EINVAL (optlen
 * < sizeof(int)), EPERM (the caller may not: see the module's protect_gid
 * parameter; by default any process may protect its own TCP sockets —
 * marking only ever delays that socket's own packets).
 *
 * The mark is taken when a packet is transmitted, not when the
 * application wrote the bytes (the kernel copies the socket's mark into
 * each packet it sends).  So a DBMS keeps the socket protected until the
 * bytes written while protected have been acknowledged by the client
 * (ioctl SIOCOUTQ == 0): unprotecting earlier could let a first
 * transmission or a retransmission of a commit acknowledgement leave
 * unmarked.
 *
 *   __u64 gen;  socklen_t len = sizeof(gen);
 *   getsockopt(fd, SOL_IP or SOL_IPV6, REMUSDB_SO_ABORT_GEN, &gen, &len);
 *
 * (any TCP socket; get only) the guest's abort generation: 0 at load, +1
 * for every failover event carrying REMUSDB_EVENT_ABORT, counted before
 * the write of that event to /dev/remusdb returns.  A transaction that
 * began under another value must not commit: the failover happened
 * while it was open, and it had not requested COMMIT before the
 * checkpoint the VM now runs from.  Errors as above; EINVAL if optlen
 * < 8.
 *
 * On the wire, every packet a protected socket sends is marked at the
 * end of the guest's POST_ROUTING:
 *   IPv4: the reserved flag bit (0x8000 of frag_off, RFC 791's "must be
 *         zero" bit), header checksum updated;
 *   IPv6: DSCP = the module's dscp parameter (default REMUSDB_DSCP_DEFAULT,
 *         a pool-2 "experimental or local use" codepoint, RFC 2474).
 * remusdbd classifies frames with remusdb_frame_marked() and strips the
 * mark with remusdb_frame_strip() before anything leaves the host, so
 * peers never see it.  The guest must not route on REMUSDB_SK_MARK_BIT of
 * the socket mark (the module keeps the per-socket flag there: TCP copies
 * sk_mark into every packet it sends, and nothing needs freeing when the
 * socket goes), and must not use REMUSDB_DSCP_DEFAULT (or the configured
 * codepoint) for anything else on IPv6.
 *
 * Failover event (host -> guest): after a failover the backup's remusdbd
 * writes one line to the guest's virtio-serial port REMUSDB_PORT_NAME:
 *   "REMUSDB-FAILOVER epoch=<u64> generation=<u64> flags=<u32>\n"
 * (flags= may be absent: 0).  The guest helper (remusdb-eventd) writes it
 * to /dev/remusdb as a struct remusdb_event, then answers on the same
 * port with
 *   "REMUSDB-FAILOVER-ACK generation=<u64>\n"
 * once the write has returned (so the abort generation has moved).
 * Under commit protection the backup holds the clients' TCP input to the
 * guest until that answer (or its deadline).  Readers of /dev/remusdb
 * block (or poll) until an event newer than the last one they read
 * arrives.
 */
#ifndef _UAPI_REMUSDB_H
#define _UAPI_REMUSDB_H

#include <linux/types.h>

#define REMUSDB_SO_BASE 0x5244		/* 'R' 'D': clear of every IP/IPv6 option */
#define REMUSDB_SO_PROTECT (REMUSDB_SO_BASE + 0)
#define REMUSDB_SO_ABORT_GEN (REMUSDB_SO_BASE + 1)	/* get only: __u64 */
#define REMUSDB_SO_MAX (REMUSDB_SO_BASE + 2)	/* exclusive */

#define REMUSDB_SK_MARK_BIT 0x40000000u
#define REMUSDB_IPV4_MARK 0x8000u	/* in frag_off, host order */
#define REMUSDB_DSCP_DEFAULT 0x2b	/* 101011: pool 2, EXP/LU */

#define REMUSDB_PORT_NAME "org.remusdb.0"
#define REMUSDB_DEV "/dev/remusdb"

/*
 * The primary ran with commit protection: output of epochs the backup
 * never committed may have reached clients.  Every transaction that had
 * not requested COMMIT before the checkpoint must be aborted (the DBMS's
 * failover handler does it; REMUSDB_SO_ABORT_GEN moves).  Without it
 * (plain Remus) no client saw anything the restored guest did not do,
 * and open transactions may carry on.
 */
#define REMUSDB_EVENT_ABORT 0x1u

struct remusdb_event {
	__u64 epoch;		/* the checkpoint the VM runs from */
	__u64 generation;	/* failovers of this VM so far (1, 2, ...) */
	__u32 flags;		/* REMUSDB_EVENT_* */
	__u32 reserved;		/* 0 */
};

/*
 * Frame classification, shared by remusdbd and the tests (pure, no
 * kernel or libc calls).  frame: an Ethernet frame (optionally one
 * 802.1Q tag) of len bytes.  Returns 1 if it carries a marked IPv4 or
 * IPv6 packet, 0 otherwise (including anything too short to tell).
 */
static inline int remusdb__l3(const __u8 *f, unsigned long len,
			      unsigned long *off, __u16 *type)
{
	unsigned long o = 12;

	if (len < 14)
		return 0;
	*type = (__u16)(f[o] << 8 | f[o + 1]);
	o += 2;
	if (*type == 0x8100) {
		if (len < 18)
			return 0;
		*type = (__u16)(f[o + 2] << 8 | f[o + 3]);
		o += 4;
	}
	*off = o;
	return 1;
}

static inline int remusdb_frame_marked(const __u8 *f, unsigned long len,
				       __u8 dscp)
{
	unsigned long o;
	__u16 t;

	if (!remusdb__l3(f, len, &o, &t))
		return 0;
	if (t == 0x0800 && len >= o + 20 && (f[o] >> 4) == 4)
		return (f[o + 6] & 0x80) != 0;
	if (t == 0x86dd && len >= o + 40 && (f[o] >> 4) == 6)
		return (((f[o] & 0x0f) << 4 | f[o + 1] >> 4) >> 2) == dscp;
	return 0;
}

/* Clears the mark in place (IPv4: the bit, and the header checksum
 * adjusted as RFC 1624 says; IPv6: DSCP 0, ECN kept).  Returns 1 if it
 * did, 0 if the frame was not marked. */
static inline int remusdb_frame_strip(__u8 *f, unsigned long len, __u8 dscp)
{
	unsigned long o;
	__u16 t;

	if (!remusdb_frame_marked(f, len, dscp) || !remusdb__l3(f, len, &o, &t))
		return 0;
	if (t == 0x0800) {
		__u32 sum;
		__u16 old = (__u16)(f[o + 6] << 8 | f[o + 7]), nw = old & 0x7fff;
		__u16 hc = (__u16)(f[o + 10] << 8 | f[o + 11]);

		/* HC' = ~(~HC + ~m + m') */
		sum = (__u16)~hc + (__u16)~old + nw;
		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		hc = (__u16)~sum;
		f[o + 6] = (__u8)(nw >> 8);
		f[o + 10] = (__u8)(hc >> 8);
		f[o + 11] = (__u8)hc;
		return 1;
	}
	/* traffic class = DSCP(6) ECN(2), split over bytes 0 and 1 */
	f[o] &= 0xf0;
	f[o + 1] &= 0x3f;
	return 1;
}

#endif

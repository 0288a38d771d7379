/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A TLS relay: one thread per replication link that owns the TCP socket
 * and its SSL object and bridges the plaintext to a socketpair.  The
 * event loop reads and writes the other end of that pair exactly as it
 * did the TCP socket (non-blocking, EOF when the peer is gone), so no
 * I/O path of the daemon changes and no TLS call ever runs in the loop.
 *
 *   event loop <-- socketpair --> relay thread <-- TLS over TCP --> peer
 *
 * The handshake runs in the thread, bounded by a deadline: a peer that
 * connects and says nothing costs one thread until then, never the loop.
 * If it fails, the thread records why and closes its end of the pair
 * (the loop reads EOF; rdb_tlsrelay_status() says why).  Bytes the loop
 * wrote before the handshake finished wait in the pair: they reach the
 * peer only over an authenticated link, and the peer's bytes reach the
 * loop only after the handshake succeeded.
 *
 * Ending: the loop closes (or shuts down for writing) its end; the
 * thread sends what it already took, a TLS close_notify, a TCP FIN, and
 * goes on delivering the peer's bytes until the peer ends too, the loop
 * has closed, or RDB_TLSRELAY_LINGER_NS passed.  A peer that ends first
 * (close_notify or FIN) becomes EOF for the loop.  A TLS error in the
 * stream (a record that does not authenticate) is logged by the thread
 * and ends both sides at once.
 */
#ifndef RDB_TLSRELAY_H
#define RDB_TLSRELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"

/* Longest a relay keeps going after the loop's end closed. */
#define RDB_TLSRELAY_LINGER_NS (2 * RDB_NS_PER_S)
/* Relay threads alive at once; past it new links are refused (-EAGAIN):
 * a flood of connections must not become a flood of threads. */
#define RDB_TLSRELAY_MAX 256

struct ssl_st;
struct rdb_tlsrelay;

/* Policy hooks, called in the relay thread (linksec.c supplies them). */
struct rdb_tlsrelay_ops {
	/* The handshake completed: 0 to relay, or a negative errno and why
	 * (the peer is not who it must be). */
	int (*established)(struct ssl_st *ssl, char *why, size_t len);
	/* The handshake failed with rc (-ECONNRESET: the peer closed;
	 * -EPROTO: a TLS error, OpenSSL's error queue holds it) and detail
	 * (OpenSSL's reason).  first/nfirst: the first bytes the peer sent
	 * (at most 4), to recognise a peer that does not speak TLS.
	 * Writes why; returns the rc to report. */
	int (*failed)(struct ssl_st *ssl, int rc, const char *detail,
		      const uint8_t *first, size_t nfirst, char *why, size_t len);
	/* Accepting only, may be NULL: the handshake failed on a peer
	 * whose first bytes are first/nfirst; the bytes to send it in the
	 * clear before closing (at most cap), so that a peer that speaks
	 * no TLS learns why.  Returns their number, 0 for none. */
	size_t (*plain_reply)(const uint8_t *first, size_t nfirst,
			      uint8_t *out, size_t cap);
};

/*
 * Starts a relay on a connected, non-blocking TCP socket.  Takes ssl and
 * tcp_fd in every case (on failure both are freed).  server: accept the
 * handshake (else connect).  peer names the other side in the thread's
 * log lines ("backup 10.0.0.2:7788 (vm1)").  On success *fd_out is the
 * loop's end of the pair (non-blocking, CLOEXEC) and *relay_out a
 * reference for rdb_tlsrelay_status(), released with rdb_tlsrelay_put();
 * the relay lives on until both the loop's end is closed and the thread
 * is done, whatever order the two happen in.
 */
int rdb_tlsrelay_start(struct ssl_st *ssl, int tcp_fd, bool server,
		       uint64_t deadline_ns, const struct rdb_tlsrelay_ops *ops,
		       const char *peer, int *fd_out,
		       struct rdb_tlsrelay **relay_out);

/* 0: handshake under way (why: "TLS handshake in progress");
 * 1: handshake done (why: protocol and cipher, "TLSv1.3 TLS_AES_...");
 * negative errno: failed (why: the reason). */
int rdb_tlsrelay_status(struct rdb_tlsrelay *r, char *why, size_t len);
/* Drops the caller's reference; NULL is fine. */
void rdb_tlsrelay_put(struct rdb_tlsrelay *r);
/* Relay threads alive now in this process (tests: none may leak). */
unsigned rdb_tlsrelay_live(void);

#endif

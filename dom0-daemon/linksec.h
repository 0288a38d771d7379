/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Security of the replication link (docs/link-security.md): TLS 1.3 with
 * a pre-shared key that every host of a cluster holds (link_psk_file),
 * or, only when the operator says so, plaintext (link_security =
 * insecure).
 *
 * Both ends prove they hold the key: the connecting primary with the PSK
 * binder of its ClientHello, the accepting backup with a Finished message
 * keyed by the same PSK (with an ECDHE share mixed in: forward secrecy).
 * Nothing is accepted in its place: the backup has no certificate to
 * offer, the primary trusts none, and a handshake that did not use the
 * PSK is refused after the fact as well.  The TLS runs in a relay thread
 * per link (tlsrelay.h); callers get a plain fd for their event loop.
 */
#ifndef RDB_LINKSEC_H
#define RDB_LINKSEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rdb_tlsrelay;
struct rdb_linksec;

enum rdb_link_role {
	RDB_LINK_CONNECT,	/* a primary, to its backup */
	RDB_LINK_ACCEPT,	/* a backup, from a primary */
};

/* A key file: hex digits only (blanks and newlines around them ignored),
 * this many bytes once decoded ("openssl rand -hex 32" makes one). */
#define RDB_LINKSEC_KEY_MIN 16
#define RDB_LINKSEC_KEY_MAX 64

/*
 * From the daemon's settings (link_security, link_psk_file): "psk" reads
 * the key file, which must be a regular file that neither group nor
 * others may read; "insecure" needs no key.  Fails with a message for
 * the operator in err: a daemon without a usable key must not start.
 */
int rdb_linksec_create(const char *security, const char *psk_file,
		       struct rdb_linksec **ls_out, char *err, size_t errlen);
void rdb_linksec_destroy(struct rdb_linksec *ls);	/* NULL ok */
/* "TLS 1.3 PSK, key id 1a2b3c4d" or "plaintext (link_security = insecure)" */
const char *rdb_linksec_describe(const struct rdb_linksec *ls);

/*
 * Secures a connected, non-blocking TCP socket (taken in every case).
 * TLS: *fd_out is the plaintext end of a relay whose handshake is under
 * way until deadline_ns, *relay_out its reference (rdb_tlsrelay_status
 * says how the handshake went; rdb_tlsrelay_put releases it).
 * Insecure: *fd_out is tcp_fd itself and *relay_out NULL.
 * peer names the other side in log lines.
 */
int rdb_linksec_open(struct rdb_linksec *ls, enum rdb_link_role role,
		     int tcp_fd, uint64_t deadline_ns, const char *peer,
		     int *fd_out, struct rdb_tlsrelay **relay_out);

/*
 * How the link's security stands, for an error message: 1 and "" when
 * nothing is wrong with it (plaintext, or the handshake succeeded), 0
 * while the handshake runs, a negative errno with the reason when it
 * failed (-EACCES: authentication failed; -EPROTO: the peer does not
 * speak TLS or speaks it wrongly; -ETIMEDOUT, -ECONNRESET).
 */
int rdb_linksec_failure(struct rdb_tlsrelay *relay, char *why, size_t len);

/* A TLS record header (handshake or alert) at b: what a plaintext end
 * receives from a peer that holds a link key. */
bool rdb_linksec_looks_like_tls(const uint8_t *b, size_t n);

#endif

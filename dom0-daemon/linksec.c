// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "tls"
#include "buf.h"
#include "linksec.h"
#include "proto.h"
#include "tlsrelay.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <pthread.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

/* The PSK identity: a fixed prefix and the key's id (below).  The id
 * lets a backup tell "a different key" from "no key" in its log; it says
 * nothing about the key that the PSK binder does not already. */
#define IDENTITY_PREFIX "remusdb-link-v1:"
/* Both suites hash with SHA-256, the hash the PSK is bound to. */
#define CIPHERSUITES "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256"

/* The key, as each SSL_CTX holds it (ex_data): a relay's handshake may
 * outlive the rdb_linksec that started it (the daemon shutting down),
 * never the SSL_CTX its SSL holds a reference to. */
struct psk {
	uint8_t key[RDB_LINKSEC_KEY_MAX];
	size_t keylen;
	char key_id[9];
	char identity[sizeof(IDENTITY_PREFIX) + 8];
};

struct rdb_linksec {
	bool insecure;
	SSL_CTX *connect_ctx, *accept_ctx;
	char desc[96];
};

/* ex_data indices, one each per process */
static pthread_once_t idx_once = PTHREAD_ONCE_INIT;
static int ctx_idx = -1;		/* SSL_CTX: struct psk */
static int note_idx = -1;		/* SSL: struct note */

/* What the backup saw of a primary's handshake, for its error message. */
struct note {
	bool psk_offered;		/* some PSK identity came */
	bool other_key;			/* ours in form, another key's id */
	char peer_key_id[9];
};

/* ---- the key ---- */

static int unhex(int c)
{
	return isdigit(c) ? c - '0' : isxdigit(c) ? tolower(c) - 'a' + 10 : -1;
}

static int parse_key(const char *text, size_t n, uint8_t *key, size_t *len_out)
{
	size_t i = 0, len = 0;

	while (i < n && isspace((unsigned char)text[i]))
		i++;
	while (i < n && isxdigit((unsigned char)text[i])) {
		if (i + 1 >= n || !isxdigit((unsigned char)text[i + 1]) ||
		    len == RDB_LINKSEC_KEY_MAX)
			return -EINVAL;
		key[len++] = (uint8_t)(unhex(text[i]) << 4 | unhex(text[i + 1]));
		i += 2;
	}
	while (i < n && isspace((unsigned char)text[i]))
		i++;
	if (i != n || len < RDB_LINKSEC_KEY_MIN)
		return -EINVAL;
	*len_out = len;
	return 0;
}

static int load_key(struct psk *k, const char *path, char *err,
		    size_t errlen)
{
	char text[512];
	struct stat sb;
	ssize_t n;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "link_psk_file %s: %s. Make one key for "
			 "the cluster (umask 077; openssl rand -hex 32 > %s) "
			 "and copy it to every host, or set link_security = "
			 "insecure for a plaintext, unauthenticated replication "
			 "link", path, strerror(-rc), path);
		return rc;
	}
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "link_psk_file %s: not a regular file", path);
		rc = -EINVAL;
		goto out;
	}
	if (sb.st_mode & 077) {
		snprintf(err, errlen, "link_psk_file %s is open to group or "
			 "others (mode %04o): chmod 600 it, and treat the key "
			 "as compromised if others could read it", path,
			 (unsigned)(sb.st_mode & 07777));
		rc = -EPERM;
		goto out;
	}
	n = read(fd, text, sizeof(text));
	if (n < 0) {
		rc = -errno;
		snprintf(err, errlen, "link_psk_file %s: %s", path, strerror(-rc));
		goto out;
	}
	rc = n == (ssize_t)sizeof(text) ? -EINVAL :
		parse_key(text, (size_t)n, k->key, &k->keylen);
	OPENSSL_cleanse(text, sizeof(text));
	if (rc < 0)
		snprintf(err, errlen, "link_psk_file %s: want %d to %d hex "
			 "digits and nothing else (openssl rand -hex 32)", path,
			 2 * RDB_LINKSEC_KEY_MIN, 2 * RDB_LINKSEC_KEY_MAX);
out:
	close(fd);
	return rc;
}

/* The first 4 bytes of SHA-256("remusdb link key id" || key), in hex. */
static int key_id(struct psk *k)
{
	static const char label[] = "remusdb link key id";
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	int ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) &&
		EVP_DigestUpdate(c, label, sizeof(label) - 1) &&
		EVP_DigestUpdate(c, k->key, k->keylen) &&
		EVP_DigestFinal_ex(c, md, &mdlen);

	EVP_MD_CTX_free(c);
	if (!ok)
		return -ENOMEM;
	snprintf(k->key_id, sizeof(k->key_id), "%02x%02x%02x%02x", md[0],
		 md[1], md[2], md[3]);
	return 0;
}

/* ---- TLS 1.3 external PSK ---- */

static struct psk *of(SSL *ssl)
{
	return SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_idx);
}

static SSL_SESSION *psk_session(struct psk *k, SSL *ssl)
{
	static const unsigned char aes128gcm_sha256[] = { 0x13, 0x01 };
	const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, aes128gcm_sha256);
	SSL_SESSION *s = cipher ? SSL_SESSION_new() : NULL;

	if (s && (!SSL_SESSION_set1_master_key(s, k->key, k->keylen) ||
		  !SSL_SESSION_set_cipher(s, cipher) ||
		  !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION))) {
		SSL_SESSION_free(s);
		s = NULL;
	}
	return s;
}

/* Primary: offers the key (its binder proves we hold it). */
static int use_session(SSL *ssl, const EVP_MD *md, const unsigned char **id,
		       size_t *idlen, SSL_SESSION **sess)
{
	struct psk *k = of(ssl);

	*sess = NULL;
	/* After a HelloRetryRequest the suite is fixed: its hash must be
	 * the key's. */
	if (md && md != EVP_sha256())
		return 1;
	*sess = psk_session(k, ssl);
	if (!*sess)
		return 0;
	*id = (const unsigned char *)k->identity;
	*idlen = strlen(k->identity);
	return 1;
}

/* Backup: the key for the identity the primary named, if it is ours.
 * Another identity gets no key, and without one (and without a
 * certificate, which we never have) the handshake fails. */
static int find_session(SSL *ssl, const unsigned char *id, size_t idlen,
			SSL_SESSION **sess)
{
	struct psk *k = of(ssl);
	struct note *nt = SSL_get_ex_data(ssl, note_idx);
	size_t plen = strlen(IDENTITY_PREFIX);

	*sess = NULL;
	if (nt) {
		nt->psk_offered = true;
		if (idlen == plen + 8 && !memcmp(id, IDENTITY_PREFIX, plen)) {
			nt->other_key = true;
			memcpy(nt->peer_key_id, id + plen, 8);
			nt->peer_key_id[8] = 0;
			for (int i = 0; i < 8; i++)
				if (!isxdigit((unsigned char)nt->peer_key_id[i]))
					nt->peer_key_id[i] = '?';
		}
	}
	if (idlen != strlen(k->identity) || memcmp(id, k->identity, idlen))
		return 1;
	if (nt)
		nt->other_key = false;
	*sess = psk_session(k, ssl);
	return *sess ? 1 : 0;
}

static void note_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
		      long argl, void *argp)
{
	free(ptr);
}

static void psk_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
		     long argl, void *argp)
{
	if (ptr)
		OPENSSL_cleanse(ptr, sizeof(struct psk));
	free(ptr);
}

static void make_indices(void)
{
	ctx_idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, psk_free);
	note_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, note_free);
}

/* Belt and braces: whatever the library would have settled for, a
 * handshake that did not use our key is not our peer. */
static int established(SSL *ssl, char *why, size_t len)
{
	if (SSL_version(ssl) != TLS1_3_VERSION || SSL_session_reused(ssl) != 1) {
		snprintf(why, len, "authentication failed: the TLS handshake "
			 "did not use the link key");
		return -EACCES;
	}
	return 0;
}

static bool starts_like(const uint8_t *first, size_t n, const char *magic)
{
	return n > 0 && memcmp(first, magic, n < 4 ? n : 4) == 0;
}

/* The alert the peer sent us, or 0 (OpenSSL reports a received alert
 * as reason SSL_AD_REASON_OFFSET + its number). */
static int alert_received(void)
{
	unsigned long e = ERR_peek_last_error();
	int r = ERR_GET_REASON(e);

	return ERR_GET_LIB(e) == ERR_LIB_SSL && r > SSL_AD_REASON_OFFSET &&
	       r < SSL_AD_REASON_OFFSET + 256 ? r - SSL_AD_REASON_OFFSET : 0;
}

static int failed(SSL *ssl, int rc, const char *detail, const uint8_t *first,
		  size_t nfirst, char *why, size_t len)
{
	struct psk *k = of(ssl);
	struct note *nt = SSL_get_ex_data(ssl, note_idx);
	bool server = SSL_is_server(ssl);
	const char *other = server ? "primary" : "backup";
	int reason = ERR_GET_REASON(ERR_peek_last_error());
	int alert = alert_received();

	/* The remusdb frame magic, "RDB1": the peer speaks plaintext. */
	if (starts_like(first, nfirst, "RDB1")) {
		snprintf(why, len, "authentication failed: the %s speaks the "
			 "replication protocol in plaintext (it runs with "
			 "link_security = insecure); this host requires TLS "
			 "with the link key", other);
		return -EPROTO;
	}
	/* A TLS record starts with its type: 0x16 handshake, 0x15 alert. */
	if (nfirst > 0 && first[0] != 0x16 && first[0] != 0x15) {
		snprintf(why, len, "the peer does not speak TLS (it began with "
			 "%02x %02x %02x %02x)", first[0],
			 nfirst > 1 ? first[1] : 0, nfirst > 2 ? first[2] : 0,
			 nfirst > 3 ? first[3] : 0);
		return -EPROTO;
	}
	if (rc != -EPROTO) {
		snprintf(why, len, "%s", detail);
		return rc;
	}
	if (server && nt && nt->other_key) {
		snprintf(why, len, "authentication failed: the primary's link key "
			 "(id %s) is not this host's (id %s)", nt->peer_key_id,
			 k->key_id);
		return -EACCES;
	}
	if (server && reason == SSL_R_BINDER_DOES_NOT_VERIFY) {
		snprintf(why, len, "authentication failed: the primary's link key "
			 "is not this host's (id %s): its PSK binder does not "
			 "verify", k->key_id);
		return -EACCES;
	}
	if (server && nt && !nt->psk_offered) {
		snprintf(why, len, "authentication failed: the peer offered no "
			 "link key (%s)", detail);
		return -EACCES;
	}
	if (!server && reason == SSL_R_CERTIFICATE_VERIFY_FAILED) {
		snprintf(why, len, "authentication failed: the peer showed a "
			 "certificate instead of proving it holds the link key: "
			 "it is not a remusdbd with our key");
		return -EACCES;
	}
	if (alert == SSL_AD_PROTOCOL_VERSION) {
		snprintf(why, len, "the %s speaks no TLS version we accept "
			 "(1.3 only): %s", other, detail);
		return -EPROTO;
	}
	/* The first words must say it all: a VM's state reason is short. */
	if (alert) {
		snprintf(why, len, "authentication failed: the %s refused our "
			 "link key (id %s; TLS alert: %s); both hosts need the "
			 "same link_psk_file", other, k->key_id,
			 SSL_alert_desc_string_long(alert));
		return -EACCES;
	}
	snprintf(why, len, "TLS handshake failed: %s", detail);
	return -EPROTO;
}

/* A primary that speaks the replication protocol in plaintext gets a
 * HELLO_NAK it can read: it learns why instead of seeing a reset. */
static size_t plain_reply(const uint8_t *first, size_t nfirst, uint8_t *out,
			  size_t cap)
{
	struct rdb_buf b;
	size_t n = 0;

	if (!starts_like(first, nfirst, "RDB1"))
		return 0;
	rdb_buf_init(&b);
	if (rdb_proto_put_hello_nak(&b, "this backup requires TLS with the "
				    "link key (link_security = psk)") == 0 &&
	    b.len <= cap) {
		memcpy(out, b.data, b.len);
		n = b.len;
	}
	rdb_buf_dispose(&b);
	return n;
}

static const struct rdb_tlsrelay_ops relay_ops = {
	.established = established,
	.failed = failed,
	.plain_reply = plain_reply,
};

/* A context holding its own copy of the key (given or not: freed with
 * the context). */
static SSL_CTX *make_ctx(const struct psk *key, bool server)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_method());
	struct psk *k = malloc(sizeof(*k));

	if (!ctx || !k || !SSL_CTX_set_ex_data(ctx, ctx_idx, k)) {
		free(k);
		SSL_CTX_free(ctx);
		return NULL;
	}
	memcpy(k, key, sizeof(*k));
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_ciphersuites(ctx, CIPHERSUITES)) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	/* No tickets, no cache: every link proves the key afresh. */
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	SSL_CTX_set_num_tickets(ctx, 0);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
			 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_read_ahead(ctx, 1);
	SSL_CTX_set_default_read_buffer_len(ctx, 64 * 1024);
	if (server) {
		SSL_CTX_set_psk_find_session_callback(ctx, find_session);
	} else {
		SSL_CTX_set_psk_use_session_callback(ctx, use_session);
		/* An empty trust store: any certificate fails. */
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	}
	return ctx;
}

int rdb_linksec_create(const char *security, const char *psk_file,
		       struct rdb_linksec **ls_out, char *err, size_t errlen)
{
	struct rdb_linksec *ls = calloc(1, sizeof(*ls));
	struct psk k = { .keylen = 0 };
	int rc;

	if (!ls)
		return -ENOMEM;
	if (security && !strcmp(security, "insecure")) {
		ls->insecure = true;
		snprintf(ls->desc, sizeof(ls->desc),
			 "plaintext, unauthenticated: link_security = insecure");
		*ls_out = ls;
		return 0;
	}
	if (!security || strcmp(security, "psk")) {
		snprintf(err, errlen, "link_security = %s: want psk or insecure",
			 security ? security : "");
		rc = -EINVAL;
		goto out;
	}
	if (!psk_file || !psk_file[0]) {
		snprintf(err, errlen, "link_security = psk but no link_psk_file: "
			 "the replication link needs a key (openssl rand -hex 32 "
			 "> /etc/remusdb/link.psk, the same file on every host), "
			 "or link_security = insecure for a plaintext, "
			 "unauthenticated link");
		rc = -EINVAL;
		goto out;
	}
	rc = load_key(&k, psk_file, err, errlen);
	if (rc < 0)
		goto out;
	rc = key_id(&k);
	if (rc < 0) {
		snprintf(err, errlen, "link key: SHA-256 unavailable");
		goto out;
	}
	snprintf(k.identity, sizeof(k.identity), "%s%s", IDENTITY_PREFIX,
		 k.key_id);
	pthread_once(&idx_once, make_indices);
	if (ctx_idx < 0 || note_idx < 0 ||
	    !(ls->connect_ctx = make_ctx(&k, false)) ||
	    !(ls->accept_ctx = make_ctx(&k, true))) {
		char e[160];

		ERR_error_string_n(ERR_get_error(), e, sizeof(e));
		snprintf(err, errlen, "TLS setup: %s", e);
		rc = -ENOMEM;
		goto out;
	}
	snprintf(ls->desc, sizeof(ls->desc), "TLS 1.3, pre-shared key id %s",
		 k.key_id);
	*ls_out = ls;
	ls = NULL;
out:
	OPENSSL_cleanse(&k, sizeof(k));
	rdb_linksec_destroy(ls);
	return rc;
}

/* Relays still running keep the contexts they use alive (SSL_new took a
 * reference), so this is safe with links open. */
void rdb_linksec_destroy(struct rdb_linksec *ls)
{
	if (!ls)
		return;
	SSL_CTX_free(ls->connect_ctx);
	SSL_CTX_free(ls->accept_ctx);
	free(ls);
}

const char *rdb_linksec_describe(const struct rdb_linksec *ls)
{
	return ls->desc;
}

int rdb_linksec_open(struct rdb_linksec *ls, enum rdb_link_role role,
		     int tcp_fd, uint64_t deadline_ns, const char *peer,
		     int *fd_out, struct rdb_tlsrelay **relay_out)
{
	bool server = role == RDB_LINK_ACCEPT;
	struct note *nt;
	SSL *ssl;

	*relay_out = NULL;
	if (ls->insecure) {
		*fd_out = tcp_fd;
		return 0;
	}
	ssl = SSL_new(server ? ls->accept_ctx : ls->connect_ctx);
	nt = calloc(1, sizeof(*nt));
	if (!ssl || !nt || !SSL_set_ex_data(ssl, note_idx, nt)) {
		/* Once set, the note goes with the SSL (note_free). */
		if (!ssl || !SSL_get_ex_data(ssl, note_idx))
			free(nt);
		SSL_free(ssl);
		close(tcp_fd);
		return -ENOMEM;
	}
	return rdb_tlsrelay_start(ssl, tcp_fd, server, deadline_ns, &relay_ops,
				  peer, fd_out, relay_out);
}

int rdb_linksec_failure(struct rdb_tlsrelay *relay, char *why, size_t len)
{
	int rc;

	if (!relay) {
		snprintf(why, len, "%s", "");
		return 1;
	}
	rc = rdb_tlsrelay_status(relay, why, len);
	if (rc == 1)
		snprintf(why, len, "%s", "");
	return rc;
}

bool rdb_linksec_looks_like_tls(const uint8_t *b, size_t n)
{
	/* type 0x16 handshake or 0x15 alert, then version 3.x */
	return b && n >= 3 && (b[0] == 0x16 || b[0] == 0x15) && b[1] == 3 &&
	       b[2] <= 4;
}

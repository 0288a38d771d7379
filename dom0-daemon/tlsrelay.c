// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "tls"
#include "tlsrelay.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

/* Plaintext taken from one side per step: four TLS records. */
#define RELAY_BUF (64 * 1024)
/* TLS records written to the peer wait here until the relay has nothing
 * more to encrypt (or this is full): one write() for what was one per
 * 16 KiB record, and fewer, larger segments for the peer to wake on. */
#define RELAY_WBUF (256 * 1024)
#define RELAY_STACK (512 * 1024)

enum phase {
	PHASE_HANDSHAKE,
	PHASE_OPEN,
	PHASE_FAILED,
};

struct rdb_tlsrelay {
	pthread_mutex_t mu;		/* guards refs, phase, rc, why */
	int refs;			/* the caller's and the thread's */
	enum phase phase;
	int rc;
	char why[256];

	/* the thread's own from here on */
	SSL *ssl;
	BIO *wbio;			/* the TLS records' buffer, before tcp */
	int tcp, sp;
	bool server;
	uint64_t deadline_ns;
	const struct rdb_tlsrelay_ops *ops;
	char peer[128];
	uint8_t first[4];		/* the peer's first bytes */
	size_t nfirst;
	uint8_t *rx, *tx;		/* peer -> loop, loop -> peer */
};

static atomic_uint live;

unsigned rdb_tlsrelay_live(void)
{
	return atomic_load(&live);
}

static void relay_free(struct rdb_tlsrelay *r)
{
	pthread_mutex_destroy(&r->mu);
	free(r->rx);
	free(r->tx);
	free(r);
}

void rdb_tlsrelay_put(struct rdb_tlsrelay *r)
{
	int left;

	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	left = --r->refs;
	pthread_mutex_unlock(&r->mu);
	if (left == 0)
		relay_free(r);
}

int rdb_tlsrelay_status(struct rdb_tlsrelay *r, char *why, size_t len)
{
	int rc;

	pthread_mutex_lock(&r->mu);
	switch (r->phase) {
	case PHASE_HANDSHAKE:
		rc = 0;
		snprintf(why, len, "TLS handshake in progress");
		break;
	case PHASE_OPEN:
		rc = 1;
		snprintf(why, len, "%s", r->why);
		break;
	default:
		rc = r->rc;
		snprintf(why, len, "%s", r->why);
	}
	pthread_mutex_unlock(&r->mu);
	return rc;
}

static void set_phase(struct rdb_tlsrelay *r, enum phase ph, int rc,
		      const char *why)
{
	pthread_mutex_lock(&r->mu);
	r->phase = ph;
	r->rc = rc;
	snprintf(r->why, sizeof(r->why), "%s", why);
	pthread_mutex_unlock(&r->mu);
}

/* Keeps the first bytes the peer sends, for rdb_tlsrelay_ops.failed. */
static long note_first(BIO *b, int oper, const char *argp, size_t len,
		       int argi, long argl, int ret, size_t *processed)
{
	struct rdb_tlsrelay *r = (struct rdb_tlsrelay *)BIO_get_callback_arg(b);

	if (oper == (BIO_CB_READ | BIO_CB_RETURN) && ret > 0 && processed &&
	    r->nfirst < sizeof(r->first)) {
		size_t n = *processed;

		if (n > sizeof(r->first) - r->nfirst)
			n = sizeof(r->first) - r->nfirst;
		memcpy(r->first + r->nfirst, argp, n);
		r->nfirst += n;
	}
	return ret;
}

/* OpenSSL's reason for the last failure, its queue left for ops->failed. */
static void ssl_reason(char *buf, size_t len)
{
	unsigned long e = ERR_peek_last_error();
	const char *reason = e ? ERR_reason_error_string(e) : NULL;

	snprintf(buf, len, "%s", reason ? reason : e ? "unknown TLS error" :
		 "no reason given");
}

static bool is_eof(SSL *ssl, int ret)
{
	int e = SSL_get_error(ssl, ret);

	if (e == SSL_ERROR_ZERO_RETURN)
		return true;
	if (e == SSL_ERROR_SYSCALL)
		return ERR_peek_error() == 0 &&
		       (errno == 0 || errno == ECONNRESET || errno == EPIPE);
	return e == SSL_ERROR_SSL &&
	       ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
}

/* A peer without TLS gets the policy's plaintext answer.  The rest of
 * what it sent is read first: closing a socket with unread bytes sends
 * an RST, which can destroy the answer before the peer reads it. */
static void answer_in_clear(struct rdb_tlsrelay *r)
{
	uint8_t out[512], sink[4096];
	size_t n;

	if (!r->server || !r->ops->plain_reply)
		return;
	n = r->ops->plain_reply(r->first, r->nfirst, out, sizeof(out));
	if (n == 0)
		return;
	while (read(r->tcp, sink, sizeof(sink)) > 0)
		;
	if (send(r->tcp, out, n, MSG_NOSIGNAL) == (ssize_t)n)
		shutdown(r->tcp, SHUT_WR);
}

/* A write met a peer that ended the session (its close_notify came:
 * OpenSSL then reports ZERO_RETURN) or closed or reset the connection. */
static bool peer_gone(SSL *ssl, int ret)
{
	int e = SSL_get_error(ssl, ret);

	if (e == SSL_ERROR_ZERO_RETURN ||
	    (SSL_get_shutdown(ssl) & SSL_RECEIVED_SHUTDOWN))
		return true;
	return e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 &&
	       (errno == EPIPE || errno == ECONNRESET);
}

static int handshake_failed(struct rdb_tlsrelay *r, int ret)
{
	char detail[200], why[256];
	int rc;

	if (is_eof(r->ssl, ret)) {
		rc = -ECONNRESET;
		snprintf(detail, sizeof(detail), "the peer closed the connection "
			 "during the TLS handshake");
	} else if (SSL_get_error(r->ssl, ret) == SSL_ERROR_SYSCALL &&
		   ERR_peek_error() == 0) {
		rc = errno ? -errno : -EIO;
		snprintf(detail, sizeof(detail), "TLS handshake: %s", strerror(-rc));
	} else {
		rc = -EPROTO;
		ssl_reason(detail, sizeof(detail));
	}
	rc = r->ops->failed(r->ssl, rc, detail, r->first, r->nfirst, why,
			    sizeof(why));
	ERR_clear_error();
	answer_in_clear(r);
	set_phase(r, PHASE_FAILED, rc, why);
	return rc;
}

static int handshake(struct rdb_tlsrelay *r)
{
	char why[256];
	int rc;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = r->tcp },
			/* Bytes the loop writes meanwhile wait; only its
			 * end closing matters now. */
			{ .fd = r->sp, .events = POLLRDHUP },
		};
		uint64_t now;
		int ret, n;

		ERR_clear_error();
		errno = 0;
		ret = r->server ? SSL_accept(r->ssl) : SSL_connect(r->ssl);
		if (ret == 1)
			break;
		switch (SSL_get_error(r->ssl, ret)) {
		case SSL_ERROR_WANT_READ:
			p[0].events = POLLIN;
			break;
		case SSL_ERROR_WANT_WRITE:
			p[0].events = POLLOUT;
			break;
		default:
			return handshake_failed(r, ret);
		}
		now = rdb_now_ns();
		if (now >= r->deadline_ns) {
			snprintf(why, sizeof(why), "TLS handshake not finished "
				 "before its deadline: the peer is silent or "
				 "too slow");
			set_phase(r, PHASE_FAILED, -ETIMEDOUT, why);
			return -ETIMEDOUT;
		}
		n = poll(p, 2, (int)((r->deadline_ns - now + RDB_NS_PER_MS - 1) /
				     RDB_NS_PER_MS));
		if (n < 0 && errno != EINTR) {
			rc = -errno;
			snprintf(why, sizeof(why), "TLS handshake: poll: %s",
				 strerror(-rc));
			set_phase(r, PHASE_FAILED, rc, why);
			return rc;
		}
		if (n > 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			set_phase(r, PHASE_FAILED, -ECANCELED, "the link was "
				  "closed on this host during the TLS handshake");
			return -ECANCELED;
		}
	}
	ERR_clear_error();
	rc = r->ops->established(r->ssl, why, sizeof(why));
	if (rc < 0) {
		set_phase(r, PHASE_FAILED, rc, why);
		return rc;
	}
	snprintf(why, sizeof(why), "%s %s", SSL_get_version(r->ssl),
		 SSL_CIPHER_get_name(SSL_get_current_cipher(r->ssl)));
	set_phase(r, PHASE_OPEN, 0, why);
	return 0;
}

/* A TLS error inside the stream: nothing more of it can be trusted. */
static int stream_failed(struct rdb_tlsrelay *r, int ret, const char *dir)
{
	char detail[200], why[256];
	int e = SSL_get_error(r->ssl, ret);

	if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
		snprintf(detail, sizeof(detail), "%s", strerror(errno ? errno : EIO));
	else
		ssl_reason(detail, sizeof(detail));
	ERR_clear_error();
	snprintf(why, sizeof(why), "TLS error %s: %s", dir, detail);
	set_phase(r, PHASE_FAILED, -EPROTO, why);
	LOG(WARN, "replication link with %s: %s; link closed", r->peer, why);
	return -EPROTO;
}

/* The buffered records could not be written: a socket error. */
static int flush_failed(struct rdb_tlsrelay *r)
{
	char why[256];
	int e = errno ? errno : EIO;

	ERR_clear_error();
	snprintf(why, sizeof(why), "TLS error sending: %s", strerror(e));
	set_phase(r, PHASE_FAILED, -e, why);
	LOG(WARN, "replication link with %s: %s; link closed", r->peer, why);
	return -e;
}

/*
 * Both directions until both have ended.  Each side's bytes are taken
 * only once the other side took the previous ones, so a slow reader
 * slows its writer (TCP and the pair both push back) instead of growing
 * a buffer here.
 *
 * A side is read again only while it may hold more: until a read found
 * it empty (EAGAIN, or a short read of the pair), then only once poll()
 * says so.  Trying every side on every pass cost two empty reads per
 * wake-up, ~40 syscalls per checkpoint at 25 ms (issue 30).
 */
static int relay(struct rdb_tlsrelay *r)
{
	size_t rx_off = 0, rx_len = 0, tx_off = 0, tx_len = 0;
	bool net_eof = false, loop_eof = false, loop_gone = false;
	bool fin_sent = false, shut = false;
	/* may this side have bytes to read without poll() saying so? */
	bool tcp_in = true, sp_in = true;
	uint64_t linger_end = 0;

	for (;;) {
		/* Once the loop closed, its end would report POLLHUP forever. */
		struct pollfd p[2] = { { .fd = r->tcp },
				       { .fd = loop_gone ? -1 : r->sp } };
		bool progress = false;
		int timeout = -1, ret;

		if (linger_end && rdb_now_ns() >= linger_end)
			return 0;
		/* peer -> loop */
		if (rx_len == 0 && !net_eof && !loop_gone && !tcp_in &&
		    !SSL_has_pending(r->ssl)) {
			p[0].events |= POLLIN;
		} else if (rx_len == 0 && !net_eof && !loop_gone) {
			ERR_clear_error();
			errno = 0;
			ret = SSL_read(r->ssl, r->rx, RELAY_BUF);
			if (ret > 0) {
				rx_off = 0;
				rx_len = (size_t)ret;
				progress = true;
			} else if (SSL_get_error(r->ssl, ret) == SSL_ERROR_WANT_READ) {
				tcp_in = false;
				p[0].events |= POLLIN;
			} else if (SSL_get_error(r->ssl, ret) == SSL_ERROR_WANT_WRITE) {
				p[0].events |= POLLOUT;
			} else if (is_eof(r->ssl, ret)) {
				ERR_clear_error();
				net_eof = true;
				progress = true;
				shutdown(r->sp, SHUT_WR);
			} else {
				return stream_failed(r, ret, "receiving");
			}
		}
		if (rx_len) {
			ssize_t w = send(r->sp, r->rx + rx_off, rx_len, MSG_NOSIGNAL);

			if (w > 0) {
				rx_off += (size_t)w;
				rx_len -= (size_t)w;
				progress = true;
			} else if (w < 0 && errno == EAGAIN) {
				p[1].events |= POLLOUT;
			} else if (!(w < 0 && errno == EINTR)) {
				/* The loop closed its end: nobody to deliver to. */
				loop_gone = true;
				rx_len = 0;
				progress = true;
			}
		}
		/* loop -> peer */
		if (tx_len == 0 && !loop_eof && !sp_in) {
			p[1].events |= POLLIN;
		} else if (tx_len == 0 && !loop_eof) {
			ssize_t n = read(r->sp, r->tx, RELAY_BUF);

			if (n > 0) {
				tx_off = 0;
				tx_len = (size_t)n;
				progress = true;
				/* a stream socket's short read took all it had */
				sp_in = (size_t)n == RELAY_BUF;
			} else if (n < 0 && errno == EAGAIN) {
				sp_in = false;
				p[1].events |= POLLIN;
			} else if (!(n < 0 && errno == EINTR)) {
				loop_eof = true;
				if (!linger_end)
					linger_end = rdb_now_ns() + RDB_TLSRELAY_LINGER_NS;
				progress = true;
			}
		}
		if (tx_len) {
			size_t done = 0;

			ERR_clear_error();
			errno = 0;
			ret = SSL_write_ex(r->ssl, r->tx + tx_off, tx_len, &done);
			if (ret == 1) {
				tx_off += done;
				tx_len -= done;
				progress = true;
			} else if (SSL_get_error(r->ssl, ret) == SSL_ERROR_WANT_WRITE) {
				p[0].events |= POLLOUT;
			} else if (SSL_get_error(r->ssl, ret) == SSL_ERROR_WANT_READ) {
				p[0].events |= POLLIN;
			} else if (peer_gone(r->ssl, ret)) {
				/* Not a TLS error: the loop reads EOF and
				 * says what it means for the VM. */
				ERR_clear_error();
				return 0;
			} else {
				return stream_failed(r, ret, "sending");
			}
		}
		/* The loop is done sending and all it sent is out: say so
		 * (the close_notify too, before the FIN). */
		if (shut && !fin_sent && BIO_wpending(r->wbio) == 0) {
			shutdown(r->tcp, SHUT_WR);
			fin_sent = true;
			progress = true;
		}
		if (loop_eof && tx_len == 0 && !shut &&
		    BIO_wpending(r->wbio) == 0) {
			ERR_clear_error();
			ret = SSL_shutdown(r->ssl);
			if (ret >= 0) {
				shut = true;
				progress = true;
			} else if (SSL_get_error(r->ssl, ret) == SSL_ERROR_WANT_WRITE) {
				p[0].events |= POLLOUT;
			} else {
				/* The peer is gone already: nothing to tell it. */
				ERR_clear_error();
				return 0;
			}
		}
		if (fin_sent && (net_eof || loop_gone))
			return 0;
		/* nothing more to encrypt for now: the records out */
		if (!progress && BIO_wpending(r->wbio) > 0) {
			errno = 0;
			if (BIO_flush(r->wbio) > 0)
				progress = true;
			else if (BIO_should_retry(r->wbio))
				p[0].events |= POLLOUT;
			else if (errno == EPIPE || errno == ECONNRESET)
				return 0;	/* the peer is gone: the loop reads EOF */
			else
				return flush_failed(r);
		}
		if (progress)
			continue;
		if (linger_end) {
			uint64_t now = rdb_now_ns();

			timeout = (int)((linger_end - now + RDB_NS_PER_MS - 1) /
					RDB_NS_PER_MS);
		}
		/* An errored or hung-up TCP socket reports so forever: poll
		 * it only for what we wait on (its error comes with that). */
		if (!p[0].events)
			p[0].fd = -1;
		if (poll(p, 2, timeout) < 0 && errno != EINTR)
			return -errno;
		/* readable, or ended, or failed: the next read says which */
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
			tcp_in = true;
		if (p[1].revents & (POLLIN | POLLHUP | POLLERR))
			sp_in = true;
		/* The loop closed its end, maybe while we wait on a peer that
		 * does not read: what it sent before gets until the linger
		 * time to leave, the peer's bytes have nobody to go to. */
		if ((p[1].revents & POLLHUP) && !loop_gone) {
			loop_gone = true;
			rx_len = 0;
			if (!linger_end)
				linger_end = rdb_now_ns() + RDB_TLSRELAY_LINGER_NS;
		}
	}
}

static void *relay_main(void *arg)
{
	struct rdb_tlsrelay *r = arg;
	sigset_t set;

	pthread_setname_np(pthread_self(), "rdb-tls");
	/* A write to a vanished peer must fail with EPIPE, not kill us. */
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (handshake(r) == 0)
		relay(r);
	/* The loop sees EOF from here on; the status says why if it failed. */
	close(r->sp);
	close(r->tcp);
	SSL_free(r->ssl);
	ERR_clear_error();
	OPENSSL_thread_stop();
	atomic_fetch_sub(&live, 1);
	rdb_tlsrelay_put(r);
	return NULL;
}

int rdb_tlsrelay_start(struct ssl_st *ssl, int tcp_fd, bool server,
		       uint64_t deadline_ns, const struct rdb_tlsrelay_ops *ops,
		       const char *peer, int *fd_out,
		       struct rdb_tlsrelay **relay_out)
{
	struct rdb_tlsrelay *r = NULL;
	pthread_attr_t attr;
	pthread_t tid;
	int sp[2] = { -1, -1 }, rc;
	BIO *bio, *wsock, *wbio;

	if (atomic_fetch_add(&live, 1) >= RDB_TLSRELAY_MAX) {
		atomic_fetch_sub(&live, 1);
		rc = -EAGAIN;
		goto fail_counted;
	}
	r = calloc(1, sizeof(*r));
	if (!r || !(r->rx = malloc(RELAY_BUF)) || !(r->tx = malloc(RELAY_BUF))) {
		rc = -ENOMEM;
		goto fail;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
		       sp) < 0) {
		rc = -errno;
		goto fail;
	}
	bio = BIO_new_socket(tcp_fd, BIO_NOCLOSE);
	wsock = BIO_new_socket(tcp_fd, BIO_NOCLOSE);
	wbio = BIO_new(BIO_f_buffer());
	if (!bio || !wsock || !wbio ||
	    BIO_set_write_buffer_size(wbio, RELAY_WBUF) <= 0) {
		BIO_free(bio);
		BIO_free(wsock);
		BIO_free(wbio);
		rc = -ENOMEM;
		goto fail;
	}
	BIO_push(wbio, wsock);
	SSL_set_bio(ssl, bio, wbio);	/* (the SSL owns them now) */
	r->wbio = wbio;
	BIO_set_callback_arg(bio, (char *)r);
	BIO_set_callback_ex(bio, note_first);
	pthread_mutex_init(&r->mu, NULL);
	r->refs = 2;
	r->phase = PHASE_HANDSHAKE;
	r->ssl = ssl;
	r->tcp = tcp_fd;
	r->sp = sp[1];
	r->server = server;
	r->deadline_ns = deadline_ns;
	r->ops = ops;
	snprintf(r->peer, sizeof(r->peer), "%s", peer);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, RELAY_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = -pthread_create(&tid, &attr, relay_main, r);
	pthread_attr_destroy(&attr);
	if (rc < 0) {
		pthread_mutex_destroy(&r->mu);
		goto fail;
	}
	*fd_out = sp[0];
	*relay_out = r;
	return 0;
fail:
	atomic_fetch_sub(&live, 1);
fail_counted:
	if (sp[0] >= 0) {
		close(sp[0]);
		close(sp[1]);
	}
	if (r) {
		free(r->rx);
		free(r->tx);
		free(r);
	}
	SSL_free(ssl);
	close(tcp_fd);
	return rc;
}

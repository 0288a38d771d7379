// SPDX-License-Identifier: GPL-2.0-only
/*
 * The replication link's TLS (linksec.c, tlsrelay.c) over real TCP on
 * 127.0.0.1: relays on both ends, or a relay against a raw socket or a
 * hand-made OpenSSL peer playing someone without the key.  Every wait is
 * bounded; every test ends with no relay thread left.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "buf.h"
#include "clock.h"
#include "linksec.h"
#include "proto.h"
#include "tlsrelay.h"

#define KEY_A "6f1c0e0b9d3a4c55a1e2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f701"
#define KEY_B "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static char key_dir[64];

static const char *key_file(const char *name, const char *text, mode_t mode)
{
	static char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", key_dir, name);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(chmod(path, mode), 0);
	return path;
}

static struct rdb_linksec *linksec(const char *hex)
{
	struct rdb_linksec *ls = NULL;
	char text[160], err[512] = "";

	snprintf(text, sizeof(text), "%s\n", hex);
	if (rdb_linksec_create("psk", key_file("k.psk", text, 0600), &ls, err,
			       sizeof(err)) < 0)
		fail_msg("linksec: %s", err);
	return ls;
}

/* A connected TCP pair on 127.0.0.1, both ends non-blocking. */
static void tcp_pair(int *a, int *b)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
	*a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(*a, (struct sockaddr *)&sa, sizeof(sa)), 0);
	*b = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	assert_true(*b >= 0);
	close(l);
	fcntl(*a, F_SETFL, O_NONBLOCK);
	fcntl(*b, F_SETFL, O_NONBLOCK);
}

static uint64_t ms_from_now(unsigned ms)
{
	return rdb_now_ns() + (uint64_t)ms * RDB_NS_PER_MS;
}

/* Reads until n bytes, EOF or the time limit: the bytes read (EOF before
 * n: fewer), or -ETIMEDOUT with nothing at all after limit_ms. */
static ssize_t read_for(int fd, void *buf, size_t n, unsigned limit_ms,
			bool *eof_out)
{
	uint64_t end = ms_from_now(limit_ms);
	size_t got = 0;

	*eof_out = false;
	while (got < n) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = rdb_now_ns();
		ssize_t r;

		if (now >= end)
			return got ? (ssize_t)got : -ETIMEDOUT;
		poll(&p, 1, (int)((end - now) / RDB_NS_PER_MS) + 1);
		r = read(fd, (char *)buf + got, n - got);
		/* A relay that ends with the loop's bytes unread in its end
		 * of the pair makes it ECONNRESET: an EOF to the daemon (its
		 * decoder reports both as -ECONNRESET). */
		if (r == 0 || (r < 0 && errno == ECONNRESET)) {
			*eof_out = true;
			break;
		}
		if (r > 0)
			got += (size_t)r;
		else if (errno != EAGAIN && errno != EINTR)
			return -errno;
	}
	return (ssize_t)got;
}

/* The relay's verdict once it has one (0 if none within limit_ms). */
static int verdict(struct rdb_tlsrelay *r, char *why, size_t len,
		   unsigned limit_ms)
{
	uint64_t end = ms_from_now(limit_ms);
	int rc;

	while ((rc = rdb_tlsrelay_status(r, why, len)) == 0 && rdb_now_ns() < end)
		usleep(2000);
	return rc;
}

static void no_relay_left(unsigned limit_ms)
{
	uint64_t end = ms_from_now(limit_ms);

	while (rdb_tlsrelay_live() > 0 && rdb_now_ns() < end)
		usleep(2000);
	assert_int_equal(rdb_tlsrelay_live(), 0);
}

static void open_link(struct rdb_linksec *ls, enum rdb_link_role role, int tcp,
		      unsigned deadline_ms, int *fd, struct rdb_tlsrelay **r)
{
	assert_int_equal(rdb_linksec_open(ls, role, tcp, ms_from_now(deadline_ms),
					  role == RDB_LINK_CONNECT ? "backup (test)" :
					  "primary (test)", fd, r), 0);
}

static uint8_t pattern(size_t i, unsigned seed)
{
	return (uint8_t)(i * 131 + seed + (i >> 13));
}

/* ---- a link with the same key on both sides ---- */

static void test_handshake_ok_and_data_both_ways(void **state)
{
	struct rdb_linksec *ls = linksec(KEY_A);
	struct rdb_tlsrelay *rc_, *rs;
	const size_t total = 8u << 20;
	size_t sent[2] = { 0 }, got[2] = { 0 };
	int tc, ts, fc, fs, fds[2];
	char why[256], hello[5];
	bool eof;

	tcp_pair(&tc, &ts);
	open_link(ls, RDB_LINK_CONNECT, tc, 5000, &fc, &rc_);
	open_link(ls, RDB_LINK_ACCEPT, ts, 5000, &fs, &rs);
	/* A relay each: the daemon's fds are not the TCP sockets. */
	assert_non_null(rc_);
	assert_non_null(rs);
	assert_int_not_equal(fc, tc);
	assert_int_not_equal(fs, ts);
	/* Written before the handshake: waits for it, then arrives. */
	assert_int_equal(write(fc, "HELLO", 5), 5);
	assert_int_equal(read_for(fs, hello, 5, 3000, &eof), 5);
	assert_memory_equal(hello, "HELLO", 5);
	assert_int_equal(verdict(rc_, why, sizeof(why), 100), 1);
	assert_non_null(strstr(why, "TLSv1.3"));
	assert_int_equal(verdict(rs, why, sizeof(why), 100), 1);
	assert_int_equal(rdb_linksec_failure(rs, why, sizeof(why)), 1);

	/* 8 MiB each way at once, through both relays' backpressure. */
	fds[0] = fc;
	fds[1] = fs;
	while (got[0] < total || got[1] < total) {
		struct pollfd p[2] = { { .fd = fc }, { .fd = fs } };
		uint8_t buf[65536];

		for (int s = 0; s < 2; s++) {
			p[s].events = POLLIN | (sent[s] < total ? POLLOUT : 0);
		}
		assert_true(poll(p, 2, 3000) > 0);
		for (int s = 0; s < 2; s++) {
			int peer = !s;

			if ((p[s].revents & POLLOUT) && sent[s] < total) {
				size_t n = total - sent[s] < sizeof(buf) ?
					total - sent[s] : sizeof(buf);
				ssize_t w;

				for (size_t i = 0; i < n; i++)
					buf[i] = pattern(sent[s] + i, (unsigned)s);
				w = write(fds[s], buf, n);
				if (w > 0)
					sent[s] += (size_t)w;
			}
			if (p[s].revents & POLLIN) {
				ssize_t r = read(fds[s], buf, sizeof(buf));

				assert_true(r > 0 || (r < 0 && errno == EAGAIN));
				for (ssize_t i = 0; i < r; i++)
					assert_int_equal(buf[i], pattern(got[peer] + (size_t)i,
									 (unsigned)peer));
				if (r > 0)
					got[peer] += (size_t)r;
			}
		}
	}
	/* The primary ends: the backup reads EOF after the last byte. */
	close(fc);
	assert_int_equal(read_for(fs, hello, 1, 3000, &eof), 0);
	assert_true(eof);
	close(fs);
	rdb_tlsrelay_put(rc_);
	rdb_tlsrelay_put(rs);
	no_relay_left(3000);
	rdb_linksec_destroy(ls);
}

/* ---- someone without the key ---- */

static void test_wrong_key_refused_on_both_sides(void **state)
{
	struct rdb_linksec *a = linksec(KEY_A), *b = linksec(KEY_B);
	struct rdb_tlsrelay *rc_, *rs;
	int tc, ts, fc, fs;
	char why[256], buf[64];
	bool eof;

	tcp_pair(&tc, &ts);
	open_link(a, RDB_LINK_CONNECT, tc, 5000, &fc, &rc_);
	assert_int_equal(write(fc, "HELLO", 5), 5);
	open_link(b, RDB_LINK_ACCEPT, ts, 5000, &fs, &rs);
	/* Not one byte crosses, either way: both ends only see EOF. */
	assert_int_equal(read_for(fs, buf, sizeof(buf), 3000, &eof), 0);
	assert_true(eof);
	assert_int_equal(read_for(fc, buf, sizeof(buf), 3000, &eof), 0);
	assert_true(eof);
	assert_int_equal(rdb_linksec_failure(rs, why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "authentication failed"));
	assert_non_null(strstr(why, "is not this host's"));
	assert_int_equal(rdb_linksec_failure(rc_, why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "authentication failed"));
	assert_non_null(strstr(why, "refused our link key"));
	close(fc);
	close(fs);
	rdb_tlsrelay_put(rc_);
	rdb_tlsrelay_put(rs);
	no_relay_left(3000);
	rdb_linksec_destroy(a);
	rdb_linksec_destroy(b);
}

/* The threat of issue 10: a valid HELLO, in plaintext, to a backup. */
static void test_plaintext_hello_refused(void **state)
{
	struct rdb_linksec *ls = linksec(KEY_A);
	struct rdb_tlsrelay *rs;
	struct rdb_buf out;
	int raw, ts, fs;
	char why[256], buf[64];
	bool eof;

	tcp_pair(&raw, &ts);
	open_link(ls, RDB_LINK_ACCEPT, ts, 5000, &fs, &rs);
	rdb_buf_init(&out);
	assert_int_equal(rdb_proto_put_hello_features(&out, "vm1", 0), 0);
	assert_int_equal(rdb_buf_write_all_fd(&out, raw, ms_from_now(1000)), 0);
	rdb_buf_dispose(&out);
	assert_int_equal(read_for(fs, buf, sizeof(buf), 3000, &eof), 0);
	assert_true(eof);
	assert_int_equal(rdb_linksec_failure(rs, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "plaintext"));
	assert_non_null(strstr(why, "link_security = insecure"));
	/* ... and the plaintext primary is told why, in a frame it reads. */
	{
		struct rdb_proto_decoder dec;
		struct rdb_frame f;
		uint8_t nak[512];
		ssize_t n = read_for(raw, nak, sizeof(nak), 2000, &eof);

		assert_true(n > 0);
		rdb_proto_decoder_init(&dec);
		assert_int_equal(rdb_proto_decoder_feed(&dec, nak, (size_t)n), 0);
		assert_int_equal(rdb_proto_decoder_next(&dec, &f), 1);
		assert_int_equal(f.type, RDB_MSG_HELLO_NAK);
		assert_non_null(memmem(f.payload, f.len, "requires TLS", 12));
		rdb_proto_decoder_dispose(&dec);
	}
	close(raw);
	close(fs);
	rdb_tlsrelay_put(rs);
	/* Something else altogether: named as such. */
	tcp_pair(&raw, &ts);
	open_link(ls, RDB_LINK_ACCEPT, ts, 5000, &fs, &rs);
	assert_int_equal(write(raw, "GET / HTTP/1.0\r\n\r\n", 18), 18);
	assert_int_equal(read_for(fs, buf, sizeof(buf), 3000, &eof), 0);
	assert_true(eof);
	assert_int_equal(rdb_linksec_failure(rs, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "does not speak TLS (it began with 47 45 54 20)"));
	close(raw);
	close(fs);
	rdb_tlsrelay_put(rs);
	no_relay_left(3000);
	rdb_linksec_destroy(ls);
}

/* A hand-made OpenSSL peer, TLS 1.3 without our key: a server with a
 * self-signed certificate, or a client that offers nothing. */
struct impostor {
	int fd;
	bool server;
	bool handshake_ok;
};

static X509 *self_signed(EVP_PKEY *pk)
{
	X509 *x = X509_new();

	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, pk);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
				   (const unsigned char *)"backup", -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(x));
	assert_true(X509_sign(x, pk, EVP_sha256()) > 0);
	return x;
}

static void *impostor_main(void *arg)
{
	struct impostor *im = arg;
	SSL_CTX *ctx = SSL_CTX_new(TLS_method());
	EVP_PKEY *pk = NULL;
	X509 *cert = NULL;
	uint64_t end = ms_from_now(3000);
	SSL *ssl;

	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	if (im->server) {
		pk = EVP_EC_gen("P-256");
		cert = self_signed(pk);
		SSL_CTX_use_certificate(ctx, cert);
		SSL_CTX_use_PrivateKey(ctx, pk);
	}
	ssl = SSL_new(ctx);
	SSL_set_fd(ssl, im->fd);
	while (rdb_now_ns() < end) {
		int r = im->server ? SSL_accept(ssl) : SSL_connect(ssl);
		struct pollfd p = { .fd = im->fd, .events = POLLIN };

		if (r == 1) {
			im->handshake_ok = true;
			/* what it would answer a HELLO with */
			SSL_write(ssl, "ACK", 3);
			break;
		}
		if (SSL_get_error(ssl, r) != SSL_ERROR_WANT_READ &&
		    SSL_get_error(ssl, r) != SSL_ERROR_WANT_WRITE)
			break;
		poll(&p, 1, 50);
	}
	usleep(200000);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	X509_free(cert);
	EVP_PKEY_free(pk);
	close(im->fd);
	return NULL;
}

static void test_impostor_with_certificate_refused(void **state)
{
	struct rdb_linksec *ls = linksec(KEY_A);
	struct impostor im = { .server = true };
	struct rdb_tlsrelay *rc_;
	pthread_t t;
	int tc, fc;
	char why[256], buf[64];
	bool eof;

	tcp_pair(&tc, &im.fd);
	open_link(ls, RDB_LINK_CONNECT, tc, 5000, &fc, &rc_);
	/* The HELLO goes first, as the daemon's does (the link cannot have
	 * failed yet: nobody answers). */
	assert_int_equal(write(fc, "HELLO", 5), 5);
	assert_int_equal(pthread_create(&t, NULL, impostor_main, &im), 0);
	/* Its answer never reaches the daemon. */
	assert_int_equal(read_for(fc, buf, sizeof(buf), 3000, &eof), 0);
	assert_true(eof);
	assert_int_equal(rdb_linksec_failure(rc_, why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "authentication failed"));
	assert_non_null(strstr(why, "showed a certificate"));
	pthread_join(t, NULL);
	close(fc);
	rdb_tlsrelay_put(rc_);
	no_relay_left(3000);
	rdb_linksec_destroy(ls);
}

static void test_client_without_key_refused(void **state)
{
	struct rdb_linksec *ls = linksec(KEY_A);
	struct impostor im = { .server = false };
	struct rdb_tlsrelay *rs;
	pthread_t t;
	int ts, fs;
	char why[256], buf[64];
	bool eof;

	tcp_pair(&im.fd, &ts);
	open_link(ls, RDB_LINK_ACCEPT, ts, 5000, &fs, &rs);
	assert_int_equal(pthread_create(&t, NULL, impostor_main, &im), 0);
	assert_int_equal(read_for(fs, buf, sizeof(buf), 3000, &eof), 0);
	assert_true(eof);
	pthread_join(t, NULL);
	assert_false(im.handshake_ok);
	assert_int_equal(rdb_linksec_failure(rs, why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "offered no link key"));
	close(fs);
	rdb_tlsrelay_put(rs);
	no_relay_left(3000);
	rdb_linksec_destroy(ls);
}

/* ---- peers that stop talking ---- */

/* Connects and says nothing: the handshake ends at its deadline, with
 * EOF for the loop; neither side waits longer. */
static void test_silent_peer_past_the_deadline(void **state)
{
	struct rdb_linksec *ls = linksec(KEY_A);
	enum rdb_link_role roles[] = { RDB_LINK_ACCEPT, RDB_LINK_CONNECT };

	for (int i = 0; i < 2; i++) {
		struct rdb_tlsrelay *r;
		int mine, silent, fd;
		uint64_t t0 = rdb_now_ns(), took;
		char why[256], buf[8];
		bool eof;

		tcp_pair(&mine, &silent);
		open_link(ls, roles[i], mine, 300, &fd, &r);
		assert_int_equal(read_for(fd, buf, sizeof(buf), 2000, &eof), 0);
		assert_true(eof);
		took = (rdb_now_ns() - t0) / RDB_NS_PER_MS;
		assert_true(took >= 290);
		assert_true(took < 1500);
		assert_int_equal(rdb_linksec_failure(r, why, sizeof(why)), -ETIMEDOUT);
		assert_non_null(strstr(why, "deadline"));
		close(fd);
		close(silent);
		rdb_tlsrelay_put(r);
	}
	no_relay_left(3000);
	rdb_linksec_destroy(ls);
}

/* The peer goes away half-way through the handshake: the relay says so
 * at once, long before its deadline. */
static void test_peer_closes_mid_handshake(void **state)
{
	struct rdb_linksec *ls = linksec(KEY_A);
	enum rdb_link_role roles[] = { RDB_LINK_CONNECT, RDB_LINK_ACCEPT };

	for (int i = 0; i < 2; i++) {
		struct rdb_tlsrelay *r;
		int mine, peer, fd;
		uint64_t t0 = rdb_now_ns();
		char why[256], buf[512];
		bool eof;

		tcp_pair(&mine, &peer);
		open_link(ls, roles[i], mine, 5000, &fd, &r);
		if (roles[i] == RDB_LINK_CONNECT) {
			/* take the ClientHello, answer nothing, leave */
			assert_true(read_for(peer, buf, 5, 2000, &eof) == 5);
		} else {
			/* half a record header of a ClientHello, then leave */
			assert_int_equal(write(peer, "\x16\x03\x01", 3), 3);
			usleep(20000);
		}
		close(peer);
		assert_int_equal(read_for(fd, buf, sizeof(buf), 3000, &eof), 0);
		assert_true(eof);
		assert_true((rdb_now_ns() - t0) / RDB_NS_PER_MS < 1000);
		assert_int_equal(rdb_linksec_failure(r, why, sizeof(why)), -ECONNRESET);
		assert_non_null(strstr(why, "closed the connection during the TLS handshake"));
		close(fd);
		rdb_tlsrelay_put(r);
	}
	no_relay_left(3000);
	rdb_linksec_destroy(ls);
}

/* A peer that stops reading mid-stream, and the daemon closes its end
 * with bytes still queued: the relay gives up after its linger time
 * instead of waiting on the peer forever. */
static void test_relay_ends_when_peer_stalls(void **state)
{
	struct rdb_linksec *ls = linksec(KEY_A);
	struct rdb_tlsrelay *rc_, *rs;
	int tc, ts, fc, fs, small = 16384, unsent = 0;
	uint8_t buf[65536] = { 0 };
	uint64_t t0, end = ms_from_now(5000);
	char why[256];

	tcp_pair(&tc, &ts);
	/* Small buffers: the stall comes after a few hundred KiB. */
	setsockopt(tc, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(ts, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	open_link(ls, RDB_LINK_CONNECT, tc, 5000, &fc, &rc_);
	open_link(ls, RDB_LINK_ACCEPT, ts, 5000, &fs, &rs);
	assert_int_equal(verdict(rc_, why, sizeof(why), 3000), 1);
	/* Nobody reads fs: write until nothing moves for 200 ms and TCP
	 * (the relay's socket, tc) holds bytes it cannot send — the
	 * peer's window is shut. */
	while (unsent == 0 && rdb_now_ns() < end) {
		for (int idle = 0; idle < 20;) {
			if (write(fc, buf, sizeof(buf)) > 0) {
				idle = 0;
			} else {
				idle++;
				usleep(10000);
			}
		}
		assert_int_equal(ioctl(tc, SIOCOUTQ, &unsent), 0);
	}
	assert_true(unsent > 0);
	assert_int_equal(rdb_tlsrelay_live(), 2);
	t0 = rdb_now_ns();
	close(fc);
	while (rdb_tlsrelay_live() > 1 && rdb_now_ns() - t0 < 4 * RDB_NS_PER_S)
		usleep(5000);
	assert_int_equal(rdb_tlsrelay_live(), 1);
	assert_true(rdb_now_ns() - t0 >= RDB_TLSRELAY_LINGER_NS - 50 * RDB_NS_PER_MS);
	close(fs);
	rdb_tlsrelay_put(rc_);
	rdb_tlsrelay_put(rs);
	no_relay_left(4000);
	rdb_linksec_destroy(ls);
}

/* The peer ends the link while we still send: the relay ends too, and
 * that is no TLS failure (the daemon reads EOF and knows what it means). */
static void test_peer_leaving_is_not_a_tls_error(void **state)
{
	struct rdb_linksec *ls = linksec(KEY_A);
	struct rdb_tlsrelay *rc_, *rs;
	int tc, ts, fc, fs;
	uint8_t buf[65536] = { 0 };
	uint64_t end;
	char why[256];
	bool eof;

	tcp_pair(&tc, &ts);
	open_link(ls, RDB_LINK_CONNECT, tc, 5000, &fc, &rc_);
	open_link(ls, RDB_LINK_ACCEPT, ts, 5000, &fs, &rs);
	assert_int_equal(verdict(rc_, why, sizeof(why), 3000), 1);
	assert_int_equal(verdict(rs, why, sizeof(why), 3000), 1);
	close(fs);
	/* EOF for our end once the backup's relay left; meanwhile we send
	 * on, into a socket the peer closed (EPIPE). */
	end = ms_from_now(3000);
	while (rdb_tlsrelay_live() > 0 && rdb_now_ns() < end) {
		if (write(fc, buf, sizeof(buf)) < 0 && errno != EAGAIN)
			break;
		usleep(1000);
	}
	assert_int_equal(read_for(fc, buf, sizeof(buf), 3000, &eof), 0);
	assert_true(eof);
	no_relay_left(3000);
	assert_int_equal(rdb_linksec_failure(rc_, why, sizeof(why)), 1);
	close(fc);
	rdb_tlsrelay_put(rc_);
	rdb_tlsrelay_put(rs);
	rdb_linksec_destroy(ls);
}

/* ---- keys and settings ---- */

static int create(const char *security, const char *path, char *err, size_t len)
{
	struct rdb_linksec *ls = NULL;
	int rc = rdb_linksec_create(security, path, &ls, err, len);

	if (rc == 0) {
		assert_non_null(ls);
		rdb_linksec_destroy(ls);
	}
	return rc;
}

static void test_key_files(void **state)
{
	char err[512], path[160];

	/* good: 32 bytes, 16 bytes, blanks around */
	assert_int_equal(create("psk", key_file("k", KEY_A "\n", 0600), err, sizeof(err)), 0);
	assert_int_equal(create("psk", key_file("k", "  00112233445566778899aabbccddeeff  \n\n", 0400),
				err, sizeof(err)), 0);
	/* too short, odd, not hex, two keys, too long */
	assert_int_equal(create("psk", key_file("k", "00112233445566778899aabbccddee\n", 0600),
				err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "openssl rand -hex 32"));
	assert_int_equal(create("psk", key_file("k", KEY_A "0\n", 0600), err, sizeof(err)), -EINVAL);
	assert_int_equal(create("psk", key_file("k", "zz" KEY_A "\n", 0600), err, sizeof(err)), -EINVAL);
	assert_int_equal(create("psk", key_file("k", KEY_A " " KEY_B "\n", 0600), err, sizeof(err)), -EINVAL);
	assert_int_equal(create("psk", key_file("k", KEY_A KEY_B "00\n", 0600), err, sizeof(err)), -EINVAL);
	/* readable by others: refused, with the fix */
	assert_int_equal(create("psk", key_file("k", KEY_A "\n", 0644), err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "chmod 600"));
	/* missing: says how to make one, or how to run without */
	snprintf(path, sizeof(path), "%s/none.psk", key_dir);
	assert_int_equal(create("psk", path, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "openssl rand -hex 32"));
	assert_non_null(strstr(err, "link_security = insecure"));
	/* no key file named, a directory, an unknown mode */
	assert_int_equal(create("psk", "", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "link_security = insecure"));
	assert_int_equal(create("psk", key_dir, err, sizeof(err)), -EINVAL);
	assert_int_equal(create("", path, err, sizeof(err)), -EINVAL);
	/* insecure needs no key, and says what it is */
	assert_int_equal(create("insecure", path, err, sizeof(err)), 0);
}

static void test_insecure_is_the_bare_socket(void **state)
{
	struct rdb_linksec *ls = NULL;
	struct rdb_tlsrelay *r = (struct rdb_tlsrelay *)1;
	char err[256], why[64];
	int a, b, fd;

	assert_int_equal(rdb_linksec_create("insecure", "", &ls, err, sizeof(err)), 0);
	assert_non_null(strstr(rdb_linksec_describe(ls), "plaintext"));
	tcp_pair(&a, &b);
	assert_int_equal(rdb_linksec_open(ls, RDB_LINK_CONNECT, a, ms_from_now(100),
					  "x", &fd, &r), 0);
	assert_int_equal(fd, a);
	assert_null(r);
	assert_int_equal(rdb_linksec_failure(r, why, sizeof(why)), 1);
	assert_int_equal(rdb_tlsrelay_live(), 0);
	close(a);
	close(b);
	rdb_linksec_destroy(ls);
}

static void test_two_hosts_same_key_same_id(void **state)
{
	struct rdb_linksec *a = linksec(KEY_A), *a2 = linksec(KEY_A), *b = linksec(KEY_B);

	assert_string_equal(rdb_linksec_describe(a), rdb_linksec_describe(a2));
	assert_string_not_equal(rdb_linksec_describe(a), rdb_linksec_describe(b));
	/* the id names the key, never shows it */
	assert_null(strstr(rdb_linksec_describe(a), "6f1c0e0b"));
	rdb_linksec_destroy(a);
	rdb_linksec_destroy(a2);
	rdb_linksec_destroy(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handshake_ok_and_data_both_ways),
		cmocka_unit_test(test_wrong_key_refused_on_both_sides),
		cmocka_unit_test(test_plaintext_hello_refused),
		cmocka_unit_test(test_impostor_with_certificate_refused),
		cmocka_unit_test(test_client_without_key_refused),
		cmocka_unit_test(test_silent_peer_past_the_deadline),
		cmocka_unit_test(test_peer_closes_mid_handshake),
		cmocka_unit_test(test_relay_ends_when_peer_stalls),
		cmocka_unit_test(test_peer_leaving_is_not_a_tls_error),
		cmocka_unit_test(test_key_files),
		cmocka_unit_test(test_insecure_is_the_bare_socket),
		cmocka_unit_test(test_two_hosts_same_key_same_id),
	};
	int rc;

	signal(SIGPIPE, SIG_IGN);
	snprintf(key_dir, sizeof(key_dir), "/tmp/rdb-linksec-XXXXXX");
	if (!mkdtemp(key_dir))
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	{
		char p[128];

		snprintf(p, sizeof(p), "%s/k.psk", key_dir);
		unlink(p);
		snprintf(p, sizeof(p), "%s/k", key_dir);
		unlink(p);
	}
	rmdir(key_dir);
	return rc;
}

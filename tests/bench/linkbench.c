// SPDX-License-Identifier: GPL-2.0-only
/*
 * linkbench: what TLS costs the replication link — the plaintext link
 * and the TLS link (linksec.c: a relay thread on each end) measured in
 * the same run, on TCP over 127.0.0.1, so that the network is not what
 * limits and the relays' own cost shows.
 *
 *   linkbench [--mb N] [--rounds R] [--rtts K]  ->  JSON on stdout
 *
 *   throughput  one thread writes N MiB (default 256) in 1 MiB writes
 *               into the primary's end, as the daemon does with epochs;
 *               the backup's end reads it all.  MB/s (wall clock) and
 *               the process's CPU seconds (every thread: relays,
 *               writer, reader, kernel time) per GB.
 *   round trip  a 64-byte frame one way and a 32-byte answer back (an
 *               epoch's last frame and its ACK), K times (default
 *               2000): p50 and p99 in microseconds.
 *   handshake   TCP connected to both relays' handshakes done, ms.
 *
 * Each is measured R times (default 5), plaintext and TLS alternating,
 * each on a fresh connection; medians are reported, and TLS / plaintext
 * ratios.  On a shared 2-core host the two relay threads compete with
 * the writer and reader for the cores: a real link has a host per end.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "linksec.h"
#include "tlsrelay.h"

#define CHUNK (1u << 20)
#define MAX_ROUNDS 21

static void die(const char *what)
{
	fprintf(stderr, "linkbench: %s\n", what);
	exit(1);
}

/* A connected TCP pair on 127.0.0.1, non-blocking, TCP_NODELAY on the
 * connecting end as rdb_sock_connect_tcp sets it. */
static void tcp_pair(int *cli, int *srv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(l, 1) < 0 || getsockname(l, (struct sockaddr *)&sa, &sl) < 0)
		die("listen on 127.0.0.1");
	*cli = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*cli < 0 || connect(*cli, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect");
	*srv = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (*srv < 0)
		die("accept");
	close(l);
	setsockopt(*cli, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(*cli, F_SETFL, O_NONBLOCK);
	fcntl(*srv, F_SETFL, O_NONBLOCK);
}

struct link {
	int pri, bak;			/* the daemons' fds */
	struct rdb_tlsrelay *rp, *rb;
	double handshake_ms;
};

static void link_open(struct rdb_linksec *ls, struct link *k)
{
	uint64_t t0, deadline;
	char why[256];
	int cli, srv;

	memset(k, 0, sizeof(*k));
	tcp_pair(&cli, &srv);
	if (!ls) {
		k->pri = cli;
		k->bak = srv;
		return;
	}
	t0 = rdb_now_ns();
	deadline = t0 + 5 * RDB_NS_PER_S;
	if (rdb_linksec_open(ls, RDB_LINK_CONNECT, cli, deadline, "bench backup",
			     &k->pri, &k->rp) < 0 ||
	    rdb_linksec_open(ls, RDB_LINK_ACCEPT, srv, deadline, "bench primary",
			     &k->bak, &k->rb) < 0)
		die("rdb_linksec_open");
	while (rdb_tlsrelay_status(k->rp, why, sizeof(why)) == 0 ||
	       rdb_tlsrelay_status(k->rb, why, sizeof(why)) == 0)
		usleep(100);
	if (rdb_tlsrelay_status(k->rp, why, sizeof(why)) != 1 ||
	    rdb_tlsrelay_status(k->rb, why, sizeof(why)) != 1)
		die(why);
	k->handshake_ms = (double)(rdb_now_ns() - t0) / RDB_NS_PER_MS;
}

static void link_close(struct link *k)
{
	close(k->pri);
	close(k->bak);
	rdb_tlsrelay_put(k->rp);
	rdb_tlsrelay_put(k->rb);
	/* The relays end once both fds are closed: wait, so that no thread
	 * of this run still works in the next one. */
	for (int i = 0; i < 5000 && rdb_tlsrelay_live() > 0; i++)
		usleep(1000);
	if (rdb_tlsrelay_live() > 0)
		die("a relay did not end");
}

static void wait_fd(int fd, short ev)
{
	struct pollfd p = { .fd = fd, .events = ev };

	if (poll(&p, 1, 10000) <= 0)
		die("link stalled for 10 s");
}

static void write_all(int fd, const uint8_t *b, size_t n)
{
	while (n) {
		ssize_t w = write(fd, b, n);

		if (w > 0) {
			b += w;
			n -= (size_t)w;
		} else if (w < 0 && errno == EAGAIN) {
			wait_fd(fd, POLLOUT);
		} else if (!(w < 0 && errno == EINTR)) {
			die("write");
		}
	}
}

static void read_all(int fd, uint8_t *b, size_t n)
{
	while (n) {
		ssize_t r = read(fd, b, n);

		if (r > 0) {
			b += r;
			n -= (size_t)r;
		} else if (r < 0 && errno == EAGAIN) {
			wait_fd(fd, POLLIN);
		} else if (!(r < 0 && errno == EINTR)) {
			die("read: link closed");
		}
	}
}

struct writer {
	int fd;
	size_t mb;
	uint8_t *buf;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	for (size_t i = 0; i < w->mb; i++)
		write_all(w->fd, w->buf, CHUNK);
	return NULL;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

struct sample {
	double mb_s, cpu_s_per_gb, rtt_p50_us, rtt_p99_us, handshake_ms;
};

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void measure(struct rdb_linksec *ls, size_t mb, size_t rtts,
		    uint8_t *buf, double *rtt, struct sample *s)
{
	struct writer w = { .mb = mb, .buf = buf };
	struct link k;
	pthread_t t;
	uint64_t t0;
	double c0;

	/* throughput, primary -> backup */
	link_open(ls, &k);
	s->handshake_ms = k.handshake_ms;
	w.fd = k.pri;
	c0 = cpu_s();
	t0 = rdb_now_ns();
	if (pthread_create(&t, NULL, writer_main, &w))
		die("pthread_create");
	for (size_t i = 0; i < mb; i++)
		read_all(k.bak, buf + CHUNK, CHUNK);
	pthread_join(t, NULL);
	s->mb_s = (double)mb / ((double)(rdb_now_ns() - t0) / RDB_NS_PER_S);
	s->cpu_s_per_gb = (cpu_s() - c0) / ((double)mb / 1024);

	/* round trips: a frame there, its ACK back */
	for (size_t i = 0; i < rtts; i++) {
		uint8_t frame[64] = { (uint8_t)i }, ack[32];

		t0 = rdb_now_ns();
		write_all(k.pri, frame, sizeof(frame));
		read_all(k.bak, frame, sizeof(frame));
		write_all(k.bak, ack, sizeof(ack));
		read_all(k.pri, ack, sizeof(ack));
		rtt[i] = (double)(rdb_now_ns() - t0) / 1000;
	}
	qsort(rtt, rtts, sizeof(*rtt), cmp_d);
	s->rtt_p50_us = rtt[rtts / 2];
	s->rtt_p99_us = rtt[(rtts * 99) / 100];
	link_close(&k);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return v[n / 2];
}

static void summarize(const struct sample *s, int n, struct sample *m)
{
	double v[5][MAX_ROUNDS];

	for (int i = 0; i < n; i++) {
		v[0][i] = s[i].mb_s;
		v[1][i] = s[i].cpu_s_per_gb;
		v[2][i] = s[i].rtt_p50_us;
		v[3][i] = s[i].rtt_p99_us;
		v[4][i] = s[i].handshake_ms;
	}
	m->mb_s = median(v[0], n);
	m->cpu_s_per_gb = median(v[1], n);
	m->rtt_p50_us = median(v[2], n);
	m->rtt_p99_us = median(v[3], n);
	m->handshake_ms = median(v[4], n);
}

/* A throwaway key, as an operator makes one. */
static struct rdb_linksec *bench_key(void)
{
	char path[] = "/tmp/linkbench-XXXXXX", hex[65], err[512];
	struct rdb_linksec *ls;
	uint8_t raw[32];
	int fd = mkstemp(path), u = open("/dev/urandom", O_RDONLY);

	if (fd < 0 || u < 0 || read(u, raw, sizeof(raw)) != sizeof(raw))
		die("key");
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	if (write(fd, hex, 64) != 64)
		die("key file");
	close(fd);
	close(u);
	if (rdb_linksec_create("psk", path, &ls, err, sizeof(err)) < 0)
		die(err);
	unlink(path);
	return ls;
}

int main(int argc, char **argv)
{
	size_t mb = 256, rtts = 2000;
	int rounds = 5;
	struct sample plain[MAX_ROUNDS], tls[MAX_ROUNDS], mp, mt;
	struct rdb_linksec *ls;
	uint8_t *buf;
	double *rtt;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--mb"))
			mb = (size_t)atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--rounds"))
			rounds = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--rtts"))
			rtts = (size_t)atol(argv[i + 1]);
	}
	if (mb < 1 || rounds < 1 || rounds > MAX_ROUNDS || rtts < 100) {
		fprintf(stderr, "usage: linkbench [--mb N>=1] [--rounds 1..%d] "
			"[--rtts K>=100]\n", MAX_ROUNDS);
		return 2;
	}
	ls = bench_key();
	buf = malloc(2 * CHUNK);
	rtt = malloc(rtts * sizeof(*rtt));
	if (!buf || !rtt)
		die("out of memory");
	for (size_t i = 0; i < CHUNK; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	for (int r = 0; r < rounds; r++) {
		measure(NULL, mb, rtts, buf, rtt, &plain[r]);
		measure(ls, mb, rtts, buf, rtt, &tls[r]);
	}
	summarize(plain, rounds, &mp);
	summarize(tls, rounds, &mt);
	printf("{\"method\":\"TCP over 127.0.0.1, same run, plaintext and TLS "
	       "alternating, %d rounds each, medians; %zu MiB one way in 1 MiB "
	       "writes; %zu round trips of 64 B + 32 B\",\n"
	       " \"link\":\"%s\",\n"
	       " \"plaintext\":{\"mb_per_s\":%.1f,\"cpu_s_per_gb\":%.3f,"
	       "\"rtt_us_p50\":%.1f,\"rtt_us_p99\":%.1f},\n"
	       " \"tls\":{\"mb_per_s\":%.1f,\"cpu_s_per_gb\":%.3f,"
	       "\"rtt_us_p50\":%.1f,\"rtt_us_p99\":%.1f,\"handshake_ms\":%.2f},\n"
	       " \"tls_vs_plain\":{\"throughput\":%.3f,\"cpu_per_gb\":%.3f,"
	       "\"rtt_p50\":%.3f,\"rtt_p99\":%.3f}}\n",
	       rounds, mb, rtts, rdb_linksec_describe(ls),
	       mp.mb_s, mp.cpu_s_per_gb, mp.rtt_p50_us, mp.rtt_p99_us,
	       mt.mb_s, mt.cpu_s_per_gb, mt.rtt_p50_us, mt.rtt_p99_us,
	       mt.handshake_ms,
	       mt.mb_s / mp.mb_s, mt.cpu_s_per_gb / mp.cpu_s_per_gb,
	       mt.rtt_p50_us / mp.rtt_p50_us, mt.rtt_p99_us / mp.rtt_p99_us);
	rdb_linksec_destroy(ls);
	free(buf);
	free(rtt);
	return 0;
}

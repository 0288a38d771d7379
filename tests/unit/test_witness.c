// SPDX-License-Identifier: GPL-2.0-only
/*
 * The failover witness against a real etcd (Debian's etcd-server, started
 * here on loopback in a temporary directory): exactly one claim wins a
 * generation, a claim that already won is recognised, a host that lost a
 * VM cannot register it again, an unreachable witness is an error (never
 * a win), and the value and base64 helpers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <poll.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "evloop.h"
#include "witness.h"

static pid_t etcd_pid = -1;
static char etcd_dir[64];
static char etcd_url[64];

struct got {
	int n;
	struct rdb_witness_result r;
};

static void on_result(void *opaque, const struct rdb_witness_result *r)
{
	struct got *g = opaque;

	g->n++;
	g->r = *r;
}

static void pump(struct rdb_evloop *loop, struct got *g, int want)
{
	uint64_t deadline = rdb_now_ns() + 10 * RDB_NS_PER_S;

	while (g->n < want && rdb_now_ns() < deadline)
		rdb_evloop_run_once(loop, 50 * RDB_NS_PER_MS);
	assert_int_equal(g->n, want);
}

static int etcd_up(void **state)
{
	int port = 20000 + (int)(getpid() % 20000);
	char client[64], peer[64], cluster[80];

	snprintf(etcd_dir, sizeof(etcd_dir), "/tmp/rdb-etcd-XXXXXX");
	if (!mkdtemp(etcd_dir))
		return -1;
	snprintf(etcd_url, sizeof(etcd_url), "http://127.0.0.1:%d", port);
	snprintf(client, sizeof(client), "http://127.0.0.1:%d", port);
	snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", port + 1);
	snprintf(cluster, sizeof(cluster), "t=%s", peer);
	etcd_pid = fork();
	if (etcd_pid == 0) {
		char log[96];
		FILE *f;

		snprintf(log, sizeof(log), "%s/etcd.log", etcd_dir);
		f = freopen(log, "w", stderr);
		(void)f;
		execlp("etcd", "etcd", "--data-dir", etcd_dir, "--name", "t",
		       "--listen-client-urls", client, "--advertise-client-urls",
		       client, "--listen-peer-urls", peer,
		       "--initial-advertise-peer-urls", peer,
		       "--initial-cluster", cluster, (char *)NULL);
		_exit(127);
	}
	return etcd_pid > 0 ? 0 : -1;
}

static int etcd_down(void **state)
{
	char cmd[96];

	if (etcd_pid > 0) {
		kill(etcd_pid, SIGKILL);
		waitpid(etcd_pid, NULL, 0);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", etcd_dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* etcd answers once it is up; the first requests may find it starting. */
static struct rdb_witness *witness(struct rdb_evloop *loop, const char *url)
{
	struct rdb_witness *w = NULL;

	assert_int_equal(rdb_witness_create(loop, url, "/rdbtest", 1000, &w), 0);
	return w;
}

static void wait_etcd(struct rdb_evloop *loop, struct rdb_witness *w)
{
	uint64_t deadline = rdb_now_ns() + 20 * RDB_NS_PER_S;

	for (;;) {
		struct got g = { 0 };

		/* a throwaway VM: registering it is harmless */
		assert_true(rdb_witness_register(w, "probe", "n0", 1, on_result, &g) > 0);
		pump(loop, &g, 1);
		if (g.r.outcome == RDB_WITNESS_WON)
			return;
		if (rdb_now_ns() > deadline)
			fail_msg("etcd did not come up (%s; is etcd-server installed? "
				 "tools/setup-deps.sh): %s", etcd_url, g.r.error);
		usleep(100000);
	}
}

static void register_ok(struct rdb_evloop *loop, struct rdb_witness *w,
			const char *vm, const char *node, uint64_t gen,
			char *value_out)
{
	struct rdb_witness_value v = { .generation = gen,
				       .state = RDB_WITNESS_PROTECTED };
	struct got g = { 0 };

	assert_true(rdb_witness_register(w, vm, node, gen, on_result, &g) > 0);
	pump(loop, &g, 1);
	assert_int_equal(g.r.outcome, RDB_WITNESS_WON);
	snprintf(v.owner, sizeof(v.owner), "%s", node);
	assert_int_equal(rdb_witness_value_format(&v, value_out,
						  RDB_WITNESS_VALUE_MAX), 0);
}

static void test_one_claim_wins(void **state)
{
	struct rdb_evloop *loop;
	struct rdb_witness *w;
	char reg[RDB_WITNESS_VALUE_MAX];
	struct got a = { 0 }, b = { 0 };

	assert_int_equal(rdb_evloop_create(&loop), 0);
	w = witness(loop, etcd_url);
	wait_etcd(loop, w);
	register_ok(loop, w, "vm1", "hostA", 0x1234, reg);
	/* both sides claim at once */
	assert_true(rdb_witness_claim(w, "vm1", reg, "hostA", on_result, &a) > 0);
	assert_true(rdb_witness_claim(w, "vm1", reg, "hostB", on_result, &b) > 0);
	pump(loop, &a, 1);
	pump(loop, &b, 1);
	assert_true((a.r.outcome == RDB_WITNESS_WON) != (b.r.outcome == RDB_WITNESS_WON));
	{
		struct got *lost = a.r.outcome == RDB_WITNESS_LOST ? &a : &b;
		const char *winner = lost == &a ? "owner=hostB" : "owner=hostA";

		assert_int_equal(lost->r.outcome, RDB_WITNESS_LOST);
		assert_non_null(strstr(lost->r.holder, winner));
		assert_non_null(strstr(lost->r.holder, "state=running"));
	}
	/* the winner asking again (its answer lost) still wins; the loser
	 * still loses */
	{
		struct got again = { 0 }, again2 = { 0 };
		const char *wn = a.r.outcome == RDB_WITNESS_WON ? "hostA" : "hostB";
		const char *ln = a.r.outcome == RDB_WITNESS_WON ? "hostB" : "hostA";

		rdb_witness_claim(w, "vm1", reg, wn, on_result, &again);
		rdb_witness_claim(w, "vm1", reg, ln, on_result, &again2);
		pump(loop, &again, 1);
		pump(loop, &again2, 1);
		assert_int_equal(again.r.outcome, RDB_WITNESS_WON);
		assert_int_equal(again2.r.outcome, RDB_WITNESS_LOST);

		/* the loser cannot take the VM back by protecting it again;
		 * the winner can, with a new generation, and that ends the
		 * old generation's claims */
		struct got r1 = { 0 }, r2 = { 0 }, c = { 0 };
		char reg2[RDB_WITNESS_VALUE_MAX];

		rdb_witness_register(w, "vm1", ln, 0x99, on_result, &r1);
		pump(loop, &r1, 1);
		assert_int_equal(r1.r.outcome, RDB_WITNESS_LOST);
		assert_non_null(strstr(r1.r.holder, wn));
		register_ok(loop, w, "vm1", wn, 0x5678, reg2);
		rdb_witness_claim(w, "vm1", reg, ln, on_result, &c);
		pump(loop, &c, 1);
		assert_int_equal(c.r.outcome, RDB_WITNESS_LOST);
		(void)r2;
	}
	/* read: what attach asks (who owns the VM), and a VM never seen */
	{
		struct got r = { 0 }, none = { 0 };

		rdb_witness_read(w, "vm1", on_result, &r);
		rdb_witness_read(w, "never-protected", on_result, &none);
		pump(loop, &r, 1);
		pump(loop, &none, 1);
		assert_int_equal(r.r.outcome, RDB_WITNESS_WON);
		assert_non_null(strstr(r.r.holder, "generation=0000000000005678"));
		assert_int_equal(none.r.outcome, RDB_WITNESS_WON);
		assert_string_equal(none.r.holder, "");
	}
	rdb_witness_destroy(w);
	rdb_evloop_destroy(loop);
}

/* A backup's handover claim given back (its restore failed): the key
 * holds the registration again, so the old primary's own claim wins;
 * once another claim holds it, nothing is given back. */
static void test_return(void **state)
{
	struct rdb_evloop *loop;
	struct rdb_witness *w;
	char reg[RDB_WITNESS_VALUE_MAX];
	struct got c = { 0 }, back = { 0 }, again = { 0 }, rd = { 0 },
		   pc = { 0 }, late = { 0 };

	assert_int_equal(rdb_evloop_create(&loop), 0);
	w = witness(loop, etcd_url);
	wait_etcd(loop, w);
	register_ok(loop, w, "vm-ret", "hostA", 0x4242, reg);
	rdb_witness_claim(w, "vm-ret", reg, "hostB", on_result, &c);
	pump(loop, &c, 1);
	assert_int_equal(c.r.outcome, RDB_WITNESS_WON);
	rdb_witness_return(w, "vm-ret", reg, "hostB", on_result, &back);
	pump(loop, &back, 1);
	assert_int_equal(back.r.outcome, RDB_WITNESS_WON);
	/* asked again (the answer lost): still given back */
	rdb_witness_return(w, "vm-ret", reg, "hostB", on_result, &again);
	pump(loop, &again, 1);
	assert_int_equal(again.r.outcome, RDB_WITNESS_WON);
	rdb_witness_read(w, "vm-ret", on_result, &rd);
	pump(loop, &rd, 1);
	assert_string_equal(rd.r.holder, reg);
	/* the old primary's claim wins now; B has nothing to give back */
	rdb_witness_claim(w, "vm-ret", reg, "hostA", on_result, &pc);
	pump(loop, &pc, 1);
	assert_int_equal(pc.r.outcome, RDB_WITNESS_WON);
	rdb_witness_return(w, "vm-ret", reg, "hostB", on_result, &late);
	pump(loop, &late, 1);
	assert_int_equal(late.r.outcome, RDB_WITNESS_LOST);
	assert_non_null(strstr(late.r.holder, "owner=hostA state=running"));
	rdb_witness_destroy(w);
	rdb_evloop_destroy(loop);
}

/* Every VM's key, as status --cluster lists them: owner, state,
 * generation; an unreachable witness is an error saying so. */
static void test_list(void **state)
{
	struct rdb_evloop *loop;
	struct rdb_witness *w;
	char reg[RDB_WITNESS_VALUE_MAX], err[400];
	struct got c = { 0 };
	json_t *list = NULL, *v;
	size_t i;
	int seen = 0;

	assert_int_equal(rdb_evloop_create(&loop), 0);
	w = witness(loop, etcd_url);
	wait_etcd(loop, w);
	register_ok(loop, w, "vm-list-a", "hostA", 0xa1, reg);
	register_ok(loop, w, "vm-list-b", "hostA", 0xb2, reg);
	rdb_witness_claim(w, "vm-list-b", reg, "hostB", on_result, &c);
	pump(loop, &c, 1);
	assert_int_equal(c.r.outcome, RDB_WITNESS_WON);
	assert_int_equal(rdb_witness_list(etcd_url, "/rdbtest", 1000, &list, err,
					  sizeof(err)), 0);
	json_array_foreach(list, i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));

		if (!strcmp(name, "vm-list-a")) {
			seen++;
			assert_string_equal(json_string_value(json_object_get(v, "owner")), "hostA");
			assert_string_equal(json_string_value(json_object_get(v, "state")), "protected");
			assert_string_equal(json_string_value(json_object_get(v, "generation")),
					    "00000000000000a1");
		} else if (!strcmp(name, "vm-list-b")) {
			seen++;
			assert_string_equal(json_string_value(json_object_get(v, "owner")), "hostB");
			assert_string_equal(json_string_value(json_object_get(v, "state")), "running");
		}
	}
	assert_int_equal(seen, 2);
	json_decref(list);
	/* another prefix: none of these */
	assert_int_equal(rdb_witness_list(etcd_url, "/rdbtest-other", 1000, &list,
					  err, sizeof(err)), 0);
	assert_int_equal(json_array_size(list), 0);
	json_decref(list);
	/* nobody there */
	assert_int_equal(rdb_witness_list("http://127.0.0.1:9", "/rdbtest", 300,
					  &list, err, sizeof(err)), -EHOSTUNREACH);
	assert_null(list);
	assert_non_null(strstr(err, "127.0.0.1:9"));
	rdb_witness_destroy(w);
	rdb_evloop_destroy(loop);
}

/* Many racing pairs: never two winners, never none. */
static void test_races(void **state)
{
	struct rdb_evloop *loop;
	struct rdb_witness *w;

	assert_int_equal(rdb_evloop_create(&loop), 0);
	w = witness(loop, etcd_url);
	wait_etcd(loop, w);
	for (int i = 0; i < 20; i++) {
		char vm[16], reg[RDB_WITNESS_VALUE_MAX];
		struct got a = { 0 }, b = { 0 };

		snprintf(vm, sizeof(vm), "race%d", i);
		register_ok(loop, w, vm, "p", 100 + i, reg);
		rdb_witness_claim(w, vm, reg, "b", on_result, &b);
		rdb_witness_claim(w, vm, reg, "p", on_result, &a);
		pump(loop, &a, 1);
		pump(loop, &b, 1);
		assert_int_not_equal(a.r.outcome, RDB_WITNESS_ERROR);
		assert_int_not_equal(b.r.outcome, RDB_WITNESS_ERROR);
		assert_true((a.r.outcome == RDB_WITNESS_WON) ^ (b.r.outcome == RDB_WITNESS_WON));
	}
	rdb_witness_destroy(w);
	rdb_evloop_destroy(loop);
}

/* No witness: an error with the reason, never a decision; the loop is
 * not blocked meanwhile (a timer keeps firing). */
static uint64_t tick(struct rdb_evloop *loop, uint64_t id, void *opaque)
{
	(*(int *)opaque)++;
	return 10 * RDB_NS_PER_MS;
}

static void test_unreachable(void **state)
{
	struct rdb_evloop *loop;
	struct rdb_witness *w = NULL;
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	struct got g = { 0 };
	char eps[128];
	uint64_t t, t0;
	int ticks = 0, silent;

	/* a witness that accepts connections and never answers (the kernel
	 * completes the handshake; nobody reads), then one that refuses */
	silent = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(silent, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(silent, 8), 0);
	assert_int_equal(getsockname(silent, (struct sockaddr *)&a, &alen), 0);
	snprintf(eps, sizeof(eps), "http://127.0.0.1:%d,http://127.0.0.1:1",
		 ntohs(a.sin_port));
	assert_int_equal(rdb_evloop_create(&loop), 0);
	assert_int_equal(rdb_witness_create(loop, eps, "/rdbtest", 300, &w), 0);
	assert_int_equal(rdb_evloop_add_timer(loop, 10 * RDB_NS_PER_MS, tick, &ticks, &t), 0);
	t0 = rdb_now_ns();
	rdb_witness_claim(w, "vm1", "remusdb-witness/1 generation=0000000000000001 "
			  "owner=a state=protected", "a", on_result, &g);
	pump(loop, &g, 1);
	assert_int_equal(g.r.outcome, RDB_WITNESS_ERROR);
	assert_non_null(strstr(g.r.error, "127.0.0.1:1"));
	/* the silent one took its whole timeout, and the loop ran meanwhile */
	assert_true(rdb_now_ns() - t0 >= 250 * RDB_NS_PER_MS);
	assert_true(ticks >= 10);
	rdb_witness_destroy(w);
	rdb_evloop_destroy(loop);
	close(silent);
}

/* A witness that does not answer one request, then answers (a host
 * stalled past the timeout): a relay to etcd that leaves its first
 * `swallow` connections silent. */
struct relay {
	int lfd, swallow, port, silent[64], nsilent;
	volatile int stop;
};

static void relay_pipe(int a, int b)
{
	char buf[16384];

	for (;;) {
		struct pollfd p[2] = { { .fd = a, .events = POLLIN },
				       { .fd = b, .events = POLLIN } };
		ssize_t n;

		if (poll(p, 2, 5000) <= 0)
			return;
		for (int i = 0; i < 2; i++) {
			if (!(p[i].revents & (POLLIN | POLLHUP)))
				continue;
			n = read(p[i].fd, buf, sizeof(buf));
			if (n <= 0 || write(p[!i].fd, buf, (size_t)n) != n)
				return;
		}
	}
}

static void *relay_main(void *opaque)
{
	struct relay *r = opaque;
	struct sockaddr_in e = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	e.sin_port = htons((uint16_t)atoi(strrchr(etcd_url, ':') + 1));
	while (!r->stop) {
		int c = accept(r->lfd, NULL, NULL), u;

		if (c < 0)
			break;
		if (r->nsilent < r->swallow && r->nsilent < 64) {
			r->silent[r->nsilent++] = c;	/* never answered */
			continue;
		}
		u = socket(AF_INET, SOCK_STREAM, 0);
		if (u >= 0 && connect(u, (struct sockaddr *)&e, sizeof(e)) == 0)
			relay_pipe(c, u);
		if (u >= 0)
			close(u);
		close(c);
	}
	return NULL;
}

static void test_register_tries_again(void **state)
{
	struct rdb_evloop *loop;
	struct rdb_witness *w = NULL;
	struct relay r = { .swallow = 1 };
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	struct got g = { 0 };
	char url[64];
	pthread_t t;
	uint64_t t0;

	assert_int_equal(rdb_evloop_create(&loop), 0);
	/* etcd is up (the other tests waited for it) */
	w = witness(loop, etcd_url);
	wait_etcd(loop, w);
	rdb_witness_destroy(w);
	r.lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(r.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(r.lfd, 8), 0);
	assert_int_equal(getsockname(r.lfd, (struct sockaddr *)&a, &alen), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
	assert_int_equal(pthread_create(&t, NULL, relay_main, &r), 0);
	assert_int_equal(rdb_witness_create(loop, url, "/rdbtest", 300, &w), 0);
	/* the first request is not answered; the register goes on to win */
	assert_true(rdb_witness_register(w, "vmT", "n1", 7, on_result, &g) > 0);
	pump(loop, &g, 1);
	assert_int_equal(r.nsilent, 1);
	assert_int_equal(g.r.outcome, RDB_WITNESS_WON);
	/* never answered at all: an error, after trying for 10 timeouts
	 * (3 s here: ~8 tries of 300 ms + 100 ms) */
	r.swallow = 100;
	g.n = 0;
	t0 = rdb_now_ns();
	assert_true(rdb_witness_register(w, "vmT", "n1", 8, on_result, &g) > 0);
	pump(loop, &g, 1);
	assert_int_equal(g.r.outcome, RDB_WITNESS_ERROR);
	assert_non_null(strstr(g.r.error, "tries in"));
	assert_true(rdb_now_ns() - t0 >= 3 * RDB_NS_PER_S);
	assert_true(rdb_now_ns() - t0 < 5 * RDB_NS_PER_S);
	assert_true(r.nsilent >= 1 + 7);
	rdb_witness_destroy(w);
	r.stop = 1;
	shutdown(r.lfd, SHUT_RDWR);
	pthread_join(t, NULL);
	close(r.lfd);
	for (int i = 0; i < r.nsilent; i++)
		close(r.silent[i]);
	rdb_evloop_destroy(loop);
}

static void test_cancel(void **state)
{
	struct rdb_evloop *loop;
	struct rdb_witness *w = NULL;
	struct got g = { 0 };
	int64_t id;

	assert_int_equal(rdb_evloop_create(&loop), 0);
	assert_int_equal(rdb_witness_create(loop, "http://192.0.2.1:2379", "/x", 200, &w), 0);
	id = rdb_witness_claim(w, "vm1", "x", "a", on_result, &g);
	assert_true(id > 0);
	rdb_witness_cancel(w, id);
	for (int i = 0; i < 10; i++)
		rdb_evloop_run_once(loop, 50 * RDB_NS_PER_MS);
	assert_int_equal(g.n, 0);
	rdb_witness_destroy(w);
	rdb_evloop_destroy(loop);
}

static void test_values(void **state)
{
	struct rdb_witness_value v = { .generation = 0xabcdef0123456789ull,
				       .state = RDB_WITNESS_RUNNING }, p;
	char s[RDB_WITNESS_VALUE_MAX];

	strcpy(v.owner, "host-b.example");
	assert_int_equal(rdb_witness_value_format(&v, s, sizeof(s)), 0);
	assert_string_equal(s, "remusdb-witness/1 generation=abcdef0123456789 "
			    "owner=host-b.example state=running");
	assert_int_equal(rdb_witness_value_parse(s, strlen(s), &p), 0);
	assert_true(p.generation == v.generation && p.state == v.state);
	assert_string_equal(p.owner, v.owner);
	assert_int_equal(rdb_witness_value_parse("hello", 5, &p), -EINVAL);
	assert_int_equal(rdb_witness_value_parse(s, strlen(s) - 1, &p), -EINVAL);
	strcpy(v.owner, "bad name");
	assert_int_equal(rdb_witness_value_format(&v, s, sizeof(s)), -EINVAL);
	assert_false(rdb_witness_node_valid(""));
	assert_false(rdb_witness_node_valid("a/b"));
}

/* Who owns the VM, for an attach check: another host in any state owns
 * it (a registration by the host that runs it is not "nobody runs it"),
 * and a value that is not RemusDB's is no answer. */
static void test_owner_of(void **state)
{
	struct rdb_witness_value v;

	assert_int_equal(rdb_witness_owner_of("", "pri", &v), RDB_WITNESS_NOBODY);
	assert_int_equal(rdb_witness_owner_of("remusdb-witness/1 generation="
			 "0000000000000001 owner=pri state=protected", "pri", &v),
			 RDB_WITNESS_SELF);
	assert_int_equal(rdb_witness_owner_of("remusdb-witness/1 generation="
			 "0000000000000001 owner=pri state=running", "pri", &v),
			 RDB_WITNESS_SELF);
	assert_int_equal(rdb_witness_owner_of("remusdb-witness/1 generation="
			 "0000000000000002 owner=bak state=running", "pri", &v),
			 RDB_WITNESS_OTHER);
	assert_string_equal(v.owner, "bak");
	assert_int_equal(rdb_witness_owner_of("remusdb-witness/1 generation="
			 "0000000000000003 owner=bak state=protected", "pri", &v),
			 RDB_WITNESS_OTHER);
	assert_true(v.generation == 3 && v.state == RDB_WITNESS_PROTECTED);
	assert_int_equal(rdb_witness_owner_of("set by hand", "pri", NULL),
			 RDB_WITNESS_UNREADABLE);
	assert_int_equal(rdb_witness_owner_of("remusdb-witness/1 generation="
			 "0000000000000003 owner=bak state=paused", "pri", NULL),
			 RDB_WITNESS_UNREADABLE);
}

static void test_base64(void **state)
{
	static const char *in[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
	static const char *out[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
				     "Zm9vYmFy" };
	char e[32];
	uint8_t d[32];
	size_t n;

	for (size_t i = 0; i < 7; i++) {
		rdb_base64_encode((const uint8_t *)in[i], strlen(in[i]), e, sizeof(e));
		assert_string_equal(e, out[i]);
		assert_int_equal(rdb_base64_decode(out[i], d, sizeof(d), &n), 0);
		assert_int_equal(n, strlen(in[i]));
		assert_memory_equal(d, in[i], n);
	}
	assert_int_equal(rdb_base64_decode("Zm9", d, sizeof(d), &n), -EINVAL);
	assert_int_equal(rdb_base64_decode("Z=9v", d, sizeof(d), &n), -EINVAL);
	assert_int_equal(rdb_base64_decode("Zm9vYmFy", d, 3, &n), -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_owner_of),
		cmocka_unit_test(test_base64),
		cmocka_unit_test(test_unreachable),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_one_claim_wins),
		cmocka_unit_test(test_return),
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_races),
		cmocka_unit_test(test_register_tries_again),
	};
	int rc;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = cmocka_run_group_tests(tests, etcd_up, etcd_down);
	curl_global_cleanup();
	return rc;
}

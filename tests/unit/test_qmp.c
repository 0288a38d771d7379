// SPDX-License-Identifier: GPL-2.0-only
/*
 * The QMP client against a fake QEMU: a thread that listens on a unix
 * socket and plays one scenario per test (greeting, replies, events,
 * silence, a cut connection, garbage).  Real time, real sockets; every
 * wait in the fake server is bounded by SO_RCVTIMEO so a broken client
 * fails the test instead of hanging it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "clock.h"
#include "qemu/qmp.h"

/* qmp.c keeps at most this many undrained events (queue_event). */
#define EVENT_CAP 1024

#define GREETING "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 2, " \
	"\"minor\": 0, \"major\": 10}, \"package\": \"\"}, " \
	"\"capabilities\": [\"oob\"]}}\r\n"

struct fake;
typedef void (*scenario_fn)(struct fake *f);

struct fake {
	char dir[64];
	char path[108];
	int lfd;
	int cfd;
	unsigned listen_delay_ms;	/* bind late: the client must retry */
	scenario_fn play;
	pthread_t thread;
	/* what the scenario saw, checked by the test after the join */
	json_t *cmds;			/* every command received, in order */
	int failures;
	int gate[2];			/* the test tells the server "go on" */
};

/* One line from the client, parsed; NULL on EOF, timeout or garbage. */
static json_t *srv_recv(struct fake *f)
{
	char line[65536];
	size_t n = 0;

	while (n < sizeof(line) - 1) {
		ssize_t r = read(f->cfd, line + n, 1);

		if (r <= 0)
			return NULL;
		if (line[n] == '\n') {
			json_t *j = json_loadb(line, n, 0, NULL);

			if (j)
				json_array_append(f->cmds, j);
			return j;
		}
		n++;
	}
	return NULL;
}

static void srv_send(struct fake *f, const char *s)
{
	size_t n = strlen(s);

	while (n) {
		ssize_t r = send(f->cfd, s, n, MSG_NOSIGNAL);

		if (r <= 0)
			return;
		s += r;
		n -= (size_t)r;
	}
}

/* Reads a command, checks its name, answers `return` (raw JSON) with its id. */
static json_int_t srv_expect(struct fake *f, const char *name, const char *ret)
{
	json_t *c = srv_recv(f);
	json_int_t id;
	char *reply;

	if (!c || !json_is_string(json_object_get(c, "execute")) ||
	    strcmp(json_string_value(json_object_get(c, "execute")), name)) {
		f->failures++;
		return -1;
	}
	id = json_integer_value(json_object_get(c, "id"));
	json_decref(c);
	if (!ret)
		return id;
	if (asprintf(&reply, "{\"return\": %s, \"id\": %lld}\r\n", ret,
		     (long long)id) < 0)
		return id;
	srv_send(f, reply);
	free(reply);
	return id;
}

static void srv_handshake(struct fake *f)
{
	srv_send(f, GREETING);
	srv_expect(f, "qmp_capabilities", "{}");
}

/* Blocks until the test opens the gate, at most 5 s so that a failing
 * test cannot hang here. */
static void srv_wait_gate(struct fake *f)
{
	struct pollfd p = { .fd = f->gate[0], .events = POLLIN };
	char c;

	if (poll(&p, 1, 5000) == 1 && read(f->gate[0], &c, 1) == 1)
		return;
	f->failures++;
}

static void open_gate(struct fake *f)
{
	assert_int_equal(write(f->gate[1], "g", 1), 1);
}

static void *srv_main(void *arg)
{
	struct fake *f = arg;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 5 };

	usleep(f->listen_delay_ms * 1000);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(f->lfd, 4)) {
		f->failures++;
		return NULL;
	}
	f->cfd = accept(f->lfd, NULL, NULL);
	if (f->cfd < 0) {
		f->failures++;
		return NULL;
	}
	setsockopt(f->cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	f->play(f);
	close(f->cfd);
	f->cfd = -1;
	return NULL;
}

static struct fake *fake_start(scenario_fn play, unsigned listen_delay_ms)
{
	struct fake *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/rdb-qmp-test-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/qmp.sock", f->dir);
	f->lfd = f->cfd = -1;
	f->play = play;
	f->listen_delay_ms = listen_delay_ms;
	f->cmds = json_array();
	assert_int_equal(pipe(f->gate), 0);
	assert_int_equal(pthread_create(&f->thread, NULL, srv_main, f), 0);
	return f;
}

/* Joins the server; how many checks failed on its side. */
static int fake_join(struct fake *f)
{
	pthread_join(f->thread, NULL);
	return f->failures;
}

static void fake_free(struct fake *f)
{
	if (f->lfd >= 0)
		close(f->lfd);
	unlink(f->path);
	rmdir(f->dir);
	close(f->gate[0]);
	close(f->gate[1]);
	json_decref(f->cmds);
	free(f);
}

static uint64_t in_ms(unsigned ms)
{
	return rdb_now_ns() + ms * RDB_NS_PER_MS;
}

static uint64_t ms_since(uint64_t t0)
{
	return (rdb_now_ns() - t0) / RDB_NS_PER_MS;
}

static const char *event_name(const json_t *ev)
{
	return json_string_value(json_object_get(ev, "event"));
}

/* The nth command the server received, as compact JSON without its id. */
static char *cmd_text(struct fake *f, size_t n)
{
	json_t *c = json_deep_copy(json_array_get(f->cmds, n));
	char *s;

	if (!c)
		return strdup("(none)");
	json_object_del(c, "id");
	s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(c);
	return s;
}

static void assert_cmd(struct fake *f, size_t n, const char *want)
{
	char *got = cmd_text(f, n);

	assert_string_equal(got, want);
	free(got);
}

/* ---- handshake ---------------------------------------------------- */

static void play_handshake(struct fake *f)
{
	srv_handshake(f);
}

static void test_connect_retries_until_qemu_listens(void **state)
{
	/* QEMU creates its socket ~150 ms after we start connecting */
	struct fake *f = fake_start(play_handshake, 150);
	struct rdb_qmp q;
	uint64_t t0 = rdb_now_ns();

	assert_int_equal(rdb_qmp_connect(&q, f->path, "vm1", in_ms(3000)), 0);
	assert_true(ms_since(t0) >= 100);
	assert_true(rdb_qmp_fd(&q) >= 0);
	assert_int_equal(fake_join(f), 0);
	/* one command: the capability negotiation, with an integer id */
	assert_int_equal(json_array_size(f->cmds), 1);
	assert_cmd(f, 0, "{\"execute\":\"qmp_capabilities\"}");
	assert_true(json_is_integer(json_object_get(
			json_array_get(f->cmds, 0), "id")));
	rdb_qmp_close(&q);
	rdb_qmp_close(&q);	/* idempotent */
	assert_int_equal(rdb_qmp_fd(&q), -1);
	fake_free(f);
}

static void test_connect_gives_up_at_deadline(void **state)
{
	struct rdb_qmp q;
	uint64_t t0 = rdb_now_ns();
	int rc = rdb_qmp_connect(&q, "/tmp/rdb-qmp-test-nonexistent/qmp.sock",
				 "vm1", in_ms(200));

	assert_int_equal(rc, -ENOENT);
	assert_true(ms_since(t0) >= 150);
	assert_true(ms_since(t0) < 1000);
	assert_non_null(strstr(rdb_qmp_last_error(&q), "qmp.sock"));
	rdb_qmp_close(&q);
}

static void play_not_qmp(struct fake *f)
{
	srv_send(f, "{\"hello\": 1}\r\n");
	srv_wait_gate(f);
}

static void test_connect_rejects_non_qmp_greeting(void **state)
{
	struct fake *f = fake_start(play_not_qmp, 0);
	struct rdb_qmp q;

	assert_int_equal(rdb_qmp_connect(&q, f->path, "vm1", in_ms(2000)),
			 -EPROTO);
	assert_int_equal(rdb_qmp_fd(&q), -1);
	open_gate(f);
	assert_int_equal(fake_join(f), 0);
	/* no command was sent to something that is not QEMU */
	assert_int_equal(json_array_size(f->cmds), 0);
	fake_free(f);
}

static void play_silent_greeting(struct fake *f)
{
	srv_wait_gate(f);
}

static void test_connect_times_out_without_greeting(void **state)
{
	struct fake *f = fake_start(play_silent_greeting, 0);
	struct rdb_qmp q;
	uint64_t t0 = rdb_now_ns();

	assert_int_equal(rdb_qmp_connect(&q, f->path, "vm1", in_ms(300)),
			 -ETIMEDOUT);
	assert_true(ms_since(t0) >= 250 && ms_since(t0) < 1500);
	open_gate(f);
	assert_int_equal(fake_join(f), 0);
	fake_free(f);
}

/* ---- commands ----------------------------------------------------- */

static void play_wrappers(struct fake *f)
{
	srv_handshake(f);
	srv_expect(f, "query-status",
		   "{\"status\": \"colo\", \"singlestep\": false, \"running\": false}");
	srv_expect(f, "migrate-set-capabilities", "{}");
	srv_expect(f, "migrate-set-capabilities", "{}");
	srv_expect(f, "migrate-set-parameters", "{}");
	srv_expect(f, "migrate", "{}");
	srv_expect(f, "announce-self", "{}");
	srv_expect(f, "x-colo-lost-heartbeat", "{}");
	srv_expect(f, "migrate-incoming", "{}");
	srv_expect(f, "stop", "{}");
	srv_expect(f, "cont", "{}");
}

static void test_wrappers_send_what_qemu_expects(void **state)
{
	struct fake *f = fake_start(play_wrappers, 0);
	struct rdb_qmp q;
	char status[16];

	assert_int_equal(rdb_qmp_connect(&q, f->path, "vm1", in_ms(2000)), 0);
	assert_int_equal(rdb_qmp_query_status(&q, status, sizeof(status),
					      in_ms(1000)), 0);
	assert_string_equal(status, "colo");
	assert_int_equal(rdb_qmp_migrate_colo_start(&q, "unix:/run/x.sock", 25,
						    in_ms(1000)), 0);
	assert_int_equal(rdb_qmp_announce_self(&q, in_ms(1000)), 0);
	assert_int_equal(rdb_qmp_colo_lost_heartbeat(&q, in_ms(1000)), 0);
	assert_int_equal(rdb_qmp_migrate_incoming(&q, "unix:/run/in.sock",
						  in_ms(1000)), 0);
	assert_int_equal(rdb_qmp_stop(&q, in_ms(1000)), 0);
	assert_int_equal(rdb_qmp_cont(&q, in_ms(1000)), 0);
	assert_int_equal(fake_join(f), 0);
	/* names and arguments as qapi/migration.json and net.json spell them */
	assert_cmd(f, 1, "{\"execute\":\"query-status\"}");
	/* a QEMU restored with x-ignore-shared sends all its RAM again */
	assert_cmd(f, 2, "{\"arguments\":{\"capabilities\":[{\"capability\":"
		   "\"x-ignore-shared\",\"state\":false}]},"
		   "\"execute\":\"migrate-set-capabilities\"}");
	assert_cmd(f, 3, "{\"arguments\":{\"capabilities\":[{\"capability\":"
		   "\"x-colo\",\"state\":true}]},"
		   "\"execute\":\"migrate-set-capabilities\"}");
	assert_cmd(f, 4, "{\"arguments\":{\"x-checkpoint-delay\":25},"
		   "\"execute\":\"migrate-set-parameters\"}");
	assert_cmd(f, 5, "{\"arguments\":{\"uri\":\"unix:/run/x.sock\"},"
		   "\"execute\":\"migrate\"}");
	assert_cmd(f, 6, "{\"arguments\":{\"initial\":50,\"max\":200,"
		   "\"rounds\":5,\"step\":50},\"execute\":\"announce-self\"}");
	assert_cmd(f, 7, "{\"execute\":\"x-colo-lost-heartbeat\"}");
	assert_cmd(f, 8, "{\"arguments\":{\"uri\":\"unix:/run/in.sock\"},"
		   "\"execute\":\"migrate-incoming\"}");
	assert_cmd(f, 9, "{\"execute\":\"stop\"}");
	assert_cmd(f, 10, "{\"execute\":\"cont\"}");
	/* every command carried a distinct id */
	for (size_t i = 1; i < json_array_size(f->cmds); i++)
		assert_true(json_integer_value(json_object_get(
				json_array_get(f->cmds, i), "id")) !=
			    json_integer_value(json_object_get(
				json_array_get(f->cmds, i - 1), "id")));
	rdb_qmp_close(&q);
	fake_free(f);
}

static void play_return_value(struct fake *f)
{
	srv_handshake(f);
	srv_expect(f, "query-migrate",
		   "{\"status\": \"colo\", \"ram\": {\"dirty-sync-count\": 42}}");
}

static void test_execute_hands_back_the_return_value(void **state)
{
	struct fake *f = fake_start(play_return_value, 0);
	struct rdb_qmp q;
	json_t *ret = NULL;

	assert_int_equal(rdb_qmp_connect(&q, f->path, "vm1", in_ms(2000)), 0);
	assert_int_equal(rdb_qmp_execute(&q, "query-migrate", NULL, &ret,
					 in_ms(1000)), 0);
	assert_non_null(ret);
	assert_string_equal(json_string_value(json_object_get(ret, "status")),
			    "colo");
	assert_int_equal(json_integer_value(json_object_get(
		json_object_get(ret, "ram"), "dirty-sync-count")), 42);
	json_decref(ret);
	assert_int_equal(fake_join(f), 0);
	rdb_qmp_close(&q);
	fake_free(f);
}


/* query-memdev as QEMU 10.0 answers it: pc.ram's share, whichever place
 * it has in the list; absent, not shared */
static void play_memdev(struct fake *f)
{
	srv_handshake(f);
	srv_expect(f, "query-memdev", "[{\"id\": \"m0\", \"size\": 1, \"share\": true}, "
		   "{\"id\": \"pc.ram\", \"size\": 536870912, \"merge\": true, "
		   "\"dump\": true, \"prealloc\": true, \"share\": true, "
		   "\"policy\": \"default\", \"host-nodes\": []}]");
	srv_expect(f, "query-memdev", "[{\"id\": \"pc.ram\", \"size\": 1, \"share\": false}]");
	srv_expect(f, "query-memdev", "[{\"size\": 1, \"share\": true}]");
	srv_expect(f, "query-memdev", "[]");
}

static void test_memdev_shared(void **state)
{
	struct fake *f = fake_start(play_memdev, 0);
	struct rdb_qmp q;
	bool shared = false;

	assert_int_equal(rdb_qmp_connect(&q, f->path, "vm1", in_ms(2000)), 0);
	assert_int_equal(rdb_qmp_memdev_shared(&q, "pc.ram", &shared, in_ms(1000)), 0);
	assert_true(shared);
	assert_int_equal(rdb_qmp_memdev_shared(&q, "pc.ram", &shared, in_ms(1000)), 0);
	assert_false(shared);
	shared = true;
	assert_int_equal(rdb_qmp_memdev_shared(&q, "pc.ram", &shared, in_ms(1000)), 0);
	assert_false(shared);	/* (a backend without an id is not pc.ram) */
	shared = true;
	assert_int_equal(rdb_qmp_memdev_shared(&q, "pc.ram", &shared, in_ms(1000)), 0);
	assert_false(shared);
	assert_int_equal(fake_join(f), 0);
	rdb_qmp_close(&q);
	fake_free(f);
}

static void play_error(struct fake *f)
{
	json_int_t id;
	char reply[256];

	srv_handshake(f);
	id = srv_expect(f, "x-colo-lost-heartbeat", NULL);
	snprintf(reply, sizeof(reply), "{\"id\": %lld, \"error\": {\"class\": "
		 "\"GenericError\", \"desc\": \"VM is not in COLO mode\"}}\r\n",
		 (long long)id);
	srv_send(f, reply);
	/* the connection stays usable after an error reply */
	srv_expect(f, "cont", "{}");
}

static void test_error_reply_is_eremoteio_with_desc(void **state)
{
	struct fake *f = fake_start(play_error, 0);
	struct rdb_qmp q;

	assert_int_equal(rdb_qmp_connect(&q, f->path, "vm1", in_ms(2000)), 0);
	assert_int_equal(rdb_qmp_colo_lost_heartbeat(&q, in_ms(1000)),
			 -EREMOTEIO);
	assert_non_null(strstr(rdb_qmp_last_error(&q), "VM is not in COLO mode"));
	assert_int_equal(rdb_qmp_cont(&q, in_ms(1000)), 0);
	assert_int_equal(fake_join(f), 0);
	rdb_qmp_close(&q);
	fake_free(f);
}

/* ---- events ------------------------------------------------------- */

#define EV(name, us) "{\"timestamp\": {\"seconds\": 1700000000, " \
	"\"microseconds\": " #us "}, \"event\": \"" name "\"}\r\n"

static void play_events_before_reply(struct fake *f)
{
	json_int_t id;
	char reply[128];

	srv_handshake(f);
	id = srv_expect(f, "stop", NULL);
	srv_send(f, EV("STOP", 100));
	/* a stale reply to some earlier, timed-out command: not ours */
	srv_send(f, "{\"return\": {}, \"id\": 999999}\r\n");
	srv_send(f, EV("RESUME", 200) EV("STOP", 300));
	snprintf(reply, sizeof(reply), "{\"return\": {}, \"id\": %lld}\r\n",
		 (long long)id);
	srv_send(f, reply);
	srv_wait_gate(f);
	/* events while the client is idle: for rdb_qmp_read_events */
	srv_send(f, EV("RESUME", 400) EV("SHUTDOWN", 500));
	srv_wait_gate(f);
	/* then QEMU exits */
}

static void test_events_before_the_reply_are_queued_in_order(void **state)
{
	struct fake *f = fake_start(play_events_before_reply, 0);
	struct pollfd p;
	struct rdb_qmp q;
	const char *want[] = { "STOP", "RESUME", "STOP", "RESUME", "SHUTDOWN" };
	json_int_t us[] = { 100, 200, 300, 400, 500 };
	json_t *ev;
	size_t i;

	assert_int_equal(rdb_qmp_connect(&q, f->path, "vm1", in_ms(2000)), 0);
	assert_null(rdb_qmp_next_event(&q));
	assert_int_equal(rdb_qmp_stop(&q, in_ms(1000)), 0);
	/* nothing readable yet: the non-blocking drain returns at once */
	assert_int_equal(rdb_qmp_read_events(&q), 0);
	open_gate(f);
	p = (struct pollfd){ .fd = rdb_qmp_fd(&q), .events = POLLIN };
	assert_int_equal(poll(&p, 1, 2000), 1);
	usleep(20000);		/* let both events arrive */
	assert_int_equal(rdb_qmp_read_events(&q), 0);
	for (i = 0; i < 5; i++) {
		ev = rdb_qmp_next_event(&q);
		assert_non_null(ev);
		assert_string_equal(event_name(ev), want[i]);
		assert_int_equal(json_integer_value(json_object_get(
			json_object_get(ev, "timestamp"), "microseconds")), us[i]);
		json_decref(ev);
	}
	assert_null(rdb_qmp_next_event(&q));
	/* QEMU goes away: the event loop learns it from the drain */
	open_gate(f);
	assert_int_equal(fake_join(f), 0);
	assert_int_equal(poll(&p, 1, 2000), 1);
	assert_int_equal(rdb_qmp_read_events(&q), -ECONNRESET);
	rdb_qmp_close(&q);
	fake_free(f);
}

/* ---- failures ----------------------------------------------------- */

static void play_never_answers_then_late(struct fake *f)
{
	json_int_t id;
	char reply[128];

	srv_handshake(f);
	id = srv_expect(f, "query-status", NULL);
	srv_wait_gate(f);
	/* the late answer to the command the client gave up on */
	snprintf(reply, sizeof(reply), "{\"return\": {\"status\": \"paused\"},"
		 " \"id\": %lld}\r\n", (long long)id);
	srv_send(f, reply);
	srv_expect(f, "query-status", "{\"status\": \"running\"}");
}

static void test_deadline_expires_and_late_reply_is_dropped(void **state)
{
	struct fake *f = fake_start(play_never_answers_then_late, 0);
	struct rdb_qmp q;
	char status[16];
	uint64_t t0;

	assert_int_equal(rdb_qmp_connect(&q, f->path, "vm1", in_ms(2000)), 0);
	t0 = rdb_now_ns();
	assert_int_equal(rdb_qmp_query_status(&q, status, sizeof(status),
					      in_ms(200)), -ETIMEDOUT);
	assert_true(ms_since(t0) >= 190);
	assert_true(ms_since(t0) < 1000);
	open_gate(f);
	/* the next command gets its own answer, not the stale "paused" */
	assert_int_equal(rdb_qmp_query_status(&q, status, sizeof(status),
					      in_ms(1000)), 0);
	assert_string_equal(status, "running");
	assert_int_equal(fake_join(f), 0);
	rdb_qmp_close(&q);
	fake_free(f);
}

static void test_deadline_already_past(void **state)
{
	struct fake *f = fake_start(play_never_answers_then_late, 0);
	struct rdb_qmp q;
	char status[16];
	uint64_t t0;

	assert_int_equal(rdb_qmp_connect(&q, f->path, "vm1", in_ms(2000)), 0);
	t0 = rdb_now_ns();
	assert_int_equal(rdb_qmp_query_status(&q, status, sizeof(status),
					      rdb_now_ns()), -ETIMEDOUT);
	assert_true(ms_since(t0) < 100);
	rdb_qmp_close(&q);	/* the server's late send then fails: fine */
	open_gate(f);
	fake_join(f);
	fake_free(f);
}

static void play_close_mid_reply(struct fake *f)
{
	srv_handshake(f);
	srv_expect(f, "query-status", NULL);
	srv_send(f, "{\"return\": {\"stat");
}

static void test_server_closing_mid_reply(void **state)
{
	struct fake *f = fake_start(play_close_mid_reply, 0);
	struct rdb_qmp q;
	char status[16];
	uint64_t t0;

	assert_int_equal(rdb_qmp_connect(&q, f->path, "vm1", in_ms(2000)), 0);
	t0 = rdb_now_ns();
	assert_int_equal(rdb_qmp_query_status(&q, status, sizeof(status),
					      in_ms(3000)), -ECONNRESET);
	assert_true(ms_since(t0) < 1000);	/* EOF, not the deadline */
	assert_int_equal(fake_join(f), 0);
	/* a dead QEMU cannot be written to either */
	assert_true(rdb_qmp_cont(&q, in_ms(1000)) < 0);
	rdb_qmp_close(&q);
	fake_free(f);
}

static void play_oversized(struct fake *f)
{
	size_t n = RDB_QMP_MAX_LINE + (RDB_QMP_MAX_LINE >> 1);
	char *big = malloc(n + 1);

	srv_handshake(f);
	srv_expect(f, "query-status", NULL);
	if (!big)
		return;
	/* one message, 1.5 MiB, never ending in a newline */
	memcpy(big, "{\"return\": \"", 12);
	memset(big + 12, 'a', n - 12);
	big[n] = 0;
	srv_send(f, big);	/* fails with EPIPE once the client gives up */
	free(big);
}

static void test_oversized_message_is_eproto(void **state)
{
	struct fake *f = fake_start(play_oversized, 0);
	struct rdb_qmp q;
	char status[16];

	assert_int_equal(rdb_qmp_connect(&q, f->path, "vm1", in_ms(2000)), 0);
	assert_int_equal(rdb_qmp_query_status(&q, status, sizeof(status),
					      in_ms(3000)), -EPROTO);
	assert_non_null(strstr(rdb_qmp_last_error(&q), "over"));
	/* the client buffered at most the limit plus one read, not 1.5 MiB */
	assert_true(q.in.len <= RDB_QMP_MAX_LINE + 65536);
	rdb_qmp_close(&q);
	assert_int_equal(fake_join(f), 0);
	fake_free(f);
}

static void play_malformed(struct fake *f)
{
	srv_handshake(f);
	srv_expect(f, "query-status", NULL);
	srv_send(f, "{\"return\": {\"status\": running}}\r\n");
	srv_wait_gate(f);
}

static void test_malformed_json_is_eproto(void **state)
{
	struct fake *f = fake_start(play_malformed, 0);
	struct rdb_qmp q;
	char status[16];

	assert_int_equal(rdb_qmp_connect(&q, f->path, "vm1", in_ms(2000)), 0);
	assert_int_equal(rdb_qmp_query_status(&q, status, sizeof(status),
					      in_ms(1000)), -EPROTO);
	assert_non_null(strstr(rdb_qmp_last_error(&q), "malformed"));
	open_gate(f);
	assert_int_equal(fake_join(f), 0);
	rdb_qmp_close(&q);
	fake_free(f);
}

static void play_non_object(struct fake *f)
{
	srv_handshake(f);
	srv_expect(f, "query-status", NULL);
	srv_send(f, "[1, 2, 3]\r\n");
	srv_wait_gate(f);
}

static void test_json_that_is_not_an_object_is_eproto(void **state)
{
	struct fake *f = fake_start(play_non_object, 0);
	struct rdb_qmp q;
	char status[16];

	assert_int_equal(rdb_qmp_connect(&q, f->path, "vm1", in_ms(2000)), 0);
	assert_int_equal(rdb_qmp_query_status(&q, status, sizeof(status),
					      in_ms(1000)), -EPROTO);
	open_gate(f);
	assert_int_equal(fake_join(f), 0);
	rdb_qmp_close(&q);
	fake_free(f);
}

static void play_flood(struct fake *f)
{
	char ev[160];

	srv_handshake(f);
	for (int i = 0; i < EVENT_CAP + 100; i++) {
		snprintf(ev, sizeof(ev), "{\"event\": \"E\", \"data\": "
			 "{\"n\": %d}}\r\n", i);
		srv_send(f, ev);
	}
	srv_expect(f, "cont", "{}");
}

/* A consumer that never drains events must not grow the queue forever:
 * the oldest are dropped and the newest kept. */
static void test_event_queue_is_bounded(void **state)
{
	struct fake *f = fake_start(play_flood, 0);
	struct rdb_qmp q;
	json_t *ev;
	size_t n = 0;
	json_int_t first = -1, last = -1;

	assert_int_equal(rdb_qmp_connect(&q, f->path, "vm1", in_ms(2000)), 0);
	assert_int_equal(rdb_qmp_cont(&q, in_ms(2000)), 0);
	while ((ev = rdb_qmp_next_event(&q))) {
		json_int_t k = json_integer_value(json_object_get(
				json_object_get(ev, "data"), "n"));

		if (first < 0)
			first = k;
		assert_true(k > last);	/* still in order */
		last = k;
		n++;
		json_decref(ev);
	}
	assert_true(n <= EVENT_CAP);
	assert_int_equal(last, EVENT_CAP + 99);
	assert_int_equal(fake_join(f), 0);
	rdb_qmp_close(&q);
	fake_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connect_retries_until_qemu_listens),
		cmocka_unit_test(test_connect_gives_up_at_deadline),
		cmocka_unit_test(test_connect_rejects_non_qmp_greeting),
		cmocka_unit_test(test_connect_times_out_without_greeting),
		cmocka_unit_test(test_wrappers_send_what_qemu_expects),
		cmocka_unit_test(test_execute_hands_back_the_return_value),
		cmocka_unit_test(test_memdev_shared),
		cmocka_unit_test(test_error_reply_is_eremoteio_with_desc),
		cmocka_unit_test(test_events_before_the_reply_are_queued_in_order),
		cmocka_unit_test(test_deadline_expires_and_late_reply_is_dropped),
		cmocka_unit_test(test_deadline_already_past),
		cmocka_unit_test(test_server_closing_mid_reply),
		cmocka_unit_test(test_oversized_message_is_eproto),
		cmocka_unit_test(test_malformed_json_is_eproto),
		cmocka_unit_test(test_json_that_is_not_an_object_is_eproto),
		cmocka_unit_test(test_event_queue_is_bounded),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

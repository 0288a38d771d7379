// SPDX-License-Identifier: GPL-2.0-only
/* RDB-WRAP: getsockopt */
/*
 * The control socket server as remusdbctl sees it: real unix-socket
 * connections to rdb_ctl_listen, the event loop pumped by the test.
 * getsockopt is wrapped so a test can make SO_PEERCRED report another uid.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "ctl.h"
#include "evloop.h"
#include "sockutil.h"

int __real_getsockopt(int fd, int level, int name, void *val, socklen_t *len);

/* -1: report the real peer; otherwise the uid SO_PEERCRED reports. */
static int fake_peer_uid = -1;

int __wrap_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	int r = __real_getsockopt(fd, level, name, val, len);

	if (r == 0 && level == SOL_SOCKET && name == SO_PEERCRED &&
	    fake_peer_uid >= 0)
		((struct ucred *)val)->uid = (uid_t)fake_peer_uid;
	return r;
}

struct fix {
	struct rdb_evloop *loop;
	struct rdb_ctl *ctl;
	char path[64];
	int calls;
};

static int h_echo(void *opaque, json_t *req, json_t **reply)
{
	struct fix *f = opaque;

	f->calls++;
	*reply = json_incref(json_object_get(req, "args"));
	return 0;
}

static int h_fail(void *opaque, json_t *req, json_t **reply)
{
	*reply = json_string("it broke");
	return -EIO;
}

static int h_fail_silent(void *opaque, json_t *req, json_t **reply)
{
	return -ENOENT;
}

static const struct rdb_ctl_handler handlers[] = {
	{ "echo", h_echo },
	{ "fail", h_fail },
	{ "fail-silent", h_fail_silent },
};

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));

	fake_peer_uid = -1;
	snprintf(f->path, sizeof(f->path), "/tmp/rdb-test-ctl-%d.sock",
		 (int)getpid());
	if (rdb_evloop_create(&f->loop) < 0 ||
	    rdb_ctl_listen(f->path, f->loop, handlers, 3, f, &f->ctl) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	rdb_ctl_close(f->ctl);
	rdb_evloop_destroy(f->loop);
	free(f);
	return 0;
}

static int client(struct fix *f)
{
	int fd = -1;

	assert_int_equal(rdb_sock_connect_unix(f->path,
					       rdb_now_ns() + RDB_NS_PER_S, &fd), 0);
	/* the server accepts it on its next loop iteration */
	assert_int_equal(rdb_evloop_run_once(f->loop, 10 * RDB_NS_PER_MS), 0);
	return fd;
}

static void send_text(struct fix *f, int fd, const char *s)
{
	assert_int_equal(rdb_sock_write_all(fd, s, strlen(s),
					    rdb_now_ns() + RDB_NS_PER_S), 0);
}

/* Pumps the server until one line (without '\n') arrives on fd, or EOF
 * (returns NULL), or 2 s pass (fails). */
static char *read_line(struct fix *f, int fd)
{
	static char buf[8192];
	static size_t have;
	uint64_t deadline = rdb_now_ns() + 2 * RDB_NS_PER_S;

	for (;;) {
		char *nl = memchr(buf, '\n', have);
		ssize_t r;

		if (nl) {
			char *line = strndup(buf, (size_t)(nl - buf));

			have -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, have);
			return line;
		}
		assert_true(rdb_now_ns() < deadline);
		assert_true(have < sizeof(buf));
		rdb_evloop_run_once(f->loop, 5 * RDB_NS_PER_MS);
		r = read(fd, buf + have, sizeof(buf) - have);
		if (r == 0) {
			have = 0;
			return NULL;
		}
		if (r > 0)
			have += (size_t)r;
		else
			assert_true(errno == EAGAIN || errno == EINTR);
	}
}

/* True if the server closes fd within 2 s (after any pending replies). */
static bool closed_by_server(struct fix *f, int fd)
{
	char *line;

	while ((line = read_line(f, fd)) != NULL)
		free(line);
	return true;
}

static void expect_reply(struct fix *f, int fd, const char *want_substr)
{
	char *line = read_line(f, fd);

	assert_non_null(line);
	if (!strstr(line, want_substr))
		fail_msg("reply %s lacks %s", line, want_substr);
	free(line);
}

static void test_socket_is_0600(void **state)
{
	struct fix *f = *state;
	struct stat st;

	assert_int_equal(stat(f->path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
}

static void test_request_reply_and_pipelining(void **state)
{
	struct fix *f = *state;
	int fd = client(f);
	char *line;

	send_text(f, fd, "{\"cmd\":\"echo\",\"args\":{\"a\":1}}\n");
	line = read_line(f, fd);
	assert_string_equal(line, "{\"ok\":true,\"result\":{\"a\":1}}");
	free(line);
	/* two requests in one write, the second split over two writes */
	send_text(f, fd, "{\"cmd\":\"echo\",\"args\":{\"n\":2}}\n{\"cmd\":\"ec");
	rdb_evloop_run_once(f->loop, 5 * RDB_NS_PER_MS);
	send_text(f, fd, "ho\",\"args\":{\"n\":3}}\n");
	expect_reply(f, fd, "{\"n\":2}");
	expect_reply(f, fd, "{\"n\":3}");
	assert_int_equal(f->calls, 3);
	close(fd);
}

static void test_errors_keep_the_connection(void **state)
{
	struct fix *f = *state;
	int fd = client(f);

	send_text(f, fd, "{\"cmd\":\"nope\"}\n");
	expect_reply(f, fd, "{\"ok\":false,\"error\":\"unknown command\"}");
	send_text(f, fd, "{\"cmd\":\"fail\"}\n");
	expect_reply(f, fd, "{\"ok\":false,\"error\":\"it broke\"}");
	/* a handler without its own message: strerror of its errno */
	send_text(f, fd, "{\"cmd\":\"fail-silent\"}\n");
	expect_reply(f, fd, "No such file or directory");
	/* still served after all that */
	send_text(f, fd, "{\"cmd\":\"echo\",\"args\":{\"ok\":1}}\n");
	expect_reply(f, fd, "\"ok\":true");
	close(fd);
}

static void test_garbage_gets_an_error_and_is_closed(void **state)
{
	struct fix *f = *state;
	const char *junk[] = { "this is not json\n", "[1,2,3]\n", "\n",
			       "{\"args\":{}}\n" };

	for (size_t i = 0; i < 4; i++) {
		int fd = client(f);

		/* the echo after the garbage is never answered */
		send_text(f, fd, junk[i]);
		send_text(f, fd, "{\"cmd\":\"echo\"}\n");
		expect_reply(f, fd, i == 3 ? "no \\\"cmd\\\"" : "not a JSON object");
		assert_true(closed_by_server(f, fd));
		close(fd);
	}
	assert_int_equal(f->calls, 0);
}

static void test_oversized_request_is_refused_and_closed(void **state)
{
	struct fix *f = *state;
	size_t chunk = 64 * 1024, sent = 0;
	char *junk = malloc(chunk);
	int fd = client(f);
	char *line = NULL;

	memset(junk, 'x', chunk);
	/* more than RDB_CTL_MAX_REQUEST without a newline */
	while (sent <= RDB_CTL_MAX_REQUEST + chunk) {
		ssize_t r = send(fd, junk, chunk, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (r > 0)
			sent += (size_t)r;
		else if (errno != EAGAIN)
			break;	/* the server closed: fine */
		rdb_evloop_run_once(f->loop, 1 * RDB_NS_PER_MS);
	}
	line = read_line(f, fd);
	assert_non_null(line);
	assert_non_null(strstr(line, "request too large"));
	free(line);
	assert_true(closed_by_server(f, fd));
	assert_int_equal(f->calls, 0);
	free(junk);
	close(fd);
}

static void test_foreign_uid_is_refused(void **state)
{
	struct fix *f = *state;
	int fd;

	fake_peer_uid = (int)geteuid() + 4242;	/* neither root nor us */
	fd = client(f);
	expect_reply(f, fd, "permission denied");
	assert_true(closed_by_server(f, fd));
	close(fd);
	fake_peer_uid = -1;
	fd = client(f);
	send_text(f, fd, "{\"cmd\":\"echo\"}\n");
	expect_reply(f, fd, "\"ok\":true");
	close(fd);
}

/* A client that sends requests and never reads its replies must not stall
 * the loop or the other clients. */
static void test_slow_client_does_not_block_others(void **state)
{
	struct fix *f = *state;
	char req[1100];
	int slow = client(f), fast;
	size_t queued = 0;
	uint64_t t0;

	snprintf(req, sizeof(req), "{\"cmd\":\"echo\",\"args\":{\"pad\":\"%01000d\"}}\n", 0);
	/* Up to ~2 MB of replies the slow client never reads, for at most 1 s
	 * (a server that pushes back stops reading it sooner). */
	t0 = rdb_now_ns();
	while (queued < 2000 && rdb_now_ns() - t0 < RDB_NS_PER_S) {
		ssize_t r = send(slow, req, strlen(req), MSG_NOSIGNAL | MSG_DONTWAIT);

		if (r == (ssize_t)strlen(req))
			queued++;
		else
			assert_true(r < 0 && errno == EAGAIN);
		assert_int_equal(rdb_evloop_run_once(f->loop, 0), 0);
	}
	fast = client(f);
	t0 = rdb_now_ns();
	send_text(f, fast, "{\"cmd\":\"echo\",\"args\":{\"fast\":1}}\n");
	expect_reply(f, fast, "{\"fast\":1}");
	print_message("fast client answered in %.2f ms with %zu requests "
		      "from a non-reading client queued\n",
		      (double)(rdb_now_ns() - t0) / 1e6, queued);
	close(fast);
	/* pushed back: the server stopped taking its requests */
	assert_true(queued < 2000);
	/* and once it reads, every request it got in is answered, in order */
	{
		size_t got = 0;
		char *line;

		shutdown(slow, SHUT_WR);
		while ((line = read_line(f, slow)) != NULL) {
			assert_non_null(strstr(line, "\"ok\":true"));
			free(line);
			got++;
		}
		print_message("non-reading client: %zu requests accepted, %zu "
			      "answered after it read\n", queued, got);
		assert_int_equal(got, queued);
	}
	close(slow);
}

static void test_client_gone_mid_request(void **state)
{
	struct fix *f = *state;
	int fd = client(f);

	send_text(f, fd, "{\"cmd\":\"ec");
	rdb_evloop_run_once(f->loop, 5 * RDB_NS_PER_MS);
	close(fd);
	/* the server notices EOF and frees the client (ASan: no leak) */
	rdb_evloop_run_once(f->loop, 5 * RDB_NS_PER_MS);
	fd = client(f);
	send_text(f, fd, "{\"cmd\":\"echo\"}\n");
	expect_reply(f, fd, "\"ok\":true");
	close(fd);
	assert_int_equal(f->calls, 1);
}

/* The server holds at most 32 clients; one more is closed at once, and
 * the 32 are still served. */
static void test_client_limit(void **state)
{
	struct fix *f = *state;
	int fds[33];

	for (int i = 0; i < 33; i++)
		fds[i] = client(f);
	expect_reply(f, fds[32], "too many control connections");
	assert_true(closed_by_server(f, fds[32]));
	send_text(f, fds[31], "{\"cmd\":\"echo\"}\n");
	expect_reply(f, fds[31], "\"ok\":true");
	for (int i = 0; i < 33; i++)
		close(fds[i]);
}

static void test_peer_policy(void **state)
{
	assert_true(rdb_ctl_peer_allowed(0, 0));
	assert_true(rdb_ctl_peer_allowed(0, 1000));
	assert_true(rdb_ctl_peer_allowed(1000, 1000));
	assert_false(rdb_ctl_peer_allowed(1000, 0));
	assert_false(rdb_ctl_peer_allowed(1001, 1000));
	assert_false(rdb_ctl_peer_allowed((uid_t)-1, 0));	/* "nobody known" */
}

static void test_close_removes_the_socket_file(void **state)
{
	struct rdb_evloop *loop;
	struct rdb_ctl *ctl;
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/rdb-test-ctl2-%d.sock", (int)getpid());
	assert_int_equal(rdb_evloop_create(&loop), 0);
	assert_int_equal(rdb_ctl_listen(path, loop, handlers, 3, NULL, &ctl), 0);
	/* a client still connected at close is freed with it */
	assert_int_equal(rdb_sock_connect_unix(path, rdb_now_ns() + RDB_NS_PER_S, &fd), 0);
	rdb_evloop_run_once(loop, 10 * RDB_NS_PER_MS);
	rdb_ctl_close(ctl);
	assert_int_equal(access(path, F_OK), -1);
	close(fd);
	rdb_evloop_destroy(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_socket_is_0600, setup, teardown),
		cmocka_unit_test_setup_teardown(test_request_reply_and_pipelining, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errors_keep_the_connection, setup, teardown),
		cmocka_unit_test_setup_teardown(test_garbage_gets_an_error_and_is_closed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oversized_request_is_refused_and_closed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_uid_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slow_client_does_not_block_others, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_gone_mid_request, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_limit, setup, teardown),
		cmocka_unit_test(test_peer_policy),
		cmocka_unit_test(test_close_removes_the_socket_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

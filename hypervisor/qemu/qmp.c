// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "qmp"
#include "qemu/qmp.h"
#include "clock.h"
#include "log.h"
#include "sockutil.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *rdb_qmp_last_error(const struct rdb_qmp *q)
{
	return q->last_error[0] ? q->last_error : "no error";
}

int rdb_qmp_fd(const struct rdb_qmp *q)
{
	return q->fd;
}

void rdb_qmp_close(struct rdb_qmp *q)
{
	if (q->fd >= 0)
		close(q->fd);
	q->fd = -1;
	rdb_buf_dispose(&q->in);
	json_decref(q->events);
	q->events = NULL;
}

/* Reads what is there; -EAGAIN when nothing, -ECONNRESET on EOF. */
static int fill(struct rdb_qmp *q)
{
	uint8_t *dst = rdb_buf_reserve(&q->in, 65536);
	ssize_t r;

	if (!dst)
		return -ENOMEM;
	r = read(q->fd, dst, 65536);
	if (r > 0) {
		q->in.len += (size_t)r;
		return 0;
	}
	if (r == 0)
		return -ECONNRESET;
	return errno == EINTR ? 0 : -errno;
}

/* Next complete JSON line: 1 and *out, 0 when none buffered yet. */
static int take_line(struct rdb_qmp *q, json_t **out)
{
	uint8_t *nl = q->in.len ? memchr(q->in.data, '\n', q->in.len) : NULL;
	json_error_t e;
	size_t n;

	if (!nl) {
		if (q->in.len > RDB_QMP_MAX_LINE) {
			snprintf(q->last_error, sizeof(q->last_error),
				 "QMP message over %u bytes", RDB_QMP_MAX_LINE);
			return -EPROTO;
		}
		return 0;
	}
	n = (size_t)(nl - q->in.data);
	*out = json_loadb((const char *)q->in.data, n, 0, &e);
	rdb_buf_consume(&q->in, n + 1);
	if (!*out || !json_is_object(*out)) {
		json_decref(*out);
		snprintf(q->last_error, sizeof(q->last_error),
			 "malformed QMP message: %s", e.text);
		return -EPROTO;
	}
	return 1;
}

static int wait_readable(struct rdb_qmp *q, uint64_t deadline_ns)
{
	struct pollfd pfd = { .fd = q->fd, .events = POLLIN };
	uint64_t now = rdb_now_ns(), left_ms;
	int r;

	if (now >= deadline_ns)
		return -ETIMEDOUT;
	/* At most a second per poll: a far deadline must not overflow int
	 * (the callers loop until the deadline). */
	left_ms = (deadline_ns - now) / RDB_NS_PER_MS + 1;
	r = poll(&pfd, 1, left_ms > 1000 ? 1000 : (int)left_ms);
	if (r < 0 && errno != EINTR)
		return -errno;
	return 0;
}

/* Next message of any kind before the deadline. */
static int next_msg(struct rdb_qmp *q, json_t **out, uint64_t deadline_ns)
{
	for (;;) {
		int rc = take_line(q, out);

		if (rc != 0)
			return rc;
		rc = fill(q);
		if (rc == -EAGAIN)
			rc = wait_readable(q, deadline_ns);
		if (rc < 0)
			return rc;
	}
}

static int queue_event(struct rdb_qmp *q, json_t *ev)
{
	if (!q->events)
		q->events = json_array();
	/* A consumer that never reads events must not grow us unbounded. */
	if (json_array_size(q->events) >= 1024)
		json_array_remove(q->events, 0);
	return json_array_append_new(q->events, ev) ? -ENOMEM : 0;
}

int rdb_qmp_execute(struct rdb_qmp *q, const char *command, json_t *args,
		    json_t **return_out, uint64_t deadline_ns)
{
	json_t *cmd, *msg = NULL;
	char *text;
	uint64_t id = ++q->next_id;
	int rc;

	if (q->fd < 0) {
		json_decref(args);
		return -ENOTCONN;
	}
	cmd = json_pack("{s:s, s:I}", "execute", command, "id", (json_int_t)id);
	if (!cmd) {
		json_decref(args);
		return -ENOMEM;
	}
	if (args)
		json_object_set_new(cmd, "arguments", args);
	text = json_dumps(cmd, JSON_COMPACT);
	json_decref(cmd);
	if (!text)
		return -ENOMEM;
	rc = rdb_sock_write_all(q->fd, text, strlen(text), deadline_ns);
	if (rc == 0)
		rc = rdb_sock_write_all(q->fd, "\n", 1, deadline_ns);
	free(text);
	if (rc < 0) {
		/* Part of the command may have gone out: whatever we sent next
		 * would be glued to it.  This connection is done. */
		snprintf(q->last_error, sizeof(q->last_error),
			 "%s: sending failed: %s", command, strerror(-rc));
		close(q->fd);
		q->fd = -1;
		return rc;
	}
	for (;;) {
		json_t *jid;

		rc = next_msg(q, &msg, deadline_ns);
		if (rc < 0) {
			if (rc == -ETIMEDOUT)
				snprintf(q->last_error, sizeof(q->last_error),
					 "%s: no answer before the deadline", command);
			return rc;
		}
		if (json_object_get(msg, "event")) {
			queue_event(q, msg);
			continue;
		}
		jid = json_object_get(msg, "id");
		if (!json_is_integer(jid) || (uint64_t)json_integer_value(jid) != id) {
			/* The answer to a command that timed out earlier. */
			json_decref(msg);
			continue;
		}
		break;
	}
	if (json_object_get(msg, "error")) {
		const char *desc = json_string_value(json_object_get(
				json_object_get(msg, "error"), "desc"));

		snprintf(q->last_error, sizeof(q->last_error), "%s: %s", command,
			 desc ? desc : "error");
		json_decref(msg);
		return -EREMOTEIO;
	}
	if (return_out) {
		*return_out = json_incref(json_object_get(msg, "return"));
	}
	json_decref(msg);
	return 0;
}

int rdb_qmp_connect(struct rdb_qmp *q, const char *path, const char *vm,
		    uint64_t deadline_ns)
{
	json_t *greeting = NULL;
	int rc;

	memset(q, 0, sizeof(*q));
	q->fd = -1;
	snprintf(q->vm, sizeof(q->vm), "%s", vm ? vm : "");
	rdb_buf_init(&q->in);
	for (;;) {
		rc = rdb_sock_connect_unix(path, deadline_ns, &q->fd);
		if (rc == 0)
			break;
		if ((rc != -ENOENT && rc != -ECONNREFUSED) ||
		    rdb_now_ns() + 20 * RDB_NS_PER_MS >= deadline_ns) {
			snprintf(q->last_error, sizeof(q->last_error),
				 "connect %s: %s", path, strerror(-rc));
			return rc;
		}
		usleep(20000);
	}
	rc = next_msg(q, &greeting, deadline_ns);
	if (rc == 1 && !json_object_get(greeting, "QMP"))
		rc = -EPROTO;
	json_decref(greeting);
	if (rc == 1)
		rc = rdb_qmp_execute(q, "qmp_capabilities", NULL, NULL, deadline_ns);
	if (rc < 0) {
		rdb_qmp_close(q);
		return rc;
	}
	return 0;
}

int rdb_qmp_read_events(struct rdb_qmp *q)
{
	json_t *msg;
	int rc;

	for (;;) {
		rc = take_line(q, &msg);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			if (json_object_get(msg, "event"))
				queue_event(q, msg);
			else
				json_decref(msg);
			continue;
		}
		rc = fill(q);
		if (rc == -EAGAIN)
			return 0;
		if (rc < 0)
			return rc;
	}
}

json_t *rdb_qmp_next_event(struct rdb_qmp *q)
{
	json_t *ev;

	if (!q->events || json_array_size(q->events) == 0)
		return NULL;
	ev = json_incref(json_array_get(q->events, 0));
	json_array_remove(q->events, 0);
	return ev;
}

int rdb_qmp_query_status(struct rdb_qmp *q, char *status, size_t len,
			 uint64_t deadline_ns)
{
	json_t *ret = NULL;
	const char *s;
	int rc = rdb_qmp_execute(q, "query-status", NULL, &ret, deadline_ns);

	if (rc < 0)
		return rc;
	s = json_string_value(json_object_get(ret, "status"));
	snprintf(status, len, "%s", s ? s : "unknown");
	json_decref(ret);
	return s ? 0 : -EPROTO;
}

int rdb_qmp_set_capability(struct rdb_qmp *q, const char *cap, bool on,
			   uint64_t deadline_ns)
{
	return rdb_qmp_execute(q, "migrate-set-capabilities",
			       json_pack("{s:[{s:s, s:b}]}", "capabilities",
					 "capability", cap, "state", on),
			       NULL, deadline_ns);
}

int rdb_qmp_memdev_shared(struct rdb_qmp *q, const char *id, bool *shared,
			  uint64_t deadline_ns)
{
	json_t *ret = NULL, *m;
	size_t i;
	int rc = rdb_qmp_execute(q, "query-memdev", NULL, &ret, deadline_ns);

	*shared = false;
	if (rc < 0)
		return rc;
	json_array_foreach(ret, i, m) {
		const char *mid = json_string_value(json_object_get(m, "id"));

		if (mid && !strcmp(mid, id))
			*shared = json_is_true(json_object_get(m, "share"));
	}
	json_decref(ret);
	return 0;
}

int rdb_qmp_set_checkpoint_delay(struct rdb_qmp *q, unsigned ms,
				 uint64_t deadline_ns)
{
	return rdb_qmp_execute(q, "migrate-set-parameters",
			       json_pack("{s:i}", "x-checkpoint-delay", (int)ms),
			       NULL, deadline_ns);
}

int rdb_qmp_colo_caps(struct rdb_qmp *q, uint64_t deadline_ns)
{
	/* A QEMU restored on a backup loaded its RAM with x-ignore-shared
	 * (mapped, not sent): protected again it must send all of it. */
	int rc = rdb_qmp_set_capability(q, "x-ignore-shared", false, deadline_ns);

	if (rc == 0)
		rc = rdb_qmp_set_capability(q, "x-colo", true, deadline_ns);
	return rc;
}

int rdb_qmp_migrate_colo(struct rdb_qmp *q, const char *uri,
			 unsigned checkpoint_ms, uint64_t deadline_ns)
{
	int rc = rdb_qmp_set_checkpoint_delay(q, checkpoint_ms, deadline_ns);

	if (rc == 0)
		rc = rdb_qmp_execute(q, "migrate", json_pack("{s:s}", "uri", uri),
				     NULL, deadline_ns);
	return rc;
}

int rdb_qmp_migrate_colo_start(struct rdb_qmp *q, const char *uri,
			       unsigned checkpoint_ms, uint64_t deadline_ns)
{
	int rc = rdb_qmp_colo_caps(q, deadline_ns);

	if (rc == 0)
		rc = rdb_qmp_migrate_colo(q, uri, checkpoint_ms, deadline_ns);
	return rc;
}

int rdb_qmp_colo_lost_heartbeat(struct rdb_qmp *q, uint64_t deadline_ns)
{
	return rdb_qmp_execute(q, "x-colo-lost-heartbeat", NULL, NULL,
			       deadline_ns);
}

int rdb_qmp_migrate_incoming(struct rdb_qmp *q, const char *uri,
			     uint64_t deadline_ns)
{
	return rdb_qmp_execute(q, "migrate-incoming",
			       json_pack("{s:s}", "uri", uri), NULL, deadline_ns);
}

int rdb_qmp_announce_self(struct rdb_qmp *q, uint64_t deadline_ns)
{
	/* Five GARP/RARP rounds 50..200 ms apart: switches learn in ~0.5 s. */
	return rdb_qmp_execute(q, "announce-self",
			       json_pack("{s:i, s:i, s:i, s:i}", "initial", 50,
					 "max", 200, "rounds", 5, "step", 50),
			       NULL, deadline_ns);
}

int rdb_qmp_cont(struct rdb_qmp *q, uint64_t deadline_ns)
{
	return rdb_qmp_execute(q, "cont", NULL, NULL, deadline_ns);
}

int rdb_qmp_stop(struct rdb_qmp *q, uint64_t deadline_ns)
{
	return rdb_qmp_execute(q, "stop", NULL, NULL, deadline_ns);
}

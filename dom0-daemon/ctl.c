// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "ctl"
#include "ctl.h"
#include "buf.h"
#include "log.h"
#include "sockutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CLIENTS 32
/* Replies queued for a client that does not read them: past this, the
 * server stops reading its requests until it catches up. */
#define MAX_QUEUED_REPLY (1u << 20)

struct client {
	struct rdb_ctl *ctl;
	int fd;
	struct rdb_buf in, out;
	bool closing;		/* close once out is flushed */
	bool eof;		/* client half-closed: answer, flush, close */
};

struct rdb_ctl {
	struct rdb_evloop *loop;
	int fd;
	char path[108];
	const struct rdb_ctl_handler *h;
	size_t nh;
	void *opaque;
	struct client *clients[MAX_CLIENTS];
};

bool rdb_ctl_peer_allowed(uid_t peer, uid_t self)
{
	return peer == 0 || peer == self;
}

static char *reply_error(const char *msg)
{
	json_t *r = json_pack("{s:b, s:s}", "ok", 0, "error", msg);
	char *s = json_dumps(r, JSON_COMPACT);

	json_decref(r);
	return s;
}

/* *garbage_out: the line was not a request at all (the connection is
 * then closed after the reply). */
static char *dispatch(struct rdb_ctl *ctl, const char *line, size_t len,
		      bool *garbage_out)
{
	json_error_t e;
	json_t *req = json_loadb(line, len, 0, &e), *reply = NULL, *r;
	const char *cmd;
	char *s;
	int rc;

	*garbage_out = true;
	if (!json_is_object(req)) {
		json_decref(req);
		return reply_error("request is not a JSON object");
	}
	cmd = json_string_value(json_object_get(req, "cmd"));
	if (!cmd) {
		json_decref(req);
		return reply_error("request has no \"cmd\"");
	}
	*garbage_out = false;
	for (size_t i = 0; i < ctl->nh; i++) {
		if (strcmp(ctl->h[i].cmd, cmd) != 0)
			continue;
		rc = ctl->h[i].fn(ctl->opaque, req, &reply);
		json_decref(req);
		if (rc < 0) {
			s = reply_error(json_is_string(reply) ?
					json_string_value(reply) : strerror(-rc));
			json_decref(reply);
			return s;
		}
		r = json_pack("{s:b, s:o}", "ok", 1, "result",
			      reply ? reply : json_null());
		s = json_dumps(r, JSON_COMPACT);
		json_decref(r);
		return s;
	}
	json_decref(req);
	return reply_error("unknown command");
}

char *rdb_ctl_dispatch(struct rdb_ctl *ctl, const char *line, size_t len)
{
	bool garbage;

	return dispatch(ctl, line, len, &garbage);
}

static void client_free(struct client *c)
{
	struct rdb_ctl *ctl = c->ctl;

	for (int i = 0; i < MAX_CLIENTS; i++)
		if (ctl->clients[i] == c)
			ctl->clients[i] = NULL;
	rdb_evloop_del_fd(ctl->loop, c->fd);
	close(c->fd);
	rdb_buf_dispose(&c->in);
	rdb_buf_dispose(&c->out);
	free(c);
}

static void queue_reply(struct client *c, char *s)
{
	if (!s || rdb_buf_append(&c->out, s, strlen(s)) < 0 ||
	    rdb_buf_append(&c->out, "\n", 1) < 0)
		c->closing = true;
	free(s);
}

/* Answers the complete lines in c->in, in order, while the reply queue
 * has room; lines left over wait for the client to read its replies. */
static void serve_lines(struct client *c)
{
	while (!c->closing && c->out.len < MAX_QUEUED_REPLY) {
		uint8_t *nl = c->in.len ? memchr(c->in.data, '\n', c->in.len) : NULL;
		size_t n = nl ? (size_t)(nl - c->in.data) : c->in.len;
		bool garbage;

		if (n > RDB_CTL_MAX_REQUEST) {
			queue_reply(c, reply_error("request too large"));
			c->closing = true;
			return;
		}
		if (!nl)
			return;
		queue_reply(c, dispatch(c->ctl, (const char *)c->in.data, n,
					&garbage));
		rdb_buf_consume(&c->in, n + 1);
		if (garbage)
			c->closing = true;
	}
}

static void on_client(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct client *c = opaque;
	bool want_read;
	int rc;

	/* A client that does not read its replies is not read from either:
	 * its queue stays under MAX_QUEUED_REPLY plus one reply, and its
	 * unread requests under RDB_CTL_MAX_REQUEST plus one read. */
	if ((ev & RDB_EV_READ) && !c->closing && !c->eof &&
	    c->out.len < MAX_QUEUED_REPLY) {
		uint8_t *dst = rdb_buf_reserve(&c->in, 65536);
		ssize_t r = dst ? read(fd, dst, 65536) : -1;

		if (r < 0 && errno != EAGAIN && errno != EINTR) {
			client_free(c);
			return;
		}
		if (r == 0)
			c->eof = true;
		if (r > 0)
			c->in.len += (size_t)r;
	}
	/* Until the socket takes no more, or nothing complete is left: lines
	 * held back by a full queue are answered once it drains, even if the
	 * client sends nothing more. */
	do {
		serve_lines(c);
		rc = rdb_buf_write_fd(&c->out, fd);
		if ((rc < 0 && rc != -EAGAIN) || (rc == 0 && c->closing)) {
			client_free(c);
			return;
		}
	} while (rc == 0 && c->in.len && memchr(c->in.data, '\n', c->in.len));
	if (c->eof && rc == 0) {
		/* all answered; an unterminated last line is dropped */
		client_free(c);
		return;
	}
	want_read = !c->closing && !c->eof && c->out.len < MAX_QUEUED_REPLY;
	rdb_evloop_mod_fd(loop, fd, (want_read ? RDB_EV_READ : 0) |
			  (c->out.len ? RDB_EV_WRITE : 0));
}

/* One error line, sent without waiting (a fresh socket has room for it),
 * then the connection is closed. */
static void refuse(int s, const char *why)
{
	char *m = reply_error(why);

	if (m) {
		(void)!send(s, m, strlen(m), MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)!send(s, "\n", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	free(m);
	close(s);
}

static void on_accept(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct rdb_ctl *ctl = opaque;
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	struct client *c;
	int s = rdb_sock_accept(fd), slot = -1;

	if (s < 0)
		return;
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0) {
		LOG(WARN, "control connection: SO_PEERCRED: %s", strerror(errno));
		refuse(s, "permission denied: peer credentials unknown");
		return;
	}
	if (!rdb_ctl_peer_allowed(cred.uid, geteuid())) {
		LOG(WARN, "control connection from uid %d refused", (int)cred.uid);
		refuse(s, "permission denied: remusdbctl needs root");
		return;
	}
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (!ctl->clients[i]) {
			slot = i;
			break;
		}
	c = slot >= 0 ? calloc(1, sizeof(*c)) : NULL;
	if (!c) {
		refuse(s, slot < 0 ? "too many control connections" :
		       "out of memory");
		return;
	}
	c->ctl = ctl;
	c->fd = s;
	rdb_buf_init(&c->in);
	rdb_buf_init(&c->out);
	if (rdb_evloop_add_fd(loop, s, RDB_EV_READ, on_client, c) < 0) {
		close(s);
		free(c);
		return;
	}
	ctl->clients[slot] = c;
}

int rdb_ctl_listen(const char *path, struct rdb_evloop *loop,
		   const struct rdb_ctl_handler *handlers, size_t n,
		   void *opaque, struct rdb_ctl **ctl_out)
{
	struct rdb_ctl *ctl = calloc(1, sizeof(*ctl));
	int rc;

	if (!ctl)
		return -ENOMEM;
	ctl->loop = loop;
	ctl->h = handlers;
	ctl->nh = n;
	ctl->opaque = opaque;
	snprintf(ctl->path, sizeof(ctl->path), "%s", path);
	rc = rdb_sock_listen_unix(path, &ctl->fd);
	if (rc == 0) {
		rc = rdb_evloop_add_fd(loop, ctl->fd, RDB_EV_READ, on_accept, ctl);
		if (rc < 0)
			close(ctl->fd);
	}
	if (rc < 0) {
		LOG(ERROR, "control socket %s: %s", path, strerror(-rc));
		free(ctl);
		return rc;
	}
	*ctl_out = ctl;
	return 0;
}

void rdb_ctl_close(struct rdb_ctl *ctl)
{
	if (!ctl)
		return;
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (ctl->clients[i])
			client_free(ctl->clients[i]);
	rdb_evloop_del_fd(ctl->loop, ctl->fd);
	close(ctl->fd);
	unlink(ctl->path);
	free(ctl);
}

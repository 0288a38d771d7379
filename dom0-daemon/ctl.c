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

struct client {
	struct rdb_ctl *ctl;
	int fd;
	struct rdb_buf in, out;
	bool closing;		/* close once out is flushed */
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

char *rdb_ctl_dispatch(struct rdb_ctl *ctl, const char *line, size_t len)
{
	json_error_t e;
	json_t *req = json_loadb(line, len, 0, &e), *reply = NULL, *r;
	const char *cmd;
	char *s;
	int rc;

	if (!json_is_object(req)) {
		json_decref(req);
		return reply_error("request is not a JSON object");
	}
	cmd = json_string_value(json_object_get(req, "cmd"));
	if (!cmd) {
		json_decref(req);
		return reply_error("request has no \"cmd\"");
	}
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

static void on_client(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct client *c = opaque;
	int rc;

	if ((ev & RDB_EV_READ) && !c->closing) {
		uint8_t *dst = rdb_buf_reserve(&c->in, 65536);
		ssize_t r = dst ? read(fd, dst, 65536) : -1;

		if (r <= 0 && !(r < 0 && (errno == EAGAIN || errno == EINTR))) {
			client_free(c);
			return;
		}
		if (r > 0)
			c->in.len += (size_t)r;
		for (;;) {
			uint8_t *nl = c->in.len ? memchr(c->in.data, '\n', c->in.len) : NULL;
			size_t n;

			if (!nl) {
				if (c->in.len > RDB_CTL_MAX_REQUEST) {
					queue_reply(c, reply_error("request too large"));
					c->closing = true;
				}
				break;
			}
			n = (size_t)(nl - c->in.data);
			queue_reply(c, rdb_ctl_dispatch(c->ctl, (const char *)c->in.data, n));
			rdb_buf_consume(&c->in, n + 1);
		}
	}
	rc = rdb_buf_write_fd(&c->out, fd);
	if ((rc < 0 && rc != -EAGAIN) || (rc == 0 && c->closing)) {
		client_free(c);
		return;
	}
	rdb_evloop_mod_fd(loop, fd, RDB_EV_READ | (c->out.len ? RDB_EV_WRITE : 0));
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
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 ||
	    !rdb_ctl_peer_allowed(cred.uid, geteuid())) {
		char *m = reply_error("permission denied: remusdbctl needs root");

		LOG(WARN, "control connection from uid %d refused", (int)cred.uid);
		if (m) {
			(void)!write(s, m, strlen(m));
			(void)!write(s, "\n", 1);
		}
		free(m);
		close(s);
		return;
	}
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (!ctl->clients[i]) {
			slot = i;
			break;
		}
	c = slot >= 0 ? calloc(1, sizeof(*c)) : NULL;
	if (!c) {
		close(s);
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

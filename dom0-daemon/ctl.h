/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The control socket remusdbctl talks to: one JSON object per line.
 *
 *   request = {"cmd": NAME, "args": {...}}
 *   reply   = {"ok": true, "result": ...} | {"ok": false, "error": TEXT}
 *
 * Only root (or the daemon's own user) may connect: SO_PEERCRED is
 * checked on accept, and the socket file is 0600 in a 0700 directory.
 */
#ifndef RDB_CTL_H
#define RDB_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

#include "evloop.h"

#define RDB_CTL_MAX_REQUEST (1u << 20)

/* 0 with *reply_out the result (may stay NULL), or a negative errno with
 * *reply_out a JSON string saying why (may stay NULL: strerror is used). */
struct rdb_ctl_handler {
	const char *cmd;
	int (*fn)(void *opaque, json_t *request, json_t **reply_out);
};

struct rdb_ctl;

int rdb_ctl_listen(const char *path, struct rdb_evloop *loop,
		   const struct rdb_ctl_handler *handlers, size_t n,
		   void *opaque, struct rdb_ctl **ctl_out);
void rdb_ctl_close(struct rdb_ctl *ctl);

/* The access decision, separate so it can be tested. */
bool rdb_ctl_peer_allowed(uid_t peer, uid_t self);
/* Handles one request line; returns the reply (caller frees). */
char *rdb_ctl_dispatch(struct rdb_ctl *ctl, const char *line, size_t len);

#endif

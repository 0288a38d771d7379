/* SPDX-License-Identifier: GPL-2.0-only */
/* Sockets the daemon opens: all non-blocking, all CLOEXEC, all with deadlines. */
#ifndef RDB_SOCKUTIL_H
#define RDB_SOCKUTIL_H

#include <stddef.h>
#include <stdint.h>

/* Removes a stale socket file at path first; the socket is mode 0600. */
int rdb_sock_listen_unix(const char *path, int *fd_out);
/* "host:port" ("0.0.0.0:7788", "[::]:7788"); SO_REUSEADDR. */
int rdb_sock_listen_tcp(const char *hostport, int *fd_out);
/* Non-blocking accept; -EAGAIN when nothing is pending. */
int rdb_sock_accept(int listen_fd);
/* Connects before deadline_ns (monotonic); the result is non-blocking,
 * TCP_NODELAY, with TCP keepalive off (we run our own heartbeats). */
int rdb_sock_connect_tcp(const char *hostport, uint64_t deadline_ns,
			 int *fd_out);
int rdb_sock_connect_unix(const char *path, uint64_t deadline_ns, int *fd_out);
/* Writes all of buf to a (non-blocking) fd, waiting for POLLOUT at most
 * until deadline_ns: -ETIMEDOUT past it, -EPIPE/-ECONNRESET on a dead peer. */
int rdb_sock_write_all(int fd, const void *buf, size_t len,
		       uint64_t deadline_ns);
/* Splits "host:port"; host may be [v6]. */
int rdb_sock_split_hostport(const char *hostport, char *host, size_t hostlen,
			    char *port, size_t portlen);

#endif

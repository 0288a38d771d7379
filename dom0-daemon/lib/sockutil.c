// SPDX-License-Identifier: GPL-2.0-only
#include "sockutil.h"
#include "clock.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = events };
		uint64_t now = rdb_now_ns();
		int r;

		if (now >= deadline_ns)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, (int)((deadline_ns - now + RDB_NS_PER_MS - 1) /
				       RDB_NS_PER_MS));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r > 0)
			return 0;
	}
}

static int unix_addr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

int rdb_sock_listen_unix(const char *path, int *fd_out)
{
	struct sockaddr_un sa;
	mode_t old;
	int fd, r, rc = unix_addr(path, &sa);

	if (rc < 0)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	unlink(path);
	old = umask(0177);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(fd, 8) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}

int rdb_sock_split_hostport(const char *hostport, char *host, size_t hostlen,
			    char *port, size_t portlen)
{
	const char *colon, *h = hostport;
	size_t hl;

	if (hostport[0] == '[') {
		const char *end = strchr(hostport, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		h = hostport + 1;
		hl = (size_t)(end - h);
		colon = end + 1;
	} else {
		colon = strrchr(hostport, ':');
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - hostport);
	}
	if (hl == 0 || hl >= hostlen || strlen(colon + 1) == 0 ||
	    strlen(colon + 1) >= portlen)
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = 0;
	strcpy(port, colon + 1);
	return 0;
}

static int resolve(const char *hostport, bool passive, struct addrinfo **res)
{
	char host[256], port[16];
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0),
	};
	int rc = rdb_sock_split_hostport(hostport, host, sizeof(host), port,
					 sizeof(port));

	if (rc < 0)
		return rc;
	/* Only numeric hosts: a DNS lookup has no deadline we control. */
	hints.ai_flags |= AI_NUMERICHOST;
	return getaddrinfo(host, port, &hints, res) == 0 ? 0 : -EINVAL;
}

int rdb_sock_listen_tcp(const char *hostport, int *fd_out)
{
	struct addrinfo *ai;
	int fd, one = 1, rc = resolve(hostport, true, &ai);

	if (rc < 0)
		return rc;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 16) < 0) {
		rc = -errno;
		close(fd);
		goto out;
	}
	*fd_out = fd;
out:
	freeaddrinfo(ai);
	return rc;
}

int rdb_sock_accept(int listen_fd)
{
	int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

static int finish_connect(int fd, const struct sockaddr *sa, socklen_t len,
			  uint64_t deadline_ns)
{
	int err = 0, rc;
	socklen_t el = sizeof(err);

	if (connect(fd, sa, len) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return -errno;
	rc = wait_fd(fd, POLLOUT, deadline_ns);
	if (rc < 0)
		return rc;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
		return -errno;
	return err ? -err : 0;
}

int rdb_sock_connect_tcp(const char *hostport, uint64_t deadline_ns,
			 int *fd_out)
{
	struct addrinfo *ai;
	int fd, one = 1, rc = resolve(hostport, false, &ai);

	if (rc < 0)
		return rc;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	rc = finish_connect(fd, ai->ai_addr, ai->ai_addrlen, deadline_ns);
	if (rc < 0) {
		close(fd);
		goto out;
	}
	*fd_out = fd;
out:
	freeaddrinfo(ai);
	return rc;
}

int rdb_sock_connect_unix(const char *path, uint64_t deadline_ns, int *fd_out)
{
	struct sockaddr_un sa;
	int fd, rc = unix_addr(path, &sa);

	if (rc < 0)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = finish_connect(fd, (struct sockaddr *)&sa, sizeof(sa), deadline_ns);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}

int rdb_sock_write_all(int fd, const void *buf, size_t len,
		       uint64_t deadline_ns)
{
	const char *p = buf;

	while (len) {
		ssize_t r = send(fd, p, len, MSG_NOSIGNAL);

		if (r > 0) {
			p += r;
			len -= (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			int rc = wait_fd(fd, POLLOUT, deadline_ns);

			if (rc < 0)
				return rc;
			continue;
		}
		return r < 0 ? -errno : -EPIPE;
	}
	return 0;
}

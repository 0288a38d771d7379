// SPDX-License-Identifier: GPL-2.0-only
#include "sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int rdb_sd_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n, len = strlen(state);
	socklen_t salen;
	ssize_t r;
	int fd;

	if (!path || !path[0])
		return 0;
	n = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = 0;
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
			    (path[0] == '/'));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	r = sendto(fd, state, len, MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
	if (r < 0)
		r = -errno;
	close(fd);
	return r < 0 ? (int)r : (size_t)r == len ? 1 : -EMSGSIZE;
}

uint64_t rdb_sd_watchdog_ns(void)
{
	const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	unsigned long long v;
	char *end;

	if (!us || !us[0])
		return 0;
	if (pid && pid[0] && strtol(pid, NULL, 10) != (long)getpid())
		return 0;
	errno = 0;
	v = strtoull(us, &end, 10);
	if (errno || *end || v == 0 || v > UINT64_MAX / 1000)
		return 0;
	return (uint64_t)v * 1000;
}

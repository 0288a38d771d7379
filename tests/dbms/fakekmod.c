// SPDX-License-Identifier: GPL-2.0-only
/*
 * fakekmod.so: remusdb.ko's contract with a DBMS, faked in user space
 * (LD_PRELOAD), so a patched server's commit-protection calls can be
 * tested on a host that has no module: which bytes it sends while its
 * client socket is protected, what it does when the abort generation
 * moves, and how its failover handler reacts to an event.
 *
 * Environment:
 *   FAKEKMOD_LOG=FILE     one line per call, appended (O_APPEND, one
 *                         write(2) per line, so processes may share it):
 *                           P <pid> <fd> <0|1>          set REMUSDB_SO_PROTECT
 *                           W <pid> <fd> <0|1> <n> <hex> bytes sent on a TCP
 *                                                     socket while (un)protected;
 *                                                     hex: the first 64 bytes
 *                           G <pid> <fd> <gen>          REMUSDB_SO_ABORT_GEN read
 *   FAKEKMOD_ABSENT=1     behave as if the module were not loaded: both
 *                         options fail with ENOPROTOOPT, and opening
 *                         /dev/remusdb fails with ENOENT
 *   FAKEKMOD_GEN_FILE=F   the abort generation: a decimal number in F
 *                         (missing or empty: 0), read at every call
 *   FAKEKMOD_EVENT=PATH   opening REMUSDB_DEV opens PATH instead (a FIFO
 *                         the test writes struct remusdb_event records to)
 *
 * The protected state is per socket (per fd here, cleared on close()).
 * Only what the contract needs is faked; every other call goes to libc.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../../guest-kmod/include/uapi/remusdb.h"

#define MAX_FD 65536

static unsigned char protected_fd[MAX_FD];

#define REAL(name) \
	static __typeof__(name) *real_##name; \
	if (!real_##name) \
		real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

static int absent(void)
{
	const char *a = getenv("FAKEKMOD_ABSENT");

	return a && *a && strcmp(a, "0") != 0;
}

static void logline(const char *fmt, ...)
{
	const char *path = getenv("FAKEKMOD_LOG");
	char line[512];
	va_list ap;
	int fd, n;

	if (!path || !*path)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n <= 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	/* raw system calls: the log must not go through the wrappers */
	fd = (int)syscall(SYS_openat, AT_FDCWD, path,
			  O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (syscall(SYS_write, fd, line, (size_t)n) < 0) {
		/* a test log: nothing better to do */
	}
	syscall(SYS_close, fd);
}

static uint64_t gen_now(void)
{
	const char *path = getenv("FAKEKMOD_GEN_FILE");
	char buf[32] = "";
	uint64_t g = 0;
	FILE *f;

	if (!path || !(f = fopen(path, "r")))
		return 0;
	if (fgets(buf, sizeof(buf), f))
		g = strtoull(buf, NULL, 10);
	fclose(f);
	return g;
}

static int is_tcp(int fd)
{
	int type = 0, proto = 0;
	socklen_t l1 = sizeof(type), l2 = sizeof(proto);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	REAL(getsockopt);

	if (fd < 0 || real_getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l1) < 0 ||
	    type != SOCK_STREAM)
		return 0;
	if (real_getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l2) < 0 ||
	    proto != IPPROTO_TCP)
		return 0;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		return 0;
	return ss.ss_family == AF_INET || ss.ss_family == AF_INET6;
}

static int is_remusdb_level(int level)
{
	return level == SOL_IP || level == SOL_IPV6;
}

int setsockopt(int fd, int level, int optname, const void *optval,
	       socklen_t optlen)
{
	REAL(setsockopt);

	if (is_remusdb_level(level) && optname >= REMUSDB_SO_BASE &&
	    optname < REMUSDB_SO_MAX) {
		int on;

		if (absent() || optname != REMUSDB_SO_PROTECT) {
			errno = ENOPROTOOPT;
			return -1;
		}
		if (!is_tcp(fd)) {
			errno = EOPNOTSUPP;
			return -1;
		}
		if (optlen < (socklen_t)sizeof(int)) {
			errno = EINVAL;
			return -1;
		}
		memcpy(&on, optval, sizeof(on));
		if (fd < MAX_FD)
			protected_fd[fd] = on ? 1 : 0;
		logline("P %d %d %d\n", (int)getpid(), fd, on ? 1 : 0);
		return 0;
	}
	return real_setsockopt(fd, level, optname, optval, optlen);
}

int getsockopt(int fd, int level, int optname, void *optval, socklen_t *optlen)
{
	REAL(getsockopt);

	if (is_remusdb_level(level) && optname >= REMUSDB_SO_BASE &&
	    optname < REMUSDB_SO_MAX) {
		if (absent()) {
			errno = ENOPROTOOPT;
			return -1;
		}
		if (!is_tcp(fd)) {
			errno = EOPNOTSUPP;
			return -1;
		}
		if (optname == REMUSDB_SO_PROTECT) {
			int on = fd < MAX_FD ? protected_fd[fd] : 0;

			if (*optlen < (socklen_t)sizeof(int)) {
				errno = EINVAL;
				return -1;
			}
			memcpy(optval, &on, sizeof(on));
			*optlen = sizeof(on);
			return 0;
		} else {
			uint64_t g = gen_now();

			if (*optlen < (socklen_t)sizeof(g)) {
				errno = EINVAL;
				return -1;
			}
			memcpy(optval, &g, sizeof(g));
			*optlen = sizeof(g);
			logline("G %d %d %" PRIu64 "\n", (int)getpid(), fd, g);
			return 0;
		}
	}
	return real_getsockopt(fd, level, optname, optval, optlen);
}

static void log_send(int fd, const void *buf, size_t len)
{
	char hex[2 * 64 + 1];
	const unsigned char *b = buf;
	size_t n = len < 64 ? len : 64;

	if (!getenv("FAKEKMOD_LOG") || !is_tcp(fd))
		return;
	for (size_t i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", b[i]);
	hex[2 * n] = 0;
	logline("W %d %d %d %zu %s\n", (int)getpid(), fd,
		fd >= 0 && fd < MAX_FD ? protected_fd[fd] : 0, len, hex);
}

static void log_iov(int fd, const struct iovec *iov, int cnt, ssize_t sent)
{
	unsigned char first[64];
	size_t have = 0, total = sent > 0 ? (size_t)sent : 0;

	if (sent <= 0)
		return;
	for (int i = 0; i < cnt && have < sizeof(first) && have < total; i++) {
		size_t k = iov[i].iov_len;

		if (k > sizeof(first) - have)
			k = sizeof(first) - have;
		if (k > total - have)
			k = total - have;
		memcpy(first + have, iov[i].iov_base, k);
		have += k;
	}
	/* the log shows the length sent, the hex its first bytes */
	{
		char hex[2 * 64 + 1];

		if (!getenv("FAKEKMOD_LOG") || !is_tcp(fd))
			return;
		for (size_t i = 0; i < have; i++)
			snprintf(hex + 2 * i, 3, "%02x", first[i]);
		hex[2 * have] = 0;
		logline("W %d %d %d %zu %s\n", (int)getpid(), fd,
			fd >= 0 && fd < MAX_FD ? protected_fd[fd] : 0, total, hex);
	}
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	ssize_t r;
	REAL(send);

	r = real_send(fd, buf, len, flags);
	if (r > 0)
		log_send(fd, buf, (size_t)r);
	return r;
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags,
	       const struct sockaddr *to, socklen_t tolen)
{
	ssize_t r;
	REAL(sendto);

	r = real_sendto(fd, buf, len, flags, to, tolen);
	if (r > 0)
		log_send(fd, buf, (size_t)r);
	return r;
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	ssize_t r;
	REAL(sendmsg);

	r = real_sendmsg(fd, m, flags);
	log_iov(fd, m->msg_iov, (int)m->msg_iovlen, r);
	return r;
}

ssize_t write(int fd, const void *buf, size_t len)
{
	ssize_t r;
	REAL(write);

	r = real_write(fd, buf, len);
	if (r > 0 && fd >= 0 && fd < MAX_FD && getenv("FAKEKMOD_LOG"))
		log_send(fd, buf, (size_t)r);
	return r;
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	ssize_t r;
	REAL(writev);

	r = real_writev(fd, iov, cnt);
	log_iov(fd, iov, cnt, r);
	return r;
}

int close(int fd)
{
	REAL(close);

	if (fd >= 0 && fd < MAX_FD)
		protected_fd[fd] = 0;
	return real_close(fd);
}

static const char *redirect(const char *path)
{
	const char *ev = getenv("FAKEKMOD_EVENT");

	if (path && strcmp(path, REMUSDB_DEV) == 0) {
		if (absent())
			return NULL;
		if (ev && *ev)
			return ev;
	}
	return path;
}

/* The mode argument is there only with O_CREAT or O_TMPFILE (whose bits
 * include O_DIRECTORY: a plain O_DIRECTORY open passes no mode) */
static int needs_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	const char *p = redirect(path);
	REAL(open);

	if (needs_mode(flags)) {
		va_list ap;

		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	if (!p) {
		errno = ENOENT;
		return -1;
	}
	return real_open(p, flags, mode);
}

int open64(const char *path, int flags, ...)
	__attribute__((alias("open")));

/* _FORTIFY_SOURCE builds call these */
int __open_2(const char *path, int flags)
{
	return open(path, flags);
}

int __open64_2(const char *path, int flags)
	__attribute__((alias("__open_2")));

int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	const char *p = redirect(path);
	REAL(openat);

	if (needs_mode(flags)) {
		va_list ap;

		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	if (!p) {
		errno = ENOENT;
		return -1;
	}
	return real_openat(dirfd, p, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
	__attribute__((alias("openat")));

int __openat_2(int dirfd, const char *path, int flags)
{
	return openat(dirfd, path, flags);
}

int __openat64_2(int dirfd, const char *path, int flags)
	__attribute__((alias("__openat_2")));

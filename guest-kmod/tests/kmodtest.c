// SPDX-License-Identifier: GPL-2.0-only
/*
 * kmodtest: remusdb.ko checked from inside the guest.
 *
 *   kmodtest sockopt             set/get/unset on IPv4 and IPv6 TCP; UDP refused
 *   kmodtest perm GID            (module loaded with protect_gid=GID)
 *                                root may; uid 65534 may not; uid 65534 in GID may
 *   kmodtest send HOST PORT ON N connect (IPv4 or IPv6 HOST), protect if ON,
 *                                send N small writes
 *   kmodtest loopback N          a protected connection over lo (in whatever
 *                                network namespace this runs): the module's
 *                                packets_marked must grow
 *   kmodtest waitevent SECONDS   block on /dev/remusdb for one event; print it
 *                                and the abort generation after it
 *   kmodtest badevent            an event with unknown flags is refused
 *   kmodtest absent              (module unloaded) the option is gone: ENOPROTOOPT
 *
 * Prints "KMODTEST <name> ok ..." or "KMODTEST <name> FAIL: why" and
 * exits 0 / 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../include/uapi/remusdb.h"

static const char *test = "?";

static int fail(const char *fmt, const char *a, int e)
{
	printf("KMODTEST %s FAIL: ", test);
	printf(fmt, a);
	printf(" (%s)\n", e ? strerror(e) : "no error");
	exit(1);
}

static int get(int fd, int level)
{
	int on = -1;
	socklen_t len = sizeof(on);

	if (getsockopt(fd, level, REMUSDB_SO_PROTECT, &on, &len) < 0)
		fail("getsockopt %s", level == SOL_IP ? "SOL_IP" : "SOL_IPV6", errno);
	return on;
}

static void set(int fd, int level, int on)
{
	if (setsockopt(fd, level, REMUSDB_SO_PROTECT, &on, sizeof(on)) < 0)
		fail("setsockopt %s", level == SOL_IP ? "SOL_IP" : "SOL_IPV6", errno);
}

static int do_sockopt(void)
{
	int s4 = socket(AF_INET, SOCK_STREAM, 0), s6 = socket(AF_INET6, SOCK_STREAM, 0);
	int u = socket(AF_INET, SOCK_DGRAM, 0), on = 1;

	if (s4 < 0 || s6 < 0 || u < 0)
		fail("socket%s", "", errno);
	if (get(s4, SOL_IP) != 0 || get(s6, SOL_IPV6) != 0)
		fail("a new socket is %s", "protected", 0);
	set(s4, SOL_IP, 1);
	set(s6, SOL_IPV6, 1);
	if (get(s4, SOL_IP) != 1 || get(s6, SOL_IPV6) != 1)
		fail("%s", "protection did not stick", 0);
	set(s4, SOL_IP, 0);
	set(s6, SOL_IPV6, 0);
	if (get(s4, SOL_IP) != 0 || get(s6, SOL_IPV6) != 0)
		fail("%s", "unprotect did not stick", 0);
	if (setsockopt(u, SOL_IP, REMUSDB_SO_PROTECT, &on, sizeof(on)) == 0 ||
	    errno != EOPNOTSUPP)
		fail("UDP: want EOPNOTSUPP%s", "", errno);
	if (setsockopt(s4, SOL_IP, REMUSDB_SO_PROTECT, &on, 2) == 0 || errno != EINVAL)
		fail("short optlen: want EINVAL%s", "", errno);
	{
		unsigned long long gen = 99;
		socklen_t len = sizeof(gen);

		if (getsockopt(s6, SOL_IPV6, REMUSDB_SO_ABORT_GEN, &gen, &len) < 0 ||
		    len != 8 || gen != 0)
			fail("abort generation: want 0 at load%s", "", errno);
		len = 4;
		if (getsockopt(s4, SOL_IP, REMUSDB_SO_ABORT_GEN, &gen, &len) == 0 ||
		    errno != EINVAL)
			fail("abort generation, 4 bytes: want EINVAL%s", "", errno);
		if (setsockopt(s4, SOL_IP, REMUSDB_SO_ABORT_GEN, &on, sizeof(on)) == 0 ||
		    errno != ENOPROTOOPT)
			fail("setting the abort generation: want ENOPROTOOPT%s", "", errno);
	}
	printf("KMODTEST sockopt ok: IPv4 and IPv6 set/get/unset, UDP EOPNOTSUPP, "
	       "short EINVAL, abort generation 0 (get only)\n");
	return 0;
}

static int try_as(uid_t uid, gid_t gid, const gid_t *groups, int ngroups)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		int s = socket(AF_INET, SOCK_STREAM, 0), on = 1;

		if (setgroups((size_t)ngroups, groups) < 0 || setgid(gid) < 0 ||
		    setuid(uid) < 0)
			_exit(100);
		_exit(setsockopt(s, SOL_IP, REMUSDB_SO_PROTECT, &on, sizeof(on)) == 0 ?
		      0 : errno);
	}
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 101;
}

static int do_perm(gid_t gid)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	gid_t g = gid;
	int r;

	set(s, SOL_IP, 1);	/* root: CAP_NET_ADMIN */
	r = try_as(65534, 65534, NULL, 0);
	if (r != EPERM)
		fail("uid 65534 outside the group: want EPERM, got %s", r ? strerror(r) : "success", 0);
	r = try_as(65534, 65534, &g, 1);
	if (r != 0)
		fail("uid 65534 in the group: %s", strerror(r), 0);
	printf("KMODTEST perm ok: root yes, uid 65534 EPERM, uid 65534 in group %u yes\n", gid);
	return 0;
}

static int do_send(const char *host, int port, int on, int n)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	int v6 = strchr(host, ':') != NULL;
	int s = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0), one = 1;
	socklen_t sl;
	char buf[64];

	if (v6) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		inet_pton(AF_INET6, host, &a6->sin6_addr);
		sl = sizeof(*a6);
	} else {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		inet_pton(AF_INET, host, &a4->sin_addr);
		sl = sizeof(*a4);
	}
	if (connect(s, (struct sockaddr *)&ss, sl) < 0)
		fail("connect %s", host, errno);
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (on)
		set(s, v6 ? SOL_IPV6 : SOL_IP, 1);
	for (int i = 0; i < n; i++) {
		int k = snprintf(buf, sizeof(buf), "%s %d\n", on ? "protected" : "plain", i);

		if (write(s, buf, (size_t)k) != k)
			fail("write%s", "", errno);
		usleep(30000);
	}
	shutdown(s, SHUT_WR);
	while (read(s, buf, sizeof(buf)) > 0)
		;
	close(s);
	printf("KMODTEST send ok: %d writes, protected=%d, %s\n", n, on,
	       v6 ? "IPv6" : "IPv4");
	return 0;
}

static long long sysfs_num(const char *name)
{
	char path[128];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/remusdb/%s", name);
	f = fopen(path, "r");
	if (!f || fscanf(f, "%lld", &v) != 1)
		fail("read %s", path, errno);
	fclose(f);
	return v;
}

static int do_loopback(int n)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(7222) };
	int l = socket(AF_INET, SOCK_STREAM, 0), c, srv, one = 1;
	long long before = sysfs_num("packets_marked"), after, prot;
	char buf[64];

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0)
		fail("listen on lo%s", "", errno);
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail("connect over lo%s", "", errno);
	srv = accept(l, NULL, NULL);
	set(c, SOL_IP, 1);
	prot = sysfs_num("protected_sockets");
	for (int i = 0; i < n; i++) {
		if (write(c, "x", 1) != 1 || read(srv, buf, sizeof(buf)) <= 0)
			fail("lo exchange%s", "", errno);
	}
	after = sysfs_num("packets_marked");
	if (after < before + n)
		fail("lo: packets_marked grew by %s", after - before < n ? "too little" : "?", 0);
	if (prot < 1)
		fail("protected_sockets %s while one is protected", "is 0", 0);
	printf("KMODTEST loopback ok: %lld packets marked for %d writes, protected_sockets=%lld\n",
	       after - before, n, prot);
	return 0;
}

static int do_waitevent(int secs)
{
	struct remusdb_event ev;
	int fd = open(REMUSDB_DEV, O_RDONLY);
	struct pollfd p;

	if (fd < 0)
		fail("open %s", REMUSDB_DEV, errno);
	printf("KMODTEST waitevent waiting\n");
	fflush(stdout);
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	if (poll(&p, 1, secs * 1000) != 1)
		fail("no event within the deadline%s", "", 0);
	if (read(fd, &ev, sizeof(ev)) != (ssize_t)sizeof(ev))
		fail("read %s", REMUSDB_DEV, errno);
	{
		int s = socket(AF_INET, SOCK_STREAM, 0);
		unsigned long long gen = 0;
		socklen_t len = sizeof(gen);

		if (getsockopt(s, SOL_IP, REMUSDB_SO_ABORT_GEN, &gen, &len) < 0)
			fail("abort generation%s", "", errno);
		printf("KMODTEST waitevent ok: epoch=%llu generation=%llu flags=%u "
		       "abort_gen=%llu\n", (unsigned long long)ev.epoch,
		       (unsigned long long)ev.generation, ev.flags, gen);
		close(s);
	}
	return 0;
}

static int do_badevent(void)
{
	struct remusdb_event ev = { .epoch = 1, .generation = 1, .flags = 0x80 };
	int fd = open(REMUSDB_DEV, O_WRONLY);

	if (fd < 0)
		fail("open %s", REMUSDB_DEV, errno);
	if (write(fd, &ev, sizeof(ev)) >= 0 || errno != EINVAL)
		fail("unknown flags: want EINVAL%s", "", errno);
	ev.flags = 0;
	ev.reserved = 1;
	if (write(fd, &ev, sizeof(ev)) >= 0 || errno != EINVAL)
		fail("reserved field set: want EINVAL%s", "", errno);
	printf("KMODTEST badevent ok: unknown flags and a set reserved field refused\n");
	return 0;
}

static int do_absent(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0), on = 1;

	if (setsockopt(s, SOL_IP, REMUSDB_SO_PROTECT, &on, sizeof(on)) == 0 ||
	    errno != ENOPROTOOPT)
		fail("after rmmod: want ENOPROTOOPT%s", "", errno);
	if (access(REMUSDB_DEV, F_OK) == 0 || access("/sys/kernel/remusdb", F_OK) == 0)
		fail("after rmmod: %s or /sys/kernel/remusdb still there", REMUSDB_DEV, 0);
	printf("KMODTEST absent ok: option ENOPROTOOPT, no device, no sysfs\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		return 2;
	test = argv[1];
	if (!strcmp(test, "sockopt"))
		return do_sockopt();
	if (!strcmp(test, "perm") && argc == 3)
		return do_perm((gid_t)atoi(argv[2]));
	if (!strcmp(test, "send") && argc == 6)
		return do_send(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
	if (!strcmp(test, "loopback") && argc == 3)
		return do_loopback(atoi(argv[2]));
	if (!strcmp(test, "absent"))
		return do_absent();
	if (!strcmp(test, "waitevent") && argc == 3)
		return do_waitevent(atoi(argv[2]));
	if (!strcmp(test, "badevent"))
		return do_badevent();
	fprintf(stderr, "usage: kmodtest sockopt | perm GID | send HOST PORT ON N | waitevent SECONDS\n");
	return 2;
}

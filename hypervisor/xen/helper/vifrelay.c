// SPDX-License-Identifier: GPL-2.0-only
/*
 * remusdb-xen vif (xen_helper.h): a PV domain's vif in dom0 relayed to
 * remusdbd's NIC socket, in QEMU's -netdev stream framing (nic.h), so the
 * daemon holds a Xen guest's output as it holds a QEMU guest's.
 *
 * The vif is where netback makes it, in the initial network namespace; a
 * daemon (and so this relay) may run in another (the tests' hosts are
 * namespaces), so the packet socket is opened in PID 1's namespace and
 * the relay itself stays in the daemon's.  It reconnects to the socket
 * every 100 ms while the daemon is away (QEMU's reconnect-ms) and ends
 * when the vif goes (the domain is destroyed or migrated away) or on
 * SIGTERM.  One relay per vif: a lock in /run/remusdb-xen.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "xen/vif_frame.h"
#include "xen/helper/vifrelay.h"

#define LOCK_DIR "/run/remusdb-xen"
#define MAX_FRAME (65536u + 4096u)	/* nic.h's RDB_NET_MAX_FRAME */
#define MAX_QUEUED (4u << 20)		/* to the daemon, then dropped */
#define RECONNECT_MS 100
#define CHECK_MS 1000			/* is the vif still there */

struct relay {
	const char *ifname, *sock;
	int pkt, ifindex;
	int fd;				/* the daemon's socket, or -1 */
	uint8_t *out;			/* framed, for the daemon */
	size_t out_len, out_cap;
	uint8_t *in;			/* from the daemon, partial frames */
	size_t in_len;
	uint64_t to_daemon, to_guest, dropped_gso, dropped_bad,
		 dropped_full, dropped_guest, connects;
};

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
	struct timespec ts;
	struct tm tm;
	char when[32];
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	fprintf(stderr, "%s.%03ld remusdb-xen vif: ", when, ts.tv_nsec / 1000000);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* The packet socket on ifname, in PID 1's network namespace (the vif's),
 * the link set up.  -errno, with why in err. */
static int open_vif(struct relay *r, char *err, size_t errlen)
{
	struct stat self_st, init_st;
	int self = -1, init = -1, one = 1, rc = 0, rcvbuf = 4 << 20;
	struct ifreq ifr;
	struct sockaddr_ll a = { .sll_family = AF_PACKET,
				 .sll_protocol = htons(ETH_P_ALL) };

	if (stat("/proc/self/ns/net", &self_st) == 0 &&
	    stat("/proc/1/ns/net", &init_st) == 0 &&
	    self_st.st_ino != init_st.st_ino) {
		self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
		init = open("/proc/1/ns/net", O_RDONLY | O_CLOEXEC);
		if (self < 0 || init < 0 || setns(init, CLONE_NEWNET) < 0) {
			rc = -errno;
			snprintf(err, errlen, "entering the initial network "
				 "namespace (the vif's): %s", strerror(-rc));
			goto out;
		}
	}
	/* protocol 0: it hears nothing until bound to the vif (ETH_P_ALL
	 * here would queue every interface's frames until the bind) */
	r->pkt = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r->pkt < 0) {
		rc = -errno;
		snprintf(err, errlen, "packet socket: %s", strerror(-rc));
		goto back;
	}
	r->ifindex = (int)if_nametoindex(r->ifname);
	if (r->ifindex == 0) {
		rc = -errno;
		snprintf(err, errlen, "no %s in dom0 (%s): has the domain a vif?",
			 r->ifname, strerror(-rc));
		goto back;
	}
	a.sll_ifindex = r->ifindex;
	if (setsockopt(r->pkt, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) < 0 ||
	    setsockopt(r->pkt, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one,
		       sizeof(one)) < 0 ||
	    bind(r->pkt, (struct sockaddr *)&a, sizeof(a)) < 0) {
		rc = -errno;
		snprintf(err, errlen, "packet socket on %s: %s", r->ifname,
			 strerror(-rc));
		goto back;
	}
	(void)setsockopt(r->pkt, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", r->ifname);
	if (ioctl(r->pkt, SIOCGIFFLAGS, &ifr) == 0 && !(ifr.ifr_flags & IFF_UP)) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(r->pkt, SIOCSIFFLAGS, &ifr) < 0) {
			rc = -errno;
			snprintf(err, errlen, "setting %s up: %s", r->ifname,
				 strerror(-rc));
		}
	}
back:
	if (self >= 0 && setns(self, CLONE_NEWNET) < 0 && rc == 0) {
		rc = -errno;
		snprintf(err, errlen, "back to the daemon's network namespace: %s",
			 strerror(-rc));
	}
out:
	if (self >= 0)
		close(self);
	if (init >= 0)
		close(init);
	return rc;
}

/* Still there?  (by index, in the socket's own namespace) */
static bool vif_present(const struct relay *r)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_ifindex = r->ifindex;
	return ioctl(r->pkt, SIOCGIFNAME, &ifr) == 0 &&
	       strcmp(ifr.ifr_name, r->ifname) == 0;
}

static void try_connect(struct relay *r)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(r->sock) >= sizeof(a.sun_path))
		return;
	strcpy(a.sun_path, r->sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return;
	}
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	r->fd = fd;
	r->out_len = r->in_len = 0;
	r->connects++;
	say("connected to %s", r->sock);
}

static void hang_up(struct relay *r, const char *why)
{
	say("%s: %s; reconnecting", r->sock, why);
	close(r->fd);
	r->fd = -1;
	r->out_len = r->in_len = 0;
}

/* A guest frame, framed for the daemon; dropped when too much waits. */
static void queue_out(struct relay *r, const uint8_t *f, size_t len)
{
	if (r->fd < 0 || r->out_len + 4 + len > MAX_QUEUED) {
		r->dropped_full++;
		return;
	}
	if (r->out_len + 4 + len > r->out_cap) {
		size_t cap = r->out_cap ? r->out_cap : 1 << 16;
		uint8_t *n;

		while (cap < r->out_len + 4 + len)
			cap *= 2;
		n = realloc(r->out, cap);
		if (!n) {
			r->dropped_full++;
			return;
		}
		r->out = n;
		r->out_cap = cap;
	}
	r->out[r->out_len] = (uint8_t)(len >> 24);
	r->out[r->out_len + 1] = (uint8_t)(len >> 16);
	r->out[r->out_len + 2] = (uint8_t)(len >> 8);
	r->out[r->out_len + 3] = (uint8_t)len;
	memcpy(r->out + r->out_len + 4, f, len);
	r->out_len += 4 + len;
	r->to_daemon++;
}

static void flush_out(struct relay *r)
{
	size_t off = 0;

	while (r->fd >= 0 && off < r->out_len) {
		ssize_t n = write(r->fd, r->out + off, r->out_len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			hang_up(r, strerror(errno));
			return;
		}
		off += (size_t)n;
	}
	memmove(r->out, r->out + off, r->out_len - off);
	r->out_len -= off;
}

static void from_guest(struct relay *r)
{
	static uint8_t buf[RDB_VNET_HDR_LEN + MAX_FRAME];

	for (int i = 0; i < 256; i++) {
		ssize_t n = recv(r->pkt, buf, sizeof(buf), MSG_TRUNC);

		if (n < 0)
			return;
		if ((size_t)n > sizeof(buf) || n < RDB_VNET_HDR_LEN + 14) {
			r->dropped_bad++;
			continue;
		}
		switch (rdb_vif_frame_finish(buf, (size_t)n)) {
		case RDB_VIF_FRAME_OK:
			queue_out(r, buf + RDB_VNET_HDR_LEN,
				  (size_t)n - RDB_VNET_HDR_LEN);
			break;
		case RDB_VIF_FRAME_GSO:
			if (r->dropped_gso++ == 0)
				say("a GSO frame from the guest, dropped: the "
				    "vif must have GSO off (its script: "
				    "vif-remusdb)");
			break;
		case RDB_VIF_FRAME_BAD:
			r->dropped_bad++;
			break;
		}
	}
}

static void to_guest(struct relay *r, const uint8_t *f, size_t len)
{
	uint8_t hdr[RDB_VNET_HDR_LEN] = { 0 };
	struct iovec iov[2] = { { hdr, sizeof(hdr) }, { (void *)f, len } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };

	if (sendmsg(r->pkt, &m, MSG_DONTWAIT) < 0)
		r->dropped_guest++;
	else
		r->to_guest++;
}

static void from_daemon(struct relay *r)
{
	size_t off = 0;
	ssize_t n;

	if (r->in_len == 4 + MAX_FRAME)
		return;
	n = read(r->fd, r->in + r->in_len, 4 + MAX_FRAME - r->in_len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		hang_up(r, n == 0 ? "the daemon hung up" : strerror(errno));
		return;
	}
	r->in_len += (size_t)n;
	while (r->in_len - off >= 4) {
		uint32_t len = (uint32_t)r->in[off] << 24 | (uint32_t)r->in[off + 1] << 16 |
			       (uint32_t)r->in[off + 2] << 8 | r->in[off + 3];

		if (len == 0 || len > MAX_FRAME) {
			hang_up(r, "a frame of a bad length");
			return;
		}
		if (r->in_len - off < 4 + len)
			break;
		to_guest(r, r->in + off + 4, len);
		off += 4 + len;
	}
	memmove(r->in, r->in + off, r->in_len - off);
	r->in_len -= off;
}

static void relay_loop(struct relay *r)
{
	uint64_t next_try = 0;
	uint64_t next_check = rdb_now_ns() / RDB_NS_PER_MS + CHECK_MS;

	while (!stopping) {
		struct pollfd p[2] = { { r->pkt, POLLIN, 0 }, { r->fd, 0, 0 } };
		uint64_t now = rdb_now_ns() / RDB_NS_PER_MS;

		if (r->fd < 0 && now >= next_try) {
			try_connect(r);
			next_try = now + RECONNECT_MS;
		}
		if (now >= next_check) {
			if (!vif_present(r)) {
				say("%s is gone", r->ifname);
				return;
			}
			next_check = now + CHECK_MS;
		}
		p[1].fd = r->fd;
		p[1].events = POLLIN | (r->out_len ? POLLOUT : 0);
		if (poll(p, 2, r->fd < 0 ? RECONNECT_MS : CHECK_MS) < 0 &&
		    errno != EINTR)
			return;
		if (p[0].revents & (POLLERR | POLLNVAL)) {
			int e = 0;
			socklen_t l = sizeof(e);

			(void)getsockopt(r->pkt, SOL_SOCKET, SO_ERROR, &e, &l);
			if (!vif_present(r)) {
				say("%s is gone (%s)", r->ifname, strerror(e));
				return;
			}
		}
		if (p[0].revents & POLLIN)
			from_guest(r);
		if (r->fd >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
			from_daemon(r);
		if (r->fd >= 0 && r->out_len)
			flush_out(r);
	}
	say("stopped (SIGTERM)");
}

/* One relay per vif: the lock, held for the relay's life; the file says
 * "PID SOCKET".  0; 1 when another relays the vif to sock (its pid in
 * *other); -1 with why in err, also when another relays it elsewhere. */
static int take_lock(const char *ifname, const char *sock, long *other,
		     char *err, size_t errlen)
{
	char path[128], pid[400];
	int fd;
	ssize_t n;

	if (mkdir(LOCK_DIR, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", LOCK_DIR, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s.lock", LOCK_DIR, ifname);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		char *end;

		n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		*other = strtol(pid, &end, 10);
		close(fd);
		if (*end == ' ' && strcmp(end + 1, sock) == 0)
			return 1;
		snprintf(err, errlen, "%s is relayed to %s by pid %ld, not to %s",
			 ifname, *end == ' ' ? end + 1 : "?", *other, sock);
		return -1;
	}
	n = snprintf(pid, sizeof(pid), "%ld %s\n", (long)getpid(), sock);
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return 0;	/* (fd stays open: the lock) */
}

int rdb_xen_vif_relay(uint32_t domid, const char *domain, const char *sock,
		      const char *log)
{
	struct relay r = { .sock = sock, .pkt = -1, .fd = -1 };
	char ifname[IFNAMSIZ], err[300] = "", msg[400];
	int ready[2], logfd, rc;
	long other = 0;
	pid_t pid;
	ssize_t n;

	snprintf(ifname, sizeof(ifname), "vif%u.0", domid);
	r.ifname = ifname;
	if (pipe2(ready, O_CLOEXEC) < 0)
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid > 0) {
		/* the caller's answer: what the relay says once it runs */
		close(ready[1]);
		n = read(ready[0], msg, sizeof(msg) - 1);
		msg[n > 0 ? n : 0] = 0;
		if (n <= 1) {
			fprintf(stderr, "remusdb-xen vif: the relay died starting\n");
			return 1;
		}
		printf("%s\n", msg + 1);
		return msg[0] - '0';
	}
	/* the relay: its own session, its words in log */
	close(ready[0]);
	setsid();
	logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (logfd < 0) {
		n = snprintf(msg, sizeof(msg), "1%s: %s", log, strerror(errno));
		(void)!write(ready[1], msg, (size_t)n);
		_exit(1);
	}
	dup2(logfd, STDOUT_FILENO);
	dup2(logfd, STDERR_FILENO);
	close(logfd);
	setvbuf(stderr, NULL, _IOLBF, 0);
	rc = take_lock(ifname, sock, &other, err, sizeof(err));
	if (rc == 1) {
		n = snprintf(msg, sizeof(msg), "0%s of domain %s is relayed "
			     "already (pid %ld)", ifname, domain, other);
		(void)!write(ready[1], msg, (size_t)n);
		_exit(0);
	}
	if (rc == 0 && open_vif(&r, err, sizeof(err)) < 0)
		rc = -1;
	r.in = malloc(4 + MAX_FRAME);
	if (rc == 0 && !r.in) {
		snprintf(err, sizeof(err), "out of memory");
		rc = -1;
	}
	if (rc < 0) {
		say("%s", err);
		n = snprintf(msg, sizeof(msg), "1%s", err);
		(void)!write(ready[1], msg, (size_t)n);
		_exit(1);
	}
	{
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
	}
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	signal(SIGHUP, SIG_IGN);
	say("relaying %s (domain %s, id %u) to %s, pid %ld", ifname, domain,
	    domid, sock, (long)getpid());
	n = snprintf(msg, sizeof(msg), "0relaying %s of domain %s to %s "
		     "(pid %ld)", ifname, domain, sock, (long)getpid());
	(void)!write(ready[1], msg, (size_t)n);
	close(ready[1]);
	relay_loop(&r);
	say("ends: %llu frames to the daemon, %llu to the guest, %llu "
	    "connections; dropped: %llu GSO, %llu malformed, %llu queue full "
	    "or no daemon, %llu refused by the vif",
	    (unsigned long long)r.to_daemon, (unsigned long long)r.to_guest,
	    (unsigned long long)r.connects, (unsigned long long)r.dropped_gso,
	    (unsigned long long)r.dropped_bad, (unsigned long long)r.dropped_full,
	    (unsigned long long)r.dropped_guest);
	_exit(0);
}

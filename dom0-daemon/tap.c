// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "tap"
#include "tap.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define READS_PER_CALL 64

/* Sets IFF_UP on a tap we created; an existing one is left as it is. */
static int set_up(const char *name)
{
	struct ifreq ifr;
	int s, rc = 0;

	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, name, strlen(name));
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
		rc = -errno;
		goto out;
	}
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		rc = -errno;
out:
	close(s);
	return rc;
}

int rdb_tap_open_ex(const char *name, int *fd_out, bool *created_out)
{
	struct ifreq ifr;
	bool existed;
	int fd, rc;

	if (!name || !name[0] || strlen(name) >= IFNAMSIZ)
		return -EINVAL;
	/* TUNSETIFF itself attaches or creates without saying which. */
	existed = if_nametoindex(name) != 0;
	fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	memcpy(ifr.ifr_name, name, strlen(name));
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		rc = -errno;
		goto out;
	}
	if (!existed) {
		rc = set_up(name);
		if (rc < 0)
			goto out;
	}
	*fd_out = fd;
	if (created_out)
		*created_out = !existed;
	return 0;
out:
	close(fd);
	return rc;
}

int rdb_tap_open(const char *name, int *fd_out)
{
	bool created;
	int rc = rdb_tap_open_ex(name, fd_out, &created);

	if (rc == 0)
		LOG(INFO, "tap %s: %s", name, created ?
		    "created (not persistent, not on a bridge)" :
		    "attached to the existing device");
	return rc;
}

int rdb_tap_write(int fd, const uint8_t *frame, size_t len)
{
	ssize_t r;

	do {
		r = write(fd, frame, len);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	/* A tap takes a frame whole or not at all. */
	return 0;
}

int rdb_tap_read_all(int fd, rdb_frame_cb cb, void *opaque)
{
	/* A tap frame is at most its MTU (<= 65535) plus the Ethernet and
	 * VLAN headers: it fits, and so it fits QEMU's limit too. */
	uint8_t frame[RDB_NET_MAX_FRAME];
	int n = 0;

	for (int i = 0; i < READS_PER_CALL; i++) {
		ssize_t r = read(fd, frame, sizeof(frame));

		if (r < 0) {
			if (errno == EINTR) {
				i--;
				continue;
			}
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return n;
			return -errno;
		}
		if (r == 0)
			return n;
		cb(opaque, frame, (size_t)r);
		n++;
	}
	return n;
}

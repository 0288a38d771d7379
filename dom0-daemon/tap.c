// SPDX-License-Identifier: GPL-2.0-only
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int rdb_tap_open(const char *name, int *fd_out)
{
	struct ifreq ifr;
	int fd, rc;

	if (!name || !name[0] || strlen(name) >= IFNAMSIZ)
		return -EINVAL;
	fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	strcpy(ifr.ifr_name, name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}

int rdb_tap_write(int fd, const uint8_t *frame, size_t len)
{
	ssize_t r;

	do {
		r = write(fd, frame, len);
	} while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

int rdb_tap_read_all(int fd, rdb_frame_cb cb, void *opaque)
{
	uint8_t frame[RDB_NET_MAX_FRAME];

	for (int i = 0; i < 64; i++) {
		ssize_t r = read(fd, frame, sizeof(frame));

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -errno;
		}
		if (r == 0)
			return 0;
		cb(opaque, frame, (size_t)r);
	}
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define ZERO_CHUNK (64u << 10)

static const uint8_t zeroes[ZERO_CHUNK];

int rdb_write_all(int fd, const void *buf, uint64_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (uint64_t)n;
	}
	return 0;
}

int rdb_pwrite_all(int fd, const void *buf, uint64_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

int rdb_pread_all(int fd, void *buf, uint64_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0) {
			memset(p, 0, len);
			return 0;
		}
		p += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

static bool unsupported(int e)
{
	return e == EOPNOTSUPP || e == ENOSYS || e == EINVAL;
}

int rdb_zero_range(int fd, uint64_t off, uint64_t len, bool punch)
{
	int first = punch ? FALLOC_FL_PUNCH_HOLE : FALLOC_FL_ZERO_RANGE;
	int second = punch ? FALLOC_FL_ZERO_RANGE : FALLOC_FL_PUNCH_HOLE;
	int rc;

	if (fallocate(fd, first | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
		return 0;
	if (!unsupported(errno))
		return -errno;
	if (fallocate(fd, second | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
		return 0;
	if (!unsupported(errno))
		return -errno;
	while (len) {
		uint64_t n = len < ZERO_CHUNK ? len : ZERO_CHUNK;

		rc = rdb_pwrite_all(fd, zeroes, n, off);
		if (rc < 0)
			return rc;
		off += n;
		len -= n;
	}
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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

int rdb_sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

static int replace_file(const char *dir, const char *file, const char *text,
			bool durable);

int rdb_replace_file(const char *dir, const char *file, const char *text)
{
	return replace_file(dir, file, text, true);
}

int rdb_replace_file_nosync(const char *file, const char *text)
{
	return replace_file(NULL, file, text, false);
}

static int replace_file(const char *dir, const char *file, const char *text,
			bool durable)
{
	char tmp[4096];
	int fd, rc, n = snprintf(tmp, sizeof(tmp), "%s.tmp", file);

	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	rc = rdb_write_all(fd, text, strlen(text));
	if (rc == 0)
		rc = rdb_write_all(fd, "\n", 1);
	if (rc == 0 && durable && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, file) < 0)
		rc = -errno;
	if (rc == 0 && durable)
		rc = rdb_sync_dir(dir);
	if (rc < 0)
		unlink(tmp);
	return rc;
}

int rdb_remove_file(const char *dir, const char *file)
{
	if (unlink(file) < 0)
		return errno == ENOENT ? 0 : -errno;
	return rdb_sync_dir(dir);
}

bool rdb_find_command(const char *name, char *buf, size_t len)
{
	const char *path = getenv("PATH");

	if (strchr(name, '/')) {
		snprintf(buf, len, "%s", name);
		return access(buf, X_OK) == 0;
	}
	for (const char *s = path ? path : "/usr/bin:/bin"; *s;) {
		const char *e = strchr(s, ':');
		size_t l = e ? (size_t)(e - s) : strlen(s);

		snprintf(buf, len, "%.*s/%s", (int)l, s, name);
		if (l && access(buf, X_OK) == 0)
			return true;
		s += l;
		if (*s == ':')
			s++;
	}
	return false;
}

// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "wmap"
#include "wmap.h"
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char magic[8] = "RDBWMAP1";

struct hdr {
	char magic[8];
	uint64_t disk_size;
	uint32_t block;
	uint32_t zero;
};

static uint64_t words_of(uint64_t disk_size)
{
	return (disk_size / RDB_WMAP_BLOCK + 63) / 64;
}

void rdb_wmap_init(struct rdb_wmap *m)
{
	memset(m, 0, sizeof(*m));
	m->fd = -1;
}

int rdb_wmap_create_file(const char *path, uint64_t disk_size, char *err,
			 size_t errlen)
{
	struct hdr h = { .disk_size = disk_size, .block = RDB_WMAP_BLOCK };
	uint64_t len = RDB_WMAP_HDR + words_of(disk_size) * 8;
	int fd, rc = 0;

	if (!disk_size || disk_size % RDB_WMAP_BLOCK) {
		snprintf(err, errlen, "written map %s: disk size %llu is not a "
			 "multiple of 4 KiB", path, (unsigned long long)disk_size);
		return -EINVAL;
	}
	memcpy(h.magic, magic, sizeof(magic));
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "written map %s: %s", path, strerror(errno));
		return rc;
	}
	if (ftruncate(fd, (off_t)len) < 0)
		rc = -errno;
	if (rc == 0)
		rc = rdb_pwrite_all(fd, &h, sizeof(h), 0);
	close(fd);
	if (rc < 0)
		snprintf(err, errlen, "written map %s: %s", path, strerror(-rc));
	return rc;
}

static int check(int fd, const char *path, uint64_t disk_size, char *err,
		 size_t errlen)
{
	struct hdr h;
	struct stat sb;
	int rc = rdb_pread_all(fd, &h, sizeof(h), 0);

	if (rc < 0) {
		snprintf(err, errlen, "written map %s: %s", path, strerror(-rc));
		return rc;
	}
	if (memcmp(h.magic, magic, sizeof(magic)) || h.block != RDB_WMAP_BLOCK ||
	    h.disk_size != disk_size || fstat(fd, &sb) < 0 ||
	    (uint64_t)sb.st_size != RDB_WMAP_HDR + words_of(disk_size) * 8) {
		snprintf(err, errlen, "written map %s is not one of a %llu-byte "
			 "disk", path, (unsigned long long)disk_size);
		return -EINVAL;
	}
	return 0;
}

int rdb_wmap_open(struct rdb_wmap *m, const char *path, uint64_t disk_size,
		  char *err, size_t errlen)
{
	int rc;

	rdb_wmap_init(m);
	m->fd = open(path, O_RDWR | O_CLOEXEC);
	if (m->fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "written map %s: %s", path, strerror(errno));
		return rc;
	}
	rc = check(m->fd, path, disk_size, err, errlen);
	if (rc < 0) {
		rdb_wmap_close(m);
		return rc;
	}
	m->map_len = RDB_WMAP_HDR + words_of(disk_size) * 8;
	m->map = mmap(NULL, m->map_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		      m->fd, 0);
	if (m->map == MAP_FAILED) {
		rc = -errno;
		m->map = NULL;
		snprintf(err, errlen, "written map %s: mmap: %s", path,
			 strerror(errno));
		rdb_wmap_close(m);
		return rc;
	}
	m->disk_size = disk_size;
	m->nblocks = disk_size / RDB_WMAP_BLOCK;
	m->bits = (uint64_t *)((uint8_t *)m->map + RDB_WMAP_HDR);
	return 0;
}

void rdb_wmap_close(struct rdb_wmap *m)
{
	if (m->map)
		munmap(m->map, m->map_len);
	if (m->fd >= 0)
		close(m->fd);
	rdb_wmap_init(m);
}

void rdb_wmap_mark(struct rdb_wmap *m, uint64_t off, uint64_t len)
{
	uint64_t b, e;

	if (!m->bits || !len || off >= m->disk_size)
		return;
	if (len > m->disk_size - off)
		len = m->disk_size - off;
	b = off / RDB_WMAP_BLOCK;
	e = (off + len - 1) / RDB_WMAP_BLOCK;
	while (b <= e) {
		uint64_t w = b / 64, first = b % 64;
		uint64_t last = e / 64 == w ? e % 64 : 63;
		uint64_t mask = (last == 63 ? ~0ull : (1ull << (last + 1)) - 1) &
				~((1ull << first) - 1);

		atomic_fetch_or_explicit((_Atomic uint64_t *)&m->bits[w], mask,
					 memory_order_seq_cst);
		b = (w + 1) * 64;
	}
}

int rdb_wmap_read_file(const char *path, uint64_t disk_size, uint64_t *bits,
		       uint64_t *count_out, char *err, size_t errlen)
{
	struct rdb_wmap m;
	uint64_t n = 0, words = words_of(disk_size);
	int rc = rdb_wmap_open(&m, path, disk_size, err, errlen);

	if (rc < 0)
		return rc;
	for (uint64_t w = 0; w < words; w++) {
		uint64_t v = atomic_load_explicit((_Atomic uint64_t *)&m.bits[w],
						  memory_order_seq_cst);

		bits[w] |= v;
		n += (uint64_t)__builtin_popcountll(v);
	}
	rdb_wmap_close(&m);
	*count_out = n;
	return 0;
}

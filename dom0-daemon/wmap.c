// SPDX-License-Identifier: GPL-2.0-only
#include "wmap.h"
#include "crc32c.h"
#include "fileio.h"
#include "le.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "RDBWMAP1"
#define VERSION 1u
#define HDR_FIELDS 48u

static uint64_t blocks_of(uint64_t disk_size)
{
	return (disk_size + RDB_WMAP_BLOCK - 1) / RDB_WMAP_BLOCK;
}

static uint64_t file_size(uint64_t disk_size)
{
	uint64_t bytes = (blocks_of(disk_size) + 63) / 64 * 8;

	return RDB_WMAP_HDR + (bytes + RDB_WMAP_HDR - 1) / RDB_WMAP_HDR *
	       RDB_WMAP_HDR;
}

static void encode(uint64_t disk_size, uint8_t page[RDB_WMAP_HDR])
{
	memset(page, 0, RDB_WMAP_HDR);
	memcpy(page, MAGIC, 8);
	rdb_le_put32(page + 8, VERSION);
	rdb_le_put32(page + 12, RDB_WMAP_HDR);
	rdb_le_put64(page + 16, disk_size);
	rdb_le_put32(page + 24, RDB_WMAP_BLOCK);
	rdb_le_put64(page + 32, blocks_of(disk_size));
	rdb_le_put64(page + 40, (blocks_of(disk_size) + 63) / 64);
	rdb_le_put32(page + HDR_FIELDS, rdb_crc32c(0, page, HDR_FIELDS));
}

void rdb_wmap_init(struct rdb_wmap *m)
{
	memset(m, 0, sizeof(*m));
	m->fd = -1;
}

void rdb_wmap_close(struct rdb_wmap *m)
{
	if (m->map)
		munmap(m->map, m->map_len);
	if (m->fd >= 0)
		close(m->fd);
	rdb_wmap_init(m);
}

/* A new, zeroed map made under a temporary name and linked into place:
 * another process creating the same map at once finds one or the other,
 * whole.  0, or -EEXIST if there is one now. */
static int create(const char *path, uint64_t disk_size, char *err,
		  size_t errlen)
{
	char tmp[300];
	uint8_t page[RDB_WMAP_HDR];
	int fd, rc;

	if (snprintf(tmp, sizeof(tmp), "%s.new.%d", path, (int)getpid()) >=
	    (int)sizeof(tmp)) {
		snprintf(err, errlen, "written map %s: path too long", path);
		return -ENAMETOOLONG;
	}
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "written map %s: %s", tmp, strerror(errno));
		return rc;
	}
	encode(disk_size, page);
	rc = ftruncate(fd, (off_t)file_size(disk_size)) < 0 ? -errno : 0;
	if (rc == 0)
		rc = rdb_pwrite_all(fd, page, sizeof(page), 0);
	close(fd);
	if (rc == 0 && link(tmp, path) < 0)
		rc = -errno;
	unlink(tmp);
	if (rc < 0 && rc != -EEXIST)
		snprintf(err, errlen, "written map %s: %s", path, strerror(-rc));
	return rc;
}

int rdb_wmap_open(struct rdb_wmap *m, const char *path, uint64_t disk_size,
		  bool create_it, char *err, size_t errlen)
{
	uint8_t page[RDB_WMAP_HDR];
	struct stat sb;
	int rc;

	rdb_wmap_init(m);
	if (!disk_size) {
		snprintf(err, errlen, "written map %s: a disk of 0 bytes", path);
		return -EINVAL;
	}
	m->fd = open(path, O_RDWR | O_CLOEXEC);
	if (m->fd < 0 && errno == ENOENT && create_it) {
		rc = create(path, disk_size, err, errlen);
		if (rc < 0 && rc != -EEXIST)
			return rc;
		m->fd = open(path, O_RDWR | O_CLOEXEC);
	}
	if (m->fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "written map %s: %s", path, strerror(errno));
		return rc;
	}
	rc = fstat(m->fd, &sb) < 0 ? -errno : 0;
	if (rc == 0)
		rc = rdb_pread_all(m->fd, page, sizeof(page), 0);
	if (rc < 0) {
		snprintf(err, errlen, "written map %s: %s", path, strerror(-rc));
		goto fail;
	}
	if (memcmp(page, MAGIC, 8) || rdb_le_get32(page + HDR_FIELDS) !=
	    rdb_crc32c(0, page, HDR_FIELDS) || rdb_le_get32(page + 8) != VERSION ||
	    rdb_le_get32(page + 24) != RDB_WMAP_BLOCK) {
		snprintf(err, errlen, "written map %s: not a written map (or "
			 "another version)", path);
		rc = -EINVAL;
		goto fail;
	}
	if (rdb_le_get64(page + 16) != disk_size ||
	    (uint64_t)sb.st_size != file_size(disk_size) ||
	    rdb_le_get64(page + 32) != blocks_of(disk_size)) {
		snprintf(err, errlen, "written map %s: for a disk of %llu bytes, "
			 "not %llu", path, (unsigned long long)rdb_le_get64(page + 16),
			 (unsigned long long)disk_size);
		rc = -EINVAL;
		goto fail;
	}
	m->map_len = (size_t)sb.st_size;
	m->map = mmap(NULL, m->map_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		      m->fd, 0);
	if (m->map == MAP_FAILED) {
		rc = -errno;
		m->map = NULL;
		snprintf(err, errlen, "written map %s: mmap: %s", path,
			 strerror(errno));
		goto fail;
	}
	m->words = (_Atomic uint64_t *)(m->map + RDB_WMAP_HDR);
	m->disk_size = disk_size;
	m->nr_blocks = blocks_of(disk_size);
	m->nr_words = (m->nr_blocks + 63) / 64;
	return 0;
fail:
	rdb_wmap_close(m);
	return rc;
}

static void set_bits(_Atomic uint64_t *w, uint64_t mask)
{
	/* most marks find their blocks marked: no locked write then */
	if ((atomic_load_explicit(w, memory_order_relaxed) & mask) != mask)
		atomic_fetch_or(w, mask);
}

void rdb_wmap_mark(struct rdb_wmap *m, uint64_t off, uint64_t len)
{
	uint64_t b0, b1, w0, w1;

	if (!m->words || !len || off >= m->disk_size)
		return;
	if (len > m->disk_size - off)
		len = m->disk_size - off;
	b0 = off / RDB_WMAP_BLOCK;
	b1 = (off + len - 1) / RDB_WMAP_BLOCK;
	w0 = b0 / 64;
	w1 = b1 / 64;
	if (w0 == w1) {
		set_bits(&m->words[w0], (~0ull >> (63 - b1 % 64)) &
			 (~0ull << (b0 % 64)));
		return;
	}
	set_bits(&m->words[w0], ~0ull << (b0 % 64));
	for (uint64_t w = w0 + 1; w < w1; w++)
		set_bits(&m->words[w], ~0ull);
	set_bits(&m->words[w1], ~0ull >> (63 - b1 % 64));
}

void rdb_wmap_reset(struct rdb_wmap *m)
{
	for (uint64_t w = 0; w < m->nr_words; w++)
		atomic_store(&m->words[w], 0);
}

static int copy(struct rdb_wmap *m, struct rdb_wmap_snap *out, bool clear)
{
	memset(out, 0, sizeof(*out));
	out->words = calloc(m->nr_words ? m->nr_words : 1, 8);
	if (!out->words)
		return -ENOMEM;
	out->nr_blocks = m->nr_blocks;
	out->nr_words = m->nr_words;
	out->block_size = RDB_WMAP_BLOCK;
	for (uint64_t w = 0; w < m->nr_words; w++) {
		uint64_t v = atomic_load(&m->words[w]);

		if (v && clear)
			v = atomic_exchange(&m->words[w], 0);
		/* bits past the last block mean nothing */
		if (w == m->nr_words - 1 && m->nr_blocks % 64)
			v &= ~0ull >> (64 - m->nr_blocks % 64);
		out->words[w] = v;
		out->nr_set += (uint64_t)__builtin_popcountll(v);
	}
	return 0;
}

int rdb_wmap_snapshot(const struct rdb_wmap *m, struct rdb_wmap_snap *out)
{
	return copy((struct rdb_wmap *)m, out, false);
}

int rdb_wmap_take(struct rdb_wmap *m, struct rdb_wmap_snap *out)
{
	return copy(m, out, true);
}

bool rdb_wmap_snap_test(const struct rdb_wmap_snap *s, uint64_t block)
{
	return block < s->nr_blocks && s->words[block / 64] >> (block % 64) & 1;
}

bool rdb_wmap_snap_next(const struct rdb_wmap_snap *s, uint64_t *from,
			uint64_t *first_out, uint64_t *count_out)
{
	uint64_t b = *from, first;

	/* to the next set bit, a word at a time where it can */
	while (b < s->nr_blocks) {
		uint64_t v = s->words[b / 64] >> (b % 64);

		if (v) {
			b += (uint64_t)__builtin_ctzll(v);
			break;
		}
		b = (b / 64 + 1) * 64;
	}
	if (b >= s->nr_blocks) {
		*from = s->nr_blocks;
		return false;
	}
	first = b;
	while (b < s->nr_blocks) {
		uint64_t v = ~s->words[b / 64] >> (b % 64);

		if (v) {
			b += (uint64_t)__builtin_ctzll(v);
			break;
		}
		b = (b / 64 + 1) * 64;
	}
	if (b > s->nr_blocks)
		b = s->nr_blocks;
	*first_out = first;
	*count_out = b - first;
	*from = b;
	return true;
}

void rdb_wmap_snap_dispose(struct rdb_wmap_snap *s)
{
	free(s->words);
	memset(s, 0, sizeof(*s));
}

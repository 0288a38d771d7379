// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "actlog"
#include "actlog.h"
#include "crc32c.h"
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096u
#define VERSION 1u

static const char magic[8] = "RDBACTL1";

struct hdr {
	char magic[8];
	uint32_t version, shift;
	uint64_t generation, disk_size, nextents;
	uint32_t crc, zero;
};

static uint64_t extents_of(uint64_t disk_size)
{
	return (disk_size + (1ull << RDB_ACTLOG_SHIFT) - 1) >> RDB_ACTLOG_SHIFT;
}

static size_t bits_len_of(uint64_t nextents)
{
	return (size_t)(((nextents + 7) / 8 + PAGE - 1) / PAGE * PAGE);
}

static uint32_t hdr_crc(const struct hdr *h)
{
	return rdb_crc32c(0, h, offsetof(struct hdr, crc));
}

/* 0 and the header's generation, or -EBADMSG: not a log of this disk. */
static int read_hdr(int fd, uint64_t disk_size, uint64_t *gen)
{
	struct hdr h;
	int rc = rdb_pread_all(fd, &h, sizeof(h), 0);

	if (rc < 0)
		return rc;
	if (memcmp(h.magic, magic, sizeof(magic)) || h.version != VERSION ||
	    h.shift != RDB_ACTLOG_SHIFT || h.disk_size != disk_size ||
	    h.nextents != extents_of(disk_size) || h.crc != hdr_crc(&h))
		return -EBADMSG;
	*gen = h.generation;
	return 0;
}

static int write_hdr(struct rdb_actlog *al, uint64_t gen)
{
	struct hdr h;
	uint8_t page[PAGE] = { 0 };

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, magic, sizeof(magic));
	h.version = VERSION;
	h.shift = RDB_ACTLOG_SHIFT;
	h.generation = gen;
	h.disk_size = al->disk_size;
	h.nextents = al->nextents;
	h.crc = hdr_crc(&h);
	memcpy(page, &h, sizeof(h));
	return rdb_pwrite_all(al->fd, page, PAGE, 0);
}

static int log_sync(struct rdb_actlog *al)
{
	if (fdatasync(al->fd) < 0)
		return -errno;
	al->log_syncs++;
	return 0;
}

void rdb_actlog_init(struct rdb_actlog *al)
{
	memset(al, 0, sizeof(*al));
	al->fd = -1;
}

void rdb_actlog_close(struct rdb_actlog *al)
{
	if (al->fd >= 0)
		close(al->fd);
	free(al->bits);
	free(al->dirty_pages);
	free(al->last_seq);
	free(al->last_pos);
	rdb_actlog_init(al);
}

static bool test_bit(const uint8_t *b, uint64_t x)
{
	return b[x / 8] >> (x % 8) & 1;
}

int rdb_actlog_open(struct rdb_actlog *al, const char *path,
		    uint64_t disk_size, uint32_t max, char *err, size_t errlen)
{
	uint64_t gen = 0;
	int rc;

	rdb_actlog_init(al);
	snprintf(al->path, sizeof(al->path), "%s", path);
	al->disk_size = disk_size;
	al->nextents = extents_of(disk_size);
	al->max = max ? max : 1;
	al->bits_len = bits_len_of(al->nextents);
	al->bits = calloc(1, al->bits_len);
	al->dirty_pages = calloc(al->bits_len / PAGE, 1);
	al->last_seq = calloc(al->nextents, sizeof(uint64_t));
	al->last_pos = calloc(al->nextents, sizeof(uint64_t));
	if (!al->bits || !al->dirty_pages || !al->last_seq || !al->last_pos) {
		rdb_actlog_close(al);
		snprintf(err, errlen, "activity log %s: out of memory", path);
		return -ENOMEM;
	}
	al->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (al->fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "activity log %s: %s", path, strerror(errno));
		rdb_actlog_close(al);
		return rc;
	}
	if (read_hdr(al->fd, disk_size, &gen) == 0 && gen) {
		rc = rdb_pread_all(al->fd, al->bits, al->bits_len, RDB_ACTLOG_HDR);
		if (rc == 0) {
			al->generation = gen;
			for (uint64_t x = 0; x < al->nextents; x++)
				if (test_bit(al->bits, x)) {
					al->active++;
					/* not known: retire only after a new
					 * protection armed the log again */
					al->last_seq[x] = al->last_pos[x] = UINT64_MAX;
				}
			return 0;
		}
		memset(al->bits, 0, al->bits_len);
	}
	/* missing, another disk's, or damaged: a valid empty log of none */
	rc = write_hdr(al, 0);
	if (rc == 0 && ftruncate(al->fd, (off_t)(RDB_ACTLOG_HDR + al->bits_len)) < 0)
		rc = -errno;
	if (rc == 0)
		rc = rdb_pwrite_all(al->fd, al->bits, al->bits_len, RDB_ACTLOG_HDR);
	if (rc == 0)
		rc = log_sync(al);
	if (rc < 0) {
		snprintf(err, errlen, "activity log %s: %s", path, strerror(-rc));
		rdb_actlog_close(al);
	}
	return rc;
}

static int write_pages(struct rdb_actlog *al, const uint8_t *want, bool all)
{
	for (size_t pg = 0; pg < al->bits_len / PAGE; pg++) {
		int rc;

		if (!all && !want[pg])
			continue;
		rc = rdb_pwrite_all(al->fd, al->bits + pg * PAGE, PAGE,
				    RDB_ACTLOG_HDR + pg * PAGE);
		if (rc < 0)
			return rc;
		al->dirty_pages[pg] = 0;
	}
	return 0;
}

int rdb_actlog_invalidate(struct rdb_actlog *al)
{
	int rc;

	if (al->fd < 0 || !al->generation)
		return 0;
	rc = write_hdr(al, 0);
	if (rc == 0)
		rc = log_sync(al);
	if (rc < 0)
		return rc;
	al->broken_gen = al->generation;
	al->generation = 0;
	al->invalidations++;
	return 0;
}

static void set_bit(struct rdb_actlog *al, uint64_t x, uint8_t *pages)
{
	al->bits[x / 8] |= (uint8_t)(1u << (x % 8));
	al->active++;
	al->adds++;
	/* not retirable until its change is done (after_change) */
	al->last_seq[x] = al->last_pos[x] = UINT64_MAX;
	pages[x / 8 / PAGE] = 1;
}

int rdb_actlog_before_change(struct rdb_actlog *al, int img_fd, uint64_t gen,
			     uint64_t off, uint64_t len, uint64_t seq,
			     uint64_t committed_pos)
{
	uint64_t x0, x1;
	uint8_t *pages;
	bool any = false;
	int rc = 0;

	if (al->fd < 0 || !gen || !len || gen == al->broken_gen)
		return 0;
	x0 = off >> RDB_ACTLOG_SHIFT;
	x1 = (off + len - 1) >> RDB_ACTLOG_SHIFT;
	if (x1 >= al->nextents)
		x1 = al->nextents - 1;
	pages = calloc(al->bits_len / PAGE, 1);
	if (!pages)
		return -ENOMEM;
	if (al->generation != gen) {
		/* arm: what the image holds now is in the backup's epoch 0 */
		if (fdatasync(img_fd) < 0) {
			rc = -errno;
			goto out;
		}
		memset(al->bits, 0, al->bits_len);
		al->active = 0;
		for (uint64_t x = x0; x <= x1; x++)
			set_bit(al, x, pages);
		rc = write_pages(al, pages, true);
		if (rc == 0)
			rc = write_hdr(al, gen);
		if (rc == 0)
			rc = log_sync(al);
		if (rc == 0)
			al->generation = gen;
		goto out;
	}
	for (uint64_t x = x0; x <= x1; x++) {
		if (test_bit(al->bits, x))
			continue;
		if (al->active >= al->max) {
			al->full_stalls++;
			if (fdatasync(img_fd) < 0) {
				rc = -errno;
				goto out;
			}
			rdb_actlog_retire(al, seq, committed_pos);
		}
		if (al->active >= al->max) {
			rc = rdb_actlog_invalidate(al);
			goto out;
		}
		set_bit(al, x, pages);
		any = true;
	}
	if (any) {
		rc = write_pages(al, pages, false);
		if (rc == 0)
			rc = log_sync(al);
	}
out:
	free(pages);
	return rc;
}

void rdb_actlog_after_change(struct rdb_actlog *al, uint64_t off, uint64_t len,
			     uint64_t seq, uint64_t pos)
{
	uint64_t x0, x1;

	if (al->fd < 0 || !al->generation || !len)
		return;
	x0 = off >> RDB_ACTLOG_SHIFT;
	x1 = (off + len - 1) >> RDB_ACTLOG_SHIFT;
	for (uint64_t x = x0; x <= x1 && x < al->nextents; x++)
		if (test_bit(al->bits, x)) {
			al->last_seq[x] = seq;
			al->last_pos[x] = pos;
		}
}

bool rdb_actlog_retirable(const struct rdb_actlog *al, uint64_t committed_pos)
{
	if (al->fd < 0 || !al->generation || !al->active)
		return false;
	for (uint64_t x = 0; x < al->nextents; x++)
		if (test_bit(al->bits, x) && al->last_pos[x] <= committed_pos &&
		    al->last_seq[x] != UINT64_MAX)
			return true;
	return false;
}

void rdb_actlog_retire(struct rdb_actlog *al, uint64_t synced_seq,
		       uint64_t committed_pos)
{
	bool any = false;

	if (al->fd < 0 || !al->generation)
		return;
	for (uint64_t x = 0; x < al->nextents; x++) {
		if (!test_bit(al->bits, x) || al->last_seq[x] > synced_seq ||
		    al->last_pos[x] > committed_pos)
			continue;
		al->bits[x / 8] &= (uint8_t)~(1u << (x % 8));
		al->dirty_pages[x / 8 / PAGE] = 1;
		al->active--;
		al->retired++;
		any = true;
	}
	/* cleared bits go out unsynced: the next add's sync takes them, and
	 * a stale set bit is only a larger resync */
	if (any)
		(void)write_pages(al, al->dirty_pages, false);
}

int rdb_actlog_read(const char *path, uint64_t disk_size,
		    struct rdb_actlog_view *out, char *err, size_t errlen)
{
	uint64_t gen = 0;
	size_t len;
	int fd, rc;

	memset(out, 0, sizeof(*out));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	rc = read_hdr(fd, disk_size, &gen);
	if (rc < 0) {
		snprintf(err, errlen, "%s is no activity log of a %llu-byte disk",
			 path, (unsigned long long)disk_size);
		close(fd);
		return rc;
	}
	out->nextents = extents_of(disk_size);
	out->shift = RDB_ACTLOG_SHIFT;
	len = bits_len_of(out->nextents);
	out->bits = calloc(1, len);
	rc = out->bits ? rdb_pread_all(fd, out->bits, len, RDB_ACTLOG_HDR) : -ENOMEM;
	close(fd);
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		rdb_actlog_view_dispose(out);
		return rc;
	}
	out->generation = gen;
	return 0;
}

int rdb_actlog_view_extents(const struct rdb_actlog_view *v, uint64_t **ext_out,
			    uint32_t *count_out)
{
	uint64_t *ext = NULL;
	uint32_t n = 0;

	for (uint64_t x = 0; v->bits && x < v->nextents; x++)
		n += test_bit(v->bits, x);
	ext = malloc((n ? n : 1) * sizeof(*ext));
	if (!ext)
		return -ENOMEM;
	n = 0;
	for (uint64_t x = 0; v->bits && x < v->nextents; x++)
		if (test_bit(v->bits, x))
			ext[n++] = x;
	*ext_out = ext;
	*count_out = n;
	return 0;
}

void rdb_actlog_view_dispose(struct rdb_actlog_view *v)
{
	free(v->bits);
	memset(v, 0, sizeof(*v));
}

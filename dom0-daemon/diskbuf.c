// SPDX-License-Identifier: GPL-2.0-only
#include "diskbuf.h"
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define REC_HDR 17

void rdb_diskbuf_init(struct rdb_diskbuf *db, uint64_t max_bytes)
{
	memset(db, 0, sizeof(*db));
	db->fd = -1;
	db->max_bytes = max_bytes;
	db->consistent = true;
	rdb_buf_init(&db->recs);
}

static int fail(struct rdb_diskbuf *db, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(db->err, sizeof(db->err), fmt, ap);
	va_end(ap);
	return rc;
}

int rdb_diskbuf_create(struct rdb_diskbuf *db, const char *path,
		       uint64_t size)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return fail(db, -errno, "create %s: %s", path, strerror(errno));
	if (ftruncate(fd, (off_t)size) < 0) {
		int e = errno;

		close(fd);
		return fail(db, -e, "size %s to %llu bytes: %s", path,
			    (unsigned long long)size, strerror(e));
	}
	rdb_diskbuf_attach_fd(db, fd, size);
	return 0;
}

void rdb_diskbuf_attach_fd(struct rdb_diskbuf *db, int fd, uint64_t size)
{
	if (db->fd >= 0)
		close(db->fd);
	db->fd = fd;
	db->size = size;
	db->consistent = true;
	db->torn = false;
}

void rdb_diskbuf_dispose(struct rdb_diskbuf *db)
{
	if (db->fd >= 0)
		close(db->fd);
	rdb_buf_dispose(&db->recs);
	db->fd = -1;
	db->nrecs = db->data_bytes = 0;
}

int rdb_diskbuf_check_range(const struct rdb_diskbuf *db, uint64_t off,
			    uint64_t len)
{
	if (len == 0 || off > db->size || len > db->size - off)
		return -ERANGE;
	return 0;
}

int rdb_diskbuf_add(struct rdb_diskbuf *db, enum rdb_disk_op op, uint64_t off,
		    uint64_t len, const uint8_t *data)
{
	size_t body = op == RDB_DISK_WRITE ? len : 0;
	uint8_t *p, o = (uint8_t)op;

	switch (op) {
	case RDB_DISK_WRITE:
	case RDB_DISK_ZERO:
		if (rdb_diskbuf_check_range(db, off, len) < 0)
			return fail(db, -ERANGE, "%s of %llu bytes at %llu is "
				    "outside the %llu-byte disk",
				    op == RDB_DISK_WRITE ? "write" : "zero",
				    (unsigned long long)len,
				    (unsigned long long)off,
				    (unsigned long long)db->size);
		break;
	case RDB_DISK_FLUSH:
		off = len = 0;
		break;
	default:
		return fail(db, -EINVAL, "unknown disk op %d", (int)op);
	}
	if (db->max_bytes && db->recs.len + REC_HDR + body > db->max_bytes)
		return fail(db, -EFBIG, "epoch's disk writes exceed %llu bytes",
			    (unsigned long long)db->max_bytes);
	p = rdb_buf_reserve(&db->recs, REC_HDR + body);
	if (!p)
		return fail(db, -ENOMEM, "out of memory buffering a disk write");
	p[0] = o;
	memcpy(p + 1, &off, 8);
	memcpy(p + 9, &len, 8);
	if (body)
		memcpy(p + REC_HDR, data, body);
	db->recs.len += REC_HDR + body;
	db->nrecs++;
	db->data_bytes += body;
	if (op == RDB_DISK_FLUSH)
		db->flush = true;
	return 0;
}

int rdb_diskbuf_apply_one(struct rdb_diskbuf *db, enum rdb_disk_op op,
			  uint64_t off, uint64_t len, const uint8_t *data)
{
	int rc;

	if (db->fd < 0)
		return fail(db, -EBADF, "no disk replica");
	if (op != RDB_DISK_FLUSH && rdb_diskbuf_check_range(db, off, len) < 0)
		return fail(db, -ERANGE, "change of %llu bytes at %llu is "
			    "outside the %llu-byte disk",
			    (unsigned long long)len, (unsigned long long)off,
			    (unsigned long long)db->size);
	switch (op) {
	case RDB_DISK_WRITE:
		rc = rdb_pwrite_all(db->fd, data, len, off);
		break;
	case RDB_DISK_ZERO:
		rc = rdb_zero_range(db->fd, off, len, false);
		break;
	case RDB_DISK_FLUSH:
		rc = fdatasync(db->fd) < 0 ? -errno : 0;
		if (rc == 0)
			db->syncs++;
		break;
	default:
		return fail(db, -EINVAL, "unknown disk op %d", (int)op);
	}
	if (rc < 0)
		return fail(db, rc, "replica %s of %llu bytes at %llu: %s",
			    op == RDB_DISK_WRITE ? "write" :
			    op == RDB_DISK_ZERO ? "zero" : "sync",
			    (unsigned long long)len, (unsigned long long)off,
			    strerror(-rc));
	db->applied_recs++;
	if (op == RDB_DISK_WRITE)
		db->applied_bytes += len;
	return 0;
}

void rdb_diskbuf_initial_written(struct rdb_diskbuf *db, uint64_t len)
{
	db->wb_pending += len;
	if (db->fd < 0 || db->wb_pending < RDB_DISKBUF_WRITEBACK_BYTES)
		return;
	db->wb_pending = 0;
	/* a hint: a write error shows in the commit's fdatasync */
	(void)sync_file_range(db->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

/* Writes the buffered records to the replica in order (not the sync,
 * not emptying the buffer).  0 or a negative errno, message in err. */
static int replay(struct rdb_diskbuf *db)
{
	const uint8_t *p = db->recs.data, *end = p + db->recs.len;
	uint64_t i = 0;
	int rc;

	while (p < end) {
		uint64_t off, len;
		uint8_t op = p[0];

		memcpy(&off, p + 1, 8);
		memcpy(&len, p + 9, 8);
		i++;
		if (db->fail_at && i == db->fail_at) {
			db->fail_at = 0;
			return fail(db, -EIO, "injected failure before record %llu",
				    (unsigned long long)i);
		}
		if (op != RDB_DISK_FLUSH) {	/* the sync comes once, at the end */
			rc = rdb_diskbuf_apply_one(db, op, off, len, p + REC_HDR);
			if (rc < 0)
				return rc;
		}
		if (op == RDB_DISK_WRITE && db->stop_after_write) {
			db->stop_after_write = false;
			return fail(db, -EINTR, "injected stop after record %llu "
				    "(a write)", (unsigned long long)i);
		}
		p += REC_HDR + (op == RDB_DISK_WRITE ? len : 0);
	}
	return 0;
}

/*
 * Every disk's records first, then the syncs of the disks whose epoch
 * held a FLUSH, and only then is any buffer emptied: a replay that stops
 * anywhere (on any disk) leaves the whole epoch buffered, and every disk
 * of the set is marked inconsistent, also the ones it finished and the
 * ones it had not reached: the set as a whole is at no epoch.
 */
int rdb_diskbuf_apply_set(struct rdb_diskbuf *const *set, unsigned n,
			  unsigned *failed)
{
	int rc = 0;
	unsigned i, bad = 0;

	for (i = 0; i < n && rc == 0; i++)
		if ((rc = replay(set[i])) < 0)
			bad = i;
	for (i = 0; i < n && rc == 0; i++) {
		if (!set[i]->flush)
			continue;
		if (set[i]->fail_sync) {
			set[i]->fail_sync = false;
			rc = fail(set[i], -EIO, "injected failure of the sync");
		} else {
			rc = rdb_diskbuf_apply_one(set[i], RDB_DISK_FLUSH, 0, 0,
						   NULL);
		}
		if (rc < 0)
			bad = i;
	}
	if (rc < 0) {
		for (i = 0; i < n; i++) {
			set[i]->consistent = false;
			if (i != bad)
				snprintf(set[i]->err, sizeof(set[i]->err),
					 "disk %u of the epoch's %u failed: %.140s",
					 bad, n, set[bad]->err);
		}
		if (failed)
			*failed = bad;
		return rc;
	}
	/* whole again, unless an epoch that failed midway was dropped
	 * (discard): its part stays in the replica for good */
	for (i = 0; i < n; i++) {
		set[i]->consistent = !set[i]->torn;
		rdb_diskbuf_discard(set[i]);
	}
	return 0;
}

int rdb_diskbuf_apply(struct rdb_diskbuf *db)
{
	return rdb_diskbuf_apply_set(&db, 1, NULL);
}

void rdb_diskbuf_discard(struct rdb_diskbuf *db)
{
	if (!db->consistent)
		db->torn = true;
	rdb_buf_reset(&db->recs);
	db->nrecs = db->data_bytes = 0;
	db->flush = false;
}

int rdb_diskbuf_read_applied(struct rdb_diskbuf *db, uint64_t off,
			     uint8_t *buf, uint64_t len)
{
	const uint8_t *p = db->recs.data, *end = p + db->recs.len;
	int rc;

	if (db->fd < 0)
		return fail(db, -EBADF, "no disk replica");
	if (rdb_diskbuf_check_range(db, off, len) < 0)
		return fail(db, -ERANGE, "read of %llu bytes at %llu is outside "
			    "the %llu-byte disk", (unsigned long long)len,
			    (unsigned long long)off, (unsigned long long)db->size);
	if (db->torn)
		return fail(db, -EIO, "the replica is torn (an epoch applied "
			    "in part was dropped)");
	rc = rdb_pread_all(db->fd, buf, len, off);
	if (rc < 0)
		return fail(db, rc, "replica read of %llu bytes at %llu: %s",
			    (unsigned long long)len, (unsigned long long)off,
			    strerror(-rc));
	while (p < end) {
		uint64_t roff, rlen, lo, hi;
		uint8_t op = p[0];

		memcpy(&roff, p + 1, 8);
		memcpy(&rlen, p + 9, 8);
		lo = roff > off ? roff : off;
		hi = roff + rlen < off + len ? roff + rlen : off + len;
		if (op != RDB_DISK_FLUSH && lo < hi) {
			if (op == RDB_DISK_WRITE)
				memcpy(buf + (lo - off), p + REC_HDR + (lo - roff),
				       hi - lo);
			else
				memset(buf + (lo - off), 0, hi - lo);
		}
		p += REC_HDR + (op == RDB_DISK_WRITE ? rlen : 0);
	}
	return 0;
}

int rdb_diskbuf_sync(struct rdb_diskbuf *db)
{
	return rdb_diskbuf_apply_one(db, RDB_DISK_FLUSH, 0, 0, NULL);
}

bool rdb_diskbuf_consistent(const struct rdb_diskbuf *db)
{
	return db->consistent;
}

const char *rdb_diskbuf_error(const struct rdb_diskbuf *db)
{
	return db->err[0] ? db->err : "no error";
}

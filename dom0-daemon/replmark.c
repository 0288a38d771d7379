// SPDX-License-Identifier: GPL-2.0-only
#include "replmark.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "RDBRMARK"
#define VERSION 1u
#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

static const char *const state_names[] = {
	[RDB_REPLMARK_APPLYING] = "applying",
	[RDB_REPLMARK_DONE] = "done",
	[RDB_REPLMARK_SERVED] = "served",
};

int rdb_replmark_boot_id(char *buf, size_t len)
{
	int fd = open(BOOT_ID_PATH, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return -errno;
	r = read(fd, buf, len - 1);
	close(fd);
	if (r < 0)
		return -errno;
	buf[r] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return buf[0] ? 0 : -ENODATA;
}

/* A boot id as the kernel writes it: hex digits and dashes. */
static bool boot_id_ok(const char *s)
{
	return s[0] && strspn(s, "0123456789abcdef-") == strlen(s) &&
	       strlen(s) < sizeof(((struct rdb_replmark *)0)->boot);
}

/* The record, exactly RDB_REPLMARK_LEN bytes (no NUL); -EINVAL if it
 * does not fit (a boot id of the wrong form). */
static int encode(char rec[RDB_REPLMARK_LEN], const char *boot, uint64_t gen,
		  uint64_t epoch, enum rdb_replmark_state s)
{
	char line[RDB_REPLMARK_LEN + 1];
	int n;

	if (!boot_id_ok(boot))
		return -EINVAL;
	n = snprintf(line, sizeof(line), "%s %u %s %016llx %llu %s", MAGIC,
		     VERSION, boot, (unsigned long long)gen,
		     (unsigned long long)epoch, state_names[s]);
	if (n < 0 || n > RDB_REPLMARK_LEN - 1)
		return -EINVAL;
	memcpy(rec, line, (size_t)n);
	memset(rec + n, ' ', RDB_REPLMARK_LEN - 1 - (size_t)n);
	rec[RDB_REPLMARK_LEN - 1] = '\n';
	return 0;
}

/* Parsed, then written again: only a record byte for byte as encode
 * writes it is valid (a torn or foreign file is never half-believed). */
static int decode(const char rec[RDB_REPLMARK_LEN], struct rdb_replmark_view *v)
{
	char text[RDB_REPLMARK_LEN + 1], boot[40], state[16], again[RDB_REPLMARK_LEN];
	unsigned long long gen, epoch;
	unsigned version;
	int s;

	if (memchr(rec, 0, RDB_REPLMARK_LEN))
		return -EBADMSG;
	memcpy(text, rec, RDB_REPLMARK_LEN);
	text[RDB_REPLMARK_LEN] = 0;
	if (sscanf(text, MAGIC " %u %39s %16llx %20llu %15s", &version, boot,
		   &gen, &epoch, state) != 5 || version != VERSION)
		return -EBADMSG;
	for (s = 0; s < (int)(sizeof(state_names) / sizeof(state_names[0])); s++)
		if (!strcmp(state, state_names[s]))
			break;
	if (s == (int)(sizeof(state_names) / sizeof(state_names[0])) ||
	    encode(again, boot, gen, epoch, (enum rdb_replmark_state)s) < 0 ||
	    memcmp(again, rec, RDB_REPLMARK_LEN))
		return -EBADMSG;
	v->state = (enum rdb_replmark_state)s;
	v->done = v->state == RDB_REPLMARK_DONE;
	v->gen = gen;
	v->epoch = epoch;
	snprintf(v->boot, sizeof(v->boot), "%s", boot);
	return 0;
}

int rdb_replmark_read(const char *path, struct rdb_replmark_view *out)
{
	char rec[RDB_REPLMARK_LEN], now[40];
	struct stat sb;
	ssize_t r;
	int fd, rc;

	memset(out, 0, sizeof(*out));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ENOENT)
			snprintf(out->why, sizeof(out->why), "no replica "
				 "marker %s", path);
		else
			snprintf(out->why, sizeof(out->why), "replica marker "
				 "%s: %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &sb) < 0) {
		rc = -errno;
		snprintf(out->why, sizeof(out->why), "replica marker %s: %s",
			 path, strerror(-rc));
		close(fd);
		return rc;
	}
	r = sb.st_size == RDB_REPLMARK_LEN ? pread(fd, rec, sizeof(rec), 0) : 0;
	close(fd);
	if (r != RDB_REPLMARK_LEN) {
		snprintf(out->why, sizeof(out->why), "replica marker %s is "
			 "malformed (%lld bytes, not one record of %d)", path,
			 (long long)sb.st_size, RDB_REPLMARK_LEN);
		return -EBADMSG;
	}
	if (decode(rec, out) < 0) {
		snprintf(out->why, sizeof(out->why), "replica marker %s is "
			 "malformed (not a record as remusdbd writes one)", path);
		return -EBADMSG;
	}
	out->valid = true;
	rc = rdb_replmark_boot_id(now, sizeof(now));
	out->same_boot = rc == 0 && !strcmp(now, out->boot);
	return 0;
}

bool rdb_replmark_vouches(const struct rdb_replmark_view *v, uint64_t gen,
			  uint64_t min_epoch, char *why, size_t whylen)
{
	if (!v->valid)
		snprintf(why, whylen, "%s", v->why[0] ? v->why :
			 "no replica marker was read");
	else if (!v->same_boot)
		snprintf(why, whylen, "the replica marker is from another boot "
			 "of this host (%s): writes of the replicas that were in "
			 "the page cache then may be lost", v->boot);
	else if (v->state == RDB_REPLMARK_APPLYING && !v->epoch)
		snprintf(why, whylen, "the replicas were being written when "
			 "remusdbd stopped (a protection's initial copy): they "
			 "are at no epoch");
	else if (v->state == RDB_REPLMARK_APPLYING)
		snprintf(why, whylen, "the replicas were being written when "
			 "remusdbd stopped (epoch %llu of protection %016llx): "
			 "they are at no epoch", (unsigned long long)v->epoch,
			 (unsigned long long)v->gen);
	else if (v->state == RDB_REPLMARK_SERVED)
		snprintf(why, whylen, "the replicas were served to a guest "
			 "restored from epoch %llu of protection %016llx, which "
			 "wrote them", (unsigned long long)v->epoch,
			 (unsigned long long)v->gen);
	else if (v->gen != gen)
		snprintf(why, whylen, "the replicas are whole at epoch %llu of "
			 "protection %016llx, not of %016llx",
			 (unsigned long long)v->epoch, (unsigned long long)v->gen,
			 (unsigned long long)gen);
	else if (v->epoch < min_epoch)
		snprintf(why, whylen, "the replicas are whole at epoch %llu, "
			 "before epoch %llu, which the primary saw committed",
			 (unsigned long long)v->epoch,
			 (unsigned long long)min_epoch);
	else
		return true;
	return false;
}

void rdb_replmark_init(struct rdb_replmark *m)
{
	memset(m, 0, sizeof(*m));
	m->fd = -1;
}

void rdb_replmark_close(struct rdb_replmark *m)
{
	if (m->fd >= 0)
		close(m->fd);
	rdb_replmark_init(m);
}

/* Nothing written: the file goes, so that it claims nothing.  0 when
 * it is gone, else a negative errno (err says so). */
static int remove_file(struct rdb_replmark *m)
{
	size_t n;
	int rc;

	m->dead = true;
	if (unlink(m->path) == 0 || errno == ENOENT)
		return 0;
	rc = -errno;
	n = strlen(m->err);
	snprintf(m->err + n, sizeof(m->err) - n, "%sit cannot be removed "
		 "either: %s", n ? "; " : "", strerror(-rc));
	return rc;
}

int rdb_replmark_open(struct rdb_replmark *m, const char *path)
{
	struct stat sb;
	int rc;

	rdb_replmark_close(m);
	if (snprintf(m->path, sizeof(m->path), "%s", path) >= (int)sizeof(m->path)) {
		/* (no file can be named, so none can be removed: every
		 * write is refused, -EBADF) */
		snprintf(m->found.why, sizeof(m->found.why), "replica marker "
			 "path too long");
		snprintf(m->err, sizeof(m->err), "%s", m->found.why);
		m->path[0] = 0;
		m->dead = true;
		return -ENAMETOOLONG;
	}
	rdb_replmark_read(path, &m->found);
	rc = rdb_replmark_boot_id(m->boot, sizeof(m->boot));
	if (rc < 0 || !boot_id_ok(m->boot)) {
		snprintf(m->err, sizeof(m->err), "this boot's id (%s): %s",
			 BOOT_ID_PATH, rc < 0 ? strerror(-rc) : "not one");
		remove_file(m);
		return rc < 0 ? rc : -EINVAL;
	}
	m->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	rc = m->fd < 0 ? -errno : 0;
	/* one record exactly: a longer file would never read as one */
	if (rc == 0 && fstat(m->fd, &sb) == 0 && sb.st_size != RDB_REPLMARK_LEN &&
	    ftruncate(m->fd, RDB_REPLMARK_LEN) < 0)
		rc = -errno;
	if (rc < 0) {
		snprintf(m->err, sizeof(m->err), "replica marker %s: %s", path,
			 strerror(-rc));
		remove_file(m);
		return rc;
	}
	return 0;
}

/* One pwrite of the whole record, or the file removed: 0 written (or
 * the marker was dead already and its file is gone), 1 it died now and
 * its file is gone, < 0 the file may still be there. */
static int put(struct rdb_replmark *m, uint64_t gen, uint64_t epoch,
	       enum rdb_replmark_state s)
{
	char rec[RDB_REPLMARK_LEN];
	ssize_t r = -1;
	int rc;

	if (!m->path[0]) {
		snprintf(m->err, sizeof(m->err), "no replica marker was opened");
		return -EBADF;
	}
	if (m->dead)
		return remove_file(m);
	rc = encode(rec, m->boot, gen, epoch, s);
	if (rc == 0) {
		do
			r = pwrite(m->fd, rec, sizeof(rec), 0);
		while (r < 0 && errno == EINTR);
		if (r == (ssize_t)sizeof(rec))
			return 0;
		rc = r < 0 ? -errno : -EIO;
	}
	snprintf(m->err, sizeof(m->err), "replica marker %s: writing \"%s\": %s",
		 m->path, state_names[s], r >= 0 ? "short write" :
		 strerror(-rc));
	return remove_file(m) < 0 ? rc : 1;
}

int rdb_replmark_applying(struct rdb_replmark *m, uint64_t gen, uint64_t epoch)
{
	return put(m, gen, epoch, RDB_REPLMARK_APPLYING);
}

int rdb_replmark_done(struct rdb_replmark *m, uint64_t gen, uint64_t epoch)
{
	int rc;

	if (m->dead)
		return 0;	/* its file is gone: it claims nothing */
	rc = put(m, gen, epoch, RDB_REPLMARK_DONE);
	return rc == 1 ? -EIO : rc;
}

int rdb_replmark_served(struct rdb_replmark *m, uint64_t gen, uint64_t epoch)
{
	return put(m, gen, epoch, RDB_REPLMARK_SERVED);
}

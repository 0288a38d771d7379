// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "actlog"
#include "actlog.h"
#include "crc32c.h"
#include "fileio.h"
#include "le.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "RDBACTLG"
#define VERSION 1u
#define HDR_FIELDS 72u		/* bytes the CRC covers; the CRC follows */
#define SHIFT_MIN 12u
#define SHIFT_MAX 30u

/* ---- the format ---- */

static void shape(uint64_t disk_size, uint32_t shift, struct rdb_actlog_hdr *h)
{
	uint64_t bytes;

	h->disk_size = disk_size;
	h->extent_shift = shift;
	h->nr_extents = (disk_size + (1ull << shift) - 1) >> shift;
	bytes = (h->nr_extents + 7) / 8;
	h->bitmap_bytes = (bytes + RDB_ACTLOG_PAGE - 1) / RDB_ACTLOG_PAGE *
			  RDB_ACTLOG_PAGE;
	if (!h->bitmap_bytes)
		h->bitmap_bytes = RDB_ACTLOG_PAGE;
}

void rdb_actlog_geometry(uint64_t disk_size, struct rdb_actlog_hdr *out)
{
	memset(out, 0, sizeof(*out));
	shape(disk_size, RDB_ACTLOG_SHIFT, out);
}

void rdb_actlog_hdr_encode(const struct rdb_actlog_hdr *h,
			   uint8_t page[RDB_ACTLOG_PAGE])
{
	memset(page, 0, RDB_ACTLOG_PAGE);
	memcpy(page, MAGIC, 8);
	rdb_le_put32(page + 8, VERSION);
	rdb_le_put32(page + 12, RDB_ACTLOG_PAGE);
	rdb_le_put64(page + 16, h->generation);
	rdb_le_put64(page + 24, h->dead_gen);
	rdb_le_put64(page + 32, h->disk_size);
	rdb_le_put32(page + 40, h->extent_shift);
	rdb_le_put32(page + 44, h->flags);
	rdb_le_put64(page + 48, h->nr_extents);
	rdb_le_put64(page + 56, h->bitmap_bytes);
	rdb_le_put64(page + 64, 0);
	rdb_le_put32(page + HDR_FIELDS, rdb_crc32c(0, page, HDR_FIELDS));
}

int rdb_actlog_hdr_decode(const uint8_t *page, size_t len,
			  struct rdb_actlog_hdr *out)
{
	struct rdb_actlog_hdr h, want;

	if (len < HDR_FIELDS + 4 || memcmp(page, MAGIC, 8) != 0)
		return -EBADMSG;
	if (rdb_le_get32(page + HDR_FIELDS) != rdb_crc32c(0, page, HDR_FIELDS))
		return -EBADMSG;
	if (rdb_le_get32(page + 8) != VERSION)
		return -EPROTO;
	memset(&h, 0, sizeof(h));
	h.generation = rdb_le_get64(page + 16);
	h.dead_gen = rdb_le_get64(page + 24);
	h.disk_size = rdb_le_get64(page + 32);
	h.extent_shift = rdb_le_get32(page + 40);
	h.flags = rdb_le_get32(page + 44);
	h.nr_extents = rdb_le_get64(page + 48);
	if (h.flags & ~RDB_ACTLOG_F_IMAGE_LOST)
		return -EPROTO;
	h.bitmap_bytes = rdb_le_get64(page + 56);
	if (rdb_le_get32(page + 12) != RDB_ACTLOG_PAGE || !h.disk_size ||
	    h.extent_shift < SHIFT_MIN || h.extent_shift > SHIFT_MAX)
		return -EINVAL;
	shape(h.disk_size, h.extent_shift, &want);
	if (h.nr_extents != want.nr_extents || h.bitmap_bytes != want.bitmap_bytes)
		return -EINVAL;
	*out = h;
	return 0;
}

static const char *hdr_error(int rc)
{
	return rc == -EBADMSG ? "no activity log header (magic or CRC)" :
	       rc == -EPROTO ? "an activity log of another version" :
	       "an activity log header with a bad geometry";
}

/* ---- POSIX storage ---- */

static int px_pwrite(void *ctx, int fd, const void *p, uint64_t n, uint64_t off)
{
	(void)ctx;
	return rdb_pwrite_all(fd, p, n, off);
}

static int px_pread(void *ctx, int fd, void *p, uint64_t n, uint64_t off)
{
	(void)ctx;
	return rdb_pread_all(fd, p, n, off);
}

static int px_fdatasync(void *ctx, int fd)
{
	(void)ctx;
	return fdatasync(fd) < 0 ? -errno : 0;
}

const struct rdb_actlog_io rdb_actlog_posix_io = {
	.pwrite = px_pwrite,
	.pread = px_pread,
	.fdatasync = px_fdatasync,
};

/* ---- the disk server's log ---- */

void rdb_actlog_init(struct rdb_actlog *al)
{
	memset(al, 0, sizeof(*al));
	al->fd = al->img_fd = -1;
}

void rdb_actlog_dispose(struct rdb_actlog *al)
{
	if (al->own_fd && al->fd >= 0)
		close(al->fd);
	free(al->bits);
	free(al->slot_of);
	free(al->slots);
	rdb_actlog_init(al);
}

static bool bit(const uint8_t *b, uint64_t e)
{
	return b[e / 8] >> (e % 8) & 1;
}

static int sync_log(struct rdb_actlog *al)
{
	int rc = al->io->fdatasync(al->io->ctx, al->fd);

	if (rc == 0)
		al->st.log_syncs++;
	return rc;
}

static int sync_image(struct rdb_actlog *al)
{
	return al->io->fdatasync(al->io->ctx, al->img_fd);
}

static int write_header(struct rdb_actlog *al, uint64_t gen)
{
	struct rdb_actlog_hdr h;
	uint8_t page[RDB_ACTLOG_PAGE];

	shape(al->disk_size, al->shift, &h);
	h.generation = gen;
	h.dead_gen = al->dead_gen;
	h.flags = al->image_lost ? RDB_ACTLOG_F_IMAGE_LOST : 0;
	rdb_actlog_hdr_encode(&h, page);
	return al->io->pwrite(al->io->ctx, al->fd, page, sizeof(page), 0);
}

/* The bitmap pages holding extents e0..e1, as they are in memory. */
static int write_pages(struct rdb_actlog *al, uint64_t e0, uint64_t e1)
{
	uint64_t p0 = e0 / 8 / RDB_ACTLOG_PAGE, p1 = e1 / 8 / RDB_ACTLOG_PAGE;

	return al->io->pwrite(al->io->ctx, al->fd, al->bits + p0 * RDB_ACTLOG_PAGE,
			      (p1 - p0 + 1) * RDB_ACTLOG_PAGE,
			      RDB_ACTLOG_PAGE + p0 * RDB_ACTLOG_PAGE);
}

static void slot_add(struct rdb_actlog *al, uint64_t e, uint64_t seq,
		     uint64_t pos)
{
	al->slots[al->nslots] = (struct rdb_actlog_slot){ e, seq, pos };
	al->slot_of[e] = ++al->nslots;
	al->bits[e / 8] |= (uint8_t)(1u << (e % 8));
	al->st.active = al->nslots;
}

static void slot_del(struct rdb_actlog *al, uint32_t i)
{
	uint64_t e = al->slots[i].ext;

	al->bits[e / 8] &= (uint8_t)~(1u << (e % 8));
	al->slot_of[e] = 0;
	if (i != --al->nslots) {
		al->slots[i] = al->slots[al->nslots];
		al->slot_of[al->slots[i].ext] = i + 1;
	}
	al->st.active = al->nslots;
}

static void forget_all(struct rdb_actlog *al)
{
	for (uint32_t i = 0; i < al->nslots; i++)
		al->slot_of[al->slots[i].ext] = 0;
	al->nslots = 0;
	al->st.active = 0;
	memset(al->bits, 0, al->bitmap_bytes);
}

/* Leaves whatever generation the durable header may claim: it says 0,
 * and the highest generation left (never armed again), once this
 * returns 0. */
static int invalidate(struct rdb_actlog *al)
{
	bool leaves = al->gen || al->failed;
	int rc;

	if (!al->gen && !al->unknown && al->dead_gen == al->dead_durable &&
	    al->image_lost == al->lost_durable)
		return 0;
	if (al->gen > al->dead_gen)
		al->dead_gen = al->gen;
	al->gen = 0;
	al->unknown = true;
	forget_all(al);
	rc = write_header(al, 0);
	if (rc == 0)
		rc = sync_log(al);
	if (rc < 0) {
		al->failed = true;
		LOGVM(ERROR, al->vm, "activity log %s: invalidating it failed: "
		      "%s", al->path, strerror(-rc));
		return rc;
	}
	al->unknown = al->failed = false;
	al->dead_durable = al->dead_gen;
	al->lost_durable = al->image_lost;
	if (leaves)
		al->st.invalidations++;
	return 0;
}

static void whole_disk(struct rdb_actlog *al, uint64_t gen, const char *why)
{
	if (al->said_gen == gen)
		return;
	al->said_gen = gen;
	LOGVM(ERROR, al->vm, "activity log %s: %s; invalid for protection "
	      "generation %llu: a resync after a failover in this protection "
	      "will copy the whole disk", al->path, why,
	      (unsigned long long)gen);
}

/* Extents of e0..e1 that are not set. */
static uint64_t unset(const struct rdb_actlog *al, uint64_t e0, uint64_t e1)
{
	uint64_t n = 0;

	for (uint64_t e = e0; e <= e1; e++)
		n += !bit(al->bits, e);
	return n;
}

/* Clears the extents whose last change is covered by an image sync and
 * committed; the pages are written, not synced (a stale set bit is
 * safe). */
static void clear_covered(struct rdb_actlog *al, uint64_t covered,
			  uint64_t committed_pos)
{
	uint64_t lo = UINT64_MAX, hi = 0, n = 0;
	int rc;

	for (uint32_t i = 0; i < al->nslots;) {
		const struct rdb_actlog_slot *s = &al->slots[i];

		if (s->seq > covered || s->pos == RDB_ACTLOG_NEVER ||
		    s->pos > committed_pos) {
			i++;
			continue;
		}
		lo = s->ext < lo ? s->ext : lo;
		hi = s->ext > hi ? s->ext : hi;
		slot_del(al, i);
		n++;
	}
	if (!n)
		return;
	al->st.retired += n;
	rc = write_pages(al, lo, hi);
	if (rc < 0)
		LOGVM(WARN, al->vm, "activity log %s: writing retired extents: "
		      "%s (they stay set on disk)", al->path, strerror(-rc));
}

/* The kernel may have dropped pages it could not write: until the image
 * is rewritten whole, its durable content is nobody's (the header says
 * so, and the log never arms again). */
static int image_sync_failed(struct rdb_actlog *al, int rc, const char *what)
{
	uint64_t gen = al->gen;

	if (!al->image_lost)
		LOGVM(ERROR, al->vm, "activity log %s: %s: an fdatasync of the "
		      "image failed (%s): the image may have lost writes, it is "
		      "no base for a resync until it is copied whole",
		      al->path, what, strerror(-rc));
	al->image_lost = true;
	rc = invalidate(al);
	if (gen)
		whole_disk(al, gen, "the image may have lost writes");
	return rc;
}

/*
 * Arms the log for gen with exactly extents e0..e1: the image synced (the
 * replica's initial copy has all of it), the header made invalid, the
 * bitmap written, then the header with gen, each synced before the next.
 */
/* Arms the log for gen with the n extents from e0 (n may be 0). */
static int arm(struct rdb_actlog *al, uint64_t gen, uint64_t e0, uint64_t n)
{
	const char *what = "invalidating it";
	int rc;

	if (n > al->max) {
		al->dead_gen = gen;
		rc = invalidate(al);
		whole_disk(al, gen, "the first change of the protection spans "
			   "more extents than the log holds");
		return rc;
	}
	rc = sync_image(al);
	if (rc < 0)
		return image_sync_failed(al, rc, "arming");
	if (al->gen || al->unknown) {
		if (al->gen > al->dead_gen)
			al->dead_gen = al->gen;
		al->gen = 0;
		al->unknown = true;
		rc = write_header(al, 0);
		if (rc == 0)
			rc = sync_log(al);
		if (rc == 0) {
			al->unknown = false;
			al->dead_durable = al->dead_gen;
			al->lost_durable = al->image_lost;
		}
	}
	forget_all(al);
	for (uint64_t e = e0; rc == 0 && e < e0 + n; e++)
		slot_add(al, e, UINT64_MAX, 0);
	if (rc == 0) {
		what = "writing its bitmap";
		rc = al->io->pwrite(al->io->ctx, al->fd, al->bits,
				    al->bitmap_bytes, RDB_ACTLOG_PAGE);
		if (rc == 0)
			rc = sync_log(al);
	}
	if (rc == 0) {
		what = "writing its header";
		al->unknown = true;
		rc = write_header(al, gen);
		if (rc == 0)
			rc = sync_log(al);
	}
	if (rc == 0) {
		al->gen = gen;
		al->unknown = false;
		al->st.adds += n;
		LOGVM(INFO, al->vm, "activity log %s armed for protection "
		      "generation %llu", al->path, (unsigned long long)gen);
		return 0;
	}
	LOGVM(ERROR, al->vm, "activity log %s: arming it for generation %llu: "
	      "%s: %s", al->path, (unsigned long long)gen, what, strerror(-rc));
	al->dead_gen = gen;
	rc = invalidate(al);
	whole_disk(al, gen, "it could not be armed");
	return rc;
}

/* Sets extents e0..e1 durably in the log armed for al->gen. */
static int add(struct rdb_actlog *al, uint64_t committed_pos, uint64_t e0,
	       uint64_t e1)
{
	uint64_t need = unset(al, e0, e1), gen = al->gen;
	int rc;

	if (!need)
		return 0;
	if (al->nslots + need > al->max) {
		/* full: what the backup has committed can go once the image
		 * holds it durably — now, inline */
		al->st.full_stalls++;
		rc = sync_image(al);
		if (rc < 0)
			return image_sync_failed(al, rc, "retiring a full log");
		al->st.image_syncs++;
		clear_covered(al, al->seq, committed_pos);
		need = unset(al, e0, e1);
		if (al->nslots + need > al->max) {
			rc = invalidate(al);
			whole_disk(al, gen, "it is full (more extents changed "
				   "than it holds, or not committed yet)");
			return rc;
		}
	}
	for (uint64_t e = e0; e <= e1; e++)
		if (!bit(al->bits, e))
			slot_add(al, e, UINT64_MAX, 0);
	rc = write_pages(al, e0, e1);
	if (rc == 0)
		rc = sync_log(al);
	if (rc == 0) {
		al->st.adds += need;
		return 0;
	}
	LOGVM(ERROR, al->vm, "activity log %s: setting %llu extents: %s",
	      al->path, (unsigned long long)need, strerror(-rc));
	rc = invalidate(al);
	whole_disk(al, gen, "it could not be written");
	return rc;
}

int rdb_actlog_before(struct rdb_actlog *al, bool recording, uint64_t gen,
		      uint64_t committed_pos, uint64_t off, uint64_t len)
{
	uint64_t e0, e1, armed = al->gen;
	int rc;

	if (!len || off >= al->disk_size)
		return 0;
	e0 = off >> al->shift;
	e1 = (off + len - 1 < al->disk_size ? off + len - 1 :
	      al->disk_size - 1) >> al->shift;
	if ((recording || al->keep) && gen && gen == al->gen)
		return add(al, committed_pos, e0, e1);
	if (recording && gen && gen > al->gen && gen > al->dead_gen &&
	    !al->image_lost)
		return arm(al, gen, e0, e1 - e0 + 1);
	/* not recording, or for a generation the log will not arm: the
	 * change goes untracked, so the log must claim nothing */
	rc = invalidate(al);
	if (rc == 0 && armed)
		LOGVM(INFO, al->vm, "activity log %s invalidated (generation "
		      "%llu left): the image changes %s", al->path,
		      (unsigned long long)armed, !recording ? "unprotected" :
		      "for a generation it does not arm");
	if (recording && gen)
		whole_disk(al, gen, al->image_lost ? "the image may have lost "
			   "writes (an fdatasync failed)" : "it was invalidated "
			   "for this generation, or armed for a later one, "
			   "before (it never arms a generation twice)");
	return rc;
}

void rdb_actlog_keep(struct rdb_actlog *al, bool keep)
{
	al->keep = keep;
}

void rdb_actlog_adopt(struct rdb_actlog *al, uint64_t pos)
{
	for (uint32_t i = 0; i < al->nslots; i++) {
		struct rdb_actlog_slot *s = &al->slots[i];

		if (s->pos == RDB_ACTLOG_NEVER && s->seq != UINT64_MAX)
			s->pos = pos;
	}
}

int rdb_actlog_arm_idle(struct rdb_actlog *al, bool recording, uint64_t gen)
{
	if (!recording || !gen || gen <= al->gen || gen <= al->dead_gen ||
	    al->image_lost)
		return 0;
	return arm(al, gen, 0, 0);
}

void rdb_actlog_after(struct rdb_actlog *al, uint64_t off, uint64_t len,
		      uint64_t pos)
{
	uint64_t e0, e1;

	al->seq++;
	if (!len || !al->gen || off >= al->disk_size)
		return;
	e0 = off >> al->shift;
	e1 = (off + len - 1 < al->disk_size ? off + len - 1 :
	      al->disk_size - 1) >> al->shift;
	for (uint64_t e = e0; e <= e1; e++) {
		struct rdb_actlog_slot *s;

		if (!al->slot_of[e])
			continue;
		s = &al->slots[al->slot_of[e] - 1];
		s->seq = al->seq;
		/* a change the backup never gets keeps its extent for good */
		if (s->pos != RDB_ACTLOG_NEVER)
			s->pos = pos;
	}
}

bool rdb_actlog_retire_due(const struct rdb_actlog *al, uint64_t now_ns,
			   uint64_t gen, uint64_t committed_pos)
{
	if (!al->gen || al->gen != gen || al->retiring || !al->nslots)
		return false;
	if (now_ns - al->last_retire_ns < RDB_ACTLOG_RETIRE_NS &&
	    (uint64_t)al->nslots * 4 < (uint64_t)al->max * 3)
		return false;
	for (uint32_t i = 0; i < al->nslots; i++) {
		const struct rdb_actlog_slot *s = &al->slots[i];

		if (s->seq != UINT64_MAX && s->pos != RDB_ACTLOG_NEVER &&
		    s->pos <= committed_pos)
			return true;
	}
	return false;
}

uint64_t rdb_actlog_retire_begin(struct rdb_actlog *al, uint64_t now_ns)
{
	al->retiring = true;
	al->retire_gen = al->gen;
	al->last_retire_ns = now_ns;
	return al->seq;
}

void rdb_actlog_retire_end(struct rdb_actlog *al, uint64_t covered,
			   int sync_rc, uint64_t gen, uint64_t committed_pos)
{
	al->retiring = false;
	if (sync_rc < 0) {
		image_sync_failed(al, sync_rc, "retiring");
		return;
	}
	al->st.image_syncs++;
	/* still the generation the sync was for, and committed_pos still
	 * about it */
	if (al->gen && al->gen == al->retire_gen && al->gen == gen)
		clear_covered(al, covered, committed_pos);
}

void rdb_actlog_retire_cancel(struct rdb_actlog *al)
{
	al->retiring = false;
}

void rdb_actlog_image_sync_failed(struct rdb_actlog *al)
{
	image_sync_failed(al, -EIO, "a sync outside the log");
}

uint64_t rdb_actlog_armed_gen(const struct rdb_actlog *al)
{
	return al->gen;
}

int rdb_actlog_load(struct rdb_actlog *al, const char *vm, int log_fd,
		    bool own_fd, int img_fd, uint64_t disk_size, uint32_t max,
		    const struct rdb_actlog_io *io, char *err, size_t errlen)
{
	struct rdb_actlog_hdr h, g;
	uint8_t page[RDB_ACTLOG_PAGE];
	uint64_t nset = 0;
	const char *why = NULL;
	int rc;

	snprintf(al->vm, sizeof(al->vm), "%s", vm);
	if (!al->path[0])
		snprintf(al->path, sizeof(al->path), "(fd %d)", log_fd);
	al->io = io ? io : &rdb_actlog_posix_io;
	al->fd = log_fd;
	al->own_fd = own_fd;
	al->img_fd = img_fd;
	al->max = max ? max : RDB_ACTLOG_MAX_DEFAULT;
	rdb_actlog_geometry(disk_size, &g);
	al->disk_size = disk_size;
	al->shift = g.extent_shift;
	al->nr_ext = g.nr_extents;
	al->bitmap_bytes = g.bitmap_bytes;
	al->bits = calloc(1, al->bitmap_bytes);
	al->slot_of = calloc(al->nr_ext, sizeof(*al->slot_of));
	if (!al->bits || !al->slot_of) {
		snprintf(err, errlen, "activity log: out of memory");
		return -ENOMEM;
	}
	rc = al->io->pread(al->io->ctx, al->fd, page, sizeof(page), 0);
	if (rc == 0)
		rc = rdb_actlog_hdr_decode(page, sizeof(page), &h);
	if (rc == 0 && (h.disk_size != disk_size || h.extent_shift != al->shift))
		why = "it was for another disk size";
	else if (rc < 0)
		why = hdr_error(rc);
	if (!why && h.generation) {
		rc = al->io->pread(al->io->ctx, al->fd, al->bits,
				   al->bitmap_bytes, RDB_ACTLOG_PAGE);
		if (rc < 0) {
			snprintf(err, errlen, "activity log %s: reading it: %s",
				 al->path, strerror(-rc));
			return rc;
		}
		/* bits past the last extent mean nothing */
		for (uint64_t e = al->nr_ext; e < al->bitmap_bytes * 8; e++)
			al->bits[e / 8] &= (uint8_t)~(1u << (e % 8));
		for (uint64_t e = 0; e < al->nr_ext; e++)
			nset += bit(al->bits, e);
	}
	al->cap = nset > al->max ? (uint32_t)nset : al->max;
	al->slots = calloc(al->cap, sizeof(*al->slots));
	if (!al->slots) {
		snprintf(err, errlen, "activity log: out of memory");
		return -ENOMEM;
	}
	if (!why) {
		al->dead_gen = al->dead_durable = h.dead_gen;
		al->image_lost = al->lost_durable =
			h.flags & RDB_ACTLOG_F_IMAGE_LOST;
		al->gen = h.generation;
		/* generation 0 as a process before us left it: written, but
		 * maybe never synced (a sync that failed, the kernel dropping
		 * the page): synced again at the first change */
		al->unknown = !al->gen;
		/* whatever their changes were, this process never saw them
		 * committed: they stay for the generation */
		for (uint64_t e = 0; al->gen && e < al->nr_ext; e++)
			if (bit(al->bits, e)) {
				al->bits[e / 8] &= (uint8_t)~(1u << (e % 8));
				slot_add(al, e, 0, RDB_ACTLOG_NEVER);
			}
		al->st.active = al->nslots;
		return 0;
	}
	/* not ours: a new, invalid log (not synced: missing or torn is
	 * invalid too); a generation left before stays left */
	if (rc == 0 && h.generation > h.dead_gen)
		al->dead_gen = h.generation;
	else if (rc == 0)
		al->dead_gen = h.dead_gen;
	al->dead_durable = al->dead_gen;
	al->unknown = true;
	rc = write_header(al, 0);
	if (rc == 0)
		rc = al->io->pwrite(al->io->ctx, al->fd, al->bits,
				    al->bitmap_bytes, RDB_ACTLOG_PAGE);
	if (rc < 0) {
		snprintf(err, errlen, "activity log %s: writing it: %s",
			 al->path, strerror(-rc));
		return rc;
	}
	LOGVM(INFO, al->vm, "activity log %s: new (%s)", al->path, why);
	return 0;
}

int rdb_actlog_open(struct rdb_actlog *al, const char *vm, const char *path,
		    int img_fd, uint64_t disk_size, uint32_t max,
		    char *err, size_t errlen)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600), rc;

	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "activity log %s: %s", path, strerror(errno));
		return rc;
	}
	snprintf(al->path, sizeof(al->path), "%s", path);
	rc = rdb_actlog_load(al, vm, fd, true, img_fd, disk_size, max, NULL,
			     err, errlen);
	if (rc < 0)
		rdb_actlog_dispose(al);
	return rc;
}

/* ---- remusdbd's side ---- */

static int no_base(struct rdb_actlog_view *out, char *err, size_t errlen,
		   const char *why)
{
	free(out->bits);
	out->bits = NULL;
	out->generation = 0;
	out->nr_set = 0;
	snprintf(err, errlen, "%s", why);
	return 0;
}

int rdb_actlog_decode(const uint8_t *buf, size_t len, uint64_t disk_size,
		      struct rdb_actlog_view *out, char *err, size_t errlen)
{
	struct rdb_actlog_hdr h;
	uint64_t bytes;
	int rc;

	memset(out, 0, sizeof(*out));
	out->disk_size = disk_size;
	if (err && errlen)
		err[0] = 0;
	rc = rdb_actlog_hdr_decode(buf, len < RDB_ACTLOG_PAGE ? len :
				   RDB_ACTLOG_PAGE, &h);
	if (rc < 0)
		return no_base(out, err, errlen, hdr_error(rc));
	out->dead_gen = h.dead_gen;
	out->extent_shift = h.extent_shift;
	out->nr_extents = h.nr_extents;
	if (h.disk_size != disk_size)
		return no_base(out, err, errlen, "an activity log for another "
			       "disk size");
	out->image_lost = h.flags & RDB_ACTLOG_F_IMAGE_LOST;
	if (out->image_lost)
		return no_base(out, err, errlen, "an activity log saying the "
			       "image may have lost writes (an fdatasync failed)");
	if (!h.generation)
		return no_base(out, err, errlen, "an invalid activity log "
			       "(generation 0)");
	bytes = (h.nr_extents + 7) / 8;
	if (len < RDB_ACTLOG_PAGE + bytes)
		return no_base(out, err, errlen, "an activity log whose bitmap "
			       "is cut short");
	out->bits = malloc(bytes);
	if (!out->bits)
		return -ENOMEM;
	memcpy(out->bits, buf + RDB_ACTLOG_PAGE, bytes);
	if (h.nr_extents % 8)
		out->bits[bytes - 1] &= (uint8_t)((1u << (h.nr_extents % 8)) - 1);
	for (uint64_t i = 0; i < bytes; i++)
		out->nr_set += (uint64_t)__builtin_popcount(out->bits[i]);
	out->generation = h.generation;
	return 0;
}

int rdb_actlog_read(const char *path, uint64_t disk_size,
		    struct rdb_actlog_view *out, char *err, size_t errlen)
{
	struct rdb_actlog_hdr g;
	struct stat sb;
	uint8_t *buf;
	uint64_t len;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	memset(out, 0, sizeof(*out));
	if (fd < 0 && errno == ENOENT)
		return no_base(out, err, errlen, "no activity log");
	if (fd < 0 || fstat(fd, &sb) < 0) {
		rc = -errno;
		snprintf(err, errlen, "activity log %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	/* at most the largest log for this disk (the smallest extents) */
	memset(&g, 0, sizeof(g));
	shape(disk_size, SHIFT_MIN, &g);
	len = (uint64_t)sb.st_size < RDB_ACTLOG_PAGE + g.bitmap_bytes ?
	      (uint64_t)sb.st_size : RDB_ACTLOG_PAGE + g.bitmap_bytes;
	buf = malloc(len ? len : 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	rc = rdb_pread_all(fd, buf, len, 0);
	close(fd);
	if (rc == 0)
		rc = rdb_actlog_decode(buf, len, disk_size, out, err, errlen);
	else
		snprintf(err, errlen, "activity log %s: %s", path, strerror(-rc));
	free(buf);
	return rc;
}

bool rdb_actlog_view_test(const struct rdb_actlog_view *v, uint64_t ext)
{
	return v->bits && ext < v->nr_extents && bit(v->bits, ext);
}

void rdb_actlog_view_dispose(struct rdb_actlog_view *v)
{
	free(v->bits);
	memset(v, 0, sizeof(*v));
}

static int rewrite_file(const char *path, bool rewritten, char *err,
			size_t errlen)
{
	struct rdb_actlog_hdr h;
	uint8_t page[RDB_ACTLOG_PAGE];
	int fd = open(path, O_RDWR | O_CLOEXEC), rc;

	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "activity log %s: %s", path, strerror(errno));
		return rc;
	}
	rc = rdb_pread_all(fd, page, sizeof(page), 0);
	if (rc == 0 && rdb_actlog_hdr_decode(page, sizeof(page), &h) == 0 &&
	    (h.generation || (rewritten && h.flags))) {
		if (h.generation > h.dead_gen)
			h.dead_gen = h.generation;
		h.generation = 0;
		if (rewritten)
			h.flags = 0;
		rdb_actlog_hdr_encode(&h, page);
		rc = rdb_pwrite_all(fd, page, sizeof(page), 0);
		if (rc == 0 && fdatasync(fd) < 0)
			rc = -errno;
	}
	close(fd);
	if (rc < 0)
		snprintf(err, errlen, "activity log %s: invalidating it: %s",
			 path, strerror(-rc));
	return rc;
}

int rdb_actlog_invalidate_file(const char *path, char *err, size_t errlen)
{
	return rewrite_file(path, false, err, errlen);
}

int rdb_actlog_reset_file(const char *path, char *err, size_t errlen)
{
	return rewrite_file(path, true, err, errlen);
}

// SPDX-License-Identifier: GPL-2.0-only
#include "stage.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A staged record, host byte order: block:u32 offset:u64 enc:u8 body. */
#define REC_HDR 13

void rdb_stage_init(struct rdb_stage *st)
{
	memset(st, 0, sizeof(*st));
	rdb_buf_init(&st->pages);
}

void rdb_stage_dispose(struct rdb_stage *st)
{
	rdb_buf_dispose(&st->pages);
	free(st->devstate);
	free(st->c.devstate);
	memset(st, 0, sizeof(*st));
}

const char *rdb_stage_error(const struct rdb_stage *st)
{
	return st->err[0] ? st->err : "no error";
}

static int fail(struct rdb_stage *st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(st->err, sizeof(st->err), fmt, ap);
	va_end(ap);
	return -EPROTO;
}

/* The next epoch after the committed one opens on its first message. */
static int open_epoch(struct rdb_stage *st, uint64_t epoch)
{
	uint64_t want = st->have_committed ? st->c.epoch + 1 : 0;

	if (st->open) {
		if (epoch != st->epoch)
			return fail(st, "epoch %llu data while %llu is staged",
				    (unsigned long long)epoch,
				    (unsigned long long)st->epoch);
		return 0;
	}
	if (epoch != want)
		return fail(st, "epoch %llu out of order (expected %llu)",
			    (unsigned long long)epoch, (unsigned long long)want);
	st->open = true;
	st->epoch = epoch;
	return 0;
}

/*
 * Staging memory grows with the epoch.  A checkpoint sends each dirty page
 * once, so an epoch over the VM's RAM is a confused or hostile peer; the
 * slack of 4x only bounds memory, it is no tuning knob.
 */
static uint64_t max_epoch_pages(const struct rdb_ramimage *img)
{
	uint64_t total = 0;

	for (size_t i = 0; i < img->n; i++)
		total += img->b[i].length / RDB_PAGE_SIZE;
	return 4 * total;
}

int rdb_stage_add_pages(struct rdb_stage *st, const struct rdb_frame *f,
			const struct rdb_ramimage *img)
{
	struct rdb_pages_iter it, first;
	struct rdb_page_rec r;
	uint64_t npages = 0, bytes = 0, length;
	size_t room = 0;
	int rc = open_epoch(st, f->epoch);

	if (rc < 0)
		return rc;
	if (rdb_msg_pages_begin(f, &it) < 0)
		return fail(st, "malformed PAGES");
	if (it.block >= img->n)
		return fail(st, "PAGES for block %u of %zu", it.block, img->n);
	length = img->b[it.block].length;
	/* First pass: every record checked before any is kept, so a bad
	 * frame leaves the staged epoch (and the image) as it was. */
	first = it;
	while ((rc = rdb_msg_pages_next(&it, &r)) == 1) {
		size_t body = r.enc == RDB_PAGE_RAW ? RDB_PAGE_SIZE : 1;

		if (r.offset % RDB_PAGE_SIZE || r.offset >= length)
			return fail(st, "page 0x%llx outside block %s",
				    (unsigned long long)r.offset,
				    img->b[it.block].idstr);
		npages++;
		bytes += body;
		room += REC_HDR + body;
	}
	if (rc < 0)
		return fail(st, "malformed page record in PAGES");
	if (st->npages + npages > max_epoch_pages(img))
		return fail(st, "epoch %llu sends more pages than 4x the VM's RAM",
			    (unsigned long long)st->epoch);
	it = first;
	/* Epoch 0, the initial state, goes straight into the image: before
	 * it commits there is nothing to keep consistent (no failover is
	 * possible), and staging it would hold a copy of the guest's whole
	 * RAM in memory. */
	if (!st->have_committed) {
		while (rdb_msg_pages_next(&it, &r) == 1) {
			uint8_t *dst = img->b[it.block].base + r.offset;

			if (r.enc == RDB_PAGE_RAW)
				memcpy(dst, r.data, RDB_PAGE_SIZE);
			else
				memset(dst, r.fill, RDB_PAGE_SIZE);
		}
		goto counted;
	}
	/* Later epochs: one arena, one reservation per frame. */
	if (!rdb_buf_reserve(&st->pages, room))
		return -ENOMEM;
	while (rdb_msg_pages_next(&it, &r) == 1) {
		uint8_t *p = st->pages.data + st->pages.len;
		size_t body = r.enc == RDB_PAGE_RAW ? RDB_PAGE_SIZE : 1;

		memcpy(p, &it.block, 4);
		memcpy(p + 4, &r.offset, 8);
		p[12] = (uint8_t)r.enc;
		if (r.enc == RDB_PAGE_RAW)
			memcpy(p + REC_HDR, r.data, RDB_PAGE_SIZE);
		else
			p[REC_HDR] = r.fill;
		st->pages.len += REC_HDR + body;
	}
counted:
	st->npages += npages;
	st->bytes += bytes;
	return 0;
}

static int disk_fail(struct rdb_stage *st, int rc)
{
	snprintf(st->err, sizeof(st->err), "%s", rdb_diskbuf_error(st->disk));
	return rc;
}

int rdb_stage_add_disk(struct rdb_stage *st, const struct rdb_frame *f)
{
	const uint8_t *data;
	uint64_t off, len;
	enum rdb_disk_op op;
	int rc = open_epoch(st, f->epoch);

	if (rc < 0)
		return rc;
	if (!st->disk)
		return fail(st, "%s for a VM without a disk", rdb_msg_name(f->type));
	if (rdb_msg_disk_parse(f, &off, &len, &data) < 0)
		return fail(st, "malformed %s", rdb_msg_name(f->type));
	op = f->type == RDB_MSG_DISK_WRITE ? RDB_DISK_WRITE :
		f->type == RDB_MSG_DISK_ZERO ? RDB_DISK_ZERO : RDB_DISK_FLUSH;
	if (op != RDB_DISK_FLUSH && rdb_diskbuf_check_range(st->disk, off, len) < 0)
		return fail(st, "%s of %llu bytes at %llu outside the %llu-byte disk",
			    rdb_msg_name(f->type), (unsigned long long)len,
			    (unsigned long long)off,
			    (unsigned long long)st->disk->size);
	/* Epoch 0 (the initial copy) goes straight to the replica, like its
	 * pages.  Its flushes are folded into one sync at its commit. */
	if (!st->have_committed) {
		if (op != RDB_DISK_FLUSH) {
			rc = rdb_diskbuf_apply_one(st->disk, op, off, len, data);
			if (rc < 0)
				return disk_fail(st, rc);
		}
	} else {
		rc = rdb_diskbuf_add(st->disk, op, off, len, data);
		if (rc < 0)
			return disk_fail(st, rc);
	}
	st->npages++;
	st->bytes += op == RDB_DISK_WRITE ? len : 0;
	return 0;
}

int rdb_stage_set_devstate(struct rdb_stage *st, uint64_t epoch,
			   const uint8_t *blob, size_t len)
{
	int rc = open_epoch(st, epoch);

	if (rc < 0)
		return rc;
	if (st->devstate)
		return fail(st, "two device states in epoch %llu",
			    (unsigned long long)epoch);
	if (len == 0 || blob[len - 1] != 0)
		return fail(st, "device state of epoch %llu does not end in EOF",
			    (unsigned long long)epoch);
	st->devstate = malloc(len);
	if (!st->devstate)
		return -ENOMEM;
	memcpy(st->devstate, blob, len);
	st->devstate_len = len;
	return 0;
}

int rdb_stage_commit(struct rdb_stage *st, uint64_t epoch, uint64_t pages,
		     uint64_t bytes, struct rdb_ramimage *img)
{
	const uint8_t *p, *end;
	int rc = open_epoch(st, epoch);

	if (rc < 0)
		return rc;
	if (!st->devstate)
		return fail(st, "epoch %llu ended without device state",
			    (unsigned long long)epoch);
	if (pages != st->npages || bytes != st->bytes + st->devstate_len)
		return fail(st, "epoch %llu incomplete: %llu/%llu pages, "
			    "%llu/%llu bytes", (unsigned long long)epoch,
			    (unsigned long long)st->npages,
			    (unsigned long long)pages,
			    (unsigned long long)(st->bytes + st->devstate_len),
			    (unsigned long long)bytes);
	/* The disk first: it is the only part that can still fail (the
	 * replica's filesystem), and if it does, RAM keeps the old epoch. */
	if (st->disk) {
		rc = st->have_committed ? rdb_diskbuf_apply(st->disk) :
			rdb_diskbuf_sync(st->disk);
		if (rc < 0)
			return disk_fail(st, rc);
	}
	/* From here on nothing can fail, so the apply is whole. */
	p = st->pages.data;
	end = p + st->pages.len;
	while (p < end) {
		uint32_t blk;
		uint64_t off;
		uint8_t *dst;

		memcpy(&blk, p, 4);
		memcpy(&off, p + 4, 8);
		dst = img->b[blk].base + off;
		if (p[12] == RDB_PAGE_RAW) {
			memcpy(dst, p + REC_HDR, RDB_PAGE_SIZE);
			p += REC_HDR + RDB_PAGE_SIZE;
		} else {
			memset(dst, p[REC_HDR], RDB_PAGE_SIZE);
			p += REC_HDR + 1;
		}
	}
	free(st->c.devstate);
	st->c.devstate = st->devstate;
	st->c.devstate_len = st->devstate_len;
	st->c.epoch = epoch;
	st->have_committed = true;
	st->devstate = NULL;
	st->devstate_len = 0;
	rdb_buf_reset(&st->pages);
	st->npages = st->bytes = 0;
	st->open = false;
	return 0;
}

void rdb_stage_discard(struct rdb_stage *st)
{
	if (st->disk)
		rdb_diskbuf_discard(st->disk);
	free(st->devstate);
	st->devstate = NULL;
	st->devstate_len = 0;
	rdb_buf_reset(&st->pages);
	st->npages = st->bytes = 0;
	st->open = false;
}

const struct rdb_committed *rdb_stage_committed(const struct rdb_stage *st)
{
	return st->have_committed ? &st->c : NULL;
}

// SPDX-License-Identifier: GPL-2.0-only
#include "stage.h"
#include "xorrle.h"
#include "pagedigest.h"

#include <lz4.h>
#include <openssl/evp.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A staged record, host byte order: block:u32 offset:u64 enc:u8 body. */
#define REC_HDR 13
/* A staged record's encoding (no RDB_PAGE_*): a DISKREF of a later epoch,
 * its page to be read at the commit, on the disk step's thread (its body,
 * RDB_PAGE_SIZE bytes, holds disk_offset:u64 and the SHA-256 until then) */
#define STAGED_DISKREF 0x80

void rdb_stage_init(struct rdb_stage *st)
{
	memset(st, 0, sizeof(*st));
	rdb_buf_init(&st->pages);
	rdb_buf_init(&st->scratch);
	rdb_buf_init(&st->flowrecs);
}

void rdb_stage_dispose(struct rdb_stage *st)
{
	rdb_buf_dispose(&st->pages);
	rdb_buf_dispose(&st->scratch);
	rdb_buf_dispose(&st->flowrecs);
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

/* Bytes a record's body counts for in EPOCH_END, and its staged size. */
static size_t body_bytes(const struct rdb_page_rec *r)
{
	switch (r->enc) {
	case RDB_PAGE_RAW:
		return RDB_PAGE_SIZE;
	case RDB_PAGE_ZERO:
		return 1;
	case RDB_PAGE_DISKREF:
		return RDB_PAGE_DISKREF_BODY;
	default:
		return 2 + (size_t)r->len;
	}
}

/* A staged record's whole length (header and body) in the arena. */
static size_t staged_len(const uint8_t *rec)
{
	uint16_t n;

	switch (rec[12]) {
	case RDB_PAGE_ZERO:
		return REC_HDR + 1;
	case RDB_PAGE_XORRLE:
		memcpy(&n, rec + REC_HDR, 2);
		return REC_HDR + 2 + (size_t)n;
	default:		/* RAW, STAGED_DISKREF */
		return REC_HDR + RDB_PAGE_SIZE;
	}
}

static size_t staged_body(const struct rdb_page_rec *r)
{
	switch (r->enc) {
	case RDB_PAGE_ZERO:
		return 1;
	case RDB_PAGE_XORRLE:
		return 2 + (size_t)r->len;
	default:		/* RAW, LZ4 decompressed, DISKREF resolved */
		return RDB_PAGE_SIZE;
	}
}

/*
 * A page of one byte value, written only if the image's page differs.
 * The image is a shared mapping of a preallocated file: writing a page
 * that already holds the value still faults it writable, dirties it and
 * has it written back.  Measured on this host's ext4, 256 MiB of zero
 * pages memset over a fresh image: 565 ms plus 105 ms of writeback,
 * against 29 ms to read and compare them; that write held the backup's
 * event loop up to 870 ms during an initial copy, and its writeback
 * stalled other file writes on the host.
 */
static void fill_page(uint8_t *dst, uint8_t fill)
{
	uint64_t word = 0x0101010101010101ull * fill, w;

	for (size_t i = 0; i < RDB_PAGE_SIZE; i += sizeof(w)) {
		memcpy(&w, dst + i, sizeof(w));
		if (w != word) {
			memset(dst, fill, RDB_PAGE_SIZE);
			return;
		}
	}
}

static void apply_page(uint8_t *dst, uint8_t enc, const uint8_t *body)
{
	uint16_t n;

	switch (enc) {
	case RDB_PAGE_RAW:
		memcpy(dst, body, RDB_PAGE_SIZE);
		break;
	case RDB_PAGE_ZERO:
		fill_page(dst, body[0]);
		break;
	case RDB_PAGE_XORRLE:
		memcpy(&n, body, 2);
		/* checked when staged: cannot fail */
		rdb_xorrle_decode(dst, RDB_PAGE_SIZE, body + 2, n);
		break;
	}
}

/*
 * Disk read tracking: the page is the disk block at r->disk_offset as the
 * replica holds it at this epoch's commit (every disk change of the epoch
 * precedes its pages in the stream, so the replica plus the buffered
 * changes is that state).  Its SHA-256 must be the one the primary sent:
 * otherwise the epoch is refused, never a wrong page kept.  The contents
 * go to the scratch arena, staged as RAW.
 */
static int disk_fail(struct rdb_stage *st, struct rdb_diskbuf *db, int rc);

/* A DISKREF's disk (device index) and offset on it: the wire's offset
 * names the disk with RDB_FEATURE_DISKREF_DEVS granted (proto.h). */
static unsigned diskref_dev(const struct rdb_stage *st, uint64_t wire)
{
	return st->features & RDB_FEATURE_DISKREF_DEVS ?
		(unsigned)(wire >> RDB_DISKREF_DEV_SHIFT) : 0;
}

static uint64_t diskref_off(const struct rdb_stage *st, uint64_t wire)
{
	return st->features & RDB_FEATURE_DISKREF_DEVS ?
		wire & RDB_DISKREF_OFF_MASK : wire;
}

/* The checks a DISKREF passes when staged: its disk, an offset inside it. */
static int diskref_check(struct rdb_stage *st, const char *blockid,
			 const struct rdb_page_rec *r)
{
	unsigned dev = diskref_dev(st, r->disk_offset);
	uint64_t off = diskref_off(st, r->disk_offset);
	struct rdb_diskbuf *disk = dev < st->ndisks ? st->disks[dev] : NULL;

	if (!disk)
		return fail(st, "DISKREF for page 0x%llx of %s: the VM has no "
			    "disk %u (%u disks)", (unsigned long long)r->offset,
			    blockid, dev, st->ndisks);
	if (rdb_diskbuf_check_range(disk, off, RDB_PAGE_SIZE) < 0)
		return fail(st, "DISKREF for page 0x%llx of %s: disk offset %llu "
			    "is beyond disk %u's %llu bytes",
			    (unsigned long long)r->offset, blockid,
			    (unsigned long long)off, dev,
			    (unsigned long long)disk->size);
	return 0;
}

/* The referenced block (wire: its disk and offset, checked by
 * diskref_check) into dst, its SHA-256 checked against hash. */
static int diskref_read(struct rdb_stage *st, const char *blockid,
			uint64_t page_off, uint64_t wire,
			const uint8_t *hash, uint8_t *dst)
{
	unsigned dev = diskref_dev(st, wire);
	uint64_t disk_off = diskref_off(st, wire);
	struct rdb_diskbuf *disk = st->disks[dev];
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	int rc;

	rc = rdb_diskbuf_read_applied(disk, disk_off, dst, RDB_PAGE_SIZE);
	if (rc < 0)
		return disk_fail(st, disk, rc);
	if (!EVP_Digest(dst, RDB_PAGE_SIZE, md, &mdlen, EVP_sha256(), NULL) ||
	    mdlen != RDB_DISKREF_HASH_LEN)
		return fail(st, "DISKREF: SHA-256 unavailable");
	if (memcmp(md, hash, RDB_DISKREF_HASH_LEN))
		return fail(st, "DISKREF for page 0x%llx of %s in epoch %llu: the "
			    "replica's block at disk %u's offset %llu does not "
			    "hold the referenced contents (SHA-256 mismatch)",
			    (unsigned long long)page_off, blockid,
			    (unsigned long long)st->epoch, dev,
			    (unsigned long long)disk_off);
	st->diskrefs++;
	st->diskrefs_dev[dev]++;
	return 0;
}

/* Epoch 0's DISKREF, read now into the scratch arena (staged as RAW). */
static int resolve_diskref(struct rdb_stage *st, const char *blockid,
			   const struct rdb_page_rec *r)
{
	uint8_t *dst;
	int rc = diskref_check(st, blockid, r);

	if (rc < 0)
		return rc;
	dst = rdb_buf_reserve(&st->scratch, RDB_PAGE_SIZE);
	if (!dst)
		return -ENOMEM;
	rc = diskref_read(st, blockid, r->offset, r->disk_offset, r->data, dst);
	if (rc < 0)
		return rc;
	st->scratch.len += RDB_PAGE_SIZE;
	return 0;
}

/*
 * A later epoch's DISKREF pages, read at its commit: on the disk step's
 * thread, off the event loop (one uncached block per reference, and on a
 * busy disk each took up to hundreds of ms there).  The replica plus the
 * epoch's buffered changes is the same state at stage time and at the
 * commit, the epoch's pages coming after all of its disk changes.
 */
static int resolve_staged(struct rdb_stage *st)
{
	uint8_t *p = st->pages.data, *end = p + st->pages.len;
	uint8_t blk[RDB_PAGE_SIZE];

	for (; p < end && st->pending_refs; p += staged_len(p)) {
		uint32_t b;
		uint64_t off, doff;
		char id[32];
		int rc;

		if (p[12] != STAGED_DISKREF)
			continue;
		memcpy(&b, p, 4);
		memcpy(&off, p + 4, 8);
		memcpy(&doff, p + REC_HDR, 8);
		snprintf(id, sizeof(id), "RAM block %u", b);
		rc = diskref_read(st, id, off, doff, p + REC_HDR + 8, blk);
		if (rc < 0)
			return rc;
		memcpy(p + REC_HDR, blk, RDB_PAGE_SIZE);
		p[12] = RDB_PAGE_RAW;
		st->pending_refs--;
	}
	return 0;
}

int rdb_stage_add_pages(struct rdb_stage *st, const struct rdb_frame *f,
			const struct rdb_ramimage *img)
{
	struct rdb_pages_iter it, first;
	struct rdb_page_rec r;
	uint64_t npages = 0, bytes = 0, length;
	size_t room = 0, k;
	int rc = open_epoch(st, f->epoch);

	if (rc < 0)
		return rc;
	if (rdb_msg_pages_begin(f, &it) < 0)
		return fail(st, "malformed PAGES (%u bytes: short, or too short "
			    "for the records its header counts)", f->len);
	if (it.block >= img->n)
		return fail(st, "PAGES for block %u of %zu", it.block, img->n);
	length = img->b[it.block].length;
	/* The first pass below decodes LZ4 and DISKREF pages, 4 KiB each,
	 * before the frame is known to be good: the count, which
	 * rdb_msg_pages_next holds the frame to, is checked first, so that
	 * what a frame can make us allocate is bounded by the epoch's
	 * bound and by RDB_PROTO_MAX_FRAME_PAGES (64 MiB). */
	if (it.left > RDB_PROTO_MAX_FRAME_PAGES)
		return fail(st, "PAGES of %u records: at most %u in a frame",
			    it.left, RDB_PROTO_MAX_FRAME_PAGES);
	if (st->npages + it.left > max_epoch_pages(img))
		return fail(st, "epoch %llu sends more pages than 4x the VM's RAM",
			    (unsigned long long)st->epoch);
	/* First pass: every record checked before any is kept, so a bad
	 * frame leaves the staged epoch (and the image) as it was.  LZ4
	 * pages are decompressed here, into the scratch arena. */
	first = it;
	rdb_buf_reset(&st->scratch);
	while ((rc = rdb_msg_pages_next(&it, &r)) == 1) {
		if (r.offset % RDB_PAGE_SIZE || r.offset >= length)
			return fail(st, "page 0x%llx outside block %s",
				    (unsigned long long)r.offset,
				    img->b[it.block].idstr);
		if ((r.enc == RDB_PAGE_XORRLE && !(st->features & RDB_FEATURE_XORRLE)) ||
		    (r.enc == RDB_PAGE_LZ4 && !(st->features & RDB_FEATURE_LZ4)) ||
		    (r.enc == RDB_PAGE_DISKREF && !(st->features & RDB_FEATURE_DISKREF)))
			return fail(st, "page encoding %d was not negotiated", r.enc);
		if (r.enc == RDB_PAGE_XORRLE &&
		    rdb_xorrle_check(RDB_PAGE_SIZE, r.data, r.len) < 0)
			return fail(st, "corrupt XOR+RLE delta for page 0x%llx",
				    (unsigned long long)r.offset);
		if (r.enc == RDB_PAGE_LZ4) {
			uint8_t *dst = rdb_buf_reserve(&st->scratch, RDB_PAGE_SIZE);

			if (!dst)
				return -ENOMEM;
			if (LZ4_decompress_safe((const char *)r.data, (char *)dst,
						r.len, RDB_PAGE_SIZE) != RDB_PAGE_SIZE)
				return fail(st, "corrupt LZ4 block for page 0x%llx",
					    (unsigned long long)r.offset);
			st->scratch.len += RDB_PAGE_SIZE;
		}
		if (r.enc == RDB_PAGE_DISKREF) {
			rc = st->have_committed ?
				diskref_check(st, img->b[it.block].idstr, &r) :
				resolve_diskref(st, img->b[it.block].idstr, &r);
			if (rc < 0)
				return rc;
		}
		npages++;
		bytes += body_bytes(&r);
		room += REC_HDR + staged_body(&r);
	}
	if (rc < 0)
		return fail(st, "malformed page record in PAGES");
	it = first;
	k = 0;
	/* Epoch 0, the initial state, goes straight into the image: before
	 * it commits there is nothing to keep consistent (no failover is
	 * possible), and staging it would hold a copy of the guest's whole
	 * RAM in memory. */
	if (!st->have_committed) {
		while (rdb_msg_pages_next(&it, &r) == 1) {
			uint8_t *dst = img->b[it.block].base + r.offset;

			if (r.enc == RDB_PAGE_RAW) {
				memcpy(dst, r.data, RDB_PAGE_SIZE);
			} else if (r.enc == RDB_PAGE_ZERO) {
				fill_page(dst, r.fill);
			} else if (r.enc == RDB_PAGE_LZ4 || r.enc == RDB_PAGE_DISKREF) {
				memcpy(dst, st->scratch.data + k * RDB_PAGE_SIZE,
				       RDB_PAGE_SIZE);
				k++;
			} else {
				rdb_xorrle_decode(dst, RDB_PAGE_SIZE, r.data, r.len);
			}
		}
		goto counted;
	}
	/* Later epochs: one arena, one reservation per frame. */
	if (!rdb_buf_reserve(&st->pages, room))
		return -ENOMEM;
	while (rdb_msg_pages_next(&it, &r) == 1) {
		uint8_t *p = st->pages.data + st->pages.len;
		uint16_t n = r.len;

		memcpy(p, &it.block, 4);
		memcpy(p + 4, &r.offset, 8);
		switch (r.enc) {
		case RDB_PAGE_RAW:
			p[12] = RDB_PAGE_RAW;
			memcpy(p + REC_HDR, r.data, RDB_PAGE_SIZE);
			break;
		case RDB_PAGE_LZ4:
			p[12] = RDB_PAGE_RAW;
			memcpy(p + REC_HDR, st->scratch.data + k * RDB_PAGE_SIZE,
			       RDB_PAGE_SIZE);
			k++;
			break;
		case RDB_PAGE_DISKREF:
			p[12] = STAGED_DISKREF;
			memset(p + REC_HDR, 0, RDB_PAGE_SIZE);
			memcpy(p + REC_HDR, &r.disk_offset, 8);
			memcpy(p + REC_HDR + 8, r.data, RDB_DISKREF_HASH_LEN);
			st->pending_refs++;
			break;
		case RDB_PAGE_ZERO:
			p[12] = RDB_PAGE_ZERO;
			p[REC_HDR] = r.fill;
			break;
		default:
			p[12] = RDB_PAGE_XORRLE;
			memcpy(p + REC_HDR, &n, 2);
			memcpy(p + REC_HDR + 2, r.data, n);
			break;
		}
		st->pages.len += REC_HDR + staged_body(&r);
	}
counted:
	st->npages += npages;
	st->bytes += bytes;
	return 0;
}

static int disk_fail(struct rdb_stage *st, struct rdb_diskbuf *db, int rc)
{
	snprintf(st->err, sizeof(st->err), "%s", rdb_diskbuf_error(db));
	return rc;
}

int rdb_stage_add_disk(struct rdb_stage *st, const struct rdb_frame *f)
{
	struct rdb_diskbuf *disk;
	const uint8_t *data;
	uint64_t off, len;
	enum rdb_disk_op op;
	int rc;

	/* A disk this backup keeps no replica of: its change must never
	 * land in another's (I4); refused before the frame opens an epoch. */
	if (f->device >= st->ndisks)
		return fail(st, "%s for disk %u: this backup keeps %u disk "
			    "replica(s)", rdb_msg_name(f->type), f->device,
			    st->ndisks);
	disk = st->disks[f->device];
	rc = open_epoch(st, f->epoch);
	if (rc < 0)
		return rc;
	if (rdb_msg_disk_parse(f, &off, &len, &data) < 0)
		return fail(st, "malformed %s", rdb_msg_name(f->type));
	op = f->type == RDB_MSG_DISK_WRITE ? RDB_DISK_WRITE :
		f->type == RDB_MSG_DISK_ZERO ? RDB_DISK_ZERO : RDB_DISK_FLUSH;
	if (op != RDB_DISK_FLUSH && rdb_diskbuf_check_range(disk, off, len) < 0)
		return fail(st, "%s of %llu bytes at %llu outside the %llu-byte "
			    "disk %u", rdb_msg_name(f->type),
			    (unsigned long long)len, (unsigned long long)off,
			    (unsigned long long)disk->size, f->device);
	/* Epoch 0 (the initial copy) goes straight to the replica, like its
	 * pages.  Its flushes are folded into one sync at its commit. */
	if (!st->have_committed) {
		if (op != RDB_DISK_FLUSH) {
			rc = rdb_diskbuf_apply_one(disk, op, off, len, data);
			if (rc < 0)
				return disk_fail(st, disk, rc);
			if (op == RDB_DISK_WRITE)
				rdb_diskbuf_initial_written(disk, len);
		}
	} else {
		rc = rdb_diskbuf_add(disk, op, off, len, data);
		if (rc < 0)
			return disk_fail(st, disk, rc);
	}
	st->npages++;
	st->bytes += op == RDB_DISK_WRITE ? len : 0;
	return 0;
}

/* A staged flow record and its NIC. */
struct staged_flow {
	uint32_t nic;
	struct rdb_flow_rec r;
};

int rdb_stage_add_flows(struct rdb_stage *st, const struct rdb_frame *f)
{
	struct rdb_flows_iter it;
	struct staged_flow sf = { .nic = f->device };
	size_t before = st->flowrecs.len;
	int rc;

	if (!(st->features & RDB_FEATURE_FLOWS))
		return fail(st, "FLOWS in epoch %llu, not negotiated",
			    (unsigned long long)f->epoch);
	if (f->device >= st->nflows)
		return fail(st, "FLOWS in epoch %llu for NIC %u: the VM has %u "
			    "here", (unsigned long long)f->epoch, f->device,
			    st->nflows);
	rc = open_epoch(st, f->epoch);
	if (rc < 0)
		return rc;
	if (rdb_msg_flows_begin(f, &it) < 0)
		return fail(st, "malformed FLOWS in epoch %llu",
			    (unsigned long long)f->epoch);
	while ((rc = rdb_msg_flows_next(&it, &sf.r)) == 1) {
		if (rdb_buf_append(&st->flowrecs, &sf, sizeof(sf)) < 0) {
			st->flowrecs.len = before;
			return -ENOMEM;
		}
	}
	if (rc < 0) {
		st->flowrecs.len = before;	/* whole or not at all */
		return fail(st, "malformed flow record in epoch %llu",
			    (unsigned long long)f->epoch);
	}
	st->npages++;
	st->bytes += f->len;
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

int rdb_stage_set_verify(struct rdb_stage *st, uint64_t epoch,
			 uint64_t digest, uint64_t pages)
{
	int rc;

	if (!(st->features & RDB_FEATURE_VERIFY))
		return fail(st, "VERIFY in epoch %llu, not negotiated",
			    (unsigned long long)epoch);
	rc = open_epoch(st, epoch);
	if (rc < 0)
		return rc;
	if (st->verify)
		return fail(st, "two VERIFY in epoch %llu", (unsigned long long)epoch);
	st->verify = true;
	st->verify_digest = digest;
	st->verify_pages = pages;
	return 0;
}

int rdb_stage_commit_check(struct rdb_stage *st, uint64_t epoch,
			   uint64_t pages, uint64_t bytes)
{
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
	return 0;
}

int rdb_stage_commit_disk(struct rdb_stage *st)
{
	int rc = 0;

	if (!st->ndisks)
		return 0;
	/* the references first: a wrong one leaves the replica as it was */
	if (st->pending_refs && (rc = resolve_staged(st)) < 0)
		return rc;
	/* every disk's part of the epoch, or none (diskbuf.h) */
	if (st->have_committed) {
		unsigned bad = 0;

		rc = rdb_diskbuf_apply_set(st->disks, st->ndisks, &bad);
		return rc < 0 ? disk_fail(st, st->disks[bad], rc) : 0;
	}
	for (unsigned i = 0; i < st->ndisks && rc == 0; i++)
		if ((rc = rdb_diskbuf_sync(st->disks[i])) < 0)
			return disk_fail(st, st->disks[i], rc);
	return 0;
}

int rdb_stage_commit_apply(struct rdb_stage *st, uint64_t epoch,
			   struct rdb_ramimage *img)
{
	const uint8_t *p, *end;
	uint64_t digest = 0, npages = 0;
	bool verify = st->verify;

	if (st->pending_refs)
		return fail(st, "epoch %llu: %llu DISKREF pages not read (the "
			    "disk step did not run)", (unsigned long long)epoch,
			    (unsigned long long)st->pending_refs);
	p = st->pages.data;
	end = p + st->pages.len;
	for (; p < end; p += staged_len(p)) {
		uint32_t blk;
		uint64_t off;

		memcpy(&blk, p, 4);
		memcpy(&off, p + 4, 8);
		apply_page(img->b[blk].base + off, p[12], p + REC_HDR);
		if (verify) {
			digest += rdb_page_digest(blk, off, img->b[blk].base + off);
			npages++;
		}
	}
	{
		const struct staged_flow *sf = (const struct staged_flow *)st->flowrecs.data;

		for (size_t i = 0; i < st->flowrecs.len / sizeof(*sf); i++)
			if (sf[i].nic < st->nflows && st->flows[sf[i].nic])
				rdb_flowcheck_apply(st->flows[sf[i].nic], &sf[i].r);
	}
	rdb_buf_reset(&st->flowrecs);
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
	st->verify = false;
	if (verify && (digest != st->verify_digest || npages != st->verify_pages))
		return fail(st, "VERIFY: epoch %llu's %llu pages as applied do not "
			    "match the primary's %llu pages (digest %016llx, the "
			    "primary's %016llx): a page was rebuilt wrong",
			    (unsigned long long)epoch, (unsigned long long)npages,
			    (unsigned long long)st->verify_pages,
			    (unsigned long long)digest,
			    (unsigned long long)st->verify_digest);
	if (verify)
		st->verified++;
	return 0;
}

int rdb_stage_commit(struct rdb_stage *st, uint64_t epoch, uint64_t pages,
		     uint64_t bytes, struct rdb_ramimage *img)
{
	int rc = rdb_stage_commit_check(st, epoch, pages, bytes);

	/* The disk first: it is the only part that can still fail (the
	 * replica's filesystem), and if it does, RAM keeps the old epoch. */
	if (rc == 0)
		rc = rdb_stage_commit_disk(st);
	/* From here on nothing can fail, so the apply is whole. */
	return rc < 0 ? rc : rdb_stage_commit_apply(st, epoch, img);
}

void rdb_stage_discard(struct rdb_stage *st)
{
	st->verify = false;
	for (unsigned i = 0; i < st->ndisks; i++)
		rdb_diskbuf_discard(st->disks[i]);
	free(st->devstate);
	st->devstate = NULL;
	st->devstate_len = 0;
	rdb_buf_reset(&st->pages);
	rdb_buf_reset(&st->flowrecs);
	st->npages = st->bytes = 0;
	st->pending_refs = 0;
	st->open = false;
}

const struct rdb_committed *rdb_stage_committed(const struct rdb_stage *st)
{
	return st->have_committed ? &st->c : NULL;
}

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Epoch staging on the backup.  Everything of epoch N is kept aside until
 * EPOCH_END(N) proves it complete; only then is it applied — pages into
 * the RAM image, the device state swapped in — so the image always holds
 * exactly one committed epoch.  A failover discards the staged epoch.
 *
 * Epoch 0 (the initial state) is the exception: its pages are written to
 * the image as they arrive.  Until it commits no failover is possible, so
 * nothing can observe a half-written image, and staging it would need as
 * much memory as the guest has RAM.
 */
#ifndef RDB_STAGE_H
#define RDB_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "config.h"
#include "diskbuf.h"
#include "flowcheck.h"
#include "proto.h"
#include "ramimage.h"

struct rdb_committed {
	uint64_t epoch;
	uint8_t *devstate;
	size_t devstate_len;
};

struct rdb_stage {
	bool open;
	uint64_t epoch;
	struct rdb_buf pages;	/* records: block:u32 offset:u64 enc:u8 body */
	uint64_t npages, bytes;	/* records (pages + disk frames), their bytes */
	/* the VM's disks, by device index (DISK_* frames' `device`, and a
	 * DISKREF's disk: proto.h) */
	struct rdb_diskbuf *disks[RDB_DISKS_MAX];
	unsigned ndisks;
	/* FLOWS records go here at commit, by NIC (the frames' device) */
	struct rdb_flowcheck *flows[RDB_NICS_MAX];
	unsigned nflows;
	struct rdb_buf flowrecs;	/* this epoch's, decoded (stage.c) */
	uint32_t features;		/* page encodings granted in HELLO_ACK */
	struct rdb_buf scratch;		/* LZ4 and DISKREF pages of the frame
					 * being staged */
	uint64_t diskrefs;		/* DISKREF pages verified and staged */
	uint64_t diskrefs_dev[RDB_DISKS_MAX];	/* ... by disk */
	uint64_t pending_refs;		/* the open epoch's, read at its
					 * commit (rdb_stage_commit_disk) */
	bool verify;			/* a VERIFY came for the open epoch */
	uint64_t verify_digest, verify_pages;
	uint64_t verified;		/* epochs whose VERIFY matched */
	uint8_t *devstate;
	size_t devstate_len;
	bool have_committed;
	struct rdb_committed c;
	char err[160];
};

void rdb_stage_init(struct rdb_stage *st);
void rdb_stage_dispose(struct rdb_stage *st);	/* idempotent */
/*
 * The first message of epoch N opens it; N must be the committed epoch + 1
 * (0 before any commit) and every later message until EPOCH_END must carry
 * N.  Violations, and anything malformed, return -EPROTO with the reason
 * in rdb_stage_error; other errors are -ENOMEM.
 *
 * add_pages stages the page records of a PAGES frame after checking every
 * one against the image (block exists, offset page-aligned and inside the
 * block, encoding known and granted in st->features, an XOR+RLE delta
 * well-formed, an LZ4 block decompressing to exactly one page): a frame
 * is taken whole or not at all.  LZ4 pages are staged decompressed; XOR
 * deltas are applied at commit, in order, to the page as the image then
 * holds it (the previous epoch's version, which the primary's delta was
 * computed against).  A DISKREF page (a disk, an offset inside it) is read
 * from the replica and checked against its SHA-256 at once in epoch 0,
 * at the commit later (rdb_stage_commit_disk).
 */
int rdb_stage_add_pages(struct rdb_stage *st, const struct rdb_frame *f,
			const struct rdb_ramimage *img);
/*
 * add_disk takes a DISK_WRITE, DISK_ZERO or DISK_FLUSH frame: checked
 * against st->disk, written to the replica at once in epoch 0, buffered
 * in st->disk later.  A replica that cannot be written returns its errno
 * (-ENOSPC, -EIO, ...) with the reason in rdb_stage_error; a buffer over
 * its bound is -EFBIG.
 */
int rdb_stage_add_disk(struct rdb_stage *st, const struct rdb_frame *f);
/*
 * add_flows takes a FLOWS frame (feature FLOWS granted): every record is
 * checked when staged; they reach st->flows[the frame's device] when the
 * epoch commits.  A NIC past nflows is refused.
 */
int rdb_stage_add_flows(struct rdb_stage *st, const struct rdb_frame *f);
int rdb_stage_set_devstate(struct rdb_stage *st, uint64_t epoch,
			   const uint8_t *blob, size_t len);
/* VERIFY (feature granted): checked after the epoch is applied, over the
 * pages as the image then holds them (pagedigest.h); a mismatch is
 * -EPROTO from rdb_stage_commit, the epoch applied (it is a test mode:
 * the link is refused, the image is not served). */
int rdb_stage_set_verify(struct rdb_stage *st, uint64_t epoch,
			 uint64_t digest, uint64_t pages);
/* Applies the staged epoch if it is next in line and complete: pages ==
 * the records staged (page records and disk frames), bytes == the page
 * bodies + the disk write data + the device state's length, device state
 * present.  The disk changes are applied first: if the replica fails
 * (full disk, I/O error) the error is returned, the RAM image is
 * untouched and the epoch stays staged, its disk changes ready to be
 * replayed.  After 0 the image, the disk and rdb_stage_committed() are
 * exactly this epoch; after an -EPROTO nothing of it was applied (epoch
 * 0's pages and disk excepted, see above) and it stays staged until
 * rdb_stage_discard. */
int rdb_stage_commit(struct rdb_stage *st, uint64_t epoch, uint64_t pages,
		     uint64_t bytes, struct rdb_ramimage *img);
/*
 * rdb_stage_commit in its three steps, for a caller that writes the disk
 * off its event loop (backup.c: a replica's fdatasync can take seconds).
 * check: the epoch is next in line and complete (-EPROTO otherwise).
 * disk: the epoch's DISKREF pages read from the replica and checked
 * (a mismatch refuses the epoch before the replica changes), then the
 * buffered disk changes replayed into the replica (epoch 0: the replica
 * synced); touches only st->disk, st->pages' DISKREF records, the
 * counters and st->err, so it may run on another thread while the
 * caller leaves the stage alone.  apply: the
 * pages into the image, the device state swapped in; it cannot fail but
 * by VERIFY.  Each step only after the one before returned 0.
 */
int rdb_stage_commit_check(struct rdb_stage *st, uint64_t epoch,
			   uint64_t pages, uint64_t bytes);
int rdb_stage_commit_disk(struct rdb_stage *st);
int rdb_stage_commit_apply(struct rdb_stage *st, uint64_t epoch,
			   struct rdb_ramimage *img);
/* Drops the uncommitted epoch (failover, or a link that died); the
 * committed one is untouched and the next epoch may be sent again. */
void rdb_stage_discard(struct rdb_stage *st);
/* The last committed epoch; NULL before the first commit. */
const struct rdb_committed *rdb_stage_committed(const struct rdb_stage *st);
const char *rdb_stage_error(const struct rdb_stage *st);

#endif

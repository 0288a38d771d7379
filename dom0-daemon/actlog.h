/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The activity log (AL) of a primary's disk image, after DRBD's: a small,
 * durable set of "hot" extents (1 MiB each) outside of which the image on
 * this host's disk is known to equal the backup's replica.  After this
 * host lost power and the backup took over, the resync that protects the
 * VM back to this host copies only the log's extents plus the blocks the
 * backup wrote since (wmap.h), not the whole disk (docs/resync.md).
 *
 * The claim, for a log whose durable header says generation G != 0: for
 * every extent NOT set in the durable bitmap, the durable content of the
 * image in that extent equals the content the backup committed for it in
 * protection G, as of its last commit (the extent's last change is both
 * committed there and durable here).  Extents set may differ.  G = 0:
 * no claim ("invalid": the image is no base for a resync).
 *
 * How the disk server (disksrv.c) keeps it true, a change being a write,
 * a write-zeroes or a trim:
 *  - while recording (the ring's `record` with `al_gen` = G): before the
 *    change touches the image, the log is armed for G and the change's
 *    extents are set durably (their bitmap page written, the log
 *    fdatasync()ed): one log sync per change that touches an extent not
 *    in the log, none otherwise.
 *  - arming for G (the first change of protection G): the image is
 *    fdatasync()ed (the initial copy read it after `record` went on, so
 *    the replica has all of it), the header is made invalid if it was not
 *    (synced), the bitmap written with exactly the change's extents
 *    (synced), then the header with G (synced).
 *  - a change while not recording, or recording with al_gen 0, while the
 *    log is armed: the log is invalidated durably first — unless the
 *    ring's `al_keep` asks to keep it and al_gen is the armed generation
 *    (a protection lost with the VM running here): then the change's
 *    extents are set as a recorded change's are, and never retired
 *    until adopted (rdb_actlog_keep, rdb_actlog_adopt).
 *  - retiring: an extent whose last change was put in the ring at a
 *    position <= committed_pos (the backup committed it) and completed
 *    before an fdatasync of the image started (durable here) is cleared
 *    once that sync completed.  Clearing is lazy (written, not synced): a
 *    stale set bit only makes the resync copy more.
 *  - full (max extents set and a change needs another): the image is
 *    synced inline and what is eligible retired; if that frees too
 *    little, the log is invalidated for G: a resync after a failover in
 *    this protection copies the whole disk.
 *  - a generation, once left (invalidated, replaced, or its arming
 *    failed), is never armed again: arming in the middle of a protection
 *    would claim changes the log never saw.  The log arms only a
 *    generation above every one it was armed for or gave up on (dead_gen,
 *    kept in the header): remusdbd must give every protection of an image
 *    a generation greater than the ones before (a persisted counter).
 *  - an fdatasync of the image fails (a retire's, an arming's, the
 *    guest's flush, remusdbd's: rdb_actlog_image_sync_failed): the kernel
 *    may have dropped the pages it could not write, and a later sync that
 *    succeeds proves nothing about them — neither for retiring nor for
 *    arming.  The log is invalidated with RDB_ACTLOG_F_IMAGE_LOST in its
 *    header, and never armed again until rdb_actlog_reset_file (the
 *    image about to be copied whole).
 *
 * Failures.  The log cannot be written or synced (an add or an arming):
 * it is invalidated (header generation 0, synced), the generation is
 * dead, and the change goes on, untracked — as for a full log.  If the
 * invalidation fails too, the durable log may claim what is no longer
 * true: rdb_actlog_before returns that error, the disk server gives up on
 * the replica (RDB_DRING_ACTLOG: recording stops, remusdbd drops the
 * protection, so G never becomes the base of a resync) and serves the
 * change all the same; the guest never gets an error from the log.  Every
 * later change retries the invalidation first.  A failed image sync of a
 * retire clears nothing; a failed lazy clear leaves set bits (safe).
 *
 * File format (little-endian):
 *   page 0, the header (4096 bytes; the fields in its first sector):
 *     magic[8] "RDBACTLG"  version:u32 (1)  header_bytes:u32 (4096)
 *     generation:u64 (0: invalid)  dead_gen:u64 (never armed again)
 *     disk_size:u64  extent_shift:u32 (20)  flags:u32 (bit 0:
 *     RDB_ACTLOG_F_IMAGE_LOST; others must be 0)
 *     nr_extents:u64 (= ceil(disk_size / 2^extent_shift))
 *     bitmap_bytes:u64 (ceil(nr_extents / 8) rounded up to 4096)
 *     crc:u32 (CRC32C of the 72 bytes before it)  then zeroes
 *   pages 1..: the bitmap, bit e (byte e / 8, bit e % 8) set: extent e
 *     "may differ".
 * A header that fails its checks (magic, version, CRC, geometry, another
 * disk size) is generation 0.  The bitmap has no checksum, on purpose:
 * each bit stands alone, and a bitmap page torn by a power loss holds,
 * sector by sector, either what it held before or what was being
 * written, each of which has every bit set that must be (sets are synced
 * before the image is touched; a clear is written only when it is true),
 * so a torn page is still a valid superset.  A checksum over it would
 * turn a torn page into "whole log invalid" for nothing.  A torn header
 * fails its CRC: invalid, safe (a full copy).
 */
#ifndef RDB_ACTLOG_H
#define RDB_ACTLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDB_ACTLOG_PAGE 4096u
#define RDB_ACTLOG_SHIFT 20u			/* 1 MiB extents */
#define RDB_ACTLOG_MAX_DEFAULT 1024u
#define RDB_ACTLOG_NEVER UINT64_MAX		/* not in the ring: never committed */
#define RDB_ACTLOG_RETIRE_NS (1000ull * 1000 * 1000)
/* header flag: an fdatasync of the image failed, the image may have lost
 * writes (no arming until rdb_actlog_reset_file) */
#define RDB_ACTLOG_F_IMAGE_LOST 0x1u

/* The log's and the image's storage, so that a test can put a volatile
 * page cache over a durable store and pull the power anywhere.  0 or a
 * negative errno; pread reads zeroes past the end. */
struct rdb_actlog_io {
	int (*pwrite)(void *ctx, int fd, const void *p, uint64_t n, uint64_t off);
	int (*pread)(void *ctx, int fd, void *p, uint64_t n, uint64_t off);
	int (*fdatasync)(void *ctx, int fd);
	void *ctx;
};
extern const struct rdb_actlog_io rdb_actlog_posix_io;

struct rdb_actlog_hdr {
	uint64_t generation, dead_gen, disk_size, nr_extents, bitmap_bytes;
	uint32_t extent_shift, flags;
};

/* Counters (the ring's al_* fields). */
struct rdb_actlog_stats {
	uint64_t active;	/* extents set now */
	uint64_t adds;		/* extents set (each durably, before a change) */
	uint64_t log_syncs;	/* fdatasyncs of the log file */
	uint64_t retired;	/* extents cleared */
	uint64_t image_syncs;	/* image syncs for retiring (background or full) */
	uint64_t full_stalls;	/* changes that found the log full: inline retire */
	uint64_t invalidations;	/* the log made invalid (any cause) */
};

struct rdb_actlog_slot {
	uint64_t ext, seq, pos;	/* last change: its sequence, its ring end */
};

struct rdb_actlog {
	char vm[65];
	char path[256];			/* for the log's messages */
	const struct rdb_actlog_io *io;
	int fd, img_fd;
	bool own_fd;
	uint64_t disk_size, nr_ext, bitmap_bytes;
	uint32_t shift, max;
	uint8_t *bits;			/* the bitmap as last written */
	uint32_t *slot_of;		/* extent -> slot index + 1, 0: none */
	struct rdb_actlog_slot *slots;
	uint32_t nslots, cap;
	uint64_t gen;			/* armed for (durably), 0: not */
	uint64_t dead_gen, dead_durable;	/* and as the header has it */
	bool image_lost, lost_durable;
	bool unknown;			/* the durable header may claim a dead gen */
	bool failed;			/* the last invalidation failed */
	uint64_t said_gen;		/* the "whole disk" ERROR was logged for it */
	uint64_t seq;			/* changes completed */
	bool retiring;
	uint64_t retire_gen, last_retire_ns;
	/* a change while not recording keeps the log (rdb_actlog_keep) */
	bool keep;
	struct rdb_actlog_stats st;
};

/* Header page codec: pure.  decode: 0, -EBADMSG (magic, CRC), -EPROTO
 * (version), -EINVAL (geometry). */
void rdb_actlog_hdr_encode(const struct rdb_actlog_hdr *h,
			   uint8_t page[RDB_ACTLOG_PAGE]);
int rdb_actlog_hdr_decode(const uint8_t *page, size_t len,
			  struct rdb_actlog_hdr *out);
/* The header of an invalid log of a disk of disk_size bytes. */
void rdb_actlog_geometry(uint64_t disk_size, struct rdb_actlog_hdr *out);

/* ---- the disk server's side ---- */

void rdb_actlog_init(struct rdb_actlog *al);
/*
 * Takes over log_fd (a file, created empty or not) for the image img_fd
 * of disk_size bytes, both through io (NULL: POSIX).  A valid header for
 * this disk size is loaded as it is (armed for its generation, its bits
 * kept: nothing is written until the first change); anything else is
 * replaced by an invalid log (not synced: a missing or torn one is
 * invalid too).  max: the most extents set at once (0: the default).
 */
int rdb_actlog_load(struct rdb_actlog *al, const char *vm, int log_fd,
		    bool own_fd, int img_fd, uint64_t disk_size, uint32_t max,
		    const struct rdb_actlog_io *io, char *err, size_t errlen);
/* The same on path, created (mode 0600) if missing. */
int rdb_actlog_open(struct rdb_actlog *al, const char *vm, const char *path,
		    int img_fd, uint64_t disk_size, uint32_t max,
		    char *err, size_t errlen);
void rdb_actlog_dispose(struct rdb_actlog *al);	/* idempotent */

/*
 * Before a change of [off, off + len) touches the image; recording: the
 * ring's `record` as read now, gen its `al_gen`, committed_pos its
 * `committed_pos`.  0: the change may go on (logged, or the log durably
 * invalid).  A negative errno: the log could neither take the change nor
 * be invalidated, it may claim what is untrue — give up on the replica
 * (and go on).  Called again after the change, before it is put in the
 * ring, if `record` is found on then: a no-op when it is logged already,
 * the arming of the generation when recording started meanwhile.
 */
int rdb_actlog_before(struct rdb_actlog *al, bool recording, uint64_t gen,
		      uint64_t committed_pos, uint64_t off, uint64_t len);
/*
 * Recording for gen, and no change of gen seen yet (the first one arms
 * the log for it, or leaves gen dead): arms it now with no extent set,
 * the image synced first.  Without it, a protection whose guest never
 * wrote (a read-mostly disk) would leave the log invalid, and a resync
 * after a failover would copy the whole disk.  The claim holds: every
 * extent's durable content is what the initial copy read (it read after
 * `record` went on), and no change came since.  0, or as an arming's
 * failure (the log then invalid, gen dead).  The disk server calls it
 * on its tick.
 */
int rdb_actlog_arm_idle(struct rdb_actlog *al, bool recording, uint64_t gen);
/*
 * Whether a change while not recording, for the generation the log is
 * armed for (the ring's al_gen unchanged), keeps the log instead of
 * invalidating it: its extents are set durably before it touches the
 * image, like a recorded change's, and stay set (it never reaches the
 * backup: nothing retires them but rdb_actlog_adopt).  The claim holds
 * as it did: every extent not set still equals what the backup
 * committed of that protection.  remusdbd asks for it when a protection
 * is lost with the VM running on here (the backup silent, restarted, or
 * its daemon restarting here), so that protecting it again to the same
 * replica resyncs the log's extents instead of the whole disk.
 */
void rdb_actlog_keep(struct rdb_actlog *al, bool keep);
/*
 * The log's extents are being copied to the backup whole, in an epoch
 * whose changes end at or after ring position pos (a resync from the
 * log): every completed change that never reached the backup (position
 * RDB_ACTLOG_NEVER: kept while not recording, or loaded from the file)
 * counts as put at pos, so that the extent is retired once that epoch
 * is committed and the image synced.  A change still in flight keeps
 * its extent (it may complete after the copy read its range).
 */
void rdb_actlog_adopt(struct rdb_actlog *al, uint64_t pos);
/* After the change completed (or failed: some of it may be in the image):
 * pos is the ring's head after its last record, RDB_ACTLOG_NEVER if it
 * was not put there whole. */
void rdb_actlog_after(struct rdb_actlog *al, uint64_t off, uint64_t len,
		      uint64_t pos);

/* Whether to start a background image sync for retiring now: none runs,
 * the log is armed for gen (the ring's al_gen: committed_pos speaks of
 * that protection), some extent's last change is committed, and
 * RDB_ACTLOG_RETIRE_NS passed since the last one or the log is 3/4
 * full. */
bool rdb_actlog_retire_due(const struct rdb_actlog *al, uint64_t now_ns,
			   uint64_t gen, uint64_t committed_pos);
/* The image sync starts now: returns the sequence it covers. */
uint64_t rdb_actlog_retire_begin(struct rdb_actlog *al, uint64_t now_ns);
/* It completed with sync_rc: clears the extents whose last change is
 * covered and committed (committed_pos read now), written lazily.  A
 * failed sync invalidates the log (rdb_actlog_image_sync_failed). */
void rdb_actlog_retire_end(struct rdb_actlog *al, uint64_t covered,
			   int sync_rc, uint64_t gen, uint64_t committed_pos);
/* It could not be started. */
void rdb_actlog_retire_cancel(struct rdb_actlog *al);

/* An fdatasync of the image failed outside the log (the guest's flush):
 * the log is invalidated (a failure to do so shows at the next change). */
void rdb_actlog_image_sync_failed(struct rdb_actlog *al);
/* Counters and the armed generation, for the ring's header. */
uint64_t rdb_actlog_armed_gen(const struct rdb_actlog *al);

/* ---- remusdbd's side: no server runs on the image ---- */

struct rdb_actlog_view {
	uint64_t generation;	/* 0: no base for a resync (why: in err) */
	uint64_t dead_gen;
	uint64_t disk_size, nr_extents, nr_set;
	uint32_t extent_shift;
	bool image_lost;	/* the header says RDB_ACTLOG_F_IMAGE_LOST */
	uint8_t *bits;		/* nr_extents bits (e / 8, 1 << e % 8); NULL if
				 * generation is 0 */
};

/* A log's bytes (header page and bitmap): 0 and the view (generation 0 if
 * the log is invalid or not for disk_size, err saying why), or -ENOMEM. */
int rdb_actlog_decode(const uint8_t *buf, size_t len, uint64_t disk_size,
		      struct rdb_actlog_view *out, char *err, size_t errlen);
/* The log at path (a missing file: generation 0), or a negative errno if
 * it cannot be read. */
int rdb_actlog_read(const char *path, uint64_t disk_size,
		    struct rdb_actlog_view *out, char *err, size_t errlen);
bool rdb_actlog_view_test(const struct rdb_actlog_view *v, uint64_t ext);
void rdb_actlog_view_dispose(struct rdb_actlog_view *v);	/* idempotent */
/* Makes the log at path invalid, durably; a missing or invalid log is
 * left as it is. */
int rdb_actlog_invalidate_file(const char *path, char *err, size_t errlen);
/* The same, before the image is overwritten whole (a full copy): it also
 * forgets that the image lost writes (RDB_ACTLOG_F_IMAGE_LOST), so that
 * a later protection can arm the log again. */
int rdb_actlog_reset_file(const char *path, char *err, size_t errlen);

#endif

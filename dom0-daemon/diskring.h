/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The disk server's changes, on their way to remusdbd: a single-producer,
 * single-consumer ring in memory both processes map (a memfd).
 *
 * The disk server (disksrv.h) is the producer: after a change reached the
 * image, and before QEMU hears back, it puts the change here.  remusdbd is
 * the consumer: it takes changes in order and streams them to the backup.
 * Because the server puts a change before it replies, and QEMU drains its
 * disk requests before it sends a checkpoint, every change completed
 * before checkpoint N's pause is in the ring when remusdbd reads N's end
 * from QEMU — the ordering the in-loop server had, without the server
 * waiting for remusdbd's loop.
 *
 * Layout: a header page (control words and counters, every shared field
 * an atomic), then `size` bytes of records.  A record is 16 bytes
 *   op:u32 len:u32 off:u64
 * followed, for a WRITE, by len bytes of data, and for a READ (disk read
 * tracking, readidx.h: whole 4 KiB blocks from off on that a read
 * returned) by len / 8 u64 hashes of their contents, 0 for a block of
 * zeroes; records start on 16-byte
 * boundaries and never wrap: one that would is preceded by a PAD record
 * to the end of the ring.  head and tail count bytes since creation.
 */
#ifndef RDB_DISKRING_H
#define RDB_DISKRING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDB_DRING_HDR_SIZE 4096u
#define RDB_DRING_REC_MAX (1u << 20)	/* a WRITE's data per record */
#define RDB_DRING_MIN (4u << 20)	/* smallest ring */
#define RDB_DRING_PAD 0xffffu
#define RDB_DRING_READ 0x100u		/* not an rdb_disk_op: a hint */
#define RDB_DRING_READ_MAX 512u		/* blocks per READ record */

struct rdb_dring_shared {
	uint64_t size;			/* bytes of records (set at creation) */
	_Atomic uint64_t head;		/* server: bytes produced */
	_Atomic uint64_t tail;		/* remusdbd: bytes consumed */
	/* remusdbd -> server */
	_Atomic uint32_t record;	/* 1: put changes here */
	_Atomic uint32_t replicated;	/* 1: the backup carries the flushes */
	_Atomic uint64_t room_wait_ns;	/* longest wait for room, then overflow */
	_Atomic uint32_t track_reads;	/* 1: put READ records too (with record) */
	_Atomic uint64_t read_seed;	/* their hashes' key */
	/* server -> remusdbd */
	_Atomic uint32_t lost;		/* enum rdb_dring_lost: changes missing */
	_Atomic uint32_t connected;	/* an NBD client is connected */
	_Atomic uint64_t lost_ns;	/* when (CLOCK_MONOTONIC) */
	_Atomic uint64_t reads, writes, zeroes, flushes, errors, connects;
	_Atomic uint64_t syncs, read_bytes, written_bytes;
	_Atomic uint64_t recorded, recorded_bytes, room_waits, room_wait_max_ns;
	_Atomic uint64_t readbacks;	/* failed writes passed on as read back */
	/* READ records: blocks passed on; blocks not (no room: a READ never
	 * waits, and never takes the last half of the ring from changes) */
	_Atomic uint64_t reads_tracked, reads_skipped;
	/*
	 * The activity log (actlog.h), if the server keeps one.
	 * remusdbd -> server: al_gen, the protection generation the log is
	 * armed for while `record` is 1 (0: no log wanted; a new protection
	 * needs a greater one); committed_pos, a position in head's bytes
	 * such that every record ending at or before it belongs to an epoch
	 * the backup committed — the tail after the drain that closed the
	 * last epoch acknowledged — only ever advanced, and speaking of the
	 * protection al_gen names: set al_gen before a new protection's
	 * first acknowledgement moves it.
	 */
	_Atomic uint64_t al_gen, committed_pos;
	/* remusdbd -> server: an fdatasync of the image by remusdbd failed
	 * (the kernel may have dropped writes: the log says so for good) */
	_Atomic uint32_t image_sync_failed;
	/* server -> remusdbd: the generation the durable log is armed for (0:
	 * none, no base for a resync), extents set now, and counters (of the
	 * server process now running): extents added, log syncs, extents
	 * retired, image syncs for retiring, changes that found the log full,
	 * invalidations */
	_Atomic uint64_t al_armed_gen, al_active;
	_Atomic uint64_t al_adds, al_log_syncs, al_retired, al_image_syncs;
	_Atomic uint64_t al_full_stalls, al_invalidations;
	/*
	 * remusdbd -> server: al_keep 1: a change while `record` is 0 keeps
	 * the log armed for al_gen (its extents set, never retired) instead
	 * of invalidating it (rdb_actlog_keep: a protection lost with the VM
	 * running here, to be resynced from the log).  al_adopt_req, moved
	 * after al_adopt_pos is set: the log's extents are being copied to
	 * the backup in an epoch ending at or after ring position
	 * al_adopt_pos (rdb_actlog_adopt).
	 */
	_Atomic uint32_t al_keep;
	_Atomic uint64_t al_adopt_pos, al_adopt_req;
};

/* Why the server stopped putting changes in the ring (it then makes the
 * guest's flushes local again: the backup cannot carry them). */
enum rdb_dring_lost {
	RDB_DRING_OK = 0,
	RDB_DRING_OVERFLOW = 1,		/* no room for room_wait_ns */
	RDB_DRING_UNREADABLE = 2,	/* a failed change could not be read back */
	RDB_DRING_ACTLOG = 3,		/* the activity log could neither be
					 * written nor invalidated */
};

struct rdb_dring_rec {
	uint32_t op;			/* enum rdb_disk_op, or RDB_DRING_PAD */
	uint32_t len;
	uint64_t off;
};

struct rdb_dring {
	struct rdb_dring_shared *sh;
	uint8_t *data;
};

/* Bytes to map for a ring of `size` bytes (size: a multiple of 16). */
size_t rdb_dring_map_size(uint64_t size);
/* Initialises a zeroed mapping of rdb_dring_map_size(size) bytes. */
void rdb_dring_init(struct rdb_dring *r, void *map, uint64_t size);
/* Attaches to a mapping another process initialised. */
void rdb_dring_attach(struct rdb_dring *r, void *map);

/* Producer: 0, -ENOSPC (no room now: retry after the consumer ran), or
 * -EMSGSIZE (a WRITE's or READ's len over RDB_DRING_REC_MAX; a ZERO or
 * FLUSH carries no data, whatever its len). */
int rdb_dring_put(struct rdb_dring *r, uint32_t op, uint64_t off,
		  uint32_t len, const uint8_t *data);
/* Consumer: the oldest record (data follows it for a WRITE), or NULL if
 * empty; it stays valid until rdb_dring_pop. */
const struct rdb_dring_rec *rdb_dring_peek(struct rdb_dring *r);
void rdb_dring_pop(struct rdb_dring *r);
uint64_t rdb_dring_used(const struct rdb_dring *r);

#endif

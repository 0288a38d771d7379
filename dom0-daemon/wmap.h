/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The written map of a disk image: one bit per 4 KiB block, set when a
 * change (write, write-zeroes, trim) may have touched the block since the
 * map was created or last reset.  The backup keeps one from the moment it
 * restores the VM: the blocks it wrote since are the blocks its image may
 * hold that the old primary's does not (docs/resync.md).
 *
 * A file mapped MAP_SHARED by every process that uses it: the disk
 * server marks it (rdb_wmap_mark, before each change reaches the image,
 * recording or not) while remusdbd reads it (rdb_wmap_snapshot, or
 * rdb_wmap_take which clears what it copies, word by word atomically, so
 * that a block marked meanwhile is either in the copy or still in the
 * map).  The file outlives its servers: the restored VM's server without
 * a ring is replaced by one with a ring on the same map, which goes on
 * marking into it.  Never synced: it tracks the writes of the VM running
 * on this host, which a power loss of this host ends anyway.
 *
 * File format: page 0, the header (its first 52 bytes, little-endian):
 *   magic[8] "RDBWMAP1"  version:u32 (1)  header_bytes:u32 (4096)
 *   disk_size:u64  block_size:u32 (4096)  reserved:u32
 *   nr_blocks:u64  nr_words:u64  crc:u32 (CRC32C of the 48 bytes before)
 * then nr_words u64 words in host byte order, padded to whole pages:
 * block b is bit b % 64 of word b / 64.
 */
#ifndef RDB_WMAP_H
#define RDB_WMAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDB_WMAP_BLOCK 4096u
#define RDB_WMAP_HDR 4096u

struct rdb_wmap {
	int fd;
	uint8_t *map;
	size_t map_len;
	_Atomic uint64_t *words;
	uint64_t disk_size, nr_blocks, nr_words;
};

/* A copy of the bits at one time (per word). */
struct rdb_wmap_snap {
	uint64_t nr_blocks, nr_set, nr_words;
	uint32_t block_size;
	uint64_t *words;
};

void rdb_wmap_init(struct rdb_wmap *m);
/*
 * Maps the written map at path for a disk of disk_size bytes.  An
 * existing file is kept as it is (its bits too) if its header is for
 * this disk size; otherwise -EINVAL, err saying why.  A missing file is
 * created, all zeroes, if create; else -ENOENT.
 */
int rdb_wmap_open(struct rdb_wmap *m, const char *path, uint64_t disk_size,
		  bool create, char *err, size_t errlen);
void rdb_wmap_close(struct rdb_wmap *m);	/* idempotent */

/* Every block [off, off + len) touches is set (atomic, lock-free). */
void rdb_wmap_mark(struct rdb_wmap *m, uint64_t off, uint64_t len);
/* All blocks clear. */
void rdb_wmap_reset(struct rdb_wmap *m);

/* A copy of the bits; 0 or -ENOMEM. */
int rdb_wmap_snapshot(const struct rdb_wmap *m, struct rdb_wmap_snap *out);
/* A copy of the bits, cleared in the map as they are copied. */
int rdb_wmap_take(struct rdb_wmap *m, struct rdb_wmap_snap *out);
bool rdb_wmap_snap_test(const struct rdb_wmap_snap *s, uint64_t block);
/* The next run of set blocks at or after *from: its first block and
 * length, *from moved past it; false when there is none. */
bool rdb_wmap_snap_next(const struct rdb_wmap_snap *s, uint64_t *from,
			uint64_t *first_out, uint64_t *count_out);
void rdb_wmap_snap_dispose(struct rdb_wmap_snap *s);	/* idempotent */

#endif

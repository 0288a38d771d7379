/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The written map: which 4 KiB blocks of a VM's disk the guest may have
 * changed since a point in time (a failover's restore), one bit each, in
 * a file both the disk server (marking) and remusdbd (reading) map
 * shared.  The server marks a change's blocks before the change reaches
 * the image, every change, recording or not; the file outlives the
 * server, so the restored VM's disk server and the one that takes its
 * socket over when the VM is protected again (reprotect) mark the same
 * map.  Never synced: it is not needed across a power loss (the host
 * that loses power loses the running VM with it).
 *
 * File: a 4 KiB header (magic "RDBWMAP1", disk size, block size), then
 * the bits, 64 to a little-endian word, block b in word b/64 bit b%64.
 */
#ifndef RDB_WMAP_H
#define RDB_WMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDB_WMAP_BLOCK 4096u
#define RDB_WMAP_HDR 4096u

struct rdb_wmap {
	int fd;
	void *map;
	size_t map_len;
	uint64_t disk_size, nblocks;
	uint64_t *bits;			/* in the mapping */
};

void rdb_wmap_init(struct rdb_wmap *m);
/* Creates (or empties) the map of a disk of disk_size bytes at path. */
int rdb_wmap_create_file(const char *path, uint64_t disk_size, char *err,
			 size_t errlen);
/* Maps an existing map for marking; its disk size must be disk_size. */
int rdb_wmap_open(struct rdb_wmap *m, const char *path, uint64_t disk_size,
		  char *err, size_t errlen);
void rdb_wmap_close(struct rdb_wmap *m);	/* idempotent */
/* Marks the blocks [off, off+len) touches (atomically: a reader may
 * read meanwhile). */
void rdb_wmap_mark(struct rdb_wmap *m, uint64_t off, uint64_t len);
/*
 * ORs the map at path into bits (nblocks = disk_size / 4096 bits, the
 * caller's array of (nblocks + 63) / 64 words) and counts its set
 * blocks into *count_out.  0, or an error in err.
 */
int rdb_wmap_read_file(const char *path, uint64_t disk_size, uint64_t *bits,
		       uint64_t *count_out, char *err, size_t errlen);

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The backup's copy of a VM's RAM: one file per RAM block, preallocated
 * (a full disk fails here, at setup, never later as SIGBUS) and mapped
 * shared.  On failover QEMU maps the main block's file itself
 * (memory-backend-file share=on), so restoring does not copy RAM.
 */
#ifndef RDB_RAMIMAGE_H
#define RDB_RAMIMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "ramblock.h"

struct rdb_ramimage {
	size_t n;
	struct {
		char idstr[256];
		char path[512];
		uint64_t length;
		uint8_t *base;
		int fd;
	} b[RDB_MAX_RAM_BLOCKS];
};

/*
 * Creates (or truncates) dir/<idstr with '/' as '_'>.img per block, sized to
 * used_length, and maps each.  Any stale content is gone: every byte reads
 * 0 until written.  0, or -ENOSPC (the disk cannot hold the image),
 * -EINVAL (no blocks, too many, or a length that is 0 or not whole pages),
 * -EEXIST (two idstrs map to one file name), -ENAMETOOLONG, or the errno
 * of open/mmap.  On failure nothing stays open (files may remain).
 */
int rdb_ramimage_open(const char *dir, const struct rdb_ram_block *blocks,
		      size_t n, struct rdb_ramimage *img);
/* Idempotent; also safe on an image whose open failed. */
void rdb_ramimage_close(struct rdb_ramimage *img);
/* NULL / 0 for a block index that does not exist. */
uint8_t *rdb_ramimage_base(struct rdb_ramimage *img, size_t block);
uint64_t rdb_ramimage_length(const struct rdb_ramimage *img, size_t block);
/* File of the block named idstr, NULL if none. */
const char *rdb_ramimage_path(const struct rdb_ramimage *img, const char *idstr);

#endif

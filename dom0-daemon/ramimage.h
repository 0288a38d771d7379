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

int rdb_ramimage_open(const char *dir, const struct rdb_ram_block *blocks,
		      size_t n, struct rdb_ramimage *img);
void rdb_ramimage_close(struct rdb_ramimage *img);	/* idempotent */
uint8_t *rdb_ramimage_base(struct rdb_ramimage *img, size_t block);
/* File of the block named idstr, NULL if none. */
const char *rdb_ramimage_path(const struct rdb_ramimage *img, const char *idstr);

#endif

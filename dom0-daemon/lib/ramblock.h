/* SPDX-License-Identifier: GPL-2.0-only */
/* A guest RAM block as QEMU names it in its migration stream. */
#ifndef RDB_RAMBLOCK_H
#define RDB_RAMBLOCK_H

#include <stdint.h>

#define RDB_PAGE_SIZE 4096u
#define RDB_MAX_RAM_BLOCKS 64

struct rdb_ram_block {
	char idstr[256];
	uint64_t used_length;
};

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/* CRC32C (Castagnoli), as in iSCSI and ext4: check value of "123456789"
 * is 0xE3069283.  Uses the SSE4.2 instruction where the CPU has it. */
#ifndef RDB_CRC32C_H
#define RDB_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc is the running value: 0 to start, then the previous result. */
uint32_t rdb_crc32c(uint32_t crc, const void *p, size_t n);

#endif

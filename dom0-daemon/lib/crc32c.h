/* SPDX-License-Identifier: GPL-2.0-only */
/* CRC32C (Castagnoli), as in iSCSI and ext4: check value of "123456789"
 * is 0xE3069283.  Uses the SSE4.2 instruction where the CPU has it. */
#ifndef RDB_CRC32C_H
#define RDB_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc is the running value: 0 to start, then the previous result. */
uint32_t rdb_crc32c(uint32_t crc, const void *p, size_t n);
/* The same function, always by table (slicing-by-8).  Both ends of a link
 * must agree bit for bit whatever their CPUs, so the tests check this
 * portable path against the SSE4.2 one. */
uint32_t rdb_crc32c_sw(uint32_t crc, const void *p, size_t n);

#endif

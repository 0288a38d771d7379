/* SPDX-License-Identifier: GPL-2.0-only */
/* Little-endian fields of on-disk formats (the activity log, the written
 * map), byte by byte: any alignment, any host. */
#ifndef RDB_LE_H
#define RDB_LE_H

#include <stdint.h>

static inline void rdb_le_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void rdb_le_put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t rdb_le_get32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static inline uint64_t rdb_le_get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

#endif

// SPDX-License-Identifier: GPL-2.0-only
#include "crc32c.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#define POLY 0x82F63B78u	/* reflected Castagnoli */

static uint32_t table[8][256];
static bool have_sse42;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		table[0][i] = c;
	}
	for (int t = 1; t < 8; t++)
		for (int i = 0; i < 256; i++)
			table[t][i] = (table[t - 1][i] >> 8) ^
				table[0][table[t - 1][i] & 0xff];
	have_sse42 = __builtin_cpu_supports("sse4.2");
}

/* Slicing-by-8: eight table lookups per 8 bytes.  The 8-byte load is
 * little-endian (byte 0 in the low bits), as the tables assume. */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "crc32c.c: slicing-by-8 here assumes a little-endian host"
#endif
static uint32_t crc_sw(uint32_t c, const uint8_t *p, size_t n)
{
	while (n >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		w ^= c;
		c = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^
			table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
			table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
			table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
	return c;
}

__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t n)
{
	uint64_t c64 = c;

	while (n >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		c64 = __builtin_ia32_crc32di(c64, w);
		p += 8;
		n -= 8;
	}
	c = (uint32_t)c64;
	while (n--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}

uint32_t rdb_crc32c(uint32_t crc, const void *p, size_t n)
{
	uint32_t c = ~crc;

	pthread_once(&once, init);
	c = have_sse42 ? crc_hw(c, p, n) : crc_sw(c, p, n);
	return ~c;
}

uint32_t rdb_crc32c_sw(uint32_t crc, const void *p, size_t n)
{
	pthread_once(&once, init);
	return ~crc_sw(~crc, p, n);
}

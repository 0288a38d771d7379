/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The numbered disk record of diskseq and seqsrv --disk: record N is 4 KiB
 * at byte N * 4096, "RDBSEQ01", N (8 bytes, little endian), then N's low
 * byte repeated.  diskseq --check reads them back.
 */
#ifndef RDB_SEQREC_H
#define RDB_SEQREC_H

#include <stdint.h>
#include <string.h>

#define SEQREC_SIZE 4096

static inline void seqrec_fill(uint8_t *rec, uint64_t n)
{
	memset(rec, (int)(n & 0xff), SEQREC_SIZE);
	memcpy(rec, "RDBSEQ01", 8);
	for (int i = 0; i < 8; i++)
		rec[8 + i] = (uint8_t)(n >> (8 * i));
}

static inline int seqrec_ok(const uint8_t *rec, uint64_t n)
{
	uint64_t got = 0;

	if (memcmp(rec, "RDBSEQ01", 8))
		return 0;
	for (int i = 0; i < 8; i++)
		got |= (uint64_t)rec[8 + i] << (8 * i);
	if (got != n)
		return 0;
	for (int i = 16; i < SEQREC_SIZE; i++)
		if (rec[i] != (uint8_t)(n & 0xff))
			return 0;
	return 1;
}

#endif

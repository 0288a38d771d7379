/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The page digest of the VERIFY mode (feature RDB_FEATURE_VERIFY, VM
 * option verify_pages): the primary sums it over an epoch's pages as QEMU
 * sent them, the backup over the same pages as its RAM image holds them
 * after the commit.  A sum, so the order pages are encoded and applied in
 * does not matter; keyed by the page's place, so a right page in the
 * wrong place does not cancel out.  Not a security measure: a check that
 * whatever encoding carried a page (DISKREF, XOR+RLE, LZ4) rebuilt it.
 */
#ifndef RDB_PAGEDIGEST_H
#define RDB_PAGEDIGEST_H

#include <stdint.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

static inline uint64_t rdb_page_digest(uint32_t block, uint64_t offset,
				       const uint8_t *page)
{
	return XXH3_64bits_withSeed(page, 4096,
				    ((uint64_t)block << 48) ^ offset ^
				    0x7265707573646221ULL);
}

#endif

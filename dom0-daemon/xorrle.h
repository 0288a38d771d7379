/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * XOR+RLE page deltas (RemusDB's checkpoint compression): a page dirtied
 * by a database usually differs from the version last sent in a few
 * bytes, so the XOR of the two is mostly zero.  The delta names the
 * zero runs by length and carries the rest of the XOR verbatim.
 *
 * Grammar (ULEB128 varints, as QEMU's xbzrle):
 *
 *   delta = { zrun:varint lrun:varint xor[lrun] }*
 *
 * Starting at offset 0: skip zrun bytes (unchanged), then XOR the next
 * lrun bytes of the old page with xor[].  Bytes after the last pair are
 * unchanged.  Every pair but the first has zrun >= 1 and every lrun >= 1
 * (so a delta of n bytes has at most n/3 pairs, and an identical page is
 * the empty delta); the decoder checks every length against both buffers
 * and accepts only the canonical form a conforming encoder can produce.
 *
 * The encoder splits a literal at a zero run of 3 or more bytes (a new
 * pair costs 2 bytes of varints for runs under 128), so its output is
 * never larger than a byte loop that splits at every zero byte; it finds
 * zero runs 8 bytes at a time, and looks at single bytes only inside
 * changed words.
 */
#ifndef RDB_XORRLE_H
#define RDB_XORRLE_H

#include <stddef.h>
#include <stdint.h>

/* Encodes new against old (len bytes each) into dst.  Returns the delta's
 * length (0: identical), or -ENOSPC as soon as it would exceed dlen —
 * pass dlen < len to stop early when the delta would not pay. */
long rdb_xorrle_encode(const uint8_t *old, const uint8_t *new_, size_t len,
		       uint8_t *dst, size_t dlen);
/* Applies a delta in place: page (len bytes) holds the old version and
 * gets the new one.  0, or -EINVAL for any malformed delta — then page
 * may be partly changed; use rdb_xorrle_check first where that matters. */
int rdb_xorrle_decode(uint8_t *page, size_t len, const uint8_t *src,
		      size_t slen);
/* Validates a delta for a page of len bytes without applying it. */
int rdb_xorrle_check(size_t len, const uint8_t *src, size_t slen);

/* The byte-at-a-time encoder of the shape of QEMU's xbzrle (a literal
 * ends at every zero byte): the benchmark's baseline.  Its output is in
 * the same grammar and decodes with rdb_xorrle_decode. */
long rdb_xorrle_encode_byteloop(const uint8_t *old, const uint8_t *new_,
				size_t len, uint8_t *dst, size_t dlen);

#endif

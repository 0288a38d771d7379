// SPDX-License-Identifier: GPL-2.0-only
#include "xorrle.h"

#include <errno.h>
#include <string.h>

/* A literal ends where this many zero bytes of the XOR follow each other. */
#define SPLIT_ZEROS 3

static inline uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static inline void store64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

/* Nonzero iff some byte of x is zero (exact: the classic haszero test). */
static inline uint64_t has_zero_byte(uint64_t x)
{
	return (x - 0x0101010101010101ULL) & ~x & 0x8080808080808080ULL;
}

static inline size_t varint_len(size_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static inline size_t put_varint(uint8_t *p, size_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* 0 on a malformed or overlong varint (more than 4 bytes: no page has
 * runs that long). */
static inline size_t get_varint(const uint8_t *p, const uint8_t *end,
				size_t *v)
{
	size_t r = 0;

	for (size_t n = 0; n < 4 && p + n < end; n++) {
		r |= (size_t)(p[n] & 0x7f) << (7 * n);
		if (!(p[n] & 0x80)) {
			*v = r;
			return n + 1;
		}
	}
	return 0;
}

long rdb_xorrle_encode(const uint8_t *old, const uint8_t *new_, size_t len,
		       uint8_t *dst, size_t dlen)
{
	uint8_t *out = dst, *end = dst + dlen;
	size_t i = 0;

	while (i < len) {
		size_t start = i, lit, zeros;

		/* Zero run: 32 bytes at a time while nothing changed, then 8,
		 * then the first changed byte. */
		while (i + 32 <= len &&
		       ((load64(old + i) ^ load64(new_ + i)) |
			(load64(old + i + 8) ^ load64(new_ + i + 8)) |
			(load64(old + i + 16) ^ load64(new_ + i + 16)) |
			(load64(old + i + 24) ^ load64(new_ + i + 24))) == 0)
			i += 32;
		while (i + 8 <= len) {
			uint64_t x = load64(old + i) ^ load64(new_ + i);

			if (x) {
				i += (size_t)__builtin_ctzll(x) / 8;	/* little-endian */
				break;
			}
			i += 8;
		}
		while (i < len && i + 8 > len && old[i] == new_[i])
			i++;
		if (i >= len)
			break;	/* unchanged to the end: nothing more to say */
		/* Literal: until SPLIT_ZEROS zero bytes in a row, or the end. */
		lit = i;
		zeros = 0;
		while (i < len) {
			if (i + 8 <= len) {
				uint64_t x = load64(old + i) ^ load64(new_ + i);

				if (!has_zero_byte(x)) {
					zeros = 0;
					i += 8;
					continue;
				}
				if (!x && zeros == 0)
					break;	/* a whole zero word: split here */
			}
			if (old[i] == new_[i]) {
				if (++zeros == SPLIT_ZEROS) {
					i -= SPLIT_ZEROS - 1;
					break;
				}
			} else {
				zeros = 0;
			}
			i++;
		}
		if (i >= len && zeros)
			i -= zeros;	/* trailing zeros belong to no literal */
		{
			size_t n = i - lit, z = lit - start;

			if ((size_t)(end - out) < varint_len(z) + varint_len(n) + n)
				return -ENOSPC;
			out += put_varint(out, z);
			out += put_varint(out, n);
			for (size_t k = 0; k + 8 <= n; k += 8)
				store64(out + k, load64(old + lit + k) ^
					load64(new_ + lit + k));
			for (size_t k = n & ~(size_t)7; k < n; k++)
				out[k] = old[lit + k] ^ new_[lit + k];
			out += n;
		}
	}
	return (long)(out - dst);
}

static int apply(uint8_t *page, size_t len, const uint8_t *src, size_t slen,
		 int do_apply)
{
	const uint8_t *p = src, *end = src + slen;
	size_t pos = 0;
	int first = 1;

	while (p < end) {
		size_t z, n, k;

		k = get_varint(p, end, &z);
		if (!k)
			return -EINVAL;
		p += k;
		k = get_varint(p, end, &n);
		if (!k)
			return -EINVAL;
		p += k;
		if ((!first && z == 0) || n == 0 || z > len - pos ||
		    n > len - pos - z || n > (size_t)(end - p))
			return -EINVAL;
		pos += z;
		if (do_apply) {
			size_t j = 0;

			for (; j + 8 <= n; j += 8)
				store64(page + pos + j, load64(page + pos + j) ^
					load64(p + j));
			for (; j < n; j++)
				page[pos + j] ^= p[j];
		}
		pos += n;
		p += n;
		first = 0;
	}
	return 0;
}

int rdb_xorrle_decode(uint8_t *page, size_t len, const uint8_t *src,
		      size_t slen)
{
	return apply(page, len, src, slen, 1);
}

int rdb_xorrle_check(size_t len, const uint8_t *src, size_t slen)
{
	return apply(NULL, len, src, slen, 0);
}

long rdb_xorrle_encode_byteloop(const uint8_t *old, const uint8_t *new_,
				size_t len, uint8_t *dst, size_t dlen)
{
	uint8_t *out = dst, *end = dst + dlen;
	size_t i = 0;

	while (i < len) {
		size_t z = 0, n = 0;

		while (i < len && old[i] == new_[i]) {
			z++;
			i++;
		}
		if (i == len)
			break;
		while (i + n < len && old[i + n] != new_[i + n])
			n++;
		if ((size_t)(end - out) < varint_len(z) + varint_len(n) + n)
			return -ENOSPC;
		out += put_varint(out, z);
		out += put_varint(out, n);
		for (size_t k = 0; k < n; k++)
			out[k] = old[i + k] ^ new_[i + k];
		out += n;
		i += n;
	}
	return (long)(out - dst);
}

// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer: the XOR+RLE delta decoder.  Any input: check and decode
 * agree, nothing is read or written outside the buffers (ASan), and a
 * delta that decodes re-encodes to a delta giving the same page. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xorrle.h"

#define PG 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t old[PG], page[PG], again[PG], enc[PG + 64];
	size_t len = size && data[0] & 1 ? PG / 2 + data[0] : PG;
	int c, d;
	long n;

	for (size_t i = 0; i < PG; i++)
		old[i] = (uint8_t)(i * 31);
	memcpy(page, old, PG);
	c = rdb_xorrle_check(len, data, size);
	d = rdb_xorrle_decode(page, len, data, size);
	if (c != d)
		abort();
	if (d == 0) {
		n = rdb_xorrle_encode(old, page, len, enc, sizeof(enc));
		if (n < 0)
			abort();
		memcpy(again, old, PG);
		if (rdb_xorrle_decode(again, len, enc, (size_t)n) ||
		    memcmp(again, page, PG))
			abort();
	}
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer: QEMU's COLO stream as remusdbd parses it, split at a point
 * the input chooses (the parser must not depend on read boundaries). */
#include <stddef.h>
#include <stdint.h>

#include "qemu/colo_stream.h"

static int c_config(void *o, const uint8_t *s, size_t n) { return 0; }
static int c_blocks(void *o, const struct rdb_ram_block *b, size_t n) { return 0; }
/* Touch what the parser hands out, so ASan checks it lies in bounds. */
static volatile uint8_t sink;

static int c_page(void *o, uint32_t b, uint64_t off, const uint8_t *d, uint8_t f)
{
	if (d)
		sink ^= d[0] ^ d[4095];
	return 0;
}

static int c_end(void *o, uint64_t e, const uint8_t *d, size_t n)
{
	if (n)
		sink ^= d[0] ^ d[n - 1];
	return 0;
}
static int c_req(void *o, uint64_t e) { return 0; }
static int c_stop(void *o) { sink ^= 1; return 0; }
static const struct rdb_colo_ops ops = { c_config, c_blocks, c_page, c_end, c_req,
					 c_stop, NULL, NULL };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdb_colo_parser p;
	size_t cut = size ? data[0] % (size + 1) : 0;

	rdb_colo_parser_init(&p, &ops, NULL);
	if (rdb_colo_parser_feed(&p, data, cut) == 0)
		rdb_colo_parser_feed(&p, data + cut, size - cut);
	rdb_colo_parser_dispose(&p);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer: an NBD client's bytes against the server engine, over a
 * 1 MiB export whose storage checks every range it is given. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nbd.h"

#define SIZE (1u << 20)
static uint8_t disk[SIZE];

static void in_range(uint64_t off, uint32_t len)
{
	if (off > SIZE || len > SIZE - off)
		abort();	/* the engine let a bad range through */
}

static int f_read(void *o, uint64_t off, uint32_t len, uint8_t *dst)
{
	in_range(off, len);
	memcpy(dst, disk + off, len);
	return 0;
}

static int f_write(void *o, uint64_t off, uint32_t len, const uint8_t *src, bool fua)
{
	in_range(off, len);
	memcpy(disk + off, src, len);
	return 0;
}

static int f_flush(void *o) { return 0; }
static int f_trim(void *o, uint64_t off, uint32_t len) { in_range(off, len); return 0; }
static int f_zero(void *o, uint64_t off, uint32_t len, bool t)
{
	in_range(off, len);
	memset(disk + off, 0, len);
	return 0;
}

static const struct rdb_nbd_ops ops = { f_read, f_write, f_flush, f_trim, f_zero };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdb_nbd_server s;

	if (rdb_nbd_server_init(&s, "vm1", SIZE, &ops, NULL) == 0)
		rdb_nbd_server_feed(&s, data, size);
	rdb_nbd_server_dispose(&s);
	return 0;
}

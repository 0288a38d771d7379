// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer: a PAGES payload staged on a backup with every encoding
 * granted (XOR+RLE, LZ4, DISKREF) and a small disk replica, as the
 * backup's stage checks and resolves it (disk read tracking included). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"
#include "ramimage.h"
#include "stage.h"

static struct rdb_ramimage img;
static struct rdb_diskbuf db, db1;	/* disk 0, disk 1 (DISKREF_DEVS) */
static struct rdb_stage st;

static void init_once(void)
{
	static const struct rdb_ram_block blocks[2] = {
		{ "pc.ram", 16 * 4096 }, { "vga.vram", 4096 } };
	static const uint8_t dev[] = { 1, 0 };
	char dir[] = "/tmp/rdb-fuzz-stage-XXXXXX", path[64];
	uint8_t blk[4096];

	if (!mkdtemp(dir))
		abort();
	if (rdb_ramimage_open(dir, blocks, 2, &img) < 0)
		abort();
	snprintf(path, sizeof(path), "%s/replica.img", dir);
	rdb_diskbuf_init(&db, 1 << 20);
	if (rdb_diskbuf_create(&db, path, 8 * 4096) < 0)
		abort();
	for (int i = 0; i < 8; i++) {
		memset(blk, 'a' + i, sizeof(blk));
		rdb_diskbuf_apply_one(&db, RDB_DISK_WRITE, (uint64_t)i * 4096, 4096, blk);
	}
	snprintf(path, sizeof(path), "%s/replica1.img", dir);
	rdb_diskbuf_init(&db1, 1 << 20);
	if (rdb_diskbuf_create(&db1, path, 4 * 4096) < 0)
		abort();
	for (int i = 0; i < 4; i++) {
		memset(blk, 'A' + i, sizeof(blk));
		rdb_diskbuf_apply_one(&db1, RDB_DISK_WRITE, (uint64_t)i * 4096, 4096, blk);
	}
	rdb_stage_init(&st);
	st.disks[0] = &db;
	st.disks[1] = &db1;
	st.ndisks = 2;
	st.features = RDB_FEATURE_XORRLE | RDB_FEATURE_LZ4 | RDB_FEATURE_DISKREF |
		      RDB_FEATURE_DISKREF_DEVS;
	/* commit an empty epoch 0 so that inputs are staged (epoch 1) */
	if (rdb_stage_set_devstate(&st, 0, dev, sizeof(dev)) < 0 ||
	    rdb_stage_commit(&st, 0, 0, sizeof(dev), &img) < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct rdb_frame f = { .type = RDB_MSG_PAGES, .epoch = 1 };

	if (!ready) {
		init_once();
		ready = 1;
	}
	/* a buffered change of the epoch, for references to overlay */
	if (size > 2) {
		uint8_t blk[64];

		memset(blk, data[0], sizeof(blk));
		rdb_diskbuf_add(data[1] & 0x80 ? &db1 : &db, RDB_DISK_WRITE,
				(uint64_t)(data[1] % 4) * 4096 + data[2], sizeof(blk), blk);
	}
	f.payload = data;
	f.len = (uint32_t)size;
	/* a later epoch's references are read at the commit's disk step */
	if (rdb_stage_add_pages(&st, &f, &img) == 0)
		rdb_stage_commit_disk(&st);
	/* A frame is refused on its count before any page is decoded, so
	 * the scratch arena never holds more than the epoch's bound of
	 * pages (4 x the image's 17), whatever the input claims; the arena
	 * grows by doubling: at most twice that. */
	if (st.scratch.cap > 2 * 4 * 17 * 4096)
		abort();
	rdb_stage_discard(&st);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only
/* RDB-WRAP: posix_fallocate */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"
#include "ramimage.h"
#include "stage.h"

int __real_posix_fallocate(int fd, off_t off, off_t len);
static int fallocate_fails;

int __wrap_posix_fallocate(int fd, off_t off, off_t len)
{
	return fallocate_fails ? ENOSPC : __real_posix_fallocate(fd, off, len);
}

static char dir[64];
static const struct rdb_ram_block blocks[2] = { { "pc.ram", 4 * 4096 }, { "/rom@etc/x", 4096 } };

static int setup(void **state)
{
	strcpy(dir, "/tmp/rdb-stage-XXXXXX");
	assert_non_null(mkdtemp(dir));
	fallocate_fails = 0;
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

/* A PAGES frame for (epoch, block) with pages filled by `fill`, or zero
 * pages with fill byte when zero is set. */
static void pages_frame(struct rdb_buf *wire, uint64_t epoch, uint32_t block,
			const uint64_t *offs, int n, uint8_t fill, int zero,
			struct rdb_frame *f)
{
	struct rdb_proto_decoder d;
	struct rdb_buf rec;
	uint8_t pg[4096];

	memset(pg, fill, sizeof(pg));
	rdb_buf_init(&rec);
	for (int i = 0; i < n; i++)
		rdb_proto_page_record_append(&rec, offs[i], zero ? NULL : pg, fill);
	rdb_buf_reset(wire);
	rdb_proto_put_pages(wire, epoch, block, (uint32_t)n, rec.data, rec.len);
	rdb_buf_dispose(&rec);
	/* decode it back to get a frame pointing into wire */
	rdb_proto_decoder_init(&d);
	rdb_proto_decoder_feed(&d, wire->data, wire->len);
	assert_int_equal(rdb_proto_decoder_next(&d, f), 1);
	/* keep the payload: copy into wire's storage */
	rdb_buf_reset(wire);
	rdb_buf_append(wire, f->payload, f->len);
	f->payload = wire->data;
	rdb_proto_decoder_dispose(&d);
}

static const uint8_t DEV[] = { 4, 1, 2, 0 };

static void test_complete_epoch_commits_everything(void **state)
{
	struct rdb_ramimage img;
	struct rdb_stage st;
	struct rdb_buf w;
	struct rdb_frame f;
	uint64_t offs[2] = { 0, 8192 };
	uint8_t *ram;

	rdb_buf_init(&w);
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	assert_non_null(rdb_ramimage_path(&img, "/rom@etc/x"));
	assert_non_null(strstr(rdb_ramimage_path(&img, "/rom@etc/x"), "_rom@etc_x.img"));
	rdb_stage_init(&st);
	pages_frame(&w, 0, 0, offs, 2, 0x5a, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_int_equal(rdb_stage_set_devstate(&st, 0, DEV, sizeof(DEV)), 0);
	ram = rdb_ramimage_base(&img, 0);
	/* epoch 0 is written as it comes: nothing is committed before it */
	assert_int_equal(ram[0], 0x5a);
	assert_null(rdb_stage_committed(&st));
	assert_int_equal(rdb_stage_commit(&st, 0, 2, 2 * 4096 + sizeof(DEV), &img), 0);
	assert_int_equal(ram[0], 0x5a);
	assert_int_equal(ram[8192 + 4095], 0x5a);
	assert_int_equal(ram[4096], 0);
	assert_int_equal(rdb_stage_committed(&st)->epoch, 0);
	assert_memory_equal(rdb_stage_committed(&st)->devstate, DEV, sizeof(DEV));
	/* epoch 1 is staged: nothing reaches the image before its commit */
	pages_frame(&w, 1, 0, offs, 1, 0, 1, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_int_equal(rdb_stage_set_devstate(&st, 1, DEV, sizeof(DEV)), 0);
	assert_int_equal(ram[0], 0x5a);
	assert_int_equal(rdb_stage_commit(&st, 1, 1, 1 + sizeof(DEV), &img), 0);
	assert_int_equal(ram[0], 0);
	assert_int_equal(ram[8192], 0x5a);
	rdb_stage_dispose(&st);
	rdb_ramimage_close(&img);
	rdb_ramimage_close(&img);	/* idempotent */
	rdb_buf_dispose(&w);
}

static void test_incomplete_epoch_applies_nothing(void **state)
{
	struct rdb_ramimage img;
	struct rdb_stage st;
	struct rdb_buf w;
	struct rdb_frame f;
	uint64_t offs[1] = { 4096 };
	uint8_t *ram;

	rdb_buf_init(&w);
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	ram = rdb_ramimage_base(&img, 0);
	rdb_stage_init(&st);
	/* an empty epoch 0 commits first */
	assert_int_equal(rdb_stage_set_devstate(&st, 0, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 0, 0, sizeof(DEV), &img), 0);
	pages_frame(&w, 1, 0, offs, 1, 0x77, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	/* no device state yet */
	assert_int_equal(rdb_stage_commit(&st, 1, 1, 4096, &img), -EPROTO);
	assert_int_equal(ram[4096], 0);
	assert_int_equal(rdb_stage_set_devstate(&st, 1, DEV, sizeof(DEV)), 0);
	/* the primary says 2 pages were sent: one is missing */
	assert_int_equal(rdb_stage_commit(&st, 1, 2, 2 * 4096 + sizeof(DEV), &img), -EPROTO);
	assert_non_null(strstr(rdb_stage_error(&st), "incomplete"));
	assert_int_equal(ram[4096], 0);
	assert_int_equal(rdb_stage_committed(&st)->epoch, 0);
	/* failover: the staged epoch leaves no trace */
	rdb_stage_discard(&st);
	assert_int_equal(ram[4096], 0);
	rdb_stage_dispose(&st);
	rdb_ramimage_close(&img);
	rdb_buf_dispose(&w);
}

static void test_order_and_bounds(void **state)
{
	struct rdb_ramimage img;
	struct rdb_stage st;
	struct rdb_buf w;
	struct rdb_frame f;
	uint64_t bad[1] = { 4 * 4096 }, odd[1] = { 100 };

	rdb_buf_init(&w);
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	rdb_stage_init(&st);
	/* epoch 1 before epoch 0 */
	assert_int_equal(rdb_stage_set_devstate(&st, 1, DEV, sizeof(DEV)), -EPROTO);
	assert_non_null(strstr(rdb_stage_error(&st), "out of order"));
	/* a page past the block */
	pages_frame(&w, 0, 0, bad, 1, 1, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), -EPROTO);
	rdb_stage_discard(&st);
	/* a misaligned page */
	pages_frame(&w, 0, 0, odd, 1, 1, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), -EPROTO);
	rdb_stage_discard(&st);
	/* a block that does not exist */
	pages_frame(&w, 0, 7, odd, 1, 1, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), -EPROTO);
	/* device state must end in EOF */
	rdb_stage_discard(&st);
	assert_int_equal(rdb_stage_set_devstate(&st, 0, (const uint8_t *)"\x04\x01", 2), -EPROTO);
	rdb_stage_dispose(&st);
	rdb_ramimage_close(&img);
	rdb_buf_dispose(&w);
}

static void test_full_disk_fails_at_setup(void **state)
{
	struct rdb_ramimage img;

	fallocate_fails = 1;
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), -ENOSPC);
	fallocate_fails = 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_complete_epoch_commits_everything, setup, teardown),
		cmocka_unit_test_setup_teardown(test_incomplete_epoch_applies_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_order_and_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_disk_fails_at_setup, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

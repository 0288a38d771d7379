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
#include <sys/mman.h>
#include <unistd.h>

#include <lz4.h>
#include <openssl/evp.h>

#include "pagedigest.h"
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

static void flows_frame_nic(struct rdb_buf *wire, uint32_t nic, uint64_t epoch,
			    const struct rdb_flow_rec *r, size_t n,
			    struct rdb_frame *f)
{
	struct rdb_proto_decoder d;

	rdb_buf_reset(wire);
	assert_int_equal(rdb_proto_put_flows(wire, nic, epoch, r, n), 0);
	rdb_proto_decoder_init(&d);
	rdb_proto_decoder_feed(&d, wire->data, wire->len);
	assert_int_equal(rdb_proto_decoder_next(&d, f), 1);
	rdb_buf_reset(wire);
	rdb_buf_append(wire, f->payload, f->len);
	f->payload = wire->data;
	rdb_proto_decoder_dispose(&d);
}

static void flows_frame(struct rdb_buf *wire, uint64_t epoch,
			const struct rdb_flow_rec *r, size_t n, struct rdb_frame *f)
{
	flows_frame_nic(wire, 0, epoch, r, n, f);
}

/* FLOWS records reach the flow table when, and only when, their epoch
 * commits; a malformed frame is taken whole or not at all. */
static void test_flows_applied_at_commit(void **state)
{
	struct rdb_flow_rec r[2] = { 0 };
	struct rdb_flowcheck fc;
	struct rdb_ramimage img;
	struct rdb_stage st;
	struct rdb_buf w;
	struct rdb_frame f;
	uint64_t offs[1] = { 0 };
	size_t flen;

	for (int i = 0; i < 2; i++) {
		r[i].op = RDB_FLOW_UPSERT;
		r[i].key.family = 4;
		r[i].key.guest_port = 5432;
		r[i].key.peer_port = (uint16_t)(40000 + i);
		r[i].snd_ref = 100;
	}
	rdb_buf_init(&w);
	rdb_flowcheck_init(&fc, "vm1", 0);
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	rdb_stage_init(&st);
	st.flows[0] = &fc;
	st.nflows = 1;
	/* not negotiated: refused */
	flows_frame(&w, 0, r, 2, &f);
	assert_int_equal(rdb_stage_add_flows(&st, &f), -EPROTO);
	st.features = RDB_FEATURE_FLOWS;
	pages_frame(&w, 0, 0, offs, 1, 1, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	flows_frame(&w, 0, r, 2, &f);
	flen = f.len;
	assert_int_equal(rdb_stage_add_flows(&st, &f), 0);
	assert_int_equal(rdb_flowcheck_flows(&fc), 0);
	assert_int_equal(rdb_stage_set_devstate(&st, 0, DEV, sizeof(DEV)), 0);
	/* a FLOWS frame counts as one record and its payload length */
	assert_int_equal(rdb_stage_commit(&st, 0, 1, 4096 + sizeof(DEV), &img), -EPROTO);
	assert_int_equal(rdb_stage_commit(&st, 0, 2, 4096 + flen + sizeof(DEV), &img), 0);
	assert_int_equal(rdb_flowcheck_flows(&fc), 2);
	/* epoch 1: one removal, then a bad record: nothing staged of it */
	r[0].op = RDB_FLOW_REMOVE;
	flows_frame(&w, 1, r, 2, &f);
	((uint8_t *)f.payload)[4 + 64 + 1] = 9;		/* second record: family 9 */
	assert_int_equal(rdb_stage_add_flows(&st, &f), -EPROTO);
	flows_frame(&w, 1, r, 1, &f);
	assert_int_equal(rdb_stage_add_flows(&st, &f), 0);
	/* discarded (failover): the table stays as committed */
	rdb_stage_discard(&st);
	assert_int_equal(rdb_flowcheck_flows(&fc), 2);
	assert_int_equal(rdb_stage_add_flows(&st, &f), 0);
	assert_int_equal(rdb_stage_set_devstate(&st, 1, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 1, 1, f.len + sizeof(DEV), &img), 0);
	assert_int_equal(rdb_flowcheck_flows(&fc), 1);
	rdb_stage_dispose(&st);
	rdb_flowcheck_dispose(&fc);
	rdb_ramimage_close(&img);
	rdb_buf_dispose(&w);
}

/* Each NIC's FLOWS reach that NIC's table (the frame's device), none
 * another's; a NIC the VM does not have is refused. */
static void test_flows_by_nic(void **state)
{
	struct rdb_flow_rec r[3] = { 0 };
	struct rdb_flowcheck fc[2];
	struct rdb_ramimage img;
	struct rdb_stage st;
	struct rdb_buf w;
	struct rdb_frame f;
	size_t len = 0;

	for (int i = 0; i < 3; i++) {
		r[i].op = RDB_FLOW_UPSERT;
		r[i].key.family = 4;
		r[i].key.guest_port = 5432;
		r[i].key.peer_port = (uint16_t)(41000 + i);
	}
	rdb_buf_init(&w);
	rdb_flowcheck_init(&fc[0], "vm1", 0);
	rdb_flowcheck_init(&fc[1], "vm1", 0);
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	rdb_stage_init(&st);
	st.flows[0] = &fc[0];
	st.flows[1] = &fc[1];
	st.nflows = 2;
	st.features = RDB_FEATURE_FLOWS;
	flows_frame_nic(&w, 1, 0, r, 2, &f);		/* NIC 1: two flows */
	len += f.len;
	assert_int_equal(rdb_stage_add_flows(&st, &f), 0);
	flows_frame_nic(&w, 0, 0, r + 2, 1, &f);	/* NIC 0: one */
	len += f.len;
	assert_int_equal(rdb_stage_add_flows(&st, &f), 0);
	flows_frame_nic(&w, 2, 0, r, 1, &f);		/* NIC 2: not here */
	assert_int_equal(rdb_stage_add_flows(&st, &f), -EPROTO);
	assert_non_null(strstr(rdb_stage_error(&st), "NIC 2"));
	rdb_stage_discard(&st);
	/* again, whole, and committed */
	flows_frame_nic(&w, 1, 0, r, 2, &f);
	assert_int_equal(rdb_stage_add_flows(&st, &f), 0);
	flows_frame_nic(&w, 0, 0, r + 2, 1, &f);
	assert_int_equal(rdb_stage_add_flows(&st, &f), 0);
	assert_int_equal(rdb_flowcheck_flows(&fc[0]) + rdb_flowcheck_flows(&fc[1]), 0);
	assert_int_equal(rdb_stage_set_devstate(&st, 0, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 0, 2, len + sizeof(DEV), &img), 0);
	assert_int_equal(rdb_flowcheck_flows(&fc[0]), 1);
	assert_int_equal(rdb_flowcheck_flows(&fc[1]), 2);
	rdb_stage_dispose(&st);
	rdb_flowcheck_dispose(&fc[0]);
	rdb_flowcheck_dispose(&fc[1]);
	rdb_ramimage_close(&img);
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

/* Counts this process's open fds, to see that failures leak none. */
static int open_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

static void test_full_disk_leaks_nothing(void **state)
{
	struct rdb_ramimage img;
	int before = open_fds();

	/* the second block's file fails: the first's fd and map must go */
	fallocate_fails = 0;
	assert_int_equal(rdb_ramimage_open(dir, blocks, 1, &img), 0);
	rdb_ramimage_close(&img);
	assert_int_equal(open_fds(), before);
	fallocate_fails = 1;
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), -ENOSPC);
	assert_int_equal(open_fds(), before);
	rdb_ramimage_close(&img);	/* safe after a failed open */
	fallocate_fails = 0;
}

static void test_image_checks_and_accessors(void **state)
{
	struct rdb_ram_block bad[2] = { { "a/b", 4096 }, { "a_b", 4096 } };
	struct rdb_ramimage img;
	char longdir[600];
	uint8_t *ram;

	/* two idstrs, one file name */
	assert_int_equal(rdb_ramimage_open(dir, bad, 2, &img), -EEXIST);
	/* zero or partial-page blocks */
	bad[1].used_length = 0;
	strcpy(bad[1].idstr, "z");
	assert_int_equal(rdb_ramimage_open(dir, bad, 2, &img), -EINVAL);
	bad[1].used_length = 100;
	assert_int_equal(rdb_ramimage_open(dir, bad, 2, &img), -EINVAL);
	assert_int_equal(rdb_ramimage_open(dir, bad, 0, &img), -EINVAL);
	/* a path that would not fit is refused, not cut */
	memset(longdir, 'd', sizeof(longdir) - 1);
	longdir[sizeof(longdir) - 1] = 0;
	assert_int_equal(rdb_ramimage_open(longdir, blocks, 1, &img), -ENAMETOOLONG);

	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	assert_int_equal(rdb_ramimage_length(&img, 0), 4 * 4096);
	assert_int_equal(rdb_ramimage_length(&img, 1), 4096);
	assert_int_equal(rdb_ramimage_length(&img, 2), 0);
	assert_null(rdb_ramimage_base(&img, 2));
	assert_null(rdb_ramimage_path(&img, "nope"));
	ram = rdb_ramimage_base(&img, 0);
	memset(ram, 0xee, 4 * 4096);
	rdb_ramimage_close(&img);
	/* the file holds what was written (MAP_SHARED) ... */
	{
		char path[600];
		uint8_t b = 0;
		int fd;

		snprintf(path, sizeof(path), "%s/pc.ram.img", dir);
		fd = open(path, O_RDONLY);
		assert_true(fd >= 0);
		assert_int_equal(pread(fd, &b, 1, 3 * 4096 + 7), 1);
		assert_int_equal(b, 0xee);
		close(fd);
	}
	/* ... and a new protection starts from zeros, never stale RAM */
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	ram = rdb_ramimage_base(&img, 0);
	for (size_t i = 0; i < 4 * 4096; i++)
		if (ram[i]) {
			fail_msg("stale byte at %zu", i);
		}
	rdb_ramimage_close(&img);
}

/* Epoch 0 committed with pages 0..3 of block 0 = 0x10 and DEV. */
static void commit_epoch0(struct rdb_stage *st, struct rdb_ramimage *img,
			  struct rdb_buf *w)
{
	uint64_t offs[4] = { 0, 4096, 8192, 12288 };
	struct rdb_frame f;

	pages_frame(w, 0, 0, offs, 4, 0x10, 0, &f);
	assert_int_equal(rdb_stage_add_pages(st, &f, img), 0);
	assert_int_equal(rdb_stage_set_devstate(st, 0, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(st, 0, 4, 4 * 4096 + sizeof(DEV), img), 0);
}

static void test_zero_page_epoch_and_devstate_swap(void **state)
{
	static const uint8_t DEV2[] = { 4, 9, 9, 9, 0 };
	struct rdb_ramimage img;
	struct rdb_stage st;
	struct rdb_buf w;
	const struct rdb_committed *c;

	rdb_buf_init(&w);
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	rdb_stage_init(&st);
	commit_epoch0(&st, &img, &w);
	/* an epoch in which the guest dirtied nothing: device state only */
	assert_int_equal(rdb_stage_set_devstate(&st, 1, DEV2, sizeof(DEV2)), 0);
	c = rdb_stage_committed(&st);
	assert_memory_equal(c->devstate, DEV, sizeof(DEV));	/* not yet */
	assert_int_equal(rdb_stage_commit(&st, 1, 0, sizeof(DEV2), &img), 0);
	c = rdb_stage_committed(&st);
	assert_int_equal(c->epoch, 1);
	assert_int_equal(c->devstate_len, sizeof(DEV2));
	assert_memory_equal(c->devstate, DEV2, sizeof(DEV2));
	assert_int_equal(rdb_ramimage_base(&img, 0)[12288], 0x10);
	rdb_stage_dispose(&st);
	rdb_stage_dispose(&st);	/* idempotent */
	rdb_ramimage_close(&img);
	rdb_buf_dispose(&w);
}

/* A page of one value over a page that holds it already is not written
 * (no write fault, nothing to write back): with the image read-only, the
 * initial state's zero pages and a committed epoch's 0x10 pages over
 * the same values go through; a different value is written. */
static void test_same_fill_not_written(void **state)
{
	uint64_t offs[4] = { 0, 4096, 8192, 12288 };
	struct rdb_ramimage img;
	struct rdb_stage st;
	struct rdb_buf w;
	struct rdb_frame f;
	uint8_t *ram;

	rdb_buf_init(&w);
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	ram = rdb_ramimage_base(&img, 0);
	rdb_stage_init(&st);
	assert_int_equal(mprotect(ram, 4 * 4096, PROT_READ), 0);
	pages_frame(&w, 0, 0, offs, 4, 0, 1, &f);	/* zero pages */
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_int_equal(mprotect(ram, 4 * 4096, PROT_READ | PROT_WRITE), 0);
	pages_frame(&w, 0, 0, offs, 4, 0x10, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_int_equal(rdb_stage_set_devstate(&st, 0, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 0, 8, 4 + 4 * 4096 + sizeof(DEV), &img), 0);
	/* epoch 1: pages of 0x10 (as they are) and one of 0x77 */
	pages_frame(&w, 1, 0, offs, 3, 0x10, 1, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_int_equal(rdb_stage_set_devstate(&st, 1, DEV, sizeof(DEV)), 0);
	assert_int_equal(mprotect(ram, 4 * 4096, PROT_READ), 0);
	assert_int_equal(rdb_stage_commit(&st, 1, 3, 3 + sizeof(DEV), &img), 0);
	assert_int_equal(mprotect(ram, 4 * 4096, PROT_READ | PROT_WRITE), 0);
	offs[0] = 12288;
	pages_frame(&w, 2, 0, offs, 1, 0x77, 1, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_int_equal(rdb_stage_set_devstate(&st, 2, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 2, 1, 1 + sizeof(DEV), &img), 0);
	assert_int_equal(ram[8192 + 4095], 0x10);
	assert_int_equal(ram[12288], 0x77);
	assert_int_equal(ram[12288 + 4095], 0x77);
	rdb_stage_dispose(&st);
	rdb_ramimage_close(&img);
	rdb_buf_dispose(&w);
}

static void test_bad_frame_is_taken_whole_or_not_at_all(void **state)
{
	struct rdb_ramimage img;
	struct rdb_stage st;
	struct rdb_buf w;
	struct rdb_frame f;
	uint64_t mixed[2] = { 4096, 5 * 4096 }, good[1] = { 8192 };
	uint8_t *ram;

	rdb_buf_init(&w);
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	ram = rdb_ramimage_base(&img, 0);
	rdb_stage_init(&st);
	/* Even in epoch 0 (written straight through) a frame whose second
	 * record is out of bounds writes nothing of its first. */
	pages_frame(&w, 0, 0, mixed, 2, 0x33, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), -EPROTO);
	assert_int_equal(ram[4096], 0);
	rdb_stage_discard(&st);
	commit_epoch0(&st, &img, &w);
	/* Epoch 1: the bad frame counts for nothing, so an EPOCH_END that
	 * lists only the good frame commits. */
	pages_frame(&w, 1, 0, mixed, 2, 0x44, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), -EPROTO);
	pages_frame(&w, 1, 0, good, 1, 0x55, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_int_equal(rdb_stage_set_devstate(&st, 1, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 1, 1, 4096 + sizeof(DEV), &img), 0);
	assert_int_equal(ram[4096], 0x10);
	assert_int_equal(ram[8192], 0x55);
	rdb_stage_dispose(&st);
	rdb_ramimage_close(&img);
	rdb_buf_dispose(&w);
}

static void test_epoch_rules(void **state)
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
	commit_epoch0(&st, &img, &w);
	/* epoch 0 again, and epoch 2 before 1 */
	pages_frame(&w, 0, 0, offs, 1, 0x66, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), -EPROTO);
	pages_frame(&w, 2, 0, offs, 1, 0x66, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), -EPROTO);
	/* epoch 1 open: epoch-2 data or an EPOCH_END(2) do not mix in */
	pages_frame(&w, 1, 0, offs, 1, 0x66, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_int_equal(rdb_stage_set_devstate(&st, 2, DEV, sizeof(DEV)), -EPROTO);
	assert_int_equal(rdb_stage_set_devstate(&st, 1, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_set_devstate(&st, 1, DEV, sizeof(DEV)), -EPROTO);
	assert_int_equal(rdb_stage_commit(&st, 2, 1, 4096 + sizeof(DEV), &img), -EPROTO);
	/* right page count, wrong byte count */
	assert_int_equal(rdb_stage_commit(&st, 1, 1, 4096, &img), -EPROTO);
	assert_int_equal(ram[4096], 0x10);
	assert_int_equal(rdb_stage_committed(&st)->epoch, 0);
	/* failover path: drop epoch 1; the link comes back and resends it */
	rdb_stage_discard(&st);
	assert_int_equal(ram[4096], 0x10);
	pages_frame(&w, 1, 0, offs, 1, 0x77, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_int_equal(rdb_stage_set_devstate(&st, 1, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 1, 1, 4096 + sizeof(DEV), &img), 0);
	assert_int_equal(ram[4096], 0x77);
	assert_int_equal(rdb_stage_committed(&st)->epoch, 1);
	rdb_stage_dispose(&st);
	rdb_ramimage_close(&img);
	rdb_buf_dispose(&w);
}

/* Staging memory: one arena that grows to the largest epoch and is reused;
 * later records of the same page win (applied in arrival order). */
static void test_arena_reused_and_order_kept(void **state)
{
	struct rdb_ramimage img;
	struct rdb_stage st;
	struct rdb_buf w;
	struct rdb_frame f;
	uint64_t offs[3] = { 0, 4096, 8192 }, again[1] = { 4096 };
	size_t cap = 0;
	uint8_t *ram;

	rdb_buf_init(&w);
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	ram = rdb_ramimage_base(&img, 0);
	rdb_stage_init(&st);
	commit_epoch0(&st, &img, &w);
	for (uint64_t e = 1; e <= 50; e++) {
		pages_frame(&w, e, 0, offs, 3, (uint8_t)e, 0, &f);
		assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
		pages_frame(&w, e, 0, again, 1, 0xf0, 1, &f);
		assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
		assert_int_equal(rdb_stage_set_devstate(&st, e, DEV, sizeof(DEV)), 0);
		assert_int_equal(rdb_stage_commit(&st, e, 4, 3 * 4096 + 1 + sizeof(DEV), &img), 0);
		assert_int_equal(ram[0], (uint8_t)e);
		assert_int_equal(ram[4096 + 100], 0xf0);
		if (e == 1)
			cap = st.pages.cap;
		assert_int_equal(st.pages.cap, cap);
	}
	rdb_stage_dispose(&st);
	rdb_ramimage_close(&img);
	rdb_buf_dispose(&w);
}

/* A peer that never ends its epoch cannot grow the backup's memory
 * without bound: 5 pages of RAM allow at most 20 staged records. */
static void test_epoch_size_bounded(void **state)
{
	struct rdb_ramimage img;
	struct rdb_stage st;
	struct rdb_buf w;
	struct rdb_frame f;
	uint64_t offs[4] = { 0, 4096, 8192, 12288 };
	int i, rc = 0;

	rdb_buf_init(&w);
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	rdb_stage_init(&st);
	commit_epoch0(&st, &img, &w);
	pages_frame(&w, 1, 0, offs, 4, 1, 0, &f);
	for (i = 0; i < 100 && rc == 0; i++)
		rc = rdb_stage_add_pages(&st, &f, &img);
	assert_int_equal(rc, -EPROTO);
	assert_int_equal(i, 6);	/* 5 frames = 20 records fit */
	assert_int_equal(st.npages, 20);
	rdb_stage_dispose(&st);
	rdb_ramimage_close(&img);
	rdb_buf_dispose(&w);
}

/*
 * A PAGES payload of n LZ4 records of a zero page, record i for page
 * (first + i) % npages of the block, whose header says `count` records:
 * built by hand, as a peer that lies in its header would send it (the
 * encoder refuses a count over the frame bound).  f->payload is in wire.
 */
static int lz4_frame(struct rdb_buf *wire, uint64_t epoch, uint32_t block,
		     uint64_t npages, uint32_t n, uint32_t count,
		     struct rdb_frame *f)
{
	static const uint8_t zero[4096];
	char lz[LZ4_COMPRESSBOUND(4096)];
	uint8_t h[8] = { block >> 24, block >> 16, block >> 8, block,
			 count >> 24, count >> 16, count >> 8, count };
	int lzlen = LZ4_compress_default((const char *)zero, lz, sizeof(zero),
					 sizeof(lz));

	assert_true(lzlen > 0);
	rdb_buf_reset(wire);
	assert_int_equal(rdb_buf_append(wire, h, sizeof(h)), 0);
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(rdb_proto_page_record_append_enc(wire,
				(i % npages) * 4096, RDB_PAGE_LZ4,
				(const uint8_t *)lz, (size_t)lzlen), 0);
	memset(f, 0, sizeof(*f));
	f->type = RDB_MSG_PAGES;
	f->epoch = epoch;
	f->payload = wire->data;
	f->len = (uint32_t)wire->len;
	return lzlen;
}

/* The stage refused the frame and its scratch arena holds at most max. */
static void refused_within(struct rdb_stage *st, int rc, size_t max,
			   const char *what)
{
	if (rc != -EPROTO || st->scratch.cap > max)
		fail_msg("%s: rc %d (%s), scratch arena %zu bytes (at most %zu)",
			 what, rc, rdb_stage_error(st), st->scratch.cap, max);
}

/*
 * The LZ4 pages of a frame are decoded (4 KiB each) before any record is
 * kept, so a frame is refused on its header's count before anything is
 * decoded: a count over what the epoch may still stage, or over what
 * the payload can hold.  The scratch arena never
 * grows past what the block's own pages need (4 pages here).
 */
static void test_pages_count_checked_before_decoding(void **state)
{
	struct rdb_ramimage img;
	struct rdb_stage st;
	struct rdb_buf w;
	struct rdb_frame f;
	int i, lzlen;

	rdb_buf_init(&w);
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	rdb_stage_init(&st);
	st.features = RDB_FEATURE_LZ4;
	commit_epoch0(&st, &img, &w);
	/* 4096 real records of ~20 bytes for a VM of 5 pages */
	lz4_frame(&w, 1, 0, 4, 4096, 4096, &f);
	refused_within(&st, rdb_stage_add_pages(&st, &f, &img), 4 * 4096,
		       "4096 records for a VM of 5 pages");
	assert_non_null(strstr(rdb_stage_error(&st), "4x"));
	assert_int_equal(st.npages, 0);
	/* a header that claims 2^32 - 1 records over 64 real ones */
	lz4_frame(&w, 1, 0, 4, 64, UINT32_MAX, &f);
	refused_within(&st, rdb_stage_add_pages(&st, &f, &img), 4 * 4096,
		       "2^32 - 1 records claimed, 64 sent");
	assert_non_null(strstr(rdb_stage_error(&st), "malformed PAGES"));
	/* ... and 4 claimed over 64 sent: the bytes after the 4th refuse it */
	lz4_frame(&w, 1, 0, 4, 64, 4, &f);
	refused_within(&st, rdb_stage_add_pages(&st, &f, &img), 4 * 4096,
		       "4 records claimed, 64 sent");
	/* the epoch's bound (4 x 5 pages): five frames of 4 fit, the sixth
	 * is refused on its count */
	lzlen = lz4_frame(&w, 1, 0, 4, 4, 4, &f);
	for (i = 0; i < 5; i++)
		assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	refused_within(&st, rdb_stage_add_pages(&st, &f, &img), 4 * 4096,
		       "a frame over the epoch's bound");
	assert_non_null(strstr(rdb_stage_error(&st), "4x"));
	assert_int_equal(st.npages, 20);
	/* what was refused left nothing: the 20 records commit */
	assert_int_equal(rdb_stage_set_devstate(&st, 1, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 1, 20, 20 * (2 + (uint64_t)lzlen) +
					  sizeof(DEV), &img), 0);
	assert_int_equal(rdb_ramimage_base(&img, 0)[4096], 0);
	rdb_stage_dispose(&st);
	rdb_ramimage_close(&img);
	rdb_buf_dispose(&w);
}

/*
 * The per-frame bound holds whatever the VM's size: in a block of
 * RDB_PROTO_MAX_FRAME_PAGES + 1 pages, a frame naming every page once is
 * refused before any is decoded; one page fewer is taken, with at most
 * 64 MiB of scratch.
 */
static void test_pages_frame_bound(void **state)
{
	const uint32_t max = RDB_PROTO_MAX_FRAME_PAGES;
	const struct rdb_ram_block big[1] = { { "pc.ram", (uint64_t)(max + 1) * 4096 } };
	struct rdb_ramimage img;
	struct rdb_stage st;
	struct rdb_buf w;
	struct rdb_frame f;

	rdb_buf_init(&w);
	assert_int_equal(rdb_ramimage_open(dir, big, 1, &img), 0);
	rdb_stage_init(&st);
	st.features = RDB_FEATURE_LZ4;
	lz4_frame(&w, 0, 0, max + 1, max + 1, max + 1, &f);
	refused_within(&st, rdb_stage_add_pages(&st, &f, &img), 4 * 4096,
		       "RDB_PROTO_MAX_FRAME_PAGES + 1 records in one frame");
	assert_non_null(strstr(rdb_stage_error(&st), "at most"));
	lz4_frame(&w, 0, 0, max + 1, max, max, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_true(st.scratch.cap <= (size_t)max * 4096);
	assert_int_equal(st.npages, max);
	rdb_stage_dispose(&st);
	rdb_ramimage_close(&img);
	rdb_buf_dispose(&w);
}

/* A PAGES frame of DISKREF records: page offs[i] is disk block dblk[i]
 * (a disk offset / 4096) with contents all fill[i]. */
static void diskref_frame(struct rdb_buf *wire, uint64_t epoch,
			  const uint64_t *offs, const uint64_t *dblk,
			  const uint8_t *fill, int n, struct rdb_frame *f)
{
	struct rdb_proto_decoder d;
	struct rdb_buf rec;
	uint8_t pg[4096], md[EVP_MAX_MD_SIZE];
	unsigned mdlen;

	rdb_buf_init(&rec);
	for (int i = 0; i < n; i++) {
		memset(pg, fill[i], sizeof(pg));
		assert_true(EVP_Digest(pg, sizeof(pg), md, &mdlen, EVP_sha256(), NULL));
		assert_int_equal(rdb_proto_page_record_append_diskref(&rec, offs[i],
							dblk[i] * 4096, md), 0);
	}
	rdb_buf_reset(wire);
	rdb_proto_put_pages(wire, epoch, 0, (uint32_t)n, rec.data, rec.len);
	rdb_buf_dispose(&rec);
	rdb_proto_decoder_init(&d);
	rdb_proto_decoder_feed(&d, wire->data, wire->len);
	assert_int_equal(rdb_proto_decoder_next(&d, f), 1);
	rdb_buf_reset(wire);
	rdb_buf_append(wire, f->payload, f->len);
	f->payload = wire->data;
	rdb_proto_decoder_dispose(&d);
}

/*
 * Disk read tracking on the backup: a DISKREF page is the replica's block
 * as of the epoch's commit (its own buffered writes included), checked by
 * SHA-256; a mismatch, a block beyond the disk, an encoding that was not
 * granted or a VM without a disk refuse the frame whole.
 */
/* A disk write that names another disk than the one replica here is
 * refused, and nothing of it reaches the replica, at epoch 0 (applied at
 * once) or later (buffered). */
static void test_other_disk_refused(void **state)
{
	struct rdb_proto_decoder d;
	struct rdb_diskbuf db;
	struct rdb_stage st;
	struct rdb_buf w;
	struct rdb_frame f;
	uint8_t blk[4096], got[4096];
	char path[128];

	rdb_buf_init(&w);
	snprintf(path, sizeof(path), "%s/replica-dev.img", dir);
	rdb_diskbuf_init(&db, 1 << 20);
	assert_int_equal(rdb_diskbuf_create(&db, path, 16 * 4096), 0);
	rdb_stage_init(&st);
	st.disks[0] = &db;
	st.ndisks = 1;
	memset(blk, 'X', sizeof(blk));
	for (uint64_t epoch = 0; epoch < 2; epoch++) {
		rdb_buf_reset(&w);
		assert_int_equal(rdb_proto_put_disk_write(&w, 1, epoch, 4096, blk,
							  sizeof(blk)), 0);
		rdb_proto_decoder_init(&d);
		rdb_proto_decoder_feed(&d, w.data, w.len);
		assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
		assert_int_equal(f.device, 1);
		assert_int_equal(rdb_stage_add_disk(&st, &f), -EPROTO);
		if (!strstr(rdb_stage_error(&st), "disk 1"))
			fail_msg("refused for another reason: %s", rdb_stage_error(&st));
		rdb_proto_decoder_dispose(&d);
		assert_int_equal(db.nrecs, 0);
		assert_int_equal(pread(db.fd, got, sizeof(got), 4096),
				 (ssize_t)sizeof(got));
		assert_int_equal(got[0], 0);
		assert_int_equal(got[4095], 0);
		assert_false(st.open);	/* no epoch opened by it */
		/* then as after epoch 0's commit: later writes are buffered */
		st.have_committed = true;
		st.c.epoch = 0;
	}
	rdb_stage_dispose(&st);
	rdb_diskbuf_dispose(&db);
	rdb_buf_dispose(&w);
}

static void test_diskref_resolved_and_checked(void **state)
{
	struct rdb_ramimage img;
	struct rdb_diskbuf db;
	struct rdb_stage st;
	struct rdb_buf w;
	struct rdb_frame f;
	uint8_t blk[4096], *ram;
	char path[128];
	uint64_t offs[2] = { 0, 4096 }, dblk[2];
	uint8_t fill[2];

	rdb_buf_init(&w);
	snprintf(path, sizeof(path), "%s/replica.img", dir);
	rdb_diskbuf_init(&db, 1 << 20);
	assert_int_equal(rdb_diskbuf_create(&db, path, 16 * 4096), 0);
	memset(blk, 'A', sizeof(blk));
	assert_int_equal(rdb_diskbuf_apply_one(&db, RDB_DISK_WRITE, 2 * 4096,
					       4096, blk), 0);
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	ram = rdb_ramimage_base(&img, 0);
	rdb_stage_init(&st);
	st.disks[0] = &db;
	st.ndisks = 1;
	st.features = RDB_FEATURE_DISKREF;

	/* epoch 0 may carry references too (its disk goes straight in) */
	dblk[0] = 2;
	fill[0] = 'A';
	diskref_frame(&w, 0, offs + 1, dblk, fill, 1, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_int_equal(ram[4096], 'A');
	assert_int_equal(rdb_stage_set_devstate(&st, 0, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 0, 1, RDB_PAGE_DISKREF_BODY +
					  sizeof(DEV), &img), 0);

	/* epoch 1 writes block 3 twice (first unaligned, into block 4:
	 * the last write wins) and zeroes block 4: a reference to block 3
	 * is its new contents, staged until the commit */
	memset(blk, 'C', sizeof(blk));
	assert_int_equal(rdb_diskbuf_add(&db, RDB_DISK_WRITE, 3 * 4096 + 100,
					 4096, blk), 0);
	memset(blk, 'B', sizeof(blk));
	assert_int_equal(rdb_diskbuf_add(&db, RDB_DISK_WRITE, 3 * 4096, 4096, blk), 0);
	dblk[0] = 2;
	dblk[1] = 3;
	fill[0] = 'A';
	fill[1] = 'B';
	diskref_frame(&w, 1, offs, dblk, fill, 2, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_int_equal(ram[0], 0);		/* staged, not applied */
	assert_int_equal(rdb_stage_set_devstate(&st, 1, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 1, 2, 2 * RDB_PAGE_DISKREF_BODY +
					  sizeof(DEV), &img), 0);
	assert_int_equal(ram[0], 'A');
	assert_int_equal(ram[4095], 'A');
	assert_int_equal(ram[4096], 'B');
	assert_int_equal(ram[8191], 'B');
	assert_int_equal(st.diskrefs, 3);

	/* epoch 2: block 3 is rewritten with 'D'; a reference that still
	 * claims 'B' (what the block held when it was read) is staged — it
	 * is read at the commit, off the loop — and refuses the epoch there,
	 * before the replica changes */
	memset(blk, 'D', sizeof(blk));
	assert_int_equal(rdb_diskbuf_add(&db, RDB_DISK_WRITE, 3 * 4096 + 8, 16, blk), 0);
	dblk[0] = 3;
	fill[0] = 'B';
	diskref_frame(&w, 2, offs, dblk, fill, 1, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_int_equal(st.pending_refs, 1);
	assert_int_equal(rdb_stage_set_devstate(&st, 2, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 2, 1, RDB_PAGE_DISKREF_BODY +
					  sizeof(DEV), &img), -EPROTO);
	assert_non_null(strstr(rdb_stage_error(&st), "SHA-256 mismatch"));
	assert_non_null(strstr(rdb_stage_error(&st), "disk 0's offset 12288"));
	assert_int_equal(st.diskrefs, 3);
	{
		uint8_t got[4096];

		assert_int_equal(pread(db.fd, got, sizeof(got), 3 * 4096),
				 (ssize_t)sizeof(got));
		assert_int_equal(got[8], 'B');	/* the replica as it was */
	}
	assert_int_equal(ram[0], 'A');		/* the image too */
	rdb_stage_discard(&st);
	assert_int_equal(st.pending_refs, 0);
	/* the contents the replica will hold at the commit: zero block 5 */
	assert_int_equal(rdb_diskbuf_add(&db, RDB_DISK_ZERO, 5 * 4096, 4096, NULL), 0);
	dblk[0] = 5;
	fill[0] = 0;
	diskref_frame(&w, 2, offs, dblk, fill, 1, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	/* beyond the disk */
	dblk[0] = 16;
	diskref_frame(&w, 2, offs, dblk, fill, 1, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), -EPROTO);
	assert_non_null(strstr(rdb_stage_error(&st), "beyond"));
	/* not granted */
	st.features = RDB_FEATURE_XORRLE;
	dblk[0] = 2;
	fill[0] = 'A';
	diskref_frame(&w, 2, offs, dblk, fill, 1, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), -EPROTO);
	assert_non_null(strstr(rdb_stage_error(&st), "not negotiated"));
	/* a VM without a disk */
	st.features = RDB_FEATURE_DISKREF;
	st.ndisks = 0;
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), -EPROTO);
	assert_non_null(strstr(rdb_stage_error(&st), "no disk"));
	st.disks[0] = &db;
	st.ndisks = 1;
	/* only the good frame of epoch 2 was staged */
	assert_int_equal(st.npages, 1);
	assert_int_equal(st.pending_refs, 1);
	assert_int_equal(rdb_stage_set_devstate(&st, 2, DEV, sizeof(DEV)), 0);
	/* (the disk changes went to the buffer directly: not counted) */
	assert_int_equal(rdb_stage_commit(&st, 2, 1, RDB_PAGE_DISKREF_BODY +
					  sizeof(DEV), &img), 0);
	assert_int_equal(st.pending_refs, 0);
	assert_int_equal(st.diskrefs, 4);
	assert_int_equal(ram[0], 0);
	assert_int_equal(ram[4096], 'B');
	rdb_stage_dispose(&st);
	rdb_ramimage_close(&img);
	rdb_diskbuf_dispose(&db);
	rdb_buf_dispose(&w);
}

/* With DISKREF_DEVS, a reference names its disk (the offset's top byte):
 * each is read from its own replica, as of the commit, and counted by
 * disk; a disk the VM does not have is refused.  Without the feature the
 * same bits are an offset beyond disk 0. */
static void test_diskref_other_disk(void **state)
{
	struct rdb_ramimage img;
	struct rdb_diskbuf db[2];
	struct rdb_stage st;
	struct rdb_buf w;
	struct rdb_frame f;
	uint8_t blk[4096], *ram;
	char path[128];
	const uint64_t D1 = 1ull << (RDB_DISKREF_DEV_SHIFT - 12);	/* disk 1, in blocks */
	uint64_t offs[2] = { 0, 4096 }, dblk[2];
	uint8_t fill[2];

	rdb_buf_init(&w);
	for (int k = 0; k < 2; k++) {
		snprintf(path, sizeof(path), "%s/replica-%d.img", dir, k);
		rdb_diskbuf_init(&db[k], 1 << 20);
		assert_int_equal(rdb_diskbuf_create(&db[k], path, 16 * 4096), 0);
		memset(blk, k ? 'Q' : 'A', sizeof(blk));
		assert_int_equal(rdb_diskbuf_apply_one(&db[k], RDB_DISK_WRITE,
						       2 * 4096, 4096, blk), 0);
	}
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	ram = rdb_ramimage_base(&img, 0);
	rdb_stage_init(&st);
	st.disks[0] = &db[0];
	st.disks[1] = &db[1];
	st.ndisks = 2;
	st.features = RDB_FEATURE_DISKREF | RDB_FEATURE_DISKREF_DEVS;
	/* epoch 0: block 2 of each disk, read at once */
	dblk[0] = 2;
	dblk[1] = D1 | 2;
	fill[0] = 'A';
	fill[1] = 'Q';
	diskref_frame(&w, 0, offs, dblk, fill, 2, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_int_equal(ram[0], 'A');
	assert_int_equal(ram[4096], 'Q');
	assert_int_equal(rdb_stage_set_devstate(&st, 0, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 0, 2, 2 * RDB_PAGE_DISKREF_BODY +
					  sizeof(DEV), &img), 0);
	/* epoch 1: disk 1's block 3 written in the epoch, referenced: read
	 * from disk 1 as of the commit (disk 0's block 3 is zero) */
	memset(blk, 'R', sizeof(blk));
	assert_int_equal(rdb_diskbuf_add(&db[1], RDB_DISK_WRITE, 3 * 4096, 4096, blk), 0);
	dblk[0] = D1 | 3;
	fill[0] = 'R';
	diskref_frame(&w, 1, offs, dblk, fill, 1, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_int_equal(st.pending_refs, 1);
	assert_int_equal(rdb_stage_set_devstate(&st, 1, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 1, 1, RDB_PAGE_DISKREF_BODY +
					  sizeof(DEV), &img), 0);
	assert_int_equal(ram[0], 'R');
	assert_int_equal(st.diskrefs, 3);
	assert_int_equal(st.diskrefs_dev[0], 1);
	assert_int_equal(st.diskrefs_dev[1], 2);
	/* disk 2: the VM has none */
	dblk[0] = 2 * D1 | 2;
	diskref_frame(&w, 2, offs, dblk, fill, 1, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), -EPROTO);
	assert_non_null(strstr(rdb_stage_error(&st), "no disk 2"));
	/* not granted: disk 1's reference is an offset beyond disk 0 */
	st.features = RDB_FEATURE_DISKREF;
	dblk[0] = D1 | 2;
	diskref_frame(&w, 2, offs, dblk, fill, 1, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), -EPROTO);
	assert_non_null(strstr(rdb_stage_error(&st), "beyond disk 0"));
	rdb_stage_dispose(&st);
	rdb_ramimage_close(&img);
	for (int k = 0; k < 2; k++)
		rdb_diskbuf_dispose(&db[k]);
	rdb_buf_dispose(&w);
}

/* VERIFY: the digest of the pages as applied must be the primary's. */
static void test_verify_digest(void **state)
{
	struct rdb_ramimage img;
	struct rdb_stage st;
	struct rdb_buf w;
	struct rdb_frame f;
	uint64_t offs[2] = { 0, 8192 }, d;
	uint8_t pg[4096];

	rdb_buf_init(&w);
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	rdb_stage_init(&st);
	assert_int_equal(rdb_stage_set_verify(&st, 0, 1, 1), -EPROTO);
	st.features = RDB_FEATURE_VERIFY;
	assert_int_equal(rdb_stage_set_devstate(&st, 0, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 0, 0, sizeof(DEV), &img), 0);
	memset(pg, 0x33, sizeof(pg));
	d = rdb_page_digest(0, 0, pg) + rdb_page_digest(0, 8192, pg);
	pages_frame(&w, 1, 0, offs, 2, 0x33, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	assert_int_equal(rdb_stage_set_verify(&st, 1, d, 2), 0);
	assert_int_equal(rdb_stage_set_verify(&st, 1, d, 2), -EPROTO);	/* twice */
	assert_int_equal(rdb_stage_set_devstate(&st, 1, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 1, 2, 2 * 4096 + sizeof(DEV), &img), 0);
	assert_int_equal(st.verified, 1);
	/* the same pages, the primary's digest of other contents */
	pages_frame(&w, 2, 0, offs, 2, 0x33, 0, &f);
	assert_int_equal(rdb_stage_add_pages(&st, &f, &img), 0);
	memset(pg, 0x34, 1);
	assert_int_equal(rdb_stage_set_verify(&st, 2, rdb_page_digest(0, 0, pg) +
					      rdb_page_digest(0, 8192, pg), 2), 0);
	assert_int_equal(rdb_stage_set_devstate(&st, 2, DEV, sizeof(DEV)), 0);
	assert_int_equal(rdb_stage_commit(&st, 2, 2, 2 * 4096 + sizeof(DEV), &img), -EPROTO);
	assert_non_null(strstr(rdb_stage_error(&st), "VERIFY"));
	rdb_stage_dispose(&st);
	rdb_ramimage_close(&img);
	rdb_buf_dispose(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_complete_epoch_commits_everything, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flows_applied_at_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flows_by_nic, setup, teardown),
		cmocka_unit_test_setup_teardown(test_incomplete_epoch_applies_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_order_and_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_disk_fails_at_setup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_disk_leaks_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image_checks_and_accessors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zero_page_epoch_and_devstate_swap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_fill_not_written, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_frame_is_taken_whole_or_not_at_all, setup, teardown),
		cmocka_unit_test_setup_teardown(test_epoch_rules, setup, teardown),
		cmocka_unit_test_setup_teardown(test_arena_reused_and_order_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_epoch_size_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pages_count_checked_before_decoding, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pages_frame_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_disk_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_diskref_resolved_and_checked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_diskref_other_disk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_verify_digest, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

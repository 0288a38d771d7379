// SPDX-License-Identifier: GPL-2.0-only
/* The per-page choice with disk read tracking: a page that holds a block
 * the index and the image agree on goes as DISKREF (offset + SHA-256); a
 * block changed in the image since is refused; a smaller XOR+RLE delta
 * wins; without DISKREF granted, or no hit, the other encodings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "fileio.h"
#include "pagecodec.h"
#include "readidx.h"

struct fx {
	char path[64], path1[64];
	int fd, fd1;			/* disk 0's image, disk 1's */
	struct rdb_readidx *ix;
	struct rdb_pagecache pc;
	struct rdb_rt rt;
	struct rdb_buf out;
	struct rdb_codec_stats st;
};

static void fill_random(uint8_t *b, unsigned seed)
{
	for (unsigned i = 0; i < RDB_PAGE_SIZE; i++)
		b[i] = (uint8_t)rand_r(&seed);
}

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));
	uint8_t blk[RDB_PAGE_SIZE];

	strcpy(x->path, "/tmp/rdb-pagecodec-XXXXXX");
	x->fd = mkstemp(x->path);
	assert_true(x->fd >= 0);
	for (unsigned b = 0; b < 8; b++) {
		fill_random(blk, 100 + b);
		assert_int_equal(rdb_pwrite_all(x->fd, blk, sizeof(blk),
						(uint64_t)b * RDB_PAGE_SIZE), 0);
	}
	strcpy(x->path1, "/tmp/rdb-pagecodec-XXXXXX");
	x->fd1 = mkstemp(x->path1);
	assert_true(x->fd1 >= 0);
	for (unsigned b = 0; b < 8; b++) {
		fill_random(blk, 200 + b);
		assert_int_equal(rdb_pwrite_all(x->fd1, blk, sizeof(blk),
						(uint64_t)b * RDB_PAGE_SIZE), 0);
	}
	assert_int_equal(rdb_readidx_create(&x->ix, 1 << 16), 0);
	assert_int_equal(rdb_pagecache_init(&x->pc, 16), 0);
	x->rt = (struct rdb_rt){ .ix = x->ix, .seed = 42, .epoch = 1, .ndisks = 2 };
	x->rt.disk[0].fd = x->fd;
	x->rt.disk[0].map = mmap(NULL, 8 * RDB_PAGE_SIZE, PROT_READ, MAP_SHARED, x->fd, 0);
	assert_true(x->rt.disk[0].map != MAP_FAILED);
	x->rt.disk[0].len = 8 * RDB_PAGE_SIZE;
	x->rt.disk[1].fd = x->fd1;
	x->rt.disk[1].map = NULL;	/* (no map: the read alone decides) */
	rdb_buf_init(&x->out);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;

	munmap((void *)x->rt.disk[0].map, x->rt.disk[0].len);
	close(x->fd);
	unlink(x->path);
	close(x->fd1);
	unlink(x->path1);
	rdb_readidx_destroy(x->ix);
	rdb_pagecache_dispose(&x->pc);
	rdb_buf_dispose(&x->out);
	free(x);
	return 0;
}

/* The guest read block b: what the drain does with its READ record. */
static void read_block(struct fx *x, uint64_t b)
{
	uint8_t blk[RDB_PAGE_SIZE];

	assert_int_equal(rdb_pread_all(x->fd, blk, sizeof(blk), b * RDB_PAGE_SIZE), 0);
	rdb_readidx_insert(x->ix, b, rdb_readidx_hash(blk, x->rt.seed), 1);
}

/* A candidate whose block the page cache does not hold: no disk read,
 * the page goes as a page; cached again, it is referenced. */
static void test_diskref_never_waits_for_the_disk(void **state)
{
	struct fx *x = *state;
	uint32_t all = RDB_FEATURE_XORRLE | RDB_FEATURE_LZ4 | RDB_FEATURE_DISKREF;
	uint8_t page[RDB_PAGE_SIZE];
	unsigned char vec[8];

	read_block(x, 6);
	assert_int_equal(fdatasync(x->fd), 0);
	assert_int_equal(posix_fadvise(x->fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	/* (asked without a read: a read that misses, even RWF_NOWAIT's,
	 * starts the block's I/O) */
	assert_int_equal(mincore((void *)x->rt.disk[0].map, x->rt.disk[0].len, vec), 0);
	if (vec[6] & 1)
		skip();	/* a filesystem that keeps it (tmpfs) */
	fill_random(page, 106);
	rdb_page_encode(&x->pc, all, &x->rt, 0, 0x60000, page, &x->out, &x->st);
	assert_int_not_equal(x->out.data[8], RDB_PAGE_DISKREF);
	assert_int_equal(x->st.rt_hits, 1);
	assert_int_equal(x->st.rt_uncached, 1);
	assert_int_equal(x->st.rt_unconfirmed, 0);
	/* the guest reads it again: cached, referenced */
	read_block(x, 6);
	rdb_buf_reset(&x->out);
	fill_random(page, 106);
	rdb_page_encode(&x->pc, all, &x->rt, 0, 0x70000, page, &x->out, &x->st);
	assert_int_equal(x->out.data[8], RDB_PAGE_DISKREF);
	assert_int_equal(x->st.rt_uncached, 1);
}

/* Disk 1's block read: the reference names disk 1 (bits 56-63 of the
 * offset); tracking disk 0 alone (a backup that cannot tell disks apart),
 * the same entry is refused. */
static void test_diskref_names_its_disk(void **state)
{
	struct fx *x = *state;
	uint32_t all = RDB_FEATURE_XORRLE | RDB_FEATURE_LZ4 | RDB_FEATURE_DISKREF;
	uint8_t page[RDB_PAGE_SIZE], blk[RDB_PAGE_SIZE];
	uint64_t wire = 0;

	assert_int_equal(rdb_pread_all(x->fd1, blk, sizeof(blk), 2 * RDB_PAGE_SIZE), 0);
	rdb_readidx_insert(x->ix, rdb_readidx_key(1, 2),
			   rdb_readidx_hash(blk, x->rt.seed), 1);
	fill_random(page, 202);
	rdb_page_encode(&x->pc, all, &x->rt, 0, 0x10000, page, &x->out, &x->st);
	assert_int_equal(x->out.data[8], RDB_PAGE_DISKREF);
	for (int i = 0; i < 8; i++)
		wire = wire << 8 | x->out.data[9 + i];
	assert_int_equal(wire >> RDB_DISKREF_DEV_SHIFT, 1);
	assert_int_equal(wire & RDB_DISKREF_OFF_MASK, 2 * RDB_PAGE_SIZE);
	assert_int_equal(x->st.rt_refs[1], 1);
	assert_int_equal(x->st.rt_refs[0], 0);
	/* block 2 of disk 0 holds other bytes: disk 1's entry is not it */
	rdb_readidx_invalidate(x->ix, 0, 2 * RDB_PAGE_SIZE, RDB_PAGE_SIZE);
	rdb_buf_reset(&x->out);
	rdb_page_encode(&x->pc, all, &x->rt, 0, 0x11000, page, &x->out, &x->st);
	assert_int_equal(x->out.data[8], RDB_PAGE_DISKREF);
	/* only disk 0 tracked: refused, counted */
	x->rt.ndisks = 1;
	rdb_buf_reset(&x->out);
	rdb_page_encode(&x->pc, all, &x->rt, 0, 0x12000, page, &x->out, &x->st);
	assert_int_not_equal(x->out.data[8], RDB_PAGE_DISKREF);
	assert_int_equal(x->st.rt_unconfirmed, 1);
	/* disk 1's block changes: forgotten */
	x->rt.ndisks = 2;
	rdb_readidx_invalidate(x->ix, 1, 2 * RDB_PAGE_SIZE + 100, 1);
	rdb_buf_reset(&x->out);
	rdb_page_encode(&x->pc, all, &x->rt, 0, 0x13000, page, &x->out, &x->st);
	assert_int_not_equal(x->out.data[8], RDB_PAGE_DISKREF);
	assert_int_equal(x->st.rt_hits, 3);
}

static void test_diskref_chosen_and_checked(void **state)
{
	struct fx *x = *state;
	uint32_t all = RDB_FEATURE_XORRLE | RDB_FEATURE_LZ4 | RDB_FEATURE_DISKREF;
	uint8_t page[RDB_PAGE_SIZE], md[EVP_MAX_MD_SIZE];
	unsigned mdlen;
	long body;

	read_block(x, 3);
	read_block(x, 5);
	/* a page with block 3's contents: a reference to disk offset 12288 */
	fill_random(page, 103);
	body = rdb_page_encode(&x->pc, all, &x->rt, 0, 0x10000, page, &x->out, &x->st);
	assert_int_equal(body, RDB_PAGE_DISKREF_BODY);
	assert_int_equal(x->out.len, 9 + RDB_PAGE_DISKREF_BODY);
	assert_int_equal(x->out.data[8], RDB_PAGE_DISKREF);
	assert_int_equal(rdb_proto_page_record_size(x->out.data), 9 + RDB_PAGE_DISKREF_BODY);
	assert_int_equal(x->out.data[9 + 6], 0x30);	/* 12288 = 0x3000, big-endian */
	assert_true(EVP_Digest(page, sizeof(page), md, &mdlen, EVP_sha256(), NULL));
	assert_memory_equal(x->out.data + 17, md, RDB_DISKREF_HASH_LEN);
	assert_int_equal(x->st.pages[RDB_PAGE_DISKREF], 1);
	/* the same page again, unchanged: the empty XOR delta (3 bytes)
	 * beats any reference, and the index is not even asked */
	rdb_buf_reset(&x->out);
	body = rdb_page_encode(&x->pc, all, &x->rt, 0, 0x10000, page, &x->out, &x->st);
	assert_int_equal(x->out.data[8], RDB_PAGE_XORRLE);
	assert_int_equal(x->st.rt_delta_smaller, 1);
	/* not granted: no lookup at all */
	rdb_buf_reset(&x->out);
	fill_random(page, 105);
	body = rdb_page_encode(&x->pc, RDB_FEATURE_LZ4, &x->rt, 0, 0x20000, page,
			       &x->out, &x->st);
	assert_int_equal(x->out.data[8], RDB_PAGE_RAW);
	assert_int_equal(x->st.rt_hits, 1);
	/* block 5 rewritten in the image (its WRITE not drained yet): the
	 * index still names it, the image refuses it */
	page[7] ^= 0xff;
	assert_int_equal(rdb_pwrite_all(x->fd, page, sizeof(page), 5 * RDB_PAGE_SIZE), 0);
	page[7] ^= 0xff;
	rdb_buf_reset(&x->out);
	body = rdb_page_encode(&x->pc, all, &x->rt, 0, 0x30000, page, &x->out, &x->st);
	assert_int_equal(x->out.data[8], RDB_PAGE_RAW);
	assert_int_equal(body, RDB_PAGE_SIZE);
	assert_int_equal(x->st.rt_unconfirmed, 1);
	/* a page no block holds: no hit */
	rdb_buf_reset(&x->out);
	fill_random(page, 999);
	rdb_page_encode(&x->pc, all, &x->rt, 0, 0x40000, page, &x->out, &x->st);
	assert_int_equal(x->out.data[8], RDB_PAGE_RAW);
	assert_int_equal(x->st.rt_hits, 2);
	/* no read tracking: as before */
	rdb_buf_reset(&x->out);
	fill_random(page, 103);
	rdb_page_encode(&x->pc, all, NULL, 0, 0x50000, page, &x->out, &x->st);
	assert_int_equal(x->out.data[8], RDB_PAGE_RAW);
	/* block 6 read in epoch 2 (the guest ran on while epoch 1 is being
	 * encoded): not for epoch 1's pages, for epoch 2's */
	fill_random(page, 106);
	rdb_readidx_insert(x->ix, 6, rdb_readidx_hash(page, x->rt.seed), 2);
	rdb_buf_reset(&x->out);
	rdb_page_encode(&x->pc, all, &x->rt, 0, 0x70000, page, &x->out, &x->st);
	assert_int_equal(x->out.data[8], RDB_PAGE_RAW);
	x->rt.epoch = 2;
	rdb_buf_reset(&x->out);
	rdb_page_encode(&x->pc, all, &x->rt, 0, 0x71000, page, &x->out, &x->st);
	assert_int_equal(x->out.data[8], RDB_PAGE_DISKREF);
	assert_int_equal(x->st.rt_older_reads, 0);	/* read in its epoch */
	/* in epoch 3, a page with block 6's contents (read in epoch 2): a
	 * copy of an earlier read */
	x->rt.epoch = 3;
	rdb_buf_reset(&x->out);
	rdb_page_encode(&x->pc, all, &x->rt, 0, 0x72000, page, &x->out, &x->st);
	assert_int_equal(x->out.data[8], RDB_PAGE_DISKREF);
	assert_int_equal(x->st.rt_older_reads, 1);
	/* a zero page stays ZERO even if a zero block was read */
	memset(page, 0, sizeof(page));
	rdb_readidx_insert(x->ix, 7, rdb_readidx_hash(page, x->rt.seed), 1);
	rdb_buf_reset(&x->out);
	body = rdb_page_encode(&x->pc, all, &x->rt, 0, 0x60000, page, &x->out, &x->st);
	assert_int_equal(x->out.data[8], RDB_PAGE_ZERO);
	assert_int_equal(body, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_diskref_chosen_and_checked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_diskref_names_its_disk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_diskref_never_waits_for_the_disk, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

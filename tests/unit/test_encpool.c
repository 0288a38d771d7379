// SPDX-License-Identifier: GPL-2.0-only
/*
 * Compression end to end without a network: a guest's RAM changes over
 * epochs (small edits, rewrites, uniform pages, QEMU's own ZERO records,
 * a page sent twice in one epoch); each epoch goes through the encoder
 * pool, is framed, decoded and staged as the backup does, and after
 * every commit the backup's image must equal the guest's RAM.  Then the
 * backup's refusals: an encoding not granted, a corrupt delta or LZ4
 * block.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "encpool.h"
#include "proto.h"
#include "ramimage.h"
#include "stage.h"

#define NPAGES 64
#define PG RDB_PAGE_SIZE

static char dir[64];
static uint8_t ram[NPAGES * PG];
static const struct rdb_ram_block blocks[2] = {
	{ "pc.ram", NPAGES / 2 * PG }, { "vga.vram", NPAGES / 2 * PG },
};

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/rdb-encpool-XXXXXX");
	assert_non_null(mkdtemp(dir));
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

struct epoch_in {
	struct rdb_buf recs;
	struct rdb_page_run runs[64];
	size_t nruns;
};

static void add_rec(struct epoch_in *in, uint32_t block, uint64_t off,
		    bool zero_record)
{
	struct rdb_page_run *r = in->nruns ? &in->runs[in->nruns - 1] : NULL;
	size_t before = in->recs.len;
	const uint8_t *page = ram + (block * (NPAGES / 2) * PG) + off;

	if (zero_record)
		assert_int_equal(rdb_proto_page_record_append(&in->recs, off, NULL, page[0]), 0);
	else
		assert_int_equal(rdb_proto_page_record_append(&in->recs, off, page, 0), 0);
	if (!r || r->block != block) {
		assert_true(in->nruns < 64);
		r = &in->runs[in->nruns++];
		*r = (struct rdb_page_run){ .block = block, .start = before };
	}
	r->count++;
	r->len += in->recs.len - before;
}

/* Frames, decodes and stages one epoch; returns the stage's verdict. */
static int ship(struct rdb_stage *st, struct rdb_ramimage *img, uint64_t epoch,
		struct rdb_encpool *pool, struct epoch_in *in)
{
	struct rdb_buf wire;
	struct rdb_proto_decoder dec;
	struct rdb_frame f;
	uint64_t recs = 0, bytes = 0;
	static const uint8_t dev[1] = { 0 };
	int rc = 0;

	rdb_buf_init(&wire);
	rdb_proto_decoder_init(&dec);
	if (pool) {
		assert_int_equal(rdb_encpool_submit(pool, 1, in->recs.data, in->runs, in->nruns), 0);
		rdb_encpool_wait(pool);
		for (unsigned w = 0; w < rdb_encpool_nworkers(pool); w++) {
			const struct rdb_enc_out *o = rdb_encpool_out(pool, w);

			assert_int_equal(o->err, 0);
			for (size_t i = 0; i < o->nruns; i++)
				assert_int_equal(rdb_proto_put_pages(&wire, epoch, o->runs[i].block,
					o->runs[i].count, o->recs.data + o->runs[i].start,
					o->runs[i].len), 0);
			recs += o->nrecs;
			bytes += o->body_bytes;
		}
	} else {
		for (size_t i = 0; i < in->nruns; i++) {
			const uint8_t *p = in->recs.data + in->runs[i].start;

			assert_int_equal(rdb_proto_put_pages(&wire, epoch, in->runs[i].block,
				in->runs[i].count, p, in->runs[i].len), 0);
			recs += in->runs[i].count;
			for (uint32_t k = 0; k < in->runs[i].count; k++) {
				bytes += p[8] == RDB_PAGE_RAW ? PG : 1;
				p += rdb_proto_page_record_size(p);
			}
		}
	}
	rdb_proto_put_devstate(&wire, epoch, dev, 1);
	rdb_proto_put_epoch_end(&wire, epoch, recs, bytes + 1);
	assert_int_equal(rdb_proto_decoder_feed(&dec, wire.data, wire.len), 0);
	while (rc == 0 && rdb_proto_decoder_next(&dec, &f) == 1) {
		uint64_t a, b;

		if (f.type == RDB_MSG_PAGES)
			rc = rdb_stage_add_pages(st, &f, img);
		else if (f.type == RDB_MSG_DEVSTATE)
			rc = rdb_stage_set_devstate(st, f.epoch, f.payload, f.len);
		else if (rdb_msg_epoch_end_parse(&f, &a, &b) == 0)
			rc = rdb_stage_commit(st, f.epoch, a, b, img);
	}
	rdb_proto_decoder_dispose(&dec);
	rdb_buf_dispose(&wire);
	rdb_buf_reset(&in->recs);
	in->nruns = 0;
	return rc;
}

static void assert_image_is_ram(struct rdb_ramimage *img)
{
	assert_memory_equal(img->b[0].base, ram, NPAGES / 2 * PG);
	assert_memory_equal(img->b[1].base, ram + NPAGES / 2 * PG, NPAGES / 2 * PG);
}

static void test_epochs_round_trip(void **state)
{
	struct rdb_ramimage img;
	struct rdb_stage st;
	struct rdb_encpool *pool;
	struct epoch_in in;
	struct rdb_codec_stats cs;
	unsigned seed = 11;

	(void)state;
	for (size_t i = 0; i < sizeof(ram); i++)
		ram[i] = (uint8_t)rand_r(&seed);
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	rdb_stage_init(&st);
	st.features = RDB_FEATURES_KNOWN;
	rdb_buf_init(&in.recs);
	in.nruns = 0;
	/* 3 workers, a cache of 24 pages: shards of 8 evict under load */
	assert_int_equal(rdb_encpool_create(&pool, 3, 24, RDB_FEATURES_KNOWN, -1), 0);

	/* epoch 0: everything, raw, as the primary streams it */
	for (uint32_t b = 0; b < 2; b++)
		for (uint64_t o = 0; o < NPAGES / 2 * PG; o += PG)
			add_rec(&in, b, o, false);
	assert_int_equal(ship(&st, &img, 0, NULL, &in), 0);
	assert_image_is_ram(&img);

	for (uint64_t e = 1; e <= 60; e++) {
		int dirty = 1 + rand_r(&seed) % 30;

		for (int d = 0; d < dirty; d++) {
			uint32_t b = (uint32_t)rand_r(&seed) % 2;
			uint64_t o = (uint64_t)(rand_r(&seed) % (NPAGES / 2)) * PG;
			uint8_t *page = ram + b * (NPAGES / 2) * PG + o;
			int kind = rand_r(&seed) % 10;
			bool zero_rec = false;

			if (kind < 6) {		/* a database-like edit */
				for (int k = 0; k < 4; k++)
					page[rand_r(&seed) % PG] ^= (uint8_t)(1 + rand_r(&seed) % 255);
			} else if (kind < 7) {	/* rewritten */
				for (unsigned k = 0; k < PG; k++)
					page[k] = (uint8_t)rand_r(&seed);
			} else if (kind < 8) {	/* compressible text */
				for (unsigned k = 0; k < PG; k++)
					page[k] = (uint8_t)("ledger row "[k % 11]);
			} else if (kind < 9) {	/* uniform */
				memset(page, rand_r(&seed) % 2 ? 0 : 0x5a, PG);
			} else {		/* QEMU's ZERO record */
				memset(page, 0, PG);
				zero_rec = true;
			}
			add_rec(&in, b, o, zero_rec);
			if (d == 0 && kind < 6) {
				/* the same page again in this epoch, changed */
				page[7] ^= 0x42;
				add_rec(&in, b, o, false);
			}
		}
		assert_int_equal(ship(&st, &img, e, pool, &in), 0);
		assert_image_is_ram(&img);
	}
	rdb_encpool_stats(pool, &cs);
	/* every kind was used, and deltas were the common case */
	assert_true(cs.pages[RDB_PAGE_XORRLE] > 0);
	assert_true(cs.pages[RDB_PAGE_LZ4] > 0);
	assert_true(cs.pages[RDB_PAGE_RAW] > 0);
	assert_true(cs.pages[RDB_PAGE_ZERO] > 0);
	assert_true(cs.cache_hits > 0 && cs.cache_misses > 0);
	rdb_encpool_destroy(pool);
	rdb_buf_dispose(&in.recs);
	rdb_stage_dispose(&st);
	rdb_ramimage_close(&img);
}

/* What the backup must refuse, each leaving the epoch as it was. */
static void test_stage_refusals(void **state)
{
	struct rdb_ramimage img;
	struct rdb_stage st;
	struct rdb_buf recs, wire;
	struct rdb_proto_decoder dec;
	struct rdb_frame f;
	static const uint8_t dev[1] = { 0 };
	uint8_t delta[8] = { 0, 1, 0xff }, junk[64];

	(void)state;
	memset(junk, 0x99, sizeof(junk));
	assert_int_equal(rdb_ramimage_open(dir, blocks, 2, &img), 0);
	rdb_stage_init(&st);
	rdb_buf_init(&recs);
	rdb_buf_init(&wire);
	rdb_proto_decoder_init(&dec);
	rdb_proto_put_devstate(&wire, 0, dev, 1);
	rdb_proto_put_epoch_end(&wire, 0, 0, 1);
	assert_int_equal(rdb_proto_decoder_feed(&dec, wire.data, wire.len), 0);
	rdb_buf_reset(&wire);
	assert_int_equal(rdb_proto_decoder_next(&dec, &f), 1);
	assert_int_equal(rdb_stage_set_devstate(&st, 0, f.payload, f.len), 0);
	assert_int_equal(rdb_proto_decoder_next(&dec, &f), 1);
	assert_int_equal(rdb_stage_commit(&st, 0, 0, 1, &img), 0);

#define STAGE_ONE(E_, D_, L_, W_) do { \
		rdb_buf_reset(&recs); \
		assert_int_equal(rdb_proto_page_record_append_enc(&recs, 0, E_, D_, L_), 0); \
		rdb_proto_put_pages(&wire, 1, 0, 1, recs.data, recs.len); \
		assert_int_equal(rdb_proto_decoder_feed(&dec, wire.data, wire.len), 0); \
		rdb_buf_reset(&wire); \
		assert_int_equal(rdb_proto_decoder_next(&dec, &f), 1); \
		assert_int_equal(rdb_stage_add_pages(&st, &f, &img), W_); \
	} while (0)

	/* not granted */
	st.features = 0;
	STAGE_ONE(RDB_PAGE_XORRLE, delta, 3, -EPROTO);
	assert_non_null(strstr(rdb_stage_error(&st), "not negotiated"));
	STAGE_ONE(RDB_PAGE_LZ4, junk, 10, -EPROTO);
	st.features = RDB_FEATURES_KNOWN;
	/* corrupt delta: a run past the page */
	delta[0] = 0x80; delta[1] = 0x40; delta[2] = 1; delta[3] = 1;
	STAGE_ONE(RDB_PAGE_XORRLE, delta, 4, -EPROTO);
	assert_non_null(strstr(rdb_stage_error(&st), "XOR+RLE"));
	/* LZ4 that is not a page */
	STAGE_ONE(RDB_PAGE_LZ4, junk, sizeof(junk), -EPROTO);
	assert_non_null(strstr(rdb_stage_error(&st), "LZ4"));
	/* nothing was staged: an empty epoch 1 still commits */
	assert_int_equal(st.npages, 0);
	/* a good delta is taken */
	delta[0] = 0; delta[1] = 1; delta[2] = 0xff;
	STAGE_ONE(RDB_PAGE_XORRLE, delta, 3, 0);
	assert_int_equal(rdb_stage_set_devstate(&st, 1, dev, 1), 0);
	assert_int_equal(rdb_stage_commit(&st, 1, 1, 2 + 3 + 1, &img), 0);
	assert_int_equal(img.b[0].base[0], 0xff);
#undef STAGE_ONE
	rdb_proto_decoder_dispose(&dec);
	rdb_buf_dispose(&wire);
	rdb_buf_dispose(&recs);
	rdb_stage_dispose(&st);
	rdb_ramimage_close(&img);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_epochs_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stage_refusals, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

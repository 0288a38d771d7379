// SPDX-License-Identifier: GPL-2.0-only
/* Xen's migration stream parser (xc_stream.h): a raw libxc stream and one
 * inside libxl's records, fed whole and a byte at a time, give the same
 * pages, records and epochs; each malformed piece is refused with what
 * was wrong, and the parser stays failed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "xen/xc_stream.h"
#include "xen_gen.h"	/* put_be, put_le, rec */

/* ---- building streams ---- */

static void lhdr(struct rdb_buf *b, uint32_t options)
{
	put_be(b, 0x4c6962786c466d74ull, 8);
	put_be(b, 2, 4);
	put_be(b, options, 4);
}

static void xhdrs(struct rdb_buf *b, uint32_t version, uint16_t options,
		  uint32_t type, uint16_t page_shift)
{
	put_be(b, ~0ull, 8);
	put_be(b, 0x58454e46, 4);
	put_be(b, version, 4);
	put_be(b, options, 2);
	put_be(b, 0, 2);
	put_be(b, 0, 4);
	put_le(b, type, 4);
	put_le(b, page_shift, 2);
	put_le(b, 0, 2);
	put_le(b, 4, 4);	/* Xen 4.17 */
	put_le(b, 17, 4);
}

/* PAGE_DATA: n pfns, pfn i = base + i of type types[i]; a page with data
 * is filled with its pfn's low byte. */
static void page_data(struct rdb_buf *b, uint64_t base, const unsigned *types,
		      uint32_t n)
{
	struct rdb_buf body;
	uint8_t page[4096];

	rdb_buf_init(&body);
	put_le(&body, n, 4);
	put_le(&body, 0, 4);
	for (uint32_t i = 0; i < n; i++)
		put_le(&body, (uint64_t)types[i] << 60 | (base + i), 8);
	for (uint32_t i = 0; i < n; i++) {
		if ((types[i] >= 0xd) || (types[i] >= 5 && types[i] <= 8))
			continue;
		memset(page, (int)((base + i) & 0xff), sizeof(page));
		assert_int_equal(rdb_buf_append(&body, page, sizeof(page)), 0);
	}
	rec(b, 1, body.data, (uint32_t)body.len);
	rdb_buf_dispose(&body);
}

/* ---- what the parser reported ---- */

struct seen {
	int domains, ends, records, libxl_records;
	uint32_t version, type;
	uint64_t pages, nodata, page_sum, epochs[8];
	int nepochs;
	uint32_t rec_types[16];
	int nrec;
};

static int on_domain(void *o, const struct rdb_xc_domain *d)
{
	struct seen *s = o;

	s->domains++;
	s->version = d->version;
	s->type = d->type;
	return 0;
}

static int on_page(void *o, uint64_t epoch, uint64_t pfn, unsigned type,
		   const uint8_t *data)
{
	struct seen *s = o;

	s->pages++;
	if (!data) {
		s->nodata++;
		return 0;
	}
	for (int i = 0; i < 4096; i++)
		if (data[i] != (uint8_t)(pfn & 0xff))
			return -EINVAL;		/* the wrong page's data */
	s->page_sum += pfn + 1000 * epoch;
	return 0;
}

static int on_record(void *o, uint64_t epoch, bool libxl, uint32_t type,
		     const uint8_t *body, size_t len)
{
	struct seen *s = o;

	if (libxl)
		s->libxl_records++;
	else
		s->records++;
	if (s->nrec < 16)
		s->rec_types[s->nrec++] = type;
	return 0;
}

static int on_epoch(void *o, uint64_t epoch)
{
	struct seen *s = o;

	if (s->nepochs < 8)
		s->epochs[s->nepochs++] = epoch;
	return 0;
}

static int on_end(void *o)
{
	((struct seen *)o)->ends++;
	return 0;
}

static const struct rdb_xc_ops ops = {
	.domain = on_domain, .page = on_page, .record = on_record,
	.epoch_end = on_epoch, .end = on_end,
};

/* Parses b whole (step 0) or step bytes at a time; the feed's result. */
static int parse(const struct rdb_buf *b, enum rdb_xc_layer layer, size_t step,
		 struct seen *s, char *err, size_t errlen)
{
	struct rdb_xc_parser p;
	int rc = 0;

	memset(s, 0, sizeof(*s));
	rdb_xc_parser_init(&p, layer, &ops, s);
	if (!step)
		step = b->len;
	for (size_t at = 0; rc == 0 && at < b->len; at += step)
		rc = rdb_xc_parser_feed(&p, b->data + at,
					b->len - at < step ? b->len - at : step);
	if (err)
		snprintf(err, errlen, "%s", rdb_xc_parser_error(&p));
	if (rc < 0)	/* stays failed */
		assert_int_equal(rdb_xc_parser_feed(&p, NULL, 0), -EPROTO);
	rdb_xc_parser_dispose(&p);
	return rc;
}

/* As parse, with at most budget pages per feed: every feed's share is
 * checked, and what waits is taken by empty feeds. */
static int parse_budget(const struct rdb_buf *b, size_t step, uint32_t budget,
			struct seen *s, unsigned *max_out)
{
	struct rdb_xc_parser p;
	unsigned max = 0;
	int rc = 0;

	memset(s, 0, sizeof(*s));
	rdb_xc_parser_init(&p, RDB_XC_RAW, &ops, s);
	p.page_budget = budget;
	if (!step)
		step = b->len;
	for (size_t at = 0; rc == 0 && at < b->len; at += step) {
		uint64_t before = s->pages;

		rc = rdb_xc_parser_feed(&p, b->data + at,
					b->len - at < step ? b->len - at : step);
		max = s->pages - before > max ? (unsigned)(s->pages - before) : max;
		while (rc == 0 && rdb_xc_parser_pending(&p)) {
			before = s->pages;
			rc = rdb_xc_parser_feed(&p, NULL, 0);
			max = s->pages - before > max ?
			      (unsigned)(s->pages - before) : max;
		}
	}
	assert_false(rdb_xc_parser_pending(&p));
	rdb_xc_parser_dispose(&p);
	*max_out = max;
	return rc;
}

static void test_page_budget(void **state)
{
	static const unsigned t[40] = { 0 }, t2[] = { 0x0, 0xf, 0x0, 0xf, 0x0, 0x0, 0xf, 0x0 };
	uint8_t info[8] = { 8, 4 };
	struct seen a, b, c;
	struct rdb_buf s;
	unsigned max = 0;

	rdb_buf_init(&s);
	xhdrs(&s, 3, 0, 1, 12);
	rec(&s, 0x02, info, sizeof(info));		/* X86_PV_INFO */
	page_data(&s, 0x100, t, 40);
	page_data(&s, 0x300, t2, 8);
	rec(&s, 0x10, NULL, 0);				/* STATIC_DATA_END */
	rec(&s, 0x0e, NULL, 0);				/* CHECKPOINT: epoch 0 */
	page_data(&s, 0x200, t, 7);
	rec(&s, 0x0e, NULL, 0);				/* epoch 1 */
	rec(&s, 0x00, NULL, 0);				/* END */
	assert_int_equal(parse(&s, RDB_XC_RAW, 0, &a, NULL, 0), 0);
	assert_int_equal(a.pages, 55);
	/* whole: 40 pages taken 3 (+ a record's first page) at a time */
	assert_int_equal(parse_budget(&s, 0, 3, &b, &max), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_in_range(max, 1, 4);
	/* and as the bytes trickle in */
	assert_int_equal(parse_budget(&s, 1000, 3, &c, &max), 0);
	assert_memory_equal(&a, &c, sizeof(a));
	assert_in_range(max, 1, 4);
	rdb_buf_dispose(&s);
}

static void test_raw_stream_whole_and_bytewise(void **state)
{
	static const unsigned t1[] = { 0x0, 0xf, 0x1, 0xe }, t2[] = { 0x9 };
	uint8_t info[8] = { 8, 4 }, tsc[24] = { 0 }, odd[3] = { 1, 2, 3 };
	struct seen a, b;
	struct rdb_buf s;

	rdb_buf_init(&s);
	xhdrs(&s, 3, 0, 1, 12);
	rec(&s, 0x02, info, sizeof(info));		/* X86_PV_INFO */
	page_data(&s, 0x100, t1, 4);
	rec(&s, 0x08, tsc, sizeof(tsc));		/* TSC_INFO */
	rec(&s, 0x80000007, odd, sizeof(odd));		/* optional, padded */
	rec(&s, 0x10, NULL, 0);				/* STATIC_DATA_END */
	rec(&s, 0x0e, NULL, 0);				/* CHECKPOINT: epoch 0 */
	page_data(&s, 0x200, t2, 1);
	rec(&s, 0x0e, NULL, 0);				/* epoch 1 */
	rec(&s, 0x00, NULL, 0);				/* END */
	assert_int_equal(parse(&s, RDB_XC_RAW, 0, &a, NULL, 0), 0);
	assert_int_equal(parse(&s, RDB_XC_RAW, 1, &b, NULL, 0), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_int_equal(a.domains, 1);
	assert_int_equal(a.version, 3);
	assert_int_equal(a.type, 1);
	assert_int_equal(a.pages, 5);
	assert_int_equal(a.nodata, 2);				/* XTAB, XALLOC */
	assert_int_equal(a.page_sum, 0x100 + 0x102 + 0x200 + 1000);
	assert_int_equal(a.nepochs, 2);
	assert_int_equal(a.epochs[0], 0);
	assert_int_equal(a.epochs[1], 1);
	assert_int_equal(a.ends, 1);
	assert_int_equal(a.records, 4);
	assert_int_equal(a.rec_types[2], 0x80000007);
	rdb_buf_dispose(&s);
}

static void test_libxl_remus_stream(void **state)
{
	static const unsigned t[] = { 0x0, 0x0 };
	uint8_t emu[16] = { 2, 0, 0, 0, 0, 0, 0, 0, 0xaa };
	struct seen a, b;
	struct rdb_buf s;

	/* as xl remus sends it (and libxl reads it): one LIBXC_CONTEXT; at
	 * each libxc CHECKPOINT libxl's records up to CHECKPOINT_END, then
	 * libxc's records again */
	rdb_buf_init(&s);
	lhdr(&s, 0);
	rec(&s, 1, NULL, 0);				/* LIBXC_CONTEXT */
	xhdrs(&s, 2, 0, 2, 12);
	for (int k = 0; k < 3; k++) {
		page_data(&s, 0x10 * (k + 1), t, 2);
		rec(&s, k < 2 ? 0x0e : 0x00, NULL, 0);	/* CHECKPOINT / END */
		rec(&s, 3, emu, sizeof(emu));		/* EMULATOR_CONTEXT */
		if (k < 2)
			rec(&s, 4, NULL, 0);		/* CHECKPOINT_END */
	}
	rec(&s, 0, NULL, 0);				/* libxl END */
	assert_int_equal(parse(&s, RDB_XC_LIBXL, 0, &a, NULL, 0), 0);
	assert_int_equal(parse(&s, RDB_XC_LIBXL, 7, &b, NULL, 0), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_int_equal(a.domains, 1);
	assert_int_equal(a.version, 2);
	assert_int_equal(a.type, 2);
	assert_int_equal(a.pages, 6);
	assert_int_equal(a.nepochs, 2);
	assert_int_equal(a.epochs[1], 1);
	assert_int_equal(a.libxl_records, 3);
	assert_int_equal(a.ends, 1);
	/* pages of the last state are epoch 2's */
	assert_int_equal(a.page_sum, 0x10 + 0x11 + 0x20 + 0x21 + 1000 * 2 +
			 0x30 + 0x31 + 2000 * 2);
	rdb_buf_dispose(&s);
}

/* A raw stream with headers and the given tail; its parse must fail with
 * an error containing want. */
static void refused(void (*build)(struct rdb_buf *), enum rdb_xc_layer layer,
		    const char *want)
{
	struct rdb_buf s;
	struct seen a;
	char err[200];

	rdb_buf_init(&s);
	build(&s);
	assert_int_equal(parse(&s, layer, 0, &a, err, sizeof(err)), -EPROTO);
	if (!strstr(err, want))
		fail_msg("error \"%s\" does not say \"%s\"", err, want);
	assert_int_equal(parse(&s, layer, 1, &a, err, sizeof(err)), -EPROTO);
	if (!strstr(err, want))
		fail_msg("bytewise: error \"%s\" does not say \"%s\"", err, want);
	rdb_buf_dispose(&s);
}

static void b_marker(struct rdb_buf *s)
{
	xhdrs(s, 3, 0, 1, 12);
	s->data[3] = 0;
}

static void b_big_endian(struct rdb_buf *s) { xhdrs(s, 3, 1, 1, 12); }
static void b_version(struct rdb_buf *s) { xhdrs(s, 4, 0, 1, 12); }
static void b_domain(struct rdb_buf *s) { xhdrs(s, 3, 0, 7, 12); }
static void b_page_shift(struct rdb_buf *s) { xhdrs(s, 3, 0, 1, 16); }

static void b_mandatory(struct rdb_buf *s)
{
	xhdrs(s, 3, 0, 1, 12);
	rec(s, 0x13, NULL, 0);
}

static void b_count0(struct rdb_buf *s)
{
	uint8_t body[8] = { 0 };

	xhdrs(s, 3, 0, 1, 12);
	rec(s, 1, body, sizeof(body));
}

static void b_count_big(struct rdb_buf *s)
{
	static unsigned t[1025];

	for (int i = 0; i < 1025; i++)
		t[i] = 0xf;	/* XTAB: no data, so only the count is wrong */
	xhdrs(s, 3, 0, 1, 12);
	page_data(s, 0, t, 1025);
}

static void b_short_pages(struct rdb_buf *s)
{
	struct rdb_buf body;
	uint8_t page[4096] = { 0 };

	rdb_buf_init(&body);
	put_le(&body, 2, 4);		/* two NOTAB pfns, one page of data */
	put_le(&body, 0, 4);
	put_le(&body, 0, 8);
	put_le(&body, 1, 8);
	assert_int_equal(rdb_buf_append(&body, page, sizeof(page)), 0);
	xhdrs(s, 3, 0, 1, 12);
	rec(s, 1, body.data, (uint32_t)body.len);
	rdb_buf_dispose(&body);
}

static void b_type5(struct rdb_buf *s)
{
	static const unsigned t[] = { 5 };

	xhdrs(s, 3, 0, 1, 12);
	page_data(s, 0, t, 1);
}

static void b_reserved_bits(struct rdb_buf *s)
{
	uint8_t body[16] = { 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0xf0 };

	xhdrs(s, 3, 0, 1, 12);
	rec(s, 1, body, sizeof(body));	/* XTAB pfn with bit 52 set */
}

static void b_after_end(struct rdb_buf *s)
{
	xhdrs(s, 3, 0, 1, 12);
	rec(s, 0, NULL, 0);
	put_le(s, 0, 8);
}

static void b_too_long(struct rdb_buf *s)
{
	xhdrs(s, 3, 0, 1, 12);
	put_le(s, 0x09, 4);			/* HVM_CONTEXT */
	put_le(s, (16u << 20) + 1, 4);
}

static void b_pv_info(struct rdb_buf *s)
{
	uint8_t info[8] = { 6, 4 };

	xhdrs(s, 3, 0, 1, 12);
	rec(s, 0x02, info, sizeof(info));
}

static void b_checkpoint_body(struct rdb_buf *s)
{
	uint8_t x[8] = { 0 };

	xhdrs(s, 3, 0, 1, 12);
	rec(s, 0x0e, x, sizeof(x));
}

static void b_libxl_ident(struct rdb_buf *s)
{
	lhdr(s, 0);
	s->data[0] = 'X';
}

static void b_libxl_legacy(struct rdb_buf *s) { lhdr(s, 2); }

static void b_libxl_type(struct rdb_buf *s)
{
	lhdr(s, 0);
	rec(s, 9, NULL, 0);
}

static void b_stray_checkpoint_end(struct rdb_buf *s)
{
	lhdr(s, 0);
	rec(s, 4, NULL, 0);
}

static void b_second_libxc(struct rdb_buf *s)
{
	lhdr(s, 0);
	rec(s, 1, NULL, 0);
	xhdrs(s, 3, 0, 1, 12);
	rec(s, 0, NULL, 0);			/* libxc END: back to libxl */
	rec(s, 1, NULL, 0);
}

static void test_malformed_refused(void **state)
{
	refused(b_marker, RDB_XC_RAW, "marker");
	refused(b_big_endian, RDB_XC_RAW, "big-endian");
	refused(b_version, RDB_XC_RAW, "version 4");
	refused(b_domain, RDB_XC_RAW, "domain type 7");
	refused(b_page_shift, RDB_XC_RAW, "only 4096");
	refused(b_mandatory, RDB_XC_RAW, "not optional");
	refused(b_count0, RDB_XC_RAW, "with 0 pfns");
	refused(b_count_big, RDB_XC_RAW, "with 1025 pfns");
	refused(b_short_pages, RDB_XC_RAW, "2 pfns with 2 pages");
	refused(b_type5, RDB_XC_RAW, "(reserved)");
	refused(b_reserved_bits, RDB_XC_RAW, "reserved bits");
	refused(b_after_end, RDB_XC_RAW, "after the stream's END");
	refused(b_too_long, RDB_XC_RAW, "too long");
	refused(b_pv_info, RDB_XC_RAW, "guest width 6");
	refused(b_checkpoint_body, RDB_XC_RAW, "CHECKPOINT with a body");
	refused(b_libxl_ident, RDB_XC_LIBXL, "LibxlFmt");
	refused(b_libxl_legacy, RDB_XC_LIBXL, "legacy");
	refused(b_libxl_type, RDB_XC_LIBXL, "libxl record type 0x00000009");
	refused(b_stray_checkpoint_end, RDB_XC_LIBXL, "without libxc's CHECKPOINT");
	refused(b_second_libxc, RDB_XC_LIBXL, "a second libxl LIBXC_CONTEXT");
}

static int fail_pages(void *o, uint64_t epoch, uint64_t pfn, unsigned type,
		      const uint8_t *data)
{
	return -ENOSPC;
}

static void test_callback_error_stops(void **state)
{
	static const unsigned t[] = { 0 };
	struct rdb_xc_ops o = { .page = fail_pages };
	struct rdb_xc_parser p;
	struct rdb_buf s;

	rdb_buf_init(&s);
	xhdrs(&s, 3, 0, 1, 12);
	page_data(&s, 0, t, 1);
	rdb_xc_parser_init(&p, RDB_XC_RAW, &o, NULL);
	assert_int_equal(rdb_xc_parser_feed(&p, s.data, s.len), -ENOSPC);
	assert_int_equal(rdb_xc_parser_feed(&p, s.data, 1), -EPROTO);
	rdb_xc_parser_dispose(&p);
	rdb_buf_dispose(&s);
	assert_string_equal(rdb_xc_rec_name(0x0e), "CHECKPOINT");
	assert_string_equal(rdb_xc_rec_name(0x80000001), "optional");
	assert_string_equal(rdb_xc_rec_name(0x40), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_raw_stream_whole_and_bytewise),
		cmocka_unit_test(test_page_budget),
		cmocka_unit_test(test_libxl_remus_stream),
		cmocka_unit_test(test_malformed_refused),
		cmocka_unit_test(test_callback_error_stops),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: GPL-2.0-only */
/* Builders of libxc streams (put_be, put_le, rec: any record, as in
 * test_xc_stream.c) and of the one remusdb-xen sends (xen_helper.h), for
 * test_xen_state.c and test_xen_backend.c. */
#ifndef RDB_TEST_XEN_GEN_H
#define RDB_TEST_XEN_GEN_H

#include <stdbool.h>
#include <string.h>

#include "buf.h"
#include "xen/xc_stream.h"
#include "xen/xen_state.h"

#define NPFN 3000u	/* three PAGE_DATA records' worth */

static inline void put_be(struct rdb_buf *b, uint64_t v, int n)
{
	uint8_t x[8];

	for (int i = 0; i < n; i++)
		x[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	assert_int_equal(rdb_buf_append(b, x, (size_t)n), 0);
}

static inline void put_le(struct rdb_buf *b, uint64_t v, int n)
{
	uint8_t x[8];

	for (int i = 0; i < n; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	assert_int_equal(rdb_buf_append(b, x, (size_t)n), 0);
}

static inline void rec(struct rdb_buf *b, uint32_t type, const void *body, uint32_t len)
{
	static const uint8_t zero[8];

	put_le(b, type, 4);
	put_le(b, len, 4);
	if (len)
		assert_int_equal(rdb_buf_append(b, body, len), 0);
	if (len % 8)
		assert_int_equal(rdb_buf_append(b, zero, 8 - len % 8), 0);
}

/* pfns [base, base+n) of type t, data filled with (pfn + salt) & 0xff */
static inline void pages(struct rdb_buf *b, uint64_t base, uint32_t n, unsigned t,
		  unsigned salt)
{
	struct rdb_buf body;
	uint8_t page[4096];
	bool data = t <= 4 || (t >= 9 && t <= 0xc);

	rdb_buf_init(&body);
	put_le(&body, n, 4);
	put_le(&body, 0, 4);
	for (uint32_t i = 0; i < n; i++)
		put_le(&body, (uint64_t)t << 60 | (base + i), 8);
	for (uint32_t i = 0; data && i < n; i++) {
		memset(page, (int)((base + i + salt) & 0xff), sizeof(page));
		assert_int_equal(rdb_buf_append(&body, page, sizeof(page)), 0);
	}
	rec(b, RDB_XC_PAGE_DATA, body.data, (uint32_t)body.len);
	rdb_buf_dispose(&body);
}

static inline void vcpu(struct rdb_buf *b, uint32_t type, uint32_t id, uint8_t tag)
{
	uint8_t body[64];

	memset(body, tag, sizeof(body));
	memset(body, 0, 8);
	body[0] = (uint8_t)id;
	rec(b, type, body, sizeof(body));
}

static inline void epoch_tail(struct rdb_buf *b, uint8_t tag, bool vcpu1)
{
	uint8_t tsc[24], shinfo[4096];

	memset(tsc, tag, sizeof(tsc));
	memset(shinfo, tag, sizeof(shinfo));
	rec(b, RDB_XC_TSC_INFO, tsc, sizeof(tsc));
	rec(b, RDB_XC_SHARED_INFO, shinfo, sizeof(shinfo));
	vcpu(b, RDB_XC_X86_PV_VCPU_BASIC, 0, tag);
	vcpu(b, RDB_XC_X86_PV_VCPU_EXTENDED, 0, tag);
	if (vcpu1)
		vcpu(b, RDB_XC_X86_PV_VCPU_BASIC, 1, tag);
	rec(b, RDB_XC_CHECKPOINT, NULL, 0);
}

/*
 * What the save helper sends: libxc's headers and static records, the
 * first checkpoint (every pfn, the last 100 unpopulated), a REQUEST, then
 * checkpoint 1 (pfns 10..19 become L1 tables pinned, new data; vcpu 1
 * goes offline), then checkpoint 2 cut short (pfn 0 of other data, never
 * completed: not to be restored).
 */
static inline void stream(struct rdb_buf *b)
{
	uint8_t info[8] = { 8, 4 }, p2m[16] = { 0 };

	put_be(b, ~0ull, 8);
	put_be(b, 0x58454e46, 4);
	put_be(b, 3, 4);
	put_be(b, 0, 8);
	put_le(b, 1, 4);	/* x86 PV */
	put_le(b, 12, 2);
	put_le(b, 0, 2);
	put_le(b, 4, 4);
	put_le(b, 17, 4);
	rec(b, RDB_XC_X86_PV_INFO, info, sizeof(info));
	rec(b, RDB_XC_STATIC_DATA_END, NULL, 0);
	p2m[4] = (uint8_t)((NPFN - 1) & 0xff);
	p2m[5] = (uint8_t)((NPFN - 1) >> 8);
	rec(b, RDB_XC_X86_PV_P2M_FRAMES, p2m, sizeof(p2m));
	pages(b, 0, 1024, 0, 0);
	pages(b, 1024, 1024, 0, 0);
	pages(b, 2048, NPFN - 2048 - 100, 0, 0);
	pages(b, NPFN - 100, 100, 0xf, 0);	/* XTAB */
	epoch_tail(b, 0xa0, true);
	rec(b, RDB_XEN_REC_REQUEST, NULL, 0);
	pages(b, 10, 10, 0x9, 7);		/* L1TAB | LPINTAB */
	epoch_tail(b, 0xa1, false);
	rec(b, RDB_XEN_REC_REQUEST, NULL, 0);
	pages(b, 0, 1, 0, 99);			/* epoch 2: never completed */
}

#endif

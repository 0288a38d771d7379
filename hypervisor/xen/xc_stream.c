// SPDX-License-Identifier: GPL-2.0-only
/* Xen's save/migration stream, libxl over libxc (xc_stream.h). */
#include "xen/xc_stream.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define LIBXL_IDENT 0x4c6962786c466d74ull	/* "LibxlFmt" */
#define LIBXL_VERSION 2u
#define LIBXL_OPT_BIG_ENDIAN (1u << 0)
#define LIBXL_OPT_LEGACY (1u << 1)
#define LHDR_LEN 16
#define XENF_ID 0x58454e46u			/* "XENF" */
#define IHDR_LEN 24				/* with the domain header: */
#define XHDRS_LEN (IHDR_LEN + 16)
#define REC_HDR 8
#define PFN_MASK ((1ull << 52) - 1)
#define PFN_RES_MASK (0xffull << 52)
#define PFN_TYPE_SHIFT 60

static const char *const xc_names[RDB_XC_REC__KNOWN] = {
	"END", "PAGE_DATA", "X86_PV_INFO", "X86_PV_P2M_FRAMES",
	"X86_PV_VCPU_BASIC", "X86_PV_VCPU_EXTENDED", "X86_PV_VCPU_XSAVE",
	"SHARED_INFO", "TSC_INFO", "HVM_CONTEXT", "HVM_PARAMS", "TOOLSTACK",
	"X86_PV_VCPU_MSRS", "VERIFY", "CHECKPOINT", "CHECKPOINT_DIRTY_PFN_LIST",
	"STATIC_DATA_END", "X86_CPUID_POLICY", "X86_MSR_POLICY",
};

static const char *const xl_names[RDB_XL_REC__KNOWN] = {
	"END", "LIBXC_CONTEXT", "EMULATOR_XENSTORE_DATA", "EMULATOR_CONTEXT",
	"CHECKPOINT_END", "CHECKPOINT_STATE",
};

const char *rdb_xc_rec_name(uint32_t type)
{
	if (type < RDB_XC_REC__KNOWN)
		return xc_names[type];
	return type & RDB_XC_OPTIONAL ? "optional" : "unknown";
}

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[1] << 8 | p[0];
}

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[1] << 8 | p[0]);
}

static int fail(struct rdb_xc_parser *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->err, sizeof(p->err), fmt, ap);
	va_end(ap);
	p->state = RDB_XC_S_FAILED;
	return -EPROTO;
}

int rdb_xc_parser_init(struct rdb_xc_parser *p, enum rdb_xc_layer layer,
		       const struct rdb_xc_ops *ops, void *opaque)
{
	memset(p, 0, sizeof(*p));
	p->ops = ops;
	p->opaque = opaque;
	p->layer = layer;
	p->state = layer == RDB_XC_RAW ? RDB_XC_S_IHDR : RDB_XC_S_LHDR;
	rdb_buf_init(&p->in);
	return 0;
}

void rdb_xc_parser_dispose(struct rdb_xc_parser *p)
{
	rdb_buf_dispose(&p->in);
}

const char *rdb_xc_parser_error(const struct rdb_xc_parser *p)
{
	return p->err[0] ? p->err : "no error";
}

static int lhdr(struct rdb_xc_parser *p, const uint8_t *h)
{
	uint32_t version = be32(h + 8), options = be32(h + 12);

	if (be64(h) != LIBXL_IDENT)
		return fail(p, "not a libxl stream: ident 0x%016llx, not "
			    "\"LibxlFmt\"", (unsigned long long)be64(h));
	if (version != LIBXL_VERSION)
		return fail(p, "libxl stream version %u (this reads %u)",
			    version, LIBXL_VERSION);
	if (options & LIBXL_OPT_BIG_ENDIAN)
		return fail(p, "big-endian libxl stream: not supported");
	if (options & LIBXL_OPT_LEGACY)
		return fail(p, "libxl stream carrying a legacy (pre-v2) libxc "
			    "stream: not supported");
	p->state = RDB_XC_S_LREC;
	return 0;
}

static int xhdrs(struct rdb_xc_parser *p, const uint8_t *h)
{
	const uint8_t *d = h + IHDR_LEN;
	struct rdb_xc_domain dom = {
		.version = be32(h + 12), .type = le32(d),
		.xen_major = le32(d + 8), .xen_minor = le32(d + 12),
	};
	uint16_t options = (uint16_t)(h[16] << 8 | h[17]);

	if (be64(h) != ~0ull)
		return fail(p, "not a libxc stream: marker 0x%016llx",
			    (unsigned long long)be64(h));
	if (be32(h + 8) != XENF_ID)
		return fail(p, "not a libxc stream: id 0x%08x, not \"XENF\"",
			    be32(h + 8));
	if (dom.version != 2 && dom.version != 3)
		return fail(p, "libxc stream version %u (this reads 2 and 3)",
			    dom.version);
	if (options & 1)
		return fail(p, "big-endian libxc stream: not supported");
	if (dom.type < 1 || dom.type > 4)
		return fail(p, "domain type %u unknown", dom.type);
	if (le16(d + 4) != 12)
		return fail(p, "guest pages of 2^%u octets: only 4096 are "
			    "supported", le16(d + 4));
	p->have_headers = true;
	p->state = RDB_XC_S_XREC;
	return p->ops->domain ? p->ops->domain(p->opaque, &dom) : 0;
}

static bool carries_data(unsigned type)
{
	return type <= 4 || (type >= 9 && type <= 0xc);
}

static int page_data(struct rdb_xc_parser *p, const uint8_t *b, uint32_t len)
{
	uint32_t count, ndata = 0;
	const uint8_t *data;

	if (p->pd_done)
		goto resume;	/* checked when it began */
	if (len < 8)
		return fail(p, "PAGE_DATA of %u octets: no header", len);
	count = le32(b);
	if (count == 0 || count > RDB_XC_MAX_BATCH)
		return fail(p, "PAGE_DATA with %u pfns (1..%u)", count,
			    RDB_XC_MAX_BATCH);
	if (len < 8 + 8ull * count)
		return fail(p, "PAGE_DATA of %u octets: shorter than its %u "
			    "pfns", len, count);
	for (uint32_t i = 0; i < count; i++) {
		uint64_t e = le64(b + 8 + 8 * i);
		unsigned type = (unsigned)(e >> PFN_TYPE_SHIFT);

		if (type >= 5 && type <= 8)
			return fail(p, "PAGE_DATA: pfn 0x%llx of type %u "
				    "(reserved)", (unsigned long long)(e & PFN_MASK),
				    type);
		if (e & PFN_RES_MASK)
			return fail(p, "PAGE_DATA: reserved bits set in 0x%016llx",
				    (unsigned long long)e);
		ndata += carries_data(type);
	}
	if (len != 8 + 8ull * count + (uint64_t)RDB_XC_PAGE_SIZE * ndata)
		return fail(p, "PAGE_DATA of %u octets: %u pfns with %u pages "
			    "make %llu", len, count, ndata,
			    (unsigned long long)(8 + 8ull * count +
						 (uint64_t)RDB_XC_PAGE_SIZE * ndata));
resume:
	count = le32(b);
	data = b + 8 + 8ull * count + (uint64_t)RDB_XC_PAGE_SIZE * p->pd_data_done;
	for (uint32_t i = p->pd_done; i < count; i++) {
		uint64_t e = le64(b + 8 + 8 * i);
		unsigned type = (unsigned)(e >> PFN_TYPE_SHIFT);
		int rc = 0;

		/* (a record's first page always goes: pd_done > 0 marks
		 * one under way) */
		if (p->page_budget && p->budget_left == 0 && i > 0) {
			p->pd_done = i;		/* the rest at the next feed */
			return 0;
		}
		if (p->ops->page)
			rc = p->ops->page(p->opaque, p->epoch, e & PFN_MASK, type,
					  carries_data(type) ? data : NULL);
		if (rc < 0) {
			p->state = RDB_XC_S_FAILED;
			return rc;
		}
		if (carries_data(type)) {
			data += RDB_XC_PAGE_SIZE;
			p->pd_data_done++;
		}
		p->pages++;
		if (p->budget_left)
			p->budget_left--;
	}
	p->pd_done = p->pd_data_done = 0;
	return 0;
}

/* A libxc record's size where the spec fixes it: 0, or why not. */
static int xrec_check(struct rdb_xc_parser *p, uint32_t type, const uint8_t *b,
		      uint32_t len)
{
	switch (type) {
	case RDB_XC_END:
	case RDB_XC_VERIFY:
	case RDB_XC_CHECKPOINT:
	case RDB_XC_STATIC_DATA_END:
		if (len)
			return fail(p, "%s with a body of %u octets",
				    rdb_xc_rec_name(type), len);
		return 0;
	case RDB_XC_X86_PV_INFO:
		if (len != 8)
			return fail(p, "X86_PV_INFO of %u octets (8)", len);
		if ((b[0] != 4 && b[0] != 8) || (b[1] != 3 && b[1] != 4))
			return fail(p, "X86_PV_INFO: guest width %u, %u page "
				    "table levels", b[0], b[1]);
		return 0;
	case RDB_XC_X86_PV_P2M_FRAMES:
		if (len < 8 || len % 8)
			return fail(p, "X86_PV_P2M_FRAMES of %u octets", len);
		if (le32(b) > le32(b + 4))
			return fail(p, "X86_PV_P2M_FRAMES from pfn %u to %u",
				    le32(b), le32(b + 4));
		return 0;
	case RDB_XC_X86_PV_VCPU_BASIC:
	case RDB_XC_X86_PV_VCPU_EXTENDED:
	case RDB_XC_X86_PV_VCPU_XSAVE:
	case RDB_XC_X86_PV_VCPU_MSRS:
		if (len < 8)
			return fail(p, "%s of %u octets: no vcpu id",
				    rdb_xc_rec_name(type), len);
		return 0;
	case RDB_XC_SHARED_INFO:
		if (len != RDB_XC_PAGE_SIZE)
			return fail(p, "SHARED_INFO of %u octets (a page)", len);
		return 0;
	case RDB_XC_TSC_INFO:
		if (len != 24)
			return fail(p, "TSC_INFO of %u octets (24)", len);
		return 0;
	case RDB_XC_HVM_PARAMS:
		if (len < 8 || len != 8 + 16ull * le32(b))
			return fail(p, "HVM_PARAMS of %u octets", len);
		return 0;
	case RDB_XC_CHECKPOINT_DIRTY_PFN_LIST:
		if (len % 8)
			return fail(p, "CHECKPOINT_DIRTY_PFN_LIST of %u octets", len);
		return 0;
	default:
		return 0;
	}
}

static int xrec(struct rdb_xc_parser *p, uint32_t type, const uint8_t *b,
		uint32_t len)
{
	int rc;

	if (type >= RDB_XC_REC__KNOWN && !(type & RDB_XC_OPTIONAL))
		return fail(p, "libxc record type 0x%08x: unknown and not "
			    "optional", type);
	rc = xrec_check(p, type, b, len);
	if (rc < 0)
		return rc;
	p->records++;
	switch (type) {
	case RDB_XC_PAGE_DATA:
		return page_data(p, b, len);
	case RDB_XC_END:
		if (p->layer == RDB_XC_RAW) {
			p->state = RDB_XC_S_DONE;
			return p->ops->end ? p->ops->end(p->opaque) : 0;
		}
		p->state = RDB_XC_S_LREC;	/* back to libxl */
		return 0;
	case RDB_XC_CHECKPOINT:
		p->verify = false;
		if (p->layer == RDB_XC_RAW) {
			rc = p->ops->epoch_end ? p->ops->epoch_end(p->opaque,
								   p->epoch) : 0;
			p->epoch++;
			return rc;
		}
		/* libxl's records of this checkpoint, to CHECKPOINT_END */
		p->in_checkpoint = true;
		p->state = RDB_XC_S_LREC;
		return 0;
	case RDB_XC_VERIFY:
		p->verify = true;
		return 0;
	case RDB_XC_STATIC_DATA_END:
		if (p->static_end)
			return fail(p, "a second STATIC_DATA_END");
		p->static_end = true;
		break;
	default:
		break;
	}
	return p->ops->record ? p->ops->record(p->opaque, p->epoch, false, type,
					       b, len) : 0;
}

static int lrec(struct rdb_xc_parser *p, uint32_t type, const uint8_t *b,
		uint32_t len)
{
	int rc;

	if (type >= RDB_XL_REC__KNOWN)
		return fail(p, "libxl record type 0x%08x unknown", type);
	p->records++;
	switch (type) {
	case RDB_XL_END:
	case RDB_XL_LIBXC_CONTEXT:
	case RDB_XL_CHECKPOINT_END:
		if (len)
			return fail(p, "libxl %s with a body of %u octets",
				    xl_names[type], len);
		break;
	case RDB_XL_EMULATOR_XENSTORE_DATA:
	case RDB_XL_EMULATOR_CONTEXT:
		if (len < 8)
			return fail(p, "libxl %s of %u octets: no emulator id",
				    xl_names[type], len);
		break;
	case RDB_XL_CHECKPOINT_STATE:
		if (len != 4 && len != 8)
			return fail(p, "libxl CHECKPOINT_STATE of %u octets", len);
		break;
	}
	switch (type) {
	case RDB_XL_END:
		p->state = RDB_XC_S_DONE;
		return p->ops->end ? p->ops->end(p->opaque) : 0;
	case RDB_XL_LIBXC_CONTEXT:
		if (p->have_headers)
			return fail(p, "a second libxl LIBXC_CONTEXT");
		p->state = RDB_XC_S_IHDR;
		return 0;
	case RDB_XL_CHECKPOINT_END:
		if (!p->in_checkpoint)
			return fail(p, "libxl CHECKPOINT_END without libxc's "
				    "CHECKPOINT before it");
		p->in_checkpoint = false;
		p->state = RDB_XC_S_XREC;	/* libxc's records go on */
		rc = p->ops->epoch_end ? p->ops->epoch_end(p->opaque, p->epoch) : 0;
		p->epoch++;
		return rc;
	default:
		return p->ops->record ? p->ops->record(p->opaque, p->epoch, true,
						       type, b, len) : 0;
	}
}

/* One step on what is buffered: 1 if it took something, 0 if it needs
 * more bytes, < 0 on error. */
static int step(struct rdb_xc_parser *p)
{
	const uint8_t *h = p->in.data;
	size_t have = p->in.len, need;
	uint32_t type, len;
	int rc;

	switch (p->state) {
	case RDB_XC_S_LHDR:
		if (have < LHDR_LEN)
			return 0;
		rc = lhdr(p, h);
		need = LHDR_LEN;
		break;
	case RDB_XC_S_IHDR:
		if (have < XHDRS_LEN)
			return 0;
		rc = xhdrs(p, h);
		need = XHDRS_LEN;
		break;
	case RDB_XC_S_LREC:
	case RDB_XC_S_XREC:
		if (have < REC_HDR)
			return 0;
		type = le32(h);
		len = le32(h + 4);
		if (len > (p->state == RDB_XC_S_XREC && type == RDB_XC_PAGE_DATA ?
			   8 + 8 * RDB_XC_MAX_BATCH +
			   RDB_XC_PAGE_SIZE * RDB_XC_MAX_BATCH : RDB_XC_MAX_RECORD))
			return fail(p, "%s record type 0x%08x of %u octets: too "
				    "long", p->state == RDB_XC_S_XREC ? "libxc" :
				    "libxl", type, len);
		need = REC_HDR + (((size_t)len + 7) & ~(size_t)7);
		if (have < need)
			return 0;
		if (p->pd_done)		/* a PAGE_DATA taken in parts */
			rc = page_data(p, h + REC_HDR, len);
		else
			rc = p->state == RDB_XC_S_XREC ?
			     xrec(p, type, h + REC_HDR, len) :
			     lrec(p, type, h + REC_HDR, len);
		if (rc == 0 && p->pd_done)
			return 0;	/* its budget spent: more later */
		break;
	case RDB_XC_S_DONE:
		return have ? fail(p, "%zu octets after the stream's END", have) : 0;
	default:
		return -EPROTO;
	}
	if (rc < 0) {
		p->state = RDB_XC_S_FAILED;
		return rc;
	}
	rdb_buf_consume(&p->in, need);
	return 1;
}

int rdb_xc_parser_feed(struct rdb_xc_parser *p, const uint8_t *buf, size_t len)
{
	int rc;

	if (p->state == RDB_XC_S_FAILED)
		return -EPROTO;
	if (len && rdb_buf_append(&p->in, buf, len) < 0)
		return -ENOMEM;
	p->budget_left = p->page_budget;
	while ((rc = step(p)) > 0)
		;
	return rc;
}

bool rdb_xc_parser_pending(const struct rdb_xc_parser *p)
{
	return p->pd_done != 0 && p->state != RDB_XC_S_FAILED;
}

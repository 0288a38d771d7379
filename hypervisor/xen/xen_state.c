// SPDX-License-Identifier: GPL-2.0-only
#include "xen/xen_state.h"
#include "le.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PFN_TYPE_SHIFT 60
#define PAGE_DATA_MAX 1024u

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EPROTO;
}

static bool carries_data(unsigned t)
{
	return t <= 4 || (t >= 9 && t <= 0xc);
}

static int put_rec(struct rdb_buf *b, uint32_t type, const void *body,
		   size_t len)
{
	static const uint8_t zero[8];
	uint8_t h[8];

	if (len > UINT32_MAX)
		return -EINVAL;
	rdb_le_put32(h, type);
	rdb_le_put32(h + 4, (uint32_t)len);
	if (rdb_buf_append(b, h, 8) < 0 || (len && rdb_buf_append(b, body, len) < 0) ||
	    rdb_buf_append(b, zero, (8 - len % 8) % 8) < 0)
		return -ENOMEM;
	return 0;
}

/* The next record of a blob: 1 with it, 0 at the end, -EPROTO if cut. */
static int next_rec(const uint8_t *blob, size_t len, size_t *at,
		    uint32_t *type, const uint8_t **body, uint32_t *blen)
{
	size_t padded;

	if (*at == len)
		return 0;
	if (len - *at < 8)
		return -EPROTO;
	*type = rdb_le_get32(blob + *at);
	*blen = rdb_le_get32(blob + *at + 4);
	padded = ((size_t)*blen + 7) & ~(size_t)7;
	if (len - *at - 8 < padded)
		return -EPROTO;
	*body = blob + *at + 8;
	*at += 8 + padded;
	return 1;
}

void rdb_xen_state_init(struct rdb_xen_state *s)
{
	memset(s, 0, sizeof(*s));
	rdb_buf_init(&s->config);
	rdb_buf_init(&s->epoch);
}

void rdb_xen_state_dispose(struct rdb_xen_state *s)
{
	rdb_buf_dispose(&s->config);
	rdb_buf_dispose(&s->epoch);
	free(s->types);
	s->types = NULL;
}

int rdb_xen_state_domain(struct rdb_xen_state *s, const struct rdb_xc_domain *d)
{
	uint8_t b[16];

	if (s->config.len)
		return fail(s->err, sizeof(s->err), "a second libxc stream header");
	if (d->type != 1)
		return fail(s->err, sizeof(s->err), "domain type %u: only x86 PV "
			    "domains (1) are supported", d->type);
	rdb_le_put32(b, d->version);
	rdb_le_put32(b + 4, d->type);
	rdb_le_put32(b + 8, d->xen_major);
	rdb_le_put32(b + 12, d->xen_minor);
	return put_rec(&s->config, RDB_XEN_REC_DOMAIN, b, sizeof(b));
}

int rdb_xen_state_xl_header(struct rdb_xen_state *s, const uint8_t *h,
			    size_t len)
{
	if (s->config_done)
		return fail(s->err, sizeof(s->err), "xl's header after the "
			    "stream's static data");
	return put_rec(&s->config, RDB_XEN_REC_XL_HEADER, h, len);
}

int rdb_xen_state_record(struct rdb_xen_state *s, uint32_t type,
			 const uint8_t *body, size_t len)
{
	uint64_t end;
	int rc;

	switch (type) {
	case RDB_XC_X86_PV_INFO:
	case RDB_XC_X86_CPUID_POLICY:
	case RDB_XC_X86_MSR_POLICY:
	case RDB_XC_STATIC_DATA_END:
		if (s->config_done || !s->config.len)
			return fail(s->err, sizeof(s->err), "%s %s",
				    rdb_xc_rec_name(type), s->config_done ?
				    "after the first pages" : "before the headers");
		return put_rec(&s->config, type, body, len);
	case RDB_XC_X86_PV_P2M_FRAMES:
		if (s->config_done || !s->config.len)
			return fail(s->err, sizeof(s->err), "X86_PV_P2M_FRAMES "
				    "%s", s->config_done ? "a second time" :
				    "before the headers");
		end = rdb_le_get32(body + 4);	/* (xc_stream checked 8 octets) */
		if (rdb_le_get32(body) != 0 || end + 1 > RDB_XEN_MAX_PFNS)
			return fail(s->err, sizeof(s->err), "X86_PV_P2M_FRAMES for "
				    "pfns %u..%llu: not from 0, or over %llu pfns",
				    rdb_le_get32(body), (unsigned long long)end,
				    RDB_XEN_MAX_PFNS);
		rc = put_rec(&s->config, type, body, len);
		if (rc < 0)
			return rc;
		s->npfns = end + 1;
		s->types = malloc(s->npfns);
		if (!s->types)
			return -ENOMEM;
		memset(s->types, RDB_XEN_TYPE_NONE, s->npfns);
		s->config_done = true;
		return 1;
	case RDB_XC_TSC_INFO:
	case RDB_XC_SHARED_INFO:
	case RDB_XC_X86_PV_VCPU_BASIC:
	case RDB_XC_X86_PV_VCPU_EXTENDED:
	case RDB_XC_X86_PV_VCPU_XSAVE:
	case RDB_XC_X86_PV_VCPU_MSRS:
		if (!s->config_done)
			return fail(s->err, sizeof(s->err), "%s before "
				    "X86_PV_P2M_FRAMES", rdb_xc_rec_name(type));
		return put_rec(&s->epoch, type, body, len);
	case RDB_XC_HVM_CONTEXT:
	case RDB_XC_HVM_PARAMS:
		return fail(s->err, sizeof(s->err), "%s: not a PV domain",
			    rdb_xc_rec_name(type));
	case RDB_XEN_REC_TYPES:
	case RDB_XEN_REC_DOMAIN:
	case RDB_XEN_REC_XL_HEADER:
		return fail(s->err, sizeof(s->err), "private record 0x%08x in "
			    "the stream", type);
	default:
		return 0;	/* optional, or not a restore's business */
	}
}

int rdb_xen_state_page(struct rdb_xen_state *s, uint64_t pfn, unsigned type)
{
	if (!s->config_done)
		return fail(s->err, sizeof(s->err), "PAGE_DATA before "
			    "X86_PV_P2M_FRAMES");
	if (pfn >= s->npfns)
		return fail(s->err, sizeof(s->err), "pfn %llu beyond the p2m's "
			    "%llu", (unsigned long long)pfn,
			    (unsigned long long)s->npfns);
	s->types[pfn] = (uint8_t)type;
	return 0;
}

int rdb_xen_state_epoch_end(struct rdb_xen_state *s, struct rdb_buf *out)
{
	struct rdb_buf runs;
	uint8_t r[8];
	int rc = 0;

	if (!s->config_done)
		return fail(s->err, sizeof(s->err), "a checkpoint before "
			    "X86_PV_P2M_FRAMES");
	rdb_buf_init(&runs);
	for (uint64_t i = 0; i < s->npfns && rc == 0;) {
		uint64_t j = i + 1;

		while (j < s->npfns && s->types[j] == s->types[i] &&
		       j - i < UINT32_MAX)
			j++;
		rdb_le_put32(r, (uint32_t)(j - i));
		rdb_le_put32(r + 4, s->types[i]);
		rc = rdb_buf_append(&runs, r, sizeof(r));
		i = j;
	}
	rdb_buf_reset(out);
	if (rc == 0)
		rc = rdb_buf_append(out, s->epoch.data, s->epoch.len);
	if (rc == 0)
		rc = put_rec(out, RDB_XEN_REC_TYPES, runs.data, runs.len);
	rdb_buf_dispose(&runs);
	rdb_buf_reset(&s->epoch);
	return rc;
}

/* ---- the image ---- */

struct writer {
	int fd;
	uint8_t buf[1 << 20];
	size_t len;
	int rc;
};

static void w_flush(struct writer *w)
{
	size_t off = 0;

	while (w->rc == 0 && off < w->len) {
		ssize_t r = write(w->fd, w->buf + off, w->len - off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			w->rc = r < 0 ? -errno : -EIO;
		else
			off += (size_t)r;
	}
	w->len = 0;
}

static void w_put(struct writer *w, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n && w->rc == 0) {
		size_t k = sizeof(w->buf) - w->len;

		if (k > n)
			k = n;
		memcpy(w->buf + w->len, b, k);
		w->len += k;
		b += k;
		n -= k;
		if (w->len == sizeof(w->buf))
			w_flush(w);
	}
}

static void w_rec(struct writer *w, uint32_t type, const void *body, size_t len)
{
	static const uint8_t zero[8];
	uint8_t h[8];

	rdb_le_put32(h, type);
	rdb_le_put32(h + 4, (uint32_t)len);
	w_put(w, h, 8);
	w_put(w, body, len);
	w_put(w, zero, (8 - len % 8) % 8);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

int rdb_xen_image_write(int fd, const uint8_t *config, size_t config_len,
			const uint8_t *devstate, size_t devstate_len,
			const uint8_t *ram, uint64_t ram_bytes, char *err,
			size_t errlen)
{
	const uint8_t *dom = NULL, *xlh = NULL, *types = NULL, *body;
	size_t at = 0, static_from = 0, static_to = 0, xlh_len = 0;
	size_t types_len = 0, recs_to = 0;
	uint64_t npfns = 0, counted = 0, pfn;
	bool vcpu0 = false;
	struct writer *w;
	uint32_t type, blen;
	uint8_t h[24];
	int r;

	/* config: DOMAIN [XL_HEADER] static* (P2M_FRAMES gives npfns) */
	while ((r = next_rec(config, config_len, &at, &type, &body, &blen)) > 0) {
		if (type == RDB_XEN_REC_DOMAIN && blen == 16) {
			dom = body;
			static_from = at;
		} else if (type == RDB_XEN_REC_XL_HEADER) {
			xlh = body;
			xlh_len = blen;
			static_from = at;
		} else {
			if (type == RDB_XC_X86_PV_P2M_FRAMES && blen >= 8)
				npfns = (uint64_t)rdb_le_get32(body + 4) + 1;
			static_to = at;
		}
	}
	if (r < 0 || !dom || !npfns)
		return fail(err, errlen, "the domain's config is %s", r < 0 ?
			    "cut short" : !dom ? "without its libxc headers" :
			    "without X86_PV_P2M_FRAMES");
	if (!xlh)
		return fail(err, errlen, "no xl header and domain config (xl "
			    "restore needs them)");
	/* devstate: rec* TYPES */
	at = 0;
	while ((r = next_rec(devstate, devstate_len, &at, &type, &body,
			     &blen)) > 0) {
		if (type == RDB_XEN_REC_TYPES) {
			types = body;
			types_len = blen;
			break;
		}
		if (type == RDB_XC_X86_PV_VCPU_BASIC && blen >= 8 &&
		    rdb_le_get32(body) == 0)
			vcpu0 = true;
		recs_to = at;
	}
	if (r < 0 || !types || types_len % 8)
		return fail(err, errlen, "the epoch's state is %s", r < 0 ?
			    "cut short" : "without the pfns' types");
	if (!vcpu0)
		return fail(err, errlen, "the epoch's state has no vcpu 0");
	for (size_t i = 0; i < types_len; i += 8)
		counted += rdb_le_get32(types + i);
	if (counted != npfns || ram_bytes != npfns * RDB_XC_PAGE_SIZE)
		return fail(err, errlen, "%llu pfns typed, %llu bytes of RAM, "
			    "for a p2m of %llu pfns", (unsigned long long)counted,
			    (unsigned long long)ram_bytes,
			    (unsigned long long)npfns);

	w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fd = fd;
	w->len = 0;
	w->rc = 0;
	w_put(w, xlh, xlh_len);
	/* libxl: "LibxlFmt" v2, LIBXC_CONTEXT */
	memcpy(h, "LibxlFmt", 8);
	put_be32(h + 8, 2);
	put_be32(h + 12, 0);
	w_put(w, h, 16);
	w_rec(w, 1, NULL, 0);
	/* libxc: image header (be), domain header (le) */
	memset(h, 0xff, 8);
	put_be32(h + 8, 0x58454e46);	/* "XENF" */
	put_be32(h + 12, rdb_le_get32(dom));
	memset(h + 16, 0, 8);
	w_put(w, h, 24);
	rdb_le_put32(h, rdb_le_get32(dom + 4));
	h[4] = 12;
	memset(h + 5, 0, 3);
	rdb_le_put32(h + 8, rdb_le_get32(dom + 8));
	rdb_le_put32(h + 12, rdb_le_get32(dom + 12));
	w_put(w, h, 16);
	w_put(w, config + static_from, static_to - static_from);
	/* every pfn, in PAGE_DATA records of up to 1024 */
	pfn = 0;
	for (size_t i = 0; i < types_len && w->rc == 0; i += 8) {
		uint64_t run_end = pfn + rdb_le_get32(types + i);
		unsigned t = rdb_le_get32(types + i + 4) & 0xf;

		while (pfn < run_end && w->rc == 0) {
			uint64_t n = run_end - pfn, ndata;
			uint8_t e[8];

			if (n > PAGE_DATA_MAX)
				n = PAGE_DATA_MAX;
			ndata = carries_data(t) ? n : 0;
			rdb_le_put32(h, RDB_XC_PAGE_DATA);
			rdb_le_put32(h + 4, (uint32_t)(8 + 8 * n +
						       ndata * RDB_XC_PAGE_SIZE));
			rdb_le_put32(h + 8, (uint32_t)n);
			rdb_le_put32(h + 12, 0);
			w_put(w, h, 16);
			for (uint64_t k = 0; k < n; k++) {
				rdb_le_put64(e, ((uint64_t)t << PFN_TYPE_SHIFT) |
					     (pfn + k));
				w_put(w, e, 8);
			}
			if (ndata)
				w_put(w, ram + pfn * RDB_XC_PAGE_SIZE,
				      ndata * RDB_XC_PAGE_SIZE);
			pfn += n;
		}
	}
	w_put(w, devstate, recs_to);
	w_rec(w, RDB_XC_END, NULL, 0);		/* libxc's */
	w_rec(w, 0, NULL, 0);			/* libxl's END */
	w_flush(w);
	r = w->rc;
	free(w);
	if (r < 0)
		snprintf(err, errlen, "writing the image: %s", strerror(-r));
	return r;
}

/* ---- the restored domain's disk: xl's config, its target rewritten ---- */

/*
 * Just enough JSON to find one member's string value in libxl's config
 * (libxl_domain_config_to_json): every value is skipped whole, strings
 * with their escapes, so a key or a brace inside a string never counts.
 * The rest of the text is copied as it was (no parse and print again:
 * libxl's 64-bit integers and its key order stay untouched).
 */
struct jscan {
	const char *j;
	size_t n, at;
};

static void j_ws(struct jscan *s)
{
	while (s->at < s->n && (s->j[s->at] == ' ' || s->j[s->at] == '\t' ||
				s->j[s->at] == '\n' || s->j[s->at] == '\r'))
		s->at++;
}

static bool j_eat(struct jscan *s, char c)
{
	j_ws(s);
	if (s->at < s->n && s->j[s->at] == c) {
		s->at++;
		return true;
	}
	return false;
}

/* A string: [*b, *e) its raw contents between the quotes. */
static bool j_str(struct jscan *s, size_t *b, size_t *e)
{
	if (!j_eat(s, '"'))
		return false;
	*b = s->at;
	while (s->at < s->n && s->j[s->at] != '"') {
		if (s->j[s->at] == '\\')
			s->at++;
		s->at++;
	}
	if (s->at >= s->n)
		return false;
	*e = s->at++;
	return true;
}

static bool j_skip(struct jscan *s, int depth)
{
	size_t b, e;

	if (depth > 64)
		return false;
	j_ws(s);
	if (s->at >= s->n)
		return false;
	if (s->j[s->at] == '"')
		return j_str(s, &b, &e);
	if (s->j[s->at] == '{' || s->j[s->at] == '[') {
		char close = s->j[s->at] == '{' ? '}' : ']';

		s->at++;
		if (j_eat(s, close))
			return true;
		do {
			if (close == '}' && (!j_str(s, &b, &e) || !j_eat(s, ':')))
				return false;
			if (!j_skip(s, depth + 1))
				return false;
		} while (j_eat(s, ','));
		return j_eat(s, close);
	}
	b = s->at;
	while (s->at < s->n && !strchr(",]} \t\r\n", s->j[s->at]))
		s->at++;
	return s->at > b;
}

static bool j_key_is(const struct jscan *s, size_t b, size_t e, const char *k)
{
	return e - b == strlen(k) && !memcmp(s->j + b, k, e - b);
}

/* In the disks array at s: how many disks run `script` (its base name
 * compared), the last one's pdev_path value in [*pb, *pe). */
static bool j_disks(struct jscan *s, const char *script, int *count,
		    size_t *pb, size_t *pe)
{
	if (!j_eat(s, '['))
		return false;
	if (j_eat(s, ']'))
		return true;
	do {
		size_t kb, ke, vb, ve, path_b = 0, path_e = 0;
		bool path = false, ours = false;

		if (!j_eat(s, '{'))
			return false;
		if (!j_eat(s, '}')) {
			do {
				if (!j_str(s, &kb, &ke) || !j_eat(s, ':'))
					return false;
				if (j_key_is(s, kb, ke, "pdev_path") ||
				    j_key_is(s, kb, ke, "script")) {
					if (!j_str(s, &vb, &ve))
						return false;
				} else if (!j_skip(s, 2)) {
					return false;
				} else {
					continue;
				}
				if (s->j[kb] == 'p') {
					path = true;
					path_b = vb;
					path_e = ve;
				} else {
					const char *v = s->j + vb, *slash;
					size_t l = ve - vb;

					slash = memrchr(v, '/', l);
					if (slash) {
						l -= (size_t)(slash + 1 - v);
						v = slash + 1;
					}
					ours = l == strlen(script) && !memcmp(v, script, l);
				}
			} while (j_eat(s, ','));
			if (!j_eat(s, '}'))
				return false;
		}
		if (ours) {
			if (!path)
				return false;
			(*count)++;
			*pb = path_b;
			*pe = path_e;
		}
	} while (j_eat(s, ','));
	return j_eat(s, ']');
}

int rdb_xen_config_set_disk(const uint8_t *config, size_t config_len,
			    const char *script, const char *target,
			    struct rdb_buf *out, char *err, size_t errlen)
{
	static const char magic[32] = "Xen saved domain, xl format\n \0 \r";
	const uint8_t *body, *xlh = NULL;
	size_t at = 0, rec_at = 0, rec_end = 0, pb = 0, pe = 0;
	uint32_t type, blen, optlen, jlen;
	struct rdb_buf esc, h;
	struct jscan s;
	uint32_t mand;
	int r, count = 0;

	rdb_buf_init(&esc);
	rdb_buf_init(&h);

	while ((r = next_rec(config, config_len, &at, &type, &body, &blen)) > 0) {
		if (type == RDB_XEN_REC_XL_HEADER) {
			xlh = body;
			rec_end = at;
			break;
		}
		rec_at = at;
	}
	if (r < 0 || !xlh)
		return fail(err, errlen, "no xl header and domain config in the "
			    "saved config");
	/* magic, byte order, mandatory, optional flags, optional data's
	 * length; in it: the JSON's length (with its NUL), the JSON */
	if (blen < 52 || memcmp(xlh, magic, sizeof(magic)))
		return fail(err, errlen, "xl's header is not xl's");
	memcpy(&type, xlh + 32, 4);
	memcpy(&optlen, xlh + 44, 4);
	memcpy(&jlen, xlh + 48, 4);
	memcpy(&mand, xlh + 36, 4);
	if (type != 0x01020304 || !(mand & 1))
		return fail(err, errlen, "xl's header is in another byte order "
			    "or without a JSON config");
	if (optlen < 4 || (size_t)optlen > blen - 48 || jlen != optlen - 4 ||
	    jlen == 0 || xlh[52 + jlen - 1] != 0)
		return fail(err, errlen, "xl's header: its config's length "
			    "(%u of %u optional bytes) does not fit", jlen, optlen);
	s = (struct jscan){ .j = (const char *)xlh + 52, .n = jlen - 1 };
	if (!j_eat(&s, '{'))
		return fail(err, errlen, "the domain's config is not a JSON object");
	if (!j_eat(&s, '}')) {
		do {
			size_t kb, ke;

			if (!j_str(&s, &kb, &ke) || !j_eat(&s, ':'))
				return fail(err, errlen, "the domain's config: bad "
					    "JSON at byte %zu", s.at);
			if (j_key_is(&s, kb, ke, "disks")) {
				if (!j_disks(&s, script, &count, &pb, &pe))
					return fail(err, errlen, "the domain's config: "
						    "bad disks at byte %zu", s.at);
			} else if (!j_skip(&s, 1)) {
				return fail(err, errlen, "the domain's config: bad "
					    "JSON at byte %zu", s.at);
			}
		} while (j_eat(&s, ','));
		if (!j_eat(&s, '}'))
			return fail(err, errlen, "the domain's config: bad JSON "
				    "at byte %zu", s.at);
	}
	if (count != 1)
		return fail(err, errlen, "the domain's config has %d disks with "
			    "script %s (one is replicated)", count, script);
	/* the new target, as a JSON string's contents */
	for (const char *c = target; *c; c++) {
		if ((unsigned char)*c < 0x20) {
			rdb_buf_dispose(&esc);
			return fail(err, errlen, "disk target with a control character");
		}
		if ((*c == '"' || *c == '\\') && rdb_buf_append(&esc, "\\", 1) < 0)
			goto nomem;
		if (rdb_buf_append(&esc, c, 1) < 0)
			goto nomem;
	}
	jlen = (uint32_t)(jlen - (pe - pb) + esc.len);
	optlen = jlen + 4;
	if (rdb_buf_append(&h, xlh, 44) < 0 || rdb_buf_append(&h, &optlen, 4) < 0 ||
	    rdb_buf_append(&h, &jlen, 4) < 0 ||
	    rdb_buf_append(&h, xlh + 52, pb) < 0 ||
	    (esc.len && rdb_buf_append(&h, esc.data, esc.len) < 0) ||
	    rdb_buf_append(&h, xlh + 52 + pe, blen - 52 - pe) < 0)
		goto nomem;
	rdb_buf_reset(out);
	if (rdb_buf_append(out, config, rec_at) < 0 ||
	    put_rec(out, RDB_XEN_REC_XL_HEADER, h.data, h.len) < 0 ||
	    rdb_buf_append(out, config + rec_end, config_len - rec_end) < 0)
		goto nomem;
	rdb_buf_dispose(&esc);
	rdb_buf_dispose(&h);
	return 0;
nomem:
	rdb_buf_dispose(&esc);
	rdb_buf_dispose(&h);
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

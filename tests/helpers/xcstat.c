// SPDX-License-Identifier: GPL-2.0-only
/*
 * xcstat: runs hypervisor/xen/xc_stream.c over a real stream from Xen's
 * xl, in the Xen test host's dom0 (tools/mkxenhost.sh), and prints what it
 * found as one JSON line:
 *
 *   xcstat FILE  ->  {"offset":N,"bytes":N,"xen":"4.17","domain_type":1,
 *                     "stream_version":3,"pages":N,"pages_with_data":N,
 *                     "records":N,"epochs":N,"end":true|false,"rest":N,
 *                     "ok":true|false,"error":"..."}
 *
 * FILE is what `xl save` wrote, or what xl remus sent (captured on its
 * way to xl migrate-receive): xl's own header and the domain's config
 * come first, so the libxl stream is found by its ident ("LibxlFmt") and
 * parsed from there (offset).  ok: no parse error; a stream cut short (a
 * primary destroyed mid-checkpoint) leaves `rest` bytes of an unfinished
 * record and is still ok.  Exit 0 if ok.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xen/xc_stream.h"

struct stat_ {
	struct rdb_xc_domain dom;
	unsigned long long pages, data, records, epochs;
	int end;
};

static int on_domain(void *o, const struct rdb_xc_domain *d)
{
	((struct stat_ *)o)->dom = *d;
	return 0;
}

static int on_page(void *o, uint64_t epoch, uint64_t pfn, unsigned type,
		   const uint8_t *data)
{
	struct stat_ *s = o;

	s->pages++;
	s->data += data != NULL;
	return 0;
}

static int on_record(void *o, uint64_t epoch, bool libxl, uint32_t type,
		     const uint8_t *body, size_t len)
{
	((struct stat_ *)o)->records++;
	return 0;
}

static int on_epoch(void *o, uint64_t epoch)
{
	((struct stat_ *)o)->epochs++;
	return 0;
}

static int on_end(void *o)
{
	((struct stat_ *)o)->end = 1;
	return 0;
}

static const struct rdb_xc_ops ops = {
	.domain = on_domain, .page = on_page, .record = on_record,
	.epoch_end = on_epoch, .end = on_end,
};

int main(int argc, char **argv)
{
	static const char ident[8] = "LibxlFmt";
	static uint8_t buf[1 << 20];
	struct rdb_xc_parser p;
	struct stat_ s = { 0 };
	unsigned long long offset = 0, total = 0;
	size_t have = 0, n;
	int found = 0, rc = 0;
	FILE *f;

	if (argc != 2) {
		fprintf(stderr, "usage: xcstat FILE\n");
		return 2;
	}
	f = fopen(argv[1], "rb");
	if (!f) {
		fprintf(stderr, "xcstat: %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	rdb_xc_parser_init(&p, RDB_XC_LIBXL, &ops, &s);
	while (rc == 0 && (n = fread(buf + have, 1, sizeof(buf) - have, f)) > 0) {
		have += n;
		total += n;
		if (!found) {
			size_t i = 0;

			while (i + sizeof(ident) <= have &&
			       memcmp(buf + i, ident, sizeof(ident)))
				i++;
			if (i + sizeof(ident) > have) {
				/* keep the last 7 bytes: the ident may straddle */
				size_t keep = have < 7 ? have : 7;

				memmove(buf, buf + have - keep, keep);
				offset += have - keep;
				have = keep;
				continue;
			}
			found = 1;
			offset += i;
			memmove(buf, buf + i, have - i);
			have -= i;
		}
		rc = rdb_xc_parser_feed(&p, buf, have);
		have = 0;
	}
	fclose(f);
	printf("{\"offset\":%llu,\"bytes\":%llu,\"xen\":\"%u.%u\",\"domain_type\":%u,"
	       "\"stream_version\":%u,\"pages\":%llu,\"pages_with_data\":%llu,"
	       "\"records\":%llu,\"epochs\":%llu,\"end\":%s,\"rest\":%zu,"
	       "\"ok\":%s,\"error\":\"%s\"}\n",
	       found ? offset : 0, total, s.dom.xen_major, s.dom.xen_minor,
	       s.dom.type, s.dom.version, s.pages, s.data, s.records, s.epochs,
	       s.end ? "true" : "false", p.in.len,
	       found && rc == 0 ? "true" : "false",
	       !found ? "no libxl stream (\\\"LibxlFmt\\\") in the file" :
	       rc ? rdb_xc_parser_error(&p) : "");
	rdb_xc_parser_dispose(&p);
	return found && rc == 0 ? 0 : 1;
}

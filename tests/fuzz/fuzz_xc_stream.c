// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer: Xen's migration stream parser (xc_stream.h).  Any input, in
 * either layer: nothing is read outside the buffers (ASan; every page
 * handed over is read whole), and feeding it in pieces of any size gives
 * what feeding it whole gives: the same result, pages, records, epochs. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xen/xc_stream.h"

struct seen {
	uint64_t domains, pages, sum, records, epochs, ends;
};

static int on_domain(void *o, const struct rdb_xc_domain *d)
{
	((struct seen *)o)->domains += d->type;
	return 0;
}

static int on_page(void *o, uint64_t epoch, uint64_t pfn, unsigned type,
		   const uint8_t *data)
{
	struct seen *s = o;

	s->pages++;
	s->sum += pfn + type + epoch;
	if (data)
		s->sum += data[0] + data[RDB_XC_PAGE_SIZE - 1];
	return 0;
}

static int on_record(void *o, uint64_t epoch, bool libxl, uint32_t type,
		     const uint8_t *body, size_t len)
{
	struct seen *s = o;

	s->records++;
	s->sum += type + len + (len ? body[0] + body[len - 1] : 0) + libxl;
	return 0;
}

static int on_epoch(void *o, uint64_t epoch)
{
	((struct seen *)o)->epochs += epoch + 1;
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

static int run(enum rdb_xc_layer layer, const uint8_t *d, size_t n, size_t step,
	       struct seen *s)
{
	struct rdb_xc_parser p;
	int rc = 0;

	memset(s, 0, sizeof(*s));
	rdb_xc_parser_init(&p, layer, &ops, s);
	for (size_t at = 0; rc == 0 && at < n; at += step)
		rc = rdb_xc_parser_feed(&p, d + at, n - at < step ? n - at : step);
	if (rc < 0 && rdb_xc_parser_feed(&p, d, n ? 1 : 0) != -EPROTO && n)
		abort();	/* a failed parser must stay failed */
	rdb_xc_parser_dispose(&p);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum rdb_xc_layer layer;
	struct seen a, b;
	size_t step;
	int ra, rb;

	if (size < 2)
		return 0;
	layer = data[0] & 1 ? RDB_XC_RAW : RDB_XC_LIBXL;
	step = data[1] ? data[1] : 1;
	data += 2;
	size -= 2;
	ra = run(layer, data, size, size ? size : 1, &a);
	rb = run(layer, data, size, step, &b);
	if (ra != rb || memcmp(&a, &b, sizeof(a)))
		abort();
	return 0;
}

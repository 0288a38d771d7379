// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer: the Xen backend's checkpoint stream (hypervisor/xen/
 * backend.c: remusdb-xen's preamble and libxc stream, kept by
 * xen_state.c).  Any input: nothing is read outside the buffers (ASan),
 * fed in pieces of any size it gives what fed whole gives (result,
 * config, pages, epochs and their devstate), and each epoch's blobs
 * either make an xl image or are refused with a reason; never a crash.
 * The input as xl's saved JSON config goes through the restore's disk
 * rewrite too: refused with a reason, or the new target in a header whose
 * lengths add up. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hv.h"
#include "xen/xen_state.h"

extern const struct rdb_hv_ops rdb_hv_xen_ops;

struct seen {
	uint64_t sum, pages, epochs, requests, config_len, images, refused;
	uint64_t ram_bytes;
	uint8_t config[4096];
};

static int on_config(void *o, const uint8_t *b, size_t len)
{
	struct seen *s = o;

	s->config_len = len;
	memcpy(s->config, b, len < sizeof(s->config) ? len : sizeof(s->config));
	return 0;
}

static int on_blocks(void *o, const struct rdb_ram_block *b, size_t n)
{
	struct seen *s = o;

	s->ram_bytes = n ? b[0].used_length : 0;
	s->sum += n;
	return 0;
}

static int on_page(void *o, uint32_t block, uint64_t off, const uint8_t *d,
		   uint8_t fill)
{
	struct seen *s = o;

	s->pages++;
	s->sum += off + block + (d ? d[0] + d[4095] : fill);
	return 0;
}

/* The blobs of each epoch through the image writer (RAM of zeroes, when
 * small enough to allocate here). */
static int on_epoch(void *o, uint64_t epoch, const uint8_t *dev, size_t len)
{
	struct seen *s = o;
	char err[200];
	uint8_t *ram;
	int fd, rc;

	s->epochs += epoch + 1;
	s->sum += len + (len ? dev[0] + dev[len - 1] : 0);
	if (s->config_len > sizeof(s->config) || s->ram_bytes > (16u << 20))
		return 0;
	ram = calloc(1, s->ram_bytes ? s->ram_bytes : 1);
	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (!ram || fd < 0)
		abort();
	rc = rdb_xen_image_write(fd, s->config, s->config_len, dev, len, ram,
				 s->ram_bytes, err, sizeof(err));
	if (rc == 0)
		s->images++;
	else if (rc == -EPROTO && err[0])
		s->refused++;
	else
		abort();	/* /dev/null takes everything */
	close(fd);
	free(ram);
	return 0;
}

static int on_request(void *o, uint64_t epoch)
{
	struct seen *s = o;

	s->requests += epoch + 1;
	return 0;
}

static const struct rdb_hv_stream_cb cb = {
	.config = on_config, .ram_blocks = on_blocks, .page = on_page,
	.epoch_end = on_epoch, .checkpoint_request = on_request,
};

static int run(const uint8_t *d, size_t n, size_t step, struct seen *s)
{
	const struct rdb_hv_ops *ops = &rdb_hv_xen_ops;
	struct rdb_hv_stream *st = NULL;
	int rc = 0;

	memset(s, 0, sizeof(*s));
	if (ops->stream_new(&st, &cb, s) < 0)
		abort();
	for (size_t at = 0; rc == 0 && at < n; at += step)
		rc = ops->stream_feed(st, d + at, n - at < step ? n - at : step);
	if (rc == -EPROTO && (!ops->stream_error(st)[0] ||
			      ops->stream_feed(st, d, n ? 1 : 0) != -EPROTO))
		abort();	/* a reason, and a failed stream stays failed */
	ops->stream_free(st);
	return rc;
}

/* DOMAIN, XL_HEADER(xl's header + d as the JSON, NUL-ended), rewritten */
static void set_disk(const uint8_t *d, size_t n)
{
	static const char target[] = "/run/remusdb/fuzz,\"x\".disk";
	static const char escaped[] = "fuzz,\\\"x\\\".disk";	/* as JSON has it */
	uint32_t v[5] = { 0x01020304, 3, 0, (uint32_t)n + 5, (uint32_t)n + 1 };
	uint8_t rec[8] = { 0 }, zero[8] = { 0 }, dom[16] = { 0 };
	struct rdb_buf in, out;
	uint32_t hl = (uint32_t)(32 + sizeof(v) + n + 1), jl;
	char err[200] = "";
	int rc;

	rdb_buf_init(&in);
	rdb_buf_init(&out);
	rec[0] = 0x01; rec[1] = 0x44; rec[2] = 0x52; rec[3] = 0x80; rec[4] = 16;
	if (rdb_buf_append(&in, rec, 8) < 0 || rdb_buf_append(&in, dom, 16) < 0)
		abort();
	rec[0] = 0x02;
	memcpy(rec + 4, &hl, 4);
	if (rdb_buf_append(&in, rec, 8) < 0 ||
	    rdb_buf_append(&in, "Xen saved domain, xl format\n \0 \r", 32) < 0 ||
	    rdb_buf_append(&in, v, sizeof(v)) < 0 ||
	    (n && rdb_buf_append(&in, d, n) < 0) || rdb_buf_append(&in, zero, 1) < 0 ||
	    rdb_buf_append(&in, zero, (8 - hl % 8) % 8) < 0)
		abort();
	rc = rdb_xen_config_set_disk(in.data, in.len, "block-remusdb", target,
				     &out, err, sizeof(err));
	if (rc == -EPROTO ? !err[0] : rc != 0)
		abort();
	if (rc == 0) {
		/* DOMAIN as it was; the header's lengths agree; NUL-ended */
		memcpy(&hl, out.data + 28, 4);
		memcpy(&jl, out.data + 32 + 48, 4);
		if (memcmp(out.data, in.data, 24) || hl != 52 + jl ||
		    out.len != 32 + hl + (8 - hl % 8) % 8 ||
		    out.data[32 + 52 + jl - 1] != 0 ||
		    !memmem(out.data + 32 + 52, jl, escaped, sizeof(escaped) - 1))
			abort();
	}
	rdb_buf_dispose(&in);
	rdb_buf_dispose(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seen *a, *b;
	size_t step;
	int ra, rb;

	if (size < 1)
		return 0;
	step = data[0] ? data[0] : 1;
	data++;
	size--;
	a = malloc(sizeof(*a));
	b = malloc(sizeof(*b));
	if (!a || !b)
		abort();
	ra = run(data, size, size ? size : 1, a);
	rb = run(data, size, step, b);
	if (ra != rb || memcmp(a, b, sizeof(*a)))
		abort();
	free(a);
	free(b);
	set_disk(data, size);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "buf.h"
#include "hv.h"
#include "qemu/colo_stream.h"

/* ---- a stream written the way QEMU 10.0 writes it ---- */

static void u8(struct rdb_buf *b, uint8_t v) { rdb_buf_append(b, &v, 1); }
static void u16(struct rdb_buf *b, uint16_t v) { u8(b, (uint8_t)(v >> 8)); u8(b, (uint8_t)v); }
static void u32(struct rdb_buf *b, uint32_t v) { u16(b, (uint16_t)(v >> 16)); u16(b, (uint16_t)v); }
static void u64(struct rdb_buf *b, uint64_t v) { u32(b, (uint32_t)(v >> 32)); u32(b, (uint32_t)v); }
static void str8(struct rdb_buf *b, const char *s) { u8(b, (uint8_t)strlen(s)); rdb_buf_append(b, s, strlen(s)); }

static const uint8_t DEV[] = { 0x04, 0, 0, 0, 9, 3, 'c', 'p', 'u', 0, 0, 0, 0,
			       0, 0, 0, 1, 0xde, 0xad, 0x00, 0x06, 0x7e, 0, 0, 0, 9,
			       0x00 };	/* a FULL section whose data has 00 06 in it, EOF */

static void page(struct rdb_buf *b, const char *blk, uint64_t off, int zero,
		 int cont, uint8_t fill)
{
	u64(b, off | (zero ? 0x02 : 0x08) | (cont ? 0x20 : 0));
	if (!cont)
		str8(b, blk);
	if (zero) {
		u8(b, fill);
	} else {
		uint8_t p[4096];

		memset(p, fill, sizeof(p));
		rdb_buf_append(b, p, sizeof(p));
	}
}

/* The stream's header and configuration section. */
static void header(struct rdb_buf *b)
{
	u32(b, 0x5145564d);
	u32(b, 3);
	u8(b, 0x07); u32(b, 14); rdb_buf_append(b, "pc-i440fx-10.0", 14);
}

/* The initial stream's device sections, EOF and vmdesc. */
static void devtail(struct rdb_buf *b)
{
	const char *vmdesc = "{\"configuration\": {}, \"devices\": []}";

	rdb_buf_append(b, DEV, sizeof(DEV));
	u8(b, 0x06); u32(b, (uint32_t)strlen(vmdesc));
	rdb_buf_append(b, vmdesc, strlen(vmdesc));
}

static void initial(struct rdb_buf *b)
{
	header(b);
	u8(b, 0x08); u16(b, 8); u16(b, 0);		/* ENABLE_COLO */
	u8(b, 0x01); u32(b, 2); str8(b, "ram"); u32(b, 0); u32(b, 4);
	u64(b, (2 * 8192) | 0x04);
	str8(b, "pc.ram"); u64(b, 8192);
	str8(b, "pc.bios"); u64(b, 8192);
	u64(b, 0x10); u8(b, 0x7e); u32(b, 2);
	u8(b, 0x02); u32(b, 2);
	page(b, "pc.ram", 0, 1, 0, 0);
	page(b, "pc.ram", 4096, 0, 1, 0x11);
	u64(b, 0x10); u8(b, 0x7e); u32(b, 2);
	u8(b, 0x08); u16(b, 11); u16(b, 0);		/* SWITCHOVER_START */
	u8(b, 0x03); u32(b, 2);
	page(b, "pc.bios", 0, 0, 0, 0x22);
	page(b, "pc.bios", 4096, 1, 1, 0);
	u64(b, 0x10); u8(b, 0x7e); u32(b, 2);
	devtail(b);
}

static void checkpoint(struct rdb_buf *b, uint8_t fill)
{
	u32(b, 1);					/* REQUEST */
	u32(b, 3);					/* VMSTATE_SEND */
	u8(b, 0x08); u16(b, 11); u16(b, 0);
	u8(b, 0x03); u32(b, 2);
	page(b, "pc.ram", 4096, 0, 1, fill);		/* CONTINUE across sections */
	u64(b, 0x10); u8(b, 0x7e); u32(b, 2);
	u8(b, 0x00);
	u32(b, 4); u64(b, sizeof(DEV));
	rdb_buf_append(b, DEV, sizeof(DEV));
}

/* ---- what the parser reported ---- */

struct seen {
	int configs, blocks_calls, requests;
	size_t nblocks;
	char first_block[32];
	int pages, zero_pages;
	uint8_t last_fill;
	uint64_t epochs[8];
	size_t dev_len[8];
	int nepochs;
	int stops, pages_at_stop, epochs_at_stop;
	int maps, map_fd, mapped_pages, pages_at_map;
	uint32_t map_blk, mapped_blk;
	uint64_t map_off, map_len, mapped_off;
};

static int on_config(void *o, const uint8_t *s, size_t n)
{
	struct seen *x = o;

	assert_int_equal(s[0], 0x07);
	/* 0x07, be32 name length, the name; no subsections here */
	assert_int_equal(n, 1 + 4 + ((size_t)s[3] << 8 | s[4]));
	x->configs++;
	return 0;
}

static int on_blocks(void *o, const struct rdb_ram_block *b, size_t n)
{
	struct seen *x = o;

	x->blocks_calls++;
	x->nblocks = n;
	strcpy(x->first_block, b[0].idstr);
	return 0;
}

static int on_page(void *o, uint32_t blk, uint64_t off, const uint8_t *d, uint8_t f)
{
	struct seen *x = o;

	x->pages++;
	if (!d)
		x->zero_pages++;
	else
		x->last_fill = d[4095];
	return 0;
}

static int on_end(void *o, uint64_t e, const uint8_t *d, size_t n)
{
	struct seen *x = o;

	assert_true(x->nepochs < 8);
	assert_int_equal(d[n - 1], 0x00);
	x->epochs[x->nepochs] = e;
	x->dev_len[x->nepochs++] = n;
	return 0;
}

static int on_req(void *o, uint64_t e)
{
	struct seen *x = o;

	x->requests++;
	return 0;
}

static int on_map(void *o, uint32_t blk, int fd, uint64_t off, uint64_t len)
{
	struct seen *x = o;

	x->maps++;
	x->map_blk = blk;
	x->map_fd = fd;		/* the test's to close */
	x->map_off = off;
	x->map_len = len;
	x->pages_at_map = x->pages;
	return 0;
}

static int on_mapped(void *o, uint32_t blk, uint64_t off)
{
	struct seen *x = o;

	x->mapped_pages++;
	x->mapped_blk = blk;
	x->mapped_off = off;
	return 0;
}

static int on_stop(void *o)
{
	struct seen *x = o;

	x->stops++;
	x->pages_at_stop = x->pages;
	x->epochs_at_stop = x->nepochs;
	return 0;
}

static int on_map(void *o, uint32_t blk, int fd, uint64_t off, uint64_t len);
static int on_mapped(void *o, uint32_t blk, uint64_t off);

static const struct rdb_colo_ops ops = { on_config, on_blocks, on_page, on_end,
					 on_req, on_stop, on_map, on_mapped };

static int feed_in_steps(struct rdb_buf *s, struct seen *x, size_t step,
			 struct rdb_colo_parser *p)
{
	int rc = 0;

	memset(x, 0, sizeof(*x));
	rdb_colo_parser_init(p, &ops, x);
	for (size_t off = 0; rc == 0 && off < s->len; off += step)
		rc = rdb_colo_parser_feed(p, s->data + off,
					  s->len - off < step ? s->len - off : step);
	return rc;
}

static void test_initial_stream_and_checkpoints_any_split(void **state)
{
	struct rdb_buf s;
	size_t steps[] = { 1, 2, 3, 5, 4096, 100000 };

	rdb_buf_init(&s);
	initial(&s);
	checkpoint(&s, 0x33);
	checkpoint(&s, 0x44);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct rdb_colo_parser p;
		struct seen x;

		assert_int_equal(feed_in_steps(&s, &x, steps[i], &p), 0);
		assert_int_equal(x.configs, 1);
		assert_int_equal(x.blocks_calls, 1);
		assert_int_equal(x.nblocks, 2);
		assert_string_equal(x.first_block, "pc.ram");
		assert_int_equal(x.pages, 4 + 2);
		assert_int_equal(x.zero_pages, 2);
		assert_int_equal(x.last_fill, 0x44);
		assert_int_equal(x.requests, 2);
		assert_int_equal(x.nepochs, 3);
		assert_int_equal(x.epochs[0], 0);
		assert_int_equal(x.epochs[2], 2);
		/* epoch 0's device state: the FULL sections + EOF, no vmdesc */
		assert_int_equal(x.dev_len[0], sizeof(DEV));
		assert_int_equal(x.dev_len[1], sizeof(DEV));
		/* QEMU stopped the guest where the ram END begins: after the
		 * live PART's pages, once, not again at a checkpoint */
		assert_int_equal(x.stops, 1);
		assert_int_equal(x.pages_at_stop, 2);
		assert_int_equal(x.epochs_at_stop, 0);
		rdb_colo_parser_dispose(&p);
	}
	rdb_buf_dispose(&s);
}

/* A stream whose completion has no ram END (nothing iterable left): the
 * guest stopped before the first device section. */
static void test_initial_stop_without_ram_end(void **state)
{
	struct rdb_colo_parser p;
	struct rdb_buf s;
	struct seen x;

	rdb_buf_init(&s);
	header(&s);
	u8(&s, 0x01); u32(&s, 2); str8(&s, "ram"); u32(&s, 0); u32(&s, 4);
	u64(&s, 8192 | 0x04);
	str8(&s, "pc.ram"); u64(&s, 8192);
	u64(&s, 0x10); u8(&s, 0x7e); u32(&s, 2);
	u8(&s, 0x02); u32(&s, 2);
	page(&s, "pc.ram", 0, 0, 0, 0x11);
	u64(&s, 0x10); u8(&s, 0x7e); u32(&s, 2);
	devtail(&s);
	for (size_t step = 1; step <= s.len; step = step * 3 + 1) {
		int rc = feed_in_steps(&s, &x, step, &p);

		if (rc)
			print_error("%s\n", rdb_colo_parser_error(&p));
		assert_int_equal(rc, 0);
		assert_int_equal(x.nepochs, 1);
		assert_int_equal(x.stops, 1);
		assert_int_equal(x.pages_at_stop, 1);
		assert_int_equal(x.epochs_at_stop, 0);
		rdb_colo_parser_dispose(&p);
	}
	rdb_buf_dispose(&s);
}

static void test_truncated_checkpoint_reports_no_epoch(void **state)
{
	struct rdb_colo_parser p;
	struct rdb_buf s;
	struct seen x;

	rdb_buf_init(&s);
	initial(&s);
	checkpoint(&s, 0x33);
	s.len -= 10;	/* cut inside the device state */
	assert_int_equal(feed_in_steps(&s, &x, 7, &p), 0);
	assert_int_equal(x.nepochs, 1);	/* only the initial state */
	assert_int_equal(x.requests, 1);
	rdb_colo_parser_dispose(&p);
	rdb_buf_dispose(&s);
}

static void expect_error(struct rdb_buf *s, const char *what)
{
	struct rdb_colo_parser p;
	struct seen x;

	assert_int_equal(feed_in_steps(s, &x, 3, &p), -EPROTO);
	if (!strstr(rdb_colo_parser_error(&p), what))
		fail_msg("error '%s' lacks '%s'", rdb_colo_parser_error(&p), what);
	/* Stays failed. */
	assert_int_equal(rdb_colo_parser_feed(&p, (const uint8_t *)"x", 1), -EPROTO);
	rdb_colo_parser_dispose(&p);
}

static void test_malformed_streams(void **state)
{
	struct rdb_buf s;

	rdb_buf_init(&s);
	u32(&s, 0x12345678); u32(&s, 3); u8(&s, 7);
	expect_error(&s, "magic");

	rdb_buf_reset(&s);
	initial(&s);
	u32(&s, 9);	/* unknown COLO message */
	expect_error(&s, "unknown COLO message 9");

	rdb_buf_reset(&s);
	initial(&s);
	u32(&s, 3);	/* VMSTATE_SEND without REQUEST */
	expect_error(&s, "where 1 was expected");

	rdb_buf_reset(&s);
	initial(&s);
	u32(&s, 1); u32(&s, 3);
	u8(&s, 0x03); u32(&s, 2);
	u64(&s, 0x1000 | 0x40);	/* XBZRLE */
	expect_error(&s, "unknown flags 0x40");

	rdb_buf_reset(&s);
	initial(&s);
	u32(&s, 1); u32(&s, 3);
	u8(&s, 0x03); u32(&s, 2);
	page(&s, "vga.vram", 0, 1, 0, 0);
	expect_error(&s, "unknown block 'vga.vram'");

	rdb_buf_reset(&s);
	initial(&s);
	u32(&s, 1); u32(&s, 3);
	u8(&s, 0x03); u32(&s, 2);
	page(&s, "pc.ram", 8192, 1, 0, 0);	/* one past the end */
	expect_error(&s, "beyond block pc.ram");

	rdb_buf_reset(&s);
	initial(&s);
	u32(&s, 1); u32(&s, 3); u8(&s, 0x00);
	u32(&s, 4); u64(&s, (uint64_t)RDB_COLO_MAX_DEVSTATE + 1);
	expect_error(&s, "device state of");

	rdb_buf_reset(&s);
	u32(&s, 0x5145564d); u32(&s, 3);
	u8(&s, 0x07); u32(&s, 2); rdb_buf_append(&s, "pc", 2);
	u8(&s, 0x01); u32(&s, 5); str8(&s, "block"); u32(&s, 0); u32(&s, 1);
	expect_error(&s, "not supported (only ram)");
	rdb_buf_dispose(&s);
}

static void test_random_bytes_never_crash(void **state)
{
	struct rdb_buf good;
	unsigned seed = 7;

	rdb_buf_init(&good);
	initial(&good);
	checkpoint(&good, 1);
	for (int round = 0; round < 400; round++) {
		struct rdb_colo_parser p;
		struct rdb_buf s;
		struct seen x;

		/* A valid stream with a few bytes mutated, cut anywhere. */
		rdb_buf_init(&s);
		rdb_buf_append(&s, good.data, good.len);
		for (int k = 0; k < 1 + round % 4; k++)
			s.data[rand_r(&seed) % s.len] ^= (uint8_t)(1 + rand_r(&seed) % 255);
		s.len = (size_t)rand_r(&seed) % (s.len + 1);
		feed_in_steps(&s, &x, 1 + (size_t)(rand_r(&seed) % 64), &p);
		rdb_colo_parser_dispose(&p);
		rdb_buf_dispose(&s);
	}
	rdb_buf_dispose(&good);
}


/* ---- x-colo-mapped-ram (QEMU patch 0007) ---- */

/* The initial stream with the capability: pc.ram mapped at file offset
 * off (its fd rides on the 0x20 byte), pc.bios not. */
static void initial_mapped(struct rdb_buf *b, uint64_t off, uint8_t carrier)
{
	header(b);
	u8(b, 0x08); u16(b, 8); u16(b, 0);
	u8(b, 0x01); u32(b, 2); str8(b, "ram"); u32(b, 0); u32(b, 4);
	u64(b, (2 * 8192) | 0x04 | 0x01);
	str8(b, "pc.ram"); u64(b, 8192); u8(b, 1); u64(b, off); u8(b, carrier);
	str8(b, "pc.bios"); u64(b, 8192); u8(b, 0);
	u64(b, 0x10); u8(b, 0x7e); u32(b, 2);
	u8(b, 0x03); u32(b, 2);
	page(b, "pc.ram", 0, 0, 0, 0x11);	/* epoch 0: pages as ever */
	page(b, "pc.bios", 0, 1, 0, 0);
	u64(b, 0x10); u8(b, 0x7e); u32(b, 2);
	devtail(b);
}

/* A checkpoint whose page of blk at off is a MAPPED record. */
static void checkpoint_mapped(struct rdb_buf *b, const char *blk, uint64_t off)
{
	u32(b, 1);
	u32(b, 3);
	u8(b, 0x03); u32(b, 2);
	u64(b, off | 0x01); str8(b, blk);
	page(b, "pc.ram", 0, 1, 0, 0);		/* a ZERO record stays one */
	u64(b, 0x10); u8(b, 0x7e); u32(b, 2);
	u8(b, 0x00);
	u32(b, 4); u64(b, sizeof(DEV));
	rdb_buf_append(b, DEV, sizeof(DEV));
}

static bool fd_open(int fd) { return fcntl(fd, F_GETFD) >= 0; }

/* Feeds s in steps, the fd given before the byte it rides on (as
 * recvmsg hands it over with that byte). */
static int feed_with_fd(const struct rdb_buf *s, size_t carrier_at, int fd,
			size_t step, struct seen *x, struct rdb_colo_parser *p)
{
	int rc = 0;
	bool given = fd < 0;

	memset(x, 0, sizeof(*x));
	x->map_fd = -1;
	rdb_colo_parser_init(p, &ops, x);
	for (size_t off = 0; rc == 0 && off < s->len; ) {
		size_t n = s->len - off < step ? s->len - off : step;

		if (!given && off + n > carrier_at) {
			rc = rdb_colo_parser_take_fd(p, fd);
			given = true;
			if (rc)
				break;
		}
		rc = rdb_colo_parser_feed(p, s->data + off, n);
		off += n;
	}
	return rc;
}

static size_t carrier_offset(const struct rdb_buf *s)
{
	/* the byte after "pc.ram" used 1 off */
	const uint8_t *q = memmem(s->data, s->len, "\x06pc.ram", 7);

	assert_non_null(q);
	return (size_t)(q - s->data) + 7 + 8 + 1 + 8;
}

static void test_mapped_stream(void **state)
{
	struct rdb_buf s;

	rdb_buf_init(&s);
	initial_mapped(&s, 1 << 20, 0x20);
	checkpoint_mapped(&s, "pc.ram", 4096);
	for (size_t step = 1; step <= s.len; step = step * 3 + 1) {
		struct rdb_colo_parser p;
		struct seen x;
		int fd = memfd_create("t", MFD_CLOEXEC);

		assert_true(fd >= 0);
		assert_int_equal(s.data[carrier_offset(&s)], 0x20);
		assert_int_equal(feed_with_fd(&s, carrier_offset(&s), fd, step, &x, &p), 0);
		assert_int_equal(x.maps, 1);
		assert_int_equal(x.map_blk, 0);
		assert_int_equal(x.map_fd, fd);
		assert_int_equal(x.map_off, 1 << 20);
		assert_int_equal(x.map_len, 8192);
		assert_int_equal(x.pages_at_map, 0);	/* before any page */
		/* epoch 0's two pages as ever, then the checkpoint's: one
		 * mapped, one ZERO */
		assert_int_equal(x.pages, 3);
		assert_int_equal(x.mapped_pages, 1);
		assert_int_equal(x.mapped_blk, 0);
		assert_int_equal(x.mapped_off, 4096);
		assert_int_equal(x.nepochs, 2);
		rdb_colo_parser_dispose(&p);
		close(fd);
	}
	rdb_buf_dispose(&s);
}

static void expect_refused(const struct rdb_buf *s, int fd, const char *why)
{
	struct rdb_colo_parser p;
	struct seen x;
	size_t at = fd >= 0 ? carrier_offset(s) : 0;

	assert_int_equal(feed_with_fd(s, at, fd, 7, &x, &p), -EPROTO);
	if (!strstr(rdb_colo_parser_error(&p), why))
		fail_msg("error '%s', expected '%s'", rdb_colo_parser_error(&p), why);
	rdb_colo_parser_dispose(&p);
	/* the parser closed an fd it was given and did not hand on */
	if (fd >= 0 && x.map_fd != fd)
		assert_false(fd_open(fd));
	if (x.map_fd >= 0)
		close(x.map_fd);
}

static void test_mapped_stream_refused(void **state)
{
	struct rdb_buf s;

	/* no fd came with the mapped block */
	rdb_buf_init(&s);
	initial_mapped(&s, 0, 0x20);
	expect_refused(&s, -1, "no file descriptor came");
	rdb_buf_dispose(&s);
	/* a wrong carrier byte; an offset not page-aligned */
	rdb_buf_init(&s);
	initial_mapped(&s, 0, 0x21);
	expect_refused(&s, memfd_create("t", MFD_CLOEXEC), "carrier");
	rdb_buf_dispose(&s);
	rdb_buf_init(&s);
	initial_mapped(&s, 100, 0x20);
	expect_refused(&s, memfd_create("t", MFD_CLOEXEC), "not page-aligned");
	rdb_buf_dispose(&s);
	/* a MAPPED record for the block that is not mapped */
	rdb_buf_init(&s);
	initial_mapped(&s, 0, 0x20);
	checkpoint_mapped(&s, "pc.bios", 0);
	expect_refused(&s, memfd_create("t", MFD_CLOEXEC), "which is not mapped");
	rdb_buf_dispose(&s);
	/* beyond the block */
	rdb_buf_init(&s);
	initial_mapped(&s, 0, 0x20);
	checkpoint_mapped(&s, "pc.ram", 8192);
	expect_refused(&s, memfd_create("t", MFD_CLOEXEC), "beyond block");
	rdb_buf_dispose(&s);
	/* a MAPPED record in a stream without the capability */
	rdb_buf_init(&s);
	initial(&s);
	checkpoint_mapped(&s, "pc.ram", 0);
	expect_refused(&s, -1, "unknown flags");
	rdb_buf_dispose(&s);
	/* a MAPPED record in the initial stream (the guest runs then) */
	{
		struct rdb_colo_parser p;
		struct seen x;
		int fd = memfd_create("t", MFD_CLOEXEC);

		rdb_buf_init(&s);
		initial_mapped(&s, 0, 0x20);
		/* the first page of the END section, made MAPPED */
		uint8_t *q = memmem(s.data, s.len, "\x06pc.ram", 7);

		q = memmem(q + 7, s.len - (size_t)(q + 7 - s.data), "\x06pc.ram", 7);
		assert_non_null(q);
		q[-1] = 0x01;	/* flags PAGE 0x08 -> MAPPED 0x01 */
		s.len = (size_t)(q + 7 - s.data);	/* the page's bytes cut off */
		assert_int_equal(feed_with_fd(&s, carrier_offset(&s), fd, 5, &x, &p), -EPROTO);
		assert_non_null(strstr(rdb_colo_parser_error(&p), "in the initial stream"));
		rdb_colo_parser_dispose(&p);
		close(x.map_fd);
		rdb_buf_dispose(&s);
	}
	/* an fd passed after the blocks were set up */
	{
		struct rdb_colo_parser p;
		struct seen x;
		int fd = memfd_create("t", MFD_CLOEXEC), late = memfd_create("u", MFD_CLOEXEC);

		rdb_buf_init(&s);
		initial_mapped(&s, 0, 0x20);
		assert_int_equal(feed_with_fd(&s, carrier_offset(&s), fd, 4096, &x, &p), 0);
		assert_int_equal(rdb_colo_parser_take_fd(&p, late), -EPROTO);
		assert_false(fd_open(late));
		rdb_colo_parser_dispose(&p);
		close(x.map_fd);
		rdb_buf_dispose(&s);
	}
	/* two fds for one mapped block: the second is refused and closed */
	{
		struct rdb_colo_parser p;
		struct seen x;
		int fd = memfd_create("t", MFD_CLOEXEC), extra = memfd_create("u", MFD_CLOEXEC);

		rdb_buf_init(&s);
		initial_mapped(&s, 0, 0x20);
		memset(&x, 0, sizeof(x));
		x.map_fd = -1;
		rdb_colo_parser_init(&p, &ops, &x);
		assert_int_equal(rdb_colo_parser_take_fd(&p, fd), 0);
		assert_int_equal(rdb_colo_parser_take_fd(&p, extra), 0);
		assert_int_equal(rdb_colo_parser_feed(&p, s.data, s.len), -EPROTO);
		assert_non_null(strstr(rdb_colo_parser_error(&p), "that no block asked for"));
		rdb_colo_parser_dispose(&p);
		assert_int_equal(x.map_fd, fd);
		close(fd);
		assert_false(fd_open(extra));
		rdb_buf_dispose(&s);
	}
}


/* ---- the QEMU backend over a mapped stream: pages read from the memfd ---- */

struct bseen {
	int pages;
	uint8_t first[4096], last[4096];
};

static int b_config(void *o, const uint8_t *b, size_t n) { return 0; }
static int b_blocks(void *o, const struct rdb_ram_block *b, size_t n) { return 0; }
static int b_page(void *o, uint32_t blk, uint64_t off, const uint8_t *d, uint8_t f)
{
	struct bseen *x = o;

	if (d) {
		if (!x->pages)
			memcpy(x->first, d, 4096);
		memcpy(x->last, d, 4096);
	}
	x->pages++;
	return 0;
}
static int b_end(void *o, uint64_t e, const uint8_t *d, size_t n) { return 0; }
static int b_req(void *o, uint64_t e) { return 0; }

static const struct rdb_hv_stream_cb bcb = {
	.config = b_config, .ram_blocks = b_blocks, .page = b_page,
	.epoch_end = b_end, .checkpoint_request = b_req,
};

/* whether this process maps a memfd named name, and with which rights */
static bool mapped_as(const char *name, char perms[5])
{
	char line[512], want[64];
	FILE *f = fopen("/proc/self/maps", "r");
	bool found = false;

	snprintf(want, sizeof(want), "/memfd:%s ", name);
	assert_non_null(f);
	while (!found && fgets(line, sizeof(line), f)) {
		strcat(line, " ");
		if (strstr(line, want) || strstr(line, want + 1)) {
			sscanf(line, "%*s %4s", perms);
			found = true;
		}
	}
	fclose(f);
	return found;
}

static void test_backend_reads_mapped_pages(void **state)
{
	const struct rdb_hv_ops *hv = rdb_hv_find("qemu");
	uint8_t pat[3 * 4096];
	struct rdb_buf s;
	struct rdb_hv_stream *st;
	struct bseen x = { 0 };
	char perms[5] = "";
	int fd = memfd_create("rdbtest-guestram", MFD_CLOEXEC), rc;
	size_t at;

	assert_non_null(hv);
	assert_non_null(hv->stream_take_fd);
	for (size_t i = 0; i < sizeof(pat); i++)
		pat[i] = (uint8_t)(i / 4096 * 7 + i);
	assert_int_equal(write(fd, pat, sizeof(pat)), (ssize_t)sizeof(pat));
	rdb_buf_init(&s);
	initial_mapped(&s, 4096, 0x20);		/* pc.ram from file offset 4096 */
	checkpoint_mapped(&s, "pc.ram", 4096);
	at = carrier_offset(&s);
	assert_int_equal(hv->stream_new(&st, &bcb, &x), 0);
	assert_int_equal(hv->stream_feed(st, s.data, at), 0);
	assert_int_equal(hv->stream_take_fd(st, fd), 0);
	rc = hv->stream_feed(st, s.data + at, s.len - at);
	if (rc)
		print_error("%s\n", hv->stream_error(st));
	assert_int_equal(rc, 0);
	/* epoch 0's page came from the stream, the checkpoint's from the
	 * memfd: pc.ram's page 4096 is the file's page 2 */
	assert_int_equal(x.pages, 4);
	assert_int_equal(x.first[0], 0x11);
	assert_memory_equal(x.last, pat + 2 * 4096, 4096);
	/* mapped read-only and shared; QEMU's fd itself is closed */
	assert_true(mapped_as("rdbtest-guestram", perms));
	assert_string_equal(perms, "r--s");
	assert_false(fd_open(fd));
	hv->stream_free(st);
	assert_false(mapped_as("rdbtest-guestram", perms));

	/* a memory file too short for the block is refused at setup */
	fd = memfd_create("rdbtest-short", MFD_CLOEXEC);
	assert_int_equal(ftruncate(fd, 8192), 0);	/* 4096 + 8192 needed */
	memset(&x, 0, sizeof(x));
	assert_int_equal(hv->stream_new(&st, &bcb, &x), 0);
	assert_int_equal(hv->stream_feed(st, s.data, at), 0);
	assert_int_equal(hv->stream_take_fd(st, fd), 0);
	assert_int_equal(hv->stream_feed(st, s.data + at, s.len - at), -ERANGE);
	assert_false(fd_open(fd));
	assert_false(mapped_as("rdbtest-short", perms));
	hv->stream_free(st);
	/* a pipe is not memory */
	{
		int pp[2];

		assert_int_equal(pipe(pp), 0);
		assert_int_equal(hv->stream_new(&st, &bcb, &x), 0);
		assert_int_equal(hv->stream_feed(st, s.data, at), 0);
		assert_int_equal(hv->stream_take_fd(st, pp[0]), 0);
		assert_int_equal(hv->stream_feed(st, s.data + at, s.len - at), -EBADF);
		assert_false(fd_open(pp[0]));
		close(pp[1]);
		hv->stream_free(st);
	}
	rdb_buf_dispose(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_initial_stream_and_checkpoints_any_split),
		cmocka_unit_test(test_initial_stop_without_ram_end),
		cmocka_unit_test(test_truncated_checkpoint_reports_no_epoch),
		cmocka_unit_test(test_malformed_streams),
		cmocka_unit_test(test_random_bytes_never_crash),
		cmocka_unit_test(test_mapped_stream),
		cmocka_unit_test(test_mapped_stream_refused),
		cmocka_unit_test(test_backend_reads_mapped_pages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

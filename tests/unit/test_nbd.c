// SPDX-License-Identifier: GPL-2.0-only
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nbd.h"

/* ---- a 1 MiB in-memory disk ---- */

#define DISK (1u << 20)
static uint8_t disk[DISK];
static int fail_next;		/* make the next storage call fail */
static int flushes, trims, zeroes, fuas;

static int d_read(void *o, uint64_t off, uint32_t len, uint8_t *dst)
{
	if (fail_next) {
		fail_next = 0;
		return -EIO;
	}
	memcpy(dst, disk + off, len);
	return 0;
}

static int d_write(void *o, uint64_t off, uint32_t len, const uint8_t *src, bool fua)
{
	if (fail_next) {
		fail_next = 0;
		return -ENOSPC;
	}
	memcpy(disk + off, src, len);
	fuas += fua;
	return 0;
}

static int d_flush(void *o) { flushes++; return 0; }
static int d_trim(void *o, uint64_t off, uint32_t len) { trims++; return 0; }
static int d_zero(void *o, uint64_t off, uint32_t len, bool may_trim)
{
	memset(disk + off, 0, len);
	zeroes++;
	return 0;
}

static const struct rdb_nbd_ops ops = { d_read, d_write, d_flush, d_trim, d_zero };

/* ---- client side helpers ---- */

static void be(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static uint64_t get(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static int feed(struct rdb_nbd_server *s, const void *p, size_t n)
{
	return rdb_nbd_server_feed(s, p, n);
}

static void option(struct rdb_nbd_server *s, uint32_t opt, const void *data,
		   uint32_t len)
{
	uint8_t h[16];

	be(h, 0x49484156454F5054ULL, 8);
	be(h + 8, opt, 4);
	be(h + 12, len, 4);
	assert_int_equal(feed(s, h, 16), 0);
	if (len)
		feed(s, data, len);
}

static void request(uint8_t *r, uint16_t flags, uint16_t type, uint64_t cookie,
		    uint64_t off, uint32_t len)
{
	be(r, 0x25609513, 4);
	be(r + 4, flags, 2);
	be(r + 6, type, 2);
	be(r + 8, cookie, 8);
	be(r + 16, off, 8);
	be(r + 24, len, 4);
}

/* Session in transmission phase through NBD_OPT_GO; out emptied. */
static void start_on(struct rdb_nbd_server *s, uint64_t size,
		     const struct rdb_nbd_ops *o)
{
	uint8_t go[4 + 3 + 2 + 2], flags[4];

	assert_int_equal(rdb_nbd_server_init(s, "vm1", size, o, NULL), 0);
	assert_int_equal(s->out.len, 18);
	assert_int_equal(get(s->out.data, 8), 0x4e42444d41474943ULL);
	be(flags, 3, 4);	/* FIXED_NEWSTYLE | NO_ZEROES */
	assert_int_equal(feed(s, flags, 4), 0);
	be(go, 3, 4);
	memcpy(go + 4, "vm1", 3);
	be(go + 7, 1, 2);
	be(go + 9, 3, 2);	/* ask for BLOCK_SIZE */
	rdb_buf_reset(&s->out);
	option(s, 7, go, sizeof(go));
	assert_int_equal(s->phase, RDB_NBD_TRANSMISSION);
	/* INFO(EXPORT) 20+12, INFO(BLOCK_SIZE) 20+14, ACK 20 */
	assert_int_equal(s->out.len, 32 + 34 + 20);
	assert_int_equal(get(s->out.data + 12, 4), 3);		/* REP_INFO */
	assert_int_equal(get(s->out.data + 22, 8), size);	/* size */
	assert_int_equal(get(s->out.data + 66 + 12, 4), 1);	/* ACK */
	rdb_buf_reset(&s->out);
}

static void start(struct rdb_nbd_server *s)
{
	start_on(s, DISK, &ops);
}

static uint32_t reply_err(struct rdb_nbd_server *s, uint64_t cookie)
{
	assert_true(s->out.len >= 16);
	assert_int_equal(get(s->out.data, 4), 0x67446698);
	assert_int_equal(get(s->out.data + 8, 8), cookie);
	return (uint32_t)get(s->out.data + 4, 4);
}

static void test_write_read_flush_trim_zeroes(void **state)
{
	struct rdb_nbd_server s;
	uint8_t r[28 + 8192];

	start(&s);
	request(r, 1 /* FUA */, 1, 11, 4096, 8192);
	memset(r + 28, 0xab, 8192);
	/* split the write anywhere: nothing happens until it is whole */
	assert_int_equal(feed(&s, r, 100), 0);
	assert_int_equal(s.out.len, 0);
	assert_int_equal(feed(&s, r + 100, sizeof(r) - 100), 0);
	assert_int_equal(reply_err(&s, 11), 0);
	assert_int_equal(disk[4096], 0xab);
	assert_int_equal(fuas, 1);
	rdb_buf_reset(&s.out);
	request(r, 0, 0, 12, 8192, 4096);
	assert_int_equal(feed(&s, r, 28), 0);
	assert_int_equal(reply_err(&s, 12), 0);
	assert_int_equal(s.out.len, 16 + 4096);
	assert_int_equal(s.out.data[16], 0xab);
	rdb_buf_reset(&s.out);
	request(r, 0, 3, 13, 0, 0);
	feed(&s, r, 28);
	assert_int_equal(reply_err(&s, 13), 0);
	assert_int_equal(flushes, 1);
	rdb_buf_reset(&s.out);
	request(r, 0, 4, 14, 0, 4096);
	feed(&s, r, 28);
	assert_int_equal(reply_err(&s, 14), 0);
	assert_int_equal(trims, 1);
	rdb_buf_reset(&s.out);
	request(r, 0, 6, 15, 4096, 4096);
	feed(&s, r, 28);
	assert_int_equal(reply_err(&s, 15), 0);
	assert_int_equal(disk[4096], 0);
	rdb_buf_reset(&s.out);
	/* DISC: no reply, session over */
	request(r, 0, 2, 16, 0, 0);
	assert_int_equal(feed(&s, r, 28), 1);
	assert_int_equal(s.out.len, 0);
	rdb_nbd_server_dispose(&s);
}

static void test_bad_requests_get_errors_not_crashes(void **state)
{
	struct rdb_nbd_server s;
	uint8_t r[28];

	start(&s);
	request(r, 0, 0, 1, DISK - 4096, 8192);		/* read past the end */
	feed(&s, r, 28);
	assert_int_equal(reply_err(&s, 1), 22);
	rdb_buf_reset(&s.out);
	request(r, 0, 0, 2, UINT64_MAX - 10, 4096);	/* offset overflow */
	feed(&s, r, 28);
	assert_int_equal(reply_err(&s, 2), 22);
	rdb_buf_reset(&s.out);
	request(r, 0, 0, 3, 0, 0);			/* zero length */
	feed(&s, r, 28);
	assert_int_equal(reply_err(&s, 3), 22);
	rdb_buf_reset(&s.out);
	request(r, 0, 4, 4, DISK, 4096);		/* trim past the end */
	feed(&s, r, 28);
	assert_int_equal(reply_err(&s, 4), 28);
	rdb_buf_reset(&s.out);
	request(r, 0x80, 0, 5, 0, 4096);		/* unknown flag */
	feed(&s, r, 28);
	assert_int_equal(reply_err(&s, 5), 22);
	rdb_buf_reset(&s.out);
	request(r, 0, 42, 6, 0, 4096);			/* unknown command */
	feed(&s, r, 28);
	assert_int_equal(reply_err(&s, 6), 22);
	rdb_buf_reset(&s.out);
	fail_next = 1;					/* storage fails */
	request(r, 0, 0, 7, 0, 4096);
	feed(&s, r, 28);
	assert_int_equal(reply_err(&s, 7), 5);
	assert_int_equal(s.out.len, 16);		/* no data after an error */
	rdb_buf_reset(&s.out);
	assert_int_equal(s.errors, 7);
	/* A write too big to accept is a protocol error: close. */
	request(r, 0, 1, 8, 0, RDB_NBD_MAX_REQUEST + 1);
	assert_int_equal(feed(&s, r, 28), -EPROTO);
	assert_non_null(strstr(rdb_nbd_server_error(&s), "WRITE of"));
	rdb_nbd_server_dispose(&s);

	/* Bad magic closes too. */
	start(&s);
	request(r, 0, 0, 9, 0, 4096);
	r[0] ^= 0xff;
	assert_int_equal(feed(&s, r, 28), -EPROTO);
	rdb_nbd_server_dispose(&s);
}

static void test_options(void **state)
{
	struct rdb_nbd_server s;
	uint8_t flags[4], bad[6] = { 0, 0, 0, 9, 0, 0 };

	assert_int_equal(rdb_nbd_server_init(&s, "vm1", DISK, &ops, NULL), 0);
	be(flags, 1, 4);	/* fixed newstyle, zeroes wanted */
	feed(&s, flags, 4);
	rdb_buf_reset(&s.out);
	option(&s, 3, NULL, 0);					/* LIST */
	assert_int_equal(get(s.out.data + 12, 4), 2);		/* SERVER */
	assert_memory_equal(s.out.data + 24, "vm1", 3);
	rdb_buf_reset(&s.out);
	option(&s, 8, NULL, 0);					/* STRUCTURED */
	assert_int_equal(get(s.out.data + 12, 4), (1u << 31) | 1);	/* ERR_UNSUP */
	rdb_buf_reset(&s.out);
	option(&s, 7, bad, sizeof(bad));			/* GO, bad length */
	assert_int_equal(get(s.out.data + 12, 4), (1u << 31) | 3);	/* ERR_INVALID */
	rdb_buf_reset(&s.out);
	{
		uint8_t go[4 + 5 + 2];

		be(go, 5, 4);
		memcpy(go + 4, "other", 5);
		be(go + 9, 0, 2);
		option(&s, 7, go, sizeof(go));			/* unknown export */
		assert_int_equal(get(s.out.data + 12, 4), (1u << 31) | 6);
		assert_int_equal(s.phase, RDB_NBD_OPTIONS);
	}
	rdb_buf_reset(&s.out);
	option(&s, 1, "vm1", 3);				/* EXPORT_NAME */
	assert_int_equal(s.phase, RDB_NBD_TRANSMISSION);
	assert_int_equal(s.out.len, 8 + 2 + 124);		/* with zeroes */
	rdb_nbd_server_dispose(&s);

	/* A client without fixed newstyle is refused. */
	assert_int_equal(rdb_nbd_server_init(&s, "vm1", DISK, &ops, NULL), 0);
	be(flags, 0, 4);
	assert_int_equal(feed(&s, flags, 4), -EPROTO);
	rdb_nbd_server_dispose(&s);
	/* ABORT ends the session cleanly. */
	assert_int_equal(rdb_nbd_server_init(&s, "vm1", DISK, &ops, NULL), 0);
	be(flags, 3, 4);
	feed(&s, flags, 4);
	{
		uint8_t h[16];

		be(h, 0x49484156454F5054ULL, 8);
		be(h + 8, 2, 4);
		be(h + 12, 0, 4);
		assert_int_equal(feed(&s, h, 16), 1);
	}
	rdb_nbd_server_dispose(&s);
}

static void test_random_bytes_never_crash(void **state)
{
	unsigned seed = 3;

	for (int round = 0; round < 300; round++) {
		struct rdb_nbd_server s;
		uint8_t junk[512];

		start(&s);
		for (size_t i = 0; i < sizeof(junk); i++)
			junk[i] = (uint8_t)rand_r(&seed);
		if (round & 1)
			request(junk, 0, (uint16_t)(rand_r(&seed) % 8), 1,
				(uint64_t)rand_r(&seed) * 512, (uint32_t)rand_r(&seed) % 65536);
		feed(&s, junk, (size_t)rand_r(&seed) % sizeof(junk));
		rdb_nbd_server_dispose(&s);
	}
}

/* A big export whose TRIM and WRITE_ZEROES calls are recorded. */
#define BIG (4ULL << 30)
static struct { uint64_t off; uint32_t len; bool trim, may_trim; } calls[300];
static int ncalls, fail_call;	/* fail_call: that call (1-based) fails */

static int rec(uint64_t off, uint32_t len, bool trim, bool may_trim)
{
	assert_true(ncalls < 300);
	calls[ncalls].off = off;
	calls[ncalls].len = len;
	calls[ncalls].trim = trim;
	calls[ncalls].may_trim = may_trim;
	return ++ncalls == fail_call ? -EIO : 0;
}
static int r_trim(void *o, uint64_t off, uint32_t len) { return rec(off, len, true, true); }
static int r_zero(void *o, uint64_t off, uint32_t len, bool may_trim)
{
	return rec(off, len, false, may_trim);
}
static const struct rdb_nbd_ops rec_ops = { d_read, d_write, d_flush, r_trim, r_zero };

/*
 * TRIM and WRITE_ZEROES longer than the maximum payload (QEMU sends
 * discards up to ~2 GiB, the Linux nbd driver any length): done, in
 * pieces of at most RDB_NBD_MAX_REQUEST, in order, covering exactly the
 * range; a failed piece fails the request and stops the rest.
 */
static void test_long_trim_and_zeroes(void **state)
{
	const uint32_t M = RDB_NBD_MAX_REQUEST;
	struct rdb_nbd_server s;
	uint8_t r[28];
	uint64_t at;

	start_on(&s, BIG, &rec_ops);
	ncalls = fail_call = 0;
	request(r, 0, 4, 1, 4096, 2 * M + 8192);		/* TRIM */
	feed(&s, r, 28);
	assert_int_equal(reply_err(&s, 1), 0);
	assert_int_equal(ncalls, 3);
	at = 4096;
	for (int i = 0; i < 3; i++) {
		assert_true(calls[i].trim);
		assert_int_equal(calls[i].off, at);
		assert_int_equal(calls[i].len, i < 2 ? M : 8192);
		at += calls[i].len;
	}
	rdb_buf_reset(&s.out);
	ncalls = 0;
	request(r, 2 /* NO_HOLE */, 6, 2, 0, UINT32_MAX & ~511u);	/* WRITE_ZEROES */
	feed(&s, r, 28);
	assert_int_equal(reply_err(&s, 2), 0);
	assert_int_equal(ncalls, 128);
	at = 0;
	for (int i = 0; i < ncalls; i++) {
		assert_false(calls[i].trim);
		assert_false(calls[i].may_trim);
		assert_int_equal(calls[i].off, at);
		assert_true(calls[i].len <= M);
		at += calls[i].len;
	}
	assert_int_equal(at, UINT32_MAX & ~511u);
	rdb_buf_reset(&s.out);
	/* the second piece fails: EIO, the rest not tried */
	ncalls = 0;
	fail_call = 2;
	request(r, 0, 4, 3, 0, 3 * M);
	feed(&s, r, 28);
	assert_int_equal(reply_err(&s, 3), 5);
	assert_int_equal(ncalls, 2);
	rdb_buf_reset(&s.out);
	/* past the end: ENOSPC, nothing done */
	ncalls = fail_call = 0;
	request(r, 0, 4, 4, BIG - M, 2 * M);
	feed(&s, r, 28);
	assert_int_equal(reply_err(&s, 4), 28);
	assert_int_equal(ncalls, 0);
	rdb_nbd_server_dispose(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_read_flush_trim_zeroes),
		cmocka_unit_test(test_bad_requests_get_errors_not_crashes),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_long_trim_and_zeroes),
		cmocka_unit_test(test_random_bytes_never_crash),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

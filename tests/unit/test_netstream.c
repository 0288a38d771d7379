// SPDX-License-Identifier: GPL-2.0-only
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netstream.h"

/* Frame i is (i * 7 + k) & 0xff at offset k; sinks check every byte. */
struct frames {
	unsigned n;
	size_t lens[64];
	int bad;
};

static void pattern(uint8_t *f, unsigned i, size_t len)
{
	for (size_t k = 0; k < len; k++)
		f[k] = (uint8_t)(i * 7 + k);
}

static void on_frame(void *o, const uint8_t *f, size_t len)
{
	struct frames *s = o;

	for (size_t k = 0; k < len; k++)
		if (f[k] != (uint8_t)(s->n * 7 + k))
			s->bad++;
	assert_true(s->n < 64);
	s->lens[s->n++] = len;
}

static const size_t sizes[] = { 1, 60, 1514, 9018, 65536, RDB_NET_MAX_FRAME, 42 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* The wire image of sizes[], framed as QEMU frames it. */
static uint8_t *wire_image(size_t *n_out)
{
	size_t n = 0, off = 0;
	uint8_t *w;

	for (unsigned i = 0; i < NSIZES; i++)
		n += 4 + sizes[i];
	w = malloc(n);
	assert_non_null(w);
	for (unsigned i = 0; i < NSIZES; i++) {
		uint32_t l = (uint32_t)sizes[i];

		w[off] = (uint8_t)(l >> 24);
		w[off + 1] = (uint8_t)(l >> 16);
		w[off + 2] = (uint8_t)(l >> 8);
		w[off + 3] = (uint8_t)l;
		pattern(w + off + 4, i, l);
		off += 4 + l;
	}
	*n_out = n;
	return w;
}

static void check_all(const struct frames *s)
{
	assert_int_equal(s->n, NSIZES);
	assert_int_equal(s->bad, 0);
	for (unsigned i = 0; i < NSIZES; i++)
		assert_int_equal(s->lens[i], sizes[i]);
}

static void test_decode_one_byte_at_a_time(void **state)
{
	struct rdb_netstream ns;
	struct frames s = { 0 };
	size_t n;
	uint8_t *w = wire_image(&n);

	rdb_netstream_init(&ns);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(rdb_netstream_decode(&ns, w + i, 1, on_frame,
						      &s), 0);
	check_all(&s);
	assert_int_equal(ns.frames_in, NSIZES);
	rdb_netstream_dispose(&ns);
	free(w);
}

static void test_decode_random_splits(void **state)
{
	size_t n;
	uint8_t *w = wire_image(&n);
	unsigned seed = 7;

	for (int round = 0; round < 50; round++) {
		struct rdb_netstream ns;
		struct frames s = { 0 };
		size_t off = 0;

		rdb_netstream_init(&ns);
		while (off < n) {
			size_t step = (size_t)rand_r(&seed) % 9000 + 1;

			if (step > n - off)
				step = n - off;
			assert_int_equal(rdb_netstream_decode(&ns, w + off, step,
							      on_frame, &s), 0);
			off += step;
		}
		check_all(&s);
		rdb_netstream_dispose(&ns);
	}
	free(w);
}

static void test_bad_lengths_break_the_stream(void **state)
{
	/* a good 2-byte frame, then a length above the bound, split */
	uint8_t good_then_huge[] = { 0, 0, 0, 2, 0, 7, 0, 1 };
	uint8_t huge_rest[] = { 0x10, 0x01 };	/* 0x00011001 = MAX + 1 */
	uint8_t zero[] = { 0, 0, 0, 0 };
	uint8_t ok[] = { 0, 0, 0, 1, 0 };
	struct rdb_netstream ns;
	struct frames s = { 0 };

	_Static_assert(RDB_NET_MAX_FRAME + 1 == 0x00011001, "bound");
	rdb_netstream_init(&ns);
	assert_int_equal(rdb_netstream_decode(&ns, good_then_huge,
					      sizeof(good_then_huge),
					      on_frame, &s), 0);
	assert_int_equal(s.n, 1);	/* the good frame came out first */
	assert_int_equal(rdb_netstream_decode(&ns, huge_rest, 2, on_frame, &s),
			 -EPROTO);
	/* no resynchronising: everything is refused until reset */
	assert_int_equal(rdb_netstream_decode(&ns, ok, sizeof(ok), on_frame, &s),
			 -EPROTO);
	assert_int_equal(s.n, 1);
	rdb_netstream_reset(&ns);
	assert_int_equal(rdb_netstream_decode(&ns, zero, 4, on_frame, &s),
			 -EPROTO);
	rdb_netstream_reset(&ns);
	s.n = 0;
	assert_int_equal(rdb_netstream_decode(&ns, ok, sizeof(ok), on_frame, &s),
			 0);
	assert_int_equal(s.n, 1);
	rdb_netstream_dispose(&ns);
}

static void test_read_from_socket(void **state)
{
	struct rdb_netstream ns;
	struct frames s = { 0 };
	size_t n, off = 0;
	uint8_t *w = wire_image(&n);
	int sv[2], rc;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	rdb_netstream_init(&ns);
	assert_int_equal(rdb_netstream_read(&ns, sv[1], on_frame, &s), -EAGAIN);
	/* the writer's chunks do not follow frame boundaries */
	while (off < n) {
		size_t step = n - off < 3001 ? n - off : 3001;

		assert_int_equal(write(sv[0], w + off, step), (ssize_t)step);
		off += step;
		rc = rdb_netstream_read(&ns, sv[1], on_frame, &s);
		assert_int_equal(rc, 0);
	}
	check_all(&s);
	close(sv[0]);
	assert_int_equal(rdb_netstream_read(&ns, sv[1], on_frame, &s),
			 -ECONNRESET);
	rdb_netstream_dispose(&ns);
	close(sv[1]);
	free(w);
}

/* Fills the socket until send would block. */
static size_t stuff(int fd)
{
	static uint8_t junk[4096];
	size_t total = 0;

	for (;;) {
		ssize_t r = send(fd, junk, sizeof(junk), MSG_DONTWAIT);

		if (r < 0) {
			assert_int_equal(errno, EAGAIN);
			return total;
		}
		total += (size_t)r;
	}
}

static void test_partial_writes_keep_framing(void **state)
{
	struct rdb_netstream ns, rx;
	struct frames s = { 0 };
	uint8_t f[RDB_NET_MAX_FRAME], b[7000];
	size_t junk, skipped = 0;
	int sv[2], rc, spins = 0;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	junk = stuff(sv[0]);
	assert_true(junk > 0);
	rdb_netstream_init(&ns);
	rdb_netstream_init(&rx);
	for (unsigned i = 0; i < NSIZES; i++) {
		pattern(f, i, sizes[i]);
		assert_int_equal(rdb_netstream_queue(&ns, f, sizes[i]), 0);
	}
	/* the peer's buffer is full: nothing goes, nothing is lost */
	assert_int_equal(rdb_netstream_flush(&ns, sv[0]), -EAGAIN);
	assert_int_equal(rdb_netstream_pending(&ns),
			 4 * NSIZES + ns.bytes_out);
	/* the reader drains slowly; every flush writes what fits */
	do {
		ssize_t r = read(sv[1], b, sizeof(b));

		if (r > 0) {
			size_t k = (size_t)r, at = 0;

			if (skipped < junk) {
				at = junk - skipped < k ? junk - skipped : k;
				skipped += at;
			}
			assert_int_equal(rdb_netstream_decode(&rx, b + at, k - at,
							      on_frame, &s), 0);
		}
		rc = rdb_netstream_flush(&ns, sv[0]);
		assert_true(rc == 0 || rc == -EAGAIN);
		assert_true(++spins < 100000);
	} while (s.n < NSIZES);
	assert_int_equal(rc, 0);
	assert_int_equal(rdb_netstream_pending(&ns), 0);
	check_all(&s);
	/* a vanished peer is an error, not a signal */
	close(sv[1]);
	assert_int_equal(rdb_netstream_queue(&ns, f, 100), 0);
	rc = rdb_netstream_flush(&ns, sv[0]);
	assert_true(rc == -EPIPE || rc == -ECONNRESET);
	rdb_netstream_dispose(&ns);
	rdb_netstream_dispose(&rx);
	close(sv[0]);
}

static void test_full_queue_drops_frames(void **state)
{
	struct rdb_netstream ns;
	uint8_t f[1500];
	unsigned queued = 0;
	int rc;

	memset(f, 1, sizeof(f));
	rdb_netstream_init(&ns);
	assert_int_equal(rdb_netstream_queue(&ns, f, 0), -EINVAL);
	assert_int_equal(rdb_netstream_queue(&ns, f, RDB_NET_MAX_FRAME + 1),
			 -EINVAL);
	while ((rc = rdb_netstream_queue(&ns, f, sizeof(f))) == 0)
		queued++;
	assert_int_equal(rc, -ENOBUFS);
	assert_int_equal(queued, RDB_NET_MAX_QUEUED / 1504);
	for (int i = 0; i < 99; i++)
		assert_int_equal(rdb_netstream_queue(&ns, f, sizeof(f)),
				 -ENOBUFS);
	assert_int_equal(ns.dropped_out, 2 + 100);
	assert_int_equal(ns.dropped_out_bytes,
			 RDB_NET_MAX_FRAME + 1 + 100 * 1500);
	assert_int_equal(ns.frames_out, queued);
	assert_true(rdb_netstream_pending(&ns) <= RDB_NET_MAX_QUEUED);
	/* a new connection starts clean */
	rdb_netstream_reset(&ns);
	assert_int_equal(rdb_netstream_pending(&ns), 0);
	assert_int_equal(rdb_netstream_queue(&ns, f, sizeof(f)), 0);
	rdb_netstream_dispose(&ns);
	rdb_netstream_dispose(&ns);	/* idempotent */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_one_byte_at_a_time),
		cmocka_unit_test(test_decode_random_splits),
		cmocka_unit_test(test_bad_lengths_break_the_stream),
		cmocka_unit_test(test_read_from_socket),
		cmocka_unit_test(test_partial_writes_keep_framing),
		cmocka_unit_test(test_full_queue_drops_frames),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

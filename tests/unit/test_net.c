// SPDX-License-Identifier: GPL-2.0-only
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netbuf.h"
#include "netstream.h"

struct sink {
	int n;
	uint8_t first[32];
	size_t lens[64];
};

static void sink(void *o, const uint8_t *f, size_t len)
{
	struct sink *s = o;

	assert_true(s->n < 32);
	s->first[s->n] = f[0];
	s->lens[s->n++] = len;
}

static void test_release_only_committed_epochs_in_order(void **state)
{
	struct rdb_netbuf nb;
	struct sink s = { 0 };
	uint8_t f[100];

	rdb_netbuf_init(&nb, 0);
	for (int i = 0; i < 6; i++) {
		memset(f, i, sizeof(f));
		/* epochs 1,1,2,2,3,3 */
		assert_int_equal(rdb_netbuf_hold(&nb, 1 + i / 2, f, 60 + (size_t)i), 0);
	}
	assert_int_equal(rdb_netbuf_frames(&nb), 6);
	rdb_netbuf_release(&nb, 0, sink, &s);
	assert_int_equal(s.n, 0);	/* nothing committed yet */
	rdb_netbuf_release(&nb, 2, sink, &s);
	assert_int_equal(s.n, 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(s.first[i], i);	/* arrival order */
		assert_int_equal(s.lens[i], 60 + (size_t)i);
	}
	assert_int_equal(rdb_netbuf_frames(&nb), 2);
	assert_int_equal(rdb_netbuf_bytes(&nb), 64 + 65);
	rdb_netbuf_release(&nb, 2, sink, &s);	/* again: nothing new */
	assert_int_equal(s.n, 4);
	rdb_netbuf_release(&nb, UINT64_MAX, sink, &s);
	assert_int_equal(s.n, 6);
	assert_int_equal(rdb_netbuf_frames(&nb), 0);
	rdb_netbuf_dispose(&nb);
}

static void test_overflow_drops_new_frames_never_releases_early(void **state)
{
	struct rdb_netbuf nb;
	struct sink s = { 0 };
	uint8_t f[1000] = { 0 };

	rdb_netbuf_init(&nb, 3000);
	assert_int_equal(rdb_netbuf_hold(&nb, 5, f, sizeof(f)), 0);
	assert_int_equal(rdb_netbuf_hold(&nb, 5, f, sizeof(f)), 0);
	assert_int_equal(rdb_netbuf_hold(&nb, 5, f, sizeof(f)), -ENOBUFS);
	assert_int_equal(nb.dropped, 1);
	rdb_netbuf_release(&nb, 4, sink, &s);
	assert_int_equal(s.n, 0);
	rdb_netbuf_dispose(&nb);
}

static void frame_cb(void *o, const uint8_t *f, size_t len)
{
	sink(o, f, len);
}

static void test_stream_framing_any_split(void **state)
{
	uint8_t wire[] = { 0, 0, 0, 3, 'a', 'b', 'c', 0, 0, 0, 1, 'z' };

	for (size_t step = 1; step <= sizeof(wire); step++) {
		struct rdb_netstream ns;
		struct sink s = { 0 };

		rdb_netstream_init(&ns);
		for (size_t off = 0; off < sizeof(wire); off += step)
			assert_int_equal(rdb_netstream_decode(&ns, wire + off,
				sizeof(wire) - off < step ? sizeof(wire) - off : step,
				frame_cb, &s), 0);
		assert_int_equal(s.n, 2);
		assert_int_equal(s.first[0], 'a');
		assert_int_equal(s.lens[0], 3);
		assert_int_equal(s.first[1], 'z');
		rdb_netstream_dispose(&ns);
	}
}

static void test_stream_rejects_bad_lengths(void **state)
{
	uint8_t zero[] = { 0, 0, 0, 0 }, huge[] = { 0, 2, 0, 0 };
	struct rdb_netstream ns;
	struct sink s = { 0 };

	rdb_netstream_init(&ns);
	assert_int_equal(rdb_netstream_decode(&ns, zero, 4, frame_cb, &s), -EPROTO);
	rdb_netstream_reset(&ns);
	assert_int_equal(rdb_netstream_decode(&ns, huge, 4, frame_cb, &s), -EPROTO);
	rdb_netstream_dispose(&ns);
}

static void test_queue_to_guest_partial_writes_and_drops(void **state)
{
	struct rdb_netstream ns;
	uint8_t f[1500], b[65536];
	int sv[2], sz = 4096, rc;
	size_t got = 0;

	memset(f, 7, sizeof(f));
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	rdb_netstream_init(&ns);
	for (int i = 0; i < 100; i++)
		rdb_netstream_queue(&ns, f, sizeof(f));
	rc = rdb_netstream_flush(&ns, sv[0]);
	assert_int_equal(rc, -EAGAIN);	/* the peer is not reading */
	assert_true(rdb_netstream_pending(&ns) > 0);
	/* the reader catches up: everything arrives, framed */
	while (rdb_netstream_pending(&ns) || got < 100 * 1504) {
		ssize_t r = read(sv[1], b, sizeof(b));

		if (r > 0)
			got += (size_t)r;
		rdb_netstream_flush(&ns, sv[0]);
	}
	assert_int_equal(got, 100 * 1504);
	/* a guest that never reads makes us drop, not grow */
	for (int i = 0; i < 4000; i++)
		rdb_netstream_queue(&ns, f, sizeof(f));
	assert_true(rdb_netstream_pending(&ns) <= RDB_NET_MAX_QUEUED);
	assert_true(ns.dropped_out > 0);
	rdb_netstream_dispose(&ns);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_release_only_committed_epochs_in_order),
		cmocka_unit_test(test_overflow_drops_new_frames_never_releases_early),
		cmocka_unit_test(test_stream_framing_any_split),
		cmocka_unit_test(test_stream_rejects_bad_lengths),
		cmocka_unit_test(test_queue_to_guest_partial_writes_and_drops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

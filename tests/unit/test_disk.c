// SPDX-License-Identifier: GPL-2.0-only
/* RDB-WRAP: fdatasync pwrite */
/*
 * The disk server (disksrv.h) over a real unix socket and image file,
 * in-process: what reaches the image is what it puts in the ring (and so
 * what the backup gets), in order, before the reply; whatever of a failed
 * change reached the image is put there too; a ring that stays full makes
 * it give up on the replica within its deadline, never hold the guest.
 * Then the daemon's side (disk.h) with the server as a process of its own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "disk.h"
#include "diskring.h"
#include "disksrv.h"
#include "evloop.h"
#include "sockutil.h"

#define SIZE (8u << 20)

static char dir[64], img[128], sock[128];
static int fdatasyncs, fdatasync_errno;
static int pwrite_short;	/* next pwrite writes this much, then ENOSPC */

int __real_fdatasync(int fd);
ssize_t __real_pwrite(int fd, const void *b, size_t n, off_t off);

int __wrap_fdatasync(int fd)
{
	fdatasyncs++;
	if (fdatasync_errno) {
		errno = fdatasync_errno;
		return -1;
	}
	return __real_fdatasync(fd);
}

ssize_t __wrap_pwrite(int fd, const void *b, size_t n, off_t off)
{
	static bool failing;

	if (pwrite_short && !failing) {
		ssize_t r = __real_pwrite(fd, b, (size_t)pwrite_short < n ?
					  (size_t)pwrite_short : n, off);

		failing = true;		/* the next call (the rest) fails */
		return r;
	}
	if (failing) {
		failing = false;
		pwrite_short = 0;
		errno = ENOSPC;
		return -1;
	}
	return __real_pwrite(fd, b, n, off);
}

static struct rdb_evloop *loop;
static struct rdb_disksrv srv;
static struct rdb_dring ring;
static void *map;
static int cfd = -1, efd = -1;

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

/* Reads exactly n bytes from the client socket, running the server's
 * loop meanwhile; fails the test after 5 s. */
static void recv_all(uint8_t *b, size_t n)
{
	uint64_t deadline = rdb_now_ns() + 5 * RDB_NS_PER_S;
	size_t got = 0;

	while (got < n) {
		ssize_t r = recv(cfd, b + got, n - got, MSG_DONTWAIT);

		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		assert_true(r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
		assert_true(rdb_now_ns() < deadline);
		rdb_evloop_run_once(loop, 10 * RDB_NS_PER_MS);
	}
}

/* Sends all of b, running the server's loop (when in-process) while the
 * socket is full; fails the test after 5 s. */
static void send_all(const void *b, size_t n)
{
	uint64_t deadline = rdb_now_ns() + 5 * RDB_NS_PER_S;
	size_t put = 0;

	while (put < n) {
		ssize_t r = send(cfd, (const uint8_t *)b + put, n - put,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (r > 0) {
			put += (size_t)r;
			continue;
		}
		assert_true(r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
		assert_true(rdb_now_ns() < deadline);
		if (loop)
			rdb_evloop_run_once(loop, RDB_NS_PER_MS);
		else
			usleep(1000);
	}
}

static void request(uint16_t type, uint16_t flags, uint64_t cookie,
		    uint64_t off, uint32_t len, const uint8_t *data)
{
	uint8_t h[28];

	be(h, 0x25609513, 4);
	be(h + 4, flags, 2);
	be(h + 6, type, 2);
	be(h + 8, cookie, 8);
	be(h + 16, off, 8);
	be(h + 24, len, 4);
	send_all(h, sizeof(h));
	if (data)
		send_all(data, len);
}

static uint32_t reply(uint64_t cookie, uint8_t *data, size_t len)
{
	uint8_t r[16];

	recv_all(r, sizeof(r));
	assert_int_equal(get(r, 4), 0x67446698);
	assert_int_equal(get(r + 8, 8), cookie);
	if (get(r + 4, 4) == 0 && data)
		recv_all(data, len);
	return (uint32_t)get(r + 4, 4);
}

/* Client side of the handshake: fixed newstyle, no zeroes, EXPORT_NAME "". */
static void handshake(void)
{
	uint8_t b[152], opt[16];

	recv_all(b, 18);
	assert_memory_equal(b, "NBDMAGICIHAVEOPT", 16);
	be(b, 3, 4);
	send_all(b, 4);
	memcpy(opt, "IHAVEOPT", 8);
	be(opt + 8, 1, 4);
	be(opt + 12, 0, 4);
	send_all(opt, 16);
	recv_all(b, 10);
	assert_int_equal(get(b, 8), SIZE);
}

static void make_image(void)
{
	int fd;

	strcpy(dir, "/tmp/rdb-disk-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(img, sizeof(img), "%s/img", dir);
	snprintf(sock, sizeof(sock), "%s/sock", dir);
	fd = open(img, O_RDWR | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, SIZE), 0);
	close(fd);
}

static int setup(void **state)
{
	char err[200] = "";
	int lfd;

	(void)state;
	make_image();
	fdatasyncs = fdatasync_errno = pwrite_short = 0;
	map = calloc(1, rdb_dring_map_size(RDB_DRING_MIN));
	assert_non_null(map);
	rdb_dring_init(&ring, map, RDB_DRING_MIN);
	atomic_store(&ring.sh->record, 1);
	atomic_store(&ring.sh->room_wait_ns, 50 * RDB_NS_PER_MS);
	efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(efd >= 0);
	assert_int_equal(rdb_evloop_create(&loop), 0);
	assert_int_equal(rdb_sock_listen_unix(sock, &lfd), 0);
	assert_int_equal(rdb_disksrv_start(&srv, loop, "vmT", img, lfd, map, efd,
					   NULL, err, sizeof(err)), 0);
	assert_int_equal(srv.size, SIZE);
	assert_int_equal(rdb_sock_connect_unix(sock, rdb_now_ns() + RDB_NS_PER_S, &cfd), 0);
	handshake();
	assert_int_equal(atomic_load(&ring.sh->connected), 1);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	if (cfd >= 0)
		close(cfd);
	cfd = -1;
	rdb_disksrv_stop(&srv);
	rdb_evloop_destroy(loop);
	close(efd);
	free(map);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static void read_image(uint8_t *b, uint64_t off, size_t n)
{
	int fd = open(img, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, b, n, (off_t)off), (ssize_t)n);
	close(fd);
}

/* The next record in the ring, popped: checks op/off/len, returns the
 * first data byte (0 if none). */
static uint8_t next_rec(enum rdb_disk_op op, uint64_t off, uint32_t len)
{
	const struct rdb_dring_rec *r = rdb_dring_peek(&ring);
	uint8_t first;

	assert_non_null(r);
	assert_int_equal(r->op, op);
	assert_int_equal(r->off, off);
	assert_int_equal(r->len, len);
	first = op == RDB_DISK_WRITE && len ? ((const uint8_t *)(r + 1))[0] : 0;
	rdb_dring_pop(&ring);
	return first;
}

static void test_changes_reach_image_then_ring_then_reply(void **state)
{
	uint8_t w[4096], r[4096];
	uint64_t v;

	(void)state;
	memset(w, 0x5a, sizeof(w));
	request(1, 0, 11, 8192, sizeof(w), w);		/* WRITE */
	assert_int_equal(reply(11, NULL, 0), 0);
	/* in the ring, and remusdbd told, by the time QEMU has its reply */
	assert_int_equal(next_rec(RDB_DISK_WRITE, 8192, 4096), 0x5a);
	assert_int_equal(read(efd, &v, sizeof(v)), (ssize_t)sizeof(v));
	request(1, 1, 12, 0, 512, w);			/* WRITE + FUA */
	assert_int_equal(reply(12, NULL, 0), 0);
	request(6, 0, 13, 8192, 1024, NULL);		/* WRITE_ZEROES */
	assert_int_equal(reply(13, NULL, 0), 0);
	request(3, 0, 14, 0, 0, NULL);			/* FLUSH */
	assert_int_equal(reply(14, NULL, 0), 0);
	request(0, 0, 15, 8192, sizeof(r), NULL);	/* READ */
	assert_int_equal(reply(15, r, sizeof(r)), 0);
	assert_int_equal(r[0], 0);
	assert_int_equal(r[1023], 0);
	assert_int_equal(r[1024], 0x5a);

	assert_int_equal(next_rec(RDB_DISK_WRITE, 0, 512), 0x5a); /* the FUA write */
	next_rec(RDB_DISK_FLUSH, 0, 0);				  /* ... durable */
	next_rec(RDB_DISK_ZERO, 8192, 1024);
	next_rec(RDB_DISK_FLUSH, 0, 0);
	assert_null(rdb_dring_peek(&ring));			  /* reads: nothing */
	read_image(r, 8192, sizeof(r));
	assert_int_equal(r[0], 0);
	assert_int_equal(r[1024], 0x5a);
	assert_int_equal(atomic_load(&ring.sh->writes), 2);
	assert_int_equal(atomic_load(&ring.sh->flushes), 1);
	assert_int_equal(atomic_load(&ring.sh->errors), 0);
	/* not recording: nothing goes in */
	atomic_store(&ring.sh->record, 0);
	request(1, 0, 16, 0, 512, w);
	assert_int_equal(reply(16, NULL, 0), 0);
	assert_null(rdb_dring_peek(&ring));
}

/* A write bigger than a record travels as several, in order. */
static void test_big_write_split(void **state)
{
	uint8_t *w = malloc(3u << 20);

	(void)state;
	assert_non_null(w);
	for (size_t i = 0; i < (3u << 20); i++)
		w[i] = (uint8_t)(i >> 20) + 1;
	request(1, 0, 17, 4096, 3u << 20, w);
	assert_int_equal(reply(17, NULL, 0), 0);
	assert_int_equal(next_rec(RDB_DISK_WRITE, 4096, 1u << 20), 1);
	assert_int_equal(next_rec(RDB_DISK_WRITE, 4096 + (1u << 20), 1u << 20), 2);
	assert_int_equal(next_rec(RDB_DISK_WRITE, 4096 + (2u << 20), 1u << 20), 3);
	free(w);
}

/* The guest's flushes: fdatasync()ed before the reply unless replicated;
 * carried by the backup (no local sync, the FLUSH in the ring) if so. */
static void test_flushes_local_or_replicated(void **state)
{
	uint8_t w[512];

	(void)state;
	memset(w, 0x33, sizeof(w));
	request(3, 0, 41, 0, 0, NULL);			/* FLUSH */
	assert_int_equal(reply(41, NULL, 0), 0);
	request(1, 1, 42, 0, sizeof(w), w);		/* WRITE + FUA */
	assert_int_equal(reply(42, NULL, 0), 0);
	assert_int_equal(fdatasyncs, 2);
	atomic_store(&ring.sh->replicated, 1);
	request(3, 0, 44, 0, 0, NULL);			/* FLUSH */
	assert_int_equal(reply(44, NULL, 0), 0);
	request(1, 1, 45, 0, sizeof(w), w);		/* WRITE + FUA */
	assert_int_equal(reply(45, NULL, 0), 0);
	assert_int_equal(fdatasyncs, 2);
	next_rec(RDB_DISK_FLUSH, 0, 0);
	next_rec(RDB_DISK_WRITE, 0, 512);
	next_rec(RDB_DISK_FLUSH, 0, 0);
	next_rec(RDB_DISK_FLUSH, 0, 0);
	next_rec(RDB_DISK_WRITE, 0, 512);
	next_rec(RDB_DISK_FLUSH, 0, 0);
	assert_null(rdb_dring_peek(&ring));
}

/*
 * The image cannot be written (a full disk, an I/O error): QEMU gets an
 * error, and the replica gets what the image holds — here, unchanged.
 */
static void test_failed_write_passes_on_the_image(void **state)
{
	uint8_t w[512], r[512];
	int ro = open(img, O_RDONLY);

	(void)state;
	assert_true(ro >= 0);
	assert_true(dup2(ro, srv.img_fd) >= 0);	/* now read-only */
	close(ro);
	memset(w, 0x77, sizeof(w));
	request(1, 0, 21, 0, sizeof(w), w);
	assert_int_not_equal(reply(21, NULL, 0), 0);
	assert_int_equal(next_rec(RDB_DISK_WRITE, 0, 512), 0);	/* read back */
	assert_null(rdb_dring_peek(&ring));
	assert_int_equal(atomic_load(&ring.sh->errors), 1);
	assert_int_equal(atomic_load(&ring.sh->readbacks), 1);
	read_image(r, 0, sizeof(r));
	assert_int_equal(r[0], 0);
	/* reads still work, and a bad range is an error, not a crash */
	request(0, 0, 22, 0, sizeof(r), NULL);
	assert_int_equal(reply(22, r, sizeof(r)), 0);
	request(0, 0, 23, SIZE - 100, 512, NULL);
	assert_int_not_equal(reply(23, NULL, 0), 0);
	assert_null(rdb_dring_peek(&ring));
	assert_int_equal(atomic_load(&ring.sh->lost), RDB_DRING_OK);
}

/* A write that reached the image and whose FUA sync then failed: the
 * guest hears the error, the replica gets the write (it is in the image). */
static void test_write_whose_fua_sync_failed_is_replicated(void **state)
{
	uint8_t w[512], r[512];

	(void)state;
	memset(w, 0x44, sizeof(w));
	fdatasync_errno = EIO;
	request(1, 1, 24, 4096, sizeof(w), w);
	assert_int_not_equal(reply(24, NULL, 0), 0);
	fdatasync_errno = 0;
	read_image(r, 4096, sizeof(r));
	assert_int_equal(r[0], 0x44);
	assert_int_equal(next_rec(RDB_DISK_WRITE, 4096, 512), 0x44);
	assert_null(rdb_dring_peek(&ring));	/* no FLUSH: it did not happen */
}

/* A write that failed part way (ENOSPC after a short write): the replica
 * gets what the image holds, half new and half old. */
static void test_partial_write_is_replicated(void **state)
{
	uint8_t w[8192], r[8192];
	const struct rdb_dring_rec *rec;

	(void)state;
	memset(w, 0x66, sizeof(w));
	pwrite_short = 4096;
	request(1, 0, 25, 16384, sizeof(w), w);
	assert_int_not_equal(reply(25, NULL, 0), 0);
	read_image(r, 16384, sizeof(r));
	assert_int_equal(r[0], 0x66);
	assert_int_equal(r[4096], 0);
	rec = rdb_dring_peek(&ring);
	assert_non_null(rec);
	assert_int_equal(rec->op, RDB_DISK_WRITE);
	assert_int_equal(rec->off, 16384);
	assert_int_equal(rec->len, 8192);
	assert_memory_equal(rec + 1, r, sizeof(r));
	rdb_dring_pop(&ring);
	assert_null(rdb_dring_peek(&ring));
}

/*
 * remusdbd stops taking changes (stopped, stalled): the server waits for
 * room no longer than room_wait_ns, then gives up on the replica — says
 * so, stops recording, makes flushes local and syncs — and answers.
 */
static void test_full_ring_gives_up_within_the_deadline(void **state)
{
	uint8_t *w = calloc(1, 1u << 20);
	uint64_t t0;
	int n = 0;

	(void)state;
	assert_non_null(w);
	atomic_store(&ring.sh->replicated, 1);
	while (rdb_dring_used(&ring) + (1u << 20) + 16 <= RDB_DRING_MIN) {
		request(1, 0, 30 + n, (uint64_t)n << 20, 1u << 20, w);
		assert_int_equal(reply(30 + n, NULL, 0), 0);
		n++;
	}
	assert_int_equal(atomic_load(&ring.sh->room_waits), 0);
	fdatasyncs = 0;
	t0 = rdb_now_ns();
	request(1, 0, 99, 0, 1u << 20, w);
	assert_int_equal(reply(99, NULL, 0), 0);	/* answered, not held */
	assert_true(rdb_now_ns() - t0 >= 50 * RDB_NS_PER_MS);
	assert_true(rdb_now_ns() - t0 < 2 * RDB_NS_PER_S);
	assert_int_equal(atomic_load(&ring.sh->lost), RDB_DRING_OVERFLOW);
	assert_int_equal(atomic_load(&ring.sh->record), 0);
	assert_int_equal(atomic_load(&ring.sh->replicated), 0);
	assert_int_equal(atomic_load(&ring.sh->room_waits), 1);
	assert_int_equal(fdatasyncs, 1);		/* flushes durable here */
	request(3, 0, 100, 0, 0, NULL);
	assert_int_equal(reply(100, NULL, 0), 0);
	assert_int_equal(fdatasyncs, 2);
	free(w);
}

static void test_reconnect_replaces_client(void **state)
{
	uint8_t b[18];
	int old = cfd;

	(void)state;
	assert_int_equal(rdb_sock_connect_unix(sock, rdb_now_ns() + RDB_NS_PER_S, &cfd), 0);
	recv_all(b, 18);
	assert_memory_equal(b, "NBDMAGICIHAVEOPT", 16);
	assert_int_equal(atomic_load(&ring.sh->connects), 2);
	close(old);
}

/* ---- the daemon's side, the server a process of its own ---- */

struct change {
	enum rdb_disk_op op;
	uint64_t off, len;
	uint8_t first;
};
static struct change changes[16];
static int nchanges, nlost;
static struct rdb_disk dk;

static void hook(void *opaque, enum rdb_disk_op op, uint64_t off,
		 uint64_t len, const uint8_t *data)
{
	(void)opaque;
	assert_true(nchanges < 16);
	changes[nchanges++] = (struct change){
		.op = op, .off = off, .len = len,
		.first = op == RDB_DISK_WRITE ? data[0] : 0,
	};
}

static void lost(void *opaque, const char *why)
{
	(void)opaque;
	(void)why;
	nlost++;
}

/* Reads n bytes the server process sends; 5 s at most. */
static int read_remote(uint8_t *b, size_t n)
{
	uint64_t deadline = rdb_now_ns() + 5 * RDB_NS_PER_S;
	size_t got = 0;

	while (got < n) {
		struct pollfd p = { .fd = cfd, .events = POLLIN };
		ssize_t r;

		if (rdb_now_ns() > deadline || poll(&p, 1, 100) < 0)
			return -ETIMEDOUT;
		r = recv(cfd, b + got, n - got, MSG_DONTWAIT);
		if (r == 0)
			return -ECONNRESET;
		if (r > 0)
			got += (size_t)r;
	}
	return 0;
}

/* Like recv_all, but the server is elsewhere: only our loop runs. */
static void wait_changes(int n)
{
	uint64_t deadline = rdb_now_ns() + 5 * RDB_NS_PER_S;

	while (nchanges < n) {
		assert_true(rdb_now_ns() < deadline);
		rdb_evloop_run_once(loop, 10 * RDB_NS_PER_MS);
	}
}

static uint32_t reply_remote(uint64_t cookie)
{
	uint8_t r[16];

	assert_int_equal(read_remote(r, sizeof(r)), 0);
	assert_int_equal(get(r + 8, 8), cookie);
	return (uint32_t)get(r + 4, 4);
}

static void test_server_process(void **state)
{
	char err[300] = "";
	uint8_t w[512], b[152], opt[16];
	int status;

	(void)state;
	make_image();
	nchanges = nlost = 0;
	assert_int_equal(rdb_evloop_create(&loop), 0);
	rdb_disk_init(&dk);
	assert_int_equal(rdb_disk_open(&dk, loop, "vmP", img, sock, 4u << 20,
				       100 * RDB_NS_PER_MS, NULL, 0, NULL, hook,
				       lost, NULL, err, sizeof(err)), 0);
	assert_true(dk.pid > 0);
	assert_int_equal(rdb_sock_connect_unix(sock, rdb_now_ns() + RDB_NS_PER_S, &cfd), 0);
	assert_int_equal(read_remote(b, 18), 0);
	be(b, 3, 4);
	send_all(b, 4);
	memcpy(opt, "IHAVEOPT", 8);
	be(opt + 8, 1, 4);
	be(opt + 12, 0, 4);
	send_all(opt, 16);
	assert_int_equal(read_remote(b, 10), 0);
	assert_true(rdb_disk_connected(&dk));
	memset(w, 0x21, sizeof(w));
	/* not recording: the hook hears nothing */
	request(1, 0, 1, 0, sizeof(w), w);
	assert_int_equal(reply_remote(1), 0);
	rdb_disk_set_recording(&dk, true);
	rdb_disk_set_replicated(&dk, true);
	request(1, 0, 2, 512, sizeof(w), w);
	assert_int_equal(reply_remote(2), 0);
	request(3, 0, 3, 0, 0, NULL);
	assert_int_equal(reply_remote(3), 0);
	/* taken from the ring when asked, as at an epoch's end */
	rdb_disk_drain(&dk);
	assert_int_equal(nchanges, 2);
	assert_int_equal(changes[0].op, RDB_DISK_WRITE);
	assert_int_equal(changes[0].off, 512);
	assert_int_equal(changes[0].first, 0x21);
	assert_int_equal(changes[1].op, RDB_DISK_FLUSH);
	/* or when the server says so */
	request(6, 0, 4, 4096, 512, NULL);
	assert_int_equal(reply_remote(4), 0);
	wait_changes(3);
	assert_int_equal(changes[2].op, RDB_DISK_ZERO);
	/* replication ends: one sync here */
	fdatasyncs = 0;
	assert_int_equal(rdb_disk_set_replicated(&dk, false), 0);
	assert_int_equal(fdatasyncs, 1);
	assert_int_equal(rdb_disk_set_replicated(&dk, false), 0);
	assert_int_equal(fdatasyncs, 1);
	/* the server dies: the owner hears it */
	rdb_disk_set_recording(&dk, true);
	kill(dk.pid, SIGKILL);
	{
		uint64_t deadline = rdb_now_ns() + 5 * RDB_NS_PER_S;

		while (!nlost) {
			assert_true(rdb_now_ns() < deadline);
			rdb_evloop_run_once(loop, 10 * RDB_NS_PER_MS);
		}
	}
	/* young: not restarted */
	assert_int_equal(dk.pid, -1);
	close(cfd);
	cfd = -1;
	rdb_disk_close(&dk);
	rdb_evloop_destroy(loop);
	(void)status;
	snprintf(err, sizeof(err), "rm -rf %s", dir);
	assert_int_equal(system(err), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_changes_reach_image_then_ring_then_reply, setup, teardown),
		cmocka_unit_test_setup_teardown(test_big_write_split, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flushes_local_or_replicated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_write_passes_on_the_image, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_whose_fua_sync_failed_is_replicated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_partial_write_is_replicated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_ring_gives_up_within_the_deadline, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reconnect_replaces_client, setup, teardown),
		cmocka_unit_test(test_server_process),
	};

	/* the disk server is this program too, as it is remusdbd */
	if (argc > 1 && strcmp(argv[1], "--disk-server") == 0)
		return rdb_disksrv_main(argc - 1, argv + 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

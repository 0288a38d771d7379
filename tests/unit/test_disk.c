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
#include <sys/wait.h>
#include <unistd.h>

#include "actlog.h"
#include "clock.h"
#include "disk.h"
#include "diskring.h"
#include "disksrv.h"
#include "evloop.h"
#include "sockutil.h"
#include "wmap.h"

#define SIZE (8u << 20)
#define MIB (1u << 20)

static char dir[64], img[128], sock[128], alpath[128], wmpath[128];
static int fdatasyncs, fdatasync_errno;
static int pwrite_short;	/* next pwrite writes this much, then ENOSPC */
static struct rdb_disksrv srv;
/* the activity log as the image is written (the server in-process) */
static int log_syncs;			/* fdatasyncs of the log file */
static int img_writes, img_writes_logged;	/* ... whose extent was set */
static int log_syncs_at_img_write;
static bool record_on_at_img_write;	/* remusdbd turns it on meanwhile */

int __real_fdatasync(int fd);
ssize_t __real_pwrite(int fd, const void *b, size_t n, off_t off);

int __wrap_fdatasync(int fd)
{
	fdatasyncs++;
	if (srv.has_al && fd == srv.al.fd)
		__atomic_fetch_add(&log_syncs, 1, __ATOMIC_RELAXED);
	if (fdatasync_errno) {
		errno = fdatasync_errno;
		return -1;
	}
	return __real_fdatasync(fd);
}

/* The image is written: what does the log file say of its extent now? */
static void image_written(off_t off)
{
	struct rdb_actlog_view v;
	char err[200];

	img_writes++;
	log_syncs_at_img_write = log_syncs;
	if (rdb_actlog_read(alpath, SIZE, &v, err, sizeof(err)) == 0 &&
	    v.generation && rdb_actlog_view_test(&v, (uint64_t)off >> 20))
		img_writes_logged++;
	rdb_actlog_view_dispose(&v);
	if (record_on_at_img_write) {
		record_on_at_img_write = false;
		atomic_store(&srv.ring.sh->record, 1);
	}
}

ssize_t __wrap_pwrite(int fd, const void *b, size_t n, off_t off)
{
	static bool failing;

	if (srv.has_al && fd == srv.img_fd)
		image_written(off);

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
	snprintf(alpath, sizeof(alpath), "%s/al", dir);
	snprintf(wmpath, sizeof(wmpath), "%s/wmap", dir);
	fd = open(img, O_RDWR | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, SIZE), 0);
	close(fd);
}

static int start(const struct rdb_disk_logs *logs)
{
	char err[200] = "";
	int lfd;

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
					   logs, err, sizeof(err)), 0);
	assert_int_equal(srv.size, SIZE);
	assert_int_equal(rdb_sock_connect_unix(sock, rdb_now_ns() + RDB_NS_PER_S, &cfd), 0);
	handshake();
	assert_int_equal(atomic_load(&ring.sh->connected), 1);
	return 0;
}

static int setup(void **state)
{
	(void)state;
	make_image();
	return start(NULL);
}

/* The server keeps an activity log and a written map. */
static int setup_logs(void **state)
{
	struct rdb_disk_logs logs = {
		.activity_log = alpath,
		.activity_log_max = 4,
		.written_map = wmpath,
	};

	(void)state;
	make_image();
	log_syncs = img_writes = img_writes_logged = 0;
	record_on_at_img_write = false;
	return start(&logs);
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

/* A zeroing or trim longer than a WRITE's record (1 MiB) is one record:
 * it carries no data.  (It was refused by the ring, and the server gave
 * the replica up: a guest's discard of a few MiB dropped protection.) */
static void test_big_zeroing_is_one_record(void **state)
{
	(void)state;
	request(6, 0, 18, 1u << 20, 6u << 20, NULL);	/* WRITE_ZEROES 6 MiB */
	assert_int_equal(reply(18, NULL, 0), 0);
	request(4, 0, 19, 0, SIZE, NULL);		/* TRIM all 8 MiB */
	assert_int_equal(reply(19, NULL, 0), 0);
	next_rec(RDB_DISK_ZERO, 1u << 20, 6u << 20);
	next_rec(RDB_DISK_ZERO, 0, SIZE);
	assert_null(rdb_dring_peek(&ring));
	assert_int_equal(atomic_load(&ring.sh->lost), RDB_DRING_OK);
	assert_int_equal(atomic_load(&ring.sh->record), 1);
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

/* ---- the activity log and the written map, the server in-process ---- */

static void read_log(struct rdb_actlog_view *v)
{
	char err[200];

	assert_int_equal(rdb_actlog_read(alpath, SIZE, v, err, sizeof(err)), 0);
}

static void drop_ring(void)
{
	while (rdb_dring_peek(&ring))
		rdb_dring_pop(&ring);
}

/* Runs the server's loop until the log has retired n extents in all. */
static void wait_retired(uint64_t n)
{
	uint64_t deadline = rdb_now_ns() + 5 * RDB_NS_PER_S;

	while (atomic_load(&ring.sh->al_retired) < n) {
		assert_true(rdb_now_ns() < deadline);
		rdb_evloop_run_once(loop, 10 * RDB_NS_PER_MS);
	}
}

/*
 * Recording for generation 3: the log is armed, and each change's extents
 * set and synced, before the image is written; a change in extents set
 * costs no log write; committed, they are retired by an image sync off
 * the loop; a change while not recording invalidates the log first.  The
 * written map has every change's blocks, recording or not.
 */
static void test_activity_log(void **state)
{
	struct rdb_dring_shared *sh = ring.sh;
	struct rdb_actlog_view v;
	struct rdb_wmap m;
	struct rdb_wmap_snap snap;
	uint8_t w[4096];
	char err[200];
	int n;

	(void)state;
	memset(w, 0x11, sizeof(w));
	atomic_store(&sh->al_gen, 3);
	request(1, 0, 1, MIB + 4096, sizeof(w), w);
	assert_int_equal(reply(1, NULL, 0), 0);
	assert_int_equal(img_writes, 1);
	assert_int_equal(img_writes_logged, 1);		/* set before */
	assert_true(log_syncs_at_img_write >= 2);	/* bitmap, header */
	read_log(&v);
	assert_int_equal(v.generation, 3);
	assert_int_equal(v.nr_set, 1);
	assert_true(rdb_actlog_view_test(&v, 1));
	rdb_actlog_view_dispose(&v);
	assert_int_equal(atomic_load(&sh->al_armed_gen), 3);
	assert_int_equal(atomic_load(&sh->al_active), 1);
	assert_int_equal(atomic_load(&sh->al_adds), 1);
	next_rec(RDB_DISK_WRITE, MIB + 4096, 4096);
	/* the same extent: no log write */
	n = log_syncs;
	request(1, 0, 2, MIB + 8192, sizeof(w), w);
	assert_int_equal(reply(2, NULL, 0), 0);
	assert_int_equal(log_syncs, n);
	assert_int_equal(img_writes_logged, 2);
	/* extents 2 and 3: one log sync, before the image is written */
	request(1, 0, 3, 3 * MIB - 2048, sizeof(w), w);
	assert_int_equal(reply(3, NULL, 0), 0);
	assert_int_equal(log_syncs, n + 1);
	assert_int_equal(log_syncs_at_img_write, n + 1);
	assert_int_equal(img_writes_logged, 3);
	/* a trim is a change too */
	request(4, 0, 4, 5 * MIB, 4096, NULL);
	assert_int_equal(reply(4, NULL, 0), 0);
	read_log(&v);
	assert_int_equal(v.nr_set, 4);
	assert_true(rdb_actlog_view_test(&v, 3));
	assert_true(rdb_actlog_view_test(&v, 5));
	rdb_actlog_view_dispose(&v);
	drop_ring();
	/* the backup committed all of it: retired by a sync off the loop */
	atomic_store(&sh->committed_pos, atomic_load(&sh->head));
	wait_retired(4);
	assert_true(atomic_load(&sh->al_image_syncs) >= 1);
	assert_int_equal(atomic_load(&sh->al_active), 0);
	read_log(&v);
	assert_int_equal(v.generation, 3);
	assert_int_equal(v.nr_set, 0);
	rdb_actlog_view_dispose(&v);
	/* not recording: invalidated before the image is touched */
	atomic_store(&sh->record, 0);
	request(1, 0, 5, 0, sizeof(w), w);
	assert_int_equal(reply(5, NULL, 0), 0);
	assert_int_equal(img_writes_logged, 3);
	read_log(&v);
	assert_int_equal(v.generation, 0);
	assert_int_equal(v.dead_gen, 3);
	rdb_actlog_view_dispose(&v);
	assert_int_equal(atomic_load(&sh->al_armed_gen), 0);
	assert_int_equal(atomic_load(&sh->al_invalidations), 1);
	/* the written map: blocks 256-258 (two writes), 767-768, 1280, 0 */
	assert_int_equal(rdb_wmap_open(&m, wmpath, SIZE, false, err,
				       sizeof(err)), 0);
	assert_int_equal(rdb_wmap_snapshot(&m, &snap), 0);
	assert_int_equal(snap.nr_set, 6);
	assert_true(rdb_wmap_snap_test(&snap, 257));
	assert_true(rdb_wmap_snap_test(&snap, 258));
	assert_true(rdb_wmap_snap_test(&snap, 767));
	assert_true(rdb_wmap_snap_test(&snap, 768));
	assert_true(rdb_wmap_snap_test(&snap, 1280));
	assert_true(rdb_wmap_snap_test(&snap, 0));
	rdb_wmap_snap_dispose(&snap);
	rdb_wmap_close(&m);
}

/*
 * remusdbd turns recording on while a change is on its way to the image:
 * not logged before it (not recording then), it goes into the ring, and
 * the log takes it first (armed with its extent).
 */
static void test_activity_log_recording_starts_mid_change(void **state)
{
	struct rdb_actlog_view v;
	uint8_t w[4096];

	(void)state;
	memset(w, 0x22, sizeof(w));
	atomic_store(&ring.sh->record, 0);
	atomic_store(&ring.sh->al_gen, 5);
	record_on_at_img_write = true;
	request(1, 0, 1, 2 * MIB, sizeof(w), w);
	assert_int_equal(reply(1, NULL, 0), 0);
	assert_int_equal(img_writes_logged, 0);
	assert_int_equal(next_rec(RDB_DISK_WRITE, 2 * MIB, 4096), 0x22);
	read_log(&v);
	assert_int_equal(v.generation, 5);
	assert_true(rdb_actlog_view_test(&v, 2));
	rdb_actlog_view_dispose(&v);
}

/*
 * Full (max 4): the committed extents are retired inline; with nothing
 * committed, the log is invalidated for the generation and not armed
 * again for it; the guest's writes go on, and into the ring.
 */
static void test_activity_log_full(void **state)
{
	struct rdb_dring_shared *sh = ring.sh;
	struct rdb_actlog_view v;
	uint8_t w[512];

	(void)state;
	memset(w, 0x33, sizeof(w));
	atomic_store(&sh->al_gen, 7);
	for (int e = 0; e < 4; e++) {
		request(1, 0, 10 + e, (uint64_t)e * MIB, sizeof(w), w);
		assert_int_equal(reply(10 + e, NULL, 0), 0);
	}
	atomic_store(&sh->committed_pos, atomic_load(&sh->head));
	request(1, 0, 14, 4 * MIB, sizeof(w), w);	/* a fifth: retired */
	assert_int_equal(reply(14, NULL, 0), 0);
	assert_int_equal(atomic_load(&sh->al_full_stalls), 1);
	assert_int_equal(atomic_load(&sh->al_retired), 4);
	read_log(&v);
	assert_int_equal(v.generation, 7);
	assert_int_equal(v.nr_set, 1);
	assert_true(rdb_actlog_view_test(&v, 4));
	rdb_actlog_view_dispose(&v);
	for (int e = 5; e < 9; e++) {			/* nothing committed */
		request(1, 0, 10 + e, (uint64_t)(e % 8) * MIB, sizeof(w), w);
		assert_int_equal(reply(10 + e, NULL, 0), 0);
	}
	assert_int_equal(atomic_load(&sh->al_full_stalls), 2);
	assert_int_equal(atomic_load(&sh->al_invalidations), 1);
	assert_int_equal(atomic_load(&sh->al_armed_gen), 0);
	read_log(&v);
	assert_int_equal(v.generation, 0);
	rdb_actlog_view_dispose(&v);
	assert_int_equal(atomic_load(&sh->recorded), 9);
	assert_int_equal(atomic_load(&sh->record), 1);	/* still protected */
	assert_int_equal(atomic_load(&sh->lost), RDB_DRING_OK);
}

/*
 * The log cannot be written nor invalidated: the server gives up on the
 * replica (recording stops, `lost` says why: remusdbd drops protection)
 * and the guest's write goes on.
 */
static void test_activity_log_unwritable(void **state)
{
	struct rdb_dring_shared *sh = ring.sh;
	uint8_t w[512], r[512];
	int ro = open(alpath, O_RDONLY);

	(void)state;
	assert_true(ro >= 0);
	memset(w, 0x44, sizeof(w));
	atomic_store(&sh->al_gen, 9);
	request(1, 0, 1, 0, sizeof(w), w);
	assert_int_equal(reply(1, NULL, 0), 0);
	assert_int_equal(atomic_load(&sh->al_armed_gen), 9);
	assert_true(dup2(ro, srv.al.fd) >= 0);		/* now read-only */
	close(ro);
	request(1, 0, 2, MIB, sizeof(w), w);
	assert_int_equal(reply(2, NULL, 0), 0);
	assert_int_equal(atomic_load(&sh->lost), RDB_DRING_ACTLOG);
	assert_int_equal(atomic_load(&sh->record), 0);
	assert_int_equal(atomic_load(&sh->replicated), 0);
	read_image(r, MIB, sizeof(r));
	assert_int_equal(r[0], 0x44);
	next_rec(RDB_DISK_WRITE, 0, 512);
	assert_null(rdb_dring_peek(&ring));		/* the second: not */
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
				       100 * RDB_NS_PER_MS, NULL, hook, lost, NULL,
				       err, sizeof(err)), 0);
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

/* Connects to the server process on sock and shakes hands. */
static void connect_remote(void)
{
	uint8_t b[152], opt[16];

	assert_int_equal(rdb_sock_connect_unix(sock, rdb_now_ns() + RDB_NS_PER_S, &cfd), 0);
	assert_int_equal(read_remote(b, 18), 0);
	be(b, 3, 4);
	send_all(b, 4);
	memcpy(opt, "IHAVEOPT", 8);
	be(opt + 8, 1, 4);
	be(opt + 12, 0, 4);
	send_all(opt, 16);
	assert_int_equal(read_remote(b, 10), 0);
}

static uint64_t marked(void)
{
	struct rdb_wmap m;
	struct rdb_wmap_snap snap;
	char err[200];
	uint64_t n;

	assert_int_equal(rdb_wmap_open(&m, wmpath, SIZE, false, err,
				       sizeof(err)), 0);
	assert_int_equal(rdb_wmap_snapshot(&m, &snap), 0);
	n = snap.nr_set;
	rdb_wmap_snap_dispose(&snap);
	rdb_wmap_close(&m);
	return n;
}

/*
 * After a failover: the restored VM's server (no ring) marks a written
 * map; the server with a ring that replaces it goes on marking the same
 * map, and keeps the activity log its command line names.
 */
static void test_logs_through_processes(void **state)
{
	struct rdb_disk_logs logs = {
		.activity_log = alpath,
		.activity_log_max = 8,
		.written_map = wmpath,
	};
	struct rdb_actlog_view v;
	char err[300] = "";
	uint8_t w[4096];
	int pid, status;

	(void)state;
	make_image();
	memset(w, 0x55, sizeof(w));
	assert_int_equal(rdb_disk_serve_child("vmR", img, sock, wmpath, &pid,
					      err, sizeof(err)), 0);
	connect_remote();
	request(1, 0, 1, 10 * 4096, sizeof(w), w);
	assert_int_equal(reply_remote(1), 0);
	request(6, 0, 2, 11 * 4096 + 100, 200, NULL);	/* write-zeroes */
	assert_int_equal(reply_remote(2), 0);
	assert_int_equal(marked(), 2);
	close(cfd);
	cfd = -1;
	/* one server per image: while it runs, neither another server nor
	 * a primary's disk opens it, each saying why */
	{
		int pid2 = 0;

		assert_int_equal(rdb_disk_image_free(img, 50 * RDB_NS_PER_MS,
						     err, sizeof(err)), -EBUSY);
		assert_non_null(strstr(err, "another disk server serves it"));
		/* QEMU's own image locking (qemu-img check -U: shared locks
		 * on bytes 100.. and 200..) is not in the way */
		{
			int qfd = open(img, O_RDONLY | O_CLOEXEC);
			struct flock q = { .l_type = F_RDLCK, .l_whence = SEEK_SET,
					   .l_start = 100, .l_len = 1 };

			assert_true(qfd >= 0);
			assert_int_equal(fcntl(qfd, F_OFD_SETLK, &q), 0);
			q.l_start = 200;
			assert_int_equal(fcntl(qfd, F_OFD_SETLK, &q), 0);
			close(qfd);
		}
		assert_int_equal(rdb_disk_serve_child("vmR", img, sock, wmpath,
						      &pid2, err, sizeof(err)),
				 -EBUSY);
		assert_int_equal(rdb_evloop_create(&loop), 0);
		rdb_disk_init(&dk);
		assert_int_equal(rdb_disk_open(&dk, loop, "vmR", img, sock,
					       4u << 20, 100 * RDB_NS_PER_MS,
					       &logs, hook, lost, NULL, err,
					       sizeof(err)), -EBUSY);
		rdb_disk_close(&dk);
		rdb_evloop_destroy(loop);
		loop = NULL;
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	unlink(sock);
	/* gone: the image is free */
	assert_int_equal(rdb_disk_image_free(img, 0, err, sizeof(err)), 0);

	assert_int_equal(rdb_evloop_create(&loop), 0);
	rdb_disk_init(&dk);
	nchanges = nlost = 0;
	assert_int_equal(rdb_disk_open(&dk, loop, "vmR", img, sock, 4u << 20,
				       100 * RDB_NS_PER_MS, &logs, hook, lost,
				       NULL, err, sizeof(err)), 0);
	connect_remote();
	request(1, 0, 3, 20 * 4096, sizeof(w), w);
	assert_int_equal(reply_remote(3), 0);
	assert_int_equal(marked(), 3);			/* 10, 11 kept; 20 */
	atomic_store(&dk.ring.sh->al_gen, 4);
	rdb_disk_set_recording(&dk, true);
	request(1, 0, 4, 3 * MIB, sizeof(w), w);
	assert_int_equal(reply_remote(4), 0);
	assert_int_equal(atomic_load(&rdb_disk_stats(&dk)->al_armed_gen), 4);
	read_log(&v);
	assert_int_equal(v.generation, 4);
	assert_int_equal(v.nr_set, 1);
	assert_true(rdb_actlog_view_test(&v, 3));
	rdb_actlog_view_dispose(&v);
	assert_int_equal(marked(), 4);
	close(cfd);
	cfd = -1;
	rdb_disk_close(&dk);
	rdb_evloop_destroy(loop);
	loop = NULL;
	snprintf(err, sizeof(err), "rm -rf %s", dir);
	assert_int_equal(system(err), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_changes_reach_image_then_ring_then_reply, setup, teardown),
		cmocka_unit_test_setup_teardown(test_big_write_split, setup, teardown),
		cmocka_unit_test_setup_teardown(test_big_zeroing_is_one_record, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flushes_local_or_replicated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_write_passes_on_the_image, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_whose_fua_sync_failed_is_replicated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_partial_write_is_replicated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_ring_gives_up_within_the_deadline, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reconnect_replaces_client, setup, teardown),
		cmocka_unit_test(test_server_process),
		cmocka_unit_test_setup_teardown(test_activity_log, setup_logs, teardown),
		cmocka_unit_test_setup_teardown(test_activity_log_recording_starts_mid_change,
						setup_logs, teardown),
		cmocka_unit_test_setup_teardown(test_activity_log_full, setup_logs, teardown),
		cmocka_unit_test_setup_teardown(test_activity_log_unwritable,
						setup_logs, teardown),
		cmocka_unit_test(test_logs_through_processes),
	};

	/* the disk server is this program too, as it is remusdbd */
	if (argc > 1 && strcmp(argv[1], "--disk-server") == 0)
		return rdb_disksrv_main(argc - 1, argv + 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: GPL-2.0-only
/* RDB-WRAP: fdatasync */
/* The disk server over a real unix socket and image file: what reaches the
 * image is what the hook reports (and so what the backup gets), in order,
 * before the reply; a write that fails locally is answered with an error
 * and never reported. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "disk.h"
#include "evloop.h"
#include "sockutil.h"

#define SIZE (1u << 20)

static char dir[64], img[128], sock[128];
static int fdatasyncs, fdatasync_errno;

int __real_fdatasync(int fd);

int __wrap_fdatasync(int fd)
{
	fdatasyncs++;
	if (fdatasync_errno) {
		errno = fdatasync_errno;
		return -1;
	}
	return __real_fdatasync(fd);
}
static struct rdb_evloop *loop;
static struct rdb_disk dk;
static int cfd = -1;

struct change {
	enum rdb_disk_op op;
	uint64_t off, len;
	uint8_t first;
	bool replied_before;	/* a reply was already readable: wrong order */
};
static struct change changes[16];
static int nchanges;

static void hook(void *opaque, enum rdb_disk_op op, uint64_t off,
		 uint64_t len, const uint8_t *data)
{
	struct pollfd p = { .fd = cfd, .events = POLLIN };

	(void)opaque;
	assert_true(nchanges < 16);
	changes[nchanges++] = (struct change){
		.op = op, .off = off, .len = len, .first = data ? data[0] : 0,
		.replied_before = poll(&p, 1, 0) == 1,
	};
}

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

static void send_all(const void *b, size_t n)
{
	assert_int_equal(rdb_sock_write_all(cfd, b, n, rdb_now_ns() + RDB_NS_PER_S), 0);
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

static int setup(void **state)
{
	uint8_t b[152], opt[16];
	char err[200] = "";
	int fd;

	(void)state;
	strcpy(dir, "/tmp/rdb-disk-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(img, sizeof(img), "%s/img", dir);
	snprintf(sock, sizeof(sock), "%s/sock", dir);
	fd = open(img, O_RDWR | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, SIZE), 0);
	close(fd);
	nchanges = 0;
	assert_int_equal(rdb_evloop_create(&loop), 0);
	rdb_disk_init(&dk);
	assert_int_equal(rdb_disk_open(&dk, loop, "vmT", img, sock, hook, NULL,
				       err, sizeof(err)), 0);
	assert_int_equal(dk.size, SIZE);
	assert_int_equal(rdb_sock_connect_unix(sock, rdb_now_ns() + RDB_NS_PER_S, &cfd), 0);
	/* fixed newstyle, no zeroes, EXPORT_NAME "" */
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
	assert_true(rdb_disk_connected(&dk));
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	if (cfd >= 0)
		close(cfd);
	cfd = -1;
	rdb_disk_close(&dk);
	rdb_evloop_destroy(loop);
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

static void test_changes_reach_image_then_hook_then_reply(void **state)
{
	uint8_t w[4096], r[4096];

	(void)state;
	memset(w, 0x5a, sizeof(w));
	request(1, 0, 11, 8192, sizeof(w), w);		/* WRITE */
	assert_int_equal(reply(11, NULL, 0), 0);
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

	assert_int_equal(nchanges, 5);
	assert_int_equal(changes[0].op, RDB_DISK_WRITE);
	assert_int_equal(changes[0].off, 8192);
	assert_int_equal(changes[0].len, 4096);
	assert_int_equal(changes[0].first, 0x5a);
	assert_int_equal(changes[1].op, RDB_DISK_WRITE);	/* the FUA write ... */
	assert_int_equal(changes[2].op, RDB_DISK_FLUSH);	/* ... is durable */
	assert_int_equal(changes[3].op, RDB_DISK_ZERO);
	assert_int_equal(changes[3].len, 1024);
	assert_int_equal(changes[4].op, RDB_DISK_FLUSH);
	for (int i = 0; i < nchanges; i++)
		assert_false(changes[i].replied_before);
	read_image(r, 8192, sizeof(r));
	assert_int_equal(r[0], 0);
	assert_int_equal(r[1024], 0x5a);
	assert_int_equal(dk.writes, 2);
	assert_int_equal(dk.flushes, 1);
	assert_int_equal(dk.errors, 0);
}

/*
 * The guest's flushes: fdatasync()ed before the reply when the disk is not
 * replicated; carried by the backup (no local sync, the FLUSH still
 * reported to the hook before the reply) when it is; and the image synced
 * once when replication ends, if anything was written meanwhile.
 */
static void test_flushes_local_or_replicated(void **state)
{
	uint8_t w[512];

	(void)state;
	memset(w, 0x33, sizeof(w));
	nchanges = 0;
	fdatasyncs = 0;
	request(3, 0, 41, 0, 0, NULL);			/* FLUSH */
	assert_int_equal(reply(41, NULL, 0), 0);
	request(1, 1, 42, 0, sizeof(w), w);		/* WRITE + FUA */
	assert_int_equal(reply(42, NULL, 0), 0);
	assert_int_equal(fdatasyncs, 2);
	/* replicated: the backup's replica carries them */
	rdb_disk_set_replicated(&dk, true);
	request(1, 0, 43, 4096, sizeof(w), w);		/* WRITE */
	assert_int_equal(reply(43, NULL, 0), 0);
	request(3, 0, 44, 0, 0, NULL);			/* FLUSH */
	assert_int_equal(reply(44, NULL, 0), 0);
	request(1, 1, 45, 0, sizeof(w), w);		/* WRITE + FUA */
	assert_int_equal(reply(45, NULL, 0), 0);
	assert_int_equal(fdatasyncs, 2);
	assert_int_equal(nchanges, 3 + 4);
	assert_int_equal(changes[4].op, RDB_DISK_FLUSH);
	assert_int_equal(changes[6].op, RDB_DISK_FLUSH);
	for (int i = 0; i < nchanges; i++)
		assert_false(changes[i].replied_before);
	/* replication ends: one sync makes all of it durable here */
	assert_int_equal(rdb_disk_set_replicated(&dk, false), 0);
	assert_int_equal(fdatasyncs, 3);
	/* nothing written since: ending it again syncs nothing */
	rdb_disk_set_replicated(&dk, true);
	assert_int_equal(rdb_disk_set_replicated(&dk, false), 0);
	assert_int_equal(fdatasyncs, 3);
	/* unreplicated again: flushes are local */
	request(3, 0, 46, 0, 0, NULL);
	assert_int_equal(reply(46, NULL, 0), 0);
	assert_int_equal(fdatasyncs, 4);
	/* the sync as replication ends fails: the caller hears it (and
	 * keeps held output back), and the next flush tries again */
	rdb_disk_set_replicated(&dk, true);
	request(1, 0, 47, 8192, sizeof(w), w);
	assert_int_equal(reply(47, NULL, 0), 0);
	fdatasync_errno = EIO;
	assert_int_equal(rdb_disk_set_replicated(&dk, false), -EIO);
	request(3, 0, 48, 0, 0, NULL);
	assert_int_equal(reply(48, NULL, 0), EIO);
	fdatasync_errno = 0;
	request(3, 0, 49, 0, 0, NULL);
	assert_int_equal(reply(49, NULL, 0), 0);
	assert_int_equal(fdatasyncs, 7);
}

/* The image cannot be written (as with a full disk or an I/O error): QEMU
 * gets an error and the backup hears nothing, so the disks stay equal. */
static void test_failed_write_is_not_replicated(void **state)
{
	uint8_t w[512], r[512];
	int ro = open(img, O_RDONLY);

	(void)state;
	assert_true(ro >= 0);
	assert_true(dup2(ro, dk.img_fd) >= 0);	/* now read-only */
	close(ro);
	memset(w, 0x77, sizeof(w));
	request(1, 0, 21, 0, sizeof(w), w);
	assert_int_not_equal(reply(21, NULL, 0), 0);
	assert_int_equal(nchanges, 0);
	assert_int_equal(dk.errors, 1);
	read_image(r, 0, sizeof(r));
	assert_int_equal(r[0], 0);
	/* reads still work, and a bad range is an error, not a crash */
	request(0, 0, 22, 0, sizeof(r), NULL);
	assert_int_equal(reply(22, r, sizeof(r)), 0);
	request(0, 0, 23, SIZE - 100, 512, NULL);
	assert_int_not_equal(reply(23, NULL, 0), 0);
	assert_int_equal(nchanges, 0);
}

static void test_reconnect_replaces_client(void **state)
{
	uint8_t b[18];
	int old = cfd;

	(void)state;
	assert_int_equal(rdb_sock_connect_unix(sock, rdb_now_ns() + RDB_NS_PER_S, &cfd), 0);
	recv_all(b, 18);
	assert_memory_equal(b, "NBDMAGICIHAVEOPT", 16);
	assert_int_equal(dk.connects, 2);
	close(old);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_changes_reach_image_then_hook_then_reply, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flushes_local_or_replicated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_write_is_not_replicated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reconnect_replaces_client, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

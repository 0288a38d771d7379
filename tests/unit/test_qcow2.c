// SPDX-License-Identifier: GPL-2.0-only
/* qcow2 images as remusdbd serves them (qcow2.h): the header read, what
 * cannot be served refused, the file extended to the size it may grow
 * to before it is served (disksrv.h), backing chains followed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disksrv.h"
#include "qcow2.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/rdb-qcow2-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

/* A qcow2 v3 header (as qemu-img writes one: 64 KiB clusters) in a file
 * of file_size bytes, with a backing file name if backing. */
static void make(const char *path, uint64_t vsize, uint64_t file_size,
		 const char *backing, uint32_t crypt, uint64_t incompat)
{
	uint8_t h[512] = { 0 };
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	memcpy(h, "QFI\xfb", 4);
	put32(h + 4, 3);
	if (backing) {
		put64(h + 8, 0x200);
		put32(h + 16, (uint32_t)strlen(backing));
	}
	put32(h + 20, 16);
	put64(h + 24, vsize);
	put32(h + 32, crypt);
	put64(h + 72, incompat);
	put32(h + 96, 4);	/* refcount order */
	put32(h + 100, 104);	/* header length */
	assert_int_equal(pwrite(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	if (backing)
		assert_int_equal(pwrite(fd, backing, strlen(backing), 0x200),
				 (ssize_t)strlen(backing));
	assert_int_equal(ftruncate(fd, (off_t)file_size), 0);
	close(fd);
}

static int probe(const char *path, struct rdb_qcow2_info *q, char *err)
{
	struct stat sb;
	int fd = open(path, O_RDONLY), rc;

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	rc = rdb_qcow2_probe(fd, (uint64_t)sb.st_size, q, err, 600);
	close(fd);
	return rc;
}

static void test_probe(void **state)
{
	struct rdb_qcow2_info q;
	char p[128], err[600] = "";
	const uint64_t M = 1ull << 20;

	(void)state;
	snprintf(p, sizeof(p), "%s/a.img", dir);
	/* raw: not qcow2 (zeroes, or anything else) */
	make(p, 64 * M, 196608, NULL, 0, 0);
	assert_int_equal(truncate(p, 0), 0);
	assert_int_equal(truncate(p, 4096), 0);
	assert_int_equal(probe(p, &q, err), 0);
	/* a plain one: its virtual size, the ceiling it is served at */
	make(p, 64 * M, 196608, NULL, 0, 0);
	assert_int_equal(probe(p, &q, err), 1);
	assert_int_equal(q.version, 3);
	assert_int_equal(q.cluster_bits, 16);
	assert_int_equal(q.virtual_size, 64 * M);
	assert_string_equal(q.backing, "");
	assert_int_equal(rdb_qcow2_ceiling(&q), 129 * M);	/* 64 + 1 + 64 */
	q.virtual_size = 100 * (1ull << 30);			/* 100 GiB */
	assert_int_equal(rdb_qcow2_ceiling(&q), 100 * 1024 * M + 1600 * M + 64 * M);
	/* dirty (a crash's lazy refcounts): served, QEMU repairs it */
	make(p, 64 * M, 196608, NULL, 0, 1);
	assert_int_equal(probe(p, &q, err), 1);
	/* refused, each saying why */
	make(p, 64 * M, 196608, NULL, 1, 0);
	assert_int_equal(probe(p, &q, err), -EOPNOTSUPP);
	assert_non_null(strstr(err, "encrypted"));
	make(p, 64 * M, 196608, NULL, 0, 1ull << 2);
	assert_int_equal(probe(p, &q, err), -EOPNOTSUPP);
	assert_non_null(strstr(err, "external data file"));
	make(p, 64 * M, 196608, NULL, 0, 1ull << 1);
	assert_int_equal(probe(p, &q, err), -EINVAL);
	assert_non_null(strstr(err, "corrupt"));
	make(p, 64 * M, 196608, NULL, 0, 1ull << 9);
	assert_int_equal(probe(p, &q, err), -EOPNOTSUPP);
	make(p, 64 * M, 196608, "base.qcow2", 0, 0);
	assert_int_equal(probe(p, &q, err), -EINVAL);
	assert_non_null(strstr(err, "relative"));
	make(p, 64 * M, 130 * M, NULL, 0, 0);		/* past 129 MiB */
	assert_int_equal(probe(p, &q, err), -EFBIG);
	assert_non_null(strstr(err, "internal snapshots"));
	assert_int_equal(truncate(p, 50), 0);		/* cut short */
	assert_int_equal(probe(p, &q, err), -EINVAL);
	/* an absolute backing file name */
	make(p, 64 * M, 196608, "/srv/images/base.qcow2", 0, 0);
	assert_int_equal(probe(p, &q, err), 1);
	assert_string_equal(q.backing, "/srv/images/base.qcow2");
	/* by path: the same, and a missing file says why */
	memset(&q, 0, sizeof(q));
	assert_int_equal(rdb_qcow2_probe_path(p, &q, err, sizeof(err)), 1);
	assert_string_equal(q.backing, "/srv/images/base.qcow2");
	assert_int_equal(unlink(p), 0);
	assert_int_equal(rdb_qcow2_probe_path(p, &q, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "No such file"));
}

/* Served: the file is extended (sparse) to its ceiling first, once; a
 * raw image is left as it is; an unservable qcow2 is refused. */
static void test_open_extends(void **state)
{
	char p[128], err[600] = "";
	uint64_t size;
	struct stat sb;
	int fd;
	const uint64_t M = 1ull << 20;

	(void)state;
	snprintf(p, sizeof(p), "%s/b.img", dir);
	make(p, 64 * M, 196616, NULL, 0, 0);	/* not a multiple of 512 */
	assert_int_equal(rdb_disk_open_image(p, &fd, &size, err, sizeof(err)), 0);
	close(fd);
	assert_int_equal(size, 129 * M);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal((uint64_t)sb.st_size, 129 * M);
	assert_true((uint64_t)sb.st_blocks * 512 < 1 * M);	/* sparse */
	assert_int_equal(rdb_disk_open_image(p, &fd, &size, err, sizeof(err)), 0);
	close(fd);
	assert_int_equal(size, 129 * M);			/* not again */
	/* raw */
	assert_int_equal(truncate(p, 0), 0);
	assert_int_equal(truncate(p, 8 * M), 0);
	assert_int_equal(rdb_disk_open_image(p, &fd, &size, err, sizeof(err)), 0);
	close(fd);
	assert_int_equal(size, 8 * M);
	make(p, 64 * M, 196608, NULL, 1, 0);
	assert_int_equal(rdb_disk_open_image(p, &fd, &size, err, sizeof(err)),
			 -EOPNOTSUPP);
	assert_non_null(strstr(err, p));
	assert_non_null(strstr(err, "encrypted"));
}

static void test_backing_chain(void **state)
{
	char a[128], b[128], c[128], chain[RDB_QCOW2_CHAIN_MAX][512];
	char err[600] = "";
	unsigned n = 99;
	const uint64_t M = 1ull << 20;

	(void)state;
	snprintf(a, sizeof(a), "%s/top.qcow2", dir);
	snprintf(b, sizeof(b), "%s/mid.qcow2", dir);
	snprintf(c, sizeof(c), "%s/base.raw", dir);
	make(a, 64 * M, 196608, b, 0, 0);
	make(b, 64 * M, 196608, c, 0, 0);
	{
		int fd = open(c, O_RDWR | O_CREAT | O_TRUNC, 0644);

		assert_true(fd >= 0);
		assert_int_equal(ftruncate(fd, (off_t)(64 * M)), 0);
		close(fd);	/* raw: the chain ends */
	}
	assert_int_equal(rdb_qcow2_backing_chain(a, chain, RDB_QCOW2_CHAIN_MAX,
						 &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	assert_string_equal(chain[0], b);
	assert_string_equal(chain[1], c);
	/* no backing, or raw: none */
	assert_int_equal(rdb_qcow2_backing_chain(c, chain, RDB_QCOW2_CHAIN_MAX,
						 &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	/* a missing backing file, a loop */
	assert_int_equal(unlink(c), 0);
	assert_int_equal(rdb_qcow2_backing_chain(a, chain, RDB_QCOW2_CHAIN_MAX,
						 &n, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, c));
	make(b, 64 * M, 196608, a, 0, 0);
	assert_int_equal(rdb_qcow2_backing_chain(a, chain, RDB_QCOW2_CHAIN_MAX,
						 &n, err, sizeof(err)), -E2BIG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_probe, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_extends, setup, teardown),
		cmocka_unit_test_setup_teardown(test_backing_chain, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

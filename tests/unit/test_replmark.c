// SPDX-License-Identifier: GPL-2.0-only
/*
 * The replica marker (replmark.h): a record round-trips as applying,
 * done and served; only done, of this boot, of the protection asked and
 * at or past the epoch asked vouches for the replicas; a record of
 * another boot, a missing, short, torn or foreign one vouches for
 * nothing; a process killed inside an epoch's writes leaves applying;
 * and a record that cannot be written leaves no file rather than an old
 * done.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "replmark.h"

#define G 0x0123456789abcdefull

static char dir[64], path[128];

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/rdb-replmark-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, RDB_REPLMARK_FILE);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static void put_file(const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
}

static bool vouches(uint64_t gen, uint64_t min_epoch, char *why, size_t len)
{
	struct rdb_replmark_view v;

	rdb_replmark_read(path, &v);
	return rdb_replmark_vouches(&v, gen, min_epoch, why, len);
}

static void test_round_trip(void **state)
{
	struct rdb_replmark m;
	struct rdb_replmark_view v;
	char why[700], boot[40];
	struct stat sb;

	(void)state;
	assert_int_equal(rdb_replmark_boot_id(boot, sizeof(boot)), 0);
	rdb_replmark_init(&m);
	assert_int_equal(rdb_replmark_open(&m, path), 0);
	/* what was there before: nothing */
	assert_false(m.found.valid);
	assert_non_null(strstr(m.found.why, "no replica marker"));

	/* a new protection's replicas, made or kept: its initial copy */
	assert_int_equal(rdb_replmark_applying(&m, 0, 0), 0);
	assert_false(vouches(0, 0, why, sizeof(why)));
	assert_non_null(strstr(why, "initial copy"));

	/* applying: valid, this boot, not done, vouches for nothing */
	assert_int_equal(rdb_replmark_applying(&m, G, 5), 0);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, RDB_REPLMARK_LEN);
	assert_int_equal(rdb_replmark_read(path, &v), 0);
	assert_true(v.valid);
	assert_true(v.same_boot);
	assert_false(v.done);
	assert_int_equal(v.state, RDB_REPLMARK_APPLYING);
	assert_true(v.gen == G);
	assert_int_equal(v.epoch, 5);
	assert_string_equal(v.boot, boot);
	assert_false(rdb_replmark_vouches(&v, G, 5, why, sizeof(why)));
	assert_non_null(strstr(why, "being written"));
	assert_non_null(strstr(why, "epoch 5"));

	/* done: vouches for that protection, at or before that epoch */
	assert_int_equal(rdb_replmark_done(&m, G, 5), 0);
	assert_int_equal(rdb_replmark_read(path, &v), 0);
	assert_true(v.done);
	assert_int_equal(v.state, RDB_REPLMARK_DONE);
	assert_true(rdb_replmark_vouches(&v, G, 5, why, sizeof(why)));
	assert_true(rdb_replmark_vouches(&v, G, 0, why, sizeof(why)));
	assert_false(rdb_replmark_vouches(&v, G, 6, why, sizeof(why)));
	assert_non_null(strstr(why, "before epoch 6"));
	assert_false(rdb_replmark_vouches(&v, G + 1, 5, why, sizeof(why)));
	assert_non_null(strstr(why, "not of"));

	/* the text as documented, one record padded to its length */
	{
		char rec[RDB_REPLMARK_LEN + 1] = "", head[200];
		int fd = open(path, O_RDONLY);

		assert_int_equal(read(fd, rec, RDB_REPLMARK_LEN), RDB_REPLMARK_LEN);
		close(fd);
		snprintf(head, sizeof(head), "RDBRMARK 1 %s 0123456789abcdef 5 done ",
			 boot);
		assert_memory_equal(rec, head, strlen(head));
		assert_int_equal(rec[RDB_REPLMARK_LEN - 2], ' ');
		assert_int_equal(rec[RDB_REPLMARK_LEN - 1], '\n');
	}

	/* a daemon that opens it again finds done (a restart in this boot) */
	rdb_replmark_close(&m);
	assert_int_equal(rdb_replmark_open(&m, path), 0);
	assert_true(m.found.valid && m.found.same_boot && m.found.done);
	assert_int_equal(m.found.epoch, 5);
	/* opening writes nothing */
	assert_true(vouches(G, 5, why, sizeof(why)));

	/* served: a restored guest's, never a base */
	assert_int_equal(rdb_replmark_served(&m, G, 5), 0);
	assert_false(vouches(G, 5, why, sizeof(why)));
	assert_non_null(strstr(why, "restored"));
	rdb_replmark_close(&m);
	rdb_replmark_close(&m);		/* idempotent */
}

/* A record of another boot: the host crashed since, and what reached
 * its disk of the replicas or of the record is anyone's guess. */
static void test_other_boot(void **state)
{
	struct rdb_replmark m;
	struct rdb_replmark_view v;
	char why[700];

	(void)state;
	rdb_replmark_init(&m);
	assert_int_equal(rdb_replmark_open(&m, path), 0);
	snprintf(m.boot, sizeof(m.boot), "00000000-1111-2222-3333-444444444444");
	assert_int_equal(rdb_replmark_done(&m, G, 9), 0);
	rdb_replmark_close(&m);
	assert_int_equal(rdb_replmark_read(path, &v), 0);
	assert_true(v.valid);
	assert_true(v.done);
	assert_false(v.same_boot);
	assert_false(rdb_replmark_vouches(&v, G, 9, why, sizeof(why)));
	assert_non_null(strstr(why, "another boot"));
}

static void test_malformed(void **state)
{
	struct rdb_replmark_view v;
	char rec[RDB_REPLMARK_LEN], good[RDB_REPLMARK_LEN], boot[40], why[700];
	struct rdb_replmark m;
	int n;

	(void)state;
	/* missing */
	assert_int_equal(rdb_replmark_read(path, &v), -ENOENT);
	assert_false(v.valid);
	assert_false(rdb_replmark_vouches(&v, G, 0, why, sizeof(why)));
	assert_non_null(strstr(why, "no replica marker"));

	/* a good record, as a reference */
	assert_int_equal(rdb_replmark_boot_id(boot, sizeof(boot)), 0);
	n = snprintf(good, sizeof(good), "RDBRMARK 1 %s %016llx 3 done", boot,
		     (unsigned long long)G);
	memset(good + n, ' ', sizeof(good) - (size_t)n);
	good[RDB_REPLMARK_LEN - 1] = '\n';
	put_file(good, sizeof(good));
	assert_int_equal(rdb_replmark_read(path, &v), 0);
	assert_true(v.valid && v.done && v.same_boot);

	/* short (a crash left the file empty, or half of it) */
	put_file(good, 0);
	assert_int_equal(rdb_replmark_read(path, &v), -EBADMSG);
	assert_false(v.valid);
	assert_non_null(strstr(v.why, "malformed"));
	put_file(good, 100);
	assert_int_equal(rdb_replmark_read(path, &v), -EBADMSG);
	/* longer than one record */
	{
		char two[2 * RDB_REPLMARK_LEN];

		memcpy(two, good, sizeof(good));
		memcpy(two + sizeof(good), good, sizeof(good));
		put_file(two, sizeof(two));
		assert_int_equal(rdb_replmark_read(path, &v), -EBADMSG);
	}
	/* zeroes (written back as a hole) */
	memset(rec, 0, sizeof(rec));
	put_file(rec, sizeof(rec));
	assert_int_equal(rdb_replmark_read(path, &v), -EBADMSG);
	/* each of: another magic, version, state, a gen not 16 digits,
	 * a doubled space, junk in the padding, no newline at its end */
	{
		static const struct { const char *from, *to; } edits[] = {
			{ "RDBRMARK", "RDBXMARK" },
			{ "RDBRMARK 1", "RDBRMARK 2" },
			{ " done", " dome" },
			{ " 0123456789abcdef", " 123456789abcdef " },
			{ " 3 done", " 3  don" },
			{ "done ", "done x" },
		};

		for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
			char *at;

			memcpy(rec, good, sizeof(rec));
			at = memmem(rec, sizeof(rec), edits[i].from,
				    strlen(edits[i].from));
			assert_non_null(at);
			memcpy(at, edits[i].to, strlen(edits[i].to));
			put_file(rec, sizeof(rec));
			assert_int_equal(rdb_replmark_read(path, &v), -EBADMSG);
			assert_false(rdb_replmark_vouches(&v, G, 0, why, sizeof(why)));
			assert_non_null(strstr(why, "malformed"));
		}
		memcpy(rec, good, sizeof(rec));
		rec[RDB_REPLMARK_LEN - 1] = ' ';
		put_file(rec, sizeof(rec));
		assert_int_equal(rdb_replmark_read(path, &v), -EBADMSG);
	}
	/* a newer record's start over an older one's end: not either */
	{
		char newer[RDB_REPLMARK_LEN];

		n = snprintf(newer, sizeof(newer), "RDBRMARK 1 %s %016llx 12345678 "
			     "applying", boot, (unsigned long long)G);
		memset(newer + n, ' ', sizeof(newer) - (size_t)n);
		memcpy(rec, good, sizeof(rec));
		memcpy(rec, newer, 70);
		put_file(rec, sizeof(rec));
		assert_int_equal(rdb_replmark_read(path, &v), -EBADMSG);
	}

	/* a longer file is cut to one record when opened for writing, and
	 * read as what it was before */
	{
		char two[2 * RDB_REPLMARK_LEN];
		struct stat sb;

		memcpy(two, good, sizeof(good));
		memcpy(two + sizeof(good), good, sizeof(good));
		put_file(two, sizeof(two));
		rdb_replmark_init(&m);
		assert_int_equal(rdb_replmark_open(&m, path), 0);
		assert_false(m.found.valid);
		assert_int_equal(stat(path, &sb), 0);
		assert_int_equal(sb.st_size, RDB_REPLMARK_LEN);
		assert_int_equal(rdb_replmark_applying(&m, G, 0), 0);
		assert_int_equal(rdb_replmark_read(path, &v), 0);
		rdb_replmark_close(&m);
	}
}

/* A daemon killed (SIGKILL) inside an epoch's writes: the record says
 * applying, not the done before; killed after done: done. */
static void killed_after(int steps, struct rdb_replmark_view *v)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		struct rdb_replmark m;
		char replica[160];
		int fd;

		snprintf(replica, sizeof(replica), "%s/disk.img", dir);
		fd = open(replica, O_RDWR | O_CREAT, 0600);
		rdb_replmark_init(&m);
		if (fd < 0 || rdb_replmark_open(&m, path) < 0 ||
		    rdb_replmark_applying(&m, G, 1) != 0 ||
		    pwrite(fd, "epoch 1", 7, 0) != 7 ||
		    rdb_replmark_done(&m, G, 1) != 0)
			_exit(1);
		if (steps >= 2 && (rdb_replmark_applying(&m, G, 2) != 0 ||
				   pwrite(fd, "epoch 2", 7, 4096) != 7))
			_exit(1);
		if (steps >= 3 && rdb_replmark_done(&m, G, 2) != 0)
			_exit(1);
		raise(SIGKILL);
		_exit(2);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
	assert_int_equal(rdb_replmark_read(path, v), 0);
}

static void test_killed(void **state)
{
	struct rdb_replmark_view v;
	char why[700];

	(void)state;
	killed_after(2, &v);
	assert_true(v.valid && v.same_boot);
	assert_false(v.done);
	assert_int_equal(v.epoch, 2);
	assert_false(rdb_replmark_vouches(&v, G, 1, why, sizeof(why)));
	assert_non_null(strstr(why, "being written when remusdbd stopped"));

	killed_after(3, &v);
	assert_true(v.done);
	assert_int_equal(v.epoch, 2);
	assert_true(rdb_replmark_vouches(&v, G, 1, why, sizeof(why)));

	killed_after(1, &v);
	assert_true(v.done);
	assert_int_equal(v.epoch, 1);
}

/* A record that cannot be written: the file goes (it claims nothing);
 * one that cannot be removed either: the caller is told not to write. */
static void test_write_fails(void **state)
{
	struct rdb_replmark m;
	struct rdb_replmark_view v;
	struct stat sb;
	int ro;

	(void)state;
	rdb_replmark_init(&m);
	assert_int_equal(rdb_replmark_open(&m, path), 0);
	assert_int_equal(rdb_replmark_done(&m, G, 4), 0);
	/* its descriptor read-only: every pwrite fails */
	ro = open(path, O_RDONLY);
	assert_true(ro >= 0);
	assert_int_equal(dup2(ro, m.fd), m.fd);
	close(ro);
	assert_int_equal(rdb_replmark_applying(&m, G, 5), 1);
	assert_true(m.dead);
	assert_non_null(strstr(m.err, "applying"));
	assert_int_equal(stat(path, &sb), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(rdb_replmark_read(path, &v), -ENOENT);
	/* dead: nothing written any more, quietly */
	assert_int_equal(rdb_replmark_applying(&m, G, 6), 0);
	assert_int_equal(rdb_replmark_done(&m, G, 6), 0);
	assert_int_equal(stat(path, &sb), -1);
	rdb_replmark_close(&m);

	/* a done whose write fails: what is left says applying, or nothing */
	rdb_replmark_init(&m);
	assert_int_equal(rdb_replmark_open(&m, path), 0);
	assert_int_equal(rdb_replmark_applying(&m, G, 7), 0);
	ro = open(path, O_RDONLY);
	assert_int_equal(dup2(ro, m.fd), m.fd);
	close(ro);
	assert_true(rdb_replmark_done(&m, G, 7) < 0);
	assert_true(m.dead);
	assert_int_equal(rdb_replmark_read(path, &v), -ENOENT);
	rdb_replmark_close(&m);

	/* neither written nor removed (a directory in its place): < 0 */
	rdb_replmark_init(&m);
	assert_int_equal(rdb_replmark_open(&m, path), 0);
	ro = open(path, O_RDONLY);
	assert_int_equal(dup2(ro, m.fd), m.fd);
	close(ro);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_true(rdb_replmark_applying(&m, G, 8) < 0);
	assert_non_null(strstr(m.err, "cannot be removed"));
	assert_true(rdb_replmark_served(&m, G, 8) < 0);
	rdb_replmark_close(&m);
	assert_int_equal(rmdir(path), 0);

	/* never opened: an error, not a silent success */
	rdb_replmark_init(&m);
	assert_int_equal(rdb_replmark_applying(&m, G, 0), -EBADF);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_boot, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_killed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_fails, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

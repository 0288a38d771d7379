// SPDX-License-Identifier: GPL-2.0-only
/* The log's lines: under journald (stderr is the stream JOURNAL_STREAM
 * names) each starts with its syslog priority and carries no time of its
 * own; anywhere else (a terminal, a file, the tests' logs) the line is as
 * it always was, time first.  stderr is a file here, its dev:inode put in
 * JOURNAL_STREAM as systemd would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RDB_COMPONENT "unit"
#include "log.h"

enum stream { NO_VAR, THIS_FILE, OTHER_FILE, BAD_VAR };

/* The four levels logged with stderr on a fresh file and JOURNAL_STREAM
 * as s says, then a line a program prints itself as it exits (main.c's
 * startup errors); what reached the file is in out. */
static void logged(enum stream s, char *out, size_t outlen)
{
	char path[] = "/tmp/rdb-test-log-XXXXXX";
	char other[] = "/tmp/rdb-test-log-other-XXXXXX";
	int fd = mkstemp(path), ofd = mkstemp(other), saved;
	char var[64];
	struct stat st;
	ssize_t n;

	assert_true(fd >= 0 && ofd >= 0);
	assert_int_equal(fstat(s == OTHER_FILE ? ofd : fd, &st), 0);
	snprintf(var, sizeof(var), "%llu:%llu%s", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino, s == BAD_VAR ? "x" : "");
	if (s == NO_VAR)
		unsetenv("JOURNAL_STREAM");
	else
		setenv("JOURNAL_STREAM", var, 1);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_true(dup2(fd, STDERR_FILENO) >= 0);
	rdb_log_setup("logtest", RDB_LOG_DEBUG);
	LOGVM(ERROR, "vm1", "ALARM: epoch %d has waited %d ms", 17, 5000);
	LOGVM(WARN, "vm1", "state %s", "deciding");
	LOG(INFO, "listening on %s", "0.0.0.0:7788");
	LOG(DEBUG, "heartbeat");
	fprintf(stderr, "%slogtest: no key\n", rdb_log_journal_prefix(RDB_LOG_ERROR));
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	unsetenv("JOURNAL_STREAM");
	rdb_log_setup("logtest", RDB_LOG_INFO);
	n = pread(fd, out, outlen - 1, 0);
	assert_true(n >= 0);
	out[n] = 0;
	close(fd);
	close(ofd);
	unlink(path);
	unlink(other);
}

static void test_journal_lines_carry_priority(void **state)
{
	char out[2048], want[2048];
	int pid = (int)getpid();

	logged(THIS_FILE, out, sizeof(out));
	snprintf(want, sizeof(want),
		 "<3>logtest[%d] ERROR unit vm=vm1: ALARM: epoch 17 has waited 5000 ms\n"
		 "<4>logtest[%d] WARN unit vm=vm1: state deciding\n"
		 "<6>logtest[%d] INFO unit: listening on 0.0.0.0:7788\n"
		 "<7>logtest[%d] DEBUG unit: heartbeat\n"
		 "<3>logtest: no key\n", pid, pid, pid, pid);
	assert_string_equal(out, want);
}

/* "2026-11-22T12:00:00.123Z " and then exactly rest */
static void stamped(const char *line, const char *rest)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ ";

	for (size_t i = 0; i < sizeof(shape) - 1; i++) {
		if (shape[i] == 'd' ? line[i] < '0' || line[i] > '9' : line[i] != shape[i])
			fail_msg("no time stamp at %zu in \"%s\"", i, line);
	}
	assert_string_equal(line + sizeof(shape) - 1, rest);
}

static void check_plain(enum stream s)
{
	char out[2048], want[256], *line, *save = NULL;
	int pid = (int)getpid(), i = 0;
	const char *rest[] = {
		"logtest[%d] ERROR unit vm=vm1: ALARM: epoch 17 has waited 5000 ms",
		"logtest[%d] WARN unit vm=vm1: state deciding",
		"logtest[%d] INFO unit: listening on 0.0.0.0:7788",
		"logtest[%d] DEBUG unit: heartbeat",
	};

	logged(s, out, sizeof(out));
	assert_true(out[0] && out[strlen(out) - 1] == '\n');
	line = strtok_r(out, "\n", &save);
	for (; line && i < 4; line = strtok_r(NULL, "\n", &save)) {
		snprintf(want, sizeof(want), rest[i++], pid);
		stamped(line, want);
	}
	assert_int_equal(i, 4);
	/* the program's own line as it printed it */
	assert_non_null(line);
	assert_string_equal(line, "logtest: no key");
	assert_null(strtok_r(NULL, "\n", &save));
}

/* a terminal, a file, a pipe: no JOURNAL_STREAM at all */
static void test_plain_without_journal(void **state)
{
	check_plain(NO_VAR);
}

/* under systemd, but stderr redirected elsewhere: the variable is
 * inherited and names the journal's stream, not this file */
static void test_plain_when_stream_is_another_file(void **state)
{
	check_plain(OTHER_FILE);
}

static void test_plain_when_variable_is_malformed(void **state)
{
	check_plain(BAD_VAR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_journal_lines_carry_priority),
		cmocka_unit_test(test_plain_without_journal),
		cmocka_unit_test(test_plain_when_stream_is_another_file),
		cmocka_unit_test(test_plain_when_variable_is_malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

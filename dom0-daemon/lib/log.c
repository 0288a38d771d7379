// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "log"
#include "log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *log_ident = "remusdb";
static enum rdb_log_level log_min = RDB_LOG_INFO;
/* stderr is journald's stream: it stamps each line itself, and reads a
 * line's priority from a leading <N> (sd-daemon(3)) */
static bool log_journal;

static const char *const level_names[RDB_LOG__MAX] = {
	[RDB_LOG_DEBUG] = "DEBUG",
	[RDB_LOG_INFO] = "INFO",
	[RDB_LOG_WARN] = "WARN",
	[RDB_LOG_ERROR] = "ERROR",
};

/* syslog's priorities: alarms are logged as ERROR, so they are <3> */
static const char *const level_prefix[RDB_LOG__MAX] = {
	[RDB_LOG_DEBUG] = "<7>",
	[RDB_LOG_INFO] = "<6>",
	[RDB_LOG_WARN] = "<4>",
	[RDB_LOG_ERROR] = "<3>",
};

/*
 * As systemd.exec(5) says to: JOURNAL_STREAM holds "DEVICE:INODE" of the
 * stream systemd connected stdout and stderr to; stderr is that stream
 * only if its fstat says the same.  A redirection (2>file, a pipe) leaves
 * the variable set but names another file.
 */
static bool stderr_is_journal(void)
{
	const char *v = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	int end = 0;

	if (!v || sscanf(v, "%llu:%llu%n", &dev, &ino, &end) != 2 || v[end])
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

void rdb_log_setup(const char *ident, enum rdb_log_level min_level)
{
	log_ident = ident;
	log_min = min_level;
	log_journal = stderr_is_journal();
}

int rdb_log_level_parse(const char *s, enum rdb_log_level *level_out)
{
	for (int i = 0; i < RDB_LOG__MAX; i++) {
		if (strcasecmp(s, level_names[i]) == 0) {
			*level_out = i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *rdb_log_journal_prefix(enum rdb_log_level level)
{
	return log_journal && level < RDB_LOG__MAX ? level_prefix[level] : "";
}

void rdb_log_write(enum rdb_log_level level, const char *component,
		   const char *vm, const char *fmt, ...)
{
	char msg[1024], stamp[32], head[64];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int saved = errno;

	if (level < log_min || level >= RDB_LOG__MAX)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log_journal) {
		snprintf(head, sizeof(head), "%s", level_prefix[level]);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(head, sizeof(head), "%s.%03ldZ ", stamp,
			 ts.tv_nsec / 1000000);
	}
	/* One fprintf per line: lines from threads do not interleave. */
	if (vm)
		fprintf(stderr, "%s%s[%d] %s %s vm=%s: %s\n", head, log_ident,
			(int)getpid(), level_names[level], component, vm, msg);
	else
		fprintf(stderr, "%s%s[%d] %s %s: %s\n", head, log_ident,
			(int)getpid(), level_names[level], component, msg);
	errno = saved;
}

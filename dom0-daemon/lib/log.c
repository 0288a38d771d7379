// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "log"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static const char *log_ident = "remusdb";
static enum rdb_log_level log_min = RDB_LOG_INFO;

static const char *const level_names[RDB_LOG__MAX] = {
	[RDB_LOG_DEBUG] = "DEBUG",
	[RDB_LOG_INFO] = "INFO",
	[RDB_LOG_WARN] = "WARN",
	[RDB_LOG_ERROR] = "ERROR",
};

void rdb_log_setup(const char *ident, enum rdb_log_level min_level)
{
	log_ident = ident;
	log_min = min_level;
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

void rdb_log_write(enum rdb_log_level level, const char *component,
		   const char *vm, const char *fmt, ...)
{
	char msg[1024], stamp[32];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int saved = errno;

	if (level < log_min || level >= RDB_LOG__MAX)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	/* One fprintf per line: lines from threads do not interleave. */
	if (vm)
		fprintf(stderr, "%s.%03ldZ %s[%d] %s %s vm=%s: %s\n", stamp,
			ts.tv_nsec / 1000000, log_ident, (int)getpid(),
			level_names[level], component, vm, msg);
	else
		fprintf(stderr, "%s.%03ldZ %s[%d] %s %s: %s\n", stamp,
			ts.tv_nsec / 1000000, log_ident, (int)getpid(),
			level_names[level], component, msg);
	errno = saved;
}

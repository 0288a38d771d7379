/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Logging for every RemusDB userspace component.
 *
 * Each .c file defines RDB_COMPONENT before including this header; every
 * line carries the component and, where there is one, the VM's name, so an
 * operator can grep one VM's history:
 *
 *   2026-11-22T12:00:00.123Z remusdbd[42] WARN ckpt vm=pg1: epoch 17 overran its deadline
 */
#ifndef RDB_LOG_H
#define RDB_LOG_H

#include <stdarg.h>

enum rdb_log_level {
	RDB_LOG_DEBUG,
	RDB_LOG_INFO,
	RDB_LOG_WARN,
	RDB_LOG_ERROR,
	RDB_LOG__MAX
};

/* Lines below min_level are dropped; ident is the program name. */
void rdb_log_setup(const char *ident, enum rdb_log_level min_level);
int rdb_log_level_parse(const char *s, enum rdb_log_level *level_out);

/* vm may be NULL. Unit tests replace this with -Wl,--wrap=rdb_log_write. */
void rdb_log_write(enum rdb_log_level level, const char *component,
		   const char *vm, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#ifndef RDB_COMPONENT
#error "define RDB_COMPONENT before including log.h"
#endif

#define LOG(lvl, ...) rdb_log_write(RDB_LOG_##lvl, RDB_COMPONENT, NULL, __VA_ARGS__)
#define LOGVM(lvl, vm, ...) rdb_log_write(RDB_LOG_##lvl, RDB_COMPONENT, (vm), __VA_ARGS__)

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Logging for every RemusDB userspace component.
 *
 * Each .c file defines RDB_COMPONENT before including this header; every
 * line carries the component and, where there is one, the VM's name, so an
 * operator can grep one VM's history:
 *
 *   2026-11-22T12:00:00.123Z remusdbd[42] WARN ckpt vm=pg1: epoch 17 overran its deadline
 *
 * When stderr is journald's stream (under systemd: JOURNAL_STREAM names
 * it), a line starts with its syslog priority instead of the time, which
 * the journal records itself; ERROR is <3> (alarms are ERRORs), WARN <4>,
 * INFO <6>, DEBUG <7>:
 *
 *   <4>remusdbd[42] WARN ckpt vm=pg1: epoch 17 overran its deadline
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

/* Lines below min_level are dropped; ident is the program name.  Looks
 * at stderr for the journal: call it once stderr is where lines go. */
void rdb_log_setup(const char *ident, enum rdb_log_level min_level);
int rdb_log_level_parse(const char *s, enum rdb_log_level *level_out);
/* level's "<N>" when stderr is the journal, "" otherwise: for the lines a
 * program prints on stderr itself (a configuration error it exits on). */
const char *rdb_log_journal_prefix(enum rdb_log_level level);

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

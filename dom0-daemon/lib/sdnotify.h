/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * systemd's service notification protocol (sd_notify(3)), without
 * libsystemd: one datagram of "KEY=VALUE\n..." to the unix socket named
 * by $NOTIFY_SOCKET (a leading '@': the abstract namespace).  Under
 * Type=notify remusdbd says READY=1 once it serves its control socket and
 * replication port, pings WATCHDOG=1 from its event loop when WatchdogSec
 * is set (a stalled loop then gets the service restarted; the guests are
 * the I5 watchdog's, watchdog.h), and STOPPING=1 on its way out.
 */
#ifndef RDB_SDNOTIFY_H
#define RDB_SDNOTIFY_H

#include <stdint.h>

/* 1 sent, 0 no $NOTIFY_SOCKET (not under systemd), or a negative errno. */
int rdb_sd_notify(const char *state);
/* The watchdog's period from $WATCHDOG_USEC when $WATCHDOG_PID is unset
 * or ours; 0: no watchdog.  Ping at half of it. */
uint64_t rdb_sd_watchdog_ns(void);

#endif

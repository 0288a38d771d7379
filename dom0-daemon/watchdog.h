/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The I5 watchdog: a forked child that shares one page with remusdbd.
 *
 * The daemon stamps the page from its event loop.  A daemon that is
 * stopped (SIGSTOP, a debugger, a page-in storm) stamps nothing, and a
 * stopped process cannot rescue its own guests — hence a second process.
 * When a protected VM's stamp is older than that VM's deadline, the
 * watchdog tells QEMU over the VM's second QMP socket to drop COLO
 * (x-colo-lost-heartbeat): the guest runs on, unprotected, and the trip is
 * logged as an alarm and left in the page for the daemon to see when it
 * runs again.
 *
 * The page is written by the daemon and read by the child (and one flag
 * the other way), so every shared field is an atomic.
 */
#ifndef RDB_WATCHDOG_H
#define RDB_WATCHDOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define RDB_WD_MAX_VMS 64

struct rdb_wd_slot {
	char name[65];
	char qmp_path[108];
	_Atomic uint32_t armed;		/* daemon: 1 while COLO runs */
	_Atomic uint64_t deadline_ns;
	_Atomic uint64_t tripped_at_ns;	/* child: 0, or when it tripped */
	_Atomic uint32_t generation;	/* bumped on every (re)arm */
};

struct rdb_wd_shared {
	_Atomic uint64_t beat_ns;	/* daemon's last sign of life */
	_Atomic uint32_t stop;		/* daemon asks the child to exit */
	struct rdb_wd_slot slot[RDB_WD_MAX_VMS];
};

struct rdb_watchdog {
	struct rdb_wd_shared *shm;
	pid_t pid;
};

/* Maps the page and forks the child.  Call before any thread starts. */
int rdb_watchdog_start(struct rdb_watchdog *wd, uint64_t poll_ns);
/* Idempotent: asks the child to exit, reaps it, unmaps. */
void rdb_watchdog_stop(struct rdb_watchdog *wd);

/* Called by the daemon whenever its loop runs. */
void rdb_watchdog_beat(struct rdb_watchdog *wd);

/* Arms a slot for a VM; returns its index or -ENOSPC. */
int rdb_watchdog_arm(struct rdb_watchdog *wd, const char *name,
		     const char *qmp_path, uint64_t deadline_ns);
void rdb_watchdog_disarm(struct rdb_watchdog *wd, int slot);
/* Non-zero once the child dropped protection for this slot. */
uint64_t rdb_watchdog_tripped(const struct rdb_watchdog *wd, int slot);

/*
 * The decision, pure so a unit test can drive it: should the slot trip
 * at now_ns given the daemon's last beat?
 */
bool rdb_watchdog_should_trip(const struct rdb_wd_slot *s, uint64_t beat_ns,
			      uint64_t now_ns);

#endif

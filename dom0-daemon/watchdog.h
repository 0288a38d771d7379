/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The I5 watchdog: a forked child that shares one page with remusdbd.
 *
 * The daemon stamps the page from its event loop.  A daemon that is
 * stopped (SIGSTOP, a debugger, a page-in storm) stamps nothing, and a
 * stopped process cannot rescue its own guests — hence a second process.
 * When the stamp is older than a protected VM's deadline, the watchdog
 * drops that VM's protection so the guest runs on, unprotected:
 *   1. it shuts down its duplicate of the checkpoint-stream socket (passed
 *      over SCM_RIGHTS at protect time).  QEMU may be blocked writing a
 *      checkpoint into that socket — and, with the TCG BQL patch, holding
 *      the BQL meanwhile, so QMP could not answer; the shutdown fails
 *      that write and QEMU leaves COLO with the guest running;
 *   2. it sends x-colo-lost-heartbeat over the VM's second QMP socket,
 *      for the case where QEMU was not blocked on the socket.
 * The daemon also stamps, per slot, when the guest stopped (a checkpoint's
 * pause, or the stop QEMU makes for the last of the initial state).  A
 * daemon that stalls part-way through a pause must not add its whole
 * deadline to what the guest already waited: once the guest has been
 * stopped for the deadline, a quarter of it without a beat is enough.
 * (A daemon that runs polices its own pauses: primary.c's heartbeat.)
 * The trip is logged as an alarm and left in the page for the daemon to
 * see when it runs again.  If the daemon dies, the watchdog trips every
 * armed slot at once and exits: a dead daemon must not freeze its guests
 * either.
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

struct rdb_hv_ops;

struct rdb_wd_slot {
	char name[65];
	/* the VM's backend (static: the same in the forked child) and the
	 * control socket the child ends checkpoints on */
	const struct rdb_hv_ops *hv;
	char qmp_path[108];
	_Atomic uint32_t armed;		/* daemon: 1 while COLO runs */
	_Atomic uint64_t deadline_ns;
	_Atomic uint64_t tripped_at_ns;	/* child: 0, or when it tripped */
	_Atomic uint32_t generation;	/* bumped on every (re)arm */
	_Atomic uint64_t stopped_ns;	/* daemon: the guest is stopped since
					 * then (0: it runs, as far as known) */
};

struct rdb_wd_shared {
	_Atomic uint64_t beat_ns;	/* daemon's last sign of life */
	_Atomic uint32_t stop;		/* daemon asks the child to exit */
	/* child: polls it slept far past its interval (the host, or the
	 * child itself, did not run: rdb_watchdog_overslept), and the
	 * longest such sleep */
	_Atomic uint64_t oversleeps, oversleep_max_ns;
	struct rdb_wd_slot slot[RDB_WD_MAX_VMS];
};

struct rdb_watchdog {
	struct rdb_wd_shared *shm;
	pid_t pid;
	int fd_sock;		/* daemon's end: passes stream fds to the child */
};

/* Maps the page and forks the child.  Call before any thread starts. */
int rdb_watchdog_start(struct rdb_watchdog *wd, uint64_t poll_ns);
/* Idempotent: asks the child to exit, reaps it, unmaps. */
void rdb_watchdog_stop(struct rdb_watchdog *wd);

/* Called by the daemon whenever its loop runs. */
void rdb_watchdog_beat(struct rdb_watchdog *wd);

/* Arms a slot for a VM; returns its index or -ENOSPC. */
int rdb_watchdog_arm(struct rdb_watchdog *wd, const char *name,
		     const struct rdb_hv_ops *hv, const char *qmp_path,
		     uint64_t deadline_ns);
void rdb_watchdog_disarm(struct rdb_watchdog *wd, int slot);
/* The guest stopped at since_ns (0: it runs again).  A slot < 0 (no
 * watchdog for the VM) is ignored. */
void rdb_watchdog_guest_stopped(struct rdb_watchdog *wd, int slot,
				uint64_t since_ns);
/* Gives the child a duplicate of the slot's checkpoint-stream socket. */
int rdb_watchdog_pass_fd(struct rdb_watchdog *wd, int slot, int fd);
/* Non-zero once the child dropped protection for this slot. */
uint64_t rdb_watchdog_tripped(const struct rdb_watchdog *wd, int slot);

/*
 * The child's sleep of one poll interval, from prev_ns to now_ns, lasted
 * far longer (RDB_WD_OVERSLEEP_NS more): the child did not run, and the
 * daemon's silence over that time may be the same stall (the whole host
 * or VM descheduled: seen on a 2-core CI host, both daemons and the
 * watchdog still for ~0.7 s at once).  The child then waits one more
 * interval before it trips, so a daemon that runs again beats first; a
 * daemon that is stalled is tripped one interval later.  Never twice in
 * a row: a child that always oversleeps still trips.
 */
#define RDB_WD_OVERSLEEP_NS (100 * RDB_NS_PER_MS)
bool rdb_watchdog_overslept(uint64_t prev_ns, uint64_t now_ns,
			    uint64_t poll_ns, bool graced_last);
uint64_t rdb_watchdog_oversleeps(const struct rdb_watchdog *wd);

enum rdb_wd_trip {
	RDB_WD_KEEP,		/* no reason to trip */
	RDB_WD_SILENT,		/* no beat for the deadline */
	RDB_WD_STOPPED,		/* the guest stopped for the deadline, and
				 * no beat for a quarter of it */
};

/*
 * The decision, pure so a unit test can drive it: should the slot trip
 * at now_ns given the daemon's last beat?
 */
enum rdb_wd_trip rdb_watchdog_should_trip(const struct rdb_wd_slot *s,
					  uint64_t beat_ns, uint64_t now_ns);

#endif

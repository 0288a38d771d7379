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
 * Silence is the daemon's own: time the host did not run it although it
 * was runnable is left out (rdb_watchdog_starve_note, below).
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
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "evloop.h"

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
	/* child: silences it did not judge a stall because the host did
	 * not run remusdbd (rdb_watchdog_starve_note), and the longest time
	 * the host kept it from running within one */
	_Atomic uint64_t starves, starve_max_ns;
	/* child: a running total of the time the host did not run remusdbd
	 * (its loop thread runnable without CPU) or this child (a poll
	 * slept past twice its interval), the larger of the two per poll
	 * (rdb_watchdog_host_stall_ns) */
	_Atomic uint64_t host_stall_ns;
	/* child: a running total of the time it saw remusdbd's loop thread
	 * blocked in the kernel (uninterruptible: a disk, a page fault),
	 * and the last such sample: when, and in which system call (its
	 * number, -1 for none: a page fault) with which first argument
	 * (rdb_watchdog_probe) */
	_Atomic uint64_t loop_blocked_ns, loop_blocked_at_ns;
	_Atomic int64_t loop_blocked_sys;
	_Atomic uint64_t loop_blocked_arg;
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

/*
 * The host, not remusdbd, may be what is silent: its loop thread is
 * runnable but does not run (another task has its CPU, or the
 * hypervisor under this host took the CPU away: steal; seen in CI with
 * 57% steal, the daemon off the CPU ~450 ms in a 500 ms callback, and a
 * 700 ms checkpoint tripped by the stopped-guest rule).  The child reads
 * the thread's state and its CPU time (/proc/PID/task/PID/stat and
 * schedstat; the kernel leaves steal out of the CPU time) at every poll;
 * time in which the thread was runnable and got no CPU is the host's,
 * and does not count as the daemon's silence.  A thread that is blocked
 * (S, D), stopped (T) or spins (runnable, on the CPU) is silent on its
 * own account.  Never past RDB_WD_STARVE_CAP deadlines of silence: a
 * daemon the host never runs again is tripped all the same.
 */
#define RDB_WD_STARVE_CAP 4
struct rdb_wd_starve {
	bool have;		/* a previous sample */
	uint64_t at_ns, cpu_ns;	/* when, and the thread's CPU time then */
	uint64_t beat_ns;	/* the beat starved_ns counts from */
	uint64_t starved_ns;	/* since that beat: runnable, not run */
	/* the runnable stretch under way, from the sample before its first */
	bool streak;
	uint64_t streak_at_ns, streak_cpu_ns;
	uint64_t committed_ns;	/* ended stretches' share since the beat */
	bool reported;		/* a withheld trip counted for that beat */
};
/* One sample: runnable ('R') or not, and the CPU time.  A CPU time that
 * goes back (another thread, a restart) starts the tally over. */
void rdb_watchdog_starve_note(struct rdb_wd_starve *t, uint64_t beat_ns,
			      uint64_t now_ns, bool runnable, uint64_t cpu_ns);

enum rdb_wd_trip {
	RDB_WD_KEEP,		/* no reason to trip */
	RDB_WD_SILENT,		/* no beat for the deadline */
	RDB_WD_STOPPED,		/* the guest stopped for the deadline, and
				 * no beat for a quarter of it */
	RDB_WD_STARVED,		/* no trip: a rule above would trip on the
				 * clock, but the host did not run remusdbd
				 * for that long */
};

/*
 * The decision, pure so a unit test can drive it: should the slot trip
 * at now_ns given the daemon's last beat and the time since it that the
 * host did not run the daemon (starved_ns, 0 where unknown)?
 */
enum rdb_wd_trip rdb_watchdog_should_trip(const struct rdb_wd_slot *s,
					  uint64_t beat_ns, uint64_t starved_ns,
					  uint64_t now_ns);
/* Silences withheld as the host's (RDB_WD_STARVED), and the longest
 * time the host kept remusdbd from running within one. */
uint64_t rdb_watchdog_starves(const struct rdb_watchdog *wd,
			      uint64_t *max_ns);

/* The running total above (0 without a watchdog).  The difference of
 * two readings is how long the host did not run remusdbd in between, as
 * far as the child saw it (it lags by up to a poll). */
uint64_t rdb_watchdog_host_stall_ns(const struct rdb_watchdog *wd);
/* The event loop's probe (lib/evloop.h) from the child's samples: how
 * much of a slow callback the thread waited for a CPU, and how much it
 * was blocked in the kernel, and where ("(... of it on the CPU, 600 ms
 * waiting for a CPU, about 90 ms blocked in the kernel (a disk, or
 * memory): last seen in pread64 on fd 14)").  wd must outlive the loop's use of it. */
void rdb_watchdog_probe(struct rdb_watchdog *wd, struct rdb_evloop_probe *out);

/*
 * A peer's silence, as a failure detector judges it (I6's trigger: the
 * backup's "primary silent", the primary's "backup silent").  The peer's
 * frames wait in the socket while this host does not run remusdbd, so a
 * stall of this host alone is never taken for the peer's silence.  But
 * two hosts that share a CPU (namespaces on one machine, or VMs on one
 * overcommitted hypervisor: seen in CI, both daemons off the CPU ~1.3 s
 * at 51% steal, and the backup failed over from a live primary) stall
 * together, and the peer really sent nothing.  So time in which this host
 * did not run remusdbd (stalled_ns, rdb_watchdog_host_stall_ns) is left
 * out of the silence that counts.  Never past RDB_WD_STARVE_CAP timeouts
 * of silence: a dead peer is still found on a host that keeps stalling,
 * and a failover onto a host that cannot run its daemon is no rescue to
 * hurry.  Returns the silence that counts.
 */
uint64_t rdb_peer_silence(uint64_t silent_ns, uint64_t stalled_ns,
			  uint64_t timeout_ns);

/*
 * A failure detector's view of its peer, the same on both roles.  A
 * detector whose own tick comes over a period late did not run either:
 * the child may not have counted that stall yet (it lags by a poll, and
 * may itself have been held), and a peer stalled with this host has had
 * no time to be heard.  It looks again RDB_PEER_RECHECK_NS later, once,
 * before it judges.
 */
#define RDB_PEER_RECHECK_NS (20 * RDB_NS_PER_MS)
struct rdb_peer_det {
	uint64_t heard_ns;		/* the peer's last frame */
	uint64_t heard_stall_ns;	/* rdb_watchdog_host_stall_ns then */
	uint64_t due_ns;		/* the detector's next tick (0: none) */
	bool rechecked;			/* the last tick was a recheck */
	/* this silence was logged and counted: as looked at again after a
	 * late tick, as withheld as the host's stall */
	bool told_late, withheld;
};
enum rdb_peer_verdict {
	RDB_PEER_HEARD,		/* silent no longer than the timeout */
	RDB_PEER_RECHECK,	/* the tick was late: look again soon */
	RDB_PEER_STALLED,	/* over the timeout on the clock, not once
				 * this host's stalls are left out */
	RDB_PEER_SILENT,	/* the peer is silent: act */
};
void rdb_peer_heard(struct rdb_peer_det *pd, uint64_t host_stall_ns,
		    uint64_t now_ns);
/* One tick of the detector at now_ns; host_stall_ns is
 * rdb_watchdog_host_stall_ns now.  *stalled_ns: how much of the silence
 * this host did not run remusdbd (RDB_PEER_RECHECK: how late the tick
 * came).  A tick that returns RDB_PEER_RECHECK
 * must come again RDB_PEER_RECHECK_NS later, any other one heartbeat
 * period later (period_ns). */
enum rdb_peer_verdict rdb_peer_judge(struct rdb_peer_det *pd,
				     uint64_t host_stall_ns, uint64_t now_ns,
				     uint64_t timeout_ns, uint64_t period_ns,
				     uint64_t *stalled_ns);
/* A verdict of RDB_PEER_RECHECK or RDB_PEER_STALLED, logged (as
 * component, on VM vm: "<peer> silent for N ms, but this host did not run
 * remusdbd for M ms of it ...") and counted in *count, once a silence
 * each; the other verdicts are the caller's. */
void rdb_peer_tell(struct rdb_peer_det *pd, enum rdb_peer_verdict v,
		   const char *component, const char *vm, const char *peer,
		   uint64_t now_ns, uint64_t stalled_ns, uint64_t timeout_ns,
		   uint64_t *count);

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * One event loop per daemon: fd events (epoll) and one-shot or periodic
 * timers, plus a before-sleep hook.  The hook runs after every batch of
 * events and before the loop blocks again; remusdbd uses it to push
 * replication output before it sleeps (Redis ae.c's beforesleep).
 *
 * Timers are few (per VM: heartbeat, failure detection, checkpoint
 * deadline), so they live in an unsorted array: O(N) per iteration.
 */
#ifndef RDB_EVLOOP_H
#define RDB_EVLOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDB_EV_READ  0x1u
#define RDB_EV_WRITE 0x2u
#define RDB_EV_ERROR 0x4u	/* EPOLLERR/EPOLLHUP: reported with READ */

struct rdb_evloop;
typedef void (*rdb_fd_cb)(struct rdb_evloop *loop, int fd, unsigned events,
			  void *opaque);
/* Return the next delay in ns to stay armed, or 0 to be removed. */
typedef uint64_t (*rdb_timer_cb)(struct rdb_evloop *loop, uint64_t id,
				 void *opaque);
typedef void (*rdb_hook_cb)(struct rdb_evloop *loop, void *opaque);

int rdb_evloop_create(struct rdb_evloop **loop_out);
void rdb_evloop_destroy(struct rdb_evloop *loop);	/* NULL ok */

int rdb_evloop_add_fd(struct rdb_evloop *loop, int fd, unsigned events,
		      rdb_fd_cb cb, void *opaque);
int rdb_evloop_mod_fd(struct rdb_evloop *loop, int fd, unsigned events);
/* Safe from inside any callback, including the fd's own. */
void rdb_evloop_del_fd(struct rdb_evloop *loop, int fd);

/* id_out > 0 on success; ids are never reused. */
int rdb_evloop_add_timer(struct rdb_evloop *loop, uint64_t delay_ns,
			 rdb_timer_cb cb, void *opaque, uint64_t *id_out);
/* Unknown or already fired ids are fine (idempotent). */
void rdb_evloop_del_timer(struct rdb_evloop *loop, uint64_t id);

void rdb_evloop_set_before_sleep(struct rdb_evloop *loop, rdb_hook_cb cb,
				 void *opaque);

/* Runs until rdb_evloop_stop(); returns 0, or a negative errno if epoll
 * itself fails. */
int rdb_evloop_run(struct rdb_evloop *loop);
void rdb_evloop_stop(struct rdb_evloop *loop);

/* Callbacks that held the loop RDB_EVLOOP_SLOW_NS or more (each one is
 * logged with its handler's name or binary offset). */
#define RDB_EVLOOP_SLOW_NS (100ull * 1000 * 1000)
struct rdb_evloop_slow {
	uint64_t count;
	uint64_t longest_ns;
};
void rdb_evloop_slow_stats(const struct rdb_evloop *loop,
			   struct rdb_evloop_slow *out);

/*
 * What the loop's thread was doing while a slow callback held it, beyond
 * its CPU time, as an observer outside the thread saw it (remusdbd: its
 * watchdog child, which samples the thread at every poll).  take() fills
 * a snapshot at each callback's start (it must be cheap: a few loads);
 * tell() writes what came between two snapshots, as text that continues
 * the warning's "(N ms of it on the CPU" (", 600 ms waiting for a CPU"),
 * or nothing.  NULL removes it.
 */
#define RDB_EVLOOP_PROBE_N 4
struct rdb_evloop_probe {
	void (*take)(void *opaque, uint64_t snap[RDB_EVLOOP_PROBE_N]);
	void (*tell)(void *opaque, const uint64_t before[RDB_EVLOOP_PROBE_N],
		     const uint64_t after[RDB_EVLOOP_PROBE_N], char *buf,
		     size_t len);
	void *opaque;
};
void rdb_evloop_set_probe(struct rdb_evloop *loop,
			  const struct rdb_evloop_probe *probe);

/* One iteration with at most max_wait_ns of blocking (tests). */
int rdb_evloop_run_once(struct rdb_evloop *loop, uint64_t max_wait_ns);

#endif

// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "evloop"
#include "evloop.h"
#include "clock.h"
#include "log.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

struct fd_slot {
	rdb_fd_cb cb;
	void *opaque;
	unsigned events;
	bool used;
};

struct timer {
	uint64_t id;
	uint64_t when_ns;
	rdb_timer_cb cb;
	void *opaque;
};

struct rdb_evloop {
	int epfd;
	struct fd_slot *fds;	/* indexed by fd */
	int nfds;
	struct timer *timers;
	size_t ntimers, cap_timers;
	uint64_t next_timer_id;
	rdb_hook_cb before_sleep;
	void *before_sleep_opaque;
	bool stop;
	struct rdb_evloop_slow slow;
	struct rdb_evloop_probe probe;
};

/* A callback's start: its thread's CPU time and the probe's snapshot. */
struct hold {
	uint64_t cpu0;
	uint64_t snap[RDB_EVLOOP_PROBE_N];
};

/*
 * A callback that held the loop RDB_EVLOOP_SLOW_NS or longer: counted and
 * logged with what it was, so a stall the watchdog catches (remusdbd
 * silent for its deadline) names its handler, and with how much of that
 * time this thread was on the CPU: a callback that is slow itself, or a
 * daemon that waited for the CPU (a busy or emulated host) or for I/O.
 * Static functions are not in the dynamic symbol table: then the binary
 * and offset, for `addr2line -f -e BINARY OFFSET`.
 */
static uint64_t cpu_now(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * RDB_NS_PER_S + (uint64_t)ts.tv_nsec;
}

static void hold_start(struct rdb_evloop *loop, struct hold *h)
{
	h->cpu0 = cpu_now();
	if (loop->probe.take)
		loop->probe.take(loop->probe.opaque, h->snap);
}

static void slow_check(struct rdb_evloop *loop, const char *kind, long what,
		       void *fn, uint64_t t0, const struct hold *h)
{
	uint64_t took = rdb_now_ns() - t0, cpu;
	uint64_t snap[RDB_EVLOOP_PROBE_N];
	char sym[300], more[300] = "";
	Dl_info di;

	if (took < RDB_EVLOOP_SLOW_NS)
		return;
	loop->slow.count++;
	if (took > loop->slow.longest_ns)
		loop->slow.longest_ns = took;
	if (dladdr(fn, &di) && di.dli_sname)
		snprintf(sym, sizeof(sym), "%s", di.dli_sname);
	else if (dladdr(fn, &di) && di.dli_fname)
		snprintf(sym, sizeof(sym), "%s+0x%lx", di.dli_fname,
			 (unsigned long)((char *)fn - (char *)di.dli_fbase));
	else
		snprintf(sym, sizeof(sym), "%p", fn);
	cpu = cpu_now() - h->cpu0;
	if (loop->probe.take && loop->probe.tell) {
		loop->probe.take(loop->probe.opaque, snap);
		loop->probe.tell(loop->probe.opaque, h->snap, snap, more,
				 sizeof(more));
	}
	LOG(WARN, "a %s callback (%s %ld) held the event loop %.1f ms (%.1f ms "
	    "of it on the CPU%s): %s", kind, kind[0] == 'f' ? "fd" : "id", what,
	    (double)took / RDB_NS_PER_MS, (double)cpu / RDB_NS_PER_MS, more, sym);
}

void rdb_evloop_set_probe(struct rdb_evloop *loop,
			  const struct rdb_evloop_probe *probe)
{
	if (probe)
		loop->probe = *probe;
	else
		memset(&loop->probe, 0, sizeof(loop->probe));
}

void rdb_evloop_slow_stats(const struct rdb_evloop *loop,
			   struct rdb_evloop_slow *out)
{
	*out = loop->slow;
}

int rdb_evloop_create(struct rdb_evloop **loop_out)
{
	struct rdb_evloop *loop = calloc(1, sizeof(*loop));

	if (!loop)
		return -ENOMEM;
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (loop->epfd < 0) {
		int rc = -errno;

		free(loop);
		return rc;
	}
	loop->next_timer_id = 1;
	*loop_out = loop;
	return 0;
}

void rdb_evloop_destroy(struct rdb_evloop *loop)
{
	if (!loop)
		return;
	close(loop->epfd);
	free(loop->fds);
	free(loop->timers);
	free(loop);
}

static uint32_t to_epoll(unsigned events)
{
	uint32_t e = 0;

	if (events & RDB_EV_READ)
		e |= EPOLLIN | EPOLLRDHUP;
	if (events & RDB_EV_WRITE)
		e |= EPOLLOUT;
	return e;
}

int rdb_evloop_add_fd(struct rdb_evloop *loop, int fd, unsigned events,
		      rdb_fd_cb cb, void *opaque)
{
	struct epoll_event ev = { .events = to_epoll(events), .data.fd = fd };

	if (fd < 0 || !cb)
		return -EINVAL;
	if (fd >= loop->nfds) {
		int n = fd + 64;
		struct fd_slot *s = realloc(loop->fds, n * sizeof(*s));

		if (!s)
			return -ENOMEM;
		memset(s + loop->nfds, 0, (n - loop->nfds) * sizeof(*s));
		loop->fds = s;
		loop->nfds = n;
	}
	if (loop->fds[fd].used)
		return -EEXIST;
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	loop->fds[fd] = (struct fd_slot){ cb, opaque, events, true };
	return 0;
}

int rdb_evloop_mod_fd(struct rdb_evloop *loop, int fd, unsigned events)
{
	struct epoll_event ev = { .events = to_epoll(events), .data.fd = fd };

	if (fd < 0 || fd >= loop->nfds || !loop->fds[fd].used)
		return -ENOENT;
	if (loop->fds[fd].events == events)
		return 0;
	if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return -errno;
	loop->fds[fd].events = events;
	return 0;
}

void rdb_evloop_del_fd(struct rdb_evloop *loop, int fd)
{
	if (fd < 0 || fd >= loop->nfds || !loop->fds[fd].used)
		return;
	/* The fd may already be closed: then the kernel dropped it itself. */
	epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, NULL);
	loop->fds[fd].used = false;
}

static int push_timer(struct rdb_evloop *loop, const struct timer *t)
{
	if (loop->ntimers == loop->cap_timers) {
		size_t n = loop->cap_timers ? loop->cap_timers * 2 : 16;
		struct timer *a = realloc(loop->timers, n * sizeof(*a));

		if (!a)
			return -ENOMEM;
		loop->timers = a;
		loop->cap_timers = n;
	}
	loop->timers[loop->ntimers++] = *t;
	return 0;
}

int rdb_evloop_add_timer(struct rdb_evloop *loop, uint64_t delay_ns,
			 rdb_timer_cb cb, void *opaque, uint64_t *id_out)
{
	struct timer t = {
		.id = loop->next_timer_id,
		.when_ns = rdb_now_ns() + delay_ns,
		.cb = cb,
		.opaque = opaque,
	};
	int rc = push_timer(loop, &t);

	if (rc < 0)
		return rc;
	if (id_out)
		*id_out = t.id;
	loop->next_timer_id++;
	return 0;
}

void rdb_evloop_del_timer(struct rdb_evloop *loop, uint64_t id)
{
	for (size_t i = 0; i < loop->ntimers; i++) {
		if (loop->timers[i].id == id) {
			loop->timers[i] = loop->timers[--loop->ntimers];
			return;
		}
	}
}

void rdb_evloop_set_before_sleep(struct rdb_evloop *loop, rdb_hook_cb cb,
				 void *opaque)
{
	loop->before_sleep = cb;
	loop->before_sleep_opaque = opaque;
}

void rdb_evloop_stop(struct rdb_evloop *loop)
{
	loop->stop = true;
}

static void run_timers(struct rdb_evloop *loop)
{
	uint64_t now = rdb_now_ns();
	/* Timers added by callbacks wait for the next iteration. */
	uint64_t limit = loop->next_timer_id;

	for (size_t i = 0; i < loop->ntimers;) {
		struct timer t = loop->timers[i];
		uint64_t again;

		if (t.id >= limit || t.when_ns > now) {
			i++;
			continue;
		}
		struct hold h;

		hold_start(loop, &h);
		/* Remove first: the callback may add or delete timers. */
		loop->timers[i] = loop->timers[--loop->ntimers];
		again = t.cb(loop, t.id, t.opaque);
		slow_check(loop, "timer", (long)t.id, (void *)t.cb, now, &h);
		if (again) {
			t.when_ns = now + again;
			if (push_timer(loop, &t) < 0)
				LOG(ERROR, "out of memory: periodic timer %llu dropped",
				    (unsigned long long)t.id);
		}
		/* Restart: the array changed under us. */
		i = 0;
		now = rdb_now_ns();
	}
}

int rdb_evloop_run_once(struct rdb_evloop *loop, uint64_t max_wait_ns)
{
	struct epoll_event evs[64];
	uint64_t now, wait_ns = max_wait_ns;
	struct hold h;
	int timeout_ms, n;

	if (loop->before_sleep) {
		hold_start(loop, &h);
		now = rdb_now_ns();
		loop->before_sleep(loop, loop->before_sleep_opaque);
		slow_check(loop, "before-sleep", 0, (void *)loop->before_sleep, now,
			   &h);
	}
	now = rdb_now_ns();
	for (size_t i = 0; i < loop->ntimers; i++) {
		uint64_t w = loop->timers[i].when_ns > now ?
			loop->timers[i].when_ns - now : 0;
		if (w < wait_ns)
			wait_ns = w;
	}
	/* Round up so a timer never fires early and spins. */
	timeout_ms = (int)((wait_ns + RDB_NS_PER_MS - 1) / RDB_NS_PER_MS);
	n = epoll_wait(loop->epfd, evs, 64, timeout_ms);
	if (n < 0) {
		if (errno == EINTR)
			return 0;
		return -errno;
	}
	for (int i = 0; i < n; i++) {
		int fd = evs[i].data.fd;
		unsigned e = 0;
		rdb_fd_cb cb;

		if (fd >= loop->nfds || !loop->fds[fd].used)
			continue;	/* deleted by an earlier callback */
		if (evs[i].events & (EPOLLIN | EPOLLRDHUP))
			e |= RDB_EV_READ;
		if (evs[i].events & EPOLLOUT)
			e |= RDB_EV_WRITE;
		if (evs[i].events & (EPOLLERR | EPOLLHUP))
			e |= RDB_EV_ERROR | RDB_EV_READ;
		cb = loop->fds[fd].cb;	/* the callback may delete its fd */
		now = rdb_now_ns();
		hold_start(loop, &h);
		cb(loop, fd, e, loop->fds[fd].opaque);
		slow_check(loop, "fd", fd, (void *)cb, now, &h);
	}
	run_timers(loop);
	return 0;
}

int rdb_evloop_run(struct rdb_evloop *loop)
{
	loop->stop = false;
	while (!loop->stop) {
		int rc = rdb_evloop_run_once(loop, 1000 * RDB_NS_PER_MS);

		if (rc < 0) {
			LOG(ERROR, "epoll_wait: %s", strerror(-rc));
			return rc;
		}
	}
	return 0;
}

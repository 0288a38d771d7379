// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "watchdog"
#include "watchdog.h"
#include "clock.h"
#include "log.h"
#include "hv.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Dropping protection must itself be bounded: QEMU answers in ~1 ms,
 * or not at all while its migration thread holds the BQL. */
#define TRIP_QMP_DEADLINE_NS (500 * RDB_NS_PER_MS)
#define TRIP_QMP_ATTEMPTS 4

/* The child's copies of each slot's checkpoint-stream socket. */
static int stream_fd[RDB_WD_MAX_VMS];

/* A runnable stretch's time without CPU, from its base to this sample.
 * Counted over the whole stretch, not sample by sample: the kernel's CPU
 * time of a running thread lags by up to a tick, and a lag in one
 * interval is made up in the next. */
static uint64_t streak_lost(const struct rdb_wd_starve *t, uint64_t now_ns,
			    uint64_t cpu_ns)
{
	uint64_t dt = now_ns - t->streak_at_ns, dcpu = cpu_ns - t->streak_cpu_ns;

	return dt > dcpu ? dt - dcpu : 0;
}

void rdb_watchdog_starve_note(struct rdb_wd_starve *t, uint64_t beat_ns,
			      uint64_t now_ns, bool runnable, uint64_t cpu_ns)
{
	bool sane = t->have && now_ns > t->at_ns && cpu_ns >= t->cpu_ns;
	uint64_t lost;

	if (beat_ns != t->beat_ns) {
		/* a new beat: only what came after it counts */
		t->beat_ns = beat_ns;
		t->committed_ns = 0;
		t->reported = false;
		if (t->streak) {
			t->streak_at_ns = t->at_ns;
			t->streak_cpu_ns = t->cpu_ns;
		}
	}
	if (!sane) {
		t->streak = false;
	} else if (runnable && !t->streak) {
		/* the interval up to this sample counts as runnable */
		t->streak = true;
		t->streak_at_ns = t->at_ns;
		t->streak_cpu_ns = t->cpu_ns;
	} else if (!runnable && t->streak) {
		/* blocked, stopped or gone: the stretch ends at the last
		 * sample that saw it runnable */
		t->committed_ns += streak_lost(t, t->at_ns, t->cpu_ns);
		t->streak = false;
	}
	lost = t->committed_ns + (t->streak ? streak_lost(t, now_ns, cpu_ns) : 0);
	if (lost > 0 && now_ns > beat_ns && lost > now_ns - beat_ns)
		lost = now_ns - beat_ns;
	t->starved_ns = now_ns > beat_ns ? lost : 0;
	t->have = true;
	t->at_ns = now_ns;
	t->cpu_ns = cpu_ns;
}

enum rdb_wd_trip rdb_watchdog_should_trip(const struct rdb_wd_slot *s,
					  uint64_t beat_ns, uint64_t starved_ns,
					  uint64_t now_ns)
{
	uint64_t deadline = atomic_load(&s->deadline_ns);
	uint64_t stopped = atomic_load(&s->stopped_ns);
	uint64_t silent, own;
	bool guest_late;

	if (!atomic_load(&s->armed) || atomic_load(&s->tripped_at_ns))
		return RDB_WD_KEEP;
	/* a beat or a stop newer than "now" (read race) is not late */
	if (now_ns <= beat_ns)
		return RDB_WD_KEEP;
	silent = now_ns - beat_ns;
	/* the daemon's own silence: without the time the host did not run
	 * it, unless that has gone on too long to wait for */
	own = silent > (uint64_t)RDB_WD_STARVE_CAP * deadline ? silent :
		silent - (starved_ns < silent ? starved_ns : silent);
	guest_late = stopped && now_ns > stopped && now_ns - stopped > deadline;
	if (own > deadline)
		return RDB_WD_SILENT;
	if (guest_late && own > deadline / 4)
		return RDB_WD_STOPPED;
	if (silent > deadline || (guest_late && silent > deadline / 4))
		return RDB_WD_STARVED;
	return RDB_WD_KEEP;
}

/* The daemon's loop thread, as its scheduler sees it; sys_fd says
 * where it is blocked (root only: -1 without it). */
struct wd_thread {
	int stat_fd, sched_fd, sys_fd;
};

static void thread_open(struct wd_thread *th, pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)pid);
	th->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)pid);
	th->sched_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (th->stat_fd < 0 || th->sched_fd < 0) {
		LOG(WARN, "watchdog: cannot read remusdbd's scheduling state "
		    "(%s): time the host does not run remusdbd counts as its "
		    "silence", strerror(errno));
		if (th->stat_fd >= 0)
			close(th->stat_fd);
		if (th->sched_fd >= 0)
			close(th->sched_fd);
		th->stat_fd = th->sched_fd = -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)pid);
	th->sys_fd = open(path, O_RDONLY | O_CLOEXEC);
}

/* Where a thread blocked in the kernel is: its system call's number (-1:
 * none, a page fault) and first argument; false if unknown. */
static bool thread_where(const struct wd_thread *th, int64_t *sys,
			 uint64_t *arg)
{
	char buf[256];
	long long nr;
	unsigned long long a = 0;
	ssize_t n;

	if (th->sys_fd < 0)
		return false;
	n = pread(th->sys_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "17 0xe 0x7f.. ...", "-1 SP PC" or "running" */
	if (sscanf(buf, "%lld %llx", &nr, &a) < 1)
		return false;
	*sys = nr;
	*arg = nr < 0 ? 0 : a;
	return true;
}

/* 0 and the state and CPU time, or -1 (unknown: no starvation is
 * counted). */
static int thread_sample(const struct wd_thread *th, bool *runnable,
			 bool *blocked, uint64_t *cpu_ns)
{
	char buf[512];
	const char *rp;
	unsigned long long cpu;
	ssize_t n;

	if (th->stat_fd < 0)
		return -1;
	n = pread(th->stat_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may hold spaces and parentheses */
	rp = strrchr(buf, ')');
	if (!rp || rp[1] != ' ' || !rp[2])
		return -1;
	*runnable = rp[2] == 'R';
	*blocked = rp[2] == 'D';
	n = pread(th->sched_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (sscanf(buf, "%llu", &cpu) != 1)
		return -1;
	*cpu_ns = cpu;
	return 0;
}

static void trip(int i, struct rdb_wd_slot *s, const char *why)
{
	struct rdb_hv_ctl *c = NULL;
	uint64_t t0 = rdb_now_ns();
	bool cut = false;
	char err[256] = "";
	int rc = -EIO;

	/* Marked before the cut: the daemon, reading the stream's end, must
	 * see whose doing it was. */
	atomic_store(&s->tripped_at_ns, rdb_now_ns());
	if (stream_fd[i] >= 0) {
		cut = shutdown(stream_fd[i], SHUT_RDWR) == 0;
		close(stream_fd[i]);
		stream_fd[i] = -1;
	}
	/*
	 * After a failed checkpoint QEMU's COLO thread waits for exactly this
	 * command before the guest may run again: keep trying, a bounded
	 * number of times, until QEMU takes it or says COLO is over.
	 */
	for (int attempt = 0; attempt < TRIP_QMP_ATTEMPTS; attempt++) {
		uint64_t dl = rdb_now_ns() + TRIP_QMP_DEADLINE_NS;

		rc = s->hv->ctl_open(&c, s->qmp_path, s->name, dl, err,
				     sizeof(err));
		if (rc == 0) {
			rc = s->hv->checkpoint_end(c, dl);
			snprintf(err, sizeof(err), "%s", rc == -EREMOTEIO ?
				 s->hv->ctl_error(c) : strerror(-rc));
			s->hv->ctl_close(c);
			c = NULL;
		}
		if (rc == 0 || rc == -EREMOTEIO)
			break;
		LOGVM(WARN, s->name, "watchdog: ending checkpoints, attempt %d: %s",
		      attempt + 1, err);
	}
	LOGVM(ERROR, s->name,
	      "ALARM: %s: dropped protection (checkpoint stream %s, "
	      "checkpoints ended in %s: %s) in %.1f ms; the guest runs "
	      "unprotected", why, cut ? "shut down" : "not held", s->hv->name,
	      rc == 0 ? "yes" : err,
	      (double)(rdb_now_ns() - t0) / RDB_NS_PER_MS);
}

/* Takes the fds the daemon passed since the last poll. */
static void receive_fds(int sock)
{
	for (;;) {
		char ctrl[CMSG_SPACE(sizeof(int))];
		int slot = -1, fd = -1;
		struct iovec iov = { &slot, sizeof(slot) };
		struct msghdr m = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = ctrl, .msg_controllen = sizeof(ctrl),
		};
		struct cmsghdr *c;

		if (recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) <= 0)
			return;
		c = CMSG_FIRSTHDR(&m);
		if (c && c->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(c), sizeof(fd));
		if (slot < 0 || slot >= RDB_WD_MAX_VMS || fd < 0) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		if (stream_fd[slot] >= 0)
			close(stream_fd[slot]);
		stream_fd[slot] = fd;
	}
}

bool rdb_watchdog_overslept(uint64_t prev_ns, uint64_t now_ns,
			    uint64_t poll_ns, bool graced_last)
{
	return !graced_last && now_ns > prev_ns &&
		now_ns - prev_ns > poll_ns + RDB_WD_OVERSLEEP_NS;
}

uint64_t rdb_watchdog_oversleeps(const struct rdb_watchdog *wd)
{
	return wd && wd->shm ? atomic_load(&wd->shm->oversleeps) : 0;
}

uint64_t rdb_watchdog_host_stall_ns(const struct rdb_watchdog *wd)
{
	return wd && wd->shm ? atomic_load(&wd->shm->host_stall_ns) : 0;
}

/* A system call's name on this architecture, or NULL; *on_fd: its first
 * argument is a file descriptor. */
static const char *syscall_name(long nr, bool *on_fd)
{
	static const struct { long nr; const char *name; bool fd; } t[] = {
		{ SYS_read, "read", true }, { SYS_write, "write", true },
		{ SYS_pread64, "pread64", true }, { SYS_pwrite64, "pwrite64", true },
		{ SYS_readv, "readv", true }, { SYS_writev, "writev", true },
		{ SYS_preadv, "preadv", true }, { SYS_pwritev, "pwritev", true },
		{ SYS_fsync, "fsync", true }, { SYS_fdatasync, "fdatasync", true },
		{ SYS_openat, "openat", false }, { SYS_close, "close", true },
		{ SYS_unlinkat, "unlinkat", false }, { SYS_renameat, "renameat", false },
		{ SYS_ftruncate, "ftruncate", true }, { SYS_fallocate, "fallocate", true },
		{ SYS_newfstatat, "newfstatat", false }, { SYS_fstat, "fstat", true },
		{ SYS_mmap, "mmap", false }, { SYS_munmap, "munmap", false },
		{ SYS_msync, "msync", true }, { SYS_madvise, "madvise", false },
		{ SYS_sendmsg, "sendmsg", true }, { SYS_recvmsg, "recvmsg", true },
		{ SYS_sendto, "sendto", true }, { SYS_recvfrom, "recvfrom", true },
		{ SYS_ioctl, "ioctl", true }, { SYS_execve, "execve", false },
		{ SYS_wait4, "wait4", false }, { SYS_futex, "futex", false },
#ifdef SYS_unlink
		{ SYS_unlink, "unlink", false }, { SYS_rename, "rename", false },
		{ SYS_open, "open", false }, { SYS_stat, "stat", false },
#endif
#ifdef SYS_vfork
		{ SYS_vfork, "vfork", false }, { SYS_clone, "clone", false },
#endif
#ifdef SYS_preadv2
		{ SYS_preadv2, "preadv2", true }, { SYS_pwritev2, "pwritev2", true },
#endif
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].nr == nr) {
			*on_fd = t[i].fd;
			return t[i].name;
		}
	*on_fd = false;
	return NULL;
}

enum { PR_STALL, PR_BLOCKED, PR_BLOCKED_AT };

static void probe_take(void *opaque, uint64_t snap[RDB_EVLOOP_PROBE_N])
{
	const struct rdb_watchdog *wd = opaque;

	snap[PR_STALL] = atomic_load(&wd->shm->host_stall_ns);
	snap[PR_BLOCKED] = atomic_load(&wd->shm->loop_blocked_ns);
	snap[PR_BLOCKED_AT] = atomic_load(&wd->shm->loop_blocked_at_ns);
}

static void probe_tell(void *opaque, const uint64_t before[RDB_EVLOOP_PROBE_N],
		       const uint64_t after[RDB_EVLOOP_PROBE_N], char *buf,
		       size_t len)
{
	const struct rdb_watchdog *wd = opaque;
	uint64_t stall = after[PR_STALL] - before[PR_STALL];
	uint64_t blocked = after[PR_BLOCKED] - before[PR_BLOCKED];
	size_t n = 0;

	buf[0] = '\0';
	if (stall >= RDB_NS_PER_MS)
		n += (size_t)snprintf(buf + n, len - n, ", about %.0f ms waiting for a "
				      "CPU", (double)stall / RDB_NS_PER_MS);
	if (n < len && blocked >= RDB_NS_PER_MS &&
	    after[PR_BLOCKED_AT] != before[PR_BLOCKED_AT]) {
		int64_t sys = atomic_load(&wd->shm->loop_blocked_sys);
		uint64_t arg = atomic_load(&wd->shm->loop_blocked_arg);
		bool on_fd;
		const char *name = syscall_name((long)sys, &on_fd);
		char where[96];

		if (sys == INT64_MIN)
			snprintf(where, sizeof(where), "where is not known");
		else if (sys < 0)
			snprintf(where, sizeof(where), "last seen in a page fault");
		else if (name && on_fd)
			snprintf(where, sizeof(where), "last seen in %s on fd "
				 "%llu", name, (unsigned long long)arg);
		else if (name)
			snprintf(where, sizeof(where), "last seen in %s", name);
		else
			snprintf(where, sizeof(where), "last seen in system call "
				 "%lld", (long long)sys);
		snprintf(buf + n, len - n, ", about %.0f ms blocked in the "
			 "kernel (a disk, or memory): %s",
			 (double)blocked / RDB_NS_PER_MS, where);
	}
}

void rdb_watchdog_probe(struct rdb_watchdog *wd, struct rdb_evloop_probe *out)
{
	memset(out, 0, sizeof(*out));
	if (!wd || !wd->shm)
		return;
	out->take = probe_take;
	out->tell = probe_tell;
	out->opaque = wd;
}

uint64_t rdb_peer_silence(uint64_t silent_ns, uint64_t stalled_ns,
			  uint64_t timeout_ns)
{
	if (silent_ns > (uint64_t)RDB_WD_STARVE_CAP * timeout_ns)
		return silent_ns;
	return silent_ns - (stalled_ns < silent_ns ? stalled_ns : silent_ns);
}

void rdb_peer_heard(struct rdb_peer_det *pd, uint64_t host_stall_ns,
		    uint64_t now_ns)
{
	pd->heard_ns = now_ns;
	pd->heard_stall_ns = host_stall_ns;
	pd->told_late = pd->withheld = false;
}

enum rdb_peer_verdict rdb_peer_judge(struct rdb_peer_det *pd,
				     uint64_t host_stall_ns, uint64_t now_ns,
				     uint64_t timeout_ns, uint64_t period_ns,
				     uint64_t *stalled_ns)
{
	uint64_t silent = now_ns > pd->heard_ns ? now_ns - pd->heard_ns : 0;
	bool late = pd->due_ns && now_ns > pd->due_ns + period_ns;

	*stalled_ns = host_stall_ns > pd->heard_stall_ns ?
		host_stall_ns - pd->heard_stall_ns : 0;
	if (silent > timeout_ns && late && !pd->rechecked) {
		*stalled_ns = now_ns - pd->due_ns;
		pd->rechecked = true;
		pd->due_ns = now_ns + RDB_PEER_RECHECK_NS;
		return RDB_PEER_RECHECK;
	}
	pd->rechecked = false;
	pd->due_ns = now_ns + period_ns;
	if (silent <= timeout_ns)
		return RDB_PEER_HEARD;
	if (rdb_peer_silence(silent, *stalled_ns, timeout_ns) <= timeout_ns)
		return RDB_PEER_STALLED;
	return RDB_PEER_SILENT;
}

void rdb_peer_tell(struct rdb_peer_det *pd, enum rdb_peer_verdict v,
		   const char *component, const char *vm, const char *peer,
		   uint64_t now_ns, uint64_t stalled_ns, uint64_t timeout_ns,
		   uint64_t *count)
{
	unsigned long long silent = (now_ns - pd->heard_ns) / RDB_NS_PER_MS;
	unsigned long long stalled = stalled_ns / RDB_NS_PER_MS;

	if (v == RDB_PEER_RECHECK && !pd->told_late) {
		pd->told_late = true;
		(*count)++;
		rdb_log_write(RDB_LOG_WARN, component, vm, "%s silent for %llu ms, "
			      "but this host did not run remusdbd for %llu ms of "
			      "it (its failure detector ran that late): looking "
			      "again in %llu ms before judging", peer, silent,
			      stalled, (unsigned long long)(RDB_PEER_RECHECK_NS /
							    RDB_NS_PER_MS));
	} else if (v == RDB_PEER_STALLED && !pd->withheld) {
		pd->withheld = true;
		(*count)++;
		rdb_log_write(RDB_LOG_WARN, component, vm, "%s silent for %llu ms, "
			      "but this host did not run remusdbd for %llu ms of "
			      "it (steal, or a busy CPU: a host that shares a CPU "
			      "with the %s's stalls with it): not judged silence "
			      "yet (at the latest at %llu ms)", peer, silent,
			      stalled, peer, (unsigned long long)
			      (RDB_WD_STARVE_CAP * timeout_ns / RDB_NS_PER_MS));
	}
}

uint64_t rdb_watchdog_starves(const struct rdb_watchdog *wd, uint64_t *max_ns)
{
	if (!wd || !wd->shm) {
		if (max_ns)
			*max_ns = 0;
		return 0;
	}
	if (max_ns)
		*max_ns = atomic_load(&wd->shm->starve_max_ns);
	return atomic_load(&wd->shm->starves);
}

static void child_main(struct rdb_wd_shared *shm, int sock, pid_t parent,
		       uint64_t poll_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(poll_ns / RDB_NS_PER_S),
		.tv_nsec = (long)(poll_ns % RDB_NS_PER_S),
	};
	char why[192], host[64];
	uint64_t prev = rdb_now_ns();
	bool graced = false;
	struct rdb_wd_starve starve = { 0 };
	/* the same tally over the daemon's whole life (one beat, at 0), and
	 * the most it has reached: host_stall_ns's share from the thread */
	struct rdb_wd_starve all = { 0 };
	uint64_t all_hw = 0;
	struct wd_thread th;

	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	for (int i = 0; i < RDB_WD_MAX_VMS; i++)
		stream_fd[i] = -1;
	thread_open(&th, parent);
	while (!atomic_load(&shm->stop)) {
		uint64_t now, beat, cpu;
		enum rdb_wd_trip t;
		bool runnable, blocked;
		/* A dead daemon is the longest stall of all: its guests must
		 * not wait for it (and our copy of each stream socket would
		 * even hide its death from QEMU). */
		bool orphan = getppid() != parent;

		receive_fds(sock);
		beat = atomic_load(&shm->beat_ns);
		uint64_t unrun = 0, slept = 0;

		if (thread_sample(&th, &runnable, &blocked, &cpu) == 0) {
			uint64_t at = rdb_now_ns();
			int64_t sys;
			uint64_t arg;

			/* blocked since about the last poll: a sample's share */
			if (blocked) {
				uint64_t part = at > prev ? at - prev : 0;

				if (part > 2 * poll_ns)
					part = 2 * poll_ns;
				atomic_fetch_add(&shm->loop_blocked_ns, part);
				if (thread_where(&th, &sys, &arg)) {
					atomic_store(&shm->loop_blocked_sys, sys);
					atomic_store(&shm->loop_blocked_arg, arg);
				} else {
					atomic_store(&shm->loop_blocked_sys, INT64_MIN);
				}
				atomic_store(&shm->loop_blocked_at_ns, at);
			}
			rdb_watchdog_starve_note(&starve, beat, at, runnable, cpu);
			rdb_watchdog_starve_note(&all, 0, at, runnable, cpu);
			if (all.starved_ns > all_hw) {
				unrun = all.starved_ns - all_hw;
				all_hw = all.starved_ns;
			}
		} else {
			starve = (struct rdb_wd_starve){ 0 };
			/* the tally starts over; its high-water mark with it */
			all = (struct rdb_wd_starve){ 0 };
			all_hw = 0;
		}
		now = rdb_now_ns();
		if (now > prev && now - prev > 2 * poll_ns)
			slept = now - prev - poll_ns;
		if (unrun || slept)
			atomic_fetch_add(&shm->host_stall_ns,
					 unrun > slept ? unrun : slept);
		/* this child did not run for a while: neither, perhaps, did
		 * the daemon; one more interval before silence counts */
		graced = rdb_watchdog_overslept(prev, now, poll_ns, graced);
		if (graced) {
			atomic_fetch_add(&shm->oversleeps, 1);
			if (now - prev > atomic_load(&shm->oversleep_max_ns))
				atomic_store(&shm->oversleep_max_ns, now - prev);
		}
		prev = now;
		for (int i = 0; i < RDB_WD_MAX_VMS; i++) {
			struct rdb_wd_slot *s = &shm->slot[i];

			if (orphan && atomic_load(&s->armed) &&
			    !atomic_load(&s->tripped_at_ns)) {
				trip(i, s, "remusdbd exited");
				continue;
			}
			if (graced)
				continue;
			if (!atomic_load(&s->armed)) {
				if (stream_fd[i] >= 0) {
					close(stream_fd[i]);
					stream_fd[i] = -1;
				}
				continue;
			}
			/* (a failed sample zeroed the tally: nothing the host's) */
			t = rdb_watchdog_should_trip(s, beat, starve.starved_ns, now);
			if (t == RDB_WD_KEEP)
				continue;
			if (t == RDB_WD_STARVED) {
				/* counted once per silence, and its longest */
				if (!starve.reported) {
					starve.reported = true;
					atomic_fetch_add(&shm->starves, 1);
				}
				if (starve.starved_ns > atomic_load(&shm->starve_max_ns))
					atomic_store(&shm->starve_max_ns,
						     starve.starved_ns);
				continue;
			}
			host[0] = '\0';
			if (starve.starved_ns >= RDB_NS_PER_MS)
				snprintf(host, sizeof(host), ", %llu ms of it runnable "
					 "and not run by the host",
					 (unsigned long long)(starve.starved_ns /
							      RDB_NS_PER_MS));
			if (t == RDB_WD_SILENT)
				snprintf(why, sizeof(why),
					 "remusdbd silent for %llu ms%s (deadline %llu ms)",
					 (unsigned long long)((now - beat) / RDB_NS_PER_MS),
					 host,
					 (unsigned long long)(atomic_load(&s->deadline_ns) /
							      RDB_NS_PER_MS));
			else
				snprintf(why, sizeof(why),
					 "the guest stopped for %llu ms (deadline %llu ms) "
					 "and remusdbd silent for %llu ms%s",
					 (unsigned long long)((now - atomic_load(&s->stopped_ns)) /
							      RDB_NS_PER_MS),
					 (unsigned long long)(atomic_load(&s->deadline_ns) /
							      RDB_NS_PER_MS),
					 (unsigned long long)((now - beat) / RDB_NS_PER_MS),
					 host);
			trip(i, s, why);
		}
		if (orphan)
			return;
		nanosleep(&ts, NULL);
	}
}

int rdb_watchdog_start(struct rdb_watchdog *wd, uint64_t poll_ns)
{
	void *p;
	pid_t pid, parent;
	int sv[2];

	wd->shm = NULL;
	wd->pid = -1;
	wd->fd_sock = -1;
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	parent = getpid();
	p = mmap(NULL, sizeof(struct rdb_wd_shared), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		int rc = -errno;

		close(sv[0]);
		close(sv[1]);
		return rc;
	}
	memset(p, 0, sizeof(struct rdb_wd_shared));
	wd->shm = p;
	atomic_store(&wd->shm->beat_ns, rdb_now_ns());
	pid = fork();
	if (pid < 0) {
		int rc = -errno;

		munmap(p, sizeof(struct rdb_wd_shared));
		wd->shm = NULL;
		close(sv[0]);
		close(sv[1]);
		return rc;
	}
	if (pid == 0) {
		close(sv[0]);
		child_main(wd->shm, sv[1], parent, poll_ns);
		_exit(0);
	}
	close(sv[1]);
	wd->fd_sock = sv[0];
	wd->pid = pid;
	LOG(INFO, "watchdog running as pid %d", (int)pid);
	return 0;
}

void rdb_watchdog_stop(struct rdb_watchdog *wd)
{
	if (wd->pid > 0) {
		atomic_store(&wd->shm->stop, 1);
		/* It sleeps one poll interval at most; then force it. */
		for (int i = 0; i < 100; i++) {
			if (waitpid(wd->pid, NULL, WNOHANG) == wd->pid) {
				wd->pid = -1;
				break;
			}
			usleep(10000);
		}
		if (wd->pid > 0) {
			kill(wd->pid, SIGKILL);
			waitpid(wd->pid, NULL, 0);
			wd->pid = -1;
		}
	}
	if (wd->shm) {
		munmap(wd->shm, sizeof(struct rdb_wd_shared));
		wd->shm = NULL;
	}
	if (wd->fd_sock >= 0) {
		close(wd->fd_sock);
		wd->fd_sock = -1;
	}
}

int rdb_watchdog_pass_fd(struct rdb_watchdog *wd, int slot, int fd)
{
	char ctrl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &slot, sizeof(slot) };
	struct msghdr m = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctrl, .msg_controllen = sizeof(ctrl),
	};
	struct cmsghdr *c;

	if (wd->fd_sock < 0 || slot < 0 || slot >= RDB_WD_MAX_VMS)
		return -EINVAL;
	memset(ctrl, 0, sizeof(ctrl));
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(fd));
	return sendmsg(wd->fd_sock, &m, MSG_DONTWAIT) < 0 ? -errno : 0;
}

void rdb_watchdog_beat(struct rdb_watchdog *wd)
{
	if (wd->shm)
		atomic_store(&wd->shm->beat_ns, rdb_now_ns());
}

int rdb_watchdog_arm(struct rdb_watchdog *wd, const char *name,
		     const struct rdb_hv_ops *hv, const char *qmp_path,
		     uint64_t deadline_ns)
{
	if (!wd->shm)
		return -ENODEV;
	for (int i = 0; i < RDB_WD_MAX_VMS; i++) {
		struct rdb_wd_slot *s = &wd->shm->slot[i];

		if (atomic_load(&s->armed))
			continue;
		/* Fill the slot before arming it: the child reads armed last. */
		snprintf(s->name, sizeof(s->name), "%s", name);
		s->hv = hv;
		snprintf(s->qmp_path, sizeof(s->qmp_path), "%s", qmp_path);
		atomic_store(&s->deadline_ns, deadline_ns);
		atomic_store(&s->tripped_at_ns, 0);
		atomic_store(&s->stopped_ns, 0);
		atomic_fetch_add(&s->generation, 1);
		rdb_watchdog_beat(wd);
		atomic_store(&s->armed, 1);
		return i;
	}
	return -ENOSPC;
}

void rdb_watchdog_disarm(struct rdb_watchdog *wd, int slot)
{
	if (!wd->shm || slot < 0 || slot >= RDB_WD_MAX_VMS)
		return;
	atomic_store(&wd->shm->slot[slot].armed, 0);
}

void rdb_watchdog_guest_stopped(struct rdb_watchdog *wd, int slot,
				uint64_t since_ns)
{
	if (!wd->shm || slot < 0 || slot >= RDB_WD_MAX_VMS)
		return;
	atomic_store(&wd->shm->slot[slot].stopped_ns, since_ns);
}

uint64_t rdb_watchdog_tripped(const struct rdb_watchdog *wd, int slot)
{
	if (!wd->shm || slot < 0 || slot >= RDB_WD_MAX_VMS)
		return 0;
	return atomic_load(&wd->shm->slot[slot].tripped_at_ns);
}

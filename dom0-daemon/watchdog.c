// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "watchdog"
#include "watchdog.h"
#include "clock.h"
#include "log.h"
#include "qemu/qmp.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Dropping protection must itself be bounded: QEMU answers in ~1 ms. */
#define TRIP_QMP_DEADLINE_NS (2 * RDB_NS_PER_S)

bool rdb_watchdog_should_trip(const struct rdb_wd_slot *s, uint64_t beat_ns,
			      uint64_t now_ns)
{
	uint64_t deadline = atomic_load(&s->deadline_ns);

	if (!atomic_load(&s->armed) || atomic_load(&s->tripped_at_ns))
		return false;
	return now_ns > beat_ns && now_ns - beat_ns > deadline;
}

static void trip(struct rdb_wd_slot *s, uint64_t stalled_ns)
{
	struct rdb_qmp q;
	uint64_t t0 = rdb_now_ns();
	int rc;

	rc = rdb_qmp_connect(&q, s->qmp_path, s->name, t0 + TRIP_QMP_DEADLINE_NS);
	if (rc == 0) {
		rc = rdb_qmp_colo_lost_heartbeat(&q, t0 + TRIP_QMP_DEADLINE_NS);
		rdb_qmp_close(&q);
	}
	atomic_store(&s->tripped_at_ns, rdb_now_ns());
	if (rc == 0)
		LOGVM(ERROR, s->name,
		      "ALARM: remusdbd silent for %llu ms (deadline %llu ms): "
		      "dropped protection (x-colo-lost-heartbeat in %.1f ms); "
		      "the guest runs unprotected",
		      (unsigned long long)(stalled_ns / RDB_NS_PER_MS),
		      (unsigned long long)(atomic_load(&s->deadline_ns) / RDB_NS_PER_MS),
		      (double)(rdb_now_ns() - t0) / RDB_NS_PER_MS);
	else
		LOGVM(ERROR, s->name,
		      "ALARM: remusdbd silent for %llu ms and dropping "
		      "protection over %s failed: %s",
		      (unsigned long long)(stalled_ns / RDB_NS_PER_MS),
		      s->qmp_path, strerror(-rc));
}

static void child_main(struct rdb_wd_shared *shm, uint64_t poll_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(poll_ns / RDB_NS_PER_S),
		.tv_nsec = (long)(poll_ns % RDB_NS_PER_S),
	};

	/* Die with the daemon: an orphaned watchdog would act on stale data. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	while (!atomic_load(&shm->stop)) {
		uint64_t now = rdb_now_ns(), beat = atomic_load(&shm->beat_ns);

		for (int i = 0; i < RDB_WD_MAX_VMS; i++)
			if (rdb_watchdog_should_trip(&shm->slot[i], beat, now))
				trip(&shm->slot[i], now - beat);
		nanosleep(&ts, NULL);
	}
}

int rdb_watchdog_start(struct rdb_watchdog *wd, uint64_t poll_ns)
{
	void *p;
	pid_t pid;

	wd->shm = NULL;
	wd->pid = -1;
	p = mmap(NULL, sizeof(struct rdb_wd_shared), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	memset(p, 0, sizeof(struct rdb_wd_shared));
	wd->shm = p;
	atomic_store(&wd->shm->beat_ns, rdb_now_ns());
	pid = fork();
	if (pid < 0) {
		int rc = -errno;

		munmap(p, sizeof(struct rdb_wd_shared));
		wd->shm = NULL;
		return rc;
	}
	if (pid == 0) {
		child_main(wd->shm, poll_ns);
		_exit(0);
	}
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
}

void rdb_watchdog_beat(struct rdb_watchdog *wd)
{
	if (wd->shm)
		atomic_store(&wd->shm->beat_ns, rdb_now_ns());
}

int rdb_watchdog_arm(struct rdb_watchdog *wd, const char *name,
		     const char *qmp_path, uint64_t deadline_ns)
{
	if (!wd->shm)
		return -ENODEV;
	for (int i = 0; i < RDB_WD_MAX_VMS; i++) {
		struct rdb_wd_slot *s = &wd->shm->slot[i];

		if (atomic_load(&s->armed))
			continue;
		/* Fill the slot before arming it: the child reads armed last. */
		snprintf(s->name, sizeof(s->name), "%s", name);
		snprintf(s->qmp_path, sizeof(s->qmp_path), "%s", qmp_path);
		atomic_store(&s->deadline_ns, deadline_ns);
		atomic_store(&s->tripped_at_ns, 0);
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

uint64_t rdb_watchdog_tripped(const struct rdb_watchdog *wd, int slot)
{
	if (!wd->shm || slot < 0 || slot >= RDB_WD_MAX_VMS)
		return 0;
	return atomic_load(&wd->shm->slot[slot].tripped_at_ns);
}

// SPDX-License-Identifier: GPL-2.0-only
#include "bgjob.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct rdb_bgjob {
	struct rdb_evloop *loop;
	void (*run)(void *arg);
	void (*done)(void *arg);
	void *arg;
	int rd, wr;
};

/*
 * The threads are kept: one that ran a job waits a while for the next
 * (a backup starts one for every epoch's replica writes, 40 a second;
 * a new thread and its join cost 116-169 us of CPU each on a test host,
 * issue 30).  A kept thread waits on its own condition; more than
 * KEEP_MAX idle, or KEEP_NS without a job, and it ends.
 */
#define KEEP_MAX 4
#define KEEP_NS (10 * 1000000000ULL)

struct worker {
	pthread_cond_t cv;
	struct rdb_bgjob *job;	/* the next, given while idle */
	struct worker *next;	/* on the idle list */
};

static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static struct worker *idle;
static unsigned nidle;

static void unlink_idle(struct worker *w)
{
	for (struct worker **pp = &idle; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			nidle--;
			return;
		}
	}
}

/* Puts the thread on the idle list, unless KEEP_MAX are there: whether
 * it was.  Before the job's end is told, so that a job started once the
 * last one ended finds this thread (not a new one). */
static bool park(struct worker *w)
{
	bool parked = false;

	pthread_mutex_lock(&idle_mu);
	if (nidle < KEEP_MAX) {
		w->job = NULL;
		w->next = idle;
		idle = w;
		nidle++;
		parked = true;
	}
	pthread_mutex_unlock(&idle_mu);
	return parked;
}

/* A parked thread's next job, or NULL after KEEP_NS without one: the
 * thread is to end (and is off the list). */
static struct rdb_bgjob *next_job(struct worker *w)
{
	struct rdb_bgjob *j;
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)(KEEP_NS / 1000000000ULL);
	pthread_mutex_lock(&idle_mu);
	while (!w->job &&
	       pthread_cond_timedwait(&w->cv, &idle_mu, &until) != ETIMEDOUT)
		;
	j = w->job;
	if (!j)
		unlink_idle(w);	/* (given one, it was taken off) */
	pthread_mutex_unlock(&idle_mu);
	return j;
}

static void *job_thread(void *opaque)
{
	struct worker *w = opaque;
	struct rdb_bgjob *j = w->job;
	char one = 1;

	pthread_setname_np(pthread_self(), "rdb-bgjob");
	while (j) {
		bool parked;

		/* as on a new thread: no error left by an earlier job's TLS
		 * (the link's handshake reads the queue's last entry) */
		ERR_clear_error();
		j->run(j->arg);
		parked = park(w);
		/* the last touch of the job: the loop (or a join) frees it
		 * once this byte is there (a job given meanwhile waits in
		 * w->job) */
		while (write(j->wr, &one, 1) < 0 && errno == EINTR)
			;
		j = parked ? next_job(w) : NULL;
	}
	pthread_cond_destroy(&w->cv);
	free(w);
	return NULL;
}

/* The job on a kept thread, or on a new one. */
static int dispatch(struct rdb_bgjob *j)
{
	struct worker *w;
	pthread_condattr_t ca;
	pthread_attr_t attr;
	pthread_t th;
	int rc;

	pthread_mutex_lock(&idle_mu);
	w = idle;
	if (w) {
		idle = w->next;
		nidle--;
		w->job = j;
		pthread_cond_signal(&w->cv);
	}
	pthread_mutex_unlock(&idle_mu);
	if (w)
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->job = j;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = -pthread_create(&th, &attr, job_thread, w);
	pthread_attr_destroy(&attr);
	if (rc < 0) {
		pthread_cond_destroy(&w->cv);
		free(w);
	}
	return rc;
}

static void job_free(struct rdb_bgjob *j)
{
	rdb_evloop_del_fd(j->loop, j->rd);
	close(j->rd);
	close(j->wr);
	free(j);
}

static void on_wake(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct rdb_bgjob *j = opaque;
	void (*done)(void *arg) = j->done;
	void *arg = j->arg;
	char c;

	(void)loop;
	(void)ev;
	if (read(fd, &c, 1) != 1)
		return;		/* (a leftover event: see bgjob.h) */
	job_free(j);
	done(arg);
}

int rdb_bgjob_start(struct rdb_evloop *loop, void (*run)(void *arg),
		    void (*done)(void *arg), void *arg, struct rdb_bgjob **out)
{
	struct rdb_bgjob *j = calloc(1, sizeof(*j));
	int fds[2], rc;

	if (!j)
		return -ENOMEM;
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
		rc = -errno;
		free(j);
		return rc;
	}
	*j = (struct rdb_bgjob){ .loop = loop, .run = run, .done = done,
				 .arg = arg, .rd = fds[0], .wr = fds[1] };
	rc = rdb_evloop_add_fd(loop, j->rd, RDB_EV_READ, on_wake, j);
	if (rc == 0) {
		rc = dispatch(j);
		if (rc < 0)
			rdb_evloop_del_fd(loop, j->rd);
	}
	if (rc < 0) {
		close(fds[0]);
		close(fds[1]);
		free(j);
		return rc;
	}
	*out = j;
	return 0;
}

void rdb_bgjob_join(struct rdb_bgjob *j)
{
	struct pollfd pfd = { .fd = j->rd, .events = POLLIN };
	char c;

	/* the run's byte: the thread is done with the job */
	for (;;) {
		ssize_t n = read(j->rd, &c, 1);

		if (n < 0 && errno == EAGAIN)
			poll(&pfd, 1, -1);
		else if (!(n < 0 && errno == EINTR))
			break;	/* the byte (EOF cannot be: the write end is ours) */
	}
	job_free(j);
}

// SPDX-License-Identifier: GPL-2.0-only
#include "bgjob.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

struct rdb_bgjob {
	struct rdb_evloop *loop;
	void (*run)(void *arg);
	void (*done)(void *arg);
	void *arg;
	pthread_t thread;
	int rd, wr;
};

static void *job_thread(void *opaque)
{
	struct rdb_bgjob *j = opaque;
	char one = 1;

	pthread_setname_np(pthread_self(), "rdb-bgjob");
	j->run(j->arg);
	while (write(j->wr, &one, 1) < 0 && errno == EINTR)
		;
	return NULL;
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
	pthread_join(j->thread, NULL);
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
		rc = -pthread_create(&j->thread, NULL, job_thread, j);
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
	pthread_join(j->thread, NULL);
	job_free(j);
}

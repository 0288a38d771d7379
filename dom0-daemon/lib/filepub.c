// SPDX-License-Identifier: GPL-2.0-only
/* A file published whole by a thread of its own (filepub.h). */
#include "filepub.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct rdb_filepub {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char *path, *tmp;
	char *pending;		/* text waiting for the thread; NULL: none */
	size_t pending_len;
	bool stopping;
	atomic_int result;
};

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

static int publish(const struct rdb_filepub *fp, const char *text, size_t len)
{
	int fd = open(fp->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int rc;

	if (fd < 0)
		return -errno;
	rc = write_all(fd, text, len);
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(fp->tmp, fp->path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(fp->tmp);
	return rc;
}

static void *run(void *opaque)
{
	struct rdb_filepub *fp = opaque;

	pthread_setname_np(pthread_self(), "rdb-filepub");
	pthread_mutex_lock(&fp->mu);
	for (;;) {
		char *text;
		size_t len;

		while (!fp->pending && !fp->stopping)
			pthread_cond_wait(&fp->cv, &fp->mu);
		if (!fp->pending)
			break;		/* stopping, nothing left */
		text = fp->pending;
		len = fp->pending_len;
		fp->pending = NULL;
		pthread_mutex_unlock(&fp->mu);
		atomic_store(&fp->result, publish(fp, text, len));
		free(text);
		pthread_mutex_lock(&fp->mu);
	}
	pthread_mutex_unlock(&fp->mu);
	return NULL;
}

int rdb_filepub_start(struct rdb_filepub **out, const char *path)
{
	struct rdb_filepub *fp = calloc(1, sizeof(*fp));
	int rc;

	*out = NULL;
	if (!fp)
		return -ENOMEM;
	fp->path = strdup(path);
	if (!fp->path || asprintf(&fp->tmp, "%s.tmp", path) < 0) {
		free(fp->path);
		free(fp);
		return -ENOMEM;
	}
	atomic_init(&fp->result, 1);
	pthread_mutex_init(&fp->mu, NULL);
	pthread_cond_init(&fp->cv, NULL);
	rc = pthread_create(&fp->thread, NULL, run, fp);
	if (rc) {
		pthread_cond_destroy(&fp->cv);
		pthread_mutex_destroy(&fp->mu);
		free(fp->tmp);
		free(fp->path);
		free(fp);
		return -rc;
	}
	*out = fp;
	return 0;
}

void rdb_filepub_submit(struct rdb_filepub *fp, char *text, size_t len)
{
	char *old;

	pthread_mutex_lock(&fp->mu);
	old = fp->pending;
	fp->pending = text;
	fp->pending_len = len;
	pthread_cond_signal(&fp->cv);
	pthread_mutex_unlock(&fp->mu);
	free(old);		/* superseded before it was written */
}

int rdb_filepub_result(struct rdb_filepub *fp)
{
	return atomic_load(&fp->result);
}

void rdb_filepub_stop(struct rdb_filepub *fp)
{
	if (!fp)
		return;
	pthread_mutex_lock(&fp->mu);
	fp->stopping = true;
	pthread_cond_signal(&fp->cv);
	pthread_mutex_unlock(&fp->mu);
	pthread_join(fp->thread, NULL);
	free(fp->pending);
	pthread_cond_destroy(&fp->cv);
	pthread_mutex_destroy(&fp->mu);
	free(fp->tmp);
	free(fp->path);
	free(fp);
}

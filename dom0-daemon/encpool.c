// SPDX-License-Identifier: GPL-2.0-only
#include "encpool.h"
#include "clock.h"
#include "pagecache.h"
#include "pagedigest.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct worker {
	struct rdb_encpool *pool;
	unsigned idx;
	pthread_t th;
	struct rdb_pagecache cache;
	struct rdb_codec_stats st;
	struct rdb_enc_out out;
	uint64_t seen_gen;
};

struct rdb_encpool {
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	unsigned n, running;
	uint64_t gen;		/* submissions so far */
	bool stop;
	uint32_t allowed;
	struct rdb_rt rt;
	bool rt_on;
	int notify_fd;
	uint64_t fault_delay_ns;	/* the epoch under way (or the next) ends late */
	const uint8_t *records;
	const struct rdb_page_run *runs;
	size_t nruns;
	struct worker w[];
};

static unsigned shard(uint32_t block, uint64_t offset, unsigned n)
{
	uint64_t k = rdb_page_key(block, offset) * 0x9e3779b97f4a7c15ULL;

	return (unsigned)((k >> 32) % n);
}

static int add_run(struct rdb_enc_out *o, uint32_t block, size_t before)
{
	struct rdb_page_run *r = o->nruns ? &o->runs[o->nruns - 1] : NULL;

	if (!r || r->block != block) {
		if (o->nruns == o->cap_runs) {
			size_t n = o->cap_runs ? o->cap_runs * 2 : 16;
			struct rdb_page_run *a = realloc(o->runs, n * sizeof(*a));

			if (!a)
				return -ENOMEM;
			o->runs = a;
			o->cap_runs = n;
		}
		r = &o->runs[o->nruns++];
		*r = (struct rdb_page_run){ .block = block, .start = before };
	}
	r->count++;
	r->len += o->recs.len - before;
	return 0;
}

static void encode_share(struct worker *w)
{
	struct rdb_encpool *pool = w->pool;
	struct rdb_enc_out *o = &w->out;
	uint64_t t0 = rdb_now_ns();

	bool verify = pool->allowed & RDB_FEATURE_VERIFY;
	uint8_t fill[RDB_PAGE_SIZE];
	int filled = -1;

	rdb_buf_reset(&o->recs);
	o->nruns = 0;
	o->nrecs = o->body_bytes = 0;
	o->digest = 0;
	o->err = 0;
	for (size_t i = 0; i < pool->nruns && !o->err; i++) {
		const struct rdb_page_run *r = &pool->runs[i];
		const uint8_t *p = pool->records + r->start;

		for (uint32_t k = 0; k < r->count; k++) {
			size_t sz = rdb_proto_page_record_size(p);
			uint64_t off = rdb_proto_page_record_offset(p);
			size_t before = o->recs.len;
			long body;

			if (shard(r->block, off, pool->n) == w->idx) {
				if (verify && p[8] == RDB_PAGE_RAW) {
					o->digest += rdb_page_digest(r->block, off, p + 9);
				} else if (verify) {
					if (filled != p[9]) {
						memset(fill, p[9], sizeof(fill));
						filled = p[9];
					}
					o->digest += rdb_page_digest(r->block, off, fill);
				}
				if (p[8] == RDB_PAGE_RAW) {
					body = rdb_page_encode(&w->cache, pool->allowed,
							       pool->rt_on ? &pool->rt : NULL,
							       r->block, off, p + 9,
							       &o->recs, &w->st);
				} else {
					/* ZERO from QEMU: as is; the cached
					 * version must follow (the backup
					 * will hold the fill) */
					uint8_t *slot = pool->allowed & RDB_FEATURE_XORRLE ?
						rdb_pagecache_put(&w->cache, r->block, off) :
						NULL;

					if (slot)
						memset(slot, p[9], RDB_PAGE_SIZE);
					body = rdb_buf_append(&o->recs, p, sz) < 0 ?
						-ENOMEM : 1;
					if (body > 0) {
						w->st.pages[RDB_PAGE_ZERO]++;
						w->st.out_bytes[RDB_PAGE_ZERO]++;
						w->st.in_bytes += RDB_PAGE_SIZE;
					}
				}
				if (body < 0 || add_run(o, r->block, before) < 0) {
					o->err = -ENOMEM;
					break;
				}
				o->nrecs++;
				o->body_bytes += (uint64_t)body;
			}
			p += sz;
		}
	}
	w->st.encode_ns += rdb_now_ns() - t0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct rdb_encpool *pool = w->pool;
	char name[16];

	/* named, for per-thread CPU (top -H, /proc/PID/task/TID/comm) */
	snprintf(name, sizeof(name), "rdb-enc%u", w->idx);
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&pool->mu);
	for (;;) {
		while (!pool->stop && w->seen_gen == pool->gen)
			pthread_cond_wait(&pool->go, &pool->mu);
		if (pool->stop)
			break;
		w->seen_gen = pool->gen;
		pthread_mutex_unlock(&pool->mu);
		encode_share(w);
		pthread_mutex_lock(&pool->mu);
		if (pool->running == 1 && pool->fault_delay_ns) {
			/* fault injection: the last worker is late */
			uint64_t ns = pool->fault_delay_ns;
			struct timespec ts = {
				.tv_sec = (time_t)(ns / RDB_NS_PER_S),
				.tv_nsec = (long)(ns % RDB_NS_PER_S),
			};

			pool->fault_delay_ns = 0;
			pthread_mutex_unlock(&pool->mu);
			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
			pthread_mutex_lock(&pool->mu);
		}
		if (--pool->running == 0) {
			pthread_cond_broadcast(&pool->done);
			if (pool->notify_fd >= 0) {
				uint64_t one = 1;

				if (write(pool->notify_fd, &one, sizeof(one)) < 0) {
					/* an eventfd write fails only on overflow */
				}
			}
		}
	}
	pthread_mutex_unlock(&pool->mu);
	return NULL;
}

int rdb_encpool_create(struct rdb_encpool **out, unsigned n,
		       uint32_t cache_pages, uint32_t allowed, int notify_fd)
{
	struct rdb_encpool *pool;
	unsigned started = 0;
	int rc = 0;

	if (n < 1 || n > 64)
		return -EINVAL;
	pool = calloc(1, sizeof(*pool) + n * sizeof(struct worker));
	if (!pool)
		return -ENOMEM;
	pthread_mutex_init(&pool->mu, NULL);
	pthread_cond_init(&pool->go, NULL);
	pthread_cond_init(&pool->done, NULL);
	pool->n = n;
	pool->allowed = allowed;
	pool->notify_fd = notify_fd;
	for (unsigned i = 0; i < n && rc == 0; i++) {
		struct worker *w = &pool->w[i];

		w->pool = pool;
		w->idx = i;
		rdb_buf_init(&w->out.recs);
		rc = rdb_pagecache_init(&w->cache, (allowed & RDB_FEATURE_XORRLE) ?
					cache_pages / n : 0);
	}
	for (unsigned i = 0; i < n && rc == 0; i++) {
		rc = -pthread_create(&pool->w[i].th, NULL, worker_main, &pool->w[i]);
		if (rc == 0)
			started++;
	}
	if (rc < 0) {
		pthread_mutex_lock(&pool->mu);
		pool->stop = true;
		pthread_cond_broadcast(&pool->go);
		pthread_mutex_unlock(&pool->mu);
		for (unsigned i = 0; i < started; i++)
			pthread_join(pool->w[i].th, NULL);
		pool->n = 0;	/* joined: destroy frees only */
		for (unsigned i = 0; i < n; i++) {
			rdb_pagecache_dispose(&pool->w[i].cache);
			rdb_buf_dispose(&pool->w[i].out.recs);
		}
		free(pool);
		return rc;
	}
	*out = pool;
	return 0;
}

void rdb_encpool_set_rt(struct rdb_encpool *pool, const struct rdb_rt *rt)
{
	rdb_encpool_wait(pool);
	pthread_mutex_lock(&pool->mu);
	pool->rt_on = rt != NULL;
	if (rt)
		pool->rt = *rt;
	pthread_mutex_unlock(&pool->mu);
}

void rdb_encpool_destroy(struct rdb_encpool *pool)
{
	if (!pool)
		return;
	rdb_encpool_wait(pool);
	pthread_mutex_lock(&pool->mu);
	pool->stop = true;
	pthread_cond_broadcast(&pool->go);
	pthread_mutex_unlock(&pool->mu);
	for (unsigned i = 0; i < pool->n; i++) {
		pthread_join(pool->w[i].th, NULL);
		rdb_pagecache_dispose(&pool->w[i].cache);
		rdb_buf_dispose(&pool->w[i].out.recs);
		free(pool->w[i].out.runs);
	}
	pthread_cond_destroy(&pool->go);
	pthread_cond_destroy(&pool->done);
	pthread_mutex_destroy(&pool->mu);
	free(pool);
}

int rdb_encpool_submit(struct rdb_encpool *pool, uint64_t epoch,
		       const uint8_t *records, const struct rdb_page_run *runs,
		       size_t nruns)
{
	pthread_mutex_lock(&pool->mu);
	if (pool->running) {
		pthread_mutex_unlock(&pool->mu);
		return -EBUSY;
	}
	pool->rt.epoch = epoch;
	pool->records = records;
	pool->runs = runs;
	pool->nruns = nruns;
	pool->running = pool->n;
	pool->gen++;
	pthread_cond_broadcast(&pool->go);
	pthread_mutex_unlock(&pool->mu);
	return 0;
}

void rdb_encpool_fault_delay(struct rdb_encpool *pool, uint64_t ns)
{
	pthread_mutex_lock(&pool->mu);
	pool->fault_delay_ns = ns;
	pthread_mutex_unlock(&pool->mu);
}

bool rdb_encpool_busy(struct rdb_encpool *pool)
{
	bool b;

	pthread_mutex_lock(&pool->mu);
	b = pool->running > 0;
	pthread_mutex_unlock(&pool->mu);
	return b;
}

void rdb_encpool_wait(struct rdb_encpool *pool)
{
	pthread_mutex_lock(&pool->mu);
	while (pool->running)
		pthread_cond_wait(&pool->done, &pool->mu);
	pthread_mutex_unlock(&pool->mu);
}

unsigned rdb_encpool_nworkers(const struct rdb_encpool *pool)
{
	return pool->n;
}

const struct rdb_enc_out *rdb_encpool_out(const struct rdb_encpool *pool,
					  unsigned w)
{
	return &pool->w[w].out;
}

void rdb_encpool_stats(const struct rdb_encpool *pool,
		       struct rdb_codec_stats *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (unsigned i = 0; i < pool->n; i++)
		rdb_codec_stats_add(sum, &pool->w[i].st);
}

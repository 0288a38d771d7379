// SPDX-License-Identifier: GPL-2.0-only
/* lib/bgjob: a job's run on its thread, its done on the loop (once, after
 * run, with run's writes seen), join instead of done, many at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "bgjob.h"
#include "clock.h"
#include "evloop.h"

struct task {
	struct rdb_bgjob *job;
	pthread_t loop_thread;
	unsigned sleep_ms;
	int result;		/* run's, read by done */
	bool ran_elsewhere;	/* run was not on the loop's thread */
	pthread_t ran_on;
	int nth_here;		/* jobs its thread had run, with this one */
	int done_calls;
	bool done_elsewhere;	/* done was not on the loop's thread */
	int seen_result;
	int *done_total;
};

static __thread int jobs_here;

static void run(void *arg)
{
	struct task *t = arg;
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)t->sleep_ms * 1000000 };

	nanosleep(&ts, NULL);
	t->ran_elsewhere = !pthread_equal(pthread_self(), t->loop_thread);
	t->ran_on = pthread_self();
	t->nth_here = ++jobs_here;
	t->result = 42;
}

static void done(void *arg)
{
	struct task *t = arg;

	t->done_calls++;
	t->done_elsewhere |= !pthread_equal(pthread_self(), t->loop_thread);
	t->seen_result = t->result;
	if (t->done_total)
		(*t->done_total)++;
}

/* Runs the loop until *total reaches want, for at most 5 s. */
static void loop_until(struct rdb_evloop *loop, const int *total, int want)
{
	uint64_t end = rdb_now_ns() + 5 * RDB_NS_PER_S;

	while (*total < want && rdb_now_ns() < end)
		assert_true(rdb_evloop_run_once(loop, 10 * RDB_NS_PER_MS) >= 0);
	assert_int_equal(*total, want);
}

static void test_done_on_the_loop(void **state)
{
	struct rdb_evloop *loop;
	struct task t = { .loop_thread = pthread_self(), .sleep_ms = 30 };
	int total = 0;

	(void)state;
	t.done_total = &total;
	assert_int_equal(rdb_evloop_create(&loop), 0);
	assert_int_equal(rdb_bgjob_start(loop, run, done, &t, &t.job), 0);
	assert_int_equal(t.done_calls, 0);	/* never from start itself */
	loop_until(loop, &total, 1);
	assert_true(t.ran_elsewhere);
	assert_false(t.done_elsewhere);
	assert_int_equal(t.seen_result, 42);
	/* once: nothing more comes */
	for (int i = 0; i < 5; i++)
		assert_true(rdb_evloop_run_once(loop, 10 * RDB_NS_PER_MS) >= 0);
	assert_int_equal(t.done_calls, 1);
	rdb_evloop_destroy(loop);
}

static void test_join_instead(void **state)
{
	struct rdb_evloop *loop;
	struct task t = { .loop_thread = pthread_self(), .sleep_ms = 30 };
	struct task u = { .loop_thread = pthread_self(), .sleep_ms = 0 };

	(void)state;
	assert_int_equal(rdb_evloop_create(&loop), 0);
	/* joined while it runs: waits for it; done never called */
	assert_int_equal(rdb_bgjob_start(loop, run, done, &t, &t.job), 0);
	rdb_bgjob_join(t.job);
	assert_int_equal(t.result, 42);
	/* joined after its thread already woke the loop's pipe */
	assert_int_equal(rdb_bgjob_start(loop, run, done, &u, &u.job), 0);
	usleep(50000);
	rdb_bgjob_join(u.job);
	assert_int_equal(u.result, 42);
	for (int i = 0; i < 5; i++)
		assert_true(rdb_evloop_run_once(loop, 10 * RDB_NS_PER_MS) >= 0);
	assert_int_equal(t.done_calls + u.done_calls, 0);
	rdb_evloop_destroy(loop);
}

static void test_many(void **state)
{
	enum { N = 64 };
	struct rdb_evloop *loop;
	struct task *t = calloc(N, sizeof(*t));
	int total = 0, joined = 0;

	(void)state;
	assert_non_null(t);
	assert_int_equal(rdb_evloop_create(&loop), 0);
	for (int i = 0; i < N; i++) {
		t[i] = (struct task){ .loop_thread = pthread_self(),
				      .sleep_ms = (unsigned)(i % 7), .done_total = &total };
		assert_int_equal(rdb_bgjob_start(loop, run, done, &t[i], &t[i].job), 0);
	}
	/* every third joined (fd numbers freed while others run: later
	 * jobs take them) */
	for (int i = 0; i < N; i += 3) {
		rdb_bgjob_join(t[i].job);
		joined++;
		assert_int_equal(rdb_bgjob_start(loop, run, done, &t[i], &t[i].job), 0);
	}
	loop_until(loop, &total, N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(t[i].done_calls, 1);
		assert_false(t[i].done_elsewhere);
		assert_int_equal(t[i].seen_result, 42);
	}
	assert_true(joined > 0);
	rdb_evloop_destroy(loop);
	free(t);
}

/* One job after another: the second runs on the first's thread, kept
 * (no new thread per job); while one runs, another gets a thread too. */
static void test_thread_kept(void **state)
{
	struct rdb_evloop *loop;
	struct task a = { .loop_thread = pthread_self() };
	struct task b = { .loop_thread = pthread_self() };
	struct task c = { .loop_thread = pthread_self(), .sleep_ms = 100 };
	struct task d = { .loop_thread = pthread_self() };
	int total = 0;

	(void)state;
	a.done_total = b.done_total = c.done_total = d.done_total = &total;
	assert_int_equal(rdb_evloop_create(&loop), 0);
	assert_int_equal(rdb_bgjob_start(loop, run, done, &a, &a.job), 0);
	loop_until(loop, &total, 1);
	/* a's thread went back on the idle list before a's end was told: no
	 * wait here, each next job finds it (red, most runs, when it parked
	 * after: a job started at once got a new thread) */
	for (int i = 0; i < 20; i++) {
		b = (struct task){ .loop_thread = pthread_self(), .done_total = &total };
		assert_int_equal(rdb_bgjob_start(loop, run, done, &b, &b.job), 0);
		loop_until(loop, &total, 2 + i);
		assert_true(pthread_equal(a.ran_on, b.ran_on));
		assert_int_equal(b.nth_here, a.nth_here + 1 + i);
		assert_int_equal(b.seen_result, 42);
	}
	total = 2;
	/* two at once: two threads */
	assert_int_equal(rdb_bgjob_start(loop, run, done, &c, &c.job), 0);
	assert_int_equal(rdb_bgjob_start(loop, run, done, &d, &d.job), 0);
	loop_until(loop, &total, 4);
	assert_false(pthread_equal(c.ran_on, d.ran_on));
	rdb_evloop_destroy(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_done_on_the_loop),
		cmocka_unit_test(test_join_instead),
		cmocka_unit_test(test_many),
		cmocka_unit_test(test_thread_kept),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

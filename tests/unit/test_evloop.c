// SPDX-License-Identifier: GPL-2.0-only
/* RDB-WRAP: rdb_now_ns rdb_log_write */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "evloop.h"
#define RDB_COMPONENT "test"
#include "log.h"

static uint64_t fake_now;
static char last_log[512];

uint64_t __wrap_rdb_now_ns(void)
{
	return fake_now;
}

void __wrap_rdb_log_write(enum rdb_log_level level, const char *component,
			  const char *vm, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_log, sizeof(last_log), fmt, ap);
	va_end(ap);
}

struct counts {
	int fired;
	uint64_t rearm;
	int reads;
	struct rdb_evloop *loop;
	uint64_t other;
};

static uint64_t on_timer(struct rdb_evloop *loop, uint64_t id, void *opaque)
{
	struct counts *c = opaque;

	c->fired++;
	return c->rearm;
}

static void test_timer_fires_once_when_due(void **state)
{
	struct rdb_evloop *loop;
	struct counts c = { 0 };
	uint64_t id;

	fake_now = 1000 * RDB_NS_PER_MS;
	assert_int_equal(rdb_evloop_create(&loop), 0);
	assert_int_equal(rdb_evloop_add_timer(loop, 50 * RDB_NS_PER_MS,
					      on_timer, &c, &id), 0);
	assert_true(id > 0);
	fake_now += 49 * RDB_NS_PER_MS;
	assert_int_equal(rdb_evloop_run_once(loop, 0), 0);
	assert_int_equal(c.fired, 0);
	fake_now += 1 * RDB_NS_PER_MS;
	assert_int_equal(rdb_evloop_run_once(loop, 0), 0);
	assert_int_equal(c.fired, 1);
	fake_now += 500 * RDB_NS_PER_MS;
	assert_int_equal(rdb_evloop_run_once(loop, 0), 0);
	assert_int_equal(c.fired, 1);
	rdb_evloop_destroy(loop);
}

static void test_periodic_timer_keeps_its_id(void **state)
{
	struct rdb_evloop *loop;
	struct counts c = { .rearm = 10 * RDB_NS_PER_MS };
	uint64_t id;

	fake_now = 0;
	assert_int_equal(rdb_evloop_create(&loop), 0);
	assert_int_equal(rdb_evloop_add_timer(loop, 10 * RDB_NS_PER_MS,
					      on_timer, &c, &id), 0);
	for (int i = 0; i < 5; i++) {
		fake_now += 10 * RDB_NS_PER_MS;
		assert_int_equal(rdb_evloop_run_once(loop, 0), 0);
	}
	assert_int_equal(c.fired, 5);
	/* Deleting by the original id stops it: re-arming kept the id. */
	rdb_evloop_del_timer(loop, id);
	fake_now += 100 * RDB_NS_PER_MS;
	assert_int_equal(rdb_evloop_run_once(loop, 0), 0);
	assert_int_equal(c.fired, 5);
	rdb_evloop_del_timer(loop, id);	/* idempotent */
	rdb_evloop_destroy(loop);
}

static void on_read_then_delete(struct rdb_evloop *loop, int fd,
				unsigned events, void *opaque)
{
	struct counts *c = opaque;
	char b[16];

	assert_true(events & RDB_EV_READ);
	c->reads++;
	assert_true(read(fd, b, sizeof(b)) > 0);
	rdb_evloop_del_fd(loop, fd);
}

static void test_fd_event_and_delete_in_callback(void **state)
{
	struct rdb_evloop *loop;
	struct counts c = { 0 };
	int p[2];

	fake_now = 0;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(rdb_evloop_create(&loop), 0);
	assert_int_equal(rdb_evloop_add_fd(loop, p[0], RDB_EV_READ,
					   on_read_then_delete, &c), 0);
	assert_int_equal(rdb_evloop_add_fd(loop, p[0], RDB_EV_READ,
					   on_read_then_delete, &c), -EEXIST);
	assert_int_equal(write(p[1], "xy", 2), 2);
	assert_int_equal(rdb_evloop_run_once(loop, 0), 0);
	assert_int_equal(c.reads, 1);
	assert_int_equal(write(p[1], "z", 1), 1);
	assert_int_equal(rdb_evloop_run_once(loop, 0), 0);
	assert_int_equal(c.reads, 1);	/* deleted: no more callbacks */
	assert_int_equal(rdb_evloop_mod_fd(loop, p[0], RDB_EV_READ), -ENOENT);
	rdb_evloop_destroy(loop);
	close(p[0]);
	close(p[1]);
}

static int hook_calls;

static void hook(struct rdb_evloop *loop, void *opaque)
{
	hook_calls++;
}

static void test_before_sleep_runs_each_iteration(void **state)
{
	struct rdb_evloop *loop;

	assert_int_equal(rdb_evloop_create(&loop), 0);
	rdb_evloop_set_before_sleep(loop, hook, NULL);
	for (int i = 0; i < 3; i++)
		assert_int_equal(rdb_evloop_run_once(loop, 0), 0);
	assert_int_equal(hook_calls, 3);
	rdb_evloop_destroy(loop);
}

static uint64_t sleepy_timer(struct rdb_evloop *loop, uint64_t id, void *opaque)
{
	unsigned *us = opaque;

	fake_now += (uint64_t)*us * 1000;	/* the callback takes that long */
	*us = 0;	/* ran */
	return 0;
}

static void run_until_ran(struct rdb_evloop *loop, const unsigned *us)
{
	for (int i = 0; i < 10 && *us; i++)
		assert_int_equal(rdb_evloop_run_once(loop, 0), 0);
	assert_int_equal(*us, 0);
}

/* A callback that holds the loop 100 ms or more is counted (and logged
 * by name); a quick one is not. */
static void test_slow_callback_counted(void **state)
{
	struct rdb_evloop *loop;
	struct rdb_evloop_slow st;
	unsigned quick = 1000, slow = 130000;
	uint64_t id;

	fake_now = 0;
	assert_int_equal(rdb_evloop_create(&loop), 0);
	assert_int_equal(rdb_evloop_add_timer(loop, 0, sleepy_timer, &quick, &id), 0);
	run_until_ran(loop, &quick);
	rdb_evloop_slow_stats(loop, &st);
	assert_int_equal(st.count, 0);
	assert_int_equal(rdb_evloop_add_timer(loop, 0, sleepy_timer, &slow, &id), 0);
	run_until_ran(loop, &slow);
	rdb_evloop_slow_stats(loop, &st);
	assert_int_equal(st.count, 1);
	assert_true(st.longest_ns >= 130ull * 1000 * 1000);
	rdb_evloop_destroy(loop);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* takes 130 ms of the (fake) clock, 40 ms of them on the CPU */
static uint64_t busy_timer(struct rdb_evloop *loop, uint64_t id, void *opaque)
{
	uint64_t t0 = thread_cpu_ns();
	int *ran = opaque;

	while (thread_cpu_ns() - t0 < 40ull * 1000 * 1000)
		;
	fake_now += 130ull * 1000 * 1000;
	*ran = 1;
	return 0;
}

/* The warning says how much of the hold was the callback's own CPU time:
 * a callback that waited (the CPU, I/O) is not one that worked. */
static void test_slow_callback_cpu_time(void **state)
{
	struct rdb_evloop *loop;
	unsigned slow = 130000;
	double held, cpu;
	uint64_t id;
	int ran = 0;

	fake_now = 0;
	assert_int_equal(rdb_evloop_create(&loop), 0);
	last_log[0] = 0;
	assert_int_equal(rdb_evloop_add_timer(loop, 0, sleepy_timer, &slow, &id), 0);
	run_until_ran(loop, &slow);
	assert_int_equal(sscanf(strstr(last_log, "held the event loop"),
				"held the event loop %lf ms (%lf ms of it on the CPU)",
				&held, &cpu), 2);
	assert_true(held >= 130 && cpu < 20);
	assert_int_equal(rdb_evloop_add_timer(loop, 0, busy_timer, &ran, &id), 0);
	for (int i = 0; i < 10 && !ran; i++)
		assert_int_equal(rdb_evloop_run_once(loop, 0), 0);
	assert_int_equal(sscanf(strstr(last_log, "held the event loop"),
				"held the event loop %lf ms (%lf ms of it on the CPU)",
				&held, &cpu), 2);
	assert_true(held >= 130 && cpu >= 40 && cpu < 130);
	rdb_evloop_destroy(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timer_fires_once_when_due),
		cmocka_unit_test(test_periodic_timer_keeps_its_id),
		cmocka_unit_test(test_fd_event_and_delete_in_callback),
		cmocka_unit_test(test_before_sleep_runs_each_iteration),
		cmocka_unit_test(test_slow_callback_counted),
		cmocka_unit_test(test_slow_callback_cpu_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

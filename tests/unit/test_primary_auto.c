// SPDX-License-Identifier: GPL-2.0-only
/* RDB-WRAP: rdb_now_ns */
/* Protecting again on its own after the backup's remusdbd went away
 * (primary_auto.c): the first attempt 1 s after the drop and only once
 * the VM runs degraded, the intervals 1, 2, 4, ... 30 s, the window
 * (auto_reprotect_s), a refusal ending it, an operator's protect or
 * unprotect ending it, a fenced or failed VM never protected, the
 * counters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RDB_COMPONENT "test"
#include "primary_int.h"

static uint64_t now_ns = 1000 * RDB_NS_PER_S;

uint64_t __wrap_rdb_now_ns(void)
{
	return now_ns;
}

struct fix {
	struct rdb_daemon d;
	struct rdb_vm *vm;
	struct rdb_primary p;
	struct rdb_pri_life life;
	unsigned protects;	/* calls of life.protect */
	int protect_rc;		/* what it returns */
};

static struct fix *F;

static int fake_protect(struct rdb_primary *p, char *err, size_t errlen)
{
	assert_string_equal(p->vm->name, "vm1");
	F->protects++;
	if (F->protect_rc < 0) {
		snprintf(err, errlen, "cannot reach backup: refused");
		return F->protect_rc;
	}
	p->vm->state = RDB_VM_PROTECTING;
	p->ck.active = true;
	return 0;
}

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	F = f;
	f->d.cfg.auto_reprotect_s = 600;
	f->vm = rdb_vm_new(&f->d, "vm1", RDB_ROLE_PRIMARY);
	assert_non_null(f->vm);
	{
		static const char *const kv[][2] = {
			{ "name", "vm1" }, { "qmp", "/run/vm1.qmp" },
			{ "net_socket", "/run/vm1.net" }, { "peer", "10.0.0.2:7788" },
			{ "qemu_arg", "-m 256" },
		};
		char err[200];

		for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
			assert_int_equal(rdb_config_set(&rdb_vm_config_table,
							&f->vm->cfg, kv[i][0],
							kv[i][1], err,
							sizeof(err)), 0);
	}
	f->life.protect = fake_protect;
	f->p.life = &f->life;
	f->p.vm = f->vm;
	f->p.d = &f->d;
	f->vm->pri = &f->p;
	f->vm->state = RDB_VM_PROTECTED;
	f->p.ck.active = true;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	f->vm->pri = NULL;
	rdb_vm_free(f->vm);
	free(f);
	return 0;
}

/* The backup's end closed: the drop, the decision won, degraded. */
static void gone(struct fix *f)
{
	rdb_pri_auto_arm(&f->p, "replication link: backup closed the connection");
	f->p.ck.active = false;
	f->vm->state = RDB_VM_DEGRADED;
}

static void tick_at(struct fix *f, uint64_t t)
{
	now_ns = t;
	rdb_primary_auto_tick(f->vm);
}

/* An attempt under way that fails before it connects. */
static void attempt_fails(struct fix *f)
{
	double next = -1;

	assert_true(f->p.arp.attempting);
	f->p.ck.active = false;
	assert_true(rdb_pri_auto_failed(&f->p, "cannot reach backup", &next) ||
		    !f->p.arp.pending);
	f->vm->state = RDB_VM_DEGRADED;
}

static void test_first_attempt_after_1s_then_protected(void **state)
{
	struct fix *f = *state;
	uint64_t t0 = now_ns;

	gone(f);
	assert_true(f->p.arp.pending);
	tick_at(f, t0 + RDB_NS_PER_S - 1);
	assert_int_equal(f->protects, 0);
	tick_at(f, t0 + RDB_NS_PER_S);
	assert_int_equal(f->protects, 1);
	assert_true(f->p.arp.attempting);
	/* under way: no second attempt */
	tick_at(f, t0 + 10 * RDB_NS_PER_S);
	assert_int_equal(f->protects, 1);
	rdb_pri_auto_protected(&f->p);
	assert_false(f->p.arp.pending);
	assert_int_equal(f->p.arp.protected, 1);
	assert_int_equal(f->p.arp.failed, 0);
}

static void test_intervals_double_to_30s(void **state)
{
	struct fix *f = *state;
	const uint64_t want[] = { 1, 2, 4, 8, 16, 30, 30, 30 };
	uint64_t t = now_ns;

	gone(f);
	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		t += want[i] * RDB_NS_PER_S;
		tick_at(f, t - 1);
		assert_int_equal(f->protects, i);
		tick_at(f, t);
		assert_int_equal(f->protects, i + 1);
		f->protect_rc = 0;
		attempt_fails(f);
	}
	assert_true(f->p.arp.pending);
	assert_int_equal(f->p.arp.failed, 8);
}

static void test_window_ends_attempts(void **state)
{
	struct fix *f = *state;
	uint64_t t = now_ns;

	f->d.cfg.auto_reprotect_s = 10;
	gone(f);
	/* 1 (at 1 s), 2 (at 3 s), 4 (at 7 s); the next would be at 15 s */
	for (uint64_t dt = 1; dt <= 4; dt *= 2) {
		t += dt * RDB_NS_PER_S;
		tick_at(f, t);
		attempt_fails(f);
	}
	assert_int_equal(f->protects, 3);
	assert_false(f->p.arp.pending);
	assert_int_equal(f->p.arp.gave_up, 1);
	tick_at(f, t + 100 * RDB_NS_PER_S);
	assert_int_equal(f->protects, 3);
}

static void test_refusal_ends_attempts(void **state)
{
	struct fix *f = *state;
	double next = 0;

	gone(f);
	tick_at(f, now_ns + RDB_NS_PER_S);
	assert_int_equal(f->protects, 1);
	f->p.arp.refused = true;
	assert_false(rdb_pri_auto_failed(&f->p, "backup refused vm1: it runs it",
					 &next));
	assert_false(f->p.arp.pending);
	assert_int_equal(f->p.arp.refusals, 1);
	f->p.ck.active = false;
	f->vm->state = RDB_VM_UNPROTECTED;
	tick_at(f, now_ns + 100 * RDB_NS_PER_S);
	assert_int_equal(f->protects, 1);
}

static void test_waits_for_the_decision(void **state)
{
	struct fix *f = *state;

	rdb_pri_auto_arm(&f->p, "replication link: backup closed the connection");
	f->p.ck.active = false;
	f->vm->state = RDB_VM_DECIDING;
	f->p.dec_phase = RDB_DEC_DECIDING;
	tick_at(f, now_ns + 5 * RDB_NS_PER_S);
	assert_int_equal(f->protects, 0);
	assert_true(f->p.arp.pending);
	f->p.dec_phase = RDB_DEC_NONE;
	f->vm->state = RDB_VM_DEGRADED;
	tick_at(f, now_ns);
	assert_int_equal(f->protects, 1);
}

static void test_fenced_or_failed_never_protected(void **state)
{
	struct fix *f = *state;

	gone(f);
	f->vm->state = RDB_VM_FENCED;
	f->p.dec_phase = RDB_DEC_FENCED;
	tick_at(f, now_ns + 2 * RDB_NS_PER_S);
	assert_int_equal(f->protects, 0);
	assert_false(f->p.arp.pending);

	f->p.dec_phase = RDB_DEC_NONE;
	gone(f);
	f->vm->state = RDB_VM_FAILED;
	tick_at(f, now_ns + 2 * RDB_NS_PER_S);
	assert_int_equal(f->protects, 0);
	assert_false(f->p.arp.pending);
}

static void test_operator_ends_attempts(void **state)
{
	struct fix *f = *state;

	/* unprotect */
	gone(f);
	rdb_pri_auto_cancel(&f->p, "operator unprotect");
	f->vm->state = RDB_VM_UNPROTECTED;
	tick_at(f, now_ns + 2 * RDB_NS_PER_S);
	assert_int_equal(f->protects, 0);
	/* the operator's own protect committing: not counted as ours */
	gone(f);
	f->vm->state = RDB_VM_PROTECTING;
	f->p.ck.active = true;
	tick_at(f, now_ns + 2 * RDB_NS_PER_S);
	assert_int_equal(f->protects, 0);
	rdb_pri_auto_protected(&f->p);
	assert_false(f->p.arp.pending);
	assert_int_equal(f->p.arp.protected, 0);
}

static void test_another_drop_cause_ends_attempts(void **state)
{
	struct fix *f = *state;

	gone(f);
	tick_at(f, now_ns + RDB_NS_PER_S);
	assert_int_equal(f->protects, 1);
	/* the attempt's protection dropped for a local cause */
	rdb_pri_auto_cancel(&f->p, "the watchdog dropped protection");
	assert_false(f->p.arp.pending);
	/* the attempt's link closed again by the backup: the same window */
	gone(f);
	tick_at(f, now_ns + RDB_NS_PER_S);
	assert_int_equal(f->protects, 2);
	rdb_pri_auto_arm(&f->p, "replication link: backup closed the connection");
	f->p.ck.active = false;
	f->vm->state = RDB_VM_DEGRADED;
	assert_true(f->p.arp.pending);
	assert_int_equal(f->p.arp.attempts, 1);
	assert_int_equal(f->p.arp.failed, 1);
	tick_at(f, now_ns + RDB_NS_PER_S);
	assert_int_equal(f->protects, 3);
}

static void test_off(void **state)
{
	struct fix *f = *state;

	f->d.cfg.auto_reprotect_s = 0;
	gone(f);
	assert_false(f->p.arp.pending);
	tick_at(f, now_ns + 5 * RDB_NS_PER_S);
	assert_int_equal(f->protects, 0);
}

static void test_protect_refused_at_once_retries(void **state)
{
	struct fix *f = *state;

	gone(f);
	f->protect_rc = -EBUSY;
	tick_at(f, now_ns + RDB_NS_PER_S);
	assert_int_equal(f->protects, 1);
	assert_false(f->p.arp.attempting);
	assert_true(f->p.arp.pending);
	f->protect_rc = 0;
	tick_at(f, now_ns + 2 * RDB_NS_PER_S - 1);
	assert_int_equal(f->protects, 1);
	tick_at(f, now_ns + 1);
	assert_int_equal(f->protects, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_first_attempt_after_1s_then_protected, setup, teardown),
		cmocka_unit_test_setup_teardown(test_intervals_double_to_30s, setup, teardown),
		cmocka_unit_test_setup_teardown(test_window_ends_attempts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusal_ends_attempts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waits_for_the_decision, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fenced_or_failed_never_protected, setup, teardown),
		cmocka_unit_test_setup_teardown(test_operator_ends_attempts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_another_drop_cause_ends_attempts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_protect_refused_at_once_retries, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

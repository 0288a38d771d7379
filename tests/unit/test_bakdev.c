// SPDX-License-Identifier: GPL-2.0-only
/*
 * The backup's device table (bakdev.h): its loops call every device in
 * table order and skip hooks a kind leaves out; the failover's steps stop
 * at the first device that fails; written maps are all fresh or none; a
 * hand-over that fails hands back the devices before it, last first; the
 * per-kind hooks get each registered kind's instances together, in order,
 * even none; the guest's network devices are found by their frames'
 * device number.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "bakdev.h"
#include "lineage.h"

/* ---- fake devices: each records its calls in a shared log ---- */

static char calls[1024];

struct fake {
	struct rdb_bakdev dev;
	int rc;			/* what its failing hooks return */
	uint64_t next;		/* its kind's tick */
	uint64_t bytes;
	bool torn;
};

static void note(const struct rdb_bakdev *d, const char *what)
{
	char s[64];

	snprintf(s, sizeof(s), "%s:%s ", d->id, what);
	strncat(calls, s, sizeof(calls) - strlen(calls) - 1);
}

static int f_rc(const struct rdb_bakdev *d)
{
	return ((const struct fake *)d)->rc;
}

static int f_record(const struct rdb_bakdev *d, struct rdb_lineage *l)
{
	note(d, "record");
	if (f_rc(d) == 0)
		l->ndisks = d->index + 1;
	return f_rc(d);
}

static void f_counters(const struct rdb_bakdev *d, struct rdb_bakdev_sum *s)
{
	s->n++;
	s->applied += ((const struct fake *)d)->bytes;
	s->consistent = s->consistent && !((const struct fake *)d)->torn;
}

static int f_check(struct rdb_bakdev *d)
{
	note(d, "check");
	return f_rc(d);
}

static int f_fresh(struct rdb_bakdev *d, char *err, size_t errlen)
{
	note(d, "fresh");
	if (f_rc(d) < 0)
		snprintf(err, errlen, "%s: no map", d->id);
	return f_rc(d);
}

static void f_forget(struct rdb_bakdev *d)
{
	note(d, "forget");
}

static int f_serve(struct rdb_bakdev *d)
{
	note(d, "serve");
	return f_rc(d);
}

static int f_open(struct rdb_bakdev *d)
{
	note(d, "open");
	return f_rc(d);
}

static bool f_to_wire(struct rdb_bakdev *d, const uint8_t *frame, size_t len)
{
	return true;
}

static void f_restore(const struct rdb_bakdev *d, struct rdb_bakdev_restore *r)
{
	r->drives[r->ndrives++] = d->id;
}

static int f_hand_over(struct rdb_bakdev *d, const struct rdb_nic_dst *dst,
		       unsigned ndst, struct rdb_handover *h, char *err,
		       size_t errlen)
{
	note(d, "over");
	if (f_rc(d) < 0)
		snprintf(err, errlen, "%s refused", d->id);
	return f_rc(d);
}

static void f_hand_back(struct rdb_bakdev *d, const struct rdb_nic_dst *dst,
			unsigned ndst)
{
	note(d, "back");
}

static void f_free(struct rdb_bakdev *d)
{
	note(d, "free");
}

static void k_running(const struct rdb_bakdev_host *h,
		      struct rdb_bakdev *const *v, unsigned n)
{
	char s[32];

	snprintf(s, sizeof(s), "running(%u", n);
	strncat(calls, s, sizeof(calls) - strlen(calls) - 1);
	for (unsigned i = 0; i < n; i++) {
		strncat(calls, " ", sizeof(calls) - strlen(calls) - 1);
		strncat(calls, v[i]->id, sizeof(calls) - strlen(calls) - 1);
	}
	strncat(calls, ") ", sizeof(calls) - strlen(calls) - 1);
}

static uint64_t k_tick(const struct rdb_bakdev_host *h,
		       struct rdb_bakdev *const *v, unsigned n)
{
	uint64_t next = 0;

	for (unsigned i = 0; i < n; i++) {
		uint64_t x = ((struct fake *)v[i])->next;

		if (x && (!next || x < next))
			next = x;
	}
	return next;
}

static const struct rdb_bakdev_ops disk_like = {
	.kind = "disk", .record = f_record, .counters = f_counters,
	.check = f_check, .fresh = f_fresh, .forget = f_forget,
	.serve = f_serve, .restore = f_restore, .hand_over = f_hand_over,
	.free = f_free, .running = k_running, .tick = k_tick,
};

static const struct rdb_bakdev_ops nic_like = {
	.kind = "nic", .open = f_open, .to_wire = f_to_wire,
	.hand_over = f_hand_over, .hand_back = f_hand_back, .free = f_free,
	.running = k_running, .tick = k_tick,
};

/* a kind with every hook but free left out: the loops must skip them */
static const struct rdb_bakdev_ops sparse = {
	.kind = "x", .free = f_free,
};

static const struct rdb_bakdev_host host;

static void fake_init(struct fake *f, const struct rdb_bakdev_ops *ops,
		      unsigned index)
{
	memset(f, 0, sizeof(*f));
	rdb_bakdev_init(&f->dev, ops, index, &host);
}

/* A VM's devices as the role adds them: its NICs first (VM_SETUP),
 * then its disks (DISK_SETUP). */
static void table(struct rdb_bakdevs *t, struct fake *n0, struct fake *n1,
		  struct fake *d0, struct fake *d1)
{
	rdb_bakdevs_init(t, &host);
	assert_int_equal(rdb_bakdevs_kind(t, &nic_like), 0);
	assert_int_equal(rdb_bakdevs_kind(t, &disk_like), 0);
	fake_init(n0, &nic_like, 0);
	fake_init(n1, &nic_like, 1);
	fake_init(d0, &disk_like, 0);
	fake_init(d1, &disk_like, 1);
	assert_int_equal(rdb_bakdevs_add(t, &n0->dev), 0);
	assert_int_equal(rdb_bakdevs_add(t, &n1->dev), 0);
	assert_int_equal(rdb_bakdevs_add(t, &d0->dev), 0);
	assert_int_equal(rdb_bakdevs_add(t, &d1->dev), 0);
}

static void test_steps(void **state)
{
	struct fake n0, n1, d0, d1;
	struct rdb_bakdevs t;
	struct rdb_lineage l = { 0 };
	struct rdb_bakdev_sum s;
	struct rdb_bakdev_restore r;
	char err[100] = "";

	table(&t, &n0, &n1, &d0, &d1);
	assert_string_equal(d1.dev.id, "disk1");
	assert_string_equal(n0.dev.id, "nic0");

	/* the guest's network devices, by their frames' device number */
	assert_ptr_equal(rdb_bakdevs_net(&t, 0), &n0.dev);
	assert_ptr_equal(rdb_bakdevs_net(&t, 1), &n1.dev);
	assert_null(rdb_bakdevs_net(&t, 2));

	/* the failover's steps: every device that has the hook, in order,
	 * none after the first that fails */
	calls[0] = 0;
	assert_int_equal(rdb_bakdevs_check(&t), 0);
	assert_int_equal(rdb_bakdevs_serve(&t), 0);
	assert_int_equal(rdb_bakdevs_open(&t), 0);
	assert_string_equal(calls, "disk0:check disk1:check disk0:serve "
			    "disk1:serve nic0:open nic1:open ");
	d0.rc = -EIO;
	n0.rc = -EADDRINUSE;
	calls[0] = 0;
	assert_int_equal(rdb_bakdevs_check(&t), -EIO);
	assert_int_equal(rdb_bakdevs_serve(&t), -EIO);
	assert_int_equal(rdb_bakdevs_open(&t), -EADDRINUSE);
	assert_string_equal(calls, "disk0:check disk0:serve nic0:open ");
	d0.rc = n0.rc = 0;

	/* the lineage record: each device's entry, the first error ends it */
	calls[0] = 0;
	assert_int_equal(rdb_bakdevs_record(&t, &l), 0);
	assert_int_equal(l.ndisks, 2);
	d0.rc = -ENOENT;
	assert_int_equal(rdb_bakdevs_record(&t, &l), -ENOENT);
	assert_string_equal(calls, "disk0:record disk1:record disk0:record ");
	d0.rc = 0;

	/* written maps: all fresh, or every one forgotten */
	calls[0] = 0;
	assert_int_equal(rdb_bakdevs_fresh(&t, err, sizeof(err)), 0);
	assert_string_equal(calls, "disk0:fresh disk1:fresh ");
	d1.rc = -ENOSPC;
	calls[0] = 0;
	assert_int_equal(rdb_bakdevs_fresh(&t, err, sizeof(err)), -ENOSPC);
	assert_string_equal(calls, "disk0:fresh disk1:fresh disk0:forget "
			    "disk1:forget ");
	assert_string_equal(err, "disk1: no map");
	d1.rc = 0;

	/* counters summed over the devices that have them */
	d0.bytes = 5;
	d1.bytes = 7;
	d1.torn = true;
	rdb_bakdevs_counters(&t, &s);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.applied, 12);
	assert_false(s.consistent);

	/* what the restore is given, in device order */
	rdb_bakdevs_restore(&t, &r);
	assert_int_equal(r.ndrives, 2);
	assert_string_equal(r.drives[0], "disk0");
	assert_string_equal(r.drives[1], "disk1");

	/* freed in table order, and the table is empty after */
	calls[0] = 0;
	rdb_bakdevs_free(&t);
	assert_string_equal(calls, "nic0:free nic1:free disk0:free disk1:free ");
	assert_int_equal(t.n, 0);
}

static void test_hand_over(void **state)
{
	struct fake n0, n1, d0, d1;
	struct rdb_bakdevs t;
	char err[100] = "";

	table(&t, &n0, &n1, &d0, &d1);
	calls[0] = 0;
	assert_int_equal(rdb_bakdevs_hand_over(&t, NULL, 0, NULL, err,
					       sizeof(err)), 0);
	assert_string_equal(calls, "nic0:over nic1:over disk0:over disk1:over ");

	/* the first disk refuses: those before it come back, last first
	 * (a disk has nothing to take back), the rest are not asked */
	d0.rc = -EINVAL;
	calls[0] = 0;
	assert_int_equal(rdb_bakdevs_hand_over(&t, NULL, 0, NULL, err,
					       sizeof(err)), -EINVAL);
	assert_string_equal(calls, "nic0:over nic1:over disk0:over nic1:back "
			    "nic0:back ");
	assert_string_equal(err, "disk0 refused");

	/* the first device refuses: nothing to give back */
	d0.rc = 0;
	n0.rc = -ENOMEM;
	calls[0] = 0;
	assert_int_equal(rdb_bakdevs_hand_over(&t, NULL, 0, NULL, err,
					       sizeof(err)), -ENOMEM);
	assert_string_equal(calls, "nic0:over ");
}

static void test_kinds(void **state)
{
	struct fake n0, n1, d0, d1, x;
	struct rdb_bakdevs t;

	/* a kind registered, with no instance yet: its hooks are called */
	rdb_bakdevs_init(&t, &host);
	assert_int_equal(rdb_bakdevs_kind(&t, &nic_like), 0);
	assert_int_equal(rdb_bakdevs_kind(&t, &disk_like), 0);
	calls[0] = 0;
	rdb_bakdevs_running(&t);
	assert_string_equal(calls, "running(0) running(0) ");
	assert_int_equal(rdb_bakdevs_tick(&t), 0);

	/* each kind's instances together, in table order, kinds in the
	 * order registered (a disk added before the NICs changes neither) */
	fake_init(&d0, &disk_like, 0);
	fake_init(&n0, &nic_like, 0);
	fake_init(&n1, &nic_like, 1);
	fake_init(&d1, &disk_like, 1);
	assert_int_equal(rdb_bakdevs_add(&t, &d0.dev), 0);
	assert_int_equal(rdb_bakdevs_add(&t, &n0.dev), 0);
	assert_int_equal(rdb_bakdevs_add(&t, &n1.dev), 0);
	assert_int_equal(rdb_bakdevs_add(&t, &d1.dev), 0);
	calls[0] = 0;
	rdb_bakdevs_running(&t);
	assert_string_equal(calls, "running(2 nic0 nic1) running(2 disk0 disk1) ");

	/* the soonest any kind wants; 0 only when none does */
	n1.next = 30;
	d0.next = 20;
	assert_int_equal(rdb_bakdevs_tick(&t), 20);
	d0.next = 0;
	assert_int_equal(rdb_bakdevs_tick(&t), 30);
	n1.next = 0;
	assert_int_equal(rdb_bakdevs_tick(&t), 0);

	/* a kind not registered is refused; the loops skip missing hooks */
	fake_init(&x, &sparse, 0);
	assert_int_equal(rdb_bakdevs_add(&t, &x.dev), -EINVAL);
	assert_int_equal(rdb_bakdevs_kind(&t, &sparse), 0);
	assert_int_equal(rdb_bakdevs_add(&t, &x.dev), 0);
	calls[0] = 0;
	assert_int_equal(rdb_bakdevs_check(&t), 0);
	rdb_bakdevs_close(&t);
	rdb_bakdevs_unserve(&t);
	rdb_bakdevs_acked(&t);
	rdb_bakdevs_poll(&t);
	rdb_bakdevs_release(&t, true);
	assert_false(rdb_bakdevs_pending(&t, NULL, 0));
	assert_string_equal(calls, "disk0:check disk1:check ");
}

static void test_bound(void **state)
{
	struct fake f[RDB_BAKDEV_MAX + 1];
	struct rdb_bakdevs t;

	rdb_bakdevs_init(&t, &host);
	for (unsigned k = 0; k < RDB_BAKDEV_KINDS; k++)
		assert_int_equal(rdb_bakdevs_kind(&t, &sparse), 0);
	assert_int_equal(rdb_bakdevs_kind(&t, &sparse), -ENOSPC);
	for (unsigned i = 0; i <= RDB_BAKDEV_MAX; i++) {
		fake_init(&f[i], &sparse, i);
		assert_int_equal(rdb_bakdevs_add(&t, &f[i].dev),
				 i < RDB_BAKDEV_MAX ? 0 : -ENOSPC);
	}
	assert_int_equal(t.n, RDB_BAKDEV_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_steps),
		cmocka_unit_test(test_hand_over),
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

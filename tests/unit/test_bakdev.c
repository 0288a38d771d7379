// SPDX-License-Identifier: GPL-2.0-only
/*
 * The backup's device table (bakdev.h): its loops call every device in
 * table order and skip hooks a kind leaves out; the failover's steps stop
 * at the first device that fails; written maps are all fresh or none; a
 * hand-over that fails hands back the devices before it, last first; the
 * per-kind hooks get each registered kind's instances together, in order,
 * even none; the guest's network devices are found by their frames'
 * device number.  And the disk kind (backup_disk.c): DISK_SETUP in
 * order only, a replica and its buffer in the stage, its entries in the
 * lineage records, written maps, and the status the backup has always
 * shown (the first replica, the set's state, one object per disk).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backup_dev.h"
#include "bakdev.h"
#include "daemon.h"
#include "lineage.h"
#include "role.h"
#include "vm.h"

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

/* ---- the disk kind ---- */

static struct rdb_buf link_frames;
static unsigned link_writes;
static struct rdb_bakdev_owned owned_now;
static char vm_dir_path[256];

static struct rdb_buf *h_link_out(void *o)
{
	return &link_frames;
}

static void h_want_write(void *o)
{
	link_writes++;
}

static int h_vm_dir(void *o, char *dir, size_t len)
{
	snprintf(dir, len, "%s", vm_dir_path);
	return 0;
}

static void h_owned(void *o, struct rdb_bakdev_owned *out)
{
	*out = owned_now;
}

/* DISK_SETUP of disk k, size bytes, as the link delivers it. */
static int disk_setup(struct rdb_bakdevs *t, struct rdb_stage *st,
		      uint32_t k, uint64_t size, bool committed)
{
	struct rdb_proto_decoder dec;
	struct rdb_buf b;
	struct rdb_frame f;
	int rc;

	rdb_buf_init(&b);
	rdb_proto_decoder_init(&dec);
	assert_int_equal(rdb_proto_put_disk_setup(&b, k, size), 0);
	assert_int_equal(rdb_proto_decoder_feed(&dec, b.data, b.len), 0);
	assert_int_equal(rdb_proto_decoder_next(&dec, &f), 1);
	rc = rdb_bak_disk_setup(t, st, &f, committed);
	rdb_proto_decoder_dispose(&dec);
	rdb_buf_dispose(&b);
	return rc;
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), m = strlen(tail);

	return n >= m && !strcmp(s + n - m, tail);
}

static void test_disk(void **state)
{
	char dir[] = "/tmp/test_bakdevXXXXXX", path[300];
	struct rdb_daemon d = { .loop = NULL };
	struct rdb_vm vm = { .name = "vm1" };
	struct rdb_bakrun run = { .held = false };
	struct rdb_bakdev_host h = {
		.d = &d, .vm = &vm, .run = &run, .link_out = h_link_out,
		.want_write = h_want_write, .vm_dir = h_vm_dir,
		.owned = h_owned,
	};
	struct rdb_bakdev_restore r;
	struct rdb_bakdevs t;
	struct rdb_stage st;
	struct rdb_lineage l = { .role = RDB_LINEAGE_REPLICA };
	struct rdb_handover ho = { .ndisks = 0 };
	struct rdb_bakdev_sum s;
	struct stat sb;
	char err[300] = "";
	json_t *o, *disk, *disks;

	assert_non_null(mkdtemp(dir));
	snprintf(vm_dir_path, sizeof(vm_dir_path), "%s/vm1", dir);
	assert_int_equal(mkdir(vm_dir_path, 0700), 0);
	d.cfg.state_dir = dir;
	rdb_config_defaults(&rdb_vm_config_table, &vm.cfg);
	rdb_buf_init(&link_frames);
	rdb_stage_init(&st);
	rdb_bakdevs_init(&t, &h);
	assert_int_equal(rdb_bakdevs_kind(&t, &rdb_bak_disk_ops), 0);

	/* in order only: not disk 1 first */
	assert_int_equal(disk_setup(&t, &st, 1, 1u << 20, false), -EPROTO);
	assert_int_equal(t.n, 0);

	/* a fresh replica of the disk's size; without RESYNC nothing goes
	 * back to the primary */
	assert_int_equal(disk_setup(&t, &st, 0, 1u << 20, false), 0);
	snprintf(path, sizeof(path), "%s/disk.img", vm_dir_path);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, 1u << 20);
	assert_int_equal(st.ndisks, 1);
	assert_non_null(st.disks[0]);
	assert_int_equal(st.disks[0]->max_bytes, 256u << 20);
	assert_int_equal(link_frames.len, 0);

	/* with RESYNC, a DISK_BASE back (no base offered: a whole copy) */
	st.features = RDB_FEATURE_RESYNC;
	assert_int_equal(disk_setup(&t, &st, 1, 2u << 20, false), 0);
	assert_true(link_frames.len > 0);
	assert_int_equal(link_writes, 1);
	assert_int_equal(st.ndisks, 2);
	assert_ptr_equal(rdb_bakdevs_net(&t, 0), NULL);

	/* none after the initial state began */
	assert_int_equal(disk_setup(&t, &st, 2, 1u << 20, true), -EPROTO);
	assert_int_equal(t.n, 2);

	/* the replica record names each image; a restored one needs the
	 * written maps, every disk's */
	assert_int_equal(rdb_bakdevs_record(&t, &l), 0);
	assert_int_equal(l.ndisks, 2);
	assert_true(ends_with(l.d[1].disk, "/vm1/disk1.img"));
	assert_string_equal(l.d[1].wmap, "");
	memset(&l, 0, sizeof(l));
	l.role = RDB_LINEAGE_RESTORED;
	assert_int_equal(rdb_bakdevs_record(&t, &l), -ENOENT);
	assert_int_equal(rdb_bakdevs_fresh(&t, err, sizeof(err)), 0);
	assert_int_equal(rdb_bakdevs_record(&t, &l), 0);
	assert_true(ends_with(l.d[0].wmap, "/vm1/written.map"));
	assert_true(ends_with(l.d[1].wmap, "/vm1/written1.map"));

	/* torn: none; counters over both; nothing served, so no drive */
	assert_int_equal(rdb_bakdevs_check(&t), 0);
	rdb_bakdevs_counters(&t, &s);
	assert_int_equal(s.n, 2);
	assert_true(s.consistent);
	rdb_bakdevs_restore(&t, &r);
	assert_int_equal(r.ndrives, 0);

	/* status: "disk" (the first replica, the set's state), "disks" */
	o = json_object();
	rdb_bakdevs_status(&t, o);
	disk = json_object_get(o, "disk");
	disks = json_object_get(o, "disks");
	assert_true(ends_with(json_string_value(json_object_get(disk, "replica")),
			      "/vm1/disk.img"));
	assert_int_equal(json_integer_value(json_object_get(disk, "size")), 1u << 20);
	assert_true(json_is_true(json_object_get(disk, "consistent")));
	assert_true(json_is_false(json_object_get(disk, "served")));
	assert_true(json_is_false(json_object_get(disk, "writing")));
	assert_int_equal(json_array_size(disks), 2);
	assert_int_equal(json_integer_value(json_object_get(
		json_array_get(disks, 1), "index")), 1);
	json_decref(o);

	/* a thread owns the replicas: what they were when it began, for the
	 * set and for each disk */
	owned_now.commit = true;
	owned_now.at.consistent = false;
	owned_now.at.buffered = 7;
	o = json_object();
	rdb_bakdevs_status(&t, o);
	disk = json_object_get(o, "disk");
	assert_true(json_is_false(json_object_get(disk, "consistent")));
	assert_int_equal(json_integer_value(json_object_get(disk,
			 "buffered_bytes")), 7);
	assert_true(json_is_true(json_object_get(disk, "writing")));
	assert_true(json_is_false(json_object_get(json_array_get(
		json_object_get(o, "disks"), 1), "consistent")));
	json_decref(o);
	memset(&owned_now, 0, sizeof(owned_now));

	/* re-protect: each replica and its written map */
	assert_int_equal(rdb_bakdevs_hand_over(&t, NULL, 0, &ho, err,
					       sizeof(err)), 0);
	assert_int_equal(ho.ndisks, 2);
	assert_true(ends_with(ho.disk_paths[1], "/vm1/disk1.img"));
	assert_true(ends_with(ho.wmap_paths[0], "/vm1/written.map"));

	/* no written maps: the record cannot name them */
	rdb_bakdevs_forget(&t);
	assert_int_equal(rdb_bakdevs_record(&t, &l), -ENOENT);

	rdb_bakdevs_free(&t);
	rdb_stage_dispose(&st);
	rdb_buf_dispose(&link_frames);
	rdb_config_dispose(&rdb_vm_config_table, &vm.cfg);
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		assert_int_equal(system(cmd), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_steps),
		cmocka_unit_test(test_hand_over),
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_bound),
		cmocka_unit_test(test_disk),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

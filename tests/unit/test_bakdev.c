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
 * shown (the first replica, the set's state, one object per disk); the
 * set marked applying before a replica is made; and a replica of the
 * protection the primary names kept in place as the resync's base only
 * when its marker says it is whole, in this boot, at an epoch at or past
 * the one the primary saw committed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backup_dev.h"
#include "bakdev.h"
#include "daemon.h"
#include "lineage.h"
#include "replmark.h"
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
	struct rdb_replmark mark;
	struct rdb_replmark_view mv;
	struct rdb_bakdev_host h = {
		.d = &d, .vm = &vm, .run = &run, .link_out = h_link_out,
		.want_write = h_want_write, .vm_dir = h_vm_dir,
		.owned = h_owned, .mark = &mark,
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
	/* the role opens the VM's marker before the first DISK_SETUP: it
	 * says the set is whole at epoch 3 */
	snprintf(path, sizeof(path), "%s/%s", vm_dir_path, RDB_REPLMARK_FILE);
	rdb_replmark_init(&mark);
	assert_int_equal(rdb_replmark_open(&mark, path), 0);
	assert_int_equal(rdb_replmark_done(&mark, 1, 3), 0);

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
	/* the set is at no epoch from the first replica made */
	snprintf(path, sizeof(path), "%s/%s", vm_dir_path, RDB_REPLMARK_FILE);
	assert_int_equal(rdb_replmark_read(path, &mv), 0);
	assert_false(mv.done);
	assert_int_equal(mv.state, RDB_REPLMARK_APPLYING);

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
	rdb_replmark_close(&mark);
	rdb_buf_dispose(&link_frames);
	rdb_config_dispose(&rdb_vm_config_table, &vm.cfg);
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		assert_int_equal(system(cmd), 0);
	}
}

/* ---- the replica as a resync base ---- */

#define G 0x5eed5eed00000001ull
#define MiB (1u << 20)

static char rb_dir[64];
static struct rdb_daemon rb_d;
static struct rdb_vm rb_vm = { .name = "vm1" };
static struct rdb_bakrun rb_run;

static void replica_path(unsigned k, char *buf, size_t len)
{
	if (k == 0)
		snprintf(buf, len, "%.200s/disk.img", vm_dir_path);
	else
		snprintf(buf, len, "%.200s/disk%u.img", vm_dir_path, k);
}

/* Disk k's replica as an earlier protection left it: size bytes, each
 * 4 KiB block filled with its own byte. */
static void put_replica(unsigned k, uint64_t size)
{
	static uint8_t blk[4096];
	char p[300];
	int fd;

	replica_path(k, p, sizeof(p));
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	for (uint64_t off = 0; off < size; off += sizeof(blk)) {
		memset(blk, (int)(0x40 + k + off / sizeof(blk)), sizeof(blk));
		assert_int_equal(pwrite(fd, blk, sizeof(blk), (off_t)off),
				 (ssize_t)sizeof(blk));
	}
	close(fd);
}

/* Whether disk k's replica is still what put_replica wrote (kept), or
 * all zeroes (made afresh), of size bytes. */
static bool replica_kept(unsigned k, uint64_t size)
{
	static uint8_t blk[4096];
	bool kept = true, zero = true;
	struct stat sb;
	char p[300];
	int fd;

	replica_path(k, p, sizeof(p));
	fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	assert_int_equal(sb.st_size, size);
	for (uint64_t off = 0; off < size; off += sizeof(blk)) {
		assert_int_equal(pread(fd, blk, sizeof(blk), (off_t)off),
				 (ssize_t)sizeof(blk));
		for (size_t i = 0; i < sizeof(blk); i++) {
			kept = kept && blk[i] == (uint8_t)(0x40 + k + off / sizeof(blk));
			zero = zero && blk[i] == 0;
		}
	}
	close(fd);
	assert_true(kept != zero);
	return kept;
}

/* This host's lineage: the replica of protection gen, n disks. */
static void put_lineage(uint64_t gen, unsigned n)
{
	struct rdb_lineage l = { .role = RDB_LINEAGE_REPLICA, .generation = gen };
	char err[300];

	for (unsigned k = 0; k < n; k++)
		replica_path(k, l.d[k].disk, sizeof(l.d[k].disk));
	l.ndisks = n;
	assert_int_equal(rdb_lineage_save(rb_dir, "vm1", &l, err, sizeof(err)), 0);
}

/* The marker as a daemon of this host left it: state of epoch of gen,
 * written in this boot or another. */
static void put_mark(enum rdb_replmark_state state, uint64_t gen,
		     uint64_t epoch, bool this_boot)
{
	struct rdb_replmark m;
	char p[300];

	snprintf(p, sizeof(p), "%s/%s", vm_dir_path, RDB_REPLMARK_FILE);
	rdb_replmark_init(&m);
	assert_int_equal(rdb_replmark_open(&m, p), 0);
	if (!this_boot)
		snprintf(m.boot, sizeof(m.boot), "0badb007-0000-0000-0000-000000000000");
	assert_int_equal(rdb_replmark_applying(&m, gen, epoch), 0);
	if (state == RDB_REPLMARK_DONE)
		assert_int_equal(rdb_replmark_done(&m, gen, epoch), 0);
	if (state == RDB_REPLMARK_SERVED)
		assert_int_equal(rdb_replmark_served(&m, gen, epoch), 0);
	rdb_replmark_close(&m);
}

/*
 * A new protection's DISK_SETUPs with feature RESYNC, as a new backup
 * role takes them (its marker opened first), each disk k of sizes[k]
 * offered (base_gen, base_epochs[k]); what went back for each in
 * bases[k], the disks' lineage entries in rec.
 */
static void protect(unsigned n, const uint64_t *sizes, uint64_t base_gen,
		    const uint64_t *base_epochs, struct rdb_disk_base *bases,
		    struct rdb_lineage *rec)
{
	struct rdb_replmark mark;
	struct rdb_bakdev_host h = {
		.d = &rb_d, .vm = &rb_vm, .run = &rb_run, .link_out = h_link_out,
		.want_write = h_want_write, .vm_dir = h_vm_dir,
		.owned = h_owned, .mark = &mark,
	};
	struct rdb_proto_decoder dec;
	struct rdb_bakdevs t;
	struct rdb_stage st;
	char p[300];

	snprintf(p, sizeof(p), "%s/%s", vm_dir_path, RDB_REPLMARK_FILE);
	rdb_replmark_init(&mark);
	assert_int_equal(rdb_replmark_open(&mark, p), 0);
	rdb_stage_init(&st);
	st.features = RDB_FEATURE_RESYNC;
	rdb_bakdevs_init(&t, &h);
	assert_int_equal(rdb_bakdevs_kind(&t, &rdb_bak_disk_ops), 0);
	for (unsigned k = 0; k < n; k++) {
		struct rdb_proto_decoder in;
		struct rdb_buf b;
		struct rdb_frame f;

		rdb_buf_init(&b);
		rdb_proto_decoder_init(&in);
		assert_int_equal(rdb_proto_put_disk_setup_base(&b, k, sizes[k],
				 base_gen, base_epochs[k]), 0);
		assert_int_equal(rdb_proto_decoder_feed(&in, b.data, b.len), 0);
		assert_int_equal(rdb_proto_decoder_next(&in, &f), 1);
		assert_int_equal(rdb_bak_disk_setup(&t, &st, &f, false), 0);
		rdb_proto_decoder_dispose(&in);
		rdb_buf_dispose(&b);
	}
	/* one DISK_BASE per disk, in order */
	rdb_proto_decoder_init(&dec);
	assert_int_equal(rdb_proto_decoder_feed(&dec, link_frames.data,
						link_frames.len), 0);
	for (unsigned k = 0; k < n; k++) {
		struct rdb_frame f;

		assert_int_equal(rdb_proto_decoder_next(&dec, &f), 1);
		assert_int_equal(f.type, RDB_MSG_DISK_BASE);
		assert_int_equal(f.device, k);
		assert_int_equal(rdb_msg_disk_base_parse(&f, &bases[k]), 0);
	}
	rdb_proto_decoder_dispose(&dec);
	rdb_buf_reset(&link_frames);
	memset(rec, 0, sizeof(*rec));
	rec->role = RDB_LINEAGE_REPLICA;
	assert_int_equal(rdb_bakdevs_record(&t, rec), 0);
	rdb_bakdevs_free(&t);
	rdb_stage_dispose(&st);
	rdb_replmark_close(&mark);
}

static int rb_setup(void **state)
{
	strcpy(rb_dir, "/tmp/test_bakdev_rbXXXXXX");
	assert_non_null(mkdtemp(rb_dir));
	snprintf(vm_dir_path, sizeof(vm_dir_path), "%s/vm1", rb_dir);
	assert_int_equal(mkdir(vm_dir_path, 0700), 0);
	rb_d.cfg.state_dir = rb_dir;
	rdb_config_defaults(&rdb_vm_config_table, &rb_vm.cfg);
	rdb_buf_init(&link_frames);
	put_lineage(G, 2);
	put_replica(0, MiB);
	put_replica(1, 2 * MiB);
	return 0;
}

static int rb_teardown(void **state)
{
	char cmd[300];

	rdb_buf_dispose(&link_frames);
	rdb_config_dispose(&rdb_vm_config_table, &rb_vm.cfg);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", rb_dir);
	return system(cmd);
}

static const uint64_t sizes[2] = { MiB, 2 * MiB };

/* Whole at epoch 7 of G in this boot: both replicas kept, in place, for
 * an offer of epoch 5 and 7; the primary sends what it wrote since (no
 * extent of ours).  The second disk is kept too: the marker the first
 * disk's setup rewrote (applying) is not what decides. */
static void test_replica_kept(void **state)
{
	const uint64_t epochs[2] = { 5, 7 };
	struct rdb_disk_base base[2];
	struct rdb_replmark_view v;
	struct rdb_lineage rec;
	char p[300], img[300];

	put_mark(RDB_REPLMARK_DONE, G, 7, true);
	protect(2, sizes, G, epochs, base, &rec);
	for (unsigned k = 0; k < 2; k++) {
		assert_true(base[k].generation == G);
		assert_int_equal(base[k].shift, 20);
		assert_int_equal(base[k].count, 0);
		assert_true(replica_kept(k, sizes[k]));
		replica_path(k, img, sizeof(img));
		assert_string_equal(rec.d[k].disk, img);
	}
	/* from the setup on, the set is at no epoch: a daemon killed now
	 * leaves replicas that must not be kept */
	snprintf(p, sizeof(p), "%s/%s", vm_dir_path, RDB_REPLMARK_FILE);
	assert_int_equal(rdb_replmark_read(p, &v), 0);
	assert_int_equal(v.state, RDB_REPLMARK_APPLYING);
	protect(2, sizes, G, epochs, base, &rec);
	for (unsigned k = 0; k < 2; k++) {
		assert_true(base[k].generation == 0);
		assert_non_null(strstr(base[k].reason, "being written"));
		assert_false(replica_kept(k, sizes[k]));
	}
}

/* Each reason a replica of G is not a base: a whole copy (a fresh
 * replica, zeroes), and why, to the primary. */
static void refused(enum rdb_replmark_state state, uint64_t gen,
		    uint64_t epoch, bool this_boot, uint64_t offer_epoch,
		    const char *why)
{
	const uint64_t epochs[2] = { offer_epoch, offer_epoch };
	struct rdb_disk_base base[2];
	struct rdb_lineage rec;

	put_replica(0, MiB);
	put_replica(1, 2 * MiB);
	put_mark(state, gen, epoch, this_boot);
	protect(2, sizes, G, epochs, base, &rec);
	for (unsigned k = 0; k < 2; k++) {
		assert_true(base[k].generation == 0);
		if (!strstr(base[k].reason, why))
			fail_msg("disk %u: \"%s\" does not say \"%s\"", k,
				 base[k].reason, why);
		assert_false(replica_kept(k, sizes[k]));
	}
}

static void test_replica_refused(void **state)
{
	char p[300];

	/* killed inside an epoch's apply */
	refused(RDB_REPLMARK_APPLYING, G, 8, true, 5, "being written when "
		"remusdbd stopped (epoch 8");
	/* whole, but before this boot: the page cache's writes are gone */
	refused(RDB_REPLMARK_DONE, G, 7, false, 5, "another boot");
	/* whole, at an epoch before the one the primary saw committed */
	refused(RDB_REPLMARK_DONE, G, 4, true, 5, "before epoch 5");
	/* whole, of another protection */
	refused(RDB_REPLMARK_DONE, G + 1, 7, true, 5, "not of");
	/* served to a restored guest */
	refused(RDB_REPLMARK_SERVED, G, 7, true, 5, "restored");
	/* no marker at all */
	snprintf(p, sizeof(p), "%s/%s", vm_dir_path, RDB_REPLMARK_FILE);
	put_replica(0, MiB);
	put_mark(RDB_REPLMARK_DONE, G, 7, true);
	assert_int_equal(unlink(p), 0);
	{
		const uint64_t epochs[2] = { 5, 5 };
		struct rdb_disk_base base[2];
		struct rdb_lineage rec;

		protect(1, sizes, G, epochs, base, &rec);
		assert_true(base[0].generation == 0);
		assert_non_null(strstr(base[0].reason, "no replica marker"));
	}
}

/* Whole, but not this disk: another size, or a disk the lineage does
 * not name; the lineage of another protection.  Each disk on its own. */
static void test_replica_mismatch(void **state)
{
	const uint64_t epochs[2] = { 5, 5 };
	const uint64_t other[2] = { 2 * MiB, 2 * MiB };
	struct rdb_disk_base base[2];
	struct rdb_lineage rec;

	put_mark(RDB_REPLMARK_DONE, G, 7, true);
	protect(2, other, G, epochs, base, &rec);
	assert_true(base[0].generation == 0);
	assert_non_null(strstr(base[0].reason, "is 1048576 bytes"));
	assert_true(base[1].generation == G);
	assert_true(replica_kept(1, 2 * MiB));

	put_replica(0, MiB);
	put_lineage(G, 1);
	put_mark(RDB_REPLMARK_DONE, G, 7, true);
	protect(2, sizes, G, epochs, base, &rec);
	assert_true(base[0].generation == G);
	assert_true(base[1].generation == 0);
	assert_non_null(strstr(base[1].reason, "names 1 disk(s), not disk 1"));

	put_replica(0, MiB);
	put_lineage(G + 2, 1);
	put_mark(RDB_REPLMARK_DONE, G, 7, true);
	protect(1, sizes, G, epochs, base, &rec);
	assert_true(base[0].generation == 0);
	assert_non_null(strstr(base[0].reason, "replica of protection"));
	assert_false(replica_kept(0, MiB));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_steps),
		cmocka_unit_test(test_hand_over),
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_bound),
		cmocka_unit_test(test_disk),
		cmocka_unit_test_setup_teardown(test_replica_kept, rb_setup,
						rb_teardown),
		cmocka_unit_test_setup_teardown(test_replica_refused, rb_setup,
						rb_teardown),
		cmocka_unit_test_setup_teardown(test_replica_mismatch, rb_setup,
						rb_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

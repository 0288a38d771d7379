// SPDX-License-Identifier: GPL-2.0-only
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "hv.h"
#include "proc.h"
#include "qemu/restore.h"
#include "sdunit.h"
#include "watchdog.h"

/* 0x07 len "pc": a configuration without subsections (QEMU 10.0 pc). */
static const uint8_t CONFIG[] = { 0x07, 0, 0, 0, 2, 'p', 'c' };
/* One FULL section "x" (id 3, instance 0, version 1, one byte), EOF. */
static const uint8_t DEV[] = { 0x04, 0, 0, 0, 3, 1, 'x', 0, 0, 0, 0,
			       0, 0, 0, 1, 0xab, 0x00 };

/* The expected stream, written out independently of restore.c. */
struct exp {
	uint8_t b[16384];
	size_t n;
};

static void e_bytes(struct exp *e, const void *p, size_t n)
{
	assert_true(e->n + n <= sizeof(e->b));
	memcpy(e->b + e->n, p, n);
	e->n += n;
}

static void e8(struct exp *e, uint8_t v)
{
	e_bytes(e, &v, 1);
}

static void e32(struct exp *e, uint32_t v)
{
	for (int s = 24; s >= 0; s -= 8)
		e8(e, (uint8_t)(v >> s));
}

static void e64(struct exp *e, uint64_t v)
{
	e32(e, (uint32_t)(v >> 32));
	e32(e, (uint32_t)v);
}

static void estr(struct exp *e, const char *s)
{
	e8(e, (uint8_t)strlen(s));
	e_bytes(e, s, strlen(s));
}

static void e_sub(struct exp *e, const char *name)
{
	e8(e, 0x05);
	estr(e, name);
	e32(e, 1);
}

static void e_caps_ignore_shared_only(struct exp *e)
{
	e_sub(e, "configuration/capabilities");
	e32(e, 1);
	estr(e, "x-ignore-shared");
}

static void e_tail(struct exp *e)
{
	const char *vmdesc = "{\"page_size\": 4096, \"devices\": []}";

	e_bytes(e, DEV, sizeof(DEV));
	e8(e, 0x06);
	e32(e, (uint32_t)strlen(vmdesc));
	e_bytes(e, vmdesc, strlen(vmdesc));
}

static const uint32_t RAM_ID = 0x7ffffff0u;

static void test_stream_byte_exact(void **state)
{
	static uint8_t bios[2 * 4096];
	static struct exp e;
	struct rdb_restore_block blocks[2] = {
		{ "pc.ram", 1ULL << 30, true, NULL },	/* 1 GiB: not sent */
		{ "pc.bios", sizeof(bios), false, bios },
	};
	struct rdb_restore_spec spec = { CONFIG, sizeof(CONFIG), blocks, 2,
					 DEV, sizeof(DEV) };
	uint8_t *s;
	size_t n;

	memset(bios + 4096, 0x99, 4096);	/* page 0 zero, page 1 data */
	e.n = 0;
	e32(&e, 0x5145564d);
	e32(&e, 3);
	e_bytes(&e, CONFIG, sizeof(CONFIG));
	e_caps_ignore_shared_only(&e);
	/* RAM START: both blocks listed, gpa 0 each */
	e8(&e, 0x01);
	e32(&e, RAM_ID);
	estr(&e, "ram");
	e32(&e, 0);
	e32(&e, 4);
	e64(&e, ((1ULL << 30) + sizeof(bios)) | 0x04);
	estr(&e, "pc.ram");
	e64(&e, 1ULL << 30);
	e64(&e, 0);
	estr(&e, "pc.bios");
	e64(&e, sizeof(bios));
	e64(&e, 0);
	e64(&e, 0x10);
	e8(&e, 0x7e);
	e32(&e, RAM_ID);
	/* RAM END: pc.bios only; a zero page, then a data page (CONTINUE) */
	e8(&e, 0x03);
	e32(&e, RAM_ID);
	e64(&e, 0x02);
	estr(&e, "pc.bios");
	e8(&e, 0);
	e64(&e, 4096 | 0x08 | 0x20);
	e_bytes(&e, bios + 4096, 4096);
	e64(&e, 0x10);
	e8(&e, 0x7e);
	e32(&e, RAM_ID);
	e_tail(&e);

	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), 0);
	assert_int_equal(n, e.n);
	assert_memory_equal(s, e.b, e.n);
	free(s);
}

/* The primary's target-page-bits and uuid stay; a capability list it had
 * is kept, and x-ignore-shared appears once, last. */
static void test_config_reemitted(void **state)
{
	static uint8_t rom[4096];
	static struct exp in, want;
	struct rdb_restore_block blk = { "pc.rom", 4096, false, rom };
	struct rdb_restore_spec spec = { NULL, 0, &blk, 1, DEV, sizeof(DEV) };
	const uint8_t uuid[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
				   14, 15, 16 };
	uint8_t *s;
	size_t n;

	in.n = 0;
	e8(&in, 0x07);
	e32(&in, 14);
	e_bytes(&in, "pc-q35-10.0xyz", 14);
	e_sub(&in, "configuration/target-page-bits");
	e32(&in, 12);
	e_sub(&in, "configuration/capabilities");
	e32(&in, 2);
	estr(&in, "x-ignore-shared");
	estr(&in, "mapped-ram");
	e_sub(&in, "configuration/uuid");
	e_bytes(&in, uuid, 16);
	spec.config = in.b;
	spec.config_len = in.n;

	want.n = 0;
	e8(&want, 0x07);
	e32(&want, 14);
	e_bytes(&want, "pc-q35-10.0xyz", 14);
	e_sub(&want, "configuration/target-page-bits");
	e32(&want, 12);
	e_sub(&want, "configuration/capabilities");
	e32(&want, 2);
	estr(&want, "mapped-ram");
	estr(&want, "x-ignore-shared");
	e_sub(&want, "configuration/uuid");
	e_bytes(&want, uuid, 16);

	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), 0);
	assert_true(n > 8 + want.n);
	assert_memory_equal(s + 8, want.b, want.n);
	assert_int_equal(s[8 + want.n], 0x01);	/* RAM START follows */
	free(s);
}

static void test_bad_config(void **state)
{
	static uint8_t rom[4096];
	static struct exp c;
	struct rdb_restore_block blk = { "pc.rom", 4096, false, rom };
	struct rdb_restore_spec spec = { NULL, 0, &blk, 1, DEV, sizeof(DEV) };
	uint8_t *s;
	size_t n;

	spec.config = DEV;			/* not a configuration */
	spec.config_len = sizeof(DEV);
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EPROTO);
	spec.config = CONFIG;			/* name cut short */
	spec.config_len = sizeof(CONFIG) - 1;
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EPROTO);

	c.n = 0;				/* unknown subsection */
	e_bytes(&c, CONFIG, sizeof(CONFIG));
	e_sub(&c, "configuration/new-thing");
	e32(&c, 0);
	spec.config = c.b;
	spec.config_len = c.n;
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EPROTO);

	c.n = 0;				/* capability count too big */
	e_bytes(&c, CONFIG, sizeof(CONFIG));
	e_sub(&c, "configuration/capabilities");
	e32(&c, 1000);
	spec.config_len = c.n;
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EPROTO);

	c.n = 0;				/* capability name past the end */
	e_bytes(&c, CONFIG, sizeof(CONFIG));
	e_sub(&c, "configuration/capabilities");
	e32(&c, 1);
	e8(&c, 40);
	e_bytes(&c, "x-ignore", 8);
	spec.config_len = c.n;
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EPROTO);
}

static void test_invalid_specs(void **state)
{
	static uint8_t rom[4096];
	static char longid[300];
	struct rdb_restore_block ok = { "pc.bios", 4096, false, rom };
	struct rdb_restore_block bad;
	struct rdb_restore_spec spec = { CONFIG, sizeof(CONFIG), &ok, 1, DEV,
					 sizeof(DEV) };
	uint8_t *s;
	size_t n;

	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), 0);
	free(s);

	spec.nblocks = 0;
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EINVAL);
	spec.nblocks = 1;

	spec.devstate_len = sizeof(DEV) - 1;	/* no EOF at the end */
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EINVAL);
	spec.devstate = DEV + 1;		/* not a FULL section first */
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EINVAL);
	spec.devstate = DEV;
	spec.devstate_len = sizeof(DEV);

	spec.blocks = &bad;
	memset(longid, 'a', 256);		/* idstr > 255 */
	bad = (struct rdb_restore_block){ longid, 4096, false, rom };
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EINVAL);
	longid[255] = 0;			/* exactly 255 is fine */
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), 0);
	free(s);
	bad = (struct rdb_restore_block){ "", 4096, false, rom };
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EINVAL);
	bad = (struct rdb_restore_block){ "pc.bios", 4096, false, NULL };
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EINVAL);
	bad = (struct rdb_restore_block){ "pc.bios", 4000, false, rom };
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EINVAL);
	bad = (struct rdb_restore_block){ "pc.ram", 0, true, NULL };
	assert_int_equal(rdb_restore_stream_build(&spec, &s, &n), -EINVAL);
}

static void test_restore_argv(void **state)
{
	char *common[] = { "-m", "256" };
	char **argv;
	int i;

	assert_int_equal(rdb_restore_argv("qemu", common, 2, "/s/pc.ram.img",
					  256 << 20, "/r/q", NULL, "/r/n",
					  "/s/console", NULL, NULL, NULL, NULL, 0, NULL, 0, &argv), 0);
	assert_string_equal(argv[0], "qemu");
	assert_string_equal(argv[1], "-m");
	assert_string_equal(argv[2], "256");
	assert_string_equal(argv[3], "-object");
	assert_string_equal(argv[4], "memory-backend-file,id=pc.ram,"
			    "size=268435456,mem-path=/s/pc.ram.img,share=on");
	assert_string_equal(argv[5], "-machine");
	assert_string_equal(argv[6], "memory-backend=pc.ram");
	assert_string_equal(argv[7], "-qmp");
	assert_string_equal(argv[8], "unix:/r/q,server=on,wait=off");
	assert_string_equal(argv[9], "-netdev");
	assert_string_equal(argv[11], "-serial");
	assert_string_equal(argv[12], "file:/s/console");
	assert_string_equal(argv[13], "-incoming");
	assert_string_equal(argv[14], "defer");
	assert_null(argv[15]);
	rdb_restore_argv_free(argv);

	/* without a NIC or console */
	assert_int_equal(rdb_restore_argv("qemu", NULL, 0, "/i", 1 << 20,
					  "/q", NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, 0, &argv), 0);
	for (i = 0; argv[i]; i++)
		;
	assert_int_equal(i, 9);
	assert_string_equal(argv[7], "-incoming");
	rdb_restore_argv_free(argv);
	assert_int_equal(rdb_restore_argv("qemu", NULL, 0, "/i", 1000, "/q",
					  NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, 0, &argv),
			 -EINVAL);

	/* everything: the watchdog's QMP after the first, the replica's
	 * drive reconnecting (a new disk server may take its socket over) */
	{
		char drive[200];

		assert_int_equal(rdb_qemu_nbd_drive(drive, sizeof(drive), "disk3",
						    "/r/vm.disk3", RDB_HV_DISK_PFLASH), 0);
		assert_string_equal(drive, "if=pflash,unit=1,driver=nbd,"
				    "server.type=unix,server.path=/r/vm.disk3,"
				    "reconnect-delay=15");
		assert_int_equal(rdb_qemu_nbd_drive(drive, sizeof(drive), "disk2",
						    "/r/vm.disk2", RDB_HV_DISK_QCOW2), 0);
		assert_string_equal(drive, "if=none,id=disk2,driver=qcow2,"
				    "file.driver=nbd,file.server.type=unix,"
				    "file.server.path=/r/vm.disk2,"
				    "file.reconnect-delay=15");
		assert_int_equal(rdb_qemu_nbd_drive(drive, sizeof(drive), "disk0",
						    "/r/vm.disk", 0), 0);
		assert_string_equal(drive, "if=none,id=disk0,driver=nbd,"
				    "server.type=unix,server.path=/r/vm.disk,"
				    "reconnect-delay=15");
		assert_int_equal(rdb_restore_argv("qemu", NULL, 0, "/i", 1 << 20,
						  "/q", "/wd", "/n", "/c", "/ser", drive,
						  "/e", NULL, 0, NULL, 0, &argv), 0);
		for (i = 0; argv[i]; i++)
			;
		assert_int_equal(i, 21);
		assert_string_equal(argv[7], "-qmp");
		assert_string_equal(argv[8], "unix:/wd,server=on,wait=off");
		assert_string_equal(argv[9], "-netdev");
		/* the console: logged to its file, and a socket to type on */
		assert_string_equal(argv[11], "-chardev");
		assert_string_equal(argv[12], "socket,id=rdbser0,path=/ser,"
				    "server=on,wait=off,logfile=/c");
		assert_string_equal(argv[13], "-serial");
		assert_string_equal(argv[14], "chardev:rdbser0");
		assert_string_equal(argv[16], drive);
		assert_string_equal(argv[19], "-incoming");
		rdb_restore_argv_free(argv);
	}
	/* a VM's other disks: their drives after the first, in order; none
	 * without the first */
	{
		const char *more[] = { "if=none,id=disk1", "if=none,id=disk2" };

		assert_int_equal(rdb_restore_argv("qemu", NULL, 0, "/i", 1 << 20,
						  "/q", NULL, NULL, NULL, NULL, "id=disk0",
						  NULL, more, 2, NULL, 0, &argv), 0);
		for (i = 0; argv[i]; i++)
			;
		assert_int_equal(i, 15);
		assert_string_equal(argv[7], "-drive");
		assert_string_equal(argv[8], "id=disk0");
		assert_string_equal(argv[9], "-drive");
		assert_string_equal(argv[10], more[0]);
		assert_string_equal(argv[11], "-drive");
		assert_string_equal(argv[12], more[1]);
		assert_string_equal(argv[13], "-incoming");
		rdb_restore_argv_free(argv);
		assert_int_equal(rdb_restore_argv("qemu", NULL, 0, "/i", 1 << 20,
						  "/q", NULL, NULL, NULL, NULL, NULL,
						  NULL, more, 2, NULL, 0, &argv), 0);
		for (i = 0; argv[i]; i++)
			assert_string_not_equal(argv[i], "-drive");
		rdb_restore_argv_free(argv);
		/* the other NICs: net1, net2 after net0 */
		{
			const char *nets[] = { "/r/vm.net1", "/r/vm.net2" };

			assert_int_equal(rdb_restore_argv("qemu", NULL, 0, "/i", 1 << 20,
							  "/q", NULL, "/r/vm.net", NULL, NULL,
							  NULL, NULL, NULL, 0, nets, 2, &argv), 0);
			assert_string_equal(argv[7], "-netdev");
			assert_non_null(strstr(argv[8], "id=net0,"));
			assert_string_equal(argv[9], "-netdev");
			assert_string_equal(argv[10], "stream,id=net1,server=off,"
					    "addr.type=unix,addr.path=/r/vm.net1,"
					    "reconnect-ms=100");
			assert_string_equal(argv[11], "-netdev");
			assert_non_null(strstr(argv[12], "id=net2,"));
			assert_string_equal(argv[13], "-incoming");
			rdb_restore_argv_free(argv);
		}
	}
}

/* The QEMU a backup starts runs on guest_cpus, not on the daemon's. */
static void test_spawn_on_cpus(void **state)
{
	char *sleeper[] = { "sleep", "30", NULL };
	struct rdb_hv_proc p;
	cpu_set_t want, got, none;
	int cpu = -1;

	assert_int_equal(sched_getaffinity(0, sizeof(got), &got), 0);
	for (int c = CPU_SETSIZE - 1; c >= 0 && cpu < 0; c--)
		if (CPU_ISSET(c, &got))
			cpu = c;		/* the last CPU we may use */
	CPU_ZERO(&want);
	CPU_SET(cpu, &want);
	rdb_hv_proc_init(&p);
	assert_int_equal(rdb_hv_spawn(sleeper, "/dev/null", &want, &p), 0);
	assert_int_equal(sched_getaffinity(p.pid, sizeof(got), &got), 0);
	assert_true(CPU_EQUAL(&got, &want));
	assert_int_equal(rdb_hv_kill(&p, rdb_now_ns() + 2 * RDB_NS_PER_S), 0);

	/* no CPU at all: the kernel refuses, and the spawn says so */
	CPU_ZERO(&none);
	assert_int_equal(rdb_hv_spawn(sleeper, "/dev/null", &none, &p), -EINVAL);
	assert_int_equal(p.pid, -1);
}

static void *parked(void *arg)
{
	int *stop = arg;

	while (!__atomic_load_n(stop, __ATOMIC_ACQUIRE))
		usleep(1000);
	return NULL;
}

/* A QEMU libvirt started is placed after the fact: every thread of it
 * (here: this process, two threads), and a thread it starts later
 * inherits the placement. */
static void test_place_running(void **state)
{
	cpu_set_t orig, want, got, none;
	pthread_t t1, t2;
	int stop = 0, cpu = -1;

	assert_int_equal(sched_getaffinity(0, sizeof(orig), &orig), 0);
	for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
		if (CPU_ISSET(c, &orig))
			cpu = c;		/* the first CPU we may use */
	CPU_ZERO(&want);
	CPU_SET(cpu, &want);
	assert_int_equal(pthread_create(&t1, NULL, parked, &stop), 0);

	assert_true(rdb_hv_place(getpid(), &want) >= 2);
	assert_int_equal(pthread_getaffinity_np(t1, sizeof(got), &got), 0);
	assert_true(CPU_EQUAL(&got, &want));
	assert_int_equal(sched_getaffinity(0, sizeof(got), &got), 0);
	assert_true(CPU_EQUAL(&got, &want));
	assert_int_equal(pthread_create(&t2, NULL, parked, &stop), 0);
	assert_int_equal(pthread_getaffinity_np(t2, sizeof(got), &got), 0);
	assert_true(CPU_EQUAL(&got, &want));

	/* refused (no CPU), and a process that is gone */
	CPU_ZERO(&none);
	assert_int_equal(rdb_hv_place(getpid(), &none), -EINVAL);
	assert_int_equal(rdb_hv_place(0x7ffffff0, &want), -ENOENT);

	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	assert_true(rdb_hv_place(getpid(), &orig) >= 1);
}

static void test_spawn_and_kill(void **state)
{
	char *sleeper[] = { "sleep", "30", NULL };
	char *nosuch[] = { "/nonexistent/qemu", NULL };
	char *quick[] = { "sh", "-c", "echo hi; exit 3", NULL };
	struct rdb_hv_proc p;
	uint64_t t;
	int st = 0, r;

	rdb_hv_proc_init(&p);
	assert_int_equal(rdb_hv_poll_exit(&p, &st), -ECHILD);
	assert_int_equal(rdb_hv_spawn(nosuch, "/dev/null", NULL, &p), -ENOENT);
	assert_int_equal(p.pid, -1);

	assert_int_equal(rdb_hv_spawn(sleeper, "/dev/null", NULL, &p), 0);
	assert_true(p.pid > 0);
	assert_int_equal(rdb_hv_poll_exit(&p, &st), 0);
	/* its start time tells it from a later process with its number:
	 * after this process's own, stable, and none once it is gone */
	{
		uint64_t s0 = rdb_hv_proc_start(p.pid);
		pid_t pid = p.pid;

		assert_true(s0 > 0);
		assert_true(s0 >= rdb_hv_proc_start(getpid()));
		assert_true(rdb_hv_proc_start(pid) == s0);
		assert_int_equal(rdb_hv_proc_start(0), 0);
		assert_int_equal(rdb_hv_proc_start(-1), 0);
		t = rdb_now_ns();
		assert_int_equal(rdb_hv_kill(&p, t + 2 * RDB_NS_PER_S), 0);
		assert_int_equal(rdb_hv_proc_start(pid), 0);	/* reaped */
		assert_int_equal(rdb_hv_spawn(sleeper, "/dev/null", NULL, &p), 0);
	}
	t = rdb_now_ns();
	assert_int_equal(rdb_hv_kill(&p, t + 2 * RDB_NS_PER_S), 0);
	assert_true(rdb_now_ns() - t < RDB_NS_PER_S);	/* SIGTERM did it */
	assert_int_equal(p.pid, -1);
	assert_int_equal(rdb_hv_kill(&p, 0), 0);	/* idempotent */

	assert_int_equal(rdb_hv_spawn(quick, "/dev/null", NULL, &p), 0);
	t = rdb_now_ns();
	while ((r = rdb_hv_poll_exit(&p, &st)) == 0 &&
	       rdb_now_ns() - t < 5 * RDB_NS_PER_S)
		usleep(1000);
	assert_int_equal(r, 1);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 3);
}

static void test_watchdog_trips_only_when_armed_and_late(void **state)
{
	struct rdb_wd_slot s;
	uint64_t ms = RDB_NS_PER_MS;

	memset(&s, 0, sizeof(s));
	atomic_store(&s.deadline_ns, 500 * ms);
	assert_int_equal(rdb_watchdog_should_trip(&s, 0, 0, 10000 * ms), RDB_WD_KEEP);	/* not armed */
	atomic_store(&s.armed, 1);
	assert_int_equal(rdb_watchdog_should_trip(&s, 1000 * ms, 0, 1400 * ms), RDB_WD_KEEP);
	assert_int_equal(rdb_watchdog_should_trip(&s, 1000 * ms, 0, 1500 * ms), RDB_WD_KEEP);
	assert_int_equal(rdb_watchdog_should_trip(&s, 1000 * ms, 0, 1501 * ms), RDB_WD_SILENT);
	/* a beat newer than "now" (read race) is not late */
	assert_int_equal(rdb_watchdog_should_trip(&s, 2000 * ms, 0, 1999 * ms), RDB_WD_KEEP);
	atomic_store(&s.tripped_at_ns, 1);
	assert_int_equal(rdb_watchdog_should_trip(&s, 0, 0, 10000 * ms), RDB_WD_KEEP);	/* once */
}

/* The guest stopped at 1000 ms (a checkpoint, or QEMU's stop for the end
 * of the initial state); the daemon worked on, then went silent at 1400:
 * the guest must not wait 1400 + 500. */
static void test_watchdog_bounds_the_guests_stop(void **state)
{
	struct rdb_wd_slot s;
	uint64_t ms = RDB_NS_PER_MS;

	memset(&s, 0, sizeof(s));
	atomic_store(&s.deadline_ns, 500 * ms);
	atomic_store(&s.armed, 1);
	atomic_store(&s.stopped_ns, 1000 * ms);
	/* not stopped for the deadline yet: silence alone decides */
	assert_int_equal(rdb_watchdog_should_trip(&s, 1400 * ms, 0, 1500 * ms), RDB_WD_KEEP);
	/* stopped past the deadline, but the daemon beats: it polices its
	 * own pauses */
	assert_int_equal(rdb_watchdog_should_trip(&s, 1450 * ms, 0, 1501 * ms), RDB_WD_KEEP);
	assert_int_equal(rdb_watchdog_should_trip(&s, 1400 * ms, 0, 1525 * ms), RDB_WD_KEEP);
	/* stopped past the deadline and a quarter of it without a beat */
	assert_int_equal(rdb_watchdog_should_trip(&s, 1400 * ms, 0, 1526 * ms), RDB_WD_STOPPED);
	/* silent from before the stop: trips at the deadline of the stop */
	assert_int_equal(rdb_watchdog_should_trip(&s, 990 * ms, 0, 1500 * ms), RDB_WD_SILENT);
	assert_int_equal(rdb_watchdog_should_trip(&s, 1100 * ms, 0, 1501 * ms), RDB_WD_STOPPED);
	/* running again: silence alone decides */
	atomic_store(&s.stopped_ns, 0);
	assert_int_equal(rdb_watchdog_should_trip(&s, 1400 * ms, 0, 1800 * ms), RDB_WD_KEEP);
	/* a stop newer than "now" (read race) is not late */
	atomic_store(&s.stopped_ns, 2000 * ms);
	assert_int_equal(rdb_watchdog_should_trip(&s, 1000 * ms, 0, 1400 * ms), RDB_WD_KEEP);
	atomic_store(&s.tripped_at_ns, 1);
	atomic_store(&s.stopped_ns, 1000 * ms);
	assert_int_equal(rdb_watchdog_should_trip(&s, 1000 * ms, 0, 3000 * ms), RDB_WD_KEEP);	/* once */
}

/*
 * The host did not run the daemon (CI: 57% steal, a 700 ms checkpoint
 * pause, the daemon runnable and off the CPU for ~450 ms): the time it
 * was runnable and not run is not its silence, up to 4 deadlines.
 */
static void test_watchdog_starved_daemon(void **state)
{
	struct rdb_wd_slot s;
	uint64_t ms = RDB_NS_PER_MS;

	(void)state;
	memset(&s, 0, sizeof(s));
	atomic_store(&s.deadline_ns, 500 * ms);
	atomic_store(&s.armed, 1);
	atomic_store(&s.stopped_ns, 1000 * ms);
	/* stopped 600 ms, silent 300 ms of which the host took 250: the
	 * daemon's own 50 ms is no stall (red: STOPPED, as in CI) */
	assert_int_equal(rdb_watchdog_should_trip(&s, 1300 * ms, 250 * ms, 1600 * ms),
			 RDB_WD_STARVED);
	/* the same silence with the host's share smaller: its own 126 ms */
	assert_int_equal(rdb_watchdog_should_trip(&s, 1300 * ms, 174 * ms, 1600 * ms),
			 RDB_WD_STOPPED);
	/* running guest: silent 900 ms, 500 of it the host's */
	atomic_store(&s.stopped_ns, 0);
	assert_int_equal(rdb_watchdog_should_trip(&s, 1000 * ms, 500 * ms, 1900 * ms),
			 RDB_WD_STARVED);
	assert_int_equal(rdb_watchdog_should_trip(&s, 1000 * ms, 399 * ms, 1900 * ms),
			 RDB_WD_SILENT);
	/* short of every rule on the clock: nothing to withhold */
	assert_int_equal(rdb_watchdog_should_trip(&s, 1000 * ms, 300 * ms, 1400 * ms),
			 RDB_WD_KEEP);
	/* past 4 deadlines of silence the host's share no longer counts */
	assert_int_equal(rdb_watchdog_should_trip(&s, 1000 * ms, 1990 * ms, 3000 * ms),
			 RDB_WD_STARVED);
	assert_int_equal(rdb_watchdog_should_trip(&s, 1000 * ms, 2000 * ms, 3001 * ms),
			 RDB_WD_SILENT);
	/* a stalled guest and a starved daemon, past the cap */
	atomic_store(&s.stopped_ns, 900 * ms);
	assert_int_equal(rdb_watchdog_should_trip(&s, 1000 * ms, 2001 * ms, 3001 * ms),
			 RDB_WD_SILENT);
}

/* The tally from the daemon thread's samples: runnable time without CPU
 * since the last beat; blocked, stopped or spinning time is its own. */
static void test_watchdog_starve_tally(void **state)
{
	struct rdb_wd_starve t = { 0 };
	uint64_t ms = RDB_NS_PER_MS;

	(void)state;
	rdb_watchdog_starve_note(&t, 100 * ms, 100 * ms, true, 50 * ms);
	assert_int_equal(t.starved_ns, 0);	/* a first sample: no interval */
	/* runnable, 1 ms of CPU in 5 ms: 4 ms the host's */
	rdb_watchdog_starve_note(&t, 100 * ms, 105 * ms, true, 51 * ms);
	assert_int_equal(t.starved_ns, 4 * ms);
	/* spinning: all CPU, nothing the host's */
	rdb_watchdog_starve_note(&t, 100 * ms, 110 * ms, true, 56 * ms);
	assert_int_equal(t.starved_ns, 4 * ms);
	/* blocked or stopped (S, D, T): its own */
	rdb_watchdog_starve_note(&t, 100 * ms, 200 * ms, false, 56 * ms);
	assert_int_equal(t.starved_ns, 4 * ms);
	rdb_watchdog_starve_note(&t, 100 * ms, 400 * ms, true, 56 * ms);
	assert_int_equal(t.starved_ns, 204 * ms);
	/* a new beat 3 ms before the sample: only those 3 ms count */
	rdb_watchdog_starve_note(&t, 402 * ms, 405 * ms, true, 56 * ms);
	assert_int_equal(t.starved_ns, 3 * ms);
	assert_int_equal(t.beat_ns, 402 * ms);
	t.reported = true;
	/* ...and a beat newer than the sample, none; reported again */
	rdb_watchdog_starve_note(&t, 409 * ms, 408 * ms, true, 56 * ms);
	assert_int_equal(t.starved_ns, 0);
	assert_false(t.reported);
	/* CPU time going back (another thread): the interval is not read */
	rdb_watchdog_starve_note(&t, 409 * ms, 450 * ms, true, 10 * ms);
	assert_int_equal(t.starved_ns, 0);
	rdb_watchdog_starve_note(&t, 409 * ms, 460 * ms, true, 10 * ms);
	assert_int_equal(t.starved_ns, 10 * ms);

	/* a spinning thread whose CPU time lags by a tick (4 ms steps, 5 ms
	 * polls): a lag in one interval is made up in the next, not summed */
	memset(&t, 0, sizeof(t));
	rdb_watchdog_starve_note(&t, 1000 * ms, 1000 * ms, true, 0);
	rdb_watchdog_starve_note(&t, 1000 * ms, 1005 * ms, true, 4 * ms);
	assert_int_equal(t.starved_ns, 1 * ms);
	rdb_watchdog_starve_note(&t, 1000 * ms, 1010 * ms, true, 8 * ms);
	rdb_watchdog_starve_note(&t, 1000 * ms, 1015 * ms, true, 16 * ms);
	rdb_watchdog_starve_note(&t, 1000 * ms, 1020 * ms, true, 20 * ms);
	assert_int_equal(t.starved_ns, 0);
}

/* The child's own sleep ran far over its interval: one more interval
 * before silence counts, never twice in a row. */
static void test_watchdog_oversleep_rule(void **state)
{
	uint64_t ms = RDB_NS_PER_MS, poll = 5 * ms;

	(void)state;
	assert_false(rdb_watchdog_overslept(1000 * ms, 1005 * ms, poll, false));
	assert_false(rdb_watchdog_overslept(1000 * ms, 1105 * ms, poll, false));
	assert_true(rdb_watchdog_overslept(1000 * ms, 1106 * ms, poll, false));
	assert_true(rdb_watchdog_overslept(1000 * ms, 1700 * ms, poll, false));
	/* graced last time: this one counts, however late */
	assert_false(rdb_watchdog_overslept(1700 * ms, 2400 * ms, poll, true));
	/* a clock read race is no oversleep */
	assert_false(rdb_watchdog_overslept(1000 * ms, 900 * ms, poll, false));
}

/*
 * A peer's silence while this host did not run remusdbd (CI: both
 * daemons off the CPU ~1.3 s together, the backup failed over from a
 * live primary): the host's share is left out, up to 4 timeouts; a tick
 * that comes late looks again once before it judges.
 */
static void test_peer_silence_host_stall(void **state)
{
	uint64_t ms = RDB_NS_PER_MS, stalled;
	struct rdb_peer_det pd = { 0 };

	(void)state;
	assert_int_equal(rdb_peer_silence(1333 * ms, 1100 * ms, 1000 * ms), 233 * ms);
	assert_int_equal(rdb_peer_silence(1333 * ms, 0, 1000 * ms), 1333 * ms);
	assert_int_equal(rdb_peer_silence(900 * ms, 2000 * ms, 1000 * ms), 0);
	/* past 4 timeouts the clock alone decides */
	assert_int_equal(rdb_peer_silence(4001 * ms, 4000 * ms, 1000 * ms), 4001 * ms);

	/* heard at 1 s, host total 50 ms then; ticks every 50 ms */
	rdb_peer_heard(&pd, 50 * ms, 1000 * ms);
	assert_int_equal(rdb_peer_judge(&pd, 50 * ms, 1050 * ms, 1000 * ms, 50 * ms,
					 &stalled), RDB_PEER_HEARD);
	/* both hosts stall 1.3 s: the tick is late, so it looks again */
	assert_int_equal(rdb_peer_judge(&pd, 50 * ms, 2383 * ms, 1000 * ms, 50 * ms,
					 &stalled), RDB_PEER_RECHECK);
	/* the watchdog has counted 1.25 s of it by then: withheld */
	assert_int_equal(rdb_peer_judge(&pd, 1300 * ms, 2403 * ms, 1000 * ms, 50 * ms,
					 &stalled), RDB_PEER_STALLED);
	assert_int_equal(stalled, 1250 * ms);
	/* a peer that is dead after all: silent a timeout past the stall (the
	 * ticks between, on time, were withheld) */
	for (uint64_t t = 2453; t < 3250; t += 50)
		assert_int_equal(rdb_peer_judge(&pd, 1300 * ms, t * ms, 1000 * ms,
						50 * ms, &stalled), RDB_PEER_STALLED);
	assert_int_equal(rdb_peer_judge(&pd, 1300 * ms, 3253 * ms, 1000 * ms, 50 * ms,
					 &stalled), RDB_PEER_SILENT);
	/* heard again: a new silence, nothing of the old stall */
	rdb_peer_heard(&pd, 1300 * ms, 3400 * ms);
	assert_false(pd.withheld);
	assert_int_equal(rdb_peer_judge(&pd, 1300 * ms, 4450 * ms, 1000 * ms, 50 * ms,
					 &stalled), RDB_PEER_RECHECK);	/* late: 3403+50.. */
	assert_int_equal(rdb_peer_judge(&pd, 1300 * ms, 4470 * ms, 1000 * ms, 50 * ms,
					 &stalled), RDB_PEER_SILENT);
	assert_int_equal(stalled, 0);
	/* a host stalled on its own (the peer's frames in the socket would
	 * have been read): no recheck twice in a row */
	rdb_peer_heard(&pd, 1300 * ms, 5000 * ms);
	assert_int_equal(rdb_peer_judge(&pd, 1300 * ms, 5050 * ms, 1000 * ms, 50 * ms,
					 &stalled), RDB_PEER_HEARD);
	assert_int_equal(rdb_peer_judge(&pd, 1300 * ms, 6200 * ms, 1000 * ms, 50 * ms,
					 &stalled), RDB_PEER_RECHECK);
	assert_int_equal(rdb_peer_judge(&pd, 1300 * ms, 6400 * ms, 1000 * ms, 50 * ms,
					 &stalled), RDB_PEER_SILENT);
}

static void sleep_ms(unsigned n)
{
	struct timespec ts = { .tv_sec = n / 1000, .tv_nsec = (long)(n % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0)
		;
}

/*
 * The whole host stalls (the outer hypervisor did not run this VM): the
 * watchdog and the daemon stand still together, for longer than the
 * deadline.  The watchdog runs first when it ends, but the daemon beats
 * within its next poll: no trip (before: "remusdbd silent for 698 ms",
 * protection dropped, seen once in CI).  A daemon that stays silent is
 * still tripped.
 */
static void test_watchdog_host_stall(void **state)
{
	const struct rdb_hv_ops *hv = rdb_hv_find("qemu");
	struct rdb_watchdog wd;
	int slot;

	(void)state;
	assert_non_null(hv);
	assert_int_equal(rdb_watchdog_start(&wd, 50 * RDB_NS_PER_MS), 0);
	slot = rdb_watchdog_arm(&wd, "vmS", hv, "/nonexistent/vmS.qmp",
				300 * RDB_NS_PER_MS);
	assert_true(slot >= 0);
	for (int i = 0; i < 10; i++) {
		rdb_watchdog_beat(&wd);
		sleep_ms(10);
	}
	/* the stall: the watchdog stopped, the daemon silent */
	assert_int_equal(kill(wd.pid, SIGSTOP), 0);
	sleep_ms(600);
	assert_int_equal(kill(wd.pid, SIGCONT), 0);
	sleep_ms(5);		/* the watchdog runs first... */
	for (int i = 0; i < 30; i++) {	/* ...then the daemon */
		rdb_watchdog_beat(&wd);
		sleep_ms(10);
	}
	/* (a trip would show after its QMP attempts: 4 x 500 ms) */
	for (int i = 0; i < 250; i++) {
		rdb_watchdog_beat(&wd);
		sleep_ms(10);
	}
	assert_int_equal(rdb_watchdog_tripped(&wd, slot), 0);
	assert_int_equal(rdb_watchdog_oversleeps(&wd), 1);
	/* the stall is in the host's running total, once (a failure
	 * detector leaves it out of its peer's silence) */
	assert_true(rdb_watchdog_host_stall_ns(&wd) >= 500 * RDB_NS_PER_MS);
	assert_true(rdb_watchdog_host_stall_ns(&wd) < 1000 * RDB_NS_PER_MS);
	/* the same stall with a daemon that stays silent: tripped */
	assert_int_equal(kill(wd.pid, SIGSTOP), 0);
	sleep_ms(600);
	assert_int_equal(kill(wd.pid, SIGCONT), 0);
	for (int i = 0; i < 400 && !rdb_watchdog_tripped(&wd, slot); i++)
		sleep_ms(10);
	assert_int_not_equal(rdb_watchdog_tripped(&wd, slot), 0);
	rdb_watchdog_stop(&wd);
}

/*
 * A slow callback's warning says what the thread waited for: here the
 * thread blocks in the kernel (a vfork parent waits uninterruptibly, as
 * for a disk) for 300 ms, and the probe's text says so.
 */
static void test_watchdog_probe_blocked(void **state)
{
	struct rdb_watchdog wd;
	struct rdb_evloop_probe pr;
	uint64_t before[RDB_EVLOOP_PROBE_N], after[RDB_EVLOOP_PROBE_N];
	char text[300];
	pid_t pid;
	int st;

	(void)state;
	assert_int_equal(rdb_watchdog_start(&wd, 5 * RDB_NS_PER_MS), 0);
	rdb_watchdog_probe(&wd, &pr);
	assert_non_null(pr.take);
	sleep_ms(50);
	pr.take(pr.opaque, before);
	pid = vfork();
	if (pid == 0) {
		struct timespec ts = { 0, 300 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		_exit(0);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	sleep_ms(20);
	pr.take(pr.opaque, after);
	pr.tell(pr.opaque, before, after, text, sizeof(text));
	print_message("probe: \"%s\"\n", text);
	assert_non_null(strstr(text, "ms blocked in the kernel"));
	if (getuid() == 0)
		assert_non_null(strstr(text, "last seen in vfork"));
	/* nothing in between: nothing to tell */
	pr.take(pr.opaque, before);
	pr.tell(pr.opaque, before, before, text, sizeof(text));
	assert_string_equal(text, "");
	rdb_watchdog_stop(&wd);
}

/* sdunit.c's names and its choice; the units themselves run under a
 * real systemd only (tests/run-packaging.sh). */
static void test_units(void **state)
{
	char name[64], err[300];
	char *sleeper[] = { "sleep", "5", NULL };
	struct rdb_unit_scope scope;
	struct rdb_hv_proc p;

	assert_int_equal(rdb_unit_name("vm1", "qemu-17-1", "service", name,
				       sizeof(name)), 0);
	assert_string_equal(name, "remusdb-vm1-qemu-17-1.service");
	/* what systemd-escape does to anything else, a leading dot too */
	assert_int_equal(rdb_unit_name("a b/c", ".disk_x:y", "scope", name,
				       sizeof(name)), 0);
	assert_string_equal(name, "remusdb-a\\x20b\\x2fc-\\x2edisk_x:y.scope");
	assert_int_equal(rdb_unit_name("vm1", "qemu", "service", name, 20),
			 -ENAMETOOLONG);
	assert_int_equal(rdb_unit_name("vm1", "qemu", "service", name, 26), 0);
	assert_string_equal(name, "remusdb-vm1-qemu.service");

	assert_int_equal(rdb_units_setup("sometimes", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "auto, systemd or none"));
	assert_int_equal(rdb_units_setup("none", err, sizeof(err)), 0);
	assert_false(rdb_units_active());
	assert_int_equal(rdb_units_scope_prefix(&scope, "vm1", "disk"), 0);
	if (access("/run/systemd/system", F_OK) == 0)
		skip();	/* (the rest is for a host without systemd) */
	/* asked for and not there: an error naming what is missing */
	assert_int_equal(rdb_units_setup("systemd", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "systemd does not run this host"));
	assert_int_equal(rdb_units_setup("auto", err, sizeof(err)), 0);
	assert_false(rdb_units_active());
	assert_non_null(strstr(rdb_units_why(), "processes stay in remusdbd's"));
	/* without units a service is a child of ours, as before */
	rdb_hv_proc_init(&p);
	assert_int_equal(rdb_units_spawn_service("vm1", "qemu", sleeper,
						 "/dev/null", NULL, &p, err,
						 sizeof(err)), 0);
	assert_true(p.pid > 0);
	assert_int_equal(p.pidfd, -1);
	assert_int_equal(rdb_hv_kill(&p, rdb_now_ns() + RDB_NS_PER_S), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_byte_exact),
		cmocka_unit_test(test_config_reemitted),
		cmocka_unit_test(test_bad_config),
		cmocka_unit_test(test_invalid_specs),
		cmocka_unit_test(test_restore_argv),
		cmocka_unit_test(test_spawn_and_kill),
		cmocka_unit_test(test_spawn_on_cpus),
		cmocka_unit_test(test_units),
		cmocka_unit_test(test_place_running),
		cmocka_unit_test(test_watchdog_trips_only_when_armed_and_late),
		cmocka_unit_test(test_watchdog_bounds_the_guests_stop),
		cmocka_unit_test(test_watchdog_starved_daemon),
		cmocka_unit_test(test_watchdog_starve_tally),
		cmocka_unit_test(test_watchdog_oversleep_rule),
		cmocka_unit_test(test_watchdog_host_stall),
		cmocka_unit_test(test_peer_silence_host_stall),
		cmocka_unit_test(test_watchdog_probe_blocked),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

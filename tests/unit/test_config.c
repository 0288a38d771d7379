// SPDX-License-Identifier: GPL-2.0-only
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "ctl.h"

static const char *write_tmp(const char *text)
{
	static char path[64];
	FILE *f;

	strcpy(path, "/tmp/rdb-conf-XXXXXX");
	close(mkstemp(path));
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	return path;
}

static const char *write_tmp_bytes(const char *bytes, size_t n)
{
	static char path[64];
	FILE *f;

	strcpy(path, "/tmp/rdb-conf-XXXXXX");
	close(mkstemp(path));
	f = fopen(path, "w");
	fwrite(bytes, 1, n, f);
	fclose(f);
	return path;
}

/* Loads "qemu_group = " plus fill bytes of 'a', then tail (n bytes) on a
 * second line; 0 or the load's error. */
static int load_line(size_t fill, const char *tail, size_t n, char *err,
		     size_t errlen)
{
	static char text[2 * RDB_CONFIG_LINE_MAX];
	struct rdb_daemon_config c;
	size_t len = 0;
	const char *p;
	int rc;

	len += sprintf(text, "# a line of %zu bytes follows\nqemu_group = ", fill + 13);
	memset(text + len, 'a', fill);
	len += fill;
	memcpy(text + len, tail, n);
	p = write_tmp_bytes(text, len + n);
	rdb_config_defaults(&rdb_daemon_config_table, &c);
	rc = rdb_config_load_file(&rdb_daemon_config_table, p, &c, err, errlen);
	if (rc == 0)
		assert_int_equal(strlen(c.qemu_group), fill);
	rdb_config_dispose(&rdb_daemon_config_table, &c);
	unlink(p);
	return rc;
}

/* What docs/config.md says of a line: at most RDB_CONFIG_LINE_MAX bytes
 * besides its newline, no NUL byte (the last line's too), refused naming
 * its own line; no continuation. */
static void test_line_limits(void **state)
{
	const size_t fill = RDB_CONFIG_LINE_MAX - 13;	/* "qemu_group = " */
	char err[512];

	assert_int_equal(load_line(fill, "\n", 1, err, sizeof(err)), 0);
	assert_int_equal(load_line(fill, "", 0, err, sizeof(err)), 0);
	assert_int_equal(load_line(fill + 1, "\n", 1, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":2: line longer than 4094 bytes"));
	assert_int_equal(load_line(fill + 1, "", 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":2: line longer than 4094 bytes"));
	assert_int_equal(load_line(2, "\0b\n", 3, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":2: line longer than 4094 bytes or with a NUL byte"));
	assert_int_equal(load_line(2, "\0b", 2, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":2: line longer than 4094 bytes or with a NUL byte"));
	/* a trailing backslash is the value's; the next line is a line */
	assert_int_equal(load_line(2, " \\\nrun_dir\n", 11, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":3: expected key = value"));
}

static void test_defaults_work_out_of_the_box(void **state)
{
	struct rdb_daemon_config d;

	rdb_config_defaults(&rdb_daemon_config_table, &d);
	assert_string_equal(d.listen, "0.0.0.0:7788");
	assert_int_equal(d.heartbeat_ms, 100);
	assert_int_equal(d.failover_timeout_ms, 1000);
	assert_false(d.allow_fault_injection);
	/* The link is authenticated unless the operator says otherwise. */
	assert_string_equal(d.link_security, "psk");
	assert_string_equal(d.link_psk_file, "/etc/remusdb/link.psk");
	rdb_config_dispose(&rdb_daemon_config_table, &d);
	rdb_config_dispose(&rdb_daemon_config_table, &d);	/* idempotent */
}

static void test_link_security_values(void **state)
{
	struct rdb_daemon_config d;
	char err[256];

	rdb_config_defaults(&rdb_daemon_config_table, &d);
	assert_int_equal(rdb_config_set(&rdb_daemon_config_table, &d, "link_security",
					"insecure", err, sizeof(err)), 0);
	assert_string_equal(d.link_security, "insecure");
	assert_int_equal(rdb_config_set(&rdb_daemon_config_table, &d, "link_security",
					"tls", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "insecure"));
	assert_string_equal(d.link_security, "insecure");
	assert_int_equal(rdb_config_set(&rdb_daemon_config_table, &d, "link_psk_file",
					"/srv/k.psk", err, sizeof(err)), 0);
	assert_string_equal(d.link_psk_file, "/srv/k.psk");
	rdb_config_dispose(&rdb_daemon_config_table, &d);
}

/* CPU placement: lists as taskset -c takes them; a bad one is refused
 * and the old value kept. */
static void test_cpu_lists(void **state)
{
	struct rdb_daemon_config d;
	char err[256];

	rdb_config_defaults(&rdb_daemon_config_table, &d);
	assert_string_equal(d.cpus, "");
	assert_string_equal(d.guest_cpus, "");
	assert_int_equal(rdb_config_set(&rdb_daemon_config_table, &d, "cpus",
					"0-1,4", err, sizeof(err)), 0);
	assert_string_equal(d.cpus, "0-1,4");
	assert_int_equal(rdb_config_set(&rdb_daemon_config_table, &d, "cpus",
					"0-", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "cpus"));
	assert_string_equal(d.cpus, "0-1,4");
	assert_int_equal(rdb_config_set(&rdb_daemon_config_table, &d, "guest_cpus",
					"2-3", err, sizeof(err)), 0);
	assert_int_equal(rdb_config_set(&rdb_daemon_config_table, &d, "guest_cpus",
					"two", err, sizeof(err)), -EINVAL);
	assert_string_equal(d.guest_cpus, "2-3");
	rdb_config_dispose(&rdb_daemon_config_table, &d);
}

static void test_vm_file_with_lists_and_errors(void **state)
{
	struct rdb_vm_config c;
	char err[256];
	const char *p;
	json_t *j;

	rdb_config_defaults(&rdb_vm_config_table, &c);
	p = write_tmp("# a VM\nname = db1\nqmp = /run/q.sock\nnet_socket = /run/n\n"
		      "peer = 10.0.0.2:7788\ncheckpoint_ms = 50\n"
		      "qemu_arg = -m\nqemu_arg = 256\n");
	assert_int_equal(rdb_config_load_file(&rdb_vm_config_table, p, &c, err, sizeof(err)), 0);
	unlink(p);
	assert_string_equal(c.name, "db1");
	assert_int_equal(c.checkpoint_ms, 50);
	assert_int_equal(c.qemu_arg.n, 2);
	assert_string_equal(c.qemu_arg.v[1], "256");
	assert_null(c.qemu_arg.v[2]);
	assert_int_equal(rdb_vm_config_check(&c, err, sizeof(err)), 0);
	/* JSON round trip: what the CLI sends is what the daemon gets */
	j = rdb_vm_config_to_json(&c);
	{
		struct rdb_vm_config c2;

		rdb_config_defaults(&rdb_vm_config_table, &c2);
		assert_int_equal(rdb_vm_config_from_json(j, &c2, err, sizeof(err)), 0);
		assert_string_equal(c2.peer, "10.0.0.2:7788");
		assert_int_equal(c2.qemu_arg.n, 2);
		rdb_config_dispose(&rdb_vm_config_table, &c2);
	}
	/* an option the rolling upgrade's earlier release does not know is
	 * sent only when it is not at its default (that release refuses
	 * unknown options) */
	assert_null(json_object_get(j, "shared_ram"));
	assert_non_null(json_object_get(j, "verify_pages"));
	json_decref(j);
	c.shared_ram = false;
	j = rdb_vm_config_to_json(&c);
	assert_true(json_is_false(json_object_get(j, "shared_ram")));
	{
		struct rdb_vm_config c2;

		rdb_config_defaults(&rdb_vm_config_table, &c2);
		assert_true(c2.shared_ram);
		assert_int_equal(rdb_vm_config_from_json(j, &c2, err, sizeof(err)), 0);
		assert_false(c2.shared_ram);
		rdb_config_dispose(&rdb_vm_config_table, &c2);
	}
	c.shared_ram = true;
	json_decref(j);
	/* bounds, with the range in the message */
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "checkpoint_ms", "1",
					err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "5..10000"));
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "name", "bad name",
					err, sizeof(err)), -EINVAL);
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "peer", "nohost",
					err, sizeof(err)), -EINVAL);
	/* a backend this build has not (hv.h) */
	assert_string_equal(c.hypervisor, "qemu");
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "hypervisor", "hyperv",
					err, sizeof(err)), -EINVAL);
	assert_string_equal(c.hypervisor, "qemu");
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "hypervisor", "xen",
					err, sizeof(err)), 0);
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "hypervisor", "qemu",
					err, sizeof(err)), 0);
	/* a Xen VM: no qemu_arg needed, and none taken; a disk is */
	{
		struct rdb_vm_config x;

		rdb_config_defaults(&rdb_vm_config_table, &x);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &x, "name", "dom1", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &x, "qmp", "dom1", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &x, "net_socket", "/run/n", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &x, "peer", "10.0.0.2:7788", err, sizeof(err)), 0);
		assert_int_equal(rdb_vm_config_check(&x, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "'qemu_arg' is required"));
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &x, "hypervisor", "xen", err, sizeof(err)), 0);
		assert_int_equal(rdb_vm_config_check(&x, err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &x, "disk", "/d.img", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &x, "disk_socket", "/run/d", err, sizeof(err)), 0);
		assert_int_equal(rdb_vm_config_check(&x, err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &x, "libvirt_restore", "dom1", err, sizeof(err)), 0);
		assert_int_equal(rdb_vm_config_check(&x, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "hypervisor = xen takes no libvirt_restore"));
		rdb_config_dispose(&rdb_vm_config_table, &x);
	}
	/* several disks: extra_disk after a disk, at most 8 disks in all,
	 * QEMU only, not through libvirt_restore */
	{
		struct rdb_vm_config m;
		char v[32];

		rdb_config_defaults(&rdb_vm_config_table, &m);
		p = write_tmp("name = db1\nqmp = /q\nnet_socket = /n\npeer = h:1\n"
			      "qemu_arg = -m\nqemu_arg = 256\n"
			      "extra_disk = /wal.img\nextra_disk = /data.img\n");
		assert_int_equal(rdb_config_load_file(&rdb_vm_config_table, p, &m, err, sizeof(err)), 0);
		unlink(p);
		assert_int_equal(m.extra_disk.n, 2);
		assert_string_equal(m.extra_disk.v[1], "/data.img");
		assert_int_equal(rdb_vm_config_check(&m, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "extra_disk needs 'disk'"));
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "disk", "/os.img", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "disk_socket", "/run/d", err, sizeof(err)), 0);
		assert_int_equal(rdb_vm_config_check(&m, err, sizeof(err)), 0);
		j = rdb_vm_config_to_json(&m);
		{
			struct rdb_vm_config m2;

			rdb_config_defaults(&rdb_vm_config_table, &m2);
			assert_int_equal(rdb_vm_config_from_json(j, &m2, err, sizeof(err)), 0);
			assert_int_equal(m2.extra_disk.n, 2);
			assert_string_equal(m2.extra_disk.v[0], "/wal.img");
			rdb_config_dispose(&rdb_vm_config_table, &m2);
		}
		json_decref(j);
		/* restored through libvirt: its enrolled domain names every disk */
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "libvirt_restore", "qemu:///system", err, sizeof(err)), 0);
		assert_int_equal(rdb_vm_config_check(&m, err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "libvirt_restore", "", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "extra_disk", "/os.img", err, sizeof(err)), 0);
		assert_int_equal(rdb_vm_config_check(&m, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "extra_disk 3 is the first disk again"));
		rdb_config_dispose(&rdb_vm_config_table, &m);
		rdb_config_defaults(&rdb_vm_config_table, &m);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "name", "db1", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "qmp", "/q", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "net_socket", "/n", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "peer", "h:1", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "qemu_arg", "-S", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "disk", "/os.img", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "disk_socket", "/run/d", err, sizeof(err)), 0);
		for (int i = 1; i <= 7; i++) {
			snprintf(v, sizeof(v), "/d%d.img", i);
			assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "extra_disk", v, err, sizeof(err)), 0);
		}
		assert_int_equal(rdb_vm_config_check(&m, err, sizeof(err)), 0);
		/* the UEFI variable store counts as a disk: the ninth */
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "nvram", "/vars.fd", err, sizeof(err)), 0);
		assert_int_equal(rdb_vm_config_check(&m, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "more than 8 disks"));
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "nvram", "", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "extra_disk", "/d8.img", err, sizeof(err)), 0);
		assert_int_equal(rdb_vm_config_check(&m, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "more than 8 disks"));
		rdb_config_dispose(&rdb_vm_config_table, &m);
	}
	/* the UEFI variable store (nvram): the last disk, after extra_disk */
	{
		struct rdb_vm_config m;

		rdb_config_defaults(&rdb_vm_config_table, &m);
		p = write_tmp("name = db1\nqmp = /q\nnet_socket = /n\npeer = h:1\n"
			      "qemu_arg = -m\nqemu_arg = 256\nnvram = /vars.fd\n");
		assert_int_equal(rdb_config_load_file(&rdb_vm_config_table, p, &m, err, sizeof(err)), 0);
		unlink(p);
		assert_int_equal(rdb_vm_config_check(&m, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "nvram needs 'disk'"));
		assert_int_equal(rdb_vm_config_ndisks(&m), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "disk", "/os.img", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "disk_socket", "/run/d", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "extra_disk", "/data.img", err, sizeof(err)), 0);
		assert_int_equal(rdb_vm_config_check(&m, err, sizeof(err)), 0);
		assert_int_equal(rdb_vm_config_ndisks(&m), 3);
		assert_string_equal(rdb_vm_config_disk_image(&m, 0), "/os.img");
		assert_string_equal(rdb_vm_config_disk_image(&m, 1), "/data.img");
		assert_string_equal(rdb_vm_config_disk_image(&m, 2), "/vars.fd");
		assert_null(rdb_vm_config_disk_image(&m, 3));
		assert_false(rdb_vm_config_disk_is_nvram(&m, 1));
		assert_true(rdb_vm_config_disk_is_nvram(&m, 2));
		assert_false(rdb_vm_config_disk_is_nvram(&m, 3));
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "extra_disk", "/vars.fd", err, sizeof(err)), 0);
		assert_int_equal(rdb_vm_config_check(&m, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "nvram is an extra_disk too"));
		rdb_strlist_clear(&m.extra_disk);
		assert_int_equal(rdb_vm_config_ndisks(&m), 2);
		assert_true(rdb_vm_config_disk_is_nvram(&m, 1));
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "libvirt_restore", "qemu:///system", err, sizeof(err)), 0);
		/* restored through libvirt: the domain's pflash1 on its socket */
		assert_int_equal(rdb_vm_config_check(&m, err, sizeof(err)), 0);
		rdb_config_dispose(&rdb_vm_config_table, &m);
	}
	/* several NICs: extra_nic = tap=T[,backup_tap=B][,mac=M], its socket
	 * net_socket<k>; the backup's tap defaults to tap; plain mode only */
	{
		struct rdb_vm_config m;
		struct rdb_nic_spec sp;
		char sock[200];

		rdb_config_defaults(&rdb_vm_config_table, &m);
		p = write_tmp("name = db1\nqmp = /q\nnet_socket = /run/db1.net\n"
			      "peer = h:1\nqemu_arg = -S\nbackup_tap = bt0\n"
			      "extra_nic = tap=vmtap1,mac=52:54:00:00:00:02\n"
			      "extra_nic = tap=adm0,backup_tap=adm1\n");
		assert_int_equal(rdb_config_load_file(&rdb_vm_config_table, p, &m, err, sizeof(err)), 0);
		unlink(p);
		assert_int_equal(rdb_vm_config_check(&m, err, sizeof(err)), 0);
		assert_int_equal(rdb_vm_config_nnics(&m), 3);
		assert_int_equal(rdb_vm_config_nic(&m, 0, sock, sizeof(sock), &sp), 0);
		assert_string_equal(sock, "/run/db1.net");
		assert_string_equal(sp.tap, "vmtap0");
		assert_string_equal(sp.backup_tap, "bt0");
		assert_int_equal(rdb_vm_config_nic(&m, 1, sock, sizeof(sock), &sp), 0);
		assert_string_equal(sock, "/run/db1.net1");
		assert_string_equal(sp.tap, "vmtap1");
		assert_string_equal(sp.backup_tap, "vmtap1");
		assert_string_equal(sp.mac, "52:54:00:00:00:02");
		assert_int_equal(rdb_vm_config_nic(&m, 2, sock, sizeof(sock), &sp), 0);
		assert_string_equal(sock, "/run/db1.net2");
		assert_string_equal(sp.backup_tap, "adm1");
		assert_int_equal(rdb_vm_config_nic(&m, 3, sock, sizeof(sock), &sp), -EINVAL);
		/* commit protection over every NIC (each its own flow check) */
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "mode", "commit-protection", err, sizeof(err)), 0);
		assert_int_equal(rdb_vm_config_check(&m, err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "mode", "plain", err, sizeof(err)), 0);
		assert_int_equal(rdb_config_set(&rdb_vm_config_table, &m, "extra_nic", "vmtap3", err, sizeof(err)), 0);
		assert_int_equal(rdb_vm_config_check(&m, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "not key=value"));
		rdb_config_dispose(&rdb_vm_config_table, &m);
		assert_int_equal(rdb_nic_spec_parse("tap=a,mac=zz", &sp, err, sizeof(err)), -EINVAL);
		assert_int_equal(rdb_nic_spec_parse("tap=a,colour=red", &sp, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "unknown key"));
		assert_int_equal(rdb_nic_spec_parse("mac=52:54:00:00:00:02", &sp, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "tap= is required"));
	}
	/* host-specific QEMU arguments are refused */
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "qemu_arg", "-qmp",
					err, sizeof(err)), 0);
	assert_int_equal(rdb_vm_config_check(&c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "-qmp"));
	rdb_config_dispose(&rdb_vm_config_table, &c);
	/* so is the guest RAM's backend (the backup's is its RAM image),
	 * in either syntax; another object, or libvirt's -machine
	 * memory-backend=pc.ram, is not */
	{
		static const struct { const char *obj; int rc; } objs[] = {
			{ "memory-backend-memfd,id=pc.ram,size=256M,share=on", -EINVAL },
			{ "memory-backend-file,size=1G,id=pc.ram", -EINVAL },
			{ "{\"qom-type\":\"memory-backend-ram\",\"id\":\"pc.ram\",\"size\":1}", -EINVAL },
			{ "memory-backend-ram,id=pc.ram2,size=1G", 0 },
			{ "memory-backend-file,id=m0,mem-path=/x,,id=pc.ram", 0 },
			{ "rng-random,id=rng0,filename=/dev/urandom", 0 },
		};

		for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) {
			rdb_config_defaults(&rdb_vm_config_table, &c);
			assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "name", "x", err, sizeof(err)), 0);
			assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "peer", "b:7788", err, sizeof(err)), 0);
			assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "qmp", "/q", err, sizeof(err)), 0);
			assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "net_socket", "/n", err, sizeof(err)), 0);
			assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "qemu_arg", "-machine", err, sizeof(err)), 0);
			assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "qemu_arg", "pc,memory-backend=pc.ram", err, sizeof(err)), 0);
			assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "qemu_arg", "-object", err, sizeof(err)), 0);
			assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "qemu_arg", objs[i].obj, err, sizeof(err)), 0);
			assert_int_equal(rdb_vm_config_check(&c, err, sizeof(err)), objs[i].rc);
			if (objs[i].rc)
				assert_non_null(strstr(err, "pc.ram"));
			rdb_config_dispose(&rdb_vm_config_table, &c);
		}
	}

	/* unknown key, with file and line */
	rdb_config_defaults(&rdb_vm_config_table, &c);
	p = write_tmp("name = x\n\nbogus = 1\n");
	assert_int_equal(rdb_config_load_file(&rdb_vm_config_table, p, &c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":3: unknown vm option 'bogus'"));
	unlink(p);
	rdb_config_dispose(&rdb_vm_config_table, &c);
	/* a line without '=' and a key set twice */
	rdb_config_defaults(&rdb_vm_config_table, &c);
	p = write_tmp("name = x\nname = y\n");
	assert_int_equal(rdb_config_load_file(&rdb_vm_config_table, p, &c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "set twice"));
	unlink(p);
	rdb_config_dispose(&rdb_vm_config_table, &c);
	/* a required field missing */
	rdb_config_defaults(&rdb_vm_config_table, &c);
	assert_int_equal(rdb_vm_config_check(&c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "'name' is required"));
	rdb_config_dispose(&rdb_vm_config_table, &c);
}

/* The VM file shipped as an example (tools/examples/vm1.conf, in the
 * package's docs) loads and passes the checks remusdbctl and the daemon
 * run: an example that protects nothing safely must not ship. */
static void test_example_vm_file(void **state)
{
	struct rdb_vm_config c;
	char err[600], path[600];

	(void)state;
	snprintf(path, sizeof(path), "%s", __FILE__);
	*strrchr(path, '/') = 0;	/* tests/unit */
	strncat(path, "/../../tools/examples/vm1.conf", sizeof(path) - strlen(path) - 1);
	rdb_config_defaults(&rdb_vm_config_table, &c);
	assert_int_equal(rdb_config_load_file(&rdb_vm_config_table, path, &c, err, sizeof(err)), 0);
	if (rdb_vm_config_check(&c, err, sizeof(err)) < 0)
		fail_msg("%s: %s", path, err);
	assert_int_equal(c.extra_disk.n, 1);
	rdb_config_dispose(&rdb_vm_config_table, &c);
}

/* A VM file written by the daemon (a restored VM protected again) reads
 * back as the same config: every option, lists and spaced values kept. */
static void test_vm_file_written_reads_back(void **state)
{
	struct rdb_vm_config c, c2;
	char err[256], path[64];
	json_t *a, *b;

	rdb_config_defaults(&rdb_vm_config_table, &c);
	const char *p = write_tmp("name = db1\nqmp = /run/q.sock\n"
				  "net_socket = /run/n\npeer = 10.0.0.2:7788\n"
				  "checkpoint_ms = 40\ncompression = false\n"
				  "qemu_arg = -append\n"
				  "qemu_arg = console=ttyS0 remusdb.run=\"a b\"\n");
	assert_int_equal(rdb_config_load_file(&rdb_vm_config_table, p, &c, err,
					      sizeof(err)), 0);
	unlink(p);
	strcpy(path, "/tmp/rdb-vmfile-XXXXXX");
	close(mkstemp(path));
	assert_int_equal(rdb_vm_config_write_file(&c, path, err, sizeof(err)), 0);
	rdb_config_defaults(&rdb_vm_config_table, &c2);
	assert_int_equal(rdb_config_load_file(&rdb_vm_config_table, path, &c2, err,
					      sizeof(err)), 0);
	unlink(path);
	a = rdb_vm_config_to_json(&c);
	b = rdb_vm_config_to_json(&c2);
	assert_true(json_equal(a, b));
	assert_string_equal(c2.qemu_arg.v[1], "console=ttyS0 remusdb.run=\"a b\"");
	assert_int_equal(rdb_vm_config_check(&c2, err, sizeof(err)), 0);
	json_decref(a);
	json_decref(b);
	/* nowhere to write: an error naming the file */
	assert_true(rdb_vm_config_write_file(&c, "/nonexistent/dir/vm.conf", err,
					     sizeof(err)) < 0);
	assert_non_null(strstr(err, "/nonexistent/dir/vm.conf"));
	rdb_config_dispose(&rdb_vm_config_table, &c);
	rdb_config_dispose(&rdb_vm_config_table, &c2);
}

static void test_mode_and_protection_options(void **state)
{
	struct rdb_vm_config a, b;
	char err[256];

	rdb_config_defaults(&rdb_vm_config_table, &a);
	rdb_config_defaults(&rdb_vm_config_table, &b);
	/* plain Remus is the default: it needs nothing from the guest */
	assert_string_equal(a.mode, "plain");
	assert_false(rdb_vm_config_commit_protection(&a));
	assert_int_equal(a.failover_fence_ms, 1000);
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &a, "mode", "commit",
					err, sizeof(err)), -EINVAL);
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &a, "mode",
					"commit-protection", err, sizeof(err)), 0);
	assert_true(rdb_vm_config_commit_protection(&a));
	assert_int_equal(rdb_vm_config_supported(&a, err, sizeof(err)), 0);
	/* protect of an attached VM: how it is protected comes from the
	 * request, what is served stays */
	rdb_config_set(&rdb_vm_config_table, &b, "disk", "/srv/vm1.img", err, sizeof(err));
	rdb_config_set(&rdb_vm_config_table, &b, "peer", "10.0.0.2:7788", err, sizeof(err));
	rdb_config_set(&rdb_vm_config_table, &a, "disk", "/elsewhere.img", err, sizeof(err));
	rdb_config_set(&rdb_vm_config_table, &a, "checkpoint_ms", "50", err, sizeof(err));
	assert_int_equal(rdb_vm_config_take_protection(&b, &a), 0);
	assert_string_equal(b.mode, "commit-protection");
	assert_int_equal(b.checkpoint_ms, 50);
	assert_string_equal(b.disk, "/srv/vm1.img");
	assert_string_equal(b.peer, "10.0.0.2:7788");	/* unset in a: kept */
	rdb_config_dispose(&rdb_vm_config_table, &a);
	rdb_config_dispose(&rdb_vm_config_table, &b);
}

static int h_echo(void *opaque, json_t *req, json_t **reply)
{
	*reply = json_incref(json_object_get(req, "args"));
	return 0;
}

static int h_fail(void *opaque, json_t *req, json_t **reply)
{
	*reply = json_string("it broke");
	return -EIO;
}

/* on_peer_loss: never unsafe-auto by default; witness needs a witness. */
static void test_peer_loss_policy(void **state)
{
	struct rdb_vm_config c;
	struct rdb_daemon_config d;
	enum rdb_peer_loss pl;
	char err[400];

	rdb_config_defaults(&rdb_vm_config_table, &c);
	rdb_config_defaults(&rdb_daemon_config_table, &d);
	assert_string_equal(d.witness, "");
	assert_string_equal(d.witness_prefix, "/remusdb");
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "name", "vm1",
					err, sizeof(err)), 0);
	/* no witness, no policy said: refused, and the message says how */
	assert_int_equal(rdb_vm_config_peer_loss(&c, false, &pl, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "on_peer_loss = manual"));
	assert_int_equal(rdb_vm_config_peer_loss(&c, true, &pl, err, sizeof(err)), 0);
	assert_int_equal(pl, RDB_PEER_LOSS_WITNESS);
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "on_peer_loss", "witness",
					err, sizeof(err)), 0);
	assert_int_equal(rdb_vm_config_peer_loss(&c, false, &pl, err, sizeof(err)), -EINVAL);
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "on_peer_loss", "manual",
					err, sizeof(err)), 0);
	assert_int_equal(rdb_vm_config_peer_loss(&c, false, &pl, err, sizeof(err)), 0);
	assert_int_equal(pl, RDB_PEER_LOSS_MANUAL);
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "on_peer_loss", "unsafe-auto",
					err, sizeof(err)), 0);
	assert_int_equal(rdb_vm_config_peer_loss(&c, true, &pl, err, sizeof(err)), 0);
	assert_int_equal(pl, RDB_PEER_LOSS_UNSAFE_AUTO);
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "on_peer_loss", "auto",
					err, sizeof(err)), -EINVAL);
	assert_int_equal(rdb_config_set(&rdb_daemon_config_table, &d, "witness",
					"http://10.0.0.1:2379,https://e:2379", err, sizeof(err)), 0);
	assert_int_equal(rdb_config_set(&rdb_daemon_config_table, &d, "witness",
					"10.0.0.1:2379", err, sizeof(err)), -EINVAL);
	assert_int_equal(rdb_config_set(&rdb_daemon_config_table, &d, "node_name",
					"a b", err, sizeof(err)), -EINVAL);
	rdb_config_dispose(&rdb_vm_config_table, &c);
	rdb_config_dispose(&rdb_daemon_config_table, &d);
}

static void test_ctl_dispatch(void **state)
{
	static const struct rdb_ctl_handler h[] = { { "echo", h_echo }, { "fail", h_fail } };
	struct rdb_evloop *loop;
	struct rdb_ctl *ctl;
	char path[64], *r;

	snprintf(path, sizeof(path), "/tmp/rdb-ctl-%d.sock", (int)getpid());
	assert_int_equal(rdb_evloop_create(&loop), 0);
	assert_int_equal(rdb_ctl_listen(path, loop, h, 2, NULL, &ctl), 0);
	r = rdb_ctl_dispatch(ctl, "{\"cmd\":\"echo\",\"args\":{\"a\":1}}", 29);
	assert_string_equal(r, "{\"ok\":true,\"result\":{\"a\":1}}");
	free(r);
	r = rdb_ctl_dispatch(ctl, "{\"cmd\":\"fail\"}", 14);
	assert_non_null(strstr(r, "\"error\":\"it broke\""));
	free(r);
	r = rdb_ctl_dispatch(ctl, "{\"cmd\":\"nope\"}", 14);
	assert_non_null(strstr(r, "unknown command"));
	free(r);
	r = rdb_ctl_dispatch(ctl, "not json", 8);
	assert_non_null(strstr(r, "not a JSON object"));
	free(r);
	r = rdb_ctl_dispatch(ctl, "{\"args\":{}}", 11);
	assert_non_null(strstr(r, "no \\\"cmd\\\""));
	free(r);
	rdb_ctl_close(ctl);
	assert_int_equal(access(path, F_OK), -1);	/* socket file removed */
	rdb_evloop_destroy(loop);
}

static void test_ctl_peer_policy(void **state)
{
	assert_true(rdb_ctl_peer_allowed(0, 0));
	assert_true(rdb_ctl_peer_allowed(0, 1000));
	assert_true(rdb_ctl_peer_allowed(1000, 1000));
	assert_false(rdb_ctl_peer_allowed(1000, 0));
	assert_false(rdb_ctl_peer_allowed(1001, 1000));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults_work_out_of_the_box),
		cmocka_unit_test(test_line_limits),
		cmocka_unit_test(test_link_security_values),
		cmocka_unit_test(test_cpu_lists),
		cmocka_unit_test(test_vm_file_with_lists_and_errors),
		cmocka_unit_test(test_example_vm_file),
		cmocka_unit_test(test_mode_and_protection_options),
		cmocka_unit_test(test_peer_loss_policy),
		cmocka_unit_test(test_vm_file_written_reads_back),
		cmocka_unit_test(test_ctl_dispatch),
		cmocka_unit_test(test_ctl_peer_policy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

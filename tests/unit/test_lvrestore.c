// SPDX-License-Identifier: GPL-2.0-only
/* The domain XML a backup creates to restore into libvirt (lvrestore.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemu/lvrestore.h"

/* An enrolled domain as `virsh dumpxml --inactive` prints it (trimmed). */
static const char enrolled[] =
	"<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>\n"
	"  <name>vm1</name>\n"
	"  <metadata>\n"
	"    <remusdb:vm xmlns:remusdb=\"https://remusdb.example/xmlns/vm/1\" version=\"1\">\n"
	"    </remusdb:vm>\n"
	"  </metadata>\n"
	"  <memory unit='KiB'>262144</memory>\n"
	"  <devices>\n"
	"    <emulator>/opt/remusdb/bin/qemu-system-x86_64</emulator>\n"
	"  </devices>\n"
	"  <qemu:commandline>\n"
	"    <qemu:arg value='-qmp'/>\n"
	"    <qemu:arg value='unix:/run/remusdb/vm1.qmp,server=on,wait=off'/>\n"
	"    <qemu:arg value='-netdev'/>\n"
	"    <qemu:arg value='-blockdev'/>\n"
	"    <qemu:arg value='{&quot;driver&quot;:&quot;nbd&quot;,&quot;server&quot;:{&quot;type&quot;:&quot;unix&quot;,"
	"&quot;path&quot;:&quot;/run/remusdb/vm1.disk&quot;},&quot;node-name&quot;:&quot;rdbdisk0&quot;,"
	"&quot;reconnect-delay&quot;:15}'/>\n"
	"    <qemu:arg value='stream,id=net0,server=off,addr.type=unix,addr.path=/run/remusdb/vm1.net,reconnect-ms=100'/>\n"
	"  </qemu:commandline>\n"
	"</domain>\n";

static const struct rdb_lvrestore r = {
	.uri = "qemu:///system", .name = "vm1",
	.ram_image = "/var/lib/remusdb/vm1/pc.ram.img",
	.qmp = "/run/remusdb/vm1.qmp", .net = "/run/remusdb/vm1.net",
	.disk = "/run/remusdb/vm1.disk", .work_dir = "/tmp",
};

static void test_restore_xml(void **state)
{
	char err[256] = "", *x = NULL;

	assert_int_equal(rdb_lvrestore_xml(&r, enrolled, &x, err, sizeof(err)), 0);
	/* the RAM on a shared file (the hook links the image there) */
	assert_non_null(strstr(x, "  <memoryBacking><source type='file'/><access "
			       "mode='shared'/></memoryBacking>\n  <devices>\n"));
	/* QEMU waits for remusdbd's stream; the hook finds the image */
	assert_non_null(strstr(x, "reconnect-ms=100'/>\n"
			       "    <qemu:arg value='-incoming'/>\n"
			       "    <qemu:arg value='defer'/>\n"
			       "    <qemu:env name='REMUSDB_RAM_IMAGE' "
			       "value='/var/lib/remusdb/vm1/pc.ram.img'/>\n"
			       "  </qemu:commandline>\n</domain>\n"));
	free(x);
}

static void refused(const struct rdb_lvrestore *lr, const char *xml, int want,
		    const char *msg)
{
	char err[256] = "", *x = (char *)1;

	assert_int_equal(rdb_lvrestore_xml(lr, xml, &x, err, sizeof(err)), want);
	assert_null(x);
	if (!strstr(err, msg))
		fail_msg("'%s' does not say '%s'", err, msg);
}

/* A VM with two disks and two NICs: the domain must name every socket
 * this host serves them on. */
static void test_restore_xml_several(void **state)
{
	static const char *const nets[] = { "/run/remusdb/vm1.net1" };
	const char *tail = strstr(enrolled, "  </qemu:commandline>");
	char *both = malloc(sizeof(enrolled) + 600), err[256] = "", *x = NULL;
	struct rdb_lvrestore lr = r;

	sprintf(both, "%.*s%s%s", (int)(tail - enrolled), enrolled,
		"    <qemu:arg value='stream,id=net1,server=off,addr.type=unix,"
		"addr.path=/run/remusdb/vm1.net1,reconnect-ms=100'/>\n"
		"    <qemu:arg value='{&quot;driver&quot;:&quot;qcow2&quot;,&quot;node-name&quot;:"
		"&quot;disk1&quot;,&quot;file&quot;:{&quot;driver&quot;:&quot;nbd&quot;,&quot;server"
		"&quot;:{&quot;type&quot;:&quot;unix&quot;,&quot;path&quot;:&quot;/run/remusdb/vm1.disk1"
		"&quot;},&quot;reconnect-delay&quot;:15}}'/>\n", tail);
	lr.more_nets = nets;
	lr.nmore_nets = 1;
	lr.nmore_disks = 1;
	assert_int_equal(rdb_lvrestore_xml(&lr, both, &x, err, sizeof(err)), 0);
	free(x);
	/* the one-disk, one-NIC domain has neither */
	refused(&lr, enrolled, -EINVAL, "no NIC on /run/remusdb/vm1.net1 (the VM's NIC 1 here)");
	lr.nmore_nets = 0;
	refused(&lr, enrolled, -EINVAL, "no disk on /run/remusdb/vm1.disk1 (the VM's disk 1 here)");
	free(both);
}

static void test_restore_xml_refusals(void **state)
{
	struct rdb_lvrestore other = r;
	char *mb = malloc(sizeof(enrolled) + 64);
	const char *at = strstr(enrolled, "  <devices>");

	/* not enrolled */
	refused(&r, "<domain type='qemu'><name>vm1</name><devices/></domain>", -EINVAL,
		"not enrolled on this host");
	/* enrolled for another run_dir */
	other.qmp = "/srv/rdb/vm1.qmp";
	refused(&other, enrolled, -EINVAL, "this host's run_dir");
	other = r;
	other.disk = "/srv/rdb/vm1.disk";
	refused(&other, enrolled, -EINVAL, "/srv/rdb/vm1.disk");
	/* its own memory backing */
	sprintf(mb, "%.*s  <memoryBacking><hugepages/></memoryBacking>\n%s",
		(int)(at - enrolled), enrolled, at);
	refused(&r, mb, -ENOTSUP, "<memoryBacking> of its own");
	free(mb);
}

/* a VM with event_port: its domain must carry the port on this host's
 * socket (enroll --event-port), or the restore is refused and remusdbd
 * restores into its own QEMU */
static void test_restore_xml_event_port(void **state)
{
	struct rdb_lvrestore ev = r;
	const char *at = strstr(enrolled, "  </qemu:commandline>");
	char *with = malloc(sizeof(enrolled) + 256), err[256] = "", *x = NULL;

	ev.event = "/run/remusdb/vm1.event";
	refused(&ev, enrolled, -EINVAL, "enroll it with --event-port");
	sprintf(with, "%.*s    <qemu:arg value='-chardev'/>\n"
		"    <qemu:arg value='socket,id=rdbevent,path=/run/remusdb/vm1.event,"
		"server=on,wait=off'/>\n%s", (int)(at - enrolled), enrolled, at);
	assert_int_equal(rdb_lvrestore_xml(&ev, with, &x, err, sizeof(err)), 0);
	free(x);
	ev.event = "/srv/rdb/vm1.event";
	refused(&ev, with, -EINVAL, "/srv/rdb/vm1.event");
	free(with);
}

/* a path with a quote goes into the attribute escaped */
static void test_restore_xml_escapes(void **state)
{
	struct rdb_lvrestore q = r;
	char err[256], *x = NULL;

	q.ram_image = "/srv/it's&<here>.img";
	assert_int_equal(rdb_lvrestore_xml(&q, enrolled, &x, err, sizeof(err)), 0);
	assert_non_null(strstr(x, "value='/srv/it&apos;s&amp;&lt;here&gt;.img'/>"));
	free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restore_xml),
		cmocka_unit_test(test_restore_xml_refusals),
		cmocka_unit_test(test_restore_xml_several),
		cmocka_unit_test(test_restore_xml_event_port),
		cmocka_unit_test(test_restore_xml_escapes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

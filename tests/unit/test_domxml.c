// SPDX-License-Identifier: GPL-2.0-only
/* remusdbctl enroll/unenroll on domain XML (domxml.c) and the backup's
 * QEMU arguments from libvirt's command line (qemuargv.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "domxml.h"
#include "qemuargv.h"
#include "roimage.h"

/* A Debian host's domain as `virsh dumpxml --inactive` prints it (after
 * virt-install): a raw image, a bridge NIC, the usual devices. */
static const char plain[] =
	"<domain type='kvm'>\n"
	"  <name>db1</name>\n"
	"  <uuid>5a3c6f0e-3b1e-4c4e-9d0a-1f2e3d4c5b6a</uuid>\n"
	"  <metadata>\n"
	"    <libosinfo:libosinfo xmlns:libosinfo=\"http://libosinfo.org/xmlns/libvirt/domain/1.0\">\n"
	"      <libosinfo:os id=\"http://debian.org/debian/12\"/>\n"
	"    </libosinfo:libosinfo>\n"
	"  </metadata>\n"
	"  <memory unit='KiB'>1048576</memory>\n"
	"  <currentMemory unit='KiB'>1048576</currentMemory>\n"
	"  <vcpu placement='static'>2</vcpu>\n"
	"  <os>\n"
	"    <type arch='x86_64' machine='pc-i440fx-7.2'>hvm</type>\n"
	"    <boot dev='hd'/>\n"
	"  </os>\n"
	"  <features>\n"
	"    <acpi/>\n"
	"    <apic/>\n"
	"  </features>\n"
	"  <cpu mode='host-passthrough' check='none' migratable='on'/>\n"
	"  <clock offset='utc'/>\n"
	"  <on_poweroff>destroy</on_poweroff>\n"
	"  <devices>\n"
	"    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n"
	"    <disk type='file' device='disk'>\n"
	"      <driver name='qemu' type='raw' cache='none' discard='unmap'/>\n"
	"      <source file='/var/lib/libvirt/images/db1.img'/>\n"
	"      <target dev='vda' bus='virtio'/>\n"
	"      <address type='pci' domain='0x0000' bus='0x00' slot='0x04' function='0x0'/>\n"
	"    </disk>\n"
	"    <controller type='usb' index='0' model='piix3-uhci'>\n"
	"      <address type='pci' domain='0x0000' bus='0x00' slot='0x01' function='0x2'/>\n"
	"    </controller>\n"
	"    <controller type='pci' index='0' model='pci-root'/>\n"
	"    <interface type='bridge'>\n"
	"      <mac address='52:54:00:6b:3c:01'/>\n"
	"      <source bridge='br0'/>\n"
	"      <model type='virtio'/>\n"
	"      <address type='pci' domain='0x0000' bus='0x00' slot='0x03' function='0x0'/>\n"
	"    </interface>\n"
	"    <serial type='pty'>\n"
	"      <target type='isa-serial' port='0'>\n"
	"        <model name='isa-serial'/>\n"
	"      </target>\n"
	"    </serial>\n"
	"    <console type='pty'>\n"
	"      <target type='serial' port='0'/>\n"
	"    </console>\n"
	"    <channel type='unix'>\n"
	"      <target type='virtio' name='org.qemu.guest_agent.0'/>\n"
	"      <address type='virtio-serial' controller='0' bus='0' port='1'/>\n"
	"    </channel>\n"
	"    <input type='mouse' bus='ps2'/>\n"
	"    <input type='keyboard' bus='ps2'/>\n"
	"    <memballoon model='virtio'>\n"
	"      <address type='pci' domain='0x0000' bus='0x00' slot='0x05' function='0x0'/>\n"
	"    </memballoon>\n"
	"  </devices>\n"
	"</domain>\n";

/* The test guest as the e2e test defines it: no <features>, no
 * <metadata>, a tap of its own, passthrough arguments already. */
static const char bare[] =
	"<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>\n"
	"  <name>vm1</name>\n"
	"  <uuid>7f8deec4-2208-42c6-842c-7b15a19fcfe6</uuid>\n"
	"  <memory unit='KiB'>262144</memory>\n"
	"  <os>\n"
	"    <type arch='x86_64' machine='pc-i440fx-10.0'>hvm</type>\n"
	"  </os>\n"
	"  <devices>\n"
	"    <disk type='file' device='disk'>\n"
	"      <source file='/srv/vm1.img'/>\n"
	"      <target dev='vda' bus='virtio'/>\n"
	"    </disk>\n"
	"    <interface type='ethernet'>\n"
	"      <mac address='52:54:00:52:44:01'/>\n"
	"      <target dev='vmtap0' managed='no'/>\n"
	"      <model type='e1000'/>\n"
	"      <boot order='2'/>\n"
	"    </interface>\n"
	"  </devices>\n"
	"  <qemu:commandline>\n"
	"    <qemu:arg value='-msg'/>\n"
	"    <qemu:arg value='timestamp=on'/>\n"
	"  </qemu:commandline>\n"
	"</domain>\n";

static const char *const fw[] = { "/opt/qemu/pc-bios", "/usr/share/seabios" };
static const struct rdb_enroll_params params = {
	.emulator = "/opt/remusdb/bin/qemu-system-x86_64",
	.run_dir = "/run/remusdb",
	.tap = "vmtap3",
	.firmware_dirs = fw,
	.nfirmware = 2,
};

static char *enrolled(const char *xml, const struct rdb_enroll_params *p)
{
	char err[512] = "", *out = NULL;
	int rc = rdb_domxml_enroll(xml, p, &out, err, sizeof(err));

	if (rc != 0)
		fail_msg("enroll: %d %s", rc, err);
	return out;
}

static void has(const char *text, const char *frag)
{
	if (!strstr(text, frag))
		fail_msg("missing %s in:\n%s", frag, text);
}

static void test_enroll_plain_domain(void **state)
{
	char *x = enrolled(plain, &params);
	const char *d = strstr(x, "<devices>");

	/* the disk and the NIC leave libvirt's devices */
	assert_null(strstr(d, "<disk"));
	has(d, "<emulator>/opt/remusdb/bin/qemu-system-x86_64</emulator>");
	/* no <interface> left among the devices: the NIC is remusdbd's */
	assert_null(strstr(d, "<interface"));
	assert_ptr_equal(strstr(x, "<interface"), strstr(x, "<interface type=\"bridge\">"));
	/* the NIC through the command line: same model, MAC, PCI slot */
	has(x, "<qemu:commandline>\n"
	       "    <qemu:arg value=\"-L\"/>\n"
	       "    <qemu:arg value=\"/opt/qemu/pc-bios\"/>\n"
	       "    <qemu:arg value=\"-L\"/>\n"
	       "    <qemu:arg value=\"/usr/share/seabios\"/>\n"
	       "    <qemu:arg value=\"-qmp\"/>\n"
	       "    <qemu:arg value=\"unix:/run/remusdb/db1.qmp,server=on,wait=off\"/>\n"
	       "    <qemu:arg value=\"-qmp\"/>\n"
	       "    <qemu:arg value=\"unix:/run/remusdb/db1.wd.qmp,server=on,wait=off\"/>\n"
	       "    <qemu:arg value=\"-netdev\"/>\n"
	       "    <qemu:arg value=\"stream,id=net0,server=off,addr.type=unix,addr.path=/run/remusdb/db1.net,reconnect-ms=100\"/>\n"
	       /* the disk: an NBD node on remusdbd's socket that holds the
		* guest's requests across a reconnect, the device where the
		* disk was, booting first (<os><boot dev='hd'/>) */
	       "    <qemu:arg value=\"-blockdev\"/>\n"
	       "    <qemu:arg value=\"{&quot;driver&quot;:&quot;nbd&quot;,&quot;server&quot;:{&quot;type&quot;:&quot;unix&quot;,"
	       "&quot;path&quot;:&quot;/run/remusdb/db1.disk&quot;},&quot;node-name&quot;:&quot;rdbdisk0&quot;,"
	       "&quot;reconnect-delay&quot;:15,&quot;discard&quot;:&quot;unmap&quot;}\"/>\n"
	       "    <qemu:arg value=\"-device\"/>\n"
	       "    <qemu:arg value=\"{&quot;driver&quot;:&quot;virtio-blk-pci&quot;,&quot;drive&quot;:&quot;rdbdisk0&quot;,"
	       "&quot;id&quot;:&quot;rdbblk0&quot;,&quot;bus&quot;:&quot;pci.0&quot;,&quot;addr&quot;:&quot;0x4&quot;,"
	       "&quot;bootindex&quot;:1}\"/>\n"
	       "    <qemu:arg value=\"-device\"/>\n"
	       "    <qemu:arg value=\"{&quot;driver&quot;:&quot;virtio-net-pci&quot;,&quot;netdev&quot;:&quot;net0&quot;,&quot;mac&quot;:&quot;52:54:00:6b:3c:01&quot;,&quot;id&quot;:&quot;rdbnic0&quot;,&quot;bus&quot;:&quot;pci.0&quot;,&quot;addr&quot;:&quot;0x3&quot;}\"/>\n"
	       "  </qemu:commandline>\n</domain>");
	has(x, "<domain xmlns:qemu=\"http://libvirt.org/schemas/domain/qemu/1.0\" type=\"kvm\">");
	/* what protect and unenroll need, beside libosinfo's metadata */
	has(x, "<metadata>\n    <libosinfo:libosinfo");
	has(x, "<remusdb:vm xmlns:remusdb=\"https://remusdb.example/xmlns/vm/1\" version=\"1\">");
	has(x, "<remusdb:net socket=\"/run/remusdb/db1.net\" mac=\"52:54:00:6b:3c:01\" "
	       "tap=\"vmtap3\" bridge=\"br0\" device=\"virtio-net-pci\"/>");
	has(x, "<remusdb:disk socket=\"/run/remusdb/db1.disk\" image=\"/var/lib/libvirt/images/db1.img\"/>");
	/* the disk and the NIC were the 2nd and 5th of the devices */
	has(x, "<remusdb:undo emulator=\"/usr/bin/qemu-system-x86_64\" "
	       "positions=\"1 4\" added=\"qemu-ns commandline\">");
	/* acpi was there: not added twice */
	has(x, "<features>\n    <acpi/>\n    <apic/>\n  </features>");
	free(x);
}

static void test_enroll_reads_back(void **state)
{
	char *x = enrolled(plain, &params), err[256];
	struct rdb_domxml_vm vm;

	assert_int_equal(rdb_domxml_read(x, &vm, err, sizeof(err)), 0);
	assert_string_equal(vm.name, "db1");
	assert_int_equal(vm.memory_kib, 1048576);
	assert_string_equal(vm.qmp, "/run/remusdb/db1.qmp");
	assert_string_equal(vm.watchdog_qmp, "/run/remusdb/db1.wd.qmp");
	assert_string_equal(vm.net_socket, "/run/remusdb/db1.net");
	assert_string_equal(vm.disk_socket, "/run/remusdb/db1.disk");
	assert_string_equal(vm.disk, "/var/lib/libvirt/images/db1.img");
	assert_string_equal(vm.tap, "vmtap3");
	assert_string_equal(vm.mac, "52:54:00:6b:3c:01");
	/* a domain that is not enrolled has nothing to read */
	assert_int_equal(rdb_domxml_read(plain, &vm, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "remusdbctl enroll db1"));
	free(x);
}

/* what enroll adds where there was nothing: features/acpi, emulator; its
 * arguments after the domain's own; the NIC's boot order kept */
static void test_enroll_bare_domain(void **state)
{
	struct rdb_enroll_params p = params;
	char *x;

	p.tap = NULL;	/* the interface's own tap */
	p.nfirmware = 0;
	x = enrolled(bare, &p);
	has(x, "</os>\n  <features>\n    <acpi/>\n  </features>");
	has(x, "<devices>\n    <emulator>/opt/remusdb/bin/qemu-system-x86_64</emulator>\n"
	       "  </devices>");
	/* no PCI addresses given: free slots, the disk's first; the disk
	 * boots first (no <os><boot>, no kernel), then the NIC */
	has(x, "&quot;bus&quot;:&quot;pci.0&quot;,&quot;addr&quot;:&quot;0x3&quot;,&quot;bootindex&quot;:1}");
	has(x, "<qemu:arg value=\"timestamp=on\"/>\n    <qemu:arg value=\"-qmp\"/>");
	has(x, "&quot;driver&quot;:&quot;e1000&quot;");
	has(x, "&quot;addr&quot;:&quot;0x4&quot;,&quot;bootindex&quot;:2}");
	has(x, "tap=\"vmtap0\"");
	has(x, "<remusdb:undo positions=\"0 1\" added=\"metadata emulator features acpi\">");
	free(x);
}

/* unenroll gives back, byte for byte, what enroll was given (in the form
 * both write) */
static void roundtrip(const char *orig)
{
	char err[512] = "", *x = enrolled(orig, &params), *back = NULL, *norm = NULL;

	assert_int_equal(rdb_domxml_unenroll(x, &back, err, sizeof(err)), 0);
	assert_int_equal(rdb_domxml_normalize(orig, &norm, err, sizeof(err)), 0);
	if (strcmp(back, norm))
		fail_msg("unenroll gave\n%s\ninstead of\n%s", back, norm);
	free(x);
	free(back);
	free(norm);
}

static void test_unenroll_gives_back_the_original(void **state)
{
	roundtrip(plain);
	roundtrip(bare);
}

static void test_enroll_twice_changes_nothing(void **state)
{
	char err[256] = "", *x = enrolled(plain, &params), *again = (char *)1;

	assert_int_equal(rdb_domxml_enroll(x, &params, &again, err, sizeof(err)), 1);
	assert_null(again);
	/* and unenroll of a domain that is not enrolled */
	assert_int_equal(rdb_domxml_unenroll(plain, &again, err, sizeof(err)), 1);
	assert_null(again);
	free(x);
}

/* enroll's arguments edited away: unenroll does not guess */
static void test_unenroll_refuses_edited_arguments(void **state)
{
	char err[256] = "", *x = enrolled(plain, &params), *back = NULL, *q;

	q = strstr(x, "db1.wd.qmp,server=on");
	assert_non_null(q);
	memcpy(q, "db1.xx.qmp", 10);
	assert_int_equal(rdb_domxml_unenroll(x, &back, err, sizeof(err)), -EINVAL);
	assert_null(back);
	assert_non_null(strstr(err, "by hand"));
	free(x);
}

static void refused(const char *xml, const struct rdb_enroll_params *p, int want,
		    const char *msg)
{
	char err[512] = "", *out = (char *)1;
	int rc = rdb_domxml_enroll(xml, p, &out, err, sizeof(err));

	if (rc != want || !strstr(err, msg))
		fail_msg("enroll: %d '%s', want %d '%s'", rc, err, want, msg);
	assert_null(out);
}

/* base with one substitution */
static char *edit_in(const char *base, const char *from, const char *to)
{
	const char *at = strstr(base, from);
	char *s;

	assert_non_null(at);
	s = malloc(strlen(base) + strlen(to) + 1);
	sprintf(s, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
	return s;
}

static char *edit(const char *from, const char *to)
{
	return edit_in(plain, from, to);
}

/* A production database VM: an OS disk, a qcow2 data disk, a CD-ROM, a
 * client NIC and an admin NIC. */
static const char several[] =
	"<domain type='kvm'>\n"
	"  <name>db2</name>\n"
	"  <memory unit='KiB'>2097152</memory>\n"
	"  <os>\n"
	"    <type arch='x86_64' machine='pc-i440fx-7.2'>hvm</type>\n"
	"    <boot dev='hd'/>\n"
	"  </os>\n"
	"  <devices>\n"
	"    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n"
	"    <disk type='file' device='disk'>\n"
	"      <driver name='qemu' type='raw'/>\n"
	"      <source file='/srv/db2-os.img'/>\n"
	"      <target dev='vda' bus='virtio'/>\n"
	"      <address type='pci' domain='0x0000' bus='0x00' slot='0x04' function='0x0'/>\n"
	"    </disk>\n"
	"    <disk type='file' device='disk'>\n"
	"      <driver name='qemu' type='qcow2' discard='unmap'/>\n"
	"      <source file='/srv/db2-data.qcow2'/>\n"
	"      <target dev='vdb' bus='virtio'/>\n"
	"      <address type='pci' domain='0x0000' bus='0x00' slot='0x06' function='0x0'/>\n"
	"    </disk>\n"
	"    <disk type='file' device='cdrom'>\n"
	"      <driver name='qemu' type='raw'/>\n"
	"      <source file='/srv/tools.iso'/>\n"
	"      <target dev='hdc' bus='ide'/>\n"
	"      <readonly/>\n"
	"    </disk>\n"
	"    <controller type='pci' index='0' model='pci-root'/>\n"
	"    <interface type='bridge'>\n"
	"      <mac address='52:54:00:6b:3c:11'/>\n"
	"      <source bridge='br0'/>\n"
	"      <model type='virtio'/>\n"
	"      <address type='pci' domain='0x0000' bus='0x00' slot='0x03' function='0x0'/>\n"
	"    </interface>\n"
	"    <interface type='bridge'>\n"
	"      <mac address='52:54:00:6b:3c:12'/>\n"
	"      <source bridge='adm0'/>\n"
	"      <model type='e1000'/>\n"
	"      <address type='pci' domain='0x0000' bus='0x00' slot='0x07' function='0x0'/>\n"
	"    </interface>\n"
	"  </devices>\n"
	"</domain>\n";

static void test_enroll_several(void **state)
{
	static const char *const more[] = { "admtap0" };
	struct rdb_enroll_params p = params;
	struct rdb_domxml_vm vm;
	char err[512] = "", *x, *back = NULL, *norm = NULL;
	const char *d;

	p.more_taps = more;
	p.nmore_taps = 1;
	x = enrolled(several, &p);
	d = strstr(x, "<devices>");
	/* the CD-ROM stays libvirt's, the writable disks and NICs leave */
	has(d, "<disk type=\"file\" device=\"cdrom\">");
	assert_null(strstr(strstr(d, "</disk>"), "<disk"));
	assert_null(strstr(d, "<interface"));
	/* two netdevs, the second on NAME.net1 with id net1 */
	has(x, "addr.path=/run/remusdb/db2.net,reconnect-ms=100");
	has(x, "stream,id=net1,server=off,addr.type=unix,addr.path=/run/remusdb/db2.net1,reconnect-ms=100");
	/* the first disk as before, the second a qcow2 node on the NBD
	 * export of its file's bytes, node disk1 (the backup's drive id) */
	has(x, "&quot;node-name&quot;:&quot;rdbdisk0&quot;,&quot;reconnect-delay&quot;:15}");
	has(x, "{&quot;driver&quot;:&quot;qcow2&quot;,&quot;node-name&quot;:&quot;disk1&quot;,"
	       "&quot;file&quot;:{&quot;driver&quot;:&quot;nbd&quot;,&quot;server&quot;:{&quot;type&quot;:"
	       "&quot;unix&quot;,&quot;path&quot;:&quot;/run/remusdb/db2.disk1&quot;},"
	       "&quot;reconnect-delay&quot;:15},&quot;discard&quot;:&quot;unmap&quot;}");
	/* only the first disk boots (<os><boot dev='hd'/>) */
	has(x, "&quot;drive&quot;:&quot;rdbdisk0&quot;,&quot;id&quot;:&quot;rdbblk0&quot;,&quot;bus&quot;:"
	       "&quot;pci.0&quot;,&quot;addr&quot;:&quot;0x4&quot;,&quot;bootindex&quot;:1}");
	has(x, "&quot;drive&quot;:&quot;disk1&quot;,&quot;id&quot;:&quot;rdbblk1&quot;,&quot;bus&quot;:"
	       "&quot;pci.0&quot;,&quot;addr&quot;:&quot;0x6&quot;}");
	has(x, "{&quot;driver&quot;:&quot;e1000&quot;,&quot;netdev&quot;:&quot;net1&quot;,&quot;mac&quot;:"
	       "&quot;52:54:00:6b:3c:12&quot;,&quot;id&quot;:&quot;rdbnic1&quot;,&quot;bus&quot;:&quot;pci.0&quot;,"
	       "&quot;addr&quot;:&quot;0x7&quot;}");
	has(x, "<remusdb:net socket=\"/run/remusdb/db2.net1\" mac=\"52:54:00:6b:3c:12\" "
	       "tap=\"admtap0\" bridge=\"adm0\" device=\"e1000\"/>");
	has(x, "<remusdb:disk socket=\"/run/remusdb/db2.disk1\" image=\"/srv/db2-data.qcow2\" "
	       "format=\"qcow2\"/>");
	has(x, "positions=\"1 2 5 6\"");
	/* read back: the first of each, and the others in order */
	assert_int_equal(rdb_domxml_read(x, &vm, err, sizeof(err)), 0);
	assert_string_equal(vm.disk, "/srv/db2-os.img");
	assert_string_equal(vm.tap, "vmtap3");
	assert_int_equal(vm.nmore_disks, 1);
	assert_string_equal(vm.more_disks[0], "/srv/db2-data.qcow2");
	assert_int_equal(vm.nmore_nics, 1);
	assert_string_equal(vm.more_nics[0].tap, "admtap0");
	assert_string_equal(vm.more_nics[0].mac, "52:54:00:6b:3c:12");
	/* unenroll: every element back where it was, byte for byte */
	assert_int_equal(rdb_domxml_unenroll(x, &back, err, sizeof(err)), 0);
	assert_int_equal(rdb_domxml_normalize(several, &norm, err, sizeof(err)), 0);
	if (strcmp(back, norm))
		fail_msg("unenroll gave\n%s\ninstead of\n%s", back, norm);
	free(x);
	free(back);
	free(norm);
	/* one --tap per interface, and not the same twice */
	p.nmore_taps = 0;
	refused(several, &p, -EINVAL, "interface 1 (MAC 52:54:00:6b:3c:12): which tap");
	{
		static const char *const three[] = { "a0", "b0" };
		static const char *const same[] = { "vmtap3" };

		p.more_taps = three;
		p.nmore_taps = 2;
		refused(several, &p, -EINVAL, "has 2 network interfaces and 3 taps");
		p.more_taps = same;
		p.nmore_taps = 1;
		refused(several, &p, -EINVAL, "both use tap vmtap3");
	}
}

/* A UEFI guest: the firmware's code a read-only -blockdev, its variable
 * store the last replicated disk, both on -machine pflash0/pflash1. */
static void test_enroll_uefi(void **state)
{
	static const char *const more[] = { "admtap0" };
	struct rdb_enroll_params p = params;
	struct rdb_domxml_vm vm;
	char err[512] = "", *x, *back = NULL, *norm = NULL;
	char *uefi = edit_in(several, "  <os>\n    <type arch='x86_64' machine='pc-i440fx-7.2'>hvm</type>\n",
			     "  <os firmware='efi'>\n    <type arch='x86_64' machine='pc-i440fx-7.2'>hvm</type>\n"
			     "    <firmware>\n      <feature enabled='no' name='secure-boot'/>\n    </firmware>\n"
			     "    <loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE_4M.fd</loader>\n"
			     "    <nvram template='/usr/share/OVMF/OVMF_VARS_4M.fd'>/var/lib/libvirt/qemu/nvram/db2_VARS.fd</nvram>\n");
	const char *os;

	p.more_taps = more;
	p.nmore_taps = 1;
	x = enrolled(uefi, &p);
	os = strstr(x, "<os>");
	assert_non_null(os);
	assert_true(strstr(os, "<loader") == NULL || strstr(os, "<loader") > strstr(os, "</os>"));
	assert_true(strstr(os, "<nvram") == NULL || strstr(os, "<nvram") > strstr(os, "</os>"));
	has(x, "{&quot;driver&quot;:&quot;file&quot;,&quot;filename&quot;:&quot;/usr/share/OVMF/"
	       "OVMF_CODE_4M.fd&quot;,&quot;node-name&quot;:&quot;rdbpflash0&quot;,&quot;read-only&quot;:true}");
	has(x, "<qemu:arg value=\"pflash0=rdbpflash0\"/>");
	/* the variable store after the two writable disks: NAME.disk2 */
	has(x, "{&quot;driver&quot;:&quot;nbd&quot;,&quot;server&quot;:{&quot;type&quot;:&quot;unix&quot;,"
	       "&quot;path&quot;:&quot;/run/remusdb/db2.disk2&quot;},&quot;node-name&quot;:&quot;rdbnvram&quot;,"
	       "&quot;reconnect-delay&quot;:15}");
	has(x, "<qemu:arg value=\"pflash1=rdbnvram\"/>");
	assert_null(strstr(x, "property=secure"));
	has(x, "<remusdb:nvram socket=\"/run/remusdb/db2.disk2\" "
	       "image=\"/var/lib/libvirt/qemu/nvram/db2_VARS.fd\" code=\"/usr/share/OVMF/OVMF_CODE_4M.fd\"/>");
	has(x, "os-firmware=\"efi\"");
	assert_int_equal(rdb_domxml_read(x, &vm, err, sizeof(err)), 0);
	assert_string_equal(vm.nvram, "/var/lib/libvirt/qemu/nvram/db2_VARS.fd");
	assert_int_equal(vm.nmore_disks, 1);
	/* unenroll: <os firmware>, <firmware>, <loader>, <nvram> back */
	assert_int_equal(rdb_domxml_unenroll(x, &back, err, sizeof(err)), 0);
	assert_int_equal(rdb_domxml_normalize(uefi, &norm, err, sizeof(err)), 0);
	if (strcmp(back, norm))
		fail_msg("unenroll gave\n%s\ninstead of\n%s", back, norm);
	free(x);
	free(back);
	free(norm);
	free(uefi);
	/* Secure Boot's flash: SMM-only, as libvirt has it */
	uefi = edit_in(several, "    <boot dev='hd'/>\n", "    <loader readonly='yes' secure='yes' type='pflash'>"
		       "/usr/share/OVMF/OVMF_CODE_4M.ms.fd</loader>\n    <nvram>/srv/db2_VARS.fd</nvram>\n"
		       "    <boot dev='hd'/>\n");
	x = enrolled(uefi, &p);
	has(x, "driver=cfi.pflash01,property=secure,value=on");
	free(x);
	free(uefi);
	/* refused: what remusdbd would not replicate or cannot pass on */
	{
		static const struct {
			const char *os, *msg;
		} bad[] = {
			{ "    <loader readonly='yes' type='pflash'>/c.fd</loader>\n",
			  "firmware flash with no <nvram>" },
			{ "    <loader type='pflash'>/c.fd</loader>\n    <nvram>/v.fd</nvram>\n",
			  "is not readonly='yes'" },
			{ "    <loader readonly='yes' type='pflash' format='qcow2'>/c.qcow2</loader>\n"
			  "    <nvram format='qcow2'>/v.qcow2</nvram>\n", "is in qcow2 format" },
			{ "    <nvram>/v.fd</nvram>\n", "without a <loader type='pflash'>" },
			{ "    <loader readonly='yes' type='pflash'>c.fd</loader>\n    <nvram>/v.fd</nvram>\n",
			  "must be absolute file paths" },
			{ "    <loader readonly='yes' type='pflash'>/c.fd</loader>\n"
			  "    <nvram type='network'><source protocol='iscsi' name='x'/></nvram>\n",
			  "<nvram type='network'>" },
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char *b = edit_in(several, "    <boot dev='hd'/>\n", bad[i].os);

			refused(b, &p, i == 4 ? -EINVAL : -ENOTSUP, bad[i].msg);
			free(b);
		}
		uefi = edit_in(several, "  <os>\n", "  <os firmware='efi'>\n");
		refused(uefi, &p, -ENOTSUP, "and no <loader>/<nvram> yet");
		free(uefi);
	}
}

/* Disks on a controller's bus: the device libvirt would have made, on
 * the same bus and unit, the controller left to libvirt. */
static void test_enroll_controller_disks(void **state)
{
	static const char *const more[] = { "admtap0" };
	struct rdb_enroll_params p = params;
	char err[512] = "", *x, *back = NULL, *norm = NULL, *d, *e;

	p.more_taps = more;
	p.nmore_taps = 1;
	/* the OS disk on SATA (i440fx: an AHCI controller of its own), the
	 * data disk on virtio-scsi */
	d = edit_in(several, "      <target dev='vda' bus='virtio'/>\n"
		    "      <address type='pci' domain='0x0000' bus='0x00' slot='0x04' function='0x0'/>\n",
		    "      <target dev='sda' bus='sata'/>\n"
		    "      <address type='drive' controller='0' bus='0' target='0' unit='0'/>\n");
	e = edit_in(d, "      <target dev='vdb' bus='virtio'/>\n"
		    "      <address type='pci' domain='0x0000' bus='0x00' slot='0x06' function='0x0'/>\n",
		    "      <target dev='sdb' bus='scsi'/>\n"
		    "      <address type='drive' controller='0' bus='0' target='0' unit='1'/>\n");
	free(d);
	d = edit_in(e, "    <controller type='pci' index='0' model='pci-root'/>\n",
		    "    <controller type='pci' index='0' model='pci-root'/>\n"
		    "    <controller type='sata' index='0'>\n"
		    "      <address type='pci' domain='0x0000' bus='0x00' slot='0x05' function='0x0'/>\n"
		    "    </controller>\n"
		    "    <controller type='scsi' index='0' model='virtio-scsi'>\n"
		    "      <address type='pci' domain='0x0000' bus='0x00' slot='0x08' function='0x0'/>\n"
		    "    </controller>\n");
	free(e);
	x = enrolled(d, &p);
	has(x, "{&quot;driver&quot;:&quot;ide-hd&quot;,&quot;bus&quot;:&quot;sata0.0&quot;,"
	       "&quot;drive&quot;:&quot;rdbdisk0&quot;,&quot;id&quot;:&quot;rdbblk0&quot;,"
	       "&quot;bootindex&quot;:1}");
	has(x, "{&quot;driver&quot;:&quot;scsi-hd&quot;,&quot;bus&quot;:&quot;scsi0.0&quot;,"
	       "&quot;channel&quot;:0,&quot;scsi-id&quot;:0,&quot;lun&quot;:1,&quot;drive&quot;:"
	       "&quot;disk1&quot;,&quot;id&quot;:&quot;rdbblk1&quot;}");
	/* the controllers stay libvirt's */
	has(strstr(x, "<devices>"), "<controller type=\"sata\" index=\"0\">");
	has(strstr(x, "<devices>"), "<controller type=\"scsi\" index=\"0\" model=\"virtio-scsi\">");
	assert_int_equal(rdb_domxml_unenroll(x, &back, err, sizeof(err)), 0);
	assert_int_equal(rdb_domxml_normalize(d, &norm, err, sizeof(err)), 0);
	if (strcmp(back, norm))
		fail_msg("unenroll gave\n%s\ninstead of\n%s", back, norm);
	free(x);
	free(back);
	free(norm);
	/* q35's own AHCI is QEMU's "ide" bus */
	e = edit_in(d, "machine='pc-i440fx-7.2'", "machine='pc-q35-7.2'");
	x = enrolled(e, &p);
	has(x, "{&quot;driver&quot;:&quot;ide-hd&quot;,&quot;bus&quot;:&quot;ide.0&quot;,"
	       "&quot;drive&quot;:&quot;rdbdisk0&quot;");
	free(x);
	free(e);
	/* a disk on a controller the domain does not define; no address */
	e = edit_in(d, "<controller type='scsi' index='0'", "<controller type='scsi' index='1'");
	refused(e, &p, -EINVAL, "disk sdb is on scsi controller 0, which the domain does not define");
	free(e);
	e = edit_in(d, "      <address type='drive' controller='0' bus='0' target='0' unit='1'/>\n", "");
	refused(e, &p, -EINVAL, "disk sdb on bus scsi has no <address type='drive'>");
	free(e);
	e = edit_in(d, "bus='scsi'", "bus='usb'");
	refused(e, &p, -ENOTSUP, "disk sdb is on bus 'usb'");
	free(e);
	/* IDE (i440fx's own): bus and unit */
	x = edit_in(d, "<target dev='sda' bus='sata'/>", "<target dev='hda' bus='ide'/>");
	e = edit_in(x, "    <controller type='pci' index='0' model='pci-root'/>\n",
		    "    <controller type='pci' index='0' model='pci-root'/>\n"
		    "    <controller type='ide' index='0'/>\n");
	free(x);
	x = enrolled(e, &p);
	has(x, "{&quot;driver&quot;:&quot;ide-hd&quot;,&quot;bus&quot;:&quot;ide.0&quot;,&quot;unit&quot;:0,"
	       "&quot;drive&quot;:&quot;rdbdisk0&quot;");
	free(x);
	free(e);
	free(d);
}

/* What a checkpoint cannot carry is refused, naming it. */
static void test_enroll_refuses_devices(void **state)
{
	char *hostdev = edit("    <memballoon", "    <hostdev mode='subsystem' type='pci' managed='yes'>\n"
			     "      <source><address domain='0x0000' bus='0x02' slot='0x00' function='0x0'/></source>\n"
			     "    </hostdev>\n    <memballoon");
	char *fs = edit("    <memballoon", "    <filesystem type='mount'><driver type='virtiofs'/>"
			"<source dir='/srv'/><target dir='srv'/></filesystem>\n    <memballoon");
	char *nvram = edit("    <boot dev='hd'/>\n", "    <boot dev='hd'/>\n"
			   "    <loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE_4M.fd</loader>\n");
	char *shared = edit("      <target dev='vda' bus='virtio'/>\n",
			    "      <target dev='vda' bus='virtio'/>\n      <shareable/>\n");
	char *vhost = edit("<interface type='bridge'>", "<interface type='vhostuser'>");
	char *vmdk = edit("type='raw' cache", "type='vmdk' cache");

	refused(hostdev, &params, -ENOTSUP, "passthrough device (<hostdev type='pci'>)");
	refused(fs, &params, -ENOTSUP, "<filesystem> (driver 'virtiofs')");
	refused(nvram, &params, -ENOTSUP, "firmware flash with no <nvram>");
	refused(shared, &params, -ENOTSUP, "disk vda is shareable");
	refused(vhost, &params, -ENOTSUP, "interface type='vhostuser'");
	refused(vmdk, &params, -ENOTSUP, "disk vda is vmdk: remusdbd serves raw and qcow2");
	free(hostdev);
	free(fs);
	free(nvram);
	free(shared);
	free(vhost);
	free(vmdk);
}

static void test_enroll_refusals(void **state)
{
	char *two = edit("    <controller type='usb'",
			 "    <disk type='file' device='cdrom'>\n"
			 "      <driver name='qemu' type='raw'/>\n"
			 "      <target dev='hdc' bus='ide'/>\n"
			 "      <readonly/>\n"
			 "    </disk>\n    <controller type='usb'");
	char *qcow = edit("type='raw' cache", "type='qcow2' cache");
	char *block = edit("<disk type='file' device='disk'>", "<disk type='block' device='disk'>");
	char *sata = edit("<target dev='vda' bus='virtio'/>", "<target dev='sda' bus='usb'/>");
	char *c1 = edit("<interface type='bridge'>", "<!--");
	char *nonic = edit_in(c1, "</interface>", "-->");
	char *vnet = edit("<source bridge='br0'/>", "<source bridge='br0'/><target dev='vnet7'/>");
	char *bad_name = edit("<name>db1</name>", "<name>db 1</name>");
	char *xen = edit("<domain type='kvm'>", "<domain type='xen'>");
	struct rdb_enroll_params no_tap = params;

	no_tap.tap = NULL;
	/* (a CD-ROM and a qcow2 image are enrolled: test_enroll_several) */
	(void)two;
	(void)qcow;
	refused(block, &params, -ENOTSUP, "type='block'");
	refused(sata, &params, -ENOTSUP, "disk sda is on bus 'usb'");
	refused(nonic, &params, -ENOTSUP, "has no network interface");
	refused(vnet, &no_tap, -EINVAL, "--tap NAME: a tap on bridge br0");
	refused(bad_name, &params, -EINVAL, "domain name 'db 1'");
	refused(xen, &params, -ENOTSUP, "only QEMU domains");
	refused("<domain type='kvm'><name>x</name>", &params, -EINVAL,
		"malformed domain XML (line 1)");
	refused("", &params, -EINVAL, "malformed domain XML");
	refused("<network><name>default</name></network>", &params, -EINVAL,
		"the root element is <network>");
	free(two);
	free(qcow);
	free(block);
	free(sata);
	free(c1);
	free(nonic);
	free(vnet);
	free(bad_name);
	free(xen);
}

/* a q35 NIC behind a root port: the port's bus name; memory in GiB */
static void test_q35_bus_and_units(void **state)
{
	char *a = edit("machine='pc-i440fx-7.2'", "machine='pc-q35-7.2'");
	char *b, *c, *x, err[256];
	const char *at = strstr(a, "bus='0x00' slot='0x03'");
	struct rdb_domxml_vm vm;

	assert_non_null(at);
	b = strdup(a);
	memcpy(b + (at - a), "bus='0x01' slot='0x00'", 22);
	c = strdup(b);
	at = strstr(c, "<memory unit='KiB'>1048576</memory>");
	memcpy((char *)at, "<memory unit='GiB'>0000002</memory>", 35);
	x = enrolled(c, &params);
	has(x, "&quot;bus&quot;:&quot;pci.1&quot;,&quot;addr&quot;:&quot;0x0&quot;}");
	assert_int_equal(rdb_domxml_read(x, &vm, err, sizeof(err)), 0);
	assert_int_equal(vm.memory_kib, 2 * 1048576);
	free(a);
	free(b);
	free(c);
	free(x);
}

/* ---- the backup's QEMU arguments ---- */

/* virConnectDomainXMLToNative's answer for an enrolled test guest (cf.
 * docs/libvirt-research.md: the real one, with enroll's arguments). */
static const char native[] =
	"LC_ALL=C PATH=/usr/sbin:/usr/bin HOME=/var/lib/libvirt/qemu/domain--1-vm1 "
	"XDG_DATA_HOME=/var/lib/libvirt/qemu/domain--1-vm1/.local/share "
	"/opt/remusdb/bin/qemu-system-x86_64 -name guest=vm1,debug-threads=on -S "
	"-object '{\"qom-type\":\"secret\",\"id\":\"masterKey0\",\"format\":\"raw\","
	"\"file\":\"/var/lib/libvirt/qemu/domain--1-vm1/master-key.aes\"}' "
	"-machine pc-i440fx-10.0,usb=off,dump-guest-core=off,memory-backend=pc.ram "
	"-accel tcg -cpu qemu64 -m 256 "
	"-object '{\"qom-type\":\"memory-backend-ram\",\"id\":\"pc.ram\",\"size\":268435456}' "
	"-overcommit mem-lock=off -smp 1,sockets=1,cores=1,threads=1 "
	"-uuid 7f8deec4-2208-42c6-842c-7b15a19fcfe6 -display none -no-user-config -nodefaults "
	"-chardev socket,id=charmonitor,path=/var/lib/libvirt/qemu/domain--1-vm1/monitor.sock,server=on,wait=off "
	"-mon chardev=charmonitor,id=monitor,mode=control -rtc base=utc -no-shutdown "
	"-boot strict=on -kernel /srv/guest/vmlinuz -initrd /srv/guest/initrd.img "
	"-append 'console=ttyS0 remusdb.run=\"/usr/bin/seqsrv --port 7000\" it'\\''s' "
	"-device '{\"driver\":\"piix3-usb-uhci\",\"id\":\"usb\",\"bus\":\"pci.0\",\"addr\":\"0x1.0x2\"}' "
	"-blockdev '{\"driver\":\"nbd\",\"server\":{\"type\":\"unix\",\"path\":\"/run/remusdb/vm1.disk\"},"
	"\"node-name\":\"libvirt-1-storage\",\"auto-read-only\":true,\"discard\":\"unmap\"}' "
	"-blockdev '{\"node-name\":\"libvirt-1-format\",\"read-only\":false,\"driver\":\"raw\","
	"\"file\":\"libvirt-1-storage\"}' "
	"-device '{\"driver\":\"virtio-blk-pci\",\"bus\":\"pci.0\",\"addr\":\"0x4\","
	"\"drive\":\"libvirt-1-format\",\"id\":\"virtio-disk0\",\"bootindex\":1}' "
	"-add-fd set=0,fd=22,opaque=serial0-source "
	"-chardev file,id=charserial0,path=/dev/fdset/0,append=on "
	"-device '{\"driver\":\"isa-serial\",\"chardev\":\"charserial0\",\"id\":\"serial0\",\"index\":0}' "
	"-chardev socket,id=charchannel0,path=/var/lib/libvirt/qemu/channel/target/ga.0,server=on,wait=off "
	"-device '{\"driver\":\"virtio-serial-pci\",\"id\":\"virtio-serial0\",\"bus\":\"pci.0\",\"addr\":\"0x5\"}' "
	"-device '{\"driver\":\"virtserialport\",\"bus\":\"virtio-serial0.0\",\"nr\":1,"
	"\"chardev\":\"charchannel0\",\"id\":\"channel0\",\"name\":\"org.qemu.guest_agent.0\"}' "
	"-audiodev '{\"id\":\"audio1\",\"driver\":\"none\"}' -vnc 127.0.0.1:0 "
	"-L /usr/share/seabios "
	"-qmp unix:/run/remusdb/vm1.qmp,server=on,wait=off "
	"-qmp unix:/run/remusdb/vm1.wd.qmp,server=on,wait=off "
	"-netdev stream,id=net0,server=off,addr.type=unix,addr.path=/run/remusdb/vm1.net,reconnect-ms=100 "
	"-device '{\"driver\":\"virtio-net-pci\",\"netdev\":\"net0\",\"mac\":\"52:54:00:52:44:01\","
	"\"id\":\"rdbnic0\",\"bus\":\"pci.0\",\"addr\":\"0x3\"}' "
	"-sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny "
	"-msg timestamp=on";

static void test_split_as_libvirt_quotes(void **state)
{
	struct rdb_strlist a;
	char err[256];

	assert_int_equal(rdb_qemuargv_split(native, &a, err, sizeof(err)), 0);
	/* no environment, no binary */
	assert_string_equal(a.v[0], "-name");
	assert_string_equal(a.v[a.n - 1], "timestamp=on");
	for (size_t i = 0; i < a.n; i++)
		if (!strcmp(a.v[i], "-append"))
			assert_string_equal(a.v[i + 1], "console=ttyS0 remusdb.run="
					    "\"/usr/bin/seqsrv --port 7000\" it's");
	rdb_qemuargv_free(&a);
	assert_int_equal(rdb_qemuargv_split("Q -append 'x", &a, err, sizeof(err)), -EINVAL);
	assert_int_equal(rdb_qemuargv_split("A=1 B=2", &a, err, sizeof(err)), -EINVAL);
}

static bool in(const struct rdb_strlist *l, const char *opt, const char *val)
{
	for (size_t i = 0; i + 1 < l->n; i++)
		if (!strcmp(l->v[i], opt) && (!val || !strcmp(l->v[i + 1], val)))
			return true;
	return false;
}

static bool any(const struct rdb_strlist *l, const char *frag)
{
	for (size_t i = 0; i < l->n; i++)
		if (strstr(l->v[i], frag))
			return true;
	return false;
}

static void test_backup_args(void **state)
{
	struct rdb_strlist a, b;
	struct rdb_vm_config c;
	char err[256], id[64];

	assert_int_equal(rdb_qemuargv_split(native, &a, err, sizeof(err)), 0);
	assert_int_equal(rdb_qemuargv_for_backup(&a, "/run/remusdb/vm1.disk", &b, id,
						 sizeof(id), err, sizeof(err)), 0);
	/* the device names the format node: the backup's -drive id */
	assert_string_equal(id, "libvirt-1-format");
	/* gone: libvirt's monitor, -S, its secret, the RAM backend, the
	 * disk's nodes, enroll's QMP and netdev, the serial port, -add-fd,
	 * the VNC server */
	assert_false(any(&b, "charmonitor"));
	assert_false(in(&b, "-mon", NULL) || in(&b, "-S", NULL) || in(&b, "-qmp", NULL) ||
		     in(&b, "-netdev", NULL) || in(&b, "-blockdev", NULL) ||
		     in(&b, "-add-fd", NULL) || in(&b, "-vnc", NULL));
	assert_false(any(&b, "masterKey0") || any(&b, "memory-backend-ram") ||
		     any(&b, "isa-serial") || any(&b, "charserial0"));
	/* kept in order: the machine, its devices, the firmware path, the
	 * kernel; the agent's channel unplugged (null) but there */
	assert_string_equal(b.v[0], "-name");
	assert_true(in(&b, "-machine", "pc-i440fx-10.0,usb=off,dump-guest-core=off,memory-backend=pc.ram"));
	assert_true(in(&b, "-m", "256") && in(&b, "-L", "/usr/share/seabios"));
	assert_true(in(&b, "-chardev", "null,id=charchannel0"));
	assert_true(any(&b, "\"driver\":\"virtserialport\""));
	assert_true(any(&b, "\"drive\":\"libvirt-1-format\""));
	assert_true(any(&b, "\"netdev\":\"net0\",\"mac\":\"52:54:00:52:44:01\""));
	assert_true(in(&b, "-kernel", "/srv/guest/vmlinuz"));
	/* a VM config the daemon takes: nothing host-specific left */
	rdb_config_defaults(&rdb_vm_config_table, &c);
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "name", "vm1", err, sizeof(err)), 0);
	rdb_config_set(&rdb_vm_config_table, &c, "qmp", "/run/remusdb/vm1.qmp", err, sizeof(err));
	rdb_config_set(&rdb_vm_config_table, &c, "net_socket", "/run/remusdb/vm1.net", err, sizeof(err));
	rdb_config_set(&rdb_vm_config_table, &c, "peer", "10.0.0.2:7788", err, sizeof(err));
	rdb_config_set(&rdb_vm_config_table, &c, "ram_mb", "256", err, sizeof(err));
	assert_int_equal(rdb_config_set(&rdb_vm_config_table, &c, "disk_id", id, err, sizeof(err)), 0);
	for (size_t i = 0; i < b.n; i++)
		rdb_config_set(&rdb_vm_config_table, &c, "qemu_arg", b.v[i], err, sizeof(err));
	if (rdb_vm_config_check(&c, err, sizeof(err)) != 0)
		fail_msg("check: %s", err);
	rdb_config_dispose(&rdb_vm_config_table, &c);
	rdb_qemuargv_free(&a);
	rdb_qemuargv_free(&b);
}

/* enroll's own disk (an nbd -blockdev of its own, no format node): its
 * node is the disk_id, the device stays */
static void test_backup_args_enrolled_disk(void **state)
{
	static const char line[] =
		"/opt/q -machine pc-i440fx-10.0,memory-backend=pc.ram -m 256 "
		"-blockdev '{\"driver\":\"nbd\",\"server\":{\"type\":\"unix\",\"path\":"
		"\"/run/remusdb/vm1.disk\"},\"node-name\":\"rdbdisk0\",\"reconnect-delay\":15}' "
		"-device '{\"driver\":\"virtio-blk-pci\",\"drive\":\"rdbdisk0\",\"id\":\"rdbblk0\","
		"\"bus\":\"pci.0\",\"addr\":\"0x3\",\"bootindex\":1}'";
	struct rdb_strlist a, b;
	char err[256], id[64];

	assert_int_equal(rdb_qemuargv_split(line, &a, err, sizeof(err)), 0);
	assert_int_equal(rdb_qemuargv_for_backup(&a, "/run/remusdb/vm1.disk", &b, id,
						 sizeof(id), err, sizeof(err)), 0);
	assert_string_equal(id, "rdbdisk0");
	assert_int_equal(b.n, 6);	/* -machine, -m, -device */
	assert_false(in(&b, "-blockdev", NULL));
	assert_true(any(&b, "\"drive\":\"rdbdisk0\""));
	rdb_qemuargv_free(&a);
	rdb_qemuargv_free(&b);
}

/* several disks (one qcow2) and NICs, and libvirt's CD-ROM: each disk's
 * NBD node and every netdev go, the CD-ROM's nodes stay read-only */
static void test_backup_args_several(void **state)
{
	static const char line[] =
		"/opt/q -machine pc-i440fx-10.0,memory-backend=pc.ram -m 256 "
		"-blockdev '{\"driver\":\"file\",\"filename\":\"/srv/tools.iso\",\"node-name\":"
		"\"libvirt-1-storage\",\"auto-read-only\":true,\"discard\":\"unmap\"}' "
		"-blockdev '{\"node-name\":\"libvirt-1-format\",\"read-only\":true,\"driver\":\"raw\","
		"\"file\":\"libvirt-1-storage\"}' "
		"-device '{\"driver\":\"ide-cd\",\"bus\":\"ide.1\",\"unit\":0,\"drive\":\"libvirt-1-format\"}' "
		"-netdev stream,id=net0,server=off,addr.type=unix,addr.path=/run/remusdb/db2.net,reconnect-ms=100 "
		"-netdev stream,id=net1,server=off,addr.type=unix,addr.path=/run/remusdb/db2.net1,reconnect-ms=100 "
		"-blockdev '{\"driver\":\"nbd\",\"server\":{\"type\":\"unix\",\"path\":"
		"\"/run/remusdb/db2.disk\"},\"node-name\":\"rdbdisk0\",\"reconnect-delay\":15}' "
		"-device '{\"driver\":\"virtio-blk-pci\",\"drive\":\"rdbdisk0\",\"id\":\"rdbblk0\"}' "
		"-blockdev '{\"driver\":\"qcow2\",\"node-name\":\"disk1\",\"file\":{\"driver\":\"nbd\","
		"\"server\":{\"type\":\"unix\",\"path\":\"/run/remusdb/db2.disk1\"},\"reconnect-delay\":15}}' "
		"-device '{\"driver\":\"virtio-blk-pci\",\"drive\":\"disk1\",\"id\":\"rdbblk1\"}'";
	struct rdb_strlist a, b;
	struct rdb_roimage ro[8];
	unsigned nro;
	char err[600], id[64];

	assert_int_equal(rdb_qemuargv_split(line, &a, err, sizeof(err)), 0);
	assert_int_equal(rdb_qemuargv_for_backup_n(&a, "/run/remusdb/db2.disk", 2, 2, &b, id,
						   sizeof(id), err, sizeof(err)), 0);
	assert_string_equal(id, "rdbdisk0");
	assert_false(in(&b, "-netdev", NULL));
	assert_false(any(&b, "db2.disk"));
	assert_true(any(&b, "\"drive\":\"disk1\""));
	assert_true(any(&b, "\"driver\":\"ide-cd\""));
	/* the CD-ROM's file node read-only as its format node: a read-only
	 * image the backup checks (roimage.h), not a writable drive */
	assert_true(any(&b, "\"filename\":\"/srv/tools.iso\""));
	assert_false(any(&b, "auto-read-only"));
	assert_int_equal(rdb_roimages_list(b.v, b.n, ro, &nro, err, sizeof(err)), 0);
	assert_int_equal(nro, 1);
	assert_string_equal(ro[0].path, "/srv/tools.iso");
	rdb_qemuargv_free(&b);
	/* a third NIC the VM config does not have, or a disk past its disks */
	assert_int_equal(rdb_qemuargv_for_backup_n(&a, "/run/remusdb/db2.disk", 2, 1, &b, id,
						   sizeof(id), err, sizeof(err)), -ENOTSUP);
	assert_non_null(strstr(err, "netdev net1"));
	assert_int_equal(rdb_qemuargv_for_backup_n(&a, "/run/remusdb/db2.disk", 1, 2, &b, id,
						   sizeof(id), err, sizeof(err)), -ENOTSUP);
	assert_non_null(strstr(err, "block node disk1"));
	rdb_qemuargv_free(&a);
}

static void backup_refused(const char *extra, const char *msg)
{
	struct rdb_strlist a, b;
	char err[256] = "", id[64], *line = malloc(sizeof(native) + strlen(extra) + 2);

	sprintf(line, "%s %s", native, extra);
	assert_int_equal(rdb_qemuargv_split(line, &a, err, sizeof(err)), 0);
	assert_int_equal(rdb_qemuargv_for_backup(&a, "/run/remusdb/vm1.disk", &b, id,
						 sizeof(id), err, sizeof(err)), -ENOTSUP);
	if (!strstr(err, msg))
		fail_msg("'%s' does not say '%s'", err, msg);
	assert_null(b.v);
	rdb_qemuargv_free(&a);
	free(line);
}

/* --event-port: the failover event port through the command line, in
 * the metadata, in the VM config (event_port), undone by unenroll; on the
 * backup its chardev goes (the restore adds its own), the port stays */
static void test_enroll_event_port(void **state)
{
	struct rdb_enroll_params p = params;
	char err[512] = "", *x, *back = NULL, *norm = NULL;
	struct rdb_domxml_vm vm;
	struct rdb_strlist a, b;
	char id[64];
	static const char line[] =
		"/opt/q -machine pc-i440fx-10.0,memory-backend=pc.ram -m 256 "
		"-chardev socket,id=rdbevent,path=/run/remusdb/db1.event,server=on,wait=off "
		"-device '{\"driver\":\"virtio-serial-pci\",\"id\":\"rdbvser\",\"bus\":\"pci.0\",\"addr\":\"0x6\"}' "
		"-device '{\"driver\":\"virtserialport\",\"bus\":\"rdbvser.0\",\"chardev\":\"rdbevent\",\"name\":\"org.remusdb.0\"}'";

	x = enrolled(plain, &params);	/* without: none of it */
	assert_null(strstr(x, "rdbevent"));
	assert_int_equal(rdb_domxml_read(x, &vm, err, sizeof(err)), 0);
	assert_string_equal(vm.event_socket, "");
	free(x);

	p.event_port = true;
	x = enrolled(plain, &p);
	has(x, "<remusdb:event socket=\"/run/remusdb/db1.event\"/>");
	has(x, "&quot;mac&quot;:&quot;52:54:00:6b:3c:01&quot;,&quot;id&quot;:&quot;rdbnic0&quot;,"
	       "&quot;bus&quot;:&quot;pci.0&quot;,&quot;addr&quot;:&quot;0x3&quot;}\"/>\n"
	       "    <qemu:arg value=\"-chardev\"/>\n"
	       "    <qemu:arg value=\"socket,id=rdbevent,path=/run/remusdb/db1.event,server=on,wait=off\"/>\n"
	       /* a slot none of the domain's devices has (0x3: the NIC,
		* 0x4: the disk; 0x2 the VGA...), in JSON as libvirt's */
	       "    <qemu:arg value=\"-device\"/>\n"
	       "    <qemu:arg value=\"{&quot;driver&quot;:&quot;virtio-serial-pci&quot;,&quot;id&quot;:&quot;rdbvser&quot;,"
	       "&quot;bus&quot;:&quot;pci.0&quot;,&quot;addr&quot;:&quot;0x6&quot;}\"/>\n"
	       "    <qemu:arg value=\"-device\"/>\n"
	       "    <qemu:arg value=\"{&quot;driver&quot;:&quot;virtserialport&quot;,&quot;bus&quot;:&quot;rdbvser.0&quot;,"
	       "&quot;chardev&quot;:&quot;rdbevent&quot;,&quot;name&quot;:&quot;org.remusdb.0&quot;}\"/>\n"
	       "  </qemu:commandline>");
	free(x);
	/* no addresses at all: the disk 0x3, the NIC 0x4, the port 0x5 */
	x = enrolled(bare, &p);
	has(x, "&quot;driver&quot;:&quot;virtio-serial-pci&quot;,&quot;id&quot;:&quot;rdbvser&quot;,"
	       "&quot;bus&quot;:&quot;pci.0&quot;,&quot;addr&quot;:&quot;0x5&quot;}");
	free(x);
	x = enrolled(plain, &p);
	assert_int_equal(rdb_domxml_read(x, &vm, err, sizeof(err)), 0);
	assert_string_equal(vm.event_socket, "/run/remusdb/db1.event");
	assert_int_equal(rdb_domxml_unenroll(x, &back, err, sizeof(err)), 0);
	assert_int_equal(rdb_domxml_normalize(plain, &norm, err, sizeof(err)), 0);
	assert_string_equal(back, norm);
	free(x);
	free(back);
	free(norm);

	assert_int_equal(rdb_qemuargv_split(line, &a, err, sizeof(err)), 0);
	assert_int_equal(rdb_qemuargv_for_backup(&a, NULL, &b, id, sizeof(id), err,
						 sizeof(err)), 0);
	assert_false(any(&b, "rdbevent,path") || in(&b, "-chardev", NULL));
	assert_true(any(&b, "\"driver\":\"virtio-serial-pci\",\"id\":\"rdbvser\""));
	assert_true(any(&b, "\"chardev\":\"rdbevent\",\"name\":\"org.remusdb.0\""));
	rdb_qemuargv_free(&a);
	rdb_qemuargv_free(&b);
}

/* The backup's arguments from a UEFI domain's: the code's node and its
 * pflash0 stay (the backup opens its own copy), the variable store's
 * NBD node and pflash1 go (the restore gives pflash1 its replica). */
static void test_backup_args_uefi(void **state)
{
	static const char line[] =
		"/usr/bin/qemu-system-x86_64 -machine pc-i440fx-10.0,usb=off "
		"-blockdev '{\"driver\":\"nbd\",\"server\":{\"type\":\"unix\",\"path\":\"/run/remusdb/vm1.disk\"},"
		"\"node-name\":\"rdbdisk0\",\"reconnect-delay\":15}' "
		"-device '{\"driver\":\"virtio-blk-pci\",\"drive\":\"rdbdisk0\",\"id\":\"rdbblk0\"}' "
		"-blockdev '{\"driver\":\"file\",\"filename\":\"/usr/share/OVMF/OVMF_CODE_4M.fd\","
		"\"node-name\":\"rdbpflash0\",\"read-only\":true}' "
		"-machine pflash0=rdbpflash0 "
		"-blockdev '{\"driver\":\"nbd\",\"server\":{\"type\":\"unix\",\"path\":\"/run/remusdb/vm1.disk1\"},"
		"\"node-name\":\"rdbnvram\",\"reconnect-delay\":15}' "
		"-machine pflash1=rdbnvram";
	struct rdb_strlist a, b;
	char err[256] = "", id[64];

	assert_int_equal(rdb_qemuargv_split(line, &a, err, sizeof(err)), 0);
	assert_int_equal(rdb_qemuargv_for_backup_n(&a, "/run/remusdb/vm1.disk", 2, 1, &b,
						   id, sizeof(id), err, sizeof(err)), 0);
	assert_string_equal(id, "rdbdisk0");
	assert_true(in(&b, "-machine", "pc-i440fx-10.0,usb=off"));
	assert_true(in(&b, "-machine", "pflash0=rdbpflash0"));
	assert_true(any(&b, "\"node-name\":\"rdbpflash0\""));
	assert_false(any(&b, "rdbnvram"));
	assert_false(any(&b, "vm1.disk"));
	rdb_qemuargv_free(&a);
	rdb_qemuargv_free(&b);
	/* counted as no disk of the VM's, the store's node is refused */
	assert_int_equal(rdb_qemuargv_split(line, &a, err, sizeof(err)), 0);
	if (rdb_qemuargv_for_backup_n(&a, "/run/remusdb/vm1.disk", 1, 1, &b, id,
				      sizeof(id), err, sizeof(err)) != -ENOTSUP)
		fail_msg("not refused: %s", err);
	assert_non_null(strstr(err, "rdbnvram"));
	rdb_qemuargv_free(&a);
}

static void test_backup_args_refusals(void **state)
{
	struct rdb_strlist a, b;
	char err[256] = "", id[64];

	backup_refused("-netdev '{\"type\":\"tap\",\"fd\":\"26\",\"id\":\"hostnet0\"}'",
		       "netdev hostnet0");
	backup_refused("-blockdev '{\"driver\":\"file\",\"filename\":\"/var/lib/libvirt/"
		       "qemu/nvram/vm1_VARS.fd\",\"node-name\":\"libvirt-pflash1-storage\"}'",
		       "libvirt-pflash1-storage");
	backup_refused("-object '{\"qom-type\":\"memory-backend-ram\",\"id\":\"ram-node0\","
		       "\"size\":1073741824}'", "ram-node0");
	/* a disk in the XML that libvirt's line does not have */
	assert_int_equal(rdb_qemuargv_split(native, &a, err, sizeof(err)), 0);
	assert_int_equal(rdb_qemuargv_for_backup(&a, "/run/remusdb/other.disk", &b, id,
						 sizeof(id), err, sizeof(err)), -ENOTSUP);
	rdb_qemuargv_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_enroll_plain_domain),
		cmocka_unit_test(test_enroll_reads_back),
		cmocka_unit_test(test_enroll_bare_domain),
		cmocka_unit_test(test_unenroll_gives_back_the_original),
		cmocka_unit_test(test_enroll_twice_changes_nothing),
		cmocka_unit_test(test_unenroll_refuses_edited_arguments),
		cmocka_unit_test(test_enroll_refusals),
		cmocka_unit_test(test_enroll_uefi),
		cmocka_unit_test(test_enroll_controller_disks),
		cmocka_unit_test(test_backup_args_uefi),
		cmocka_unit_test(test_enroll_several),
		cmocka_unit_test(test_enroll_refuses_devices),
		cmocka_unit_test(test_q35_bus_and_units),
		cmocka_unit_test(test_split_as_libvirt_quotes),
		cmocka_unit_test(test_backup_args),
		cmocka_unit_test(test_backup_args_enrolled_disk),
		cmocka_unit_test(test_backup_args_several),
		cmocka_unit_test(test_backup_args_refusals),
		cmocka_unit_test(test_enroll_event_port),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

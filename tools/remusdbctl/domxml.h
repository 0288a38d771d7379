/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A libvirt domain's XML, made protectable by remusdbd and back
 * (remusdbctl enroll / unenroll), and read for the VM config.  Pure
 * functions over XML text: no libvirt call, no file, no global state of
 * ours (libxml2 only).  docs/libvirt.md shows an enrolled domain.
 *
 * What enroll changes, all of it undone by unenroll from the metadata:
 *   - every writable <disk> (an image file, raw or qcow2, on bus virtio,
 *     sata, scsi or ide; up to 8) goes; each comes back through
 *     <qemu:commandline> as an NBD
 *     -blockdev on remusdbd's unix socket RUN_DIR/NAME.disk (the first),
 *     NAME.disk1, NAME.disk2, ... with reconnect-delay (which libvirt
 *     9.0's NBD disk lacks), a qcow2 node on top for a qcow2 image, and
 *     a virtio-blk -device, same PCI slot and boot order (on SATA, SCSI
 *     or IDE: the ide-hd or scsi-hd libvirt would make, on the same
 *     controller's bus at the same unit).  The first's
 *     node is RDB_DOMXML_DISK_NODE (the VM's disk_id), the k-th's disk<k>
 *     (the id remusdbd's restore gives extra disks);
 *   - CD-ROMs and read-only disks stay libvirt's (not replicated: the
 *     backup checks its own copy of the image at protect);
 *   - every <interface> (up to 4) goes; each NIC comes back through
 *     <qemu:commandline> as -netdev stream (RUN_DIR/NAME.net, NAME.net1,
 *     ...; ids net0, net1, ...) + -device, same model, MAC and PCI slot
 *     (libvirt has no native type for it);
 *   - two private QMP sockets for remusdbd (RUN_DIR/NAME.qmp, NAME.wd.qmp);
 *   - with event_port: the failover event port (commit protection's):
 *     a virtio-serial controller and port org.remusdb.0 on chardev
 *     rdbevent, a socket QEMU serves at RUN_DIR/NAME.event (where a
 *     backup's remusdbd looks for it after a restore);
 *   - -L firmware directories; <emulator> = the patched QEMU;
 *     <features><acpi/> (libvirt 9.0 passes -no-acpi otherwise, which
 *     QEMU 9+ refuses);
 *   - <metadata><remusdb:vm xmlns:remusdb=RDB_DOMXML_NS>: the sockets,
 *     MACs, taps, disk images, and the original elements with their
 *     places among the devices.
 *   - a UEFI guest's <os><loader type='pflash' readonly='yes'> and
 *     <nvram> (and <os firmware=...>, <firmware>) go: the code comes
 *     back as a read-only -blockdev (RDB_DOMXML_PFLASH0_NODE), the
 *     variable store as the VM's last replicated disk (nvram), an NBD
 *     -blockdev (RDB_DOMXML_NVRAM_NODE) on NAME.disk<k> after the
 *     writable disks; -machine pflash0=..., -machine pflash1=...;
 * Refused, naming the device: shared or network disks, disks on a USB
 * or other bus, passthrough devices (<hostdev>), interfaces whose
 * frames bypass QEMU (vhost-user, hostdev, vDPA), vhost-user
 * filesystems, a firmware flash with no <nvram>, a writable or non-raw
 * firmware.
 */
#ifndef RDB_DOMXML_H
#define RDB_DOMXML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDB_DOMXML_NS "https://remusdb.example/xmlns/vm/1"
#define RDB_DOMXML_QEMU_NS "http://libvirt.org/schemas/domain/qemu/1.0"
/* the first disk's block node: the VM's disk_id */
#define RDB_DOMXML_DISK_NODE "rdbdisk0"
/* a UEFI guest's firmware code and variable store (pflash0, pflash1) */
#define RDB_DOMXML_PFLASH0_NODE "rdbpflash0"
#define RDB_DOMXML_NVRAM_NODE "rdbnvram"
#define RDB_DOMXML_DISKS_MAX 8
#define RDB_DOMXML_NICS_MAX 4

struct rdb_enroll_params {
	const char *emulator;		/* absolute path of the patched QEMU */
	const char *run_dir;		/* remusdbd's run_dir: the VM's sockets */
	const char *tap;		/* host tap for the guest's frames; NULL:
					 * the interface's own <target dev> */
	const char *const *more_taps;	/* the other interfaces', in order */
	size_t nmore_taps;
	const char *const *firmware_dirs;	/* -L, in this order */
	size_t nfirmware;
	bool event_port;		/* add the failover event port */
};

/* What an enrolled domain tells remusdbd (rdb_domxml_read). */
struct rdb_domxml_vm {
	char name[65];
	uint64_t memory_kib;
	char qmp[108], watchdog_qmp[108], net_socket[108], disk_socket[108];
	char disk[1024];		/* "" = no disk */
	char tap[16], mac[18];
	char event_socket[108];		/* "" = no failover event port */
	char nvram[1024];		/* "" = no UEFI variable store; else
					 * served on disk_socket<1 + nmore_disks> */
	/* the other disks (extra_disk: served on disk_socket<k>) and NICs
	 * (extra_nic: net_socket<k>), in order */
	unsigned nmore_disks;
	char more_disks[RDB_DOMXML_DISKS_MAX - 1][1024];
	unsigned nmore_nics;
	struct {
		char tap[16], mac[18];
	} more_nics[RDB_DOMXML_NICS_MAX - 1];
};

/*
 * 0: *xml_out is the enrolled domain (caller frees); 1: it was enrolled
 * already, nothing changed (*xml_out NULL); a negative errno with a
 * one-line reason in err: malformed XML (-EINVAL), a domain this stage
 * cannot protect (-ENOTSUP: two disks, a qcow2 image, no NIC, ...).
 */
int rdb_domxml_enroll(const char *xml, const struct rdb_enroll_params *p,
		      char **xml_out, char *err, size_t errlen);

/* 0: *xml_out is the domain as it was before enroll; 1: not enrolled,
 * nothing changed; a negative errno with err. */
int rdb_domxml_unenroll(const char *xml, char **xml_out, char *err,
			size_t errlen);

/* 0; -ENOENT: the domain is not enrolled; another negative errno with err. */
int rdb_domxml_read(const char *xml, struct rdb_domxml_vm *vm, char *err,
		    size_t errlen);

/* The XML as enroll and unenroll write it (same indentation and quotes),
 * for a diff against their output. */
int rdb_domxml_normalize(const char *xml, char **xml_out, char *err,
			 size_t errlen);

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A backup restoring a VM into its libvirt domain (docs/libvirt.md,
 * docs/libvirt-research.md §5(a)): the domain of the VM's name, defined
 * and enrolled on this host, is created from its definition plus
 *
 *   <memoryBacking><source type='file'/><access mode='shared'/>  (pc.ram
 *       on a file under libvirt's memory_backing_dir)
 *   <qemu:arg> -incoming defer          (remusdbd feeds the stream on its
 *                                        own QMP, as for its own QEMU)
 *   <qemu:env name='REMUSDB_RAM_IMAGE' value=IMAGE/>  (for the hook)
 *
 * and libvirt's qemu hook (tools/libvirt/qemu-hook, installed as
 * /etc/libvirt/hooks/qemu) links IMAGE, the committed RAM, to that file
 * before QEMU starts.  Not paused: libvirt's `cont` during the incoming
 * migration makes QEMU run the guest once the stream is loaded, as
 * remusdbd's own QEMU does.
 *
 * remusdbd runs virsh (libvirt-clients) for the two calls rather than
 * linking libvirt: each has a deadline, and the daemon stays free of it.
 */
#ifndef RDB_LVRESTORE_H
#define RDB_LVRESTORE_H

#include <stddef.h>
#include <stdint.h>

struct rdb_lvrestore {
	const char *uri;		/* libvirt's, on this host */
	const char *name;		/* the domain: the VM's name */
	const char *ram_image;		/* the committed pc.ram */
	/* the sockets this host's remusdbd serves for the VM: the enrolled
	 * domain must name them (net: its NIC; disk: NULL without one;
	 * event: the failover event port's, NULL without event_port) */
	const char *qmp, *net, *disk, *event;
	/* the VM's other NICs' sockets (net_socket<k>), and how many more
	 * disks it has (served on disk<k>: the domain names each) */
	const char *const *more_nets;
	size_t nmore_nets, nmore_disks;
	const char *work_dir;		/* the XML created, virsh's output */
};

/* Creates the domain, QEMU waiting for its incoming stream.  0, or a
 * negative errno with err (nothing was started then). */
int rdb_lvrestore_create(const struct rdb_lvrestore *r, uint64_t deadline_ns,
			 char *err, size_t errlen);

/* virsh destroy: the domain's QEMU killed by libvirt. */
int rdb_lvrestore_destroy(const struct rdb_lvrestore *r, uint64_t deadline_ns);

/* The domain XML to create from the definition (pure; caller frees). */
int rdb_lvrestore_xml(const struct rdb_lvrestore *r, const char *defined,
		      char **xml_out, char *err, size_t errlen);

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The QEMU arguments a backup needs to restore an enrolled libvirt
 * domain (the VM config's qemu_arg), made from the command line libvirt
 * would start it with (virConnectDomainXMLToNative, "qemu-argv").  Pure
 * functions: no libvirt call.
 *
 * The backup's remusdbd adds its own QMP, netdev net0, serial, disk drive,
 * RAM backend (pc.ram on its image) and -incoming; so from libvirt's line
 * go: its monitor (-chardev charmonitor, -mon), -S, the secret object
 * (a host file), the pc.ram backend, the disk's two -blockdev nodes (the
 * device's drive= names the format node: that is the VM's disk_id),
 * enroll's -qmp and -netdevs, -add-fd, isa-serial devices and their
 * chardevs, -vnc and -spice (host-side displays).  Other chardevs become
 * `null` (the guest keeps the device; nothing is connected to it on the
 * backup).  Everything else stays, in order: the guest's hardware must be
 * the same on both hosts for the checkpoint stream to load.
 */
#ifndef RDB_QEMUARGV_H
#define RDB_QEMUARGV_H

#include <stddef.h>

#include "config.h"

/* Splits a command line as libvirt's virCommandToString quotes it
 * ('...' with '\'' inside, backslash escapes); leading NAME=VALUE words
 * (the environment) and the binary are left out.  0 or -EINVAL. */
int rdb_qemuargv_split(const char *line, struct rdb_strlist *out, char *err,
		       size_t errlen);

/*
 * The backup's qemu_arg from libvirt's argv.  disk_socket: the enrolled
 * disk's NBD socket (NULL: the domain has no disk); disk_id gets the
 * node the disk device names.  0, or -ENOTSUP with err for what a backup
 * could not start the same way (another block node, a second NIC, NUMA
 * memory backends...).
 */
int rdb_qemuargv_for_backup(const struct rdb_strlist *in, const char *disk_socket,
			    struct rdb_strlist *out, char *disk_id, size_t idlen,
			    char *err, size_t errlen);

/* The same for a VM with ndisks disks (disk k > 0 served on disk_socket
 * with k appended: its NBD node and any format node on it go, the
 * backup adds its own) and nnics NICs (netdevs net0 .. net<nnics-1> go);
 * read-only images (libvirt's CD-ROMs) stay, their file node marked
 * read-only as its format node is. */
int rdb_qemuargv_for_backup_n(const struct rdb_strlist *in,
			      const char *disk_socket, unsigned ndisks,
			      unsigned nnics, struct rdb_strlist *out,
			      char *disk_id, size_t idlen, char *err,
			      size_t errlen);

/* Frees the strings and the array; the list is empty after. */
void rdb_qemuargv_free(struct rdb_strlist *l);

#endif

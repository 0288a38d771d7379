/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * remusdbctl's libvirt side: enroll / unenroll a defined domain, and the
 * VM config of an enrolled one for attach and protect (docs/libvirt.md).
 * The only file that calls libvirt; the XML work is domxml.c's, the
 * backup's QEMU arguments qemuargv.c's.
 */
#ifndef RDB_VIRT_H
#define RDB_VIRT_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "domxml.h"

/* enroll DOMAIN: shows the change as a unified diff and asks on a tty
 * (yes: does not ask; no tty and no yes: refuses).  Returns remusdbctl's
 * exit code: 0 enrolled (or was already), 1 refused or failed. */
int rdb_virt_enroll(const char *uri, const char *name,
		    const struct rdb_enroll_params *p, bool yes);

/* unenroll DOMAIN: the same, back to the domain as it was. */
int rdb_virt_unenroll(const char *uri, const char *name, bool yes);

/*
 * The VM config of the enrolled domain NAME (c from rdb_config_defaults):
 * name, sockets, tap, MAC, disk, RAM, and the backup's qemu_arg from the
 * command line libvirt starts it with (the running one's XML when it
 * runs).  0; -ENOENT: libvirt has no domain NAME (or no libvirt answers:
 * err empty); another negative errno with err (not enrolled, ...).
 */
int rdb_virt_vm_config(const char *uri, const char *name,
		       struct rdb_vm_config *c, char *err, size_t errlen);

#endif

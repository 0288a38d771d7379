// SPDX-License-Identifier: GPL-2.0-only
/*
 * Files QEMU must reach when it does not run as root: libvirt runs it as
 * libvirt-qemu by default (docs/libvirt.md "Permissions").  With
 * qemu_group set, run_dir is 0770 with that group (QEMU makes its QMP
 * sockets there) and what remusdbd makes for QEMU there is 0660 with it;
 * the control socket stays 0600 root.  No setgid bit: the systemd unit's
 * RestrictSUIDSGID refuses it, and QEMU's own sockets need no group.
 */
#define RDB_COMPONENT "main"
#include "daemon.h"
#include "log.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rdb_daemon_share_with_qemu(const struct rdb_daemon *d, const char *path,
			       int fd)
{
	int rc;

	if (d->qemu_gid == 0)
		return 0;
	if (fd >= 0)
		rc = (fchown(fd, (uid_t)-1, d->qemu_gid) < 0 ||
		      fchmod(fd, 0660) < 0) ? -errno : 0;
	else
		rc = (chown(path, (uid_t)-1, d->qemu_gid) < 0 ||
		      chmod(path, 0660) < 0) ? -errno : 0;
	if (rc < 0)
		LOG(ERROR, "%s: cannot give it to qemu_group = %s (QEMU, not "
		    "root, will be refused it): %s", path, d->cfg.qemu_group,
		    strerror(-rc));
	return rc;
}

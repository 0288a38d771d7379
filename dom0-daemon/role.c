// SPDX-License-Identifier: GPL-2.0-only
/* Role changes (role.h). */
#define RDB_COMPONENT "role"
#include "role.h"
#include "backup.h"
#include "primary.h"
#include "vm.h"

#include <errno.h>
#include <stdio.h>

int rdb_role_reprotect(struct rdb_daemon *d, const char *name, json_t *set,
		       char *err, size_t errlen)
{
	struct rdb_vm *vm = rdb_vm_find(d, name);
	struct rdb_nic_dst dst[RDB_NICS_MAX];
	struct rdb_handover h;
	unsigned ndst = 0;
	int rc;

	if (!vm) {
		snprintf(err, errlen, "no VM named %s here", name);
		return -ENOENT;
	}
	/* an attached VM of this host (a restored VM re-adopted after a
	 * restart of remusdbd is one): protected as it is attached */
	if (vm->role == RDB_ROLE_PRIMARY && (vm->state == RDB_VM_UNPROTECTED ||
					     vm->state == RDB_VM_DEGRADED))
		return rdb_primary_protect_named(d, vm, set, err, errlen);
	if (vm->role != RDB_ROLE_BACKUP || vm->state != RDB_VM_FAILED_OVER) {
		snprintf(err, errlen, "VM %s is %s here as %s: by name, only a VM "
			 "that failed over to this host is protected (otherwise: "
			 "remusdbctl protect VMFILE)", name,
			 rdb_vm_state_name(vm->state), rdb_vm_role_name(vm->role));
		return -EINVAL;
	}
	/* the primary's devices first, empty; then the backup lets go of
	 * the restored guest's (nothing of it is touched if that fails) */
	rc = rdb_primary_restored_begin(d, vm, set, dst, &ndst, err, errlen);
	if (rc < 0)
		return rc;
	rc = rdb_backup_hand_over(vm, dst, ndst, &h, err, errlen);
	if (rc < 0) {
		rdb_primary_restored_abort(vm);
		return rc;
	}
	return rdb_primary_restored_adopt(vm, &h, err, errlen);
}

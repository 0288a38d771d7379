/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Transient systemd units for the processes remusdbd leaves running.  A
 * QEMU remusdbd starts (a failover's, a migration's) is a service of its
 * own, started by systemd itself: none of remusdbd.service's sandboxing
 * (NoNewPrivileges, ProtectSystem, PrivateTmp, its system-call filters)
 * reaches the guest.  A disk server or watch process, which takes fds
 * from the daemon, is forked as before but execs through `systemd-run
 * --scope`, which puts it into a scope of its own (what libvirt has
 * machined do with the QEMU it forks) and keeps its fds.  Either way
 * `systemctl stop` or a restart of remusdbd stops remusdbd alone, and each
 * process's CPU and memory are its own unit's, not the daemon's.
 *
 * Without systemd (no /run/systemd/system: the tests' network namespaces,
 * a host run by another init) or with process_units = none, processes
 * stay where fork put them: remusdbd's session, and the unit's
 * KillMode=process keeps them alive across a stop.
 */
#ifndef RDB_SDUNIT_H
#define RDB_SDUNIT_H

#include "proc.h"

#include <stdbool.h>
#include <stddef.h>

/*
 * Once, before any process is started: mode "auto" (units when systemd
 * runs this host and systemd-run is found), "systemd" (units,
 * or an error saying what is missing) or "none".  0, or -EINVAL with the
 * reason in err.
 */
int rdb_units_setup(const char *mode, char *err, size_t errlen);
/* Whether processes go into units (after rdb_units_setup). */
bool rdb_units_active(void);
/* Setup's choice, as a sentence for the log ("transient systemd units" or
 * why not). */
const char *rdb_units_why(void);

/*
 * The unit name for VM's process what ("qemu-ID", "disk-ID", "watch-ID"):
 * remusdb-VM-WHAT.SUFFIX, every byte outside [A-Za-z0-9:_.-] escaped as
 * systemd-escape does (\xNN).  -ENAMETOOLONG when it does not fit len.
 */
int rdb_unit_name(const char *vm, const char *what, const char *suffix,
		  char *out, size_t len);

/*
 * As rdb_hv_spawn, under units as a transient service (remusdb-VM-WHAT-ID,
 * in machine.slice, as libvirt's guests are): systemd starts argv, its
 * output appended to logpath (absolute), on cpus (NULL: systemd's
 * default); it returns once the exec succeeded, and the process is
 * watched through a pidfd (its exit status is systemd's to see: 0).
 * Without units, rdb_hv_spawn.  0, or -errno with the reason in err.
 */
int rdb_units_spawn_service(const char *vm, const char *what,
			    char *const *argv, const char *logpath,
			    const cpu_set_t *cpus, struct rdb_hv_proc *out,
			    char *err, size_t errlen);

/*
 * A process forked here with fds of the daemon's (a disk server, a watch
 * process) goes into a scope of its own, remusdb-VM-WHAT-ID.scope, by
 * being started through `systemd-run --scope`, which creates the scope
 * around itself and then execs the command with every fd it was given.
 * Under units, fills s->pre with those words (ending in "--", then NULL)
 * and returns their count: the caller execs s->pre[0] (an absolute path)
 * with them followed by the command, whose argv[0] must then be the
 * program's path.  Without units: 0, and the command is exec'd as is.
 */
#define RDB_UNITS_PRE_MAX 12
struct rdb_unit_scope {
	char unit[256];
	char desc[200];
	char *pre[RDB_UNITS_PRE_MAX];
};
int rdb_units_scope_prefix(struct rdb_unit_scope *s, const char *vm,
			   const char *what);

#endif

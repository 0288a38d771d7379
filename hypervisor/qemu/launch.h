/* SPDX-License-Identifier: GPL-2.0-only */
/* Starting QEMU on the backup. */
#ifndef RDB_LAUNCH_H
#define RDB_LAUNCH_H

#include <stdint.h>
#include <sys/types.h>

struct rdb_qemu_proc {
	pid_t pid;
};

/* Forks and execs argv in its own session (it must outlive remusdbd),
 * stdout and stderr to logpath. */
int rdb_qemu_spawn(char *const *argv, const char *logpath,
		   struct rdb_qemu_proc *out);
/* SIGTERM, then SIGKILL at the deadline; reaps it. */
int rdb_qemu_kill(struct rdb_qemu_proc *p, uint64_t deadline_ns);

#endif

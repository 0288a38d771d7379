/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The hypervisor processes remusdbd starts or watches (a backup's
 * restored VM): spawned in a session of their own, adopted from libvirt,
 * placed on CPUs, reaped, killed.  Nothing here knows which hypervisor.
 */
#ifndef RDB_PROC_H
#define RDB_PROC_H

#include <sched.h>
#include <stdint.h>
#include <sys/types.h>

struct rdb_hv_proc {
	pid_t pid;		/* -1: none */
	int pidfd;		/* >= 0: not our child (libvirt's): watched
				 * through this pidfd instead of waitpid */
};

void rdb_hv_proc_init(struct rdb_hv_proc *p);

/*
 * Forks and execs argv (argv[0] searched in PATH) in a session of its own,
 * so it outlives remusdbd: a restored VM must not die with the daemon.
 * stdin is /dev/null; stdout and stderr append to logpath.  Returns 0 once
 * the exec succeeded, else the child's open/exec errno, negated.
 * cpus: the CPUs it may run on (NULL: inherited); an affinity the kernel
 * refuses is the child's errno too.
 */
int rdb_hv_spawn(char *const *argv, const char *logpath,
		 const cpu_set_t *cpus, struct rdb_hv_proc *out);
/* A process someone else started (libvirt) and that runs as pid: watched and
 * killed like one of ours (its exit status is not ours to see: 0).
 * 0, or -errno of pidfd_open (-ESRCH: it is gone already). */
int rdb_hv_adopt(pid_t pid, struct rdb_hv_proc *out);
/* When process pid started, in clock ticks after boot (/proc/PID/stat's
 * starttime): with the pid, a process told apart from a later one that
 * reuses its number.  0: no such process (or a zombie). */
uint64_t rdb_hv_proc_start(pid_t pid);
/* Every thread of a running process (pid) onto cpus; threads it starts later
 * inherit it.  The number of threads placed, or -errno of the first that
 * refused (an affinity outside its cgroup's cpuset: -EINVAL). */
int rdb_hv_place(pid_t pid, const cpu_set_t *cpus);
/* Non-blocking: 1 and the wait status when it has exited (reaped, pid
 * becomes -1), 0 while it runs, -ECHILD when there is no process. */
int rdb_hv_poll_exit(struct rdb_hv_proc *p, int *status_out);
/* SIGTERM, then SIGKILL at deadline_ns; reaps it.  0 when it left by
 * itself before the deadline, -ETIMEDOUT when it had to be killed, -EBUSY
 * when an adopted process was still there a second after SIGKILL (it may
 * run on: p forgets it either way). */
int rdb_hv_kill(struct rdb_hv_proc *p, uint64_t deadline_ns);

/*
 * Runs argv (argv[0] searched in PATH) to its end, stdin /dev/null, its
 * stdout and stderr together into *out (NUL-terminated, the caller frees;
 * NULL: dropped), killed at deadline_ns.  0 when it exited 0; -EIO
 * otherwise, with its exit code in *code_out (-1: killed by a signal);
 * -ETIMEDOUT; -errno of fork.
 */
int rdb_hv_run(char *const *argv, uint64_t deadline_ns, char **out,
	       int *code_out);

#endif

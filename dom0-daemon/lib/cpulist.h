/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * CPU lists in the kernel's own notation ("0", "0-1", "0,2-3"), as in
 * /sys/devices/system/cpu/online and taskset -c: where remusdbd, its
 * helpers and the QEMU it starts may run (docs/performance.md).
 */
#ifndef RDB_CPULIST_H
#define RDB_CPULIST_H

#include <sched.h>
#include <stddef.h>
#include <sys/types.h>

/* 0, or -EINVAL for anything but comma-separated N or N-M (N <= M <
 * CPU_SETSIZE); an empty string is an empty set. */
int rdb_cpulist_parse(const char *s, cpu_set_t *out);
/* Writes the shortest list naming the set ("" when empty); truncates
 * at len - 1.  Returns out. */
char *rdb_cpulist_format(const cpu_set_t *set, char *out, size_t len);
/* fn(tid, opaque) for every thread of process pid (/proc/PID/task); fn
 * returns 0 (the thread counts), 1 (it does not: gone meanwhile) or
 * -errno (stop with it).  The number counted, or -errno. */
int rdb_cpulist_each_thread(pid_t pid, int (*fn)(pid_t tid, void *opaque),
			    void *opaque);
/* The CPUs any thread of process pid may run on (the union of its
 * threads' affinities, read from /proc/PID/task): 0 or -errno. */
int rdb_cpulist_of_process(pid_t pid, cpu_set_t *out);

#endif

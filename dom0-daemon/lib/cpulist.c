// SPDX-License-Identifier: GPL-2.0-only
#include "cpulist.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int number(const char **p, long *out)
{
	char *end;

	if (!isdigit((unsigned char)**p))
		return -EINVAL;
	errno = 0;
	*out = strtol(*p, &end, 10);
	if (errno || *out >= CPU_SETSIZE)
		return -EINVAL;
	*p = end;
	return 0;
}

int rdb_cpulist_parse(const char *s, cpu_set_t *out)
{
	const char *p = s;

	CPU_ZERO(out);
	if (!*p)
		return 0;
	for (;;) {
		long lo, hi;

		if (number(&p, &lo) < 0)
			return -EINVAL;
		hi = lo;
		if (*p == '-') {
			p++;
			if (number(&p, &hi) < 0 || hi < lo)
				return -EINVAL;
		}
		for (long c = lo; c <= hi; c++)
			CPU_SET((int)c, out);
		if (!*p)
			return 0;
		if (*p++ != ',')
			return -EINVAL;
	}
}

char *rdb_cpulist_format(const cpu_set_t *set, char *out, size_t len)
{
	size_t used = 0;

	if (len)
		out[0] = 0;
	for (int c = 0; c < CPU_SETSIZE; c++) {
		int hi = c;
		int n;

		if (!CPU_ISSET(c, set))
			continue;
		while (hi + 1 < CPU_SETSIZE && CPU_ISSET(hi + 1, set))
			hi++;
		n = hi == c ? snprintf(out + used, len - used, "%s%d",
				       used ? "," : "", c)
			    : snprintf(out + used, len - used, "%s%d-%d",
				       used ? "," : "", c, hi);
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
		c = hi;
	}
	return out;
}

int rdb_cpulist_each_thread(pid_t pid, int (*fn)(pid_t tid, void *opaque),
			    void *opaque)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0, rc = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while (rc >= 0 && (e = readdir(d))) {
		char *end;
		long tid = strtol(e->d_name, &end, 10);

		if (e->d_name[0] == '.' || *end || tid <= 0)
			continue;
		rc = fn((pid_t)tid, opaque);
		n += rc == 0;
	}
	closedir(d);
	return rc < 0 ? rc : n;
}

static int add_affinity(pid_t tid, void *opaque)
{
	cpu_set_t one, *out = opaque;

	/* a thread that left meanwhile has no affinity to count */
	if (sched_getaffinity(tid, sizeof(one), &one) < 0)
		return 1;
	CPU_OR(out, out, &one);
	return 0;
}

int rdb_cpulist_of_process(pid_t pid, cpu_set_t *out)
{
	int n;

	CPU_ZERO(out);
	n = rdb_cpulist_each_thread(pid, add_affinity, out);
	if (n < 0)
		return n;
	return n ? 0 : -ESRCH;
}

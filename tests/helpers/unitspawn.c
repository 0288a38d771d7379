// SPDX-License-Identifier: GPL-2.0-only
/*
 * unitspawn: hypervisor/sdunit.c's two ways out of remusdbd's cgroup,
 * driven as the daemon drives them, under a real systemd (the packaging
 * test's container, tests/run-packaging.sh):
 *
 *   unitspawn service VM LOG PIDFILE -- ARGV...
 *	ARGV started as the transient service a failover's QEMU is
 *	(rdb_units_spawn_service), its output appended to LOG;
 *   unitspawn scope VM PIDFILE -- ARGV...
 *	ARGV forked here as a disk server is, through the scope's prefix
 *	(rdb_units_scope_prefix), with fd 3 the read end of a pipe whose
 *	other end says "fd3\n".
 *
 * Either writes the process's pid to PIDFILE and exits 0, at once: the
 * test then stops the unit this ran in and looks for the process.  Exit
 * 1 with the reason on stderr.  UNITSPAWN_MODE (default systemd) is
 * process_units' value: none shows the test red.
 */
#define RDB_COMPONENT "unitspawn"
#include "log.h"
#include "sdunit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int write_pid(const char *path, pid_t pid)
{
	FILE *f = fopen(path, "w");

	if (!f || fprintf(f, "%d\n", (int)pid) < 0 || fclose(f) != 0) {
		perror(path);
		return 1;
	}
	return 0;
}

/* Whether pid's cgroup is unit, within 10 s. */
static bool in_scope(pid_t pid, const char *unit)
{
	char path[64], line[512];

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	for (int i = 0; i < 1000; i++) {
		FILE *f = fopen(path, "r");
		bool found = false;

		if (!f)
			return false;
		while (fgets(line, sizeof(line), f))
			if (strstr(line, unit))
				found = true;
		fclose(f);
		if (found)
			return true;
		usleep(10000);
	}
	return false;
}

int main(int argc, char **argv)
{
	const char *mode;
	char err[600];
	int dd = 0;

	rdb_log_setup("unitspawn", RDB_LOG_DEBUG);
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			dd = i;
			break;
		}
	/* UNITSPAWN_MODE=none: the test seen red, as without units */
	mode = getenv("UNITSPAWN_MODE");
	if (rdb_units_setup(mode ? mode : "systemd", err, sizeof(err)) < 0) {
		fprintf(stderr, "unitspawn: %s\n", err);
		return 1;
	}
	if (argc >= 7 && dd == 5 && !strcmp(argv[1], "service")) {
		struct rdb_hv_proc p;

		rdb_hv_proc_init(&p);
		if (rdb_units_spawn_service(argv[2], "qemu", argv + 6, argv[3],
					    NULL, &p, err, sizeof(err)) < 0) {
			fprintf(stderr, "unitspawn: %s\n", err);
			return 1;
		}
		return write_pid(argv[4], p.pid);
	}
	if (argc >= 6 && dd == 4 && !strcmp(argv[1], "scope")) {
		struct rdb_unit_scope scope;
		char *full[RDB_UNITS_PRE_MAX + 32];
		int fds[2], npre = rdb_units_scope_prefix(&scope, argv[2], "disk");
		int nargs = argc - 5;
		pid_t pid;

		if (npre <= 0 || nargs > 31) {
			fprintf(stderr, "unitspawn: no scope (see the log above)\n");
			return 1;
		}
		memcpy(full, scope.pre, sizeof(char *) * (size_t)npre);
		memcpy(full + npre, argv + 5, sizeof(char *) * (size_t)(nargs + 1));
		if (pipe(fds) < 0) {
			perror("pipe");
			return 1;
		}
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			if (dup2(fds[0], 3) < 0)
				_exit(126);
			execv(full[0], full);
			_exit(127);
		}
		close(fds[0]);
		/* this process's unit may end as soon as it exits: the scope
		 * first (systemd-run creates it before its exec) */
		if (!in_scope(pid, scope.unit)) {
			fprintf(stderr, "unitspawn: pid %d not in %s after 10 s\n",
				(int)pid, scope.unit);
			return 1;
		}
		if (write(fds[1], "fd3\n", 4) != 4) {
			perror("write fd3");
			return 1;
		}
		return write_pid(argv[3], pid);
	}
	fprintf(stderr, "usage: unitspawn service VM LOG PIDFILE -- ARGV...\n"
		"       unitspawn scope VM PIDFILE -- ARGV...\n");
	return 1;
}

// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "units"
#include "sdunit.h"
#include "clock.h"
#include "cpulist.h"
#include "fileio.h"
#include "log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* systemd answers a local bus call in milliseconds; a stuck one must not
 * hold the daemon's loop for long (it is blocked meanwhile) */
#define UNIT_CALL_NS	(5 * RDB_NS_PER_S)

static bool units_on;
static char units_why[200] = "not set up";
static char run_exe[256];	/* systemd-run, found in PATH at setup */

/* A name of its own for each unit (libvirt's machine scopes count too):
 * the unit of a process still on its way out never holds the next one's
 * name.  WHAT, milliseconds since the epoch and a count:
 * "qemu-1796635807884-3". */
static void unit_id(const char *what, char *out, size_t len)
{
	static atomic_uint count;	/* (a restore runs on a thread) */
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(out, len, "%s-%llu-%u", what,
		 (unsigned long long)ts.tv_sec * 1000 +
		 (unsigned long long)ts.tv_nsec / 1000000,
		 atomic_fetch_add(&count, 1) + 1);
}

int rdb_units_setup(const char *mode, char *err, size_t errlen)
{
	const char *missing = NULL;
	bool want;

	if (!mode || !strcmp(mode, "auto"))
		want = false;
	else if (!strcmp(mode, "systemd"))
		want = true;
	else if (!strcmp(mode, "none")) {
		units_on = false;
		snprintf(units_why, sizeof(units_why),
			 "process_units = none: processes stay in remusdbd's "
			 "session and cgroup");
		return 0;
	} else {
		snprintf(err, errlen, "process_units = %s: auto, systemd or "
			 "none", mode);
		return -EINVAL;
	}
	/* sd_booted(3)'s test: this host runs systemd as its init */
	if (access("/run/systemd/system", F_OK) < 0)
		missing = "systemd does not run this host (no /run/systemd/system)";
	else if (geteuid() != 0)
		missing = "remusdbd is not root (the system manager's units are root's)";
	else if (!rdb_find_command("systemd-run", run_exe, sizeof(run_exe)))
		missing = "no systemd-run in PATH";
	if (missing && want) {
		snprintf(err, errlen, "process_units = systemd: %s", missing);
		return -EINVAL;
	}
	units_on = !missing;
	if (missing)
		snprintf(units_why, sizeof(units_why), "%s: processes stay in "
			 "remusdbd's session and cgroup", missing);
	else
		snprintf(units_why, sizeof(units_why), "transient systemd units "
			 "(a QEMU as a service of its own, disk servers and "
			 "watch processes each in a scope)");
	return 0;
}

bool rdb_units_active(void)
{
	return units_on;
}

const char *rdb_units_why(void)
{
	return units_why;
}

int rdb_unit_name(const char *vm, const char *what, const char *suffix,
		  char *out, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const char *parts[2] = { vm, what };
	size_t o = 0;

	if (!len)
		return -ENAMETOOLONG;
	o = (size_t)snprintf(out, len, "remusdb-");
	for (int i = 0; i < 2; i++) {
		for (const unsigned char *c = (const unsigned char *)parts[i];
		     *c; c++) {
			bool plain = (*c >= 'a' && *c <= 'z') ||
				     (*c >= 'A' && *c <= 'Z') ||
				     (*c >= '0' && *c <= '9') ||
				     *c == ':' || *c == '_' || *c == '-' ||
				     (*c == '.' && c != (const unsigned char *)parts[i]);

			if (o + (plain ? 1 : 4) >= len)
				return -ENAMETOOLONG;
			if (plain) {
				out[o++] = (char)*c;
			} else {
				out[o++] = '\\';
				out[o++] = 'x';
				out[o++] = hex[*c >> 4];
				out[o++] = hex[*c & 15];
			}
		}
		if (i == 0) {
			if (o + 1 >= len)
				return -ENAMETOOLONG;
			out[o++] = '-';
		}
	}
	if (o + strlen(suffix) + 2 > len || o + strlen(suffix) + 1 > 256)
		return -ENAMETOOLONG;	/* (systemd's limit: 255) */
	snprintf(out + o, len - o, ".%s", suffix);
	return 0;
}

/* systemd-run's words both kinds of unit start with, into w (the unit
 * named unit, described by desc: "--description=..."); their count. */
static int unit_words(char **w, char *unit, char *desc)
{
	int n = 0;

	w[n++] = run_exe;
	w[n++] = "--quiet";
	w[n++] = "--no-ask-password";
	w[n++] = "--collect";
	w[n++] = "--unit";
	w[n++] = unit;
	w[n++] = desc;
	return n;
}

/* Runs argv to its end within UNIT_CALL_NS; its output, trimmed, into
 * out (len > 0). */
static int call(char *const *argv, char *out, size_t len)
{
	char *text = NULL;
	size_t n;
	int rc = rdb_hv_run(argv, rdb_now_ns() + UNIT_CALL_NS, &text, NULL);

	snprintf(out, len, "%s", text ? text : "");
	free(text);
	n = strlen(out);
	while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
		out[--n] = 0;
	return rc;
}

int rdb_units_spawn_service(const char *vm, const char *what,
			    char *const *argv, const char *logpath,
			    const cpu_set_t *cpus, struct rdb_hv_proc *out,
			    char *err, size_t errlen)
{
	char unit[256], id[80], prop_out[600], prop_err[600], prop_cpu[300];
	char desc[200], answer[400], cpul[256];
	char *run[64], *show[8];
	pid_t pid;
	int n = 0, rc, argc = 0;

	if (!units_on) {
		rc = rdb_hv_spawn(argv, logpath, cpus, out);
		if (rc < 0)
			snprintf(err, errlen, "%s", strerror(-rc));
		return rc;
	}
	while (argv[argc])
		argc++;
	if (argc + 20 > (int)(sizeof(run) / sizeof(run[0])) || !logpath ||
	    logpath[0] != '/') {
		snprintf(err, errlen, "as a systemd unit: %s",
			 logpath && logpath[0] == '/' ? "too many arguments" :
			 "its log path is not absolute");
		return -EINVAL;
	}
	unit_id(what, id, sizeof(id));
	rc = rdb_unit_name(vm, id, "service", unit, sizeof(unit));
	if (rc < 0) {
		snprintf(err, errlen, "unit name for VM %s: too long", vm);
		return rc;
	}
	snprintf(desc, sizeof(desc), "--description=RemusDB: VM %s's %s "
		 "(started by remusdbd)", vm, what);
	snprintf(prop_out, sizeof(prop_out), "StandardOutput=append:%s", logpath);
	snprintf(prop_err, sizeof(prop_err), "StandardError=append:%s", logpath);
	n = unit_words(run, unit, desc);
	run[n++] = "--service-type=exec";
	run[n++] = "--slice=machine.slice";
	run[n++] = "-p";
	run[n++] = prop_out;
	run[n++] = "-p";
	run[n++] = prop_err;
	if (cpus) {
		snprintf(prop_cpu, sizeof(prop_cpu), "CPUAffinity=%s",
			 rdb_cpulist_format(cpus, cpul, sizeof(cpul)));
		run[n++] = "-p";
		run[n++] = prop_cpu;
	}
	run[n++] = "--";
	for (int i = 0; i < argc; i++)
		run[n++] = argv[i];
	run[n] = NULL;
	/* --service-type=exec: it returns once the exec succeeded (or the
	 * start job failed) */
	rc = call(run, answer, sizeof(answer));
	if (rc < 0) {
		snprintf(err, errlen, "systemd-run --unit %s: %s", unit,
			 answer[0] ? answer : strerror(-rc));
		return rc;
	}
	n = 0;
	show[n++] = "systemctl";
	show[n++] = "show";
	show[n++] = "--property=MainPID";
	show[n++] = "--value";
	show[n++] = unit;
	show[n] = NULL;
	rc = call(show, answer, sizeof(answer));
	pid = rc == 0 ? (pid_t)atoi(answer) : 0;
	if (pid <= 0) {
		snprintf(err, errlen, "%s ended as soon as it started (see %s; "
			 "journalctl -u %s)", argv[0], logpath, unit);
		return -ECHILD;
	}
	rc = rdb_hv_adopt(pid, out);
	if (rc < 0) {
		snprintf(err, errlen, "%s (pid %d, unit %s): %s", argv[0],
			 (int)pid, unit, rc == -ESRCH ? "ended as soon as it "
			 "started" : strerror(-rc));
		return rc;
	}
	LOGVM(INFO, vm, "%s started as systemd unit %s (pid %d)", argv[0], unit,
	      (int)pid);
	return 0;
}

int rdb_units_scope_prefix(struct rdb_unit_scope *s, const char *vm,
			   const char *what)
{
	char id[64];
	int n;

	if (!units_on)
		return 0;
	unit_id(what, id, sizeof(id));
	if (rdb_unit_name(vm, id, "scope", s->unit, sizeof(s->unit)) < 0) {
		LOGVM(WARN, vm, "its %s stays in remusdbd's cgroup: its unit "
		      "name is too long", what);
		return 0;
	}
	snprintf(s->desc, sizeof(s->desc), "--description=RemusDB: VM %s's "
		 "%s (started by remusdbd)", vm, what);
	n = unit_words(s->pre, s->unit, s->desc);
	s->pre[n++] = "--scope";
	s->pre[n++] = "--";
	s->pre[n] = NULL;
	return n;
}

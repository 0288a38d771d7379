// SPDX-License-Identifier: GPL-2.0-only
/*
 * remusdbctl: the operator's CLI for remusdbd.
 *
 * Exit codes: 0 ok, 1 the daemon refused or failed (or `wait` timed
 * out), 2 usage, 3 the daemon is unreachable.  `status` answers a health
 * check: 0 every VM listed is protected (or none is listed), 1 one is
 * not, 2 usage, 3 nothing known of them (unreachable, or refused).
 */
#include "clock.h"
#include "config.h"
#include "fileio.h"
#include "sockutil.h"
#include "virt.h"
#include "witness.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* remusdbd's; its control_socket is where remusdbctl finds it */
#define DEFAULT_CONFIG "/etc/remusdb/remusdbd.conf"
#define CALL_DEADLINE_NS (30 * RDB_NS_PER_S)
#define REPLY_MAX (16u << 20)

/* --socket, else control_socket from the daemon's configuration */
static const char *sock_path;
/* remusdbd's configuration file (--config) and whether it was named */
static const char *config_path = DEFAULT_CONFIG;
static bool config_given;
/* `wait` polls: it reports the last failure once, not every 50 ms. */
static bool quiet;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: remusdbctl [--socket PATH] [--config FILE] COMMAND\n"
		"  -s, --socket PATH               remusdbd's control socket (default: its\n"
		"                                  control_socket in the config file)\n"
		"  -c, --config FILE               remusdbd's config file (default\n"
		"                                  " DEFAULT_CONFIG "; missing: defaults)\n"
		"commands:\n"
		"  attach VMCONF [KEY=VALUE]...    serve a VM's disk and network before\n"
		"                                  its QEMU starts (VMs with a disk)\n"
		"  attach DOMAIN peer=HOST:PORT [KEY=VALUE]... [--connect URI]\n"
		"                                  the same for an enrolled libvirt domain\n"
		"  protect VMCONF [KEY=VALUE]... [--wait[=S]]\n"
		"                                  start protecting a VM (on its host);\n"
		"                                  --wait: until protected, or why not\n"
		"  protect NAME peer=HOST:PORT [KEY=VALUE]... [--connect URI]\n"
		"                                  protect again the VM that failed over to\n"
		"                                  this host (to its old primary: a resync);\n"
		"                                  else the running enrolled libvirt domain\n"
		"  enroll DOMAIN [--yes] [--connect URI] [--tap NAME]... [--emulator PATH]\n"
		"         [--run-dir DIR] [--firmware-dir DIR]... [--event-port]\n"
		"                                  rewrite a defined libvirt domain so that\n"
		"                                  remusdbd can protect it (diff, y/N)\n"
		"  unenroll DOMAIN [--yes] [--connect URI]\n"
		"                                  give it back its own disk and NIC\n"
		"  status [NAME] [--json]          VMs, roles, states, checkpoint numbers;\n"
		"                                  exit 1 if one listed is not protected\n"
		"  status --cluster [--json]       every VM the witness knows: owner, its\n"
		"                                  state there, and this host's view\n"
		"  failover NAME [--force]         fail over now (on the backup's host); with a\n"
		"                                  witness it decides first; --force skips it:\n"
		"                                  the operator's word that the primary is dead\n"
		"  migrate NAME [--timeout S]      hand the VM over to its backup at the next\n"
		"                                  checkpoint (on the primary's host), and\n"
		"                                  wait until it runs there\n"
		"  unprotect NAME [--force]        stop protecting (on the primary's host);\n"
		"                                  --force also ends a pending decision (runs\n"
		"                                  the VM here) or resumes a fenced guest\n"
		"  detach NAME [--force]           forget an attached, unprotected VM (its\n"
		"                                  QEMU shut down, or --force)\n"
		"  wait NAME STATE [--timeout S]   wait until the VM is in STATE\n"
		"  inject NAME FAULT               fault injection for tests (stop-in-pause, ...)\n"
		"  drill NAME [--timeout S] [--out FILE]\n"
		"                                  on the backup's host: arm, then record the\n"
		"                                  failover when the operator pulls the\n"
		"                                  primary's power (a JSON report)\n"
		"  history NAME [--count N] [--json]\n"
		"                                  the VM's state changes on this host,\n"
		"                                  oldest first (default the last 50; 0: all)\n"
		"  epochs NAME [--count N] [--json]\n"
		"                                  the last N checkpoints (default 40, at most\n"
		"                                  4096) on the primary: time, guest pause,\n"
		"                                  bytes sent, wait for the backup's ACK\n"
		"  capture NAME FILE EPOCHS        write the next EPOCHS epochs' dirty pages\n"
		"                                  to FILE (a codec benchmark corpus)\n"
		"  config --dump-defaults [vm]     every option with its default\n");
}

/* Set when the subcommand's getopt_long has ended: the rest are operands. */
static bool operands_only;

/*
 * A subcommand's next argument, options and operands in any order:
 * getopt_long over argv (argv[0] "remusdbctl COMMAND", which its messages
 * name), in order so that POSIXLY_CORRECT changes nothing, then whatever
 * follows "--".  An option's val; 1 for an operand (in optarg); -1 at the
 * end; '?' once getopt has said which option is unknown, ambiguous, or
 * lacks or should not have a value.  run() starts it afresh.
 */
static int sub_getopt(int argc, char **argv, const struct option *opts)
{
	if (!operands_only) {
		int o = getopt_long(argc, argv, "-", opts, NULL);

		if (o != -1)
			return o;
		operands_only = true;
	}
	if (optind >= argc)
		return -1;
	optarg = argv[optind++];
	return 1;
}

/* --timeout's seconds, in (0, max], or [0, max] with zero_ok: false,
 * said why, when s is not that. */
static bool seconds_arg(const char *s, bool zero_ok, double max, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !isfinite(v) || v < 0 || (v == 0 && !zero_ok) ||
	    v > max) {
		fprintf(stderr, "remusdbctl: --timeout %s: want seconds in 0..%g\n",
			s, max);
		return false;
	}
	*out = v;
	return true;
}

/* Exit code 2: the usage, unless getopt has already said what is wrong
 * (o == '?') in one line that the usage would bury. */
static int usage_error(int o)
{
	if (o != '?')
		usage(stderr);
	return 2;
}

/* One request, one reply.  Exit code on failure is returned via *exit_out. */
static json_t *call(json_t *req, int *exit_out)
{
	uint64_t deadline = rdb_now_ns() + CALL_DEADLINE_NS;
	char *text = json_dumps(req, JSON_COMPACT);
	/* a reply is one line: `epochs` can be a few hundred KiB */
	size_t have = 0, cap = 65536;
	char *buf = malloc(cap), *nl = NULL;
	json_t *reply;
	int fd, rc;

	json_decref(req);
	rc = buf ? rdb_sock_connect_unix(sock_path, deadline, &fd) : -ENOMEM;
	if (rc < 0) {
		if (!quiet)
			fprintf(stderr, "remusdbctl: cannot reach remusdbd at %s: %s\n",
				sock_path, strerror(-rc));
		free(text);
		free(buf);
		*exit_out = 3;
		return NULL;
	}
	rc = rdb_sock_write_all(fd, text, strlen(text), deadline);
	if (rc == 0)
		rc = rdb_sock_write_all(fd, "\n", 1, deadline);
	free(text);
	while (rc == 0 && !(nl = memchr(buf, '\n', have))) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = rdb_now_ns();
		ssize_t r;

		if (now >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		if (have == cap) {
			char *nb = cap < REPLY_MAX ? realloc(buf, cap * 2) : NULL;

			if (!nb) {
				rc = -EMSGSIZE;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		poll(&p, 1, (int)((deadline - now) / RDB_NS_PER_MS) + 1);
		r = read(fd, buf + have, cap - have);
		if (r == 0)
			rc = -ECONNRESET;
		else if (r > 0)
			have += (size_t)r;
		else if (errno != EAGAIN && errno != EINTR)
			rc = -errno;
	}
	close(fd);
	if (rc < 0) {
		if (!quiet)
			fprintf(stderr, "remusdbctl: remusdbd at %s: %s\n", sock_path,
				strerror(-rc));
		free(buf);
		*exit_out = 3;
		return NULL;
	}
	reply = json_loadb(buf, (size_t)(nl - buf), 0, NULL);
	free(buf);
	if (!json_is_object(reply)) {
		if (!quiet)
			fprintf(stderr, "remusdbctl: malformed reply from remusdbd\n");
		json_decref(reply);
		*exit_out = 1;
		return NULL;
	}
	if (!json_is_true(json_object_get(reply, "ok"))) {
		if (!quiet)
			fprintf(stderr, "remusdbctl: %s\n",
				json_string_value(json_object_get(reply, "error")) ?:
				"request failed");
		json_decref(reply);
		*exit_out = 1;
		return NULL;
	}
	return reply;
}

static json_t *cmd(const char *name, json_t *args)
{
	return json_pack("{s:s, s:o}", "cmd", name, "args", args ? args : json_object());
}

/* Whether the daemon has a VM NAME that failed over to this host (what
 * `protect NAME` without a file meant before libvirt domains): what it
 * is, for the message; NULL: no such VM.  (A VM attached here and not
 * protected is protected by name too, when no libvirt domain has the
 * name: the daemon takes it as attached.) */
static const char *failed_over_here(const char *name)
{
	bool was = quiet;
	const char *what = NULL, *role, *state;
	json_t *reply, *vm;
	int ex = 0;

	quiet = true;
	reply = call(cmd("status", json_pack("{s:s}", "name", name)), &ex);
	quiet = was;
	vm = reply ? json_array_get(json_object_get(json_object_get(reply, "result"),
						    "vms"), 0) : NULL;
	role = vm ? json_string_value(json_object_get(vm, "role")) : NULL;
	state = vm ? json_string_value(json_object_get(vm, "state")) : NULL;
	if (role && state && !strcmp(role, "backup") && !strcmp(state, "failed-over"))
		what = "the VM restored on this host";
	json_decref(reply);
	return what;
}

/* protect NAME [KEY=VALUE...]: the daemon's VM NAME (one that failed
 * over here, or one attached here), protected from here with its VM
 * file as the daemon holds it; what: what it is, for the message. */
static int do_reprotect(int argc, char **argv, const char *what)
{
	json_t *set = json_object(), *reply;
	int ex = 0;

	for (int i = 1; i < argc; i++) {
		char *eq = strchr(argv[i], '=');

		if (!eq || eq == argv[i]) {
			fprintf(stderr, "remusdbctl: %s: expected KEY=VALUE\n", argv[i]);
			json_decref(set);
			return 2;
		}
		*eq = 0;
		json_object_set_new(set, argv[i], json_string(eq + 1));
	}
	reply = call(cmd("reprotect", json_pack("{s:s, s:o}", "name", argv[0],
						 "set", set)), &ex);
	if (reply)
		printf("%s: protecting (%s)\n", argv[0],
		       what ? what : "as this host's remusdbd holds it");
	json_decref(reply);
	return ex;
}

/*
 * A VM file needs only what differs: its sockets, when it does not name
 * them, are remusdbd's run_dir/NAME.qmp, NAME.wd.qmp, NAME.net and
 * NAME.disk (with a disk), as enroll names a libvirt domain's.  The
 * run_dir is the daemon's (asked only when one is missing).
 */
static int default_sockets(struct rdb_vm_config *c, char *err, size_t errlen)
{
	static const struct { const char *key, *suffix; } socks[] = {
		{ "qmp", "qmp" }, { "watchdog_qmp", "wd.qmp" },
		{ "net_socket", "net" }, { "disk_socket", "disk" },
	};
	char *const now[] = { c->qmp, c->watchdog_qmp, c->net_socket,
			      c->disk_socket };
	char run[256] = "", path[400];
	bool xen = c->hypervisor && !strcmp(c->hypervisor, "xen");

	if (xen || !c->name || !c->name[0])
		return 0;	/* (a Xen domain's qmp is its name; check says) */
	for (size_t i = 0; i < sizeof(socks) / sizeof(socks[0]); i++) {
		if ((now[i] && now[i][0]) ||
		    (i == 3 && (!c->disk || !c->disk[0])))
			continue;
		if (!run[0]) {
			int ex = 0;
			json_t *reply = call(cmd("info", NULL), &ex);
			const char *r = reply ? json_string_value(json_object_get(
				json_object_get(reply, "result"), "run_dir")) : NULL;

			snprintf(run, sizeof(run), "%s", r ? r : "");
			json_decref(reply);
			if (!run[0]) {
				snprintf(err, errlen, "%s sets no %s: it defaults to "
					 "remusdbd's run_dir/%s.%s, and remusdbd did "
					 "not say its run_dir", c->name, socks[i].key,
					 c->name, socks[i].suffix);
				return -EINVAL;
			}
		}
		snprintf(path, sizeof(path), "%s/%s.%s", run, c->name,
			 socks[i].suffix);
		if (rdb_config_set(&rdb_vm_config_table, c, socks[i].key, path,
				   err, errlen) < 0)
			return -EINVAL;
	}
	return 0;
}

/*
 * protect / attach VMCONF or NAME.  A NAME (no '/', no such file here) is,
 * for protect, the VM that failed over to this host if the daemon has
 * one (a re-protect), otherwise a libvirt domain of that name that is
 * enrolled; for attach, a libvirt domain.
 */
static int protect_vm(const char *what, const char *uri, int argc, char **argv)
{
	struct rdb_vm_config c;
	bool domain = false;
	char err[600];
	json_t *reply;
	int ex = 0, rc;

	rdb_config_defaults(&rdb_vm_config_table, &c);
	if (!strchr(argv[0], '/') && access(argv[0], F_OK) < 0) {
		const char *here = !strcmp(what, "protect") ?
			failed_over_here(argv[0]) : NULL;

		if (here) {
			rdb_config_dispose(&rdb_vm_config_table, &c);
			return do_reprotect(argc, argv, here);
		}
		rc = rdb_virt_vm_config(uri, argv[0], &c, err, sizeof(err));
		if (rc == -ENOENT && !strcmp(what, "protect")) {
			/* no such domain: the daemon says what it knows */
			rdb_config_dispose(&rdb_vm_config_table, &c);
			return do_reprotect(argc, argv, NULL);
		}
		if (rc == -ENOENT)
			snprintf(err, sizeof(err), "%s: no such VM file, and no "
				 "libvirt domain of that name", argv[0]);
		if (rc < 0) {
			fprintf(stderr, "remusdbctl: %s\n", err);
			rdb_config_dispose(&rdb_vm_config_table, &c);
			return rc == -ENOENT ? 2 : 1;
		}
		domain = true;
	} else if (rdb_config_load_file(&rdb_vm_config_table, argv[0], &c, err,
					sizeof(err)) < 0) {
		goto bad;
	}
	for (int i = 1; i < argc; i++) {
		char *eq = strchr(argv[i], '=');

		if (!eq) {
			snprintf(err, sizeof(err), "%s: expected KEY=VALUE", argv[i]);
			goto bad;
		}
		*eq = 0;
		if (rdb_config_set(&rdb_vm_config_table, &c, argv[i], eq + 1, err,
				   sizeof(err)) < 0)
			goto bad;
	}
	if (!domain && default_sockets(&c, err, sizeof(err)) < 0)
		goto bad;
	if (rdb_vm_config_check(&c, err, sizeof(err)) < 0)
		goto bad;
	reply = call(cmd(what, rdb_vm_config_to_json(&c)), &ex);
	if (reply)
		printf("%s: %s%s\n", c.name, strcmp(what, "attach") ? "protecting" :
		       "attached (disk and network served, not protected)",
		       domain ? " (libvirt domain)" : "");
	json_decref(reply);
	rdb_config_dispose(&rdb_vm_config_table, &c);
	return ex;
bad:
	fprintf(stderr, "remusdbctl: %s\n", err);
	rdb_config_dispose(&rdb_vm_config_table, &c);
	return 2;
}

/* protect / attach VMCONF|NAME [KEY=VALUE]... [--connect URI] */
static int wait_state(const char *name, const char *want, double timeout);

/* protect [--wait[=SECONDS]] / attach: the request, then (--wait) the
 * VM's state until protected or why not */
static int do_protect(const char *what, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "connect", required_argument, NULL, 'C' },
		{ "wait", optional_argument, NULL, 'w' },
		{ 0 }
	};
	const char *uri = NULL;
	char **op = calloc((size_t)argc, sizeof(*op));	/* VMCONF|NAME, KEY=VALUE... */
	double wait_s = -1;
	int nop = 0, o, rc;

	if (!op)
		return 1;
	while ((o = sub_getopt(argc, argv, opts)) != -1) {
		if (o == 'C') {
			uri = optarg;
		} else if (o == 'w' && !strcmp(what, "protect")) {
			wait_s = 600;
			if (optarg && !seconds_arg(optarg, false, 86400, &wait_s)) {
				free(op);
				return 2;
			}
		} else if (o == 1) {
			op[nop++] = optarg;
		} else {
			free(op);
			return usage_error(o);
		}
	}
	rc = nop < 1 ? usage_error(0) : protect_vm(what, uri, nop, op);
	if (rc == 0 && wait_s >= 0) {
		/* the name the daemon knows: the VM file's, or NAME itself */
		struct rdb_vm_config c;
		char err[600], name[80];

		rdb_config_defaults(&rdb_vm_config_table, &c);
		snprintf(name, sizeof(name), "%s", op[0]);
		if ((strchr(op[0], '/') || access(op[0], F_OK) == 0) &&
		    rdb_config_load_file(&rdb_vm_config_table, op[0], &c, err,
					 sizeof(err)) == 0 && c.name)
			snprintf(name, sizeof(name), "%s", c.name);
		rdb_config_dispose(&rdb_vm_config_table, &c);
		rc = wait_state(name, "protected", wait_s);
		if (rc == 0)
			printf("%s: protected\n", name);
	}
	free(op);
	return rc;
}

static bool is_dir(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * enroll DOMAIN [--yes] [--connect URI] [--tap NAME]... [--emulator PATH]
 *        [--run-dir DIR] [--firmware-dir DIR]... [--event-port]
 * (--tap once per interface, in the domain's order, when it has several)
 * The run_dir and the emulator default to what remusdbd on this host uses
 * (its run_dir, its qemu_binary: the QEMU it restores VMs with).
 */
static int do_enroll(bool enroll, int argc, char **argv)
{
	static const struct option enroll_opts[] = {
		{ "yes", no_argument, NULL, 'y' },
		{ "connect", required_argument, NULL, 'C' },
		{ "tap", required_argument, NULL, 't' },
		{ "emulator", required_argument, NULL, 'e' },
		{ "run-dir", required_argument, NULL, 'r' },
		{ "firmware-dir", required_argument, NULL, 'f' },
		{ "event-port", no_argument, NULL, 'E' },
		{ 0 }
	};
	static const struct option unenroll_opts[] = {
		{ "yes", no_argument, NULL, 'y' },
		{ "connect", required_argument, NULL, 'C' },
		{ 0 }
	};
	const char *uri = NULL, *name = NULL, *tap = NULL, *emu = NULL, *run = NULL;
	const char *fw[16], *taps[4];
	size_t ntaps = 0;
	static const char *const debian_fw[] = {
		"/usr/share/seabios", "/usr/lib/ipxe/qemu", "/usr/share/qemu",
	};
	char emubuf[1024], rundir[512], pcbios[1100];
	struct rdb_enroll_params p = { 0 };
	bool yes = false;
	size_t nfw = 0;
	int o;

	while ((o = sub_getopt(argc, argv, enroll ? enroll_opts : unenroll_opts)) != -1) {
		if (o == 'y') {
			yes = true;
		} else if (o == 'E') {
			p.event_port = true;
		} else if (o == 'C') {
			uri = optarg;
		} else if (o == 't') {
			/* repeatable: one per interface, in the domain's order */
			if (ntaps == 4) {
				fprintf(stderr, "remusdbctl: more than 4 --tap\n");
				return 2;
			}
			taps[ntaps++] = optarg;
			tap = taps[0];
		} else if (o == 'e') {
			emu = optarg;
		} else if (o == 'r') {
			run = optarg;
		} else if (o == 'f') {
			if (nfw == 16) {
				fprintf(stderr, "remusdbctl: more than 16 --firmware-dir\n");
				return 2;
			}
			fw[nfw++] = optarg;
		} else if (o == 1 && !name) {
			name = optarg;
		} else {
			return usage_error(o);
		}
	}
	if (!name)
		return usage_error(0);
	if (!enroll)
		return rdb_virt_unenroll(uri, name, yes);
	if (!emu || !run) {
		int ex = 0;
		json_t *reply = call(cmd("info", NULL), &ex), *r;

		if (!reply) {
			fprintf(stderr, "remusdbctl: enroll takes remusdbd's run_dir "
				"and qemu_binary from the daemon: start it, or say "
				"--run-dir DIR and --emulator PATH\n");
			return ex;
		}
		r = json_object_get(reply, "result");
		if (!run) {
			snprintf(rundir, sizeof(rundir), "%s",
				 json_string_value(json_object_get(r, "run_dir")) ?: "");
			run = rundir;
		}
		if (!emu) {
			const char *q = json_string_value(json_object_get(r, "qemu_binary")) ?: "";

			if (!rdb_find_command(q, emubuf, sizeof(emubuf))) {
				fprintf(stderr, "remusdbctl: remusdbd's qemu_binary %s "
					"is not an executable here: say --emulator "
					"PATH (the patched QEMU)\n", q);
				json_decref(reply);
				return 1;
			}
			emu = emubuf;
		}
		json_decref(reply);
	}
	if (emu[0] != '/' || run[0] != '/') {
		fprintf(stderr, "remusdbctl: --emulator and --run-dir want "
			"absolute paths\n");
		return 2;
	}
	if (nfw == 0) {
		/* a QEMU run from its build tree finds its ROMs in pc-bios/
		 * beside it; then Debian's firmware packages */
		const char *slash = strrchr(emu, '/');

		snprintf(pcbios, sizeof(pcbios), "%.*s/pc-bios",
			 (int)(slash - emu), emu);
		if (is_dir(pcbios))
			fw[nfw++] = pcbios;
		for (size_t i = 0; i < 3; i++)
			if (is_dir(debian_fw[i]))
				fw[nfw++] = debian_fw[i];
	}
	p.emulator = emu;
	p.run_dir = run;
	p.tap = tap;
	p.more_taps = taps + 1;
	p.nmore_taps = ntaps > 1 ? ntaps - 1 : 0;
	p.firmware_dirs = fw;
	p.nfirmware = nfw;
	return rdb_virt_enroll(uri, name, &p, yes);
}

static void print_status(json_t *vms)
{
	size_t i;
	json_t *v;

	printf("%-16s %-8s %-13s %-5s %8s %8s %7s %7s %9s %6s %s\n", "NAME",
	       "ROLE", "STATE", "MODE", "EPOCH", "CKPT/s", "P50ms", "P99ms",
	       "ACK-AGE", "HELD", "SINCE");
	json_array_foreach(vms, i, v) {
		json_t *age = json_object_get(v, "last_ack_age_ms");
		json_t *held = json_object_get(v, "held_frames");
		char agebuf[32] = "-", heldbuf[32] = "-";
		const char *mode = json_string_value(json_object_get(v, "mode"));

		if (json_is_integer(age))
			snprintf(agebuf, sizeof(agebuf), "%lldms",
				 (long long)json_integer_value(age));
		/* only a primary holds output */
		if (json_is_integer(held))
			snprintf(heldbuf, sizeof(heldbuf), "%lld",
				 (long long)json_integer_value(held));
		printf("%-16s %-8s %-13s %-5s %8lld %8.1f %7.2f %7.2f %9s %6s %llds (%s)\n",
		       json_string_value(json_object_get(v, "name")),
		       json_string_value(json_object_get(v, "role")),
		       json_string_value(json_object_get(v, "state")),
		       !mode ? "-" : strcmp(mode, "commit-protection") ? mode : "cp",
		       (long long)json_integer_value(json_object_get(v, "committed_epoch")),
		       json_real_value(json_object_get(v, "checkpoints_per_s")),
		       json_real_value(json_object_get(v, "pause_ms_p50")),
		       json_real_value(json_object_get(v, "pause_ms_p99")),
		       agebuf, heldbuf,
		       (long long)json_integer_value(json_object_get(v, "state_age_ms")) / 1000,
		       json_string_value(json_object_get(v, "state_reason")));
	}
}

static int load_config(const char *path, bool given, struct rdb_daemon_config *c);

/*
 * status --cluster: every VM the witness knows (remusdbd.conf's witness
 * and witness_prefix, asked from here), with its owner, the witness's
 * state (protected: registered by its primary; running: a failover
 * decision's winner runs it) and generation, and what this host's
 * daemon says of it, like patronictl list.  Exit 0 when every one is
 * protected at the witness and, where this daemon knows it, here; 1
 * otherwise; 3 when the witness cannot be asked.
 */
static int cluster_status(bool as_json)
{
	struct rdb_daemon_config dc;
	json_t *list = NULL, *reply, *here, *v, *out;
	char err[600];
	int rc, ex = 0, result = 0;
	size_t i;

	rdb_config_defaults(&rdb_daemon_config_table, &dc);
	rc = load_config(config_path, config_given, &dc);
	if (rc) {
		rdb_config_dispose(&rdb_daemon_config_table, &dc);
		return rc;
	}
	if (!dc.witness || !dc.witness[0]) {
		fprintf(stderr, "remusdbctl: %s names no witness: --cluster lists "
			"the VMs the witness knows\n", config_path);
		rdb_config_dispose(&rdb_daemon_config_table, &dc);
		return 3;
	}
	rc = rdb_witness_list(dc.witness, dc.witness_prefix, dc.witness_timeout_ms,
			      &list, err, sizeof(err));
	rdb_config_dispose(&rdb_daemon_config_table, &dc);
	if (rc < 0) {
		fprintf(stderr, "remusdbctl: %s\n", err);
		return 3;
	}
	/* this host's view (no daemon: the witness's alone) */
	quiet = true;
	reply = call(cmd("status", json_object()), &ex);
	quiet = false;
	here = json_object_get(json_object_get(reply, "result"), "vms");
	json_array_foreach(list, i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		json_t *h;
		size_t k;

		if (strcmp(json_string_value(json_object_get(v, "state")) ?: "",
			   "protected"))
			result = 1;
		json_array_foreach(here, k, h)
			if (!strcmp(json_string_value(json_object_get(h, "name")) ?: "",
				    name ?: "")) {
				json_object_set_new(v, "here", json_pack(
					"{s:O?, s:O?, s:O?, s:O?}",
					"role", json_object_get(h, "role"),
					"state", json_object_get(h, "state"),
					"peer", json_object_get(h, "peer"),
					"state_reason", json_object_get(h, "state_reason")));
				if (strcmp(json_string_value(json_object_get(h, "state")) ?: "",
					   "protected"))
					result = 1;
			}
	}
	if (as_json) {
		out = json_pack("{s:O, s:b}", "vms", list, "daemon_answered",
				json_is_array(here));
		json_dumpf(out, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(out);
	} else {
		printf("%-20s %-16s %-10s %-16s | %-8s %-13s %s\n", "NAME", "OWNER",
		       "WITNESS", "GENERATION", "HERE", "STATE", "PEER");
		json_array_foreach(list, i, v) {
			json_t *h = json_object_get(v, "here");

			printf("%-20s %-16s %-10s %-16s | %-8s %-13s %s\n",
			       json_string_value(json_object_get(v, "name")) ?: "?",
			       json_string_value(json_object_get(v, "owner")) ?: "?",
			       json_string_value(json_object_get(v, "state")) ?:
			       "unreadable",
			       json_string_value(json_object_get(v, "generation")) ?: "-",
			       h ? json_string_value(json_object_get(h, "role")) ?: "?" :
			       "-", h ? json_string_value(json_object_get(h, "state")) ?: "?" :
			       "-", h ? json_string_value(json_object_get(h, "peer")) ?: "-" :
			       "-");
		}
		if (!json_is_array(here))
			fprintf(stderr, "remusdbctl: this host's remusdbd did not "
				"answer: the witness's view only\n");
	}
	json_decref(reply);
	json_decref(list);
	return result;
}

static int do_status(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "cluster", no_argument, NULL, 'C' },
		{ 0 }
	};
	const char *name = NULL;
	json_t *args, *reply, *vms, *v;
	bool as_json = false, cluster = false;
	int ex = 0, rc = 0, o;
	size_t i;

	while ((o = sub_getopt(argc, argv, opts)) != -1) {
		if (o == 'j')
			as_json = true;
		else if (o == 'C')
			cluster = true;
		else if (o == 1 && !name)
			name = optarg;
		else
			return usage_error(o);
	}
	if (cluster) {
		if (name) {
			fprintf(stderr, "remusdbctl: status --cluster lists every "
				"VM: no NAME\n");
			return 2;
		}
		return cluster_status(as_json);
	}
	args = name ? json_pack("{s:s}", "name", name) : json_object();
	reply = call(cmd("status", args), &ex);
	vms = json_object_get(json_object_get(reply, "result"), "vms");
	/* No list, nothing known of the VMs' protection: the daemon did not
	 * answer, or refused (no VM NAME here, not root, too many clients). */
	if (!json_is_array(vms)) {
		if (reply)
			fprintf(stderr, "remusdbctl: malformed reply from remusdbd\n");
		json_decref(reply);
		return 3;
	}
	if (as_json) {
		json_dumpf(json_object_get(reply, "result"), stdout, JSON_INDENT(2));
		putchar('\n');
	} else {
		print_status(vms);
	}
	json_array_foreach(vms, i, v)
		if (strcmp(json_string_value(json_object_get(v, "state")) ?: "", "protected"))
			rc = 1;
	json_decref(reply);
	return rc;
}

/* failover / unprotect NAME [--force]: the daemon may say what happens
 * next (a decision pending) instead of it being done. */
static int do_named(const char *c, int argc, char **argv, const char *done)
{
	static const struct option opts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ 0 }
	};
	const char *name = NULL, *msg;
	bool force = false;
	json_t *reply, *args;
	int ex = 0, o;

	while ((o = sub_getopt(argc, argv, opts)) != -1) {
		if (o == 'f')
			force = true;
		else if (o == 1 && !name)
			name = optarg;
		else
			return usage_error(o);
	}
	if (!name)
		return usage_error(0);
	args = json_pack("{s:s}", "name", name);
	if (force)
		json_object_set_new(args, "force", json_true());
	reply = call(cmd(c, args), &ex);
	msg = json_string_value(json_object_get(json_object_get(reply, "result"),
						"message"));
	if (reply)
		printf("%s: %s\n", name, msg ? msg : done);
	json_decref(reply);
	return ex;
}

/* The operands of a subcommand without options: exactly n of them into
 * op; 0, or 2 for a usage error. */
static int operands(int argc, char **argv, const char **op, int n)
{
	static const struct option none[] = { { 0 } };
	int have = 0, o;

	while ((o = sub_getopt(argc, argv, none)) != -1) {
		if (o != 1 || have == n)
			return usage_error(o);
		op[have++] = optarg;
	}
	return have == n ? 0 : usage_error(0);
}

static int do_inject(int argc, char **argv)
{
	const char *op[2];
	json_t *reply;
	int ex = 0;

	if (operands(argc, argv, op, 2))
		return 2;
	reply = call(cmd("inject", json_pack("{s:s, s:s}", "name", op[0],
					     "fault", op[1])), &ex);
	json_decref(reply);
	return ex;
}

static int do_capture(int argc, char **argv)
{
	const char *op[3];
	json_t *reply;
	char *end;
	long n;
	int ex = 0;

	if (operands(argc, argv, op, 3))
		return 2;
	n = strtol(op[2], &end, 10);
	if (*end || n < 1 || n > 1000000) {
		fprintf(stderr, "remusdbctl: EPOCHS: want 1..1000000\n");
		return 2;
	}
	reply = call(cmd("capture", json_pack("{s:s, s:s, s:i}", "name", op[0],
					      "path", op[1], "epochs", (int)n)), &ex);
	if (reply)
		printf("%s: capturing %ld epochs to %s\n", op[0], n, op[1]);
	json_decref(reply);
	return ex;
}

/* epochs NAME [--count N] [--json]: the primary's last checkpoints. */
/* history NAME [--count N] [--json]: the VM's state changes on this
 * host, oldest first, from the daemon's record (history.h) */
/*
 * NAME [--count N] [--json], the arguments of history and epochs: N in
 * lo..hi (what_lo: what lo means, said in the error), *n left as it is
 * when not given.  0, or the exit code of a usage error.
 */
static int name_count_json(int argc, char **argv, long lo, long hi,
			   const char *what_lo, const char **name, long *n,
			   bool *as_json)
{
	static const struct option opts[] = {
		{ "count", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ 0 }
	};
	int o;

	while ((o = sub_getopt(argc, argv, opts)) != -1) {
		char *end;

		if (o == 'j') {
			*as_json = true;
		} else if (o == 'n') {
			*n = strtol(optarg, &end, 10);
			if (*end || *n < lo || *n > hi) {
				fprintf(stderr, "remusdbctl: --count: want %ld..%ld%s%s%s\n",
					lo, hi, what_lo ? " (" : "",
					what_lo ? what_lo : "", what_lo ? ")" : "");
				return 2;
			}
		} else if (o == 1 && !*name) {
			*name = optarg;
		} else {
			return usage_error(o);
		}
	}
	return *name ? 0 : usage_error(0);
}

static int do_history(int argc, char **argv)
{
	const char *name = NULL;
	bool as_json = false;
	long n = 50;
	json_t *reply, *r, *c;
	size_t i;
	int ex = 0;

	ex = name_count_json(argc, argv, 0, 100000, "0: all that are kept",
			     &name, &n, &as_json);
	if (ex)
		return ex;
	reply = call(cmd("history", json_pack("{s:s, s:I}", "name", name,
					      "count", (json_int_t)n)), &ex);
	if (!reply)
		return ex;
	r = json_object_get(reply, "result");
	if (as_json) {
		json_dumpf(r, stdout, JSON_COMPACT);
		putchar('\n');
		json_decref(reply);
		return 0;
	}
	printf("%-24s %-8s %-13s    %-13s %9s  %s\n", "TIME (UTC)", "ROLE",
	       "FROM", "TO", "AFTER s", "REASON");
	json_array_foreach(json_object_get(r, "changes"), i, c) {
		const char *s_time = json_string_value(json_object_get(c, "time"));
		const char *role = json_string_value(json_object_get(c, "role"));
		const char *from = json_string_value(json_object_get(c, "from"));
		const char *to = json_string_value(json_object_get(c, "to"));
		const char *why = json_string_value(json_object_get(c, "reason"));

		printf("%-24s %-8s %-13s -> %-13s %9.3f  %s\n", s_time ?: "?",
		       role ?: "?", from ?: "?", to ?: "?",
		       json_number_value(json_object_get(c, "after_s")),
		       why ?: "");
	}
	if (json_integer_value(json_object_get(r, "unreadable_lines")))
		fprintf(stderr, "remusdbctl: %lld line(s) of the record could not "
			"be read\n", (long long)json_integer_value(
			json_object_get(r, "unreadable_lines")));
	json_decref(reply);
	return 0;
}

static int do_epochs(int argc, char **argv)
{
	const char *name = NULL;
	bool as_json = false;
	long n = 40;
	json_t *reply, *r, *ep;
	size_t i;
	int ex = 0;

	ex = name_count_json(argc, argv, 1, 4096, NULL, &name, &n, &as_json);
	if (ex)
		return ex;
	reply = call(cmd("epochs", json_pack("{s:s, s:i}", "name", name, "count", (int)n)), &ex);
	if (!reply)
		return ex;
	r = json_object_get(reply, "result");
	if (as_json) {
		json_dumpf(r, stdout, JSON_COMPACT);
		putchar('\n');
		json_decref(reply);
		return 0;
	}
	printf("%10s %-23s %9s %10s %9s\n", "EPOCH", "PAUSE ENDED (UTC)", "PAUSE ms",
	       "BYTES", "ACK ms");
	json_array_foreach(json_object_get(r, "epoch"), i, ep) {
		double t = json_real_value(json_array_get(json_object_get(r, "t"), i));
		json_t *ack = json_array_get(json_object_get(r, "ack_ms"), i);
		time_t sec = (time_t)t;
		struct tm tm;
		char when[32], ackbuf[32] = "-";

		gmtime_r(&sec, &tm);
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		if (json_is_number(ack))
			snprintf(ackbuf, sizeof(ackbuf), "%.2f", json_number_value(ack));
		printf("%10lld %s.%03d %9.2f %10lld %9s\n",
		       (long long)json_integer_value(ep), when,
		       (int)((t - (double)sec) * 1000),
		       json_number_value(json_array_get(json_object_get(r, "pause_ms"), i)),
		       (long long)json_integer_value(json_array_get(json_object_get(r, "bytes"), i)),
		       ackbuf);
	}
	json_decref(reply);
	return 0;
}

static double wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The VM's status object from one status call (the reply to free in
 * *reply_out), or NULL. */
static json_t *vm_status(const char *name, json_t **reply_out, int *ex)
{
	json_t *reply = call(cmd("status", json_pack("{s:s}", "name", name)), ex);

	*reply_out = reply;
	return reply ? json_array_get(json_object_get(json_object_get(reply, "result"),
						      "vms"), 0) : NULL;
}

/* drill NAME [--timeout S] [--out FILE]: on the backup, while the VM is
 * protected: armed, it follows the VM through the operator's power pull
 * to failed-over and writes what the backup saw.  Every state's entry
 * time comes from the daemon (state_age_ms), not from this poll. */
static int do_drill(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ "out", required_argument, NULL, 'o' },
		{ 0 }
	};
	const char *name = NULL, *out = NULL;
	double timeout = 600, armed_at, t;
	char outbuf[256], when[32], last_state[32] = "";
	json_t *reply, *vm, *states = json_array(), *report = NULL, *lf;
	const char *st;
	uint64_t deadline;
	time_t now;
	int ex = 0, rc = 1, o;
	FILE *f;

	while ((o = sub_getopt(argc, argv, opts)) != -1) {
		if (o == 't') {
			if (!seconds_arg(optarg, false, 86400, &timeout)) {
				json_decref(states);
				return 2;
			}
		} else if (o == 'o') {
			out = optarg;
		} else if (o == 1 && !name) {
			name = optarg;
		} else {
			json_decref(states);
			return usage_error(o);
		}
	}
	if (!name) {
		json_decref(states);
		return usage_error(0);
	}
	vm = vm_status(name, &reply, &ex);
	if (!vm) {
		json_decref(states);
		json_decref(reply);
		return ex ? ex : 1;
	}
	st = json_string_value(json_object_get(vm, "state"));
	if (strcmp(json_string_value(json_object_get(vm, "role")) ?: "", "backup") ||
	    strcmp(st ?: "", "protected")) {
		fprintf(stderr, "remusdbctl: drill runs on the backup's host while %s is "
			"protected; here it is %s and %s\n", name,
			json_string_value(json_object_get(vm, "role")), st);
		json_decref(states);
		json_decref(reply);
		return 1;
	}
	armed_at = wall_s();
	printf("%s: drill armed on this backup (epoch %lld, primary heard %lld ms ago).\n"
	       "Pull the primary's power now; waiting up to %.0f s for the failover.\n",
	       name, (long long)json_integer_value(json_object_get(vm, "committed_epoch")),
	       (long long)json_integer_value(json_object_get(vm, "last_heard_ms")), timeout);
	fflush(stdout);
	snprintf(last_state, sizeof(last_state), "%s", st);
	json_array_append_new(states, json_pack("{s:s, s:f}", "state", st, "at",
		armed_at - (double)json_integer_value(json_object_get(vm, "state_age_ms")) / 1000));
	json_decref(reply);
	deadline = rdb_now_ns() + (uint64_t)(timeout * RDB_NS_PER_S);
	quiet = true;
	for (;;) {
		usleep(20000);
		ex = 0;
		t = wall_s();
		vm = vm_status(name, &reply, &ex);
		st = vm ? json_string_value(json_object_get(vm, "state")) : NULL;
		if (st && strcmp(st, last_state)) {
			double at = t - (double)json_integer_value(json_object_get(vm,
						"state_age_ms")) / 1000;

			json_array_append_new(states, json_pack("{s:s, s:f, s:s}", "state", st,
				"at", at, "reason", json_string_value(json_object_get(vm,
						"state_reason")) ?: ""));
			printf("  +%.3f s  %s (%s)\n", at - armed_at, st,
			       json_string_value(json_object_get(vm, "state_reason")));
			fflush(stdout);
			snprintf(last_state, sizeof(last_state), "%s", st);
		}
		if (st && (!strcmp(st, "failed-over") || !strcmp(st, "failed") ||
			   !strcmp(st, "degraded")))
			break;
		json_decref(reply);
		reply = NULL;
		if (rdb_now_ns() >= deadline) {
			fprintf(stderr, "remusdbctl: %s: no failover within %.0f s "
				"(still %s); nothing recorded\n", name, timeout, last_state);
			json_decref(states);
			return 1;
		}
	}
	lf = json_object_get(vm, "last_failover");
	{
		double running = json_real_value(json_array_get(states,
				json_array_size(states) - 1) ? json_object_get(json_array_get(states,
				json_array_size(states) - 1), "at") : NULL);
		double restore = json_number_value(json_object_get(lf, "restore_ms"));
		double silent = json_number_value(json_object_get(lf, "primary_silent_ms"));
		double started = running - restore / 1000;
		double heard = started - silent / 1000;

		report = json_pack("{s:s, s:s, s:f, s:O, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:O, s:O}",
			"vm", name, "outcome", st, "armed_at", armed_at, "states", states,
			"primary_last_heard_at", heard,
			"failover_started_at", started,
			"running_at", running,
			"detection_ms", silent - json_number_value(json_object_get(lf, "decision_ms")),
			"decision_ms", json_number_value(json_object_get(lf, "decision_ms")),
			"restore_ms", restore,
			"client_stall_ms_at_least", (running - heard) * 1000,
			"committed_epoch", json_object_get(vm, "committed_epoch"),
			"last_failover", lf ? lf : json_null());
	}
	if (!report || strcmp(st, "failed-over")) {
		fprintf(stderr, "remusdbctl: %s ended %s, not failed-over (%s)\n", name, st,
			json_string_value(json_object_get(vm, "state_reason")));
		rc = 1;
	} else {
		rc = 0;
	}
	if (report && !out) {
		struct tm tm;

		now = (time_t)armed_at;
		gmtime_r(&now, &tm);
		strftime(when, sizeof(when), "%Y%m%dT%H%M%SZ", &tm);
		snprintf(outbuf, sizeof(outbuf), "remusdb-drill-%s-%s.json", name, when);
		out = outbuf;
	}
	if (report) {
		f = fopen(out, "w");
		if (!f || json_dumpf(report, f, JSON_INDENT(2)) < 0 || fputc('\n', f) == EOF ||
		    fclose(f) != 0) {
			fprintf(stderr, "remusdbctl: cannot write the report %s: %s\n", out,
				strerror(errno));
			rc = 1;
		} else {
			printf("%s: %s. Primary last heard -> failover: %.0f ms (detection %.0f ms, "
			       "decision %.0f ms); restore %.1f ms from epoch %lld; clients "
			       "saw no new output for at least %.0f ms.\nReport: %s\n", name, st,
			       json_real_value(json_object_get(report, "detection_ms")) +
			       json_real_value(json_object_get(report, "decision_ms")),
			       json_real_value(json_object_get(report, "detection_ms")),
			       json_real_value(json_object_get(report, "decision_ms")),
			       json_real_value(json_object_get(report, "restore_ms")),
			       (long long)json_integer_value(json_object_get(report, "committed_epoch")),
			       json_real_value(json_object_get(report, "client_stall_ms_at_least")),
			       out);
		}
	}
	json_decref(report);
	json_decref(states);
	json_decref(reply);
	return rc;
}

/* migrate NAME [--timeout S]: asks, then follows the handover to its end
 * (the VM leaves `migrating`): 0 once migrated, 1 if it stayed here. */
static int do_migrate(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ 0 }
	};
	const char *name = NULL, *msg;
	double timeout = 30;
	uint64_t deadline;
	json_t *reply;
	int ex = 0, o;

	while ((o = sub_getopt(argc, argv, opts)) != -1) {
		if (o == 't') {
			if (!seconds_arg(optarg, false, 3600, &timeout))
				return 2;
		} else if (o == 1 && !name) {
			name = optarg;
		} else {
			return usage_error(o);
		}
	}
	if (!name)
		return usage_error(0);
	reply = call(cmd("migrate", json_pack("{s:s}", "name", name)), &ex);
	if (!reply)
		return ex;
	msg = json_string_value(json_object_get(json_object_get(reply, "result"),
						"message"));
	printf("%s: %s\n", name, msg ? msg : "handing over");
	json_decref(reply);
	deadline = rdb_now_ns() + (uint64_t)(timeout * RDB_NS_PER_S);
	quiet = true;
	for (;;) {
		json_t *vm;
		const char *st;

		ex = 0;
		reply = call(cmd("status", json_pack("{s:s}", "name", name)), &ex);
		vm = reply ? json_array_get(json_object_get(
				json_object_get(reply, "result"), "vms"), 0) : NULL;
		st = vm ? json_string_value(json_object_get(vm, "state")) : NULL;
		if (st && strcmp(st, "migrating") != 0) {
			const char *why = json_string_value(
				json_object_get(vm, "state_reason"));
			bool ok = !strcmp(st, "migrated");

			fprintf(ok ? stdout : stderr, "%s: %s (%s)\n", name, st,
				why ? why : "");
			json_decref(reply);
			return ok ? 0 : 1;
		}
		json_decref(reply);
		if (rdb_now_ns() >= deadline) {
			fprintf(stderr, "remusdbctl: %s still %s after %.0f s\n",
				name, st ? st : "unknown", timeout);
			return 1;
		}
		usleep(20000);
	}
}

/*
 * Polls NAME's status until its state is want (0), a state it cannot
 * leave for want (1, the reason on stderr), or timeout seconds (1; 3 if
 * the daemon could not be asked).
 */
static int wait_state(const char *name, const char *want, double timeout)
{
	uint64_t deadline;
	char last[64] = "unknown";

	deadline = rdb_now_ns() + (uint64_t)(timeout * RDB_NS_PER_S);
	quiet = true;
	for (;;) {
		int ex = 0;
		json_t *reply = call(cmd("status", json_pack("{s:s}", "name", name)), &ex);
		json_t *vm = reply ? json_array_get(json_object_get(
				json_object_get(reply, "result"), "vms"), 0) : NULL;
		const char *st = vm ? json_string_value(json_object_get(vm, "state")) : NULL;

		if (st) {
			snprintf(last, sizeof(last), "%s", st);
			if (!strcmp(st, want)) {
				json_decref(reply);
				return 0;
			}
			/* A terminal state other than the one awaited: stop now. */
			/* protect works in the background (the witness, the
			 * connect): unprotected while awaiting protected is
			 * its failure, with the reason */
			/* (a VM re-adopted at the daemon's start is
			 * unprotected until the witness answers, its protect
			 * pending: not a failure yet) */
			/* (nor one degraded whose backup's remusdbd went
			 * away: it is protected again on its own) */
			bool pending = !strcmp(want, "protected") &&
				json_is_true(json_object_get(vm, "protect_pending"));

			if ((!strcmp(st, "failed") || !strcmp(st, "fenced") ||
			     (!strcmp(st, "degraded") && !pending) ||
			     (!strcmp(st, "unprotected") && !pending &&
			      !strcmp(want, "protected"))) &&
			    strcmp(want, st)) {
				fprintf(stderr, "remusdbctl: %s is %s (%s), not %s\n",
					name, st, json_string_value(json_object_get(vm, "state_reason")),
					want);
				json_decref(reply);
				return 1;
			}
		}
		json_decref(reply);
		if (rdb_now_ns() >= deadline) {
			if (ex) {
				/* say why the last poll failed */
				quiet = false;
				json_decref(call(cmd("status", json_pack("{s:s}", "name",
						 name)), &ex));
			}
			if (ex == 3)
				return 3;
			fprintf(stderr, "remusdbctl: %s still %s after %.1f s (wanted %s)\n",
				name, last, timeout, want);
			return 1;
		}
		usleep(50000);
	}
}

static int do_wait(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ 0 }
	};
	const char *name = NULL, *want = NULL;
	double timeout = 60;
	int o;

	while ((o = sub_getopt(argc, argv, opts)) != -1) {
		if (o == 't') {
			if (!seconds_arg(optarg, true, 86400, &timeout))
				return 2;
		} else if (o == 1 && !name) {
			name = optarg;
		} else if (o == 1 && !want) {
			want = optarg;
		} else {
			return usage_error(o);
		}
	}
	if (!want)
		return usage_error(0);
	return wait_state(name, want, timeout);
}

/* config --dump-defaults [vm]: reads no file, asks no daemon. */
static int do_config(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dump-defaults", no_argument, NULL, 'd' },
		{ 0 }
	};
	bool dump = false, vm = false;
	int o;

	while ((o = sub_getopt(argc, argv, opts)) != -1) {
		if (o == 'd')
			dump = true;
		else if (o == 1 && !vm && !strcmp(optarg, "vm"))
			vm = true;
		else
			return usage_error(o);
	}
	if (!dump)
		return usage_error(0);
	rdb_config_dump_defaults(vm ? &rdb_vm_config_table : &rdb_daemon_config_table,
				 stdout);
	return 0;
}

/* COMMAND ARGS...: argv[0] is the command. */
static int run(int argc, char **argv)
{
	const char *c = argv[0];
	char prog[32];

	/* getopt's messages name the program by argv[0] */
	snprintf(prog, sizeof(prog), "remusdbctl %s", c);
	argv[0] = prog;
	optind = 0;
	operands_only = false;
	if (!strcmp(c, "protect") || !strcmp(c, "attach"))
		return do_protect(c, argc, argv);
	if (!strcmp(c, "enroll") || !strcmp(c, "unenroll"))
		return do_enroll(c[0] == 'e', argc, argv);
	if (!strcmp(c, "status"))
		return do_status(argc, argv);
	if (!strcmp(c, "failover"))
		return do_named("failover", argc, argv, "failed over");
	if (!strcmp(c, "unprotect"))
		return do_named("unprotect", argc, argv, "unprotected");
	if (!strcmp(c, "detach"))
		return do_named("detach", argc, argv,
				"detached (its disk and NIC no longer served)");
	if (!strcmp(c, "migrate"))
		return do_migrate(argc, argv);
	if (!strcmp(c, "history"))
		return do_history(argc, argv);
	if (!strcmp(c, "wait"))
		return do_wait(argc, argv);
	if (!strcmp(c, "inject"))
		return do_inject(argc, argv);
	if (!strcmp(c, "drill"))
		return do_drill(argc, argv);
	if (!strcmp(c, "epochs"))
		return do_epochs(argc, argv);
	if (!strcmp(c, "capture"))
		return do_capture(argc, argv);
	if (!strcmp(c, "config"))
		return do_config(argc, argv);
	usage(stderr);
	return 2;
}

/*
 * remusdbd's configuration, for its control_socket, read as remusdbd
 * reads it (its table and parser): the default file missing means the
 * defaults, a file named with --config must exist, and a malformed one is
 * an error (exit 2).
 */
static int load_config(const char *path, bool given, struct rdb_daemon_config *c)
{
	char err[512];

	if (!given && access(path, F_OK) < 0)
		return 0;
	if (rdb_config_load_file(&rdb_daemon_config_table, path, c, err,
				 sizeof(err)) < 0) {
		fprintf(stderr, "remusdbctl: %s\n", err);
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "config", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct rdb_daemon_config dc;
	int o, rc;

	while ((o = getopt_long(argc, argv, "+s:c:h", lopts, NULL)) != -1) {
		if (o == 's') {
			sock_path = optarg;
		} else if (o == 'c') {
			config_path = optarg;
			config_given = true;
		} else {
			usage(o == 'h' ? stdout : stderr);
			return o == 'h' ? 0 : 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1) {
		usage(stderr);
		return 2;
	}
	/* config --dump-defaults talks to no daemon: it reads no file */
	if (sock_path || !strcmp(argv[0], "config"))
		return run(argc, argv);
	rdb_config_defaults(&rdb_daemon_config_table, &dc);
	rc = load_config(config_path, config_given, &dc);
	if (rc == 0) {
		sock_path = dc.control_socket;
		rc = run(argc, argv);
	}
	rdb_config_dispose(&rdb_daemon_config_table, &dc);
	return rc;
}

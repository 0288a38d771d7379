// SPDX-License-Identifier: GPL-2.0-only
/*
 * remusdbd: one per host.  Protects the VMs that run here (primary role)
 * and backs up the VMs whose primaries connect to it (backup role).
 *
 *   remusdbd [-c /etc/remusdb/remusdbd.conf] [-o key=value]...
 *
 * Startup (unwound in reverse on failure or SIGTERM): config, the link
 * key (no key and no explicit link_security = insecure: no start),
 * run/state dirs, event loop, watchdog child (forked before anything
 * else opens), control socket, replication listener.
 */
#define RDB_COMPONENT "main"
#include "backup.h"
#include "clock.h"
#include "config.h"
#include "cpulist.h"
#include "ctl.h"
#include "daemon.h"
#include "disksrv.h"
#include "filepub.h"
#include "history.h"
#include "linksec.h"
#include "log.h"
#include "primary.h"
#include "proc.h"
#include "role.h"
#include "sdunit.h"
#include "vm.h"
#include "vmdef.h"
#include "witness.h"
#include "watchdog.h"

#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include "sdnotify.h"
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_CONFIG "/etc/remusdb/remusdbd.conf"
#define WATCHDOG_POLL_NS (5 * RDB_NS_PER_MS)
#define HOUSEKEEPING_NS (20 * RDB_NS_PER_MS)

static void usage(FILE *f)
{
	fprintf(f, "usage: remusdbd [-c CONFIG] [-o KEY=VALUE]... | -h | --help\n"
		"  -c CONFIG   daemon configuration (default %s; missing file = defaults)\n"
		"  -o KEY=VAL  override one option (see remusdbctl config --dump-defaults)\n",
		DEFAULT_CONFIG);
}

/* Why it does not start, on stderr before it exits: under systemd with
 * the priority the log's lines carry (log.h), so an error, not info. */
static void startup_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static void startup_error(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%sremusdbd: %s\n", rdb_log_journal_prefix(RDB_LOG_ERROR),
		msg);
}

/* ---- control commands ---- */

static int ctl_status(void *opaque, json_t *req, json_t **reply_out)
{
	struct rdb_daemon *d = opaque;
	json_t *args = json_object_get(req, "args");
	const char *only = json_string_value(json_object_get(args, "name"));
	json_t *list = json_array();

	if (!list)
		return -ENOMEM;
	for (struct rdb_vm *vm = d->vms; vm; vm = vm->next) {
		json_t *o;

		if (only && strcmp(only, vm->name) != 0)
			continue;
		o = rdb_vm_status_json(vm);
		if (!o)
			continue;
		if (vm->role == RDB_ROLE_PRIMARY)
			rdb_primary_status(vm, o);
		else
			rdb_backup_status(vm, o);
		json_array_append_new(list, o);
	}
	if (only && json_array_size(list) == 0) {
		json_decref(list);
		*reply_out = json_sprintf("no VM named %s here", only);
		return -ENOENT;
	}
	*reply_out = json_pack("{s:o}", "vms", list);
	return 0;
}

/*
 * What the operator asked of NAME, recorded for the next start (vmdef.h).
 * Not recorded: logged, and said in the reply; the command itself took
 * effect.
 */
static void record_def(struct rdb_daemon *d, const char *name,
		       enum rdb_vmdef_intent intent, json_t **reply_out)
{
	struct rdb_vm *vm = rdb_vm_find(d, name);
	json_t *cfg = vm ? rdb_vm_config_to_json(&vm->cfg) : NULL;
	char err[400] = "", msg[600];
	int rc = cfg ? rdb_vmdef_save(d->cfg.state_dir, name, intent, cfg, err,
				     sizeof(err)) : -ENOENT;

	json_decref(cfg);
	if (rc == 0)
		return;
	snprintf(msg, sizeof(msg), "%s's definition was not recorded (%s): a "
		 "restart of remusdbd will not re-adopt it", name,
		 err[0] ? err : strerror(-rc));
	LOGVM(ERROR, name, "%s", msg);
	if (json_is_object(*reply_out))
		json_object_set_new(*reply_out, "message", json_string(msg));
}

/*
 * An attach or protect that asks for what already is (the VM attached
 * here; protected or on its way, in this mode): done, nothing changes.  So a runbook's attach and protect after a restart
 * (the daemon re-adopted the VM) succeed as before.
 */
static bool already(struct rdb_daemon *d, const struct rdb_vm_config *cfg,
		    bool attach_only, json_t **reply_out)
{
	struct rdb_vm *vm = rdb_vm_find(d, cfg->name);
	json_t *a, *b;
	bool same;

	if (!vm || vm->role != RDB_ROLE_PRIMARY || !vm->pri)
		return false;
	if (attach_only) {
		a = rdb_vm_config_to_json(&vm->cfg);
		b = rdb_vm_config_to_json(cfg);
		same = a && b && json_equal(a, b);
		json_decref(a);
		json_decref(b);
		*reply_out = json_pack("{s:s, s:s}", "state",
				       rdb_vm_state_name(vm->state), "message",
				       same ? "already attached here with this "
				       "config; nothing changed" : "already "
				       "attached here; nothing changed (the VM "
				       "keeps the config it was attached with: "
				       "detach it first to change that)");
		return *reply_out != NULL;
	}
	if (vm->state != RDB_VM_PROTECTING && vm->state != RDB_VM_PROTECTED)
		return false;
	if (strcmp(vm->cfg.mode ? vm->cfg.mode : "plain",
		   cfg->mode ? cfg->mode : "plain"))
		return false;	/* protect says why it cannot change */
	*reply_out = json_pack("{s:s, s:s}", "state", rdb_vm_state_name(vm->state),
			       "message", "already protected or protecting here "
			       "in this mode; nothing changed");
	return *reply_out != NULL;
}

static int protect_or_attach(struct rdb_daemon *d, json_t *req,
			     json_t **reply_out, bool attach_only)
{
	struct rdb_vm_config cfg;
	char err[512] = "";
	int rc;

	rdb_config_defaults(&rdb_vm_config_table, &cfg);
	rc = rdb_vm_config_from_json(json_object_get(req, "args"), &cfg, err,
				     sizeof(err));
	if (rc == 0 && already(d, &cfg, attach_only, reply_out)) {
		rdb_config_dispose(&rdb_vm_config_table, &cfg);
		return 0;
	}
	if (rc == 0)
		rc = attach_only ? rdb_primary_attach(d, &cfg, err, sizeof(err)) :
			rdb_primary_protect(d, &cfg, err, sizeof(err));
	rdb_config_dispose(&rdb_vm_config_table, &cfg);
	if (rc < 0) {
		*reply_out = json_string(err[0] ? err : strerror(-rc));
		return rc;
	}
	*reply_out = json_pack("{s:s}", "state", attach_only ? "unprotected" :
			       "protecting");
	{
		const char *name = json_string_value(json_object_get(
				json_object_get(req, "args"), "name"));

		if (name)
			record_def(d, name, attach_only ? RDB_VMDEF_ATTACHED :
				   RDB_VMDEF_PROTECTED, reply_out);
	}
	return 0;
}

static int ctl_protect(void *opaque, json_t *req, json_t **reply_out)
{
	return protect_or_attach(opaque, req, reply_out, false);
}

/* protect NAME KEY=VALUE...: the VM that failed over here, protected
 * again (role.c). */
static int ctl_reprotect(void *opaque, json_t *req, json_t **reply_out)
{
	json_t *args = json_object_get(req, "args");
	const char *name = json_string_value(json_object_get(args, "name"));
	json_t *set = json_object_get(args, "set");
	char err[512] = "";
	int rc;

	if (!name || (set && !json_is_object(set))) {
		*reply_out = json_string("reprotect wants a VM name and options");
		return -EINVAL;
	}
	set = set ? json_incref(set) : json_object();
	rc = set ? rdb_role_reprotect(opaque, name, set, err, sizeof(err)) :
		   -ENOMEM;
	json_decref(set);
	if (rc < 0) {
		*reply_out = json_string(err[0] ? err : strerror(-rc));
		return rc;
	}
	*reply_out = json_pack("{s:s}", "state", "protecting");
	record_def(opaque, name, RDB_VMDEF_PROTECTED, reply_out);
	return 0;
}

static int ctl_attach(void *opaque, json_t *req, json_t **reply_out)
{
	return protect_or_attach(opaque, req, reply_out, true);
}

static struct rdb_vm *vm_arg(struct rdb_daemon *d, json_t *req, json_t **reply_out)
{
	const char *name = json_string_value(json_object_get(
				json_object_get(req, "args"), "name"));
	struct rdb_vm *vm = name ? rdb_vm_find(d, name) : NULL;

	if (!vm)
		*reply_out = name ? json_sprintf("no VM named %s here", name) :
			json_string("missing VM name");
	return vm;
}

/* unprotect and detach: a primary's VM, --force, a message either way
 * (an error without one is the ctl's strerror). */
static int primary_forced_op(void *opaque, json_t *req, json_t **reply_out,
			     const char *not_primary,
			     int (*op)(struct rdb_vm *, bool, char *, size_t))
{
	struct rdb_vm *vm = vm_arg(opaque, req, reply_out);
	bool force = json_is_true(json_object_get(json_object_get(req, "args"),
						  "force"));
	char msg[600] = "";
	int rc;

	if (!vm)
		return -ENOENT;
	if (vm->role != RDB_ROLE_PRIMARY) {
		*reply_out = json_string(not_primary);
		return -EINVAL;
	}
	rc = op(vm, force, msg, sizeof(msg));
	if (msg[0])
		*reply_out = rc < 0 ? json_string(msg) :
			     json_pack("{s:s}", "message", msg);
	return rc;
}

static int ctl_unprotect(void *opaque, json_t *req, json_t **reply_out)
{
	const char *name = json_string_value(json_object_get(
				json_object_get(req, "args"), "name"));
	int rc = primary_forced_op(opaque, req, reply_out,
				   "unprotect runs on the primary's host",
				   rdb_primary_unprotect);

	/* still attached here, unprotected */
	if (rc == 0 && name && rdb_vm_find(opaque, name)) {
		if (!*reply_out)
			*reply_out = json_object();
		record_def(opaque, name, RDB_VMDEF_ATTACHED, reply_out);
	}
	return rc;
}

static int ctl_detach(void *opaque, json_t *req, json_t **reply_out)
{
	struct rdb_daemon *d = opaque;
	/* (the request outlives the VM it names) */
	const char *name = json_string_value(json_object_get(
				json_object_get(req, "args"), "name"));
	int rc = primary_forced_op(opaque, req, reply_out,
				   "detach is for a VM attached on this host "
				   "(this host backs it up: unprotect it on its "
				   "primary's host)", rdb_primary_detach);

	if (rc == 0 && name)
		rdb_vmdef_forget(d->cfg.state_dir, name);
	return rc;
}

static int ctl_migrate(void *opaque, json_t *req, json_t **reply_out)
{
	struct rdb_vm *vm = vm_arg(opaque, req, reply_out);
	char msg[600] = "";
	int rc;

	if (!vm)
		return -ENOENT;
	if (vm->role != RDB_ROLE_PRIMARY) {
		*reply_out = json_string("migrate runs on the primary's host");
		return -EINVAL;
	}
	rc = rdb_primary_migrate(vm, msg, sizeof(msg));
	if (rc < 0)
		*reply_out = json_string(msg[0] ? msg : strerror(-rc));
	else
		*reply_out = json_pack("{s:s}", "message", msg);
	return rc;
}

static int ctl_failover(void *opaque, json_t *req, json_t **reply_out)
{
	struct rdb_vm *vm = vm_arg(opaque, req, reply_out);
	bool force = json_is_true(json_object_get(json_object_get(req, "args"),
						  "force"));
	char msg[600] = "";
	int rc;

	if (!vm)
		return -ENOENT;
	if (vm->role != RDB_ROLE_BACKUP) {
		*reply_out = json_string("failover runs on the backup's host");
		return -EINVAL;
	}
	rc = rdb_backup_operator_failover(vm, force, msg, sizeof(msg));
	if (rc < 0)
		*reply_out = json_string(msg[0] ? msg : strerror(-rc));
	else if (msg[0])
		*reply_out = json_pack("{s:s}", "message", msg);
	return rc;
}

static int ctl_inject(void *opaque, json_t *req, json_t **reply_out)
{
	struct rdb_daemon *d = opaque;
	struct rdb_vm *vm;
	const char *fault;

	if (!d->cfg.allow_fault_injection) {
		*reply_out = json_string("fault injection is off (allow_fault_injection)");
		return -EPERM;
	}
	vm = vm_arg(d, req, reply_out);
	if (!vm)
		return -ENOENT;
	fault = json_string_value(json_object_get(json_object_get(req, "args"),
						  "fault"));
	if (!fault || (vm->role == RDB_ROLE_PRIMARY ? rdb_primary_inject(vm, fault) :
		       rdb_backup_inject(vm, fault)) < 0) {
		*reply_out = json_string("unknown fault (known: stop-in-pause, "
					 "stop-in-disk-pause, stop-in-initial-state, "
					 "stop-late-in-initial-state and "
					 "slow-checkpoint on a primary, "
					 "restore-fail, restore-fail-late, "
					 "handover-cut, "
					 "slow-replica, replica-eio and "
					 "kill-in-apply (a VM with a disk) "
					 "on a backup)");
		return -EINVAL;
	}
	return 0;
}

static int ctl_capture(void *opaque, json_t *req, json_t **reply_out)
{
	struct rdb_daemon *d = opaque;
	json_t *args = json_object_get(req, "args");
	const char *path = json_string_value(json_object_get(args, "path"));
	json_int_t epochs = json_integer_value(json_object_get(args, "epochs"));
	struct rdb_vm *vm = vm_arg(d, req, reply_out);
	char err[300] = "";
	int rc;

	if (!vm)
		return -ENOENT;
	if (!path || epochs < 1 || epochs > 1000000) {
		*reply_out = json_string("capture wants a path and 1..1000000 epochs");
		return -EINVAL;
	}
	rc = rdb_primary_capture(vm, path, (uint64_t)epochs, err, sizeof(err));
	if (rc < 0) {
		*reply_out = json_string(err[0] ? err : strerror(-rc));
		return rc;
	}
	return 0;
}

/* epochs NAME [count]: the primary's last checkpoints, one per column
 * entry (rdb_vm_epochs_json); a backup records none. */
static int ctl_epochs(void *opaque, json_t *req, json_t **reply_out)
{
	struct rdb_vm *vm = vm_arg(opaque, req, reply_out);
	json_t *count = json_object_get(json_object_get(req, "args"), "count");
	json_int_t n = count ? json_integer_value(count) : 400;

	if (!vm)
		return -ENOENT;
	if (vm->role != RDB_ROLE_PRIMARY) {
		*reply_out = json_sprintf("%s is backed up here: its checkpoints "
					  "are recorded on the primary", vm->name);
		return -EINVAL;
	}
	if (n < 1 || n > RDB_PAUSE_RING) {
		*reply_out = json_sprintf("count: want 1..%d", RDB_PAUSE_RING);
		return -EINVAL;
	}
	*reply_out = rdb_vm_epochs_json(vm, (unsigned)n);
	return *reply_out ? 0 : -ENOMEM;
}

/* What remusdbctl needs to know of this daemon's configuration (enroll:
 * the sockets it makes for a libvirt domain are in run_dir, and the
 * domain's emulator is the QEMU this host restores VMs with). */
static int ctl_info(void *opaque, json_t *req, json_t **reply_out)
{
	struct rdb_daemon *d = opaque;

	(void)req;
	*reply_out = json_pack("{s:s, s:s, s:s}", "run_dir", d->cfg.run_dir,
			       "state_dir", d->cfg.state_dir,
			       "qemu_binary", d->cfg.qemu_binary);
	return *reply_out ? 0 : -ENOMEM;
}

/* history NAME [count]: the VM's state changes on this host, oldest
 * first (history.h); kept for a VM this daemon no longer knows too */
static int ctl_history(void *opaque, json_t *req, json_t **reply_out)
{
	struct rdb_daemon *d = opaque;
	json_t *args = json_object_get(req, "args");
	const char *name = json_string_value(json_object_get(args, "name"));
	json_int_t count = json_integer_value(json_object_get(args, "count"));
	json_t *list;
	char err[400] = "";
	size_t bad = 0;
	int rc;

	if (!name || count < 0) {
		*reply_out = json_string("history wants a VM name (and a count >= 0)");
		return -EINVAL;
	}
	rc = rdb_history_read(d->cfg.state_dir, name, (size_t)count, &list,
			      &bad, err, sizeof(err));
	if (rc < 0) {
		*reply_out = json_string(err[0] ? err : strerror(-rc));
		return rc;
	}
	*reply_out = json_pack("{s:o, s:I}", "changes", list, "unreadable_lines",
			       (json_int_t)bad);
	return *reply_out ? 0 : -ENOMEM;
}

static const struct rdb_ctl_handler handlers[] = {
	{ "capture", ctl_capture },
	{ "history", ctl_history },
	{ "epochs", ctl_epochs },
	{ "info", ctl_info },
	{ "status", ctl_status },
	{ "protect", ctl_protect },
	{ "reprotect", ctl_reprotect },
	{ "attach", ctl_attach },
	{ "unprotect", ctl_unprotect },
	{ "detach", ctl_detach },
	{ "failover", ctl_failover },
	{ "migrate", ctl_migrate },
	{ "inject", ctl_inject },
};

/* ---- re-adoption at start (vmdef.h) ---- */

/* A QEMU answers on QMP socket path: the VM runs here. */
static bool qmp_answers(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, rc;

	if (!path || strlen(path) >= sizeof(sa.sun_path))
		return false;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	return rc == 0;
}

/*
 * A VM a failover restored here: its QEMU and the replicas' disk servers
 * outlived the daemon before this one; its network did not (the daemon
 * relays it).  The old servers are stopped (those recorded, if still the
 * same processes: QEMU holds the guest's disk requests meanwhile, up to
 * its reconnect-delay) and the VM attached as this host's, each disk's
 * written map recording on.
 */
static int readopt_restored(struct rdb_daemon *d, const struct rdb_vmdef *def,
			    struct rdb_vm_config *cfg, char *err, size_t errlen)
{
	char qmp[300];
	size_t i;
	json_t *v;
	int rc;

	if ((cfg->hypervisor && strcmp(cfg->hypervisor, "qemu")) ||
	    (cfg->libvirt_restore && cfg->libvirt_restore[0])) {
		snprintf(err, errlen, "a VM restored %s is not re-adopted yet "
			 "(only one this daemon's QEMU runs); its definition is "
			 "kept", cfg->libvirt_restore && cfg->libvirt_restore[0] ?
			 "into libvirt" : "as a Xen domain");
		return -EOPNOTSUPP;
	}
	snprintf(qmp, sizeof(qmp), "%s/%s.qmp", d->cfg.run_dir, def->name);
	if (!qmp_answers(qmp)) {
		snprintf(err, errlen, "no QEMU answers on %s: the restored VM "
			 "does not run any more; its definition is removed", qmp);
		rdb_vmdef_forget(d->cfg.state_dir, def->name);
		return -ENOENT;
	}
	json_array_foreach(json_object_get(def->restored, "servers"), i, v) {
		json_int_t pid = json_integer_value(json_object_get(v, "pid"));
		json_int_t start = json_integer_value(json_object_get(v, "start"));
		struct rdb_hv_proc pr;

		if (pid <= 0 || start <= 0 ||
		    rdb_hv_proc_start((pid_t)pid) != (uint64_t)start)
			continue;	/* gone (or another process now) */
		if (rdb_hv_adopt((pid_t)pid, &pr) < 0)
			continue;
		LOGVM(INFO, def->name, "stopping the restored guest's disk "
		      "server (pid %d) of the daemon before this one",
		      (int)pid);
		rdb_hv_kill(&pr, rdb_now_ns() + 3 * RDB_NS_PER_S);
	}
	json_array_foreach(json_object_get(def->restored, "disks"), i, v) {
		rc = rdb_disk_image_free(json_string_value(v), 3 * RDB_NS_PER_S,
					 err, errlen);
		if (rc < 0)
			return rc;
	}
	LOGVM(INFO, def->name, "re-adopting the VM restored here (%s, epoch "
	      "%lld of protection %016llx): attached as this host's, its "
	      "output held until the witness says this host runs it; "
	      "`remusdbctl protect %s peer=HOST` protects it", def->saved,
	      (long long)json_integer_value(json_object_get(def->restored,
							     "epoch")),
	      (unsigned long long)json_integer_value(json_object_get(
		      def->restored, "generation")), def->name);
	return rdb_primary_readopt_restored(d, cfg, def->restored, err, errlen);
}

static void readopt_one(void *opaque, const struct rdb_vmdef *def)
{
	struct rdb_daemon *d = opaque;
	const char *intent = rdb_vmdef_intent_name(def->intent);
	struct rdb_vm_config cfg;
	char err[512] = "";
	int rc;

	rdb_config_defaults(&rdb_vm_config_table, &cfg);
	rc = rdb_vm_config_from_json(def->config, &cfg, err, sizeof(err));
	if (rc < 0) {
		LOGVM(ERROR, def->name, "not re-adopted: its recorded config "
		      "(%s, %s) is refused: %s", intent, def->saved, err);
		d->readopt_failed++;
		goto out;
	}
	if (def->intent == RDB_VMDEF_RESTORED) {
		rc = readopt_restored(d, def, &cfg, err, sizeof(err));
		if (rc < 0) {
			LOGVM(ERROR, def->name, "not re-adopted (restored, %s): %s",
			      def->saved, err[0] ? err : strerror(-rc));
			d->readopt_failed++;
		} else {
			d->readopted++;
		}
		goto out;
	}
	/* Protected, its QEMU gone (the host restarted, the VM shut down or
	 * handed over): nothing here to protect, and the VM may run on the
	 * other host now; the operator's next protect or attach decides.
	 * An attached VM is served before its QEMU starts, as attach does. */
	if (def->intent == RDB_VMDEF_PROTECTED &&
	    (!cfg.hypervisor || !strcmp(cfg.hypervisor, "qemu")) &&
	    !qmp_answers(cfg.qmp)) {
		LOGVM(WARN, def->name, "not re-adopted: recorded as protected "
		      "(%s), but no QEMU answers on %s; its definition is kept "
		      "for `remusdbctl protect %s`", def->saved,
		      cfg.qmp ? cfg.qmp : "(no qmp)", def->name);
		d->readopt_failed++;
		goto out;
	}
	/* the disk servers of the daemon before this one end with it: one
	 * still on its way out is waited for (disksrv.h), a few seconds */
	for (unsigned k = 0; k < rdb_vm_config_ndisks(&cfg); k++) {
		rc = rdb_disk_image_free(rdb_vm_config_disk_image(&cfg, k),
					 3 * RDB_NS_PER_S, err, sizeof(err));
		if (rc < 0) {
			LOGVM(ERROR, def->name, "not re-adopted (%s, %s): %s",
			      intent, def->saved, err);
			d->readopt_failed++;
			goto out;
		}
	}
	LOGVM(INFO, def->name, "re-adopting the VM as recorded (%s, %s)%s",
	      intent, def->saved, def->intent == RDB_VMDEF_PROTECTED ?
	      ": attached now, protected once the witness says this host "
	      "runs it" : "");
	rc = rdb_primary_readopt(d, &cfg, def->intent == RDB_VMDEF_PROTECTED,
				 err, sizeof(err));
	if (rc < 0) {
		LOGVM(ERROR, def->name, "re-adopting it (%s): %s", intent,
		      err[0] ? err : strerror(-rc));
		d->readopt_failed++;
		goto out;
	}
	d->readopted++;
out:
	rdb_config_dispose(&rdb_vm_config_table, &cfg);
}

static void readopt_bad(void *opaque, const char *path, const char *why)
{
	struct rdb_daemon *d = opaque;

	LOG(ERROR, "VM definition %s not read (%s): left as it is, that VM "
	    "is not re-adopted", path, why);
	d->readopt_failed++;
}

/* Every VM this host was told to attach or protect before it stopped. */
static void readopt(struct rdb_daemon *d)
{
	int n = rdb_vmdef_each(d->cfg.state_dir, readopt_one, readopt_bad, d);

	if (n < 0)
		LOG(ERROR, "cannot list %s for VM definitions: %s",
		    d->cfg.state_dir, strerror(-n));
	else if (d->readopted || d->readopt_failed)
		LOG(INFO, "re-adopted %u VM(s) from their definitions in %s%s",
		    d->readopted, d->cfg.state_dir, d->readopt_failed ?
		    "; some could not be (above)" : "");
}

/* ---- housekeeping ---- */

/* The metrics file, Prometheus text format (prom.h): collected into a
 * registry so each family's samples stay together across VMs, printed to
 * memory here and written by the publisher's thread (filepub.h: a
 * temporary file renamed over the old one, off this loop). */
static void write_metrics(struct rdb_daemon *d)
{
	static const char stalls_help[] =
		"Times the host did not run a process long enough for the "
		"watchdog to notice, and the watchdog did not trip: it did "
		"not run itself, or remusdbd was runnable and not run.";
	static int last_err;
	struct rdb_prom p;
	unsigned nvm[2] = { 0, 0 };
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	if (!d->metrics_pub)
		return;
	/* the write handed over a second ago: say once per kind of failure */
	rc = rdb_filepub_result(d->metrics_pub);
	if (rc < 0 && rc != last_err)
		LOG(WARN, "cannot write the metrics file %s: %s",
		    d->cfg.metrics_file, strerror(-rc));
	else if (rc == 0 && last_err)
		LOG(INFO, "the metrics file %s is written again", d->cfg.metrics_file);
	if (rc <= 0)
		last_err = rc;
	rdb_prom_init(&p);
	for (struct rdb_vm *vm = d->vms; vm; vm = vm->next) {
		nvm[vm->role == RDB_ROLE_PRIMARY]++;
		rdb_vm_metrics(vm, &p);
		if (vm->role == RDB_ROLE_PRIMARY)
			rdb_primary_metrics(vm, &p);
		else
			rdb_backup_metrics(vm, &p);
	}
	rdb_prom_set_base(&p, NULL);
	rdb_prom_add(&p, "remusdb_vms", RDB_PROM_GAUGE,
		     "VMs this daemon serves, by role.", nvm[1], "role", "primary", NULL);
	rdb_prom_add(&p, "remusdb_vms", RDB_PROM_GAUGE,
		     "VMs this daemon serves, by role.", nvm[0], "role", "backup", NULL);
	rdb_prom_add(&p, "remusdb_readopted_vms", RDB_PROM_GAUGE,
		     "VMs re-adopted at this daemon's start from their recorded "
		     "definitions, and those that could not be.",
		     d->readopted, "result", "adopted", NULL);
	rdb_prom_add(&p, "remusdb_readopted_vms", RDB_PROM_GAUGE,
		     "VMs re-adopted at this daemon's start from their recorded "
		     "definitions, and those that could not be.",
		     d->readopt_failed, "result", "not_adopted", NULL);
	rdb_prom_add(&p, "remusdb_watchdog_host_stalls_total", RDB_PROM_COUNTER,
		     stalls_help, (double)rdb_watchdog_oversleeps(d->wd),
		     "process", "watchdog", NULL);
	rdb_prom_add(&p, "remusdb_watchdog_host_stalls_total", RDB_PROM_COUNTER,
		     stalls_help, (double)rdb_watchdog_starves(d->wd, NULL),
		     "process", "remusdbd", NULL);
	rdb_prom_add(&p, "remusdb_peer_silence_host_stalls_total", RDB_PROM_COUNTER,
		     "A peer silent past failover_timeout_ms while this host did "
		     "not run remusdbd for much of that time, not judged silence "
		     "(the two hosts may share a CPU and stall together).",
		     (double)d->peer_stall_waits, NULL);
	rdb_prom_add(&p, "remusdb_start_time_seconds", RDB_PROM_GAUGE,
		     "When remusdbd started, seconds since the epoch.",
		     (double)d->started_unix, NULL);
	f = open_memstream(&text, &len);
	rc = f ? rdb_prom_write(&p, f) : -ENOMEM;
	if (f && fclose(f) != 0 && rc == 0)
		rc = -ENOMEM;
	rdb_prom_dispose(&p);
	if (rc < 0) {
		free(text);
		if (rc != last_err)
			LOG(WARN, "cannot make the metrics: %s", strerror(-rc));
		last_err = rc;
		return;
	}
	rdb_filepub_submit(d->metrics_pub, text, len);
}

static uint64_t on_housekeeping(struct rdb_evloop *loop, uint64_t id, void *opaque)
{
	struct rdb_daemon *d = opaque;
	static uint64_t last_metrics;
	uint64_t now = rdb_now_ns();

	rdb_watchdog_beat(d->wd);
	/* re-adopted VMs waiting for the witness's word to be protected,
	 * VMs to protect again after their backup's daemon went away (a
	 * tick may protect, which never removes a VM from the list) */
	for (struct rdb_vm *vm = d->vms; vm; vm = vm->next)
		if (vm->role == RDB_ROLE_PRIMARY) {
			if (vm->readopted)
				rdb_primary_readopt_tick(vm);
			rdb_primary_auto_tick(vm);
		}
	{
		/* the watchdog process did not run for a while (watchdog.h) */
		static uint64_t seen;
		uint64_t n = rdb_watchdog_oversleeps(d->wd);

		if (n > seen && d->wd)
			LOG(WARN, "watchdog: its poll slept up to %.0f ms (%llu "
			    "time(s)): this host did not run it, nor perhaps "
			    "remusdbd; it waited one more poll before judging "
			    "remusdbd silent",
			    (double)atomic_load(&d->wd->shm->oversleep_max_ns) /
			    RDB_NS_PER_MS, (unsigned long long)n);
		seen = n;
	}
	{
		/* the host did not run remusdbd: not judged a stall */
		static uint64_t seen;
		uint64_t max, n = rdb_watchdog_starves(d->wd, &max);

		if (n > seen)
			LOG(WARN, "watchdog: the host did not run remusdbd for up "
			    "to %.0f ms while it was runnable (%llu time(s): "
			    "steal, or a busy CPU); the watchdog did not judge "
			    "that a stall",
			    (double)max / RDB_NS_PER_MS, (unsigned long long)n);
		seen = n;
	}
	/* systemd's watchdog (WatchdogSec): pinged from this loop, at half
	 * its period, so a stalled loop gets the service restarted */
	if (d->sd_watchdog_ns && now - d->sd_last_ping_ns >= d->sd_watchdog_ns / 2) {
		rdb_sd_notify("WATCHDOG=1");
		d->sd_last_ping_ns = now;
	}
	for (struct rdb_vm *vm = d->vms; vm; vm = vm->next)
		if (vm->role == RDB_ROLE_BACKUP)
			rdb_backup_housekeeping(vm);
	if (now - last_metrics >= RDB_NS_PER_S) {
		write_metrics(d);
		last_metrics = now;
	}
	return HOUSEKEEPING_NS;
}

static void before_sleep(struct rdb_evloop *loop, void *opaque)
{
	struct rdb_daemon *d = opaque;

	rdb_watchdog_beat(d->wd);
}

static void on_signal(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct signalfd_siginfo si;

	if (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		LOG(INFO, "signal %u: shutting down", si.ssi_signo);
		rdb_evloop_stop(loop);
	}
}

/*
 * Where remusdbd and the QEMU it starts run (`cpus`, `guest_cpus`).  A
 * guest's QEMU that shares a CPU with the daemon lengthens every pause:
 * the daemon must answer inside it (docs/performance.md).
 */
static int placement_setup(struct rdb_daemon *d)
{
	cpu_set_t started;
	char a[256], b[256];

	if (sched_getaffinity(0, sizeof(started), &started) < 0) {
		startup_error("reading its CPU affinity: %s",
			strerror(errno));
		return -1;
	}
	d->cpus = d->guest_cpus = started;
	if (d->cfg.guest_cpus[0]) {
		rdb_cpulist_parse(d->cfg.guest_cpus, &d->guest_cpus);
		CPU_AND(&d->guest_cpus, &d->guest_cpus, &started);
		if (CPU_COUNT(&d->guest_cpus) == 0) {
			startup_error("guest_cpus = %s: none of "
				"them is a CPU it may use (%s)",
				d->cfg.guest_cpus,
				rdb_cpulist_format(&started, a, sizeof(a)));
			return -1;
		}
	}
	if (d->cfg.cpus[0]) {
		rdb_cpulist_parse(d->cfg.cpus, &d->cpus);
		if (sched_setaffinity(0, sizeof(d->cpus), &d->cpus) < 0) {
			startup_error("cpus = %s: %s (CPUs it may "
				"use: %s)", d->cfg.cpus, strerror(errno),
				rdb_cpulist_format(&started, a, sizeof(a)));
			return -1;
		}
		/* what the kernel granted, for the log and the checks */
		sched_getaffinity(0, sizeof(d->cpus), &d->cpus);
	}
	LOG(INFO, "runs on CPUs %s; the QEMU it starts on failover runs on CPUs %s",
	    rdb_cpulist_format(&d->cpus, a, sizeof(a)),
	    rdb_cpulist_format(&d->guest_cpus, b, sizeof(b)));
	return 0;
}

static int make_dir(const char *path)
{
	if (mkdir(path, 0700) < 0 && errno != EEXIST) {
		LOG(ERROR, "mkdir %s: %s", path, strerror(errno));
		return -errno;
	}
	return 0;
}

/* qemu_group: a group name or number, resolved once (0: none). */
static int qemu_group_setup(struct rdb_daemon *d)
{
	const char *g = d->cfg.qemu_group;
	struct group *gr;
	char *end;
	unsigned long n;

	d->qemu_gid = 0;
	if (!g || !g[0])
		return 0;
	errno = 0;
	n = strtoul(g, &end, 10);
	if (!*end && !errno && n > 0 && n < (gid_t)-1) {
		d->qemu_gid = (gid_t)n;
	} else {
		errno = 0;
		gr = getgrnam(g);
		if (!gr) {
			startup_error("qemu_group = %s: %s", g,
				errno ? strerror(errno) : "no such group on this "
				"host (a name from /etc/group, or a number)");
			return -EINVAL;
		}
		if (gr->gr_gid == 0) {
			startup_error("qemu_group = %s is root's group: "
				"leave qemu_group empty for QEMU as root", g);
			return -EINVAL;
		}
		d->qemu_gid = gr->gr_gid;
	}
	return 0;
}

/* run_dir: 0700 root, or 0770 with qemu_group (QEMU makes its sockets
 * there); set every start, whoever made it (systemd's RuntimeDirectory
 * makes it 0700). */
static int run_dir_setup(struct rdb_daemon *d)
{
	const char *dir = d->cfg.run_dir;

	if (make_dir(dir) < 0)
		return -1;
	if (!d->qemu_gid)
		return 0;
	if (chown(dir, (uid_t)-1, d->qemu_gid) < 0 || chmod(dir, 0770) < 0) {
		LOG(ERROR, "run_dir %s: cannot give it to qemu_group = %s: %s",
		    dir, d->cfg.qemu_group, strerror(errno));
		return -1;
	}
	LOG(INFO, "run_dir %s is 0770 with group %s (gid %u): QEMU runs as "
	    "that group, not root", dir, d->cfg.qemu_group, (unsigned)d->qemu_gid);
	return 0;
}

/* This host's name at the witness: node_name, else the hostname. */
static int node_setup(struct rdb_daemon *d)
{
	if (d->cfg.node_name && d->cfg.node_name[0]) {
		snprintf(d->node, sizeof(d->node), "%s", d->cfg.node_name);
		return 0;
	}
	if (gethostname(d->node, sizeof(d->node)) < 0 || !rdb_witness_node_valid(d->node)) {
		LOG(ERROR, "the hostname is not a usable node name: set node_name "
		    "in the config ([A-Za-z0-9_.-], 1-64 characters)");
		return -EINVAL;
	}
	return 0;
}

static int witness_setup(struct rdb_daemon *d)
{
	int rc;

	if (!d->cfg.witness || !d->cfg.witness[0])
		return 0;
	rc = rdb_witness_create(d->loop, d->cfg.witness, d->cfg.witness_prefix,
				d->cfg.witness_timeout_ms, &d->witness);
	if (rc < 0)
		LOG(ERROR, "witness %s: %s", d->cfg.witness, strerror(-rc));
	return rc;
}

int main(int argc, char **argv)
{
	struct rdb_daemon d = { .repl_listen_fd = -1 };
	struct rdb_watchdog wd = { .shm = NULL, .pid = -1, .fd_sock = -1 };
	const char *config_path = DEFAULT_CONFIG;
	bool config_given = false;
	char err[512];
	enum rdb_log_level lvl;
	sigset_t mask;
	int opt, sfd = -1, rc = 1;

	/* the disk servers are this program too (disk.h) */
	if (argc > 1 && strcmp(argv[1], "--disk-server") == 0)
		return rdb_disksrv_main(argc - 1, argv + 1);
	rdb_log_setup("remusdbd", RDB_LOG_INFO);
	/* --help as operators type it (getopt knows only -h) */
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		}
	while ((opt = getopt(argc, argv, "c:o:h")) != -1) {
		if (opt == 'c') {
			config_path = optarg;
			config_given = true;
		} else if (opt != 'o') {
			usage(opt == 'h' ? stdout : stderr);
			return opt == 'h' ? 0 : 2;
		}
	}
	rdb_config_defaults(&rdb_daemon_config_table, &d.cfg);
	if (config_given || access(config_path, F_OK) == 0) {
		if (rdb_config_load_file(&rdb_daemon_config_table, config_path,
					 &d.cfg, err, sizeof(err)) < 0) {
			startup_error("%s", err);
			rdb_config_dispose(&rdb_daemon_config_table, &d.cfg);
			return 2;
		}
	}
	/* -o overrides the file, whatever their order on the command line. */
	optind = 1;
	while ((opt = getopt(argc, argv, "c:o:h")) != -1) {
		char *eq = opt == 'o' ? strchr(optarg, '=') : NULL;

		if (opt != 'o')
			continue;
		if (!eq) {
			startup_error("-o wants KEY=VALUE, got %s", optarg);
			rdb_config_dispose(&rdb_daemon_config_table, &d.cfg);
			return 2;
		}
		*eq = 0;
		if (rdb_config_set(&rdb_daemon_config_table, &d.cfg, optarg,
				   eq + 1, err, sizeof(err)) < 0) {
			startup_error("%s", err);
			rdb_config_dispose(&rdb_daemon_config_table, &d.cfg);
			return 2;
		}
	}
	if (rdb_log_level_parse(d.cfg.log_level, &lvl) == 0)
		rdb_log_setup("remusdbd", lvl);
	if (rdb_linksec_create(d.cfg.link_security, d.cfg.link_psk_file,
			       &d.linksec, err, sizeof(err)) < 0) {
		startup_error("replication link: %s", err);
		rdb_config_dispose(&rdb_daemon_config_table, &d.cfg);
		return 2;
	}
	/* where the processes it starts go (sdunit.h), before the first */
	if (rdb_units_setup(d.cfg.process_units, err, sizeof(err)) < 0) {
		startup_error("%s", err);
		rdb_linksec_destroy(d.linksec);
		rdb_config_dispose(&rdb_daemon_config_table, &d.cfg);
		return 2;
	}
	LOG(INFO, "the processes it leaves running: %s", rdb_units_why());
	/* Before any thread or child: they all inherit it. */
	if (qemu_group_setup(&d) < 0 || placement_setup(&d) < 0) {
		rdb_linksec_destroy(d.linksec);
		rdb_config_dispose(&rdb_daemon_config_table, &d.cfg);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	d.started_ns = rdb_now_ns();
	d.started_unix = time(NULL);

	if (run_dir_setup(&d) < 0 || make_dir(d.cfg.state_dir) < 0)
		goto out;
	if (rdb_evloop_create(&d.loop) < 0)
		goto out;
	/* libcurl's global state, before any thread (the witness's) */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		LOG(ERROR, "cannot initialise libcurl");
		goto out;
	}
	/* Fork before any other fd or thread exists: the child holds nothing. */
	if (rdb_watchdog_start(&wd, WATCHDOG_POLL_NS) < 0) {
		LOG(ERROR, "cannot start the watchdog: %s", strerror(errno));
		goto out;
	}
	d.wd = &wd;
	{
		/* a slow callback's warning says what the thread waited for */
		struct rdb_evloop_probe probe;

		rdb_watchdog_probe(&wd, &probe);
		rdb_evloop_set_probe(d.loop, &probe);
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0 || rdb_evloop_add_fd(d.loop, sfd, RDB_EV_READ, on_signal, &d) < 0)
		goto out;
	if (rdb_ctl_listen(d.cfg.control_socket, d.loop, handlers,
			   sizeof(handlers) / sizeof(handlers[0]), &d, &d.ctl) < 0) {
		LOG(ERROR, "cannot open the control socket %s", d.cfg.control_socket);
		goto out;
	}
	if (node_setup(&d) < 0 || witness_setup(&d) < 0)
		goto out;
	if (rdb_backup_listen(&d) < 0)
		goto out;
	rdb_evloop_set_before_sleep(d.loop, before_sleep, &d);
	if (d.cfg.metrics_file && d.cfg.metrics_file[0] &&
	    (rc = rdb_filepub_start(&d.metrics_pub, d.cfg.metrics_file)) < 0) {
		LOG(ERROR, "cannot start the metrics file's writer: %s",
		    strerror(-rc));
		rc = 1;
		goto out;
	}
	if (rdb_evloop_add_timer(d.loop, HOUSEKEEPING_NS, on_housekeeping, &d,
				 &d.metrics_timer) < 0)
		goto out;
	LOG(INFO, "remusdbd ready: node %s, control %s, replication %s (%s), "
	    "state %s, witness %s", d.node, d.cfg.control_socket, d.cfg.listen,
	    rdb_linksec_describe(d.linksec), d.cfg.state_dir,
	    d.witness ? rdb_witness_endpoints(d.witness) : "none");
	if (!strcmp(d.cfg.link_security, "insecure"))
		LOG(WARN, "the replication link is plaintext and unauthenticated: "
		    "whoever reaches %s can overwrite the VMs backed up here",
		    d.cfg.listen);
	readopt(&d);
	d.sd_watchdog_ns = rdb_sd_watchdog_ns();
	if (rdb_sd_notify("READY=1\nSTATUS=serving; see remusdbctl status") < 0)
		LOG(WARN, "could not tell systemd this daemon is ready "
		    "($NOTIFY_SOCKET %s)", getenv("NOTIFY_SOCKET"));
	rc = rdb_evloop_run(d.loop) < 0;
	rdb_sd_notify("STOPPING=1");
out:
	while (d.vms) {
		struct rdb_vm *vm = d.vms;

		vm->teardown(vm);
		rdb_vm_free(vm);
	}
	if (d.loop)
		rdb_backup_stop_listening(&d);
	if (d.ctl)
		rdb_ctl_close(d.ctl);
	if (sfd >= 0)
		close(sfd);
	rdb_filepub_stop(d.metrics_pub);
	rdb_witness_destroy(d.witness);
	curl_global_cleanup();
	if (d.loop)
		rdb_evloop_set_probe(d.loop, NULL);
	rdb_watchdog_stop(&wd);
	rdb_evloop_destroy(d.loop);
	rdb_linksec_destroy(d.linksec);
	rdb_config_dispose(&rdb_daemon_config_table, &d.cfg);
	LOG(INFO, "remusdbd stopped");
	return rc;
}

// SPDX-License-Identifier: GPL-2.0-only
/*
 * remusdbctl as an operator or a health check runs it: the built binary
 * (REMUSDBCTL, else the one beside this test's directory: build/remusdbctl
 * for build/tests/test_remusdbctl), run against a stand-in daemon, the
 * real control socket server (ctl.c) pumped by the test, whose status
 * answers the VMs the test gives it.  Asserted: status's exit code says
 * whether every VM listed is protected; an unknown option is a usage
 * error that names it and sends nothing; the socket comes from --socket,
 * else from control_socket in the config file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "ctl.h"
#include "evloop.h"

struct fix {
	struct rdb_evloop *loop;
	struct rdb_ctl *ctl;
	char dir[64], sock[96];
	const char *vms;	/* the status handler's VMs, a JSON array */
	int calls;		/* requests the stand-in daemon answered */
	json_t *last_args;	/* the last request's args */
	char out[65536], err[8192];
};

static char ctl_bin[PATH_MAX];

/* The daemon's status, over f->vms: one VM if the request names it (none:
 * refused, as main.c's ctl_status refuses), else all of them. */
static int h_status(void *opaque, json_t *req, json_t **reply)
{
	struct fix *f = opaque;
	json_t *args = json_object_get(req, "args");
	const char *only = json_string_value(json_object_get(args, "name"));
	json_t *all = json_loads(f->vms, 0, NULL), *list = json_array(), *v;
	size_t i;

	f->calls++;
	json_decref(f->last_args);
	f->last_args = json_incref(args);
	assert_non_null(all);
	json_array_foreach(all, i, v)
		if (!only || !strcmp(only, json_string_value(json_object_get(v, "name"))))
			json_array_append(list, v);
	json_decref(all);
	if (only && json_array_size(list) == 0) {
		json_decref(list);
		*reply = json_sprintf("no VM named %s here", only);
		return -ENOENT;
	}
	*reply = json_pack("{s:o}", "vms", list);
	return 0;
}

static int h_failover(void *opaque, json_t *req, json_t **reply)
{
	struct fix *f = opaque;

	f->calls++;
	json_decref(f->last_args);
	f->last_args = json_incref(json_object_get(req, "args"));
	return 0;
}

/* protect: taken (the VM's state is then f->vms') */
static int h_protect(void *opaque, json_t *req, json_t **reply)
{
	struct fix *f = opaque;

	f->calls++;
	json_decref(f->last_args);
	f->last_args = json_incref(json_object_get(req, "args"));
	*reply = json_pack("{s:s}", "state", "protecting");
	return 0;
}

/* info: the daemon's run_dir (the fixture's directory) */
static int h_info(void *opaque, json_t *req, json_t **reply)
{
	struct fix *f = opaque;

	(void)req;
	*reply = json_pack("{s:s, s:s}", "run_dir", f->dir, "qemu_binary",
			   "qemu-system-x86_64");
	return 0;
}

static const struct rdb_ctl_handler handlers[] = {
	{ "status", h_status },
	{ "failover", h_failover },
	{ "protect", h_protect },
	{ "info", h_info },
};

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/rdb-test-remusdbctl-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->sock, sizeof(f->sock), "%s/ctl.sock", f->dir);
	f->vms = "[]";
	if (rdb_evloop_create(&f->loop) < 0 ||
	    rdb_ctl_listen(f->sock, f->loop, handlers, 4, f, &f->ctl) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	char cmd[128];

	rdb_ctl_close(f->ctl);
	rdb_evloop_destroy(f->loop);
	json_decref(f->last_args);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		print_message("could not remove %s\n", f->dir);
	free(f);
	return 0;
}

/* Reads what is there on a non-blocking fd into buf (kept NUL-ended). */
static void drain(int fd, char *buf, size_t cap)
{
	size_t have = strlen(buf);
	ssize_t r;

	while (have + 1 < cap && (r = read(fd, buf + have, cap - 1 - have)) > 0)
		have += (size_t)r;
	buf[have] = 0;
}

/*
 * Runs remusdbctl with the arguments (NULL-terminated) while the stand-in
 * daemon serves it; its exit code, its stdout in f->out and stderr in
 * f->err.  Fails the test if it runs 10 s or does not exit by itself.
 */
static int run_ctl(struct fix *f, ...)
{
	char *argv[16] = { ctl_bin };
	uint64_t deadline = rdb_now_ns() + 10 * RDB_NS_PER_S;
	int po[2], pe[2], argc = 1, st;
	va_list ap;
	pid_t pid;

	va_start(ap, f);
	while ((argv[argc] = va_arg(ap, char *)) != NULL)
		assert_true(++argc < 16);
	va_end(ap);
	assert_int_equal(pipe2(po, O_CLOEXEC | O_NONBLOCK), 0);
	assert_int_equal(pipe2(pe, O_CLOEXEC | O_NONBLOCK), 0);
	f->out[0] = f->err[0] = 0;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		execv(ctl_bin, argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	while (waitpid(pid, &st, WNOHANG) == 0) {
		rdb_evloop_run_once(f->loop, 2 * RDB_NS_PER_MS);
		drain(po[0], f->out, sizeof(f->out));
		drain(pe[0], f->err, sizeof(f->err));
		if (rdb_now_ns() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			fail_msg("remusdbctl %s ... still running after 10 s", argv[1]);
		}
	}
	drain(po[0], f->out, sizeof(f->out));
	drain(pe[0], f->err, sizeof(f->err));
	close(po[0]);
	close(pe[0]);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void want_in(const char *what, const char *text, const char *s)
{
	if (!strstr(text, s))
		fail_msg("%s lacks \"%s\": [%s]", what, s, text);
}

static void write_file(struct fix *f, const char *name, const char *text,
		       char *path, size_t len)
{
	FILE *fp;

	snprintf(path, len, "%s/%s", f->dir, name);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	assert_int_equal(fclose(fp), 0);
}

#define VM(name, role, state) \
	"{\"name\":\"" name "\",\"role\":\"" role "\",\"state\":\"" state "\"," \
	"\"committed_epoch\":7,\"state_age_ms\":1500,\"state_reason\":\"test\"}"

static void test_status_exit_code_is_protection(void **state)
{
	static const char *const not_protected[] = {
		"protecting", "degraded", "deciding", "fenced", "failing-over",
		"failed-over", "migrating", "migrated", "unprotected", "failed",
	};
	struct fix *f = *state;
	char vms[512], nosock[128];
	json_t *j;

	/* every VM protected, on either role: 0, the table as ever */
	f->vms = "[" VM("vm1", "primary", "protected") ","
		     VM("vm2", "backup", "protected") "]";
	assert_int_equal(run_ctl(f, "-s", f->sock, "status", NULL), 0);
	want_in("status", f->out, "NAME ");
	want_in("status", f->out, "vm1 ");
	want_in("status", f->out, "vm2 ");
	/* one not protected: 1, the same output */
	f->vms = "[" VM("vm1", "primary", "protected") ","
		     VM("vm2", "backup", "degraded") "]";
	assert_int_equal(run_ctl(f, "-s", f->sock, "status", NULL), 1);
	want_in("status", f->out, "degraded");
	want_in("status", f->out, "vm1 ");
	assert_string_equal(f->err, "");
	assert_int_equal(run_ctl(f, "-s", f->sock, "status", "--json", NULL), 1);
	j = json_loads(f->out, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(json_array_get(
		json_object_get(j, "vms"), 1), "state")), "degraded");
	json_decref(j);
	/* only the VMs listed count: vm1 alone is protected */
	assert_int_equal(run_ctl(f, "-s", f->sock, "status", "vm1", NULL), 0);
	assert_int_equal(run_ctl(f, "-s", f->sock, "status", "vm2", "--json", NULL), 1);
	/* each state but protected is 1 */
	for (size_t i = 0; i < sizeof(not_protected) / sizeof(*not_protected); i++) {
		snprintf(vms, sizeof(vms), "[{\"name\":\"vm1\",\"role\":\"primary\","
			 "\"state\":\"%s\"}]", not_protected[i]);
		f->vms = vms;
		if (run_ctl(f, "-s", f->sock, "status", "--json", NULL) != 1)
			fail_msg("status of a VM %s: not exit 1", not_protected[i]);
	}
	/* no VM at all: nothing unprotected */
	f->vms = "[]";
	assert_int_equal(run_ctl(f, "-s", f->sock, "status", NULL), 0);
	want_in("status", f->out, "NAME ");
	/* 3: nothing known, no such VM here, or no daemon */
	assert_int_equal(run_ctl(f, "-s", f->sock, "status", "ghost", NULL), 3);
	want_in("stderr", f->err, "no VM named ghost here");
	assert_string_equal(f->out, "");
	snprintf(nosock, sizeof(nosock), "%s/nobody.sock", f->dir);
	assert_int_equal(run_ctl(f, "-s", nosock, "status", NULL), 3);
	want_in("stderr", f->err, "cannot reach remusdbd");
}

static void test_unknown_option_is_a_usage_error(void **state)
{
	struct fix *f = *state;

	f->vms = "[" VM("vm1", "primary", "protected") "]";
	assert_int_equal(run_ctl(f, "-s", f->sock, "status", "--jsn", NULL), 2);
	want_in("stderr", f->err, "--jsn");
	assert_int_equal(run_ctl(f, "-s", f->sock, "status", "vm1", "--jsn", NULL), 2);
	want_in("stderr", f->err, "--jsn");
	assert_int_equal(run_ctl(f, "-s", f->sock, "failover", "vm1", "--forcee", NULL), 2);
	want_in("stderr", f->err, "--forcee");
	assert_int_equal(run_ctl(f, "-s", f->sock, "wait", "vm1", "protected",
				 "--timeout", NULL), 2);
	want_in("stderr", f->err, "--timeout");
	assert_int_equal(run_ctl(f, "-s", f->sock, "epochs", "vm1", "--cuont", "3", NULL), 2);
	want_in("stderr", f->err, "--cuont");
	assert_int_equal(run_ctl(f, "-s", f->sock, "inject", "vm1", "--stop", NULL), 2);
	want_in("stderr", f->err, "--stop");
	/* none of them reached the daemon */
	assert_int_equal(f->calls, 0);

	/* the options there are work as ever, before or after the name */
	assert_int_equal(run_ctl(f, "-s", f->sock, "status", "vm1", "--json", NULL), 0);
	assert_string_equal(json_string_value(json_object_get(f->last_args, "name")), "vm1");
	want_in("stdout", f->out, "\"vms\"");
	assert_int_equal(run_ctl(f, "-s", f->sock, "status", "--json", "vm1", NULL), 0);
	want_in("stdout", f->out, "\"vms\"");
	assert_int_equal(run_ctl(f, "-s", f->sock, "failover", "vm1", "--force", NULL), 0);
	assert_true(json_is_true(json_object_get(f->last_args, "force")));
	assert_int_equal(run_ctl(f, "-s", f->sock, "failover", "vm1", NULL), 0);
	assert_null(json_object_get(f->last_args, "force"));
	/* after "--" an operand may start with '-' */
	assert_int_equal(run_ctl(f, "-s", f->sock, "status", "--", "-vm", NULL), 3);
	assert_string_equal(json_string_value(json_object_get(f->last_args, "name")), "-vm");
	assert_int_equal(f->calls, 5);
}

/* protect --wait: the request, then the VM's state until protected or
 * why not; a bad SECONDS or --wait on attach is a usage error */
static void test_protect_wait(void **state)
{
	struct fix *f = *state;
	char conf[160];

	write_file(f, "vm1.conf", "name = vm1\nqmp = /run/vm1.qmp\n"
		   "net_socket = /run/vm1.net\npeer = 10.0.0.2:7788\n"
		   "on_peer_loss = manual\nqemu_arg = -m 256\n", conf,
		   sizeof(conf));
	f->vms = "[" VM("vm1", "primary", "protected") "]";
	assert_int_equal(run_ctl(f, "-s", f->sock, "protect", conf, "--wait=5", NULL), 0);
	want_in("stdout", f->out, "vm1: protecting");
	want_in("stdout", f->out, "vm1: protected\n");
	assert_string_equal(json_string_value(json_object_get(f->last_args, "name")), "vm1");
	/* the protect failed: its reason, exit 1 */
	f->vms = "[{\"name\":\"vm1\",\"role\":\"primary\",\"state\":"
		 "\"unprotected\",\"state_reason\":\"protect failed: backup "
		 "unreachable\"}]";
	assert_int_equal(run_ctl(f, "-s", f->sock, "protect", "--wait", conf, NULL), 1);
	want_in("stderr", f->err, "protect failed: backup unreachable");
	/* still protecting when SECONDS run out: exit 1, says so */
	f->vms = "[" VM("vm1", "primary", "protecting") "]";
	assert_int_equal(run_ctl(f, "-s", f->sock, "protect", conf, "--wait=0.3", NULL), 1);
	want_in("stderr", f->err, "still protecting");
	f->calls = 0;
	assert_int_equal(run_ctl(f, "-s", f->sock, "protect", conf, "--wait=soon", NULL), 2);
	assert_int_equal(run_ctl(f, "-s", f->sock, "attach", conf, "--wait", NULL), 2);
	assert_int_equal(f->calls, 0);
}

/* A VM file without its sockets: remusdbd's run_dir/NAME.* (as enroll
 * names a domain's); one it names stays */
static void test_vm_file_default_sockets(void **state)
{
	struct fix *f = *state;
	char conf[160], want[200];
	json_t *a;

	write_file(f, "vm1.conf", "name = vm1\npeer = 10.0.0.2:7788\n"
		   "disk = /var/lib/images/vm1.raw\n"
		   "net_socket = /elsewhere/vm1.net\n"
		   "on_peer_loss = manual\nqemu_arg = -m 256\n", conf,
		   sizeof(conf));
	assert_int_equal(run_ctl(f, "-s", f->sock, "protect", conf, NULL), 0);
	a = f->last_args;
	snprintf(want, sizeof(want), "%s/vm1.qmp", f->dir);
	assert_string_equal(json_string_value(json_object_get(a, "qmp")), want);
	snprintf(want, sizeof(want), "%s/vm1.wd.qmp", f->dir);
	assert_string_equal(json_string_value(json_object_get(a, "watchdog_qmp")), want);
	snprintf(want, sizeof(want), "%s/vm1.disk", f->dir);
	assert_string_equal(json_string_value(json_object_get(a, "disk_socket")), want);
	assert_string_equal(json_string_value(json_object_get(a, "net_socket")),
			    "/elsewhere/vm1.net");
}

static void test_socket_from_the_config_file(void **state)
{
	struct fix *f = *state;
	char text[256], conf[160], elsewhere[160], bad[160], missing[160];

	f->vms = "[" VM("vm1", "primary", "protected") "]";
	snprintf(text, sizeof(text), "# remusdbd.conf\nheartbeat_ms = 50\n"
		 "control_socket = %s\n", f->sock);
	write_file(f, "remusdbd.conf", text, conf, sizeof(conf));
	assert_int_equal(run_ctl(f, "-c", conf, "status", NULL), 0);
	assert_int_equal(f->calls, 1);
	assert_int_equal(run_ctl(f, "--config", conf, "status", "vm1", NULL), 0);
	assert_int_equal(f->calls, 2);

	/* the file's socket, not the default: the error names it */
	snprintf(text, sizeof(text), "control_socket = %s/elsewhere.sock\n", f->dir);
	write_file(f, "elsewhere.conf", text, elsewhere, sizeof(elsewhere));
	assert_int_equal(run_ctl(f, "-c", elsewhere, "status", NULL), 3);
	want_in("stderr", f->err, "/elsewhere.sock");
	/* --socket wins, and the file is not read */
	assert_int_equal(run_ctl(f, "-c", elsewhere, "-s", f->sock, "status", NULL), 0);
	assert_int_equal(f->calls, 3);

	/* a malformed file: exit 2 naming file and line, nothing sent */
	write_file(f, "bad.conf", "# x\ncontrol_sockett = /x\n", bad, sizeof(bad));
	assert_int_equal(run_ctl(f, "-c", bad, "status", NULL), 2);
	want_in("stderr", f->err, "bad.conf:2");
	want_in("stderr", f->err, "control_sockett");
	assert_int_equal(run_ctl(f, "-s", f->sock, "-c", bad, "status", NULL), 0);
	/* a file named with --config must exist */
	snprintf(missing, sizeof(missing), "%s/missing.conf", f->dir);
	assert_int_equal(run_ctl(f, "-c", missing, "status", NULL), 2);
	want_in("stderr", f->err, "missing.conf");
	assert_int_equal(f->calls, 4);
	/* config --dump-defaults reads none */
	assert_int_equal(run_ctl(f, "-c", bad, "config", "--dump-defaults", NULL), 0);
	want_in("stdout", f->out, "control_socket = ");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_status_exit_code_is_protection, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_option_is_a_usage_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_socket_from_the_config_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_protect_wait, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vm_file_default_sockets, setup, teardown),
	};
	const char *env = getenv("REMUSDBCTL");
	char self[PATH_MAX];
	ssize_t n;

	if (env) {
		snprintf(ctl_bin, sizeof(ctl_bin), "%s", env);
	} else {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n < 0)
			return 1;
		self[n] = 0;
		/* build/tests/test_remusdbctl -> build/remusdbctl */
		snprintf(ctl_bin, sizeof(ctl_bin), "%s/remusdbctl",
			 dirname(dirname(self)));
	}
	if (access(ctl_bin, X_OK) < 0) {
		fprintf(stderr, "test_remusdbctl: no remusdbctl at %s (make builds it "
			"before make unit)\n", ctl_bin);
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}

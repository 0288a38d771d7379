// SPDX-License-Identifier: GPL-2.0-only
/* remusdbctl and libvirt; see virt.h. */
#include "virt.h"
#include "qemuargv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

/* libvirt prints every error to stderr by default; remusdbctl says what
 * failed itself, once. */
static void quiet(void *opaque, virErrorPtr e)
{
	(void)opaque;
	(void)e;
}

static const char *lverr(void)
{
	const char *m = virGetLastErrorMessage();

	return m && m[0] ? m : "unknown libvirt error";
}

static virConnectPtr open_conn(const char *uri, char *err, size_t errlen)
{
	virConnectPtr c;

	virSetErrorFunc(NULL, quiet);
	c = virConnectOpen(uri);
	if (!c)
		snprintf(err, errlen, "cannot connect to libvirt%s%s: %s",
			 uri ? " at " : "", uri ? uri : "", lverr());
	return c;
}

/* Writes TEXT to a new temporary file; its path into path (>= 32). */
static int tmp_file(const char *text, char *path)
{
	const char *dir = getenv("TMPDIR");
	size_t len = strlen(text);
	int fd, rc = 0;

	snprintf(path, 256, "%s/remusdbctl-XXXXXX", dir && dir[0] ? dir : "/tmp");
	fd = mkstemp(path);
	if (fd < 0)
		return -errno;
	for (size_t off = 0; off < len;) {
		ssize_t r = write(fd, text + off, len - off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = -errno;
			break;
		}
		off += (size_t)r;
	}
	close(fd);
	if (rc < 0)
		unlink(path);
	return rc;
}

/* diff -u of the two texts on stdout (the whole new text if diff cannot
 * run). */
static void show_diff(const char *name, const char *old, const char *new,
		      const char *new_label)
{
	char a[256], b[256], la[128], lb[128];
	pid_t pid;
	int st;

	if (tmp_file(old, a) < 0) {
		fputs(new, stdout);
		return;
	}
	if (tmp_file(new, b) < 0) {
		unlink(a);
		fputs(new, stdout);
		return;
	}
	snprintf(la, sizeof(la), "%s (defined now)", name);
	snprintf(lb, sizeof(lb), "%s (%s)", name, new_label);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		execlp("diff", "diff", "-u", "--label", la, "--label", lb, a, b,
		       (char *)NULL);
		_exit(127);
	}
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st) > 1)
		fputs(new, stdout);
	unlink(a);
	unlink(b);
}

/* yes, or y/N on a terminal; no terminal and no yes: refused. */
static bool confirm(const char *question, bool yes)
{
	char line[32];

	if (yes)
		return true;
	if (!isatty(STDIN_FILENO)) {
		fprintf(stderr, "remusdbctl: stdin is not a terminal, so nobody can "
			"answer: review the change above and run again with --yes\n");
		return false;
	}
	printf("%s [y/N] ", question);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return false;
	return !strcmp(line, "y\n") || !strcmp(line, "Y\n") ||
	       !strcmp(line, "yes\n");
}

enum change { ENROLL, UNENROLL };

static int change(const char *uri, const char *name, enum change what,
		  const struct rdb_enroll_params *p, bool yes)
{
	char err[600] = "";
	virConnectPtr conn = open_conn(uri, err, sizeof(err));
	virDomainPtr dom = NULL, def = NULL;
	char *xml = NULL, *old = NULL, *new = NULL;
	int rc, ex = 1;

	if (!conn)
		goto out;
	dom = virDomainLookupByName(conn, name);
	if (!dom) {
		snprintf(err, sizeof(err), "no libvirt domain %s: %s", name, lverr());
		goto out;
	}
	if (virDomainIsPersistent(dom) != 1) {
		snprintf(err, sizeof(err), "domain %s is transient: define it "
			 "first (virsh define)", name);
		goto out;
	}
	/* SECURE: passwords (graphics) are kept when it is defined again */
	xml = virDomainGetXMLDesc(dom, VIR_DOMAIN_XML_INACTIVE | VIR_DOMAIN_XML_SECURE);
	if (!xml) {
		snprintf(err, sizeof(err), "domain %s's XML: %s", name, lverr());
		goto out;
	}
	rc = what == ENROLL ? rdb_domxml_enroll(xml, p, &new, err, sizeof(err)) :
		rdb_domxml_unenroll(xml, &new, err, sizeof(err));
	if (rc == 1) {
		printf("%s: %s; nothing changed\n", name, what == ENROLL ?
		       "already enrolled" : "not enrolled");
		ex = 0;
		goto out;
	}
	if (rc < 0 || rdb_domxml_normalize(xml, &old, err, sizeof(err)) < 0)
		goto out;
	show_diff(name, old, new, what == ENROLL ? "enrolled" : "unenrolled");
	if (!confirm(what == ENROLL ? "Define the domain enrolled?" :
		     "Define the domain as it was before enroll?", yes)) {
		if (!err[0])
			snprintf(err, sizeof(err), "%s: not changed", name);
		goto out;
	}
	def = virDomainDefineXML(conn, new);
	if (!def) {
		snprintf(err, sizeof(err), "defining %s: %s", name, lverr());
		goto out;
	}
	ex = 0;
	printf("%s: %s\n", name, what == ENROLL ?
	       "enrolled (next: remusdbctl attach, virsh start, remusdbctl protect)" :
	       "unenrolled (its own disk and NIC again)");
	if (virDomainIsActive(dom) == 1)
		printf("%s: it runs now as it was; the change applies at its next "
		       "start\n", name);
out:
	if (ex && err[0])
		fprintf(stderr, "remusdbctl: %s\n", err);
	free(xml);
	free(old);
	free(new);
	if (def)
		virDomainFree(def);
	if (dom)
		virDomainFree(dom);
	if (conn)
		virConnectClose(conn);
	return ex;
}

int rdb_virt_enroll(const char *uri, const char *name,
		    const struct rdb_enroll_params *p, bool yes)
{
	return change(uri, name, ENROLL, p, yes);
}

int rdb_virt_unenroll(const char *uri, const char *name, bool yes)
{
	return change(uri, name, UNENROLL, NULL, yes);
}

static int set(struct rdb_vm_config *c, const char *k, const char *v,
	       char *err, size_t errlen)
{
	return rdb_config_set(&rdb_vm_config_table, c, k, v, err, errlen);
}

int rdb_virt_vm_config(const char *uri, const char *name,
		       struct rdb_vm_config *c, char *err, size_t errlen)
{
	struct rdb_strlist argv = { 0 }, args = { 0 };
	struct rdb_domxml_vm vm;
	virConnectPtr conn;
	virDomainPtr dom = NULL;
	char *xml = NULL, *native = NULL, disk_id[128], num[32];
	int rc = -ENOENT;

	err[0] = 0;
	/* A host without libvirt: NAME is not a domain here (err empty). */
	conn = open_conn(uri, err, errlen);
	if (!conn) {
		if (!uri)
			err[0] = 0;
		return uri ? -EHOSTUNREACH : -ENOENT;
	}
	dom = virDomainLookupByName(conn, name);
	if (!dom)
		goto out;
	rc = -EIO;
	/* what runs, if it runs: the persistent definition may be newer */
	xml = virDomainGetXMLDesc(dom, virDomainIsActive(dom) == 1 ? 0 :
				  VIR_DOMAIN_XML_INACTIVE);
	if (!xml) {
		snprintf(err, errlen, "domain %s's XML: %s", name, lverr());
		goto out;
	}
	rc = rdb_domxml_read(xml, &vm, err, errlen);
	if (rc == -ENOENT)
		rc = -EINVAL;	/* there is a domain; it is not enrolled */
	if (rc < 0)
		goto out;
	native = virConnectDomainXMLToNative(conn, "qemu-argv", xml, 0);
	if (!native) {
		snprintf(err, errlen, "domain %s's QEMU command line "
			 "(domxml-to-native): %s", name, lverr());
		rc = -EIO;
		goto out;
	}
	rc = rdb_qemuargv_split(native, &argv, err, errlen);
	if (rc == 0)
		rc = rdb_qemuargv_for_backup_n(&argv, vm.disk[0] ? vm.disk_socket :
					       NULL, vm.disk[0] ? 1 + vm.nmore_disks +
					       (vm.nvram[0] ? 1 : 0) : 0,
					       1 + vm.nmore_nics, &args, disk_id,
					       sizeof(disk_id), err, errlen);
	if (rc < 0) {
		char e2[400];

		snprintf(e2, sizeof(e2), "%s", err);
		snprintf(err, errlen, "domain %s: %s", name, e2);
		goto out;
	}
	rc = set(c, "name", vm.name, err, errlen);
	if (rc == 0)
		rc = set(c, "qmp", vm.qmp, err, errlen);
	if (rc == 0)
		rc = set(c, "watchdog_qmp", vm.watchdog_qmp, err, errlen);
	if (rc == 0)
		rc = set(c, "net_socket", vm.net_socket, err, errlen);
	if (rc == 0)
		rc = set(c, "tap", vm.tap, err, errlen);
	if (rc == 0)
		rc = set(c, "mac", vm.mac, err, errlen);
	if (rc == 0 && vm.disk[0])
		rc = set(c, "disk", vm.disk, err, errlen);
	if (rc == 0 && vm.disk[0])
		rc = set(c, "disk_socket", vm.disk_socket, err, errlen);
	if (rc == 0 && vm.disk[0])
		rc = set(c, "disk_id", disk_id, err, errlen);
	/* the other disks and NICs: served on disk_socket<k>, net_socket<k>
	 * as enroll named them */
	for (unsigned k = 0; rc == 0 && vm.disk[0] && k < vm.nmore_disks; k++)
		rc = set(c, "extra_disk", vm.more_disks[k], err, errlen);
	for (unsigned k = 0; rc == 0 && k < vm.nmore_nics; k++) {
		char spec[64];

		snprintf(spec, sizeof(spec), "tap=%s,mac=%s", vm.more_nics[k].tap,
			 vm.more_nics[k].mac);
		rc = set(c, "extra_nic", spec, err, errlen);
	}
	/* the UEFI variable store: the last disk, on disk_socket<k> */
	if (rc == 0 && vm.disk[0] && vm.nvram[0])
		rc = set(c, "nvram", vm.nvram, err, errlen);
	if (rc == 0 && vm.event_socket[0])
		rc = set(c, "event_port", "true", err, errlen);
	/* ram_mb only when it is whole MiB (0: from the stream) */
	snprintf(num, sizeof(num), "%llu", vm.memory_kib % 1024 ? 0ull :
		 (unsigned long long)(vm.memory_kib / 1024));
	if (rc == 0)
		rc = set(c, "ram_mb", num, err, errlen);
	for (size_t i = 0; rc == 0 && i < args.n; i++)
		rc = set(c, "qemu_arg", args.v[i], err, errlen);
out:
	rdb_qemuargv_free(&argv);
	rdb_qemuargv_free(&args);
	free(xml);
	free(native);
	if (dom)
		virDomainFree(dom);
	virConnectClose(conn);
	return rc;
}

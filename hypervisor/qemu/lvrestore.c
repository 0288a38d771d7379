// SPDX-License-Identifier: GPL-2.0-only
/* Restoring into a libvirt domain through virsh; see lvrestore.h. */
#include "qemu/lvrestore.h"
#include "proc.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ENROLLED_NS "https://remusdb.example/xmlns/vm/1"

/* Appends n bytes; the first failure sticks (*s becomes NULL). */
static void cat(char **s, size_t *len, const char *p, size_t n)
{
	char *ns;

	if (!*s)
		return;
	ns = realloc(*s, *len + n + 1);
	if (!ns) {
		free(*s);
		*s = NULL;
		return;
	}
	memcpy(ns + *len, p, n);
	*len += n;
	ns[*len] = 0;
	*s = ns;
}

static void cats(char **s, size_t *len, const char *p)
{
	cat(s, len, p, strlen(p));
}

/* p as an XML attribute value between single quotes */
static void cat_attr(char **s, size_t *len, const char *p)
{
	for (; *p; p++)
		switch (*p) {
		case '&': cats(s, len, "&amp;"); break;
		case '<': cats(s, len, "&lt;"); break;
		case '>': cats(s, len, "&gt;"); break;
		case '\'': cats(s, len, "&apos;"); break;
		case '"': cats(s, len, "&quot;"); break;
		default: cat(s, len, p, 1);
		}
}

static bool names(const char *xml, const char *pre, const char *path,
		  const char *post)
{
	char buf[600];

	snprintf(buf, sizeof(buf), "%s%s%s", pre, path, post);
	return strstr(xml, buf) != NULL;
}

int rdb_lvrestore_xml(const struct rdb_lvrestore *r, const char *def,
		      char **xml_out, char *err, size_t errlen)
{
	const char *dev = strstr(def, "<devices>");
	const char *end = strstr(def, "</qemu:commandline>");
	char *s = strdup("");
	size_t len = 0;

	*xml_out = NULL;
	if (!strstr(def, ENROLLED_NS) || !end) {
		snprintf(err, errlen, "domain %s is not enrolled on this host "
			 "(remusdbctl enroll %s)", r->name, r->name);
		free(s);
		return -EINVAL;
	}
	if (!names(def, "unix:", r->qmp, ",server=on") ||
	    !names(def, "addr.path=", r->net, ",") ||
	    (r->disk && !names(def, "&quot;path&quot;:&quot;", r->disk, "&quot;"))) {
		snprintf(err, errlen, "domain %s is enrolled for other sockets "
			 "than this host's remusdbd serves (%s, %s%s%s): enroll it "
			 "with this host's run_dir", r->name, r->qmp, r->net,
			 r->disk ? ", " : "", r->disk ? r->disk : "");
		free(s);
		return -EINVAL;
	}
	for (size_t k = 0; k < r->nmore_nets; k++)
		if (!names(def, "addr.path=", r->more_nets[k], ",")) {
			snprintf(err, errlen, "domain %s has no NIC on %s (the VM's "
				 "NIC %zu here): enroll it with one --tap per "
				 "interface and this host's run_dir", r->name,
				 r->more_nets[k], k + 1);
			free(s);
			return -EINVAL;
		}
	for (size_t k = 1; r->disk && k <= r->nmore_disks; k++) {
		char sock[300];

		snprintf(sock, sizeof(sock), "%.280s%zu", r->disk, k);
		if (!names(def, "&quot;path&quot;:&quot;", sock, "&quot;")) {
			snprintf(err, errlen, "domain %s has no disk on %s (the VM's "
				 "disk %zu here): enroll it with this host's run_dir",
				 r->name, sock, k);
			free(s);
			return -EINVAL;
		}
	}
	if (r->event && !names(def, "socket,id=rdbevent,path=", r->event,
			       ",server=on")) {
		snprintf(err, errlen, "domain %s has no failover event port on %s "
			 "(the VM has event_port): enroll it with --event-port and "
			 "this host's run_dir", r->name, r->event);
		free(s);
		return -EINVAL;
	}
	if (strstr(def, "<memoryBacking") || !dev || dev > end) {
		snprintf(err, errlen, "domain %s has a <memoryBacking> of its own: "
			 "its RAM cannot be the committed image", r->name);
		free(s);
		return -ENOTSUP;
	}
	cat(&s, &len, def, (size_t)(dev - def));
	cats(&s, &len, "<memoryBacking><source type='file'/><access mode='shared'/>"
	     "</memoryBacking>\n  ");
	cat(&s, &len, dev, (size_t)(end - dev));
	cats(&s, &len, "  <qemu:arg value='-incoming'/>\n    <qemu:arg value='defer'/>\n"
	     "    <qemu:env name='REMUSDB_RAM_IMAGE' value='");
	cat_attr(&s, &len, r->ram_image);
	cats(&s, &len, "'/>\n  ");
	cats(&s, &len, end);
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*xml_out = s;
	return 0;
}

/*
 * Runs virsh -c URI ARGS... with a deadline (killed at it); its stdout
 * and stderr into *out (caller frees; may stay NULL), also appended to
 * WORK_DIR/virsh.log.  0 when virsh exited 0, -EIO with its output,
 * -ETIMEDOUT.
 */
static int virsh(const struct rdb_lvrestore *r, const char *const *args,
		 uint64_t deadline, char **out)
{
	const char *argv[16] = { "virsh", "-q", "-c", r->uri };
	size_t n = 4;
	char *buf = NULL, logp[600];
	FILE *log;
	int rc;

	for (size_t i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	rc = rdb_hv_run((char *const *)argv, deadline, &buf, NULL);
	snprintf(logp, sizeof(logp), "%s/virsh.log", r->work_dir);
	log = fopen(logp, "a");
	if (log) {
		fprintf(log, "virsh -c %s", r->uri);
		for (size_t i = 4; argv[i]; i++)
			fprintf(log, " %s", argv[i]);
		fprintf(log, ": %s\n%s", rc == 0 ? "ok" : rc == -ETIMEDOUT ?
			"timed out" : "failed", buf ? buf : "");
		fclose(log);
	}
	if (out)
		*out = buf;
	else
		free(buf);
	return rc;
}

/* virsh's message, on one line */
static void say(char *err, size_t errlen, const char *what, int rc,
		const char *out)
{
	char one[300];
	size_t i;

	snprintf(one, sizeof(one), "%s", out ? out : "");
	for (i = 0; one[i]; i++)
		if (one[i] == '\n')
			one[i] = ' ';
	while (i && one[i - 1] == ' ')
		one[--i] = 0;
	snprintf(err, errlen, "virsh %s: %s", what, rc == -ETIMEDOUT ?
		 "timed out" : one[0] ? one : strerror(-rc));
}

int rdb_lvrestore_create(const struct rdb_lvrestore *r, uint64_t deadline_ns,
			 char *err, size_t errlen)
{
	const char *dump[] = { "dumpxml", "--inactive", r->name, NULL };
	char *def = NULL, *xml = NULL, path[600];
	FILE *f;
	int rc;

	rc = virsh(r, dump, deadline_ns, &def);
	if (rc < 0) {
		say(err, errlen, "dumpxml", rc, def);
		free(def);
		return rc;
	}
	rc = rdb_lvrestore_xml(r, def, &xml, err, errlen);
	free(def);
	if (rc < 0)
		return rc;
	snprintf(path, sizeof(path), "%s/libvirt-restore.xml", r->work_dir);
	f = fopen(path, "w");
	if (!f || fputs(xml, f) < 0 || fclose(f) != 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		free(xml);
		return rc;
	}
	free(xml);
	{
		const char *create[] = { "create", path, NULL };
		char *out = NULL;

		rc = virsh(r, create, deadline_ns, &out);
		if (rc < 0)
			say(err, errlen, "create", rc, out);
		free(out);
	}
	return rc;
}

int rdb_lvrestore_destroy(const struct rdb_lvrestore *r, uint64_t deadline_ns)
{
	const char *destroy[] = { "destroy", r->name, NULL };

	return virsh(r, destroy, deadline_ns, NULL);
}

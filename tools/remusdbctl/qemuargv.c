// SPDX-License-Identifier: GPL-2.0-only
/* libvirt's QEMU command line -> the backup's qemu_arg; see qemuargv.h. */
#include "qemuargv.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

void rdb_qemuargv_free(struct rdb_strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static int push(struct rdb_strlist *l, const char *s, size_t len)
{
	char **nv = realloc(l->v, (l->n + 2) * sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	l->v = nv;
	l->v[l->n] = strndup(s, len);
	if (!l->v[l->n])
		return -ENOMEM;
	l->v[++l->n] = NULL;
	return 0;
}

static bool env_word(const char *w)
{
	if (!isalpha((unsigned char)*w) && *w != '_')
		return false;
	while (isalnum((unsigned char)*w) || *w == '_')
		w++;
	return *w == '=';
}

int rdb_qemuargv_split(const char *line, struct rdb_strlist *out, char *err,
		       size_t errlen)
{
	size_t len = strlen(line), n = 0;
	char *w = malloc(len + 1);
	const char *p = line;
	bool binary_seen = false;
	int rc = 0;

	out->v = NULL;
	out->n = 0;
	if (!w)
		return -ENOMEM;
	while (rc == 0) {
		bool any = false;

		while (*p == ' ' || *p == '\t' || *p == '\n' || (*p == '\\' && p[1] == '\n'))
			p += *p == '\\' ? 2 : 1;
		if (!*p)
			break;
		n = 0;
		while (*p && *p != ' ' && *p != '\t' && *p != '\n') {
			any = true;
			if (*p == '\'') {
				const char *q = strchr(p + 1, '\'');

				if (!q) {
					snprintf(err, errlen, "unterminated ' in the "
						 "QEMU command line");
					rc = -EINVAL;
					break;
				}
				memcpy(w + n, p + 1, (size_t)(q - p - 1));
				n += (size_t)(q - p - 1);
				p = q + 1;
			} else if (*p == '"') {
				for (p++; *p && *p != '"'; p++) {
					if (*p == '\\' && p[1])
						p++;
					w[n++] = *p;
				}
				if (*p != '"') {
					snprintf(err, errlen, "unterminated \" in the "
						 "QEMU command line");
					rc = -EINVAL;
					break;
				}
				p++;
			} else if (*p == '\\' && p[1]) {
				w[n++] = p[1];
				p += 2;
			} else {
				w[n++] = *p++;
			}
		}
		if (rc < 0 || !any)
			break;
		w[n] = 0;
		/* VAR=value words before the binary are its environment */
		if (!binary_seen) {
			if (!env_word(w))
				binary_seen = true;
			continue;
		}
		rc = push(out, w, n);
	}
	free(w);
	if (rc == 0 && !binary_seen) {
		snprintf(err, errlen, "no QEMU binary in the command line");
		rc = -EINVAL;
	}
	if (rc < 0)
		rdb_qemuargv_free(out);
	return rc;
}

/* QEMU options libvirt writes that take no value. */
static bool is_flag(const char *o)
{
	static const char *const flags[] = {
		"S", "no-user-config", "nodefaults", "no-shutdown", "no-reboot",
		"nographic", "enable-kvm", "no-hpet", "no-acpi", "daemonize",
		"snapshot", "enable-fips", "no-fd-bootchk", "preconfig",
		"full-screen",
	};

	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (!strcmp(o, flags[i]))
			return true;
	return false;
}

/* An option value's property, JSON ({"id":...}) or key=value,...
 * form; "" when absent.  KEY "" is the key=value form's first word
 * (a -chardev's backend, a -device's driver). */
static void prop(const char *v, const char *key, char *buf, size_t len)
{
	buf[0] = 0;
	if (v[0] == '{') {
		json_t *o = json_loads(v, 0, NULL);
		json_t *x = json_object_get(o, key);

		if (json_is_string(x))
			snprintf(buf, len, "%s", json_string_value(x));
		else if (json_is_integer(x))
			snprintf(buf, len, "%lld", (long long)json_integer_value(x));
		json_decref(o);
		return;
	}
	for (const char *s = v; *s;) {
		const char *e = strchr(s, ','), *eq;
		size_t l = e ? (size_t)(e - s) : strlen(s);

		eq = memchr(s, '=', l);
		if (!key[0]) {
			if (!eq)
				snprintf(buf, len, "%.*s", (int)l, s);
			return;
		}
		if (eq && (size_t)(eq - s) == strlen(key) && !strncmp(s, key, strlen(key))) {
			snprintf(buf, len, "%.*s", (int)(l - (size_t)(eq - s) - 1), eq + 1);
			return;
		}
		s += l;
		if (*s == ',')
			s++;
	}
}

/* A -device's driver, either form. */
static void driver(const char *v, char *buf, size_t len)
{
	if (v[0] == '{')
		prop(v, "driver", buf, len);
	else
		prop(v, "", buf, len);
}

struct ids {
	char v[16][256];
	size_t n;
};

static void ids_add(struct ids *s, const char *id)
{
	if (id[0] && s->n < 16)
		snprintf(s->v[s->n++], sizeof(s->v[0]), "%s", id);
}

static bool ids_has(const struct ids *s, const char *id)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i], id))
			return true;
	return false;
}

/* Is path one of the VM's disk sockets: disk_socket (disk 0), then
 * disk_socket with k appended?  Its disk's number, or -1. */
static int disk_of_socket(const char *path, const char *disk_socket,
			  unsigned ndisks)
{
	size_t l;
	char *end;
	unsigned long k;

	if (!path || !disk_socket)
		return -1;
	if (!strcmp(path, disk_socket))
		return 0;
	l = strlen(disk_socket);
	if (strncmp(path, disk_socket, l) || !path[l])
		return -1;
	k = strtoul(path + l, &end, 10);
	return *end || k == 0 || k >= ndisks ? -1 : (int)k;
}

int rdb_qemuargv_for_backup(const struct rdb_strlist *in, const char *disk_socket,
			    struct rdb_strlist *out, char *disk_id, size_t idlen,
			    char *err, size_t errlen)
{
	return rdb_qemuargv_for_backup_n(in, disk_socket, disk_socket ? 1 : 0, 1,
					 out, disk_id, idlen, err, errlen);
}

int rdb_qemuargv_for_backup_n(const struct rdb_strlist *in,
			      const char *disk_socket, unsigned ndisks,
			      unsigned nnics, struct rdb_strlist *out,
			      char *disk_id, size_t idlen, char *err,
			      size_t errlen)
{
	struct ids drop_chr = { .n = 0 }, disk_nodes = { .n = 0 };
	struct ids ro_files = { .n = 0 }, disk0_nodes = { .n = 0 };
	char a[256], b[256];
	int rc = 0;

	out->v = NULL;
	out->n = 0;
	disk_id[0] = 0;
	/* First: the chardevs that go with what goes (libvirt's monitor, the
	 * serial ports the backup replaces by its own). */
	for (size_t i = 0; i + 1 < in->n; i++) {
		const char *o = in->v[i], *v = in->v[i + 1];

		/* a read-only format node (libvirt's CD-ROM): its file node
		 * is read-only too, whatever libvirt wrote on it */
		if (!strcmp(o, "-blockdev") && v[0] == '{') {
			json_t *j = json_loads(v, 0, NULL);
			const char *file = json_string_value(json_object_get(j, "file"));

			if (file && json_is_true(json_object_get(j, "read-only")))
				ids_add(&ro_files, file);
			json_decref(j);
			continue;
		}
		if (!strcmp(o, "-mon")) {
			prop(v, "chardev", a, sizeof(a));
			ids_add(&drop_chr, a);
		} else if (!strcmp(o, "-device")) {
			driver(v, b, sizeof(b));
			prop(v, "chardev", a, sizeof(a));
			if (!strcmp(b, "isa-serial"))
				ids_add(&drop_chr, a);
		}
	}
	for (size_t i = 0; rc == 0 && i < in->n; i++) {
		const char *arg = in->v[i], *o = arg + 1, *v;

		if (arg[0] != '-') {
			snprintf(err, errlen, "unexpected word '%s' in libvirt's "
				 "QEMU command line", arg);
			rc = -EINVAL;
			break;
		}
		if (*o == '-')
			o++;
		if (is_flag(o)) {
			if (strcmp(o, "S") && strcmp(o, "daemonize"))
				rc = push(out, arg, strlen(arg));
			continue;
		}
		if (i + 1 >= in->n) {
			snprintf(err, errlen, "%s without a value", arg);
			rc = -EINVAL;
			break;
		}
		v = in->v[++i];
		if (!strcmp(o, "mon") || !strcmp(o, "qmp") || !strcmp(o, "add-fd") ||
		    !strcmp(o, "vnc") || !strcmp(o, "spice") || !strcmp(o, "pidfile") ||
		    !strcmp(o, "incoming") || !strcmp(o, "serial") ||
		    !strcmp(o, "monitor") || !strcmp(o, "runas") || !strcmp(o, "chroot"))
			continue;
		if (!strcmp(o, "netdev")) {
			char *end;
			unsigned long k;

			prop(v, "id", a, sizeof(a));
			k = strncmp(a, "net", 3) ? ~0ul : strtoul(a + 3, &end, 10);
			if (k >= nnics || *end) {
				snprintf(err, errlen, "the domain has a NIC of its own "
					 "(netdev %s) besides the %u remusdbd relays: "
					 "not supported", a, nnics);
				rc = -ENOTSUP;
			}
			continue;	/* net<k>: the backup adds its own */
		}
		if (!strcmp(o, "blockdev")) {
			json_t *j = json_loads(v, 0, NULL);
			const char *drv = json_string_value(json_object_get(j, "driver"));
			const char *node = json_string_value(json_object_get(j, "node-name"));
			const char *file = json_string_value(json_object_get(j, "file"));
			const char *path = json_string_value(json_object_get(
				json_object_get(j, "server"), "path"));
			/* a qcow2 node with its NBD file node inline */
			json_t *fo = json_object_get(j, "file");
			const char *fdrv = json_string_value(json_object_get(fo, "driver"));
			const char *fpath = json_string_value(json_object_get(
				json_object_get(fo, "server"), "path"));
			int dn = drv && !strcmp(drv, "nbd") ?
				disk_of_socket(path, disk_socket, ndisks) :
				fdrv && !strcmp(fdrv, "nbd") ?
				disk_of_socket(fpath, disk_socket, ndisks) : -1;

			if (node && dn >= 0) {
				ids_add(&disk_nodes, node);
				if (dn == 0) {
					ids_add(&disk0_nodes, node);
					snprintf(disk_id, idlen, "%s", node);
				}
			} else if (node && file && ids_has(&disk_nodes, file)) {
				/* a format node on a disk's: the device names it */
				ids_add(&disk_nodes, node);
				if (ids_has(&disk0_nodes, file)) {
					ids_add(&disk0_nodes, node);
					snprintf(disk_id, idlen, "%s", node);
				}
			} else if (node && ((json_is_true(json_object_get(j, "read-only"))) ||
					    ids_has(&ro_files, node))) {
				/* a read-only image (a CD-ROM): the backup opens
				 * its own copy (roimage.h checks it is the same) */
				if (!json_is_true(json_object_get(j, "read-only")))
					json_object_set_new(j, "read-only", json_true());
				json_object_del(j, "auto-read-only");
				{
					char *t = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);

					rc = t ? push(out, arg, strlen(arg)) : -ENOMEM;
					if (rc == 0)
						rc = push(out, t, strlen(t));
					free(t);
				}
			} else {
				snprintf(err, errlen, "block node %s (%s) is not the "
					 "disk remusdbd serves: a backup could not "
					 "open it the same way (pflash/NVRAM, a second "
					 "disk?)", node ? node : "?", drv ? drv : "?");
				rc = -ENOTSUP;
			}
			json_decref(j);
			continue;
		}
		if (!strcmp(o, "machine") && strstr(v, "pflash")) {
			/* a pflash on a disk node (the UEFI variable store,
			 * the VM's last disk): the backup's restore gives the
			 * flash its replica itself */
			char keep[512] = "", part[256];
			size_t at = 0;

			for (const char *q = v; *q;) {
				size_t l = strcspn(q, ",");
				const char *eq;

				snprintf(part, sizeof(part), "%.*s", (int)l, q);
				q += l + (q[l] == ',');
				eq = strchr(part, '=');
				if (eq && !strncmp(part, "pflash", 6) &&
				    ids_has(&disk_nodes, eq + 1))
					continue;
				at += (size_t)snprintf(keep + at, sizeof(keep) - at,
						       "%s%s", at ? "," : "", part);
				if (at >= sizeof(keep)) {
					snprintf(err, errlen, "-machine %s: too long", v);
					rc = -E2BIG;
					break;
				}
			}
			if (rc == 0 && keep[0]) {
				rc = push(out, arg, strlen(arg));
				if (rc == 0)
					rc = push(out, keep, strlen(keep));
			}
			continue;
		}
		if (!strcmp(o, "drive")) {
			snprintf(err, errlen, "-drive %s: a drive libvirt adds "
				 "itself is not supported", v);
			rc = -ENOTSUP;
			continue;
		}
		if (!strcmp(o, "chardev")) {
			char buf[300];

			prop(v, "id", a, sizeof(a));
			if (ids_has(&drop_chr, a))
				continue;
			if (!strcmp(a, "rdbevent"))
				continue;	/* the restore adds the backup's */
			/* the device stays; nothing is behind it on the backup */
			snprintf(buf, sizeof(buf), "null,id=%s", a);
			rc = push(out, arg, strlen(arg));
			if (rc == 0)
				rc = push(out, buf, strlen(buf));
			continue;
		}
		if (!strcmp(o, "device")) {
			driver(v, a, sizeof(a));
			if (!strcmp(a, "isa-serial"))
				continue;
		}
		if (!strcmp(o, "object")) {
			char type[64];

			prop(v, "qom-type", type, sizeof(type));
			if (!type[0])
				prop(v, "", type, sizeof(type));
			prop(v, "id", a, sizeof(a));
			if (!strcmp(type, "secret"))
				continue;	/* libvirt's key file on this host */
			if (!strncmp(type, "memory-backend-", 15)) {
				if (!strcmp(a, "pc.ram"))
					continue;	/* the backup's is its image */
				snprintf(err, errlen, "memory backend %s: only the "
					 "main RAM (pc.ram) is restored, no NUMA "
					 "nodes or memory devices", a);
				rc = -ENOTSUP;
				continue;
			}
		}
		rc = push(out, arg, strlen(arg));
		if (rc == 0)
			rc = push(out, v, strlen(v));
	}
	if (rc == 0 && disk_socket && !disk_id[0]) {
		snprintf(err, errlen, "libvirt's command line has no NBD disk on %s",
			 disk_socket);
		rc = -EINVAL;
	}
	if (rc < 0)
		rdb_qemuargv_free(out);
	return rc;
}

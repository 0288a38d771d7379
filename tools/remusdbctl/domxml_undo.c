// SPDX-License-Identifier: GPL-2.0-only
/* Unenrolling a libvirt domain's XML, and reading an enrolled one; see
 * domxml.h. */
#include "domxml.h"
#include "domxml_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>

/* ---- unenroll ---- */

static bool has_token(const char *list, const char *tok)
{
	size_t l = strlen(tok);

	for (const char *s = list; (s = strstr(s, tok)); s += l)
		if ((s == list || s[-1] == ' ') && (s[l] == 0 || s[l] == ' '))
			return true;
	return false;
}

static bool no_elements(xmlNodePtr n)
{
	for (xmlNodePtr c = n->children; c; c = c->next)
		if (c->type == XML_ELEMENT_NODE)
			return false;
	return true;
}

static void drop(xmlNodePtr n)
{
	if (n) {
		xmlUnlinkNode(n);
		xmlFreeNode(n);
	}
}

/* Removes the arguments enroll added (the undo's remusdb:arg list) from
 * the qemu:commandline: the last run of them in a row. */
static int remove_args(xmlNodePtr cmdline, xmlNodePtr undo, char *err,
		       size_t errlen)
{
	xmlNodePtr want[256], have[1024];
	size_t nw = 0, nh = 0;
	char a[1024], b[1024];

	for (xmlNodePtr c = undo->children; c; c = c->next)
		if (rdb_dx_is_elem(c, "arg", RDB_DOMXML_NS) && nw < 256)
			want[nw++] = c;
	for (xmlNodePtr c = cmdline ? cmdline->children : NULL; c; c = c->next)
		if (rdb_dx_is_elem(c, "arg", RDB_DOMXML_QEMU_NS) && nh < 1024)
			have[nh++] = c;
	if (nw == 0)
		return 0;
	for (size_t start = nh >= nw ? nh - nw + 1 : 0; start-- > 0;) {
		size_t k;

		for (k = 0; k < nw; k++) {
			rdb_dx_attr(want[k], "value", a, sizeof(a));
			rdb_dx_attr(have[start + k], "value", b, sizeof(b));
			if (strcmp(a, b))
				break;
		}
		if (k == nw) {
			for (k = 0; k < nw; k++)
				drop(have[start + k]);
			return 0;
		}
	}
	rdb_dx_seterr(err, errlen, "the <qemu:commandline> no longer holds the %zu "
	       "arguments enroll added (edited since?): undo by hand", nw);
	return -EINVAL;
}

int rdb_domxml_unenroll(const char *xml, char **xml_out, char *err,
			size_t errlen)
{
	xmlDocPtr doc = rdb_dx_parse(xml, err, errlen);
	xmlNodePtr root, meta, undo, devices, od, oi, cmdline, features;
	char added[128], emu[1024];
	int rc = -EINVAL;

	*xml_out = NULL;
	if (!doc)
		return -EINVAL;
	root = xmlDocGetRootElement(doc);
	meta = rdb_dx_find_meta(root);
	if (!meta) {
		xmlFreeDoc(doc);
		return 1;
	}
	undo = rdb_dx_child(meta, "undo", RDB_DOMXML_NS);
	devices = rdb_dx_child(root, "devices", NULL);
	if (!undo || !devices) {
		rdb_dx_seterr(err, errlen, "the domain's remusdb metadata has no undo "
		       "record (damaged?): undo by hand");
		goto out;
	}
	rdb_dx_attr(undo, "added", added, sizeof(added));
	od = rdb_dx_child(undo, "disk", NULL);
	oi = rdb_dx_child(undo, "interface", NULL);
	cmdline = rdb_dx_child(root, "commandline", RDB_DOMXML_QEMU_NS);
	rc = remove_args(cmdline, undo, err, errlen);
	if (rc < 0)
		goto out;
	if (od) {
		xmlUnlinkNode(od);
		rdb_dx_insert_ordered(devices, od, rdb_dx_device_order,
			       rdb_dx_ndevice_order);
	}
	if (cmdline && has_token(added, "commandline") && no_elements(cmdline))
		drop(cmdline);
	if (oi) {
		xmlUnlinkNode(oi);
		rdb_dx_insert_ordered(devices, oi, rdb_dx_device_order,
			       rdb_dx_ndevice_order);
	}
	if (rdb_dx_attr(undo, "emulator", emu, sizeof(emu))) {
		xmlNodePtr e = rdb_dx_child(devices, "emulator", NULL);

		if (!e) {
			e = xmlNewNode(NULL, X("emulator"));
			if (e)
				rdb_dx_insert_ordered(devices, e, rdb_dx_device_order,
					       rdb_dx_ndevice_order);
		}
		if (e) {
			xmlNodeSetContent(e, NULL);
			xmlNodeAddContent(e, X(emu));
		}
	} else if (has_token(added, "emulator")) {
		drop(rdb_dx_child(devices, "emulator", NULL));
	}
	features = rdb_dx_child(root, "features", NULL);
	if (features && has_token(added, "acpi"))
		drop(rdb_dx_child(features, "acpi", NULL));
	if (features && has_token(added, "features") && no_elements(features))
		drop(features);
	if (has_token(added, "qemu-ns") && !rdb_dx_child(root, "commandline", RDB_DOMXML_QEMU_NS)) {
		/* the declaration enroll put on <domain>, unused now */
		for (xmlNsPtr *pp = &root->nsDef; *pp; pp = &(*pp)->next)
			if ((*pp)->href && !strcmp((const char *)(*pp)->href,
						   RDB_DOMXML_QEMU_NS)) {
				xmlNsPtr ns = *pp;

				*pp = ns->next;
				ns->next = NULL;
				xmlFreeNs(ns);
				break;
			}
	}
	{
		xmlNodePtr metadata = meta->parent;

		drop(meta);
		if (has_token(added, "metadata") && no_elements(metadata))
			drop(metadata);
	}
	rc = rdb_dx_dump(doc, xml_out, err, errlen);
out:
	xmlFreeDoc(doc);
	return rc;
}

/* ---- reading ---- */

static int copy_attr(xmlNodePtr n, const char *name, char *buf, size_t len,
		     const char *what, char *err, size_t errlen)
{
	char v[2048];

	if (!rdb_dx_attr(n, name, v, sizeof(v)) || !v[0]) {
		rdb_dx_seterr(err, errlen, "the domain's remusdb metadata lacks %s", what);
		return -EINVAL;
	}
	if (strlen(v) >= len) {
		rdb_dx_seterr(err, errlen, "%s too long: %s", what, v);
		return -ENAMETOOLONG;
	}
	snprintf(buf, len, "%s", v);
	return 0;
}

/* libvirt's memory units (formatdomain "Memory Allocation"), to KiB */
static int to_kib(const char *num, const char *unit, uint64_t *kib)
{
	static const struct {
		const char *u;
		uint64_t mul, div;
	} units[] = {
		{ "", 1, 1 }, { "KiB", 1, 1 }, { "k", 1, 1 }, { "K", 1, 1 },
		{ "b", 1, 1024 }, { "bytes", 1, 1024 }, { "KB", 1000, 1024 },
		{ "MB", 1000000, 1024 }, { "M", 1024, 1 }, { "MiB", 1024, 1 },
		{ "GB", 1000000000, 1024 }, { "G", 1024 * 1024, 1 },
		{ "GiB", 1024 * 1024, 1 }, { "T", 1024ull * 1024 * 1024, 1 },
		{ "TiB", 1024ull * 1024 * 1024, 1 },
	};
	char *end;
	unsigned long long v = strtoull(num, &end, 10);

	if (end == num || *end)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(unit, units[i].u)) {
			*kib = v * units[i].mul / units[i].div;
			return 0;
		}
	return -EINVAL;
}

int rdb_domxml_read(const char *xml, struct rdb_domxml_vm *vm, char *err,
		    size_t errlen)
{
	xmlDocPtr doc = rdb_dx_parse(xml, err, errlen);
	xmlNodePtr root, meta, mem, d;
	char num[64], unit[16];
	int rc;

	memset(vm, 0, sizeof(*vm));
	if (!doc)
		return -EINVAL;
	root = xmlDocGetRootElement(doc);
	meta = rdb_dx_find_meta(root);
	if (!meta) {
		rdb_dx_text(rdb_dx_child(root, "name", NULL), vm->name, sizeof(vm->name));
		rdb_dx_seterr(err, errlen, "domain %s is not enrolled (remusdbctl enroll %s)",
		       vm->name, vm->name);
		xmlFreeDoc(doc);
		return -ENOENT;
	}
	rdb_dx_text(rdb_dx_child(root, "name", NULL), vm->name, sizeof(vm->name));
	mem = rdb_dx_child(root, "memory", NULL);
	rdb_dx_text(mem, num, sizeof(num));
	rdb_dx_attr(mem, "unit", unit, sizeof(unit));
	rc = to_kib(num, unit, &vm->memory_kib);
	if (rc < 0)
		rdb_dx_seterr(err, errlen, "domain %s: <memory unit='%s'>%s: not understood",
		       vm->name, unit, num);
	if (rc == 0)
		rc = copy_attr(rdb_dx_child(meta, "qmp", RDB_DOMXML_NS), "path", vm->qmp,
			       sizeof(vm->qmp), "the QMP socket", err, errlen);
	if (rc == 0)
		rc = copy_attr(rdb_dx_child(meta, "watchdog-qmp", RDB_DOMXML_NS), "path",
			       vm->watchdog_qmp, sizeof(vm->watchdog_qmp),
			       "the watchdog's QMP socket", err, errlen);
	if (rc == 0)
		rc = copy_attr(rdb_dx_child(meta, "net", RDB_DOMXML_NS), "socket",
			       vm->net_socket, sizeof(vm->net_socket),
			       "the NIC's socket", err, errlen);
	if (rc == 0)
		rc = copy_attr(rdb_dx_child(meta, "net", RDB_DOMXML_NS), "mac", vm->mac,
			       sizeof(vm->mac), "the MAC", err, errlen);
	if (rc == 0)
		rc = copy_attr(rdb_dx_child(meta, "net", RDB_DOMXML_NS), "tap", vm->tap,
			       sizeof(vm->tap), "the tap", err, errlen);
	d = rdb_dx_child(meta, "disk", RDB_DOMXML_NS);
	if (rc == 0 && d)
		rc = copy_attr(d, "socket", vm->disk_socket, sizeof(vm->disk_socket),
			       "the disk's socket", err, errlen);
	if (rc == 0 && d)
		rc = copy_attr(d, "image", vm->disk, sizeof(vm->disk),
			       "the disk image", err, errlen);
	d = rdb_dx_child(meta, "event", RDB_DOMXML_NS);
	if (rc == 0 && d)
		rc = copy_attr(d, "socket", vm->event_socket,
			       sizeof(vm->event_socket),
			       "the failover event port's socket", err, errlen);
	xmlFreeDoc(doc);
	return rc;
}


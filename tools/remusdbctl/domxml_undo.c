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

/* Puts EL back among PARENT's element children at index POS (last if
 * there are fewer). */
static void insert_at(xmlNodePtr parent, xmlNodePtr el, int pos)
{
	int n = 0;

	for (xmlNodePtr c = parent->children; c; c = c->next) {
		if (c->type != XML_ELEMENT_NODE)
			continue;
		if (n++ == pos) {
			xmlAddPrevSibling(c, el);
			return;
		}
	}
	xmlAddChild(parent, el);
}

/*
 * The disks and interfaces enroll moved, back where they were: undo's
 * positions lists each one's index among the devices, in undo's order.
 * Put back lowest index first, each lands at its own index again.  0,
 * or 1 when undo has no positions (an enrollment before there were
 * several: the caller puts its one disk and interface back by name).
 */
static int restore_positions(xmlNodePtr devices, xmlNodePtr undo, char *err,
			     size_t errlen)
{
	xmlNodePtr el[32];
	int pos[32];
	size_t n = 0, want = 0;
	char list[256], *s, *end;

	if (!rdb_dx_attr(undo, "positions", list, sizeof(list)))
		return 1;
	for (xmlNodePtr c = undo->children; c; c = c->next)
		if ((rdb_dx_is_elem(c, "disk", NULL) ||
		     rdb_dx_is_elem(c, "interface", NULL)) && n < 32)
			el[n++] = c;
	for (s = list; *s && want < 32; s = end) {
		long v = strtol(s, &end, 10);

		if (end == s || v < 0 || v > 4096)
			break;
		pos[want++] = (int)v;
		while (*end == ' ')
			end++;
	}
	if (want != n || *s) {
		rdb_dx_seterr(err, errlen, "the domain's remusdb metadata lists %zu "
		       "places for %zu devices (damaged?): undo by hand", want, n);
		return -EINVAL;
	}
	for (size_t done = 0; done < n; done++) {
		size_t best = n;

		for (size_t k = 0; k < n; k++)
			if (el[k] && (best == n || pos[k] < pos[best]))
				best = k;
		xmlUnlinkNode(el[best]);
		insert_at(devices, el[best], pos[best]);
		el[best] = NULL;
	}
	return 0;
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
	if (cmdline && has_token(added, "commandline") && no_elements(cmdline))
		drop(cmdline);
	/* the emulator first: one enroll added went before the devices it
	 * moved, whose places are counted without it */
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
	rc = restore_positions(devices, undo, err, errlen);
	if (rc < 0)
		goto out;
	if (rc == 1) {
		if (od) {
			xmlUnlinkNode(od);
			rdb_dx_insert_ordered(devices, od, rdb_dx_device_order,
				       rdb_dx_ndevice_order);
		}
		if (oi) {
			xmlUnlinkNode(oi);
			rdb_dx_insert_ordered(devices, oi, rdb_dx_device_order,
				       rdb_dx_ndevice_order);
		}
	}
	/* a UEFI guest's firmware elements, back into <os> */
	{
		static const char *const fwn[] = { "firmware", "loader", "nvram" };
		xmlNodePtr os = rdb_dx_child(root, "os", NULL);
		char osfw[16];

		for (int k = 0; os && k < 3; k++) {
			xmlNodePtr e = rdb_dx_child(undo, fwn[k], NULL);

			if (e) {
				xmlUnlinkNode(e);
				rdb_dx_insert_ordered(os, e, rdb_dx_os_order,
						      rdb_dx_nos_order);
			}
		}
		if (os && rdb_dx_attr(undo, "os-firmware", osfw, sizeof(osfw)))
			xmlSetProp(os, X("firmware"), X(osfw));
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
	d = rdb_dx_child(meta, "nvram", RDB_DOMXML_NS);
	if (rc == 0 && d)
		rc = copy_attr(d, "image", vm->nvram, sizeof(vm->nvram),
			       "the UEFI variable store", err, errlen);
	d = rdb_dx_child(meta, "event", RDB_DOMXML_NS);
	if (rc == 0 && d)
		rc = copy_attr(d, "socket", vm->event_socket,
			       sizeof(vm->event_socket),
			       "the failover event port's socket", err, errlen);
	/* the other NICs and disks, in order after the first of each */
	{
		unsigned nn = 0, nd = 0;

		for (xmlNodePtr c = meta->children; rc == 0 && c; c = c->next) {
			if (rdb_dx_is_elem(c, "net", RDB_DOMXML_NS) && nn++ > 0) {
				if (vm->nmore_nics == RDB_DOMXML_NICS_MAX - 1) {
					rdb_dx_seterr(err, errlen, "the domain's remusdb "
					       "metadata lists more than %d NICs",
					       RDB_DOMXML_NICS_MAX);
					rc = -EINVAL;
					break;
				}
				rc = copy_attr(c, "mac", vm->more_nics[vm->nmore_nics].mac,
					       sizeof(vm->more_nics[0].mac), "a NIC's MAC",
					       err, errlen);
				if (rc == 0)
					rc = copy_attr(c, "tap",
						       vm->more_nics[vm->nmore_nics].tap,
						       sizeof(vm->more_nics[0].tap),
						       "a NIC's tap", err, errlen);
				vm->nmore_nics++;
			} else if (rdb_dx_is_elem(c, "disk", RDB_DOMXML_NS) && nd++ > 0) {
				if (vm->nmore_disks == RDB_DOMXML_DISKS_MAX - 1) {
					rdb_dx_seterr(err, errlen, "the domain's remusdb "
					       "metadata lists more than %d disks",
					       RDB_DOMXML_DISKS_MAX);
					rc = -EINVAL;
					break;
				}
				rc = copy_attr(c, "image", vm->more_disks[vm->nmore_disks],
					       sizeof(vm->more_disks[0]), "a disk image",
					       err, errlen);
				vm->nmore_disks++;
			}
		}
	}
	xmlFreeDoc(doc);
	return rc;
}


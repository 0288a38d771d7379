// SPDX-License-Identifier: GPL-2.0-only
/* Enrolling a libvirt domain's XML and back; see domxml.h. */
#include "domxml.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlsave.h>

#define X(s) ((const xmlChar *)(s))

/* libvirt's order of <devices> children (virDomainDefFormatInternal): an
 * element put back goes before the first one that follows it here, so
 * unenroll gives back the text libvirt formatted. */
static const char *const device_order[] = {
	"emulator", "disk", "controller", "lease", "filesystem", "interface",
	"smartcard", "serial", "parallel", "console", "channel", "input",
	"tpm", "graphics", "sound", "audio", "video", "hostdev", "redirdev",
	"redirfilter", "hub", "watchdog", "memballoon", "rng", "panic",
	"shmem", "memory", "iommu", "vsock", "crypto",
};

/* <interface><model type=...> -> the QEMU device; libvirt's default on
 * x86 without a <model> is rtl8139 (it writes it in at define). */
static const struct {
	const char *model, *device;
} nic_models[] = {
	{ "virtio", "virtio-net-pci" }, { "e1000", "e1000" },
	{ "e1000e", "e1000e" }, { "rtl8139", "rtl8139" },
};

static void seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static bool is_elem(xmlNodePtr n, const char *name, const char *href)
{
	if (!n || n->type != XML_ELEMENT_NODE || strcmp((const char *)n->name, name))
		return false;
	if (!href)
		return n->ns == NULL;
	return n->ns && n->ns->href && !strcmp((const char *)n->ns->href, href);
}

/* The first child element NAME (in namespace HREF; NULL: none). */
static xmlNodePtr child(xmlNodePtr parent, const char *name, const char *href)
{
	for (xmlNodePtr c = parent ? parent->children : NULL; c; c = c->next)
		if (is_elem(c, name, href))
			return c;
	return NULL;
}

static size_t count(xmlNodePtr parent, const char *name)
{
	size_t n = 0;

	for (xmlNodePtr c = parent ? parent->children : NULL; c; c = c->next)
		n += is_elem(c, name, NULL);
	return n;
}

/* An attribute's value into buf ("" when absent); false if absent. */
static bool attr(xmlNodePtr n, const char *name, char *buf, size_t len)
{
	xmlChar *v = n ? xmlGetNoNsProp(n, X(name)) : NULL;

	buf[0] = 0;
	if (!v)
		return false;
	snprintf(buf, len, "%s", (const char *)v);
	xmlFree(v);
	return true;
}

static bool attr_is(xmlNodePtr n, const char *name, const char *want)
{
	char v[64];

	return attr(n, name, v, sizeof(v)) && !strcmp(v, want);
}

/* An element's text into buf, blanks around it removed. */
static void text(xmlNodePtr n, char *buf, size_t len)
{
	xmlChar *v = n ? xmlNodeGetContent(n) : NULL;
	const char *s = v ? (const char *)v : "";
	size_t l;

	while (*s == ' ' || *s == '\t' || *s == '\n')
		s++;
	snprintf(buf, len, "%s", s);
	l = strlen(buf);
	while (l && (buf[l - 1] == ' ' || buf[l - 1] == '\t' || buf[l - 1] == '\n'))
		buf[--l] = 0;
	xmlFree(v);
}

static xmlDocPtr parse(const char *xml, char *err, size_t errlen)
{
	xmlParserCtxtPtr ctx;
	xmlDocPtr doc = NULL;
	xmlNodePtr root;

	if (!xml) {
		seterr(err, errlen, "no domain XML");
		return NULL;
	}
	ctx = xmlNewParserCtxt();
	if (!ctx) {
		seterr(err, errlen, "out of memory");
		return NULL;
	}
	/* NOBLANKS: the output is indented afresh, the same way for the
	 * domain before and after, so a diff shows only what changed. */
	doc = xmlCtxtReadMemory(ctx, xml, (int)strlen(xml), "domain.xml", NULL,
				XML_PARSE_NONET | XML_PARSE_NOBLANKS |
				XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	if (!doc) {
		xmlErrorPtr e = xmlCtxtGetLastError(ctx);
		char msg[200] = "not XML";
		size_t l;

		if (e && e->message)
			snprintf(msg, sizeof(msg), "%s", e->message);
		l = strlen(msg);
		while (l && msg[l - 1] == '\n')
			msg[--l] = 0;
		seterr(err, errlen, "malformed domain XML (line %d): %s",
		       e ? e->line : 0, msg);
	}
	xmlFreeParserCtxt(ctx);
	if (!doc)
		return NULL;
	root = xmlDocGetRootElement(doc);
	if (!is_elem(root, "domain", NULL)) {
		seterr(err, errlen, "not a libvirt domain: the root element is <%s>",
		       root ? (const char *)root->name : "nothing");
		xmlFreeDoc(doc);
		return NULL;
	}
	return doc;
}

static int dump(xmlDocPtr doc, char **out, char *err, size_t errlen)
{
	xmlBufferPtr buf = xmlBufferCreate();
	xmlSaveCtxtPtr s = buf ? xmlSaveToBuffer(buf, "UTF-8", XML_SAVE_FORMAT |
						 XML_SAVE_NO_DECL) : NULL;
	int rc = 0;

	if (!s || xmlSaveDoc(s, doc) < 0)
		rc = -ENOMEM;
	if (s)
		xmlSaveClose(s);
	if (rc == 0) {
		*out = strdup((const char *)xmlBufferContent(buf));
		if (!*out)
			rc = -ENOMEM;
	}
	if (buf)
		xmlBufferFree(buf);
	if (rc < 0)
		seterr(err, errlen, "out of memory");
	return rc;
}

static xmlNodePtr find_meta(xmlNodePtr root)
{
	return child(child(root, "metadata", NULL), "vm", RDB_DOMXML_NS);
}

static bool name_ok(const char *n)
{
	size_t l = strlen(n);

	if (l == 0 || l > 64)
		return false;
	for (const char *c = n; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '_' || *c == '.' || *c == '-'))
			return false;
	return true;
}

/* Puts NODE among PARENT's children before the first one ORDER places
 * after NODE's name (at the end if none). */
static void insert_ordered(xmlNodePtr parent, xmlNodePtr node,
			   const char *const *order, size_t n)
{
	size_t mine = n;

	for (size_t i = 0; i < n; i++)
		if (!strcmp(order[i], (const char *)node->name))
			mine = i;
	for (xmlNodePtr c = parent->children; c && mine < n; c = c->next) {
		if (c->type != XML_ELEMENT_NODE || c->ns)
			continue;
		for (size_t i = mine + 1; i < n; i++)
			if (!strcmp(order[i], (const char *)c->name)) {
				xmlAddPrevSibling(c, node);
				return;
			}
	}
	xmlAddChild(parent, node);
}

/* A new element after the first existing one of AFTER (in that order of
 * preference), or first. */
static xmlNodePtr new_after(xmlNodePtr parent, const char *name,
			    const char *const *after, size_t n)
{
	xmlNodePtr e = xmlNewNode(NULL, X(name));

	if (!e)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		xmlNodePtr a = child(parent, after[i], NULL);

		if (a) {
			xmlAddNextSibling(a, e);
			return e;
		}
	}
	if (parent->children)
		xmlAddPrevSibling(parent->children, e);
	else
		xmlAddChild(parent, e);
	return e;
}

/* ---- enroll ---- */

/* A PCI slot on bus 0 no <address> of the domain uses (nor TAKEN),
 * from 0x03 on. */
static int free_slot(xmlNodePtr devices, int taken)
{
	bool used[32] = { false };

	if (taken >= 0 && taken < 32)
		used[taken] = true;
	for (xmlNodePtr d = devices->children; d; d = d->next) {
		xmlNodePtr a = child(d, "address", NULL);
		char bus[16], slot[16];

		if (!a || !attr_is(a, "type", "pci"))
			continue;
		attr(a, "bus", bus, sizeof(bus));
		attr(a, "slot", slot, sizeof(slot));
		if (strtoul(bus, NULL, 0) == 0 && strtoul(slot, NULL, 0) < 32)
			used[strtoul(slot, NULL, 0)] = true;
	}
	for (int s = 3; s < 32; s++)
		if (!used[s])
			return s;
	return -1;
}

/*
 * Where a device that leaves libvirt's <devices> goes on QEMU's command
 * line: its own <address type='pci'> as QEMU's bus and addr (libvirt names
 * a PCI controller of index N "pci.N", index 0 of a q35 machine "pcie.0"),
 * or, without one, a free slot on bus 0 other than TAKEN.  The slot on
 * bus 0 into *slot_out (-1 on another bus).
 */
static int pci_place(xmlNodePtr root, xmlNodePtr devices, xmlNodePtr dev,
		     const char *what, int taken, char *bus_out, size_t buslen,
		     char *addr_out, size_t addrlen, int *slot_out, char *err,
		     size_t errlen)
{
	xmlNodePtr a = child(dev, "address", NULL);
	char machine[64] = "";

	attr(child(child(root, "os", NULL), "type", NULL), "machine", machine,
	     sizeof(machine));
	if (slot_out)
		*slot_out = -1;
	if (a && attr_is(a, "type", "pci")) {
		char dom[16], bus[16], slot[16], fn[16];
		unsigned long b, sl, f;

		attr(a, "domain", dom, sizeof(dom));
		attr(a, "bus", bus, sizeof(bus));
		attr(a, "slot", slot, sizeof(slot));
		attr(a, "function", fn, sizeof(fn));
		b = strtoul(bus, NULL, 0);
		sl = strtoul(slot, NULL, 0);
		f = strtoul(fn, NULL, 0);
		if (b > 255 || sl > 31 || f > 7) {
			seterr(err, errlen, "%s's PCI address %s:%s.%s is out of "
			       "range", what, bus, slot, fn);
			return -EINVAL;
		}
		if (strtoul(dom, NULL, 0) != 0) {
			seterr(err, errlen, "%s is on PCI domain %s: only domain 0 "
			       "is supported", what, dom);
			return -ENOTSUP;
		}
		if (b == 0)
			snprintf(bus_out, buslen, "%s",
				 strstr(machine, "q35") ? "pcie.0" : "pci.0");
		else
			snprintf(bus_out, buslen, "pci.%lu", b);
		if (f)
			snprintf(addr_out, addrlen, "0x%lx.0x%lx", sl, f);
		else
			snprintf(addr_out, addrlen, "0x%lx", sl);
		if (slot_out && b == 0)
			*slot_out = (int)sl;
		return 0;
	}
	{
		int s = free_slot(devices, taken);

		if (s < 0 || strstr(machine, "q35")) {
			seterr(err, errlen, "%s has no PCI address: define the "
			       "domain first (libvirt assigns one)", what);
			return -EINVAL;
		}
		snprintf(bus_out, buslen, "pci.0");
		snprintf(addr_out, addrlen, "0x%x", s);
		if (slot_out)
			*slot_out = s;
	}
	return 0;
}

struct nic {
	char device[32], mac[18], tap[16], bus[32], addr[32], boot[16];
	char bridge[256], network[256];
};

static bool libvirt_tap_name(const char *t)
{
	return !strncmp(t, "vnet", 4) || !strncmp(t, "macvtap", 7) ||
	       !strncmp(t, "macvlan", 7) || !strncmp(t, "vif", 3);
}

static int read_nic(xmlNodePtr root, xmlNodePtr devices, xmlNodePtr iface,
		    const struct rdb_enroll_params *p, int taken, struct nic *nic,
		    char *err, size_t errlen)
{
	xmlNodePtr boot = child(iface, "boot", NULL);
	char type[32], model[32] = "rtl8139";
	size_t i;

	memset(nic, 0, sizeof(*nic));
	attr(iface, "type", type, sizeof(type));
	if (!strcmp(type, "hostdev") || !strcmp(type, "vhostuser") ||
	    !strcmp(type, "vdpa")) {
		seterr(err, errlen, "interface type='%s': its frames do not pass "
		       "through QEMU, so remusdbd cannot hold them", type);
		return -ENOTSUP;
	}
	attr(child(iface, "model", NULL), "type", model, sizeof(model));
	if (!model[0])
		snprintf(model, sizeof(model), "rtl8139");
	for (i = 0; i < sizeof(nic_models) / sizeof(nic_models[0]); i++)
		if (!strcmp(model, nic_models[i].model))
			break;
	if (i == sizeof(nic_models) / sizeof(nic_models[0])) {
		seterr(err, errlen, "interface model '%s': supported are virtio, "
		       "e1000, e1000e and rtl8139", model);
		return -ENOTSUP;
	}
	snprintf(nic->device, sizeof(nic->device), "%s", nic_models[i].device);
	if (!attr(child(iface, "mac", NULL), "address", nic->mac, sizeof(nic->mac)) ||
	    strlen(nic->mac) != 17) {
		seterr(err, errlen, "the interface has no <mac address=...> (libvirt "
		       "writes one in when the domain is defined)");
		return -EINVAL;
	}
	attr(child(iface, "source", NULL), "bridge", nic->bridge, sizeof(nic->bridge));
	attr(child(iface, "source", NULL), "network", nic->network, sizeof(nic->network));
	if (p->tap && p->tap[0]) {
		if (strlen(p->tap) > 15) {
			seterr(err, errlen, "tap %s: longer than 15 characters", p->tap);
			return -EINVAL;
		}
		snprintf(nic->tap, sizeof(nic->tap), "%s", p->tap);
	} else {
		char t[64];

		attr(child(iface, "target", NULL), "dev", t, sizeof(t));
		if (!t[0] || libvirt_tap_name(t) || strlen(t) > 15) {
			seterr(err, errlen, "which tap device carries the guest's "
			       "frames on this host? say --tap NAME: a tap on %s%s "
			       "that remusdbd writes the guest's frames to",
			       nic->bridge[0] ? "bridge " : nic->network[0] ?
			       "network " : "the guest's network",
			       nic->bridge[0] ? nic->bridge : nic->network);
			return -EINVAL;
		}
		snprintf(nic->tap, sizeof(nic->tap), "%s", t);
	}
	if (boot) {
		char *end;

		attr(boot, "order", nic->boot, sizeof(nic->boot));
		if (strtoul(nic->boot, &end, 10) == 0 || *end) {
			seterr(err, errlen, "interface <boot order='%s'>: not a "
			       "number", nic->boot);
			return -EINVAL;
		}
	}
	return pci_place(root, devices, iface, "the interface", taken, nic->bus,
			 sizeof(nic->bus), nic->addr, sizeof(nic->addr), NULL,
			 err, errlen);
}

static int check_disk(xmlNodePtr disk, char *image, size_t len, char *err,
		      size_t errlen)
{
	char type[32], dev[32], fmt[32], target[32];

	attr(disk, "type", type, sizeof(type));
	attr(disk, "device", dev, sizeof(dev));
	attr(child(disk, "driver", NULL), "type", fmt, sizeof(fmt));
	attr(child(disk, "target", NULL), "dev", target, sizeof(target));
	if (dev[0] && strcmp(dev, "disk")) {
		seterr(err, errlen, "the domain's disk %s is a %s: remusdbd "
		       "replicates one disk (device='disk'), remove it first",
		       target, dev);
		return -ENOTSUP;
	}
	if (strcmp(type, "file")) {
		seterr(err, errlen, "disk %s is type='%s': remusdbd serves a raw "
		       "image file (type='file')", target, type);
		return -ENOTSUP;
	}
	if (fmt[0] && strcmp(fmt, "raw")) {
		seterr(err, errlen, "disk %s is %s: remusdbd serves raw images "
		       "(qemu-img convert -O raw)", target, fmt);
		return -ENOTSUP;
	}
	{
		char bus[32];

		attr(child(disk, "target", NULL), "bus", bus, sizeof(bus));
		if (strcmp(bus, "virtio")) {
			seterr(err, errlen, "disk %s is on bus '%s': it becomes "
			       "remusdbd's virtio-blk device, so only bus='virtio' "
			       "is supported", target, bus);
			return -ENOTSUP;
		}
	}
	if (child(disk, "readonly", NULL) || child(disk, "shareable", NULL)) {
		seterr(err, errlen, "disk %s is read-only or shareable: not "
		       "supported", target);
		return -ENOTSUP;
	}
	if (!attr(child(disk, "source", NULL), "file", image, len) || !image[0]) {
		seterr(err, errlen, "disk %s has no <source file=...>", target);
		return -EINVAL;
	}
	if (strlen(image) >= len - 1) {
		seterr(err, errlen, "disk %s: image path too long", target);
		return -ENAMETOOLONG;
	}
	return 0;
}

/*
 * The disk as QEMU arguments: libvirt 9.0's NBD disk cannot have the NBD
 * client's reconnect-delay, and without it the guest's disk requests fail
 * whenever remusdbd's disk server on the socket is replaced (remusdbd
 * restarting; a restored VM protected again), so the disk leaves
 * <devices> like the NIC: an nbd block node on remusdbd's socket that
 * holds requests for 15 s across a reconnect (as remusdbd's own QEMU
 * does), and a virtio-blk device at the disk's PCI address with its boot
 * order.  The node's name is the VM's disk_id.
 */
struct disk_dev {
	char bus[32], addr[32], boot[16], discard[16];
};

static int read_disk(xmlNodePtr root, xmlNodePtr devices, xmlNodePtr disk,
		     struct disk_dev *dd, int *slot_out, char *err, size_t errlen)
{
	xmlNodePtr boot = child(disk, "boot", NULL);
	char target[32];

	memset(dd, 0, sizeof(*dd));
	attr(child(disk, "target", NULL), "dev", target, sizeof(target));
	attr(child(disk, "driver", NULL), "discard", dd->discard, sizeof(dd->discard));
	if (boot) {
		char *end;

		attr(boot, "order", dd->boot, sizeof(dd->boot));
		if (strtoul(dd->boot, &end, 10) == 0 || *end) {
			seterr(err, errlen, "disk %s <boot order='%s'>: not a number",
			       target, dd->boot);
			return -EINVAL;
		}
	} else {
		/* <os><boot dev='hd'/> (libvirt's default): libvirt gave its
		 * first disk bootindex 1 */
		for (xmlNodePtr b = child(child(root, "os", NULL), "boot", NULL); b;
		     b = b->next)
			if (is_elem(b, "boot", NULL) && attr_is(b, "dev", "hd"))
				snprintf(dd->boot, sizeof(dd->boot), "1");
		if (!child(child(root, "os", NULL), "boot", NULL) &&
		    !child(child(root, "os", NULL), "kernel", NULL))
			snprintf(dd->boot, sizeof(dd->boot), "1");
	}
	return pci_place(root, devices, disk, "the disk", -1, dd->bus,
			 sizeof(dd->bus), dd->addr, sizeof(dd->addr), slot_out,
			 err, errlen);
}

static int sock_path(char *buf, size_t len, const char *run_dir,
		     const char *name, const char *suffix, char *err,
		     size_t errlen)
{
	int n = snprintf(buf, len, "%s/%s.%s", run_dir, name, suffix);

	if (n < 0 || (size_t)n >= len) {
		seterr(err, errlen, "%s/%s.%s: longer than a unix socket path "
		       "may be (107 bytes)", run_dir, name, suffix);
		return -ENAMETOOLONG;
	}
	return 0;
}

static void add_arg(xmlNodePtr cmdline, xmlNsPtr ns, xmlNodePtr undo,
		    xmlNsPtr rns, const char *v)
{
	xmlNodePtr a = xmlNewChild(cmdline, ns, X("arg"), NULL);

	if (a)
		xmlNewProp(a, X("value"), X(v));
	a = xmlNewChild(undo, rns, X("arg"), NULL);
	if (a)
		xmlNewProp(a, X("value"), X(v));
}

int rdb_domxml_enroll(const char *xml, const struct rdb_enroll_params *p,
		      char **xml_out, char *err, size_t errlen)
{
	/* libvirt's order: name uuid genid title description metadata ...
	 * os idmap features */
	static const char *const meta_after[] = { "description", "title", "genid",
						  "uuid", "name" };
	static const char *const features_after[] = { "idmap", "os" };
	char name[128], image[1024] = "", dtype[32], added[128] = "";
	char qmp[108], wd[108], net[108], dsk[108], buf[600], orig_emu[1024];
	xmlNodePtr root, devices, disk = NULL, iface = NULL, meta, m, undo;
	xmlNodePtr metadata, features, cmdline, emulator;
	xmlNsPtr rns, qns;
	struct disk_dev dd;
	int disk_slot = -1;
	struct nic nic;
	xmlDocPtr doc;
	size_t ndisks;
	int rc;

	*xml_out = NULL;
	if (!p || !p->emulator || p->emulator[0] != '/' || !p->run_dir ||
	    p->run_dir[0] != '/') {
		seterr(err, errlen, "the emulator and remusdbd's run_dir must be "
		       "absolute paths");
		return -EINVAL;
	}
	doc = parse(xml, err, errlen);
	if (!doc)
		return -EINVAL;
	root = xmlDocGetRootElement(doc);
	if (find_meta(root)) {
		xmlFreeDoc(doc);
		return 1;
	}
	rc = -ENOTSUP;
	attr(root, "type", dtype, sizeof(dtype));
	if (strcmp(dtype, "qemu") && strcmp(dtype, "kvm")) {
		seterr(err, errlen, "domain type '%s': only QEMU domains (qemu, "
		       "kvm) can be protected", dtype);
		goto out;
	}
	text(child(root, "name", NULL), name, sizeof(name));
	if (!name_ok(name)) {
		seterr(err, errlen, "domain name '%s': remusdbd names VMs with "
		       "[A-Za-z0-9_.-], 1-64 characters", name);
		rc = -EINVAL;
		goto out;
	}
	devices = child(root, "devices", NULL);
	if (!devices) {
		seterr(err, errlen, "domain %s has no <devices>", name);
		rc = -EINVAL;
		goto out;
	}
	ndisks = count(devices, "disk");
	if (ndisks > 1) {
		char list[256] = "";

		for (xmlNodePtr c = devices->children; c; c = c->next) {
			char t[32];

			if (!is_elem(c, "disk", NULL))
				continue;
			attr(child(c, "target", NULL), "dev", t, sizeof(t));
			snprintf(list + strlen(list), sizeof(list) - strlen(list),
				 "%s%s", list[0] ? ", " : "", t[0] ? t : "?");
		}
		seterr(err, errlen, "domain %s has %zu disks (%s): remusdbd "
		       "replicates exactly one; remove the others (CD-ROMs too) "
		       "before enrolling", name, ndisks, list);
		goto out;
	}
	if (ndisks == 1) {
		disk = child(devices, "disk", NULL);
		rc = check_disk(disk, image, sizeof(image), err, errlen);
		if (rc < 0)
			goto out;
		rc = -ENOTSUP;
	}
	if (count(devices, "interface") != 1) {
		seterr(err, errlen, "domain %s has %zu network interfaces: remusdbd "
		       "relays exactly one", name, count(devices, "interface"));
		goto out;
	}
	iface = child(devices, "interface", NULL);
	if (disk) {
		rc = read_disk(root, devices, disk, &dd, &disk_slot, err, errlen);
		if (rc < 0)
			goto out;
	}
	rc = read_nic(root, devices, iface, p, disk_slot, &nic, err, errlen);
	if (rc == 0)
		rc = sock_path(qmp, sizeof(qmp), p->run_dir, name, "qmp", err, errlen);
	if (rc == 0)
		rc = sock_path(wd, sizeof(wd), p->run_dir, name, "wd.qmp", err, errlen);
	if (rc == 0)
		rc = sock_path(net, sizeof(net), p->run_dir, name, "net", err, errlen);
	if (rc == 0)
		rc = sock_path(dsk, sizeof(dsk), p->run_dir, name, "disk", err, errlen);
	if (rc < 0)
		goto out;

	/* Checked: from here on the tree changes. */
	rc = -ENOMEM;
	metadata = child(root, "metadata", NULL);
	if (!metadata) {
		metadata = new_after(root, "metadata", meta_after, 5);
		strcat(added, " metadata");
	}
	meta = metadata ? xmlNewChild(metadata, NULL, X("vm"), NULL) : NULL;
	rns = meta ? xmlNewNs(meta, X(RDB_DOMXML_NS), X("remusdb")) : NULL;
	if (!rns)
		goto nomem;
	xmlSetNs(meta, rns);
	xmlNewProp(meta, X("version"), X("1"));
	m = xmlNewChild(meta, rns, X("qmp"), NULL);
	if (m)
		xmlNewProp(m, X("path"), X(qmp));
	m = xmlNewChild(meta, rns, X("watchdog-qmp"), NULL);
	if (m)
		xmlNewProp(m, X("path"), X(wd));
	m = xmlNewChild(meta, rns, X("net"), NULL);
	if (m) {
		xmlNewProp(m, X("socket"), X(net));
		xmlNewProp(m, X("mac"), X(nic.mac));
		xmlNewProp(m, X("tap"), X(nic.tap));
		if (nic.bridge[0])
			xmlNewProp(m, X("bridge"), X(nic.bridge));
		if (nic.network[0])
			xmlNewProp(m, X("network"), X(nic.network));
		xmlNewProp(m, X("device"), X(nic.device));
	}
	if (disk) {
		m = xmlNewChild(meta, rns, X("disk"), NULL);
		if (m) {
			xmlNewProp(m, X("socket"), X(dsk));
			xmlNewProp(m, X("image"), X(image));
		}
	}
	undo = xmlNewChild(meta, rns, X("undo"), NULL);
	if (!undo)
		goto nomem;

	emulator = child(devices, "emulator", NULL);
	if (emulator) {
		text(emulator, orig_emu, sizeof(orig_emu));
		xmlNewProp(undo, X("emulator"), X(orig_emu));
		xmlNodeSetContent(emulator, NULL);
		xmlNodeAddContent(emulator, X(p->emulator));
	} else {
		emulator = xmlNewNode(NULL, X("emulator"));
		if (!emulator)
			goto nomem;
		xmlNodeAddContent(emulator, X(p->emulator));
		insert_ordered(devices, emulator, device_order,
			       sizeof(device_order) / sizeof(device_order[0]));
		strcat(added, " emulator");
	}

	features = child(root, "features", NULL);
	if (!features) {
		features = new_after(root, "features", features_after, 2);
		strcat(added, " features");
	}
	if (!features)
		goto nomem;
	if (!child(features, "acpi", NULL)) {
		xmlNodePtr acpi = xmlNewNode(NULL, X("acpi")), pae = child(features, "pae", NULL);

		if (!acpi)
			goto nomem;
		/* libvirt's order: pae, acpi, apic, ... */
		if (pae)
			xmlAddNextSibling(pae, acpi);
		else if (features->children)
			xmlAddPrevSibling(features->children, acpi);
		else
			xmlAddChild(features, acpi);
		strcat(added, " acpi");
	}

	if (disk) {
		xmlUnlinkNode(disk);
		xmlAddChild(undo, disk);	/* the original, kept whole */
	}
	xmlUnlinkNode(iface);
	xmlAddChild(undo, iface);

	qns = xmlSearchNsByHref(doc, root, X(RDB_DOMXML_QEMU_NS));
	if (!qns) {
		qns = xmlNewNs(root, X(RDB_DOMXML_QEMU_NS), X("qemu"));
		strcat(added, " qemu-ns");
	}
	if (!qns)
		goto nomem;
	cmdline = child(root, "commandline", RDB_DOMXML_QEMU_NS);
	if (!cmdline) {
		cmdline = xmlNewChild(root, qns, X("commandline"), NULL);
		strcat(added, " commandline");
	}
	if (!cmdline)
		goto nomem;
	for (size_t i = 0; i < p->nfirmware; i++) {
		add_arg(cmdline, qns, undo, rns, "-L");
		add_arg(cmdline, qns, undo, rns, p->firmware_dirs[i]);
	}
	add_arg(cmdline, qns, undo, rns, "-qmp");
	snprintf(buf, sizeof(buf), "unix:%s,server=on,wait=off", qmp);
	add_arg(cmdline, qns, undo, rns, buf);
	add_arg(cmdline, qns, undo, rns, "-qmp");
	snprintf(buf, sizeof(buf), "unix:%s,server=on,wait=off", wd);
	add_arg(cmdline, qns, undo, rns, buf);
	/* net0: the id remusdbd's restore gives the backup's netdev too */
	add_arg(cmdline, qns, undo, rns, "-netdev");
	snprintf(buf, sizeof(buf), "stream,id=net0,server=off,addr.type=unix,"
		 "addr.path=%s,reconnect-ms=100", net);
	add_arg(cmdline, qns, undo, rns, buf);
	if (disk) {
		add_arg(cmdline, qns, undo, rns, "-blockdev");
		snprintf(buf, sizeof(buf), "{\"driver\":\"nbd\",\"server\":{\"type\":"
			 "\"unix\",\"path\":\"%s\"},\"node-name\":\"%s\","
			 "\"reconnect-delay\":15%s%s%s}", dsk, RDB_DOMXML_DISK_NODE,
			 dd.discard[0] ? ",\"discard\":\"" : "", dd.discard,
			 dd.discard[0] ? "\"" : "");
		add_arg(cmdline, qns, undo, rns, buf);
		add_arg(cmdline, qns, undo, rns, "-device");
		snprintf(buf, sizeof(buf), "{\"driver\":\"virtio-blk-pci\",\"drive\":"
			 "\"%s\",\"id\":\"rdbblk0\",\"bus\":\"%s\",\"addr\":\"%s\"%s%s}",
			 RDB_DOMXML_DISK_NODE, dd.bus, dd.addr,
			 dd.boot[0] ? ",\"bootindex\":" : "", dd.boot);
		add_arg(cmdline, qns, undo, rns, buf);
	}
	add_arg(cmdline, qns, undo, rns, "-device");
	snprintf(buf, sizeof(buf), "{\"driver\":\"%s\",\"netdev\":\"net0\","
		 "\"mac\":\"%s\",\"id\":\"rdbnic0\",\"bus\":\"%s\",\"addr\":\"%s\"%s%s}",
		 nic.device, nic.mac, nic.bus, nic.addr,
		 nic.boot[0] ? ",\"bootindex\":" : "", nic.boot);
	add_arg(cmdline, qns, undo, rns, buf);
	if (added[0])
		xmlNewProp(undo, X("added"), X(added + 1));
	rc = dump(doc, xml_out, err, errlen);
	goto out;
nomem:
	seterr(err, errlen, "out of memory");
	rc = -ENOMEM;
out:
	xmlFreeDoc(doc);
	return rc;
}

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
		if (is_elem(c, "arg", RDB_DOMXML_NS) && nw < 256)
			want[nw++] = c;
	for (xmlNodePtr c = cmdline ? cmdline->children : NULL; c; c = c->next)
		if (is_elem(c, "arg", RDB_DOMXML_QEMU_NS) && nh < 1024)
			have[nh++] = c;
	if (nw == 0)
		return 0;
	for (size_t start = nh >= nw ? nh - nw + 1 : 0; start-- > 0;) {
		size_t k;

		for (k = 0; k < nw; k++) {
			attr(want[k], "value", a, sizeof(a));
			attr(have[start + k], "value", b, sizeof(b));
			if (strcmp(a, b))
				break;
		}
		if (k == nw) {
			for (k = 0; k < nw; k++)
				drop(have[start + k]);
			return 0;
		}
	}
	seterr(err, errlen, "the <qemu:commandline> no longer holds the %zu "
	       "arguments enroll added (edited since?): undo by hand", nw);
	return -EINVAL;
}

int rdb_domxml_unenroll(const char *xml, char **xml_out, char *err,
			size_t errlen)
{
	xmlDocPtr doc = parse(xml, err, errlen);
	xmlNodePtr root, meta, undo, devices, od, oi, cmdline, features;
	char added[128], emu[1024];
	int rc = -EINVAL;

	*xml_out = NULL;
	if (!doc)
		return -EINVAL;
	root = xmlDocGetRootElement(doc);
	meta = find_meta(root);
	if (!meta) {
		xmlFreeDoc(doc);
		return 1;
	}
	undo = child(meta, "undo", RDB_DOMXML_NS);
	devices = child(root, "devices", NULL);
	if (!undo || !devices) {
		seterr(err, errlen, "the domain's remusdb metadata has no undo "
		       "record (damaged?): undo by hand");
		goto out;
	}
	attr(undo, "added", added, sizeof(added));
	od = child(undo, "disk", NULL);
	oi = child(undo, "interface", NULL);
	cmdline = child(root, "commandline", RDB_DOMXML_QEMU_NS);
	rc = remove_args(cmdline, undo, err, errlen);
	if (rc < 0)
		goto out;
	if (od) {
		xmlUnlinkNode(od);
		insert_ordered(devices, od, device_order,
			       sizeof(device_order) / sizeof(device_order[0]));
	}
	if (cmdline && has_token(added, "commandline") && no_elements(cmdline))
		drop(cmdline);
	if (oi) {
		xmlUnlinkNode(oi);
		insert_ordered(devices, oi, device_order,
			       sizeof(device_order) / sizeof(device_order[0]));
	}
	if (attr(undo, "emulator", emu, sizeof(emu))) {
		xmlNodePtr e = child(devices, "emulator", NULL);

		if (!e) {
			e = xmlNewNode(NULL, X("emulator"));
			if (e)
				insert_ordered(devices, e, device_order,
					       sizeof(device_order) / sizeof(device_order[0]));
		}
		if (e) {
			xmlNodeSetContent(e, NULL);
			xmlNodeAddContent(e, X(emu));
		}
	} else if (has_token(added, "emulator")) {
		drop(child(devices, "emulator", NULL));
	}
	features = child(root, "features", NULL);
	if (features && has_token(added, "acpi"))
		drop(child(features, "acpi", NULL));
	if (features && has_token(added, "features") && no_elements(features))
		drop(features);
	if (has_token(added, "qemu-ns") && !child(root, "commandline", RDB_DOMXML_QEMU_NS)) {
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
	rc = dump(doc, xml_out, err, errlen);
out:
	xmlFreeDoc(doc);
	return rc;
}

/* ---- reading ---- */

static int copy_attr(xmlNodePtr n, const char *name, char *buf, size_t len,
		     const char *what, char *err, size_t errlen)
{
	char v[2048];

	if (!attr(n, name, v, sizeof(v)) || !v[0]) {
		seterr(err, errlen, "the domain's remusdb metadata lacks %s", what);
		return -EINVAL;
	}
	if (strlen(v) >= len) {
		seterr(err, errlen, "%s too long: %s", what, v);
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
	xmlDocPtr doc = parse(xml, err, errlen);
	xmlNodePtr root, meta, mem, d;
	char num[64], unit[16];
	int rc;

	memset(vm, 0, sizeof(*vm));
	if (!doc)
		return -EINVAL;
	root = xmlDocGetRootElement(doc);
	meta = find_meta(root);
	if (!meta) {
		text(child(root, "name", NULL), vm->name, sizeof(vm->name));
		seterr(err, errlen, "domain %s is not enrolled (remusdbctl enroll %s)",
		       vm->name, vm->name);
		xmlFreeDoc(doc);
		return -ENOENT;
	}
	text(child(root, "name", NULL), vm->name, sizeof(vm->name));
	mem = child(root, "memory", NULL);
	text(mem, num, sizeof(num));
	attr(mem, "unit", unit, sizeof(unit));
	rc = to_kib(num, unit, &vm->memory_kib);
	if (rc < 0)
		seterr(err, errlen, "domain %s: <memory unit='%s'>%s: not understood",
		       vm->name, unit, num);
	if (rc == 0)
		rc = copy_attr(child(meta, "qmp", RDB_DOMXML_NS), "path", vm->qmp,
			       sizeof(vm->qmp), "the QMP socket", err, errlen);
	if (rc == 0)
		rc = copy_attr(child(meta, "watchdog-qmp", RDB_DOMXML_NS), "path",
			       vm->watchdog_qmp, sizeof(vm->watchdog_qmp),
			       "the watchdog's QMP socket", err, errlen);
	if (rc == 0)
		rc = copy_attr(child(meta, "net", RDB_DOMXML_NS), "socket",
			       vm->net_socket, sizeof(vm->net_socket),
			       "the NIC's socket", err, errlen);
	if (rc == 0)
		rc = copy_attr(child(meta, "net", RDB_DOMXML_NS), "mac", vm->mac,
			       sizeof(vm->mac), "the MAC", err, errlen);
	if (rc == 0)
		rc = copy_attr(child(meta, "net", RDB_DOMXML_NS), "tap", vm->tap,
			       sizeof(vm->tap), "the tap", err, errlen);
	d = child(meta, "disk", RDB_DOMXML_NS);
	if (rc == 0 && d)
		rc = copy_attr(d, "socket", vm->disk_socket, sizeof(vm->disk_socket),
			       "the disk's socket", err, errlen);
	if (rc == 0 && d)
		rc = copy_attr(d, "image", vm->disk, sizeof(vm->disk),
			       "the disk image", err, errlen);
	xmlFreeDoc(doc);
	return rc;
}

int rdb_domxml_normalize(const char *xml, char **xml_out, char *err,
			 size_t errlen)
{
	xmlDocPtr doc = parse(xml, err, errlen);
	int rc;

	*xml_out = NULL;
	if (!doc)
		return -EINVAL;
	rc = dump(doc, xml_out, err, errlen);
	xmlFreeDoc(doc);
	return rc;
}

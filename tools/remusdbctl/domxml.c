// SPDX-License-Identifier: GPL-2.0-only
/* Enrolling a libvirt domain's XML, and the libxml2 helpers domxml_undo.c
 * (unenroll, reading) shares; see domxml.h. */
#include "domxml.h"
#include "domxml_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlsave.h>

/* libvirt's order of <devices> children (virDomainDefFormatInternal): an
 * element put back goes before the first one that follows it here, so
 * unenroll gives back the text libvirt formatted. */
const char *const rdb_dx_device_order[] = {
	"emulator", "disk", "controller", "lease", "filesystem", "interface",
	"smartcard", "serial", "parallel", "console", "channel", "input",
	"tpm", "graphics", "sound", "audio", "video", "hostdev", "redirdev",
	"redirfilter", "hub", "watchdog", "memballoon", "rng", "panic",
	"shmem", "memory", "iommu", "vsock", "crypto",
};
const size_t rdb_dx_ndevice_order = sizeof(rdb_dx_device_order) /
	sizeof(rdb_dx_device_order[0]);

/* <interface><model type=...> -> the QEMU device; libvirt's default on
 * x86 without a <model> is rtl8139 (it writes it in at define). */
static const struct {
	const char *model, *device;
} nic_models[] = {
	{ "virtio", "virtio-net-pci" }, { "e1000", "e1000" },
	{ "e1000e", "e1000e" }, { "rtl8139", "rtl8139" },
};

void rdb_dx_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

bool rdb_dx_is_elem(xmlNodePtr n, const char *name, const char *href)
{
	if (!n || n->type != XML_ELEMENT_NODE || strcmp((const char *)n->name, name))
		return false;
	if (!href)
		return n->ns == NULL;
	return n->ns && n->ns->href && !strcmp((const char *)n->ns->href, href);
}

/* The first child element NAME (in namespace HREF; NULL: none). */
xmlNodePtr rdb_dx_child(xmlNodePtr parent, const char *name, const char *href)
{
	for (xmlNodePtr c = parent ? parent->children : NULL; c; c = c->next)
		if (rdb_dx_is_elem(c, name, href))
			return c;
	return NULL;
}

size_t rdb_dx_count(xmlNodePtr parent, const char *name)
{
	size_t n = 0;

	for (xmlNodePtr c = parent ? parent->children : NULL; c; c = c->next)
		n += rdb_dx_is_elem(c, name, NULL);
	return n;
}

/* An attribute's value into buf ("" when absent); false if absent. */
bool rdb_dx_attr(xmlNodePtr n, const char *name, char *buf, size_t len)
{
	xmlChar *v = n ? xmlGetNoNsProp(n, X(name)) : NULL;

	buf[0] = 0;
	if (!v)
		return false;
	snprintf(buf, len, "%s", (const char *)v);
	xmlFree(v);
	return true;
}

bool rdb_dx_attr_is(xmlNodePtr n, const char *name, const char *want)
{
	char v[64];

	return rdb_dx_attr(n, name, v, sizeof(v)) && !strcmp(v, want);
}

/* An element's text into buf, blanks around it removed. */
void rdb_dx_text(xmlNodePtr n, char *buf, size_t len)
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

xmlDocPtr rdb_dx_parse(const char *xml, char *err, size_t errlen)
{
	xmlParserCtxtPtr ctx;
	xmlDocPtr doc = NULL;
	xmlNodePtr root;

	if (!xml) {
		rdb_dx_seterr(err, errlen, "no domain XML");
		return NULL;
	}
	ctx = xmlNewParserCtxt();
	if (!ctx) {
		rdb_dx_seterr(err, errlen, "out of memory");
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
		rdb_dx_seterr(err, errlen, "malformed domain XML (line %d): %s",
		       e ? e->line : 0, msg);
	}
	xmlFreeParserCtxt(ctx);
	if (!doc)
		return NULL;
	root = xmlDocGetRootElement(doc);
	if (!rdb_dx_is_elem(root, "domain", NULL)) {
		rdb_dx_seterr(err, errlen, "not a libvirt domain: the root element is <%s>",
		       root ? (const char *)root->name : "nothing");
		xmlFreeDoc(doc);
		return NULL;
	}
	return doc;
}

int rdb_dx_dump(xmlDocPtr doc, char **out, char *err, size_t errlen)
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
		rdb_dx_seterr(err, errlen, "out of memory");
	return rc;
}

xmlNodePtr rdb_dx_find_meta(xmlNodePtr root)
{
	return rdb_dx_child(rdb_dx_child(root, "metadata", NULL), "vm", RDB_DOMXML_NS);
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
void rdb_dx_insert_ordered(xmlNodePtr parent, xmlNodePtr node,
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
		xmlNodePtr a = rdb_dx_child(parent, after[i], NULL);

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

/* A PCI slot on bus 0 no <address> of the domain uses nor ALSO marks
 * (slots enroll gave devices without an address), from 0x03 on. */
static int free_slot(xmlNodePtr devices, const bool *also)
{
	bool used[32] = { false };

	for (int s = 0; also && s < 32; s++)
		used[s] = also[s];
	for (xmlNodePtr d = devices->children; d; d = d->next) {
		xmlNodePtr a = rdb_dx_child(d, "address", NULL);
		char bus[16], slot[16];

		if (!a || !rdb_dx_attr_is(a, "type", "pci"))
			continue;
		rdb_dx_attr(a, "bus", bus, sizeof(bus));
		rdb_dx_attr(a, "slot", slot, sizeof(slot));
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
 * or, without one, a free slot on bus 0 that USED does not mark (marked
 * then).  The slot on bus 0 into *slot_out (-1 on another bus).
 */
static int pci_place(xmlNodePtr root, xmlNodePtr devices, xmlNodePtr dev,
		     const char *what, bool *used, char *bus_out, size_t buslen,
		     char *addr_out, size_t addrlen, int *slot_out, char *err,
		     size_t errlen)
{
	xmlNodePtr a = rdb_dx_child(dev, "address", NULL);
	char machine[64] = "";

	rdb_dx_attr(rdb_dx_child(rdb_dx_child(root, "os", NULL), "type", NULL), "machine", machine,
	     sizeof(machine));
	if (slot_out)
		*slot_out = -1;
	if (a && rdb_dx_attr_is(a, "type", "pci")) {
		char dom[16], bus[16], slot[16], fn[16];
		unsigned long b, sl, f;

		rdb_dx_attr(a, "domain", dom, sizeof(dom));
		rdb_dx_attr(a, "bus", bus, sizeof(bus));
		rdb_dx_attr(a, "slot", slot, sizeof(slot));
		rdb_dx_attr(a, "function", fn, sizeof(fn));
		b = strtoul(bus, NULL, 0);
		sl = strtoul(slot, NULL, 0);
		f = strtoul(fn, NULL, 0);
		if (b > 255 || sl > 31 || f > 7) {
			rdb_dx_seterr(err, errlen, "%s's PCI address %s:%s.%s is out of "
			       "range", what, bus, slot, fn);
			return -EINVAL;
		}
		if (strtoul(dom, NULL, 0) != 0) {
			rdb_dx_seterr(err, errlen, "%s is on PCI domain %s: only domain 0 "
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
		int s = free_slot(devices, used);

		if (s < 0 || strstr(machine, "q35")) {
			rdb_dx_seterr(err, errlen, "%s has no PCI address: define the "
			       "domain first (libvirt assigns one)", what);
			return -EINVAL;
		}
		snprintf(bus_out, buslen, "pci.0");
		snprintf(addr_out, addrlen, "0x%x", s);
		if (slot_out)
			*slot_out = s;
		if (used)
			used[s] = true;
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
		    const char *tap, bool *used, struct nic *nic, char *err,
		    size_t errlen)
{
	xmlNodePtr boot = rdb_dx_child(iface, "boot", NULL);
	char type[32], model[32] = "rtl8139";
	size_t i;

	memset(nic, 0, sizeof(*nic));
	rdb_dx_attr(iface, "type", type, sizeof(type));
	if (!strcmp(type, "hostdev") || !strcmp(type, "vhostuser") ||
	    !strcmp(type, "vdpa")) {
		rdb_dx_seterr(err, errlen, "interface type='%s': its frames do not pass "
		       "through QEMU, so remusdbd cannot hold them", type);
		return -ENOTSUP;
	}
	rdb_dx_attr(rdb_dx_child(iface, "model", NULL), "type", model, sizeof(model));
	if (!model[0])
		snprintf(model, sizeof(model), "rtl8139");
	for (i = 0; i < sizeof(nic_models) / sizeof(nic_models[0]); i++)
		if (!strcmp(model, nic_models[i].model))
			break;
	if (i == sizeof(nic_models) / sizeof(nic_models[0])) {
		rdb_dx_seterr(err, errlen, "interface model '%s': supported are virtio, "
		       "e1000, e1000e and rtl8139", model);
		return -ENOTSUP;
	}
	snprintf(nic->device, sizeof(nic->device), "%s", nic_models[i].device);
	if (!rdb_dx_attr(rdb_dx_child(iface, "mac", NULL), "address", nic->mac, sizeof(nic->mac)) ||
	    strlen(nic->mac) != 17) {
		rdb_dx_seterr(err, errlen, "the interface has no <mac address=...> (libvirt "
		       "writes one in when the domain is defined)");
		return -EINVAL;
	}
	rdb_dx_attr(rdb_dx_child(iface, "source", NULL), "bridge", nic->bridge, sizeof(nic->bridge));
	rdb_dx_attr(rdb_dx_child(iface, "source", NULL), "network", nic->network, sizeof(nic->network));
	if (tap && tap[0]) {
		if (strlen(tap) > 15) {
			rdb_dx_seterr(err, errlen, "tap %s: longer than 15 characters", tap);
			return -EINVAL;
		}
		snprintf(nic->tap, sizeof(nic->tap), "%s", tap);
	} else {
		char t[64];

		rdb_dx_attr(rdb_dx_child(iface, "target", NULL), "dev", t, sizeof(t));
		if (!t[0] || libvirt_tap_name(t) || strlen(t) > 15) {
			rdb_dx_seterr(err, errlen, "which tap device carries the guest's "
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

		rdb_dx_attr(boot, "order", nic->boot, sizeof(nic->boot));
		if (strtoul(nic->boot, &end, 10) == 0 || *end) {
			rdb_dx_seterr(err, errlen, "interface <boot order='%s'>: not a "
			       "number", nic->boot);
			return -EINVAL;
		}
	}
	return pci_place(root, devices, iface, "the interface", used, nic->bus,
			 sizeof(nic->bus), nic->addr, sizeof(nic->addr), NULL,
			 err, errlen);
}

/* A CD-ROM, a floppy or a read-only disk: libvirt's still, its image
 * not replicated (the backup checks its own copy at protect). */
static bool read_only_disk(xmlNodePtr disk)
{
	char dev[32];

	rdb_dx_attr(disk, "device", dev, sizeof(dev));
	return !strcmp(dev, "cdrom") || !strcmp(dev, "floppy") ||
	       (rdb_dx_child(disk, "readonly", NULL) &&
		!rdb_dx_child(disk, "shareable", NULL));
}

static int check_ro_disk(xmlNodePtr disk, char *err, size_t errlen)
{
	char type[32], target[32];

	rdb_dx_attr(disk, "type", type, sizeof(type));
	rdb_dx_attr(rdb_dx_child(disk, "target", NULL), "dev", target, sizeof(target));
	if (strcmp(type, "file") && rdb_dx_child(disk, "source", NULL)) {
		rdb_dx_seterr(err, errlen, "read-only disk %s is type='%s': the "
		       "backup checks a read-only image by its file, so only "
		       "type='file' (or an empty CD-ROM drive)", target, type);
		return -ENOTSUP;
	}
	return 0;
}

static int check_disk(xmlNodePtr disk, char *image, size_t len, char *fmt,
		      size_t fmtlen, char *err, size_t errlen)
{
	char type[32], dev[32], target[32];

	rdb_dx_attr(disk, "type", type, sizeof(type));
	rdb_dx_attr(disk, "device", dev, sizeof(dev));
	rdb_dx_attr(rdb_dx_child(disk, "driver", NULL), "type", fmt, fmtlen);
	rdb_dx_attr(rdb_dx_child(disk, "target", NULL), "dev", target, sizeof(target));
	if (dev[0] && strcmp(dev, "disk")) {
		rdb_dx_seterr(err, errlen, "the domain's disk %s is a %s (device='%s'): "
		       "remusdbd replicates image files (device='disk') and "
		       "passes CD-ROMs and floppies through", target, dev, dev);
		return -ENOTSUP;
	}
	if (strcmp(type, "file")) {
		rdb_dx_seterr(err, errlen, "disk %s is type='%s': remusdbd serves an "
		       "image file (type='file'), not a block device, a network "
		       "or a vhost-user disk", target, type);
		return -ENOTSUP;
	}
	if (!fmt[0])
		snprintf(fmt, fmtlen, "raw");
	if (strcmp(fmt, "raw") && strcmp(fmt, "qcow2")) {
		rdb_dx_seterr(err, errlen, "disk %s is %s: remusdbd serves raw and "
		       "qcow2 images (qemu-img convert -O qcow2)", target, fmt);
		return -ENOTSUP;
	}
	{
		char bus[32];

		rdb_dx_attr(rdb_dx_child(disk, "target", NULL), "bus", bus, sizeof(bus));
		if (strcmp(bus, "virtio") && strcmp(bus, "sata") &&
		    strcmp(bus, "scsi") && strcmp(bus, "ide")) {
			rdb_dx_seterr(err, errlen, "disk %s is on bus '%s': remusdbd "
			       "puts a disk back on virtio, SATA, SCSI or IDE",
			       target, bus[0] ? bus : "?");
			return -ENOTSUP;
		}
	}
	if (rdb_dx_child(disk, "shareable", NULL)) {
		rdb_dx_seterr(err, errlen, "disk %s is shareable (another VM writes "
		       "it too): a replica could not follow it", target);
		return -ENOTSUP;
	}
	if (!rdb_dx_attr(rdb_dx_child(disk, "source", NULL), "file", image, len) || !image[0]) {
		rdb_dx_seterr(err, errlen, "disk %s has no <source file=...>", target);
		return -EINVAL;
	}
	if (strlen(image) >= len - 1) {
		rdb_dx_seterr(err, errlen, "disk %s: image path too long", target);
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
	/* a disk on a controller's bus (SATA, SCSI, IDE): its QEMU device
	 * and where on the bus ("" for virtio-blk, on PCI) */
	char driver[16], where[128];
};

/* libvirt's <address type='drive'> of a disk on a controller, as QEMU's
 * bus properties of the device libvirt would have made (ide-hd on an
 * AHCI or IDE bus, scsi-hd on a SCSI controller's). */
static int drive_place(xmlNodePtr root, xmlNodePtr devices, xmlNodePtr disk,
		       const char *bus, const char *target, struct disk_dev *dd,
		       char *err, size_t errlen)
{
	xmlNodePtr a = rdb_dx_child(disk, "address", NULL), ctl = NULL;
	char machine[64] = "", v[16], model[32] = "";
	unsigned long c, b, t, u;
	const char *ctype = !strcmp(bus, "scsi") ? "scsi" : !strcmp(bus, "sata") ?
		"sata" : "ide";

	if (!a || !rdb_dx_attr_is(a, "type", "drive")) {
		rdb_dx_seterr(err, errlen, "disk %s on bus %s has no <address "
		       "type='drive'>: define the domain first (libvirt assigns "
		       "one)", target, bus);
		return -EINVAL;
	}
	rdb_dx_attr(a, "controller", v, sizeof(v));
	c = strtoul(v, NULL, 10);
	rdb_dx_attr(a, "bus", v, sizeof(v));
	b = strtoul(v, NULL, 10);
	rdb_dx_attr(a, "target", v, sizeof(v));
	t = strtoul(v, NULL, 10);
	rdb_dx_attr(a, "unit", v, sizeof(v));
	u = strtoul(v, NULL, 10);
	for (xmlNodePtr n = devices->children; n; n = n->next) {
		char idx[16];

		if (rdb_dx_is_elem(n, "controller", NULL) &&
		    rdb_dx_attr_is(n, "type", ctype) &&
		    rdb_dx_attr(n, "index", idx, sizeof(idx)) &&
		    strtoul(idx, NULL, 10) == c)
			ctl = n;
	}
	if (!ctl) {
		rdb_dx_seterr(err, errlen, "disk %s is on %s controller %lu, which "
		       "the domain does not define: define the domain first",
		       target, ctype, c);
		return -EINVAL;
	}
	rdb_dx_attr(rdb_dx_child(rdb_dx_child(root, "os", NULL), "type", NULL),
		    "machine", machine, sizeof(machine));
	rdb_dx_attr(ctl, "model", model, sizeof(model));
	if (c > 64 || b > 64 || t > 65535 || u > 65535) {
		rdb_dx_seterr(err, errlen, "disk %s's drive address is out of range",
		       target);
		return -EINVAL;
	}
	if (!strcmp(ctype, "scsi")) {
		if (strstr(model, "vhost") || !strcmp(model, "ibmvscsi")) {
			rdb_dx_seterr(err, errlen, "disk %s is on a %s SCSI controller: "
			       "not one whose requests QEMU serves", target, model);
			return -ENOTSUP;
		}
		snprintf(dd->driver, sizeof(dd->driver), "scsi-hd");
		snprintf(dd->where, sizeof(dd->where), "\"bus\":\"scsi%lu.0\","
			 "\"channel\":%lu,\"scsi-id\":%lu,\"lun\":%lu", c, b, t, u);
	} else if (!strcmp(ctype, "sata")) {
		/* q35's own AHCI (controller 0) is QEMU's "ide" */
		snprintf(dd->driver, sizeof(dd->driver), "ide-hd");
		if (strstr(machine, "q35") && c == 0)
			snprintf(dd->where, sizeof(dd->where), "\"bus\":\"ide.%lu\"", u);
		else
			snprintf(dd->where, sizeof(dd->where), "\"bus\":\"sata%lu.%lu\"",
				 c, u);
	} else {
		snprintf(dd->driver, sizeof(dd->driver), "ide-hd");
		snprintf(dd->where, sizeof(dd->where), "\"bus\":\"ide.%lu\","
			 "\"unit\":%lu", b, u);
	}
	return 0;
}

static int read_disk(xmlNodePtr root, xmlNodePtr devices, xmlNodePtr disk,
		     bool first, bool *used, struct disk_dev *dd, int *slot_out,
		     char *err, size_t errlen)
{
	xmlNodePtr boot = rdb_dx_child(disk, "boot", NULL);
	char target[32];

	memset(dd, 0, sizeof(*dd));
	rdb_dx_attr(rdb_dx_child(disk, "target", NULL), "dev", target, sizeof(target));
	rdb_dx_attr(rdb_dx_child(disk, "driver", NULL), "discard", dd->discard, sizeof(dd->discard));
	if (boot) {
		char *end;

		rdb_dx_attr(boot, "order", dd->boot, sizeof(dd->boot));
		if (strtoul(dd->boot, &end, 10) == 0 || *end) {
			rdb_dx_seterr(err, errlen, "disk %s <boot order='%s'>: not a number",
			       target, dd->boot);
			return -EINVAL;
		}
	} else if (first) {
		/* <os><boot dev='hd'/> (libvirt's default): libvirt gave its
		 * first disk bootindex 1 */
		for (xmlNodePtr b = rdb_dx_child(rdb_dx_child(root, "os", NULL), "boot", NULL); b;
		     b = b->next)
			if (rdb_dx_is_elem(b, "boot", NULL) && rdb_dx_attr_is(b, "dev", "hd"))
				snprintf(dd->boot, sizeof(dd->boot), "1");
		if (!rdb_dx_child(rdb_dx_child(root, "os", NULL), "boot", NULL) &&
		    !rdb_dx_child(rdb_dx_child(root, "os", NULL), "kernel", NULL))
			snprintf(dd->boot, sizeof(dd->boot), "1");
	}
	{
		char bus[32];

		rdb_dx_attr(rdb_dx_child(disk, "target", NULL), "bus", bus, sizeof(bus));
		if (strcmp(bus, "virtio")) {
			*slot_out = -1;
			return drive_place(root, devices, disk, bus, target, dd,
					   err, errlen);
		}
	}
	return pci_place(root, devices, disk, "the disk", used, dd->bus,
			 sizeof(dd->bus), dd->addr, sizeof(dd->addr), slot_out,
			 err, errlen);
}

static int sock_path(char *buf, size_t len, const char *run_dir,
		     const char *name, const char *suffix, char *err,
		     size_t errlen)
{
	int n = snprintf(buf, len, "%s/%s.%s", run_dir, name, suffix);

	if (n < 0 || (size_t)n >= len) {
		rdb_dx_seterr(err, errlen, "%s/%s.%s: longer than a unix socket path "
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

/* A writable disk enroll moves to QEMU's command line. */
struct edisk {
	xmlNodePtr el;
	char image[1024], fmt[16], node[16], sock[108];
	struct disk_dev dd;
	int slot;
};

/* A NIC enroll moves likewise. */
struct enic {
	xmlNodePtr el;
	struct nic nic;
	char sock[108];
};

/* The element's index among PARENT's element children. */
static int elem_index(xmlNodePtr parent, xmlNodePtr el)
{
	int n = 0;

	for (xmlNodePtr c = parent->children; c; c = c->next) {
		if (c == el)
			return n;
		n += c->type == XML_ELEMENT_NODE;
	}
	return -1;
}

/* What libvirt would manage that a checkpoint cannot carry: refused,
 * naming it. */
static int check_other_devices(xmlNodePtr devices, const char *name, char *err,
			       size_t errlen)
{
	for (xmlNodePtr c = devices->children; c; c = c->next) {
		char type[32] = "", drv[32] = "";

		if (rdb_dx_is_elem(c, "hostdev", NULL)) {
			rdb_dx_attr(c, "type", type, sizeof(type));
			rdb_dx_seterr(err, errlen, "domain %s has a passthrough device "
			       "(<hostdev type='%s'>): its state is the hardware's, "
			       "which a checkpoint cannot carry; remove it", name,
			       type[0] ? type : "?");
			return -ENOTSUP;
		}
		if (rdb_dx_is_elem(c, "filesystem", NULL)) {
			rdb_dx_attr(rdb_dx_child(c, "driver", NULL), "type", drv, sizeof(drv));
			rdb_dx_seterr(err, errlen, "domain %s has a <filesystem>%s%s%s: "
			       "its files are the host's, outside any checkpoint; "
			       "remove it", name, drv[0] ? " (driver '" : "", drv,
			       drv[0] ? "')" : "");
			return -ENOTSUP;
		}
	}
	return 0;
}

/*
 * A UEFI guest's firmware (<os><loader type='pflash' readonly='yes'>CODE
 * and <nvram>VARS): the code stays a read-only file (a -blockdev the
 * backup checks against its own copy), the variable store becomes the
 * VM's last replicated disk (nvram), served on NAME.disk<k> after the
 * writable disks; both reach QEMU as -machine pflash0=, pflash1=.
 * 0 with code[0] == 0: no firmware flash of the guest's to move.
 */
struct efw {
	xmlNodePtr loader, nvram, firmware;	/* the elements that leave */
	char code[1024], vars[1024], os_firmware[16];
	bool secure;
};

static int read_firmware(xmlNodePtr os, const char *name, struct efw *f,
			 char *err, size_t errlen)
{
	char type[32], ro[16], fmt[32];

	memset(f, 0, sizeof(*f));
	f->loader = rdb_dx_child(os, "loader", NULL);
	f->nvram = rdb_dx_child(os, "nvram", NULL);
	f->firmware = rdb_dx_child(os, "firmware", NULL);
	rdb_dx_attr(os, "firmware", f->os_firmware, sizeof(f->os_firmware));
	rdb_dx_attr(f->loader, "type", type, sizeof(type));
	if (!f->nvram) {
		if (f->loader && !strcmp(type, "pflash")) {
			rdb_dx_seterr(err, errlen, "domain %s boots from a firmware "
			       "flash with no <nvram>: libvirt would make the "
			       "variable store at start, unreplicated; name one "
			       "(<nvram>PATH</nvram>, a copy of the firmware's "
			       "template) and enroll again", name);
			return -ENOTSUP;
		}
		if (f->os_firmware[0]) {
			rdb_dx_seterr(err, errlen, "domain %s has <os firmware='%s'> "
			       "and no <loader>/<nvram> yet: libvirt picks them at "
			       "start; start it once (or name them) and enroll "
			       "again", name, f->os_firmware);
			return -ENOTSUP;
		}
		f->firmware = NULL;
		f->os_firmware[0] = 0;
		return 0;	/* BIOS, or a ROM loader: libvirt's still */
	}
	if (!f->loader || strcmp(type, "pflash")) {
		rdb_dx_seterr(err, errlen, "domain %s has an <nvram> without a "
		       "<loader type='pflash'>: not a firmware remusdbd knows how "
		       "to pass on", name);
		return -ENOTSUP;
	}
	if (!rdb_dx_attr(f->loader, "readonly", ro, sizeof(ro)) || strcmp(ro, "yes")) {
		rdb_dx_seterr(err, errlen, "domain %s's firmware <loader> is not "
		       "readonly='yes': a writable code flash is not replicated "
		       "(only its <nvram> is)", name);
		return -ENOTSUP;
	}
	if ((rdb_dx_attr(f->loader, "format", fmt, sizeof(fmt)) && strcmp(fmt, "raw")) ||
	    (rdb_dx_attr(f->nvram, "format", fmt, sizeof(fmt)) && strcmp(fmt, "raw"))) {
		rdb_dx_seterr(err, errlen, "domain %s's firmware is in %s format: "
		       "remusdbd passes raw firmware images (the .fd files)",
		       name, fmt);
		return -ENOTSUP;
	}
	rdb_dx_text(f->loader, f->code, sizeof(f->code));
	/* <nvram>PATH</nvram>, or libvirt's newer <nvram type='file'><source
	 * file=PATH/> */
	if (rdb_dx_child(f->nvram, "source", NULL)) {
		rdb_dx_attr(f->nvram, "type", type, sizeof(type));
		if (type[0] && strcmp(type, "file")) {
			rdb_dx_seterr(err, errlen, "domain %s's <nvram type='%s'>: "
			       "remusdbd serves a variable store file", name, type);
			return -ENOTSUP;
		}
		rdb_dx_attr(rdb_dx_child(f->nvram, "source", NULL), "file",
			    f->vars, sizeof(f->vars));
	} else {
		rdb_dx_text(f->nvram, f->vars, sizeof(f->vars));
	}
	if (f->code[0] != '/' || f->vars[0] != '/') {
		rdb_dx_seterr(err, errlen, "domain %s's firmware <loader> and "
		       "<nvram> must be absolute file paths (%s, %s)", name,
		       f->code[0] ? f->code : "none", f->vars[0] ? f->vars : "none");
		return -EINVAL;
	}
	if (strlen(f->code) >= sizeof(f->code) - 1 || strlen(f->vars) >= sizeof(f->vars) - 1) {
		rdb_dx_seterr(err, errlen, "domain %s: a firmware path too long", name);
		return -ENAMETOOLONG;
	}
	f->secure = rdb_dx_attr_is(f->loader, "secure", "yes");
	return 0;
}

/* libvirt's order of <os> children (virDomainDefFormatInternal): a
 * firmware element put back goes before the first one after it. */
const char *const rdb_dx_os_order[] = {
	"type", "firmware", "loader", "nvram", "kernel", "initrd", "cmdline",
	"shim", "dtb", "acpi", "initarg", "bootmenu", "boot", "smbios", "bios",
};
const size_t rdb_dx_nos_order = sizeof(rdb_dx_os_order) / sizeof(rdb_dx_os_order[0]);

int rdb_domxml_enroll(const char *xml, const struct rdb_enroll_params *p,
		      char **xml_out, char *err, size_t errlen)
{
	/* libvirt's order: name uuid genid title description metadata ...
	 * os idmap features */
	static const char *const meta_after[] = { "description", "title", "genid",
						  "uuid", "name" };
	static const char *const features_after[] = { "idmap", "os" };
	char name[128], dtype[32], added[128] = "";
	char qmp[108], wd[108], ev[108], buf[1400], positions[256] = "";
	char orig_emu[1024], machine[64] = "", suffix[16], nvsock[108] = "";
	struct efw fw;
	int ev_slot = -1;
	xmlNodePtr root, devices, meta, m, undo, os;
	xmlNodePtr metadata, features, cmdline, emulator;
	xmlNsPtr rns, qns;
	struct edisk *dk = NULL;
	struct enic nics[RDB_DOMXML_NICS_MAX];
	unsigned ndk = 0, nnic = 0;
	bool used[32] = { false };
	xmlDocPtr doc;
	int rc;

	*xml_out = NULL;
	if (!p || !p->emulator || p->emulator[0] != '/' || !p->run_dir ||
	    p->run_dir[0] != '/') {
		rdb_dx_seterr(err, errlen, "the emulator and remusdbd's run_dir must be "
		       "absolute paths");
		return -EINVAL;
	}
	doc = rdb_dx_parse(xml, err, errlen);
	if (!doc)
		return -EINVAL;
	root = xmlDocGetRootElement(doc);
	if (rdb_dx_find_meta(root)) {
		xmlFreeDoc(doc);
		return 1;
	}
	dk = calloc(RDB_DOMXML_DISKS_MAX, sizeof(*dk));
	if (!dk) {
		xmlFreeDoc(doc);
		rdb_dx_seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = -ENOTSUP;
	rdb_dx_attr(root, "type", dtype, sizeof(dtype));
	if (strcmp(dtype, "qemu") && strcmp(dtype, "kvm")) {
		rdb_dx_seterr(err, errlen, "domain type '%s': only QEMU domains (qemu, "
		       "kvm) can be protected", dtype);
		goto out;
	}
	rdb_dx_text(rdb_dx_child(root, "name", NULL), name, sizeof(name));
	if (!name_ok(name)) {
		rdb_dx_seterr(err, errlen, "domain name '%s': remusdbd names VMs with "
		       "[A-Za-z0-9_.-], 1-64 characters", name);
		rc = -EINVAL;
		goto out;
	}
	devices = rdb_dx_child(root, "devices", NULL);
	if (!devices) {
		rdb_dx_seterr(err, errlen, "domain %s has no <devices>", name);
		rc = -EINVAL;
		goto out;
	}
	os = rdb_dx_child(root, "os", NULL);
	rc = read_firmware(os, name, &fw, err, errlen);
	if (rc < 0)
		goto out;
	rc = check_other_devices(devices, name, err, errlen);
	if (rc < 0)
		goto out;
	rc = -ENOTSUP;
	/* the disks (in order; CD-ROMs and read-only ones stay) and NICs */
	for (xmlNodePtr c = devices->children; c; c = c->next) {
		if (rdb_dx_is_elem(c, "disk", NULL)) {
			if (read_only_disk(c)) {
				rc = check_ro_disk(c, err, errlen);
				if (rc < 0)
					goto out;
				continue;
			}
			if (ndk == RDB_DOMXML_DISKS_MAX) {
				rdb_dx_seterr(err, errlen, "domain %s has more than %d "
				       "writable disks: remusdbd replicates up to %d",
				       name, RDB_DOMXML_DISKS_MAX, RDB_DOMXML_DISKS_MAX);
				rc = -ENOTSUP;
				goto out;
			}
			dk[ndk].el = c;
			rc = check_disk(c, dk[ndk].image, sizeof(dk[ndk].image),
					dk[ndk].fmt, sizeof(dk[ndk].fmt), err, errlen);
			if (rc < 0)
				goto out;
			ndk++;
		} else if (rdb_dx_is_elem(c, "interface", NULL)) {
			if (nnic == RDB_DOMXML_NICS_MAX) {
				rdb_dx_seterr(err, errlen, "domain %s has more than %d "
				       "network interfaces: remusdbd relays up to %d",
				       name, RDB_DOMXML_NICS_MAX, RDB_DOMXML_NICS_MAX);
				rc = -ENOTSUP;
				goto out;
			}
			nics[nnic++].el = c;
		}
	}
	if (nnic == 0) {
		rdb_dx_seterr(err, errlen, "domain %s has no network interface: "
		       "remusdbd relays at least one", name);
		rc = -ENOTSUP;
		goto out;
	}
	if (p->nmore_taps && p->nmore_taps + 1 != nnic) {
		rdb_dx_seterr(err, errlen, "domain %s has %u network interfaces and "
		       "%zu taps were given: one --tap per interface, in order",
		       name, nnic, p->nmore_taps + 1);
		rc = -EINVAL;
		goto out;
	}
	for (unsigned k = 0; k < ndk; k++) {
		rc = read_disk(root, devices, dk[k].el, k == 0, used, &dk[k].dd,
			       &dk[k].slot, err, errlen);
		if (rc < 0)
			goto out;
		if (k == 0)
			snprintf(dk[k].node, sizeof(dk[k].node), "%s",
				 RDB_DOMXML_DISK_NODE);
		else
			snprintf(dk[k].node, sizeof(dk[k].node), "disk%u", k);
		snprintf(suffix, sizeof(suffix), k ? "disk%u" : "disk", k);
		rc = sock_path(dk[k].sock, sizeof(dk[k].sock), p->run_dir, name,
			       suffix, err, errlen);
		if (rc < 0)
			goto out;
	}
	if (fw.vars[0]) {
		if (ndk == 0) {
			rdb_dx_seterr(err, errlen, "domain %s: a UEFI variable store "
			       "is replicated beside the VM's disks, and it has "
			       "no writable disk", name);
			rc = -ENOTSUP;
			goto out;
		}
		if (ndk + 1 > RDB_DOMXML_DISKS_MAX) {
			rdb_dx_seterr(err, errlen, "domain %s has %u writable disks "
			       "and a UEFI variable store: remusdbd replicates up to "
			       "%d images in all", name, ndk, RDB_DOMXML_DISKS_MAX);
			rc = -ENOTSUP;
			goto out;
		}
		snprintf(suffix, sizeof(suffix), "disk%u", ndk);
		rc = sock_path(nvsock, sizeof(nvsock), p->run_dir, name, suffix,
			       err, errlen);
		if (rc < 0)
			goto out;
	}
	for (unsigned k = 0; k < nnic; k++) {
		const char *tap = k == 0 ? p->tap : k - 1 < p->nmore_taps ?
			p->more_taps[k - 1] : NULL;

		rc = read_nic(root, devices, nics[k].el, tap, used, &nics[k].nic,
			      err, errlen);
		if (rc < 0) {
			if (nnic > 1) {
				char e2[400];

				snprintf(e2, sizeof(e2), "%s", err);
				rdb_dx_seterr(err, errlen, "interface %u (MAC %s): %s",
				       k, nics[k].nic.mac[0] ? nics[k].nic.mac : "?", e2);
			}
			goto out;
		}
		snprintf(suffix, sizeof(suffix), k ? "net%u" : "net", k);
		rc = sock_path(nics[k].sock, sizeof(nics[k].sock), p->run_dir, name,
			       suffix, err, errlen);
		if (rc < 0)
			goto out;
	}
	for (unsigned k = 1; k < nnic; k++)
		for (unsigned j = 0; j < k; j++)
			if (!strcmp(nics[j].nic.tap, nics[k].nic.tap)) {
				rdb_dx_seterr(err, errlen, "interfaces %u and %u would both "
				       "use tap %s: one --tap per interface", j, k,
				       nics[k].nic.tap);
				rc = -EINVAL;
				goto out;
			}
	rc = sock_path(qmp, sizeof(qmp), p->run_dir, name, "qmp", err, errlen);
	if (rc == 0)
		rc = sock_path(wd, sizeof(wd), p->run_dir, name, "wd.qmp", err, errlen);
	if (rc == 0)
		rc = sock_path(ev, sizeof(ev), p->run_dir, name, "event", err, errlen);
	if (rc < 0)
		goto out;
	rdb_dx_attr(rdb_dx_child(os, "type", NULL), "machine", machine, sizeof(machine));
	if (p->event_port) {
		/* the port's controller: a slot on bus 0 that nothing of the
		 * domain's uses, nor the disks or NICs where enroll put them
		 * (their elements are still among the devices here) */
		ev_slot = free_slot(devices, used);
		if (ev_slot < 0) {
			rdb_dx_seterr(err, errlen, "domain %s has no free PCI slot on "
			       "bus 0 for the failover event port", name);
			rc = -ENOTSUP;
			goto out;
		}
	}
	/* where each element that leaves was among the devices: unenroll
	 * puts it back there */
	{
		size_t at = 0;
		int idx[RDB_DOMXML_DISKS_MAX + RDB_DOMXML_NICS_MAX];
		unsigned n = 0;

		for (unsigned k = 0; k < ndk; k++)
			idx[n++] = elem_index(devices, dk[k].el);
		for (unsigned k = 0; k < nnic; k++)
			idx[n++] = elem_index(devices, nics[k].el);
		for (unsigned k = 0; k < n && at < sizeof(positions); k++)
			at += (size_t)snprintf(positions + at, sizeof(positions) - at,
					       "%s%d", k ? " " : "", idx[k]);
	}

	/* Checked: from here on the tree changes. */
	rc = -ENOMEM;
	metadata = rdb_dx_child(root, "metadata", NULL);
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
	for (unsigned k = 0; k < nnic; k++) {
		struct nic *n = &nics[k].nic;

		m = xmlNewChild(meta, rns, X("net"), NULL);
		if (!m)
			goto nomem;
		xmlNewProp(m, X("socket"), X(nics[k].sock));
		xmlNewProp(m, X("mac"), X(n->mac));
		xmlNewProp(m, X("tap"), X(n->tap));
		if (n->bridge[0])
			xmlNewProp(m, X("bridge"), X(n->bridge));
		if (n->network[0])
			xmlNewProp(m, X("network"), X(n->network));
		xmlNewProp(m, X("device"), X(n->device));
	}
	for (unsigned k = 0; k < ndk; k++) {
		m = xmlNewChild(meta, rns, X("disk"), NULL);
		if (!m)
			goto nomem;
		xmlNewProp(m, X("socket"), X(dk[k].sock));
		xmlNewProp(m, X("image"), X(dk[k].image));
		if (strcmp(dk[k].fmt, "raw"))
			xmlNewProp(m, X("format"), X(dk[k].fmt));
	}
	if (fw.vars[0]) {
		m = xmlNewChild(meta, rns, X("nvram"), NULL);
		if (!m)
			goto nomem;
		xmlNewProp(m, X("socket"), X(nvsock));
		xmlNewProp(m, X("image"), X(fw.vars));
		xmlNewProp(m, X("code"), X(fw.code));
	}
	if (p->event_port) {
		m = xmlNewChild(meta, rns, X("event"), NULL);
		if (m)
			xmlNewProp(m, X("socket"), X(ev));
	}
	undo = xmlNewChild(meta, rns, X("undo"), NULL);
	if (!undo)
		goto nomem;

	emulator = rdb_dx_child(devices, "emulator", NULL);
	if (emulator) {
		rdb_dx_text(emulator, orig_emu, sizeof(orig_emu));
		xmlNewProp(undo, X("emulator"), X(orig_emu));
		xmlNodeSetContent(emulator, NULL);
		xmlNodeAddContent(emulator, X(p->emulator));
	} else {
		emulator = xmlNewNode(NULL, X("emulator"));
		if (!emulator)
			goto nomem;
		xmlNodeAddContent(emulator, X(p->emulator));
		rdb_dx_insert_ordered(devices, emulator, rdb_dx_device_order,
			       rdb_dx_ndevice_order);
		strcat(added, " emulator");
	}

	features = rdb_dx_child(root, "features", NULL);
	if (!features) {
		features = new_after(root, "features", features_after, 2);
		strcat(added, " features");
	}
	if (!features)
		goto nomem;
	if (!rdb_dx_child(features, "acpi", NULL)) {
		xmlNodePtr acpi = xmlNewNode(NULL, X("acpi")), pae = rdb_dx_child(features, "pae", NULL);

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

	/* the originals, kept whole, in the order positions lists them
	 * (an emulator enroll added came first among the devices: the
	 * positions are the domain's own, before it) */
	for (unsigned k = 0; k < ndk; k++) {
		xmlUnlinkNode(dk[k].el);
		xmlAddChild(undo, dk[k].el);
	}
	for (unsigned k = 0; k < nnic; k++) {
		xmlUnlinkNode(nics[k].el);
		xmlAddChild(undo, nics[k].el);
	}
	xmlNewProp(undo, X("positions"), X(positions));
	/* the firmware's elements (back into <os> by name: they have one
	 * place each) and <os firmware=...> (autoselection would add a
	 * flash of libvirt's beside the ones on the command line) */
	if (fw.vars[0]) {
		xmlNodePtr fwel[3] = { fw.firmware, fw.loader, fw.nvram };

		for (int k = 0; k < 3; k++)
			if (fwel[k]) {
				xmlUnlinkNode(fwel[k]);
				xmlAddChild(undo, fwel[k]);
			}
		if (fw.os_firmware[0]) {
			xmlNewProp(undo, X("os-firmware"), X(fw.os_firmware));
			xmlUnsetProp(os, X("firmware"));
		}
	}

	qns = xmlSearchNsByHref(doc, root, X(RDB_DOMXML_QEMU_NS));
	if (!qns) {
		qns = xmlNewNs(root, X(RDB_DOMXML_QEMU_NS), X("qemu"));
		strcat(added, " qemu-ns");
	}
	if (!qns)
		goto nomem;
	cmdline = rdb_dx_child(root, "commandline", RDB_DOMXML_QEMU_NS);
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
	/* net<k>: the ids remusdbd's restore gives the backup's netdevs */
	for (unsigned k = 0; k < nnic; k++) {
		add_arg(cmdline, qns, undo, rns, "-netdev");
		snprintf(buf, sizeof(buf), "stream,id=net%u,server=off,addr.type=unix,"
			 "addr.path=%s,reconnect-ms=100", k, nics[k].sock);
		add_arg(cmdline, qns, undo, rns, buf);
	}
	for (unsigned k = 0; k < ndk; k++) {
		struct disk_dev *dd = &dk[k].dd;
		char nbd[400], disc[64] = "";

		if (dd->discard[0])
			snprintf(disc, sizeof(disc), ",\"discard\":\"%s\"", dd->discard);
		snprintf(nbd, sizeof(nbd), "\"driver\":\"nbd\",\"server\":{\"type\":"
			 "\"unix\",\"path\":\"%s\"}", dk[k].sock);
		add_arg(cmdline, qns, undo, rns, "-blockdev");
		/* a qcow2 image: its format node on the NBD export of the
		 * file's bytes (the replica is the same qcow2 file) */
		if (!strcmp(dk[k].fmt, "qcow2"))
			snprintf(buf, sizeof(buf), "{\"driver\":\"qcow2\",\"node-name\":"
				 "\"%s\",\"file\":{%s,\"reconnect-delay\":15}%s}",
				 dk[k].node, nbd, disc);
		else
			snprintf(buf, sizeof(buf), "{%s,\"node-name\":\"%s\","
				 "\"reconnect-delay\":15%s}", nbd, dk[k].node, disc);
		add_arg(cmdline, qns, undo, rns, buf);
		add_arg(cmdline, qns, undo, rns, "-device");
		if (dd->driver[0])
			snprintf(buf, sizeof(buf), "{\"driver\":\"%s\",%s,\"drive\":"
				 "\"%s\",\"id\":\"rdbblk%u\"%s%s}", dd->driver,
				 dd->where, dk[k].node, k,
				 dd->boot[0] ? ",\"bootindex\":" : "", dd->boot);
		else
			snprintf(buf, sizeof(buf), "{\"driver\":\"virtio-blk-pci\",\"drive\":"
				 "\"%s\",\"id\":\"rdbblk%u\",\"bus\":\"%s\",\"addr\":\"%s\"%s%s}",
				 dk[k].node, k, dd->bus, dd->addr,
				 dd->boot[0] ? ",\"bootindex\":" : "", dd->boot);
		add_arg(cmdline, qns, undo, rns, buf);
	}
	if (fw.vars[0]) {
		/* the code read-only (libvirt's CD-ROMs' way: the backup opens
		 * its own copy), the variable store on remusdbd's socket; one
		 * -machine each (QEMU merges them with libvirt's), so a
		 * backup's restore can give pflash1 its replica */
		json_t *j = json_pack("{s:s, s:s, s:s, s:b}", "driver", "file",
				      "filename", fw.code, "node-name",
				      RDB_DOMXML_PFLASH0_NODE, "read-only", 1);
		char *t = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

		json_decref(j);
		if (!t)
			goto nomem;
		add_arg(cmdline, qns, undo, rns, "-blockdev");
		add_arg(cmdline, qns, undo, rns, t);
		free(t);
		add_arg(cmdline, qns, undo, rns, "-machine");
		add_arg(cmdline, qns, undo, rns, "pflash0=" RDB_DOMXML_PFLASH0_NODE);
		add_arg(cmdline, qns, undo, rns, "-blockdev");
		snprintf(buf, sizeof(buf), "{\"driver\":\"nbd\",\"server\":{\"type\":"
			 "\"unix\",\"path\":\"%s\"},\"node-name\":\"%s\","
			 "\"reconnect-delay\":15}", nvsock, RDB_DOMXML_NVRAM_NODE);
		add_arg(cmdline, qns, undo, rns, buf);
		add_arg(cmdline, qns, undo, rns, "-machine");
		add_arg(cmdline, qns, undo, rns, "pflash1=" RDB_DOMXML_NVRAM_NODE);
		if (fw.secure) {
			/* libvirt's secure='yes' (Secure Boot's SMM-only flash) */
			add_arg(cmdline, qns, undo, rns, "-global");
			add_arg(cmdline, qns, undo, rns,
				"driver=cfi.pflash01,property=secure,value=on");
		}
	}
	for (unsigned k = 0; k < nnic; k++) {
		struct nic *n = &nics[k].nic;

		add_arg(cmdline, qns, undo, rns, "-device");
		snprintf(buf, sizeof(buf), "{\"driver\":\"%s\",\"netdev\":\"net%u\","
			 "\"mac\":\"%s\",\"id\":\"rdbnic%u\",\"bus\":\"%s\",\"addr\":"
			 "\"%s\"%s%s}", n->device, k, n->mac, k, n->bus, n->addr,
			 n->boot[0] ? ",\"bootindex\":" : "", n->boot);
		add_arg(cmdline, qns, undo, rns, buf);
	}
	if (p->event_port) {
		/* the chardev's id and the port's name are what a backup's
		 * restore and the guest's remusdb-eventd look for */
		add_arg(cmdline, qns, undo, rns, "-chardev");
		snprintf(buf, sizeof(buf), "socket,id=rdbevent,path=%s,"
			 "server=on,wait=off", ev);
		add_arg(cmdline, qns, undo, rns, buf);
		/* JSON, as libvirt's own devices: QEMU creates the devices
		 * given in dotted form before those, and one without an
		 * address would take a slot a later device of libvirt's
		 * names (seen: the NIC's) */
		add_arg(cmdline, qns, undo, rns, "-device");
		snprintf(buf, sizeof(buf), "{\"driver\":\"virtio-serial-pci\","
			 "\"id\":\"rdbvser\",\"bus\":\"%s\",\"addr\":\"0x%x\"}",
			 strstr(machine, "q35") ? "pcie.0" : "pci.0", ev_slot);
		add_arg(cmdline, qns, undo, rns, buf);
		add_arg(cmdline, qns, undo, rns, "-device");
		add_arg(cmdline, qns, undo, rns, "{\"driver\":\"virtserialport\","
			"\"bus\":\"rdbvser.0\",\"chardev\":\"rdbevent\","
			"\"name\":\"org.remusdb.0\"}");
	}
	if (added[0])
		xmlNewProp(undo, X("added"), X(added + 1));
	rc = rdb_dx_dump(doc, xml_out, err, errlen);
	goto out;
nomem:
	rdb_dx_seterr(err, errlen, "out of memory");
	rc = -ENOMEM;
out:
	free(dk);
	xmlFreeDoc(doc);
	return rc;
}

int rdb_domxml_normalize(const char *xml, char **xml_out, char *err,
			 size_t errlen)
{
	xmlDocPtr doc = rdb_dx_parse(xml, err, errlen);
	int rc;

	*xml_out = NULL;
	if (!doc)
		return -EINVAL;
	rc = rdb_dx_dump(doc, xml_out, err, errlen);
	xmlFreeDoc(doc);
	return rc;
}

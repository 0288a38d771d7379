// SPDX-License-Identifier: GPL-2.0-only
/* The synthesized incoming stream of a restore; grammar in restore.h. */
#include "qemu/restore.h"
#include "buf.h"
#include "hv.h"
#include "ramblock.h"
#include "sockutil.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* QEMU migration/savevm.h and migration/ram.c, format version 3. */
#define VM_MAGIC 0x5145564du
#define VM_VERSION 3
#define VM_EOF 0x00
#define VM_SECTION_START 0x01
#define VM_SECTION_END 0x03
#define VM_SECTION_FULL 0x04
#define VM_SUBSECTION 0x05
#define VM_VMDESCRIPTION 0x06
#define VM_CONFIGURATION 0x07
#define VM_SECTION_FOOTER 0x7e
#define RAM_ZERO 0x02
#define RAM_MEM_SIZE 0x04
#define RAM_PAGE 0x08
#define RAM_EOS 0x10
#define RAM_CONTINUE 0x20
#define RAM_VERSION 4

/* The loader finds the RAM handler by name in SECTION_START and remembers
 * this id for SECTION_END; device sections are found by name too, so any
 * id works.  This one is clear of the primary's small ids anyway. */
#define RAM_SECTION_ID 0x7ffffff0u

#define SUB_TPB "configuration/target-page-bits"
#define SUB_CAPS "configuration/capabilities"
#define SUB_UUID "configuration/uuid"
#define CAP_IGNORE_SHARED "x-ignore-shared"
#define MAX_CAPS 64		/* QEMU 10.0 has 24 capabilities */
#define UUID_LEN 16

/* QEMU only skips the vmdesc; an empty object is a valid one. */
#define VMDESC_STUB "{\"page_size\": 4096, \"devices\": []}"

/* ---- reading the primary's configuration section ---- */

struct rd {
	const uint8_t *p;
	size_t len, at;
};

static int get_bytes(struct rd *r, size_t n, const uint8_t **out)
{
	if (r->len - r->at < n)
		return -EPROTO;
	*out = r->p + r->at;
	r->at += n;
	return 0;
}

static int get8(struct rd *r, uint8_t *v)
{
	const uint8_t *p;
	int rc = get_bytes(r, 1, &p);

	if (rc == 0)
		*v = p[0];
	return rc;
}

static int get32(struct rd *r, uint32_t *v)
{
	const uint8_t *p;
	int rc = get_bytes(r, 4, &p);

	if (rc == 0)
		*v = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
		     (uint32_t)p[2] << 8 | p[3];
	return rc;
}

struct config {
	const uint8_t *machine;
	uint32_t machine_len;
	bool have_tpb, have_caps, have_uuid;
	uint32_t tpb;
	struct {
		const uint8_t *name;
		uint8_t len;
	} cap[MAX_CAPS];
	uint32_t ncaps;
	const uint8_t *uuid;
};

static bool name_is(const uint8_t *s, size_t n, const char *want)
{
	return n == strlen(want) && memcmp(s, want, n) == 0;
}

static int parse_caps(struct rd *r, struct config *c)
{
	int rc = get32(r, &c->ncaps);

	if (rc < 0)
		return rc;
	if (c->ncaps > MAX_CAPS)
		return -EPROTO;
	for (uint32_t i = 0; i < c->ncaps; i++) {
		rc = get8(r, &c->cap[i].len);
		if (rc == 0)
			rc = get_bytes(r, c->cap[i].len, &c->cap[i].name);
		if (rc < 0)
			return rc;
	}
	c->have_caps = true;
	return 0;
}

/*
 * config = 0x07 len:be32 machine[len] sub*; each subsection has a layout
 * of its own and no length, so one we do not know ends the parse.
 */
static int parse_config(const uint8_t *p, size_t len, struct config *c)
{
	struct rd r = { p, len, 0 };
	uint8_t t;
	int rc;

	memset(c, 0, sizeof(*c));
	rc = get8(&r, &t);
	if (rc == 0 && t != VM_CONFIGURATION)
		rc = -EPROTO;
	if (rc == 0)
		rc = get32(&r, &c->machine_len);
	if (rc == 0 && (c->machine_len == 0 || c->machine_len > 255))
		rc = -EPROTO;
	if (rc == 0)
		rc = get_bytes(&r, c->machine_len, &c->machine);
	while (rc == 0 && r.at < r.len) {
		const uint8_t *name;
		uint8_t nlen;
		uint32_t version;

		rc = get8(&r, &t);
		if (rc == 0 && t != VM_SUBSECTION)
			rc = -EPROTO;
		if (rc == 0)
			rc = get8(&r, &nlen);
		if (rc == 0)
			rc = get_bytes(&r, nlen, &name);
		if (rc == 0)
			rc = get32(&r, &version);
		if (rc == 0 && version != 1)
			rc = -EPROTO;
		if (rc < 0)
			break;
		if (name_is(name, nlen, SUB_TPB) && !c->have_tpb) {
			rc = get32(&r, &c->tpb);
			c->have_tpb = true;
		} else if (name_is(name, nlen, SUB_CAPS) && !c->have_caps) {
			rc = parse_caps(&r, c);
		} else if (name_is(name, nlen, SUB_UUID) && !c->have_uuid) {
			rc = get_bytes(&r, UUID_LEN, &c->uuid);
			c->have_uuid = true;
		} else {
			rc = -EPROTO;	/* unknown or repeated */
		}
	}
	return rc;
}

/* ---- writing the stream: the first error sticks, later puts do nothing */

struct out {
	struct rdb_buf b;
	int rc;
};

static void put_bytes(struct out *o, const void *p, size_t n)
{
	if (o->rc == 0)
		o->rc = rdb_buf_append(&o->b, p, n);
}

static void put8(struct out *o, uint8_t v)
{
	put_bytes(o, &v, 1);
}

static void put32(struct out *o, uint32_t v)
{
	uint8_t p[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16),
			 (uint8_t)(v >> 8), (uint8_t)v };

	put_bytes(o, p, 4);
}

static void put64(struct out *o, uint64_t v)
{
	put32(o, (uint32_t)(v >> 32));
	put32(o, (uint32_t)v);
}

/* len:u8 s; callers checked that s fits. */
static void put_str8(struct out *o, const char *s)
{
	size_t n = strlen(s);

	put8(o, (uint8_t)n);
	put_bytes(o, s, n);
}

static void put_subsection(struct out *o, const char *name)
{
	put8(o, VM_SUBSECTION);
	put_str8(o, name);
	put32(o, 1);
}

static void put_config(struct out *o, const struct config *c)
{
	uint32_t n = 0;

	put8(o, VM_CONFIGURATION);
	put32(o, c->machine_len);
	put_bytes(o, c->machine, c->machine_len);
	/* QEMU's order: target-page-bits, capabilities, uuid. */
	if (c->have_tpb) {
		put_subsection(o, SUB_TPB);
		put32(o, c->tpb);
	}
	for (uint32_t i = 0; i < c->ncaps; i++)
		if (!name_is(c->cap[i].name, c->cap[i].len, CAP_IGNORE_SHARED))
			n++;
	put_subsection(o, SUB_CAPS);
	put32(o, n + 1);
	for (uint32_t i = 0; i < c->ncaps; i++) {
		if (name_is(c->cap[i].name, c->cap[i].len, CAP_IGNORE_SHARED))
			continue;
		put8(o, c->cap[i].len);
		put_bytes(o, c->cap[i].name, c->cap[i].len);
	}
	put_str8(o, CAP_IGNORE_SHARED);
	if (c->have_uuid) {
		put_subsection(o, SUB_UUID);
		put_bytes(o, c->uuid, UUID_LEN);
	}
}

static void put_section_header(struct out *o, uint8_t type)
{
	put8(o, type);
	put32(o, RAM_SECTION_ID);
}

static void put_footer(struct out *o)
{
	put64(o, RAM_EOS);
	put8(o, VM_SECTION_FOOTER);
	put32(o, RAM_SECTION_ID);
}

static void put_ram_start(struct out *o, const struct rdb_restore_spec *s,
			  uint64_t total)
{
	put_section_header(o, VM_SECTION_START);
	put_str8(o, "ram");
	put32(o, 0);			/* instance */
	put32(o, RAM_VERSION);
	put64(o, total | RAM_MEM_SIZE);
	for (size_t i = 0; i < s->nblocks; i++) {
		put_str8(o, s->blocks[i].idstr);
		put64(o, s->blocks[i].used_length);
		put64(o, 0);		/* gpa: see restore.h */
	}
	put_footer(o);
}

static bool page_is_zero(const uint8_t *p)
{
	static const uint8_t zero[RDB_PAGE_SIZE];

	return memcmp(p, zero, RDB_PAGE_SIZE) == 0;
}

static void put_ram_end(struct out *o, const struct rdb_restore_spec *s)
{
	put_section_header(o, VM_SECTION_END);
	for (size_t i = 0; i < s->nblocks && o->rc == 0; i++) {
		const struct rdb_restore_block *blk = &s->blocks[i];

		if (blk->shared)
			continue;
		for (uint64_t off = 0; off < blk->used_length && o->rc == 0;
		     off += RDB_PAGE_SIZE) {
			const uint8_t *pg = blk->data + off;
			bool zero = page_is_zero(pg);

			/* Every page is sent: the fresh QEMU's ROMs hold its
			 * own firmware, which may differ from the primary's. */
			put64(o, off | (zero ? RAM_ZERO : RAM_PAGE) |
			      (off ? RAM_CONTINUE : 0));
			if (off == 0)
				put_str8(o, blk->idstr);
			if (zero)
				put8(o, 0);
			else
				put_bytes(o, pg, RDB_PAGE_SIZE);
		}
	}
	put_footer(o);
}

static int check_spec(const struct rdb_restore_spec *s, uint64_t *total_out)
{
	uint64_t total = 0;

	if (!s->config || !s->blocks || !s->devstate)
		return -EINVAL;
	if (s->nblocks == 0 || s->nblocks > RDB_MAX_RAM_BLOCKS)
		return -EINVAL;
	/* Device sections, then EOF: what QEMU sent after VMSTATE_SIZE. */
	if (s->devstate_len < 2 || s->devstate[0] != VM_SECTION_FULL ||
	    s->devstate[s->devstate_len - 1] != VM_EOF)
		return -EINVAL;
	for (size_t i = 0; i < s->nblocks; i++) {
		const struct rdb_restore_block *b = &s->blocks[i];
		size_t n = b->idstr ? strlen(b->idstr) : 0;

		if (n == 0 || n > 255)
			return -EINVAL;
		if (b->used_length == 0 || b->used_length % RDB_PAGE_SIZE ||
		    b->used_length > UINT64_MAX / 2 - total)
			return -EINVAL;
		if (!b->shared && !b->data)
			return -EINVAL;
		total += b->used_length;
	}
	*total_out = total;
	return 0;
}

int rdb_restore_stream_build(const struct rdb_restore_spec *spec,
			     uint8_t **buf_out, size_t *len_out)
{
	struct config cfg;
	struct out o;
	uint64_t total;
	int rc;

	rc = check_spec(spec, &total);
	if (rc < 0)
		return rc;
	rc = parse_config(spec->config, spec->config_len, &cfg);
	if (rc < 0)
		return rc;

	rdb_buf_init(&o.b);
	o.rc = 0;
	put32(&o, VM_MAGIC);
	put32(&o, VM_VERSION);
	put_config(&o, &cfg);
	put_ram_start(&o, spec, total);
	put_ram_end(&o, spec);
	put_bytes(&o, spec->devstate, spec->devstate_len);
	/* After EOF the loader reads a vmdesc; without one it logs an
	 * error (and a socket not yet closed would stall it). */
	put8(&o, VM_VMDESCRIPTION);
	put32(&o, (uint32_t)strlen(VMDESC_STUB));
	put_bytes(&o, VMDESC_STUB, strlen(VMDESC_STUB));
	if (o.rc < 0) {
		rdb_buf_dispose(&o.b);
		return o.rc;
	}
	/* Nothing was consumed, so the bytes start at the block's start:
	 * hand the block itself over. */
	if (o.b.data != o.b.mem)
		memmove(o.b.mem, o.b.data, o.b.len);
	*buf_out = o.b.mem;
	*len_out = o.b.len;
	return 0;
}

int rdb_restore_stream_send(int fd, const uint8_t *buf, size_t len,
			    uint64_t deadline_ns)
{
	return rdb_sock_write_all(fd, buf, len, deadline_ns);
}

void rdb_restore_argv_free(char **argv)
{
	if (!argv)
		return;
	for (char **a = argv; *a; a++)
		free(*a);
	free(argv);
}

/* Appends a formatted copy; argv keeps a NULL after the last one. */
static int push(char **v, size_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int push(char **v, size_t *n, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&v[*n], fmt, ap);
	va_end(ap);
	if (r < 0) {
		v[*n] = NULL;
		return -ENOMEM;
	}
	(*n)++;
	return 0;
}

int rdb_restore_argv(const char *qemu_binary, char *const *common,
		     size_t ncommon, const char *image_path, uint64_t ram_bytes,
		     const char *qmp_path, const char *wd_qmp_path,
		     const char *net_path, const char *console_path,
		     const char *serial_sock, const char *drive,
		     const char *event_path, const char *const *more_drives,
		     size_t nmore, const char *const *more_nets,
		     size_t nnets, char ***argv_out)
{
	/* binary + common + 20 of ours + the other drives and NICs + NULL */
	size_t n = 0, max = 1 + ncommon + 20 + 2 * nmore + 2 * nnets + 1;
	char **v;
	int rc = 0;

	if (!qemu_binary || !image_path || !qmp_path || ram_bytes == 0 ||
	    ram_bytes % RDB_PAGE_SIZE)
		return -EINVAL;
	v = calloc(max, sizeof(*v));
	if (!v)
		return -ENOMEM;
	rc = push(v, &n, "%s", qemu_binary);
	for (size_t i = 0; rc == 0 && i < ncommon; i++)
		rc = push(v, &n, "%s", common[i]);
	/* The main RAM block on the image file; QEMU names the RAMBlock
	 * after the backend id, so it matches the primary's "pc.ram". */
	if (rc == 0)
		rc = push(v, &n, "-object");
	if (rc == 0)
		rc = push(v, &n, "memory-backend-file,id=%s,size=%llu,"
			  "mem-path=%s,share=on", RDB_RESTORE_SHARED_BLOCK,
			  (unsigned long long)ram_bytes, image_path);
	if (rc == 0)
		rc = push(v, &n, "-machine");
	if (rc == 0)
		rc = push(v, &n, "memory-backend=%s", RDB_RESTORE_SHARED_BLOCK);
	if (rc == 0)
		rc = push(v, &n, "-qmp");
	if (rc == 0)
		rc = push(v, &n, "unix:%s,server=on,wait=off", qmp_path);
	/* The watchdog's own QMP: the restored VM can be protected again. */
	if (rc == 0 && wd_qmp_path) {
		rc = push(v, &n, "-qmp");
		if (rc == 0)
			rc = push(v, &n, "unix:%s,server=on,wait=off", wd_qmp_path);
	}
	if (rc == 0 && net_path) {
		rc = push(v, &n, "-netdev");
		if (rc == 0)
			rc = push(v, &n, "stream,id=net0,server=off,"
				  "addr.type=unix,addr.path=%s,reconnect-ms=100",
				  net_path);
	}
	for (size_t i = 0; rc == 0 && net_path && i < nnets; i++) {
		rc = push(v, &n, "-netdev");
		if (rc == 0)
			rc = push(v, &n, "stream,id=net%zu,server=off,"
				  "addr.type=unix,addr.path=%s,reconnect-ms=100",
				  i + 1, more_nets[i]);
	}
	if (rc == 0 && console_path && serial_sock) {
		/* the console logged, and an operator's (or a test's) socket */
		rc = push(v, &n, "-chardev");
		if (rc == 0)
			rc = push(v, &n, "socket,id=rdbser0,path=%s,server=on,"
				  "wait=off,logfile=%s", serial_sock, console_path);
		if (rc == 0)
			rc = push(v, &n, "-serial");
		if (rc == 0)
			rc = push(v, &n, "chardev:rdbser0");
	} else if (rc == 0 && console_path) {
		rc = push(v, &n, "-serial");
		if (rc == 0)
			rc = push(v, &n, "file:%s", console_path);
	}
	if (rc == 0 && drive) {
		rc = push(v, &n, "-drive");
		if (rc == 0)
			rc = push(v, &n, "%s", drive);
	}
	for (size_t i = 0; rc == 0 && drive && i < nmore; i++) {
		rc = push(v, &n, "-drive");
		if (rc == 0)
			rc = push(v, &n, "%s", more_drives[i]);
	}
	if (rc == 0 && event_path) {
		rc = push(v, &n, "-chardev");
		if (rc == 0)
			rc = push(v, &n, "socket,id=rdbevent,path=%s,server=on,wait=off",
				  event_path);
	}
	if (rc == 0)
		rc = push(v, &n, "-incoming");
	if (rc == 0)
		rc = push(v, &n, "defer");
	if (rc < 0) {
		rdb_restore_argv_free(v);
		return rc;
	}
	*argv_out = v;
	return 0;
}

int rdb_qemu_nbd_drive(char *buf, size_t len, const char *id,
		       const char *sock_path, unsigned flags)
{
	char att[80];
	int n;

	if (flags & RDB_HV_DISK_PFLASH)
		snprintf(att, sizeof(att), "if=pflash,unit=1");
	else if ((size_t)snprintf(att, sizeof(att), "if=none,id=%s", id) >=
		 sizeof(att))
		return -ENAMETOOLONG;
	n = flags & RDB_HV_DISK_QCOW2 ?
		snprintf(buf, len, "%s,driver=qcow2,file.driver=nbd,"
			 "file.server.type=unix,file.server.path=%s,"
			 "file.reconnect-delay=15", att, sock_path) :
		snprintf(buf, len, "%s,driver=nbd,server.type=unix,"
			 "server.path=%s,reconnect-delay=15", att, sock_path);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

// SPDX-License-Identifier: GPL-2.0-only
#include "qemu/colo_stream.h"

#include <errno.h>
#include <jansson.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define VM_MAGIC 0x5145564du
#define VM_VERSION 3
#define VM_EOF 0x00
#define VM_SECTION_START 0x01
#define VM_SECTION_PART 0x02
#define VM_SECTION_END 0x03
#define VM_SECTION_FULL 0x04
#define VM_SUBSECTION 0x05
#define VM_VMDESCRIPTION 0x06
#define VM_CONFIGURATION 0x07
#define VM_COMMAND 0x08
#define VM_FOOTER 0x7e

#define F_MAPPED 0x01	/* x-colo-mapped-ram (QEMU patch 0007) */
#define F_ZERO 0x02
#define F_MEM_SIZE 0x04
#define F_PAGE 0x08
#define F_EOS 0x10
#define F_CONTINUE 0x20
#define F_KNOWN (F_ZERO | F_MEM_SIZE | F_PAGE | F_EOS | F_CONTINUE)
#define PAGE_MASK (~(uint64_t)(RDB_PAGE_SIZE - 1))

/* step() results besides errors */
#define NEED_MORE 0
#define PROGRESS 1

static uint32_t be32_at(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
		(uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64_at(const uint8_t *p)
{
	return (uint64_t)be32_at(p) << 32 | be32_at(p + 4);
}

void rdb_colo_msg_encode(enum rdb_colo_msg m, uint8_t out[4])
{
	out[0] = out[1] = out[2] = 0;
	out[3] = (uint8_t)m;
}

static int fail(struct rdb_colo_parser *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->err, sizeof(p->err), fmt, ap);
	va_end(ap);
	p->state = RDB_CP_FAILED;
	return -EPROTO;
}

int rdb_colo_parser_init(struct rdb_colo_parser *p,
			 const struct rdb_colo_ops *ops, void *opaque)
{
	memset(p, 0, sizeof(*p));
	p->ops = ops;
	p->opaque = opaque;
	p->state = RDB_CP_HEADER;
	p->cur_block = -1;
	rdb_buf_init(&p->in);
	return 0;
}

void rdb_colo_parser_dispose(struct rdb_colo_parser *p)
{
	rdb_buf_dispose(&p->in);
	for (size_t i = 0; i < p->nfds; i++)
		close(p->fds[i]);
	p->nfds = 0;
}

int rdb_colo_parser_take_fd(struct rdb_colo_parser *p, int fd)
{
	if (p->state == RDB_CP_FAILED) {
		close(fd);
		return -EPROTO;
	}
	if (p->blocks_reported) {
		close(fd);
		return fail(p, "a file descriptor passed after the RAM blocks "
			    "were set up");
	}
	if (p->nfds == RDB_COLO_MAX_FDS) {
		close(fd);
		return fail(p, "more than %u file descriptors on the stream "
			    "before the parser asked for them", RDB_COLO_MAX_FDS);
	}
	p->fds[p->nfds++] = fd;
	return 0;
}

/* The first file descriptor passed and not yet used, or -1. */
static int pop_fd(struct rdb_colo_parser *p)
{
	int fd;

	if (p->nfds == 0)
		return -1;
	fd = p->fds[0];
	memmove(p->fds, p->fds + 1, (p->nfds - 1) * sizeof(p->fds[0]));
	p->nfds--;
	return fd;
}

const char *rdb_colo_parser_error(const struct rdb_colo_parser *p)
{
	return p->err[0] ? p->err : "no error";
}

/*
 * The configuration section is a vmstate: be32 len, the machine name,
 * then optional subsections, each "0x05 u8 len name be32 version body".
 * It ends at the first byte that is not 0x05 (the next top-level record),
 * so one byte past it must be buffered to know it ended.
 */
static int step_config(struct rdb_colo_parser *p)
{
	const uint8_t *b = p->in.data;
	size_t n = p->in.len, at;
	uint32_t len;
	int rc;

	if (n < 5)
		return NEED_MORE;
	len = be32_at(b + 1);
	if (len == 0 || len > 256)
		return fail(p, "configuration: machine name of %u bytes", len);
	at = 5 + len;
	for (;;) {
		uint32_t ver;
		uint8_t nl;
		char name[256];

		if (n < at + 1)
			return NEED_MORE;
		if (b[at] != VM_SUBSECTION)
			break;
		if (n < at + 2)
			return NEED_MORE;
		nl = b[at + 1];
		if (n < at + 2 + nl + 4)
			return NEED_MORE;
		memcpy(name, b + at + 2, nl);
		name[nl] = 0;
		ver = be32_at(b + at + 2 + nl);
		at += 2 + nl + 4;
		if (ver != 1)
			return fail(p, "configuration: subsection '%s' version %u "
				    "(want 1)", name, ver);
		if (strcmp(name, "configuration/target-page-bits") == 0) {
			if (n < at + 4)
				return NEED_MORE;
			/* Absent when it is the minimum, 12 on x86. */
			if (be32_at(b + at) != 12)
				return fail(p, "configuration: target page bits %u "
					    "(only 4 KiB pages are supported)",
					    be32_at(b + at));
			at += 4;
		} else if (strcmp(name, "configuration/uuid") == 0) {
			at += 16;
		} else if (strcmp(name, "configuration/capabilities") == 0) {
			uint8_t cl;

			/* QEMU lists here only the enabled capabilities the
			 * destination must share: x-ignore-shared, mapped-ram.
			 * Both change the RAM stream this parser reads. */
			if (n < at + 4 + 1)
				return NEED_MORE;
			if (be32_at(b + at) == 0)
				return fail(p, "configuration: empty capability list");
			cl = b[at + 4];
			if (n < at + 5 + cl)
				return NEED_MORE;
			return fail(p, "configuration: the primary runs with "
				    "capability %.*s, which changes the RAM "
				    "stream (unsupported)", (int)cl,
				    (const char *)b + at + 5);
		} else {
			return fail(p, "configuration: unknown subsection '%s'",
				    name);
		}
		if (n < at)
			return NEED_MORE;
	}
	rc = p->ops->config(p->opaque, b, at);
	if (rc < 0)
		return rc;
	rdb_buf_consume(&p->in, at);
	p->state = RDB_CP_TOP;
	return PROGRESS;
}

static int step_command(struct rdb_colo_parser *p)
{
	const uint8_t *b = p->in.data;
	uint16_t cmd, len;

	if (p->in.len < 5)
		return NEED_MORE;
	cmd = (uint16_t)(b[1] << 8 | b[2]);
	len = (uint16_t)(b[3] << 8 | b[4]);
	if (p->in.len < 5u + len)
		return NEED_MORE;
	/* 8 ENABLE_COLO and 11 SWITCHOVER_START carry nothing we need. */
	if ((cmd != 8 && cmd != 11) || len != 0)
		return fail(p, "unexpected migration command %u (%u bytes)",
			    cmd, len);
	rdb_buf_consume(&p->in, 5u + len);
	return PROGRESS;
}

/* START/PART/END section header of the ram section. */
static int step_section(struct rdb_colo_parser *p, uint8_t type)
{
	const uint8_t *b = p->in.data;
	uint32_t id;
	size_t hl = 5;

	if (p->in.len < 5)
		return NEED_MORE;
	id = be32_at(b + 1);
	if (type == VM_SECTION_START) {
		uint8_t l;

		if (p->in.len < 6)
			return NEED_MORE;
		l = b[5];
		hl = 6 + l + 8;
		if (p->in.len < hl)
			return NEED_MORE;
		if (l != 3 || memcmp(b + 6, "ram", 3) != 0)
			return fail(p, "iterative section '%.*s' is not supported "
				    "(only ram)", (int)l, (const char *)b + 6);
		if (be32_at(b + 6 + l + 4) != 4)
			return fail(p, "ram section version %u (want 4)",
				    be32_at(b + 6 + l + 4));
		if (p->have_ram_section)
			return fail(p, "second ram section START");
		p->have_ram_section = 1;
		p->ram_section_id = id;
		p->ram_setup = 1;
	} else if (!p->have_ram_section || id != p->ram_section_id) {
		return fail(p, "section %u continues before the ram section started", id);
	}
	rdb_buf_consume(&p->in, hl);
	p->state = RDB_CP_RAM;
	return PROGRESS;
}

static int find_block(struct rdb_colo_parser *p, const uint8_t *name, uint8_t l)
{
	for (size_t i = 0; i < p->nblocks; i++)
		if (strlen(p->blocks[i].idstr) == l &&
		    memcmp(p->blocks[i].idstr, name, l) == 0)
			return (int)i;
	return -1;
}

/*
 * ram START: the memory size record, then each block.  With
 * x-colo-mapped-ram (F_MAPPED in the size record) each block's entry
 * ends in "mapped:u8 [fd_offset:be64 carrier:u8]": for a mapped block
 * QEMU passed the block's memory file descriptor (SCM_RIGHTS) with the
 * carrier byte, so it was queued (take_fd) before that byte was fed.
 */
static int step_ram_setup(struct rdb_colo_parser *p, uint64_t v)
{
	const uint8_t *b = p->in.data;
	size_t at = 8;
	uint64_t fd_off[RDB_MAX_RAM_BLOCKS];
	bool mapped = v & F_MAPPED;

	if (!(v & F_MEM_SIZE) ||
	    (v & ~PAGE_MASK & ~(uint64_t)(F_MEM_SIZE | F_MAPPED)))
		return fail(p, "ram START: expected the memory size record, got flags 0x%llx",
			    (unsigned long long)(v & ~PAGE_MASK));
	p->mem_total = v & PAGE_MASK;
	if (p->mem_total == 0)
		return fail(p, "ram START: no RAM");
	/* The whole block list must be buffered: it is small. */
	p->nblocks = 0;
	p->mem_listed = 0;
	while (p->mem_listed < p->mem_total) {
		struct rdb_ram_block *rb;
		uint8_t l;
		size_t tail = 0;

		if (p->in.len < at + 1)
			return NEED_MORE;
		l = b[at];
		if (l == 0)
			return fail(p, "ram START: empty block name");
		if (p->in.len < at + 1 + l + 8 + (mapped ? 1 : 0))
			return NEED_MORE;
		if (memchr(b + at + 1, 0, l))
			return fail(p, "ram START: block name with a NUL byte");
		if (p->nblocks == RDB_MAX_RAM_BLOCKS)
			return fail(p, "ram START: more than %u RAM blocks",
				    RDB_MAX_RAM_BLOCKS);
		rb = &p->blocks[p->nblocks];
		memcpy(rb->idstr, b + at + 1, l);
		rb->idstr[l] = 0;
		rb->used_length = be64_at(b + at + 1 + l);
		if (rb->used_length == 0 || rb->used_length % RDB_PAGE_SIZE ||
		    rb->used_length > p->mem_total - p->mem_listed)
			return fail(p, "ram START: block %s has length 0x%llx",
				    rb->idstr, (unsigned long long)rb->used_length);
		p->block_mapped[p->nblocks] = false;
		if (mapped) {
			const uint8_t *t = b + at + 1 + l + 8;	/* after used */

			tail = 1;
			if (t[0] > 1)
				return fail(p, "ram START: block %s: mapped flag %u",
					    rb->idstr, t[0]);
			if (t[0]) {
				if (p->in.len < at + 1 + l + 8 + 1 + 8 + 1)
					return NEED_MORE;
				fd_off[p->nblocks] = be64_at(t + 1);
				if (t[9] != RDB_COLO_FD_CARRIER)
					return fail(p, "ram START: block %s: fd carrier "
						    "byte 0x%02x", rb->idstr, t[9]);
				if (fd_off[p->nblocks] % RDB_PAGE_SIZE)
					return fail(p, "ram START: block %s: file offset "
						    "0x%llx not page-aligned", rb->idstr,
						    (unsigned long long)fd_off[p->nblocks]);
				p->block_mapped[p->nblocks] = true;
				tail = 1 + 8 + 1;
			}
		}
		p->nblocks++;
		p->mem_listed += rb->used_length;
		at += 1 + l + 8 + tail;
	}
	rdb_buf_consume(&p->in, at);
	p->ram_setup = 0;
	p->mapped = mapped;
	if (!p->blocks_reported) {
		int rc = p->ops->ram_blocks(p->opaque, p->blocks, p->nblocks);

		if (rc < 0)
			return rc;
		p->blocks_reported = 1;
	}
	/* every carrier byte was fed, so every fd came before it */
	for (size_t i = 0; i < p->nblocks; i++) {
		int fd, rc;

		if (!p->block_mapped[i])
			continue;
		fd = pop_fd(p);
		if (fd < 0)
			return fail(p, "ram START: block %s is mapped but no file "
				    "descriptor came with it", p->blocks[i].idstr);
		if (!p->ops->map_block || !p->ops->mapped_page) {
			close(fd);
			return fail(p, "ram START: block %s is mapped and this "
				    "reader cannot map", p->blocks[i].idstr);
		}
		rc = p->ops->map_block(p->opaque, (uint32_t)i, fd, fd_off[i],
				       p->blocks[i].used_length);
		if (rc < 0)
			return rc;
	}
	if (p->nfds)
		return fail(p, "ram START: %zu file descriptor(s) passed that no "
			    "block asked for", p->nfds);
	return PROGRESS;
}

static int step_ram(struct rdb_colo_parser *p)
{
	const uint8_t *b = p->in.data;
	uint64_t v, addr, flags;
	size_t at = 8;
	int blk, rc;

	if (p->in.len < 8)
		return NEED_MORE;
	v = be64_at(b);
	if (p->ram_setup)
		return step_ram_setup(p, v);
	addr = v & PAGE_MASK;
	flags = v & ~PAGE_MASK;
	if (flags & ~(uint64_t)(F_KNOWN | (p->mapped ? F_MAPPED : 0)))
		return fail(p, "ram section: unknown flags 0x%llx at page addr "
			    "0x%llx (XBZRLE, multifd, mapped-ram or RDMA on?)",
			    (unsigned long long)flags, (unsigned long long)addr);
	if (flags == F_EOS) {
		rdb_buf_consume(&p->in, 8);
		p->state = RDB_CP_FOOTER;
		return PROGRESS;
	}
	if (__builtin_popcountll(flags & (F_ZERO | F_PAGE | F_MAPPED)) != 1 ||
	    flags & (F_MEM_SIZE | F_EOS))
		return fail(p, "ram section: bad record flags 0x%llx",
			    (unsigned long long)flags);
	if (flags & F_CONTINUE) {
		if (p->cur_block < 0)
			return fail(p, "ram section: CONTINUE before any block");
		blk = p->cur_block;
	} else {
		uint8_t l;

		if (p->in.len < 9)
			return NEED_MORE;
		l = b[8];
		if (p->in.len < 9u + l)
			return NEED_MORE;
		blk = find_block(p, b + 9, l);
		if (blk < 0)
			return fail(p, "ram section: unknown block '%.*s'", (int)l,
				    (const char *)b + 9);
		at = 9u + l;
	}
	if (addr >= p->blocks[blk].used_length)
		return fail(p, "ram section: page 0x%llx beyond block %s (0x%llx)",
			    (unsigned long long)addr, p->blocks[blk].idstr,
			    (unsigned long long)p->blocks[blk].used_length);
	if (flags & F_MAPPED) {
		/* a page QEMU left in the block's shared memory: only at a
		 * checkpoint (the guest stopped), never in the initial copy */
		if (!p->block_mapped[blk])
			return fail(p, "ram section: mapped page 0x%llx of block %s, "
				    "which is not mapped", (unsigned long long)addr,
				    p->blocks[blk].idstr);
		if (p->epoch == 0)
			return fail(p, "ram section: mapped page 0x%llx in the "
				    "initial stream", (unsigned long long)addr);
		rc = p->ops->mapped_page(p->opaque, (uint32_t)blk, addr);
	} else if (flags & F_ZERO) {
		if (p->in.len < at + 1)
			return NEED_MORE;
		rc = p->ops->page(p->opaque, (uint32_t)blk, addr, NULL, b[at]);
		at += 1;
	} else {
		if (p->in.len < at + RDB_PAGE_SIZE)
			return NEED_MORE;
		rc = p->ops->page(p->opaque, (uint32_t)blk, addr, b + at, 0);
		at += RDB_PAGE_SIZE;
	}
	if (rc < 0)
		return rc;
	p->cur_block = blk;
	rdb_buf_consume(&p->in, at);
	return PROGRESS;
}

static int step_footer(struct rdb_colo_parser *p)
{
	enum rdb_colo_pstate next = p->epoch == 0 ? RDB_CP_TOP : RDB_CP_CKPT_TOP;

	if (p->in.len < 1)
		return NEED_MORE;
	if (p->in.data[0] == VM_FOOTER) {
		if (p->in.len < 5)
			return NEED_MORE;
		if (be32_at(p->in.data + 1) != p->ram_section_id)
			return fail(p, "section footer for %u inside ram section %u",
				    be32_at(p->in.data + 1), p->ram_section_id);
		rdb_buf_consume(&p->in, 5);
	}
	p->state = next;
	return PROGRESS;
}

/* QEMU stopped the guest before it wrote its first END or device
 * section: tell it once, before the section is parsed. */
static int note_initial_stop(struct rdb_colo_parser *p)
{
	if (p->stop_reported)
		return 0;
	p->stop_reported = 1;
	return p->ops->initial_stop ? p->ops->initial_stop(p->opaque) : 0;
}

static int step_top(struct rdb_colo_parser *p)
{
	uint8_t t;
	int rc;

	if (p->in.len < 1)
		return NEED_MORE;
	t = p->in.data[0];
	if (t == VM_SECTION_END ||
	    ((t == VM_SECTION_FULL || t == VM_EOF) && p->blocks_reported)) {
		rc = note_initial_stop(p);
		if (rc < 0)
			return rc;
	}
	switch (t) {
	case VM_COMMAND:
		return step_command(p);
	case VM_SECTION_START:
	case VM_SECTION_PART:
	case VM_SECTION_END:
		return step_section(p, t);
	case VM_SECTION_FULL:
	case VM_EOF:
		if (!p->blocks_reported)
			return fail(p, "device state before any RAM");
		p->state = RDB_CP_DEVTAIL;
		p->dt_scan = 1;
		p->dt_ncand = 0;
		return PROGRESS;
	default:
		return fail(p, "unknown section type 0x%02x in the initial stream", t);
	}
}

/* The candidate at q: JSON_OK, JSON_BAD, or JSON_WAIT (not all here). */
#define JSON_OK 0
#define JSON_BAD 1
#define JSON_WAIT 2

static int vmdesc_at(const struct rdb_colo_parser *p, size_t q, size_t *end_out)
{
	const uint8_t *b = p->in.data;
	uint32_t jl = be32_at(b + q + 1);
	json_t *j;
	int ok;

	if (jl == 0 || jl > RDB_COLO_MAX_VMDESC)
		return JSON_BAD;
	if (p->in.len - q - 5 < jl)
		return JSON_WAIT;
	j = json_loadb((const char *)b + q + 5, jl, 0, NULL);
	ok = json_is_object(j);
	json_decref(j);
	*end_out = q + 5 + jl;
	return ok ? JSON_OK : JSON_BAD;
}

/*
 * Device sections are not length-prefixed.  The initial stream is over
 * at EOF, VMDESCRIPTION, be32 len and len bytes that parse as a JSON
 * object.  QEMU sends nothing more until our CHECKPOINT_READY, so the
 * match is normally the end of the buffer, but nothing here relies on
 * how the bytes were split.  Every offset is examined once; a candidate
 * whose JSON has not all arrived waits in dt_cand (ascending), so a feed
 * costs O(new bytes + candidates), not O(tail).
 */
static int step_devtail(struct rdb_colo_parser *p)
{
	const uint8_t *b = p->in.data;
	size_t n = p->in.len, q, end = 0, keep = 0;
	int rc;

	if (n > RDB_COLO_MAX_DEVSTATE + RDB_COLO_MAX_VMDESC)
		return fail(p, "initial device state over %u bytes without an end",
			    RDB_COLO_MAX_DEVSTATE + RDB_COLO_MAX_VMDESC);
	/* Earlier candidates first: the smallest offset that completes wins. */
	for (size_t i = 0; i < p->dt_ncand; i++) {
		q = p->dt_cand[i];
		rc = vmdesc_at(p, q, &end);
		if (rc == JSON_OK)
			goto found;
		if (rc == JSON_WAIT)
			p->dt_cand[keep++] = q;
	}
	p->dt_ncand = keep;
	/* q needs b[q - 1] (EOF), b[q] (0x06), be32 len and b[q + 5] ('{'). */
	for (q = p->dt_scan; q + 6 <= n; q++) {
		if (b[q] != VM_VMDESCRIPTION || b[q - 1] != VM_EOF ||
		    b[q + 5] != '{')
			continue;
		rc = vmdesc_at(p, q, &end);
		if (rc == JSON_OK)
			goto found;
		if (rc == JSON_BAD)
			continue;
		if (p->dt_ncand == RDB_COLO_MAX_CANDIDATES)
			return fail(p, "initial device state: more than %u places "
				    "look like an unfinished vmdesc",
				    RDB_COLO_MAX_CANDIDATES);
		p->dt_cand[p->dt_ncand++] = q;
	}
	p->dt_scan = q;
	return NEED_MORE;
found:
	rc = p->ops->epoch_end(p->opaque, 0, b, q);
	if (rc < 0)
		return rc;
	rdb_buf_consume(&p->in, end);
	p->dt_ncand = 0;
	p->epoch = 1;
	p->state = RDB_CP_COLO;
	return PROGRESS;
}

static int step_colo_msg(struct rdb_colo_parser *p, uint32_t want)
{
	uint32_t m;
	int rc;

	if (p->in.len < 4)
		return NEED_MORE;
	m = be32_at(p->in.data);
	if (m >= RDB_COLO_MSG__MAX)
		return fail(p, "unknown COLO message %u", m);
	if (m != want)
		return fail(p, "COLO message %u where %u was expected", m, want);
	rdb_buf_consume(&p->in, 4);
	if (want == RDB_COLO_CHECKPOINT_REQUEST) {
		rc = p->ops->checkpoint_request(p->opaque, p->epoch);
		if (rc < 0)
			return rc;
		p->state = RDB_CP_SEND;
	} else {
		p->state = RDB_CP_CKPT_TOP;
	}
	return PROGRESS;
}

static int step_ckpt_top(struct rdb_colo_parser *p)
{
	uint8_t t;

	if (p->in.len < 1)
		return NEED_MORE;
	t = p->in.data[0];
	switch (t) {
	case VM_COMMAND:
		return step_command(p);
	case VM_SECTION_PART:
	case VM_SECTION_END:
		return step_section(p, t);
	case VM_EOF:
		rdb_buf_consume(&p->in, 1);
		p->state = RDB_CP_CKPT_SIZE;
		return PROGRESS;
	default:
		return fail(p, "checkpoint %llu: unexpected section type 0x%02x",
			    (unsigned long long)p->epoch, t);
	}
}

static int step_ckpt_size(struct rdb_colo_parser *p)
{
	uint32_t m;

	if (p->in.len < 12)
		return NEED_MORE;
	m = be32_at(p->in.data);
	if (m != RDB_COLO_VMSTATE_SIZE)
		return fail(p, "checkpoint %llu: COLO message %u where VMSTATE_SIZE "
			    "was expected", (unsigned long long)p->epoch, m);
	p->dev_len = be64_at(p->in.data + 4);
	if (p->dev_len == 0 || p->dev_len > RDB_COLO_MAX_DEVSTATE)
		return fail(p, "checkpoint %llu: device state of %llu bytes",
			    (unsigned long long)p->epoch,
			    (unsigned long long)p->dev_len);
	rdb_buf_consume(&p->in, 12);
	p->state = RDB_CP_CKPT_DEV;
	return PROGRESS;
}

static int step_ckpt_dev(struct rdb_colo_parser *p)
{
	int rc;

	if (p->in.len < p->dev_len)
		return NEED_MORE;
	if (p->in.data[p->dev_len - 1] != VM_EOF)
		return fail(p, "checkpoint %llu: device state does not end in EOF",
			    (unsigned long long)p->epoch);
	rc = p->ops->epoch_end(p->opaque, p->epoch, p->in.data, p->dev_len);
	if (rc < 0)
		return rc;
	rdb_buf_consume(&p->in, p->dev_len);
	p->epoch++;
	p->state = RDB_CP_COLO;
	return PROGRESS;
}

static int step(struct rdb_colo_parser *p)
{
	switch (p->state) {
	case RDB_CP_HEADER:
		if (p->in.len < 9)
			return NEED_MORE;
		if (be32_at(p->in.data) != VM_MAGIC)
			return fail(p, "not a QEMU migration stream (magic 0x%08x)",
				    be32_at(p->in.data));
		if (be32_at(p->in.data + 4) != VM_VERSION)
			return fail(p, "migration stream version %u (want 3)",
				    be32_at(p->in.data + 4));
		if (p->in.data[8] != VM_CONFIGURATION)
			return fail(p, "no configuration section");
		rdb_buf_consume(&p->in, 8);
		p->state = RDB_CP_CONFIG;
		return PROGRESS;
	case RDB_CP_CONFIG:
		return step_config(p);
	case RDB_CP_TOP:
		return step_top(p);
	case RDB_CP_RAM:
		return step_ram(p);
	case RDB_CP_FOOTER:
		return step_footer(p);
	case RDB_CP_DEVTAIL:
		return step_devtail(p);
	case RDB_CP_COLO:
		return step_colo_msg(p, RDB_COLO_CHECKPOINT_REQUEST);
	case RDB_CP_SEND:
		return step_colo_msg(p, RDB_COLO_VMSTATE_SEND);
	case RDB_CP_CKPT_TOP:
		return step_ckpt_top(p);
	case RDB_CP_CKPT_SIZE:
		return step_ckpt_size(p);
	case RDB_CP_CKPT_DEV:
		return step_ckpt_dev(p);
	case RDB_CP_FAILED:
		return -EPROTO;
	}
	return fail(p, "parser in an impossible state");
}

int rdb_colo_parser_feed(struct rdb_colo_parser *p, const uint8_t *buf,
			 size_t len)
{
	int rc;

	if (p->state == RDB_CP_FAILED)
		return -EPROTO;
	if (rdb_buf_append(&p->in, buf, len) < 0)
		return -ENOMEM;
	do {
		rc = step(p);
	} while (rc == PROGRESS);
	if (rc < 0 && p->state != RDB_CP_FAILED) {
		/* A callback failed: the stream cannot be resumed either. */
		if (!p->err[0])
			snprintf(p->err, sizeof(p->err), "callback failed: %s",
				 strerror(-rc));
		p->state = RDB_CP_FAILED;
	}
	return rc;
}

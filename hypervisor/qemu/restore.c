// SPDX-License-Identifier: GPL-2.0-only
#include "qemu/restore.h"
#include "buf.h"
#include "ramblock.h"
#include "sockutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RAM_SECTION_ID 0x7ffffff0u	/* clear of the primary's device ids */
#define RAM_SECTION_VERSION 4
#define F_ZERO 0x02
#define F_MEM_SIZE 0x04
#define F_PAGE 0x08
#define F_EOS 0x10
#define F_CONTINUE 0x20
#define VMDESC "{\"page_size\": 4096, \"devices\": []}"

static int put8(struct rdb_buf *b, uint8_t v)
{
	return rdb_buf_append(b, &v, 1);
}

static int put32(struct rdb_buf *b, uint32_t v)
{
	uint8_t p[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16),
			 (uint8_t)(v >> 8), (uint8_t)v };

	return rdb_buf_append(b, p, 4);
}

static int put64(struct rdb_buf *b, uint64_t v)
{
	int rc = put32(b, (uint32_t)(v >> 32));

	return rc ? rc : put32(b, (uint32_t)v);
}

static int put_str8(struct rdb_buf *b, const char *s)
{
	size_t n = strlen(s);
	int rc = put8(b, (uint8_t)n);

	return rc ? rc : rdb_buf_append(b, s, n);
}

static bool all_zero(const uint8_t *p)
{
	static const uint8_t zero[RDB_PAGE_SIZE];

	return memcmp(p, zero, RDB_PAGE_SIZE) == 0;
}

static int check(const struct rdb_restore_spec *s)
{
	if (!s->config || s->config_len < 5 || s->config[0] != 0x07)
		return -EINVAL;
	if (s->nblocks == 0 || s->nblocks > RDB_MAX_RAM_BLOCKS)
		return -EINVAL;
	if (!s->devstate || s->devstate_len == 0 ||
	    s->devstate[s->devstate_len - 1] != 0x00)
		return -EINVAL;
	for (size_t i = 0; i < s->nblocks; i++) {
		size_t n = strlen(s->blocks[i].idstr);

		if (n == 0 || n > 255 || s->blocks[i].used_length % RDB_PAGE_SIZE ||
		    (!s->blocks[i].shared && !s->blocks[i].data))
			return -EINVAL;
	}
	return 0;
}

int rdb_restore_stream_build(const struct rdb_restore_spec *spec,
			     uint8_t **buf_out, size_t *len_out)
{
	struct rdb_buf b;
	uint64_t total = 0;
	int rc = check(spec);

	if (rc < 0)
		return rc;
	rdb_buf_init(&b);
	rc = put32(&b, 0x5145564d);
	rc = rc ?: put32(&b, 3);
	/* configuration + the capability the incoming side will have on */
	rc = rc ?: rdb_buf_append(&b, spec->config, spec->config_len);
	rc = rc ?: put8(&b, 0x05);
	rc = rc ?: put_str8(&b, "configuration/capabilities");
	rc = rc ?: put32(&b, 1);
	rc = rc ?: put32(&b, 1);
	rc = rc ?: put_str8(&b, "x-ignore-shared");
	/* RAM START: the block list */
	for (size_t i = 0; i < spec->nblocks; i++)
		total += spec->blocks[i].used_length;
	rc = rc ?: put8(&b, 0x01);
	rc = rc ?: put32(&b, RAM_SECTION_ID);
	rc = rc ?: put_str8(&b, "ram");
	rc = rc ?: put32(&b, 0);
	rc = rc ?: put32(&b, RAM_SECTION_VERSION);
	rc = rc ?: put64(&b, total | F_MEM_SIZE);
	for (size_t i = 0; rc == 0 && i < spec->nblocks; i++) {
		rc = put_str8(&b, spec->blocks[i].idstr);
		rc = rc ?: put64(&b, spec->blocks[i].used_length);
		/* x-ignore-shared: the GPA of the block's region, checked for
		 * ignored blocks; a memory backend is mapped through aliases. */
		rc = rc ?: put64(&b, 0);
	}
	rc = rc ?: put64(&b, F_EOS);
	rc = rc ?: put8(&b, 0x7e);
	rc = rc ?: put32(&b, RAM_SECTION_ID);
	/* RAM END: the small blocks' pages */
	rc = rc ?: put8(&b, 0x03);
	rc = rc ?: put32(&b, RAM_SECTION_ID);
	for (size_t i = 0; rc == 0 && i < spec->nblocks; i++) {
		const struct rdb_restore_block *blk = &spec->blocks[i];

		if (blk->shared)
			continue;
		for (uint64_t off = 0; rc == 0 && off < blk->used_length;
		     off += RDB_PAGE_SIZE) {
			const uint8_t *pg = blk->data + off;
			bool z = all_zero(pg);

			rc = put64(&b, off | (z ? F_ZERO : F_PAGE) |
				   (off ? F_CONTINUE : 0));
			if (rc == 0 && off == 0)
				rc = put_str8(&b, blk->idstr);
			if (rc == 0)
				rc = z ? put8(&b, 0) :
					rdb_buf_append(&b, pg, RDB_PAGE_SIZE);
		}
	}
	rc = rc ?: put64(&b, F_EOS);
	rc = rc ?: put8(&b, 0x7e);
	rc = rc ?: put32(&b, RAM_SECTION_ID);
	rc = rc ?: rdb_buf_append(&b, spec->devstate, spec->devstate_len);
	/* The loader reads a vmdesc after EOF, waiting for it if absent. */
	rc = rc ?: put8(&b, 0x06);
	rc = rc ?: put32(&b, (uint32_t)strlen(VMDESC));
	rc = rc ?: rdb_buf_append(&b, VMDESC, strlen(VMDESC));
	if (rc < 0) {
		rdb_buf_dispose(&b);
		return rc;
	}
	/* Hand over the bytes: move them to the front of a fresh block. */
	*buf_out = malloc(b.len);
	if (!*buf_out) {
		rdb_buf_dispose(&b);
		return -ENOMEM;
	}
	memcpy(*buf_out, b.data, b.len);
	*len_out = b.len;
	rdb_buf_dispose(&b);
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

int rdb_restore_argv(const char *qemu_binary, char *const *common,
		     size_t ncommon, const char *image_path, uint64_t ram_bytes,
		     const char *qmp_path, const char *net_path,
		     const char *console_path, char ***argv_out)
{
	size_t n = 0, max = ncommon + 16;
	char **v = calloc(max, sizeof(*v));
	char tmp[1024];

	if (!v)
		return -ENOMEM;
#define ADD(s) do { if (!(v[n++] = strdup(s))) goto nomem; } while (0)
	ADD(qemu_binary);
	for (size_t i = 0; i < ncommon; i++)
		ADD(common[i]);
	ADD("-object");
	snprintf(tmp, sizeof(tmp), "memory-backend-file,id=%s,size=%llu,mem-path=%s,share=on",
		 RDB_RESTORE_SHARED_BLOCK, (unsigned long long)ram_bytes, image_path);
	ADD(tmp);
	ADD("-machine");
	ADD("memory-backend=" RDB_RESTORE_SHARED_BLOCK);
	ADD("-qmp");
	snprintf(tmp, sizeof(tmp), "unix:%s,server=on,wait=off", qmp_path);
	ADD(tmp);
	ADD("-netdev");
	snprintf(tmp, sizeof(tmp), "stream,id=net0,server=off,addr.type=unix,"
		 "addr.path=%s,reconnect-ms=100", net_path);
	ADD(tmp);
	ADD("-serial");
	snprintf(tmp, sizeof(tmp), "file:%s", console_path);
	ADD(tmp);
	ADD("-incoming");
	ADD("defer");
#undef ADD
	*argv_out = v;
	return 0;
nomem:
	rdb_restore_argv_free(v);
	return -ENOMEM;
}

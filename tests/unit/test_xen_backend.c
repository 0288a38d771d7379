// SPDX-License-Identifier: GPL-2.0-only
/* The Xen backend's ops (hypervisor/xen/backend.c) as the daemon calls
 * them: the helper's stream (preamble, libxc stream) becomes config, one
 * RAM block, pages, requests and epochs, split anywhere alike; a foreign
 * stream is refused; the replies are the helper's codes; control and the
 * restore run remusdb-xen and xl (fakes on PATH here, which log their
 * arguments) with what the protocol says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "hv.h"
#include "xen/xc_stream.h"
#include "xen/xen_helper.h"
#include "xen/xen_state.h"
#include "xen_gen.h"

static const char xl_hdr[] = "Xen saved domain, xl format\n \0 \r"
			     "\x04\x03\x02\x01 and the domain's config...";

static void helper_stream(struct rdb_buf *b)
{
	uint8_t len[4];

	assert_int_equal(rdb_buf_append(b, RDB_XEN_PREAMBLE, 8), 0);
	len[0] = (uint8_t)(sizeof(xl_hdr) - 1);
	len[1] = len[2] = len[3] = 0;
	assert_int_equal(rdb_buf_append(b, len, 4), 0);
	assert_int_equal(rdb_buf_append(b, xl_hdr, sizeof(xl_hdr) - 1), 0);
	stream(b);
}

struct got {
	struct rdb_buf config, dev;
	struct rdb_ram_block block;
	int nconfig, nblocks, nepochs;
	uint64_t pages, nodata, requests[4], epochs[4];
	int nreq;
};

static int g_config(void *o, const uint8_t *blob, size_t len)
{
	struct got *g = o;

	g->nconfig++;
	rdb_buf_reset(&g->config);
	return rdb_buf_append(&g->config, blob, len);
}

static int g_blocks(void *o, const struct rdb_ram_block *b, size_t n)
{
	struct got *g = o;

	assert_int_equal(n, 1);
	g->block = b[0];
	g->nblocks++;
	return 0;
}

static int g_page(void *o, uint32_t block, uint64_t offset,
		  const uint8_t *data, uint8_t fill)
{
	struct got *g = o;

	assert_int_equal(block, 0);
	assert_true(offset % 4096 == 0 && offset < NPFN * 4096ull);
	g->pages++;
	g->nodata += !data;
	return 0;
}

static int g_epoch(void *o, uint64_t epoch, const uint8_t *dev, size_t len)
{
	struct got *g = o;

	g->epochs[g->nepochs++] = epoch;
	rdb_buf_reset(&g->dev);
	return rdb_buf_append(&g->dev, dev, len);
}

static int g_request(void *o, uint64_t epoch)
{
	struct got *g = o;

	g->requests[g->nreq++] = epoch;
	return 0;
}

static const struct rdb_hv_stream_cb cb = {
	.config = g_config, .ram_blocks = g_blocks, .page = g_page,
	.epoch_end = g_epoch, .checkpoint_request = g_request,
};

static void feed(const struct rdb_hv_ops *ops, struct got *g, size_t split)
{
	struct rdb_hv_stream *s = NULL;
	struct rdb_buf b;

	rdb_buf_init(&b);
	rdb_buf_init(&g->config);
	rdb_buf_init(&g->dev);
	helper_stream(&b);
	assert_int_equal(ops->stream_new(&s, &cb, g), 0);
	assert_non_null(ops->stream_pending);
	for (size_t at = 0; at < b.len; at += split) {
		assert_int_equal(ops->stream_feed(s, b.data + at, b.len - at < split ?
						  b.len - at : split), 0);
		/* what a feed kept back (16 pages each), as on_mig takes it */
		while (ops->stream_pending(s))
			assert_int_equal(ops->stream_feed(s, NULL, 0), 0);
	}
	ops->stream_free(s);
	rdb_buf_dispose(&b);
}

static void test_stream(void **state)
{
	const struct rdb_hv_ops *ops = rdb_hv_find("xen");
	struct got a = { 0 }, b = { 0 };

	assert_non_null(ops);
	assert_string_equal(ops->main_block, "xen.ram");
	feed(ops, &a, 1 << 20);
	feed(ops, &b, 3);
	assert_int_equal(a.nconfig, 1);
	assert_int_equal(a.nblocks, 1);
	assert_string_equal(a.block.idstr, "xen.ram");
	assert_int_equal(a.block.used_length, NPFN * 4096ull);
	/* epochs 0 and 1 complete; requests for 1 and 2 (2: cut short) */
	assert_int_equal(a.nepochs, 2);
	assert_int_equal(a.epochs[0], 0);
	assert_int_equal(a.epochs[1], 1);
	assert_int_equal(a.nreq, 2);
	assert_int_equal(a.requests[0], 1);
	assert_int_equal(a.requests[1], 2);
	assert_int_equal(a.pages, NPFN + 10 + 1);
	assert_int_equal(a.nodata, 100);
	/* byte by byte: the same */
	assert_int_equal(a.pages, b.pages);
	assert_int_equal(a.config.len, b.config.len);
	assert_memory_equal(a.config.data, b.config.data, a.config.len);
	assert_int_equal(a.dev.len, b.dev.len);
	assert_memory_equal(a.dev.data, b.dev.data, a.dev.len);
	rdb_buf_dispose(&a.config);
	rdb_buf_dispose(&a.dev);
	rdb_buf_dispose(&b.config);
	rdb_buf_dispose(&b.dev);
}

static void test_refused(void **state)
{
	const struct rdb_hv_ops *ops = rdb_hv_find("xen");
	struct rdb_hv_stream *s = NULL;
	struct got g = { 0 };
	struct rdb_buf b;
	uint8_t r[RDB_HV_REPLY_MAX_BYTES];

	/* a QEMU stream fed to the Xen backend */
	assert_int_equal(ops->stream_new(&s, &cb, &g), 0);
	assert_int_equal(ops->stream_feed(s, (const uint8_t *)"QEVM\0\0\0\3xxxx", 12),
			 -EPROTO);
	assert_non_null(strstr(ops->stream_error(s), "preamble"));
	assert_int_equal(ops->stream_feed(s, (const uint8_t *)"x", 1), -EPROTO);
	ops->stream_free(s);
	/* a preamble whose header is not xl's */
	rdb_buf_init(&b);
	helper_stream(&b);
	b.data[12] = 'Q';
	assert_int_equal(ops->stream_new(&s, &cb, &g), 0);
	assert_int_equal(ops->stream_feed(s, b.data, b.len), -EPROTO);
	assert_non_null(strstr(ops->stream_error(s), "xl's"));
	ops->stream_free(s);
	/* an HVM domain's stream */
	rdb_buf_reset(&b);
	helper_stream(&b);
	b.data[12 + sizeof(xl_hdr) - 1 + 24] = 2;	/* dhdr type */
	assert_int_equal(ops->stream_new(&s, &cb, &g), 0);
	assert_int_equal(ops->stream_feed(s, b.data, b.len), -EPROTO);
	assert_non_null(strstr(ops->stream_error(s), "only x86 PV"));
	ops->stream_free(s);
	rdb_buf_dispose(&b);
	rdb_buf_dispose(&g.config);
	rdb_buf_dispose(&g.dev);
	/* replies: the helper's codes, little-endian */
	assert_int_equal(ops->reply(RDB_HV_START, r), 4);
	assert_int_equal(r[0], RDB_XEN_REPLY_START);
	assert_int_equal(ops->reply(RDB_HV_STOP, r), 4);
	assert_int_equal(r[0], RDB_XEN_REPLY_STOP);
	assert_int_equal(ops->reply(RDB_HV_RESUME, r), 4);
	assert_int_equal(r[0], RDB_XEN_REPLY_RESUME);
	assert_int_equal(r[1] | r[2] | r[3], 0);
}

/* ---- control and restore, through fakes of remusdb-xen and xl ---- */

static char dir[64], calls[128];

static void fake(const char *name, const char *body)
{
	char p[128];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	assert_non_null(f);
	fprintf(f, "#!/bin/sh\necho \"%s $*\" >> %s\n%s\n", name, calls, body);
	fclose(f);
	chmod(p, 0755);
}

static int setup(void **state)
{
	char path[4096];

	snprintf(dir, sizeof(dir), "/tmp/test_xen_backend.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(calls, sizeof(calls), "%s/calls", dir);
	snprintf(path, sizeof(path), "%s:%s", dir, getenv("PATH"));
	setenv("PATH", path, 1);
	/* remusdb-xen ctl: domain vm1 exists, running unless a file says */
	fake("remusdb-xen",
	     "[ \"$2\" = vm1 ] || { echo \"no domain $2\" >&2; exit 3; }\n"
	     "[ \"$1\" = vif ] && { echo \"relaying vif7.0 of domain $2 to $3\"; exit 0; }\n"
	     "case $3 in state) cat " "$(dirname $0)/state 2>/dev/null || echo running ;;\n"
	     "pause) echo paused > $(dirname $0)/state ;;\n"
	     "unpause|resume) echo running > $(dirname $0)/state ;;\n"
	     "*) [ \"$1\" = save ] && exec sleep 30 ;; esac");
	/* xl restore -e IMG: keeps the image's first bytes */
	fake("xl", "head -c 28 \"$3\" > $(dirname $0)/restored; echo running > $(dirname $0)/state");
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_control(void **state)
{
	const struct rdb_hv_ops *ops = rdb_hv_find("xen");
	struct rdb_hv_ctl *c = NULL;
	enum rdb_hv_guest g;
	char err[300], sock[128], log[256];
	uint64_t dl = rdb_now_ns() + 5 * RDB_NS_PER_S;
	FILE *f;

	assert_int_equal(ops->ctl_open(&c, "nodom", "nodom", dl, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "no domain nodom"));
	assert_int_equal(ops->ctl_open(&c, "vm1", "vm1", dl, err, sizeof(err)), 0);
	assert_int_equal(ops->ctl_fd(c), -1);
	assert_int_equal(ops->guest(c, &g, dl), 0);
	assert_int_equal(g, RDB_HV_GUEST_RUNNING);
	assert_int_equal(ops->stop(c, dl), 0);
	assert_int_equal(ops->guest(c, &g, dl), 0);
	assert_int_equal(g, RDB_HV_GUEST_PAUSED);
	assert_int_equal(ops->cont(c, dl), 0);
	/* checkpoints: the saver runs until checkpoint_end, which waits for
	 * it to leave, kills it at the deadline, and resumes the guest */
	snprintf(sock, sizeof(sock), "%s/vm1.colo", dir);
	assert_int_equal(ops->checkpoint_start(c, sock, 25, 0, dl), 0);
	assert_int_equal(ops->checkpoint_start(c, sock, 25, 0, dl), -EREMOTEIO);
	assert_int_equal(ops->checkpoint_end(c, rdb_now_ns() + 50 * RDB_NS_PER_MS), 0);
	ops->ctl_close(c);
	snprintf(log, sizeof(log), "%s/calls", dir);
	f = fopen(log, "r");
	assert_non_null(f);
	{
		char all[4096] = "";
		size_t n = fread(all, 1, sizeof(all) - 1, f);

		all[n] = 0;
		assert_non_null(strstr(all, "remusdb-xen save vm1 "));
		assert_non_null(strstr(all, "vm1.colo 25"));
		assert_non_null(strstr(all, "remusdb-xen ctl vm1 resume"));
	}
	fclose(f);
}

/* The NIC: remusdb-xen vif starts the relay and answers; QEMU's NIC
 * connects by itself (no op). */
static void test_nic(void **state)
{
	const struct rdb_hv_ops *ops = rdb_hv_find("xen");
	uint64_t dl = rdb_now_ns() + 5 * RDB_NS_PER_S;
	char err[300] = "", all[4096] = "";
	FILE *f;
	size_t n;

	assert_null(rdb_hv_find("qemu")->nic_attach);
	assert_int_equal(ops->nic_attach("vm1", "/run/x/vm1.net", "/run/x/vm1.nic.log",
					 dl, err, sizeof(err)), 0);
	assert_int_equal(ops->nic_attach("nodom", "/run/x/nodom.net", "/run/x/n.log",
					 dl, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "remusdb-xen vif nodom: no domain nodom"));
	f = fopen(calls, "r");
	assert_non_null(f);
	n = fread(all, 1, sizeof(all) - 1, f);
	all[n] = 0;
	fclose(f);
	assert_non_null(strstr(all, "remusdb-xen vif vm1 /run/x/vm1.net /run/x/vm1.nic.log"));
}

static void test_restore(void **state)
{
	const struct rdb_hv_ops *ops = rdb_hv_find("xen");
	struct rdb_hv_restore req = { .vm = "vm1", .work_dir = dir };
	struct rdb_hv_restored r;
	struct rdb_hv_state st;
	struct got g = { 0 };
	struct rdb_ram_block blk;
	const uint8_t *data[1];
	uint8_t *ram = calloc(NPFN, 4096);
	char err[300] = "", p[128], head[32] = "";
	uint64_t dl = rdb_now_ns() + 5 * RDB_NS_PER_S;
	FILE *f;

	feed(ops, &g, 1 << 20);
	rdb_hv_restored_init(&r);
	assert_int_equal(ops->restore_prepare(&req, &r, dl, err, sizeof(err)), 0);
	assert_int_equal(r.proc.pid, -1);	/* nothing waits */
	blk = g.block;
	data[0] = ram;
	st = (struct rdb_hv_state){
		.config = g.config.data, .config_len = g.config.len,
		.blocks = &blk, .nblocks = 1, .block_data = data,
		.devstate = g.dev.data, .devstate_len = g.dev.len,
	};
	assert_int_equal(ops->restore_load(&req, &r, &st, dl, err, sizeof(err)), 0);
	assert_non_null(r.ctl);
	snprintf(p, sizeof(p), "%s/restored", dir);
	f = fopen(p, "r");
	assert_non_null(f);
	assert_int_equal(fread(head, 1, 28, f), 28);
	fclose(f);
	assert_memory_equal(head, "Xen saved domain, xl format\n", 28);
	snprintf(p, sizeof(p), "%s/xen-restore.img", dir);
	assert_int_not_equal(access(p, F_OK), 0);	/* removed after */
	rdb_hv_restored_dispose(ops, &r, false);
	/* a QEMU VM's state is refused */
	snprintf(blk.idstr, sizeof(blk.idstr), "pc.ram");
	assert_int_equal(ops->restore_load(&req, &r, &st, dl, err, sizeof(err)),
			 -EPROTO);
	assert_non_null(strstr(err, "not a Xen PV domain's"));
	rdb_buf_dispose(&g.config);
	rdb_buf_dispose(&g.dev);
	free(ram);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_control),
		cmocka_unit_test(test_nic),
		cmocka_unit_test(test_restore),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

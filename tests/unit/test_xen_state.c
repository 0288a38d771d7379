// SPDX-License-Identifier: GPL-2.0-only
/* The Xen backend's restore state (xen_state.h): a checkpointed raw libxc
 * stream, parsed and kept as config + devstate blobs per epoch, becomes an
 * xl save image that parses as a plain libxl stream with every pfn at its
 * last committed type and data, the last committed epoch's vcpu records
 * only, and END; what a restore cannot do without is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "buf.h"
#include "xen/xc_stream.h"
#include "xen/xen_state.h"

#include "xen_gen.h"

struct keeper {
	struct rdb_xen_state st;
	uint8_t ram[NPFN * 4096];
	uint8_t stage[NPFN * 4096];	/* the open epoch's pages */
	bool staged[NPFN];
	struct rdb_buf committed;	/* devstate of the last epoch */
	uint64_t epochs, requests;
};

static const char xl_header[] = "Xen saved domain, xl format\n \0 \r"
				"XLHDR+CONFIG";

/* xl's header: known to the backend when the stream starts */
static int k_domain(void *o, const struct rdb_xc_domain *d)
{
	struct keeper *k = o;
	int rc = rdb_xen_state_domain(&k->st, d);

	return rc < 0 ? rc : rdb_xen_state_xl_header(&k->st,
			(const uint8_t *)xl_header, sizeof(xl_header) - 1);
}

static int k_page(void *o, uint64_t epoch, uint64_t pfn, unsigned type,
		  const uint8_t *data)
{
	struct keeper *k = o;
	int rc = rdb_xen_state_page(&k->st, pfn, type);

	if (rc == 0 && data) {
		memcpy(k->stage + pfn * 4096, data, 4096);
		k->staged[pfn] = true;
	}
	return rc;
}

static int k_record(void *o, uint64_t epoch, bool libxl, uint32_t type,
		    const uint8_t *body, size_t len)
{
	struct keeper *k = o;

	if (type == RDB_XEN_REC_REQUEST) {
		k->requests++;
		return 0;
	}
	return rdb_xen_state_record(&k->st, type, body, len) < 0 ? -EPROTO : 0;
}

static int k_epoch(void *o, uint64_t epoch)
{
	struct keeper *k = o;

	for (unsigned i = 0; i < NPFN; i++)
		if (k->staged[i])
			memcpy(k->ram + (size_t)i * 4096, k->stage + (size_t)i * 4096,
			       4096);
	memset(k->staged, 0, sizeof(k->staged));
	k->epochs++;
	return rdb_xen_state_epoch_end(&k->st, &k->committed);
}

static const struct rdb_xc_ops keep_ops = {
	.domain = k_domain, .page = k_page, .record = k_record,
	.epoch_end = k_epoch,
};

/* What the image's parse saw. */
struct img {
	uint8_t type[NPFN];
	uint64_t pages, pages_data_ok, ends, epochs, xtab;
	uint32_t recs[32];
	uint8_t rec_tag[32];
	int nrec;
};

static int i_page(void *o, uint64_t epoch, uint64_t pfn, unsigned type,
		  const uint8_t *data)
{
	struct img *m = o;
	unsigned salt = pfn >= 10 && pfn < 20 ? 7 : 0;

	assert_true(pfn < NPFN);
	m->type[pfn] = (uint8_t)type;
	m->pages++;
	if (type == 0xf)
		m->xtab++;
	if (data && data[0] == (uint8_t)((pfn + salt) & 0xff) &&
	    data[4095] == data[0])
		m->pages_data_ok++;
	return 0;
}

static int i_record(void *o, uint64_t epoch, bool libxl, uint32_t type,
		    const uint8_t *body, size_t len)
{
	struct img *m = o;

	assert_true(m->nrec < 32);
	m->rec_tag[m->nrec] = len > 8 ? body[len - 1] : 0;
	m->recs[m->nrec++] = type;
	return 0;
}

static int i_end(void *o)
{
	((struct img *)o)->ends++;
	return 0;
}

static int i_epoch(void *o, uint64_t epoch)
{
	((struct img *)o)->epochs++;
	return 0;
}

static const struct rdb_xc_ops img_ops = {
	.page = i_page, .record = i_record, .end = i_end, .epoch_end = i_epoch,
};

static struct keeper *keep_stream(size_t split)
{
	struct keeper *k = calloc(1, sizeof(*k));
	struct rdb_xc_parser p;
	struct rdb_buf s;

	assert_non_null(k);
	rdb_xen_state_init(&k->st);
	rdb_buf_init(&k->committed);
	rdb_buf_init(&s);
	stream(&s);
	assert_int_equal(rdb_xc_parser_init(&p, RDB_XC_RAW, &keep_ops, k), 0);
	for (size_t at = 0; at < s.len;) {
		size_t n = s.len - at < split ? s.len - at : split;

		assert_int_equal(rdb_xc_parser_feed(&p, s.data + at, n), 0);
		at += n;
	}
	rdb_xc_parser_dispose(&p);
	rdb_buf_dispose(&s);
	return k;
}

static void keeper_free(struct keeper *k)
{
	rdb_xen_state_dispose(&k->st);
	rdb_buf_dispose(&k->committed);
	free(k);
}

static void test_image_round_trip(void **state)
{
	struct keeper *k = keep_stream(1 << 20);
	struct img *m = calloc(1, sizeof(*m));
	struct rdb_xc_parser p;
	char err[200] = "";
	uint8_t *img;
	size_t hl = sizeof(xl_header) - 1;
	off_t len;
	int fd;

	assert_non_null(m);
	assert_int_equal(k->epochs, 2);
	assert_int_equal(k->requests, 2);
	assert_int_equal(k->st.npfns, NPFN);
	fd = memfd_create("img", 0);
	assert_true(fd >= 0);
	assert_int_equal(rdb_xen_image_write(fd, k->st.config.data,
					     k->st.config.len, k->committed.data,
					     k->committed.len, k->ram,
					     sizeof(k->ram), err, sizeof(err)), 0);
	len = lseek(fd, 0, SEEK_END);
	img = mmap(NULL, (size_t)len, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(img != MAP_FAILED);
	/* xl's header as given, then a plain libxl stream to END */
	assert_memory_equal(img, xl_header, hl);
	assert_int_equal(rdb_xc_parser_init(&p, RDB_XC_LIBXL, &img_ops, m), 0);
	assert_int_equal(rdb_xc_parser_feed(&p, img + hl, (size_t)len - hl), 0);
	assert_int_equal(m->ends, 1);
	assert_int_equal(m->epochs, 0);	/* plain: no CHECKPOINT */
	assert_int_equal(m->pages, NPFN);
	assert_int_equal(m->xtab, 100);
	/* every populated pfn's data as committed (pfns 10..19: epoch 1's) */
	assert_int_equal(m->pages_data_ok, NPFN - 100);
	for (unsigned i = 0; i < NPFN; i++)
		assert_int_equal(m->type[i], i >= 10 && i < 20 ? 0x9 :
				 i >= NPFN - 100 ? 0xf : 0);
	/* static records, then epoch 1's: tsc, shared info, vcpu 0 (not
	 * epoch 0's vcpu 1), in order */
	assert_int_equal(m->nrec, 7);
	assert_int_equal(m->recs[0], RDB_XC_X86_PV_INFO);
	assert_int_equal(m->recs[1], RDB_XC_STATIC_DATA_END);
	assert_int_equal(m->recs[2], RDB_XC_X86_PV_P2M_FRAMES);
	assert_int_equal(m->recs[3], RDB_XC_TSC_INFO);
	assert_int_equal(m->recs[4], RDB_XC_SHARED_INFO);
	assert_int_equal(m->recs[5], RDB_XC_X86_PV_VCPU_BASIC);
	assert_int_equal(m->rec_tag[5], 0xa1);
	assert_int_equal(m->recs[6], RDB_XC_X86_PV_VCPU_EXTENDED);
	rdb_xc_parser_dispose(&p);
	munmap(img, (size_t)len);
	close(fd);
	free(m);
	keeper_free(k);
}

/* Fed a byte at a time, the same blobs. */
static void test_split_same(void **state)
{
	struct keeper *a = keep_stream(1 << 20), *b = keep_stream(1);

	assert_int_equal(a->committed.len, b->committed.len);
	assert_memory_equal(a->committed.data, b->committed.data, a->committed.len);
	assert_int_equal(a->st.config.len, b->st.config.len);
	assert_memory_equal(a->st.config.data, b->st.config.data, a->st.config.len);
	assert_memory_equal(a->ram, b->ram, sizeof(a->ram));
	keeper_free(a);
	keeper_free(b);
}

static void test_refused(void **state)
{
	struct keeper *k = keep_stream(1 << 20);
	struct rdb_xen_state s;
	struct rdb_xc_domain hvm = { 3, 2, 4, 17 }, pv = { 3, 1, 4, 17 };
	uint8_t p2m[8] = { 0 }, info[8] = { 8, 4 };
	char err[200];
	int fd = memfd_create("img", 0);

	/* an HVM stream; records out of place */
	rdb_xen_state_init(&s);
	assert_int_equal(rdb_xen_state_domain(&s, &hvm), -EPROTO);
	assert_non_null(strstr(s.err, "only x86 PV"));
	assert_int_equal(rdb_xen_state_record(&s, RDB_XC_X86_PV_INFO, info, 8),
			 -EPROTO);
	assert_int_equal(rdb_xen_state_domain(&s, &pv), 0);
	assert_int_equal(rdb_xen_state_page(&s, 0, 0), -EPROTO);
	assert_non_null(strstr(s.err, "before X86_PV_P2M_FRAMES"));
	p2m[4] = 9;
	assert_int_equal(rdb_xen_state_record(&s, RDB_XC_X86_PV_P2M_FRAMES, p2m, 8), 1);
	assert_int_equal(s.npfns, 10);
	assert_int_equal(rdb_xen_state_page(&s, 10, 0), -EPROTO);
	assert_int_equal(rdb_xen_state_record(&s, RDB_XC_X86_PV_P2M_FRAMES, p2m, 8),
			 -EPROTO);
	assert_int_equal(rdb_xen_state_record(&s, RDB_XC_HVM_CONTEXT, info, 8),
			 -EPROTO);
	rdb_xen_state_dispose(&s);

	/* an image from blobs that lack what a restore needs */
	assert_int_equal(rdb_xen_image_write(fd, k->st.config.data,
					     k->st.config.len, k->committed.data,
					     k->committed.len, k->ram,
					     sizeof(k->ram) - 4096, err,
					     sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "bytes of RAM"));
	assert_int_equal(rdb_xen_image_write(fd, k->st.config.data,
					     k->st.config.len, k->committed.data,
					     k->committed.len - 8, k->ram,
					     sizeof(k->ram), err, sizeof(err)),
			 -EPROTO);
	{
		/* devstate without vcpu 0: only its TYPES record */
		struct rdb_buf t;
		uint8_t run[8] = { 0 };

		rdb_buf_init(&t);
		run[0] = (uint8_t)(NPFN & 0xff);
		run[1] = (uint8_t)(NPFN >> 8);
		rec(&t, RDB_XEN_REC_TYPES, run, 8);
		assert_int_equal(rdb_xen_image_write(fd, k->st.config.data,
						     k->st.config.len, t.data,
						     t.len, k->ram, sizeof(k->ram),
						     err, sizeof(err)), -EPROTO);
		assert_non_null(strstr(err, "no vcpu 0"));
		rdb_buf_dispose(&t);
	}
	/* config without xl's header */
	{
		struct rdb_xen_state c;
		struct rdb_xc_domain d = pv;

		rdb_xen_state_init(&c);
		assert_int_equal(rdb_xen_state_domain(&c, &d), 0);
		p2m[4] = (uint8_t)((NPFN - 1) & 0xff);
		p2m[5] = (uint8_t)((NPFN - 1) >> 8);
		assert_int_equal(rdb_xen_state_record(&c, RDB_XC_X86_PV_P2M_FRAMES,
						      p2m, 8), 1);
		assert_int_equal(rdb_xen_image_write(fd, c.config.data,
						     c.config.len, k->committed.data,
						     k->committed.len, k->ram,
						     sizeof(k->ram), err,
						     sizeof(err)), -EPROTO);
		assert_non_null(strstr(err, "no xl header"));
		rdb_xen_state_dispose(&c);
	}
	assert_int_equal(lseek(fd, 0, SEEK_END), 0);	/* nothing written */
	close(fd);
	keeper_free(k);
}

/* ---- the restored domain's disk (rdb_xen_config_set_disk) ---- */

static void blob_rec(struct rdb_buf *b, uint32_t type, const void *body,
		     size_t len)
{
	static const uint8_t zero[8];
	uint32_t h[2] = { type, (uint32_t)len };	/* (a little-endian host) */

	assert_int_equal(rdb_buf_append(b, h, 8), 0);
	assert_int_equal(rdb_buf_append(b, body, len), 0);
	assert_int_equal(rdb_buf_append(b, zero, (8 - len % 8) % 8), 0);
}

/* DOMAIN, XL_HEADER(json), one static record */
static void config_with(struct rdb_buf *b, const char *json)
{
	static const uint8_t dom[16] = { 1, 2, 3 };
	uint32_t jl = (uint32_t)strlen(json) + 1;
	uint32_t v[5] = { 0x01020304, 3, 0, jl + 4, jl };
	struct rdb_buf h;

	rdb_buf_init(b);
	rdb_buf_init(&h);
	assert_int_equal(rdb_buf_append(&h, "Xen saved domain, xl format\n \0 \r", 32), 0);
	assert_int_equal(rdb_buf_append(&h, v, sizeof(v)), 0);
	assert_int_equal(rdb_buf_append(&h, json, jl), 0);
	blob_rec(b, RDB_XEN_REC_DOMAIN, dom, sizeof(dom));
	blob_rec(b, RDB_XEN_REC_XL_HEADER, h.data, h.len);
	blob_rec(b, 0x5, "STATIC!!", 8);
	rdb_buf_dispose(&h);
}

/* The JSON in a config blob built by config_with (or rewritten). */
static const char *config_json(const struct rdb_buf *b, uint32_t *jl)
{
	const uint8_t *x = b->data + 24 + 8;	/* DOMAIN, then XL_HEADER's body */
	uint32_t rl, opt;

	memcpy(&rl, b->data + 24 + 4, 4);
	memcpy(&opt, x + 44, 4);
	memcpy(jl, x + 48, 4);
	assert_int_equal(opt, *jl + 4);
	assert_int_equal(rl, 52 + *jl);
	assert_int_equal(x[52 + *jl - 1], 0);
	/* the static record after it, intact */
	assert_memory_equal(b->data + 24 + 8 + rl + (8 - rl % 8) % 8 + 8,
			    "STATIC!!", 8);
	assert_int_equal(b->len, 24 + 8 + rl + (8 - rl % 8) % 8 + 16);
	return (const char *)x + 52;
}

static const char libxl_like[] =
	"{\n    \"c_info\": {\n        \"type\": \"pv\",\n        \"name\": \"drill\"\n    },\n"
	"    \"b_info\": {\n        \"max_memkb\": 18446744073709551615,\n"
	"        \"cmdline\": \"x \\\"disks\\\": [{\\\"script\\\": \\\"block-remusdb\\\"\",\n"
	"        \"weird\": [1, -2.5e3, true, null, {\"a\": [[]]}, {}]\n    },\n"
	"    \"disks\": [\n        {\n            \"pdev_path\": \"/srv/iso.img\",\n"
	"            \"vdev\": \"xvdb\",\n            \"backend\": \"phy\"\n        },\n"
	"        {\n            \"backend_domid\": 0,\n"
	"            \"pdev_path\": \"/var/tmp/drill/pri/run/drill.disk\",\n"
	"            \"vdev\": \"xvda\",\n            \"script\": \"block-remusdb\",\n"
	"            \"readwrite\": 1\n        }\n    ],\n"
	"    \"nics\": [\n        {\n            \"script\": \"vif-remusdb\"\n        }\n    ]\n}\n";

static void test_set_disk(void **state)
{
	struct rdb_buf in, out;
	char err[200] = "", want[sizeof(libxl_like) + 64];
	const char *at = strstr(libxl_like, "/var/tmp/drill/pri/run/drill.disk");
	const char *j;
	uint32_t jl;

	(void)state;
	config_with(&in, libxl_like);
	rdb_buf_init(&out);
	assert_int_equal(rdb_xen_config_set_disk(in.data, in.len, "block-remusdb",
						 "/var/tmp/drill/bak/run/drill.disk",
						 &out, err, sizeof(err)), 0);
	snprintf(want, sizeof(want), "%.*s/var/tmp/drill/bak/run/drill.disk%s",
		 (int)(at - libxl_like), libxl_like,
		 at + strlen("/var/tmp/drill/pri/run/drill.disk"));
	j = config_json(&out, &jl);
	assert_int_equal(jl, strlen(want) + 1);
	assert_string_equal(j, want);
	assert_memory_equal(out.data, in.data, 24);	/* DOMAIN as it was */

	/* a script named by its path; a target that needs escapes */
	rdb_buf_dispose(&in);
	config_with(&in, "{\"disks\":[{\"script\":\"/etc/xen/scripts/block-remusdb\","
		    "\"pdev_path\":\"/a\"}]}");
	assert_int_equal(rdb_xen_config_set_disk(in.data, in.len, "block-remusdb",
						 "/r\"q\\s", &out, err, sizeof(err)), 0);
	j = config_json(&out, &jl);
	assert_string_equal(j, "{\"disks\":[{\"script\":\"/etc/xen/scripts/block-remusdb\","
			    "\"pdev_path\":\"/r\\\"q\\\\s\"}]}");
	rdb_buf_dispose(&in);
	rdb_buf_dispose(&out);
}

static void test_set_disk_refused(void **state)
{
	static const struct {
		const char *json, *why;
	} bad[] = {
		{ "{\"disks\":[]}", "has 0 disks" },
		{ "{\"nics\":[{\"script\":\"block-remusdb\",\"pdev_path\":\"/a\"}]}", "has 0 disks" },
		{ "{\"disks\":[{\"script\":\"block-remusdbx\",\"pdev_path\":\"/a\"}]}", "has 0 disks" },
		{ "{\"disks\":[{\"script\":\"block-remusdb\",\"pdev_path\":\"/a\"},"
		  "{\"script\":\"block-remusdb\",\"pdev_path\":\"/b\"}]}", "has 2 disks" },
		{ "{\"disks\":[{\"script\":\"block-remusdb\"}]}", "bad disks" },
		{ "{\"disks\":[{\"script\":\"block-remusdb\",\"pdev_path\":\"/a\"}", "bad disks" },
		{ "{\"disks\":[{\"script\":\"block-remusdb\",\"pdev_path\":\"/a\"}]", "bad JSON" },
		{ "{\"disks\":[{\"script\":\"block-remusdb\",\"pdev_path\":\"/a}]}", "bad disks" },
		{ "[1]", "not a JSON object" },
		{ "{\"a\" 1}", "bad JSON" },
		{ "{\"disks\":[{\"script\":\"block-remusdb\",\"pdev_path\":7}]}", "bad disks" },
	};
	struct rdb_buf in, out;
	char err[200];

	(void)state;
	rdb_buf_init(&out);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		config_with(&in, bad[i].json);
		err[0] = 0;
		assert_int_equal(rdb_xen_config_set_disk(in.data, in.len,
							 "block-remusdb", "/t", &out,
							 err, sizeof(err)), -EPROTO);
		if (!strstr(err, bad[i].why))
			fail_msg("%s: \"%s\", not \"%s\"", bad[i].json, err, bad[i].why);
		/* a header whose lengths disagree */
		in.data[24 + 8 + 48] ^= 1;
		assert_int_equal(rdb_xen_config_set_disk(in.data, in.len,
							 "block-remusdb", "/t", &out,
							 err, sizeof(err)), -EPROTO);
		assert_non_null(strstr(err, "does not fit"));
		rdb_buf_dispose(&in);
	}
	/* no xl header at all; not xl's */
	{
		static const uint8_t dom[16];

		rdb_buf_init(&in);
		blob_rec(&in, RDB_XEN_REC_DOMAIN, dom, sizeof(dom));
		assert_int_equal(rdb_xen_config_set_disk(in.data, in.len,
							 "block-remusdb", "/t", &out,
							 err, sizeof(err)), -EPROTO);
		assert_non_null(strstr(err, "no xl header"));
		blob_rec(&in, RDB_XEN_REC_XL_HEADER, "Xen saved domain, XX format\n \0 \r"
			 "0123456789012345678901234567890123456789", 72);
		assert_int_equal(rdb_xen_config_set_disk(in.data, in.len,
							 "block-remusdb", "/t", &out,
							 err, sizeof(err)), -EPROTO);
		assert_non_null(strstr(err, "not xl's"));
		rdb_buf_dispose(&in);
	}
	rdb_buf_dispose(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_image_round_trip),
		cmocka_unit_test(test_split_same),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_set_disk),
		cmocka_unit_test(test_set_disk_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

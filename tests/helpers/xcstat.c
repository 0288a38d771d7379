// SPDX-License-Identifier: GPL-2.0-only
/*
 * xcstat: runs hypervisor/xen/xc_stream.c over a real stream from Xen's
 * xl, in the Xen test host's dom0 (tools/mkxenhost.sh), and prints what it
 * found as one JSON line:
 *
 *   xcstat FILE  ->  {"offset":N,"bytes":N,"xen":"4.17","domain_type":1,
 *                     "stream_version":3,"pages":N,"pages_with_data":N,
 *                     "records":N,"epochs":N,"end":true|false,"rest":N,
 *                     "ok":true|false,"error":"..."}
 *
 * FILE is what `xl save` wrote, or what xl remus sent (captured on its
 * way to xl migrate-receive): xl's own header and the domain's config
 * come first, so the libxl stream is found by its ident ("LibxlFmt") and
 * parsed from there (offset).  ok: no parse error; a stream cut short (a
 * primary destroyed mid-checkpoint) leaves `rest` bytes of an unfinished
 * record and is still ok.  Exit 0 if ok.
 *
 *   xcstat --image OUT FILE  ->  the same, then a second pass keeps what
 *                     hypervisor/xen/xen_state.c keeps of each checkpoint
 *                     (as the backup does) up to the last complete one,
 *                     and writes its xl save image to OUT (the header and
 *                     config are xl's, from FILE):
 *                     {"image":"OUT","epoch":N,"pfns":N,"image_bytes":N,
 *                      "ok":true|false,"error":"..."}
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xen/xc_stream.h"
#include "xen/xen_state.h"

struct stat_ {
	struct rdb_xc_domain dom;
	unsigned long long pages, data, records, epochs;
	int end;
};

static int on_domain(void *o, const struct rdb_xc_domain *d)
{
	((struct stat_ *)o)->dom = *d;
	return 0;
}

static int on_page(void *o, uint64_t epoch, uint64_t pfn, unsigned type,
		   const uint8_t *data)
{
	struct stat_ *s = o;

	s->pages++;
	s->data += data != NULL;
	return 0;
}

static int on_record(void *o, uint64_t epoch, bool libxl, uint32_t type,
		     const uint8_t *body, size_t len)
{
	((struct stat_ *)o)->records++;
	return 0;
}

static int on_epoch(void *o, uint64_t epoch)
{
	((struct stat_ *)o)->epochs++;
	return 0;
}

static int on_end(void *o)
{
	((struct stat_ *)o)->end = 1;
	return 0;
}

static const struct rdb_xc_ops ops = {
	.domain = on_domain, .page = on_page, .record = on_record,
	.epoch_end = on_epoch, .end = on_end,
};

/* Feeds FILE's libxl stream (from its "LibxlFmt") to p; offset: where it
 * starts.  The parser's result, or -ENOENT when there is none. */
static int feed_file(FILE *f, struct rdb_xc_parser *p,
		     unsigned long long *offset_out, unsigned long long *total_out)
{
	static const char ident[8] = "LibxlFmt";
	static uint8_t buf[1 << 20];
	unsigned long long offset = 0, total = 0;
	size_t have = 0, n;
	int found = 0, rc = 0;

	while (rc == 0 && (n = fread(buf + have, 1, sizeof(buf) - have, f)) > 0) {
		have += n;
		total += n;
		if (!found) {
			size_t i = 0;

			while (i + sizeof(ident) <= have &&
			       memcmp(buf + i, ident, sizeof(ident)))
				i++;
			if (i + sizeof(ident) > have) {
				/* keep the last 7 bytes: the ident may straddle */
				size_t keep = have < 7 ? have : 7;

				memmove(buf, buf + have - keep, keep);
				offset += have - keep;
				have = keep;
				continue;
			}
			found = 1;
			offset += i;
			memmove(buf, buf + i, have - i);
			have -= i;
		}
		rc = rdb_xc_parser_feed(p, buf, have);
		have = 0;
	}
	*offset_out = found ? offset : 0;
	*total_out = total;
	return found ? rc : -ENOENT;
}

/* ---- --image: the backup's keeping, up to the last complete epoch ---- */

struct keep {
	struct rdb_xen_state st;
	uint64_t last;			/* the epoch to restore */
	uint8_t *ram;
	struct rdb_buf devstate;
	const uint8_t *xl_header;
	size_t xl_header_len;
	int done;
};

static int k_domain(void *o, const struct rdb_xc_domain *d)
{
	struct keep *k = o;
	int rc = rdb_xen_state_domain(&k->st, d);

	return rc < 0 ? rc : rdb_xen_state_xl_header(&k->st, k->xl_header,
						     k->xl_header_len);
}

static int k_page(void *o, uint64_t epoch, uint64_t pfn, unsigned type,
		  const uint8_t *data)
{
	struct keep *k = o;
	int rc;

	if (epoch > k->last)
		return 0;
	rc = rdb_xen_state_page(&k->st, pfn, type);
	if (rc == 0 && data)
		memcpy(k->ram + pfn * RDB_XC_PAGE_SIZE, data, RDB_XC_PAGE_SIZE);
	return rc;
}

static int k_record(void *o, uint64_t epoch, bool libxl, uint32_t type,
		    const uint8_t *body, size_t len)
{
	struct keep *k = o;
	int rc;

	if (libxl || epoch > k->last)
		return 0;
	rc = rdb_xen_state_record(&k->st, type, body, len);
	if (rc == 1) {
		k->ram = calloc(k->st.npfns, RDB_XC_PAGE_SIZE);
		return k->ram ? 0 : -ENOMEM;
	}
	return rc;
}

static int k_epoch(void *o, uint64_t epoch)
{
	struct keep *k = o;
	int rc;

	if (epoch > k->last)
		return 0;
	rc = rdb_xen_state_epoch_end(&k->st, &k->devstate);
	if (rc == 0 && epoch == k->last) {
		k->done = 1;
		return -ECANCELED;	/* nothing after it is needed */
	}
	return rc;
}

static const struct rdb_xc_ops keep_ops = {
	.domain = k_domain, .page = k_page, .record = k_record,
	.epoch_end = k_epoch,
};

static int image(const char *out, const char *in, unsigned long long offset,
		 unsigned long long epochs)
{
	struct keep k = { .last = epochs - 1 };
	struct rdb_xc_parser p;
	unsigned long long off2, total;
	char err[200] = "";
	uint8_t *hdr = NULL;
	struct stat sb;
	FILE *f = fopen(in, "rb");
	int fd = -1, rc;

	rdb_xen_state_init(&k.st);
	rdb_buf_init(&k.devstate);
	hdr = malloc(offset ? offset : 1);
	rc = f && hdr && fread(hdr, 1, offset, f) == offset && fseek(f, 0, SEEK_SET) == 0 ?
		0 : -EIO;
	k.xl_header = hdr;
	k.xl_header_len = offset;
	if (rc == 0) {
		rdb_xc_parser_init(&p, RDB_XC_LIBXL, &keep_ops, &k);
		rc = feed_file(f, &p, &off2, &total);
		if (rc == -ECANCELED && k.done)
			rc = 0;
		if (rc < 0)
			snprintf(err, sizeof(err), "%s", rc == -EPROTO ?
				 (k.st.err[0] ? k.st.err : rdb_xc_parser_error(&p)) :
				 strerror(-rc));
		rdb_xc_parser_dispose(&p);
	} else {
		snprintf(err, sizeof(err), "reading %s: %s", in, strerror(errno));
	}
	if (rc == 0) {
		fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		rc = fd < 0 ? -errno : rdb_xen_image_write(fd, k.st.config.data,
				k.st.config.len, k.devstate.data, k.devstate.len,
				k.ram, k.st.npfns * RDB_XC_PAGE_SIZE, err,
				sizeof(err));
		if (fd < 0)
			snprintf(err, sizeof(err), "%s: %s", out, strerror(-rc));
		if (fd >= 0 && (fsync(fd) < 0 || close(fd) < 0) && rc == 0)
			rc = -errno;
	}
	printf("{\"image\":\"%s\",\"epoch\":%llu,\"pfns\":%llu,\"image_bytes\":%lld,"
	       "\"ok\":%s,\"error\":\"%s\"}\n", out, (unsigned long long)k.last,
	       (unsigned long long)k.st.npfns,
	       rc == 0 && stat(out, &sb) == 0 ? (long long)sb.st_size : 0LL,
	       rc == 0 ? "true" : "false", err);
	if (f)
		fclose(f);
	free(hdr);
	free(k.ram);
	rdb_buf_dispose(&k.devstate);
	rdb_xen_state_dispose(&k.st);
	return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct rdb_xc_parser p;
	struct stat_ s = { 0 };
	unsigned long long offset = 0, total = 0;
	const char *out = NULL, *in;
	int rc;
	FILE *f;

	if (argc == 4 && strcmp(argv[1], "--image") == 0) {
		out = argv[2];
	} else if (argc != 2) {
		fprintf(stderr, "usage: xcstat [--image OUT] FILE\n");
		return 2;
	}
	in = argv[argc - 1];
	f = fopen(in, "rb");
	if (!f) {
		fprintf(stderr, "xcstat: %s: %s\n", in, strerror(errno));
		return 2;
	}
	rdb_xc_parser_init(&p, RDB_XC_LIBXL, &ops, &s);
	rc = feed_file(f, &p, &offset, &total);
	fclose(f);
	printf("{\"offset\":%llu,\"bytes\":%llu,\"xen\":\"%u.%u\",\"domain_type\":%u,"
	       "\"stream_version\":%u,\"pages\":%llu,\"pages_with_data\":%llu,"
	       "\"records\":%llu,\"epochs\":%llu,\"end\":%s,\"rest\":%zu,"
	       "\"ok\":%s,\"error\":\"%s\"}\n",
	       offset, total, s.dom.xen_major, s.dom.xen_minor,
	       s.dom.type, s.dom.version, s.pages, s.data, s.records, s.epochs,
	       s.end ? "true" : "false", p.in.len,
	       rc == 0 ? "true" : "false",
	       rc == -ENOENT ? "no libxl stream (\\\"LibxlFmt\\\") in the file" :
	       rc ? rdb_xc_parser_error(&p) : "");
	rdb_xc_parser_dispose(&p);
	if (rc < 0)
		return 1;
	if (out) {
		if (!s.epochs) {
			printf("{\"image\":\"%s\",\"ok\":false,\"error\":\"no "
			       "complete checkpoint in %s\"}\n", out, in);
			return 1;
		}
		return image(out, in, offset, s.epochs);
	}
	return 0;
}

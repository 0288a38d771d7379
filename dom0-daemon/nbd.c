// SPDX-License-Identifier: GPL-2.0-only
#include "nbd.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define INIT_MAGIC 0x4e42444d41474943ULL	/* "NBDMAGIC" */
#define OPTS_MAGIC 0x49484156454F5054ULL	/* "IHAVEOPT" */
#define REP_MAGIC 0x0003e889045565a9ULL
#define REQUEST_MAGIC 0x25609513u
#define SIMPLE_REPLY_MAGIC 0x67446698u

#define FLAG_FIXED_NEWSTYLE 1u
#define FLAG_NO_ZEROES 2u

#define OPT_EXPORT_NAME 1
#define OPT_ABORT 2
#define OPT_LIST 3
#define OPT_INFO 6
#define OPT_GO 7

#define REP_ACK 1u
#define REP_SERVER 2u
#define REP_INFO 3u
#define REP_ERR(v) ((1u << 31) | (v))
#define REP_ERR_UNSUP REP_ERR(1)
#define REP_ERR_INVALID REP_ERR(3)
#define REP_ERR_UNKNOWN REP_ERR(6)

#define INFO_EXPORT 0
#define INFO_BLOCK_SIZE 3

#define TF_HAS_FLAGS (1u << 0)
#define TF_SEND_FLUSH (1u << 2)
#define TF_SEND_FUA (1u << 3)
#define TF_SEND_TRIM (1u << 5)
#define TF_SEND_WRITE_ZEROES (1u << 6)
#define TRANSMISSION_FLAGS (TF_HAS_FLAGS | TF_SEND_FLUSH | TF_SEND_FUA | \
			    TF_SEND_TRIM | TF_SEND_WRITE_ZEROES)

#define CMD_READ 0
#define CMD_WRITE 1
#define CMD_DISC 2
#define CMD_FLUSH 3
#define CMD_TRIM 4
#define CMD_WRITE_ZEROES 6
#define CMD_FLAG_FUA (1u << 0)
#define CMD_FLAG_NO_HOLE (1u << 1)

#define NBD_EPERM 1
#define NBD_EIO 5
#define NBD_ENOMEM 12
#define NBD_EINVAL 22
#define NBD_ENOSPC 28
#define NBD_EOVERFLOW 75
#define NBD_ENOTSUP 95

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) << 16 | get16(p + 2); }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

static int put(struct rdb_buf *b, uint64_t v, int bytes)
{
	uint8_t t[8];

	for (int i = 0; i < bytes; i++)
		t[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
	return rdb_buf_append(b, t, (size_t)bytes);
}

static int fail(struct rdb_nbd_server *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	s->phase = RDB_NBD_CLOSED;
	return -EPROTO;
}

uint32_t rdb_nbd_errno(int e)
{
	switch (-e) {
	case EPERM:
	case EROFS:
		return NBD_EPERM;
	case ENOMEM:
		return NBD_ENOMEM;
	case EINVAL:
		return NBD_EINVAL;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return NBD_ENOSPC;
	case EOVERFLOW:
		return NBD_EOVERFLOW;
	case ENOTSUP:
		return NBD_ENOTSUP;
	default:
		return NBD_EIO;
	}
}

int rdb_nbd_server_init(struct rdb_nbd_server *s, const char *export_name,
			uint64_t size, const struct rdb_nbd_ops *ops,
			void *opaque)
{
	int rc;

	memset(s, 0, sizeof(*s));
	if (strlen(export_name) >= sizeof(s->export_name))
		return -ENAMETOOLONG;
	strcpy(s->export_name, export_name);
	s->size = size;
	s->ops = ops;
	s->opaque = opaque;
	s->phase = RDB_NBD_CLIENT_FLAGS;
	rdb_buf_init(&s->in);
	rdb_buf_init(&s->out);
	rc = put(&s->out, INIT_MAGIC, 8);
	rc = rc ?: put(&s->out, OPTS_MAGIC, 8);
	rc = rc ?: put(&s->out, FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES, 2);
	return rc;
}

void rdb_nbd_server_dispose(struct rdb_nbd_server *s)
{
	rdb_buf_dispose(&s->in);
	rdb_buf_dispose(&s->out);
}

const char *rdb_nbd_server_error(const struct rdb_nbd_server *s)
{
	return s->err[0] ? s->err : "no error";
}

static int opt_reply(struct rdb_nbd_server *s, uint32_t opt, uint32_t type,
		     const void *data, uint32_t len)
{
	int rc = put(&s->out, REP_MAGIC, 8);

	rc = rc ?: put(&s->out, opt, 4);
	rc = rc ?: put(&s->out, type, 4);
	rc = rc ?: put(&s->out, len, 4);
	if (rc == 0 && len)
		rc = rdb_buf_append(&s->out, data, len);
	return rc;
}

/* The one export is found under its name or the empty (default) name. */
static bool name_ok(const struct rdb_nbd_server *s, const uint8_t *n, uint32_t l)
{
	return l == 0 || (l == strlen(s->export_name) &&
			  memcmp(n, s->export_name, l) == 0);
}

static int opt_go_info(struct rdb_nbd_server *s, uint32_t opt,
		       const uint8_t *d, uint32_t len)
{
	uint8_t info[12];
	uint32_t nl;
	uint16_t nreq;
	bool want_bs = false;
	int rc;

	if (len < 6 || (nl = get32(d)) > len - 6 ||
	    (nreq = get16(d + 4 + nl), len != 6 + nl + 2u * nreq))
		return opt_reply(s, opt, REP_ERR_INVALID, NULL, 0);
	if (!name_ok(s, d + 4, nl))
		return opt_reply(s, opt, REP_ERR_UNKNOWN, NULL, 0);
	for (uint16_t i = 0; i < nreq; i++)
		if (get16(d + 6 + nl + 2u * i) == INFO_BLOCK_SIZE)
			want_bs = true;
	info[0] = 0;
	info[1] = INFO_EXPORT;
	for (int i = 0; i < 8; i++)
		info[2 + i] = (uint8_t)(s->size >> (56 - 8 * i));
	info[10] = (uint8_t)(TRANSMISSION_FLAGS >> 8);
	info[11] = (uint8_t)TRANSMISSION_FLAGS;
	rc = opt_reply(s, opt, REP_INFO, info, 12);
	if (rc == 0 && want_bs) {
		/* min 1, preferred 4 KiB, max = what we accept in one request */
		uint8_t bs[14] = { 0, INFO_BLOCK_SIZE, 0, 0, 0, 1, 0, 0, 0x10, 0,
				   (uint8_t)(RDB_NBD_MAX_REQUEST >> 24),
				   (uint8_t)(RDB_NBD_MAX_REQUEST >> 16),
				   (uint8_t)(RDB_NBD_MAX_REQUEST >> 8),
				   (uint8_t)RDB_NBD_MAX_REQUEST };

		rc = opt_reply(s, opt, REP_INFO, bs, sizeof(bs));
	}
	rc = rc ?: opt_reply(s, opt, REP_ACK, NULL, 0);
	if (rc == 0 && opt == OPT_GO)
		s->phase = RDB_NBD_TRANSMISSION;
	return rc;
}

/* One option, if all of it is buffered: 1 done, 0 need more, <0 error. */
static int step_option(struct rdb_nbd_server *s)
{
	const uint8_t *b = s->in.data;
	uint32_t opt, len;
	int rc = 0;

	if (s->in.len < 16)
		return 0;
	if (get64(b) != OPTS_MAGIC)
		return fail(s, "option without IHAVEOPT magic");
	opt = get32(b + 8);
	len = get32(b + 12);
	if (len > RDB_NBD_MAX_OPTION)
		return fail(s, "option %u with %u bytes of data", opt, len);
	if (s->in.len < 16u + len)
		return 0;
	b += 16;
	switch (opt) {
	case OPT_EXPORT_NAME:
		/* No error reply exists for this option: a wrong name closes. */
		if (!name_ok(s, b, len))
			return fail(s, "client asked for an unknown export");
		rc = put(&s->out, s->size, 8);
		rc = rc ?: put(&s->out, TRANSMISSION_FLAGS, 2);
		if (rc == 0 && !s->no_zeroes) {
			static const uint8_t zeroes[124];

			rc = rdb_buf_append(&s->out, zeroes, sizeof(zeroes));
		}
		s->phase = RDB_NBD_TRANSMISSION;
		break;
	case OPT_ABORT:
		rc = opt_reply(s, opt, REP_ACK, NULL, 0);
		s->phase = RDB_NBD_CLOSED;
		break;
	case OPT_LIST: {
		uint8_t srv[4 + 256];
		uint32_t nl = (uint32_t)strlen(s->export_name);

		if (len) {
			rc = opt_reply(s, opt, REP_ERR_INVALID, NULL, 0);
			break;
		}
		srv[0] = (uint8_t)(nl >> 24);
		srv[1] = (uint8_t)(nl >> 16);
		srv[2] = (uint8_t)(nl >> 8);
		srv[3] = (uint8_t)nl;
		memcpy(srv + 4, s->export_name, nl);
		rc = opt_reply(s, opt, REP_SERVER, srv, 4 + nl);
		rc = rc ?: opt_reply(s, opt, REP_ACK, NULL, 0);
		break;
	}
	case OPT_INFO:
	case OPT_GO:
		rc = opt_go_info(s, opt, b, len);
		break;
	default:
		/* STARTTLS, structured replies, meta contexts, extended
		 * headers: simple replies are all QEMU needs. */
		rc = opt_reply(s, opt, REP_ERR_UNSUP, NULL, 0);
	}
	if (rc < 0)
		return rc;
	rdb_buf_consume(&s->in, 16u + len);
	return 1;
}

static int reply(struct rdb_nbd_server *s, uint32_t err, uint64_t cookie)
{
	int rc = put(&s->out, SIMPLE_REPLY_MAGIC, 4);

	if (err)
		s->errors++;
	rc = rc ?: put(&s->out, err, 4);
	return rc ?: put(&s->out, cookie, 8);
}

/* Range check: 0 when [off, off+len) is inside the export.  max: the
 * longest request of its kind (RDB_NBD_MAX_REQUEST for a payload). */
static uint32_t check_range(const struct rdb_nbd_server *s, uint64_t off,
			    uint32_t len, uint32_t max, uint32_t past_end)
{
	if (len == 0 || len > max)
		return NBD_EINVAL;
	if (off > s->size || len > s->size - off)
		return past_end;
	return 0;
}

/*
 * TRIM and WRITE_ZEROES carry no payload, and clients send them longer
 * than the maximum payload: QEMU's NBD client up to ~2 GiB (max_pdiscard
 * = INT_MAX) for a guest's discard when its drive has discard=unmap, the
 * Linux nbd driver any length.  The spec lets a server refuse those only
 * for want of resources; here they reach the storage RDB_NBD_MAX_REQUEST
 * at a time, as every other request does (each piece replicated as it
 * is done).  An error stops the rest; the range's contents are then
 * unspecified, as for any failed WRITE_ZEROES.
 */
static int zero_pieces(struct rdb_nbd_server *s, bool trim, uint64_t off,
		       uint32_t len, bool may_trim)
{
	while (len) {
		uint32_t n = len < RDB_NBD_MAX_REQUEST ? len : RDB_NBD_MAX_REQUEST;
		int rc = trim ? s->ops->trim(s->opaque, off, n) :
			s->ops->write_zeroes(s->opaque, off, n, may_trim);

		if (rc < 0)
			return rc;
		off += n;
		len -= n;
	}
	return 0;
}

static int step_request(struct rdb_nbd_server *s)
{
	const uint8_t *b = s->in.data;
	uint16_t flags, type;
	uint64_t cookie, off;
	uint32_t len, err;
	size_t need = 28;
	int rc;

	if (s->in.len < 28)
		return 0;
	if (get32(b) != REQUEST_MAGIC)
		return fail(s, "request with bad magic 0x%08x", get32(b));
	flags = get16(b + 4);
	type = get16(b + 6);
	cookie = get64(b + 8);
	off = get64(b + 16);
	len = get32(b + 24);
	if (type == CMD_WRITE) {
		if (len > RDB_NBD_MAX_REQUEST)
			return fail(s, "WRITE of %u bytes (max %u)", len,
				    RDB_NBD_MAX_REQUEST);
		need += len;
		if (s->in.len < need)
			return 0;
	}
	s->requests++;
	if (flags & ~(CMD_FLAG_FUA | CMD_FLAG_NO_HOLE)) {
		rc = reply(s, NBD_EINVAL, cookie);
		goto done;
	}
	switch (type) {
	case CMD_READ: {
		uint8_t *dst;

		err = check_range(s, off, len, RDB_NBD_MAX_REQUEST, NBD_EINVAL);
		if (err) {
			rc = reply(s, err, cookie);
			break;
		}
		/* Reserve room for header + data, read into place, then
		 * fix the header if the read failed. */
		dst = rdb_buf_reserve(&s->out, 16 + (size_t)len);
		if (!dst)
			return -ENOMEM;
		rc = s->ops->read(s->opaque, off, len, dst + 16);
		if (rc < 0) {
			rc = reply(s, rdb_nbd_errno(rc), cookie);
			break;
		}
		rc = reply(s, 0, cookie);
		/* reply() appended the header right where dst begins */
		s->out.len += len;
		break;
	}
	case CMD_WRITE:
		err = check_range(s, off, len, RDB_NBD_MAX_REQUEST, NBD_ENOSPC);
		if (!err) {
			rc = s->ops->write(s->opaque, off, len, b + 28,
					   flags & CMD_FLAG_FUA);
			err = rc < 0 ? rdb_nbd_errno(rc) : 0;
		}
		rc = reply(s, err, cookie);
		break;
	case CMD_FLUSH:
		rc = s->ops->flush(s->opaque);
		rc = reply(s, rc < 0 ? rdb_nbd_errno(rc) : 0, cookie);
		break;
	case CMD_TRIM:
	case CMD_WRITE_ZEROES:
		err = check_range(s, off, len, UINT32_MAX, NBD_ENOSPC);
		if (!err) {
			rc = zero_pieces(s, type == CMD_TRIM, off, len,
					 !(flags & CMD_FLAG_NO_HOLE));
			err = rc < 0 ? rdb_nbd_errno(rc) : 0;
		}
		rc = reply(s, err, cookie);
		break;
	case CMD_DISC:
		/* No reply: the client hangs up after it. */
		s->phase = RDB_NBD_CLOSED;
		rc = 0;
		break;
	default:
		rc = reply(s, NBD_EINVAL, cookie);
	}
done:
	if (rc < 0)
		return rc;
	rdb_buf_consume(&s->in, need);
	return 1;
}

int rdb_nbd_server_feed(struct rdb_nbd_server *s, const uint8_t *p, size_t n)
{
	int rc = 1;

	if (s->phase == RDB_NBD_CLOSED)
		return s->err[0] ? -EPROTO : 1;
	if (n && rdb_buf_append(&s->in, p, n) < 0)
		return -ENOMEM;
	while (rc == 1 && s->phase != RDB_NBD_CLOSED) {
		switch (s->phase) {
		case RDB_NBD_CLIENT_FLAGS:
			if (s->in.len < 4) {
				rc = 0;
				break;
			}
			if (!(get32(s->in.data) & FLAG_FIXED_NEWSTYLE))
				return fail(s, "client does not speak fixed newstyle");
			s->no_zeroes = get32(s->in.data) & FLAG_NO_ZEROES;
			rdb_buf_consume(&s->in, 4);
			s->phase = RDB_NBD_OPTIONS;
			break;
		case RDB_NBD_OPTIONS:
			rc = step_option(s);
			break;
		case RDB_NBD_TRANSMISSION:
			rc = step_request(s);
			break;
		case RDB_NBD_CLOSED:
			break;
		}
		if (rc < 0)
			return rc;
	}
	if (s->phase == RDB_NBD_CLOSED)
		return s->err[0] ? -EPROTO : 1;
	return 0;
}

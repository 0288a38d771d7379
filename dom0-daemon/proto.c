// SPDX-License-Identifier: GPL-2.0-only
#include "proto.h"
#include "clock.h"
#include "crc32c.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const msg_names[RDB_MSG__MAX] = {
	[RDB_MSG_HELLO] = "HELLO",
	[RDB_MSG_HELLO_ACK] = "HELLO_ACK",
	[RDB_MSG_HELLO_NAK] = "HELLO_NAK",
	[RDB_MSG_VM_SETUP] = "VM_SETUP",
	[RDB_MSG_PAGES] = "PAGES",
	[RDB_MSG_DEVSTATE] = "DEVSTATE",
	[RDB_MSG_EPOCH_END] = "EPOCH_END",
	[RDB_MSG_ACK] = "ACK",
	[RDB_MSG_HEARTBEAT] = "HEARTBEAT",
	[RDB_MSG_UNPROTECT] = "UNPROTECT",
	[RDB_MSG_ERROR] = "ERROR",
	[RDB_MSG_DISK_SETUP] = "DISK_SETUP",
	[RDB_MSG_DISK_WRITE] = "DISK_WRITE",
	[RDB_MSG_DISK_ZERO] = "DISK_ZERO",
	[RDB_MSG_DISK_FLUSH] = "DISK_FLUSH",
	[RDB_MSG_FLOWS] = "FLOWS",
	[RDB_MSG_VERIFY] = "VERIFY",
	[RDB_MSG_DISK_BASE] = "DISK_BASE",
	[RDB_MSG_HANDOVER] = "HANDOVER",
	[RDB_MSG_OUTPUT] = "OUTPUT",
	[RDB_MSG_INPUT] = "INPUT",
	[RDB_MSG_TIMING] = "TIMING",
};

const char *rdb_msg_name(enum rdb_msg_type t)
{
	return t > 0 && t < RDB_MSG__MAX ? msg_names[t] : "?";
}

/* ---- big-endian helpers ---- */

static void be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void be32(uint8_t *p, uint32_t v)
{
	be16(p, (uint16_t)(v >> 16));
	be16(p + 2, (uint16_t)v);
}

static void be64(uint8_t *p, uint64_t v)
{
	be32(p, (uint32_t)(v >> 32));
	be32(p + 4, (uint32_t)v);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

/* ---- encoding ---- */

/*
 * A frame is written in place: header, then the payload parts, then the
 * CRC over both is patched in.  parts/lens: up to 4 payload pieces.
 */
static int put_frame_dev(struct rdb_buf *out, enum rdb_msg_type type,
			 uint32_t device, uint64_t epoch,
			 const void *const *parts, const size_t *lens,
			 int nparts)
{
	size_t total = 0, at;
	uint8_t *h;

	for (int i = 0; i < nparts; i++)
		total += lens[i];
	if (total > RDB_PROTO_MAX_PAYLOAD)
		return -EMSGSIZE;
	h = rdb_buf_reserve(out, RDB_PROTO_HEADER_LEN + total);
	if (!h)
		return -ENOMEM;
	memset(h, 0, RDB_PROTO_HEADER_LEN);
	be32(h, RDB_PROTO_MAGIC);
	h[4] = RDB_PROTO_VERSION;
	h[5] = (uint8_t)type;
	be32(h + 8, (uint32_t)total);
	be32(h + 12, device);
	be64(h + 16, epoch);
	at = RDB_PROTO_HEADER_LEN;
	for (int i = 0; i < nparts; i++) {
		if (lens[i])
			memcpy(h + at, parts[i], lens[i]);
		at += lens[i];
	}
	be32(h + 24, rdb_crc32c(0, h, RDB_PROTO_HEADER_LEN + total));
	out->len += RDB_PROTO_HEADER_LEN + total;
	return 0;
}

static int put_frame(struct rdb_buf *out, enum rdb_msg_type type,
		     uint64_t epoch, const void *const *parts,
		     const size_t *lens, int nparts)
{
	return put_frame_dev(out, type, 0, epoch, parts, lens, nparts);
}

/* A frame of one payload piece about device (0: none, or the first). */
static int put1_dev(struct rdb_buf *out, enum rdb_msg_type type,
		    uint32_t device, uint64_t epoch, const void *p, size_t n)
{
	const void *parts[1] = { p };
	size_t lens[1] = { n };

	return put_frame_dev(out, type, device, epoch, parts, lens, 1);
}

static int put1(struct rdb_buf *out, enum rdb_msg_type type, uint64_t epoch,
		const void *p, size_t n)
{
	return put1_dev(out, type, 0, epoch, p, n);
}

int rdb_proto_put_hello(struct rdb_buf *out, const char *vm_name)
{
	return rdb_proto_put_hello_features(out, vm_name, 0);
}

int rdb_proto_put_hello_features(struct rdb_buf *out, const char *vm_name,
				 uint32_t features)
{
	uint8_t b[8 + 2 + 255];
	size_t n = strlen(vm_name);

	if (n > 255)
		return -ENAMETOOLONG;
	be16(b, RDB_PROTO_VERSION_MIN);
	be16(b + 2, RDB_PROTO_VERSION_MAX);
	be32(b + 4, features);
	be16(b + 8, (uint16_t)n);
	memcpy(b + 10, vm_name, n);
	return put1(out, RDB_MSG_HELLO, 0, b, 10 + n);
}

int rdb_proto_put_hello_ack(struct rdb_buf *out)
{
	return rdb_proto_put_hello_ack_features(out, 0);
}

int rdb_proto_put_hello_ack_features(struct rdb_buf *out, uint32_t features)
{
	return rdb_proto_put_hello_ack_version(out, RDB_PROTO_VERSION_MAX,
					       features);
}

int rdb_proto_put_hello_ack_version(struct rdb_buf *out, unsigned version,
				    uint32_t features)
{
	uint8_t b[6];

	if (version < RDB_PROTO_VERSION_MIN || version > RDB_PROTO_VERSION_MAX)
		return -EINVAL;
	be16(b, (uint16_t)version);
	be32(b + 2, features);
	return put1(out, RDB_MSG_HELLO_ACK, 0, b, sizeof(b));
}

int rdb_proto_put_hello_nak(struct rdb_buf *out, const char *reason)
{
	return put1(out, RDB_MSG_HELLO_NAK, 0, reason, strlen(reason));
}

int rdb_proto_put_vm_setup(struct rdb_buf *out,
			   const struct rdb_ram_block *blocks, size_t n,
			   const uint8_t *config, size_t config_len,
			   const char *vm_json)
{
	struct rdb_buf p;
	size_t jl = strlen(vm_json);
	uint8_t b[8];
	int rc = 0;

	if (n == 0 || n > RDB_MAX_RAM_BLOCKS)
		return -EINVAL;
	rdb_buf_init(&p);
	be16(b, (uint16_t)n);
	rc = rdb_buf_append(&p, b, 2);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		uint8_t l = (uint8_t)strnlen(blocks[i].idstr, 255);

		rc = rdb_buf_append(&p, &l, 1);
		if (rc == 0)
			rc = rdb_buf_append(&p, blocks[i].idstr, l);
		be64(b, blocks[i].used_length);
		if (rc == 0)
			rc = rdb_buf_append(&p, b, 8);
	}
	be32(b, (uint32_t)config_len);
	if (rc == 0)
		rc = rdb_buf_append(&p, b, 4);
	if (rc == 0 && config_len)
		rc = rdb_buf_append(&p, config, config_len);
	be32(b, (uint32_t)jl);
	if (rc == 0)
		rc = rdb_buf_append(&p, b, 4);
	if (rc == 0)
		rc = rdb_buf_append(&p, vm_json, jl);
	if (rc == 0)
		rc = put1(out, RDB_MSG_VM_SETUP, 0, p.data, p.len);
	rdb_buf_dispose(&p);
	return rc;
}

int rdb_proto_page_record_append(struct rdb_buf *records, uint64_t offset,
				 const uint8_t *data, uint8_t fill)
{
	uint8_t *p = rdb_buf_reserve(records, 9 + RDB_PAGE_SIZE);

	if (!p)
		return -ENOMEM;
	be64(p, offset);
	if (data) {
		p[8] = RDB_PAGE_RAW;
		memcpy(p + 9, data, RDB_PAGE_SIZE);
		records->len += 9 + RDB_PAGE_SIZE;
	} else {
		p[8] = RDB_PAGE_ZERO;
		p[9] = fill;
		records->len += 10;
	}
	return 0;
}

int rdb_proto_page_record_append_enc(struct rdb_buf *records, uint64_t offset,
				     enum rdb_page_enc enc, const uint8_t *data,
				     size_t len)
{
	size_t max = enc == RDB_PAGE_XORRLE ? RDB_PAGE_XORRLE_MAX :
		enc == RDB_PAGE_LZ4 ? RDB_PAGE_LZ4_MAX : 0;
	uint8_t *p;

	if (len == 0 || len > max)
		return -EINVAL;
	p = rdb_buf_reserve(records, 11 + len);
	if (!p)
		return -ENOMEM;
	be64(p, offset);
	p[8] = (uint8_t)enc;
	be16(p + 9, (uint16_t)len);
	memcpy(p + 11, data, len);
	records->len += 11 + len;
	return 0;
}

int rdb_proto_page_record_append_diskref(struct rdb_buf *records,
					 uint64_t offset, uint64_t disk_offset,
					 const uint8_t *sha256)
{
	uint8_t *p;

	if (disk_offset % RDB_PAGE_SIZE)
		return -EINVAL;
	p = rdb_buf_reserve(records, 9 + RDB_PAGE_DISKREF_BODY);
	if (!p)
		return -ENOMEM;
	be64(p, offset);
	p[8] = RDB_PAGE_DISKREF;
	be64(p + 9, disk_offset);
	memcpy(p + 17, sha256, RDB_DISKREF_HASH_LEN);
	records->len += 9 + RDB_PAGE_DISKREF_BODY;
	return 0;
}

size_t rdb_proto_page_record_size(const uint8_t *p)
{
	switch (p[8]) {
	case RDB_PAGE_RAW:
		return 9 + RDB_PAGE_SIZE;
	case RDB_PAGE_ZERO:
		return 10;
	case RDB_PAGE_XORRLE:
	case RDB_PAGE_LZ4:
		return 11 + get16(p + 9);
	case RDB_PAGE_DISKREF:
		return 9 + RDB_PAGE_DISKREF_BODY;
	default:
		return 0;
	}
}

uint64_t rdb_proto_page_record_offset(const uint8_t *p)
{
	return get64(p);
}

int rdb_proto_put_pages(struct rdb_buf *out, uint64_t epoch, uint32_t block,
			uint32_t count, const uint8_t *records, size_t len)
{
	uint8_t h[8];
	const void *parts[2] = { h, records };
	size_t lens[2] = { 8, len };

	if (count > RDB_PROTO_MAX_FRAME_PAGES)
		return -EMSGSIZE;
	be32(h, block);
	be32(h + 4, count);
	return put_frame(out, RDB_MSG_PAGES, epoch, parts, lens, 2);
}

int rdb_proto_put_devstate(struct rdb_buf *out, uint64_t epoch,
			   const uint8_t *blob, size_t len)
{
	return put1(out, RDB_MSG_DEVSTATE, epoch, blob, len);
}

int rdb_proto_put_epoch_end(struct rdb_buf *out, uint64_t epoch,
			    uint64_t pages, uint64_t bytes)
{
	uint8_t b[16];

	be64(b, pages);
	be64(b + 8, bytes);
	return put1(out, RDB_MSG_EPOCH_END, epoch, b, sizeof(b));
}

int rdb_proto_put_verify(struct rdb_buf *out, uint64_t epoch, uint64_t digest,
			 uint64_t pages)
{
	uint8_t b[16];

	be64(b, digest);
	be64(b + 8, pages);
	return put1(out, RDB_MSG_VERIFY, epoch, b, sizeof(b));
}

int rdb_proto_put_disk_setup(struct rdb_buf *out, uint32_t disk, uint64_t size)
{
	uint8_t b[8];

	be64(b, size);
	return put1_dev(out, RDB_MSG_DISK_SETUP, disk, 0, b, sizeof(b));
}

int rdb_proto_put_disk_setup_base(struct rdb_buf *out, uint32_t disk,
				  uint64_t size, uint64_t base_gen,
				  uint64_t base_epoch)
{
	uint8_t b[24];

	be64(b, size);
	be64(b + 8, base_gen);
	be64(b + 16, base_gen ? base_epoch : 0);
	return put1_dev(out, RDB_MSG_DISK_SETUP, disk, 0, b, sizeof(b));
}

int rdb_proto_put_disk_base(struct rdb_buf *out, uint32_t disk,
			    uint64_t generation,
			    uint32_t shift, const uint64_t *extents,
			    uint32_t count, const char *reason)
{
	uint8_t hdr[16], *list = NULL;
	const void *parts[2] = { hdr, NULL };
	size_t lens[2] = { 8, 0 };
	int rc;

	be64(hdr, generation);
	if (!generation) {
		parts[1] = reason ? reason : "";
		lens[1] = strlen(parts[1]);
		return put_frame_dev(out, RDB_MSG_DISK_BASE, disk, 0, parts,
				     lens, 2);
	}
	if (shift < 12 || shift > 40 ||
	    (uint64_t)count * 8 + 16 > RDB_PROTO_MAX_PAYLOAD)
		return -EINVAL;
	list = malloc(count ? (size_t)count * 8 : 1);
	if (!list)
		return -ENOMEM;
	for (uint32_t i = 0; i < count; i++) {
		if ((i && extents[i] <= extents[i - 1]) ||
		    extents[i] >> (64 - shift)) {
			free(list);
			return -EINVAL;
		}
		be64(list + (size_t)i * 8, extents[i]);
	}
	be32(hdr + 8, shift);
	be32(hdr + 12, count);
	lens[0] = 16;
	parts[1] = list;
	lens[1] = (size_t)count * 8;
	rc = put_frame_dev(out, RDB_MSG_DISK_BASE, disk, 0, parts, lens, 2);
	free(list);
	return rc;
}

int rdb_proto_put_disk_write(struct rdb_buf *out, uint32_t disk, uint64_t epoch,
			     uint64_t offset, const uint8_t *data, size_t len)
{
	uint8_t b[8];
	const void *parts[2] = { b, data };
	size_t lens[2] = { sizeof(b), len };

	if (len == 0 || len > RDB_PROTO_MAX_DISK_WRITE)
		return -EINVAL;
	be64(b, offset);
	return put_frame_dev(out, RDB_MSG_DISK_WRITE, disk, epoch, parts, lens,
			     2);
}

int rdb_proto_put_disk_zero(struct rdb_buf *out, uint32_t disk, uint64_t epoch,
			    uint64_t offset, uint64_t len)
{
	uint8_t b[16];

	if (len == 0)
		return -EINVAL;
	be64(b, offset);
	be64(b + 8, len);
	return put1_dev(out, RDB_MSG_DISK_ZERO, disk, epoch, b, sizeof(b));
}

int rdb_proto_put_disk_flush(struct rdb_buf *out, uint32_t disk, uint64_t epoch)
{
	return put1_dev(out, RDB_MSG_DISK_FLUSH, disk, epoch, NULL, 0);
}

int rdb_proto_put_flows(struct rdb_buf *out, uint32_t nic, uint64_t epoch,
			const struct rdb_flow_rec *recs, size_t n)
{
	size_t len = 4 + n * RDB_FLOWREC_LEN;
	const void *parts[1];
	size_t lens[1] = { len };
	uint8_t *b;
	int rc;

	if (len > RDB_PROTO_MAX_PAYLOAD)
		return -EMSGSIZE;
	b = calloc(1, len);
	if (!b)
		return -ENOMEM;
	be32(b, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		const struct rdb_flow_rec *r = &recs[i];
		uint8_t *q = b + 4 + i * RDB_FLOWREC_LEN;
		size_t ipn = r->key.family == 4 ? 4 : 16;

		q[0] = r->op;
		q[1] = r->key.family;
		q[2] = (uint8_t)((r->vlan ? 1 : 0) | (r->have_ack ? 2 : 0));
		be16(q + 4, r->vlan_tci);
		be16(q + 6, r->key.guest_port);
		be16(q + 8, r->key.peer_port);
		memcpy(q + 12, r->key.guest_ip, ipn);
		memcpy(q + 28, r->key.peer_ip, ipn);
		memcpy(q + 44, r->guest_mac, 6);
		memcpy(q + 50, r->peer_mac, 6);
		be32(q + 56, r->snd_ref);
		be32(q + 60, r->rcv_ref);
	}
	parts[0] = b;
	rc = put_frame_dev(out, RDB_MSG_FLOWS, nic, epoch, parts, lens, 1);
	free(b);
	return rc;
}

int rdb_proto_put_ack(struct rdb_buf *out, uint64_t epoch)
{
	return put1(out, RDB_MSG_ACK, epoch, NULL, 0);
}

int rdb_proto_put_heartbeat(struct rdb_buf *out, uint64_t seq,
			    uint64_t sender_ns)
{
	uint8_t b[16];

	be64(b, seq);
	be64(b + 8, sender_ns);
	return put1(out, RDB_MSG_HEARTBEAT, 0, b, sizeof(b));
}

int rdb_proto_put_unprotect(struct rdb_buf *out, const char *vm_name)
{
	return put1(out, RDB_MSG_UNPROTECT, 0, NULL, 0);
}

int rdb_proto_put_error(struct rdb_buf *out, const char *msg)
{
	size_t n = strlen(msg);

	return put1(out, RDB_MSG_ERROR, 0, msg, n > 1024 ? 1024 : n);
}

int rdb_proto_put_handover(struct rdb_buf *out, uint64_t epoch,
			   enum rdb_handover_verb verb, const char *reason)
{
	uint8_t b[1 + 256];
	size_t n = reason ? strlen(reason) : 0;

	if (verb < RDB_HANDOVER_REQUEST || verb > RDB_HANDOVER_READY ||
	    (n && verb != RDB_HANDOVER_REFUSED && verb != RDB_HANDOVER_READY))
		return -EINVAL;
	if (n > sizeof(b) - 1)
		n = sizeof(b) - 1;
	b[0] = (uint8_t)verb;
	if (n)
		memcpy(b + 1, reason, n);
	return put1(out, RDB_MSG_HANDOVER, epoch, b, 1 + n);
}

static int put_frames(struct rdb_buf *out, enum rdb_msg_type type,
		      uint32_t device, uint64_t epoch, const uint8_t *recs,
		      size_t len)
{
	size_t at = 0;

	while (at < len) {
		size_t take = 0;
		int rc;

		/* whole records, as many as one frame holds (at least one) */
		while (at + take + 4 <= len) {
			size_t r = 4 + get32(recs + at + take);

			if (r - 4 == 0 || r - 4 > RDB_OUTPUT_MAX_FRAME ||
			    at + take + r > len)
				return -EINVAL;
			if (take && take + r > RDB_PROTO_MAX_PAYLOAD)
				break;
			take += r;
		}
		if (take == 0)
			return -EINVAL;
		rc = put1_dev(out, type, device, epoch, recs + at, take);
		if (rc < 0)
			return rc;
		at += take;
	}
	return 0;
}

int rdb_proto_put_output(struct rdb_buf *out, uint32_t nic, uint64_t epoch,
			 const uint8_t *recs, size_t len)
{
	return put_frames(out, RDB_MSG_OUTPUT, nic, epoch, recs, len);
}

int rdb_proto_put_input(struct rdb_buf *out, uint32_t nic, uint64_t epoch,
			const uint8_t *recs, size_t len)
{
	return put_frames(out, RDB_MSG_INPUT, nic, epoch, recs, len);
}

/* ---- decoding ---- */

void rdb_proto_decoder_init(struct rdb_proto_decoder *d)
{
	rdb_buf_init(&d->in);
	d->pending = 0;
	d->err[0] = 0;
}

void rdb_proto_decoder_dispose(struct rdb_proto_decoder *d)
{
	rdb_buf_dispose(&d->in);
	d->pending = 0;
}

void rdb_proto_decoder_move(struct rdb_proto_decoder *dst,
			    struct rdb_proto_decoder *src)
{
	rdb_proto_decoder_dispose(dst);
	*dst = *src;
	rdb_proto_decoder_init(src);
}

int rdb_proto_decoder_feed(struct rdb_proto_decoder *d, const void *p,
			   size_t n)
{
	return rdb_buf_append(&d->in, p, n);
}

int rdb_proto_decoder_read_fd(struct rdb_proto_decoder *d, int fd)
{
	size_t want = 256 * 1024;
	bool got = false;

	for (int i = 0; i < 16; i++) {
		uint8_t *dst = rdb_buf_reserve(&d->in, want);
		ssize_t r;

		if (!dst)
			return -ENOMEM;
		r = read(fd, dst, want);
		if (r > 0) {
			d->in.len += (size_t)r;
			got = true;
			if ((size_t)r < want)
				break;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return got ? 0 : -EAGAIN;
		if (r == 0)
			return -ECONNRESET;
		return -errno;
	}
	return 0;
}

int rdb_proto_decoder_read_fd_deadline(struct rdb_proto_decoder *d, int fd,
				       uint64_t deadline_ns)
{
	for (;;) {
		int rc = rdb_proto_decoder_read_fd(d, fd);
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now;

		if (rc != -EAGAIN)
			return rc;
		now = rdb_now_ns();
		if (now >= deadline_ns)
			return -ETIMEDOUT;
		poll(&pfd, 1, (int)((deadline_ns - now) / RDB_NS_PER_MS) + 1);
	}
}

static int fail(struct rdb_proto_decoder *d, const char *fmt, unsigned long v)
{
	snprintf(d->err, sizeof(d->err), fmt, v);
	return -EPROTO;
}

/* The frames whose header's device field may be other than 0. */
static bool names_device(uint8_t type)
{
	switch (type) {
	case RDB_MSG_DISK_SETUP:
	case RDB_MSG_DISK_BASE:
	case RDB_MSG_DISK_WRITE:
	case RDB_MSG_DISK_ZERO:
	case RDB_MSG_DISK_FLUSH:
	case RDB_MSG_FLOWS:
	case RDB_MSG_OUTPUT:
	case RDB_MSG_INPUT:
		return true;
	default:
		return false;
	}
}

int rdb_proto_decoder_next(struct rdb_proto_decoder *d, struct rdb_frame *f)
{
	const uint8_t *h;
	uint32_t len, crc;
	uint8_t hdr[RDB_PROTO_HEADER_LEN];

	/* The frame returned last time is done with now. */
	rdb_buf_consume(&d->in, d->pending);
	d->pending = 0;
	if (d->in.len < RDB_PROTO_HEADER_LEN)
		return 0;
	h = d->in.data;
	if (get32(h) != RDB_PROTO_MAGIC)
		return fail(d, "bad frame magic 0x%08lx", get32(h));
	if (h[4] != RDB_PROTO_VERSION) {
		fail(d, "unsupported frame version %lu", h[4]);
		return -EPROTONOSUPPORT;
	}
	if (h[5] == 0 || h[5] >= RDB_MSG__MAX)
		return fail(d, "unknown message type %lu", h[5]);
	/* v1 defines no flag and uses no reserved field: a peer setting one
	 * speaks something we did not negotiate.  Only a disk's frames name
	 * a device (whether the receiver has it is the receiver's check). */
	if (get16(h + 6))
		return fail(d, "undefined frame flags 0x%04lx", get16(h + 6));
	if (get32(h + 28))
		return fail(d, "reserved header field set (0x%08lx)",
			    get32(h + 28));
	if (get32(h + 12) && !names_device(h[5])) {
		snprintf(d->err, sizeof(d->err), "a %s frame names device %lu",
			 rdb_msg_name(h[5]), (unsigned long)get32(h + 12));
		return -EPROTO;
	}
	len = get32(h + 8);
	if (len > RDB_PROTO_MAX_PAYLOAD)
		return fail(d, "frame payload of %lu bytes is over the limit", len);
	if (d->in.len < RDB_PROTO_HEADER_LEN + (size_t)len)
		return 0;
	memcpy(hdr, h, sizeof(hdr));
	memset(hdr + 24, 0, 4);
	crc = rdb_crc32c(0, hdr, sizeof(hdr));
	crc = rdb_crc32c(crc, h + RDB_PROTO_HEADER_LEN, len);
	if (crc != get32(h + 24))
		return fail(d, "CRC mismatch on a %lu-byte frame", len);
	f->type = h[5];
	f->flags = get16(h + 6);
	f->device = get32(h + 12);
	f->epoch = get64(h + 16);
	f->payload = h + RDB_PROTO_HEADER_LEN;
	f->len = len;
	d->pending = RDB_PROTO_HEADER_LEN + len;
	return 1;
}

const char *rdb_proto_decoder_error(const struct rdb_proto_decoder *d)
{
	return d->err[0] ? d->err : "no error";
}

/* ---- payload parsers ---- */

struct rd {
	const uint8_t *p, *end;
};

static bool take(struct rd *r, size_t n, const uint8_t **out)
{
	if ((size_t)(r->end - r->p) < n)
		return false;
	*out = r->p;
	r->p += n;
	return true;
}

int rdb_msg_hello_parse(const struct rdb_frame *f, char *name, size_t namelen)
{
	struct rd r = { f->payload, f->payload + f->len };
	const uint8_t *h, *s;
	uint16_t n;

	if (f->type != RDB_MSG_HELLO || !take(&r, 10, &h))
		return -EPROTO;
	n = get16(h + 8);
	if (!take(&r, n, &s) || r.p != r.end || n == 0 || n >= namelen ||
	    memchr(s, 0, n))
		return -EPROTO;
	if (rdb_msg_hello_version(f) < 0)
		return -EPROTONOSUPPORT;
	memcpy(name, s, n);
	name[n] = 0;
	return 0;
}

int rdb_msg_hello_version(const struct rdb_frame *f)
{
	unsigned vmin, vmax, lo, hi;

	if (f->type != RDB_MSG_HELLO || f->len < 4)
		return -EPROTO;
	vmin = get16(f->payload);
	vmax = get16(f->payload + 2);
	lo = vmin > RDB_PROTO_VERSION_MIN ? vmin : RDB_PROTO_VERSION_MIN;
	hi = vmax < RDB_PROTO_VERSION_MAX ? vmax : RDB_PROTO_VERSION_MAX;
	return lo <= hi ? (int)hi : -EPROTONOSUPPORT;
}

uint32_t rdb_msg_hello_features(const struct rdb_frame *f)
{
	return f->type == RDB_MSG_HELLO && f->len >= 8 ? get32(f->payload + 4) : 0;
}

int rdb_proto_check_hello_ack_features(const struct rdb_frame *f,
				       uint32_t offered, uint32_t *granted)
{
	uint32_t g;

	if (f->type != RDB_MSG_HELLO_ACK || f->len != 6)
		return -EPROTO;
	/* one of those HELLO offered */
	if (get16(f->payload) < RDB_PROTO_VERSION_MIN ||
	    get16(f->payload) > RDB_PROTO_VERSION_MAX)
		return -EPROTONOSUPPORT;
	/* A peer granting what was not offered is confused. */
	g = get32(f->payload + 2);
	if (g & ~offered)
		return -EPROTO;
	*granted = g;
	return 0;
}

unsigned rdb_msg_hello_ack_version(const struct rdb_frame *f)
{
	return f->type == RDB_MSG_HELLO_ACK && f->len == 6 ?
		get16(f->payload) : 0;
}

int rdb_proto_check_hello_ack(const struct rdb_frame *f)
{
	uint32_t g;

	return rdb_proto_check_hello_ack_features(f, 0, &g);
}

void rdb_vm_setup_dispose(struct rdb_vm_setup *s)
{
	free(s->blocks);
	free(s->config);
	free(s->vm_json);
	memset(s, 0, sizeof(*s));
}

int rdb_msg_vm_setup_parse(const struct rdb_frame *f, struct rdb_vm_setup *out)
{
	struct rd r = { f->payload, f->payload + f->len };
	const uint8_t *p;
	uint32_t n;

	memset(out, 0, sizeof(*out));
	if (f->type != RDB_MSG_VM_SETUP || !take(&r, 2, &p))
		return -EPROTO;
	out->nblocks = get16(p);
	if (out->nblocks == 0 || out->nblocks > RDB_MAX_RAM_BLOCKS)
		return -EPROTO;
	out->blocks = calloc(out->nblocks, sizeof(*out->blocks));
	if (!out->blocks)
		return -ENOMEM;
	for (size_t i = 0; i < out->nblocks; i++) {
		const uint8_t *s;
		uint8_t l;

		if (!take(&r, 1, &p))
			goto bad;
		l = *p;
		if (l == 0 || !take(&r, l, &s) || memchr(s, 0, l) ||
		    !take(&r, 8, &p))
			goto bad;
		memcpy(out->blocks[i].idstr, s, l);
		out->blocks[i].idstr[l] = 0;
		out->blocks[i].used_length = get64(p);
		if (out->blocks[i].used_length % RDB_PAGE_SIZE)
			goto bad;
	}
	if (!take(&r, 4, &p))
		goto bad;
	n = get32(p);
	if (!take(&r, n, &p))
		goto bad;
	out->config = malloc(n ? n : 1);
	if (!out->config)
		goto nomem;
	memcpy(out->config, p, n);
	out->config_len = n;
	if (!take(&r, 4, &p))
		goto bad;
	n = get32(p);
	if (!take(&r, n, &p) || r.p != r.end || memchr(p, 0, n))
		goto bad;
	out->vm_json = malloc((size_t)n + 1);
	if (!out->vm_json)
		goto nomem;
	memcpy(out->vm_json, p, n);
	out->vm_json[n] = 0;
	return 0;
bad:
	rdb_vm_setup_dispose(out);
	return -EPROTO;
nomem:
	rdb_vm_setup_dispose(out);
	return -ENOMEM;
}

/* The shortest page record: offset:u64 enc:u8 and a ZERO page's fill:u8. */
#define PAGE_REC_MIN 10

int rdb_msg_pages_begin(const struct rdb_frame *f, struct rdb_pages_iter *it)
{
	uint32_t count;

	if (f->type != RDB_MSG_PAGES || f->len < 8)
		return -EPROTO;
	/* A count the payload cannot hold is refused before any record is
	 * read, so that a caller may size its work by the count. */
	count = get32(f->payload + 4);
	if ((uint64_t)count * PAGE_REC_MIN > f->len - 8)
		return -EPROTO;
	it->block = get32(f->payload);
	it->left = count;
	it->p = f->payload + 8;
	it->end = f->payload + f->len;
	return 0;
}

int rdb_msg_pages_next(struct rdb_pages_iter *it, struct rdb_page_rec *rec)
{
	struct rd r = { it->p, it->end };
	const uint8_t *p;

	if (it->left == 0)
		return r.p == r.end ? 0 : -EPROTO;
	if (!take(&r, 9, &p))
		return -EPROTO;
	rec->offset = get64(p);
	rec->enc = p[8];
	switch (rec->enc) {
	case RDB_PAGE_RAW:
		if (!take(&r, RDB_PAGE_SIZE, &rec->data))
			return -EPROTO;
		break;
	case RDB_PAGE_ZERO:
		if (!take(&r, 1, &p))
			return -EPROTO;
		rec->data = NULL;
		rec->fill = *p;
		break;
	case RDB_PAGE_XORRLE:
	case RDB_PAGE_LZ4:
		if (!take(&r, 2, &p))
			return -EPROTO;
		rec->len = get16(p);
		if (rec->len == 0 || rec->len > (rec->enc == RDB_PAGE_XORRLE ?
						 RDB_PAGE_XORRLE_MAX : RDB_PAGE_LZ4_MAX) ||
		    !take(&r, rec->len, &rec->data))
			return -EPROTO;
		break;
	case RDB_PAGE_DISKREF:
		if (!take(&r, 8, &p))
			return -EPROTO;
		rec->disk_offset = get64(p);
		if (rec->disk_offset % RDB_PAGE_SIZE ||
		    !take(&r, RDB_DISKREF_HASH_LEN, &rec->data))
			return -EPROTO;
		rec->len = RDB_DISKREF_HASH_LEN;
		break;
	default:
		return -EPROTO;
	}
	it->p = r.p;
	it->left--;
	return 1;
}

int rdb_msg_heartbeat_parse(const struct rdb_frame *f, uint64_t *seq_out,
			    uint64_t *sender_ns_out)
{
	if (f->type != RDB_MSG_HEARTBEAT || f->len != 16)
		return -EPROTO;
	*seq_out = get64(f->payload);
	*sender_ns_out = get64(f->payload + 8);
	return 0;
}

int rdb_msg_text_parse(const struct rdb_frame *f, char *text, size_t textlen)
{
	size_t n;

	if ((f->type != RDB_MSG_ERROR && f->type != RDB_MSG_HELLO_NAK) ||
	    textlen == 0)
		return -EPROTO;
	/* The text goes into logs: anything but printable ASCII becomes '?'. */
	n = f->len < textlen - 1 ? f->len : textlen - 1;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = f->payload[i];

		text[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	text[n] = 0;
	return 0;
}

int rdb_msg_output_begin(const struct rdb_frame *f, struct rdb_output_iter *it)
{
	if ((f->type != RDB_MSG_OUTPUT && f->type != RDB_MSG_INPUT) ||
	    f->len == 0)
		return -EPROTO;
	it->p = f->payload;
	it->end = f->payload + f->len;
	return 0;
}

int rdb_msg_output_next(struct rdb_output_iter *it, const uint8_t **frame,
			size_t *len)
{
	uint32_t n;

	if (it->p == it->end)
		return 0;
	if (it->end - it->p < 4)
		return -EPROTO;
	n = get32(it->p);
	if (n == 0 || n > RDB_OUTPUT_MAX_FRAME || (size_t)(it->end - it->p) - 4 < n)
		return -EPROTO;
	*frame = it->p + 4;
	*len = n;
	it->p += 4 + n;
	return 1;
}

int rdb_msg_handover_parse(const struct rdb_frame *f,
			   enum rdb_handover_verb *verb, char *reason,
			   size_t reasonlen)
{
	size_t n;

	if (f->type != RDB_MSG_HANDOVER || f->len < 1 || f->len > 257 ||
	    reasonlen == 0)
		return -EPROTO;
	if (f->payload[0] < RDB_HANDOVER_REQUEST ||
	    f->payload[0] > RDB_HANDOVER_READY ||
	    (f->len > 1 && f->payload[0] != RDB_HANDOVER_REFUSED &&
	     f->payload[0] != RDB_HANDOVER_READY))
		return -EPROTO;
	*verb = (enum rdb_handover_verb)f->payload[0];
	n = f->len - 1 < reasonlen - 1 ? f->len - 1 : reasonlen - 1;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = f->payload[1 + i];

		reason[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	reason[n] = 0;
	return 0;
}

int rdb_msg_disk_setup_parse(const struct rdb_frame *f, uint64_t *size,
			     uint64_t *base_gen, uint64_t *base_epoch)
{
	uint64_t g = 0, e = 0;

	if (f->type != RDB_MSG_DISK_SETUP || (f->len != 8 && f->len != 24))
		return -EPROTO;
	*size = get64(f->payload);
	if (f->len == 24) {
		g = get64(f->payload + 8);
		e = get64(f->payload + 16);
		if (!g && e)
			return -EPROTO;
	}
	if (base_gen)
		*base_gen = g;
	if (base_epoch)
		*base_epoch = e;
	return *size ? 0 : -EPROTO;
}

int rdb_msg_disk_base_parse(const struct rdb_frame *f, struct rdb_disk_base *out)
{
	memset(out, 0, sizeof(*out));
	if (f->type != RDB_MSG_DISK_BASE || f->len < 8)
		return -EPROTO;
	out->generation = get64(f->payload);
	if (!out->generation) {
		size_t n = f->len - 8;

		if (n >= sizeof(out->reason))
			n = sizeof(out->reason) - 1;
		memcpy(out->reason, f->payload + 8, n);
		out->reason[n] = 0;
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)out->reason[i] < 0x20)
				out->reason[i] = '?';
		return 0;
	}
	if (f->len < 16)
		return -EPROTO;
	out->shift = get32(f->payload + 8);
	out->count = get32(f->payload + 12);
	if (out->shift < 12 || out->shift > 40 ||
	    (uint64_t)out->count * 8 != f->len - 16)
		return -EPROTO;
	out->extents = f->payload + 16;
	for (uint32_t i = 0; i < out->count; i++) {
		uint64_t x = get64(out->extents + (size_t)i * 8);

		if ((i && x <= get64(out->extents + (size_t)(i - 1) * 8)) ||
		    x >> (64 - out->shift))
			return -EPROTO;
	}
	return 0;
}

uint64_t rdb_disk_base_extent(const struct rdb_disk_base *b, uint32_t i)
{
	return get64(b->extents + (size_t)i * 8);
}

int rdb_msg_flows_begin(const struct rdb_frame *f, struct rdb_flows_iter *it)
{
	uint32_t n;

	if (f->type != RDB_MSG_FLOWS || f->len < 4)
		return -EPROTO;
	n = get32(f->payload);
	if ((uint64_t)n * RDB_FLOWREC_LEN != f->len - 4)
		return -EPROTO;
	it->p = f->payload + 4;
	it->end = f->payload + f->len;
	return 0;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

int rdb_msg_flows_next(struct rdb_flows_iter *it, struct rdb_flow_rec *r)
{
	const uint8_t *q = it->p;
	size_t ipn;

	if (q == it->end)
		return 0;
	memset(r, 0, sizeof(*r));
	if ((q[0] != RDB_FLOW_UPSERT && q[0] != RDB_FLOW_REMOVE) ||
	    (q[1] != 4 && q[1] != 6) || (q[2] & ~3u) || q[3] ||
	    get16(q + 10))
		return -EPROTO;
	ipn = q[1] == 4 ? 4 : 16;
	if (!all_zero(q + 12 + ipn, 16 - ipn) || !all_zero(q + 28 + ipn, 16 - ipn))
		return -EPROTO;
	r->op = q[0];
	r->key.family = q[1];
	r->vlan = q[2] & 1;
	r->have_ack = (q[2] & 2) != 0;
	r->vlan_tci = get16(q + 4);
	r->key.guest_port = get16(q + 6);
	r->key.peer_port = get16(q + 8);
	memcpy(r->key.guest_ip, q + 12, ipn);
	memcpy(r->key.peer_ip, q + 28, ipn);
	memcpy(r->guest_mac, q + 44, 6);
	memcpy(r->peer_mac, q + 50, 6);
	r->snd_ref = get32(q + 56);
	r->rcv_ref = get32(q + 60);
	it->p += RDB_FLOWREC_LEN;
	return 1;
}

int rdb_msg_disk_parse(const struct rdb_frame *f, uint64_t *offset,
		       uint64_t *len, const uint8_t **data)
{
	switch (f->type) {
	case RDB_MSG_DISK_WRITE:
		if (f->len <= 8 || f->len - 8 > RDB_PROTO_MAX_DISK_WRITE)
			return -EPROTO;
		*offset = get64(f->payload);
		*len = f->len - 8;
		*data = f->payload + 8;
		return 0;
	case RDB_MSG_DISK_ZERO:
		if (f->len != 16)
			return -EPROTO;
		*offset = get64(f->payload);
		*len = get64(f->payload + 8);
		*data = NULL;
		return *len ? 0 : -EPROTO;
	case RDB_MSG_DISK_FLUSH:
		if (f->len != 0)
			return -EPROTO;
		*offset = *len = 0;
		*data = NULL;
		return 0;
	default:
		return -EPROTO;
	}
}

int rdb_msg_epoch_end_parse(const struct rdb_frame *f, uint64_t *pages,
			    uint64_t *bytes)
{
	if (f->type != RDB_MSG_EPOCH_END || f->len != 16)
		return -EPROTO;
	*pages = get64(f->payload);
	*bytes = get64(f->payload + 8);
	return 0;
}

int rdb_proto_put_timing(struct rdb_buf *out, const struct rdb_timing *t)
{
	uint8_t b[12];

	be32(b, t->heartbeat_ms);
	be32(b + 4, t->failover_timeout_ms);
	be32(b + 8, t->ack_timeout_ms);
	return put1(out, RDB_MSG_TIMING, 0, b, sizeof(b));
}

int rdb_msg_timing_parse(const struct rdb_frame *f, struct rdb_timing *t)
{
	if (f->type != RDB_MSG_TIMING || f->len != 12)
		return -EPROTO;
	t->heartbeat_ms = get32(f->payload);
	t->failover_timeout_ms = get32(f->payload + 4);
	t->ack_timeout_ms = get32(f->payload + 8);
	if (!t->heartbeat_ms || !t->failover_timeout_ms)
		return -EPROTO;
	return 0;
}

int rdb_timing_check(const struct rdb_timing *mine,
		     const struct rdb_timing *peer, const char *peer_role,
		     char *why, size_t whylen)
{
	if ((uint64_t)peer->heartbeat_ms * 2 > mine->failover_timeout_ms) {
		snprintf(why, whylen, "the %s's heartbeat_ms %u is over half "
			 "this host's failover_timeout_ms %u (silent between "
			 "heartbeats)", peer_role, peer->heartbeat_ms,
			 mine->failover_timeout_ms);
		return -EINVAL;
	}
	if (peer->failover_timeout_ms != mine->failover_timeout_ms) {
		snprintf(why, whylen, "the %s's failover_timeout_ms = %u, this "
			 "host's %u: the two hosts judge silence differently "
			 "(the backup fails over after its own, the primary drops "
			 "its backup after its own); make them equal", peer_role,
			 peer->failover_timeout_ms, mine->failover_timeout_ms);
		return 1;
	}
	return 0;
}

int rdb_msg_verify_parse(const struct rdb_frame *f, uint64_t *digest,
			 uint64_t *pages)
{
	if (f->type != RDB_MSG_VERIFY || f->len != 16)
		return -EPROTO;
	*digest = get64(f->payload);
	*pages = get64(f->payload + 8);
	return 0;
}

int rdb_proto_ack_check(uint64_t epoch, uint64_t sent, bool have_last,
			uint64_t last, const char **why_out)
{
	if (epoch >= sent) {
		*why_out = "backup acknowledged an epoch never sent";
		return -EPROTO;
	}
	if (have_last && epoch <= last) {
		*why_out = "backup acknowledged an epoch again, or out of order";
		return -EPROTO;
	}
	return 0;
}

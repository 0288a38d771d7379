/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Replication protocol v1: primary <-> backup, one TCP connection per VM.
 *
 * Every message is one frame; all integers are big-endian:
 *
 *   frame   = header payload
 *   header  = magic:u32 "RDB1"  version:u8  type:u8  flags:u16
 *             length:u32  device:u32  epoch:u64  crc:u32  reserved:u32
 *   crc     = CRC32C over header (crc field zero) and payload
 *   device  = which of the VM's disks a DISK_SETUP, DISK_BASE,
 *             DISK_WRITE, DISK_ZERO or DISK_FLUSH frame is about, in the
 *             order the VM's config lists them (0: the first), and which
 *             of its NICs a FLOWS, OUTPUT or INPUT frame is about (0:
 *             net_socket's, k: the k-th extra_nic); 0 in every other
 *             frame.  A
 *             receiver refuses a disk or NIC it does not have.
 *   flags and the reserved field are 0 in v1; receivers reject others.
 *   length <= RDB_PROTO_MAX_PAYLOAD; type in 1 .. RDB_MSG__MAX - 1.
 *   version is the frame layout's version: HELLO and its answer always
 *   travel in v1 frames, so a peer of another version still gets NAKed.
 *
 *   HELLO      = vmin:u16 vmax:u16 features:u32 name:str16
 *   HELLO_ACK  = version:u16 features:u32
 *   HELLO_NAK  = reason:bytes
 *   VM_SETUP   = nblocks:u16 { idstr:str8 used_length:u64 }*nblocks
 *                config:str32 vm:str32        (vm = the VM's config, JSON)
 *   PAGES      = block:u32 count:u32 { offset:u64 enc:u8 body }*count
 *                (count <= RDB_PROTO_MAX_FRAME_PAGES and <= the block's
 *                pages)
 *       body   = RAW: 4096 bytes | ZERO: fill:u8
 *              | XORRLE: len:u16 delta[len]  (1..4096; xorrle.h grammar,
 *                against the page as the backup has it)
 *              | LZ4: len:u16 block[len]    (an LZ4 block of the page)
 *   DEVSTATE   = blob:bytes                  (QEMU device sections + EOF)
 *   EPOCH_END  = records:u64 bytes:u64       (what the epoch carried:
 *                records = page records + DISK_* frames, bytes = page
 *                bodies (RAW 4096, ZERO 1) + the DEVSTATE blob's length
 *                + DISK_WRITE data)
 *   ACK        = (empty; epoch in header: committed on the backup)
 *   HEARTBEAT  = seq:u64 sender_ns:u64
 *   UNPROTECT  = (empty)
 *   ERROR      = message:bytes
 *   DISK_SETUP = size:u64 [base_gen:u64 base_epoch:u64]
 *                (after VM_SETUP: the VM has a disk of size bytes; with
 *                feature RESYNC the primary also names the copy its disk
 *                descends from, the committed epoch base_epoch of
 *                protection base_gen, or 0 0 for none)
 *   DISK_BASE  = generation:u64 (0: no base) reason:bytes
 *              | generation:u64 shift:u32 count:u32 extent:u64*count
 *                (backup -> primary, after DISK_SETUP, feature RESYNC:
 *                the backup holds the old primary's image of protection
 *                generation; it may differ from that protection's
 *                committed state only in the extents listed, each
 *                2^shift bytes, ascending; or its replica of that
 *                protection, whole at a committed epoch >= base_epoch,
 *                with no extent listed; or why there is no base)
 *   HANDOVER   = verb:u8 reason:bytes         (feature HANDOVER; epoch in
 *                header: the last epoch of the protection.  verb 1,
 *                primary -> backup, after that epoch's EPOCH_END: the
 *                guest stays stopped after it, go live from it; verb 2,
 *                backup -> primary: taken, this host runs the VM from
 *                that epoch; verb 3, backup -> primary: refused, with
 *                the reason, the primary resumes its guest; verb 4,
 *                primary -> backup, epoch 0: a handover is coming,
 *                prepare a restore; verb 5, backup -> primary, epoch 0:
 *                ready for it (reason empty) or not prepared (why).
 *                reason is empty but for verbs 3 and 5)
 *   OUTPUT     = { len:u32 frame[len] }*     (feature HANDOVER, primary ->
 *                backup, between a handover epoch's EPOCH_END and its
 *                HANDOVER request; epoch in header: that epoch.  The
 *                guest's output still held for epochs up to it, oldest
 *                first: the host that goes live sends it, so that the
 *                client's answers to it reach the guest where it runs.
 *                1 <= len <= 69632; several frames may follow)
 *   INPUT      = { len:u32 frame[len] }*     (feature HANDOVER, primary ->
 *                backup, after HANDOVER taken, same epoch: frames for
 *                the guest that reached the primary after its guest
 *                stopped, before the network learnt where it runs now;
 *                the backup gives them to the guest)
 *   DISK_WRITE = offset:u64 data:bytes       (epoch in header, like PAGES)
 *   DISK_ZERO  = offset:u64 length:u64       (write-zeroes and trim)
 *   DISK_FLUSH = (empty)                     (the guest flushed its cache)
 *   FLOWS      = count:u32 flowrec*count     (commit protection: the guest's
 *                TCP flows that changed in the epoch on the NIC the
 *                header's device names; feature FLOWS)
 *       flowrec = op:u8 family:u8 flags:u8 zero:u8 vlan_tci:u16
 *                 guest_port:u16 peer_port:u16 zero:u16 guest_ip:16
 *                 peer_ip:16 guest_mac:6 peer_mac:6 snd_ref:u32 rcv_ref:u32
 *                 (64 bytes; op 1 upsert, 2 remove; family 4 or 6, an IPv4
 *                 address in the first 4 bytes, the rest 0; flags bit 0:
 *                 VLAN tagged, bit 1: rcv_ref valid, others 0)
 *   strN       = length:uN bytes
 *
 * The primary sends an epoch as (PAGES | DISK_* | FLOWS)* DEVSTATE EPOCH_END,
 * every epoch in turn from 0 (the initial state, which includes the whole
 * disk); the header's epoch field names the epoch of PAGES, DISK_WRITE,
 * DISK_ZERO, DISK_FLUSH, FLOWS, DEVSTATE, EPOCH_END and ACK (0 in the
 * others).  A FLOWS frame counts as one record in EPOCH_END, its payload
 * length in bytes.
 * Disk frames of epoch N are the changes QEMU completed before the pause
 * of checkpoint N, in the order the primary applied them.
 * See docs/protocol.md.  Page encodings beyond RAW and ZERO are enabled
 * only by a feature bit both sides agreed on in HELLO/HELLO_ACK: the
 * primary offers, the backup grants what it supports, and a receiver
 * rejects an encoding that was not granted.
 */
#ifndef RDB_PROTO_H
#define RDB_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "flowrec.h"
#include "ramblock.h"

#define RDB_PROTO_MAGIC 0x52444231u	/* "RDB1" */
#define RDB_PROTO_VERSION 1		/* the frame layout's (header) */
/*
 * The replication protocol's versions this build speaks: HELLO offers
 * MIN..MAX, the backup answers with the highest both speak (HELLO_ACK),
 * or HELLO_NAK.  Policy (docs/protocol.md, "Compatibility"): a release
 * that changes the protocol incompatibly makes its version MAX + 1 and
 * keeps speaking the one before, so that either host of a pair may be
 * upgraded first (tests/e2e/upgrade-rolling.sh); compatible additions
 * travel behind feature bits instead and keep the version.
 */
#define RDB_PROTO_VERSION_MIN 1
#define RDB_PROTO_VERSION_MAX 1
#define RDB_PROTO_HEADER_LEN 32
#define RDB_PROTO_MAX_PAYLOAD (16u << 20)
/* Larger guest writes travel as several DISK_WRITE frames. */
#define RDB_PROTO_MAX_DISK_WRITE (4u << 20)
/* Records in one PAGES frame.  The backup decodes a frame's LZ4 and
 * DISKREF pages, 4 KiB each, before it keeps any record of it: this bound
 * holds that to 64 MiB a frame whatever the VM's size (an LZ4 record of
 * a page can be 12 bytes, so 16 MiB of payload could name 1.4 M pages). */
#define RDB_PROTO_MAX_FRAME_PAGES 16384u

enum rdb_msg_type {
	RDB_MSG_HELLO = 1,
	RDB_MSG_HELLO_ACK,
	RDB_MSG_HELLO_NAK,
	RDB_MSG_VM_SETUP,
	RDB_MSG_PAGES,
	RDB_MSG_DEVSTATE,
	RDB_MSG_EPOCH_END,
	RDB_MSG_ACK,
	RDB_MSG_HEARTBEAT,
	RDB_MSG_UNPROTECT,
	RDB_MSG_ERROR,
	RDB_MSG_DISK_SETUP,
	RDB_MSG_DISK_WRITE,
	RDB_MSG_DISK_ZERO,
	RDB_MSG_DISK_FLUSH,
	RDB_MSG_FLOWS,
	RDB_MSG_VERIFY,		/* feature VERIFY: the epoch's page digest */
	RDB_MSG_DISK_BASE,	/* feature RESYNC: what the backup's disk is */
	RDB_MSG_HANDOVER,	/* feature HANDOVER: a planned switchover */
	RDB_MSG_OUTPUT,		/* feature HANDOVER: held output handed over */
	RDB_MSG_INPUT,		/* feature HANDOVER: input the old copy caught */
	RDB_MSG_TIMING,		/* feature TIMING: each daemon's failure timing */
	RDB_MSG__MAX
};

enum rdb_page_enc {
	RDB_PAGE_RAW = 0,
	RDB_PAGE_ZERO = 1,
	RDB_PAGE_XORRLE = 2,	/* feature RDB_FEATURE_XORRLE */
	RDB_PAGE_LZ4 = 3,	/* feature RDB_FEATURE_LZ4 */
	RDB_PAGE_DISKREF = 4,	/* feature RDB_FEATURE_DISKREF */
	RDB_PAGE_ENC__MAX
};

/* HELLO offers features, HELLO_ACK grants a subset of them. */
#define RDB_FEATURE_XORRLE (1u << 0)	/* page enc 2: XOR+RLE delta */
#define RDB_FEATURE_LZ4 (1u << 1)	/* page enc 3: LZ4 block */
#define RDB_FEATURE_FLOWS (1u << 2)	/* FLOWS frames (commit protection) */
#define RDB_FEATURE_DISKREF (1u << 3)	/* page enc 4: a disk block's reference */
#define RDB_FEATURE_VERIFY (1u << 4)	/* VERIFY frames (a test/debug mode) */
#define RDB_FEATURE_RESYNC (1u << 5)	/* DISK_SETUP's base, DISK_BASE */
#define RDB_FEATURE_HANDOVER (1u << 6)	/* HANDOVER frames (migrate) */
#define RDB_FEATURE_DISKREF_DEVS (1u << 7)	/* DISKREF names its disk */
#define RDB_FEATURE_TIMING (1u << 8)	/* TIMING frames, both ways */
#define RDB_FEATURES_KNOWN (RDB_FEATURE_XORRLE | RDB_FEATURE_LZ4 | \
			    RDB_FEATURE_FLOWS | RDB_FEATURE_DISKREF | \
			    RDB_FEATURE_VERIFY | RDB_FEATURE_RESYNC | \
			    RDB_FEATURE_HANDOVER | RDB_FEATURE_DISKREF_DEVS | \
			    RDB_FEATURE_TIMING)
/* Body bounds of the length-prefixed encodings. */
#define RDB_PAGE_XORRLE_MAX RDB_PAGE_SIZE
#define RDB_PAGE_LZ4_MAX (RDB_PAGE_SIZE + RDB_PAGE_SIZE / 255 + 16)
/* DISKREF body: the disk offset (u64, a multiple of RDB_PAGE_SIZE) of a
 * block of the VM's disk whose contents, in the backup's replica as of
 * the epoch's commit, are the page; then their SHA-256, which the backup
 * checks (docs/read-tracking.md). */
#define RDB_DISKREF_HASH_LEN 32
#define RDB_PAGE_DISKREF_BODY (8 + RDB_DISKREF_HASH_LEN)
/* With RDB_FEATURE_DISKREF_DEVS granted, the disk offset names the disk
 * too, as Xen's stream packs a page's type above its frame number: bits
 * 56-63 the disk's device index (DISK_SETUP's), bits 0-55 the offset.
 * Without it, a reference is to disk 0 (device bits 0). */
#define RDB_DISKREF_DEV_SHIFT 56
#define RDB_DISKREF_OFF_MASK ((1ull << RDB_DISKREF_DEV_SHIFT) - 1)

struct rdb_frame {
	enum rdb_msg_type type;
	uint16_t flags;
	uint32_t device;	/* DISK_*: the disk's index; 0 otherwise */
	uint64_t epoch;
	const uint8_t *payload;	/* valid until the next decoder call */
	uint32_t len;
};

const char *rdb_msg_name(enum rdb_msg_type t);

/* ---- encoding: each appends one whole frame to out ---- */
int rdb_proto_put_hello(struct rdb_buf *out, const char *vm_name);
int rdb_proto_put_hello_features(struct rdb_buf *out, const char *vm_name,
				 uint32_t features);
int rdb_proto_put_hello_ack(struct rdb_buf *out);
int rdb_proto_put_hello_ack_features(struct rdb_buf *out, uint32_t features);
/* HELLO_ACK naming the version agreed (rdb_msg_hello_version) */
int rdb_proto_put_hello_ack_version(struct rdb_buf *out, unsigned version,
				    uint32_t features);
int rdb_proto_put_hello_nak(struct rdb_buf *out, const char *reason);
int rdb_proto_put_vm_setup(struct rdb_buf *out,
			   const struct rdb_ram_block *blocks, size_t n,
			   const uint8_t *config, size_t config_len,
			   const char *vm_json);
/* records: count page records built with rdb_proto_page_record_append;
 * -EMSGSIZE over RDB_PROTO_MAX_FRAME_PAGES of them. */
int rdb_proto_put_pages(struct rdb_buf *out, uint64_t epoch, uint32_t block,
			uint32_t count, const uint8_t *records, size_t len);
int rdb_proto_page_record_append(struct rdb_buf *records, uint64_t offset,
				 const uint8_t *data, uint8_t fill);
/* XORRLE or LZ4: body = len:u16 + data */
int rdb_proto_page_record_append_enc(struct rdb_buf *records, uint64_t offset,
				     enum rdb_page_enc enc, const uint8_t *data,
				     size_t len);
/* DISKREF: body = disk_offset:u64 + SHA-256 (-EINVAL: unaligned offset) */
int rdb_proto_page_record_append_diskref(struct rdb_buf *records,
					 uint64_t offset, uint64_t disk_offset,
					 const uint8_t *sha256);
/* Size of the wire record at p (offset, enc, body); 0 if unknown enc. */
size_t rdb_proto_page_record_size(const uint8_t *p);
/* Its offset field. */
uint64_t rdb_proto_page_record_offset(const uint8_t *p);
int rdb_proto_put_devstate(struct rdb_buf *out, uint64_t epoch,
			   const uint8_t *blob, size_t len);
/* VERIFY: the sum of rdb_page_digest over the epoch's pages as QEMU sent
 * them, and their count; before the epoch's EPOCH_END. */
int rdb_proto_put_verify(struct rdb_buf *out, uint64_t epoch, uint64_t digest,
			 uint64_t pages);
int rdb_proto_put_epoch_end(struct rdb_buf *out, uint64_t epoch,
			    uint64_t pages, uint64_t bytes);
int rdb_proto_put_ack(struct rdb_buf *out, uint64_t epoch);
int rdb_proto_put_heartbeat(struct rdb_buf *out, uint64_t seq,
			    uint64_t sender_ns);
int rdb_proto_put_unprotect(struct rdb_buf *out, const char *vm_name);
int rdb_proto_put_error(struct rdb_buf *out, const char *msg);
int rdb_proto_put_disk_setup(struct rdb_buf *out, uint32_t disk, uint64_t size);
/* With feature RESYNC: the base offered (base_gen 0: none). */
int rdb_proto_put_disk_setup_base(struct rdb_buf *out, uint32_t disk,
				  uint64_t size,
				  uint64_t base_gen, uint64_t base_epoch);
/* generation 0: no base, reason says why; else extents (ascending, each
 * below 2^(64-shift)) may differ. */
int rdb_proto_put_disk_base(struct rdb_buf *out, uint32_t disk,
			    uint64_t generation,
			    uint32_t shift, const uint64_t *extents,
			    uint32_t count, const char *reason);
/* len <= RDB_PROTO_MAX_DISK_WRITE */
int rdb_proto_put_disk_write(struct rdb_buf *out, uint32_t disk, uint64_t epoch,
			     uint64_t offset, const uint8_t *data, size_t len);
int rdb_proto_put_disk_zero(struct rdb_buf *out, uint32_t disk, uint64_t epoch,
			    uint64_t offset, uint64_t len);
int rdb_proto_put_disk_flush(struct rdb_buf *out, uint32_t disk, uint64_t epoch);
#define RDB_FLOWREC_LEN 64
/* At most RDB_PROTO_MAX_PAYLOAD / 64 - 1 records per frame; nic: the
 * NIC whose flows they are (the header's device field). */
int rdb_proto_put_flows(struct rdb_buf *out, uint32_t nic, uint64_t epoch,
			const struct rdb_flow_rec *recs, size_t n);

/* ---- decoding ---- */
struct rdb_proto_decoder {
	struct rdb_buf in;
	size_t pending;		/* bytes of the frame last returned */
	char err[160];
};

void rdb_proto_decoder_init(struct rdb_proto_decoder *d);
void rdb_proto_decoder_dispose(struct rdb_proto_decoder *d);
/* Takes over src's buffered bytes; src is left empty. */
void rdb_proto_decoder_move(struct rdb_proto_decoder *dst,
			    struct rdb_proto_decoder *src);
int rdb_proto_decoder_feed(struct rdb_proto_decoder *d, const void *p,
			   size_t n);
/* Reads what the socket has: 0 (got bytes), -EAGAIN (nothing),
 * -ECONNRESET (peer closed), or another negative errno. */
int rdb_proto_decoder_read_fd(struct rdb_proto_decoder *d, int fd);
/* Blocks for more bytes until deadline_ns. */
int rdb_proto_decoder_read_fd_deadline(struct rdb_proto_decoder *d, int fd,
				       uint64_t deadline_ns);
/* 1: *f is the next verified frame; 0: need more bytes; -EPROTO: corrupt
 * stream (bad magic, type, flags, length or CRC); -EPROTONOSUPPORT: a
 * frame version other than RDB_PROTO_VERSION.  On either error
 * rdb_proto_decoder_error says what was wrong; the connection must be
 * dropped.  Header checks run before the payload arrives, so an oversized
 * or garbage header fails at once instead of waiting for 16 MiB. */
int rdb_proto_decoder_next(struct rdb_proto_decoder *d, struct rdb_frame *f);
const char *rdb_proto_decoder_error(const struct rdb_proto_decoder *d);

/* ---- payload parsers: every length checked, -EPROTO on bad input ---- */
/* -EPROTONOSUPPORT: no version both speak (answer HELLO_NAK) */
int rdb_msg_hello_parse(const struct rdb_frame *f, char *name, size_t namelen);
/* The version a (valid) HELLO and this build agree on: the highest
 * both speak, or -EPROTONOSUPPORT. */
int rdb_msg_hello_version(const struct rdb_frame *f);
/* The features a (valid) HELLO offers. */
uint32_t rdb_msg_hello_features(const struct rdb_frame *f);
int rdb_proto_check_hello_ack(const struct rdb_frame *f);
/* An ACK for epoch, when `sent` epochs (0..sent-1) went to the backup and
 * the last ACK was for last (have_last: there was one): acceptable only
 * for an epoch that was sent, after the last one.  0, or -EPROTO with a
 * reason in *why_out.  (No arithmetic on epoch: UINT64_MAX cannot wrap.) */
int rdb_proto_ack_check(uint64_t epoch, uint64_t sent, bool have_last,
			uint64_t last, const char **why_out);
/* Like rdb_proto_check_hello_ack, for a HELLO that offered `offered`:
 * the grant must be a subset; it is returned in *granted. */
int rdb_proto_check_hello_ack_features(const struct rdb_frame *f,
				       uint32_t offered, uint32_t *granted);
/* The version a valid HELLO_ACK names (one this build offered). */
unsigned rdb_msg_hello_ack_version(const struct rdb_frame *f);

struct rdb_vm_setup {
	struct rdb_ram_block *blocks;
	size_t nblocks;
	uint8_t *config;
	size_t config_len;
	char *vm_json;
};
int rdb_msg_vm_setup_parse(const struct rdb_frame *f, struct rdb_vm_setup *out);
void rdb_vm_setup_dispose(struct rdb_vm_setup *s);	/* idempotent */

struct rdb_pages_iter {
	const uint8_t *p, *end;
	uint32_t block, left;
};
struct rdb_page_rec {
	uint64_t offset;
	enum rdb_page_enc enc;
	const uint8_t *data;	/* RAW: RDB_PAGE_SIZE bytes; XORRLE, LZ4: len;
				 * DISKREF: the SHA-256 */
	uint8_t fill;		/* ZERO */
	uint16_t len;		/* XORRLE, LZ4 */
	uint64_t disk_offset;	/* DISKREF: page-aligned */
};
/* -EPROTO also when the payload is too short for count records of the
 * shortest encoding (10 bytes each): count bounds what follows. */
int rdb_msg_pages_begin(const struct rdb_frame *f, struct rdb_pages_iter *it);
/* 1: *rec filled; 0: done (and every byte used); -EPROTO.  Any known
 * encoding is returned: the caller checks it was negotiated. */
int rdb_msg_pages_next(struct rdb_pages_iter *it, struct rdb_page_rec *rec);
int rdb_msg_epoch_end_parse(const struct rdb_frame *f, uint64_t *pages,
			    uint64_t *bytes);
/*
 * TIMING (feature TIMING): a daemon's failure timing, the primary's
 * right after HELLO_ACK and the backup's in answer.  Each side checks
 * the other's against its own (rdb_timing_check): a peer whose
 * heartbeats come further apart than half this side's silence limit
 * would be judged lost between two of them (refused: the protection
 * does not start, both logs say why); different silence limits (the
 * backup fails over after its own, the primary drops its backup after
 * its own) are said in both logs (1: a warning, in why).
 */
struct rdb_timing {
	uint32_t heartbeat_ms, failover_timeout_ms, ack_timeout_ms;
};
int rdb_proto_put_timing(struct rdb_buf *out, const struct rdb_timing *t);
int rdb_msg_timing_parse(const struct rdb_frame *f, struct rdb_timing *t);
int rdb_timing_check(const struct rdb_timing *mine,
		     const struct rdb_timing *peer, const char *peer_role,
		     char *why, size_t whylen);

int rdb_msg_verify_parse(const struct rdb_frame *f, uint64_t *digest,
			 uint64_t *pages);
int rdb_msg_heartbeat_parse(const struct rdb_frame *f, uint64_t *seq_out,
			    uint64_t *sender_ns_out);
/* base_gen/base_epoch: 0 when the frame offers none (NULL: ignored). */
int rdb_msg_disk_setup_parse(const struct rdb_frame *f, uint64_t *size,
			     uint64_t *base_gen, uint64_t *base_epoch);
struct rdb_disk_base {
	uint64_t generation;		/* 0: no base */
	uint32_t shift, count;
	const uint8_t *extents;		/* count big-endian u64, in the frame */
	char reason[256];		/* generation 0 */
};
int rdb_msg_disk_base_parse(const struct rdb_frame *f, struct rdb_disk_base *out);

/* OUTPUT: frames in the payload's format (len:u32 frame) are appended by
 * the caller; put cuts them into frames on record boundaries, each
 * naming nic (the header's device field), as INPUT's. */
int rdb_proto_put_output(struct rdb_buf *out, uint32_t nic, uint64_t epoch,
			 const uint8_t *recs, size_t len);
int rdb_proto_put_input(struct rdb_buf *out, uint32_t nic, uint64_t epoch,
			const uint8_t *recs, size_t len);
struct rdb_output_iter {
	const uint8_t *p, *end;
};
/* OUTPUT or INPUT */
int rdb_msg_output_begin(const struct rdb_frame *f, struct rdb_output_iter *it);
/* 1: *frame, *len set; 0: done; -EPROTO. */
int rdb_msg_output_next(struct rdb_output_iter *it, const uint8_t **frame,
			size_t *len);
#define RDB_OUTPUT_MAX_FRAME (65536u + 4096u)

enum rdb_handover_verb {
	RDB_HANDOVER_REQUEST = 1,	/* primary: go live from this epoch */
	RDB_HANDOVER_TAKEN = 2,		/* backup: the VM runs here now */
	RDB_HANDOVER_REFUSED = 3,	/* backup: not going live (reason) */
	RDB_HANDOVER_PREPARE = 4,	/* primary: a handover is coming */
	RDB_HANDOVER_READY = 5,		/* backup: prepared, or why not */
};
int rdb_proto_put_handover(struct rdb_buf *out, uint64_t epoch,
			   enum rdb_handover_verb verb, const char *reason);
/* reason: printable ASCII (others become '?'), "" but for REFUSED and
 * READY. */
int rdb_msg_handover_parse(const struct rdb_frame *f,
			   enum rdb_handover_verb *verb, char *reason,
			   size_t reasonlen);
uint64_t rdb_disk_base_extent(const struct rdb_disk_base *b, uint32_t i);
/* DISK_WRITE: data and len point into the frame; DISK_ZERO: data NULL;
 * DISK_FLUSH: 0, 0.  Empty writes and zero-length ranges are -EPROTO. */
int rdb_msg_disk_parse(const struct rdb_frame *f, uint64_t *offset,
		       uint64_t *len, const uint8_t **data);
struct rdb_flows_iter {
	const uint8_t *p, *end;
};
/* FLOWS: the count matches the length; then next() gives each record,
 * checked (op, family, flags, zero fields): 1 a record, 0 done, -EPROTO. */
int rdb_msg_flows_begin(const struct rdb_frame *f, struct rdb_flows_iter *it);
int rdb_msg_flows_next(struct rdb_flows_iter *it, struct rdb_flow_rec *r);
/* ERROR or HELLO_NAK: the reason, cut to textlen - 1 bytes, NUL-ended,
 * anything but printable ASCII replaced by '?'. */
int rdb_msg_text_parse(const struct rdb_frame *f, char *text, size_t textlen);

#endif

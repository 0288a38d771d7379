// SPDX-License-Identifier: GPL-2.0-only
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "proto.h"

static void test_crc32c_check_value(void **state)
{
	assert_int_equal(rdb_crc32c(0, "123456789", 9), 0xE3069283u);
	/* Chained calls equal one call. */
	assert_int_equal(rdb_crc32c(rdb_crc32c(0, "1234", 4), "56789", 5),
			 0xE3069283u);
}

/* Feeds everything one byte at a time; returns the frames' types. */
static int decode_all(struct rdb_buf *wire, enum rdb_msg_type *types, int max,
		      size_t step)
{
	struct rdb_proto_decoder d;
	struct rdb_frame f;
	int n = 0, rc;

	rdb_proto_decoder_init(&d);
	for (size_t off = 0; off < wire->len; off += step) {
		size_t k = wire->len - off < step ? wire->len - off : step;

		assert_int_equal(rdb_proto_decoder_feed(&d, wire->data + off, k), 0);
		while ((rc = rdb_proto_decoder_next(&d, &f)) == 1) {
			assert_true(n < max);
			types[n++] = f.type;
		}
		assert_int_equal(rc, 0);
	}
	rdb_proto_decoder_dispose(&d);
	return n;
}

static void test_every_message_round_trips_in_any_split(void **state)
{
	struct rdb_ram_block blocks[2] = { { "pc.ram", 1 << 20 }, { "pc.bios", 4096 } };
	uint8_t page[RDB_PAGE_SIZE], dev[3] = { 4, 5, 0 };
	struct rdb_buf wire, rec;
	enum rdb_msg_type types[16];
	size_t steps[] = { 1, 7, 4096, 1 << 20 };

	memset(page, 0xab, sizeof(page));
	rdb_buf_init(&wire);
	rdb_buf_init(&rec);
	assert_int_equal(rdb_proto_put_hello(&wire, "vm-1"), 0);
	assert_int_equal(rdb_proto_put_hello_ack(&wire), 0);
	assert_int_equal(rdb_proto_put_vm_setup(&wire, blocks, 2, (const uint8_t *)"\x07xyz", 4, "{}"), 0);
	assert_int_equal(rdb_proto_page_record_append(&rec, 0, page, 0), 0);
	assert_int_equal(rdb_proto_page_record_append(&rec, 4096, NULL, 0), 0);
	assert_int_equal(rdb_proto_put_pages(&wire, 3, 0, 2, rec.data, rec.len), 0);
	assert_int_equal(rdb_proto_put_devstate(&wire, 3, dev, 3), 0);
	assert_int_equal(rdb_proto_put_epoch_end(&wire, 3, 2, 4097 + 3), 0);
	assert_int_equal(rdb_proto_put_ack(&wire, 3), 0);
	assert_int_equal(rdb_proto_put_heartbeat(&wire, 9, 12345), 0);
	assert_int_equal(rdb_proto_put_unprotect(&wire, "vm-1"), 0);
	assert_int_equal(rdb_proto_put_error(&wire, "boom"), 0);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		int n = decode_all(&wire, types, 16, steps[i]);

		assert_int_equal(n, 10);
		assert_int_equal(types[0], RDB_MSG_HELLO);
		assert_int_equal(types[3], RDB_MSG_PAGES);
		assert_int_equal(types[9], RDB_MSG_ERROR);
	}
	rdb_buf_dispose(&wire);
	rdb_buf_dispose(&rec);
}

static void test_payload_parsers(void **state)
{
	struct rdb_ram_block blocks[1] = { { "pc.ram", 8192 } };
	struct rdb_proto_decoder d;
	struct rdb_buf wire, rec;
	struct rdb_frame f;
	struct rdb_vm_setup s;
	struct rdb_pages_iter it;
	struct rdb_page_rec r;
	uint8_t page[RDB_PAGE_SIZE];
	char name[65];
	uint64_t pages, bytes;

	memset(page, 7, sizeof(page));
	rdb_buf_init(&wire);
	rdb_buf_init(&rec);
	rdb_proto_decoder_init(&d);
	rdb_proto_put_hello(&wire, "db1");
	rdb_proto_put_vm_setup(&wire, blocks, 1, (const uint8_t *)"\x07" "abc", 4, "{\"name\":\"db1\"}");
	rdb_proto_page_record_append(&rec, 4096, page, 0);
	rdb_proto_page_record_append(&rec, 0, NULL, 0x5a);
	rdb_proto_put_pages(&wire, 0, 0, 2, rec.data, rec.len);
	rdb_proto_put_epoch_end(&wire, 0, 2, 4097);
	rdb_proto_decoder_feed(&d, wire.data, wire.len);

	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_hello_parse(&f, name, sizeof(name)), 0);
	assert_string_equal(name, "db1");
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_vm_setup_parse(&f, &s), 0);
	assert_int_equal(s.nblocks, 1);
	assert_string_equal(s.blocks[0].idstr, "pc.ram");
	assert_int_equal(s.blocks[0].used_length, 8192);
	assert_int_equal(s.config_len, 4);
	assert_string_equal(s.vm_json, "{\"name\":\"db1\"}");
	rdb_vm_setup_dispose(&s);
	rdb_vm_setup_dispose(&s);	/* idempotent */
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(f.epoch, 0);
	assert_int_equal(rdb_msg_pages_begin(&f, &it), 0);
	assert_int_equal(rdb_msg_pages_next(&it, &r), 1);
	assert_int_equal(r.offset, 4096);
	assert_int_equal(r.enc, RDB_PAGE_RAW);
	assert_memory_equal(r.data, page, RDB_PAGE_SIZE);
	assert_int_equal(rdb_msg_pages_next(&it, &r), 1);
	assert_int_equal(r.enc, RDB_PAGE_ZERO);
	assert_int_equal(r.fill, 0x5a);
	assert_int_equal(rdb_msg_pages_next(&it, &r), 0);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_epoch_end_parse(&f, &pages, &bytes), 0);
	assert_int_equal(pages, 2);
	assert_int_equal(bytes, 4097);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 0);
	rdb_proto_decoder_dispose(&d);
	rdb_buf_dispose(&wire);
	rdb_buf_dispose(&rec);
}

static int decode_one(struct rdb_buf *wire, struct rdb_proto_decoder *d)
{
	struct rdb_frame f;

	rdb_proto_decoder_init(d);
	rdb_proto_decoder_feed(d, wire->data, wire->len);
	return rdb_proto_decoder_next(d, &f);
}

static void test_corruption_is_rejected(void **state)
{
	struct rdb_proto_decoder d;
	struct rdb_buf wire;

	rdb_buf_init(&wire);
	rdb_proto_put_heartbeat(&wire, 1, 2);
	/* flip one payload bit: CRC */
	wire.data[RDB_PROTO_HEADER_LEN + 3] ^= 1;
	assert_int_equal(decode_one(&wire, &d), -EPROTO);
	assert_non_null(strstr(rdb_proto_decoder_error(&d), "CRC"));
	rdb_proto_decoder_dispose(&d);
	wire.data[RDB_PROTO_HEADER_LEN + 3] ^= 1;
	/* bad magic */
	wire.data[0] ^= 0xff;
	assert_int_equal(decode_one(&wire, &d), -EPROTO);
	assert_non_null(strstr(rdb_proto_decoder_error(&d), "magic"));
	rdb_proto_decoder_dispose(&d);
	wire.data[0] ^= 0xff;
	/* unknown type */
	wire.data[5] = RDB_MSG__MAX;
	assert_int_equal(decode_one(&wire, &d), -EPROTO);
	assert_non_null(strstr(rdb_proto_decoder_error(&d), "unknown message type"));
	rdb_proto_decoder_dispose(&d);
	wire.data[5] = RDB_MSG_HEARTBEAT;
	/* oversized length: rejected from the header alone */
	wire.data[8] = 0x7f;
	assert_int_equal(decode_one(&wire, &d), -EPROTO);
	rdb_proto_decoder_dispose(&d);
	rdb_buf_dispose(&wire);
}

static void test_malformed_payloads(void **state)
{
	struct rdb_frame f = { .type = RDB_MSG_PAGES };
	struct rdb_pages_iter it;
	struct rdb_page_rec r;
	struct rdb_vm_setup s;
	struct rdb_buf w;
	uint8_t p[32] = { 0, 0, 0, 0, 0, 0, 0, 2 };	/* block 0, 2 records */
	char name[8];
	uint64_t a, b;

	/* PAGES claims 2 records in room for 1 of the shortest (10 bytes):
	 * refused before any record is read, as is a count of 2^32 - 1 */
	f.payload = p;
	f.len = 8 + 19;
	assert_int_equal(rdb_msg_pages_begin(&f, &it), -EPROTO);
	memset(p + 4, 0xff, 4);
	f.len = sizeof(p);
	assert_int_equal(rdb_msg_pages_begin(&f, &it), -EPROTO);
	/* 2 records in 20 bytes pass the count check, but the first is a
	 * truncated RAW page */
	p[4] = p[5] = p[6] = 0;
	p[7] = 2;
	f.len = 8 + 20;
	assert_int_equal(rdb_msg_pages_begin(&f, &it), 0);
	assert_int_equal(rdb_msg_pages_next(&it, &r), -EPROTO);
	/* unknown encoding */
	p[7] = 1;
	p[16] = 9;
	f.len = 8 + 10;
	assert_int_equal(rdb_msg_pages_begin(&f, &it), 0);
	assert_int_equal(rdb_msg_pages_next(&it, &r), -EPROTO);
	/* the encoder keeps to the frame bound: nothing is appended */
	rdb_buf_init(&w);
	assert_int_equal(rdb_proto_put_pages(&w, 1, 0, RDB_PROTO_MAX_FRAME_PAGES + 1,
					     p, sizeof(p)), -EMSGSIZE);
	assert_int_equal(w.len, 0);
	rdb_buf_dispose(&w);
	/* a VM_SETUP with zero blocks */
	f.type = RDB_MSG_VM_SETUP;
	f.len = 2;
	memset(p, 0, sizeof(p));
	assert_int_equal(rdb_msg_vm_setup_parse(&f, &s), -EPROTO);
	/* a HELLO whose name does not fit */
	f.type = RDB_MSG_HELLO;
	p[9] = 20;
	f.len = 10 + 20;
	assert_int_equal(rdb_msg_hello_parse(&f, name, sizeof(name)), -EPROTO);
	/* EPOCH_END of the wrong size */
	f.type = RDB_MSG_EPOCH_END;
	f.len = 15;
	assert_int_equal(rdb_msg_epoch_end_parse(&f, &a, &b), -EPROTO);
}

static void test_random_bytes_never_crash(void **state)
{
	uint8_t junk[4096];
	unsigned seed = 42;

	for (int round = 0; round < 300; round++) {
		struct rdb_proto_decoder d;
		struct rdb_frame f;

		for (size_t i = 0; i < sizeof(junk); i++)
			junk[i] = (uint8_t)rand_r(&seed);
		/* Half the rounds start with a valid magic and version. */
		if (round & 1) {
			junk[0] = 'R'; junk[1] = 'D'; junk[2] = 'B'; junk[3] = '1';
			junk[4] = 1;
		}
		rdb_proto_decoder_init(&d);
		rdb_proto_decoder_feed(&d, junk, (size_t)(rand_r(&seed) % sizeof(junk)));
		while (rdb_proto_decoder_next(&d, &f) == 1)
			;
		rdb_proto_decoder_dispose(&d);
	}
}

/* ---- helpers that build frames by hand, independent of the encoders ---- */

static void put_be(uint8_t *p, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* One frame with a valid CRC around any header values and payload. */
static void raw_frame(struct rdb_buf *wire, uint8_t version, uint8_t type,
		      uint16_t flags, uint32_t reserved, uint64_t epoch,
		      const void *payload, uint32_t len)
{
	uint8_t *h = rdb_buf_reserve(wire, RDB_PROTO_HEADER_LEN + len);

	assert_non_null(h);
	memset(h, 0, RDB_PROTO_HEADER_LEN);
	put_be(h, RDB_PROTO_MAGIC, 4);
	h[4] = version;
	h[5] = type;
	put_be(h + 6, flags, 2);
	put_be(h + 8, len, 4);
	put_be(h + 12, reserved, 4);
	put_be(h + 16, epoch, 8);
	if (len)
		memcpy(h + RDB_PROTO_HEADER_LEN, payload, len);
	put_be(h + 24, rdb_crc32c(0, h, RDB_PROTO_HEADER_LEN + len), 4);
	wire->len += RDB_PROTO_HEADER_LEN + len;
}

static void test_crc32c_portable_path_matches(void **state)
{
	uint8_t buf[5000];
	unsigned seed = 7;

	assert_int_equal(rdb_crc32c_sw(0, "123456789", 9), 0xE3069283u);
	/* RFC 3720 B.4: 32 bytes of zeros, of 0xff. */
	memset(buf, 0, 32);
	assert_int_equal(rdb_crc32c_sw(0, buf, 32), 0x8A9136AAu);
	memset(buf, 0xff, 32);
	assert_int_equal(rdb_crc32c(0, buf, 32), 0x62A8AB43u);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rand_r(&seed);
	/* Every length and misalignment, chained or not. */
	for (int k = 0; k < 400; k++) {
		size_t off = (size_t)rand_r(&seed) % 16;
		size_t n = (size_t)rand_r(&seed) % (sizeof(buf) - 16);
		size_t cut = n ? (size_t)rand_r(&seed) % n : 0;
		uint32_t a = rdb_crc32c(0, buf + off, n);

		assert_int_equal(rdb_crc32c_sw(0, buf + off, n), a);
		assert_int_equal(rdb_crc32c_sw(rdb_crc32c(0, buf + off, cut),
					       buf + off + cut, n - cut), a);
	}
}

static void test_buf_edges(void **state)
{
	struct rdb_buf b;
	uint8_t x[100];

	rdb_buf_init(&b);
	/* Appending nothing to a fresh buffer is not an allocation failure. */
	assert_int_equal(rdb_buf_append(&b, x, 0), 0);
	assert_null(rdb_buf_reserve(&b, SIZE_MAX - 10));
	memset(x, 3, sizeof(x));
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(rdb_buf_append(&b, x, sizeof(x)), 0);
		rdb_buf_consume(&b, 60);
	}
	assert_int_equal(b.len, 1000 * 40);
	assert_int_equal(b.data[b.len - 1], 3);
	rdb_buf_dispose(&b);
	rdb_buf_dispose(&b);
}

/* A queue kept near its high water (a throttled stream's): what the
 * buffer copies stays within a small multiple of what goes through it
 * (it copied 15 times as much when it refilled a buffer of the same
 * size each time it was full), and its size within twice the peak. */
static void test_buf_near_full_queue(void **state)
{
	struct rdb_buf b;
	uint8_t x[64];
	uint64_t moved = 0, through = 0;

	rdb_buf_init(&b);
	memset(x, 7, sizeof(x));
	while (b.len < 60 * 1024)
		assert_int_equal(rdb_buf_append(&b, x, sizeof(x)), 0);
	for (int i = 0; i < 20000; i++) {
		bool at_start;

		rdb_buf_consume(&b, sizeof(x));
		at_start = b.data == b.mem;
		x[0] = (uint8_t)i;
		assert_int_equal(rdb_buf_append(&b, x, sizeof(x)), 0);
		if (!at_start && b.data == b.mem)
			moved += b.len - sizeof(x);
		through += sizeof(x);
		assert_int_equal(b.data[b.len - sizeof(x)], (uint8_t)i);
	}
	assert_int_equal(b.len, 60 * 1024);
	assert_true(moved <= 3 * through);
	assert_true(b.cap <= 4 * 60 * 1024);
	rdb_buf_dispose(&b);
}

/* Every message's fields come back as they were sent. */
static void test_flows_round_trip_and_checks(void **state)
{
	struct rdb_flow_rec in[3], out;
	struct rdb_proto_decoder d;
	struct rdb_flows_iter it;
	struct rdb_buf wire;
	struct rdb_frame f;
	uint8_t *rec;

	memset(in, 0, sizeof(in));
	in[0] = (struct rdb_flow_rec){ .op = RDB_FLOW_UPSERT,
		.key = { .family = 4, .guest_ip = { 10, 77, 0, 100 },
			 .peer_ip = { 10, 77, 0, 1 }, .guest_port = 5432,
			 .peer_port = 40001 },
		.guest_mac = { 0x52, 0x54, 0, 0x52, 0x44, 1 },
		.peer_mac = { 2, 0, 0, 0, 0, 9 },
		.snd_ref = 0xfffffff0u, .rcv_ref = 7, .have_ack = true };
	in[1] = in[0];
	in[1].op = RDB_FLOW_REMOVE;
	in[1].key.family = 6;
	memset(in[1].key.guest_ip, 0xfd, 16);
	memset(in[1].key.peer_ip, 0x11, 16);
	in[1].have_ack = false;
	in[1].rcv_ref = 0;
	in[2] = in[0];
	in[2].vlan = true;
	in[2].vlan_tci = 0x0abc;
	rdb_buf_init(&wire);
	rdb_proto_decoder_init(&d);
	assert_int_equal(rdb_proto_put_flows(&wire, 2, 12, in, 3), 0);
	assert_int_equal(rdb_proto_put_flows(&wire, 0, 13, NULL, 0), 0);
	assert_int_equal(wire.len, 2 * 32 + 4 + 3 * 64 + 4);
	assert_int_equal(rdb_proto_decoder_feed(&d, wire.data, wire.len), 0);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(f.type, RDB_MSG_FLOWS);
	assert_int_equal(f.epoch, 12);
	assert_int_equal(f.device, 2);		/* the third NIC's flows */
	assert_int_equal(rdb_msg_flows_begin(&f, &it), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(rdb_msg_flows_next(&it, &out), 1);
		assert_memory_equal(&out, &in[i], sizeof(out));
	}
	assert_int_equal(rdb_msg_flows_next(&it, &out), 0);
	/* malformed records are refused: bad op, family, flags, padding */
	rec = (uint8_t *)f.payload + 4;
	rec[0] = 3;
	assert_int_equal(rdb_msg_flows_begin(&f, &it), 0);
	assert_int_equal(rdb_msg_flows_next(&it, &out), -EPROTO);
	rec[0] = 1;
	rec[1] = 5;
	assert_int_equal(rdb_msg_flows_next(&it, &out), -EPROTO);
	rec[1] = 4;
	rec[2] = 4;
	assert_int_equal(rdb_msg_flows_next(&it, &out), -EPROTO);
	rec[2] = 0;
	rec[16] = 1;	/* past the IPv4 address */
	assert_int_equal(rdb_msg_flows_next(&it, &out), -EPROTO);
	rec[16] = 0;
	assert_int_equal(rdb_msg_flows_next(&it, &out), 1);
	/* a count that does not match the length */
	((uint8_t *)f.payload)[3] = 2;
	assert_int_equal(rdb_msg_flows_begin(&f, &it), -EPROTO);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_flows_begin(&f, &it), 0);
	assert_int_equal(rdb_msg_flows_next(&it, &out), 0);
	rdb_proto_decoder_dispose(&d);
	rdb_buf_dispose(&wire);
}

static void test_every_field_round_trips(void **state)
{
	struct rdb_proto_decoder d;
	struct rdb_buf wire;
	struct rdb_frame f;
	uint8_t dev[5] = { 1, 2, 3, 4, 0 };
	char text[16];
	uint64_t a, b;

	rdb_buf_init(&wire);
	rdb_proto_decoder_init(&d);
	assert_int_equal(rdb_proto_put_hello_ack(&wire), 0);
	assert_int_equal(rdb_proto_put_hello_nak(&wire, "no\nroom"), 0);
	assert_int_equal(rdb_proto_put_devstate(&wire, 41, dev, sizeof(dev)), 0);
	assert_int_equal(rdb_proto_put_ack(&wire, 0x0102030405060708ull), 0);
	assert_int_equal(rdb_proto_put_heartbeat(&wire, 77, 0xfedcba9876543210ull), 0);
	assert_int_equal(rdb_proto_put_unprotect(&wire, "vm"), 0);
	assert_int_equal(rdb_proto_put_error(&wire, "a long reason text"), 0);
	assert_int_equal(rdb_proto_put_epoch_end(&wire, 5, 0, 0), 0);
	/* Big-endian on the wire: the ACK's epoch reads left to right. */
	assert_int_equal(rdb_proto_decoder_feed(&d, wire.data, wire.len), 0);
	assert_memory_equal(wire.data + 32 + 6 + 32 + 7 + 32 + 5 + 16,
			    "\x01\x02\x03\x04\x05\x06\x07\x08", 8);

	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_proto_check_hello_ack(&f), 0);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(f.type, RDB_MSG_HELLO_NAK);
	assert_int_equal(rdb_msg_text_parse(&f, text, sizeof(text)), 0);
	assert_string_equal(text, "no?room");
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(f.type, RDB_MSG_DEVSTATE);
	assert_int_equal(f.epoch, 41);
	assert_int_equal(f.len, sizeof(dev));
	assert_memory_equal(f.payload, dev, sizeof(dev));
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(f.type, RDB_MSG_ACK);
	assert_true(f.epoch == 0x0102030405060708ull);
	assert_int_equal(f.len, 0);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_heartbeat_parse(&f, &a, &b), 0);
	assert_int_equal(a, 77);
	assert_true(b == 0xfedcba9876543210ull);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(f.type, RDB_MSG_UNPROTECT);
	assert_int_equal(f.len, 0);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	/* cut to fit the caller's buffer, NUL-terminated */
	assert_int_equal(rdb_msg_text_parse(&f, text, sizeof(text)), 0);
	assert_string_equal(text, "a long reason t");
	assert_int_equal(rdb_msg_heartbeat_parse(&f, &a, &b), -EPROTO);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_epoch_end_parse(&f, &a, &b), 0);
	assert_int_equal(f.epoch, 5);
	assert_int_equal(a + b, 0);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 0);
	rdb_proto_decoder_dispose(&d);
	rdb_buf_dispose(&wire);
}

/* A peer's text reaches our logs only through rdb_msg_text_parse: a
 * terminal escape, a newline, DEL and UTF-8 all become '?'; a frame that
 * carries no text is refused. */
static void test_text_parse_sanitizes(void **state)
{
	struct rdb_proto_decoder d;
	struct rdb_buf wire;
	struct rdb_frame f;
	char text[32];

	rdb_buf_init(&wire);
	rdb_proto_decoder_init(&d);
	assert_int_equal(rdb_proto_put_error(&wire, "\x1b[31mX\n"), 0);
	assert_int_equal(rdb_proto_put_hello_nak(&wire, "a\x7f\xc3\xa9z"), 0);
	assert_int_equal(rdb_proto_put_heartbeat(&wire, 1, 2), 0);
	assert_int_equal(rdb_proto_decoder_feed(&d, wire.data, wire.len), 0);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_text_parse(&f, text, sizeof(text)), 0);
	assert_string_equal(text, "?[31mX?");
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_text_parse(&f, text, sizeof(text)), 0);
	assert_string_equal(text, "a???z");
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_text_parse(&f, text, sizeof(text)), -EPROTO);
	rdb_proto_decoder_dispose(&d);
	rdb_buf_dispose(&wire);
}

/* Feature HANDOVER: the three verbs round-trip with their epoch; only a
 * refusal carries a reason, and a verb out of range is refused both ways. */
static void test_handover_round_trip_and_checks(void **state)
{
	struct rdb_proto_decoder d;
	enum rdb_handover_verb v;
	struct rdb_buf wire;
	struct rdb_frame f;
	char why[64];

	rdb_buf_init(&wire);
	rdb_proto_decoder_init(&d);
	assert_int_equal(rdb_proto_put_handover(&wire, 812, RDB_HANDOVER_REQUEST,
						NULL), 0);
	assert_int_equal(rdb_proto_put_handover(&wire, 812, RDB_HANDOVER_TAKEN,
						""), 0);
	assert_int_equal(rdb_proto_put_handover(&wire, 812, RDB_HANDOVER_REFUSED,
						"the witness\tsays no"), 0);
	assert_int_equal(rdb_proto_put_handover(&wire, 0, RDB_HANDOVER_PREPARE,
						NULL), 0);
	assert_int_equal(rdb_proto_put_handover(&wire, 0, RDB_HANDOVER_READY,
						"no QEMU prepared"), 0);
	assert_int_equal(rdb_proto_put_handover(&wire, 1, RDB_HANDOVER_TAKEN,
						"why"), -EINVAL);
	assert_int_equal(rdb_proto_put_handover(&wire, 1, 0, NULL), -EINVAL);
	assert_int_equal(rdb_proto_put_handover(&wire, 1, 6, NULL), -EINVAL);
	assert_int_equal(rdb_proto_put_handover(&wire, 1, RDB_HANDOVER_PREPARE,
						"why"), -EINVAL);
	rdb_proto_decoder_feed(&d, wire.data, wire.len);

	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_string_equal(rdb_msg_name(f.type), "HANDOVER");
	assert_true(f.epoch == 812);
	assert_int_equal(rdb_msg_handover_parse(&f, &v, why, sizeof(why)), 0);
	assert_int_equal(v, RDB_HANDOVER_REQUEST);
	assert_string_equal(why, "");
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_handover_parse(&f, &v, why, sizeof(why)), 0);
	assert_int_equal(v, RDB_HANDOVER_TAKEN);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_handover_parse(&f, &v, why, sizeof(why)), 0);
	assert_int_equal(v, RDB_HANDOVER_REFUSED);
	assert_string_equal(why, "the witness?says no");
	/* a short buffer truncates the reason, never overruns */
	assert_int_equal(rdb_msg_handover_parse(&f, &v, why, 4), 0);
	assert_string_equal(why, "the");
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_handover_parse(&f, &v, why, sizeof(why)), 0);
	assert_int_equal(v, RDB_HANDOVER_PREPARE);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_handover_parse(&f, &v, why, sizeof(why)), 0);
	assert_int_equal(v, RDB_HANDOVER_READY);
	assert_string_equal(why, "no QEMU prepared");
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 0);
	rdb_proto_decoder_dispose(&d);
	rdb_buf_dispose(&wire);

	{
		uint8_t p[4] = { 0 };
		struct rdb_frame h = { .type = RDB_MSG_HANDOVER, .payload = p };

		h.len = 0;			/* no verb */
		assert_int_equal(rdb_msg_handover_parse(&h, &v, why, sizeof(why)),
				 -EPROTO);
		h.len = 1;			/* verb 0 */
		assert_int_equal(rdb_msg_handover_parse(&h, &v, why, sizeof(why)),
				 -EPROTO);
		p[0] = 6;			/* verb 6 */
		assert_int_equal(rdb_msg_handover_parse(&h, &v, why, sizeof(why)),
				 -EPROTO);
		p[0] = 2;
		p[1] = 'x';
		h.len = 2;			/* TAKEN with a reason */
		assert_int_equal(rdb_msg_handover_parse(&h, &v, why, sizeof(why)),
				 -EPROTO);
		h.type = RDB_MSG_ERROR;		/* not a HANDOVER */
		h.len = 1;
		assert_int_equal(rdb_msg_handover_parse(&h, &v, why, sizeof(why)),
				 -EPROTO);
	}
}

/* OUTPUT: held frames, cut into frames on record boundaries; a record
 * running past the payload, empty or too long is refused. */
static void test_output_round_trip_and_checks(void **state)
{
	struct rdb_proto_decoder d;
	struct rdb_output_iter it;
	struct rdb_buf wire, recs;
	struct rdb_frame f;
	const uint8_t *fr;
	size_t len, total = 0, nframes = 0, msgs = 0;
	static uint8_t big[60000];
	uint8_t hdr[4];

	rdb_buf_init(&wire);
	rdb_buf_init(&recs);
	/* 300 frames of 60000 bytes: 18 MB, more than one message holds */
	for (int i = 0; i < 300; i++) {
		big[0] = (uint8_t)i;
		hdr[0] = 0; hdr[1] = 0; hdr[2] = 60000 >> 8; hdr[3] = 60000 & 0xff;
		assert_int_equal(rdb_buf_append(&recs, hdr, 4), 0);
		assert_int_equal(rdb_buf_append(&recs, big, sizeof(big)), 0);
	}
	assert_int_equal(rdb_proto_put_output(&wire, 3, 77, recs.data, recs.len), 0);
	/* a record that runs past the end, or is empty */
	assert_int_equal(rdb_proto_put_output(&wire, 0, 77, recs.data, 100), -EINVAL);
	memset(hdr, 0, 4);
	assert_int_equal(rdb_proto_put_output(&wire, 0, 77, hdr, 4), -EINVAL);
	rdb_proto_decoder_init(&d);
	rdb_proto_decoder_feed(&d, wire.data, wire.len);
	while (rdb_proto_decoder_next(&d, &f) == 1) {
		assert_string_equal(rdb_msg_name(f.type), "OUTPUT");
		assert_true(f.epoch == 77);
		assert_int_equal(f.device, 3);	/* every piece names the NIC */
		assert_true(f.len <= RDB_PROTO_MAX_PAYLOAD);
		assert_int_equal(rdb_msg_output_begin(&f, &it), 0);
		while (rdb_msg_output_next(&it, &fr, &len) == 1) {
			assert_int_equal(len, 60000);
			assert_int_equal(fr[0], (uint8_t)nframes);
			nframes++;
			total += len;
		}
		msgs++;
	}
	assert_int_equal(nframes, 300);
	/* INPUT: the same records, its own type */
	rdb_buf_reset(&wire);
	assert_int_equal(rdb_proto_put_input(&wire, 1, 78, recs.data, 64 + 4 + 60000), -EINVAL);
	assert_int_equal(rdb_proto_put_input(&wire, 1, 78, recs.data, 4 + 60000), 0);
	rdb_proto_decoder_feed(&d, wire.data, wire.len);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_string_equal(rdb_msg_name(f.type), "INPUT");
	assert_int_equal(f.device, 1);
	assert_int_equal(rdb_msg_output_begin(&f, &it), 0);
	assert_int_equal(rdb_msg_output_next(&it, &fr, &len), 1);
	assert_int_equal(len, 60000);
	assert_int_equal(rdb_msg_output_next(&it, &fr, &len), 0);
	assert_true(total == 300u * 60000u);
	assert_true(msgs >= 2);
	rdb_proto_decoder_dispose(&d);

	{
		uint8_t p[12] = { 0, 0, 0, 9, 1, 2, 3 };
		struct rdb_frame h = { .type = RDB_MSG_OUTPUT, .payload = p };

		h.len = 7;			/* says 9, holds 3 */
		assert_int_equal(rdb_msg_output_begin(&h, &it), 0);
		assert_int_equal(rdb_msg_output_next(&it, &fr, &len), -EPROTO);
		h.len = 2;			/* no room for a length */
		assert_int_equal(rdb_msg_output_begin(&h, &it), 0);
		assert_int_equal(rdb_msg_output_next(&it, &fr, &len), -EPROTO);
		p[3] = 0;			/* an empty frame */
		h.len = 4;
		assert_int_equal(rdb_msg_output_begin(&h, &it), 0);
		assert_int_equal(rdb_msg_output_next(&it, &fr, &len), -EPROTO);
		h.len = 0;
		assert_int_equal(rdb_msg_output_begin(&h, &it), -EPROTO);
	}
	rdb_buf_dispose(&recs);
	rdb_buf_dispose(&wire);
}

/* Feature RESYNC: DISK_SETUP names the base offered, DISK_BASE answers
 * with the extents that may differ, or why there is no base; lists out
 * of order, too long or beyond the disk's reach are refused both ways. */
static void test_disk_base_round_trip_and_checks(void **state)
{
	const uint64_t ext[] = { 0, 3, 4, 4095 };
	const uint64_t bad_order[] = { 3, 3 };
	struct rdb_proto_decoder d;
	struct rdb_disk_base b;
	struct rdb_buf wire;
	struct rdb_frame f;
	uint64_t size, g, e;

	rdb_buf_init(&wire);
	rdb_proto_decoder_init(&d);
	assert_int_equal(rdb_proto_put_disk_setup(&wire, 0, 1 << 30), 0);
	assert_int_equal(rdb_proto_put_disk_setup_base(&wire, 0, 1 << 30,
						       0xabcdefull, 77), 0);
	assert_int_equal(rdb_proto_put_disk_setup_base(&wire, 0, 4096, 0, 5), 0);
	assert_int_equal(rdb_proto_put_disk_base(&wire, 0, 0xabcdefull, 20, ext, 4,
						 NULL), 0);
	assert_int_equal(rdb_proto_put_disk_base(&wire, 0, 0, 0, NULL, 0,
						 "no lineage record\nhere"), 0);
	assert_int_equal(rdb_proto_put_disk_base(&wire, 0, 9, 20, NULL, 0, NULL), 0);
	assert_int_equal(rdb_proto_put_disk_base(&wire, 0, 9, 20, bad_order, 2,
						 NULL), -EINVAL);
	assert_int_equal(rdb_proto_put_disk_base(&wire, 0, 9, 11, ext, 4, NULL),
			 -EINVAL);
	assert_int_equal(rdb_proto_put_disk_base(&wire, 0, 9, 40,
						 (const uint64_t[]){ 1ull << 30 },
						 1, NULL), -EINVAL);
	rdb_proto_decoder_feed(&d, wire.data, wire.len);

	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	g = e = 99;
	assert_int_equal(rdb_msg_disk_setup_parse(&f, &size, &g, &e), 0);
	assert_true(size == 1 << 30 && g == 0 && e == 0);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_disk_setup_parse(&f, &size, &g, &e), 0);
	assert_true(size == 1 << 30 && g == 0xabcdefull && e == 77);
	assert_int_equal(rdb_msg_disk_setup_parse(&f, &size, NULL, NULL), 0);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_disk_setup_parse(&f, &size, &g, &e), 0);
	assert_true(g == 0 && e == 0);	/* no base: no epoch either */

	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_string_equal(rdb_msg_name(f.type), "DISK_BASE");
	assert_int_equal(rdb_msg_disk_base_parse(&f, &b), 0);
	assert_true(b.generation == 0xabcdefull);
	assert_int_equal(b.shift, 20);
	assert_int_equal(b.count, 4);
	for (uint32_t i = 0; i < 4; i++)
		assert_true(rdb_disk_base_extent(&b, i) == ext[i]);
	/* a DISK_BASE is no DISK_SETUP, and the other way round */
	assert_int_equal(rdb_msg_disk_setup_parse(&f, &size, &g, &e), -EPROTO);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_disk_base_parse(&f, &b), 0);
	assert_true(b.generation == 0);
	assert_string_equal(b.reason, "no lineage record?here");
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_disk_base_parse(&f, &b), 0);
	assert_int_equal(b.count, 0);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 0);
	rdb_proto_decoder_dispose(&d);

	/* hand-made payloads: each one wrong in one way */
	{
		uint8_t p[40] = { 0 };
		struct rdb_frame h = { .type = RDB_MSG_DISK_BASE, .payload = p };

		p[7] = 1;			/* generation 1 */
		h.len = 12;			/* no room for shift and count */
		assert_int_equal(rdb_msg_disk_base_parse(&h, &b), -EPROTO);
		p[11] = 20;			/* shift 20 */
		p[15] = 2;			/* count 2 */
		h.len = 16 + 8;			/* one extent, not two */
		assert_int_equal(rdb_msg_disk_base_parse(&h, &b), -EPROTO);
		h.len = 16 + 16;		/* two, both 0: not ascending */
		assert_int_equal(rdb_msg_disk_base_parse(&h, &b), -EPROTO);
		p[31] = 1;			/* 0, 1 */
		assert_int_equal(rdb_msg_disk_base_parse(&h, &b), 0);
		p[16] = 0xff;			/* first extent beyond 2^44 */
		assert_int_equal(rdb_msg_disk_base_parse(&h, &b), -EPROTO);
		p[16] = 0;
		p[11] = 11;			/* shift below a block */
		assert_int_equal(rdb_msg_disk_base_parse(&h, &b), -EPROTO);
		h.type = RDB_MSG_DISK_SETUP;	/* base_gen 0 with an epoch */
		h.len = 24;
		memset(p, 0, sizeof(p));
		p[7] = 1;
		p[23] = 5;
		assert_int_equal(rdb_msg_disk_setup_parse(&h, &size, &g, &e), -EPROTO);
		h.len = 16;
		assert_int_equal(rdb_msg_disk_setup_parse(&h, &size, &g, &e), -EPROTO);
	}
	rdb_buf_dispose(&wire);
}

static void test_versions_are_negotiated(void **state)
{
	uint8_t hello[14] = { 0, 2, 0, 3, 0, 0, 0, 0, 0, 4, 'v', 'm', '-', '1' };
	uint8_t ack[6] = { 0, 2, 0, 0, 0, 0 };
	struct rdb_frame f = { .type = RDB_MSG_HELLO, .payload = hello,
			       .len = sizeof(hello) };
	struct rdb_proto_decoder d;
	struct rdb_buf wire;
	char name[65];

	/* A primary that speaks only v2..v3 */
	assert_int_equal(rdb_msg_hello_parse(&f, name, sizeof(name)),
			 -EPROTONOSUPPORT);
	assert_int_equal(rdb_msg_hello_version(&f), -EPROTONOSUPPORT);
	/* v1..v3 includes ours: the highest both speak */
	hello[1] = 1;
	assert_int_equal(rdb_msg_hello_parse(&f, name, sizeof(name)), 0);
	assert_string_equal(name, "vm-1");
	assert_int_equal(rdb_msg_hello_version(&f), RDB_PROTO_VERSION_MAX);
	/* a peer of the release before (v0 .. our MIN): ours MIN */
	hello[1] = 0;
	hello[3] = RDB_PROTO_VERSION_MIN;
	assert_int_equal(rdb_msg_hello_version(&f), RDB_PROTO_VERSION_MIN);
	/* older than anything we speak */
	hello[3] = RDB_PROTO_VERSION_MIN - 1;
	assert_int_equal(rdb_msg_hello_version(&f), -EPROTONOSUPPORT);
	hello[1] = 1;
	hello[3] = 3;
	{
		/* what we offer, and the answer naming the agreed version */
		struct rdb_buf b;
		struct rdb_proto_decoder dd;
		struct rdb_frame g;

		rdb_buf_init(&b);
		assert_int_equal(rdb_proto_put_hello_features(&b, "vm-1", 0), 0);
		assert_int_equal(rdb_proto_put_hello_ack_version(&b,
				 RDB_PROTO_VERSION_MAX, 0), 0);
		assert_int_equal(rdb_proto_put_hello_ack_version(&b,
				 RDB_PROTO_VERSION_MAX + 1, 0), -EINVAL);
		rdb_proto_decoder_init(&dd);
		assert_int_equal(rdb_proto_decoder_feed(&dd, b.data, b.len), 0);
		assert_int_equal(rdb_proto_decoder_next(&dd, &g), 1);
		assert_int_equal(g.payload[1], RDB_PROTO_VERSION_MIN);
		assert_int_equal(g.payload[3], RDB_PROTO_VERSION_MAX);
		assert_int_equal(rdb_msg_hello_version(&g), RDB_PROTO_VERSION_MAX);
		assert_int_equal(rdb_proto_decoder_next(&dd, &g), 1);
		assert_int_equal(rdb_msg_hello_ack_version(&g), RDB_PROTO_VERSION_MAX);
		assert_int_equal(rdb_proto_check_hello_ack(&g), 0);
		rdb_proto_decoder_dispose(&dd);
		rdb_buf_dispose(&b);
	}
	f.type = RDB_MSG_HELLO_ACK;
	f.payload = ack;
	f.len = sizeof(ack);
	assert_int_equal(rdb_proto_check_hello_ack(&f), -EPROTONOSUPPORT);
	ack[1] = 1;
	assert_int_equal(rdb_proto_check_hello_ack(&f), 0);
	/* features we never asked for */
	ack[5] = 1;
	assert_int_equal(rdb_proto_check_hello_ack(&f), -EPROTO);

	/* A frame of another layout version */
	rdb_buf_init(&wire);
	raw_frame(&wire, 2, RDB_MSG_HEARTBEAT, 0, 0, 0, "0123456789abcdef", 16);
	assert_int_equal(decode_one(&wire, &d), -EPROTONOSUPPORT);
	assert_non_null(strstr(rdb_proto_decoder_error(&d), "version"));
	rdb_proto_decoder_dispose(&d);
	rdb_buf_dispose(&wire);
}

static void test_header_fields_checked(void **state)
{
	struct rdb_proto_decoder d;
	struct rdb_buf wire;
	struct rdb_frame f;

	rdb_buf_init(&wire);
	/* The hand-built frame is accepted as it stands ... */
	raw_frame(&wire, 1, RDB_MSG_ACK, 0, 0, 3, NULL, 0);
	assert_int_equal(decode_one(&wire, &d), 1);
	rdb_proto_decoder_dispose(&d);
	/* ... and rejected, CRC valid, with a flag or reserved bit set. */
	rdb_buf_reset(&wire);
	raw_frame(&wire, 1, RDB_MSG_ACK, 0x8000, 0, 3, NULL, 0);
	assert_int_equal(decode_one(&wire, &d), -EPROTO);
	assert_non_null(strstr(rdb_proto_decoder_error(&d), "flags"));
	rdb_proto_decoder_dispose(&d);
	rdb_buf_reset(&wire);
	raw_frame(&wire, 1, RDB_MSG_ACK, 0, 1, 3, NULL, 0);
	assert_int_equal(decode_one(&wire, &d), -EPROTO);
	rdb_proto_decoder_dispose(&d);
	rdb_buf_reset(&wire);
	raw_frame(&wire, 1, 0, 0, 0, 3, NULL, 0);
	assert_int_equal(decode_one(&wire, &d), -EPROTO);
	rdb_proto_decoder_dispose(&d);
	/* An oversized length fails on the 32 header bytes alone. */
	rdb_buf_reset(&wire);
	raw_frame(&wire, 1, RDB_MSG_DEVSTATE, 0, 0, 3, NULL, 0);
	put_be(wire.data + 8, RDB_PROTO_MAX_PAYLOAD + 1, 4);
	assert_int_equal(decode_one(&wire, &d), -EPROTO);
	assert_non_null(strstr(rdb_proto_decoder_error(&d), "over the limit"));
	rdb_proto_decoder_dispose(&d);
	/* Exactly the limit is allowed (and waited for). */
	put_be(wire.data + 8, RDB_PROTO_MAX_PAYLOAD, 4);
	assert_int_equal(decode_one(&wire, &d), 0);
	rdb_proto_decoder_dispose(&d);
	/* An encoder refuses to build what a decoder would refuse. */
	{
		uint8_t *big = calloc(1, RDB_PROTO_MAX_PAYLOAD + 1);

		assert_non_null(big);
		rdb_buf_reset(&wire);
		assert_int_equal(rdb_proto_put_devstate(&wire, 1, big,
							RDB_PROTO_MAX_PAYLOAD + 1),
				 -EMSGSIZE);
		assert_int_equal(wire.len, 0);
		assert_int_equal(rdb_proto_put_devstate(&wire, 1, big,
							RDB_PROTO_MAX_PAYLOAD), 0);
		assert_int_equal(decode_one(&wire, &d), 1);
		rdb_proto_decoder_dispose(&d);
		free(big);
	}
	/* A corrupt stream stays corrupt: no resynchronising on garbage. */
	rdb_buf_reset(&wire);
	raw_frame(&wire, 1, RDB_MSG_ACK, 0, 0, 3, NULL, 0);
	wire.data[30] ^= 1;	/* reserved after the CRC */
	raw_frame(&wire, 1, RDB_MSG_ACK, 0, 0, 4, NULL, 0);
	rdb_proto_decoder_init(&d);
	rdb_proto_decoder_feed(&d, wire.data, wire.len);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), -EPROTO);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), -EPROTO);
	rdb_proto_decoder_dispose(&d);
	rdb_buf_dispose(&wire);
}

/*
 * The header's device field: a disk's frames carry its index (encoded and
 * decoded as given); any other frame naming a device is refused, as is
 * the reserved field after the CRC.
 */
static void test_device_field(void **state)
{
	static const uint8_t data[512] = { 7 };
	struct rdb_proto_decoder d;
	struct rdb_buf wire;
	struct rdb_frame f;
	uint64_t off, len;
	const uint8_t *p;

	rdb_buf_init(&wire);
	assert_int_equal(rdb_proto_put_disk_setup(&wire, 2, 1u << 20), 0);
	assert_int_equal(rdb_proto_put_disk_write(&wire, 3, 9, 4096, data,
						  sizeof(data)), 0);
	assert_int_equal(rdb_proto_put_disk_zero(&wire, 0, 9, 0, 4096), 0);
	assert_int_equal(rdb_proto_put_disk_flush(&wire, 4000000000u, 9), 0);
	assert_int_equal(rdb_proto_put_disk_base(&wire, 1, 0, 0, NULL, 0,
						 "none"), 0);
	rdb_proto_decoder_init(&d);
	rdb_proto_decoder_feed(&d, wire.data, wire.len);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(f.type, RDB_MSG_DISK_SETUP);
	assert_int_equal(f.device, 2);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(f.device, 3);
	assert_int_equal(f.epoch, 9);
	assert_int_equal(rdb_msg_disk_parse(&f, &off, &len, &p), 0);
	assert_int_equal(off, 4096);
	assert_int_equal(len, sizeof(data));
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(f.device, 0);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(f.device, 4000000000u);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(f.type, RDB_MSG_DISK_BASE);
	assert_int_equal(f.device, 1);
	rdb_proto_decoder_dispose(&d);

	/* other frames name no device */
	rdb_buf_reset(&wire);
	raw_frame(&wire, 1, RDB_MSG_PAGES, 0, 1, 3, NULL, 0);
	assert_int_equal(decode_one(&wire, &d), -EPROTO);
	assert_non_null(strstr(rdb_proto_decoder_error(&d), "PAGES frame names device 1"));
	rdb_proto_decoder_dispose(&d);
	rdb_buf_reset(&wire);
	raw_frame(&wire, 1, RDB_MSG_EPOCH_END, 0, 2, 3, NULL, 0);
	assert_int_equal(decode_one(&wire, &d), -EPROTO);
	rdb_proto_decoder_dispose(&d);
	/* the reserved field stays reserved, on a disk's frame too */
	rdb_buf_reset(&wire);
	assert_int_equal(rdb_proto_put_disk_flush(&wire, 1, 9), 0);
	wire.data[28] = 1;
	put_be(wire.data + 24, 0, 4);
	put_be(wire.data + 24, rdb_crc32c(0, wire.data, wire.len), 4);
	assert_int_equal(decode_one(&wire, &d), -EPROTO);
	assert_non_null(strstr(rdb_proto_decoder_error(&d), "reserved"));
	rdb_proto_decoder_dispose(&d);
	rdb_buf_dispose(&wire);
}

/* Runs every payload parser over one frame; returns how many accepted. */
static int parse_all(const struct rdb_frame *f)
{
	struct rdb_vm_setup s;
	struct rdb_pages_iter it;
	struct rdb_page_rec r;
	char name[65];
	uint64_t a, b;
	int ok = 0, rc;

	ok += rdb_msg_hello_parse(f, name, sizeof(name)) == 0;
	ok += rdb_proto_check_hello_ack(f) == 0;
	if (rdb_msg_vm_setup_parse(f, &s) == 0) {
		ok++;
		rdb_vm_setup_dispose(&s);
	}
	if (rdb_msg_pages_begin(f, &it) == 0) {
		while ((rc = rdb_msg_pages_next(&it, &r)) == 1)
			;
		ok += rc == 0;
	}
	ok += rdb_msg_epoch_end_parse(f, &a, &b) == 0;
	ok += rdb_msg_heartbeat_parse(f, &a, &b) == 0;
	ok += rdb_msg_text_parse(f, name, sizeof(name)) == 0;
	{
		struct rdb_timing t;

		ok += rdb_msg_timing_parse(f, &t) == 0;
	}
	return ok;
}

/*
 * Every structured payload cut short by any number of bytes, or followed
 * by one byte too many, is refused.  Each copy sits in a buffer of its
 * exact size so ASan sees any read past it.
 */
/* TIMING: the round trip, and what each side makes of the other's */
static void test_timing(void **state)
{
	const struct rdb_timing mine = { 100, 1000, 5000 };
	struct rdb_timing t;
	struct rdb_proto_decoder d;
	struct rdb_buf wire;
	struct rdb_frame f;
	char why[300];

	rdb_buf_init(&wire);
	assert_int_equal(rdb_proto_put_timing(&wire, &mine), 0);
	rdb_proto_decoder_init(&d);
	assert_int_equal(rdb_proto_decoder_feed(&d, wire.data, wire.len), 0);
	assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
	assert_int_equal(rdb_msg_timing_parse(&f, &t), 0);
	assert_int_equal(t.heartbeat_ms, 100);
	assert_int_equal(t.failover_timeout_ms, 1000);
	assert_int_equal(t.ack_timeout_ms, 5000);
	rdb_proto_decoder_dispose(&d);
	rdb_buf_dispose(&wire);
	/* the same: nothing to say */
	assert_int_equal(rdb_timing_check(&mine, &mine, "primary", why, sizeof(why)), 0);
	/* heartbeats at half the limit still pass; over it, refused */
	t = (struct rdb_timing){ 500, 1000, 5000 };
	assert_int_equal(rdb_timing_check(&mine, &t, "primary", why, sizeof(why)), 0);
	t.heartbeat_ms = 501;
	assert_int_equal(rdb_timing_check(&mine, &t, "primary", why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "primary's heartbeat_ms 501"));
	assert_non_null(strstr(why, "failover_timeout_ms 1000"));
	/* another silence limit: a warning naming both */
	t = (struct rdb_timing){ 100, 3000, 5000 };
	assert_int_equal(rdb_timing_check(&mine, &t, "backup", why, sizeof(why)), 1);
	assert_non_null(strstr(why, "backup's failover_timeout_ms = 3000"));
	assert_non_null(strstr(why, "host's 1000"));
	/* zero values are malformed */
	{
		uint8_t z[12] = { 0 };
		struct rdb_frame g = { .type = RDB_MSG_TIMING, .payload = z, .len = 12 };

		assert_int_equal(rdb_msg_timing_parse(&g, &t), -EPROTO);
	}
}

static void test_truncated_and_padded_payloads(void **state)
{
	struct rdb_ram_block blocks[2] = { { "pc.ram", 1 << 20 }, { "/rom@etc/acpi/tables", 8192 } };
	uint8_t page[RDB_PAGE_SIZE] = { 9 };
	struct rdb_proto_decoder d;
	struct rdb_buf wire, rec;
	struct rdb_frame f;
	int frames = 0;

	rdb_buf_init(&wire);
	rdb_buf_init(&rec);
	rdb_proto_put_hello(&wire, "vm-truncate");
	rdb_proto_put_hello_ack(&wire);
	rdb_proto_put_vm_setup(&wire, blocks, 2, (const uint8_t *)"\x07" "cfg", 4, "{\"a\":1}");
	rdb_proto_page_record_append(&rec, 0, page, 0);
	rdb_proto_page_record_append(&rec, 8192, NULL, 0);
	rdb_proto_page_record_append(&rec, 4096, page, 0);
	rdb_proto_put_pages(&wire, 1, 0, 3, rec.data, rec.len);
	rdb_proto_put_epoch_end(&wire, 1, 3, 8193);
	rdb_proto_put_heartbeat(&wire, 1, 2);
	rdb_proto_put_timing(&wire, &(struct rdb_timing){ 50, 1000, 5000 });
	rdb_proto_decoder_init(&d);
	rdb_proto_decoder_feed(&d, wire.data, wire.len);
	while (rdb_proto_decoder_next(&d, &f) == 1) {
		struct rdb_frame g = f;

		frames++;
		assert_int_equal(parse_all(&f), 1);
		for (uint32_t n = 0; n <= f.len + 1; n++) {
			uint8_t *copy = malloc(n ? n : 1);

			assert_non_null(copy);
			memcpy(copy, f.payload, n <= f.len ? n : f.len);
			if (n > f.len)
				copy[f.len] = 0;
			g.payload = copy;
			g.len = n;
			/* Only the whole payload parses. */
			assert_int_equal(parse_all(&g), n == f.len);
			free(copy);
		}
	}
	assert_int_equal(frames, 7);
	rdb_proto_decoder_dispose(&d);
	rdb_buf_dispose(&wire);
	rdb_buf_dispose(&rec);
}

/*
 * Fixed-seed mutation: valid frames of every type with random bytes
 * flipped and the CRC made right again, so the payload parsers (not just
 * the CRC check) see the damage.  Must never crash or leak under ASan.
 */
static void test_mutated_frames_never_crash(void **state)
{
	struct rdb_ram_block blocks[2] = { { "pc.ram", 1 << 20 }, { "vga.vram", 8192 } };
	uint8_t page[RDB_PAGE_SIZE] = { 1 }, dev[3] = { 1, 2, 0 };
	struct rdb_buf wire, rec;
	unsigned seed = 1234;
	size_t starts[16];
	int nframes = 0, accepted = 0;

	rdb_buf_init(&wire);
	rdb_buf_init(&rec);
#define MARK() (starts[nframes++] = wire.len)
	MARK(); rdb_proto_put_hello(&wire, "vm-fuzz");
	MARK(); rdb_proto_put_hello_ack(&wire);
	MARK(); rdb_proto_put_hello_nak(&wire, "busy");
	MARK(); rdb_proto_put_vm_setup(&wire, blocks, 2, dev, 3, "{}");
	rdb_proto_page_record_append(&rec, 0, page, 0);
	rdb_proto_page_record_append(&rec, 4096, NULL, 7);
	MARK(); rdb_proto_put_pages(&wire, 2, 1, 2, rec.data, rec.len);
	MARK(); rdb_proto_put_devstate(&wire, 2, dev, 3);
	MARK(); rdb_proto_put_epoch_end(&wire, 2, 2, 4100);
	MARK(); rdb_proto_put_ack(&wire, 2);
	MARK(); rdb_proto_put_heartbeat(&wire, 3, 4);
	MARK(); rdb_proto_put_unprotect(&wire, "vm-fuzz");
	MARK(); rdb_proto_put_error(&wire, "bad");
#undef MARK
	starts[nframes] = wire.len;
	for (int round = 0; round < 20000; round++) {
		int k = round % nframes;
		size_t flen = starts[k + 1] - starts[k];
		size_t plen = flen - RDB_PROTO_HEADER_LEN;
		uint8_t *fr = malloc(flen);
		struct rdb_proto_decoder d;
		struct rdb_frame f;
		int flips = 1 + rand_r(&seed) % 4;

		assert_non_null(fr);
		memcpy(fr, wire.data + starts[k], flen);
		for (int i = 0; plen && i < flips; i++)
			fr[RDB_PROTO_HEADER_LEN + (size_t)rand_r(&seed) % plen] =
				(uint8_t)rand_r(&seed);
		/* Sometimes the type byte too: one type's payload handed to
		 * another's parser. */
		if (rand_r(&seed) % 4 == 0)
			fr[5] = (uint8_t)(1 + rand_r(&seed) % (RDB_MSG__MAX - 1));
		memset(fr + 24, 0, 4);
		put_be(fr + 24, rdb_crc32c(0, fr, flen), 4);
		rdb_proto_decoder_init(&d);
		rdb_proto_decoder_feed(&d, fr, flen);
		assert_int_equal(rdb_proto_decoder_next(&d, &f), 1);
		accepted += parse_all(&f) > 0;
		rdb_proto_decoder_dispose(&d);
		free(fr);
	}
	/* Not a test that cannot fail: some mutants stay valid, most not. */
	assert_true(accepted > 0 && accepted < 20000);
	rdb_buf_dispose(&wire);
	rdb_buf_dispose(&rec);
}

/* ACKs: only for epochs sent, strictly after the last one; the biggest
 * epoch cannot wrap the check (it once was epoch + 1 > sent). */
static void test_ack_checked(void **state)
{
	const char *why = NULL;

	assert_int_equal(rdb_proto_ack_check(0, 1, false, 0, &why), 0);
	assert_int_equal(rdb_proto_ack_check(1, 1, true, 0, &why), -EPROTO);
	assert_non_null(strstr(why, "never sent"));
	assert_int_equal(rdb_proto_ack_check(UINT64_MAX, 5, true, 3, &why), -EPROTO);
	assert_non_null(strstr(why, "never sent"));
	assert_int_equal(rdb_proto_ack_check(UINT64_MAX, 0, false, 0, &why), -EPROTO);
	assert_int_equal(rdb_proto_ack_check(4, 5, true, 3, &why), 0);
	assert_int_equal(rdb_proto_ack_check(3, 5, true, 3, &why), -EPROTO);
	assert_non_null(strstr(why, "again"));
	assert_int_equal(rdb_proto_ack_check(2, 5, true, 3, &why), -EPROTO);
	/* the first ACK of a protection may be epoch 0 */
	assert_int_equal(rdb_proto_ack_check(0, 3, false, 0, &why), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c_check_value),
		cmocka_unit_test(test_device_field),
		cmocka_unit_test(test_every_message_round_trips_in_any_split),
		cmocka_unit_test(test_payload_parsers),
		cmocka_unit_test(test_corruption_is_rejected),
		cmocka_unit_test(test_malformed_payloads),
		cmocka_unit_test(test_random_bytes_never_crash),
		cmocka_unit_test(test_crc32c_portable_path_matches),
		cmocka_unit_test(test_buf_edges),
		cmocka_unit_test(test_buf_near_full_queue),
		cmocka_unit_test(test_every_field_round_trips),
		cmocka_unit_test(test_text_parse_sanitizes),
		cmocka_unit_test(test_ack_checked),
		cmocka_unit_test(test_flows_round_trip_and_checks),
		cmocka_unit_test(test_disk_base_round_trip_and_checks),
		cmocka_unit_test(test_handover_round_trip_and_checks),
		cmocka_unit_test(test_output_round_trip_and_checks),
		cmocka_unit_test(test_versions_are_negotiated),
		cmocka_unit_test(test_header_fields_checked),
		cmocka_unit_test(test_truncated_and_padded_payloads),
		cmocka_unit_test(test_timing),
		cmocka_unit_test(test_mutated_frames_never_crash),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

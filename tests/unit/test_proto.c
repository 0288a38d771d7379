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
	uint8_t p[32] = { 0, 0, 0, 0, 0, 0, 0, 2 };	/* block 0, 2 records */
	char name[8];
	uint64_t a, b;

	/* PAGES claims 2 records but holds a truncated one */
	f.payload = p;
	f.len = 8 + 9;
	assert_int_equal(rdb_msg_pages_begin(&f, &it), 0);
	assert_int_equal(rdb_msg_pages_next(&it, &r), -EPROTO);
	/* unknown encoding */
	p[16] = 9;
	f.len = 8 + 10;
	assert_int_equal(rdb_msg_pages_begin(&f, &it), 0);
	assert_int_equal(rdb_msg_pages_next(&it, &r), -EPROTO);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c_check_value),
		cmocka_unit_test(test_every_message_round_trips_in_any_split),
		cmocka_unit_test(test_payload_parsers),
		cmocka_unit_test(test_corruption_is_rejected),
		cmocka_unit_test(test_malformed_payloads),
		cmocka_unit_test(test_random_bytes_never_crash),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer: replication protocol v1 frames and every payload parser. */
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdb_proto_decoder d;
	struct rdb_frame f;

	rdb_proto_decoder_init(&d);
	rdb_proto_decoder_feed(&d, data, size);
	while (rdb_proto_decoder_next(&d, &f) == 1) {
		struct rdb_vm_setup s;
		struct rdb_pages_iter it;
		struct rdb_page_rec r;
		char name[65];
		uint64_t a, b;

		rdb_msg_hello_parse(&f, name, sizeof(name));
		rdb_proto_check_hello_ack(&f);
		if (rdb_msg_vm_setup_parse(&f, &s) == 0)
			rdb_vm_setup_dispose(&s);
		if (rdb_msg_pages_begin(&f, &it) == 0)
			while (rdb_msg_pages_next(&it, &r) == 1)
				;
		rdb_msg_epoch_end_parse(&f, &a, &b);
		rdb_msg_verify_parse(&f, &a, &b);
		rdb_msg_heartbeat_parse(&f, &a, &b);
		rdb_msg_text_parse(&f, name, sizeof(name));
		rdb_msg_disk_setup_parse(&f, &a, &b, &b);
		{
			struct rdb_disk_base db;

			if (rdb_msg_disk_base_parse(&f, &db) == 0)
				for (uint32_t i = 0; i < db.count; i++)
					a ^= rdb_disk_base_extent(&db, i);
		}
		{
			struct rdb_flows_iter fi;
			struct rdb_flow_rec fr;

			if (rdb_msg_flows_begin(&f, &fi) == 0)
				while (rdb_msg_flows_next(&fi, &fr) == 1)
					;
		}
		{
			const uint8_t *p;

			if (rdb_msg_disk_parse(&f, &a, &b, &p) == 0 && p) {
				volatile uint8_t sink = p[0] ^ p[b - 1];

				(void)sink;
			}
		}
	}
	rdb_proto_decoder_dispose(&d);
	return 0;
}

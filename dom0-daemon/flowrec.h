/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A guest TCP flow as the primary tells the backup about it (FLOWS
 * message, proto.h) under commit protection: the flow's addresses and
 * where its sequence numbers stood at the end of an epoch.  The primary's
 * flowbuf makes these; the backup's flowcheck keeps them and uses them
 * after a failover.
 */
#ifndef RDB_FLOWREC_H
#define RDB_FLOWREC_H

#include <stdbool.h>
#include <stdint.h>

/* A flow, named from the guest's side. */
struct rdb_flowkey {
	uint8_t family;			/* 4 or 6 */
	uint8_t guest_ip[16], peer_ip[16];	/* IPv4: the first 4 bytes */
	uint16_t guest_port, peer_port;
};

enum rdb_flow_op {
	RDB_FLOW_UPSERT = 1,
	RDB_FLOW_REMOVE = 2,
};

struct rdb_flow_rec {
	uint8_t op;			/* enum rdb_flow_op */
	struct rdb_flowkey key;
	bool vlan;
	uint16_t vlan_tci;
	uint8_t guest_mac[6];		/* source of the guest's frames */
	uint8_t peer_mac[6];		/* their destination: the next hop */
	uint32_t snd_ref;		/* the guest's highest sequence sent + 1 */
	uint32_t rcv_ref;		/* the guest's last acknowledgement sent */
	bool have_ack;			/* rcv_ref is valid */
};

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A Xen vif's frames as a packet socket with PACKET_VNET_HDR reads them
 * in dom0 (remusdb-xen vif, xen_helper.h): each frame behind a
 * virtio_net_hdr.  A PV guest's netfront offloads its checksums to the
 * backend, so a frame from it may carry a partial TCP or UDP checksum
 * (NEEDS_CSUM: the pseudo-header sum at csum_start + csum_offset, the
 * rest to be summed from csum_start).  The daemon's NIC stream carries
 * plain, finished frames, as QEMU's -netdev stream does: the relay
 * finishes them here.  A GSO frame (the vif script turns GSO off; see
 * hypervisor/xen/vif-remusdb) is not split: it is refused.
 */
#ifndef RDB_XEN_VIF_FRAME_H
#define RDB_XEN_VIF_FRAME_H

#include <stddef.h>
#include <stdint.h>

/* struct virtio_net_hdr, as the kernel's packet socket writes it (host
 * byte order, no num_buffers) */
struct rdb_vnet_hdr {
	uint8_t flags;
	uint8_t gso_type;
	uint16_t hdr_len;
	uint16_t gso_size;
	uint16_t csum_start;
	uint16_t csum_offset;
};
#define RDB_VNET_HDR_LEN 10
#define RDB_VNET_F_NEEDS_CSUM 1

enum rdb_vif_frame {
	RDB_VIF_FRAME_OK,	/* the frame is finished, as given or now */
	RDB_VIF_FRAME_GSO,	/* a GSO frame: not split, refused */
	RDB_VIF_FRAME_BAD,	/* a checksum place outside the frame */
};

/* Reads the header at buf (len >= RDB_VNET_HDR_LEN) and finishes the
 * frame that follows it, in place. */
enum rdb_vif_frame rdb_vif_frame_finish(uint8_t *buf, size_t len);

/* The Internet checksum's one's-complement sum of data, folded to 16
 * bits and not inverted, added to sum. */
uint16_t rdb_inet_sum(const uint8_t *data, size_t len, uint32_t sum);

#endif

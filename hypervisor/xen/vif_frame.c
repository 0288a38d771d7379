// SPDX-License-Identifier: GPL-2.0-only
/* Finishing a vif's frames (vif_frame.h). */
#include "xen/vif_frame.h"

#include <string.h>

uint16_t rdb_inet_sum(const uint8_t *data, size_t len, uint32_t sum)
{
	uint64_t s = sum;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		s += (uint32_t)data[i] << 8 | data[i + 1];
	if (i < len)
		s += (uint32_t)data[i] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

enum rdb_vif_frame rdb_vif_frame_finish(uint8_t *buf, size_t len)
{
	struct rdb_vnet_hdr h;
	uint8_t *f = buf + RDB_VNET_HDR_LEN;
	size_t flen = len - RDB_VNET_HDR_LEN;
	uint16_t sum;

	memcpy(&h, buf, RDB_VNET_HDR_LEN);
	if (h.gso_type != 0)
		return RDB_VIF_FRAME_GSO;
	if (!(h.flags & RDB_VNET_F_NEEDS_CSUM))
		return RDB_VIF_FRAME_OK;
	if ((size_t)h.csum_start + h.csum_offset + 2 > flen)
		return RDB_VIF_FRAME_BAD;
	/* the field holds the pseudo-header's sum: it is summed with the
	 * rest, and the result's complement replaces it */
	sum = (uint16_t)~rdb_inet_sum(f + h.csum_start, flen - h.csum_start, 0);
	/* a computed 0 goes out as 0xffff, as the kernel's own help does:
	 * UDP's 0 means "none" (RFC 768); for TCP both are the same sum */
	if (sum == 0)
		sum = 0xffff;
	f[h.csum_start + h.csum_offset] = (uint8_t)(sum >> 8);
	f[h.csum_start + h.csum_offset + 1] = (uint8_t)sum;
	buf[0] = (uint8_t)(h.flags & ~RDB_VNET_F_NEEDS_CSUM);
	return RDB_VIF_FRAME_OK;
}

// SPDX-License-Identifier: GPL-2.0-only
/*
 * The primary's output across its NICs (primary_int.h): released at the
 * backup's ACK, dropped, counted.  Below primary.c and its parts: it
 * calls only the NIC devices (primary_nic.c).
 */
#define RDB_COMPONENT "primary"
#include "primary_int.h"

/* Everything held may go: the backup committed upto.  Each NIC's flow
 * buffer's frames first: after a decision, what was held while it was
 * pending (in the epoch buffer) came after them. */
void rdb_pri_release_output(struct rdb_primary *p, uint64_t upto)
{
	for (unsigned i = 0; i < p->nnics; i++)
		rdb_pri_nic_release(p->nics[i], upto, NULL, NULL);
}

uint64_t rdb_pri_discard_output(struct rdb_primary *p)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < p->nnics; i++)
		n += rdb_pri_nic_discard(p->nics[i]);
	return n;
}

uint64_t rdb_pri_held_frames(const struct rdb_primary *p)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < p->nnics; i++)
		n += rdb_pri_nic_held_frames(p->nics[i]);
	return n;
}

uint64_t rdb_pri_held_bytes(const struct rdb_primary *p)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < p->nnics; i++)
		n += rdb_pri_nic_held_bytes(p->nics[i]);
	return n;
}

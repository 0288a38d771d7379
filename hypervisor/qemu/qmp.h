/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * QMP client over a unix socket.  Commands are synchronous with a
 * deadline (QEMU answers in about a millisecond; a QEMU that does not is
 * treated as failed, never waited on forever).  Events that arrive
 * meanwhile are queued for rdb_qmp_next_event().
 */
#ifndef RDB_QMP_H
#define RDB_QMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "buf.h"

#define RDB_QMP_MAX_LINE (1u << 20)

/* QEMU patch 0007's capability: checkpoints' pages of shared RAM blocks
 * stay in the shared memory (hypervisor/qemu/README.md) */
#define RDB_QMP_CAP_MAPPED_RAM "x-colo-mapped-ram"

struct rdb_qmp {
	int fd;
	char vm[65];
	struct rdb_buf in;
	json_t *events;		/* array, oldest first */
	uint64_t next_id;
	char last_error[256];
};

/* Retries ENOENT/ECONNREFUSED until the deadline: QEMU may be starting. */
int rdb_qmp_connect(struct rdb_qmp *q, const char *path, const char *vm,
		    uint64_t deadline_ns);
void rdb_qmp_close(struct rdb_qmp *q);	/* idempotent */

/* args is stolen (may be NULL).  -EREMOTEIO: QEMU answered an error, see
 * rdb_qmp_last_error(); -ETIMEDOUT; -ECONNRESET; -EPROTO. */
int rdb_qmp_execute(struct rdb_qmp *q, const char *command, json_t *args,
		    json_t **return_out, uint64_t deadline_ns);
const char *rdb_qmp_last_error(const struct rdb_qmp *q);

int rdb_qmp_fd(const struct rdb_qmp *q);
/* Non-blocking: queue whatever events are readable. */
int rdb_qmp_read_events(struct rdb_qmp *q);
/* Oldest queued event or NULL; the caller owns it. */
json_t *rdb_qmp_next_event(struct rdb_qmp *q);

int rdb_qmp_query_status(struct rdb_qmp *q, char *status, size_t len,
			 uint64_t deadline_ns);
/* COLO's capabilities (x-colo on, x-ignore-shared off), then the
 * checkpoint delay and the migration to uri: the two halves, for a
 * caller that sets more capabilities between them, and both. */
int rdb_qmp_colo_caps(struct rdb_qmp *q, uint64_t deadline_ns);
int rdb_qmp_migrate_colo(struct rdb_qmp *q, const char *uri,
			 unsigned checkpoint_ms, uint64_t deadline_ns);
int rdb_qmp_migrate_colo_start(struct rdb_qmp *q, const char *uri,
			       unsigned checkpoint_ms, uint64_t deadline_ns);
int rdb_qmp_set_checkpoint_delay(struct rdb_qmp *q, unsigned ms,
				 uint64_t deadline_ns);
int rdb_qmp_set_capability(struct rdb_qmp *q, const char *cap, bool on,
			   uint64_t deadline_ns);
/* Whether memory backend id (e.g. "pc.ram") is share=on: false when
 * QEMU lists no such backend. */
int rdb_qmp_memdev_shared(struct rdb_qmp *q, const char *id, bool *shared,
			  uint64_t deadline_ns);
int rdb_qmp_colo_lost_heartbeat(struct rdb_qmp *q, uint64_t deadline_ns);
int rdb_qmp_migrate_incoming(struct rdb_qmp *q, const char *uri,
			     uint64_t deadline_ns);
int rdb_qmp_announce_self(struct rdb_qmp *q, uint64_t deadline_ns);
int rdb_qmp_cont(struct rdb_qmp *q, uint64_t deadline_ns);
int rdb_qmp_stop(struct rdb_qmp *q, uint64_t deadline_ns);

#endif

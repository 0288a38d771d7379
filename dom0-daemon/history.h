/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A VM's state changes, kept across restarts for `remusdbctl history`:
 * <state_dir>/<vm>/history.jsonl, one JSON object per change, appended
 * as it happens:
 *
 *   {"time": "2026-11-28T22:13:34.639Z", "from": "protected",
 *    "to": "deciding", "role": "primary", "after_s": 21.925,
 *    "reason": "replication link: backup closed the connection; ..."}
 *
 * (the failover decisions are state changes: deciding -> degraded,
 * fenced, failing-over).  At HISTORY_MAX_BYTES the file becomes
 * history.jsonl.1 (the one before is dropped), so a VM keeps between
 * one and two of them.  Not synced: a power loss may cost the last
 * lines, never the daemon's time (it is appended on the event loop).
 */
#ifndef RDB_HISTORY_H
#define RDB_HISTORY_H

#include <stddef.h>

#include <jansson.h>

#define RDB_HISTORY_MAX_BYTES (1u << 20)

/* Appends one change; 0 or -errno (err says what failed).  The VM's
 * directory is made if missing. */
int rdb_history_append(const char *state_dir, const char *vm,
		       const char *from, const char *to, const char *role,
		       double after_s, const char *reason, char *err,
		       size_t errlen);

/* The last n changes (n 0: all that are kept), oldest first, as a JSON
 * array in *out; lines that do not parse are skipped and counted in
 * *bad.  -ENOENT: no history for that VM; -EINVAL: a name that is no
 * VM's ("", ".", "..", a '/'). */
int rdb_history_read(const char *state_dir, const char *vm, size_t n,
		     json_t **out, size_t *bad, char *err, size_t errlen);

#endif

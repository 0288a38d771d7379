/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The failover witness: who may run a protected VM when its two hosts
 * lose each other (invariant I6, docs/failure-modes.md).
 *
 * The witness is etcd (Debian's etcd-server), spoken to through its v3
 * JSON gateway.  Each VM has one key, <prefix>/vm/<name>, whose value
 * names the protection generation and the node that owns the VM:
 *
 *   remusdb-witness/1 generation=<16 hex> owner=<node> state=protected
 *   remusdb-witness/1 generation=<16 hex> owner=<node> state=running
 *
 * - register: a primary about to protect writes "protected" with a fresh
 *   generation.  Only the current owner may do that (or anyone, when the
 *   key does not exist): a host that lost the VM cannot take it back by
 *   protecting again.  One compare-and-swap on the key's mod_revision.
 *   A step no endpoint answers is tried again, for 10 timeouts.
 * - return: the claim a backup won for a handover goes back to the
 *   registered value when its restore failed (the old primary resumes).
 * - claim: a side that lost its peer (the primary: the backup went
 *   silent; the backup: the primary did) swaps the registered value for
 *   "running" with itself as owner.  The compare is on the exact
 *   registered value, so for one generation exactly one claim succeeds;
 *   the other side reads the winner.  A claim that already won (our
 *   answer was lost and we asked again) is recognised as won.
 *
 * Requests run on a thread each, with curl's deadlines, and their result
 * comes back through a pipe into the event loop: a witness that does not
 * answer never stalls the loop that serves every VM.
 */
#ifndef RDB_WITNESS_H
#define RDB_WITNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "evloop.h"

#include <jansson.h>

#define RDB_WITNESS_VALUE_MAX 256

enum rdb_witness_outcome {
	RDB_WITNESS_WON,	/* register: written; claim: ours */
	RDB_WITNESS_LOST,	/* another owner holds it: see holder */
	RDB_WITNESS_ERROR,	/* no answer, or not one we understand */
};

struct rdb_witness_result {
	enum rdb_witness_outcome outcome;
	char holder[RDB_WITNESS_VALUE_MAX];	/* LOST: the value that won */
	char error[256];			/* ERROR: why */
};

typedef void (*rdb_witness_cb)(void *opaque, const struct rdb_witness_result *r);

struct rdb_witness;

/*
 * endpoints: "http://10.0.0.5:2379" or a comma-separated list (an etcd
 * cluster: each is tried in turn); prefix: the keys' root, e.g.
 * "/remusdb"; timeout_ms bounds each HTTP exchange.
 */
int rdb_witness_create(struct rdb_evloop *loop, const char *endpoints,
		       const char *prefix, uint32_t timeout_ms,
		       struct rdb_witness **w_out);
/*
 * Every VM's key under prefix, asked now (blocking, each endpoint in
 * turn within timeout_ms: for remusdbctl status --cluster, never the
 * daemon's loop): *out a JSON array, by name, of {"name", "value"} and,
 * for a value this code reads, "owner", "state" (protected | running)
 * and "generation".  0, or a negative errno with err.
 */
int rdb_witness_list(const char *endpoints, const char *prefix,
		     uint32_t timeout_ms, json_t **out, char *err,
		     size_t errlen);
/* Joins the threads still asking (each bounded by its timeout). */
void rdb_witness_destroy(struct rdb_witness *w);	/* NULL ok */

/* Both return a request id > 0 (for rdb_witness_cancel) or a negative
 * errno; cb runs later, from the event loop, unless cancelled. */
int64_t rdb_witness_register(struct rdb_witness *w, const char *vm,
			     const char *node, uint64_t generation,
			     rdb_witness_cb cb, void *opaque);
int64_t rdb_witness_claim(struct rdb_witness *w, const char *vm,
			  const char *registered, const char *node,
			  rdb_witness_cb cb, void *opaque);
/* A claim node won is given back: the value goes from node's running
 * value to registered again (a handover whose restore failed: the old
 * primary runs on).  WON: the key holds registered (now or already);
 * LOST: something else (holder); ERROR: no answer. */
int64_t rdb_witness_return(struct rdb_witness *w, const char *vm,
			   const char *registered, const char *node,
			   rdb_witness_cb cb, void *opaque);
/* The VM's value as it stands: WON, holder = the value ("" when there
 * is no key), or ERROR. */
int64_t rdb_witness_read(struct rdb_witness *w, const char *vm,
			 rdb_witness_cb cb, void *opaque);
/* cb will not be called for id (unknown or finished ids are fine). */
void rdb_witness_cancel(struct rdb_witness *w, int64_t id);
const char *rdb_witness_endpoints(const struct rdb_witness *w);

/* ---- the values (pure; exposed for tests) ---- */

enum rdb_witness_state { RDB_WITNESS_PROTECTED, RDB_WITNESS_RUNNING };

struct rdb_witness_value {
	uint64_t generation;
	char owner[65];
	enum rdb_witness_state state;
};

/* A node name: 1-64 of [A-Za-z0-9._-]. */
bool rdb_witness_node_valid(const char *node);
int rdb_witness_value_format(const struct rdb_witness_value *v, char *out,
			     size_t len);
int rdb_witness_value_parse(const char *s, size_t len,
			    struct rdb_witness_value *v_out);
/*
 * Whose the VM is by a value read from the witness (rdb_witness_read's
 * holder, "" when the key does not exist), as seen from node: nobody's,
 * node's own, another node's (in any state: a host that registered the
 * VM, even without running it yet, may run it), or unreadable (a value
 * that is not RemusDB's tells nothing, and nothing may be guessed).
 * v_out (may be NULL) gets the parsed value for SELF and OTHER.
 */
enum rdb_witness_owner {
	RDB_WITNESS_NOBODY,
	RDB_WITNESS_SELF,
	RDB_WITNESS_OTHER,
	RDB_WITNESS_UNREADABLE,
};
enum rdb_witness_owner rdb_witness_owner_of(const char *value, const char *node,
					    struct rdb_witness_value *v_out);
/* RFC 4648 base64 (etcd's JSON gateway carries keys and values so). */
size_t rdb_base64_encode(const uint8_t *in, size_t len, char *out,
			 size_t outlen);
int rdb_base64_decode(const char *in, uint8_t *out, size_t outlen,
		      size_t *len_out);

#endif

// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "witness"
#include "witness.h"
#include "clock.h"
#include "log.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VALUE_MAGIC "remusdb-witness/1"
/* A register races only with another register of the same owner, or a
 * claim: a few rounds settle it. */
#define REGISTER_ROUNDS 4
/* A register that found no witness answering (a timeout: seen in CI with
 * the host stalled, 583 ms against a 500 ms timeout; and an etcd whose
 * disk stalled, three tries over 1.7 s) is tried again, REGISTER_PAUSE_US
 * apart, for REGISTER_BUDGET timeouts (at least 3 tries): a protect then
 * fails after ~10 s with the default witness_timeout_ms.  Safe: a write
 * that took effect unseen leaves the key with our own value, which the
 * next round reads and writes again. */
#define REGISTER_MIN_TRIES 3
#define REGISTER_BUDGET 10
#define REGISTER_PAUSE_US 100000

enum op { OP_REGISTER, OP_CLAIM, OP_READ, OP_RETURN };

struct req {
	struct rdb_witness *w;
	int64_t id;
	enum op op;
	char vm[65];
	char node[65];
	uint64_t generation;
	char registered[RDB_WITNESS_VALUE_MAX];
	rdb_witness_cb cb;
	void *opaque;
	bool cancelled;			/* main thread only */
	pthread_t thread;
	struct rdb_witness_result res;	/* the thread's, read after the pipe */
	struct req *next;
};

struct rdb_witness {
	struct rdb_evloop *loop;
	char **endpoints;
	size_t nendpoints;
	char *endpoints_text;
	char *prefix;
	uint32_t timeout_ms;
	int pipe_rd, pipe_wr;
	int64_t next_id;
	struct req *reqs;		/* in flight */
};

/* ---- values and base64 ---- */

bool rdb_witness_node_valid(const char *node)
{
	size_t n = node ? strlen(node) : 0;

	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = node[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

int rdb_witness_value_format(const struct rdb_witness_value *v, char *out,
			     size_t len)
{
	int n;

	if (!rdb_witness_node_valid(v->owner))
		return -EINVAL;
	n = snprintf(out, len, VALUE_MAGIC " generation=%016" PRIx64
		     " owner=%s state=%s", v->generation, v->owner,
		     v->state == RDB_WITNESS_RUNNING ? "running" : "protected");
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int rdb_witness_value_parse(const char *s, size_t len,
			    struct rdb_witness_value *v_out)
{
	char buf[RDB_WITNESS_VALUE_MAX], owner[65], state[16], tail;
	unsigned long long gen;
	int n;

	if (len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = 0;
	n = sscanf(buf, VALUE_MAGIC " generation=%16llx owner=%64s state=%15s %c",
		   &gen, owner, state, &tail);
	if (n != 3 || !rdb_witness_node_valid(owner))
		return -EINVAL;
	if (strcmp(state, "running") == 0)
		v_out->state = RDB_WITNESS_RUNNING;
	else if (strcmp(state, "protected") == 0)
		v_out->state = RDB_WITNESS_PROTECTED;
	else
		return -EINVAL;
	v_out->generation = gen;
	snprintf(v_out->owner, sizeof(v_out->owner), "%s", owner);
	return 0;
}

enum rdb_witness_owner rdb_witness_owner_of(const char *value, const char *node,
					    struct rdb_witness_value *v_out)
{
	struct rdb_witness_value v;

	if (!value[0])
		return RDB_WITNESS_NOBODY;
	if (rdb_witness_value_parse(value, strlen(value), &v) < 0)
		return RDB_WITNESS_UNREADABLE;
	if (v_out)
		*v_out = v;
	return strcmp(v.owner, node) == 0 ? RDB_WITNESS_SELF : RDB_WITNESS_OTHER;
}

static const char b64[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t rdb_base64_encode(const uint8_t *in, size_t len, char *out,
			 size_t outlen)
{
	size_t need = (len + 2) / 3 * 4, o = 0;

	if (outlen < need + 1)
		return 0;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < len)
			v |= in[i + 2];
		out[o++] = b64[v >> 18 & 63];
		out[o++] = b64[v >> 12 & 63];
		out[o++] = i + 1 < len ? b64[v >> 6 & 63] : '=';
		out[o++] = i + 2 < len ? b64[v & 63] : '=';
	}
	out[o] = 0;
	return o;
}

static int b64_digit(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;

	return p ? (int)(p - b64) : -1;
}

int rdb_base64_decode(const char *in, uint8_t *out, size_t outlen,
		      size_t *len_out)
{
	size_t n = strlen(in), o = 0;

	if (n % 4)
		return -EINVAL;
	for (size_t i = 0; i < n; i += 4) {
		int d[4];
		uint32_t v = 0;
		int pad = 0;

		for (int k = 0; k < 4; k++) {
			if (in[i + k] == '=' && i + 4 == n && k >= 2) {
				d[k] = 0;
				pad++;
			} else if (pad || (d[k] = b64_digit(in[i + k])) < 0) {
				return -EINVAL;
			}
			v = v << 6 | (uint32_t)d[k];
		}
		if (o + 3 - (size_t)pad > outlen)
			return -ENOSPC;
		out[o++] = (uint8_t)(v >> 16);
		if (pad < 2)
			out[o++] = (uint8_t)(v >> 8);
		if (pad < 1)
			out[o++] = (uint8_t)v;
	}
	*len_out = o;
	return 0;
}

/* ---- HTTP to etcd (on the request's thread) ---- */

struct body {
	char *p;
	size_t len;
};

static size_t on_body(char *data, size_t size, size_t n, void *opaque)
{
	struct body *b = opaque;
	size_t add = size * n;
	char *np;

	if (b->len + add > (1u << 20))
		return 0;	/* an etcd answer about one key is small */
	np = realloc(b->p, b->len + add + 1);
	if (!np)
		return 0;
	memcpy(np + b->len, data, add);
	b->p = np;
	b->len += add;
	b->p[b->len] = 0;
	return add;
}

/* POSTs body to path at each endpoint in turn until one answers 200. */
static int post(struct req *r, const char *path, json_t *body,
		json_t **reply_out)
{
	struct rdb_witness *w = r->w;
	char *text = json_dumps(body, JSON_COMPACT);
	char errs[sizeof(r->res.error)] = "";
	int rc = -EHOSTUNREACH;

	if (!text)
		return -ENOMEM;
	for (size_t i = 0; i < w->nendpoints; i++) {
		char url[512], cerr[CURL_ERROR_SIZE] = "";
		struct body b = { 0 };
		struct curl_slist *h = NULL;
		CURL *c = curl_easy_init();
		CURLcode cc;
		long status = 0;

		if (!c) {
			rc = -ENOMEM;
			break;
		}
		snprintf(url, sizeof(url), "%s%s", w->endpoints[i], path);
		h = curl_slist_append(h, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)w->timeout_ms);
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)w->timeout_ms);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
		cc = curl_easy_perform(c);
		if (cc == CURLE_OK)
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		curl_slist_free_all(h);
		curl_easy_cleanup(c);
		if (cc == CURLE_OK && status == 200) {
			json_error_t je;

			*reply_out = json_loadb(b.p ? b.p : "", b.len, 0, &je);
			free(b.p);
			if (*reply_out) {
				free(text);
				return 0;
			}
			snprintf(errs, sizeof(errs), "%.100s: answer is not JSON", url);
			rc = -EPROTO;
			continue;
		}
		if (cc != CURLE_OK)
			snprintf(errs, sizeof(errs), "%.100s: %.140s", url,
				 cerr[0] ? cerr : curl_easy_strerror(cc));
		else
			snprintf(errs, sizeof(errs), "%.100s: HTTP %ld: %.100s", url,
				 status, b.p ? b.p : "");
		free(b.p);
		rc = cc == CURLE_OK ? -EPROTO : -EHOSTUNREACH;
	}
	free(text);
	snprintf(r->res.error, sizeof(r->res.error), "%s", errs);
	return rc;
}

static json_t *b64_str(const char *s)
{
	size_t n = strlen(s);
	char *o = malloc((n + 2) / 3 * 4 + 1);
	json_t *j;

	if (!o)
		return NULL;
	rdb_base64_encode((const uint8_t *)s, n, o, (n + 2) / 3 * 4 + 1);
	j = json_string(o);
	free(o);
	return j;
}

/* The key's value and mod_revision from a range answer's kvs; 0 with
 * *found false when the key does not exist. */
static int kv_of(json_t *range, bool *found, char *value, size_t vlen,
		 char *modrev, size_t mlen)
{
	json_t *kvs = json_object_get(range, "kvs"), *kv;
	const char *v, *m;
	size_t n;

	*found = false;
	if (!kvs || json_array_size(kvs) == 0)
		return 0;
	kv = json_array_get(kvs, 0);
	v = json_string_value(json_object_get(kv, "value"));
	m = json_string_value(json_object_get(kv, "mod_revision"));
	if (!m)
		return -EPROTO;
	if (!v)
		v = "";	/* an empty value is omitted */
	if (rdb_base64_decode(v, (uint8_t *)value, vlen - 1, &n) < 0)
		return -EPROTO;
	value[n] = 0;
	/* Values reach logs and status: anything but printable ASCII
	 * becomes '?' (no RemusDB value has any; such a value stays
	 * unparseable, and unequal to ours). */
	for (size_t i = 0; i < n; i++)
		if ((uint8_t)value[i] < 0x20 || (uint8_t)value[i] >= 0x7f)
			value[i] = '?';
	snprintf(modrev, mlen, "%s", m);
	*found = true;
	return 0;
}

static json_t *put_op(json_t *key, const char *value)
{
	return json_pack("{s:{s:O, s:o}}", "request_put", "key", key, "value",
			 b64_str(value));
}

static void set_lost(struct req *r, const char *holder)
{
	r->res.outcome = RDB_WITNESS_LOST;
	snprintf(r->res.holder, sizeof(r->res.holder), "%s", holder);
}

/* what, then the transport's detail (post() left it in res.error) */
static void set_error(struct req *r, int rc, const char *what)
{
	char detail[sizeof(r->res.error)];

	r->res.outcome = RDB_WITNESS_ERROR;
	memcpy(detail, r->res.error, sizeof(detail));
	if (detail[0])
		snprintf(r->res.error, sizeof(r->res.error), "%s: %.200s", what, detail);
	else
		snprintf(r->res.error, sizeof(r->res.error), "%s (%s)", what,
			 strerror(-rc));
}

/* A register's tries at steps no endpoint answered (REGISTER_BUDGET). */
struct register_tries {
	int tries;
	uint64_t t0, budget;
};

/* rc from a step: true when it found no witness answering and may be
 * tried again (after the pause, done here). */
static bool register_again(struct register_tries *tr, int rc)
{
	if (rc != -EHOSTUNREACH || (tr->tries >= REGISTER_MIN_TRIES &&
				    rdb_now_ns() - tr->t0 >= tr->budget))
		return false;
	tr->tries++;
	usleep(REGISTER_PAUSE_US);
	return true;
}

static void register_failed(struct req *r, const struct register_tries *tr,
			    int rc, const char *verb)
{
	char what[64];

	snprintf(what, sizeof(what), "%s the VM's key (%d tries in %.1f s)",
		 verb, tr->tries, (double)(rdb_now_ns() - tr->t0) / RDB_NS_PER_S);
	set_error(r, rc, what);
}

static void do_register(struct req *r, json_t *key)
{
	struct rdb_witness_value nv = {
		.generation = r->generation, .state = RDB_WITNESS_PROTECTED,
	};
	char want[RDB_WITNESS_VALUE_MAX];
	struct register_tries tr = {
		.tries = 1, .t0 = rdb_now_ns(),
		.budget = (uint64_t)REGISTER_BUDGET * r->w->timeout_ms * RDB_NS_PER_MS,
	};

	snprintf(nv.owner, sizeof(nv.owner), "%s", r->node);
	if (rdb_witness_value_format(&nv, want, sizeof(want)) < 0) {
		set_error(r, -EINVAL, "bad node name");
		return;
	}
	for (int round = 0; round < REGISTER_ROUNDS; round++) {
		char cur[RDB_WITNESS_VALUE_MAX], modrev[32];
		struct rdb_witness_value cv;
		json_t *q, *a = NULL, *cmp, *t;
		bool found;
		int rc;

		q = json_pack("{s:O}", "key", key);
		rc = q ? post(r, "/v3/kv/range", q, &a) : -ENOMEM;
		json_decref(q);
		if (rc == 0)
			rc = kv_of(a, &found, cur, sizeof(cur), modrev, sizeof(modrev));
		json_decref(a);
		a = NULL;
		if (register_again(&tr, rc)) {
			round--;
			continue;
		}
		if (rc < 0) {
			register_failed(r, &tr, rc, "reading");
			return;
		}
		if (found) {
			if (rdb_witness_value_parse(cur, strlen(cur), &cv) < 0) {
				set_error(r, -EPROTO, "the VM's key holds no RemusDB value");
				snprintf(r->res.holder, sizeof(r->res.holder), "%s", cur);
				return;
			}
			if (strcmp(cv.owner, r->node) != 0) {
				set_lost(r, cur);
				return;
			}
			cmp = json_pack("{s:O, s:s, s:s, s:s}", "key", key, "target",
					"MOD", "result", "EQUAL", "mod_revision", modrev);
		} else {
			cmp = json_pack("{s:O, s:s, s:s, s:s}", "key", key, "target",
					"CREATE", "result", "EQUAL", "create_revision", "0");
		}
		t = json_pack("{s:[o], s:[o]}", "compare", cmp, "success",
			      put_op(key, want));
		rc = t ? post(r, "/v3/kv/txn", t, &a) : -ENOMEM;
		json_decref(t);
		if (register_again(&tr, rc)) {
			round--;
			continue;
		}
		if (rc < 0) {
			register_failed(r, &tr, rc, "writing");
			return;
		}
		if (json_is_true(json_object_get(a, "succeeded"))) {
			json_decref(a);
			r->res.outcome = RDB_WITNESS_WON;
			return;
		}
		json_decref(a);	/* changed between our read and write: again */
	}
	set_error(r, -EAGAIN, "the VM's key kept changing under us");
}

/*
 * One compare-and-swap of the key's value: expect -> want.  1: swapped;
 * 0: not, and *found / cur say what the key holds instead; < 0: no
 * answer (the result set to ERROR, what naming the step).
 */
static int swap(struct req *r, json_t *key, const char *expect,
		const char *want, const char *what, bool *found, char *cur,
		size_t curlen)
{
	char modrev[32], err[96];
	json_t *t, *a = NULL, *rr;
	int rc;

	t = json_pack("{s:[{s:O, s:s, s:s, s:o}], s:[o], s:[{s:{s:O}}]}",
		      "compare", "key", key, "target", "VALUE", "result", "EQUAL",
		      "value", b64_str(expect),
		      "success", put_op(key, want),
		      "failure", "request_range", "key", key);
	rc = t ? post(r, "/v3/kv/txn", t, &a) : -ENOMEM;
	json_decref(t);
	if (rc < 0) {
		snprintf(err, sizeof(err), "%s the VM's key", what);
		set_error(r, rc, err);
		return rc;
	}
	if (json_is_true(json_object_get(a, "succeeded"))) {
		json_decref(a);
		return 1;
	}
	rr = json_object_get(json_array_get(json_object_get(a, "responses"), 0),
			     "response_range");
	rc = rr ? kv_of(rr, found, cur, curlen, modrev, sizeof(modrev)) : -EPROTO;
	json_decref(a);
	if (rc < 0) {
		snprintf(err, sizeof(err), "etcd's answer to %s the VM's key", what);
		set_error(r, -EPROTO, err);
		return -EPROTO;
	}
	return 0;
}

/* The value node would hold after its claim of the registered one. */
static int claimed_value(struct req *r, char *out, size_t len)
{
	struct rdb_witness_value v;

	if (rdb_witness_value_parse(r->registered, strlen(r->registered), &v) < 0) {
		set_error(r, -EINVAL, "no registered value");
		return -EINVAL;
	}
	snprintf(v.owner, sizeof(v.owner), "%s", r->node);
	v.state = RDB_WITNESS_RUNNING;
	if (rdb_witness_value_format(&v, out, len) < 0) {
		set_error(r, -EINVAL, "bad node name");
		return -EINVAL;
	}
	return 0;
}

static void do_claim(struct req *r, json_t *key)
{
	char want[RDB_WITNESS_VALUE_MAX], cur[RDB_WITNESS_VALUE_MAX];
	bool found;
	int rc;

	if (claimed_value(r, want, sizeof(want)) < 0)
		return;
	rc = swap(r, key, r->registered, want, "claiming", &found, cur,
		  sizeof(cur));
	if (rc < 0)
		return;
	if (rc == 1 || (found && strcmp(cur, want) == 0)) {
		r->res.outcome = RDB_WITNESS_WON;	/* (or our earlier try won) */
		return;
	}
	/* Nobody may run a VM whose key was deleted by hand: that is for
	 * the operator to sort out (remusdbctl ... --force). */
	set_lost(r, found ? cur : "(the VM's key is gone from the witness)");
}

/* The claim node won goes back: the key's value from node's "running"
 * to the registered one, if it still holds the claim. */
static void do_return(struct req *r, json_t *key)
{
	char claimed[RDB_WITNESS_VALUE_MAX], cur[RDB_WITNESS_VALUE_MAX];
	bool found;
	int rc;

	if (claimed_value(r, claimed, sizeof(claimed)) < 0)
		return;
	rc = swap(r, key, claimed, r->registered, "returning", &found, cur,
		  sizeof(cur));
	if (rc < 0)
		return;
	if (rc == 1 || (found && strcmp(cur, r->registered) == 0)) {
		r->res.outcome = RDB_WITNESS_WON;	/* (or our earlier try did) */
		return;
	}
	set_lost(r, found ? cur : "(the VM's key is gone from the witness)");
}

/* The key's value as it stands: WON with holder = the value ("" when the
 * key does not exist). */
static void do_read(struct req *r, json_t *key)
{
	char cur[RDB_WITNESS_VALUE_MAX], modrev[32];
	json_t *q, *a = NULL;
	bool found;
	int rc;

	q = json_pack("{s:O}", "key", key);
	rc = q ? post(r, "/v3/kv/range", q, &a) : -ENOMEM;
	json_decref(q);
	if (rc == 0)
		rc = kv_of(a, &found, cur, sizeof(cur), modrev, sizeof(modrev));
	json_decref(a);
	if (rc < 0) {
		set_error(r, rc, "reading the VM's key");
		return;
	}
	r->res.outcome = RDB_WITNESS_WON;
	snprintf(r->res.holder, sizeof(r->res.holder), "%s", found ? cur : "");
}

static void *req_thread(void *opaque)
{
	struct req *r = opaque;
	char path[512];
	json_t *key;
	ssize_t n;

	pthread_setname_np(pthread_self(), "rdb-witness");
	snprintf(path, sizeof(path), "%s/vm/%s", r->w->prefix, r->vm);
	key = b64_str(path);
	if (!key)
		set_error(r, -ENOMEM, "out of memory");
	else if (r->op == OP_REGISTER)
		do_register(r, key);
	else if (r->op == OP_READ)
		do_read(r, key);
	else if (r->op == OP_RETURN)
		do_return(r, key);
	else
		do_claim(r, key);
	json_decref(key);
	do
		n = write(r->w->pipe_wr, &r, sizeof(r));
	while (n < 0 && errno == EINTR);
	return NULL;
}

/* ---- the event loop's side ---- */

static void unlink_req(struct rdb_witness *w, struct req *r)
{
	for (struct req **pp = &w->reqs; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			return;
		}
}

static void on_pipe(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct rdb_witness *w = opaque;
	struct req *r;

	while (read(fd, &r, sizeof(r)) == (ssize_t)sizeof(r)) {
		pthread_join(r->thread, NULL);
		unlink_req(w, r);
		if (!r->cancelled)
			r->cb(r->opaque, &r->res);
		free(r);
	}
}

static int64_t start(struct rdb_witness *w, struct req *r)
{
	int rc;

	r->w = w;
	r->id = ++w->next_id;
	rc = pthread_create(&r->thread, NULL, req_thread, r);
	if (rc) {
		free(r);
		return -rc;
	}
	r->next = w->reqs;
	w->reqs = r;
	return r->id;
}

/* One request to the witness thread: op on vm's key, for node (NULL: no
 * node), against registered (NULL: none); cb answers on the loop. */
static int64_t request(struct rdb_witness *w, enum op op, const char *vm,
		       const char *node, uint64_t generation,
		       const char *registered, rdb_witness_cb cb, void *opaque)
{
	struct req *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->op = op;
	snprintf(r->vm, sizeof(r->vm), "%s", vm);
	if (node)
		snprintf(r->node, sizeof(r->node), "%s", node);
	if (registered)
		snprintf(r->registered, sizeof(r->registered), "%s", registered);
	r->generation = generation;
	r->cb = cb;
	r->opaque = opaque;
	return start(w, r);
}

int64_t rdb_witness_register(struct rdb_witness *w, const char *vm,
			     const char *node, uint64_t generation,
			     rdb_witness_cb cb, void *opaque)
{
	return request(w, OP_REGISTER, vm, node, generation, NULL, cb, opaque);
}

int64_t rdb_witness_claim(struct rdb_witness *w, const char *vm,
			  const char *registered, const char *node,
			  rdb_witness_cb cb, void *opaque)
{
	return request(w, OP_CLAIM, vm, node, 0, registered, cb, opaque);
}

int64_t rdb_witness_return(struct rdb_witness *w, const char *vm,
			   const char *registered, const char *node,
			   rdb_witness_cb cb, void *opaque)
{
	return request(w, OP_RETURN, vm, node, 0, registered, cb, opaque);
}

int64_t rdb_witness_read(struct rdb_witness *w, const char *vm,
			 rdb_witness_cb cb, void *opaque)
{
	return request(w, OP_READ, vm, NULL, 0, NULL, cb, opaque);
}

void rdb_witness_cancel(struct rdb_witness *w, int64_t id)
{
	if (!w)
		return;
	for (struct req *r = w->reqs; r; r = r->next)
		if (r->id == id)
			r->cancelled = true;
}

const char *rdb_witness_endpoints(const struct rdb_witness *w)
{
	return w->endpoints_text;
}

/* endpoints ("http://a:2379,http://b:2379") into w's list: 0, -EINVAL
 * (none, or one that is not http(s)://), -ENOMEM */
static int parse_endpoints(struct rdb_witness *w, const char *endpoints)
{
	char *save = NULL, *tok, *copy = strdup(endpoints);
	int rc = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char **nv;
		size_t n = strlen(tok);

		while (n && tok[n - 1] == '/')
			tok[--n] = 0;	/* "http://h:2379/" works too */
		if (strncmp(tok, "http://", 7) != 0 && strncmp(tok, "https://", 8) != 0) {
			rc = -EINVAL;
			break;
		}
		nv = realloc(w->endpoints, (w->nendpoints + 1) * sizeof(*nv));
		if (!nv) {
			rc = -ENOMEM;
			break;
		}
		w->endpoints = nv;
		if (!(w->endpoints[w->nendpoints] = strdup(tok))) {
			rc = -ENOMEM;
			break;
		}
		w->nendpoints++;
	}
	free(copy);
	if (rc == 0 && w->nendpoints == 0)
		rc = -EINVAL;
	return rc;
}

int rdb_witness_list(const char *endpoints, const char *prefix,
		     uint32_t timeout_ms, json_t **out, char *err,
		     size_t errlen)
{
	struct rdb_witness w = { .timeout_ms = timeout_ms, .pipe_rd = -1,
				 .pipe_wr = -1 };
	struct req r = { .w = &w };
	char from[300], to[300];
	json_t *q = NULL, *a = NULL, *kvs, *kv, *list = NULL;
	size_t i;
	int rc;

	*out = NULL;
	rc = parse_endpoints(&w, endpoints);
	if (rc < 0) {
		snprintf(err, errlen, "witness %s: %s", endpoints, rc == -EINVAL ?
			 "not http(s)://HOST:PORT[,...]" : strerror(-rc));
		goto out;
	}
	/* every key PREFIX/vm/...: the range up to PREFIX/vm0 */
	snprintf(from, sizeof(from), "%s/vm/", prefix);
	snprintf(to, sizeof(to), "%s/vm0", prefix);
	q = json_pack("{s:o, s:o}", "key", b64_str(from), "range_end", b64_str(to));
	rc = q ? post(&r, "/v3/kv/range", q, &a) : -ENOMEM;
	if (rc < 0) {
		snprintf(err, errlen, "witness %s: %s", endpoints,
			 r.res.error[0] ? r.res.error : strerror(-rc));
		goto out;
	}
	list = json_array();
	kvs = json_object_get(a, "kvs");
	json_array_foreach(kvs, i, kv) {
		const char *k = json_string_value(json_object_get(kv, "key"));
		const char *v = json_string_value(json_object_get(kv, "value"));
		char key[300], value[RDB_WITNESS_VALUE_MAX];
		struct rdb_witness_value wv;
		size_t kn, vn = 0;
		json_t *o;

		if (!k || rdb_base64_decode(k, (uint8_t *)key, sizeof(key) - 1,
					    &kn) < 0 ||
		    (v && rdb_base64_decode(v, (uint8_t *)value, sizeof(value) - 1,
					    &vn) < 0))
			continue;
		key[kn] = value[vn] = 0;
		if (kn <= strlen(from) || memchr(key, 0, kn))
			continue;
		for (size_t c = 0; c < vn; c++)
			if ((uint8_t)value[c] < 0x20 || (uint8_t)value[c] >= 0x7f)
				value[c] = '?';
		o = json_pack("{s:s, s:s}", "name", key + strlen(from), "value", value);
		if (o && rdb_witness_value_parse(value, vn, &wv) == 0) {
			char gen[20];

			snprintf(gen, sizeof(gen), "%016" PRIx64, wv.generation);
			json_object_set_new(o, "owner", json_string(wv.owner));
			json_object_set_new(o, "state", json_string(
				wv.state == RDB_WITNESS_RUNNING ? "running" : "protected"));
			json_object_set_new(o, "generation", json_string(gen));
		}
		if (o)
			json_array_append_new(list, o);
	}
	*out = list;
	list = NULL;
	rc = 0;
out:
	json_decref(q);
	json_decref(a);
	json_decref(list);
	for (size_t e = 0; e < w.nendpoints; e++)
		free(w.endpoints[e]);
	free(w.endpoints);
	return rc;
}

int rdb_witness_create(struct rdb_evloop *loop, const char *endpoints,
		       const char *prefix, uint32_t timeout_ms,
		       struct rdb_witness **w_out)
{
	struct rdb_witness *w = calloc(1, sizeof(*w));
	int fds[2] = { -1, -1 };
	int rc = -ENOMEM;

	if (!w)
		return -ENOMEM;
	w->loop = loop;
	w->pipe_rd = w->pipe_wr = -1;
	w->timeout_ms = timeout_ms;
	w->endpoints_text = strdup(endpoints);
	w->prefix = strdup(prefix);
	if (!w->endpoints_text || !w->prefix)
		goto fail;
	rc = parse_endpoints(w, endpoints);
	if (rc < 0)
		goto fail;
	rc = -ENOMEM;
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
		rc = -errno;
		goto fail;
	}
	/* the threads' writes must not fail with EAGAIN: 8 bytes each into
	 * an otherwise empty pipe is far below its buffer, but be sure */
	fcntl(fds[1], F_SETFL, 0);
	w->pipe_rd = fds[0];
	w->pipe_wr = fds[1];
	rc = rdb_evloop_add_fd(loop, w->pipe_rd, RDB_EV_READ, on_pipe, w);
	if (rc < 0)
		goto fail;
	*w_out = w;
	return 0;
fail:
	rdb_witness_destroy(w);
	return rc;
}

void rdb_witness_destroy(struct rdb_witness *w)
{
	if (!w)
		return;
	while (w->reqs) {
		struct req *r = w->reqs;

		w->reqs = r->next;
		pthread_join(r->thread, NULL);
		free(r);
	}
	if (w->pipe_rd >= 0) {
		rdb_evloop_del_fd(w->loop, w->pipe_rd);
		close(w->pipe_rd);
	}
	if (w->pipe_wr >= 0)
		close(w->pipe_wr);
	for (size_t i = 0; i < w->nendpoints; i++)
		free(w->endpoints[i]);
	free(w->endpoints);
	free(w->endpoints_text);
	free(w->prefix);
	free(w);
}

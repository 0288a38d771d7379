// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "flowcheck"
#include "flowcheck.h"
#include "clock.h"
#include "log.h"
#include "tcpseg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROBE_EVERY_NS (200 * RDB_NS_PER_MS)
#define PROBES_MAX 5
#define CHECK_DEADLINE_NS (1 * RDB_NS_PER_S)
/* Flows that show up later (not in the table) are still checked for
 * this long after the failover. */
#define LAZY_NS (60 * RDB_NS_PER_S)
#define HELD_MAX (8u << 20)
/* A probe's sequence number: this far below the receiver's window. */
#define PROBE_BACK (1u << 30)
#define MIN_BUCKETS 64u

enum fc_state {
	FC_KNOWN,		/* in the table; no failover yet */
	FC_PROBING,
	FC_CONSISTENT,
	FC_RESET,
	FC_UNANSWERED,
};

struct fc_frame {
	struct fc_frame *next;
	struct fc_flow *flow;		/* NULL: not a checked flow's */
	size_t len;
	uint8_t data[];
};

struct fc_flow {
	struct rdb_flow_rec r;		/* key, MACs; snd_ref if from_table */
	struct fc_flow *hnext, *anext, *aprev;
	bool from_table;
	enum fc_state st;
	bool c_ans, c_ack_ok, c_sack, c_dead;	/* the client's answer */
	uint32_t c_seq, c_ack, c_sack_max;
	bool g_ans, g_ack_ok, g_dead;		/* the guest's */
	uint32_t g_seq, g_ack;
	bool c_ref, g_ref;		/* a sequence to probe below is known */
	uint32_t c_ref_seq, g_ref_seq;	/* probe the client / guest below */
	unsigned probes;
	uint64_t next_probe_ns, deadline_ns;
	struct fc_frame *out_head, *out_tail;	/* guest's, held */
	struct fc_frame *in_head, *in_tail;	/* client's, held */
};

/* ---- the table ---- */

static uint32_t hash_key(const struct rdb_flowkey *k)
{
	uint32_t h = 2166136261u;
	size_t n = k->family == 4 ? 4 : 16;

#define MIX(b) (h = (h ^ (uint8_t)(b)) * 16777619u)
	MIX(k->family);
	for (size_t i = 0; i < n; i++) {
		MIX(k->guest_ip[i]);
		MIX(k->peer_ip[i]);
	}
	MIX(k->guest_port);
	MIX(k->guest_port >> 8);
	MIX(k->peer_port);
	MIX(k->peer_port >> 8);
#undef MIX
	return h;
}

static bool key_eq(const struct rdb_flowkey *a, const struct rdb_flowkey *b)
{
	size_t n = a->family == 4 ? 4 : 16;

	return a->family == b->family && a->guest_port == b->guest_port &&
	       a->peer_port == b->peer_port &&
	       !memcmp(a->guest_ip, b->guest_ip, n) &&
	       !memcmp(a->peer_ip, b->peer_ip, n);
}

int rdb_flowcheck_init(struct rdb_flowcheck *fc, const char *vm,
		       uint32_t max_flows)
{
	memset(fc, 0, sizeof(*fc));
	snprintf(fc->vm, sizeof(fc->vm), "%s", vm);
	fc->max_flows = max_flows ? max_flows : 65536;
	return 0;
}

static struct fc_flow *lookup(struct rdb_flowcheck *fc, const struct rdb_flowkey *k)
{
	struct fc_flow *f;

	if (!fc->nbuckets)
		return NULL;
	for (f = fc->buckets[hash_key(k) & (fc->nbuckets - 1)]; f; f = f->hnext)
		if (key_eq(&f->r.key, k))
			return f;
	return NULL;
}

static int grow(struct rdb_flowcheck *fc)
{
	uint32_t n = fc->nbuckets ? fc->nbuckets * 2 : MIN_BUCKETS;
	struct fc_flow **b = calloc(n, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (uint32_t i = 0; i < fc->nbuckets; i++) {
		struct fc_flow *f = fc->buckets[i], *next;

		for (; f; f = next) {
			uint32_t h = hash_key(&f->r.key) & (n - 1);

			next = f->hnext;
			f->hnext = b[h];
			b[h] = f;
		}
	}
	free(fc->buckets);
	fc->buckets = b;
	fc->nbuckets = n;
	return 0;
}

static struct fc_flow *add(struct rdb_flowcheck *fc, const struct rdb_flowkey *k)
{
	struct fc_flow *f;
	uint32_t h;

	if (fc->nflows >= fc->max_flows)
		return NULL;
	if (fc->nflows >= fc->nbuckets && grow(fc) < 0 && !fc->nbuckets)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->r.key = *k;
	h = hash_key(k) & (fc->nbuckets - 1);
	f->hnext = fc->buckets[h];
	fc->buckets[h] = f;
	f->anext = fc->all;
	if (fc->all)
		fc->all->aprev = f;
	fc->all = f;
	fc->nflows++;
	return f;
}

static void free_frames(struct rdb_flowcheck *fc, struct fc_frame *q)
{
	while (q) {
		struct fc_frame *n = q->next;

		fc->held_bytes -= q->len;
		free(q);
		q = n;
	}
}

static void forget(struct rdb_flowcheck *fc, struct fc_flow *f)
{
	struct fc_flow **pp = &fc->buckets[hash_key(&f->r.key) & (fc->nbuckets - 1)];

	while (*pp && *pp != f)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = f->hnext;
	if (f->aprev)
		f->aprev->anext = f->anext;
	else
		fc->all = f->anext;
	if (f->anext)
		f->anext->aprev = f->aprev;
	free_frames(fc, f->out_head);
	free_frames(fc, f->in_head);
	fc->nflows--;
	free(f);
}

void rdb_flowcheck_apply(struct rdb_flowcheck *fc, const struct rdb_flow_rec *r)
{
	struct fc_flow *f = lookup(fc, &r->key);

	if (fc->started)
		return;		/* the table is what the failover found */
	if (r->op == RDB_FLOW_REMOVE) {
		if (f)
			forget(fc, f);
		return;
	}
	if (!f)
		f = add(fc, &r->key);
	if (!f)
		return;		/* full: such a flow is checked when it shows */
	f->r = *r;
	f->from_table = true;
	f->st = FC_KNOWN;
	memcpy(fc->guest_mac, r->guest_mac, 6);
	fc->have_guest_mac = true;
}

uint32_t rdb_flowcheck_flows(const struct rdb_flowcheck *fc)
{
	return fc->nflows;
}

void rdb_flowcheck_dispose(struct rdb_flowcheck *fc)
{
	while (fc->all)
		forget(fc, fc->all);
	free_frames(fc, fc->fence_head);
	free(fc->buckets);
	fc->buckets = NULL;
	fc->fence_head = fc->fence_tail = NULL;
	fc->nbuckets = fc->nflows = 0;
}

/* ---- frames we make ---- */

/* The flow's two ends: from the guest (to_client) or from the client. */
static void ends(const struct fc_flow *f, bool from_guest, struct rdb_tcp_ends *e)
{
	const struct rdb_flow_rec *r = &f->r;

	memset(e, 0, sizeof(*e));
	e->family = r->key.family;
	e->vlan = r->vlan;
	e->vlan_tci = r->vlan_tci;
	if (from_guest) {
		memcpy(e->src_mac, r->guest_mac, 6);
		memcpy(e->dst_mac, r->peer_mac, 6);
		memcpy(e->src_ip, r->key.guest_ip, 16);
		memcpy(e->dst_ip, r->key.peer_ip, 16);
		e->sport = r->key.guest_port;
		e->dport = r->key.peer_port;
	} else {
		memcpy(e->src_mac, r->peer_mac, 6);
		memcpy(e->dst_mac, r->guest_mac, 6);
		memcpy(e->src_ip, r->key.peer_ip, 16);
		memcpy(e->dst_ip, r->key.guest_ip, 16);
		e->sport = r->key.peer_port;
		e->dport = r->key.guest_port;
	}
}

static void send_seg(struct rdb_flowcheck *fc, const struct fc_flow *f,
		     bool to_client, uint32_t seq, uint32_t ack, uint8_t flags,
		     size_t plen)
{
	static const uint8_t zero[1];
	struct rdb_tcp_ends e;
	uint8_t buf[128];
	size_t n;

	ends(f, to_client, &e);
	n = rdb_tcpseg_build(buf, sizeof(buf), &e, seq, ack, flags, 512, zero, plen);
	if (!n)
		return;
	if (to_client)
		fc->ops.to_wire(fc->ops.opaque, buf, n);
	else
		fc->ops.to_guest(fc->ops.opaque, buf, n);
}

/* One byte far below each end's window: TCP answers with an ACK. */
static void probe(struct rdb_flowcheck *fc, struct fc_flow *f, uint64_t now)
{
	if (!f->c_ans && f->c_ref) {
		send_seg(fc, f, true, f->c_ref_seq - PROBE_BACK, f->r.rcv_ref,
			 RDB_TCP_ACK, 1);
		fc->st.probes++;
	}
	if (!f->g_ans && !f->g_dead && f->g_ref) {
		send_seg(fc, f, false, f->g_ref_seq - PROBE_BACK, f->r.snd_ref,
			 RDB_TCP_ACK, 1);
		fc->st.probes++;
	}
	f->probes++;
	f->next_probe_ns = now + PROBE_EVERY_NS;
}

static void flow_str(const struct fc_flow *f, char *out, size_t len)
{
	char g[64], p[64];

	rdb_tcp_addr_str(f->r.key.family, f->r.key.guest_ip, f->r.key.guest_port,
			 g, sizeof(g));
	rdb_tcp_addr_str(f->r.key.family, f->r.key.peer_ip, f->r.key.peer_port,
			 p, sizeof(p));
	snprintf(out, len, "%s <-> %s", g, p);
}

/* ---- frames passing ---- */

static int enqueue(struct rdb_flowcheck *fc, struct fc_frame **head,
		   struct fc_frame **tail, struct fc_flow *f,
		   const uint8_t *frame, size_t len)
{
	struct fc_frame *q;

	if (fc->held_bytes + len > HELD_MAX || !(q = malloc(sizeof(*q) + len))) {
		fc->st.dropped++;
		return -ENOBUFS;
	}
	q->next = NULL;
	q->flow = f;
	q->len = len;
	memcpy(q->data, frame, len);
	if (*tail)
		(*tail)->next = q;
	else
		*head = q;
	*tail = q;
	fc->held_bytes += len;
	return 0;
}

static bool fenced(const struct rdb_flowcheck *fc)
{
	return fc->fence;
}

/* The client's frame goes to the guest now, or waits for the fence. */
static void client_in(struct rdb_flowcheck *fc, const uint8_t *frame, size_t len)
{
	if (fenced(fc)) {
		if (enqueue(fc, &fc->fence_head, &fc->fence_tail, NULL, frame, len) == 0)
			fc->st.held_in++;
	} else {
		fc->ops.to_guest(fc->ops.opaque, frame, len);
	}
}

static void flush_out(struct rdb_flowcheck *fc, struct fc_flow *f)
{
	struct fc_frame *q = f->out_head;

	f->out_head = f->out_tail = NULL;
	while (q) {
		struct fc_frame *n = q->next;

		fc->ops.to_wire(fc->ops.opaque, q->data, q->len);
		fc->held_bytes -= q->len;
		free(q);
		q = n;
	}
}

static void flush_in(struct rdb_flowcheck *fc, struct fc_flow *f)
{
	struct fc_frame *q = f->in_head;

	f->in_head = f->in_tail = NULL;
	while (q) {
		struct fc_frame *n = q->next;

		fc->held_bytes -= q->len;
		client_in(fc, q->data, q->len);
		free(q);
		q = n;
	}
}

static void ended(struct rdb_flowcheck *fc, struct fc_flow *f, enum fc_state st,
		  uint64_t now)
{
	if (f->st == FC_PROBING && fc->probing)
		fc->probing--;
	f->st = st;
	fc->st.checked++;
	fc->st.check_ns = now - fc->start_ns;
}

static void consistent(struct rdb_flowcheck *fc, struct fc_flow *f, uint64_t now)
{
	ended(fc, f, FC_CONSISTENT, now);
	fc->st.consistent++;
	flush_out(fc, f);
	flush_in(fc, f);
}

static void reset_both(struct rdb_flowcheck *fc, struct fc_flow *f,
		       uint64_t now, const char *why)
{
	char name[160];

	if (f->c_ans && f->c_ack_ok && !f->c_dead)
		send_seg(fc, f, true, f->c_ack, 0, RDB_TCP_RST, 0);
	if (f->g_ack_ok && !f->g_dead)
		send_seg(fc, f, false, f->g_ack, 0, RDB_TCP_RST, 0);
	free_frames(fc, f->out_head);
	free_frames(fc, f->in_head);
	f->out_head = f->out_tail = f->in_head = f->in_tail = NULL;
	ended(fc, f, FC_RESET, now);
	fc->st.reset++;
	flow_str(f, name, sizeof(name));
	LOGVM(INFO, fc->vm, "flow %s reset at both ends after the failover: %s",
	      name, why);
}

/* Decides what can be decided about f now. */
static void judge(struct rdb_flowcheck *fc, struct fc_flow *f, uint64_t now)
{
	uint32_t ref;
	char why[160];

	if (f->st != FC_PROBING)
		return;
	if (f->c_dead && (f->g_ack_ok || f->g_dead)) {
		reset_both(fc, f, now, "the client no longer has the connection");
		return;
	}
	if (f->g_dead && f->c_ans) {
		reset_both(fc, f, now, "the restored guest does not have the connection");
		return;
	}
	if (!f->c_ans || f->c_dead || f->g_dead)
		return;
	if (f->from_table)
		ref = f->r.snd_ref;
	else if (f->g_ans)
		ref = f->g_seq;
	else
		return;
	if ((f->c_ack_ok && rdb_seq_after(f->c_ack, ref)) ||
	    (f->c_sack && rdb_seq_after(f->c_sack_max, ref))) {
		uint32_t beyond = (f->c_ack_ok && rdb_seq_after(f->c_ack, ref) ?
				   f->c_ack : f->c_sack_max) - ref;

		if (!f->g_ack_ok)
			return;		/* the guest's RCV.NXT: its answer */
		snprintf(why, sizeof(why), "the client had seen %u bytes the "
			 "restored guest never sent", beyond);
		reset_both(fc, f, now, why);
		return;
	}
	consistent(fc, f, now);
}

void rdb_flowcheck_start(struct rdb_flowcheck *fc,
			 const struct rdb_flowcheck_ops *ops, bool fence,
			 uint64_t fence_ns, uint64_t now)
{
	fc->ops = *ops;
	fc->started = true;
	fc->start_ns = now;
	fc->lazy_until_ns = now + LAZY_NS;
	fc->fence = fence;
	fc->fence_ns = fence_ns;
	/* (until the guest runs, nothing is due: see guest_running) */
	fc->fence_deadline_ns = UINT64_MAX;
	for (struct fc_flow *f = fc->all; f; f = f->anext) {
		if (f->st != FC_KNOWN)
			continue;
		f->st = FC_PROBING;
		fc->probing++;
		f->deadline_ns = UINT64_MAX;
		f->next_probe_ns = UINT64_MAX;
		f->c_ref = true;
		f->c_ref_seq = f->r.snd_ref;
		f->g_ref = f->r.have_ack;
		f->g_ref_seq = f->r.rcv_ref;
	}
	LOGVM(INFO, fc->vm, "checking %u TCP flows after the failover%s",
	      fc->nflows, fence ? "; clients' input fenced until the guest "
	      "acknowledges the failover event" : "");
}

void rdb_flowcheck_guest_running(struct rdb_flowcheck *fc, uint64_t now)
{
	if (!fc->started)
		return;
	fc->fence_deadline_ns = now + fc->fence_ns;
	for (struct fc_flow *f = fc->all; f; f = f->anext) {
		if (f->st != FC_PROBING || f->deadline_ns != UINT64_MAX)
			continue;
		f->deadline_ns = now + CHECK_DEADLINE_NS;
		probe(fc, f, now);
	}
}

/* A flow that shows up after the failover, not in the table. */
static struct fc_flow *lazy(struct rdb_flowcheck *fc, const struct rdb_tcpseg *s,
			    bool from_guest, uint64_t now)
{
	struct rdb_flowkey k = { .family = s->ends.family };
	struct fc_flow *f;

	if (now > fc->lazy_until_ns)
		return NULL;
	/* flooded unicast for another host on this segment is not ours */
	if (!from_guest && fc->have_guest_mac &&
	    memcmp(s->ends.dst_mac, fc->guest_mac, 6) != 0)
		return NULL;
	if (from_guest) {
		memcpy(k.guest_ip, s->ends.src_ip, 16);
		memcpy(k.peer_ip, s->ends.dst_ip, 16);
		k.guest_port = s->ends.sport;
		k.peer_port = s->ends.dport;
	} else {
		memcpy(k.guest_ip, s->ends.dst_ip, 16);
		memcpy(k.peer_ip, s->ends.src_ip, 16);
		k.guest_port = s->ends.dport;
		k.peer_port = s->ends.sport;
	}
	f = add(fc, &k);
	if (!f)
		return NULL;
	f->r.op = RDB_FLOW_UPSERT;
	f->r.vlan = s->ends.vlan;
	f->r.vlan_tci = s->ends.vlan_tci;
	memcpy(f->r.guest_mac, from_guest ? s->ends.src_mac : s->ends.dst_mac, 6);
	memcpy(f->r.peer_mac, from_guest ? s->ends.dst_mac : s->ends.src_mac, 6);
	if (s->flags & RDB_TCP_SYN) {
		/* a new connection: nothing to check */
		f->st = FC_CONSISTENT;
		return f;
	}
	f->st = FC_PROBING;
	fc->probing++;
	f->deadline_ns = now + CHECK_DEADLINE_NS;
	if (from_guest) {
		f->c_ref = true;
		f->c_ref_seq = s->seq;
		if (s->flags & RDB_TCP_ACK) {
			f->g_ref = true;
			f->g_ref_seq = s->ack;
		}
	} else {
		f->g_ref = true;
		f->g_ref_seq = s->seq;
		if (s->flags & RDB_TCP_ACK) {
			f->c_ref = true;
			f->c_ref_seq = s->ack;
		}
	}
	f->r.snd_ref = f->c_ref_seq;
	f->r.rcv_ref = f->g_ref_seq;
	return f;
}

bool rdb_flowcheck_from_guest(struct rdb_flowcheck *fc, const uint8_t *frame,
			      size_t len, uint64_t now)
{
	struct rdb_tcpseg s;
	struct rdb_flowkey k = { 0 };
	struct fc_flow *f;
	bool new_flow = false;

	if (!fc->started || rdb_tcpseg_parse(frame, len, &s) != 1)
		return true;
	if (!fc->have_guest_mac) {
		memcpy(fc->guest_mac, s.ends.src_mac, 6);
		fc->have_guest_mac = true;
	}
	k.family = s.ends.family;
	memcpy(k.guest_ip, s.ends.src_ip, 16);
	memcpy(k.peer_ip, s.ends.dst_ip, 16);
	k.guest_port = s.ends.sport;
	k.peer_port = s.ends.dport;
	f = lookup(fc, &k);
	if (!f) {
		f = lazy(fc, &s, true, now);
		new_flow = f != NULL;
	}
	if (!f || f->st != FC_PROBING) {
		if (f && f->st == FC_RESET && !(s.flags & RDB_TCP_SYN))
			return false;	/* the guest learns of the reset soon */
		return true;
	}
	if (new_flow)
		probe(fc, f, now);
	/* The guest's RCV.NXT does not move while the clients' input to it
	 * is held: any frame of it says what it is. */
	if (s.flags & RDB_TCP_ACK) {
		f->g_ack = s.ack;
		f->g_ack_ok = true;
	}
	if (s.flags & RDB_TCP_RST) {
		f->g_dead = true;
		judge(fc, f, now);
		return false;
	}
	if (!f->g_ans && !new_flow && s.payload_len == 0 &&
	    !(s.flags & (RDB_TCP_SYN | RDB_TCP_FIN)) && (s.flags & RDB_TCP_ACK)) {
		/* its answer to our probe: taken, not passed on */
		f->g_ans = true;
		f->g_seq = s.seq;
		judge(fc, f, now);
		return false;
	}
	if (enqueue(fc, &f->out_head, &f->out_tail, f, frame, len) == 0)
		fc->st.held_out++;
	judge(fc, f, now);
	return false;
}

bool rdb_flowcheck_from_wire(struct rdb_flowcheck *fc, const uint8_t *frame,
			     size_t len, uint64_t now)
{
	struct rdb_tcpseg s;
	struct rdb_flowkey k = { 0 };
	struct fc_flow *f;
	bool new_flow = false;

	if (!fc->started || rdb_tcpseg_parse(frame, len, &s) != 1)
		return true;
	k.family = s.ends.family;
	memcpy(k.guest_ip, s.ends.dst_ip, 16);
	memcpy(k.peer_ip, s.ends.src_ip, 16);
	k.guest_port = s.ends.dport;
	k.peer_port = s.ends.sport;
	f = lookup(fc, &k);
	if (!f) {
		f = lazy(fc, &s, false, now);
		new_flow = f != NULL;
	}
	if (!f || f->st == FC_CONSISTENT || f->st == FC_UNANSWERED) {
		client_in(fc, frame, len);
		return false;
	}
	if (f->st == FC_RESET) {
		/* the connection is gone at both ends; a SYN is a new one */
		if (s.flags & RDB_TCP_SYN) {
			f->st = FC_CONSISTENT;
			client_in(fc, frame, len);
		}
		return false;
	}
	/* PROBING: what the client says is its answer */
	if (!f->c_ans) {
		f->c_ans = true;
		f->c_seq = s.seq;
		if (s.flags & RDB_TCP_RST) {
			f->c_dead = true;
		} else if (s.flags & RDB_TCP_ACK) {
			f->c_ack = s.ack;
			f->c_ack_ok = true;
		}
		for (unsigned i = 0; i < s.nsack; i++)
			if (!f->c_sack || rdb_seq_after(s.sack[i][1], f->c_sack_max)) {
				f->c_sack = true;
				f->c_sack_max = s.sack[i][1];
			}
		/* a D-SACK for our own probe byte lies below the ACK */
		if (f->c_sack && f->c_ack_ok && !rdb_seq_after(f->c_sack_max, f->c_ack))
			f->c_sack = false;
	}
	if (new_flow)
		probe(fc, f, now);
	if (!(s.flags & RDB_TCP_RST) &&
	    enqueue(fc, &f->in_head, &f->in_tail, f, frame, len) == 0)
		fc->st.held_in++;
	judge(fc, f, now);
	return false;
}

bool rdb_flowcheck_pending(const struct rdb_flowcheck *fc)
{
	return fc->started && (fc->probing || fc->fence);
}

void rdb_flowcheck_lift_fence(struct rdb_flowcheck *fc, uint64_t now)
{
	struct fc_frame *q;

	if (!fc->fence)
		return;
	fc->fence = false;
	fc->st.fence_ns = now - fc->start_ns;
	q = fc->fence_head;
	fc->fence_head = fc->fence_tail = NULL;
	while (q) {
		struct fc_frame *n = q->next;

		fc->ops.to_guest(fc->ops.opaque, q->data, q->len);
		fc->held_bytes -= q->len;
		free(q);
		q = n;
	}
}

uint64_t rdb_flowcheck_tick(struct rdb_flowcheck *fc, uint64_t now)
{
	uint64_t next = 0;

	if (!fc->started)
		return 0;
	if (fc->fence && now >= fc->fence_deadline_ns) {
		fc->st.fence_timed_out = true;
		LOGVM(WARN, fc->vm, "the guest did not acknowledge the failover "
		      "event in %llu ms: clients' input let through (is "
		      "remusdb-eventd running in the guest?)",
		      (unsigned long long)((now - fc->start_ns) / RDB_NS_PER_MS));
		rdb_flowcheck_lift_fence(fc, now);
	}
	for (struct fc_flow *f = fc->all; f; f = f->anext) {
		if (f->st != FC_PROBING)
			continue;
		if (now >= f->deadline_ns) {
			if (f->c_ans && !f->c_dead && !f->g_dead && f->from_table &&
			    !f->g_ack_ok && f->r.have_ack) {
				/* judged inconsistent, the guest silent: its
				 * RCV.NXT as of the checkpoint will do */
				f->g_ack = f->r.rcv_ref;
				f->g_ack_ok = true;
				judge(fc, f, now);
			}
			if (f->st == FC_PROBING) {
				char name[160];

				flow_str(f, name, sizeof(name));
				LOGVM(INFO, fc->vm, "flow %s: %s did not answer "
				      "within %llu ms; left as it is", name,
				      f->c_ans ? "the guest" : "the client",
				      (unsigned long long)(CHECK_DEADLINE_NS /
							   RDB_NS_PER_MS));
				ended(fc, f, FC_UNANSWERED, now);
				fc->st.unanswered++;
				flush_out(fc, f);
				flush_in(fc, f);
			}
			continue;
		}
		if (now >= f->next_probe_ns && f->probes < PROBES_MAX)
			probe(fc, f, now);
		{
			uint64_t when = f->deadline_ns - now;

			if (f->probes < PROBES_MAX && f->next_probe_ns - now < when)
				when = f->next_probe_ns - now;
			if (!next || when < next)
				next = when ? when : 1;
		}
	}
	if (fc->fence) {
		uint64_t d = fc->fence_deadline_ns - now;

		if (!next || d < next)
			next = d;
	}
	return next;
}

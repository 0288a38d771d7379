// SPDX-License-Identifier: GPL-2.0-only
/*
 * Held frames are nodes on up to two lists:
 *   - their flow's queue (blocking nodes: marked, behind, synack), in
 *     arrival order: only the head may leave;
 *   - the commit list (nodes that need their epoch committed: every
 *     marked, synack and ack node, and a behind node that is one of
 *     those itself), in arrival order, so its epochs never fall.
 * Release walks the commit list while its head's epoch is committed and
 * drains that node's flow from the head as far as it may go.  A behind
 * node that needs no commit is on its flow's queue only and leaves with
 * the drain that reaches it.
 */
#include "flowbuf.h"
#include "clock.h"
#include "tcpseg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct rdb_flow {
	struct rdb_flowkey key;
	struct rdb_flow *hnext;			/* hash chain */
	struct rdb_flow *lru_prev, *lru_next;
	struct rdb_flow *dirty_next;
	bool dirty, opaque;
	struct rdb_held *qhead, *qtail;		/* blocking nodes */
	uint32_t nheld;				/* nodes pointing here */
	uint64_t prod;				/* guest frames numbered so far */
	uint64_t max_sent_prod;			/* newest of them that left */
	bool have_snd, have_ack, have_ack_out;
	uint32_t snd_hi;			/* highest sequence + 1 seen */
	uint32_t ack_last;			/* latest ACK number seen */
	uint32_t ack_out;			/* highest ACK number that left */
	bool guest_fin, peer_fin, reset;
	bool vlan;
	uint16_t vlan_tci;
	uint8_t guest_mac[6], peer_mac[6];
};

enum held_kind { H_MARKED, H_BEHIND, H_SYNACK, H_ACK };

struct rdb_held {
	struct rdb_held *cprev, *cnext;		/* commit list */
	struct rdb_held *fnext;			/* flow queue */
	struct rdb_flow *flow;
	uint64_t epoch, held_at_ns, prod;
	uint32_t len, ack;
	bool needs_commit, blocking, has_ack;
	uint8_t data[];
};

#define MIN_BUCKETS 64u

int rdb_flowbuf_init(struct rdb_flowbuf *fb, size_t max_bytes, uint32_t max_flows)
{
	memset(fb, 0, sizeof(*fb));
	fb->max_bytes = max_bytes ? max_bytes : RDB_NETBUF_DEFAULT_MAX;
	fb->max_flows = max_flows ? max_flows : RDB_FLOWBUF_DEFAULT_FLOWS;
	return 0;
}

/* ---- the flow table ---- */

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

static struct rdb_flow *lookup(struct rdb_flowbuf *fb, const struct rdb_flowkey *k)
{
	struct rdb_flow *f;

	if (!fb->nbuckets)
		return NULL;
	for (f = fb->buckets[hash_key(k) & (fb->nbuckets - 1)]; f; f = f->hnext)
		if (key_eq(&f->key, k))
			return f;
	return NULL;
}

static void lru_unlink(struct rdb_flowbuf *fb, struct rdb_flow *f)
{
	if (f->lru_prev)
		f->lru_prev->lru_next = f->lru_next;
	else
		fb->lru_head = f->lru_next;
	if (f->lru_next)
		f->lru_next->lru_prev = f->lru_prev;
	else
		fb->lru_tail = f->lru_prev;
	f->lru_prev = f->lru_next = NULL;
}

static void lru_front(struct rdb_flowbuf *fb, struct rdb_flow *f)
{
	if (fb->lru_head == f)
		return;
	if (f->lru_prev || f->lru_next || fb->lru_tail == f)
		lru_unlink(fb, f);
	f->lru_next = fb->lru_head;
	if (fb->lru_head)
		fb->lru_head->lru_prev = f;
	fb->lru_head = f;
	if (!fb->lru_tail)
		fb->lru_tail = f;
}

static void mark_dirty(struct rdb_flowbuf *fb, struct rdb_flow *f)
{
	if (f->dirty || f->opaque)
		return;
	f->dirty = true;
	f->dirty_next = fb->dirty;
	fb->dirty = f;
}

static void dirty_unlink(struct rdb_flowbuf *fb, struct rdb_flow *f)
{
	struct rdb_flow **pp;

	if (!f->dirty)
		return;
	for (pp = &fb->dirty; *pp; pp = &(*pp)->dirty_next)
		if (*pp == f) {
			*pp = f->dirty_next;
			break;
		}
	f->dirty = false;
}

static void note_removed(struct rdb_flowbuf *fb, const struct rdb_flowkey *k)
{
	if (fb->nremoved == fb->cap_removed) {
		size_t cap = fb->cap_removed ? fb->cap_removed * 2 : 16;
		struct rdb_flowkey *n = realloc(fb->removed, cap * sizeof(*n));

		if (!n)
			return;	/* the backup keeps a dead flow: probing it is harmless */
		fb->removed = n;
		fb->cap_removed = cap;
	}
	fb->removed[fb->nremoved++] = *k;
}

/* Takes the flow out of the table; nothing may point to it. */
static void flow_remove(struct rdb_flowbuf *fb, struct rdb_flow *f)
{
	struct rdb_flow **pp = &fb->buckets[hash_key(&f->key) & (fb->nbuckets - 1)];

	while (*pp && *pp != f)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = f->hnext;
	lru_unlink(fb, f);
	dirty_unlink(fb, f);
	note_removed(fb, &f->key);
	fb->nflows--;
	free(f);
}

static void maybe_end(struct rdb_flowbuf *fb, struct rdb_flow *f)
{
	if (f->opaque || f->nheld)
		return;
	if (f->reset || (f->guest_fin && f->peer_fin)) {
		fb->st.flows_ended++;
		flow_remove(fb, f);
	}
}

static int grow_table(struct rdb_flowbuf *fb)
{
	uint32_t n = fb->nbuckets ? fb->nbuckets * 2 : MIN_BUCKETS;
	struct rdb_flow **b = calloc(n, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (uint32_t i = 0; i < fb->nbuckets; i++) {
		struct rdb_flow *f = fb->buckets[i], *next;

		for (; f; f = next) {
			uint32_t h = hash_key(&f->key) & (n - 1);

			next = f->hnext;
			f->hnext = b[h];
			b[h] = f;
		}
	}
	free(fb->buckets);
	fb->buckets = b;
	fb->nbuckets = n;
	return 0;
}

/* The least recently active flow with nothing held goes; false if none
 * among the 64 oldest. */
static bool evict_one(struct rdb_flowbuf *fb)
{
	struct rdb_flow *f = fb->lru_tail;

	for (int i = 0; f && i < 64; i++, f = f->lru_prev) {
		if (!f->nheld) {
			fb->st.flows_evicted++;
			flow_remove(fb, f);
			return true;
		}
	}
	return false;
}

static struct rdb_flow *lookup_or_create(struct rdb_flowbuf *fb,
					 const struct rdb_flowkey *k)
{
	struct rdb_flow *f = lookup(fb, k);
	uint32_t h;

	if (f)
		return f;
	if (fb->nflows >= fb->max_flows && !evict_one(fb))
		return NULL;
	if (fb->nflows >= fb->nbuckets && fb->nbuckets < (1u << 24) &&
	    grow_table(fb) < 0 && !fb->nbuckets)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->key = *k;
	h = hash_key(k) & (fb->nbuckets - 1);
	f->hnext = fb->buckets[h];
	fb->buckets[h] = f;
	fb->nflows++;
	fb->st.flows_created++;
	lru_front(fb, f);
	return f;
}

static void key_from(const struct rdb_tcpseg *s, bool from_guest,
		     struct rdb_flowkey *k)
{
	memset(k, 0, sizeof(*k));
	k->family = s->ends.family;
	if (from_guest) {
		memcpy(k->guest_ip, s->ends.src_ip, 16);
		memcpy(k->peer_ip, s->ends.dst_ip, 16);
		k->guest_port = s->ends.sport;
		k->peer_port = s->ends.dport;
	} else {
		memcpy(k->guest_ip, s->ends.dst_ip, 16);
		memcpy(k->peer_ip, s->ends.src_ip, 16);
		k->guest_port = s->ends.dport;
		k->peer_port = s->ends.sport;
	}
}

/* ---- held frames ---- */

static void commit_unlink(struct rdb_flowbuf *fb, struct rdb_held *n)
{
	if (n->cprev)
		n->cprev->cnext = n->cnext;
	else
		fb->commit_head = n->cnext;
	if (n->cnext)
		n->cnext->cprev = n->cprev;
	else
		fb->commit_tail = n->cprev;
	n->cprev = n->cnext = NULL;
}

static void held_free(struct rdb_flowbuf *fb, struct rdb_held *n)
{
	if (n->len)
		fb->frames--;
	fb->bytes -= n->len;
	n->flow->nheld--;
	free(n);
}

static void sent(struct rdb_flow *f, uint64_t prod, bool has_ack, uint32_t ack)
{
	if (prod > f->max_sent_prod)
		f->max_sent_prod = prod;
	if (has_ack && (!f->have_ack_out || rdb_seq_after(ack, f->ack_out))) {
		f->ack_out = ack;
		f->have_ack_out = true;
	}
}

static void hold(struct rdb_flowbuf *fb, struct rdb_flow *f, uint64_t epoch,
		 enum held_kind kind, bool needs_commit, uint64_t prod,
		 const struct rdb_tcpseg *seg, const uint8_t *frame, size_t len)
{
	struct rdb_held *n = NULL;

	if (len > 0 && len <= UINT32_MAX && fb->bytes + len <= fb->max_bytes)
		n = malloc(sizeof(*n) + len);
	if (!n) {
		fb->st.dropped++;
		fb->st.dropped_bytes += len;
		/*
		 * A frame that needed its epoch committed keeps its place in
		 * its flow, empty: the guest's TCP sends those bytes again,
		 * maybe unmarked by then, and the copy must not leave before
		 * the epoch that made them.
		 */
		if (!needs_commit || kind == H_ACK || !(n = malloc(sizeof(*n))))
			return;
		len = 0;
		fb->st.placeholders++;
	}
	memset(n, 0, sizeof(*n));
	n->flow = f;
	n->epoch = epoch;
	n->held_at_ns = rdb_now_ns();
	n->prod = prod;
	n->len = (uint32_t)len;
	n->needs_commit = needs_commit;
	n->blocking = kind != H_ACK;
	if (seg && (seg->flags & RDB_TCP_ACK)) {
		n->has_ack = true;
		n->ack = seg->ack;
	}
	memcpy(n->data, frame, len);
	if (n->blocking) {
		if (f->qtail)
			f->qtail->fnext = n;
		else
			f->qhead = n;
		f->qtail = n;
	}
	if (needs_commit) {
		n->cprev = fb->commit_tail;
		if (fb->commit_tail)
			fb->commit_tail->cnext = n;
		else
			fb->commit_head = n;
		fb->commit_tail = n;
	}
	f->nheld++;
	if (!len)
		return;		/* a place kept: not a frame */
	fb->frames++;
	fb->bytes += len;
	switch (kind) {
	case H_MARKED:
		fb->st.marked_frames++;
		fb->st.marked_bytes += len;
		break;
	case H_BEHIND:
		fb->st.behind_frames++;
		fb->st.behind_bytes += len;
		break;
	case H_SYNACK:
		fb->st.synack_frames++;
		break;
	case H_ACK:
		fb->st.ack_frames++;
		break;
	}
}

static void note_hold_time(struct rdb_flowbuf *fb, const struct rdb_held *n,
			   uint64_t now)
{
	uint64_t held = now > n->held_at_ns ? now - n->held_at_ns : 0;

	if (held > fb->st.last_release_max_hold_ns)
		fb->st.last_release_max_hold_ns = held;
}

/* Sends the flow's queue from its head as far as it may go. */
static uint64_t drain(struct rdb_flowbuf *fb, struct rdb_flow *f, uint64_t upto,
		      rdb_netbuf_sink sink, void *opaque, uint64_t now)
{
	uint64_t out = 0;

	while (f->qhead && (!f->qhead->needs_commit || f->qhead->epoch <= upto)) {
		struct rdb_held *n = f->qhead;

		f->qhead = n->fnext;
		if (!f->qhead)
			f->qtail = NULL;
		if (n->needs_commit)
			commit_unlink(fb, n);
		if (n->len) {		/* (not a place kept for a dropped frame) */
			sink(opaque, n->data, n->len);
			sent(f, n->prod, n->has_ack, n->ack);
			note_hold_time(fb, n, now);
			fb->st.released++;
			fb->st.released_bytes += n->len;
			out++;
		}
		held_free(fb, n);
	}
	return out;
}

/* ---- the guest's frames ---- */

static struct rdb_flow *opaque_flow(struct rdb_flowbuf *fb)
{
	if (!fb->opaque) {
		fb->opaque = calloc(1, sizeof(*fb->opaque));
		if (fb->opaque)
			fb->opaque->opaque = true;
	}
	return fb->opaque;
}

static void send_now(struct rdb_flowbuf *fb, const uint8_t *frame, size_t len,
		     rdb_netbuf_sink sink, void *opaque)
{
	sink(opaque, frame, len);
	fb->st.now_frames++;
	fb->st.now_bytes += len;
}

/* A marked frame no flow can take: it keeps its order among its kind. */
static void hold_opaque(struct rdb_flowbuf *fb, uint64_t epoch,
			const uint8_t *frame, size_t len)
{
	struct rdb_flow *f = opaque_flow(fb);

	if (!f) {
		fb->st.dropped++;
		fb->st.dropped_bytes += len;
		return;
	}
	hold(fb, f, epoch, f->qhead ? H_BEHIND : H_MARKED, true, ++f->prod,
	     NULL, frame, len);
}

void rdb_flowbuf_from_guest(struct rdb_flowbuf *fb, uint64_t epoch, bool marked,
			    const uint8_t *frame, size_t len,
			    rdb_netbuf_sink sink, void *opaque)
{
	struct rdb_tcpseg seg;
	struct rdb_flowkey k;
	struct rdb_flow *f;
	uint32_t slen, end;
	bool newseq, acknew, synack;
	uint64_t prod;

	if (rdb_tcpseg_parse(frame, len, &seg) != 1) {
		if (marked)
			hold_opaque(fb, epoch, frame, len);
		else
			send_now(fb, frame, len, sink, opaque);
		return;
	}
	key_from(&seg, true, &k);
	f = lookup_or_create(fb, &k);
	if (!f) {
		fb->st.untracked++;
		if (marked)
			hold_opaque(fb, epoch, frame, len);
		else
			send_now(fb, frame, len, sink, opaque);
		return;
	}
	lru_front(fb, f);
	prod = ++f->prod;
	slen = rdb_tcpseg_seqlen(&seg);
	end = seg.seq + slen;
	newseq = slen && (!f->have_snd || rdb_seq_after(end, f->snd_hi));
	acknew = (seg.flags & RDB_TCP_ACK) &&
		 (!f->have_ack_out || rdb_seq_after(seg.ack, f->ack_out));
	synack = (seg.flags & (RDB_TCP_SYN | RDB_TCP_ACK)) ==
		 (RDB_TCP_SYN | RDB_TCP_ACK);

	/* What the backup will know of this flow as of this epoch. */
	if (newseq || !f->have_snd) {
		f->snd_hi = end;
		f->have_snd = true;
	}
	if (seg.flags & RDB_TCP_ACK) {
		f->ack_last = seg.ack;
		f->have_ack = true;
	}
	f->vlan = seg.ends.vlan;
	f->vlan_tci = seg.ends.vlan_tci;
	memcpy(f->guest_mac, seg.ends.src_mac, 6);
	memcpy(f->peer_mac, seg.ends.dst_mac, 6);
	if (seg.flags & RDB_TCP_RST)
		f->reset = true;
	if (seg.flags & RDB_TCP_FIN)
		f->guest_fin = true;
	mark_dirty(fb, f);

	if (f->qhead) {
		hold(fb, f, epoch, marked ? H_MARKED : H_BEHIND,
		     marked || synack || (acknew && !newseq &&
					  !(seg.flags & RDB_TCP_RST)),
		     prod, &seg, frame, len);
	} else if (marked) {
		hold(fb, f, epoch, H_MARKED, true, prod, &seg, frame, len);
	} else if (synack) {
		hold(fb, f, epoch, H_SYNACK, true, prod, &seg, frame, len);
	} else if (acknew && !newseq && !(seg.flags & RDB_TCP_RST)) {
		hold(fb, f, epoch, H_ACK, true, prod, &seg, frame, len);
	} else {
		send_now(fb, frame, len, sink, opaque);
		sent(f, prod, seg.flags & RDB_TCP_ACK, seg.ack);
	}
	maybe_end(fb, f);
}

void rdb_flowbuf_from_wire(struct rdb_flowbuf *fb, const uint8_t *frame,
			   size_t len)
{
	struct rdb_tcpseg seg;
	struct rdb_flowkey k;
	struct rdb_flow *f;

	if (rdb_tcpseg_parse(frame, len, &seg) != 1)
		return;
	key_from(&seg, false, &k);
	f = lookup(fb, &k);
	if (!f)
		return;
	lru_front(fb, f);
	if (seg.flags & RDB_TCP_RST)
		f->reset = true;
	if (seg.flags & RDB_TCP_FIN)
		f->peer_fin = true;
	maybe_end(fb, f);
}

uint64_t rdb_flowbuf_release(struct rdb_flowbuf *fb, uint64_t upto,
			     rdb_netbuf_sink sink, void *opaque)
{
	uint64_t now = rdb_now_ns(), out = 0;

	fb->st.last_release_max_hold_ns = 0;
	while (fb->commit_head && fb->commit_head->epoch <= upto) {
		struct rdb_held *n = fb->commit_head;
		struct rdb_flow *f = n->flow;

		if (n->blocking) {
			/* Everything before it in its flow may leave too:
			 * epochs in a flow's queue never fall. */
			out += drain(fb, f, upto, sink, opaque, now);
		} else {
			commit_unlink(fb, n);
			if (f->max_sent_prod > n->prod) {
				/* a later frame of the flow carried a newer ACK */
				fb->st.superseded++;
			} else {
				sink(opaque, n->data, n->len);
				sent(f, n->prod, n->has_ack, n->ack);
				note_hold_time(fb, n, now);
				fb->st.released++;
				fb->st.released_bytes += n->len;
				out++;
			}
			held_free(fb, n);
		}
		maybe_end(fb, f);
	}
	if (fb->st.last_release_max_hold_ns > fb->st.max_hold_ns)
		fb->st.max_hold_ns = fb->st.last_release_max_hold_ns;
	return out;
}

/* Frees f's queue from the first node of an epoch after epoch. */
static uint64_t cut_queue(struct rdb_flowbuf *fb, struct rdb_flow *f,
			  uint64_t epoch)
{
	struct rdb_held **pp = &f->qhead, *keep_tail = NULL;
	uint64_t gone = 0;

	while (*pp && (*pp)->epoch <= epoch) {
		keep_tail = *pp;
		pp = &(*pp)->fnext;
	}
	while (*pp) {
		struct rdb_held *n = *pp;

		*pp = n->fnext;
		if (n->needs_commit)
			commit_unlink(fb, n);
		held_free(fb, n);
		gone++;
	}
	f->qtail = keep_tail;
	return gone;
}

uint64_t rdb_flowbuf_drop_after(struct rdb_flowbuf *fb, uint64_t epoch)
{
	uint64_t gone = 0;
	struct rdb_held *n, *prev;

	for (uint32_t i = 0; i < fb->nbuckets; i++)
		for (struct rdb_flow *f = fb->buckets[i]; f; f = f->hnext)
			if (f->qhead)
				gone += cut_queue(fb, f, epoch);
	if (fb->opaque)
		gone += cut_queue(fb, fb->opaque, epoch);
	/* What is left of a later epoch on the commit list: held acks. */
	for (n = fb->commit_tail; n && n->epoch > epoch; n = prev) {
		prev = n->cprev;
		commit_unlink(fb, n);
		held_free(fb, n);
		gone++;
	}
	fb->st.discarded += gone;
	return gone;
}

static void free_queue(struct rdb_flowbuf *fb, struct rdb_flow *f)
{
	while (f->qhead) {
		struct rdb_held *n = f->qhead;

		f->qhead = n->fnext;
		if (n->needs_commit)
			commit_unlink(fb, n);
		held_free(fb, n);
	}
	f->qtail = NULL;
}

uint64_t rdb_flowbuf_clear(struct rdb_flowbuf *fb)
{
	uint64_t gone = fb->frames;

	for (uint32_t i = 0; i < fb->nbuckets; i++)
		for (struct rdb_flow *f = fb->buckets[i]; f; f = f->hnext)
			free_queue(fb, f);
	if (fb->opaque)
		free_queue(fb, fb->opaque);
	/* the rest: held acks */
	while (fb->commit_head) {
		struct rdb_held *n = fb->commit_head;

		commit_unlink(fb, n);
		held_free(fb, n);
	}
	fb->st.discarded += gone;
	return gone;
}

size_t rdb_flowbuf_take_changes(struct rdb_flowbuf *fb,
				void (*cb)(void *opaque, const struct rdb_flow_rec *r),
				void *opaque)
{
	size_t n = 0;
	struct rdb_flow *f;

	for (size_t i = 0; i < fb->nremoved; i++, n++) {
		struct rdb_flow_rec r = { .op = RDB_FLOW_REMOVE, .key = fb->removed[i] };

		cb(opaque, &r);
	}
	fb->nremoved = 0;
	while ((f = fb->dirty)) {
		struct rdb_flow_rec r = {
			.op = RDB_FLOW_UPSERT,
			.key = f->key,
			.vlan = f->vlan,
			.vlan_tci = f->vlan_tci,
			.snd_ref = f->snd_hi,
			.rcv_ref = f->ack_last,
			.have_ack = f->have_ack,
		};

		memcpy(r.guest_mac, f->guest_mac, 6);
		memcpy(r.peer_mac, f->peer_mac, 6);
		fb->dirty = f->dirty_next;
		f->dirty = false;
		f->dirty_next = NULL;
		cb(opaque, &r);
		n++;
	}
	return n;
}

void rdb_flowbuf_dispose(struct rdb_flowbuf *fb)
{
	rdb_flowbuf_clear(fb);
	for (uint32_t i = 0; i < fb->nbuckets; i++) {
		struct rdb_flow *f = fb->buckets[i], *next;

		for (; f; f = next) {
			next = f->hnext;
			free(f);
		}
	}
	free(fb->buckets);
	free(fb->opaque);
	free(fb->removed);
	fb->buckets = NULL;
	fb->opaque = NULL;
	fb->removed = NULL;
	fb->nbuckets = fb->nflows = 0;
	fb->nremoved = fb->cap_removed = 0;
	fb->lru_head = fb->lru_tail = fb->dirty = NULL;
}

void rdb_flowbuf_forget_flows(struct rdb_flowbuf *fb)
{
	struct rdb_flowbuf_stats st = fb->st;
	size_t max_bytes = fb->max_bytes;
	uint32_t max_flows = fb->max_flows;

	rdb_flowbuf_dispose(fb);
	rdb_flowbuf_init(fb, max_bytes, max_flows);
	fb->st = st;
}

static void ignore_rec(void *opaque, const struct rdb_flow_rec *r)
{
	(void)opaque;
	(void)r;
}

void rdb_flowbuf_forget_changes(struct rdb_flowbuf *fb)
{
	rdb_flowbuf_take_changes(fb, ignore_rec, NULL);
}

uint64_t rdb_flowbuf_frames(const struct rdb_flowbuf *fb)
{
	return fb->frames;
}

uint64_t rdb_flowbuf_bytes(const struct rdb_flowbuf *fb)
{
	return fb->bytes;
}

uint32_t rdb_flowbuf_flows(const struct rdb_flowbuf *fb)
{
	return fb->nflows;
}

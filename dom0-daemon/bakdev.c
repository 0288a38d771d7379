// SPDX-License-Identifier: GPL-2.0-only
/* The backup's device table's loops (bakdev.h). */
#include "bakdev.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

void rdb_bakdev_init(struct rdb_bakdev *dev, const struct rdb_bakdev_ops *ops,
		     unsigned index, const struct rdb_bakdev_host *host)
{
	dev->ops = ops;
	dev->host = host;
	dev->index = index;
	snprintf(dev->id, sizeof(dev->id), "%s%u", ops->kind, index);
}

void rdb_bakdevs_init(struct rdb_bakdevs *t, const struct rdb_bakdev_host *host)
{
	memset(t, 0, sizeof(*t));
	t->host = host;
}

int rdb_bakdevs_kind(struct rdb_bakdevs *t, const struct rdb_bakdev_ops *ops)
{
	if (t->nkinds == RDB_BAKDEV_KINDS)
		return -ENOSPC;
	t->kinds[t->nkinds++] = ops;
	return 0;
}

int rdb_bakdevs_add(struct rdb_bakdevs *t, struct rdb_bakdev *dev)
{
	unsigned k = 0;

	while (k < t->nkinds && t->kinds[k] != dev->ops)
		k++;
	if (k == t->nkinds)
		return -EINVAL;
	if (t->n == RDB_BAKDEV_MAX)
		return -ENOSPC;
	t->v[t->n++] = dev;
	return 0;
}

struct rdb_bakdev *rdb_bakdevs_net(const struct rdb_bakdevs *t, unsigned n)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->to_wire && n-- == 0)
			return t->v[i];
	return NULL;
}

int rdb_bakdevs_restored(const struct rdb_bakdevs *t, json_t *o)
{
	for (unsigned i = 0; i < t->n; i++) {
		const struct rdb_bakdev *d = t->v[i];
		int rc = d->ops->restored ? d->ops->restored(d, o) : 0;

		if (rc < 0)
			return rc;
	}
	return 0;
}

int rdb_bakdevs_record(const struct rdb_bakdevs *t, struct rdb_lineage *l)
{
	for (unsigned i = 0; i < t->n; i++) {
		const struct rdb_bakdev *d = t->v[i];
		int rc = d->ops->record ? d->ops->record(d, l) : 0;

		if (rc < 0)
			return rc;
	}
	return 0;
}

void rdb_bakdevs_recorded(struct rdb_bakdevs *t)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->recorded)
			t->v[i]->ops->recorded(t->v[i]);
}

void rdb_bakdevs_counters(const struct rdb_bakdevs *t, struct rdb_bakdev_sum *s)
{
	memset(s, 0, sizeof(*s));
	s->consistent = true;
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->counters)
			t->v[i]->ops->counters(t->v[i], s);
}

/* The hook at offset hook in the ops (one returning 0 or an error) of
 * every device that has it, in order; the first error stops it. */
static int each_until_error(struct rdb_bakdevs *t, size_t hook)
{
	for (unsigned i = 0; i < t->n; i++) {
		struct rdb_bakdev *d = t->v[i];
		int (*fn)(struct rdb_bakdev *);
		int rc;

		memcpy(&fn, (const char *)d->ops + hook, sizeof(fn));
		rc = fn ? fn(d) : 0;
		if (rc < 0)
			return rc;
	}
	return 0;
}

int rdb_bakdevs_check(struct rdb_bakdevs *t)
{
	return each_until_error(t, offsetof(struct rdb_bakdev_ops, check));
}

int rdb_bakdevs_sync(struct rdb_bakdevs *t)
{
	return each_until_error(t, offsetof(struct rdb_bakdev_ops, sync));
}

int rdb_bakdevs_serve(struct rdb_bakdevs *t)
{
	return each_until_error(t, offsetof(struct rdb_bakdev_ops, serve));
}

int rdb_bakdevs_open(struct rdb_bakdevs *t)
{
	return each_until_error(t, offsetof(struct rdb_bakdev_ops, open));
}

int rdb_bakdevs_fresh(struct rdb_bakdevs *t, char *err, size_t errlen)
{
	for (unsigned i = 0; i < t->n; i++) {
		struct rdb_bakdev *d = t->v[i];
		int rc = d->ops->fresh ? d->ops->fresh(d, err, errlen) : 0;

		if (rc < 0) {
			rdb_bakdevs_forget(t);
			return rc;
		}
	}
	return 0;
}

void rdb_bakdevs_forget(struct rdb_bakdevs *t)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->forget)
			t->v[i]->ops->forget(t->v[i]);
}

void rdb_bakdevs_unserve(struct rdb_bakdevs *t)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->unserve)
			t->v[i]->ops->unserve(t->v[i]);
}

void rdb_bakdevs_rollback(struct rdb_bakdevs *t, uint64_t t0)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->rollback)
			t->v[i]->ops->rollback(t->v[i], t0);
}

void rdb_bakdevs_close(struct rdb_bakdevs *t)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->close)
			t->v[i]->ops->close(t->v[i]);
}

void rdb_bakdevs_restore(const struct rdb_bakdevs *t, struct rdb_bakdev_restore *r)
{
	memset(r, 0, sizeof(*r));
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->restore)
			t->v[i]->ops->restore(t->v[i], r);
}

void rdb_bakdevs_acked(struct rdb_bakdevs *t)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->acked)
			t->v[i]->ops->acked(t->v[i]);
}

bool rdb_bakdevs_pending(const struct rdb_bakdevs *t, char *why, size_t whylen)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->pending &&
		    t->v[i]->ops->pending(t->v[i], why, whylen))
			return true;
	return false;
}

int rdb_bakdevs_hand_over(struct rdb_bakdevs *t, const struct rdb_nic_dst *dst,
			  unsigned ndst, struct rdb_handover *h, char *err,
			  size_t errlen)
{
	for (unsigned i = 0; i < t->n; i++) {
		struct rdb_bakdev *d = t->v[i];
		int rc = d->ops->hand_over ?
			 d->ops->hand_over(d, dst, ndst, h, err, errlen) : 0;

		if (rc < 0) {
			/* those before it, last first */
			while (i-- > 0)
				if (t->v[i]->ops->hand_back)
					t->v[i]->ops->hand_back(t->v[i], dst, ndst);
			return rc;
		}
	}
	return 0;
}

void rdb_bakdevs_poll(struct rdb_bakdevs *t)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->poll)
			t->v[i]->ops->poll(t->v[i]);
}

void rdb_bakdevs_free(struct rdb_bakdevs *t)
{
	for (unsigned i = 0; i < t->n; i++)
		t->v[i]->ops->free(t->v[i]);
	t->n = 0;
}

/* The instances of kind k, in table order. */
static unsigned of_kind(const struct rdb_bakdevs *t, unsigned k,
			struct rdb_bakdev **v)
{
	unsigned n = 0;

	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops == t->kinds[k])
			v[n++] = t->v[i];
	return n;
}

void rdb_bakdevs_running(struct rdb_bakdevs *t)
{
	struct rdb_bakdev *v[RDB_BAKDEV_MAX];

	for (unsigned k = 0; k < t->nkinds; k++)
		if (t->kinds[k]->running)
			t->kinds[k]->running(t->host, v, of_kind(t, k, v));
}

void rdb_bakdevs_release(struct rdb_bakdevs *t, bool ok)
{
	struct rdb_bakdev *v[RDB_BAKDEV_MAX];

	for (unsigned k = 0; k < t->nkinds; k++)
		if (t->kinds[k]->release)
			t->kinds[k]->release(t->host, v, of_kind(t, k, v), ok);
}

uint64_t rdb_bakdevs_tick(struct rdb_bakdevs *t)
{
	struct rdb_bakdev *v[RDB_BAKDEV_MAX];
	uint64_t next = 0;

	for (unsigned k = 0; k < t->nkinds; k++) {
		uint64_t n;

		if (!t->kinds[k]->tick)
			continue;
		n = t->kinds[k]->tick(t->host, v, of_kind(t, k, v));
		if (n && (!next || n < next))
			next = n;
	}
	return next;
}

void rdb_bakdevs_status(const struct rdb_bakdevs *t, json_t *o)
{
	struct rdb_bakdev *v[RDB_BAKDEV_MAX];

	for (unsigned k = 0; k < t->nkinds; k++)
		if (t->kinds[k]->status)
			t->kinds[k]->status(t->host, v, of_kind(t, k, v), o);
}

void rdb_bakdevs_metrics(const struct rdb_bakdevs *t, struct rdb_prom *p)
{
	struct rdb_bakdev *v[RDB_BAKDEV_MAX];

	for (unsigned k = 0; k < t->nkinds; k++)
		if (t->kinds[k]->metrics)
			t->kinds[k]->metrics(t->host, v, of_kind(t, k, v), p);
}

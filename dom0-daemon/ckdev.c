// SPDX-License-Identifier: GPL-2.0-only
/* The checkpoint device table's loops (ckdev.h). */
#include "ckdev.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void rdb_ckdev_init(struct rdb_ckdev *dev, const struct rdb_ckdev_ops *ops,
		    unsigned index, const char *vm, struct rdb_ckpt *ck,
		    const struct rdb_ckdev_host *host, struct rdb_vm_stats *st)
{
	dev->ops = ops;
	dev->host = host;
	dev->ck = ck;
	dev->st = st;
	dev->index = index;
	snprintf(dev->vm, sizeof(dev->vm), "%s", vm);
	snprintf(dev->id, sizeof(dev->id), "%s%u", ops->kind, index);
}

int rdb_ckdevs_add(struct rdb_ckdevs *t, struct rdb_ckdev *dev)
{
	if (t->n == RDB_CKDEV_MAX)
		return -ENOSPC;
	t->v[t->n++] = dev;
	return 0;
}

struct rdb_ckdev *rdb_ckdevs_find(const struct rdb_ckdevs *t,
				  const char *kind, unsigned n)
{
	for (unsigned i = 0; i < t->n; i++)
		if (!strcmp(t->v[i]->ops->kind, kind) && n-- == 0)
			return t->v[i];
	return NULL;
}

unsigned rdb_ckdevs_count(const struct rdb_ckdevs *t, const char *kind)
{
	unsigned k = 0;

	for (unsigned i = 0; i < t->n; i++)
		k += !strcmp(t->v[i]->ops->kind, kind);
	return k;
}

int rdb_ckdevs_start(struct rdb_ckdevs *t, char *err, size_t errlen)
{
	int pending = 0;

	for (unsigned i = 0; i < t->n; i++) {
		struct rdb_ckdev *d = t->v[i];
		int rc = d->ops->start ? d->ops->start(d, err, errlen) : 0;

		if (rc < 0) {
			/* this one and those before it, last first */
			for (unsigned j = i + 1; j-- > 0;)
				if (t->v[j]->ops->stop)
					t->v[j]->ops->stop(t->v[j]);
			return rc;
		}
		pending += rc > 0;
	}
	return pending;
}

int rdb_ckdevs_checkpoint(struct rdb_ckdevs *t, uint64_t epoch)
{
	for (unsigned i = 0; i < t->n; i++) {
		struct rdb_ckdev *d = t->v[i];
		int rc = d->ops->checkpoint ? d->ops->checkpoint(d, epoch) : 0;

		if (rc < 0)
			return rc;
	}
	return 0;
}

void rdb_ckdevs_committed(struct rdb_ckdevs *t, uint64_t epoch)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->committed)
			t->v[i]->ops->committed(t->v[i], epoch);
}

int rdb_ckdevs_peer_msg(struct rdb_ckdevs *t, const char *kind,
			const struct rdb_frame *f)
{
	for (unsigned i = 0; i < t->n; i++) {
		struct rdb_ckdev *d = t->v[i];
		int rc;

		if (!d->ops->peer_msg || strcmp(d->ops->kind, kind))
			continue;
		rc = d->ops->peer_msg(d, f);
		if (rc != 0)
			return rc;
	}
	return 0;
}

void rdb_ckdevs_stop(struct rdb_ckdevs *t)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->stop)
			t->v[i]->ops->stop(t->v[i]);
}

int rdb_ckdevs_unreplicate(struct rdb_ckdevs *t)
{
	int first = 0;

	for (unsigned i = 0; i < t->n; i++) {
		struct rdb_ckdev *d = t->v[i];
		int rc = d->ops->unreplicate ? d->ops->unreplicate(d) : 0;

		if (rc < 0 && first == 0)
			first = rc;
	}
	return first;
}

void rdb_ckdevs_reset(struct rdb_ckdevs *t)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->reset)
			t->v[i]->ops->reset(t->v[i]);
}

bool rdb_ckdevs_in_use(const struct rdb_ckdevs *t)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->in_use && t->v[i]->ops->in_use(t->v[i]))
			return true;
	return false;
}

void rdb_ckdevs_close(struct rdb_ckdevs *t)
{
	for (unsigned i = t->n; i-- > 0;)
		t->v[i]->ops->close(t->v[i]);
	t->n = 0;
}

json_t *rdb_ckdevs_status(const struct rdb_ckdevs *t)
{
	json_t *a = json_array();

	for (unsigned i = 0; a && i < t->n; i++) {
		const struct rdb_ckdev *d = t->v[i];
		json_t *o = json_pack("{s:s, s:s}", "kind", d->ops->kind,
				      "id", d->id);

		if (o && d->ops->status)
			d->ops->status(d, o);
		if (o)
			json_array_append_new(a, o);
	}
	return a;
}

void rdb_ckdevs_metrics(const struct rdb_ckdevs *t, struct rdb_prom *m)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->v[i]->ops->metrics)
			t->v[i]->ops->metrics(t->v[i], m);
}

// SPDX-License-Identifier: GPL-2.0-only
#include "hv.h"
#include "clock.h"

#include <errno.h>
#include <string.h>

extern const struct rdb_hv_ops rdb_hv_qemu_ops;
extern const struct rdb_hv_ops rdb_hv_xen_ops;

static const struct rdb_hv_ops *const backends[] = {
	&rdb_hv_qemu_ops,
	&rdb_hv_xen_ops,
};

const struct rdb_hv_ops *rdb_hv_find(const char *name)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (name && strcmp(backends[i]->name, name) == 0)
			return backends[i];
	return NULL;
}

void rdb_hv_restored_init(struct rdb_hv_restored *r)
{
	memset(r, 0, sizeof(*r));
	rdb_hv_proc_init(&r->proc);
}

int rdb_hv_restored_dispose(const struct rdb_hv_ops *ops,
			    struct rdb_hv_restored *r, bool kill)
{
	bool gone = !r->guest_may_run;

	ops->ctl_close(r->ctl);
	r->ctl = NULL;
	if (kill && r->proc.pid > 0 &&
	    rdb_hv_kill(&r->proc, rdb_now_ns()) != -EBUSY &&
	    ops->restored_reprotect)	/* the process is the guest */
		gone = true;
	if (kill && gone)
		r->guest_may_run = false;
	return !kill || gone ? 0 : -EBUSY;
}

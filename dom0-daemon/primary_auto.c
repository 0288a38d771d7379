// SPDX-License-Identifier: GPL-2.0-only
/*
 * Protecting a VM again on its own after its backup's remusdbd went away.
 *
 * The backup's daemon is restarted (systemctl restart, a package upgrade,
 * Restart=on-failure after a crash): its host closes the replication
 * link, the primary drops protection (the failover decision, as for any
 * loss), and the guest runs on degraded.  Nothing about the VM changed:
 * the operator asked for it protected, and the backup will take a new
 * protection as soon as its new daemon listens.  So the primary protects
 * it again itself, as DRBD reconnects to a peer that comes back:
 *
 *   - only after that cause: the backup's end of the link closed (FIN or
 *     RST, what a dead process's host sends).  Silence (the backup's
 *     host lost, a cut link), a backup that gave up (ERROR), a local
 *     failure or the operator's unprotect leave the VM degraded for the
 *     operator, as before;
 *   - once the decision is won (the VM degraded) and nothing else is
 *     under way; a fenced or failed VM is not protected;
 *   - retried 1 s, 2 s, 4 s, ... up to every 30 s, for auto_reprotect_s
 *     from the drop; the backup refusing (its answer to HELLO) ends it;
 *   - a protection like the operator's protect: a new generation
 *     registered at the witness, the whole state copied again.
 *
 * Every attempt, failure and the end are logged with the VM's name and
 * counted (remusdb_auto_reprotects_total).  Between attempts the VM is
 * degraded; status shows protect_pending and auto_reprotect.
 */
#define RDB_COMPONENT "primary"
#include "primary_int.h"

#include <errno.h>
#include <string.h>

#define AUTO_FIRST_NS RDB_NS_PER_S
#define AUTO_MAX_NS (30 * RDB_NS_PER_S)

static uint64_t backoff_ns(unsigned attempts)
{
	uint64_t ns = AUTO_FIRST_NS;

	for (unsigned i = 1; i < attempts && ns < AUTO_MAX_NS; i++)
		ns *= 2;
	return ns < AUTO_MAX_NS ? ns : AUTO_MAX_NS;
}

static double since_s(const struct rdb_primary *p, uint64_t now)
{
	return (double)(now - p->arp.since_ns) / RDB_NS_PER_S;
}

void rdb_pri_auto_arm(struct rdb_primary *p, const char *why)
{
	struct rdb_pri_auto *a = &p->arp;
	uint64_t now = rdb_now_ns();

	if (!p->d->cfg.auto_reprotect_s) {
		if (a->pending)
			rdb_pri_auto_cancel(p, "auto_reprotect_s is 0");
		return;
	}
	/* a new window, unless this drop ended one of its attempts */
	if (!a->pending) {
		a->pending = true;
		a->attempts = 0;
		a->since_ns = now;
		snprintf(a->why, sizeof(a->why), "%s", why);
		LOGVM(INFO, p->vm->name, "the backup's remusdbd went away (%s): "
		      "protecting the VM to it again on its own once it runs "
		      "degraded, for up to %u s (auto_reprotect_s)", why,
		      p->d->cfg.auto_reprotect_s);
	} else if (a->attempting) {
		a->failed++;
		LOGVM(WARN, p->vm->name, "re-protect attempt %u ended: %s",
		      a->attempts, why);
	}
	a->attempting = false;
	a->next_ns = now + backoff_ns(a->attempts ? a->attempts : 1);
}

void rdb_pri_auto_cancel(struct rdb_primary *p, const char *why)
{
	struct rdb_pri_auto *a = &p->arp;

	if (!a->pending)
		return;
	LOGVM(INFO, p->vm->name, "not protecting it again on its own any more "
	      "(%u attempt(s)): %s", a->attempts, why);
	a->pending = a->attempting = false;
}

void rdb_pri_auto_protected(struct rdb_primary *p)
{
	struct rdb_pri_auto *a = &p->arp;

	if (!a->pending)
		return;
	if (a->attempting) {
		a->protected++;
		LOGVM(INFO, p->vm->name, "protected again on its own, %.1f s "
		      "after the backup's remusdbd went away (%u attempt(s))",
		      since_s(p, rdb_now_ns()), a->attempts);
	} else {
		LOGVM(INFO, p->vm->name, "protected again by the operator's "
		      "protect, %.1f s after the backup's remusdbd went away: "
		      "no more attempts on its own", since_s(p, rdb_now_ns()));
	}
	a->pending = a->attempting = false;
}

bool rdb_pri_auto_failed(struct rdb_primary *p, const char *err,
			 double *next_in_s)
{
	struct rdb_pri_auto *a = &p->arp;
	uint64_t now = rdb_now_ns();
	bool refused = a->refused;

	a->refused = false;
	if (!a->pending || !a->attempting)
		return false;
	a->attempting = false;
	a->failed++;
	if (refused) {
		a->refusals++;
		a->pending = false;
		LOGVM(ERROR, p->vm->name, "re-protect attempt %u: the backup "
		      "refused it (%s); not trying again on its own: protect "
		      "it by hand once the backup can take it", a->attempts, err);
		return false;
	}
	a->next_ns = now + backoff_ns(a->attempts + 1);
	if (a->next_ns - a->since_ns > (uint64_t)p->d->cfg.auto_reprotect_s *
	    RDB_NS_PER_S) {
		a->gave_up++;
		a->pending = false;
		LOGVM(ERROR, p->vm->name, "re-protect attempt %u failed (%s); "
		      "gave up protecting it again on its own after %.0f s "
		      "(auto_reprotect_s = %u): the VM runs unprotected until "
		      "`remusdbctl protect`", a->attempts, err, since_s(p, now),
		      p->d->cfg.auto_reprotect_s);
		return false;
	}
	*next_in_s = (double)(a->next_ns - now) / RDB_NS_PER_S;
	LOGVM(WARN, p->vm->name, "re-protect attempt %u failed: %s; next in "
	      "%.0f s", a->attempts, err, *next_in_s);
	return true;
}

void rdb_primary_auto_tick(struct rdb_vm *vm)
{
	struct rdb_primary *p = vm->pri;
	struct rdb_pri_auto *a = p ? &p->arp : NULL;
	char err[512] = "";
	uint64_t now;
	int rc;

	if (!a || !a->pending || a->attempting)
		return;
	now = rdb_now_ns();
	if (now < a->next_ns)
		return;
	/* the decision first; then nothing else may be under way (an
	 * operator's protect: it ends the window when it commits) */
	if (rdb_pri_deciding(p) || rdb_pri_registering(p) || p->ck.active ||
	    p->readopt_protect)
		return;
	if (rdb_pri_fenced(p) || rdb_pri_owner_held(p) ||
	    (vm->state != RDB_VM_DEGRADED && vm->state != RDB_VM_UNPROTECTED)) {
		char why[300];

		snprintf(why, sizeof(why), "the VM is %s (%s)",
			 rdb_vm_state_name(vm->state), vm->state_reason);
		rdb_pri_auto_cancel(p, why);
		return;
	}
	a->attempts++;
	a->attempting = true;
	LOGVM(INFO, vm->name, "re-protect attempt %u, %.1f s after the backup's "
	      "remusdbd went away: protecting to %s again", a->attempts,
	      since_s(p, now), vm->cfg.peer);
	rc = p->life->protect(p, err, sizeof(err));
	if (rc < 0 && a->attempting) {
		double next = 0;

		if (!err[0])
			snprintf(err, sizeof(err), "%s", strerror(-rc));
		rdb_pri_auto_failed(p, err, &next);
	}
}

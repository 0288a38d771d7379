// SPDX-License-Identifier: GPL-2.0-only
/*
 * The primary's half of "never run a VM twice" (invariant I6,
 * docs/failure-modes.md): what happens when protection is lost while the
 * backup may still go live.
 *
 * Protection ends (the backup fell silent, the link broke, a checkpoint
 * overran its deadline, the watchdog tripped): the guest goes on running,
 * but every frame it sends from here on joins the output already held,
 * and nothing leaves until this host has won the right to run the VM.
 *   on_peer_loss = witness: claim this protection's generation at the
 *     witness (witness.h).  Won: release the held output, run on
 *     unprotected (DEGRADED).  Lost: the backup went live: stop the guest,
 *     discard the held output (FENCED).  No answer: ask again, holding.
 *   on_peer_loss = manual: hold until the operator decides
 *     (remusdbctl unprotect --force here, or failover --force there).
 * Past hold_bound_ms the guest is paused, not let loose, until the
 * decision; a win resumes it.
 */
#define RDB_COMPONENT "primary"
#include "primary_int.h"
#include "witness.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#define DECIDE_TICK_NS (100 * RDB_NS_PER_MS)
#define WITNESS_RETRY_NS (500 * RDB_NS_PER_MS)

static void claim(struct rdb_primary *p);

/*
 * Stopping and resuming the guest without blocking the loop.  QEMU may
 * need us to carry out a command: `stop` drains the guest's disk, whose
 * NBD server is this loop.  Waiting for its answer here would deadlock
 * both until the deadline (seen: every stop timed out after 2 s).  So a
 * command is sent with a short deadline; if QEMU has not answered yet,
 * it is pending, and query-status on the guest timer confirms it later
 * (answers to timed-out commands are skipped by id, qmp.h).
 */
#define QMP_SHORT_NS (50 * RDB_NS_PER_MS)
#define GUEST_TICK_NS (100 * RDB_NS_PER_MS)
#define GUEST_RESEND_NS (2 * RDB_NS_PER_S)
#define GUEST_GIVE_UP_NS (30 * RDB_NS_PER_S)

static int guest_ctl(struct rdb_primary *p)
{
	char err[300];

	if (p->ctl)
		return 0;
	return p->hv->ctl_open(&p->ctl, p->vm->cfg.qmp, p->vm->name,
			       rdb_now_ns() + QMP_SHORT_NS, err, sizeof(err));
}

static int guest_send(struct rdb_primary *p)
{
	int rc = guest_ctl(p);

	if (rc == 0)
		rc = p->guest_want_stopped ?
			p->hv->stop(p->ctl, rdb_now_ns() + QMP_SHORT_NS) :
			p->hv->cont(p->ctl, rdb_now_ns() + QMP_SHORT_NS);
	p->guest_cmd_ns = rdb_now_ns();
	if (rc == 0)
		p->guest_confirmed = true;
	else if (rc != -ETIMEDOUT)
		LOGVM(WARN, p->vm->name, "%s the guest: %s (trying again)",
		      p->guest_want_stopped ? "stopping" : "resuming",
		      rc == -EREMOTEIO ? p->hv->ctl_error(p->ctl) : strerror(-rc));
	return rc;
}

static uint64_t on_guest_tick(struct rdb_evloop *loop, uint64_t id, void *opaque)
{
	struct rdb_primary *p = opaque;
	enum rdb_hv_guest g = RDB_HV_GUEST_OTHER;
	int rc;

	if (p->guest_confirmed) {
		p->guest_timer = 0;
		return 0;
	}
	rc = guest_ctl(p);
	if (rc == 0)
		rc = p->hv->guest(p->ctl, &g, rdb_now_ns() + QMP_SHORT_NS);
	if (rc == 0 && g == (p->guest_want_stopped ? RDB_HV_GUEST_PAUSED :
			     RDB_HV_GUEST_RUNNING)) {
		p->guest_confirmed = true;
		LOGVM(INFO, p->vm->name, "guest %s", p->guest_want_stopped ?
		      "stopped" : "running again");
		p->guest_timer = 0;
		return 0;
	}
	if (rdb_now_ns() - p->guest_want_ns > GUEST_GIVE_UP_NS) {
		/* QEMU gone, or never there: its output is held or dropped
		 * all the same; stop knocking (each try can block 50 ms) */
		LOGVM(ERROR, p->vm->name, "gave up %s the guest after %llu s: %s",
		      p->guest_want_stopped ? "stopping" : "resuming",
		      (unsigned long long)(GUEST_GIVE_UP_NS / RDB_NS_PER_S),
		      rc < 0 ? strerror(-rc) : "the guest is in another state");
		p->guest_timer = 0;
		return 0;
	}
	if (rdb_now_ns() - p->guest_cmd_ns > GUEST_RESEND_NS)
		guest_send(p);
	return GUEST_TICK_NS;
}

static const char *const dec_phase_names[RDB_DEC__MAX] = {
	[RDB_DEC_NONE] = "none",
	[RDB_DEC_DECIDING] = "deciding",
	[RDB_DEC_PAUSED] = "paused",
	[RDB_DEC_FENCED] = "fenced",
};

/* The decision's phases and the changes each may make (primary_int.h):
 * the one place they are written. */
#define TO(ph) (1u << RDB_DEC_##ph)
static const uint32_t dec_next[RDB_DEC__MAX] = {
	[RDB_DEC_NONE] = TO(DECIDING) | TO(FENCED),
	[RDB_DEC_DECIDING] = TO(PAUSED) | TO(NONE) | TO(FENCED),
	[RDB_DEC_PAUSED] = TO(NONE) | TO(FENCED),
	[RDB_DEC_FENCED] = TO(NONE),
};
#undef TO

void rdb_pri_dec_enter(struct rdb_primary *p, enum rdb_dec_phase to)
{
	p->dec_phase = rdb_vm_phase_change(p->vm, "decision", "primary_decide.c",
					   dec_phase_names, dec_next,
					   RDB_DEC__MAX, p->dec_phase, to);
}

static const char *const own_phase_names[RDB_OWN__MAX] = {
	[RDB_OWN_FREE] = "free",
	[RDB_OWN_HELD] = "held",
	[RDB_OWN_REGISTERING] = "registering",
	[RDB_OWN_HELD_REGISTERING] = "held+registering",
};

/* The ownership's phases and the changes each may make (primary_int.h):
 * the one place they are written. */
#define TO(ph) (1u << RDB_OWN_##ph)
static const uint32_t own_next[RDB_OWN__MAX] = {
	[RDB_OWN_FREE] = TO(HELD) | TO(REGISTERING),
	[RDB_OWN_HELD] = TO(FREE) | TO(HELD_REGISTERING),
	[RDB_OWN_REGISTERING] = TO(FREE),
	[RDB_OWN_HELD_REGISTERING] = TO(FREE) | TO(HELD),
};
#undef TO

void rdb_pri_own_enter(struct rdb_primary *p, enum rdb_own_phase to)
{
	p->own_phase = rdb_vm_phase_change(p->vm, "ownership", "primary_decide.c",
					   own_phase_names, own_next,
					   RDB_OWN__MAX, p->own_phase, to);
}

/* Asks for the guest stopped (or running); confirmed later if QEMU is
 * busy.  Returns 0, or the error of a QEMU that cannot be reached. */
static int guest_want(struct rdb_primary *p, bool stopped)
{
	int rc;

	p->guest_want_stopped = stopped;
	p->guest_confirmed = false;
	p->guest_want_ns = rdb_now_ns();
	rc = guest_send(p);
	if (!p->guest_confirmed && !p->guest_timer &&
	    rdb_evloop_add_timer(p->d->loop, GUEST_TICK_NS, on_guest_tick, p,
				 &p->guest_timer) < 0)
		LOGVM(ERROR, p->vm->name, "no timer to confirm the guest %s",
		      stopped ? "stopped" : "resumed");
	return rc == -ETIMEDOUT ? 0 : rc;
}

void rdb_pri_guest_control_stop(struct rdb_primary *p)
{
	if (p->guest_timer)
		rdb_evloop_del_timer(p->d->loop, p->guest_timer);
	p->guest_timer = 0;
}

static void decide_end(struct rdb_primary *p)
{
	if (rdb_pri_deciding(p))
		rdb_pri_dec_enter(p, RDB_DEC_NONE);
	if (p->decide_timer)
		rdb_evloop_del_timer(p->d->loop, p->decide_timer);
	p->decide_timer = 0;
	if (p->witness_req > 0)
		rdb_witness_cancel(p->d->witness, p->witness_req);
	p->witness_req = 0;
}

void rdb_pri_decided_run(struct rdb_primary *p, const char *how)
{
	struct rdb_vm *vm = p->vm;
	uint64_t held = rdb_pri_held_frames(p);
	bool paused;
	int rc;

	if (!rdb_pri_deciding(p))
		return;
	paused = p->dec_phase == RDB_DEC_PAUSED;
	decide_end(p);
	vm->st.decisions_won++;
	rdb_pri_release_output(p, UINT64_MAX);
	if (paused) {
		rc = guest_want(p, false);
		if (rc < 0)
			LOGVM(ERROR, vm->name, "resuming the guest paused at the "
			      "hold bound: %s (QMP cont is needed)", strerror(-rc));
	}
	rdb_vm_set_state(vm, p->unprotect_pending ? RDB_VM_UNPROTECTED :
			 RDB_VM_DEGRADED, "%s after %.0f ms: runs on "
			 "unprotected, %" PRIu64 " held frames released (%s)",
			 how, (double)(rdb_now_ns() - p->decide_start_ns) /
			 RDB_NS_PER_MS, held, p->decide_why);
	p->unprotect_pending = false;
}

/* The other side runs the VM: this copy must emit nothing more. */
static void decided_stop(struct rdb_primary *p, const char *holder)
{
	struct rdb_vm *vm = p->vm;
	uint64_t n;
	int rc;

	decide_end(p);
	p->unprotect_pending = false;
	vm->st.decisions_lost++;
	rdb_pri_dec_enter(p, RDB_DEC_FENCED);
	rc = guest_want(p, true);
	n = rdb_pri_discard_output(p);
	if (rc < 0)
		LOGVM(ERROR, vm->name, "stopping the guest after the lost "
		      "decision: %s; its output is dropped here all the same",
		      strerror(-rc));
	rdb_vm_set_state(vm, RDB_VM_FENCED, "lost the failover decision (the "
			 "witness holds: %s): the backup runs this VM; guest "
			 "stopped, %" PRIu64 " held frames discarded", holder, n);
}

static void on_claim(void *opaque, const struct rdb_witness_result *r)
{
	struct rdb_primary *p = opaque;
	struct rdb_vm *vm = p->vm;

	p->witness_req = 0;
	if (!rdb_pri_deciding(p))
		return;
	switch (r->outcome) {
	case RDB_WITNESS_WON:
		rdb_pri_decided_run(p, "won the failover decision at the witness");
		break;
	case RDB_WITNESS_LOST:
		decided_stop(p, r->holder);
		break;
	case RDB_WITNESS_ERROR:
		vm->st.witness_errors++;
		/* once per kind of failure, and then every 20th try */
		if (strcmp(r->error, p->witness_error) != 0 ||
		    p->decide_attempts % 20 == 0)
			LOGVM(WARN, vm->name, "the witness did not decide (try %u): "
			      "%s; output stays held%s", p->decide_attempts,
			      r->error, p->dec_phase == RDB_DEC_PAUSED ?
			      ", guest paused" : "");
		snprintf(p->witness_error, sizeof(p->witness_error), "%s", r->error);
		p->retry_at_ns = rdb_now_ns() + WITNESS_RETRY_NS;
		break;
	}
}

static void claim(struct rdb_primary *p)
{
	struct rdb_vm *vm = p->vm;
	int64_t id;

	p->decide_attempts++;
	id = rdb_witness_claim(p->d->witness, vm->name, p->registered,
			       p->d->node, on_claim, p);
	if (id < 0) {
		LOGVM(ERROR, vm->name, "cannot ask the witness: %s",
		      strerror((int)-id));
		p->retry_at_ns = rdb_now_ns() + WITNESS_RETRY_NS;
		return;
	}
	p->witness_req = id;
}

static uint64_t on_decide_tick(struct rdb_evloop *loop, uint64_t id,
			       void *opaque)
{
	struct rdb_primary *p = opaque;
	struct rdb_vm *vm = p->vm;
	uint64_t now = rdb_now_ns();
	int rc;

	if (!rdb_pri_deciding(p)) {
		p->decide_timer = 0;
		return 0;
	}
	if (p->dec_phase != RDB_DEC_PAUSED && now - p->decide_start_ns >=
	    (uint64_t)vm->cfg.hold_bound_ms * RDB_NS_PER_MS) {
		rc = guest_want(p, true);
		if (rc < 0) {
			/* The guest may run on, but its output stays held:
			 * that is I6.  Try again on the next tick. */
			LOGVM(ERROR, vm->name, "pausing the guest at the hold bound: %s",
			      strerror(-rc));
		} else {
			rdb_pri_dec_enter(p, RDB_DEC_PAUSED);
			vm->st.hold_pauses++;
			LOGVM(WARN, vm->name, "no decision within hold_bound_ms = %u: "
			      "guest paused, %" PRIu64 " frames held (%s)",
			      vm->cfg.hold_bound_ms,
			      rdb_pri_held_frames(p),
			      vm->peer_loss == RDB_PEER_LOSS_MANUAL ?
			      "on_peer_loss = manual: the operator decides" :
			      "waiting for the witness");
		}
	}
	if (vm->peer_loss == RDB_PEER_LOSS_WITNESS && p->witness_req == 0 &&
	    now >= p->retry_at_ns)
		claim(p);
	return DECIDE_TICK_NS;
}

void rdb_pri_decide_start(struct rdb_primary *p, const char *why)
{
	struct rdb_vm *vm = p->vm;

	if (p->dec_phase != RDB_DEC_NONE)
		return;
	rdb_pri_dec_enter(p, RDB_DEC_DECIDING);
	p->decide_start_ns = rdb_now_ns();
	p->decide_attempts = 0;
	p->retry_at_ns = 0;
	p->witness_error[0] = 0;
	snprintf(p->decide_why, sizeof(p->decide_why), "%s", why);
	vm->st.decisions++;
	if (vm->peer_loss == RDB_PEER_LOSS_MANUAL)
		rdb_vm_set_state(vm, RDB_VM_DECIDING, "%s; on_peer_loss = manual: "
				 "output held, guest paused after %u ms, until the "
				 "operator decides (here: remusdbctl unprotect --force "
				 "%s; on the backup: remusdbctl failover --force %s)",
				 why, vm->cfg.hold_bound_ms, vm->name, vm->name);
	else
		rdb_vm_set_state(vm, RDB_VM_DECIDING, "%s; output held until the "
				 "witness decides which host runs the VM (guest "
				 "paused after %u ms)", why, vm->cfg.hold_bound_ms);
	if (rdb_evloop_add_timer(p->d->loop, DECIDE_TICK_NS, on_decide_tick, p,
				 &p->decide_timer) < 0)
		LOGVM(ERROR, vm->name, "no timer for the decision: the hold bound "
		      "and witness retries will not run");
	if (vm->peer_loss == RDB_PEER_LOSS_WITNESS)
		claim(p);
}

void rdb_pri_decide_cancel(struct rdb_primary *p)
{
	if (rdb_pri_deciding(p)) {
		decide_end(p);
		rdb_pri_discard_output(p);
	}
}

/* ---- this host's right to run the VM ---- */

/*
 * A VM whose QEMU this daemon serves but never protected (attached, e.g.
 * by a remusdbd started again, or protected from a VM file without an
 * attach) may be the copy that lost: the backup won while this host was
 * cut off or its daemon down, and the guest here ran on without anyone
 * holding its output.  With a witness, until it says who owns the VM
 * (own_phase held) every frame the guest sends is held: the attach check
 * reads the VM's key, a protection's registration asks it too.  Owned by
 * another host, in any state, this copy is fenced; nobody's or ours, the
 * held output leaves.  No answer, or one that is not RemusDB's, is no
 * answer: the check asks again every 500 ms, holding, as the failover
 * decision does (letting the output go after a timeout would be a guess,
 * and a host still cut off from the witness is exactly the one whose copy
 * may have lost).  The operator who knows no other copy runs lets it go:
 * remusdbctl unprotect --force.
 */
static void owner_ask(struct rdb_primary *p);

/* The held output leaves: the witness said this host may run the VM (or
 * the operator did). */
static void owner_release(struct rdb_primary *p, const char *why)
{
	rdb_pri_owner_check_pause(p);
	rdb_pri_own_enter(p, RDB_OWN_FREE);
	LOGVM(INFO, p->vm->name, "its held output leaves (%s): %s", p->owner_reason,
	      why);
	for (unsigned i = 0; i < p->nnics; i++)
		rdb_pri_nic_release_held(p->nics[i], NULL, NULL);
}

/* Another host owns the VM: this copy must emit nothing more. */
static void owner_fence(struct rdb_primary *p, const char *why)
{
	struct rdb_vm *vm = p->vm;
	uint64_t n;

	rdb_pri_owner_check_pause(p);
	rdb_pri_own_enter(p, RDB_OWN_FREE);
	n = 0;
	for (unsigned i = 0; i < p->nnics; i++)
		n += rdb_pri_nic_discard_held(p->nics[i]);
	rdb_pri_dec_enter(p, RDB_DEC_FENCED);
	/* the witness's answer decided it: a decision, lost */
	vm->st.decisions++;
	vm->st.decisions_lost++;
	if (guest_want(p, true) < 0)
		LOGVM(WARN, vm->name, "the fenced guest will be stopped once "
		      "its QEMU answers");
	rdb_vm_set_state(vm, RDB_VM_FENCED, "%s: this copy is stopped, %"
			 PRIu64 " frames it sent discarded", why, n);
}

/* ---- registering a protection ---- */

static void on_register(void *opaque, const struct rdb_witness_result *r)
{
	struct rdb_primary *p = opaque;
	char err[300] = "";

	p->witness_req = 0;
	if (!rdb_pri_registering(p))
		return;
	switch (r->outcome) {
	case RDB_WITNESS_WON:
		/* the witness has this host as the VM's owner now */
		if (rdb_pri_owner_held(p))
			owner_release(p, "the witness registered this host's "
				      "protection");
		else
			rdb_pri_own_enter(p, RDB_OWN_FREE);
		p->life->protect_registered(p);
		return;
	case RDB_WITNESS_LOST:
		/* Another host owns the VM: this copy is the second one
		 * (the cleanup ends the registration, the fence the hold). */
		p->life->protection_cleanup(p);
		snprintf(err, sizeof(err), "protect refused: the witness says "
			 "another host owns this VM (%.200s)", r->holder);
		owner_fence(p, err);
		return;
	case RDB_WITNESS_ERROR:
		rdb_pri_own_enter(p, rdb_pri_owner_held(p) ? RDB_OWN_HELD :
				  RDB_OWN_FREE);
		snprintf(err, sizeof(err), "cannot register generation %016" PRIx64
			 " at the witness: %.200s", p->generation, r->error);
		p->life->protect_failed(p, err);
		return;
	}
}

int rdb_pri_register(struct rdb_primary *p)
{
	struct rdb_vm *vm = p->vm;
	struct rdb_witness_value v = { .generation = p->generation,
				       .state = RDB_WITNESS_PROTECTED };
	int64_t id;
	int rc;

	snprintf(v.owner, sizeof(v.owner), "%s", p->d->node);
	rc = rdb_witness_value_format(&v, p->registered, sizeof(p->registered));
	if (rc < 0)
		return rc;
	id = rdb_witness_register(p->d->witness, vm->name, p->d->node,
				  p->generation, on_register, p);
	if (id < 0)
		return (int)id;
	p->witness_req = id;
	rdb_pri_own_enter(p, rdb_pri_owner_held(p) ? RDB_OWN_HELD_REGISTERING :
			  RDB_OWN_REGISTERING);
	return 0;
}

void rdb_pri_register_cancel(struct rdb_primary *p)
{
	if (rdb_pri_registering(p)) {
		if (p->witness_req > 0)
			rdb_witness_cancel(p->d->witness, p->witness_req);
		rdb_pri_own_enter(p, rdb_pri_owner_held(p) ? RDB_OWN_HELD :
				  RDB_OWN_FREE);
	}
	if (!rdb_pri_deciding(p))
		p->witness_req = 0;
}

/* ---- the attach check: who owns the VM ---- */

static uint64_t on_owner_retry(struct rdb_evloop *loop, uint64_t id,
			       void *opaque)
{
	struct rdb_primary *p = opaque;

	(void)loop;
	(void)id;
	p->attach_timer = 0;
	rdb_pri_owner_check(p);
	return 0;
}

/* No answer this time: say so (once per kind of failure, and then every
 * 20th try, as the decision does) and ask again shortly. */
static void owner_unanswered(struct rdb_primary *p, const char *error)
{
	struct rdb_vm *vm = p->vm;

	vm->st.witness_errors++;
	if (strcmp(error, p->witness_error) != 0 || p->attach_attempts % 20 == 0)
		LOGVM(WARN, vm->name, "the witness did not say who owns the VM "
		      "(try %u): %s; its output stays held (`remusdbctl "
		      "unprotect --force %s` lets it go: only if no other host "
		      "runs it)", p->attach_attempts, error, vm->name);
	snprintf(p->witness_error, sizeof(p->witness_error), "%s", error);
	/* not a state change: what the held state waits on, for status */
	snprintf(vm->state_reason, sizeof(vm->state_reason), "%s; output "
		 "held until the witness says who owns the VM (try %u: %s)",
		 p->owner_reason, p->attach_attempts, error);
	if (!p->attach_timer &&
	    rdb_evloop_add_timer(p->d->loop, WITNESS_RETRY_NS, on_owner_retry,
				 p, &p->attach_timer) < 0)
		LOGVM(ERROR, vm->name, "no timer to ask the witness again: output "
		      "stays held until `remusdbctl unprotect --force %s`",
		      vm->name);
}

static void on_owner_read(void *opaque, const struct rdb_witness_result *r)
{
	struct rdb_primary *p = opaque;
	struct rdb_vm *vm = p->vm;
	struct rdb_witness_value v;
	char why[400];

	p->witness_req = 0;
	if (p->own_phase != RDB_OWN_HELD)
		return;
	if (r->outcome == RDB_WITNESS_ERROR) {
		owner_unanswered(p, r->error);
		return;
	}
	switch (rdb_witness_owner_of(r->holder, p->d->node, &v)) {
	case RDB_WITNESS_OTHER:
		snprintf(why, sizeof(why), "%s, but the witness says %s %s "
			 "(%.200s)", p->owner_reason, v.owner,
			 v.state == RDB_WITNESS_RUNNING ? "runs this VM" :
			 "owns this VM (it registered a protection of it)",
			 r->holder);
		owner_fence(p, why);
		return;
	case RDB_WITNESS_UNREADABLE:
		snprintf(why, sizeof(why), "the VM's key at the witness holds "
			 "no RemusDB value (%.120s)", r->holder);
		owner_unanswered(p, why);
		return;
	case RDB_WITNESS_NOBODY:
	case RDB_WITNESS_SELF:
		break;
	}
	snprintf(why, sizeof(why), "the witness says no other host owns the VM "
		 "(answered at try %u)", p->attach_attempts);
	owner_release(p, why);
	snprintf(vm->state_reason, sizeof(vm->state_reason), "%s; the witness "
		 "says no other host owns it", p->owner_reason);
}

static void owner_ask(struct rdb_primary *p)
{
	int64_t id;
	char why[64];

	p->attach_attempts++;
	id = rdb_witness_read(p->d->witness, p->vm->name, on_owner_read, p);
	if (id < 0) {
		snprintf(why, sizeof(why), "cannot ask: %s", strerror((int)-id));
		owner_unanswered(p, why);
		return;
	}
	p->witness_req = id;
}

void rdb_pri_owner_hold(struct rdb_primary *p, const char *reason)
{
	if (!p->d->witness)
		return;
	rdb_pri_own_enter(p, rdb_pri_registering(p) ? RDB_OWN_HELD_REGISTERING :
			  RDB_OWN_HELD);
	p->attach_attempts = 0;
	p->witness_error[0] = 0;
	snprintf(p->owner_reason, sizeof(p->owner_reason), "%s", reason);
	LOGVM(INFO, p->vm->name, "%s: its output is held until the witness says "
	      "who owns the VM", reason);
}

void rdb_pri_owner_check(struct rdb_primary *p)
{
	if (p->own_phase == RDB_OWN_HELD && p->witness_req == 0 &&
	    !p->attach_timer)
		owner_ask(p);
}

void rdb_pri_owner_check_pause(struct rdb_primary *p)
{
	if (!rdb_pri_registering(p) && p->witness_req > 0 && !rdb_pri_deciding(p))
		rdb_witness_cancel(p->d->witness, p->witness_req);
	if (!rdb_pri_registering(p) && !rdb_pri_deciding(p))
		p->witness_req = 0;
	if (p->attach_timer)
		rdb_evloop_del_timer(p->d->loop, p->attach_timer);
	p->attach_timer = 0;
}

void rdb_pri_owner_let_go(struct rdb_primary *p, const char *why)
{
	if (rdb_pri_owner_held(p))
		owner_release(p, why);
}

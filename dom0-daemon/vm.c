// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "vm"
#include "vm.h"
#include "clock.h"
#include "daemon.h"
#include "history.h"
#include "log.h"

#include <stdarg.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[RDB_VM_STATE__MAX] = {
	[RDB_VM_PROTECTING] = "protecting",
	[RDB_VM_PROTECTED] = "protected",
	[RDB_VM_DEGRADED] = "degraded",
	[RDB_VM_FAILING_OVER] = "failing-over",
	[RDB_VM_FAILED_OVER] = "failed-over",
	[RDB_VM_UNPROTECTED] = "unprotected",
	[RDB_VM_FAILED] = "failed",
	[RDB_VM_DECIDING] = "deciding",
	[RDB_VM_FENCED] = "fenced",
	[RDB_VM_MIGRATING] = "migrating",
	[RDB_VM_MIGRATED] = "migrated",
};

static const char *const role_names[RDB_ROLE__MAX] = {
	[RDB_ROLE_PRIMARY] = "primary",
	[RDB_ROLE_BACKUP] = "backup",
};

const struct rdb_hv_ops *rdb_vm_hv(const struct rdb_vm *vm)
{
	const struct rdb_hv_ops *hv = rdb_hv_find(vm->cfg.hypervisor);

	/* (a config without it: a default before the option existed) */
	return hv ? hv : rdb_hv_find("qemu");
}

const char *rdb_vm_state_name(enum rdb_vm_state s)
{
	return s < RDB_VM_STATE__MAX ? state_names[s] : "?";
}

const char *rdb_vm_role_name(enum rdb_vm_role r)
{
	return r < RDB_ROLE__MAX ? role_names[r] : "?";
}

/*
 * The VM's lifecycle on this host, both roles, in one table: the states
 * each state may change to (docs/architecture.md, "Roles").  Every state
 * change goes through rdb_vm_set_state, which checks it here.
 *   primary: protecting -> protected (the backup committed the initial
 *     state) | unprotected (attach, protect failed or undone) | degraded
 *     (protection dropped) | deciding (dropped, the witness to ask) |
 *     fenced (the witness names another owner) | failed;
 *     protected -> deciding | degraded | migrating (operator migrate) |
 *     unprotected | fenced | failed;
 *     migrating -> migrated (the backup took it) | protected (refused) |
 *     deciding | degraded | fenced | unprotected;
 *     deciding -> degraded (won) | fenced (lost) | unprotected;
 *     fenced -> unprotected (operator unprotect --force);
 *   backup: protecting -> protected | degraded | unprotected | failed;
 *     protected -> deciding | failing-over | degraded | unprotected;
 *     deciding -> failing-over (won) | degraded (lost, or no decision);
 *     failing-over -> failed-over | failed;
 *     failed-over -> protecting (protected again: role.c) | failed.
 * A change the table does not list is logged as a bug, counted
 * (remusdb_vm_state_changes_unlisted_total), and made all the same: the
 * end-to-end tests fail on it (tests/lib/cluster.sh).
 */
#define TO(s) (1u << RDB_VM_##s)
static const uint32_t legal_next[RDB_VM_STATE__MAX] = {
	[RDB_VM_PROTECTING] = TO(PROTECTED) | TO(UNPROTECTED) | TO(DEGRADED) |
		TO(DECIDING) | TO(FENCED) | TO(FAILED),
	[RDB_VM_PROTECTED] = TO(DECIDING) | TO(DEGRADED) | TO(FAILING_OVER) |
		TO(MIGRATING) | TO(UNPROTECTED) | TO(FENCED) | TO(FAILED),
	[RDB_VM_DEGRADED] = TO(PROTECTING) | TO(DECIDING) | TO(FAILING_OVER) |
		TO(UNPROTECTED) | TO(FENCED) | TO(FAILED),
	[RDB_VM_DECIDING] = TO(FAILING_OVER) | TO(DEGRADED) | TO(FENCED) |
		TO(UNPROTECTED) | TO(FAILED),
	[RDB_VM_FAILING_OVER] = TO(FAILED_OVER) | TO(FAILED) | TO(DEGRADED),
	[RDB_VM_FAILED_OVER] = TO(PROTECTING) | TO(FAILED) | TO(UNPROTECTED),
	[RDB_VM_UNPROTECTED] = TO(PROTECTING) | TO(FENCED) | TO(DECIDING) |
		TO(FAILING_OVER) | TO(FAILED),
	[RDB_VM_FAILED] = TO(UNPROTECTED) | TO(PROTECTING),
	[RDB_VM_FENCED] = TO(UNPROTECTED),
	[RDB_VM_MIGRATING] = TO(MIGRATED) | TO(PROTECTED) | TO(DECIDING) |
		TO(DEGRADED) | TO(FENCED) | TO(UNPROTECTED) | TO(FAILED),
	[RDB_VM_MIGRATED] = TO(UNPROTECTED),
};
#undef TO

bool rdb_vm_state_change_legal(enum rdb_vm_state from, enum rdb_vm_state to)
{
	return from < RDB_VM_STATE__MAX && to < RDB_VM_STATE__MAX &&
		(legal_next[from] & (1u << to));
}

unsigned rdb_vm_phase_change(struct rdb_vm *vm, const char *what,
			     const char *where, const char *const *names,
			     const uint32_t *next, unsigned n, unsigned from,
			     unsigned to)
{
	if (to == from)
		return from;
	if (to >= n || from >= n || !(next[from] & (1u << to))) {
		vm->st.unlisted_changes++;
		rdb_log_write(RDB_LOG_ERROR, RDB_COMPONENT, vm->name, "%s phase "
			      "%s -> %s is not in the lifecycle's table (%s): a "
			      "bug; made all the same", what,
			      from < n ? names[from] : "?", to < n ? names[to] : "?",
			      where);
		if (to >= n)
			return from;
	}
	return to;
}

struct rdb_vm *rdb_vm_new(struct rdb_daemon *d, const char *name,
			  enum rdb_vm_role role)
{
	struct rdb_vm *vm = calloc(1, sizeof(*vm));

	if (!vm)
		return NULL;
	snprintf(vm->name, sizeof(vm->name), "%s", name);
	vm->role = role;
	vm->state = RDB_VM_PROTECTING;
	vm->state_since_ns = rdb_now_ns();
	vm->st.transitions[RDB_VM_PROTECTING] = 1;
	vm->d = d;
	vm->wd_slot = -1;
	rdb_config_defaults(&rdb_vm_config_table, &vm->cfg);
	vm->next = d->vms;
	d->vms = vm;
	LOGVM(INFO, vm->name, "state protecting (role %s)",
	      rdb_vm_role_name(role));
	return vm;
}

struct rdb_vm *rdb_vm_find(struct rdb_daemon *d, const char *name)
{
	for (struct rdb_vm *vm = d->vms; vm; vm = vm->next)
		if (strcmp(vm->name, name) == 0)
			return vm;
	return NULL;
}

void rdb_vm_free(struct rdb_vm *vm)
{
	struct rdb_vm **pp;

	if (!vm)
		return;
	for (pp = &vm->d->vms; *pp; pp = &(*pp)->next) {
		if (*pp == vm) {
			*pp = vm->next;
			break;
		}
	}
	rdb_config_dispose(&rdb_vm_config_table, &vm->cfg);
	free(vm);
}

void rdb_vm_set_state(struct rdb_vm *vm, enum rdb_vm_state s,
		      const char *fmt, ...)
{
	va_list ap;
	uint64_t now = rdb_now_ns();
	enum rdb_log_level lvl;

	if (s >= RDB_VM_STATE__MAX || s == vm->state)
		return;
	va_start(ap, fmt);
	vsnprintf(vm->state_reason, sizeof(vm->state_reason), fmt, ap);
	va_end(ap);
	switch (s) {
	case RDB_VM_DEGRADED:
	case RDB_VM_FAILING_OVER:
	case RDB_VM_FAILED:
	case RDB_VM_FENCED:
		lvl = RDB_LOG_ERROR;
		break;
	case RDB_VM_DECIDING:
	case RDB_VM_FAILED_OVER:
		lvl = RDB_LOG_WARN;
		break;
	default:
		lvl = RDB_LOG_INFO;
	}
	if (!rdb_vm_state_change_legal(vm->state, s)) {
		vm->st.unlisted_changes++;
		rdb_log_write(RDB_LOG_ERROR, RDB_COMPONENT, vm->name,
			      "state change %s -> %s (role %s) is not in the "
			      "lifecycle's table (vm.c): a bug; made all the same",
			      rdb_vm_state_name(vm->state), rdb_vm_state_name(s),
			      rdb_vm_role_name(vm->role));
	}
	rdb_log_write(lvl, RDB_COMPONENT, vm->name,
		      "state %s -> %s after %.3f s: %s",
		      rdb_vm_state_name(vm->state), rdb_vm_state_name(s),
		      (double)(now - vm->state_since_ns) / RDB_NS_PER_S,
		      vm->state_reason);
	/* and for `remusdbctl history` (history.h); a failure is said once
	 * per VM (the state change itself is logged above) */
	if (vm->d && vm->d->cfg.state_dir && vm->d->cfg.state_dir[0]) {
		char err[300];

		if (rdb_history_append(vm->d->cfg.state_dir, vm->name,
				       rdb_vm_state_name(vm->state),
				       rdb_vm_state_name(s),
				       rdb_vm_role_name(vm->role),
				       (double)(now - vm->state_since_ns) /
				       RDB_NS_PER_S, vm->state_reason, err,
				       sizeof(err)) < 0 && !vm->history_failed) {
			vm->history_failed = true;
			rdb_log_write(RDB_LOG_WARN, RDB_COMPONENT, vm->name,
				      "its state history is not kept: %s", err);
		}
	}
	vm->state = s;
	vm->state_since_ns = now;
	vm->st.transitions[s]++;
}

void rdb_vm_pause_recorded(struct rdb_vm *vm, uint64_t pause_ns,
			   uint64_t work_ns)
{
	vm->st.pause_ns[vm->st.npause % RDB_PAUSE_RING] = pause_ns;
	vm->st.work_ns[vm->st.npause % RDB_PAUSE_RING] = work_ns;
	vm->st.npause++;
	rdb_prom_hist_observe(&vm->st.pause_hist, pause_ns);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t percentile(const uint64_t *ring, uint64_t count, unsigned p)
{
	uint64_t tmp[RDB_PAUSE_RING];
	size_t n = count < RDB_PAUSE_RING ? count : RDB_PAUSE_RING;

	if (n == 0)
		return 0;
	memcpy(tmp, ring, n * sizeof(tmp[0]));
	qsort(tmp, n, sizeof(tmp[0]), cmp_u64);
	return tmp[(n - 1) * (p > 100 ? 100 : p) / 100];
}

uint64_t rdb_vm_pause_percentile(const struct rdb_vm *vm, unsigned p)
{
	return percentile(vm->st.pause_ns, vm->st.npause, p);
}

void rdb_vm_epoch_ended(struct rdb_vm *vm, uint64_t epoch, uint64_t now_ns,
			uint64_t pause_ns)
{
	struct rdb_epoch_rec *r = &vm->st.epochs[epoch % RDB_PAUSE_RING];

	/* epoch 0 begins a protection: the last one's records go */
	if (epoch == 0)
		memset(vm->st.epochs, 0, sizeof(vm->st.epochs));
	*r = (struct rdb_epoch_rec){ .epoch = epoch, .end_ns = now_ns,
				     .pause_ns = pause_ns, .valid = true };
}

void rdb_vm_epoch_framed(struct rdb_vm *vm, uint64_t epoch, uint64_t bytes)
{
	struct rdb_epoch_rec *r = &vm->st.epochs[epoch % RDB_PAUSE_RING];

	if (r->valid && r->epoch == epoch)
		r->bytes = bytes;
}

json_t *rdb_vm_epochs_json(const struct rdb_vm *vm, unsigned count)
{
	const struct rdb_vm_stats *st = &vm->st;
	json_t *o, *ep = json_array(), *t = json_array(), *pause = json_array(),
	       *bytes = json_array(), *ack = json_array();
	uint64_t newest = 0, mono_now = rdb_now_ns();
	struct timespec real;
	double real_now;
	bool any = false;

	clock_gettime(CLOCK_REALTIME, &real);
	real_now = (double)real.tv_sec + (double)real.tv_nsec / 1e9;
	for (unsigned i = 0; i < RDB_PAUSE_RING; i++)
		if (st->epochs[i].valid && (!any || st->epochs[i].epoch > newest)) {
			newest = st->epochs[i].epoch;
			any = true;
		}
	if (count > RDB_PAUSE_RING)
		count = RDB_PAUSE_RING;
	for (uint64_t e = any && newest + 1 > count ? newest + 1 - count : 0;
	     any && e <= newest; e++) {
		const struct rdb_epoch_rec *r = &st->epochs[e % RDB_PAUSE_RING];

		if (!r->valid || r->epoch != e)
			continue;
		json_array_append_new(ep, json_integer((json_int_t)e));
		/* the monotonic clock, placed on the wall clock now */
		json_array_append_new(t, json_real(real_now -
				(double)(mono_now - r->end_ns) / 1e9));
		json_array_append_new(pause, json_real((double)r->pause_ns / 1e6));
		json_array_append_new(bytes, json_integer((json_int_t)r->bytes));
		json_array_append_new(ack, r->acked ? json_real((double)r->ack_ns / 1e6) :
				      json_null());
	}
	o = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o}", "vm", vm->name, "epoch", ep,
		      "t", t, "pause_ms", pause, "bytes", bytes, "ack_ms", ack);
	return o;
}

void rdb_vm_epoch_acked(struct rdb_vm *vm, uint64_t epoch, uint64_t now_ns)
{
	struct rdb_epoch_rec *r = &vm->st.epochs[epoch % RDB_PAUSE_RING];

	/* its own record, once: a slot since reused by a later epoch, or
	 * an ACK already counted, is not this one */
	if (!r->valid || r->epoch != epoch || r->acked || r->end_ns > now_ns)
		return;
	r->acked = true;
	r->ack_ns = now_ns - r->end_ns;
	vm->st.ack_ns[vm->st.nack % RDB_PAUSE_RING] = r->ack_ns;
	vm->st.nack++;
	rdb_prom_hist_observe(&vm->st.ack_hist, r->ack_ns);
}

uint64_t rdb_vm_unacked_since(const struct rdb_vm *vm, uint64_t *epoch_out)
{
	/* committed_epoch is 0 both before epoch 0's ACK and after it */
	uint64_t e = vm->st.last_ack_ns ? vm->st.committed_epoch + 1 : 0;
	const struct rdb_epoch_rec *r = &vm->st.epochs[e % RDB_PAUSE_RING];

	uint64_t o;

	if (e >= vm->st.checkpoints)
		return 0;
	*epoch_out = e;
	if (r->valid && r->epoch == e)
		return r->end_ns;
	/* its slot reused (over RDB_PAUSE_RING epochs behind): the oldest
	 * epoch still recorded ended later, a bound that never overstates
	 * the wait */
	if (vm->st.checkpoints < RDB_PAUSE_RING)
		return 1;
	o = vm->st.checkpoints - RDB_PAUSE_RING;
	r = &vm->st.epochs[o % RDB_PAUSE_RING];
	return r->valid && r->epoch == o ? r->end_ns : 1;
}

uint64_t rdb_vm_ack_percentile(const struct rdb_vm *vm, unsigned p)
{
	return percentile(vm->st.ack_ns, vm->st.nack, p);
}

void rdb_vm_commit_recorded(struct rdb_vm *vm, uint64_t ns)
{
	vm->st.commit_ns[vm->st.ncommit % RDB_PAUSE_RING] = ns;
	vm->st.ncommit++;
	rdb_prom_hist_observe(&vm->st.commit_hist, ns);
}

uint64_t rdb_vm_commit_percentile(const struct rdb_vm *vm, unsigned p)
{
	return percentile(vm->st.commit_ns, vm->st.ncommit, p);
}

uint64_t rdb_vm_work_percentile(const struct rdb_vm *vm, unsigned p)
{
	return percentile(vm->st.work_ns, vm->st.npause, p);
}

static double ckpt_rate(const struct rdb_vm *vm)
{
	uint64_t span = vm->st.last_ckpt_ns - vm->st.first_ckpt_ns;

	if (vm->st.checkpoints < 2 || span == 0)
		return 0;
	return (double)(vm->st.checkpoints - 1) * RDB_NS_PER_S / span;
}

json_t *rdb_vm_status_json(const struct rdb_vm *vm)
{
	uint64_t now = rdb_now_ns();
	json_t *o = json_object(), *tr = json_object();

	if (!o || !tr) {
		json_decref(o);
		json_decref(tr);
		return NULL;
	}
	for (int s = 0; s < RDB_VM_STATE__MAX; s++)
		json_object_set_new(tr, state_names[s],
				    json_integer((json_int_t)vm->st.transitions[s]));
	json_object_set_new(o, "name", json_string(vm->name));
	json_object_set_new(o, "role", json_string(rdb_vm_role_name(vm->role)));
	json_object_set_new(o, "state", json_string(rdb_vm_state_name(vm->state)));
	json_object_set_new(o, "state_reason", json_string(vm->state_reason));
	json_object_set_new(o, "readopted", json_boolean(vm->readopted));
	json_object_set_new(o, "state_age_ms",
			    json_integer((json_int_t)((now - vm->state_since_ns) / RDB_NS_PER_MS)));
	json_object_set_new(o, "transitions", tr);
	json_object_set_new(o, "checkpoints", json_integer((json_int_t)vm->st.checkpoints));
	json_object_set_new(o, "committed_epoch", json_integer((json_int_t)vm->st.committed_epoch));
	json_object_set_new(o, "checkpoints_per_s", json_real(ckpt_rate(vm)));
	json_object_set_new(o, "pause_ms_p50",
			    json_real((double)rdb_vm_pause_percentile(vm, 50) / RDB_NS_PER_MS));
	json_object_set_new(o, "pause_ms_p99",
			    json_real((double)rdb_vm_pause_percentile(vm, 99) / RDB_NS_PER_MS));
	if (vm->st.ncommit) {
		json_object_set_new(o, "commit_ms_p50",
				    json_real((double)rdb_vm_commit_percentile(vm, 50) / RDB_NS_PER_MS));
		json_object_set_new(o, "commit_ms_p99",
				    json_real((double)rdb_vm_commit_percentile(vm, 99) / RDB_NS_PER_MS));
		json_object_set_new(o, "disk_syncs", json_integer((json_int_t)vm->st.disk_syncs));
	}
	json_object_set_new(o, "ack_ms_p50",
			    json_real((double)rdb_vm_ack_percentile(vm, 50) / RDB_NS_PER_MS));
	json_object_set_new(o, "ack_ms_p99",
			    json_real((double)rdb_vm_ack_percentile(vm, 99) / RDB_NS_PER_MS));
	json_object_set_new(o, "pause_work_ms_p50",
			    json_real((double)rdb_vm_work_percentile(vm, 50) / RDB_NS_PER_MS));
	json_object_set_new(o, "pause_work_ms_p99",
			    json_real((double)rdb_vm_work_percentile(vm, 99) / RDB_NS_PER_MS));
	json_object_set_new(o, "pages", json_integer((json_int_t)vm->st.pages));
	json_object_set_new(o, "bytes", json_integer((json_int_t)vm->st.bytes));
	if (vm->st.codec.in_bytes) {
		const struct rdb_codec_stats *c = &vm->st.codec;
		uint64_t out = 0, lookups = c->cache_hits + c->cache_misses;

		for (int i = 0; i < RDB_PAGE_ENC__MAX; i++)
			out += c->out_bytes[i];
		uint64_t pages = 0;

		for (int i = 0; i < RDB_PAGE_ENC__MAX; i++)
			pages += c->pages[i];
		json_object_set_new(o, "compression", json_pack(
			"{s:{s:I,s:I,s:I,s:I,s:I}, s:{s:I,s:I,s:I,s:I,s:I}, s:f, s:I, s:I, s:f, s:f, s:f}",
			"pages", "raw", (json_int_t)c->pages[RDB_PAGE_RAW],
			"zero", (json_int_t)c->pages[RDB_PAGE_ZERO],
			"xor_rle", (json_int_t)c->pages[RDB_PAGE_XORRLE],
			"lz4", (json_int_t)c->pages[RDB_PAGE_LZ4],
			"diskref", (json_int_t)c->pages[RDB_PAGE_DISKREF],
			"bytes", "raw", (json_int_t)c->out_bytes[RDB_PAGE_RAW],
			"zero", (json_int_t)c->out_bytes[RDB_PAGE_ZERO],
			"xor_rle", (json_int_t)c->out_bytes[RDB_PAGE_XORRLE],
			"lz4", (json_int_t)c->out_bytes[RDB_PAGE_LZ4],
			"diskref", (json_int_t)c->out_bytes[RDB_PAGE_DISKREF],
			"diskref_share", pages ? (double)c->pages[RDB_PAGE_DISKREF] /
					 (double)pages : 0.0,
			"in_bytes", (json_int_t)c->in_bytes,
			"out_bytes", (json_int_t)out,
			"ratio", (double)out / (double)c->in_bytes,
			"cache_hit_rate", lookups ? (double)c->cache_hits / (double)lookups : 0.0,
			"encode_ms", (double)c->encode_ns / RDB_NS_PER_MS));
	}
	json_object_set_new(o, "marked_frames", json_integer((json_int_t)vm->st.marked_frames));
	json_object_set_new(o, "disk_ops", json_integer((json_int_t)vm->st.disk_ops));
	json_object_set_new(o, "disk_bytes", json_integer((json_int_t)vm->st.disk_bytes));
	json_object_set_new(o, "last_ack_age_ms",
			    vm->st.last_ack_ns ?
			    json_integer((json_int_t)((now - vm->st.last_ack_ns) / RDB_NS_PER_MS)) :
			    json_null());
	json_object_set_new(o, "failover_ms",
			    json_real((double)vm->st.failover_ns / RDB_NS_PER_MS));
	json_object_set_new(o, "watchdog_trips", json_integer((json_int_t)vm->st.watchdog_trips));
	json_object_set_new(o, "deadline_misses", json_integer((json_int_t)vm->st.deadline_misses));
	json_object_set_new(o, "ack_timeouts", json_integer((json_int_t)vm->st.ack_timeouts));
	json_object_set_new(o, "encoder_waits", json_pack("{s:I, s:f}",
		"checkpoints", (json_int_t)vm->st.encoder_waits,
		"ms", (double)vm->st.encoder_wait_ns / RDB_NS_PER_MS));
	json_object_set_new(o, "decision", json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}",
		"on_peer_loss", rdb_peer_loss_name(vm->peer_loss),
		"started", (json_int_t)vm->st.decisions,
		"won", (json_int_t)vm->st.decisions_won,
		"lost", (json_int_t)vm->st.decisions_lost,
		"witness_errors", (json_int_t)vm->st.witness_errors,
		"hold_pauses", (json_int_t)vm->st.hold_pauses));
	return o;
}

/* Counters and gauges of every VM; the role's own are added by
 * rdb_primary_metrics / rdb_backup_metrics after this. */
void rdb_vm_metrics(const struct rdb_vm *vm, struct rdb_prom *p)
{
	const struct rdb_vm_stats *st = &vm->st;
	const enum rdb_prom_type C = RDB_PROM_COUNTER, G = RDB_PROM_GAUGE;

	rdb_prom_set_base(p, "vm", vm->name, "role", rdb_vm_role_name(vm->role), NULL);
	for (int s = 0; s < RDB_VM_STATE__MAX; s++)
		rdb_prom_add(p, "remusdb_vm_state", G,
			     "1 for the state the VM is in, 0 for the others.",
			     vm->state == (enum rdb_vm_state)s, "state", state_names[s], NULL);
	rdb_prom_add(p, "remusdb_vm_state_seconds", G,
		     "Seconds since the VM entered its current state.",
		     (double)(rdb_now_ns() - vm->state_since_ns) / RDB_NS_PER_S, NULL);
	for (int s = 0; s < RDB_VM_STATE__MAX; s++)
		rdb_prom_add(p, "remusdb_vm_state_transitions_total", C,
			     "Times the VM entered each state.",
			     (double)st->transitions[s], "state", state_names[s], NULL);
	rdb_prom_add(p, "remusdb_vm_state_changes_unlisted_total", C,
		     "State changes the lifecycle's table does not list (a bug: see the log).",
		     (double)st->unlisted_changes, NULL);
	rdb_prom_add(p, "remusdb_checkpoints_total", C,
		     "Checkpoints whose state reached the backup (primary) or was applied (backup).",
		     (double)st->checkpoints, NULL);
	rdb_prom_add(p, "remusdb_committed_epoch", G,
		     "Last checkpoint epoch acknowledged (primary) or applied (backup).",
		     (double)st->committed_epoch, NULL);
	rdb_prom_add(p, "remusdb_replicated_pages_total", C,
		     "Memory pages sent (primary) or applied (backup).",
		     (double)st->pages, NULL);
	rdb_prom_add(p, "remusdb_replicated_bytes_total", C,
		     "Replication payload bytes sent (primary) or received (backup).",
		     (double)st->bytes, NULL);
	rdb_prom_add(p, "remusdb_disk_replicated_writes_total", C,
		     "Guest disk writes replicated (primary).",
		     (double)st->disk_ops, NULL);
	rdb_prom_add(p, "remusdb_disk_replicated_bytes_total", C,
		     "Guest disk write bytes replicated (primary) or applied to the replica (backup).",
		     (double)st->disk_bytes, NULL);
	rdb_prom_add(p, "remusdb_disk_syncs_total", C,
		     "fdatasyncs of the disk replica (backup).",
		     (double)st->disk_syncs, NULL);
	rdb_prom_add(p, "remusdb_marked_frames_total", C,
		     "Guest packets marked for commit protection (primary).",
		     (double)st->marked_frames, NULL);
	{
		const struct { const char *outcome; uint64_t n; } dec[] = {
			{ "started", st->decisions },
			{ "won", st->decisions_won },
			{ "lost", st->decisions_lost },
		};

		for (size_t i = 0; i < sizeof(dec) / sizeof(dec[0]); i++)
			rdb_prom_add(p, "remusdb_failover_decisions_total", C,
				     "Failover decisions at the witness: started, won, lost.",
				     (double)dec[i].n, "outcome", dec[i].outcome, NULL);
	}
	rdb_prom_add(p, "remusdb_witness_errors_total", C,
		     "Requests to the failover witness that failed.",
		     (double)st->witness_errors, NULL);
	rdb_prom_add(p, "remusdb_hold_pauses_total", C,
		     "Guest pauses at the output hold bound while the backup was unheard (primary).",
		     (double)st->hold_pauses, NULL);
	rdb_prom_add(p, "remusdb_deadline_misses_total", C,
		     "Checkpoints that missed their deadline.",
		     (double)st->deadline_misses, NULL);
	rdb_prom_add(p, "remusdb_encoder_waits_total", C,
		     "Checkpoints that waited for the encoders to finish the last epoch, the guest running (primary).",
		     (double)st->encoder_waits, NULL);
	rdb_prom_add(p, "remusdb_encoder_wait_seconds_total", C,
		     "Time checkpoints waited for the encoders (primary).",
		     (double)st->encoder_wait_ns / RDB_NS_PER_S, NULL);
	rdb_prom_add(p, "remusdb_ack_timeouts_total", C,
		     "Times a checkpoint waited past ack_timeout_ms for the backup's acknowledgement (primary).",
		     (double)st->ack_timeouts, NULL);
	rdb_prom_add(p, "remusdb_watchdog_trips_total", C,
		     "Times the guest-freeze watchdog tripped.",
		     (double)st->watchdog_trips, NULL);
	if (vm->role == RDB_ROLE_PRIMARY) {
		rdb_prom_add_hist(p, "remusdb_checkpoint_pause_seconds",
				  "Guest pause per checkpoint, from the stop request to the state sent (primary).",
				  &st->pause_hist, NULL);
		rdb_prom_add_hist(p, "remusdb_checkpoint_ack_wait_seconds",
				  "From a checkpoint's pause end to the backup's acknowledgement: how long its output is held beyond the epoch.",
				  &st->ack_hist, NULL);
	} else {
		rdb_prom_add_hist(p, "remusdb_checkpoint_commit_seconds",
				  "Time to commit a checkpoint at the backup (disk replay, syncs, pages).",
				  &st->commit_hist, NULL);
	}
	if (st->failover_ns)
		rdb_prom_add(p, "remusdb_failover_seconds", G,
			     "The last failover, from detection to the guest running (backup).",
			     (double)st->failover_ns / RDB_NS_PER_S, NULL);
	if (st->protect_start_ns) {
		const char *kind = st->resynced ? "resync" : "full";

		rdb_prom_add(p, "remusdb_initial_copy_bytes", G,
			     "Disk bytes sent by the last protection's initial copy (full copy or resync).",
			     (double)st->resync_bytes, "kind", kind, NULL);
		if (st->initial_ns)
			rdb_prom_add(p, "remusdb_initial_copy_seconds", G,
				     "The last protection's initial copy, disk and memory, to the first acknowledged checkpoint.",
				     (double)st->initial_ns / RDB_NS_PER_S, "kind", kind, NULL);
	}
	if (st->codec.in_bytes) {
		static const char *const enc[RDB_PAGE_ENC__MAX] = {
			"raw", "zero", "xor_rle", "lz4", "diskref",
		};
		const struct rdb_codec_stats *c = &st->codec;

		for (int i = 0; i < RDB_PAGE_ENC__MAX; i++) {
			rdb_prom_add(p, "remusdb_pages_encoded_total", C,
				     "Memory pages sent, by encoding.",
				     (double)c->pages[i], "encoding", enc[i], NULL);
			rdb_prom_add(p, "remusdb_page_encoded_bytes_total", C,
				     "Bytes of memory pages sent, by encoding.",
				     (double)c->out_bytes[i], "encoding", enc[i], NULL);
		}
		rdb_prom_add(p, "remusdb_page_cache_hits_total", C,
			     "Dirty pages found in the delta cache.",
			     (double)c->cache_hits, NULL);
		rdb_prom_add(p, "remusdb_page_cache_misses_total", C,
			     "Dirty pages not in the delta cache.",
			     (double)c->cache_misses, NULL);
	}
}

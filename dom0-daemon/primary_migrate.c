// SPDX-License-Identifier: GPL-2.0-only
/*
 * A planned switchover (remusdbctl migrate; docs/operations.md): the
 * protected VM moves to its backup at an epoch boundary, with the
 * guarantees of a power pull and without the failure detector.
 *
 *   1. migrate asks for it: state MIGRATING, HANDOVER(prepare) to the
 *      backup, which starts what a restore needs ahead of time (the
 *      replica's server, the NIC, a QEMU waiting for its stream) and
 *      answers READY.  The guest runs on meanwhile, protected.
 *   2. At the next checkpoint N the guest is not resumed (no LOADED to
 *      QEMU): it stays stopped after N, so N is the guest's whole state.
 *      N goes to the backup as usual, then HANDOVER(request, N).
 *   3. The backup commits N (ACK N: the output of N leaves here), wins
 *      the VM at the witness if there is one, and restores from N as a
 *      failover would, minus the rollback (no epoch was lost, so no flow
 *      check and no failover event); once its guest runs it answers
 *      HANDOVER(taken, N).  Until then this copy stays stopped and
 *      resumable: a restore that fails there gives the claim back and
 *      answers HANDOVER(refused, N, why).
 *   4. taken: this QEMU is killed (SIGKILL: it must never run again, and
 *      a stopped guest loses nothing), then the protection is undone:
 *      state MIGRATED.  refused: LOADED is sent after all, the guest
 *      runs on here, protected, state PROTECTED again (after a failed
 *      restore the backup then closes the link: the decision at the
 *      witness, which it gave back, lets this copy run on).
 *
 * The link lost between 2 and 4: whether the backup went live is not
 * known.  With the witness, the usual decision settles it (drop: the
 * guest runs with its output held until the witness says).  Without
 * one, the guest stays stopped here (QEMU keeps waiting for LOADED) and
 * the state is FENCED until the operator decides: unprotect --force
 * resumes it here.
 */
#define RDB_COMPONENT "primary"
#include "primary_int.h"
#include "vmdef.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The backup did not say it is prepared: the handover goes ahead. */
#define PREPARE_DEADLINE_NS (10 * RDB_NS_PER_S)
/* From HANDOVER sent to the backup's answer: its claim at the witness,
 * the replica's sync and its restore (bounded there by 20 s and twice
 * what the initial state took), with room to spare.  The guest is
 * stopped all the while; past it, the decision at the witness says which
 * copy runs. */
#define HANDOVER_DEADLINE_NS (40 * RDB_NS_PER_S)
/* A killed QEMU that is not our child: how long to watch it go. */
#define KILL_WAIT_NS (2 * RDB_NS_PER_S)

static const char *const ho_phase_names[RDB_HO__MAX] = {
	[RDB_HO_NONE] = "none",
	[RDB_HO_PREPARING] = "preparing",
	[RDB_HO_WANTED] = "wanted",
	[RDB_HO_SENT] = "sent",
	[RDB_HO_STOPPED] = "stopped",
	[RDB_HO_MIGRATED] = "migrated",
};

/* The switchover's phases and the changes each may make (primary_int.h):
 * the one place they are written. */
#define TO(ph) (1u << RDB_HO_##ph)
static const uint32_t ho_next[RDB_HO__MAX] = {
	[RDB_HO_NONE] = TO(PREPARING),
	[RDB_HO_PREPARING] = TO(WANTED) | TO(NONE),
	[RDB_HO_WANTED] = TO(SENT) | TO(NONE),
	[RDB_HO_SENT] = TO(MIGRATED) | TO(STOPPED) | TO(NONE),
	[RDB_HO_STOPPED] = TO(NONE),
	[RDB_HO_MIGRATED] = 0,
};
#undef TO

void rdb_pri_ho_enter(struct rdb_primary *p, enum rdb_ho_phase to)
{
	p->ho.phase = rdb_vm_phase_change(p->vm, "switchover",
					  "primary_migrate.c", ho_phase_names,
					  ho_next, RDB_HO__MAX, p->ho.phase, to);
}

int rdb_primary_migrate(struct rdb_vm *vm, char *msg, size_t msglen)
{
	struct rdb_primary *p = vm->pri;

	if (!p)
		return -ENOENT;
	if (p->ho.phase != RDB_HO_NONE) {
		snprintf(msg, msglen, "%s is being handed over already (%s)",
			 vm->name, vm->state_reason);
		return -EALREADY;
	}
	if (vm->state != RDB_VM_PROTECTED || !p->ck.active) {
		snprintf(msg, msglen, "%s is %s, not protected: only a protected "
			 "VM can be handed over to its backup", vm->name,
			 rdb_vm_state_name(vm->state));
		return -EINVAL;
	}
	if (!(p->ck.features & RDB_FEATURE_HANDOVER)) {
		snprintf(msg, msglen, "the backup %s does not know HANDOVER (an "
			 "older remusdbd): upgrade it, or use a failover drill",
			 vm->cfg.peer);
		return -EOPNOTSUPP;
	}
	if (rdb_proto_put_handover(&p->out, 0, RDB_HANDOVER_PREPARE, NULL) < 0) {
		snprintf(msg, msglen, "out of memory");
		return -ENOMEM;
	}
	rdb_pri_peer_want_write(p);
	rdb_pri_ho_enter(p, RDB_HO_PREPARING);
	p->ho.start_ns = rdb_now_ns();
	rdb_vm_set_state(vm, RDB_VM_MIGRATING, "operator migrate: the backup "
			 "%s prepares, then the VM is handed over to it at a "
			 "checkpoint", vm->cfg.peer);
	snprintf(msg, msglen, "handing over to %s", vm->cfg.peer);
	return 0;
}

bool rdb_pri_handover_at(struct rdb_primary *p, uint64_t epoch)
{
	if (p->ho.phase != RDB_HO_WANTED || epoch == 0)
		return false;
	rdb_pri_ho_enter(p, RDB_HO_SENT);
	p->ho.epoch = epoch;
	p->ho.sent_ns = rdb_now_ns();
	return true;
}

/* Appends a frame as an OUTPUT/INPUT record; false if there is no room
 * (the frame is lost like a dropped one: TCP sends it again). */
static bool record(struct rdb_buf *b, const uint8_t *frame, size_t len)
{
	uint8_t *at = rdb_buf_reserve(b, 4 + len);

	if (!at)
		return false;
	at[0] = (uint8_t)(len >> 24);
	at[1] = (uint8_t)(len >> 16);
	at[2] = (uint8_t)(len >> 8);
	at[3] = (uint8_t)len;
	memcpy(at + 4, frame, len);
	b->len += 4 + len;
	return true;
}

/* One NIC's held output, collected for OUTPUT. */
struct ho_collect {
	struct rdb_primary *p;
	unsigned k;
};

static void collect(void *opaque, const uint8_t *frame, size_t len)
{
	struct ho_collect *c = opaque;

	if (record(&c->p->ho.frames[c->k], frame, len))
		c->p->ho.nframes++;
}

static size_t ho_bytes(const struct rdb_buf *b)
{
	size_t n = 0;

	for (unsigned k = 0; k < RDB_NICS_MAX; k++)
		n += b[k].len;
	return n;
}

/* Frames for the guest kept this long at most (then dropped): what
 * arrives in the few ms until the backup has announced the guest. */
#define HO_INPUT_MAX (4u << 20)

bool rdb_pri_handover_input(struct rdb_primary *p, unsigned nic,
			    const uint8_t *frame, size_t len)
{
	if (p->ho.phase != RDB_HO_SENT)
		return false;
	if (nic < RDB_NICS_MAX && ho_bytes(p->ho.input) + 4 + len <= HO_INPUT_MAX &&
	    record(&p->ho.input[nic], frame, len))
		p->ho.ninput++;
	return true;	/* never to the stopped guest */
}

/* What reached the guest here while it was stopped goes to the host that
 * runs it now: a client's request sent in those milliseconds would
 * otherwise be lost with this copy, and wait for its TCP's retransmission
 * timer (200 ms at least; seen: commit gaps of 170-340 ms). */
static void send_input(struct rdb_primary *p)
{
	int rc = 0;

	if (p->peer_fd < 0 || !ho_bytes(p->ho.input))
		return;
	for (unsigned k = 0; k < RDB_NICS_MAX && rc == 0; k++)
		if (p->ho.input[k].len)
			rc = rdb_proto_put_input(&p->out, k, p->ho.epoch,
						 p->ho.input[k].data,
						 p->ho.input[k].len);
	if (rc < 0 ||
	    rdb_buf_write_all_fd(&p->out, p->peer_fd, rdb_now_ns() +
				 200 * RDB_NS_PER_MS) < 0)
		LOGVM(WARN, p->vm->name, "the %llu frames for the guest that "
		      "came here after it stopped did not reach the backup",
		      (unsigned long long)p->ho.ninput);
	else
		LOGVM(INFO, p->vm->name, "passed the backup %llu frames for the "
		      "guest that came here after it stopped",
		      (unsigned long long)p->ho.ninput);
}

/* Every output frame still held here goes back to the buffer it came
 * from (the handover failed or is undecided: this host may release it);
 * what came for the guest meanwhile goes to it, here. */
static void ho_frames_hold_again(struct rdb_primary *p)
{
	for (unsigned k = 0; k < RDB_NICS_MAX; k++) {
		const uint8_t *at = p->ho.input[k].data;
		const uint8_t *end = at + p->ho.input[k].len;

		while (end - at >= 4) {
			size_t n = (size_t)at[0] << 24 | (size_t)at[1] << 16 |
				   (size_t)at[2] << 8 | at[3];

			if (k < p->nnics)
				rdb_pri_nic_to_guest(p->nics[k], at + 4, n);
			at += 4 + n;
		}
		rdb_buf_reset(&p->ho.input[k]);
		at = p->ho.frames[k].data;
		end = at + p->ho.frames[k].len;
		while (end - at >= 4) {
			size_t n = (size_t)at[0] << 24 | (size_t)at[1] << 16 |
				   (size_t)at[2] << 8 | at[3];

			if (k < p->nnics)
				rdb_pri_nic_hold(p->nics[k], p->ho.epoch, at + 4, n);
			at += 4 + n;
		}
		rdb_buf_reset(&p->ho.frames[k]);
	}
	p->ho.ninput = 0;
	p->ho.nframes = 0;
}

int rdb_pri_handover_queue(struct rdb_primary *p)
{
	struct rdb_buf *out = rdb_pri_epoch_out(p);
	int rc = 0;

	/*
	 * The output still held (the last epochs') is released by the host
	 * that goes live, not here: sent from here, the client's answers
	 * (its TCP ACKs) would come back to this host's stopped guest, and
	 * the restored guest, never seeing them, would wait for its own
	 * retransmission timers (seen: 60-100 ms more stall).  Kept here
	 * until the answer, in case it is a refusal.
	 */
	p->ho.nframes = 0;
	for (unsigned i = 0; i < p->nnics && rc == 0; i++) {
		struct ho_collect c = { p, i };

		rdb_buf_reset(&p->ho.frames[i]);
		rdb_pri_nic_release(p->nics[i], UINT64_MAX, collect, &c);
		if (p->ho.frames[i].len)
			rc = rdb_proto_put_output(out, i, p->ho.epoch,
						  p->ho.frames[i].data,
						  p->ho.frames[i].len);
	}
	/* behind the epoch's own frames, which may still be encoded */
	if (rc == 0)
		rc = rdb_proto_put_handover(out, p->ho.epoch,
					    RDB_HANDOVER_REQUEST, NULL);
	if (rc == 0)
		LOGVM(INFO, p->vm->name, "guest stopped after epoch %llu (%.1f ms "
		      "after migrate): handing it over to %s with %llu held "
		      "output frames", (unsigned long long)p->ho.epoch,
		      (double)(p->ho.sent_ns - p->ho.start_ns) / RDB_NS_PER_MS,
		      p->vm->cfg.peer, (unsigned long long)p->ho.nframes);
	return rc;
}

/* The switchover is over (to: none, migrated or stopped); what it kept
 * for the guest is dropped. */
static void ho_reset(struct rdb_primary *p, enum rdb_ho_phase to)
{
	for (unsigned k = 0; k < RDB_NICS_MAX; k++)
		rdb_buf_dispose(&p->ho.input[k]);
	p->ho.ninput = 0;
	rdb_pri_ho_enter(p, to);
	p->ho.epoch = p->ho.sent_ns = 0;
}

/* A process that is not our child is gone, or a zombie (it runs no more). */
static bool gone(pid_t pid)
{
	char path[64], buf[256], *rp;
	FILE *f;
	bool z = false;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	if (fgets(buf, sizeof(buf), f) && (rp = strrchr(buf, ')')) && rp[1])
		z = rp[2] == 'Z' || rp[2] == 'X';
	fclose(f);
	return z;
}

/*
 * This host's QEMU of the VM never runs again.  SIGKILL: its guest is
 * stopped after the epoch the backup runs from, so nothing is lost, and
 * a QEMU told to quit could still leave COLO and run the guest on its
 * way out.  0, or why it could not be killed (then it is still stopped:
 * its stream stays open, so it keeps waiting for LOADED).
 */
static int kill_qemu(struct rdb_primary *p, pid_t *pid_out)
{
	uint64_t deadline = rdb_now_ns() + KILL_WAIT_NS;
	pid_t pid = p->restored_qemu.pid > 0 ? p->restored_qemu.pid :
		    p->qemu_pid;

	*pid_out = pid;
	if (pid <= 0)
		return -ESRCH;
	if (kill(pid, SIGKILL) < 0)
		return -errno;
	if (p->restored_qemu.pid > 0) {
		/* ours to reap, or libvirt's (watched through its pidfd) */
		if (p->restored_qemu.pidfd < 0)
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
		else
			while (rdb_hv_poll_exit(&p->restored_qemu, NULL) == 0) {
				if (rdb_now_ns() > deadline)
					return -ETIMEDOUT;
				usleep(1000);
			}
		p->restored_qemu.pid = -1;
		return 0;
	}
	while (!gone(pid)) {
		if (rdb_now_ns() > deadline)
			return -ETIMEDOUT;
		usleep(1000);
	}
	return 0;
}

static void migrated(struct rdb_primary *p)
{
	struct rdb_vm *vm = p->vm;
	uint64_t epoch = p->ho.epoch, took = rdb_now_ns() - p->ho.sent_ns;
	uint64_t t = rdb_now_ns();
	pid_t pid = 0;
	int rc;

	send_input(p);
	rc = kill_qemu(p, &pid);
	t = rdb_now_ns() - t;

	if (rc < 0) {
		/* still stopped in COLO: keep it so (stream open), say so */
		LOGVM(ERROR, vm->name, "the backup runs the VM from epoch %llu, "
		      "but this host's QEMU (pid %d) could not be killed: %s; "
		      "its guest stays stopped while remusdbd runs: kill it",
		      (unsigned long long)epoch, (int)pid, strerror(-rc));
		rdb_pri_dec_enter(p, RDB_DEC_FENCED);
		p->ck.active = false;	/* (its end is no drop: no decision) */
		p->life->close_peer(p);
		for (unsigned k = 0; k < RDB_NICS_MAX; k++)
			rdb_buf_reset(&p->ho.frames[k]);  /* the backup sends them */
		ho_reset(p, RDB_HO_NONE);
		/* (it runs on the other host now: not re-adopted here) */
		rdb_vmdef_forget(p->d->cfg.state_dir, vm->name);
		rdb_vm_set_state(vm, RDB_VM_MIGRATED, "handed over to %s at epoch "
				 "%llu; this host's stopped QEMU (pid %d) could not "
				 "be killed: %s", vm->cfg.peer,
				 (unsigned long long)epoch, (int)pid, strerror(-rc));
		return;
	}
	rdb_pri_dec_enter(p, RDB_DEC_FENCED);	/* nothing more leaves here */
	for (unsigned k = 0; k < RDB_NICS_MAX; k++)
		rdb_buf_dispose(&p->ho.frames[k]);	/* the backup sends them */
	p->ho.nframes = 0;
	ho_reset(p, RDB_HO_MIGRATED);
	if (!p->life->protection_cleanup(p))
		LOGVM(ERROR, vm->name, "this host's disk image could not be "
		      "synced after the handover: protecting the VM back here "
		      "will copy the whole disk");
	rdb_vmdef_forget(p->d->cfg.state_dir, vm->name);
	rdb_vm_set_state(vm, RDB_VM_MIGRATED, "the VM runs on %s from epoch %llu "
			 "(taken %.1f ms after its guest stopped here); this host's QEMU "
			 "(pid %d) is killed (gone in %.1f ms)", vm->cfg.peer,
			 (unsigned long long)epoch, (double)took / RDB_NS_PER_MS,
			 (int)pid, (double)t / RDB_NS_PER_MS);
}

void rdb_pri_handover_answer(struct rdb_primary *p, const struct rdb_frame *f)
{
	struct rdb_vm *vm = p->vm;
	enum rdb_handover_verb verb;
	char why[260];
	int rc;

	if ((p->ck.features & RDB_FEATURE_HANDOVER) &&
	    rdb_msg_handover_parse(f, &verb, why, sizeof(why)) == 0 &&
	    verb == RDB_HANDOVER_READY) {
		if (p->ho.phase != RDB_HO_PREPARING)
			return;		/* late: the handover went on without */
		rdb_pri_ho_enter(p, RDB_HO_WANTED);
		if (why[0])
			LOGVM(WARN, vm->name, "the backup is not prepared (%s): "
			      "handing over all the same, the client's stall "
			      "includes a QEMU's start there", why);
		else
			LOGVM(INFO, vm->name, "the backup is prepared (%.0f ms): "
			      "handing over at the next checkpoint",
			      (double)(rdb_now_ns() - p->ho.start_ns) /
			      RDB_NS_PER_MS);
		return;
	}
	if (!(p->ck.features & RDB_FEATURE_HANDOVER) ||
	    rdb_msg_handover_parse(f, &verb, why, sizeof(why)) < 0 ||
	    (verb != RDB_HANDOVER_TAKEN && verb != RDB_HANDOVER_REFUSED) ||
	    p->ho.phase != RDB_HO_SENT || f->epoch != p->ho.epoch) {
		p->life->drop_protection(p, "the backup's HANDOVER answers no "
					"handover of ours");
		return;
	}
	if (verb == RDB_HANDOVER_TAKEN) {
		migrated(p);
		return;
	}
	/* refused: the guest runs on here, protected as before; its held
	 * output is committed (ACK of the epoch came first) and leaves */
	ho_frames_hold_again(p);
	ho_reset(p, RDB_HO_NONE);
	rdb_pri_release_output(p, vm->st.committed_epoch);
	rc = p->life->resume_after_epoch(p);
	if (rc < 0) {
		char w[400];

		snprintf(w, sizeof(w), "the backup refused the handover (%s), and "
			 "the guest could not be resumed: %s", why, strerror(-rc));
		p->life->drop_protection(p, w);
		return;
	}
	rdb_vm_set_state(vm, RDB_VM_PROTECTED, "the backup refused the "
			 "handover: %s; the guest runs on here, protected", why);
}

bool rdb_pri_handover_lost(struct rdb_primary *p, const char *why)
{
	struct rdb_vm *vm = p->vm;
	uint64_t epoch = p->ho.epoch;
	bool sent = p->ho.phase == RDB_HO_SENT;

	ho_frames_hold_again(p);	/* the decision says where they go */
	if (!sent || vm->peer_loss == RDB_PEER_LOSS_WITNESS) {
		ho_reset(p, RDB_HO_NONE);
		return false;	/* the decision settles it: drop() */
	}
	/* Not known whether the backup runs it: the guest stays stopped
	 * (QEMU waits for LOADED on the stream, which stays open). */
	ho_reset(p, RDB_HO_STOPPED);
	rdb_pri_dec_enter(p, RDB_DEC_FENCED);
	p->ck.active = false;	/* (the stream stays open: see above) */
	p->life->close_peer(p);
	rdb_vm_set_state(vm, RDB_VM_FENCED, "%s while handing the VM over at "
			 "epoch %llu: the backup %s may run it; the guest stays "
			 "stopped here (on_peer_loss = %s: no witness to ask).  "
			 "`remusdbctl unprotect --force %s` resumes it here, only "
			 "if the backup does not run it", why,
			 (unsigned long long)epoch, vm->cfg.peer,
			 rdb_peer_loss_name(vm->peer_loss), vm->name);
	return true;
}

void rdb_pri_handover_tick(struct rdb_primary *p, uint64_t now)
{
	if (p->ho.phase == RDB_HO_PREPARING &&
	    now - p->ho.start_ns > PREPARE_DEADLINE_NS) {
		LOGVM(WARN, p->vm->name, "the backup did not say it is prepared "
		      "in 10 s: handing over all the same");
		rdb_pri_ho_enter(p, RDB_HO_WANTED);
	}
	/* (the backup's restore deadline grows with what taking the
	 * initial state took: so does this) */
	if (p->ho.phase == RDB_HO_SENT && now - p->ho.sent_ns > HANDOVER_DEADLINE_NS +
	    2 * p->vm->st.initial_mem_ns) {
		char why[128];

		snprintf(why, sizeof(why), "the backup did not answer the "
			 "handover in %.0f s", (double)(now - p->ho.sent_ns) /
			 RDB_NS_PER_S);
		p->life->drop_protection(p, why);
	}
}

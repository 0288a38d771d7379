// SPDX-License-Identifier: GPL-2.0-only
/* A VM's own numbers: the per-epoch record behind `remusdbctl epochs` and
 * the drill report (the last epochs, oldest first, bytes and ACK waits
 * matched to their epoch, a new protection starting afresh), and the
 * metrics it adds to the registry (histograms fed by the same calls). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "vm.h"

static struct rdb_vm *new_vm(struct rdb_daemon *d, enum rdb_vm_role role)
{
	struct rdb_vm *vm;

	memset(d, 0, sizeof(*d));
	vm = rdb_vm_new(d, "vm1", role);
	assert_non_null(vm);
	return vm;
}

/* Epochs 0..n-1 as the primary records them, 1 ms apart: pause e µs,
 * bytes 1000 + e, acknowledged (after 5 ms) unless e % 7 == 3. */
static void run_epochs(struct rdb_vm *vm, uint64_t n)
{
	uint64_t t = 1000000000ull;

	for (uint64_t e = 0; e < n; e++, t += 1000000) {
		rdb_vm_pause_recorded(vm, e * 1000, 0);
		rdb_vm_epoch_ended(vm, e, t, e * 1000);
		rdb_vm_epoch_framed(vm, e, 1000 + e);
		if (e % 7 != 3)
			rdb_vm_epoch_acked(vm, e, t + 5000000);
	}
}

/* The lifecycle's table (vm.c): the changes both roles make are listed,
 * a change it does not list is counted (and made: the tests fail on it). */
static void test_state_changes_table(void **state)
{
	static const enum rdb_vm_state walk[] = {
		/* a primary protected, lost its backup, won the decision,
		 * protected again, handed over */
		RDB_VM_PROTECTED, RDB_VM_DECIDING, RDB_VM_DEGRADED,
		RDB_VM_PROTECTING, RDB_VM_PROTECTED, RDB_VM_MIGRATING,
		RDB_VM_MIGRATED,
	};
	struct rdb_daemon d;
	struct rdb_vm *vm = new_vm(&d, RDB_ROLE_PRIMARY);

	(void)state;
	for (size_t i = 0; i < sizeof(walk) / sizeof(walk[0]); i++)
		rdb_vm_set_state(vm, walk[i], "step %zu", i);
	assert_int_equal(vm->state, RDB_VM_MIGRATED);
	assert_int_equal(vm->st.unlisted_changes, 0);
	/* a backup's failover and re-protection */
	assert_true(rdb_vm_state_change_legal(RDB_VM_PROTECTED, RDB_VM_DECIDING));
	assert_true(rdb_vm_state_change_legal(RDB_VM_DECIDING, RDB_VM_FAILING_OVER));
	assert_true(rdb_vm_state_change_legal(RDB_VM_FAILING_OVER, RDB_VM_FAILED_OVER));
	assert_true(rdb_vm_state_change_legal(RDB_VM_FAILED_OVER, RDB_VM_PROTECTING));
	/* a fenced copy runs again only by the operator's unprotect --force;
	 * a failover is never undone into protection */
	assert_false(rdb_vm_state_change_legal(RDB_VM_FENCED, RDB_VM_PROTECTED));
	assert_false(rdb_vm_state_change_legal(RDB_VM_FENCED, RDB_VM_PROTECTING));
	assert_false(rdb_vm_state_change_legal(RDB_VM_FAILED_OVER, RDB_VM_PROTECTED));
	assert_false(rdb_vm_state_change_legal(RDB_VM_MIGRATED, RDB_VM_PROTECTED));
	assert_false(rdb_vm_state_change_legal(RDB_VM_STATE__MAX, RDB_VM_PROTECTED));
	/* an unlisted change: counted, made all the same */
	rdb_vm_set_state(vm, RDB_VM_PROTECTED, "not from migrated");
	assert_int_equal(vm->state, RDB_VM_PROTECTED);
	assert_int_equal(vm->st.unlisted_changes, 1);
	rdb_vm_free(vm);
}

static void test_last_epochs_in_order(void **state)
{
	struct rdb_daemon d;
	struct rdb_vm *vm = new_vm(&d, RDB_ROLE_PRIMARY);
	json_t *o, *ep, *ack;

	run_epochs(vm, 5000);	/* more than the ring keeps */
	o = rdb_vm_epochs_json(vm, 10);
	assert_non_null(o);
	ep = json_object_get(o, "epoch");
	ack = json_object_get(o, "ack_ms");
	assert_int_equal(json_array_size(ep), 10);
	for (size_t i = 0; i < 10; i++) {
		json_int_t e = 4990 + (json_int_t)i;

		assert_int_equal(json_integer_value(json_array_get(ep, i)), e);
		assert_int_equal(json_integer_value(json_array_get(json_object_get(o, "bytes"), i)),
				 1000 + e);
		assert_true(json_real_value(json_array_get(json_object_get(o, "pause_ms"), i)) ==
			    (double)e / 1000);
		if (e % 7 == 3)
			assert_true(json_is_null(json_array_get(ack, i)));
		else
			assert_true(json_real_value(json_array_get(ack, i)) == 5.0);
		/* wall-clock times 1 ms apart, increasing */
		if (i)
			assert_true(json_real_value(json_array_get(json_object_get(o, "t"), i)) >
				    json_real_value(json_array_get(json_object_get(o, "t"), i - 1)));
	}
	json_decref(o);

	/* all it keeps: the ring, no more */
	o = rdb_vm_epochs_json(vm, 100000);
	assert_int_equal(json_array_size(json_object_get(o, "epoch")), RDB_PAUSE_RING);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(o, "epoch"), 0)),
			 5000 - RDB_PAUSE_RING);
	json_decref(o);
	rdb_vm_free(vm);
}

static void test_mismatched_epoch_ignored_and_new_protection_resets(void **state)
{
	struct rdb_daemon d;
	struct rdb_vm *vm = new_vm(&d, RDB_ROLE_PRIMARY);
	json_t *o;

	run_epochs(vm, 50);
	/* epoch 49 + RING lands in epoch 49's slot: not its record, so
	 * neither its bytes nor an ACK touch it */
	rdb_vm_epoch_framed(vm, 49 + RDB_PAUSE_RING, 7);
	rdb_vm_epoch_acked(vm, 49 + RDB_PAUSE_RING, 2000000000ull);
	o = rdb_vm_epochs_json(vm, 1);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(o, "epoch"), 0)), 49);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(o, "bytes"), 0)), 1049);
	json_decref(o);

	/* protected again: epoch 0 begins afresh, the old 49 is gone */
	run_epochs(vm, 3);
	o = rdb_vm_epochs_json(vm, 100);
	assert_int_equal(json_array_size(json_object_get(o, "epoch")), 3);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(o, "epoch"), 2)), 2);
	json_decref(o);

	/* nothing recorded: empty columns */
	rdb_vm_free(vm);
	vm = new_vm(&d, RDB_ROLE_BACKUP);
	o = rdb_vm_epochs_json(vm, 10);
	assert_int_equal(json_array_size(json_object_get(o, "epoch")), 0);
	json_decref(o);
	rdb_vm_free(vm);
}

/* The oldest epoch the backup has not acknowledged, and since when its
 * output has waited (ack_timeout_ms, primary.c): none before the first
 * end, epoch 0 until its ACK, the one after the last ACK later, none
 * once all are acknowledged; an epoch the ring lost counts as old. */
static void test_unacked_since(void **state)
{
	struct rdb_daemon d;
	struct rdb_vm *vm = new_vm(&d, RDB_ROLE_PRIMARY);
	uint64_t e = 99, t = 1000000000ull;

	assert_int_equal(rdb_vm_unacked_since(vm, &e), 0);
	for (uint64_t k = 0; k < 6; k++)
		rdb_vm_epoch_ended(vm, k, t + k * 1000, 0);
	vm->st.checkpoints = 6;
	assert_int_equal(rdb_vm_unacked_since(vm, &e), t);
	assert_int_equal(e, 0);
	/* epochs 0..2 acknowledged, as on_peer_msg records an ACK */
	vm->st.committed_epoch = 2;
	vm->st.last_ack_ns = t + 5000;
	assert_int_equal(rdb_vm_unacked_since(vm, &e), t + 3000);
	assert_int_equal(e, 3);
	vm->st.committed_epoch = 5;
	assert_int_equal(rdb_vm_unacked_since(vm, &e), 0);
	/* a record of epoch 6 is missing (the ring never had it) */
	vm->st.checkpoints = 7;
	assert_int_equal(rdb_vm_unacked_since(vm, &e), 1);
	assert_int_equal(e, 6);
	/* the backup over a ring's length behind: epoch 6's slot reused;
	 * the oldest epoch recorded (10) ended after it: its end bounds
	 * the wait from below, never above */
	for (uint64_t k = 6; k < RDB_PAUSE_RING + 10; k++)
		rdb_vm_epoch_ended(vm, k, t + k * 1000, 0);
	vm->st.checkpoints = RDB_PAUSE_RING + 10;
	assert_int_equal(rdb_vm_unacked_since(vm, &e), t + 10 * 1000);
	assert_int_equal(e, 6);
	rdb_vm_free(vm);
}

static void test_metrics_histograms_follow_the_records(void **state)
{
	struct rdb_daemon d;
	struct rdb_vm *vm = new_vm(&d, RDB_ROLE_PRIMARY);
	struct rdb_prom p;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	run_epochs(vm, 100);	/* pauses 0..99 µs: all in the 1 ms bucket */
	rdb_prom_init(&p);
	rdb_vm_metrics(vm, &p);
	f = open_memstream(&buf, &len);
	assert_int_equal(rdb_prom_write(&p, f), 0);
	fclose(f);
	assert_non_null(strstr(buf, "remusdb_checkpoint_pause_seconds_bucket{vm=\"vm1\","
				    "role=\"primary\",le=\"0.001\"} 100\n"));
	assert_non_null(strstr(buf, "remusdb_checkpoint_pause_seconds_count{vm=\"vm1\","
				    "role=\"primary\"} 100\n"));
	/* 86 of the 100 were acknowledged, 5 ms each */
	assert_non_null(strstr(buf, "remusdb_checkpoint_ack_wait_seconds_bucket{vm=\"vm1\","
				    "role=\"primary\",le=\"0.005\"} 86\n"));
	assert_non_null(strstr(buf, "remusdb_vm_state{vm=\"vm1\",role=\"primary\","
				    "state=\"protecting\"} 1\n"));
	/* a primary has no backup commit histogram */
	assert_null(strstr(buf, "remusdb_checkpoint_commit_seconds"));
	free(buf);
	rdb_prom_dispose(&p);
	rdb_vm_free(vm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_state_changes_table),
		cmocka_unit_test(test_last_epochs_in_order),
		cmocka_unit_test(test_mismatched_epoch_ignored_and_new_protection_resets),
		cmocka_unit_test(test_metrics_histograms_follow_the_records),
		cmocka_unit_test(test_unacked_since),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

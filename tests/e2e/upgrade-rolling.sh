#!/usr/bin/env bash
# A rolling upgrade between two releases, each mixed pair through a power
# pull (issue 29).  The earlier release is this repository at a pinned
# commit (UPGRADE_BASE below), built once and cached (tests/lib/oldbuild.sh);
# the later one is this tree.  PostgreSQL under the ledger workload:
#   1. both hosts run the earlier release; the VM protected;
#   2. the backup's remusdbd is upgraded (stopped, the new one started),
#      as docs/operations.md's "Rolling upgrade" does it: earlier primary,
#      later backup; the VM protected again;
#   3. the primary's power is pulled: the later backup restores the VM
#      from the earlier primary's checkpoints;
#   4. the old host comes back still on the earlier release, and the
#      survivor protects the VM back to it (a resync): later primary,
#      earlier backup;
#   5. the survivor's power is pulled: the earlier release restores the
#      VM from the later one's checkpoints.
# Checked: each step protected, each failover done, 0 acknowledged
# commits lost across both pulls, every client connection kept.  The pin
# moves with every change of the replication protocol (docs/protocol.md,
# "Compatibility"): the release before it must pass this.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/oldbuild.sh"

# the release before this one's replication-protocol changes (the last
# commit of the twelfth session: auto re-protect and its tests came after)
UPGRADE_BASE=${UPGRADE_BASE:-7da7212193ee8d6520882ad74589a097f3250331}
run=${RDB_RUN:-up$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
[ -x build/workload/ledger ] || rdb_fail "build/workload/ledger missing (make all)"
old=$(rdb_old_build "$UPGRADE_BASE") || rdb_fail "the earlier release ${UPGRADE_BASE:0:12} could not be built"
echo "earlier release: ${UPGRADE_BASE:0:12} ($old); later: this tree ($RDB_BUILD)"
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
export CL_REMUSDBD_pri=$old/remusdbd CL_REMUSDBD_bak=$old/remusdbd
cluster_hosts_up "$run" || rdb_fail "hosts setup failed"
cluster_vm_up 25 || rdb_fail "1: the earlier release did not protect the VM (logs in $CL_DIR)"
clix() { ip netns exec "$(netns_name "$run" cli)" "$@"; }
cl_wait_pg || rdb_fail "PostgreSQL not reachable"
echo "1: protected, both hosts on the earlier release"

mkdir -p "$CL_DIR/ledger"
clix "$RDB_ROOT/build/workload/ledger" run --host "$CL_GUEST_IP" --clients 3 \
	--duration 120 --journal "$CL_DIR/ledger" --wait-timeout 30 \
	2>"$CL_DIR/ledger-run.log" &
led=$!
sleep 5

# 2. the backup upgraded
pid=$(cat "$CL_DIR/bak/remusdbd.pid")
kill -TERM "$pid"
wait_for 20 "the backup's remusdbd to exit" bash -c "! kill -0 $pid" ||
	rdb_fail "2: the backup's remusdbd did not stop"
CL_REMUSDBD_bak=$RDB_BUILD/remusdbd
cl_start_daemon bak || rdb_fail "2: the later release did not start on the backup"
# (the earlier release does not protect again on its own: the procedure
# says protect by hand then)
cl_ctl pri wait "$CL_VM" degraded --timeout 20 ||
	rdb_fail "2: the earlier primary did not notice its backup's restart"
cl_ctl pri protect "$CL_DIR/$CL_VM.conf" >/dev/null || rdb_fail "2: protect refused"
cl_ctl pri wait "$CL_VM" protected --timeout 120 ||
	rdb_fail "2: earlier primary + later backup: not protected (see $CL_DIR/*/remusdbd.log)"
cl_ctl bak wait "$CL_VM" protected --timeout 10 || rdb_fail "2: the later backup is not protected"
echo "2: earlier primary, later backup: protected"
sleep 5

# 3. the earlier primary's power
cluster_pull_power "$run"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "3: the later backup did not restore the earlier primary's VM"
echo "3: the later release restored the VM from the earlier one's checkpoints"
sleep 5

# 4. the old host back, still on the earlier release: protected back to it
cl_protect_back "$run"
echo "4: later primary, earlier backup: protected (a resync)"
sleep 5

# 5. the later primary's power
pre_pull_ms=$(date +%s%3N)
netns_power_pull "$run" bak
cl_ctl pri wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "5: the earlier release did not restore the later one's VM"
echo "5: the earlier release restored the VM from the later one's checkpoints"
wait_pid 180 "$led"
cl_ledger_verdict "$pre_pull_ms"
echo "PASS: rolling upgrade from ${UPGRADE_BASE:0:12}: earlier primary + later backup and later primary + earlier backup each protected and through a power pull; $(jq .acked_commits "$CL_DIR/ledger.json") commits acknowledged, none lost, every connection kept"

#!/usr/bin/env bash
# A libvirt domain's whole round trip through both hosts' libvirt (issue
# 13, docs/libvirt.md): protected with libvirt_restore, the primary's
# power pulled, restored into the backup's libvirt; the old primary
# repaired (its remusdbd and libvirtd started again); the VM protected
# back to it by name with libvirt_restore = the old primary's libvirt;
# then `remusdbctl migrate` hands it home, into the old primary's libvirt.
# Checks: the client's sequence contiguous on one connection through the
# failover and the handover; after the handover `virsh list` shows vm1
# running on the old primary (restored_by libvirt) and nothing on the
# backup, whose libvirt QEMU remusdbd killed (a QEMU that is not its
# child).
#
# Output: build/e2e/<run>/result.json.  Exit 0 pass, 1 fail, 77 skipped.
# check-long: the round trip through both hosts' libvirt; make check has
#   failback (pg-failback) and the restore into libvirt (libvirt-restore)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/libvirt.sh"

run=${RDB_RUN:-lb$$}
trap 'cluster_down "$run"; lv_down' EXIT

lv_test_require
t0=$(date +%s%N)

cluster_hosts_up "$run" || rdb_fail "setup failed (logs in $CL_DIR)"
lv_pair_protected || rdb_fail "the protected libvirt domain did not come up (logs in $CL_DIR)"
echo "vm1 protected from pri's libvirt after $(ms_since "$t0") ms"

cl_seq_start 200 --stall-timeout 30
checker=$CL_CHECKER
sleep 3

# ---- failover into bak's libvirt ----
cluster_pull_power "$run"
kill -USR1 "$checker"
cl_ctl bak wait vm1 failed-over --timeout 30 ||
	rdb_fail "backup did not fail over (see $CL_DIR/bak/remusdbd.log)"
cl_ctl bak status vm1 --json > "$CL_DIR/bak-status-1.json"
[ "$(jq -r '.vms[0].restored_by' "$CL_DIR/bak-status-1.json")" = libvirt ] ||
	rdb_fail "bak restored vm1 into its own QEMU, not through libvirt"
lv_virsh bak list | grep -Eq '^ *[0-9]+ +vm1 +running$' || rdb_fail "bak's libvirt does not run vm1"
bq=$(jq -r '.vms[0].qemu_pid' "$CL_DIR/bak-status-1.json")
echo "failed over into bak's libvirt (QEMU $bq)"
sleep 3

# ---- the old primary repaired: remusdbd and libvirtd again ----
netns_power_restore "$run" pri
wait_for 15 "the repaired host reachable on the replication link" \
	ip netns exec "$(netns_name "$run" bak)" ping -c 1 -W 1 10.78.0.1 ||
	rdb_fail "the repaired host's links did not come back"
cl_start_daemon pri || rdb_fail "the repaired host's remusdbd did not start"
lv_host_up pri "$RDB_ROOT/tools/libvirt/qemu-hook" "$CL_DIR/pri/state/lvram" ||
	rdb_fail "the repaired host's libvirtd did not start"
[ "$(lv_virsh pri domstate vm1)" = "shut off" ] || rdb_fail "pri's libvirt lost or runs vm1"

# ---- protect back, then home by a handover into pri's libvirt ----
cl_ctl bak protect vm1 peer=10.78.0.1:7788 "libvirt_restore=$LV_URI_pri" ||
	rdb_fail "protect back refused"
cl_ctl bak wait vm1 protected --timeout 120 || rdb_fail "not protected back (see $CL_DIR/bak/remusdbd.log)"
cl_ctl pri wait vm1 protected --timeout 10 || rdb_fail "pri is not the backup"
sleep 3
kill -USR1 "$checker"
cl_ctl bak migrate vm1 --timeout 60 > "$CL_DIR/migrate.out" 2>&1 ||
	rdb_fail "migrate home failed: $(cat "$CL_DIR/migrate.out")"
cat "$CL_DIR/migrate.out"
cl_ctl pri wait vm1 failed-over --timeout 30 ||
	rdb_fail "pri does not run vm1 again (see $CL_DIR/pri/remusdbd.log)"
cl_ctl pri status vm1 --json > "$CL_DIR/pri-status-2.json"
[ "$(jq -r '.vms[0].restored_by' "$CL_DIR/pri-status-2.json")" = libvirt ] ||
	rdb_fail "pri took vm1 back into its own QEMU, not through libvirt"
lv_virsh pri list | grep -Eq '^ *[0-9]+ +vm1 +running$' || rdb_fail "pri's libvirt does not run vm1"
wait_for 10 "bak's libvirt QEMU gone" bash -c "! kill -0 $bq" ||
	rdb_fail "bak's libvirt QEMU (pid $bq) still runs after the handover"
wait_for 10 "bak's libvirt without vm1" bash -c \
	"[ -z \"\$(virsh -q -c '$LV_URI_bak' list --name | sed '/^\$/d')\" ]" ||
	rdb_fail "bak's libvirt still lists vm1"
sleep 5
kill -INT "$checker" 2>/dev/null
wait_pid 15 "$checker"

jq '{ gaps, dups, regressions, corrupt, connection_lost, values, last,
      failover_ms: (.marks[0].next_ms // -1), handover_stall_ms: (.marks[1].stall_ms // -1),
      invariants_ok: (.gaps == 0 and .dups == 0 and .regressions == 0 and .corrupt == 0
		      and (.connection_lost | not) and (.marks[1].next_ms // -1) >= 0) }' \
	"$CL_DIR/seqcheck.json" > "$CL_DIR/result.json" || rdb_fail "no result from the client"
cat "$CL_DIR/result.json"
[ "$(jq -r .invariants_ok "$CL_DIR/result.json")" = true ] ||
	rdb_fail "sequence broken across the failover and the handover (logs in $CL_DIR)"
echo "PASS: failed over into bak's libvirt and handed home into pri's; sequence contiguous (failover outage $(jq -r .failover_ms "$CL_DIR/result.json") ms, handover stall $(jq -r .handover_stall_ms "$CL_DIR/result.json") ms); whole test $(ms_since "$t0") ms"

#!/usr/bin/env bash
# A remusdbd restart while a protection's initial copy is under way, on
# each host, under a PostgreSQL load, with no command typed after it:
#   1. the primary's remusdbd stopped (fault injection: SIGSTOP) as QEMU
#      waits for it to take the initial state, then SIGKILLed: the
#      watchdog frees the guest; the new daemon re-adopts the VM from the
#      definition protect recorded and protects it again;
#   2. the backup's remusdbd SIGKILLed while the primary copies the disk
#      to it, then started again: the primary protects again on its own
#      (auto_reprotect_s).
# Then a power pull of the primary.  Checked: protected again each time,
# no I/O error in the guest, the clients keep their connections and
# lose no acknowledged commit.  Red with auto_reprotect_s = 0 (step 2).
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-ri$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
[ -x build/workload/ledger ] || rdb_fail "build/workload/ledger missing (make all)"
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
cluster_hosts_up "$run" || rdb_fail "hosts setup failed"
CL_NO_PROTECT=1 cluster_vm_up 25 || rdb_fail "PostgreSQL VM did not come up (logs in $CL_DIR)"
clix() { ip netns exec "$(netns_name "$run" cli)" "$@"; }
cl_wait_pg || rdb_fail "PostgreSQL not reachable"

mkdir -p "$CL_DIR/ledger"
clix "$RDB_ROOT/build/workload/ledger" run --host "$CL_GUEST_IP" --clients 3 \
	--duration 100 --journal "$CL_DIR/ledger" --wait-timeout 30 \
	2>"$CL_DIR/ledger-run.log" &
led=$!
sleep 4

# ---- 1: the primary's daemon, inside the initial state ----
cl_ctl pri inject "$CL_VM" stop-in-initial-state || rdb_fail "inject refused"
pid=$(cat "$CL_DIR/pri/remusdbd.pid")
cl_ctl pri protect "$CL_DIR/$CL_VM.conf" || rdb_fail "protect refused"
wait_for 60 "the primary's remusdbd stopped at the initial state" \
	sh -c "grep -q '^State:.*T' /proc/$pid/status" ||
	rdb_fail "the daemon did not stop at the initial state"
cl_ctl bak status "$CL_VM" --json 2>/dev/null | jq -e '.vms[0].state != "protected"' >/dev/null ||
	rdb_fail "1: the backup had committed the initial state already"
kill -9 "$pid"
wait_for 20 "the primary's remusdbd to exit" bash -c "! kill -0 $pid" ||
	rdb_fail "remusdbd did not exit on SIGKILL"
echo "1: killed the primary's remusdbd inside the initial state"
cl_start_daemon pri || rdb_fail "1: remusdbd did not start again"
t0=$(date +%s%3N)
cl_ctl pri status "$CL_VM" --json | jq -e '.vms[0].readopted == true' >/dev/null ||
	rdb_fail "1: the new daemon did not re-adopt $CL_VM"
cl_ctl pri wait "$CL_VM" protected --timeout 60 ||
	rdb_fail "1: not protected again by the re-adoption (see $CL_DIR/pri/remusdbd.log)"
cl_ctl bak wait "$CL_VM" protected --timeout 10 || rdb_fail "1: the backup is not protected"
pri_ms=$(( $(date +%s%3N) - t0 ))
echo "1: re-adopted and protected again $pri_ms ms after the new daemon started"
sleep 3

# ---- 2: the backup's daemon, during the disk copy ----
cl_ctl pri unprotect "$CL_VM" || rdb_fail "2: unprotect"
cl_ctl pri wait "$CL_VM" unprotected --timeout 20 || rdb_fail "2: not unprotected"
mark=$(wc -l < "$CL_DIR/pri/remusdbd.log")
cl_ctl pri protect "$CL_DIR/$CL_VM.conf" || rdb_fail "2: protect refused"
wait_for 30 "the primary to copy the disk" bash -c \
	"tail -n +$((mark + 1)) '$CL_DIR/pri/remusdbd.log' | grep -q 'initial disk copy of'" ||
	rdb_fail "2: no disk copy started"
st=$(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].state')
bpid=$(cat "$CL_DIR/bak/remusdbd.pid")
kill -9 "$bpid"
[ "$st" = protecting ] || rdb_fail "2: the VM was $st when the backup's daemon was killed, not protecting"
wait_for 20 "the backup's remusdbd to exit" bash -c "! kill -0 $bpid" ||
	rdb_fail "the backup's remusdbd did not exit on SIGKILL"
echo "2: killed the backup's remusdbd during the initial disk copy"
cl_start_daemon bak || rdb_fail "2: the backup's remusdbd did not start again"
t0=$(date +%s%3N)
cl_ctl pri wait "$CL_VM" protected --timeout 60 ||
	rdb_fail "2: not protected again on its own (see $CL_DIR/pri/remusdbd.log)"
cl_ctl bak wait "$CL_VM" protected --timeout 10 || rdb_fail "2: the backup is not protected"
bak_ms=$(( $(date +%s%3N) - t0 ))
tail -n +$((mark + 1)) "$CL_DIR/pri/remusdbd.log" | grep -q "state protecting -> .*backup closed the connection" ||
	rdb_fail "2: the primary's log does not show the initial copy cut by the backup's end"
tail -n +$((mark + 1)) "$CL_DIR/pri/remusdbd.log" | grep -q "protected again on its own" ||
	rdb_fail "2: the primary's log does not say it protected again on its own"
echo "2: protected again on its own $bak_ms ms after the backup's new daemon started"
# the primary's history outlived its daemon: the killed one's protect,
# the re-adoption's, and the protection again on its own, in order
cl_ctl pri history "$CL_VM" --count 0 --json > "$CL_DIR/history.json" ||
	rdb_fail "remusdbctl history failed"
jq -e '[.changes[] | select(.to == "protecting")] | length >= 3' "$CL_DIR/history.json" >/dev/null &&
jq -e '[.changes[].reason] | (map(test("^operator protect")) | index(true)) <
	(map(test("protecting again on its own")) | index(true))' "$CL_DIR/history.json" >/dev/null ||
	rdb_fail "the primary's history does not show both daemons' changes in order: $(jq -c '[.changes[] | "\(.from)->\(.to)"]' "$CL_DIR/history.json")"
cl_ctl pri history "$CL_VM" --count 4
sleep 3

cluster_pull_power "$run"
pull_ms=$(date +%s%3N)
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 || rdb_fail "no failover"
wait_pid 150 "$led"
cl_ledger_verdict "$pull_ms"
cl_no_guest_disk_errors "$CL_DIR/pri/console.log"
echo "PASS: remusdbd killed inside a protection's initial copy, on the primary (re-adopted, protected again $pri_ms ms after its start) and on the backup (protected again on its own $bak_ms ms after its start), no command typed; then a power pull: $(jq .acked_commits "$CL_DIR/ledger.json") commits acknowledged, none lost, every connection kept, no I/O error"

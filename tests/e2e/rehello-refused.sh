#!/usr/bin/env bash
# A backup on which a restored copy of the VM may run refuses a new
# protection of that VM: otherwise the new setup would recreate the RAM
# image the running QEMU maps.  The restored copy here runs in state
# failed (its disk server died after the failover: the state changed, the
# QEMU did not stop), and the old primary comes back and protects again.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-rh$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
# manual: the returning primary registers nothing at the witness (which
# would fence it before it could even say HELLO), so the backup's own
# check is what is tested
export CL_ON_PEER_LOSS=manual
cluster_up "$run" 25 || rdb_fail "setup failed (logs in $CL_DIR)"
cl_wait_pg || rdb_fail "PostgreSQL not reachable"
cluster_pull_power "$run"
cl_ctl bak wait "$CL_VM" deciding --timeout 10 || rdb_fail "the backup did not notice"
cl_ctl bak failover "$CL_VM" --force || rdb_fail "failover --force refused"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 || rdb_fail "no failover"
qpid=$(cl_ctl bak status "$CL_VM" --json | jq -r .vms[0].qemu_pid)
dpid=$(sed -n 's/.*disk server (pid \([0-9]*\)) serving .*bak.*/\1/p' "$CL_DIR/bak/remusdbd.log" | tail -n 1)
[ -n "$dpid" ] || rdb_fail "no disk server pid in the backup's log"
kill -9 "$dpid"
cl_ctl bak wait "$CL_VM" failed --timeout 10 || rdb_fail "the backup did not notice its disk server died"
kill -0 "$qpid" || rdb_fail "the restored QEMU stopped (the test needs it running)"
img=$CL_DIR/bak/state/$CL_VM
# the RAM images the running QEMU maps: recreated or truncated, their
# inode or size would change (contents and times change anyway: the guest
# runs in them)
images() { find "$img" -maxdepth 1 -type f -name '*.img' -exec stat -c '%n %s %i' {} + | sort; }
before=$(images)
[ -n "$before" ] || rdb_fail "no RAM images in $img"

# the old primary's host comes back, and its new remusdbd protects again
for l in $(ip netns exec "$(netns_name "$run" pri)" ls /sys/class/net); do
	ip netns exec "$(netns_name "$run" pri)" ip link set "$l" up
done
ip netns exec "$(netns_name "$run" sw)" ip link set port-pri up
cl_start_daemon pri || rdb_fail "primary's remusdbd did not start again"
cl_ctl pri protect "$CL_DIR/$CL_VM.conf" || rdb_fail "protect request refused"
if cl_ctl pri wait "$CL_VM" protected --timeout 30 2>"$CL_DIR/protect.err"; then
	rdb_fail "protected again over a backup where the restored copy runs"
fi
grep -q "a restored copy of VM $CL_VM runs on this host" "$CL_DIR/protect.err" ||
	rdb_fail "the refusal does not say why: $(cat "$CL_DIR/protect.err")"
kill -0 "$qpid" || rdb_fail "the restored QEMU died"
after=$(images)
[ "$before" = "$after" ] || rdb_fail "the backup's images changed: $before -> $after"
echo "PASS: a new protection was refused while the restored copy ran ($(cut -c1-160 "$CL_DIR/protect.err"))"

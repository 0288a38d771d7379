#!/usr/bin/env bash
# A VM with two NICs (the first and one extra_nic), output commit over
# both in one epoch order (I1 on every NIC), end to end with a power pull.
#
# The guest has eth0 10.77.0.100 (tap vmtap0) and eth1 10.76.0.100 (tap
# vmtap1); ARP answers only on the NIC that holds the address, so each
# client's traffic goes through its own NIC both ways.  A sequence server
# on each (ports 7000 and 7001), one client each.  Checked:
#  - the primary protects two NIC devices and both release frames at the
#    epochs' ACKs;
#  - the power pull: both clients' sequences contiguous on their one
#    connection each (no gap, repeat or line of a rolled-back execution),
#    both carrying on from the backup, where the restored QEMU has both
#    NICs on this host's taps;
#  - failback: the survivor protects the VM back (both NICs handed from
#    the backup role to the primary role) and the operator migrates it
#    home (a switchover: each NIC's held output and the input that
#    reached the stopped copy handed over on that NIC, OUTPUT and INPUT
#    frames naming it); both clients carry on from the original host,
#    still contiguous, and the new host sent held output on both NICs;
#    then protected once more and the original host's power pulled:
#    both carry on from the survivor.
# Shown red with NIC 1's frames sent to the wire at once instead of held
# for their epoch (see the commit): the second client saw lines of the
# execution the failover rolled back.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-mn$$}
# (not under build/: the Makefile includes every build/**/*.d, and the
# payload's hook directory is etc/remusdb.d)
d=$(mktemp -d /tmp/rdb-multinic-XXXXXX)
trap 'cluster_down "$run"; rm -rf "$d"' EXIT
rdb_require_root
[ -x "$RDB_HELPERS/seqsrv" ] || rdb_fail "build/helpers/seqsrv missing (make all)"
cl_eth1_payload "$d/payload" 5000 || rdb_fail "guest payload"
bash "$RDB_ROOT/tools/mkguest.sh" --out "$d/guest" --payload "$d/payload" \
	--static "$RDB_HELPERS/seqsrv" >&2 || rdb_fail "guest build failed"

export CL_GUEST=$d/guest CL_EXTRA_NICS=1
CL_GUEST_RUN="/usr/bin/seqsrv --port $CL_SEQ_PORT --interval-us 5000" \
	cluster_up "$run" 25 || rdb_fail "setup failed (logs in $CL_DIR)"
clix() { ip netns exec "$(netns_name "$run" cli)" "$@"; }
clix ip addr add 10.76.0.10/24 dev eth0 || rdb_fail "client address on the second subnet"

pst=$(cl_status pri "$CL_VM" --json) || rdb_fail "no primary status"
nnic=$(jq '[.vms[0].devices[] | select(.kind == "nic")] | length' <<<"$pst")
[ "$nnic" = 2 ] || rdb_fail "the primary protects $nnic NIC devices, not 2: $(jq -c .vms[0].devices <<<"$pst")"

cl_seq_start 150
c1=$CL_CHECKER
# (not through clix: $! must be seqcheck itself, which ip netns exec
# becomes, for the signals below)
ip netns exec "$(netns_name "$run" cli)" "$RDB_HELPERS/seqcheck" \
	--host 10.76.0.100 --port 7001 --duration 150 \
	--connect-timeout 20 --stall-timeout 20 \
	>"$CL_DIR/seqcheck2.json" 2>"$CL_DIR/seqcheck2.log" &
c2=$!
wait_for 20 "first values at the second NIC's client" \
	grep -q '^first ' "$CL_DIR/seqcheck2.log" || rdb_fail "the second client got nothing"
sleep 5
pst=$(cl_status pri "$CL_VM" --json) || rdb_fail "primary not answering before the pull"
for k in 0 1; do
	rel=$(jq "[.vms[0].devices[] | select(.kind == \"nic\")][$k].released_frames" <<<"$pst")
	[ "$rel" -gt 100 ] 2>/dev/null ||
		rdb_fail "NIC $k released $rel frames at the epochs' ACKs (its client's traffic is not on it)"
done
cluster_pull_power "$run"
kill -USR1 "$c1" "$c2"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "backup did not fail over (see $CL_DIR/bak/remusdbd.log)"
bst=$(cl_ctl bak status "$CL_VM" --json)
[ "$(jq .vms[0].nics <<<"$bst")" = 2 ] || rdb_fail "the backup runs $(jq .vms[0].nics <<<"$bst") NICs, not 2"
sleep 3
# Failback: the survivor protects the VM back to the repaired host (both
# NICs handed from the backup role to the primary role while the clients
# stream), then the survivor's power: the clients carry on from the
# original host.
cl_protect_back "$run"
bst=$(cl_ctl bak status "$CL_VM" --json)
nnic=$(jq '[.vms[0].devices[] | select(.kind == "nic")] | length' <<<"$bst")
[ "$nnic" = 2 ] || rdb_fail "the survivor protects $nnic NIC devices, not 2"
sleep 3
# home by a switchover (remusdbctl migrate), both NICs' frames handed over
kill -USR1 "$c1" "$c2"
cl_ctl bak migrate "$CL_VM" --timeout 30 > "$CL_DIR/migrate.out" 2>&1 ||
	rdb_fail "migrate home failed: $(cat "$CL_DIR/migrate.out")"
cl_ctl pri wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "the original host does not run the VM after the migrate (see $CL_DIR/pri/remusdbd.log)"
sent=$(grep -o "output frames the primary handed over with epoch [0-9]* (by NIC: [0-9, ]*)" 	"$CL_DIR/pri/remusdbd.log" | tail -n 1)
[ -n "$sent" ] || rdb_fail "the original host sent no handed-over output"
[[ "$sent" =~ by\ NIC:\ ([0-9]+),\ ([0-9]+) ]] && [ "${BASH_REMATCH[2]}" -ge 1 ] ||
	rdb_fail "no held output of NIC 1 was handed over and sent on it: $sent"
echo "migrate home: $sent"
sleep 3
# protected once more, to the survivor, and the original host's power
cl_ctl pri protect "$CL_VM" peer=10.78.0.2:7788 || rdb_fail "protect again refused"
cl_ctl pri wait "$CL_VM" protected --timeout 60 || rdb_fail "not protected again"
cl_ctl bak wait "$CL_VM" protected --timeout 10 || rdb_fail "bak is not the backup again"
sleep 3
cluster_pull_power "$run"
kill -USR1 "$c1" "$c2"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "the survivor did not take the VM (see $CL_DIR/bak/remusdbd.log)"
sleep 5
kill -INT "$c1" "$c2" 2>/dev/null
wait_pid 15 "$c1"
wait_pid 15 "$c2"
for f in seqcheck seqcheck2; do
	[ -s "$CL_DIR/$f.json" ] || rdb_fail "$f: no result ($(tail -n 2 "$CL_DIR/$f.log"))"
	jq -e "$CL_SEQ_JQ"' seq_ok and (.marks[2].next_ms // -1) >= 0' "$CL_DIR/$f.json" >/dev/null ||
		rdb_fail "$f: the sequence is broken: $(jq -c . "$CL_DIR/$f.json")"
done
echo "PASS: 2 NICs, output held per epoch on both; power pull, protected back, migrated home ($sent), protected again, power pull: both clients' sequences contiguous on one connection each (to $(jq .last "$CL_DIR/seqcheck.json") and $(jq .last "$CL_DIR/seqcheck2.json"), outages $(jq -c '[.marks[].next_ms]' "$CL_DIR/seqcheck.json") and $(jq -c '[.marks[].next_ms]' "$CL_DIR/seqcheck2.json") ms)"

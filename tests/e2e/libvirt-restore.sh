#!/usr/bin/env bash
# A libvirt domain failed over *into the backup's libvirt* (issue 13,
# second stage; docs/libvirt.md "Restore through libvirt").
#
# Both hosts run a libvirtd of their own (tests/lib/libvirt.sh); the
# backup's has RemusDB's qemu hook (tools/libvirt/qemu-hook).  The test
# guest's domain is defined on both hosts (the same definition: UUID, PCI
# addresses) and enrolled on each with that host's remusdbd sockets; the
# primary's is attached, started and protected with
# libvirt_restore=<the backup's libvirt>.  The primary's power is pulled;
# then:
#   - the client's sequence is contiguous across the failover, on one
#     connection;
#   - `virsh list` on the backup shows the domain running, and remusdbd
#     says it restored it through libvirt;
#   - the domain was enrolled with --event-port (the VM has event_port, as
#     commit protection needs) and the guest runs remusdb.ko and
#     remusdb-eventd: the failover event reached the guest through the
#     port of libvirt's QEMU, and the guest acknowledged it;
#   - QEMU ran as libvirt-qemu, not root (the daemons' qemu_group), and
#     on guest_cpus (CPU 0 here), where libvirt's placement leaves it;
#   - that QEMU is libvirt's (-incoming defer, its RAM file under
#     libvirt's memory directory) and its RAM file is the committed image
#     itself (the hook's hard link: same inode);
#   - `virsh destroy` on the backup: remusdbd notices its VM's QEMU is
#     gone (state failed, with the reason), though it is not its child.
#
# Output: build/e2e/<run>/result.json.  Exit 0 pass, 1 fail, 77 skipped.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/libvirt.sh"

run=${RDB_RUN:-lr$$}
before_s=${PULL_AFTER_S:-}
after_s=${AFTER_S:-8}
trap 'cluster_down "$run"; lv_down' EXIT

lv_test_require
t0=$(date +%s%N)
lv_event_guest || rdb_fail "no guest with the failover event's helper"
export LV_ENROLL_ARGS=--event-port CL_GUEST_CPUS=0

cluster_hosts_up "$run" || rdb_fail "setup failed (logs in $CL_DIR)"
lv_pair_protected || rdb_fail "the protected libvirt domain did not come up (logs in $CL_DIR)"
uuid=$LV_UUID
echo "libvirtd on both hosts, vm1 enrolled on both, protected after $(ms_since "$t0") ms"
[ -z "$(lv_virsh bak list --name | sed '/^$/d')" ] || rdb_fail "the backup's libvirt runs something already"

# ---- the power pull, with the client watching ----
[ -n "$before_s" ] || before_s=$(awk -v r=$RANDOM 'BEGIN{printf "%.3f", 3 + (r % 4000) / 1000}')
cluster_seq_pull "$run" "$before_s" "$after_s"

jq -n --slurpfile c "$CL_DIR/seqcheck.json" --slurpfile s "$CL_DIR/bak-status.json" \
	--slurpfile p "$CL_DIR/pri-status.json" "$CL_SEQ_JQ"'
	$c[0] as $c | ($s[0].vms[0]) as $v | ($p[0].vms[0]) as $pv |
	{ gaps: $c.gaps, dups: $c.dups, regressions: $c.regressions,
	  corrupt: $c.corrupt, connection_lost: $c.connection_lost,
	  values: $c.values, last: $c.last,
	  values_after_failover: $c.values_after_stall,
	  failover_ms: ($c.marks[0].next_ms // -1),
	  restore_ms: $v.failover_ms, restored_by: $v.restored_by,
	  committed_epoch: $v.committed_epoch,
	  checkpoints_per_s: $pv.checkpoints_per_s,
	  invariants_ok: ($c | seq_ok) }' > "$CL_DIR/result.json" ||
	rdb_fail "no result from the client (rc $CL_CHECKER_RC)"
cat "$CL_DIR/result.json"
[ "$(jq -r .invariants_ok "$CL_DIR/result.json")" = true ] ||
	rdb_fail "invariant violated (logs in $CL_DIR)"

# ---- the backup's libvirt runs the domain ----
[ "$(jq -r .restored_by "$CL_DIR/result.json")" = libvirt ] ||
	rdb_fail "the backup restored vm1 into its own QEMU, not through libvirt (see $CL_DIR/bak/remusdbd.log)"
lv_virsh bak list > "$CL_DIR/bak-virsh-list.txt"
cat "$CL_DIR/bak-virsh-list.txt"
grep -Eq '^ *[0-9]+ +vm1 +running$' "$CL_DIR/bak-virsh-list.txt" ||
	rdb_fail "virsh list on the backup does not show vm1 running"
qpid=$(jq -r '.vms[0].qemu_pid' "$CL_DIR/bak-status.json")
tr '\0' '\n' < "/proc/$qpid/cmdline" > "$CL_DIR/bak-qemu.argv" ||
	rdb_fail "no QEMU $qpid on the backup"
grep -qx -- "-incoming" "$CL_DIR/bak-qemu.argv" && grep -qx "$uuid" "$CL_DIR/bak-qemu.argv" ||
	rdb_fail "the backup's QEMU is not the domain's restore (see $CL_DIR/bak-qemu.argv)"
ram=$(ls "$CL_DIR"/bak/state/lvram/libvirt/qemu/*-vm1/pc.ram 2>/dev/null | head -n 1)
[ -n "$ram" ] && [ "$(stat -c %i "$ram")" = "$(stat -c %i "$CL_DIR/bak/state/vm1/pc.ram.img")" ] ||
	rdb_fail "the domain's RAM file is not the committed image (the hook's link)"
echo "the backup's libvirt runs vm1 (QEMU $qpid), its RAM the committed image ($ram)"

# ---- as a Debian host runs it: libvirt-qemu, placed, with the event port ----
quser=$(ps -o user= -p "$qpid" | tr -d ' ')
[ "$quser" != root ] || rdb_fail "the backup's QEMU runs as root (qemu.conf user = $LV_QEMU_USER)"
[ -s "$CL_DIR/pri/qemu.user" ] && [ "$(cat "$CL_DIR/pri/qemu.user")" != root ] ||
	rdb_fail "the primary's QEMU ran as '$(cat "$CL_DIR/pri/qemu.user")', not libvirt-qemu"
[ "$(stat -c '%a %g' "$CL_DIR/bak/run")" = "770 $CL_QEMU_GROUP" ] ||
	rdb_fail "run_dir is $(stat -c '%a %g' "$CL_DIR/bak/run"), not 770 with qemu_group $CL_QEMU_GROUP"
[ "$(stat -c '%a' "$CL_DIR/bak/ctl.sock")" = 600 ] || rdb_fail "the control socket is not 0600"
for t in /proc/$qpid/task/*; do
	c=$(awk '/^Cpus_allowed_list/ {print $2}' "$t/status")
	[ "$c" = 0 ] || rdb_fail "QEMU thread ${t##*/} may run on CPUs $c, not guest_cpus = 0"
done
grep -qx "socket,id=rdbevent,path=$CL_DIR/bak/run/vm1.event,server=on,wait=off" "$CL_DIR/bak-qemu.argv" ||
	rdb_fail "libvirt's QEMU has no failover event port (see $CL_DIR/bak-qemu.argv)"
wait_for 15 "the guest's acknowledgement of the failover event" \
	grep -q "the guest acknowledged failover event" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the failover event did not reach the guest through libvirt's QEMU ($(grep -a 'eventd' "$CL_DIR/bak/console.log" | tail -2))"
echo "QEMU ran as $quser (run_dir 770 group $CL_QEMU_GROUP), on CPU 0 ($(ls /proc/$qpid/task | wc -l) threads); the guest acknowledged the failover event"

# ---- remusdbd watches libvirt's QEMU ----
lv_virsh bak destroy vm1 >/dev/null || rdb_fail "virsh destroy on the backup"
cl_ctl bak wait vm1 failed --timeout 10 ||
	rdb_fail "the backup did not notice the domain's QEMU went away"
grep -q "failed-over -> failed.*the restored QEMU exited" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "no log line for the domain's QEMU exit"
echo "PASS: restored through the backup's libvirt; sequence contiguous (client outage $(jq -r .failover_ms "$CL_DIR/result.json") ms, restore $(jq -r .restore_ms "$CL_DIR/result.json") ms); whole test $(ms_since "$t0") ms"

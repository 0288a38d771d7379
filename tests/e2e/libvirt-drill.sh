#!/usr/bin/env bash
# A libvirt domain, protected and failed over (issue 13, docs/libvirt.md).
#
# The primary's host runs a libvirtd of its own (tests/lib/libvirt.sh: a
# mount namespace with a private /run and the libvirt directories
# bind-mounted from the run's directory, inside the primary's network
# namespace; QEMU as libvirt-qemu, see docs/libvirt.md "Permissions").  The test
# guest is defined there as a plain libvirt domain (a raw disk image, a
# bridge NIC), then:
#   - enroll without a terminal and without --yes is refused, nothing changes;
#   - enroll --yes; enroll again says so and changes nothing;
#   - unenroll gives back `virsh dumpxml --inactive` byte for byte; enroll again;
#   - remusdbctl attach DOMAIN, detach (nothing uses it yet: remusdbd
#     forgets it), attach again, virsh start (detach now refused: its QEMU
#     uses the disk), remusdbctl protect DOMAIN (detach refused: protected);
#   - the guest streams 1, 2, 3, ... to the client; the primary's power is
#     pulled (libvirtd, its QEMU and remusdbd die with it);
#   - the client's sequence is contiguous across the failover, on the same
#     connection; the backup's restored QEMU runs the domain's machine
#     (its UUID, enroll's disk node) and the replicated disk equals
#     the image libvirt's domain was given.
# After the failover the VM runs on the backup as remusdbd's own QEMU (no
# libvirt_restore; the backup runs no libvirtd here): restoring it
# through the backup's libvirt is tests/e2e/libvirt-restore.sh's.
#
# Output: build/e2e/<run>/result.json.  Exit 0 pass, 1 fail, 77 skipped.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/libvirt.sh"

run=${RDB_RUN:-lv$$}
before_s=${PULL_AFTER_S:-}
after_s=${AFTER_S:-8}
trap 'cluster_down "$run"; lv_down' EXIT

lv_test_require
t0=$(date +%s%N)

cluster_hosts_up "$run" || rdb_fail "setup failed (logs in $CL_DIR)"
lv_host_up pri || rdb_fail "no libvirtd on the primary"
LV=$CL_DIR/pri/lv
URI=$LV_URI_pri
virsh_pri() { lv_virsh pri "$@"; }
ctl_pri() { cl_ctl pri "$@" --connect "$URI"; }
echo "libvirtd up on the primary's host after $(ms_since "$t0") ms"

# ---- the domain, as an operator has it: a raw image, a bridge NIC ----
img=$CL_DIR/pri/vm1.img
truncate -s 64M "$img"
# data the backup's replica must end up with (holes are skipped)
head -c 1048576 /dev/urandom | dd of="$img" bs=1M seek=8 conv=notrunc status=none
sync "$img"
lv_test_domain "$img" "$CL_DIR/pri/console.log" > "$CL_DIR/vm1.domain.xml"
virsh_pri define "$CL_DIR/vm1.domain.xml" >/dev/null || rdb_fail "virsh define"
virsh_pri dumpxml --inactive vm1 > "$CL_DIR/vm1.defined.xml"

# ---- enroll: asked, refused without a terminal ----
ctl_pri enroll vm1 --tap vmtap0 </dev/null >"$CL_DIR/enroll-notty.out" 2>&1 &&
	rdb_fail "enroll without a terminal and without --yes went ahead"
grep -q "not a terminal.*--yes" "$CL_DIR/enroll-notty.out" ||
	rdb_fail "enroll without a terminal: no reason given ($(cat "$CL_DIR/enroll-notty.out"))"
grep -q '^+.*reconnect-delay' "$CL_DIR/enroll-notty.out" ||
	rdb_fail "enroll showed no diff"
virsh_pri dumpxml --inactive vm1 | cmp -s - "$CL_DIR/vm1.defined.xml" ||
	rdb_fail "a refused enroll changed the domain"

te=$(date +%s%N)
ctl_pri enroll vm1 --yes --tap vmtap0 >"$CL_DIR/enroll.out" 2>&1 ||
	rdb_fail "enroll: $(cat "$CL_DIR/enroll.out")"
enroll_ms=$(ms_since "$te")
virsh_pri dumpxml --inactive vm1 > "$CL_DIR/vm1.enrolled.xml"
grep -q "&quot;path&quot;:&quot;$CL_DIR/pri/run/vm1.disk&quot;" "$CL_DIR/vm1.enrolled.xml" &&
	grep -q "<remusdb:vm xmlns:remusdb=\"https://remusdb.example/xmlns/vm/1\"" "$CL_DIR/vm1.enrolled.xml" &&
	grep -q "<acpi/>" "$CL_DIR/vm1.enrolled.xml" &&
	! grep -Eq "<interface type='bridge'>|<disk type='" "$CL_DIR/vm1.enrolled.xml" ||
	rdb_fail "the enrolled domain is not what enroll writes (see $CL_DIR/vm1.enrolled.xml)"
ctl_pri enroll vm1 --yes --tap vmtap0 >"$CL_DIR/enroll2.out" 2>&1 ||
	rdb_fail "enroll of an enrolled domain: $(cat "$CL_DIR/enroll2.out")"
grep -q "already enrolled; nothing changed" "$CL_DIR/enroll2.out" &&
	virsh_pri dumpxml --inactive vm1 | cmp -s - "$CL_DIR/vm1.enrolled.xml" ||
	rdb_fail "enroll twice changed the domain"

# ---- unenroll: the domain as it was, as libvirt prints it ----
ctl_pri unenroll vm1 --yes >"$CL_DIR/unenroll.out" 2>&1 ||
	rdb_fail "unenroll: $(cat "$CL_DIR/unenroll.out")"
virsh_pri dumpxml --inactive vm1 > "$CL_DIR/vm1.unenrolled.xml"
cmp "$CL_DIR/vm1.defined.xml" "$CL_DIR/vm1.unenrolled.xml" || {
	diff -u "$CL_DIR/vm1.defined.xml" "$CL_DIR/vm1.unenrolled.xml" >&2
	rdb_fail "unenroll did not give back the domain as defined"
}
echo "unenroll gave back the defined domain byte for byte ($(wc -c < "$CL_DIR/vm1.defined.xml") bytes)"
ctl_pri enroll vm1 --yes --tap vmtap0 >>"$CL_DIR/enroll.out" 2>&1 || rdb_fail "enroll again"
uuid=$(virsh_pri domuuid vm1)

# ---- attach, detach (nothing uses it yet), attach again ----
ctl_pri attach vm1 peer=10.78.0.2:7788 || rdb_fail "attach vm1"
cl_ctl pri detach vm1 || rdb_fail "detach of an attached VM no QEMU uses"
[ "$(cl_ctl pri status --json | jq '.vms | length')" = 0 ] ||
	rdb_fail "vm1 still known to remusdbd after detach"
grep -q "vm=vm1: detached (was unprotected)" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "no log line for the detach"

# ---- attach, start, protect ----
ta=$(date +%s%N)
ctl_pri attach vm1 peer=10.78.0.2:7788 || rdb_fail "attach vm1 again"
virsh_pri start vm1 >/dev/null || rdb_fail "virsh start (see $LV/log/qemu/vm1.log)"
start_ms=$(ms_since "$ta")
wait_for 90 "the guest ready on its console" grep -q REMUSDB-GUEST-READY "$CL_DIR/pri/console.log" ||
	rdb_fail "guest did not boot (see $CL_DIR/pri/console.log, $LV/log/qemu/vm1.log)"
boot_ms=$(ms_since "$ta")
cl_ctl pri detach vm1 >"$CL_DIR/detach-running.out" 2>&1 &&
	rdb_fail "detach went ahead while the domain's QEMU uses the disk"
grep -q "still uses the disk and NIC remusdbd serves: shut the VM down first" \
	"$CL_DIR/detach-running.out" || rdb_fail "detach refused without the reason: $(cat "$CL_DIR/detach-running.out")"
tp=$(date +%s%N)
ctl_pri protect vm1 peer=10.78.0.2:7788 || rdb_fail "protect vm1"
cl_ctl pri wait vm1 protected --timeout 90 || rdb_fail "the primary never protected vm1"
cl_ctl bak wait vm1 protected --timeout 10 || rdb_fail "the backup never had vm1"
protect_ms=$(ms_since "$tp")
echo "enroll $enroll_ms ms, attach+start $start_ms ms, boot $boot_ms ms, protected after $protect_ms ms"
virsh_pri domstate vm1 | grep -Eq "running|paused" || rdb_fail "libvirt lost its domain"
cl_ctl pri detach vm1 --force >"$CL_DIR/detach-protected.out" 2>&1 &&
	rdb_fail "detach --force went ahead on a protected VM"
grep -q "is protected: .remusdbctl unprotect vm1. first" "$CL_DIR/detach-protected.out" ||
	rdb_fail "detach of a protected VM refused without the reason: $(cat "$CL_DIR/detach-protected.out")"

# ---- the power pull, with the client watching ----
[ -n "$before_s" ] || before_s=$(awk -v r=$RANDOM 'BEGIN{printf "%.3f", 3 + (r % 4000) / 1000}')
cluster_seq_pull "$run" "$before_s" "$after_s"

jq -n --slurpfile c "$CL_DIR/seqcheck.json" --slurpfile s "$CL_DIR/bak-status.json" \
	--slurpfile p "$CL_DIR/pri-status.json" \
	--argjson enroll "$enroll_ms" --argjson start "$start_ms" --argjson boot "$boot_ms" \
	--argjson protect "$protect_ms" "$CL_SEQ_JQ"'
	$c[0] as $c | ($s[0].vms[0]) as $v | ($p[0].vms[0]) as $pv |
	{ gaps: $c.gaps, dups: $c.dups, regressions: $c.regressions,
	  corrupt: $c.corrupt, connection_lost: $c.connection_lost,
	  values: $c.values, last: $c.last,
	  values_after_failover: $c.values_after_stall,
	  failover_ms: ($c.marks[0].next_ms // -1),
	  restore_ms: $v.failover_ms, committed_epoch: $v.committed_epoch,
	  checkpoints_per_s: $pv.checkpoints_per_s,
	  pause_ms_p50: $pv.pause_ms_p50, pause_ms_p99: $pv.pause_ms_p99,
	  enroll_ms: $enroll, attach_start_ms: $start, boot_ms: $boot,
	  protect_ms: $protect,
	  invariants_ok: ($c | seq_ok) }' > "$CL_DIR/result.json" ||
	rdb_fail "no result from the client (rc $CL_CHECKER_RC)"
cat "$CL_DIR/result.json"
[ "$(jq -r .invariants_ok "$CL_DIR/result.json")" = true ] ||
	rdb_fail "invariant violated (logs in $CL_DIR)"

# The backup restored the domain's machine, from what protect derived
# from libvirt (not a hand-written VM file): its UUID, enroll's node name
# for the disk, the enrolled NIC.
rq=$(pgrep -f "qemu-system.*$CL_DIR/bak/" | head -n 1)
[ -n "$rq" ] || rdb_fail "no restored QEMU on the backup"
tr '\0' '\n' < "/proc/$rq/cmdline" > "$CL_DIR/bak-qemu.argv"
grep -qx "$uuid" "$CL_DIR/bak-qemu.argv" && grep -q "id=rdbdisk0,driver=nbd" "$CL_DIR/bak-qemu.argv" &&
	grep -q "\"mac\":\"$CL_GUEST_MAC\",\"id\":\"rdbnic0\"" "$CL_DIR/bak-qemu.argv" ||
	rdb_fail "the restored QEMU is not the domain's machine (see $CL_DIR/bak-qemu.argv)"
# The disk libvirt's domain had, served by remusdbd, on the backup.
cmp "$img" "$CL_DIR/bak/state/vm1/disk.img" ||
	rdb_fail "the backup's replica differs from the domain's image"
# Not yet: the backup's libvirt does not know the VM (next stage).
echo "PASS: libvirt domain enrolled, protected, failed over; sequence contiguous (client outage $(jq -r .failover_ms "$CL_DIR/result.json") ms); whole test $(ms_since "$t0") ms"

#!/usr/bin/env bash
# The backup's copy of the guest's RAM equals the primary's, whole: not
# only the pages a checkpoint carried (verify_pages checks those), but
# every byte of pc.ram, so a write the dirty log misses (a device model
# writing guest RAM behind it, as the UEFI flash did before QEMU patch
# 0004), a page read from QEMU's shared memory at the wrong time, or a
# page lost between QEMU and the backup's image shows here.
#
# The primary's pc.ram is a shared file in /dev/shm (CL_RAM_SHARED=file),
# readable while its QEMU runs.  Under load (pgbench, and a loop in the
# guest reading its disk with the page cache dropped, so virtio-blk
# writes guest RAM), a checkpoint's pause is made to last 3 s
# (slow-checkpoint=3000; checkpoint_deadline_ms 4000, so no such pause
# counts as late): once the backup has committed that epoch, and while
# the guest is still stopped, the primary's pc.ram and the backup's
# pc.ram.img are compared page by page.  Five times, 2 s apart, with
# the checkpoints' pages read from QEMU's shared memory (shared_ram, the
# default: QEMU patch 0007's x-colo-mapped-ram); then protected again
# with shared_ram = false (the pages on the checkpoint stream), five
# times more.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-re$$}
rounds=${RAM_EQUAL_ROUNDS:-5}
trap 'cluster_down "$run"' EXIT

rdb_require_root
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
export CL_RAM_SHARED=file CL_DEADLINE_MS=4000
cluster_hosts_up "$run" || rdb_fail "hosts setup failed (logs in $CL_DIR)"
cluster_vm_up 25 || rdb_fail "protected PostgreSQL VM did not come up (logs in $CL_DIR)"
clix() { ip netns exec "$(netns_name "$run" cli)" "$@"; }
cl_wait_pg bench || rdb_fail "PostgreSQL not reachable from the client"

ram=$(cl_pri_ram_file pri)
img=$CL_DIR/bak/state/$CL_VM/pc.ram.img
[ -f "$ram" ] || rdb_fail "the primary's RAM file $ram is missing"
[ -f "$img" ] || rdb_fail "the backup's RAM image $img is missing"

cl_console_cmd "(while :; do echo 3 > /proc/sys/vm/drop_caches; find /pg -type f -exec cat {} + > /dev/null 2>&1; sleep 0.2; done) & echo REMUSDB-READING" ||
	rdb_fail "console"
wait_for 20 "the guest's disk-reading loop" grep -q REMUSDB-READING "$CL_DIR/pri/console.log" ||
	rdb_fail "the guest did not start reading its disk"
clix "$PGBIN/pgbench" -h "$CL_GUEST_IP" -U postgres -n -c 4 -j 1 -T 600 -P 5 bench \
	>"$CL_DIR/pgbench.log" 2>&1 &
bench=$!
sleep 3

pst() { cl_ctl pri status "$CL_VM" --json | jq -r ".vms[0].$1"; }
bst() { cl_ctl bak status "$CL_VM" --json | jq -r ".vms[0].$1"; }
log=$CL_DIR/pri/remusdbd.log
compared=0
compare_rounds() {	# compare_rounds PATH: $rounds epochs compared
	local k n0 epoch out rc t0 t1
	for ((k = 1; k <= rounds; k++)); do
		n0=$(wc -l < "$log")
		cl_ctl pri inject "$CL_VM" slow-checkpoint=3000 || rdb_fail "fault injection refused"
		wait_for 10 "long pause $k began" bash -c "tail -n +$((n0 + 1)) '$log' | grep -q 'fault injection: the pause of epoch'" ||
			rdb_fail "the long pause did not begin"
		epoch=$(tail -n "+$((n0 + 1))" "$log" | grep -oE 'fault injection: the pause of epoch [0-9]+' | head -n 1 | awk '{print $NF}')
		wait_for 2 "the backup committed epoch $epoch" bash -c "[ \$($RDB_BUILD/remusdbctl --socket $CL_DIR/bak/ctl.sock status $CL_VM --json | jq .vms[0].committed_epoch) -ge $epoch ]" ||
			rdb_fail "the backup did not commit epoch $epoch within 2 s of its pause"
		[ "$(bst committed_epoch)" = "$epoch" ] ||
			rdb_fail "the backup committed $(bst committed_epoch), past epoch $epoch whose pause lasts"
		[ "$(pst in_pause)" = true ] || rdb_fail "the guest resumed before the comparison began"
		t0=$(date +%s%3N)
		# cmp at once (~0.3 s for 512 MiB); which pages differ only if any
		out="pages $(($(stat -c %s "$ram") / 4096)) differ 0" rc=0
		cmp -s "$ram" "$img" || { out=$(python3 "$RDB_ROOT/tests/lib/pagediff.py" "$ram" "$img"); rc=$?; }
		t1=$(date +%s%3N)
		# still the same pause: the guest stopped all along the comparison
		[ "$(pst in_pause)" = true ] && [ "$(bst committed_epoch)" = "$epoch" ] ||
			rdb_fail "the comparison ($((t1 - t0)) ms) outlasted the pause: nothing can be concluded"
		echo "$1: epoch $epoch: $out ($((t1 - t0)) ms)"
		[ $rc = 2 ] && rdb_fail "the RAM images could not be compared"
		[ $rc = 0 ] || rdb_fail "$1: after epoch $epoch committed, the backup's RAM differs from the primary's: $out"
		compared=$((compared + 1))
		wait_for 10 "the guest running again" bash -c "[ \$($RDB_BUILD/remusdbctl --socket $CL_DIR/pri/ctl.sock status $CL_VM --json | jq .vms[0].in_pause) = false ]" ||
			rdb_fail "the guest did not resume after the long pause"
		sleep 2
	done
}
mapped_msg="RAM block pc.ram ([0-9]* MiB): checkpoints read its pages from QEMU's shared memory"
grep -q "$mapped_msg" "$log" ||
	rdb_fail "the checkpoints do not read pc.ram from QEMU's shared memory: $(grep -o 'QEMU has no x-colo-mapped-ram.*' "$log" | tail -n 1)"
compare_rounds "shared memory"

# Protected again, the pages on the stream
cl_ctl pri unprotect "$CL_VM" || rdb_fail "unprotect"
echo "shared_ram = false" >> "$CL_DIR/$CL_VM.conf"
n0=$(wc -l < "$log")
cl_ctl pri protect "$CL_DIR/$CL_VM.conf" || rdb_fail "protect again refused"
cl_ctl pri wait "$CL_VM" protected --timeout 90 || rdb_fail "not protected again"
cl_ctl bak wait "$CL_VM" protected --timeout 10 || rdb_fail "the backup not protected again"
[ -f "$img" ] || rdb_fail "the backup's RAM image $img is missing"
tail -n "+$((n0 + 1))" "$log" | grep -q "$mapped_msg" &&
	rdb_fail "shared_ram = false, and the checkpoints still read QEMU's shared memory"
sleep 2
compare_rounds "stream"

for h in pri bak; do
	[ "$(cl_ctl $h status "$CL_VM" --json | jq -r '.vms[0].state')" = protected ] ||
		rdb_fail "$h left protection: $(cl_ctl $h status "$CL_VM" --json | jq -r '.vms[0].state_reason')"
done
# pgbench ran all along (it is stopped here, not at its -T)
kill -0 $bench 2>/dev/null || rdb_fail "pgbench ended early: $(tail -n 3 "$CL_DIR/pgbench.log")"
kill $bench
wait $bench 2>/dev/null
tps=$(grep -oE 'progress: [0-9.]+ s, [0-9.]+ tps' "$CL_DIR/pgbench.log" | awk '{ s += $4; n++ } END { if (n) printf "%.1f", s / n }')
[ -n "$tps" ] || rdb_fail "pgbench reported no progress: $(tail -n 3 "$CL_DIR/pgbench.log")"
echo "PASS: $compared epochs compared ($rounds with pages from QEMU's shared memory, $rounds from the stream), the backup's RAM equal to the primary's, $(stat -c %s "$ram") bytes each; pgbench $tps tps on average"

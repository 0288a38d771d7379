#!/usr/bin/env bash
# Runs the end-to-end tests (tests/e2e/*.sh) on network namespaces with a
# real guest under the test QEMU.  Exit 77 from a test means skipped.
# Prints one line per test with its time, then one summary line:
# "e2e: N passed, M failed, K skipped".
#
# Which tests: RDB_E2E_SET=check (the default; make check) runs those
# without a "# check-long: WHY" line, =long (make check-long) those with
# one, =all both.  make check must fit CI's 90 minutes on an empty cache
# (builds included); a test that repeats a property make check already
# asserts, under a heavier or longer scenario, carries that line with
# what covers it in make check.
set -u
cd "$(dirname "$0")/.."
. tests/lib/common.sh
rdb_build_guest
pass=0 fail=0 skip=0 failed=()
# Each test's output is kept (and shown as it runs): a failed test's last
# lines are printed again at the end, where a CI log's tail will show them.
logs=$RDB_ROOT/build/e2e/logs
rm -rf "$logs"
mkdir -p "$logs"
# The host's own stalls, sampled every 0.5 s through the run (a test that
# fails on a timing bound says how starved the host was meanwhile):
# ms, CPU "some" stall us, I/O "full" stall us (PSI totals), steal ticks.
(
	while :; do
		c=$(awk '/^some/ { sub("total=", "", $5); print $5 }' /proc/pressure/cpu 2>/dev/null)
		i=$(awk '/^full/ { sub("total=", "", $5); print $5 }' /proc/pressure/io 2>/dev/null)
		s=$(awk '/^cpu / { print $9 }' /proc/stat)
		echo "$(date +%s%3N) ${c:-0} ${i:-0} ${s:-0}"
		sleep 0.5
	done
) > "$logs/pressure.log" 2>/dev/null &
sampler=$!
trap 'kill $sampler 2>/dev/null' EXIT
# pressure_between T0 T1: the worst 0.5 s of that span, as a sentence
pressure_between() {
	awk -v a="$1" -v b="$2" -v hz="$(getconf CLK_TCK)" '
		$1 >= a && $1 <= b { if (n++) { dt = ($1 - t) * 1000
			if (dt > 0) { x = ($2 - c) / dt; y = ($3 - i) / dt
				z = ($4 - s) * 1e6 / hz / dt
				if (x > mc) mc = x; if (y > mi) mi = y; if (z > ms) ms = z } }
			t = $1; c = $2; i = $3; s = $4 }
		END { if (n < 2) print "no samples"
		      else printf "worst 0.5 s: CPU some %.0f%%, I/O full %.0f%%, steal %.0f%% (%d samples)\n",
				  mc * 100, mi * 100, ms * 100, n }' "$logs/pressure.log"
}
set_=${RDB_E2E_SET:-check}
case $set_ in
check | long | all) ;;
*) echo "run-e2e.sh: RDB_E2E_SET must be check, long or all, not '$set_'" >&2; exit 2 ;;
esac
times=()
run_t0=$(date +%s%3N)
for t in tests/e2e/*.sh; do
	name=$(basename "$t" .sh)
	if grep -q '^# check-long:' "$t"; then
		[ "$set_" = check ] && continue
	else
		[ "$set_" = long ] && continue
	fi
	rdb_log "e2e: $name"
	# A test needs room for its RAM and disk images: say so plainly
	# rather than fail later with a confusing ENOSPC inside a daemon.
	free_mb=$(df -Pm "$RDB_ROOT/build" | awk 'NR == 2 {print $4}')
	if [ "$free_mb" -lt 3072 ]; then
		rdb_log "FAIL: only $free_mb MiB free under $RDB_ROOT/build (an e2e test needs 3 GiB)"
		fail=$((fail + 1)); failed+=("$name (disk full)")
		continue
	fi
	# A hung test is a failed test: the harness bounds it as a whole too.
	# (tee through a process substitution, not a pipe: a stray background
	# process still holding the test's stdout must not hold up the run)
	t0=$(date +%s%3N)
	timeout --kill-after=10 600 bash "$t" > >(tee "$logs/$name.log") 2>&1
	rc=$?
	t1=$(date +%s%3N)
	times+=("$(printf '%5d s  %s (rc %d)' $(((t1 - t0) / 1000)) "$name" $rc)")
	rdb_log "e2e: $name: rc $rc in $(((t1 - t0) / 1000)) s"
	[ $rc = 0 ] || [ $rc = 77 ] ||
		echo "host pressure during $name: $(pressure_between "$t0" "$(date +%s%3N)")" |
		tee -a "$logs/$name.log"
	case $rc in
	0) pass=$((pass + 1)) ;;
	77) skip=$((skip + 1)) ;;
	*) fail=$((fail + 1)); failed+=("$name (rc $rc)") ;;
	esac
done
for f in "${failed[@]}"; do
	name=${f%% *}
	[ -f "$logs/$name.log" ] || continue
	echo "---- e2e: $name, its last 40 lines (all of it in $logs/$name.log)"
	tail -n 40 "$logs/$name.log"
done
# Where the run's time went (the longest first): what a CI budget needs
echo "---- e2e ($set_): time per test, $(((($(date +%s%3N) - run_t0) / 1000 + 30) / 60)) min in all"
printf '%s\n' "${times[@]}" | sort -rn
[ $fail -eq 0 ] || echo "e2e: failed: ${failed[*]}"
echo "e2e: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]

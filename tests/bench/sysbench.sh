#!/usr/bin/env bash
# MariaDB benchmark -> build/bench/sysbench.json
#
# Debian's sysbench, oltp_read_write, against the MariaDB test guest
# (tools/mkguest-maria.sh: the server with RemusDB's patch,
# remusdb_commit_protection = writes, remusdb.ko), its disk served by
# remusdbd in every row, each row booting the same image fresh:
#   unprotected   attached, never protected: the baseline of the ratios;
#   remus-25      plain Remus, 25 ms epochs;
#   cp-25, cp-50  commit protection, 25 and 50 ms epochs;
#   ckpt-only-25  commit protection's mode with the server's policy off:
#                 checkpoints, nothing waits (nothing safe): the ceiling
#                 of any output-commit scheme here;
#   cp-25-flush2  commit protection with innodb_flush_log_at_trx_commit
#                 = 2: the redo log written at commit, flushed once a
#                 second — under protection the guest's memory reaches
#                 the backup every epoch, so an acknowledged commit
#                 survives a power pull without the flush (durability
#                 moved out of the database: the comparison a DBA makes
#                 is this row against unprotected with the durable
#                 default);
#   peer-semisync MariaDB's own answer: semi-synchronous replication to
#                 a second VM on another host (tests/lib/peer-maria.sh:
#                 binary log with sync_binlog = 1, AFTER_SYNC, never
#                 falling back to asynchronous; the row says if it did);
# every protected row with checkpoint compression.  The rows run in
# SYSBENCH_REPEATS (3) interleaved rounds, each round opening with an
# unprotected row and the run closing with one more (unprotected-end):
# a row's ratio is to the mean of the unprotected rows before and after
# its round (the host drifts), and the summary gives per row the median
# over the rounds and the spread (min, max).  Placement: every round runs
# placed (as docs/performance.md tells operators: the primary's daemon
# and the client on CPU 0, the guest's QEMU on CPU 1 with the backup's
# daemon, another host's, as cluster.sh places it; the peer's standby
# QEMU, another host's, on CPU 0) and in the first round the same rows
# unplaced (names ending -unplaced), unless SYSBENCH_PLACEMENTS says
# otherwise.
#
# Then the failover rows (tests/lib/benchfo.sh: the ledger's 4 clients,
# reconnecting, a 5 s read deadline; the primary's power pulled under
# load): failover-cp-25 (RemusDB, commit protection), failover-remus-25
# (plain Remus) and peer-semisync-failover (the peer, its replica
# promoted by a MaxScale-like monitor with the same 1 s detection as
# RemusDB's failover_timeout_ms, the address moved to it): outage_ms,
# lost_commits, sessions_lost.
#
# Reported per throughput row: transactions/s, latency p50 (from
# sysbench's latency histogram), mean and p99 (ms), the ratio to
# unprotected, CPU shares, and for protected rows the guest's pause and
# pause_share (pause p50 x epochs/s), the pause taken over the measured
# run only (the daemon's per-epoch records whose pause ended inside it;
# pause_ms_p50_ring: its status p50 over its last 4096 pauses, which
# include the boot and the warm-up); daemon_cpu: where each host's
# daemon CPU went, by role (tests/lib/benchcpu.sh), in shares of a CPU
# and ms per epoch; rates and shares are over the run's measured length
# (run_s: its client's start to its end), not the nominal seconds.
# Nothing is asserted: a benchmark.
#
#   SYSBENCH_SECONDS (default 20), SYSBENCH_THREADS (default 8),
#   SYSBENCH_REPEATS (3), SYSBENCH_PLACEMENTS ("placed unplaced"),
#   SYSBENCH_FAILOVER (1: the failover rows; they run placed)
set -u
cd "$(dirname "$0")/../.."
. tests/lib/common.sh
. tests/lib/netns.sh
. tests/lib/cluster.sh
. tests/lib/peer-maria.sh
. tests/lib/benchfo.sh
. tests/lib/benchcpu.sh
rdb_require_root
secs=${SYSBENCH_SECONDS:-20}
threads=${SYSBENCH_THREADS:-8}
repeats=${SYSBENCH_REPEATS:-3}
out=build/bench
mkdir -p "$out"
command -v sysbench >/dev/null || rdb_fail "sysbench missing (tools/setup-deps.sh)"
CL_RAM_MB=512
cl_use_maria_guest || rdb_fail "MariaDB guest build failed"
trap 'cluster_down sysbench' EXIT
rows=()
fo_rows=()
pfx=()	# the client's placement

sb() {	# sb SECONDS ARGS...: sysbench oltp_read_write against the guest
	local t=$1
	shift
	timeout $((t + 60)) ip netns exec "$(netns_name sysbench cli)" "${pfx[@]}" sysbench oltp_read_write \
		--db-driver=mysql --mysql-host="$CL_GUEST_IP" --mysql-user=root \
		--mysql-db=sbtest --tables="$CL_SB_TABLES" --table-size="$CL_SB_ROWS" \
		--threads="$threads" --time="$t" --percentile=99 "$@"
}

hist_p50() {	# hist_p50 FILE: the median of sysbench's latency histogram
	# (rows "VALUE |*** COUNT", VALUE the bucket's latency in ms)
	awk '$2 ~ /^\|/ && $1 ~ /^[0-9.]+$/ && $NF ~ /^[0-9]+$/ { v[n] = $1; c[n++] = $NF; t += $NF }
	     END { for (i = 0; i < n; i++) { s += c[i]; if (2 * s >= t) { print v[i]; exit } } }' "$1"
}

my_cli() {	# my_cli SQL: on the guest's server (at CL_GUEST_IP) from the client host
	ip netns exec "$(netns_name sysbench cli)" mariadb -h "$CL_GUEST_IP" -u root -N -B -e "$1"
}

# one NAME MODE(none|plain|commit-protection|peer-semisync) CHECKPOINT_MS
#     ROUND PLACEMENT(placed|unplaced) [POLICY] [FLUSH]
one() {
	local name=$1 mode=$2 ckpt=$3 round=$4 place=$5 policy=${6:-} flush=${7:-1}
	local dir s0 s1 k1 q d b q0 d0 b0 q1 d1 b1 ss0 ss1 t0 t1 rname=$1
	local c0p c0b c1p c1b dcpu=null
	[ "$place" = unplaced ] && rname=$name-unplaced
	dir=$out/sysbench-$rname-r$round
	export CL_COMPRESSION=true CL_MODE=$mode
	case $mode in none|peer-*) CL_MODE=plain ;; esac
	unset CL_DAEMON_CPUS CL_GUEST_CPUS PEER_STANDBY_CPUS
	pfx=()
	[ "$place" = placed ] &&
		export CL_DAEMON_CPUS=0 CL_GUEST_CPUS=1 PEER_STANDBY_CPUS=0 && pfx=(taskset -c 0)
	rdb_log "bench: sysbench, $rname, round $round"
	rm -rf "$dir"
	mkdir -p "$dir"
	case $mode in
	none) { cluster_hosts_up sysbench && CL_NO_PROTECT=1 cluster_vm_up "$ckpt"; } ||
		rdb_fail "setup failed" ;;
	peer-semisync) peer_maria_up sysbench || rdb_fail "the semi-sync peer did not come up" ;;
	*) { cluster_hosts_up sysbench && cluster_vm_up "$ckpt"; } || rdb_fail "setup failed" ;;
	esac
	cl_wait_maria || rdb_fail "MariaDB not reachable"
	if [ -n "$policy" ]; then
		my_cli "SET GLOBAL remusdb_commit_protection = '$policy'" ||
			rdb_fail "cannot set the policy"
	fi
	if [ "$flush" != 1 ]; then
		my_cli "SET GLOBAL innodb_flush_log_at_trx_commit = $flush" ||
			rdb_fail "cannot set innodb_flush_log_at_trx_commit"
	fi
	sb 5 run >/dev/null 2>&1		# warm-up, not measured
	s0='{"vms":[{}]}'
	[ "$mode" = none ] || [ "$mode" = peer-semisync ] || s0=$(cl_ctl pri status "$CL_VM" --json)
	[ "$mode" = peer-semisync ] &&
		ss0=$(peer_my_status "$PEER_MARIA_PRI" Rpl_semi_sync_master_no_tx)
	q=$(cat "$CL_DIR/pri/qemu.pid") d=$(cat "$CL_DIR/pri/remusdbd.pid")
	if [ "$mode" = peer-semisync ]; then
		b=$(cat "$CL_DIR/pr2/vm2.qemu.pid")	# the standby's QEMU, in the backup's column
	else
		b=$(cat "$CL_DIR/bak/remusdbd.pid")
	fi
	q0=$(bcpu_ticks "$q") d0=$(bcpu_ticks "$d") b0=$(bcpu_ticks "$b")
	c0p=$(bcpu_snap sysbench pri) c0b=$(bcpu_snap sysbench bak)
	t0=$(date +%s.%N)
	sb "$secs" --histogram=on run > "$dir/sysbench.out" 2>&1 ||
		rdb_fail "sysbench failed ($rname): $(tail -3 "$dir/sysbench.out")"
	t1=$(date +%s.%N)
	# the run's own length: a row outlasts its nominal seconds by its
	# last transactions and the client's start (the shares divide by it)
	el=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	q1=$(bcpu_ticks "$q") d1=$(bcpu_ticks "$d") b1=$(bcpu_ticks "$b")
	c1p=$(bcpu_snap sysbench pri) c1b=$(bcpu_snap sysbench bak)
	s1='{"vms":[{}]}' k1='{"vms":[{}]}' ss1='null'
	echo '{}' > "$dir/epochs.json"
	if [ "$mode" = peer-semisync ]; then
		# asynchronous meanwhile (a timeout): the row is not the peer's
		ss1=$(jq -n --arg on "$(peer_my_status "$PEER_MARIA_PRI" Rpl_semi_sync_master_status)" \
			--arg no0 "$ss0" --arg no1 "$(peer_my_status "$PEER_MARIA_PRI" Rpl_semi_sync_master_no_tx)" \
			--arg yes "$(peer_my_status "$PEER_MARIA_PRI" Rpl_semi_sync_master_yes_tx)" \
			--arg wait "$(peer_my_status "$PEER_MARIA_PRI" Rpl_semi_sync_master_tx_avg_wait_time)" '
			{ status: $on, async_commits: (($no1 | tonumber) - ($no0 | tonumber)),
			  semisync_commits: ($yes | tonumber), avg_wait_us: ($wait | tonumber) }')
		[ "$(jq .async_commits <<<"$ss1")" = 0 ] && [ "$(jq -r .status <<<"$ss1")" = ON ] ||
			rdb_log "WARNING: $rname round $round: semi-sync fell back to asynchronous ($ss1)"
	elif [ "$mode" != none ]; then
		bcpu_protected_end "$dir" "$s0" "$c0p" "$c0b" "$c1p" "$c1b" "$el"
		s1=$BCPU_S1 k1=$BCPU_K1 dcpu=$BCPU_DCPU
	fi
	jq -n -L tests/lib --arg name "$rname" --arg base "$name" --arg mode "$mode" --argjson ckpt "$ckpt" \
		--argjson round "$round" --arg place "$place" --argjson flush "$flush" \
		--argjson k1 "$k1" --arg policy "${policy:-writes}" --argjson semisync "$ss1" \
		--argjson s0 "$s0" --argjson s1 "$s1" --argjson secs "$el" \
		--slurpfile ep "$dir/epochs.json" --argjson t0 "$t0" --argjson t1 "$t1" --argjson dcpu "$dcpu" \
		--argjson hz "$(getconf CLK_TCK)" \
		--argjson qc $((q1 - q0)) --argjson dc $((d1 - d0)) --argjson bc $((b1 - b0)) \
		--arg tps "$(sed -n 's/^ *transactions: *[0-9]* *(\([0-9.]*\) per sec.*/\1/p' "$dir/sysbench.out")" \
		--arg p50 "$(hist_p50 "$dir/sysbench.out")" \
		--arg avg "$(sed -n 's/^ *avg: *\([0-9.]*\).*/\1/p' "$dir/sysbench.out" | head -n 1)" \
		--arg p99 "$(sed -n 's/^ *99th percentile: *\([0-9.]*\).*/\1/p' "$dir/sysbench.out" | head -n 1)" '
		include "bench";
		($mode != "none" and ($mode | startswith("peer-") | not)) as $p |
		{ name: $name, row: $base, round: $round, placement: $place,
		  mode: $mode, policy: $policy, innodb_flush_log_at_trx_commit: $flush,
		  epoch_ms: (if $p then $ckpt else null end),
		  tps: ($tps | tonumber), latency_ms_p50: ($p50 | tonumber),
		  latency_ms_mean: ($avg | tonumber),
		  latency_ms_p99: ($p99 | tonumber), run_s: $secs } +
		checkpoint_fields($p; $s0; $s1; $k1; $ep[0]; $t0; $t1; $secs) + {
		  cpu_share: { guest_qemu: ($qc / $hz / $secs), primary_remusdbd: ($dc / $hz / $secs),
			       (if $mode == "peer-semisync" then "standby_qemu" else "backup_remusdbd" end):
				($bc / $hz / $secs) },
		  daemon_cpu: $dcpu,
		  semisync: $semisync }' \
		> "$dir/row.json" || rdb_fail "no result for $rname"
	cluster_down sysbench
	rows+=("$dir/row.json")
}

# ---- failover rows ----
fo_peer() {	# the monitor promoted the replica and moved the address
	local pull=$1
	wait_pid 60 "$PEER_MON" || return 1
	grep -q '^error' "$CL_DIR/monitor.txt" && { cat "$CL_DIR/monitor.txt" >&2; return 1; }
	awk -v p="$pull" '{ printf "%s\"%s\": %d", (NR > 1 ? ", " : "{ "), $1, $2 - p } END { print " }" }' \
		"$CL_DIR/monitor.txt" > "$CL_DIR/fo-extra.json"
	# a monitor that saw the primary down before the pull promoted a
	# second primary: not a row of this peer
	[ "$(jq '.down_ms >= 0' "$CL_DIR/fo-extra.json")" = true ] ||
		{ rdb_log "the monitor declared the primary down before the pull"; return 1; }
	jq --argjson d "${PEER_MARIA_DETECT_MS:-1000}" '. + { detect_budget_ms: $d }' \
		"$CL_DIR/fo-extra.json" > "$CL_DIR/fo-extra.json.tmp" &&
		mv "$CL_DIR/fo-extra.json.tmp" "$CL_DIR/fo-extra.json"
}

fo() {	# fo NAME MODE(commit-protection|plain|peer-semisync)
	local name=$1 mode=$2 dir=$out/sysbench-$1
	unset CL_DAEMON_CPUS CL_GUEST_CPUS PEER_STANDBY_CPUS
	export CL_DAEMON_CPUS=0 CL_GUEST_CPUS=1 PEER_STANDBY_CPUS=0
	export CL_COMPRESSION=true CL_MODE=$mode
	rdb_log "bench: sysbench, failover: $name"
	rm -rf "$dir"
	mkdir -p "$dir"
	if [ "$mode" = peer-semisync ]; then
		CL_MODE=plain
		peer_maria_up sysbench || rdb_fail "the semi-sync peer did not come up"
		peer_maria_monitor "$CL_DIR/monitor.txt" > "$CL_DIR/monitor.log" 2>&1 &
		PEER_MON=$!
		bfo_row "$name" mariadb "$PEER_MARIA_PRI" "$dir/row.json" fo_peer "$CL_DIR/fo-extra.json" ||
			rdb_fail "$name failed (logs in $CL_DIR)"
	else
		{ cluster_hosts_up sysbench && cluster_vm_up 25; } || rdb_fail "setup failed"
		cl_wait_maria || rdb_fail "MariaDB not reachable"
		bfo_row "$name" mariadb "$CL_GUEST_IP" "$dir/row.json" bfo_remus_after "$CL_DIR/fo-extra.json" ||
			rdb_fail "$name failed (logs in $CL_DIR)"
	fi
	jq --arg mode "$mode" '. + { mode: $mode }' "$dir/row.json" > "$dir/row.json.tmp" &&
		mv "$dir/row.json.tmp" "$dir/row.json"
	# the clients' journals and what the check said, kept with the row
	cp -r "$CL_DIR/ledger-$name" "$dir/journal" && cp "$CL_DIR/ledger-$name".*.log "$dir/"
	cluster_down sysbench
	fo_rows+=("$dir/row.json")
}

read -r -a places <<<"${SYSBENCH_PLACEMENTS-placed unplaced}"
# The first row of a run on a host idle till then ran at less than half
# the speed of the same row a round later (8.3 against 18.9 tps): one
# unprotected row first, not measured, warms the host.
one warm-up none 25 0 placed
rows=()
for ((r = 1; r <= repeats; r++)); do
	for p in "${places[@]}"; do
		[ "$p" = unplaced ] && [ "$r" != 1 ] && continue
		one unprotected none 25 "$r" "$p"
		one remus-25 plain 25 "$r" "$p"
		one peer-semisync peer-semisync 25 "$r" "$p"
		one cp-25 commit-protection 25 "$r" "$p"
		one cp-50 commit-protection 50 "$r" "$p"
		one cp-25-flush2 commit-protection 25 "$r" "$p" "" 2
		one ckpt-only-25 commit-protection 25 "$r" "$p" off
	done
done
for p in "${places[@]}"; do
	one unprotected-end none 25 $((repeats + 1)) "$p"
done
if [ "${SYSBENCH_FAILOVER:-1}" = 1 ]; then
	fo failover-cp-25 commit-protection
	fo failover-remus-25 plain
	fo peer-semisync-failover peer-semisync
fi
[ ${#rows[@]} -gt 0 ] || rows=(/dev/null)
[ ${#fo_rows[@]} -gt 0 ] || fo_rows=(/dev/null)

jq -n -L tests/lib --argjson secs "$secs" --argjson threads "$threads" --argjson repeats "$repeats" \
	--slurpfile rows <(cat "${rows[@]}") --slurpfile fo <(cat "${fo_rows[@]}") '
	include "bench";
	# the unprotected rows opening round r and the next round that has
	# one (the row closing the run at the latest)
	def base($r; $p): ($rows | map(select(.mode == "none" and .placement == $p))) as $u |
		($u | map(select(.round > $r) | .round) | min) as $next |
		$u | map(select(.round == $r or .round == $next));
	($rows | map(. as $x | base($x.round; $x.placement) as $b |
		($b | map(.tps) | add / length) as $bt |
		($b | map(.latency_ms_p50) | add / length) as $bl |
		. + { ratio: (.tps / $bt), tps_ratio: (.tps / $bt), baseline_tps: $bt,
		      latency_p50_ratio: (.latency_ms_p50 / $bl),
		      baseline_drift: (($b | map(.tps) | max - min) / $bt) })) as $all |
	{ workload: "sysbench oltp_read_write, \($threads) threads, \($secs) s per row after a 5 s warm-up, \($repeats) interleaved rounds; the guest under TCG; the patched server, remusdb_commit_protection = writes",
	  baseline: "per round: the mean of the unprotected rows opening it and the next round that has one (the last row of the run closes the last round); baseline_drift = (max - min) / mean of those two",
	  placement: "placed: the primary remusdbd and sysbench on CPU 0, the guest QEMU and the backup remusdbd (another host) on CPU 1, the peer standby QEMU (another host) on CPU 0; unplaced: nothing pinned",
	  rows: $all,
	  summary: ($all | map(select(.name | endswith("-end") or endswith("-end-unplaced") | not)) |
		group_by(.name) | map({ name: .[0].name, row: .[0].row, placement: .[0].placement,
			mode: .[0].mode, rounds: length,
			tps: (map(.tps) | median), ratio: (map(.ratio) | median),
			ratio_min: (map(.ratio) | min), ratio_max: (map(.ratio) | max),
			latency_ms_p50: (map(.latency_ms_p50) | median),
			latency_ms_p99: (map(.latency_ms_p99) | median),
			pause_ms_p50: (map(.pause_ms_p50) | nmedian),
			pause_share: (map(.pause_share) | nmedian),
			baseline_drift_max: (map(.baseline_drift) | max) })),
	  failover: $fo }' > "$out/sysbench.json" || rdb_fail "could not write sysbench.json"
jq -r '.summary[] | "\(.name): \(.tps | . * 10 | round / 10) tps, x\(.ratio | . * 100 | round / 100) (\(.ratio_min | . * 100 | round / 100)-\(.ratio_max | . * 100 | round / 100) over \(.rounds)), latency p50 \(.latency_ms_p50) ms, p99 \(.latency_ms_p99) ms\(if .pause_share then ", paused \(.pause_share * 1000 | round / 10)% of the time" else "" end)"' "$out/sysbench.json"
jq -r '.failover[] | "\(.name): outage \(.outage_ms) ms, \(.lost_commits) of \(.acked_commits) acknowledged commits lost, \(.sessions_lost) of \(.clients) sessions lost"' "$out/sysbench.json"
jq -r 'select(.summary | length > 0) | "baseline: drift up to \(.summary | map(.baseline_drift_max) | max * 100 | round)% between a round'"'"'s unprotected rows"' "$out/sysbench.json"
echo "bench: $out/sysbench.json"

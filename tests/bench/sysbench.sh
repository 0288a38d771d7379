#!/usr/bin/env bash
# MariaDB benchmark -> build/bench/sysbench.json
#
# Debian's sysbench, oltp_read_write, against the MariaDB test guest
# (tools/mkguest-maria.sh: the server with RemusDB's patch,
# remusdb_commit_protection = writes, remusdb.ko), its disk served by
# remusdbd in every row, all rows in one run, each booting the same image
# fresh:
#   unprotected   attached, never protected: the baseline of the ratios,
#                 run first and again last (unprotected-end); ratios are
#                 to their mean, baseline_drift is their spread;
#   remus-25      plain Remus, 25 ms epochs;
#   cp-25, cp-50  commit protection, 25 and 50 ms epochs;
#   ckpt-only-25  commit protection's mode with the server's policy off:
#                 checkpoints, nothing waits (nothing safe): the ceiling
#                 of any output-commit scheme here;
# every protected row with checkpoint compression.  Reported per row:
# transactions/s, latency p50 (from sysbench's latency histogram), mean
# and p99 (ms), the ratio to unprotected, and for protected rows the guest's
# pause and pause_share (pause p50 x epochs/s).  Nothing is asserted.
#
#   SYSBENCH_SECONDS (default 20), SYSBENCH_THREADS (default 8)
set -u
cd "$(dirname "$0")/../.."
. tests/lib/common.sh
. tests/lib/netns.sh
. tests/lib/cluster.sh
rdb_require_root
secs=${SYSBENCH_SECONDS:-20}
threads=${SYSBENCH_THREADS:-8}
out=build/bench
mkdir -p "$out"
command -v sysbench >/dev/null || rdb_fail "sysbench missing (tools/setup-deps.sh)"
CL_RAM_MB=512
cl_use_maria_guest || rdb_fail "MariaDB guest build failed"
trap 'cluster_down sysbench' EXIT
rows=()

sb() {	# sb SECONDS ARGS...: sysbench oltp_read_write against the guest
	local t=$1
	shift
	timeout $((t + 60)) ip netns exec "$(netns_name sysbench cli)" sysbench oltp_read_write \
		--db-driver=mysql --mysql-host="$CL_GUEST_IP" --mysql-user=root \
		--mysql-db=sbtest --tables="$CL_SB_TABLES" --table-size="$CL_SB_ROWS" \
		--threads="$threads" --time="$t" --percentile=99 "$@"
}

hist_p50() {	# hist_p50 FILE: the median of sysbench's latency histogram
	# (rows "VALUE |*** COUNT", VALUE the bucket's latency in ms)
	awk '$2 ~ /^\|/ && $1 ~ /^[0-9.]+$/ && $NF ~ /^[0-9]+$/ { v[n] = $1; c[n++] = $NF; t += $NF }
	     END { for (i = 0; i < n; i++) { s += c[i]; if (2 * s >= t) { print v[i]; exit } } }' "$1"
}

one() {	# name mode(none|plain|commit-protection) checkpoint_ms [policy]
	local name=$1 mode=$2 ckpt=$3 policy=${4:-} dir s0 s1 k0 k1
	dir=$out/sysbench-$name
	export CL_COMPRESSION=true CL_MODE=$mode
	[ "$mode" = none ] && CL_MODE=plain
	rdb_log "bench: sysbench, $name"
	rm -rf "$dir"
	mkdir -p "$dir"
	if [ "$mode" != none ]; then
		cluster_hosts_up sysbench && cluster_vm_up "$ckpt" || rdb_fail "setup failed"
	else
		cluster_hosts_up sysbench && CL_NO_PROTECT=1 cluster_vm_up "$ckpt" ||
			rdb_fail "setup failed"
	fi
	cl_wait_maria || rdb_fail "MariaDB not reachable"
	if [ -n "$policy" ]; then
		ip netns exec "$(netns_name sysbench cli)" mariadb -h "$CL_GUEST_IP" -u root \
			-e "SET GLOBAL remusdb_commit_protection = '$policy'" ||
			rdb_fail "cannot set the policy"
	fi
	sb 5 run >/dev/null 2>&1		# warm-up, not measured
	s0=$(cl_ctl pri status "$CL_VM" --json)
	k0=$(cl_status bak "$CL_VM" --json 2>/dev/null || echo '{"vms":[{}]}')
	sb "$secs" --histogram=on run > "$dir/sysbench.out" 2>&1 ||
		rdb_fail "sysbench failed ($name): $(tail -3 "$dir/sysbench.out")"
	s1=$(cl_ctl pri status "$CL_VM" --json)
	k1=$(cl_status bak "$CL_VM" --json 2>/dev/null || echo '{"vms":[{}]}')
	jq -n --arg name "$name" --arg mode "$mode" --argjson ckpt "$ckpt" \
		--argjson k1 "$k1" --arg policy "${policy:-writes}" \
		--argjson s0 "$s0" --argjson s1 "$s1" --argjson secs "$secs" \
		--arg tps "$(sed -n 's/^ *transactions: *[0-9]* *(\([0-9.]*\) per sec.*/\1/p' "$dir/sysbench.out")" \
		--arg p50 "$(hist_p50 "$dir/sysbench.out")" \
		--arg avg "$(sed -n 's/^ *avg: *\([0-9.]*\).*/\1/p' "$dir/sysbench.out" | head -n 1)" \
		--arg p99 "$(sed -n 's/^ *99th percentile: *\([0-9.]*\).*/\1/p' "$dir/sysbench.out" | head -n 1)" '
		($s0.vms[0]) as $a | ($s1.vms[0]) as $b | ($mode != "none") as $p |
		(($b.checkpoints // 0) - ($a.checkpoints // 0)) as $epochs |
		{ name: $name, mode: $mode, policy: $policy,
		  epoch_ms: (if $p then $ckpt else null end),
		  tps: ($tps | tonumber), latency_ms_p50: ($p50 | tonumber),
		  latency_ms_mean: ($avg | tonumber),
		  latency_ms_p99: ($p99 | tonumber),
		  epochs_per_s: (if $p then $epochs / $secs else null end),
		  pause_ms_p50: (if $p then $b.pause_ms_p50 else null end),
		  pause_share: (if $p then ($b.pause_ms_p50 * $epochs / $secs / 1000) else null end),
		  ack_ms_p50: (if $p then $b.ack_ms_p50 else null end),
		  ack_ms_p99: (if $p then $b.ack_ms_p99 else null end),
		  backup_commit_ms_p50: ($k1.vms[0].commit_ms_p50 // null),
		  backup_commit_ms_p99: ($k1.vms[0].commit_ms_p99 // null) }' \
		> "$dir/row.json" || rdb_fail "no result for $name"
	cluster_down sysbench
	rows+=("$dir/row.json")
}

one unprotected none 25
one remus-25 plain 25
one cp-25 commit-protection 25
one cp-50 commit-protection 50
one ckpt-only-25 commit-protection 25 off
one unprotected-end none 25

jq -s --argjson secs "$secs" --argjson threads "$threads" '
	(map(select(.mode == "none"))) as $u |
	{ tps: ($u | map(.tps) | add / length),
	  latency_ms_p50: ($u | map(.latency_ms_p50) | add / length),
	  latency_ms_mean: ($u | map(.latency_ms_mean) | add / length),
	  drift: (($u | map(.tps) | max - min) / ($u | map(.tps) | add / length)) } as $base |
	{ workload: "sysbench oltp_read_write, \($threads) threads, \($secs) s per row after a 5 s warm-up; the guest under TCG; the patched server, remusdb_commit_protection = writes",
	  baseline: "the mean of the unprotected rows, run first and last; baseline_drift = (max - min) / mean of them, how far the host itself drifted over the run",
	  baseline_drift: $base.drift,
	  rows: map(. + { tps_ratio: (.tps / $base.tps),
			  latency_p50_ratio: (.latency_ms_p50 / $base.latency_ms_p50),
			  latency_mean_ratio: (.latency_ms_mean / $base.latency_ms_mean) }) }' \
	"${rows[@]}" > "$out/sysbench.json" || rdb_fail "could not write sysbench.json"
jq -r '.rows[] | "\(.name): \(.tps | . * 10 | round / 10) tps (x\(.tps_ratio | . * 100 | round / 100)), latency p50 \(.latency_ms_p50) ms, mean \(.latency_ms_mean) ms, p99 \(.latency_ms_p99) ms\(if .pause_share then ", paused \(.pause_share * 1000 | round / 10)% of the time" else "" end)"' "$out/sysbench.json"
jq -r '"baseline: drift \(.baseline_drift * 100 | round)% between the first and last unprotected rows"' "$out/sysbench.json"
echo "bench: $out/sysbench.json"

#!/usr/bin/env bash
# PostgreSQL benchmark -> build/bench/pgbench.json
#
# pgbench against the PostgreSQL test guest (tools/mkguest-pg.sh, the
# server with RemusDB's patch, remusdb.commit_protection = writes, and
# remusdb.ko), its disk served by remusdbd in every row, all rows in one
# run, each booting the same image fresh:
#   unprotected   the VM attached (disk and NIC through the daemon), never
#                 protected: the baseline of every ratio, run first and
#                 again last in its group (unprotected-end-*); ratios are
#                 to their mean, and their spread (baseline_drift) says
#                 how much the host itself moved meanwhile;
#   remus-25      plain Remus, 25 ms epochs (every output packet waits for
#                 its epoch);
#   cp-25, cp-50  commit protection, 25 and 50 ms epochs (only commit
#                 acknowledgements wait, with the rest of their flow);
#   ckpt-only-25  commit protection's mode with the server's policy off:
#                 checkpoints run, nothing waits (and nothing is safe) —
#                 the ceiling of any output-commit scheme on this host,
#                 so cp-25 / ckpt-only-25 is what holding commit
#                 acknowledgements costs, and ckpt-only-25 / unprotected
#                 what checkpointing itself costs;
# at 4 and at 16 clients, TPC-B-like; and select-only (-S) at 4 clients,
# unprotected and cp-25.  Every protected row has checkpoint compression
# on.  The database is pgbench scale 16: with fewer branches than
# clients, pgbench measures one row's lock, held across round trips.
#
# Reported per row: tps, latency p50/p99/mean (ms, from pgbench's
# per-transaction log), the ratio to the unprotected row of the same
# workload and client count, and for protected rows the epoch rate, the
# guest's pause and pause_share: the fraction of the guest's time spent
# paused for checkpoints (pause p50 x epochs/s), which caps any protected
# mode at about 1 - pause_share of a CPU-bound unprotected guest;
# ack_ms: from the end of a checkpoint's pause to the backup's ACK of it,
# what held output waits beyond its epoch (p50/p99).  Goals
# are checked and reported, never asserted (a benchmark, not a test).
#
#   PGBENCH_SECONDS (default 20)
set -u
cd "$(dirname "$0")/../.."
. tests/lib/common.sh
. tests/lib/netns.sh
. tests/lib/cluster.sh
rdb_require_root
secs=${PGBENCH_SECONDS:-20}
out=build/bench
mkdir -p "$out"
CL_RAM_MB=512
CL_PG_SCALE=16
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
trap 'cluster_down pgbench' EXIT
rows=()

cpu_ticks() {	# utime + stime of a process and its threads
	awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}

one() {	# name mode(none|plain|commit-protection) checkpoint_ms clients [-S] [policy]
	local name=$1 mode=$2 ckpt=$3 clients=$4 sel=${5:-} policy=${6:-} dir s0 s1
	local q d b q0 d0 b0 q1 d1 b1 k1
	dir=$out/pgbench-$name
	export CL_COMPRESSION=true CL_MODE=$mode
	[ "$mode" = none ] && CL_MODE=plain
	rdb_log "bench: pgbench, $name"
	rm -rf "$dir"
	mkdir -p "$dir"
	if [ "$mode" != none ]; then
		cluster_hosts_up pgbench && cluster_vm_up "$ckpt" || rdb_fail "setup failed"
	else
		cluster_hosts_up pgbench && CL_NO_PROTECT=1 cluster_vm_up "$ckpt" ||
			rdb_fail "setup failed"
	fi
	cl_wait_pg bench || rdb_fail "PostgreSQL not reachable"
	if [ -n "$policy" ]; then
		ip netns exec "$(netns_name pgbench cli)" "$PGBIN/psql" -X -q -h "$CL_GUEST_IP" \
			-U postgres -d postgres -c "ALTER SYSTEM SET remusdb.commit_protection = '$policy'" \
			-c "SELECT pg_reload_conf()" >/dev/null || rdb_fail "cannot set the policy"
	fi
	# warm-up: the same load, not measured
	ip netns exec "$(netns_name pgbench cli)" "$PGBIN/pgbench" -h "$CL_GUEST_IP" \
		-U postgres -n $sel -c "$clients" -j 2 -T 5 bench >/dev/null 2>&1
	s0=$(cl_ctl pri status "$CL_VM" --json)
	# CPU seconds of the guest's QEMU and both daemons during the run:
	# on this 2-core host they share the cores with the guest
	q=$(cat "$CL_DIR/pri/qemu.pid") d=$(cat "$CL_DIR/pri/remusdbd.pid") b=$(cat "$CL_DIR/bak/remusdbd.pid")
	q0=$(cpu_ticks "$q") d0=$(cpu_ticks "$d") b0=$(cpu_ticks "$b")
	(cd "$dir" && timeout $((secs + 60)) ip netns exec "$(netns_name pgbench cli)" \
		"$PGBIN/pgbench" -h "$CL_GUEST_IP" -U postgres -n $sel -c "$clients" -j 2 \
		-T "$secs" -l --log-prefix=txn bench > pgbench.out 2>&1) ||
		rdb_fail "pgbench failed ($name): $(tail -3 "$dir/pgbench.out")"
	q1=$(cpu_ticks "$q") d1=$(cpu_ticks "$d") b1=$(cpu_ticks "$b")
	s1=$(cl_ctl pri status "$CL_VM" --json)
	k1=$(cl_status bak "$CL_VM" --json 2>/dev/null || echo '{"vms":[{}]}')
	# field 3 of pgbench's log: the transaction's latency in microseconds
	cat "$dir"/txn.* | awk '{print $3}' | sort -n > "$dir/lat.txt"
	jq -n --arg name "$name" --arg mode "$mode" --argjson ckpt "$ckpt" \
		--argjson clients "$clients" --arg sel "$sel" \
		--argjson s0 "$s0" --argjson s1 "$s1" --rawfile lat "$dir/lat.txt" \
		--arg tps "$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$dir/pgbench.out" | head -n 1)" \
		--argjson secs "$secs" --argjson hz "$(getconf CLK_TCK)" \
		--argjson qc $((q1 - q0)) --argjson dc $((d1 - d0)) --argjson bc $((b1 - b0)) \
		--arg policy "${policy:-writes}" --argjson k1 "$k1" '
		($lat | split("\n") | map(select(length > 0) | tonumber)) as $l |
		($l | length) as $n |
		($s0.vms[0]) as $a | ($s1.vms[0]) as $b |
		($mode != "none") as $p |
		(($b.checkpoints // 0) - ($a.checkpoints // 0)) as $epochs |
		{ name: $name, mode: $mode, clients: $clients, policy: $policy,
		  workload: (if $sel == "-S" then "select-only" else "tpcb-like" end),
		  epoch_ms: (if $p then $ckpt else null end),
		  tps: ($tps | tonumber), transactions: $n,
		  latency_ms_p50: ($l[($n * 0.5 | floor)] / 1000),
		  latency_ms_p99: ($l[($n * 0.99 | floor)] / 1000),
		  latency_ms_mean: (($l | add) / $n / 1000),
		  epochs_per_s: (if $p then $epochs / $secs else null end),
		  pause_ms_p50: (if $p then $b.pause_ms_p50 else null end),
		  pause_ms_p99: (if $p then $b.pause_ms_p99 else null end),
		  pause_share: (if $p then ($b.pause_ms_p50 * $epochs / $secs / 1000) else null end),
		  ack_ms_p50: (if $p then $b.ack_ms_p50 else null end),
		  ack_ms_p99: (if $p then $b.ack_ms_p99 else null end),
		  backup_commit_ms_p50: ($k1.vms[0].commit_ms_p50 // null),
		  backup_commit_ms_p99: ($k1.vms[0].commit_ms_p99 // null),
		  cpu_share: { guest_qemu: ($qc / $hz / $secs), primary_remusdbd: ($dc / $hz / $secs),
			       backup_remusdbd: ($bc / $hz / $secs) },
		  replication_bytes_per_epoch: (if $p and $epochs > 0
			then (($b.bytes - $a.bytes) / $epochs | floor) else null end),
		  output: (if $b.commit_protection then {
			released_at_once: ($b.commit_protection.released_at_once.frames -
					   ($a.commit_protection.released_at_once.frames // 0)),
			held_marked: ($b.commit_protection.held_marked.frames -
				      ($a.commit_protection.held_marked.frames // 0)),
			held_behind: ($b.commit_protection.held_behind.frames -
				      ($a.commit_protection.held_behind.frames // 0)),
			held_ack: ($b.commit_protection.held_ack -
				   ($a.commit_protection.held_ack // 0)) } else null end) }' \
		> "$dir/row.json" || rdb_fail "no result for $name"
	cluster_down pgbench
	rows+=("$dir/row.json")
}

for c in 4 16; do
	one unprotected-c$c none 25 $c
	one remus-25-c$c plain 25 $c
	one cp-25-c$c commit-protection 25 $c
	one cp-50-c$c commit-protection 50 $c
	one ckpt-only-25-c$c commit-protection 25 $c "" off
	one unprotected-end-c$c none 25 $c
done
one unprotected-select-c4 none 25 4 -S
one cp-25-select-c4 commit-protection 25 4 -S
one unprotected-end-select-c4 none 25 4 -S

jq -s --argjson secs "$secs" '
	. as $all |
	def base($r): $all | map(select(.mode == "none" and .clients == $r.clients
					and .workload == $r.workload)) |
		{ tps: (map(.tps) | add / length),
		  latency_ms_p50: (map(.latency_ms_p50) | add / length),
		  drift: ((map(.tps) | max - min) / (map(.tps) | add / length)) };
	(map(. + (base(.) as $b | { tps_ratio: (.tps / $b.tps),
		latency_p50_ratio: (.latency_ms_p50 / $b.latency_ms_p50),
		baseline_tps: $b.tps, baseline_drift: $b.drift }))) as $rows |
	{ workload: "pgbench (scale 16), \($secs) s per row after a 5 s warm-up; the guest under TCG; the patched server, remusdb.commit_protection = writes",
	  rows: $rows,
	  baseline: "the mean of the unprotected rows of the same workload and client count, run first and last in their group; baseline_drift = (max - min) / mean of them, how far the host itself drifted over the group",
	  decomposition: ($rows | (map({ key: .name, value: . }) | from_entries) as $r |
	    [4, 16] | map(tostring) | map(. as $c | {
	      clients: ($c | tonumber),
	      checkpointing: $r["ckpt-only-25-c" + $c].tps_ratio,
	      holding_commit_acks: ($r["cp-25-c" + $c].tps / $r["ckpt-only-25-c" + $c].tps),
	      pause_share: $r["ckpt-only-25-c" + $c].pause_share,
	      guest_cpu_lost: (1 - $r["ckpt-only-25-c" + $c].cpu_share.guest_qemu /
			       $r["unprotected-c" + $c].cpu_share.guest_qemu) })),
	  goals: ($rows | (map({ key: .name, value: .tps_ratio }) | from_entries) as $r | [
	    { goal: "commit protection, 16 clients, 50 ms epochs >= 0.9x unprotected", ratio: $r["cp-50-c16"], met: ($r["cp-50-c16"] >= 0.9) },
	    { goal: "commit protection, 16 clients, 25 ms epochs >= 0.85x unprotected", ratio: $r["cp-25-c16"], met: ($r["cp-25-c16"] >= 0.85) },
	    { goal: "commit protection, 4 clients, 25 ms epochs >= 0.7x unprotected", ratio: $r["cp-25-c4"], met: ($r["cp-25-c4"] >= 0.7) },
	    { goal: "select-only, commit protection (writes) >= 0.95x unprotected", ratio: $r["cp-25-select-c4"], met: ($r["cp-25-select-c4"] >= 0.95) } ]) }' \
	"${rows[@]}" > "$out/pgbench.json" || rdb_fail "could not write pgbench.json"
jq -r '.rows[] | "\(.name): \(.tps | . * 10 | round / 10) tps (x\(.tps_ratio | . * 100 | round / 100)), latency p50 \(.latency_ms_p50 | . * 10 | round / 10) ms p99 \(.latency_ms_p99 | . * 10 | round / 10) ms\(if .pause_share then ", paused \(.pause_share * 1000 | round / 10)% of the time" else "" end)"' "$out/pgbench.json"
jq -r '.rows[] | select(.mode == "none") | "baseline \(.clients) clients \(.workload): drift \(.baseline_drift * 100 | round)% between the first and last unprotected rows"' "$out/pgbench.json" | sort -u
jq -r '.goals[] | "goal: \(.goal): x\(.ratio | . * 100 | round / 100) \(if .met then "met" else "NOT met" end)"' "$out/pgbench.json"
echo "bench: $out/pgbench.json"

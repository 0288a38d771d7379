#!/usr/bin/env bash
# PostgreSQL benchmark -> build/bench/pgbench.json
#
# pgbench's TPC-B-like transaction against the PostgreSQL test guest
# (tools/mkguest-pg.sh), its disk served by remusdbd in every row:
#   unprotected:      the VM attached (disk and NIC through the daemon),
#                     never protected — the baseline;
#   remus-25/50/100:  protected, plain Remus mode (every output packet
#                     waits for its epoch's commit), 25, 50, 100 ms epochs,
#                     no compression;
#   remus-compressed-25/50/100: the same with checkpoint compression
#                     (XOR+RLE against the page cache, LZ4, zero pages).
# Each row boots the same image fresh, in the same run.  Reported:
# throughput (tps), latency p50/p99/mean (ms, from pgbench's per-
# transaction log), and for the protected rows the epoch rate, the guest's
# pause and the replication bytes per epoch; ratios are against the
# unprotected row.  Nothing is asserted: these are the baseline the
# RemusDB optimizations (compression, commit protection) must beat.
#
#   PGBENCH_SECONDS (default 20), PGBENCH_CLIENTS (default 4)
set -u
cd "$(dirname "$0")/../.."
. tests/lib/common.sh
. tests/lib/netns.sh
. tests/lib/cluster.sh
rdb_require_root
secs=${PGBENCH_SECONDS:-20}
clients=${PGBENCH_CLIENTS:-4}
out=build/bench
mkdir -p "$out"
CL_RAM_MB=512
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
trap 'cluster_down pgbench' EXIT
rows=()

one() {	# name checkpoint_ms protect(0|1) [compression(true|false)]
	local name=$1 ckpt=$2 protect=$3 dir=$out/pgbench-$1 s0 s1
	export CL_COMPRESSION=${4:-false}
	rdb_log "bench: pgbench, $name"
	rm -rf "$dir"
	mkdir -p "$dir"
	if [ "$protect" = 1 ]; then
		cluster_hosts_up pgbench && cluster_vm_up "$ckpt" || rdb_fail "setup failed"
	else
		cluster_hosts_up pgbench && CL_NO_PROTECT=1 cluster_vm_up "$ckpt" ||
			rdb_fail "setup failed"
	fi
	cl_wait_pg bench || rdb_fail "PostgreSQL not reachable"
	# warm-up: the same load, not measured
	ip netns exec "$(netns_name pgbench cli)" "$PGBIN/pgbench" -h "$CL_GUEST_IP" \
		-U postgres -n -c "$clients" -j 1 -T 5 bench >/dev/null 2>&1
	s0=$(cl_ctl pri status "$CL_VM" --json)
	(cd "$dir" && timeout $((secs + 60)) ip netns exec "$(netns_name pgbench cli)" \
		"$PGBIN/pgbench" -h "$CL_GUEST_IP" -U postgres -n -c "$clients" -j 1 \
		-T "$secs" -l --log-prefix=txn bench > pgbench.out 2>&1) ||
		rdb_fail "pgbench failed ($name): $(tail -3 "$dir/pgbench.out")"
	s1=$(cl_ctl pri status "$CL_VM" --json)
	# field 3 of pgbench's log: the transaction's latency in microseconds
	cat "$dir"/txn.* | awk '{print $3}' | sort -n > "$dir/lat.txt"
	jq -n --arg name "$name" --argjson ckpt "$ckpt" --argjson protect "$protect" \
		--argjson s0 "$s0" --argjson s1 "$s1" --rawfile lat "$dir/lat.txt" \
		--arg tps "$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$dir/pgbench.out" | head -n 1)" \
		--argjson secs "$secs" '
		($lat | split("\n") | map(select(length > 0) | tonumber)) as $l |
		($l | length) as $n |
		($s0.vms[0]) as $a | ($s1.vms[0]) as $b |
		(($b.checkpoints // 0) - ($a.checkpoints // 0)) as $epochs |
		{ name: $name, protected: ($protect == 1),
		  compression: ($b.compression != null),
		  epoch_ms: (if $protect == 1 then $ckpt else null end),
		  tps: ($tps | tonumber), transactions: $n,
		  latency_ms_p50: ($l[($n * 0.5 | floor)] / 1000),
		  latency_ms_p99: ($l[($n * 0.99 | floor)] / 1000),
		  latency_ms_mean: (($l | add) / $n / 1000),
		  epochs_per_s: (if $protect == 1 then $epochs / $secs else null end),
		  replication_bytes_per_epoch: (if $protect == 1 and $epochs > 0
			then (($b.bytes - $a.bytes) / $epochs | floor) else null end),
		  disk_bytes_per_epoch: (if $protect == 1 and $epochs > 0
			then (($b.disk_bytes - $a.disk_bytes) / $epochs | floor) else null end),
		  pause_ms_p50: (if $protect == 1 then $b.pause_ms_p50 else null end),
		  pause_ms_p99: (if $protect == 1 then $b.pause_ms_p99 else null end),
		  page_ratio: ($b.compression.ratio // null),
		  page_cache_hit_rate: ($b.compression.cache_hit_rate // null) }' \
		> "$dir/row.json" || rdb_fail "no result for $name"
	cluster_down pgbench
	rows+=("$dir/row.json")
}

one unprotected 25 0
one remus-25 25 1
one remus-50 50 1
one remus-100 100 1
one remus-compressed-25 25 1 true
one remus-compressed-50 50 1 true
one remus-compressed-100 100 1 true

jq -s --argjson secs "$secs" --argjson clients "$clients" '
	(.[0]) as $base |
	{ workload: "pgbench TPC-B-like (scale 1), \($clients) clients, \($secs) s per row after a 5 s warm-up; the guest under TCG",
	  mode: "plain Remus (every output packet waits for its epoch); remus-compressed rows add checkpoint compression",
	  rows: map(. + { tps_ratio: (.tps / $base.tps),
			  latency_p50_ratio: (.latency_ms_p50 / $base.latency_ms_p50) }) }' \
	"${rows[@]}" > "$out/pgbench.json" || rdb_fail "could not write pgbench.json"
jq -r '.rows[] | "\(.name): \(.tps | . * 10 | round / 10) tps (x\(.tps_ratio | . * 100 | round / 100)), latency p50 \(.latency_ms_p50 | . * 10 | round / 10) ms p99 \(.latency_ms_p99 | . * 10 | round / 10) ms, \(.replication_bytes_per_epoch // 0) B/epoch"' "$out/pgbench.json"
echo "bench: $out/pgbench.json"

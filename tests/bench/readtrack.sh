#!/usr/bin/env bash
# Disk read tracking benchmark -> build/bench/readtrack.json
#
# A read-heavy PostgreSQL load whose data does not fit in the guest's
# memory, in the spirit of the RemusDB paper's TPC-H runs: full scans of
# pgbench_accounts (scale 30, ~400 MB of table) in a 512 MiB guest whose
# shared_buffers is 32 MB; the table does not fit in the kernel's page
# cache either, so every scan reads it from the disk, and every block read
# dirties the page cache page it lands in and the shared buffer it is
# copied to.  The measure is the scans' run time (few round trips, as a
# report query: output commit holds little), like the paper's.  All rows
# in one run, each booting the same image fresh:
#   unprotected   the VM attached, never protected (first and last: the
#                 baseline of every ratio, and its drift);
#   remus         plain Remus: no compression, no read tracking;
#   asc           checkpoint compression (XOR+RLE, LZ4), no read tracking;
#   rt            read tracking alone (no compression);
#   asc-rt        both;
# and pgbench TPC-B-like (writes, little reading) with asc and asc-rt,
# where read tracking must never send more than compression alone; and
# pgbench select-only (index lookups, one round trip each) with asc and
# asc-rt, a load output commit dominates.
#
# Per row: run time or tps; bytes on the link per epoch and in total; the
# pause p50/p99; the epoch's ACK delay; the DISKREF share of pages; ratios
# to remus and to unprotected.  Goals are reported, never asserted.
#
#   READTRACK_SCANS (default 2), READTRACK_SECONDS (pgbench rows, 30)
set -u
cd "$(dirname "$0")/../.."
. tests/lib/common.sh
. tests/lib/netns.sh
. tests/lib/cluster.sh
rdb_require_root
secs=${READTRACK_SECONDS:-30}
scans=${READTRACK_SCANS:-2}
out=build/bench
mkdir -p "$out"
CL_RAM_MB=512
CL_PG_SCALE=30
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
trap 'cluster_down readtrack' EXIT
rows=()

one() {	# name protected(0|1) compression(true|false) read_tracking(true|false) scan|-S|tpcb
	local name=$1 prot=$2 comp=$3 rt=$4 load=$5 sel= dir s0 s1 t0 t1 run_s
	[ "$load" = -S ] && sel=-S
	dir=$out/readtrack-$name
	export CL_COMPRESSION=$comp CL_MODE=plain
	export CL_VM_EXTRA="read_tracking = $rt"
	rdb_log "bench: readtrack, $name"
	rm -rf "$dir"
	mkdir -p "$dir"
	if [ "$prot" = 1 ]; then
		cluster_hosts_up readtrack && cluster_vm_up 25 || rdb_fail "setup failed"
	else
		cluster_hosts_up readtrack && CL_NO_PROTECT=1 cluster_vm_up 25 ||
			rdb_fail "setup failed"
	fi
	cl_wait_pg bench || rdb_fail "PostgreSQL not reachable"
	if [ "$load" = scan ]; then
		s0=$(cl_ctl pri status "$CL_VM" --json)
		t0=$(date +%s%N)
		for _ in $(seq "$scans"); do
			timeout 900 ip netns exec "$(netns_name readtrack cli)" "$PGBIN/psql" -X -qAt \
				-h "$CL_GUEST_IP" -U postgres -d bench \
				-c "SELECT count(*), sum(abalance) FROM pgbench_accounts" >>"$dir/scan.out" 2>&1 ||
				rdb_fail "scan failed ($name): $(tail -3 "$dir/scan.out")"
		done
		t1=$(date +%s%N)
		s1=$(cl_ctl pri status "$CL_VM" --json)
		run_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", (b - a) / 1e9}')
		echo "tps = 0" > "$dir/pgbench.out"
	else
		# warm-up: the same load, not measured
		ip netns exec "$(netns_name readtrack cli)" "$PGBIN/pgbench" -h "$CL_GUEST_IP" \
			-U postgres -n $sel -c 4 -j 2 -T 5 bench >/dev/null 2>&1
		s0=$(cl_ctl pri status "$CL_VM" --json)
		(cd "$dir" && timeout $((secs + 60)) ip netns exec "$(netns_name readtrack cli)" \
			"$PGBIN/pgbench" -h "$CL_GUEST_IP" -U postgres -n $sel -c 4 -j 2 \
			-T "$secs" bench > pgbench.out 2>&1) ||
			rdb_fail "pgbench failed ($name): $(tail -3 "$dir/pgbench.out")"
		s1=$(cl_ctl pri status "$CL_VM" --json)
		run_s=$secs
	fi
	jq -n --arg name "$name" --argjson prot "$prot" --arg comp "$comp" --arg rt "$rt" \
		--arg load "$load" --argjson s0 "$s0" --argjson s1 "$s1" --argjson run_s "$run_s" \
		--arg tps "$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$dir/pgbench.out" | head -n 1)" '
		($s0.vms[0]) as $a | ($s1.vms[0]) as $b |
		(($b.checkpoints // 0) - ($a.checkpoints // 0)) as $epochs |
		def pages($v): ($v.compression.pages // {}) | [.[]] | add // 0;
		{ name: $name, protected: ($prot == 1), compression: ($comp == "true"),
		  read_tracking: ($rt == "true"),
		  workload: (if $load == "scan" then "scan" elif $load == "-S" then "select-only"
			     else "tpcb-like" end),
		  run_s: $run_s,
		  tps: (if $load == "scan" then null else ($tps | tonumber) end),
		  ack_ms_p50: (if $prot == 1 then $b.ack_ms_p50 else null end),
		  ack_ms_p99: (if $prot == 1 then $b.ack_ms_p99 else null end),
		  epochs: (if $prot == 1 then $epochs else null end),
		  link_bytes: (if $prot == 1 then ($b.bytes - $a.bytes) else null end),
		  link_bytes_per_epoch: (if $prot == 1 and $epochs > 0
			then (($b.bytes - $a.bytes) / $epochs | floor) else null end),
		  pause_ms_p50: (if $prot == 1 then $b.pause_ms_p50 else null end),
		  pause_ms_p99: (if $prot == 1 then $b.pause_ms_p99 else null end),
		  pages: (if $prot == 1 then (pages($b) - pages($a)) else null end),
		  diskref_pages: (if $prot == 1 then (($b.compression.pages.diskref // 0) -
						      ($a.compression.pages.diskref // 0)) else null end),
		  read_index: ($b.read_tracking // null),
		  # references the paper'"'"'s DMA rule could not make: copies of a
		  # block read in an earlier epoch (a lower bound; copies made in
		  # the epoch of the read look like the read'"'"'s own target)
		  diskref_of_earlier_reads_share: (if ($b.read_tracking.diskref_pages // 0) > 0
			then $b.read_tracking.diskref_of_earlier_reads / $b.read_tracking.diskref_pages
			else null end) }
		| . + { diskref_share: (if .pages and .pages > 0
				then .diskref_pages / .pages else null end) }' \
		> "$dir/row.json" || rdb_fail "no result for $name"
	cluster_down readtrack
	rows+=("$dir/row.json")
}

one unprotected 0 true false scan
one remus 1 false false scan
one asc 1 true false scan
one rt 1 false true scan
one asc-rt 1 true true scan
one unprotected-end 0 true false scan
one asc-tpcb 1 true false tpcb
one asc-rt-tpcb 1 true true tpcb
one unprotected-select 0 true false -S
one asc-select 1 true false -S
one asc-rt-select 1 true true -S

jq -s --argjson secs "$secs" --argjson scans "$scans" '
	(map(select(.workload == "scan" and (.protected | not)) | .run_s)) as $u |
	($u | add / length) as $base |
	(($u | max - min) / $base) as $drift |
	(map(select(.workload == "select-only" and (.protected | not)) | .tps) | add / length) as $sbase |
	(map({ key: .name, value: . }) | from_entries) as $r |
	(map(. + (if .workload == "scan" then
		{ speed_ratio_unprotected: ($base / .run_s),
		  link_bytes_ratio_remus: (if .protected
			then .link_bytes / $r.remus.link_bytes else null end) }
	      elif .workload == "select-only" then { tps_ratio_unprotected: (.tps / $sbase) }
	      else {} end))) as $rows |
	{ workload: "full scans of pgbench_accounts (scale 30, ~400 MB of table), \($scans) per row, in a 512 MiB guest with shared_buffers 32 MB, 25 ms epochs; pgbench TPC-B-like and select-only rows (4 clients, \($secs) s after a 5 s warm-up); the guest under TCG on 2 shared cores",
	  baseline: { unprotected_scan_s: $base, drift: $drift, unprotected_select_tps: $sbase },
	  rows: $rows,
	  goals: [
	    { goal: "ASC+RT <= 20% of plain Remus bytes on the link (scans, in total)",
	      ratio: ($r["asc-rt"].link_bytes / $r.remus.link_bytes),
	      met: ($r["asc-rt"].link_bytes <= 0.2 * $r.remus.link_bytes) },
	    { goal: "RT never sends more than ASC alone on pgbench TPC-B (bytes per epoch)",
	      ratio: ($r["asc-rt-tpcb"].link_bytes_per_epoch / $r["asc-tpcb"].link_bytes_per_epoch),
	      met: ($r["asc-rt-tpcb"].link_bytes_per_epoch <= $r["asc-tpcb"].link_bytes_per_epoch * 1.02) },
	    { goal: "pause with ASC+RT not longer than ASC alone (scans, p50)",
	      ratio: ($r["asc-rt"].pause_ms_p50 / $r.asc.pause_ms_p50),
	      met: ($r["asc-rt"].pause_ms_p50 <= $r.asc.pause_ms_p50 * 1.05) },
	    { goal: "scans with ASC+RT >= 0.9x unprotected speed",
	      ratio: ($base / $r["asc-rt"].run_s), met: ($base / $r["asc-rt"].run_s >= 0.9) } ] }' \
	"${rows[@]}" > "$out/readtrack.json" || rdb_fail "could not write readtrack.json"
jq -r '.rows[] | "\(.name) (\(.workload)): \(if .workload == "scan" then "\(.run_s) s (x\(.speed_ratio_unprotected | . * 100 | round / 100) unprotected speed)" else "\(.tps) tps" end)\(if .protected then ", \(.link_bytes) B on the link (\(.link_bytes_per_epoch) B/epoch), pause p50 \(.pause_ms_p50 * 100 | round / 100) ms p99 \(.pause_ms_p99 * 100 | round / 100) ms, ack p50 \(.ack_ms_p50 * 100 | round / 100) ms, DISKREF \((.diskref_share // 0) * 1000 | round / 10)% of pages" else "" end)"' "$out/readtrack.json"
jq -r '.goals[] | "goal: \(.goal): x\(.ratio | . * 100 | round / 100) \(if .met then "met" else "NOT met" end)"' "$out/readtrack.json"
echo "bench: $out/readtrack.json"

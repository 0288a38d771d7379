#!/usr/bin/env bash
# Disk read tracking benchmark -> build/bench/readtrack.json
#
# A read-heavy PostgreSQL load whose data does not fit in the guest's
# memory, in the spirit of the RemusDB paper's TPC-H runs: pgbench
# select-only (index lookups on pgbench_accounts) over a scale-30 database
# (~470 MB) in a 512 MiB guest whose shared_buffers is 32 MB, so most
# lookups read their blocks from the disk, and every block read dirties
# the page cache page it lands in and the shared buffer it is copied to.
# All rows in one run, each booting the same image fresh:
#   unprotected   the VM attached, never protected (first and last: the
#                 baseline of every ratio, and its drift);
#   remus         plain Remus: no compression, no read tracking;
#   asc           checkpoint compression (XOR+RLE, LZ4), no read tracking;
#   rt            read tracking alone (no compression);
#   asc-rt        both;
# and pgbench TPC-B-like (writes, little reading) with asc and asc-rt,
# where read tracking must never send more than compression alone.
#
# Per row: tps; bytes on the link per epoch and in total; the pause
# p50/p99; the DISKREF share of pages; ratios to remus and to unprotected.
# Goals are reported, never asserted.
#
#   READTRACK_SECONDS (default 30)
set -u
cd "$(dirname "$0")/../.."
. tests/lib/common.sh
. tests/lib/netns.sh
. tests/lib/cluster.sh
rdb_require_root
secs=${READTRACK_SECONDS:-30}
out=build/bench
mkdir -p "$out"
CL_RAM_MB=512
CL_PG_SCALE=30
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
trap 'cluster_down readtrack' EXIT
rows=()

one() {	# name protected(0|1) compression(true|false) read_tracking(true|false) [-S]
	local name=$1 prot=$2 comp=$3 rt=$4 sel=${5:-} dir s0 s1
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
	# warm-up: the same load, not measured
	ip netns exec "$(netns_name readtrack cli)" "$PGBIN/pgbench" -h "$CL_GUEST_IP" \
		-U postgres -n $sel -c 4 -j 2 -T 5 bench >/dev/null 2>&1
	s0=$(cl_ctl pri status "$CL_VM" --json)
	(cd "$dir" && timeout $((secs + 60)) ip netns exec "$(netns_name readtrack cli)" \
		"$PGBIN/pgbench" -h "$CL_GUEST_IP" -U postgres -n $sel -c 4 -j 2 \
		-T "$secs" bench > pgbench.out 2>&1) ||
		rdb_fail "pgbench failed ($name): $(tail -3 "$dir/pgbench.out")"
	s1=$(cl_ctl pri status "$CL_VM" --json)
	jq -n --arg name "$name" --argjson prot "$prot" --arg comp "$comp" --arg rt "$rt" \
		--arg sel "$sel" --argjson s0 "$s0" --argjson s1 "$s1" --argjson secs "$secs" \
		--arg tps "$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$dir/pgbench.out" | head -n 1)" '
		($s0.vms[0]) as $a | ($s1.vms[0]) as $b |
		(($b.checkpoints // 0) - ($a.checkpoints // 0)) as $epochs |
		def pages($v): ($v.compression.pages // {}) | [.[]] | add // 0;
		{ name: $name, protected: ($prot == 1), compression: ($comp == "true"),
		  read_tracking: ($rt == "true"),
		  workload: (if $sel == "-S" then "select-only" else "tpcb-like" end),
		  tps: ($tps | tonumber),
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

one unprotected 0 true false -S
one remus 1 false false -S
one asc 1 true false -S
one rt 1 false true -S
one asc-rt 1 true true -S
one unprotected-end 0 true false -S
one asc-tpcb 1 true false
one asc-rt-tpcb 1 true true

jq -s --argjson secs "$secs" '
	(map(select(.protected | not) | .tps) | add / length) as $base |
	(map(select(.protected | not) | .tps) | (max - min) / (add / length)) as $drift |
	(map({ key: .name, value: . }) | from_entries) as $r |
	(map(. + { tps_ratio_unprotected: (.tps / $base),
		   link_bytes_ratio_remus: (if .link_bytes and .workload == "select-only"
			then .link_bytes_per_epoch / $r.remus.link_bytes_per_epoch else null end) })) as $rows |
	{ workload: "pgbench select-only, scale 30 (~470 MB) in a 512 MiB guest, shared_buffers 32 MB, 4 clients, \($secs) s per row after a 5 s warm-up, 25 ms epochs; TPC-B-like rows for the never-more-than-compression check; the guest under TCG",
	  baseline: { unprotected_tps: $base, drift: $drift },
	  rows: $rows,
	  goals: [
	    { goal: "ASC+RT <= 20% of plain Remus bytes on the link (per epoch)",
	      ratio: ($r["asc-rt"].link_bytes_per_epoch / $r.remus.link_bytes_per_epoch),
	      met: ($r["asc-rt"].link_bytes_per_epoch <= 0.2 * $r.remus.link_bytes_per_epoch) },
	    { goal: "RT never sends more than ASC alone on pgbench TPC-B (bytes per epoch)",
	      ratio: ($r["asc-rt-tpcb"].link_bytes_per_epoch / $r["asc-tpcb"].link_bytes_per_epoch),
	      met: ($r["asc-rt-tpcb"].link_bytes_per_epoch <= $r["asc-tpcb"].link_bytes_per_epoch * 1.02) },
	    { goal: "pause with ASC+RT not longer than ASC alone (p50)",
	      ratio: ($r["asc-rt"].pause_ms_p50 / $r.asc.pause_ms_p50),
	      met: ($r["asc-rt"].pause_ms_p50 <= $r.asc.pause_ms_p50 * 1.05) },
	    { goal: "throughput with ASC+RT >= 0.9x unprotected",
	      ratio: ($r["asc-rt"].tps / $base), met: ($r["asc-rt"].tps >= 0.9 * $base) } ] }' \
	"${rows[@]}" > "$out/readtrack.json" || rdb_fail "could not write readtrack.json"
jq -r '.rows[] | "\(.name) (\(.workload)): \(.tps | . * 10 | round / 10) tps (x\(.tps_ratio_unprotected | . * 100 | round / 100) unprotected)\(if .protected then ", \(.link_bytes_per_epoch) B/epoch, pause p50 \(.pause_ms_p50) ms p99 \(.pause_ms_p99) ms, DISKREF \((.diskref_share // 0) * 1000 | round / 10)% of pages" else "" end)"' "$out/readtrack.json"
jq -r '.goals[] | "goal: \(.goal): x\(.ratio | . * 100 | round / 100) \(if .met then "met" else "NOT met" end)"' "$out/readtrack.json"
echo "bench: $out/readtrack.json"

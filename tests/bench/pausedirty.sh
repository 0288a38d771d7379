#!/usr/bin/env bash
# The pause against the dirty set, pages on the stream against pages read
# from QEMU's shared memory -> build/bench/pausedirty.json
#
#   bash tests/bench/pausedirty.sh      (checkpoint.sh runs it too)
#
# The busybox guest (256 MiB, pc.ram a memfd: CL_RAM_SHARED=memfd) runs
# the dirtier at RATES pages/s (default 10240 40960 163840: 1, 4 and 16
# MiB per 25 ms epoch, as far as the TCG guest keeps up; the achieved
# dirty pages per epoch are in each row); remusdbd replicates at 25 ms,
# compression off, plaintext link, placed (the primary's daemon on CPU
# 0, the guest on CPU 1).  Two paths per rate, rows interleaved, REPEATS
# (2) rounds: `stream` (shared_ram = false: QEMU writes each page into
# the checkpoint stream) and `mapped` (shared_ram, QEMU patch 0007: 8
# bytes per page in the stream, remusdbd copies the page from the
# mapping).  Pause = QMP STOP -> RESUME (ckptbench, QEMU's event
# timestamps), p50 and p99.  Nothing asserted: a benchmark; run alone.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/common.sh
. tests/lib/netns.sh
. tests/lib/cluster.sh
rdb_require_root
secs=${BENCH_SECONDS:-15}
repeats=${REPEATS:-2}
rates=(${RATES:-10240 40960 163840})
out=build/bench
mkdir -p "$out"
rdb_build_guest
BENCH=$RDB_BUILD/bench/ckptbench
[ -x "$BENCH" ] || rdb_fail "$BENCH missing (make all)"
trap 'cluster_down pdirty' EXIT
rows=()

row() {	# row RATE stream|mapped ROUND
	local rate=$1 path=$2 round=$3 s0 s1 q
	rdb_log "bench: pause vs dirty set, $rate pages/s, $path, round $round"
	(
		trap 'cluster_down pdirty' EXIT
		export CL_GUEST_RUN="/usr/bin/dirtier --pages-per-s $rate --mb 128"
		export CL_RAM_SHARED=memfd CL_COMPRESSION=false CL_LINK_SECURITY=insecure
		export CL_DAEMON_CPUS=0 CL_GUEST_CPUS=1
		[ "$path" = stream ] && export CL_VM_EXTRA="shared_ram = false"
		cluster_up pdirty 25 || rdb_fail "setup failed"
		if grep -q "checkpoints read its pages from QEMU's shared memory" "$CL_DIR/pri/remusdbd.log"; then
			[ "$path" = mapped ]
		else
			[ "$path" = stream ]
		fi || rdb_fail "$path: the checkpoints did not take that path"
		sleep 2
		s0=$(cl_ctl pri status "$CL_VM" --json) || rdb_fail "no status"
		q=$(taskset -c 0 "$BENCH" --qmp "$CL_DIR/pri/$CL_VM.mon.qmp" --seconds "$secs") ||
			rdb_fail "ckptbench failed"
		s1=$(cl_ctl pri status "$CL_VM" --json) || rdb_fail "no status"
		jq -n --argjson rate "$rate" --arg path "$path" --argjson round "$round" \
			--argjson q "$q" --argjson s0 "$s0" --argjson s1 "$s1" '
			($s1.vms[0].checkpoints - $s0.vms[0].checkpoints) as $ep |
			{ rate_pages_per_s: $rate, path: $path, round: $round,
			  pages_per_epoch: (if $ep > 0 then ($s1.vms[0].pages - $s0.vms[0].pages) / $ep else null end),
			  pause_ms_p50: $q.pause_ms_p50, pause_ms_p99: $q.pause_ms_p99,
			  checkpoints_per_s: $q.checkpoints_per_s }' > "$out/pausedirty-row.json"
	) || rdb_fail "row $rate $path $round failed"
	rows+=("$(cat "$out/pausedirty-row.json")")
	jq -c . "$out/pausedirty-row.json"
}

for r in $(seq 1 "$repeats"); do
	for rate in "${rates[@]}"; do
		for path in stream mapped; do
			row "$rate" "$path" "$r"
		done
	done
done
printf '%s\n' "${rows[@]}" | jq -s -L tests/lib 'include "bench";
	{ method: "busybox guest, 256 MiB pc.ram on a memfd, dirtier at rate_pages_per_s; 25 ms epochs, compression off, plaintext link, placed; pause = QMP STOP -> RESUME (ckptbench); stream: shared_ram = false; mapped: pages read from QEMU shared memory (x-colo-mapped-ram, QEMU patch 0007)",
	  rows: .,
	  summary: (group_by(.rate_pages_per_s) | map(
	    (map(select(.path == "stream"))) as $s | (map(select(.path == "mapped"))) as $m |
	    { rate_pages_per_s: .[0].rate_pages_per_s,
	      pages_per_epoch: (map(.pages_per_epoch) | median),
	      stream_pause_ms_p50: ($s | map(.pause_ms_p50) | median),
	      mapped_pause_ms_p50: ($m | map(.pause_ms_p50) | median),
	      stream_pause_ms_p99: ($s | map(.pause_ms_p99) | median),
	      mapped_pause_ms_p99: ($m | map(.pause_ms_p99) | median),
	      mapped_vs_stream_p50: (($m | map(.pause_ms_p50) | median) / ($s | map(.pause_ms_p50) | median)),
	      p50_spread: (map(.pause_ms_p50) | max - min) })) }' > "$out/pausedirty.json" ||
	rdb_fail "could not write pausedirty.json"
jq '.summary' "$out/pausedirty.json"

#!/usr/bin/env bash
# What a VM's extra devices cost the checkpoint -> build/bench/devices.json
#
# The PostgreSQL guest (512 MiB, pgbench scale 16, 4 clients, plain
# Remus at 25 ms, compression and TLS on) protected as it is (one disk,
# one NIC) and with two more disks (extra_disk, 64 MiB each, idle) and a
# second NIC (extra_nic, idle): the devices' own cost in every epoch
# (their hooks inside the pause, their servers), not their traffic.
# Interleaved in the same run, REPEATS (5) of each, one after the other:
# the pause p50 (QMP STOP -> RESUME, QEMU's timestamps), the daemon's
# work inside the pause p50 (its own view), and the CPU the primary's
# remusdbd and its helpers (disk servers, watchdog) used per checkpoint.
# Reported: every repeat, the medians, their spread (max - min), and the
# extra devices' added pause p50 (median of B - median of A).  Goal:
# <= 0.1 ms.  Nothing is asserted.  Every run has the primary QEMU's
# trace events on (pausebreak.sh): the pause's parts, so that what the
# devices add (vm_stop's drain and flush, their device state, remusdbd's
# turnaround) is told apart from what the workload's dirty pages add
# (the bitmap sync, RAM onto the stream), which varies run to run.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/common.sh
. tests/lib/netns.sh
. tests/lib/cluster.sh
rdb_require_root
SECONDS_PER_RUN=${BENCH_SECONDS:-15}
REPEATS=${BENCH_REPEATS:-5}
out=build/bench
mkdir -p "$out"
BENCH=$RDB_BUILD/bench/ckptbench
[ -x "$BENCH" ] || rdb_fail "$BENCH missing (make all)"
trap 'cluster_down bench' EXIT

# CPU seconds (user + system) of a process and its children now alive
tree_cpu() {
	local pid=$1 p t=0 hz
	hz=$(getconf CLK_TCK)
	for p in $pid $(pgrep -P "$pid"); do
		[ -r "/proc/$p/stat" ] || continue
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
	done
	awk -v t="$t" -v hz="$hz" 'BEGIN{printf "%.3f", t / hz}'
}

dev_run() {	# name extra_disks extra_nics
	local name=$1 xd=$2 xn=$3 obs pid c0 c1 k0 k1
	rdb_log "bench devices: $name"
	export CL_QEMU_TRACE=$out/dev-$name.trace
	rm -f "$CL_QEMU_TRACE"
	(
		trap 'cluster_down bench' EXIT
		CL_RAM_MB=512 CL_PG_SCALE=16
		cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
		export CL_COMPRESSION=true CL_MODE=plain CL_EXTRA_DISKS=$xd CL_EXTRA_NICS=$xn
		cluster_hosts_up bench && cluster_vm_up 25 || rdb_fail "setup failed"
		cl_wait_pg bench || rdb_fail "PostgreSQL not reachable"
		ip netns exec "$(netns_name bench cli)" "$PGBIN/pgbench" -h "$CL_GUEST_IP" \
			-U postgres -n -c 4 -j 2 -T 5 bench >/dev/null 2>&1
		wc -l < "$CL_QEMU_TRACE" > "$out/dev-$name.from"
		pid=$(cat "$CL_DIR/pri/remusdbd.pid")
		k0=$(cl_ctl pri status "$CL_VM" --json | jq .vms[0].checkpoints)
		c0=$(tree_cpu "$pid")
		"$BENCH" --qmp "$CL_DIR/pri/$CL_VM.mon.qmp" --seconds "$SECONDS_PER_RUN" \
			> "$out/dev-$name.json" &
		obs=$!
		timeout $((SECONDS_PER_RUN + 60)) ip netns exec "$(netns_name bench cli)" \
			"$PGBIN/pgbench" -h "$CL_GUEST_IP" -U postgres -n -c 4 -j 2 \
			-T "$SECONDS_PER_RUN" bench > "$out/dev-$name.pgbench" 2>&1 ||
			rdb_fail "pgbench failed ($name): $(tail -3 "$out/dev-$name.pgbench")"
		wait "$obs" || rdb_fail "$name: no pauses observed"
		c1=$(tree_cpu "$pid")
		cl_ctl pri status "$CL_VM" --json > "$out/dev-$name-status.json"
		k1=$(jq .vms[0].checkpoints "$out/dev-$name-status.json")
		ndev=$(jq '.vms[0].devices | length' "$out/dev-$name-status.json")
		[ "$ndev" = $((2 + xd + xn)) ] || rdb_fail "$name: $ndev devices, not $((2 + xd + xn))"
		jq --argjson c0 "$c0" --argjson c1 "$c1" --argjson k0 "$k0" --argjson k1 "$k1" \
			--arg tps "$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$out/dev-$name.pgbench" | head -n 1)" \
			--slurpfile s "$out/dev-$name-status.json" '
			{ pause_ms_p50, pause_ms_p99, checkpoints_per_s,
			  daemon_work_in_pause_ms_p50: $s[0].vms[0].pause_work_ms_p50,
			  daemon_cpu_ms_per_epoch: (if $k1 > $k0 then (($c1 - $c0) * 1000 / ($k1 - $k0)) else null end),
			  devices: ($s[0].vms[0].devices | length),
			  tps: ($tps | tonumber) }' "$out/dev-$name.json" > "$out/dev-$name-row.json"
		cluster_down bench
	) || exit 1
	bash tests/bench/pausebreak.sh "$CL_QEMU_TRACE" "$(cat "$out/dev-$name.from")" \
		> "$out/dev-$name-breakdown.json" || rdb_fail "no breakdown for $name"
	jq -e '.checkpoints >= 10' "$out/dev-$name-breakdown.json" >/dev/null ||
		rdb_fail "$name: no checkpoints in QEMU's trace"
	rm -f "$CL_QEMU_TRACE" "$out/dev-$name.from"
	unset CL_QEMU_TRACE
	# the parts' p50s into the row
	jq --slurpfile k "$out/dev-$name-breakdown.json" '. + { parts_ms_p50:
		($k[0] | to_entries | map(select(.value | type == "object" and has("p50")))
		 | map({ key: (.key | sub("_ms$"; "")), value: .value.p50 }) | from_entries),
		dirty_pages_p50: $k[0].dirty_pages_p50,
		costliest_sections_ms_p50: $k[0].devices_ms_p50 }' \
		"$out/dev-$name-row.json" > "$out/dev-$name-row.json.tmp" &&
		mv "$out/dev-$name-row.json.tmp" "$out/dev-$name-row.json"
}

rows_a=() rows_b=()
for ((i = 1; i <= REPEATS; i++)); do
	dev_run "a$i" 0 0
	rows_a+=(--slurpfile "a$i" "$out/dev-a$i-row.json")
	dev_run "b$i" 2 1
	rows_b+=(--slurpfile "b$i" "$out/dev-b$i-row.json")
done
jq -n "${rows_a[@]}" "${rows_b[@]}" --argjson n "$REPEATS" '
	def med: sort | if length == 0 then null
		elif length % 2 == 1 then .[length / 2 | floor]
		else (.[length / 2 - 1] + .[length / 2]) / 2 end;
	def spread: if length == 0 then null else max - min end;
	def col($rows; $k): [$rows[] | .[$k] | select(. != null)];
	# the parts that grow with the devices, not with the dirty pages
	def devparts: .stop_vcpus_drain_flush + .device_state + .devstate_sent_to_received;
	def parts($rows): ($rows[0].parts_ms_p50 | keys) as $ks |
		reduce $ks[] as $k ({}; . + { ($k): ([$rows[] | .parts_ms_p50[$k]] | med) });
	def summary($rows): {
		runs: $rows,
		pause_ms_p50: (col($rows; "pause_ms_p50") | med),
		pause_ms_p50_spread: (col($rows; "pause_ms_p50") | spread),
		daemon_work_in_pause_ms_p50: (col($rows; "daemon_work_in_pause_ms_p50") | med),
		daemon_cpu_ms_per_epoch: (col($rows; "daemon_cpu_ms_per_epoch") | med),
		daemon_cpu_ms_per_epoch_spread: (col($rows; "daemon_cpu_ms_per_epoch") | spread),
		tps: (col($rows; "tps") | med),
		parts_ms_p50: parts($rows),
		device_parts_ms_p50: ([$rows[] | .parts_ms_p50 | devparts] | med),
		device_parts_ms_p50_spread: ([$rows[] | .parts_ms_p50 | devparts] | spread) };
	[range(1; $n + 1)] as $r |
	[$r[] as $i | $ARGS.named["a\($i)"][0]] as $a |
	[$r[] as $i | $ARGS.named["b\($i)"][0]] as $b |
	summary($a) as $sa | summary($b) as $sb |
	{ one_disk_one_nic: $sa, three_disks_two_nics: $sb,
	  added_pause_ms_p50: ($sb.pause_ms_p50 - $sa.pause_ms_p50),
	  added_pause_ms_p50_pairs: [range(0; $n) as $i | $b[$i].pause_ms_p50 - $a[$i].pause_ms_p50],
	  added_parts_ms_p50: ($sa.parts_ms_p50 | with_entries(.value = ($sb.parts_ms_p50[.key] - .value))),
	  added_device_parts_ms_p50: ($sb.device_parts_ms_p50 - $sa.device_parts_ms_p50),
	  added_daemon_cpu_ms_per_epoch: ($sb.daemon_cpu_ms_per_epoch - $sa.daemon_cpu_ms_per_epoch),
	  goal_extra_devices_add_at_most_0_1ms: (($sb.pause_ms_p50 - $sa.pause_ms_p50) <= 0.1),
	  repeats: $n,
	  method: "PostgreSQL 15 guest (512 MiB, pgbench scale 16, TPC-B-like, 4 clients), plain Remus, 25 ms, compression and TLS on; the extra disks (2 x 64 MiB) and NIC are idle: their per-epoch cost, not their traffic; runs interleaved a1 b1 a2 b2 ...; medians over the repeats; every run traced (QEMU trace events, log backend: tests/bench/pausebreak.sh): parts_ms_p50 are the pause'"'"'s parts, device_parts = stop_vcpus_drain_flush + device_state + devstate_sent_to_received (what grows with devices; RAM and the bitmap sync grow with dirty pages instead)" }' \
	> "$out/devices.json" || rdb_fail "could not write devices.json"
cat "$out/devices.json"
# checkpoint.json (make bench runs checkpoint.sh first) carries it too
if [ -s "$out/checkpoint.json" ]; then
	jq --slurpfile d "$out/devices.json" '. + { devices: $d[0] }' \
		"$out/checkpoint.json" > "$out/checkpoint.json.tmp" &&
		mv "$out/checkpoint.json.tmp" "$out/checkpoint.json"
fi

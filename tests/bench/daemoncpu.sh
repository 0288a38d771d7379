#!/usr/bin/env bash
# The daemons' CPU per checkpoint, by role, A against B -> build/bench/daemoncpu.json
#
#   bash tests/bench/daemoncpu.sh [BUILD_DIR[+VAR=VALUE...]...]   (default: $RDB_BUILD)
#
# A +VAR=VALUE suffix runs that variant's rows with VAR set (a cluster.sh
# knob): build+CL_RAM_SHARED=memfd and
# build+CL_RAM_SHARED=memfd+CL_VM_EXTRA=shared_ram=false compare pages
# read from QEMU's shared memory with pages on the stream, one build.
#
# For comparing remusdbd builds (a change to the checkpoint path against
# the commit before it): each build dir holds remusdbd and remusdbctl as
# `make` leaves them in build/.  Rows interleave the builds, REPEATS (3)
# rounds: the PostgreSQL guest (512 MiB, pgbench scale 16) protected with
# commit protection's mode and the server's policy off (ckpt-only-25 of
# pgbench.sh), 25 ms epochs, placed (daemons on CPU 0, the guest on 1),
# pgbench 4 clients at a fixed rate (RATE, 8 tps: the same work per
# epoch in every row, as far as this guest keeps up; its achieved tps is
# in the row) for SECONDS (20).  Per row: epochs, dirty pages per epoch,
# the pause's p50/p99 (the daemon's ring of its last 4096 pauses: the
# row, its warm-up and the protection's start),
# each host's daemon CPU by role (tests/lib/benchcpu.sh) in ms per epoch
# and in us per page.  Summary: per build, the medians and spread.
# Nothing asserted: a benchmark.  Run alone: anything else on the host's
# CPUs moves the rows more than most changes do.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/common.sh
. tests/lib/netns.sh
. tests/lib/cluster.sh
. tests/lib/benchcpu.sh
rdb_require_root
secs=${SECONDS_PER_ROW:-20}
repeats=${REPEATS:-3}
rate=${RATE:-8}
[ $# -gt 0 ] || set -- "$RDB_BUILD"
builds=()
for a in "$@"; do
	b=${a%%+*} v=
	[ "$b" = "$a" ] || v=+${a#*+}
	[ -x "$b/remusdbd" ] && [ -x "$b/remusdbctl" ] || rdb_fail "$b: no remusdbd/remusdbctl there"
	builds+=("$(realpath "$b")$v")
done
set -- "${builds[@]}"
out=build/bench
mkdir -p "$out"
CL_RAM_MB=512 CL_PG_SCALE=16
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
export CL_DISK_IMAGE=$CL_GUEST/pgdata.img
trap 'cluster_down dcpu' EXIT
rows=()

row() {	# row BUILD ROUND
	local build=$1 round=$2 s0 s1 k0 k1 pg0 pg1 c0p c0b c1p c1b ep tps
	rdb_log "bench: daemon CPU, $build, round $round"
	(
		trap 'cluster_down dcpu' EXIT
		export RDB_BUILD=${build%%+*}
		if [ "$build" != "$RDB_BUILD" ]; then
			local kv
			IFS=+ read -ra kv <<<"${build#*+}"
			for a in "${kv[@]}"; do
				export "${a%%=*}=${a#*=}"
			done
		fi
		export CL_COMPRESSION=true CL_MODE=commit-protection CL_DAEMON_CPUS=0 CL_GUEST_CPUS=1
		cli() { ip netns exec "$(netns_name dcpu cli)" taskset -c 0 "$@"; }
		{ cluster_hosts_up dcpu && cluster_vm_up 25; } || rdb_fail "setup failed"
		cl_wait_pg bench || rdb_fail "PostgreSQL not reachable"
		cli "$PGBIN/psql" -X -q -h "$CL_GUEST_IP" -U postgres -d postgres \
			-c "ALTER SYSTEM SET remusdb.commit_protection = 'off'" \
			-c "SELECT pg_reload_conf()" >/dev/null || rdb_fail "cannot set the policy"
		cli "$PGBIN/pgbench" -h "$CL_GUEST_IP" -U postgres -n -c 4 -j 2 -T 5 bench \
			>/dev/null 2>&1
		s0=$(cl_ctl pri status "$CL_VM" --json) || rdb_fail "no status"
		c0p=$(bcpu_snap dcpu pri) c0b=$(bcpu_snap dcpu bak)
		timeout $((secs + 60)) ip netns exec "$(netns_name dcpu cli)" taskset -c 0 \
			"$PGBIN/pgbench" -h "$CL_GUEST_IP" -U postgres -n -c 4 -j 2 -T "$secs" \
			-R "$rate" bench > "$out/daemoncpu.pgbench" 2>&1 ||
			rdb_fail "pgbench failed: $(tail -3 "$out/daemoncpu.pgbench")"
		c1p=$(bcpu_snap dcpu pri) c1b=$(bcpu_snap dcpu bak)
		s1=$(cl_ctl pri status "$CL_VM" --json) || rdb_fail "no status"
		k0=$(jq .vms[0].checkpoints <<<"$s0") k1=$(jq .vms[0].checkpoints <<<"$s1")
		pg0=$(jq .vms[0].pages <<<"$s0") pg1=$(jq .vms[0].pages <<<"$s1")
		ep=$((k1 - k0))
		[ "$ep" -gt 0 ] || rdb_fail "no checkpoints during the row"
		tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$out/daemoncpu.pgbench" | head -n 1)
		jq -n --arg build "$build" --argjson round "$round" --argjson epochs "$ep" \
			--argjson pages "$((pg1 - pg0))" --argjson tps "${tps:-null}" \
			--argjson pri "$(bcpu_delta "$c0p" "$c1p" "$secs" "$ep")" \
			--argjson bak "$(bcpu_delta "$c0b" "$c1b" "$secs" "$ep")" --argjson secs "$secs" \
			--argjson s1 "$s1" '
			def per_epoch($d): $d | del(.ms_per_epoch, .total)
				| with_entries(.value = (.value * $secs * 1000 / $epochs))
				| . + { total: ($d.ms_per_epoch) };
			{ build: $build, round: $round, tps: $tps, epochs: $epochs,
			  pause_ms_p50: $s1.vms[0].pause_ms_p50, pause_ms_p99: $s1.vms[0].pause_ms_p99,
			  pages_per_epoch: ($pages / $epochs),
			  primary_ms_per_epoch: per_epoch($pri),
			  backup_ms_per_epoch: per_epoch($bak),
			  primary_us_per_page: ($pri.ms_per_epoch * 1000 * $epochs / $pages) }' \
			> "$out/daemoncpu-row.json"
	) || rdb_fail "row $build round $round failed"
	rows+=("$(cat "$out/daemoncpu-row.json")")
	jq -c '{build, round, tps, pages_per_epoch, pause_ms_p50, primary: .primary_ms_per_epoch.total,
		backup: .backup_ms_per_epoch.total}' "$out/daemoncpu-row.json"
}

for r in $(seq 1 "$repeats"); do
	for b in "$@"; do
		row "$b" "$r"
	done
done
printf '%s\n' "${rows[@]}" | jq -s -L tests/lib 'include "bench";
	def spread: (max - min);
	# per role (any row has it), the median over the rows: 0 where absent
	def role_medians: (map(keys) | add | unique) as $k
		| [ $k[] as $r | { key: $r, value: (map(.[$r] // 0) | median) } ] | from_entries;
	{ rows: .,
	  summary: (group_by(.build) | map({
	    build: .[0].build,
	    rounds: length,
	    pages_per_epoch: (map(.pages_per_epoch) | median),
	    pause_ms_p50: (map(.pause_ms_p50) | { median: median, spread: spread }),
	    pause_ms_p99: (map(.pause_ms_p99) | median),
	    primary_ms_per_epoch: (map(.primary_ms_per_epoch.total) | { median: median, spread: spread }),
	    backup_ms_per_epoch: (map(.backup_ms_per_epoch.total) | { median: median, spread: spread }),
	    primary_us_per_page: (map(.primary_us_per_page) | { median: median, spread: spread }),
	    primary_roles: (map(.primary_ms_per_epoch) | role_medians),
	    backup_roles: (map(.backup_ms_per_epoch) | role_medians)
	  })) }' > "$out/daemoncpu.json"
jq '.summary' "$out/daemoncpu.json"

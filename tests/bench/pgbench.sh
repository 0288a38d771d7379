#!/usr/bin/env bash
# PostgreSQL benchmark -> build/bench/pgbench.json
#
# pgbench against the PostgreSQL test guest (tools/mkguest-pg.sh, the
# server with RemusDB's patch, remusdb.commit_protection = writes, and
# remusdb.ko), its disk served by remusdbd in every row, each row booting
# the same image fresh, at 4 and at 16 clients, TPC-B-like:
#   unprotected   the VM attached (disk and NIC through the daemon), never
#                 protected: the baseline of every ratio;
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
#   cp-25-async   commit protection with synchronous_commit = off (the
#                 clients' PGOPTIONS): the WAL flushed in the background,
#                 not at commit — under protection the guest's memory
#                 reaches the backup every epoch, so an acknowledged
#                 commit survives a power pull without the flush: the
#                 row a DBA compares with unprotected and its durable
#                 default;
#   peer-patroni-sync, peer-patroni-strict, peer-patroni-remote-apply
#                 what a DBA would deploy instead: PostgreSQL synchronous
#                 streaming replication to a second VM on another host,
#                 managed by Patroni 3.0.2 (tests/lib/peer-pg.sh; the
#                 witness's etcd its DCS; Patroni's default ttl 30,
#                 loop_wait 10, retry_timeout 10), synchronous_mode on,
#                 without and with synchronous_mode_strict, and with the
#                 clients' synchronous_commit = remote_apply (a commit
#                 visible on the standby before it is acknowledged);
# and select-only (-S) at 4 clients, unprotected and cp-25.  Every
# protected row has checkpoint compression on.  The database is pgbench
# scale 16: with fewer branches than clients, pgbench measures one row's
# lock, held across round trips.
#
# The rows run in PGBENCH_REPEATS (3) interleaved rounds, each opening
# with the unprotected rows and the run closing with one more set
# (unprotected-end-*): a row's ratio is to the mean of the unprotected
# rows of the same workload before and after its round (the host
# drifts), and the summary gives per row the median over the rounds and
# the spread (min, max).  Placement: rows run placed, as
# docs/performance.md tells operators (the primary's remusdbd and the
# client on CPU 0, the guest's QEMU on CPU 1 with the backup's remusdbd,
# another host's, as cluster.sh places it; the peer's standby QEMU,
# another host's, on CPU 0), and in the first round a subset
# (unprotected, cp-25, ckpt-only-25, peer-patroni-sync) again unplaced
# (names ending -unplaced), unless PGBENCH_PLACEMENTS says otherwise.
# The strict row runs at 4 clients only: while the standby is there it
# differs from the non-strict row in nothing but the setting.
#
# Then the failover rows (tests/lib/benchfo.sh: the ledger's 4 clients,
# reconnecting, a 5 s read deadline, the primary's power pulled under
# load): failover-cp-25 (RemusDB, commit protection), failover-remus-25
# (plain Remus), peer-patroni-failover-default (Patroni's defaults: ttl
# 30, loop_wait 10, retry_timeout 10) and peer-patroni-failover-tuned
# (ttl 10, loop_wait 2, retry_timeout 4: below the ttl >= 20 that
# Patroni enforces from 3.2 on; 3.0.2 takes it); the peers' clients
# list both nodes (libpq host=pg1,pg2, target_session_attrs=read-write):
# outage_ms, lost_commits, sessions_lost.
#
# Reported per row: tps, latency p50/p99/mean (ms, from pgbench's
# per-transaction log), the ratio to unprotected, CPU shares (over the
# run's measured length, run_s, not the nominal seconds), and for
# protected rows the epoch rate and the guest's pause over the measured
# 20 s only (the daemon's per-epoch records inside the run's window:
# pause_ms_p50/p99, pages of bytes per epoch) and pause_share (pause p50
# x epochs/s), which caps any protected mode at about 1 - pause_share of
# a CPU-bound unprotected guest; ack_ms: from the end of a checkpoint's
# pause to the backup's ACK of it (p50/p99); daemon_cpu: where each
# host's daemon CPU went during the run, by role (tests/lib/benchcpu.sh:
# event loop, encoders, TLS relay, disk server, watchdog), as shares of a
# CPU and in ms per epoch.  Goals are checked and
# reported, never asserted (a benchmark, not a test).
#
#   PGBENCH_SECONDS (20), PGBENCH_REPEATS (3), PGBENCH_CLIENTS ("4 16"),
#   PGBENCH_PLACEMENTS ("placed unplaced"), PGBENCH_PEERS (1),
#   PGBENCH_FAILOVER (1: the failover rows; they run placed)
set -u
cd "$(dirname "$0")/../.."
. tests/lib/common.sh
. tests/lib/netns.sh
. tests/lib/cluster.sh
. tests/lib/peer-pg.sh
. tests/lib/benchfo.sh
. tests/lib/benchcpu.sh
rdb_require_root
secs=${PGBENCH_SECONDS:-20}
repeats=${PGBENCH_REPEATS:-3}
read -r -a client_counts <<<"${PGBENCH_CLIENTS:-4 16}"
read -r -a places <<<"${PGBENCH_PLACEMENTS-placed unplaced}"
peers=${PGBENCH_PEERS:-1}
out=build/bench
mkdir -p "$out"
CL_RAM_MB=512
CL_PG_SCALE=16
# the two guests: RemusDB's rows and the peer's (the same image with
# Patroni and Python on its data disk), built or found cached once
if [ "$peers" = 1 ]; then
	peer_pg_use_guest || rdb_fail "the Patroni guest build failed"
	peer_guest=$CL_GUEST peer_ready=$CL_GUEST_READY
fi
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
rdb_guest=$CL_GUEST rdb_ready=$CL_GUEST_READY
trap 'cluster_down pgbench' EXIT
rows=()
fo_rows=()
pfx=()	# the client's placement

use_guest() {	# use_guest rdb|peer
	if [ "$1" = peer ]; then
		export CL_GUEST=$peer_guest CL_DISK_IMAGE=$peer_guest/pgdata.img CL_GUEST_READY=$peer_ready
	else
		export CL_GUEST=$rdb_guest CL_DISK_IMAGE=$rdb_guest/pgdata.img CL_GUEST_READY=$rdb_ready
	fi
}

place() {	# place placed|unplaced: CPUs for the next cluster and client
	unset CL_DAEMON_CPUS CL_GUEST_CPUS
	pfx=()
	[ "$1" = placed ] && export CL_DAEMON_CPUS=0 CL_GUEST_CPUS=1 && pfx=(taskset -c 0)
	return 0
}

# peer_up STRICT TTL LOOP_WAIT RETRY: the Patroni pair, its standby's QEMU
# on CPU 0 when placed (another host's CPU, not the primary guest's)
peer_up() {
	use_guest peer
	peer_pg_up pgbench "$2" "$3" "$4" "$1" || return 1
	if [ -n "${CL_GUEST_CPUS:-}" ]; then
		taskset -a -p -c 0 "$(cat "$CL_DIR/pr2/vm2.qemu.pid")" >/dev/null ||
			{ rdb_log "cannot place the standby's QEMU"; return 1; }
	fi
}

# one NAME MODE(none|plain|commit-protection|peer-patroni) CHECKPOINT_MS
#     CLIENTS ROUND PLACEMENT [-S] [POLICY] [SETTING]
# SETTING: async (synchronous_commit = off), strict, remote-apply
one() {
	local name=$1 mode=$2 ckpt=$3 clients=$4 round=$5 place=$6 sel=${7:-} policy=${8:-}
	local setting=${9:-} rname=$1 dir s0 s1 k1 q d b q0 d0 b0 q1 d1 b1 t0 t1 opts=
	local tl0=null tl1=null c0p c0b c1p c1b dcpu=null
	[ "$place" = unplaced ] && rname=$name-unplaced
	dir=$out/pgbench-$rname-r$round
	export CL_COMPRESSION=true CL_MODE=$mode
	case $mode in none|peer-*) CL_MODE=plain ;; esac
	place "$place"
	rdb_log "bench: pgbench, $rname, round $round"
	rm -rf "$dir"
	mkdir -p "$dir"
	case $mode in
	none) use_guest rdb
	      { cluster_hosts_up pgbench && CL_NO_PROTECT=1 cluster_vm_up "$ckpt"; } ||
		rdb_fail "setup failed" ;;
	peer-patroni)
		peer_up "$([ "$setting" = strict ] && echo 1 || echo 0)" 30 10 10 ||
			rdb_fail "the Patroni pair did not come up (logs in $CL_DIR)"
		tl0=$(peer_pg_timeline "$PEER_PG_IP1") || rdb_fail "no timeline from pg1" ;;
	*) use_guest rdb
	   { cluster_hosts_up pgbench && cluster_vm_up "$ckpt"; } || rdb_fail "setup failed" ;;
	esac
	cl_wait_pg bench || rdb_fail "PostgreSQL not reachable"
	if [ -n "$policy" ]; then
		ip netns exec "$(netns_name pgbench cli)" "$PGBIN/psql" -X -q -h "$CL_GUEST_IP" \
			-U postgres -d postgres -c "ALTER SYSTEM SET remusdb.commit_protection = '$policy'" \
			-c "SELECT pg_reload_conf()" >/dev/null || rdb_fail "cannot set the policy"
	fi
	case $setting in
	async) opts="-c synchronous_commit=off" ;;
	remote-apply) opts="-c synchronous_commit=remote_apply" ;;
	esac
	# warm-up: the same load, not measured
	PGOPTIONS=$opts ip netns exec "$(netns_name pgbench cli)" "${pfx[@]}" "$PGBIN/pgbench" \
		-h "$CL_GUEST_IP" -U postgres -n $sel -c "$clients" -j 2 -T 5 bench >/dev/null 2>&1
	s0='{"vms":[{}]}'
	case $mode in none|peer-*) ;; *) s0=$(cl_ctl pri status "$CL_VM" --json) ;; esac
	# CPU seconds of the guest's QEMU and both daemons (the peer: the
	# standby's QEMU) during the run: on this 2-core host they share the
	# cores with the guest
	q=$(cat "$CL_DIR/pri/qemu.pid") d=$(cat "$CL_DIR/pri/remusdbd.pid")
	if [ "$mode" = peer-patroni ]; then
		b=$(cat "$CL_DIR/pr2/vm2.qemu.pid")
	else
		b=$(cat "$CL_DIR/bak/remusdbd.pid")
	fi
	q0=$(bcpu_ticks "$q") d0=$(bcpu_ticks "$d") b0=$(bcpu_ticks "$b")
	c0p=$(bcpu_snap pgbench pri) c0b=$(bcpu_snap pgbench bak)
	t0=$(date +%s.%N)
	(cd "$dir" && PGOPTIONS=$opts timeout $((secs + 60)) ip netns exec "$(netns_name pgbench cli)" \
		"${pfx[@]}" "$PGBIN/pgbench" -h "$CL_GUEST_IP" -U postgres -n $sel -c "$clients" -j 2 \
		-T "$secs" -l --log-prefix=txn bench > pgbench.out 2>&1) ||
		rdb_fail "pgbench failed ($rname): $(tail -3 "$dir/pgbench.out")"
	t1=$(date +%s.%N)
	# the run's own length: a row outlasts its nominal seconds by its
	# last transactions and the client's start (the shares divide by it)
	el=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	q1=$(bcpu_ticks "$q") d1=$(bcpu_ticks "$d") b1=$(bcpu_ticks "$b")
	c1p=$(bcpu_snap pgbench pri) c1b=$(bcpu_snap pgbench bak)
	s1='{"vms":[{}]}' k1='{"vms":[{}]}'
	echo '{}' > "$dir/epochs.json"
	if [ "$mode" = peer-patroni ]; then
		# a failover or a standby lost meanwhile: not the peer's row
		tl1=$(peer_pg_timeline "$PEER_PG_IP1") || tl1=null
		[ "$(peer_pg_leader)" = "$PEER_PG_IP1" ] && [ "$tl1" = "$tl0" ] &&
			[ "$(peer_pg_sync_state)" = sync ] ||
			rdb_log "WARNING: $rname round $round: the Patroni pair changed during the run (leader $(peer_pg_leader), timeline $tl0 -> $tl1, pg2 '$(peer_pg_sync_state)')"
	elif [ "$mode" != none ]; then
		bcpu_protected_end "$dir" "$s0" "$c0p" "$c0b" "$c1p" "$c1b" "$el"
		s1=$BCPU_S1 k1=$BCPU_K1 dcpu=$BCPU_DCPU
	fi
	# field 3 of pgbench's log: the transaction's latency in microseconds
	cat "$dir"/txn.* | awk '{print $3}' | sort -n > "$dir/lat.txt"
	jq -n -L tests/lib --arg name "$rname" --arg base "$name" --arg mode "$mode" --argjson ckpt "$ckpt" \
		--argjson clients "$clients" --arg sel "$sel" --argjson round "$round" \
		--arg place "$place" --arg setting "$setting" \
		--argjson s0 "$s0" --argjson s1 "$s1" --slurpfile ep "$dir/epochs.json" --rawfile lat "$dir/lat.txt" \
		--arg tps "$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$dir/pgbench.out" | head -n 1)" \
		--argjson secs "$el" --argjson hz "$(getconf CLK_TCK)" \
		--argjson t0 "$t0" --argjson t1 "$t1" \
		--argjson tl0 "$tl0" --argjson tl1 "$tl1" --argjson dcpu "$dcpu" \
		--argjson qc $((q1 - q0)) --argjson dc $((d1 - d0)) --argjson bc $((b1 - b0)) \
		--arg policy "${policy:-writes}" --argjson k1 "$k1" '
		include "bench";
		($lat | split("\n") | map(select(length > 0) | tonumber)) as $l |
		($l | length) as $n |
		($s0.vms[0]) as $a | ($s1.vms[0]) as $b |
		($mode != "none" and ($mode | startswith("peer-") | not)) as $p |
		(($b.checkpoints // 0) - ($a.checkpoints // 0)) as $epochs |
		{ name: $name, row: $base, round: $round, placement: $place,
		  mode: $mode, clients: $clients, policy: $policy,
		  setting: (if $setting == "" then null else $setting end),
		  workload: (if $sel == "-S" then "select-only" else "tpcb-like" end),
		  epoch_ms: (if $p then $ckpt else null end),
		  tps: ($tps | tonumber), transactions: $n,
		  run_s: $secs,
		  latency_ms_p50: ($l[($n * 0.5 | floor)] / 1000),
		  latency_ms_p99: ($l[($n * 0.99 | floor)] / 1000),
		  latency_ms_mean: (($l | add) / $n / 1000) } +
		checkpoint_fields($p; $s0; $s1; $k1; $ep[0]; $t0; $t1; $secs) + {
		  cpu_share: { guest_qemu: ($qc / $hz / $secs), primary_remusdbd: ($dc / $hz / $secs),
			       (if $mode == "peer-patroni" then "standby_qemu" else "backup_remusdbd" end):
				($bc / $hz / $secs) },
		  daemon_cpu: $dcpu,
		  timeline: (if $mode == "peer-patroni" then { before: $tl0, after: $tl1 } else null end),
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
		> "$dir/row.json" || rdb_fail "no result for $rname"
	cluster_down pgbench
	rows+=("$dir/row.json")
}

# ---- failover rows ----
fo_peer() {	# pg2 leads (REST /primary), is out of recovery, takes a write
	peer_pg_takeover "$1" 120 || return 1
	jq -n --argjson l "$PEER_PG_LEADER_MS" --argjson p "$PEER_PG_PROMOTED_MS" \
		--argjson w "$PEER_PG_WRITE_MS" --argjson ttl "$PEER_TTL" \
		--argjson lw "$PEER_LOOP_WAIT" --argjson rt "$PEER_RETRY" \
		'{ leader_after_ms: $l, promoted_after_ms: $p, write_after_ms: $w,
		   patroni: { ttl: $ttl, loop_wait: $lw, retry_timeout: $rt } }' > "$CL_DIR/fo-extra.json"
}

fo() {	# fo NAME MODE(commit-protection|plain|peer-patroni) [TTL LOOP_WAIT RETRY]
	local name=$1 mode=$2 dir=$out/pgbench-$1
	place placed
	export CL_COMPRESSION=true CL_MODE=$mode
	rdb_log "bench: pgbench, failover: $name"
	rm -rf "$dir"
	mkdir -p "$dir"
	if [ "$mode" = peer-patroni ]; then
		CL_MODE=plain PEER_TTL=$3 PEER_LOOP_WAIT=$4 PEER_RETRY=$5
		peer_up 0 "$3" "$4" "$5" || rdb_fail "the Patroni pair did not come up (logs in $CL_DIR)"
		PGTARGETSESSIONATTRS=read-write bfo_row "$name" postgresql "$PEER_PG_IP1,$PEER_PG_IP2" \
			"$dir/row.json" fo_peer "$CL_DIR/fo-extra.json" ||
			rdb_fail "$name failed (logs in $CL_DIR)"
	else
		use_guest rdb
		{ cluster_hosts_up pgbench && cluster_vm_up 25; } || rdb_fail "setup failed"
		cl_wait_pg ledger || rdb_fail "PostgreSQL not reachable"
		bfo_row "$name" postgresql "$CL_GUEST_IP" "$dir/row.json" bfo_remus_after "$CL_DIR/fo-extra.json" ||
			rdb_fail "$name failed (logs in $CL_DIR)"
	fi
	jq --arg mode "$mode" '. + { mode: $mode }' "$dir/row.json" > "$dir/row.json.tmp" &&
		mv "$dir/row.json.tmp" "$dir/row.json"
	# the clients' journals and what the check said, kept with the row
	cp -r "$CL_DIR/ledger-$name" "$dir/journal" && cp "$CL_DIR/ledger-$name".*.log "$dir/"
	cluster_down pgbench
	fo_rows+=("$dir/row.json")
}

# The first row of a run on a host idle till then ran at less than half
# the speed of the same row a round later (sysbench: 8.3 against 18.9
# tps): one unprotected row first, not measured, warms the host.
one warm-up-c4 none 25 4 0 placed
rows=()

has() {	# has PLACEMENT: that placement is asked for
	[[ " ${places[*]} " == *" $1 "* ]]
}

for ((r = 1; r <= repeats; r++)); do
	for c in "${client_counts[@]}"; do
		if has placed; then
			one unprotected-c$c none 25 $c $r placed
			one remus-25-c$c plain 25 $c $r placed
			one cp-25-c$c commit-protection 25 $c $r placed
			one cp-50-c$c commit-protection 50 $c $r placed
			one ckpt-only-25-c$c commit-protection 25 $c $r placed "" off
			one cp-25-async-c$c commit-protection 25 $c $r placed "" "" async
			if [ "$peers" = 1 ]; then
				one peer-patroni-sync-c$c peer-patroni 25 $c $r placed
				[ $c = 4 ] && one peer-patroni-strict-c$c peer-patroni 25 $c $r placed "" "" strict
				one peer-patroni-remote-apply-c$c peer-patroni 25 $c $r placed "" "" remote-apply
			fi
		fi
		if has unplaced && [ $r = 1 ]; then
			one unprotected-c$c none 25 $c $r unplaced
			one cp-25-c$c commit-protection 25 $c $r unplaced
			one ckpt-only-25-c$c commit-protection 25 $c $r unplaced "" off
			[ "$peers" = 1 ] && one peer-patroni-sync-c$c peer-patroni 25 $c $r unplaced
		fi
	done
	if has placed; then
		one unprotected-select-c4 none 25 4 $r placed -S
		one cp-25-select-c4 commit-protection 25 4 $r placed -S
	fi
done
for p in "${places[@]}"; do
	for c in "${client_counts[@]}"; do
		one unprotected-end-c$c none 25 $c $((repeats + 1)) "$p"
	done
	[ "$p" = placed ] && one unprotected-end-select-c4 none 25 4 $((repeats + 1)) placed -S
done
if [ "${PGBENCH_FAILOVER:-1}" = 1 ]; then
	fo failover-cp-25 commit-protection
	fo failover-remus-25 plain
	if [ "$peers" = 1 ]; then
		fo peer-patroni-failover-default peer-patroni 30 10 10
		fo peer-patroni-failover-tuned peer-patroni 10 2 4
	fi
fi
[ ${#rows[@]} -gt 0 ] || rows=(/dev/null)
[ ${#fo_rows[@]} -gt 0 ] || fo_rows=(/dev/null)

jq -n -L tests/lib --argjson secs "$secs" --argjson repeats "$repeats" \
	--slurpfile rows <(cat "${rows[@]}") --slurpfile fo <(cat "${fo_rows[@]}") '
	include "bench";
	# the unprotected rows of the same kind opening round r and the next
	# round that has one (the set closing the run at the latest)
	def base($x): ($rows | map(select(.mode == "none" and .placement == $x.placement
		and .clients == $x.clients and .workload == $x.workload))) as $u |
		($u | map(select(.round > $x.round) | .round) | min) as $next |
		$u | map(select(.round == $x.round or .round == $next));
	($rows | map(. as $x | base($x) as $b |
		($b | map(.tps) | add / length) as $bt |
		($b | map(.latency_ms_p50) | add / length) as $bl |
		. + { ratio: (.tps / $bt), tps_ratio: (.tps / $bt), baseline_tps: $bt,
		      latency_p50_ratio: (.latency_ms_p50 / $bl),
		      baseline_drift: (($b | map(.tps) | max - min) / $bt) })) as $all |
	($all | map(select(.name | test("-end-") | not)) |
		group_by(.name) | map({ name: .[0].name, row: .[0].row, placement: .[0].placement,
			mode: .[0].mode, clients: .[0].clients, workload: .[0].workload,
			setting: .[0].setting, rounds: length,
			tps: (map(.tps) | median), ratio: (map(.ratio) | median),
			ratio_min: (map(.ratio) | min), ratio_max: (map(.ratio) | max),
			latency_ms_p50: (map(.latency_ms_p50) | median),
			latency_ms_p99: (map(.latency_ms_p99) | median),
			pause_ms_p50: (map(.pause_ms_p50) | nmedian),
			pause_ms_p99: (map(.pause_ms_p99) | nmedian),
			pause_share: (map(.pause_share) | nmedian),
			cpu_share: { guest_qemu: (map(.cpu_share.guest_qemu) | median),
				     primary_remusdbd: (map(.cpu_share.primary_remusdbd) | median) },
			daemon_ms_per_epoch: { primary: (map(.daemon_cpu.primary.ms_per_epoch) | nmedian),
					       backup: (map(.daemon_cpu.backup.ms_per_epoch) | nmedian) },
			baseline_drift_max: (map(.baseline_drift) | max) })) as $sum |
	($sum | map({ key: .name, value: . }) | from_entries) as $s |
	def r($n): $s[$n].ratio;
	{ workload: "pgbench (scale 16), \($secs) s per row after a 5 s warm-up, \($repeats) interleaved rounds; the guest under TCG; the patched server, remusdb.commit_protection = writes",
	  baseline: "per round: the mean of the unprotected rows of the same workload, clients and placement opening it and the next round that has them (a set closes the run); baseline_drift = (max - min) / mean of those two",
	  placement: "placed: the primary remusdbd and pgbench on CPU 0, the guest QEMU and the backup remusdbd (another host) on CPU 1, the peer standby QEMU (another host) on CPU 0; unplaced: nothing pinned",
	  rows: $all, summary: $sum, failover: $fo,
	  decomposition: ([4, 16] | map(tostring) | map(. as $c |
	    select($s["ckpt-only-25-c" + $c]) | {
	      clients: ($c | tonumber),
	      checkpointing: r("ckpt-only-25-c" + $c),
	      holding_commit_acks: ($s["cp-25-c" + $c].tps / $s["ckpt-only-25-c" + $c].tps),
	      pause_share: $s["ckpt-only-25-c" + $c].pause_share,
	      guest_cpu_lost: (1 - $s["ckpt-only-25-c" + $c].cpu_share.guest_qemu /
			       $s["unprotected-c" + $c].cpu_share.guest_qemu) })),
	  goals: ([
	    { goal: "checkpoints only, 4 clients, 25 ms >= 0.85x unprotected (placed, median)", ratio: r("ckpt-only-25-c4"), met: (r("ckpt-only-25-c4") >= 0.85) },
	    { goal: "checkpoints only, 16 clients, 25 ms >= 0.85x unprotected (placed, median)", ratio: r("ckpt-only-25-c16"), met: (r("ckpt-only-25-c16") >= 0.85) },
	    { goal: "commit protection, 4 clients, 25 ms >= 0.8x unprotected", ratio: r("cp-25-c4"), met: (r("cp-25-c4") >= 0.8) },
	    { goal: "commit protection, 16 clients, 25 ms >= 0.8x unprotected", ratio: r("cp-25-c16"), met: (r("cp-25-c16") >= 0.8) },
	    { goal: "commit protection, 4 clients, 25 ms >= Patroni sync replication", ratio: r("cp-25-c4"), peer: r("peer-patroni-sync-c4"), met: (r("peer-patroni-sync-c4") != null and r("cp-25-c4") >= r("peer-patroni-sync-c4")) },
	    { goal: "commit protection, 16 clients, 25 ms >= Patroni sync replication", ratio: r("cp-25-c16"), peer: r("peer-patroni-sync-c16"), met: (r("peer-patroni-sync-c16") != null and r("cp-25-c16") >= r("peer-patroni-sync-c16")) },
	    { goal: "select-only, commit protection (writes) >= 0.95x unprotected", ratio: r("cp-25-select-c4"), met: (r("cp-25-select-c4") != null and r("cp-25-select-c4") >= 0.95) } ]
	    | map(select(.ratio != null))) }' > "$out/pgbench.json" || rdb_fail "could not write pgbench.json"
jq -r '.summary[] | "\(.name): \(.tps | . * 10 | round / 10) tps, x\(.ratio | . * 100 | round / 100) (\(.ratio_min | . * 100 | round / 100)-\(.ratio_max | . * 100 | round / 100) over \(.rounds)), latency p50 \(.latency_ms_p50 | . * 10 | round / 10) ms p99 \(.latency_ms_p99 | . * 10 | round / 10) ms\(if .pause_share then ", pause p50 \(.pause_ms_p50) ms, paused \(.pause_share * 1000 | round / 10)% of the time" else "" end)"' "$out/pgbench.json"
jq -r '.failover[] | "\(.name): outage \(.outage_ms) ms, \(.lost_commits) of \(.acked_commits) acknowledged commits lost, \(.sessions_lost) of \(.clients) sessions lost"' "$out/pgbench.json"
jq -r '.goals[] | "goal: \(.goal): x\(.ratio | . * 100 | round / 100)\(if .peer then " (peer x\(.peer | . * 100 | round / 100))" else "" end) \(if .met then "met" else "NOT met" end)"' "$out/pgbench.json"
echo "bench: $out/pgbench.json"

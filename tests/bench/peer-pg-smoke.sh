#!/usr/bin/env bash
# The Patroni peer (tests/lib/peer-pg.sh) once through: a two-node
# Patroni 3.0.2 cluster, tuned (ttl 10, loop_wait 2, retry_timeout 4,
# synchronous_mode on, not strict), pgbench against the leader (after a
# 5 s warm-up), then the
# leader's host loses power and the standby must take over.
#
# Fails unless: pg1 leads and pg2 is its sync standby before the load;
# pgbench runs without error; pg2 is still the sync standby and the
# timeline unchanged after it (no spurious failover under TCG); after the
# pull pg2 leads and commits a write within PEER_SMOKE_FAILOVER_S
# (default 90).  Prints the setup time, Patroni's CPU in each guest
# during the load, pgbench's tps, and the times from the pull until pg2
# led and until it took a write; writes them to
# build/bench/peer-pg-smoke.json.
#
#   PEER_SMOKE_SECONDS (default 10): pgbench's -T
set -u
cd "$(dirname "$0")/../.."
. tests/lib/common.sh
. tests/lib/netns.sh
. tests/lib/cluster.sh
. tests/lib/peer-pg.sh
rdb_require_root
run=${RDB_RUN:-ppg}
secs=${PEER_SMOKE_SECONDS:-10}
fo_secs=${PEER_SMOKE_FAILOVER_S:-90}
ttl=10 loop_wait=2 retry=4
out=build/bench
mkdir -p "$out"
CL_PG_SCALE=16
t0=$(date +%s)
peer_pg_use_guest || rdb_fail "Patroni guest build failed"
build_s=$(( $(date +%s) - t0 ))
trap 'cluster_down "$run"' EXIT
peer_pg_up "$run" "$ttl" "$loop_wait" "$retry" 0 || rdb_fail "the Patroni cluster did not come up"
con1=$CL_DIR/pri/console.log con2=$CL_DIR/pr2/vm2.console.log
sock1=$CL_DIR/pri/serial.sock sock2=$CL_DIR/pr2/vm2.serial.sock
tl0=$(peer_pg_timeline "$PEER_PG_IP1") || rdb_fail "no timeline from pg1"

# warm-up, as pgbench.sh's rows have: the same load, not measured (the
# first seconds after the cluster came up ran at half the rate)
ip netns exec "$(netns_name "$run" cli)" timeout 65 "$PGBIN/pgbench" -h "$PEER_PG_IP1" \
	-U postgres -n -c 4 -j 2 -T 5 bench >/dev/null 2>&1 || rdb_fail "the warm-up pgbench failed"
cpu1a=$(peer_pg_cpu "$sock1" "$con1") || rdb_fail "Patroni's CPU time in pg1"
cpu2a=$(peer_pg_cpu "$sock2" "$con2") || rdb_fail "Patroni's CPU time in pg2"
w0=$(date +%s%3N)
rdb_log "pgbench -c 4 -j 2 -T $secs against pg1"
ip netns exec "$(netns_name "$run" cli)" timeout $((secs + 60)) "$PGBIN/pgbench" \
	-h "$PEER_PG_IP1" -U postgres -n -c 4 -j 2 -T "$secs" bench > "$CL_DIR/pgbench.out" 2>&1 ||
	rdb_fail "pgbench failed: $(tail -3 "$CL_DIR/pgbench.out")"
w1=$(date +%s%3N)
cpu1b=$(peer_pg_cpu "$sock1" "$con1") || rdb_fail "Patroni's CPU time in pg1"
cpu2b=$(peer_pg_cpu "$sock2" "$con2") || rdb_fail "Patroni's CPU time in pg2"
tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$CL_DIR/pgbench.out" | head -n 1)
[ -n "$tps" ] || rdb_fail "no tps in pgbench's output: $(tail -3 "$CL_DIR/pgbench.out")"
state=$(peer_pg_sync_state)
[ "$state" = sync ] || rdb_fail "pg2's sync_state after the load: '$state', not sync"
tl1=$(peer_pg_timeline "$PEER_PG_IP1") || rdb_fail "no timeline from pg1 after the load"
[ "$tl1" = "$tl0" ] || rdb_fail "the timeline moved during the load ($tl0 -> $tl1): a failover"
[ "$(peer_pg_leader)" = "$PEER_PG_IP1" ] || rdb_fail "pg1 no longer leads after the load"
# Patroni's share of its guest's one vCPU while the load ran (the
# console reads take a few seconds each side: a slight overestimate of
# the interval's length, so of nothing else)
share() { awk -v a="$1" -v b="$2" -v ms=$((w1 - w0)) 'BEGIN { printf "%.3f", (b - a) / (ms / 1000) }'; }
sh1=$(share "$cpu1a" "$cpu1b") sh2=$(share "$cpu2a" "$cpu2b")
rdb_log "pgbench: $tps tps; sync_state sync, timeline $tl1 throughout; Patroni's CPU: pg1 $sh1, pg2 $sh2 of a vCPU"

rdb_log "pulling the power of pri (pg1's host)"
peer_pg_pull_failover "$run" "$fo_secs" || rdb_fail "no failover to pg2"
tl2=$(peer_pg_timeline "$PEER_PG_IP2") || rdb_fail "no timeline from pg2"
[ "$tl2" -gt "$tl1" ] || rdb_fail "pg2 leads on timeline $tl2, not past $tl1"
rdb_log "after the pull pg2 led (REST) in $PEER_PG_LEADER_MS ms, was out of recovery in $PEER_PG_PROMOTED_MS ms, took a write in $PEER_PG_WRITE_MS ms (timeline $tl2)"

jq -n --argjson build_s "$build_s" --argjson up_ms "$PEER_PG_UP_MS" --argjson tps "$tps" \
	--argjson secs "$secs" --argjson ttl "$ttl" --argjson loop_wait "$loop_wait" \
	--argjson retry "$retry" --argjson sh1 "$sh1" --argjson sh2 "$sh2" \
	--argjson leader_ms "$PEER_PG_LEADER_MS" --argjson promoted_ms "$PEER_PG_PROMOTED_MS" \
	--argjson write_ms "$PEER_PG_WRITE_MS" \
	--argjson tl1 "$tl1" --argjson tl2 "$tl2" '
	{ peer: "Patroni 3.0.2, PostgreSQL 15 (the patched server, remusdb.commit_protection = writes, both VMs attached and unprotected), synchronous_mode on, not strict",
	  dcs: { ttl: $ttl, loop_wait: $loop_wait, retry_timeout: $retry },
	  guest_build_s: $build_s, cluster_up_ms: $up_ms,
	  pgbench: { clients: 4, threads: 2, seconds: $secs, scale: 16, tps: $tps },
	  patroni_cpu_share_during_load: { pg1_leader: $sh1, pg2_standby: $sh2 },
	  failover: { leader_ms: $leader_ms, promoted_ms: $promoted_ms, write_ms: $write_ms, timeline_before: $tl1, timeline_after: $tl2 } }' \
	> "$out/peer-pg-smoke.json" || rdb_fail "could not write $out/peer-pg-smoke.json"
cat "$out/peer-pg-smoke.json"
echo "PASS: Patroni peer: up in $PEER_PG_UP_MS ms, pgbench $tps tps with pg2 sync throughout, failover after a power pull: pg2 led in $PEER_PG_LEADER_MS ms, took a write in $PEER_PG_WRITE_MS ms (ttl $ttl, loop_wait $loop_wait, retry_timeout $retry)"

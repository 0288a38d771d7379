# shellcheck shell=bash
# A failover row of the benchmarks: the same clients and the same power
# pull for RemusDB and for its peers (tests/lib/peer-*.sh), so that the
# outage, the sessions and the commits lost compare.
#
#   bfo_row NAME DBMS HOST OUT_JSON AFTER_PULL [EXTRA_JSON_FILE]
#
# The ledger workload (tests/workload/ledger.c) runs BFO_CLIENTS (4)
# clients against HOST from the client host, each reconnecting after an
# error (--reconnect: a peer's failover breaks every session, and
# RemusDB's commit protection resets the inconsistent ones), every wait
# on the server bounded by BFO_WAIT_S (default 5 s: a client's read
# deadline, which a DBA sets; a request in flight to a host that lost its
# power is answered by nobody, so it bounds a peer's outage from below,
# while a RemusDB session survives the failover and never needs it).
# The primary's host (pri) loses its power BFO_PULL_AFTER_S (10) s into
# the run (its moment: the pull's start; pull_took_ms, how long taking
# its links down and killing its processes took); AFTER_PULL (a command,
# given the pull's epoch ms) then waits
# for the failover to finish (it must return within its own deadline).
# The ledger runs BFO_AFTER_S (15) s after AFTER_PULL returned; then `ledger check` against
# HOST (the survivor now) says what clients saw.  The row (OUT_JSON):
#   outage_ms      the longest time without an acknowledged commit that
#                  spans the pull (ledger's failover_gap_ms)
#   lost_commits   acknowledged commits missing on the survivor
#   sessions_lost  clients whose connection broke
#   acked_commits, in_doubt (COMMIT sent, never answered), phantom_txns,
#   partial_txns, tps_before/tps_after, clients, wait_s
# plus EXTRA_JSON_FILE's object (what AFTER_PULL measured).
bfo_row() {
	local name=$1 dbms=$2 host=$3 outj=$4 after=$5 extra=${6:-}
	local clients=${BFO_CLIENTS:-4} wait_s=${BFO_WAIT_S:-5}
	local before=${BFO_PULL_AFTER_S:-10} after_s=${BFO_AFTER_S:-15}
	local ledger=$RDB_ROOT/build/workload/ledger dir=$CL_DIR/ledger-$name led pull_ms took rc
	[ -x "$ledger" ] || { rdb_log "$ledger missing (make all)"; return 1; }
	rm -rf "$dir"
	mkdir -p "$dir"
	# it runs until told to stop (at most 10 minutes): until BFO_AFTER_S
	# after the failover finished, however long that took
	rm -f "$dir.stop"
	ip netns exec "$(netns_name "$CL_RUN" cli)" "$ledger" run --dbms "$dbms" --host "$host" \
		--clients "$clients" --reconnect --duration 600 --stop-file "$dir.stop" \
		--journal "$dir" --wait-timeout "$wait_s" 2>"$dir.run.log" &
	led=$!
	sleep "$before"
	# the pull's moment: when its first link goes down (the pull takes
	# a while: a failover row's outage and timings count from its start)
	pull_ms=$(date +%s%3N)
	netns_power_pull "$CL_RUN" pri
	took=$(( $(date +%s%3N) - pull_ms ))
	rdb_log "bench: $name: pulled the primary's power (in $took ms)"
	"$after" "$pull_ms" || { kill "$led" 2>/dev/null; rdb_log "$name: the failover did not finish"; return 1; }
	sleep "$after_s"
	touch "$dir.stop"
	wait_pid $((wait_s + 30)) "$led"
	rc=$?
	[ "$rc" = 0 ] || rdb_log "$name: ledger run exited $rc ($dir.run.log)"
	ip netns exec "$(netns_name "$CL_RUN" cli)" "$ledger" check --dbms "$dbms" --host "$host" \
		--clients "$clients" --reconnect --journal "$dir" --pull-ms "$pull_ms" \
		--json "$dir.json" 2>"$dir.check.log"
	[ -s "$dir.json" ] || { rdb_log "$name: ledger check produced nothing ($dir.check.log)"; return 1; }
	[ -n "$extra" ] && [ -s "$extra" ] || { extra=$dir.extra.json; echo '{}' > "$extra"; }
	jq -n --arg name "$name" --arg dbms "$dbms" --argjson wait_s "$wait_s" \
		--argjson pull_after_s "$before" --argjson took "$took" --slurpfile l "$dir.json" --slurpfile x "$extra" '
		$l[0] as $l |
		{ name: $name, dbms: $dbms, clients: $l.clients, wait_s: $wait_s,
		  pull_after_s: $pull_after_s, pull_took_ms: $took,
		  outage_ms: $l.failover_gap_ms, lost_commits: $l.lost_commits,
		  sessions_lost: $l.broken_connections, acked_commits: $l.acked_commits,
		  in_doubt: $l.in_doubt, phantom_txns: $l.phantom_txns,
		  partial_txns: $l.partial_txns, tps_before: $l.tps_before,
		  tps_after: $l.tps_after } + $x[0]' > "$outj"
}

# bfo_remus_after PULL_MS: an AFTER_PULL for a RemusDB row: the backup
# failed over (30 s); writes $CL_DIR/fo-extra.json { failed_over_after_ms }
bfo_remus_after() {
	local pull=$1 now age
	cl_ctl bak wait "$CL_VM" failed-over --timeout 30 || return 1
	now=$(date +%s%3N)
	age=$(cl_ctl bak status "$CL_VM" --json | jq .vms[0].state_age_ms)
	jq -n --argjson f $((now - age - pull)) '{ failed_over_after_ms: $f }' > "$CL_DIR/fo-extra.json"
}

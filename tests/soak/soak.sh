#!/usr/bin/env bash
# The whole life of a protected database, many times over (make soak; a
# benchmark-style run, not part of make check).  PostgreSQL in the guest
# under the ledger's write load (4 clients, every acknowledged commit
# journaled), on network-namespace hosts with a witness, a capture on the
# switch for the whole run.  Each cycle, the VM protected on host P with
# its backup on S:
#   1. P's power is pulled; S fails over (the decision, the restore);
#   2. P is repaired (its network and remusdbd back, its old image
#      there) and S protects the VM back to it (a resync);
#   3. odd cycles: `remusdbctl migrate` moves the VM home to P, which
#      protects it back to S; even cycles: S's power is pulled too, P
#      fails over, S is repaired and P protects the VM back to it.
# Once each, at random cycles (before step 1): the replication link cut
# (one side wins the decision; the other is fenced or degraded, and
# protection is set up again), the witness restarted, the backup's
# remusdbd killed and started again (the primary protects anew), the
# primary's remusdbd killed and started again (the VM attached, then
# protected again).
#
# Every cycle runs its own ledger (a journal per cycle, transactions
# numbered after the last cycle's: ledger --base) and ends with its check
# against the copy that runs: acknowledged commits, lost, phantom,
# partial, the clients' outage.  Per cycle also: which host emitted the
# guest's MAC (the capture: host switches beyond the cycle's ownership
# changes are a second copy), the resync's bytes, the decision's and the
# restore's time, both daemons' RSS and open fds, the processes on each
# host.  build/soak/report.json: { cycles: [...], cycles_done,
# acked_commits, lost_commits, phantom_commits, two_copies_seen,
# rss_growth_kb, fd_leaks, ok, ... }.
#
#   tests/soak/soak.sh [--cycles K] [--seed N]
#
# At the end both daemons are stopped by SIGTERM: an ASan build
# (RDB_BUILD=build/san) reports at exit the memory they leaked.
# Fails (exit 1) on any lost or phantom commit, a second copy, a daemon's
# anonymous RSS growing by more than SOAK_RSS_MAX_KB (default 65536) over
# the cycles one daemon lived through in one role, an fd count growing
# there, or a process on a host that its role does not run.  Every wait
# has a deadline.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

cycles=20
seed=$(( $(date +%s) % 100000 ))
while [ $# -gt 0 ]; do
	case $1 in
	--cycles) cycles=$2; shift 2 ;;
	--seed) seed=$2; shift 2 ;;
	*) echo "usage: soak.sh [--cycles K] [--seed N]" >&2; exit 2 ;;
	esac
done
run=${RDB_RUN:-sk$$}
out=$RDB_ROOT/build/soak
rss_max_kb=${SOAK_RSS_MAX_KB:-65536}
trap 'cluster_down "$run"' EXIT
rdb_require_root
[ -x "$RDB_ROOT/build/workload/ledger" ] || rdb_fail "build/workload/ledger missing (make all)"
rm -rf "$out"
mkdir -p "$out"
RANDOM=$seed
declare -A addr=([pri]=10.78.0.1:7788 [bak]=10.78.0.2:7788)
other() { [ "$1" = pri ] && echo bak || echo pri; }
# the extra faults' cycles: each once, at a random cycle (2..K when K > 1)
declare -A extra_at
for f in linkcut witness bakdaemon pridaemon; do
	extra_at[$f]=$(( cycles > 1 ? 2 + RANDOM % (cycles - 1) : 1 ))
done
rdb_log "soak: $cycles cycles, seed $seed; extra faults at cycles: linkcut ${extra_at[linkcut]}, witness ${extra_at[witness]}, backup daemon ${extra_at[bakdaemon]}, primary daemon ${extra_at[pridaemon]}"

cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
cluster_hosts_up "$run" || rdb_fail "hosts setup failed (logs in $CL_DIR)"
cluster_vm_up 25 || rdb_fail "protected PostgreSQL VM did not come up (logs in $CL_DIR)"
cl_wait_pg || rdb_fail "PostgreSQL not reachable from the client"
clix() { ip netns exec "$(netns_name "$run" cli)" "$@"; }
P=pri S=bak

state() { cl_ctl "$1" status "$CL_VM" --json 2>/dev/null | jq -r '.vms[0].state // empty'; }
# waitst SIDE STATE SECONDS WHAT
waitst() {
	cl_ctl "$1" wait "$CL_VM" "$2" --timeout "$3" >/dev/null 2>&1 ||
		rdb_fail "cycle $k: $4: $1 is $(state "$1") ($(cl_ctl "$1" status "$CL_VM" --json 2>/dev/null | jq -r '.vms[0].state_reason // empty')), not $2 after $3 s"
}
# the VM file of the copy on SIDE: as it was served there last (written
# when it was protected from there), else the first one (pri's)
vmfile() {
	local f=$CL_DIR/$1/state/$CL_VM/vm.conf
	[ -f "$f" ] && echo "$f" || echo "$CL_DIR/$CL_VM.conf"
}
protected_both() {
	waitst "$P" protected 180 "protection of the VM on $P"
	waitst "$S" protected 30 "the backup on $S"
}
# repair SIDE: its links and remusdbd back (after a power pull)
repair() {
	netns_power_restore "$run" "$1"
	wait_for 15 "$1 reachable on the replication link" \
		ip netns exec "$(netns_name "$run" "$(other "$1")")" ping -c 1 -W 1 "${addr[$1]%:*}" ||
		rdb_fail "cycle $k: $1's links did not come back"
	cl_start_daemon "$1" || rdb_fail "cycle $k: $1's remusdbd did not start"
}
# pull SIDE: its power; the other fails over; they swap roles
pull() {
	local victim=$1 t0
	t0=$(date +%s%3N)
	[ -z "$pull_ms" ] && pull_ms=$t0
	netns_power_pull "$run" "$victim"
	waitst "$(other "$victim")" failed-over 60 "the failover after $victim's power pull"
	P=$(other "$victim") S=$victim
	changes=$((changes + 1))
	cl_ctl "$P" status "$CL_VM" --json > "$cdir/failover-$victim.json"
	decide_ms+=("$(grep -o 'won the failover decision at the witness after [0-9]* ms' \
		"$CL_DIR/$P/remusdbd.log" | tail -n 1 | grep -o '[0-9]* ms' | cut -d' ' -f1)")
	restore_ms+=("$(jq '.vms[0].failover_ms' "$cdir/failover-$victim.json")")
}
# protect_back: P (where the VM runs, restored) protects it to S (a resync)
protect_back() {
	cl_ctl "$P" protect "$CL_VM" "peer=${addr[$S]}" >/dev/null ||
		rdb_fail "cycle $k: protect back from $P refused"
	protected_both
	resync_bytes+=("$(cl_ctl "$P" status "$CL_VM" --json | jq '.vms[0].disk.initial_copy.bytes')")
}
# the primary's QEMU on SIDE (pri: the harness started it; either: one
# that remusdbd restored there), for a fenced copy's end
kill_fenced_qemu() {
	local pids
	pids=$(ip netns pids "$(netns_name "$run" "$1")" | while read -r p; do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = qemu-system-x86 ] && echo "$p"; done)
	[ -n "$pids" ] && kill -9 $pids
	return 0
}

# ---- the extra faults (before a cycle's pull; the VM protected on P) ----
fault_witness() {
	cl_stop_witness
	sleep 3
	[ "$(state "$P")" = protected ] && [ "$(state "$S")" = protected ] ||
		rdb_fail "cycle $k: the witness's loss changed protection ($P $(state "$P"), $S $(state "$S"))"
	cl_start_witness || rdb_fail "cycle $k: the witness did not come back"
	sleep 2
}
fault_linkcut() {
	local winner
	netns_cut_repl "$run"
	wait_for 20 "one side to win the decision" bash -c "
		for s in pri bak; do st=\$($RDB_BUILD/remusdbctl --socket $CL_DIR/\$s/ctl.sock status $CL_VM --json 2>/dev/null | jq -r '.vms[0].state');
		  [ \"\$st\" = failed-over ] && exit 0; done
		st=\$($RDB_BUILD/remusdbctl --socket $CL_DIR/$P/ctl.sock status $CL_VM --json | jq -r '.vms[0].state')
		[ \"\$st\" = degraded ] && [ \"\$($RDB_BUILD/remusdbctl --socket $CL_DIR/$S/ctl.sock status $CL_VM --json | jq -r '.vms[0].state')\" = degraded ]" ||
		rdb_fail "cycle $k: nobody won after the link was cut"
	_nsx "$run" pri ip link set repl up
	wait_for 15 "the replication link back" \
		ip netns exec "$(netns_name "$run" bak)" ping -c 1 -W 1 10.78.0.1 ||
		rdb_fail "cycle $k: the link did not come back"
	if [ "$(state "$S")" = failed-over ]; then
		winner=$S
		waitst "$P" fenced 20 "the loser of the decision"
		changes=$((changes + 1))
		# the operator ends the fenced copy; the survivor protects back
		kill_fenced_qemu "$P"
		P=$winner S=$(other "$winner")
		protect_back
	else
		winner=$P
		cl_ctl "$P" protect "$(vmfile "$P")" >/dev/null ||
			rdb_fail "cycle $k: protect again on $P refused"
		protected_both
	fi
	extra_outcome="winner $winner"
}
fault_bakdaemon() {
	local n0
	n0=$(grep -c "protected again on its own" "$CL_DIR/$P/remusdbd.log")
	kill -9 "$(cat "$CL_DIR/$S/remusdbd.pid")"
	waitst "$P" degraded 20 "the primary after its backup's remusdbd died"
	cl_start_daemon "$S" || rdb_fail "cycle $k: $S's remusdbd did not start"
	# no command: the primary protects again on its own (auto_reprotect_s)
	protected_both
	[ "$(grep -c "protected again on its own" "$CL_DIR/$P/remusdbd.log")" -gt "$n0" ] ||
		rdb_fail "cycle $k: $P did not say it protected the VM again on its own"
}
fault_pridaemon() {
	local f
	f=$(vmfile "$P")
	kill -9 "$(cat "$CL_DIR/$P/remusdbd.pid")"
	sleep 1
	cl_start_daemon "$P" || rdb_fail "cycle $k: $P's remusdbd did not start"
	# the new daemon re-adopts the VM by itself (vmdef.h); an operator's
	# attach and protect, as an old runbook has them, change nothing
	cl_ctl "$P" status "$CL_VM" --json | jq -e '.vms[0].readopted == true' >/dev/null ||
		rdb_fail "cycle $k: $P's new remusdbd did not re-adopt the VM"
	cl_ctl "$P" attach "$f" >/dev/null || rdb_fail "cycle $k: attach on $P refused"
	wait_for 20 "the disk reconnected on $P" bash -c \
		"$RDB_BUILD/remusdbctl --socket $CL_DIR/$P/ctl.sock status $CL_VM --json | jq -e .vms[0].disk.client_connected" ||
		rdb_fail "cycle $k: QEMU did not reconnect its disk to the new remusdbd"
	cl_ctl "$P" protect "$f" >/dev/null || rdb_fail "cycle $k: protect on the new remusdbd refused"
	protected_both
}

# ---- per cycle: what the daemons hold ----
# daemon_json SIDE ROLE: the daemon's pid, RSS (all, and anonymous: a
# backup's RSS is mostly the guest's RAM image it maps, a leak shows in
# the anonymous part), open fds, and the processes on the host, which
# must be what its role runs: remusdbd and its watchdog, and for the
# primary the guest's QEMU and its disk server ("exe": remusdbd
# --disk-server as re-executed)
daemon_json() {
	local side=$1 role=$2 pid rss anon fds procs want
	pid=$(cat "$CL_DIR/$side/remusdbd.pid" 2>/dev/null)
	rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
	anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
	fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
	procs=$(ip netns pids "$(netns_name "$run" "$side")" | while read -r p; do
		cat "/proc/$p/comm" 2>/dev/null; done | sort | uniq -c | awk '{printf "%s%s:%s", n++ ? "," : "", $2, $1}')
	want="remusdbd:2"
	[ "$role" = primary ] && want="exe:1,qemu-system-x86:1,remusdbd:2"
	jq -n --arg side "$side" --arg role "$role" --argjson pid "${pid:-0}" \
		--argjson rss "${rss:-0}" --argjson anon "${anon:-0}" \
		--argjson fds "${fds:-0}" --arg procs "$procs" --arg want "$want" \
		'{side: $side, role: $role, pid: $pid, rss_kb: $rss, rss_anon_kb: $anon,
		  fds: $fds, processes: $procs, processes_ok: ($procs == $want)}'
}

base=0
for ((k = 1; k <= cycles; k++)); do
	cdir=$out/cycle-$k
	mkdir -p "$cdir/ledger"
	changes=0 pull_ms= extra= extra_outcome=
	decide_ms=() restore_ms=() resync_bytes=()
	t_cycle=$(date +%s%3N)
	rdb_log "soak: cycle $k of $cycles: $P primary, $S backup"
	ip netns exec "$(netns_name "$run" sw)" "$RDB_HELPERS/macwatch" --mac "$CL_GUEST_MAC" \
		--duration 900 port-pri port-bak >"$cdir/macwatch.json" 2>"$cdir/macwatch.log" &
	watch=$!
	wait_for 10 "macwatch" grep -q started "$cdir/macwatch.log" || rdb_fail "macwatch did not start"
	rm -f "$cdir/stop"
	clix "$RDB_ROOT/build/workload/ledger" run --host "$CL_GUEST_IP" --clients 4 \
		--duration 900 --journal "$cdir/ledger" --wait-timeout 30 --base "$base" \
		--stop-file "$cdir/stop" 2>"$cdir/ledger-run.log" &
	led=$!
	sleep 5
	for f in witness linkcut bakdaemon pridaemon; do
		[ "${extra_at[$f]}" = "$k" ] || continue
		rdb_log "soak: cycle $k: extra fault $f"
		extra="${extra:+$extra,}$f"
		"fault_$f"
		sleep 3
	done
	home=$P
	pull "$P"
	sleep 3
	repair "$S"
	protect_back
	sleep 3
	if [ $((k % 2)) = 1 ]; then
		cl_ctl "$P" migrate "$CL_VM" --timeout 60 >"$cdir/migrate.out" 2>&1 ||
			rdb_fail "cycle $k: migrate from $P failed: $(cat "$cdir/migrate.out")"
		waitst "$S" failed-over 30 "the VM on $S after the handover"
		P=$S S=$(other "$S")
		changes=$((changes + 1))
		sleep 2
		protect_back
	else
		sleep 2
		pull "$P"
		sleep 3
		repair "$S"
		protect_back
	fi
	sleep 5
	touch "$cdir/stop"
	wait_pid 60 "$led"
	ledger_rc=$?
	clix "$RDB_ROOT/build/workload/ledger" check --host "$CL_GUEST_IP" --clients 4 \
		--journal "$cdir/ledger" --base "$base" --pull-ms "$pull_ms" \
		--json "$cdir/ledger.json" 2>"$cdir/ledger-check.log"
	[ -s "$cdir/ledger.json" ] || rdb_fail "cycle $k: no ledger check ($cdir/ledger-check.log)"
	kill -INT "$watch" 2>/dev/null
	wait_pid 10 "$watch" || rdb_fail "cycle $k: macwatch failed"
	# the next cycle's transactions come after every number this one used
	base=$(( base + 1000000 ))
	jq -n --argjson k "$k" --arg home "$home" --arg extra "$extra" \
		--arg extra_outcome "$extra_outcome" --argjson changes "$changes" \
		--argjson ledger_rc "$ledger_rc" \
		--slurpfile l "$cdir/ledger.json" --slurpfile m "$cdir/macwatch.json" \
		--argjson pd "$(daemon_json "$P" primary)" --argjson sd "$(daemon_json "$S" backup)" \
		--argjson decide "$(printf '%s\n' "${decide_ms[@]}" | jq -s 'map(select(. != null))')" \
		--argjson restore "$(printf '%s\n' "${restore_ms[@]}" | jq -s 'map(select(. != null))')" \
		--argjson resync "$(printf '%s\n' "${resync_bytes[@]}" | jq -s 'map(select(. != null))')" \
		--argjson secs "$(( ($(date +%s%3N) - t_cycle) / 1000 ))" '
		$l[0] as $l | $m[0] as $m |
		{ cycle: $k, kind: (if $k % 2 == 1 then "pull, resync, migrate home" else "pull, resync, second pull" end),
		  primary_at_start: $home, extra_faults: $extra, extra_outcome: $extra_outcome,
		  seconds: $secs, acked_commits: $l.acked_commits,
		  lost_commits: $l.lost_commits, phantom_commits: $l.phantom_txns,
		  partial_commits: $l.partial_txns, broken_connections: $l.broken_connections,
		  ledger_rc: $ledger_rc,
		  client_outage_ms: $l.failover_gap_ms, longest_gap_ms: $l.max_gap_ms,
		  ownership_changes: $changes, emitter_switches: $m.switches,
		  two_copies: ($m.switches > $changes),
		  decision_ms: $decide, restore_ms: $restore, resync_bytes: $resync,
		  daemons: ([$pd, $sd] | sort_by(.side)),
		  stray_processes: (($pd.processes_ok and $sd.processes_ok) | not) }' > "$cdir/cycle.json" ||
		rdb_fail "cycle $k: could not assemble its record"
	jq -c '{cycle, acked_commits, lost_commits, phantom_commits, client_outage_ms, longest_gap_ms, emitter_switches, ownership_changes, resync_bytes, decision_ms, restore_ms, extra_faults, daemons: [.daemons[] | {side, role, pid, rss_anon_kb, fds, processes}]}' "$cdir/cycle.json"
	jq -e '.lost_commits == 0 and .phantom_commits == 0 and .partial_commits == 0 and
	       (.two_copies | not) and (.stray_processes | not)' "$cdir/cycle.json" >/dev/null ||
		{ jq -s '{cycles: .}' "$out"/cycle-*/cycle.json > "$out/report.json"; rdb_fail "cycle $k broke an invariant (see $cdir)"; }
done

# ---- the daemons stopped as an operator stops them (SIGTERM): an ASan
# build (RDB_BUILD=build/san) reports the memory they leaked at exit ----
leak_reports=0
for side in pri bak; do
	pid=$(cat "$CL_DIR/$side/remusdbd.pid")
	kill -TERM "$pid" 2>/dev/null
	wait_for 30 "$side's remusdbd to exit" bash -c "! kill -0 $pid 2>/dev/null" ||
		rdb_fail "$side's remusdbd did not exit on SIGTERM"
	if grep -q "ERROR: LeakSanitizer" "$CL_DIR/$side/remusdbd.log"; then
		leak_reports=$((leak_reports + 1))
		grep -A 12 "ERROR: LeakSanitizer" "$CL_DIR/$side/remusdbd.log" | head -n 30 >&2
	fi
done

# ---- the report ----
jq -s --argjson rss_max "$rss_max_kb" --argjson seed "$seed" --argjson leaks "$leak_reports" '
	sort_by(.cycle) as $c |
	# a daemon (pid) that lived through several cycles, measured at the
	# same point of each (the same role): its growth
	([ $c[] | .daemons[] ] | group_by(.side + ":" + (.pid | tostring) + ":" + .role)
	 | map(select(length > 1) | { side: .[0].side, pid: .[0].pid, role: .[0].role,
		cycles: length, rss_anon_growth_kb: (.[-1].rss_anon_kb - .[0].rss_anon_kb),
		rss_growth_kb: (.[-1].rss_kb - .[0].rss_kb),
		fd_growth: (.[-1].fds - .[0].fds) })) as $lives |
	{ seed: $seed, cycles_done: ($c | length),
	  acked_commits: ([$c[].acked_commits] | add),
	  lost_commits: ([$c[].lost_commits] | add),
	  phantom_commits: ([$c[].phantom_commits] | add),
	  broken_connections: ([$c[].broken_connections] | add),
	  two_copies_seen: ([$c[].two_copies] | any),
	  client_outage_ms: { p50: ([$c[].client_outage_ms] | sort | .[length / 2 | floor]),
			      max: ([$c[].client_outage_ms] | max) },
	  rss_growth_kb: { pri: (($c[-1].daemons[] | select(.side == "pri").rss_anon_kb) -
				($c[0].daemons[] | select(.side == "pri").rss_anon_kb)),
			   bak: (($c[-1].daemons[] | select(.side == "bak").rss_anon_kb) -
				($c[0].daemons[] | select(.side == "bak").rss_anon_kb)),
			   note: "anonymous RSS, last cycle minus first; remusdbd restarts with its host, so per_daemon_life has each process over the cycles it lived in one role" },
	  per_daemon_life: $lives,
	  rss_bound_kb: $rss_max,
	  fd_leaks: ([$lives[] | select(.fd_growth > 0)] | length),
	  stray_processes: ([$c[] | select(.stray_processes)] | length),
	  leak_reports: $leaks,
	  cycles: $c } |
	.ok = (.lost_commits == 0 and .phantom_commits == 0 and (.two_copies_seen | not)
	       and .cycles_done > 0 and .fd_leaks == 0 and .stray_processes == 0
	       and .leak_reports == 0
	       and ([.per_daemon_life[].rss_anon_growth_kb] | all(. <= $rss_max)))' \
	"$out"/cycle-*/cycle.json > "$out/report.json" || rdb_fail "could not assemble the report"
jq '{seed, cycles_done, acked_commits, lost_commits, phantom_commits, broken_connections,
     two_copies_seen, client_outage_ms, rss_growth_kb, per_daemon_life, fd_leaks,
     stray_processes, leak_reports, ok}' "$out/report.json"
jq -e .ok "$out/report.json" >/dev/null || rdb_fail "the soak failed (build/soak/report.json)"
echo "PASS: $(jq .cycles_done "$out/report.json") cycles, $(jq .acked_commits "$out/report.json") commits acknowledged, none lost, one copy at a time"

#!/usr/bin/env bash
# Nemesis 1: the replication link cut, both hosts alive and on the client
# network.  Both lose their peer; the witness lets exactly one run on
# within 3 s: either the primary (degraded; the backup degraded too,
# without failing over) or the backup (failed-over; the primary fenced:
# guest stopped, held output discarded).  Checks of tests/lib/nemesis.sh.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/nemesis.sh"

nemesis_start "${RDB_RUN:-np$$}"
sleep 8
nemesis_fault_now
netns_cut_repl "$NM_RUN"
echo "cut the replication link under load"
# one copy runs on within 3 s (failover timeout 1 s + the witness + the
# restore), timed by the daemons' own state changes, not by our polling
deadline=$(( $(date +%s%3N) + 10000 ))
outcome=
while [ "$(date +%s%3N)" -lt "$deadline" ]; do
	p=$(nemesis_state pri) b=$(nemesis_state bak)
	if [ "$p" = degraded ] && [ "$b" = degraded ]; then outcome=primary; break; fi
	if [ "$p" = fenced ] && [ "$b" = failed-over ]; then outcome=backup; break; fi
	sleep 0.1
done
[ -n "$outcome" ] ||
	rdb_fail "no single copy running 10 s after the cut: primary $(nemesis_state pri), backup $(nemesis_state bak)"
# when the winner ran on by itself (the loser emitted nothing since the
# cut: its output was held, then discarded; macwatch checks that)
t_pri=$(nemesis_state_at pri) t_bak=$(nemesis_state_at bak)
[ -n "$t_pri" ] && [ -n "$t_bak" ] || rdb_fail "a daemon did not answer status"
if [ "$outcome" = backup ]; then win=$t_bak lose=$t_pri; else win=$t_pri lose=$t_bak; fi
decided_ms=$((win - NM_FAULT_MS))
echo "the $outcome runs on ($decided_ms ms after the cut; the other side stopped at $((lose - NM_FAULT_MS)) ms)"
[ "$decided_ms" -le 3000 ] ||
	rdb_fail "deciding took $decided_ms ms (over 3 s)"
nemesis_finish partition
echo "PASS: replication link cut: only the $outcome ran on, decided in $decided_ms ms; $(jq -r .acked_commits "$CL_DIR/result.json") commits acknowledged, none lost; the guest's MAC switched hosts $(jq -r .emitter_switches "$CL_DIR/result.json") time(s)"

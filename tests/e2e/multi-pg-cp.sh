#!/usr/bin/env bash
# Commit protection over two NICs: the PostgreSQL VM of multi-pg.sh (WAL
# and a tablespace on two more disks, eth0 10.77.0.100 and eth1
# 10.76.0.100) protected with mode = commit-protection, the server's
# remusdb.commit_protection = writes.  The ledger's writers and
# speculators talk to it through NIC 0; its readers (autocommit SELECTs,
# answered unprotected) through NIC 1.
#
# The replication link is cut for 1.2 s, then the primary's power is
# pulled.  While the link is cut no epoch commits, so every commit
# acknowledgement waits on NIC 0, and the readers' answers on NIC 1 must
# go on leaving at once: each NIC holds only its own flows.  Checked:
#  - in the cut (from 0.4 s after it to the pull): no writer got a
#    COMMIT acknowledged (held on NIC 0), the readers on NIC 1 got
#    answers (not held behind NIC 0's commits, nor for their epochs);
#  - the backup knew each NIC's flows before the pull (FLOWS routed by
#    NIC), and after the failover checked them on both NICs: the readers
#    had seen output of epochs the standby does not have, so their
#    connections are reset at once, none stalls (every client, on either
#    NIC, answered within 2 s of the restore);
#  - I2/I3 as in cpdrill.sh: no acknowledged commit lost, no phantom or
#    partial transaction, no speculator's transaction committed; the
#    fence lifted by the guest's answer; pg_amcheck clean.
# Shown red twice (see the commit): NIC 1's frames held for their epoch
# (as without commit protection: no reader answered in the cut), and the
# backup's flow check started on NIC 0 only (the readers on NIC 1
# stalled after the restore).
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/cpdrill.sh"

run=${RDB_RUN:-mc$$}
ckpt=${CKPT_MS:-25}
before_s=${PULL_AFTER_S:-}
cut_ms=1200
clients=4 nspec=2 nreaders=2
ledger=$RDB_ROOT/build/workload/ledger
trap 'cluster_down "$run"' EXIT

rdb_require_root
[ -x "$ledger" ] || rdb_fail "$ledger missing (make all)"
CPD_DBMS=postgresql
export CL_MODE=commit-protection
# the cut must not look like the primary's loss: failover 2.5 s after
# the backup last heard from it
export CL_FAILOVER_TIMEOUT_MS=2500
cl_pg_split_up "$run" "$ckpt" ledger
ip1=$CL_PG_IP1
cpd_set_policy writes || rdb_fail "cannot set the commit-protection policy"
grep -q REMUSDB-KMOD-READY "$CL_DIR/pri/console.log" || rdb_fail "remusdb.ko did not load in the guest"
nnic=$(cl_ctl pri status "$CL_VM" --json | jq '[.vms[0].devices[] | select(.kind == "nic")] | length')
[ "$nnic" = 2 ] || rdb_fail "the primary protects $nnic NICs, not 2"

[ -n "$before_s" ] || before_s=$(awk -v r=$RANDOM 'BEGIN{printf "%.3f", 8 + (r % 4000) / 1000}')
total_s=$(awk -v a="$before_s" 'BEGIN{printf "%d", a + 15}')
mkdir -p "$CL_DIR/ledger"
rm -f "$CL_DIR/pulled"
clix "$ledger" run --dbms postgresql --host "$CL_GUEST_IP" --clients "$clients" \
	--speculators "$nspec" --pull-file "$CL_DIR/pulled" --reconnect \
	--readers "$nreaders" --reader-host "$ip1" --duration "$total_s" \
	--journal "$CL_DIR/ledger" --wait-timeout 30 2>"$CL_DIR/ledger-run.log" &
led=$!
sleep "$before_s"
cl_status bak "$CL_VM" --json > "$CL_DIR/bak-status-before.json" ||
	rdb_fail "backup not answering before the cut"
cut_at=$(date +%s%3N)
netns_cut_repl "$run"
sleep "$(awk -v m="$cut_ms" 'BEGIN{printf "%.3f", m / 1000}')"
cl_status pri "$CL_VM" --json > "$CL_DIR/pri-status.json" ||
	rdb_fail "primary not answering before the pull"
cluster_pull_power "$run"
pull_ms=$(date +%s%3N)
touch "$CL_DIR/pulled"
echo "cut the replication link at +${before_s}s, pulled the primary's power $((pull_ms - cut_at)) ms later"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "backup did not fail over (see $CL_DIR/bak/remusdbd.log)"
now=$(date +%s%3N)
cl_ctl bak status "$CL_VM" --json > "$CL_DIR/bak-status.json"
restore_ms=$((now - $(jq .vms[0].state_age_ms "$CL_DIR/bak-status.json")))
wait_pid $((total_s + 60)) "$led"
ledger_rc=$?
cl_ctl bak status "$CL_VM" --json > "$CL_DIR/bak-status.json"
clix "$ledger" check --dbms postgresql --host "$CL_GUEST_IP" --clients "$clients" \
	--speculators "$nspec" --readers "$nreaders" --reconnect --journal "$CL_DIR/ledger" \
	--pull-ms "$pull_ms" --restore-ms "$restore_ms" --json "$CL_DIR/ledger.json" \
	2>"$CL_DIR/ledger-check.log"
[ -s "$CL_DIR/ledger.json" ] || rdb_fail "ledger check produced nothing ($CL_DIR/ledger-check.log)"
db_ok=true
cpd_db_check || db_ok=false

# In the cut: writers' acknowledgements (clients 1..4, NIC 0) and
# readers' answers (clients 7..8, NIC 1), from 0.4 s after the cut (an
# ACK already on its way when the link went down) to the pull.
from=$((cut_at + 400))
count_in() {	# count_in KIND FIRST LAST: journal lines of KIND in the window
	local k n=0 c
	for ((k = $2; k <= $3; k++)); do
		c=$(awk -v kind="$1" -v a="$from" -v b="$pull_ms" \
			'$1 == kind && $3 >= a && $3 < b { n++ } END { print n + 0 }' \
			"$CL_DIR/ledger/client-$k.journal")
		n=$((n + c))
	done
	echo "$n"
}
acks_in_cut=$(count_in A 1 "$clients")
reads_in_cut=$(count_in Q $((clients + nspec + 1)) $((clients + nspec + nreaders)))

jq -n --slurpfile l "$CL_DIR/ledger.json" --slurpfile s "$CL_DIR/bak-status.json" \
	--slurpfile s0 "$CL_DIR/bak-status-before.json" --slurpfile p "$CL_DIR/pri-status.json" \
	--argjson db_ok "$db_ok" --argjson ledger_rc "$ledger_rc" \
	--argjson acks_in_cut "$acks_in_cut" --argjson reads_in_cut "$reads_in_cut" \
	--argjson window_ms $((pull_ms - from)) --arg before "$before_s" '
	$l[0] as $l | ($s[0].vms[0]) as $v | ($p[0].vms[0]) as $pv |
	{ pull_after_s: ($before | tonumber), cut_window_ms: $window_ms,
	  acks_in_cut: $acks_in_cut, reads_in_cut: $reads_in_cut,
	  flows_known_by_nic_before: $s0[0].vms[0].flows.known_by_nic,
	  acked_commits: $l.acked_commits, lost_commits: $l.lost_commits,
	  phantom_txns: $l.phantom_txns, partial_txns: $l.partial_txns,
	  speculative_committed: $l.speculative_committed,
	  speculative_acked: $l.speculative_acked, reads: $l.reads,
	  errors_after_pull: $l.errors_after_pull, reconnects: $l.reconnects,
	  max_client_wait_ms: $l.max_client_wait_ms,
	  stalled_clients: $l.stalled_clients,
	  flows: $v.flows, output: $pv.commit_protection,
	  marked_frames: $pv.marked_frames, db_check_ok: $db_ok,
	  invariants_ok: ($l.lost_commits == 0 and $l.phantom_txns == 0
			  and $l.partial_txns == 0
			  and $l.speculative_committed == 0
			  and $l.speculative_acked == 0
			  and $l.stalled_clients == 0 and $l.acked_commits > 0) }' \
	> "$CL_DIR/result.json" || rdb_fail "could not assemble the result"
r=$CL_DIR/result.json
cat "$r"
[ "$(jq -r .invariants_ok "$r")" = true ] ||
	rdb_fail "invariant violated (logs in $CL_DIR; $CL_DIR/ledger-check.log)"
[ "$(jq -r .marked_frames "$r")" -gt 0 ] ||
	rdb_fail "no frame was marked: the DBMS did not protect its commit acknowledgements"
[ "$acks_in_cut" = 0 ] ||
	rdb_fail "$acks_in_cut COMMITs were acknowledged while no epoch could commit: NIC 0 let protected output out"
[ "$reads_in_cut" -ge 1 ] ||
	rdb_fail "no reader on NIC 1 got an answer in the $((pull_ms - from)) ms cut: NIC 1's unprotected output waited"
jq -e '.flows_known_by_nic_before | length == 2 and .[0] >= 1 and .[1] >= 1' "$r" >/dev/null ||
	rdb_fail "the backup did not know both NICs' flows before the pull: $(jq -c .flows_known_by_nic_before "$r")"
[ "$(jq -r .flows.check_started "$r")" = true ] && [ "$(jq -r .flows.checked "$r")" -ge 1 ] ||
	rdb_fail "the backup did not check the flows after the failover"
[ "$(jq -r .flows.fence_timed_out "$r")" = false ] ||
	rdb_fail "the guest never acknowledged the failover event (fence deadline)"
[ "$db_ok" = true ] || rdb_fail "pg_amcheck found corruption on the backup ($CL_DIR/dbcheck.log)"
echo "PASS: 2 NICs under commit protection: in a $((pull_ms - from)) ms cut 0 COMMITs acknowledged on NIC 0 and $reads_in_cut reads answered on NIC 1; $(jq -r .acked_commits "$r") acknowledged commits, none lost, no speculator committed; flows checked on both NICs ($(jq -r .flows.reset "$r") reset, $(jq -r .flows.consistent "$r") consistent), every client answered within $(jq -r .max_client_wait_ms "$r") ms of the restore"

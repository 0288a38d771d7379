# shellcheck shell=bash
# The commit-protection power-pull drill, shared by the e2e tests that
# run it (pg-cp-*.sh, maria-cp-*.sh): a VM protected with mode =
# commit-protection running a DBMS with RemusDB's patch and remusdb.ko,
# the ledger workload (4 clients that reconnect after an error; 2
# speculators: transactions that have shown their rows and ask to commit
# only after the pull; 2 readers, whose answers leave unprotected under
# `writes`), the primary's power pulled at a random moment.
#
# Set before sourcing, then call cpdrill_run:
#   CPD_DBMS     postgresql | mariadb
#   CPD_POLICY   writes | all | off   (the server's commit_protection)
#   CPD_EXPECT   safe: every invariant must hold (the product's promise)
#                loses: acknowledged commits must be lost and speculative
#                transactions committed — the DBMS neither protects its
#                acknowledgements nor aborts (policy off), so the drill
#                must see the failures it exists to catch; and since
#                clients then certainly saw uncommitted output, the flow
#                check must reset their connections, none stalling
#   CKPT_MS, PULL_AFTER_S, AFTER_S, LEDGER_CLIENTS as in pg-failover.sh
#   CPD_CUT_REPL_MS  cut the replication link this long before the pull
#                (instead of pulling at a bare random moment): everything
#                the guest acknowledges meanwhile certainly never reaches
#                the backup, whatever the epoch's phase at the pull
#
# Checks (CPD_EXPECT=safe), on the backup after the failover:
#   I2  every acknowledged COMMIT is there (0 lost)
#   I3  no phantom or partial transaction, and no speculator's
#       transaction committed (its client asked to commit only after the
#       checkpoint the standby runs from)
#   every client got an answer (acknowledgement or error) within 2 s of
#       the restore: none waits for a TCP timeout
#   the flow check ran on the backup; the guest's DBMS got the failover
#       event (fence lifted by its answer, not by the deadline)
#   protected frames were held on the primary (marks seen), others not
#   pg_amcheck clean (PostgreSQL) / CHECK TABLE (MariaDB)
# Output: build/e2e/<run>/result.json.

cpdrill_run() {
	local run=${RDB_RUN:-cp$$} ckpt=${CKPT_MS:-25} before_s=${PULL_AFTER_S:-}
	local after_s=${AFTER_S:-8} clients=${LEDGER_CLIENTS:-4} nspec=2 nreaders=2
	local ledger=$RDB_ROOT/build/workload/ledger db_ok=true
	trap 'cluster_down "'"$run"'"' EXIT

	rdb_require_root
	[ -x "$ledger" ] || rdb_fail "$ledger missing (make all)"
	export CL_MODE=commit-protection
	case $CPD_DBMS in
	postgresql) cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed" ;;
	mariadb) cl_use_maria_guest || rdb_fail "MariaDB guest build failed" ;;
	*) rdb_fail "CPD_DBMS $CPD_DBMS" ;;
	esac
	cluster_hosts_up "$run" || rdb_fail "hosts setup failed (logs in $CL_DIR)"
	cluster_vm_up "$ckpt" || rdb_fail "protected VM did not come up (logs in $CL_DIR)"
	clix() { ip netns exec "$(netns_name "$run" cli)" "$@"; }
	cpd_wait_db || rdb_fail "$CPD_DBMS not reachable from the client"
	cpd_set_policy "$CPD_POLICY" || rdb_fail "cannot set the commit-protection policy"
	grep -q REMUSDB-KMOD-READY "$CL_DIR/pri/console.log" ||
		rdb_fail "remusdb.ko did not load in the guest"
	# a protected VM's mode cannot change under it: refused, with the way
	local msg
	msg=$(cl_ctl pri protect "$CL_DIR/$CL_VM.conf" mode=plain 2>&1) &&
		rdb_fail "switching a protected VM to plain was accepted"
	grep -q "mode cannot change; unprotect it" <<<"$msg" ||
		rdb_fail "mode switch refused without saying why: $msg"

	[ -n "$before_s" ] || before_s=$(awk -v r=$RANDOM 'BEGIN{printf "%.3f", 8 + (r % 6000) / 1000}')
	local total_s
	total_s=$(awk -v a="$before_s" -v b="$after_s" 'BEGIN{printf "%d", a + b + 5}')
	mkdir -p "$CL_DIR/ledger"
	rm -f "$CL_DIR/pulled"
	clix "$ledger" run --dbms "$CPD_DBMS" --host "$CL_GUEST_IP" --clients "$clients" \
		--speculators "$nspec" --pull-file "$CL_DIR/pulled" --reconnect \
		--readers "$nreaders" --duration "$total_s" --journal "$CL_DIR/ledger" --wait-timeout 30 \
		2>"$CL_DIR/ledger-run.log" &
	local led=$!
	sleep "$before_s"
	if [ -n "${CPD_CUT_REPL_MS:-}" ]; then
		# shorter than failover_timeout_ms: the backup must not fail
		# over before the pull, nor the primary give up on it
		netns_cut_repl "$run"
		sleep "$(awk -v m="$CPD_CUT_REPL_MS" 'BEGIN{printf "%.3f", m / 1000}')"
	fi
	cl_status pri "$CL_VM" --json > "$CL_DIR/pri-status.json" ||
		rdb_fail "primary not answering before the pull"
	# pull_ms: once the primary's links are down: an answer a client gets
	# after it came from the backup, not from the old primary (the stall
	# check counts only those)
	local pull_ms
	cluster_pull_power "$run"
	pull_ms=$(date +%s%3N)
	touch "$CL_DIR/pulled"
	echo "pulled the primary's power at +${before_s}s under load"
	cl_ctl bak wait "$CL_VM" failed-over --timeout 30 ||
		rdb_fail "backup did not fail over (see $CL_DIR/bak/remusdbd.log)"
	# the restore's moment: when the backup entered failed-over
	local restore_ms now age
	now=$(date +%s%3N)
	cl_ctl bak status "$CL_VM" --json > "$CL_DIR/bak-status.json"
	age=$(jq .vms[0].state_age_ms "$CL_DIR/bak-status.json")
	restore_ms=$((now - age))
	wait_pid $((total_s + 60)) "$led"
	local ledger_rc=$?
	cl_ctl bak status "$CL_VM" --json > "$CL_DIR/bak-status.json"

	clix "$ledger" check --dbms "$CPD_DBMS" --host "$CL_GUEST_IP" --clients "$clients" \
		--speculators "$nspec" --readers "$nreaders" --reconnect --journal "$CL_DIR/ledger" \
		--pull-ms "$pull_ms" --restore-ms "$restore_ms" --json "$CL_DIR/ledger.json" \
		2>"$CL_DIR/ledger-check.log"
	local check_rc=$?
	[ -s "$CL_DIR/ledger.json" ] ||
		rdb_fail "ledger check produced nothing (rc $check_rc; $CL_DIR/ledger-check.log)"
	cpd_db_check || db_ok=false

	jq -n --slurpfile l "$CL_DIR/ledger.json" --slurpfile s "$CL_DIR/bak-status.json" \
		--slurpfile p "$CL_DIR/pri-status.json" --argjson db_ok "$db_ok" \
		--argjson ledger_rc "$ledger_rc" --arg ckpt "$ckpt" --arg before "$before_s" \
		--arg policy "$CPD_POLICY" --arg dbms "$CPD_DBMS" --argjson pull_ms "$pull_ms" \
		--argjson restore_ms "$restore_ms" '
		$l[0] as $l | ($s[0].vms[0]) as $v | ($p[0].vms[0]) as $pv |
		{ dbms: $dbms, policy: $policy, epoch_ms: ($ckpt | tonumber),
		  pull_after_s: ($before | tonumber), pull_at_ms: $pull_ms,
		  restored_at_ms: $restore_ms,
		  acked_commits: $l.acked_commits, lost_commits: $l.lost_commits,
		  phantom_txns: $l.phantom_txns, partial_txns: $l.partial_txns,
		  speculative_committed: $l.speculative_committed,
		  speculative_acked: $l.speculative_acked,
		  in_doubt: $l.in_doubt, errors_after_pull: $l.errors_after_pull,
		  reconnects: $l.reconnects, failed_commits: $l.failed_commits,
		  max_client_wait_ms: $l.max_client_wait_ms,
		  stalled_clients: $l.stalled_clients,
		  failover_ms: $l.failover_gap_ms,
		  tps_before: $l.tps_before, tps_after: $l.tps_after,
		  db_check_ok: $db_ok,
		  restore_ms: $v.failover_ms, committed_epoch: $v.committed_epoch,
		  flows: $v.flows, output: $pv.commit_protection,
		  marked_frames: $pv.marked_frames,
		  pause_ms_p50: $pv.pause_ms_p50,
		  invariants_ok: ($l.lost_commits == 0 and $l.phantom_txns == 0
				  and $l.partial_txns == 0
				  and $l.speculative_committed == 0
				  and $l.speculative_acked == 0
				  and $l.stalled_clients == 0 and $l.acked_commits > 0) }' \
		> "$CL_DIR/result.json" || rdb_fail "could not assemble the result"
	cat "$CL_DIR/result.json"
	local r=$CL_DIR/result.json
	[ "$(jq -r '.flows.check_started' "$r")" = true ] ||
		rdb_fail "the backup did not check the flows after the failover"
	[ "$(jq -r '.flows.checked' "$r")" -ge 1 ] ||
		rdb_fail "no flow was checked (see $CL_DIR/bak/remusdbd.log)"
	if [ "$CPD_EXPECT" = loses ]; then
		# the drill's power: without protected acknowledgements, acknowledged
		# commits are lost at a failover, and the ledger sees it
		[ "$(jq -r .lost_commits "$r")" -gt 0 ] ||
			rdb_fail "no acknowledged commit was lost with commit_protection = off: the drill cannot see the failure it exists for"
		[ "$(jq -r .marked_frames "$r")" = 0 ] ||
			rdb_fail "frames were marked with commit_protection = off"
		# nor are speculative transactions aborted: the speculators'
		# COMMITs, sent after the pull, commit (Lemma 3.5.2 broken)
		[ "$(jq -r .speculative_committed "$r")" -gt 0 ] ||
			rdb_fail "no speculative transaction committed with commit_protection = off: the drill cannot see that failure either"
		# clients certainly saw output of epochs the standby does not
		# have: the flow check must reset their connections, and none
		# may wait for a TCP timeout
		[ "$(jq -r .flows.reset "$r")" -ge 1 ] ||
			rdb_fail "no flow was reset although clients had seen uncommitted output"
		[ "$(jq -r .stalled_clients "$r")" = 0 ] ||
			rdb_fail "$(jq -r .stalled_clients "$r") clients stalled after the restore"
		echo "PASS (the failures are seen): commit_protection = off lost $(jq -r .lost_commits "$r") of $(jq -r .acked_commits "$r") acknowledged commits at a power pull and committed $(jq -r .speculative_committed "$r") speculative transactions; $(jq -r .flows.reset "$r") inconsistent connections reset, every client answered within $(jq -r .max_client_wait_ms "$r") ms of the restore"
		return 0
	fi
	[ "$(jq -r .invariants_ok "$r")" = true ] ||
		rdb_fail "invariant violated (logs in $CL_DIR; $CL_DIR/ledger-check.log)"
	[ "$(jq -r .marked_frames "$r")" -gt 0 ] ||
		rdb_fail "no frame was marked: the DBMS did not protect its commit acknowledgements"
	[ "$(jq -r .flows.fence_timed_out "$r")" = false ] ||
		rdb_fail "the guest never acknowledged the failover event (fence deadline)"
	[ "$(jq -r .db_check_ok "$r")" = true ] ||
		rdb_fail "the database check found corruption on the backup"
	echo "PASS: $CPD_DBMS, commit_protection = $CPD_POLICY: $(jq -r .acked_commits "$r") acknowledged commits, none lost; 0 phantom/partial; $nspec speculators not committed; every client answered within $(jq -r .max_client_wait_ms "$r") ms of the restore ($(jq -r .errors_after_pull "$r") errors, $(jq -r .flows.reset "$r") flows reset, $(jq -r .flows.consistent "$r") carried on)"
}

# ---- per DBMS ----

cpd_wait_db() {
	case $CPD_DBMS in
	postgresql) cl_wait_pg ledger ;;
	mariadb) cl_wait_maria ;;
	esac
}

cpd_sql() {	# cpd_sql DB SQL: run on the guest's server from the client host
	case $CPD_DBMS in
	postgresql)
		timeout 30 ip netns exec "$(netns_name "$CL_RUN" cli)" "$PGBIN/psql" -X -q -At \
			-v ON_ERROR_STOP=1 -h "$CL_GUEST_IP" -U postgres -d "$1" -c "$2" ;;
	mariadb)
		timeout 30 ip netns exec "$(netns_name "$CL_RUN" cli)" mariadb -h "$CL_GUEST_IP" \
			-u root -N -B -e "$2" "$1" ;;
	esac
}

cpd_set_policy() {
	case $CPD_DBMS in
	postgresql)
		cpd_sql postgres "ALTER SYSTEM SET remusdb.commit_protection = '$1'" &&
			cpd_sql postgres "SELECT pg_reload_conf()" >/dev/null &&
			wait_for 10 "policy $1 in effect" \
				bash -c "[ \"\$(timeout 5 ip netns exec $(netns_name "$CL_RUN" cli) $PGBIN/psql -X -At -h $CL_GUEST_IP -U postgres -d postgres -c 'SHOW remusdb.commit_protection')\" = $1 ]" ;;
	mariadb)
		cpd_sql mysql "SET GLOBAL remusdb_commit_protection = '$1'" ;;
	esac
}

cpd_db_check() {
	case $CPD_DBMS in
	postgresql)
		timeout 300 ip netns exec "$(netns_name "$CL_RUN" cli)" "$PGBIN/pg_amcheck" \
			-h "$CL_GUEST_IP" -U postgres -d ledger -d bench --heapallindexed \
			>"$CL_DIR/dbcheck.log" 2>&1 ;;
	mariadb)
		cpd_sql ledger "CHECK TABLE ledger EXTENDED" >"$CL_DIR/dbcheck.log" 2>&1 &&
			! grep -qiv "	OK$\|status	OK" "$CL_DIR/dbcheck.log" ;;
	esac
}

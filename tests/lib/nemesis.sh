# shellcheck shell=bash
# The nemesis matrix (invariant I6, docs/failure-modes.md): a protected
# PostgreSQL VM under the ledger's write load, a witness (etcd) in its own
# namespace, one fault, then the same checks every time:
#   - at most one copy of the VM emits output at any time: macwatch on the
#     switch's ports sees the guest's MAC come from one host, then at most
#     once switch to the other (never back, never interleaved);
#   - 0 acknowledged commits lost, 0 phantom or partial transactions
#     (the ledger, checked against whichever copy runs);
#   - the outcome the case states (nemesis_expect_*).
#
# Use: source common.sh, netns.sh, cluster.sh, this; then
#   nemesis_start RUN          cluster, load, capture
#   ... the fault, the case's own waits ...
#   nemesis_finish             load ends, ledger check, capture checked
# Sets NM_FAULT_MS (call nemesis_fault_now at the fault).

nemesis_start() {
	local run=$1
	NM_RUN=$run
	NM_TOTAL_S=${NM_TOTAL_S:-30}
	trap 'cluster_down "'"$run"'"' EXIT
	rdb_require_root
	[ -x "$RDB_ROOT/build/workload/ledger" ] || rdb_fail "build/workload/ledger missing (make all)"
	cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
	# NM_GUEST_RUN: a command the guest runs beside PostgreSQL (the ticker)
	[ -z "${NM_GUEST_RUN:-}" ] || export CL_GUEST_RUN=$NM_GUEST_RUN
	cluster_hosts_up "$run" || rdb_fail "hosts setup failed (logs in $CL_DIR)"
	cluster_vm_up "${CKPT_MS:-25}" ||
		rdb_fail "protected PostgreSQL VM did not come up (logs in $CL_DIR)"
	cl_wait_pg || rdb_fail "PostgreSQL not reachable from the client"
	nemesis_watch_start "$((NM_TOTAL_S + 20))"
	mkdir -p "$CL_DIR/ledger"
	ip netns exec "$(netns_name "$run" cli)" "$RDB_ROOT/build/workload/ledger" run \
		--host "$CL_GUEST_IP" --clients 4 --duration "$NM_TOTAL_S" \
		--journal "$CL_DIR/ledger" --wait-timeout 30 2>"$CL_DIR/ledger-run.log" &
	NM_LEDGER=$!
	NM_START_MS=$(date +%s%3N)
}

nemesis_fault_now() { NM_FAULT_MS=$(date +%s%3N); }

# nemesis_watch_start SECONDS: which host emits the guest's MAC, seen on
# the switch's ports for at most SECONDS (pid NM_WATCH, the verdict in
# $CL_DIR/macwatch.json once it ends: nemesis_watch_end, or the time).
nemesis_watch_start() {
	ip netns exec "$(netns_name "$CL_RUN" sw)" "$RDB_ROOT/build/helpers/macwatch" \
		--mac "$CL_GUEST_MAC" --duration "$1" port-pri port-bak \
		>"$CL_DIR/macwatch.json" 2>"$CL_DIR/macwatch.log" &
	NM_WATCH=$!
	wait_for 10 "macwatch on the switch" grep -q started "$CL_DIR/macwatch.log" ||
		rdb_fail "macwatch did not start"
}

# nemesis_watch_end: the watch ends now; fails the test unless one host
# emitted the guest's MAC at a time (at most one switch of hosts).
nemesis_watch_end() {
	kill -INT "$NM_WATCH" 2>/dev/null
	wait_pid 10 "$NM_WATCH" || rdb_fail "macwatch failed ($CL_DIR/macwatch.log)"
	cat "$CL_DIR/macwatch.json"
	jq -e '.switches <= 1' "$CL_DIR/macwatch.json" >/dev/null ||
		rdb_fail "two copies emitted: the guest's MAC came from both hosts in turn ($(jq -r .switches "$CL_DIR/macwatch.json") switches; logs in $CL_DIR)"
}

# nemesis_ping_guest [mkguest.sh ARG...]: the next cluster_vm_up runs the
# busybox guest (build/guest-ping), which pings the client every 200 ms:
# whichever copy of the VM runs, its host's switch port carries the
# guest's MAC several times a second (nothing else depends on it: no
# client, no TCP state).  Its shell stays on the console.
nemesis_ping_guest() {
	local payload rc
	payload=$(mktemp -d)
	mkdir -p "$payload/etc/remusdb.d"
	printf '#!/bin/sh\nping -q -i 0.2 10.77.0.10 >/dev/null 2>&1 &\n' \
		> "$payload/etc/remusdb.d/50-ping.sh"
	chmod 0755 "$payload/etc/remusdb.d/50-ping.sh"
	bash "$RDB_ROOT/tools/mkguest.sh" --out "$RDB_ROOT/build/guest-ping" \
		--payload "$payload" "$@" >&2
	rc=$?
	rm -rf "$payload"
	[ $rc = 0 ] || return 1
	export CL_GUEST=$RDB_ROOT/build/guest-ping CL_GUEST_RUN=
}

# nemesis_blank_disk MB: a blank sparse disk image for the next
# cluster_vm_up (CL_DISK_IMAGE, which it copies; gone with cluster_down)
nemesis_blank_disk() {
	mkdir -p "$RDB_ROOT/build/e2e"
	NM_BLANK_DISK=$RDB_ROOT/build/e2e/blank-$$.disk.img
	rm -f "$NM_BLANK_DISK"
	truncate -s "${1}M" "$NM_BLANK_DISK" || return 1
	export CL_DISK_IMAGE=$NM_BLANK_DISK
}

# nemesis_state SIDE: the VM's state on that host's remusdbd.
nemesis_state() {
	cl_ctl "$1" status "$CL_VM" --json 2>/dev/null | jq -r '.vms[0].state // empty'
}

# nemesis_state_at SIDE: when (epoch ms) the VM entered its present state.
nemesis_state_at() {
	local age now
	now=$(date +%s%3N)
	age=$(cl_ctl "$1" status "$CL_VM" --json 2>/dev/null |
		jq -r '.vms[0].state_age_ms // empty | floor')
	[ -n "$age" ] && echo $((now - age))
}

# nemesis_wait_state SIDE STATE SECONDS
nemesis_wait_state() {
	cl_ctl "$1" wait "$CL_VM" "$2" --timeout "$3" >/dev/null 2>&1 || {
		rdb_log "$1 is $(nemesis_state "$1") ($(cl_ctl "$1" status "$CL_VM" --json 2>/dev/null |
			jq -r '.vms[0].state_reason // empty')), not $2 after $3 s"
		return 1
	}
}

nemesis_finish() {
	local what=$1 rc
	wait_pid $((NM_TOTAL_S + 60)) "$NM_LEDGER"
	rc=$?
	ip netns exec "$(netns_name "$NM_RUN" cli)" "$RDB_ROOT/build/workload/ledger" check \
		--host "$CL_GUEST_IP" --clients 4 --journal "$CL_DIR/ledger" \
		--pull-ms "$NM_FAULT_MS" --json "$CL_DIR/ledger.json" 2>"$CL_DIR/ledger-check.log" ||
		rdb_fail "ledger check failed (rc $?; $CL_DIR/ledger-check.log)"
	wait_pid 60 "$NM_WATCH" || rdb_fail "macwatch failed ($CL_DIR/macwatch.log)"
	jq -n --slurpfile l "$CL_DIR/ledger.json" --slurpfile m "$CL_DIR/macwatch.json" \
		--arg case "$what" --argjson ledger_rc "$rc" \
		--arg pri "$(nemesis_state pri)" --arg bak "$(nemesis_state bak)" '
		$l[0] as $l | $m[0] as $m |
		{ case: $case, acked_commits: $l.acked_commits,
		  lost_commits: $l.lost_commits, phantom_txns: $l.phantom_txns,
		  partial_txns: $l.partial_txns, max_gap_ms: $l.max_gap_ms,
		  failover_gap_ms: $l.failover_gap_ms,
		  frames_from_pri: $m.ports["port-pri"].frames,
		  frames_from_bak: $m.ports["port-bak"].frames,
		  pri_last_ms: $m.ports["port-pri"].last_ms,
		  bak_first_ms: $m.ports["port-bak"].first_ms,
		  emitter_switches: $m.switches,
		  state_pri: $pri, state_bak: $bak,
		  one_copy: ($m.switches <= 1),
		  invariants_ok: ($m.switches <= 1 and $l.lost_commits == 0 and
				  $l.phantom_txns == 0 and $l.partial_txns == 0 and
				  $l.acked_commits > 0) }' > "$CL_DIR/result.json" ||
		rdb_fail "could not assemble the result"
	cat "$CL_DIR/result.json"
	[ "$(jq -r .one_copy "$CL_DIR/result.json")" = true ] ||
		rdb_fail "two copies emitted: the guest's MAC came from both hosts in turn ($(jq -r .emitter_switches "$CL_DIR/result.json") switches; logs in $CL_DIR)"
	[ "$(jq -r .invariants_ok "$CL_DIR/result.json")" = true ] ||
		rdb_fail "invariant violated (logs in $CL_DIR; $CL_DIR/ledger-check.log)"
}

# shellcheck shell=bash
# Patroni 3.0.2 (Debian's) with PostgreSQL 15, two nodes: the peer a DBA
# would deploy instead of RemusDB (docs/peers-research.md).  Source after
# common.sh, netns.sh and cluster.sh.  Every wait has a deadline.
#
#   peer_pg_use_guest             the next VMs run the Patroni guest
#                                 (tools/mkguest-pg-patroni.sh over the
#                                 guest of cl_use_pg_guest, same options,
#                                 CL_PG_SCALE): sets CL_GUEST,
#                                 CL_DISK_IMAGE, CL_RAM_MB (512 unless
#                                 set), CL_GUEST_RUN, CL_GUEST_READY,
#                                 CL_EVENT_PORT and PGBIN
#   peer_pg_up RUN TTL LOOP_WAIT RETRY STRICT
#                                 NETNS_PR2=1 hosts; vm1 (pg1) on pri at
#                                 10.77.0.100, once it leads vm2 (pg2) on
#                                 pr2 at 10.77.0.101, both attached and
#                                 unprotected, each booting its own copy
#                                 of the same clean image (no
#                                 pg_basebackup); Patroni's DCS the
#                                 witness's etcd (v3), synchronous_mode
#                                 on, synchronous_mode_strict STRICT
#                                 (0|1), bootstrap.dcs ttl, loop_wait and
#                                 retry_timeout as given.  Returns once
#                                 pg1 is the primary and pg2 its sync
#                                 standby (Patroni's /sync on pg2 and
#                                 pg_stat_replication.sync_state on pg1)
#   peer_pg_leader                the guest address whose REST /primary
#                                 answers 200 now (asked from the client
#                                 host), or nothing and false
#   peer_pg_timeline [IP]         that member's timeline (Patroni's
#                                 /patroni; default the leader's)
#   peer_pg_sync_state            pg_stat_replication.sync_state of pg2
#                                 (PEER_PG_IP2) as pg1 (PEER_PG_IP1)
#                                 reports it (empty: not streaming)
#   peer_pg_write IP              one committed write on IP (bench's
#                                 peer_probe table), within 3 s; false if
#                                 refused, read-only, or the commit had to
#                                 be cancelled waiting for a standby
#   peer_pg_pull_failover RUN SECS  the primary's host (pri) loses power;
#                                 then waits up to SECS for pg2 to lead
#                                 (REST /primary 200), be out of recovery
#                                 and take a write.  Sets PEER_PG_PULL_MS
#                                 (ms since the epoch), and in ms after
#                                 the pull PEER_PG_LEADER_MS,
#                                 PEER_PG_PROMOTED_MS, PEER_PG_WRITE_MS
#                                 (each left empty if not reached: strict
#                                 mode takes no write with pg1 gone)
#   peer_pg_takeover PULL_MS SECS  that wait alone, for a pull at PULL_MS
#   peer_pg_cpu SOCK LOG          Patroni's CPU seconds (utime + stime)
#                                 in a guest, read on its console
#
# Sets PEER_PG_IP1, PEER_PG_IP2, PEER_PG_UP_MS (how long peer_pg_up's
# two boots took).  Each guest's console: $CL_DIR/pri/console.log and
# $CL_DIR/pr2/vm2.console.log.

PEER_PG_IP1=10.77.0.100
PEER_PG_IP2=10.77.0.101
# Patroni under TCG: from its launch to a healthy /health (Python's
# imports, PostgreSQL's start, pg1's promotion) 13-15 s on a quiet host,
# 19-28 s beside another engineer's guests; the deadline leaves room
# for a busier host.
PEER_PG_START_S=${PEER_PG_START_S:-300}

_peer_cli() { ip netns exec "$(netns_name "$CL_RUN" cli)" "$@"; }

# _peer_rest IP PATH: the HTTP status of Patroni's REST API at IP (000:
# no answer within 2 s).
_peer_rest() {
	_peer_cli curl -s -o /dev/null -m 2 -w '%{http_code}' "http://$1:8008$2"
}

# _peer_rest_200 IP PATH: true when it answers 200 (for wait_for, which
# runs its command again each time: a $(...) in its arguments would not)
_peer_rest_200() {
	[ "$(_peer_rest "$1" "$2")" = 200 ]
}

# _peer_promoted IP: PostgreSQL at IP is out of recovery (a primary).
_peer_promoted() {
	[ "$(PGCONNECT_TIMEOUT=2 _peer_cli timeout 3 "$PGBIN/psql" -X -A -t -h "$1" -U postgres \
		-d postgres -c "SELECT pg_is_in_recovery()" 2>/dev/null)" = f ]
}

_peer_is_sync() {
	[ "$(peer_pg_sync_state)" = sync ]
}

peer_pg_use_guest() {
	local ko=$RDB_ROOT/build/kmod/remusdb.ko ev=$RDB_HELPERS/remusdb-eventd
	[ -f "$ko" ] || { rdb_log "$ko missing (make kmod)"; return 1; }
	CL_PG_SERVER=${CL_PG_SERVER:-$RDB_ROOT/build/dbms/postgresql-15/postgres}
	[ -x "$CL_PG_SERVER" ] || { rdb_log "$CL_PG_SERVER missing (make dbms)"; return 1; }
	local out=$RDB_ROOT/build/guest-pg-patroni${CL_PG_SCALE:+-s$CL_PG_SCALE}
	# the options of cl_use_pg_guest: the same base image as the
	# unprotected rows
	bash "$RDB_ROOT/tools/mkguest-pg-patroni.sh" --out "$out" --kmod "$ko" --eventd "$ev" \
		--static "$RDB_HELPERS/ticker" --server "$CL_PG_SERVER" \
		${CL_PG_SCALE:+--scale "$CL_PG_SCALE"} >&2 || return 1
	export CL_EVENT_PORT=1
	PGBIN=/usr/lib/postgresql/15/bin
	export CL_GUEST=$out CL_DISK_IMAGE=$out/pgdata.img
	# cluster_vm_up waits 90 s for its marker: the launch's; Patroni's
	# readiness is waited for here, with its own deadline
	export CL_RAM_MB=${CL_RAM_MB:-512} CL_GUEST_RUN= CL_GUEST_READY=REMUSDB-PATRONI-START
}

# _peer_vm_up NAME IP MAC HOST TAP VM DCS_ARGS: one member's VM, attached
# and unprotected, until Patroni's marker on its console.
_peer_vm_up() {
	local name=$1 ip=$2 mac=$3 host=$4 tap=$5 vm=$6 dcs=$7 log
	CL_PRI=$host CL_VM=$vm CL_GUEST_IP=$ip CL_GUEST_MAC=$mac CL_TAP=$tap CL_NO_PROTECT=1 \
		CL_APPEND_MORE="remusdb.patroni=$name $dcs" cluster_vm_up ||
		{ rdb_log "$vm ($name) did not boot (logs in $CL_DIR/$host)"; return 1; }
	log=$CL_DIR/$host/$( [ "$vm" = vm1 ] && echo console.log || echo "$vm.console.log")
	wait_for "$PEER_PG_START_S" "Patroni $name healthy (REMUSDB-PATRONI-READY)" \
		grep -q "REMUSDB-PATRONI-READY\|REMUSDB-WARN: patroni" "$log" ||
		{ rdb_log "Patroni $name did not start (see $log)"; return 1; }
	if grep -q "REMUSDB-WARN: patroni" "$log"; then
		rdb_log "Patroni $name failed: $(grep -a "REMUSDB-WARN: patroni" "$log")"
		return 1
	fi
	rdb_log "Patroni $name healthy: $(grep -a -o 'REMUSDB-PATRONI-START [0-9.]*' "$log"), $(grep -a -o 'REMUSDB-PATRONI-READY [0-9.]*' "$log") (guest uptime, s)"
}

peer_pg_up() {
	local run=$1 ttl=$2 loop_wait=$3 retry=$4 strict=$5 dcs t0
	[[ "$ttl$loop_wait$retry" =~ ^[0-9]+$ ]] && [[ "$strict" =~ ^[01]$ ]] ||
		{ rdb_log "peer_pg_up RUN TTL LOOP_WAIT RETRY STRICT(0|1)"; return 1; }
	dcs="remusdb.patroni_ttl=$ttl remusdb.patroni_loop_wait=$loop_wait"
	dcs+=" remusdb.patroni_retry=$retry remusdb.patroni_strict=$strict"
	t0=$(date +%s%3N)
	NETNS_PR2=1 cluster_hosts_up "$run" || { rdb_log "hosts setup failed (logs in $CL_DIR)"; return 1; }
	# pg1 first and alone: it finds the image's cluster and no
	# /initialize key, takes the cluster (recovery, then a promotion:
	# timeline 2) — the leader is pg1 by construction
	_peer_vm_up pg1 "$PEER_PG_IP1" 52:54:00:52:44:01 pri vmtap0 vm1 "$dcs" || return 1
	wait_for 120 "pg1 (10.77.0.100) the primary (REST /primary 200)" \
		_peer_rest_200 "$PEER_PG_IP1" /primary ||
		{ rdb_log "pg1 did not become the leader (see $CL_DIR/pri/console.log)"; return 1; }
	# (/primary answers 200 from Patroni's promote call on; a write is
	# no test: strict mode holds every commit until a standby comes)
	wait_for 60 "pg1 out of recovery (promoted)" _peer_promoted "$PEER_PG_IP1" ||
		{ rdb_log "pg1 leads but is still in recovery (see $CL_DIR/pri/console.log)"; return 1; }
	rdb_log "pg1 leads, timeline $(peer_pg_timeline "$PEER_PG_IP1")"
	# pg2 boots its own copy of the same clean image: the same system
	# identifier, so it follows pg1 onto timeline 2 from the image's
	# shutdown checkpoint with the WAL pg1 still holds
	_peer_vm_up pg2 "$PEER_PG_IP2" 52:54:00:52:44:02 pr2 vmtap1 vm2 "$dcs" || return 1
	wait_for 120 "pg2 (10.77.0.101) the sync standby (REST /sync 200)" \
		_peer_rest_200 "$PEER_PG_IP2" /sync ||
		{ rdb_log "pg2 is not the sync standby (see $CL_DIR/pr2/vm2.console.log)"; return 1; }
	wait_for 60 "pg2 streaming to pg1 as sync (pg_stat_replication)" _peer_is_sync ||
		{ rdb_log "pg1 does not report pg2 as sync: '$(peer_pg_sync_state)'"; return 1; }
	[ "$(peer_pg_leader)" = "$PEER_PG_IP1" ] ||
		{ rdb_log "the leader moved during setup: '$(peer_pg_leader)'"; return 1; }
	PEER_PG_UP_MS=$(( $(date +%s%3N) - t0 ))
	rdb_log "Patroni cluster up in $PEER_PG_UP_MS ms: pg1 primary, pg2 sync standby (ttl $ttl, loop_wait $loop_wait, retry_timeout $retry, strict $strict)"
}

peer_pg_leader() {
	local ip
	for ip in "$PEER_PG_IP1" "$PEER_PG_IP2"; do
		_peer_rest_200 "$ip" /primary && { echo "$ip"; return 0; }
	done
	return 1
}

peer_pg_timeline() {
	local ip=${1:-}
	[ -n "$ip" ] || ip=$(peer_pg_leader) || return 1
	_peer_cli curl -sf -m 2 "http://$ip:8008/patroni" | jq -e -r .timeline
}

peer_pg_sync_state() {
	_peer_cli "$PGBIN/psql" -X -A -t -h "$PEER_PG_IP1" -U postgres -d postgres \
		-c "SELECT sync_state FROM pg_stat_replication WHERE client_addr = '$PEER_PG_IP2'" \
		2>/dev/null
}

peer_pg_write() {
	local out
	# a commit whose wait for a sync standby is cancelled still commits
	# locally, with a warning: that is not "accepts a write"
	out=$(PGCONNECT_TIMEOUT=2 _peer_cli timeout 3 "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 \
		-h "$1" -U postgres -d bench \
		-c "CREATE TABLE IF NOT EXISTS peer_probe (at timestamptz NOT NULL)" \
		-c "INSERT INTO peer_probe VALUES (now())" 2>&1) || return 1
	! grep -qi "synchronous replication" <<<"$out"
}

# _peer_until DEADLINE_MS WHAT CMD...: CMD again every 50 ms until it
# succeeds (true) or the clock passes DEADLINE_MS (false, WHAT logged)
_peer_until() {
	local deadline=$1 what=$2
	shift 2
	until "$@"; do
		[ "$(date +%s%3N)" -lt "$deadline" ] || { rdb_log "$what"; return 1; }
		sleep 0.05
	done
}

peer_pg_pull_failover() {
	PEER_PG_PULL_MS=$(date +%s%3N)
	netns_power_pull "$1" pri
	peer_pg_takeover "$PEER_PG_PULL_MS" "$2"
}

peer_pg_takeover() {
	local pull=$1 secs=$2 deadline=$(($1 + $2 * 1000))
	PEER_PG_LEADER_MS= PEER_PG_PROMOTED_MS= PEER_PG_WRITE_MS=
	_peer_until "$deadline" "pg2 not the leader ${secs}s after the pull (see $CL_DIR/pr2/vm2.console.log)" \
		_peer_rest_200 "$PEER_PG_IP2" /primary || return 1
	PEER_PG_LEADER_MS=$(( $(date +%s%3N) - pull ))
	_peer_until "$deadline" "pg2 leads but is still in recovery ${secs}s after the pull" \
		_peer_promoted "$PEER_PG_IP2" || return 1
	PEER_PG_PROMOTED_MS=$(( $(date +%s%3N) - pull ))
	_peer_until "$deadline" "pg2 leads but took no write ${secs}s after the pull" \
		peer_pg_write "$PEER_PG_IP2" || return 1
	PEER_PG_WRITE_MS=$(( $(date +%s%3N) - pull ))
}

peer_pg_cpu() {
	local sock=$1 log=$2 tag=$RANDOM
	# the marker is split in the typed line: only the guest's answer matches
	cl_console_cmd_at "$sock" \
		"echo PEER-CPU\"-$tag\" \$(cut -d' ' -f14,15 /proc/\$(pidof python3.11 | cut -d' ' -f1)/stat)" ||
		return 1
	wait_for 20 "Patroni's CPU time on the console" grep -aq "PEER-CPU-$tag [0-9]" "$log" || return 1
	# (USER_HZ: 100 on x86)
	grep -a "PEER-CPU-$tag [0-9]" "$log" | tail -n 1 | awk '{ printf "%.2f\n", ($2 + $3) / 100 }'
}

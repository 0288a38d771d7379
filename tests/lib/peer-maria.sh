# shellcheck shell=bash
# The MariaDB peer of the benchmarks: what a DBA would deploy instead of
# RemusDB, semi-synchronous replication between two MariaDB 10.11
# servers on two hosts, with a scripted failover as MaxScale's monitor
# does it.  Both VMs boot the same MariaDB test guest (tools/mkguest-maria.sh,
# the same patched server and data as the RemusDB rows), attached to
# their host's remusdbd and never protected, as the unprotected rows are:
#   vm1 on pri, 10.77.0.100, the primary: binary log (row format,
#       sync_binlog = 1), rpl_semi_sync_master_enabled with wait point
#       AFTER_SYNC (a commit is visible to no one before the replica has
#       it: the lossless setting), PEER_MARIA_TIMEOUT_MS before it would
#       fall back to asynchronous (default one hour: never, within a row;
#       the rows check it did not);
#   vm2 on pr2, 10.77.0.101, the replica: read-only, semi-sync slave,
#       replicating by GTID from vm1.
# CPU placement: vm1's QEMU as CL_GUEST_CPUS says, vm2's on
# PEER_STANDBY_CPUS (it stands for another host's CPU).
# Source after common.sh, netns.sh and cluster.sh, then cl_use_maria_guest.

PEER_MARIA_PRI=10.77.0.100
PEER_MARIA_REP=10.77.0.101

peer_my() {	# peer_my IP SQL: one statement from the client host, tab-separated
	timeout 30 ip netns exec "$(netns_name "$CL_RUN" cli)" mariadb -h "$1" -u root \
		--connect-timeout=5 -N -B -e "$2"
}

peer_my_status() {	# peer_my_status IP VARIABLE: a global status value
	peer_my "$1" "SHOW GLOBAL STATUS LIKE '$2'" | cut -f2
}

# peer_maria_up RUN: both VMs up, replicating, the primary's semi-sync on
# with its replica connected; every step has a deadline.
peer_maria_up() {
	local run=$1 tmo=${PEER_MARIA_TIMEOUT_MS:-3600000}
	NETNS_PR2=1 cluster_hosts_up "$run" || { rdb_log "peer: hosts setup failed"; return 1; }
	CL_NO_PROTECT=1 CL_APPEND_MORE="remusdb.binlog=1" cluster_vm_up 25 ||
		{ rdb_log "peer: vm1 did not come up (logs in $CL_DIR)"; return 1; }
	CL_PRI=pr2 CL_VM=vm2 CL_GUEST_IP=$PEER_MARIA_REP CL_GUEST_MAC=52:54:00:52:44:02 \
		CL_TAP=vmtap1 CL_NO_PROTECT=1 CL_GUEST_CPUS=${PEER_STANDBY_CPUS:-${CL_GUEST_CPUS:-}} CL_APPEND_MORE="remusdb.binlog=2" cluster_vm_up 25 ||
		{ rdb_log "peer: vm2 did not come up (logs in $CL_DIR)"; return 1; }
	local ip
	for ip in $PEER_MARIA_PRI $PEER_MARIA_REP; do
		wait_for 30 "MariaDB at $ip reachable from the client" peer_my "$ip" "SELECT 1" ||
			return 1
		[ "$(peer_my "$ip" "SELECT @@log_bin")" = 1 ] ||
			{ rdb_log "peer: $ip runs without a binary log"; return 1; }
	done
	peer_my $PEER_MARIA_REP "SET GLOBAL read_only = ON, rpl_semi_sync_slave_enabled = ON" &&
	peer_my $PEER_MARIA_REP "CHANGE MASTER TO MASTER_HOST = '$PEER_MARIA_PRI', MASTER_USER = 'root', MASTER_CONNECT_RETRY = 1, MASTER_USE_GTID = slave_pos" &&
	peer_my $PEER_MARIA_REP "START SLAVE" ||
		{ rdb_log "peer: the replica refused its setup"; return 1; }
	peer_my $PEER_MARIA_PRI "SET GLOBAL rpl_semi_sync_master_enabled = ON, rpl_semi_sync_master_wait_point = 'AFTER_SYNC', rpl_semi_sync_master_timeout = $tmo" ||
		{ rdb_log "peer: the primary refused semi-sync"; return 1; }
	# a commit before the replica's semi-sync connection would wait for
	# it (wait_no_slave), or silently go asynchronous: load starts after
	wait_for 60 "the replica connected to the primary as a semi-sync slave" \
		peer_maria_semisync_on || return 1
}

peer_maria_semisync_on() {
	[ "$(peer_my_status $PEER_MARIA_PRI Rpl_semi_sync_master_clients)" -ge 1 ] &&
		[ "$(peer_my_status $PEER_MARIA_PRI Rpl_semi_sync_master_status)" = ON ]
}

# peer_maria_monitor OUT: the failover manager, run in the background
# from the client host (where a MaxScale would run).  It probes the
# primary (connect + SELECT 1, 1 s deadline) every 200 ms; once no probe
# has answered for PEER_MARIA_DETECT_MS (default 1000: RemusDB's own
# failover_timeout_ms in these rows) it promotes the replica as MaxScale
# does: the I/O thread stopped, the relay log applied, replication reset,
# read_only off; then moves the primary's address to it (the guest's
# console: ip addr add, gratuitous ARP), so that clients reconnect to the
# same address.  Writes "down_ms T", "applied_ms T", "promoted_ms T",
# "moved_ms T" (epoch ms) to OUT; a failed step writes "error ..." and
# stops.  No client traffic is redirected before the replica applied
# everything it received: acknowledged commits (AFTER_SYNC) are all in
# its relay log.
peer_maria_monitor() {
	local out=$1 detect=${PEER_MARIA_DETECT_MS:-1000} last now io pos
	local cli
	cli=$(netns_name "$CL_RUN" cli)
	: > "$out"
	last=$(date +%s%3N)
	while :; do
		if timeout 1 ip netns exec "$cli" mariadb -h $PEER_MARIA_PRI -u root \
			--connect-timeout=1 -N -B -e "SELECT 1" >/dev/null 2>&1; then
			last=$(date +%s%3N)
		fi
		now=$(date +%s%3N)
		[ $((now - last)) -ge "$detect" ] && break
		sleep 0.2
	done
	echo "down_ms $now" >> "$out"
	peer_my $PEER_MARIA_REP "STOP SLAVE IO_THREAD" ||
		{ echo "error: STOP SLAVE IO_THREAD" >> "$out"; return 1; }
	# everything received, applied: the GTID the I/O thread reached
	io=$(peer_my $PEER_MARIA_REP "SHOW SLAVE STATUS\\G" | sed -n 's/^ *Gtid_IO_Pos: *//p')
	pos=$(peer_my $PEER_MARIA_REP "SELECT MASTER_GTID_WAIT('$io', 20)")
	[ "$pos" = 0 ] || { echo "error: relay log not applied in 20 s ($io)" >> "$out"; return 1; }
	echo "applied_ms $(date +%s%3N)" >> "$out"
	peer_my $PEER_MARIA_REP "STOP SLAVE" &&
		peer_my $PEER_MARIA_REP "RESET SLAVE ALL" &&
		peer_my $PEER_MARIA_REP "SET GLOBAL read_only = OFF" ||
		{ echo "error: promotion" >> "$out"; return 1; }
	echo "promoted_ms $(date +%s%3N)" >> "$out"
	cl_console_cmd_at "$CL_DIR/pr2/vm2.serial.sock" \
		"ip addr add $PEER_MARIA_PRI/24 dev eth0; arping -U -c 3 -w 3 -I eth0 $PEER_MARIA_PRI >/dev/null &" &
	wait_for 10 "the primary's address answering from the replica" peer_maria_moved ||
		{ echo "error: address not moved" >> "$out"; return 1; }
	echo "moved_ms $(date +%s%3N)" >> "$out"
}

peer_maria_moved() {	# the primary's address reaches the promoted replica
	[ "$(peer_my $PEER_MARIA_PRI "SELECT @@server_id, @@read_only")" = "2	0" ]
}

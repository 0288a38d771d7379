# shellcheck shell=bash
# Where the daemons' CPU goes, for the benchmarks: every process of a
# host (a network namespace) but QEMU, per thread, in clock ticks
# (utime + stime), grouped by role:
#   loop        remusdbd's event loop (its main thread) and its short-lived
#               threads (jobs, witness requests, the metrics writer)
#   encoders    the page encoders (threads rdb-enc*)
#   tls         the replication link's TLS relay (rdb-tls)
#   disk_server the disk server processes (remusdbd --disk-server)
#   watchdog    the watchdog process (a remusdbd child, not a disk server)
#   other       any other process there
#
#   bcpu_snap RUN SIDE: a JSON object { role: ticks }
#   bcpu_delta BEFORE AFTER SECS: { role: CPU share (seconds per second) },
#                  with "total" and, given EPOCHS, "ms_per_epoch"
bcpu_snap() {
	local run=$1 side=$2 daemon pid role t comm ticks
	daemon=$(cat "$CL_DIR/$side/remusdbd.pid" 2>/dev/null) || daemon=
	for pid in $(ip netns pids "$(netns_name "$run" "$side")" 2>/dev/null); do
		[ -r "/proc/$pid/cmdline" ] || continue
		case $(tr '\0' ' ' < "/proc/$pid/cmdline") in
		*qemu-system*) continue ;;
		*--disk-server*) role=disk_server ;;
		*remusdbd*) [ "$pid" = "$daemon" ] && role=daemon || role=watchdog ;;
		*) role=other ;;
		esac
		# a process's own stat counts its exited threads too (the
		# backup's per-epoch jobs): the daemon's loop is what its
		# named long-lived threads leave of it
		ticks=$(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null) || continue
		if [ "$role" != daemon ]; then
			echo "$role $ticks"
			continue
		fi
		echo "loop $ticks"
		for t in /proc/"$pid"/task/*; do
			comm=$(cat "$t/comm" 2>/dev/null) || continue
			case $comm in
			rdb-enc*) role=encoders ;;
			rdb-tls) role=tls ;;
			*) continue ;;
			esac
			ticks=$(awk '{ print $14 + $15 }' "$t/stat" 2>/dev/null) || continue
			echo "$role $ticks"
			echo "loop -$ticks"
		done
	done | awk 'BEGIN { printf "{" } { s[$1] += $2 }
		END { n = 0; for (k in s) printf "%s\"%s\": %d", (n++ ? ", " : ""), k, s[k]; print "}" }'
}

bcpu_delta() {
	jq -n --argjson a "$1" --argjson b "$2" --argjson secs "$3" --argjson epochs "${4:-0}" \
		--argjson hz "$(getconf CLK_TCK)" '
		($b | to_entries | map({ key, value: ((.value - ($a[.key] // 0)) / $hz / $secs) })
		    | from_entries) as $d |
		$d + { total: ($d | add // 0) } +
		(if $epochs > 0 then { ms_per_epoch: (($d | add // 0) * $secs * 1000 / $epochs) }
		 else {} end)'
}

# bcpu_ticks PID: utime + stime of a process and its threads (0 if gone)
bcpu_ticks() {
	awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}

# bcpu_protected_end DIR S0 C0P C0B C1P C1B SECS: after a protected row's
# run, given the primary's status before it (S0) and both hosts'
# bcpu_snap before and after: BCPU_S1 (the primary's status now),
# BCPU_K1 (the backup's), DIR/epochs.json (the primary's per-epoch
# records, the run's and a few more: a file, too long for jq's argv)
# and BCPU_DCPU ({ primary, backup } of bcpu_delta, per epoch too).
bcpu_protected_end() {
	local dir=$1 s0=$2 c0p=$3 c0b=$4 c1p=$5 c1b=$6 secs=$7 epochs
	BCPU_S1=$(cl_ctl pri status "$CL_VM" --json)
	BCPU_K1=$(cl_status bak "$CL_VM" --json 2>/dev/null || echo '{"vms":[{}]}')
	epochs=$(( $(jq '.vms[0].checkpoints // 0' <<<"$BCPU_S1") - $(jq '.vms[0].checkpoints // 0' <<<"$s0") ))
	cl_ctl pri epochs "$CL_VM" --count $(( epochs + 64 > 4096 ? 4096 : epochs + 64 )) \
		--json > "$dir/epochs.json" || echo '{}' > "$dir/epochs.json"
	BCPU_DCPU=$(jq -n --argjson p "$(bcpu_delta "$c0p" "$c1p" "$secs" "$epochs")" \
		--argjson b "$(bcpu_delta "$c0b" "$c1b" "$secs" "$epochs")" \
		'{ primary: $p, backup: $b }')
}

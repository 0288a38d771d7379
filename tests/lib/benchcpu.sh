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

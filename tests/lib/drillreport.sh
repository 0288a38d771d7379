# shellcheck shell=bash
# The drill report (tools/drill-report.sh) from what a drill recorded in
# RUNDIR, checked: three PNG plots in the HTML, the times in order (pull,
# failover start, guest running; the epochs before the pull), and the
# client's timeline showing it served before the pull and after the
# restore.  Source after common.sh.
#
#   drill_report_check RUNDIR OUTDIR     rdb_fail on any miss

drill_report_check() {
	local run=$1 out=$2 f
	bash "$RDB_ROOT/tools/drill-report.sh" "$run" "$out" >/dev/null ||
		rdb_fail "no drill report from $run"
	for f in throughput pauses epoch-bytes; do
		[ "$(head -c 8 "$out/$f.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] &&
			grep -q "src=\"$f.png\"" "$out/report.html" ||
			rdb_fail "the report lacks its $f plot"
	done
	jq -e --slurpfile e "$run/epochs.json" '.failover_at >= .pull_at and
		.failover_at < .pull_at + 60 and .running_at > .failover_at and
		($e[0].epoch | length) >= 40 and ($e[0].t[-1] <= .pull_at)' \
		"$run/result.json" >/dev/null ||
		rdb_fail "the report's times are out of order (pull, failover, running, epochs)"
	# served before the pull and after the restore; nothing in a bin that
	# lies wholly inside the outage (from 0.3 s after the pull, when what
	# the primary released before it has arrived, to the restore)
	awk -v p="$(jq .pull_at "$run/result.json")" -v r="$(jq .running_at "$run/result.json")" '
		/^#/ { next }
		{ n++; t[n] = $1; v[n] = $2 }
		END {
			w = t[2] - t[1]
			for (i = 1; i <= n; i++) {
				if (t[i] < p - 1 && v[i] > 0) before++
				if (t[i] > r + 0.5 && v[i] > 0) after++
				if (t[i] >= p + 0.3 && t[i] + w <= r) { inside++; if (v[i] > 0) served++ }
			}
			printf "timeline: %d bins of %.1f s, %d served before the pull, %d after the restore, %d inside the outage (%d not empty)\n", n, w, before, after, inside, served
			exit !(before >= 3 && after >= 3 && inside >= 1 && served == 0)
		}' "$run/timeline.txt" ||
		rdb_fail "the client's timeline does not show it served before the pull, silent in the outage and served after the restore"
	echo "drill report: $out/report.html"
}

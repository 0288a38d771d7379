#!/usr/bin/env bash
# The drill report an operator reads: numbers and three plots (gnuplot).
#
#   tools/drill-report.sh RUNDIR OUTDIR
#
# RUNDIR holds what a drill recorded (tests/e2e/failover-seq.sh,
# tests/drill-pg.sh):
#   result.json   the drill's numbers, with pull_at and running_at (wall
#                 clock seconds: the power pull, the guest running on the
#                 backup) and failover_at (the backup began restoring)
#   timeline.txt  "REAL_S RATE" lines: the client's throughput over time
#                 (seqcheck --timeline; the ledger's commits per second)
#   epochs.json   the primary's last checkpoints before the pull
#                 (remusdbctl epochs --json)
#   rate_label    optional: what RATE counts (default "values/s")
# OUTDIR gets throughput.png (the client across the pull, the pull and
# the restore marked), pauses.png (the distribution of checkpoint pauses),
# epoch-bytes.png (bytes per epoch and the ACK wait before the pull) and
# report.html showing them with the numbers.  Exit 0, or 1 with a reason.
set -eu
run=$1 out=$2
for f in result.json timeline.txt epochs.json; do
	[ -s "$run/$f" ] || { echo "drill-report: $run/$f is missing" >&2; exit 1; }
done
command -v gnuplot >/dev/null || { echo "drill-report: gnuplot is not installed" >&2; exit 1; }
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
r=$run/result.json
label=$(cat "$run/rate_label" 2>/dev/null || echo "values/s, 100 ms bins")
pull=$(jq -r '.pull_at // empty' "$r")
running=$(jq -r '.running_at // empty' "$r")
started=$(jq -r '.failover_at // empty' "$r")
[ -n "$pull" ] && [ -n "$running" ] ||
	{ echo "drill-report: $r has no pull_at / running_at" >&2; exit 1; }

# times relative to the pull, seconds
awk -v p="$pull" '!/^#/ { printf "%.3f %s\n", $1 - p, $2 }' "$run/timeline.txt" > "$tmp/tl"
# epoch 0 is the initial state (all of memory), not a checkpoint: left out
jq -r --argjson p "$pull" '[.epoch, .t, .pause_ms, .bytes, .ack_ms] | transpose[] |
	select(.[0] > 0) |
	"\(.[1] - $p) \(.[2]) \(.[3] / 1024) \(.[4] // "NaN")"' "$run/epochs.json" > "$tmp/ep"
[ -s "$tmp/tl" ] || { echo "drill-report: the timeline is empty" >&2; exit 1; }
[ -s "$tmp/ep" ] || { echo "drill-report: no epochs were recorded" >&2; exit 1; }
run_s=$(awk -v a="$running" -v p="$pull" 'BEGIN { printf "%.3f", a - p }')
start_s=$(awk -v a="${started:-$running}" -v p="$pull" 'BEGIN { printf "%.3f", a - p }')
p50=$(cut -d' ' -f2 "$tmp/ep" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR - 1) * 0.5) + 1] }')
p99=$(cut -d' ' -f2 "$tmp/ep" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR - 1) * 0.99) + 1] }')
pmax=$(cut -d' ' -f2 "$tmp/ep" | sort -g | tail -n 1)
nep=$(wc -l < "$tmp/ep")
# the pause histogram up to twice the p99 (at least 5 ms), 50 bins; the
# few pauses beyond are counted in the title, not drawn off the scale
xmax=$(awk -v a="$p99" 'BEGIN { x = a * 2; if (x < 5) x = 5; printf "%.3f", x }')
beyond=$(awk -v x="$xmax" '$2 > x { n++ } END { print n + 0 }' "$tmp/ep")
bw=$(awk -v x="$xmax" 'BEGIN { printf "%.4f", x / 50 }')
awk -v w="$bw" -v x="$xmax" '$2 <= x { b = int($2 / w); n[b]++; if (b > m) m = b }
	END { for (i = 0; i <= m; i++) printf "%.4f %d\n", i * w + w / 2, n[i] + 0 }' \
	"$tmp/ep" > "$tmp/hist"

gnuplot <<EOG
set terminal pngcairo size 1000,420 font "DejaVu Sans,11"
set grid
set key outside bottom center horizontal
# headroom above the data for the markers' labels
set offsets 0, 0, graph 0.4, 0

set output "$out/throughput.png"
set title "What the client saw across the power pull"
set xlabel "seconds from the power pull"
set ylabel "$label"
set yrange [0:*]
set object 1 rect from 0, graph 0 to $run_s, graph 1 fc rgb "#d62728" fs transparent solid 0.08 noborder
set arrow 1 from 0, graph 0 to 0, graph 1 nohead lc rgb "#d62728" lw 2
set label 1 "power pulled" at 0, graph 0.95 offset 0.5,0 tc rgb "#d62728"
set arrow 2 from $start_s, graph 0 to $start_s, graph 1 nohead lc rgb "#ff7f0e" lw 1 dt 2
set label 2 "failover starts" at $start_s, graph 0.85 offset 0.5,0 tc rgb "#ff7f0e"
set arrow 3 from $run_s, graph 0 to $run_s, graph 1 nohead lc rgb "#2ca02c" lw 2
set label 3 "running on the backup" at $run_s, graph 0.75 offset 0.5,0 tc rgb "#2ca02c"
plot "$tmp/tl" using 1:2 with steps lc rgb "#1f77b4" lw 1.5 title "$label"
unset arrow; unset label; unset object 1

set output "$out/pauses.png"
set title sprintf("Checkpoint pauses (guest stopped), the last %d epochs before the pull%s", $nep, \
	$beyond > 0 ? sprintf("; %d above %.1f ms, the longest %.1f ms", $beyond, $xmax, $pmax) : "")
set xlabel "pause, ms"
set ylabel "epochs"
set xrange [0:$xmax]
set style fill solid 0.6
set boxwidth $bw
set arrow 1 from $p50, graph 0 to $p50, graph 1 nohead lc rgb "#2ca02c" lw 2
set label 1 sprintf("p50 %.2f ms", $p50) at $p50, graph 0.95 offset 0.5,0 tc rgb "#2ca02c"
set arrow 2 from $p99, graph 0 to $p99, graph 1 nohead lc rgb "#d62728" lw 2
set label 2 sprintf("p99 %.2f ms", $p99) at $p99, graph 0.85 offset 0.5,0 tc rgb "#d62728"
plot "$tmp/hist" using 1:2 with boxes lc rgb "#1f77b4" notitle
unset arrow; unset label; set xrange [*:*]

set output "$out/epoch-bytes.png"
set title "Bytes sent per epoch and the wait for the backup's ACK, before the pull"
set xlabel "seconds from the power pull"
set ylabel "KiB per epoch (log scale)"
set logscale y
set yrange [1:*]
set y2label "ACK wait, ms"
set ytics nomirror
set y2tics
set y2range [0:*]
set offsets 0, 0, graph 0.1, 0
plot "$tmp/ep" using 1:3 with steps lc rgb "#1f77b4" title "KiB per epoch", \
     "$tmp/ep" using 1:4 axes x1y2 with points pt 7 ps 0.4 lc rgb "#ff7f0e" title "ACK wait (ms)"
EOG

for f in throughput pauses epoch-bytes; do
	[ -s "$out/$f.png" ] || { echo "drill-report: gnuplot made no $f.png" >&2; exit 1; }
done
jq -r --arg p50 "$p50" --arg p99 "$p99" --arg pmax "$pmax" --arg nep "$nep" \
	--arg run_s "$run_s" --arg start_s "$start_s" '
	def row(k; v): "<tr><th>\(k)</th><td>\(v)</td></tr>";
	def ms(x): if x == null then "-" else "\(x * 10 | round / 10) ms" end;
	"<!DOCTYPE html>
<html><head><meta charset=\"utf-8\"><title>RemusDB drill report</title>
<style>body{font-family:sans-serif;max-width:1040px;margin:2em auto}
th{text-align:left;padding-right:2em}td{font-family:monospace}
.ok{color:#2ca02c}.bad{color:#d62728}</style></head><body>
<h1>RemusDB power-pull drill</h1>
<p class=\"\(if .invariants_ok then "ok" else "bad" end)\"><b>Invariants: \(if .invariants_ok then "OK" else "VIOLATED" end)</b></p>
<table>" +
	row("power pulled"; (.pull_at | todate)) +
	row("failover started (backup)"; "+\($start_s) s") +
	row("guest running on the backup"; "+\($run_s) s") +
	row("restore (backup)"; ms(.restore_ms)) +
	row("committed epoch restored"; .committed_epoch) +
	row("client outage"; ms(.failover_ms)) +
	(if .values then row("client values"; "\(.values), gaps \(.gaps), repeats \(.dups), rollbacks \(.regressions + .corrupt)") else "" end) +
	(if .acked_commits then row("acknowledged commits"; "\(.acked_commits), lost \(.lost_commits)") else "" end) +
	(if .connection_lost != null then row("same TCP connection"; if .connection_lost then "no" else "yes" end) else "" end) +
	row("checkpoints before the pull"; "\(.checkpoints_per_s * 10 | round / 10) per second at \(.epoch_ms) ms epochs") +
	row("pause over the last \($nep) epochs"; "p50 \($p50) ms, p99 \($p99) ms, max \($pmax) ms") +
	"</table>
<h2>The client across the pull</h2><img src=\"throughput.png\" alt=\"throughput\">
<h2>Checkpoint pauses</h2><img src=\"pauses.png\" alt=\"pauses\">
<h2>Bytes per epoch</h2><img src=\"epoch-bytes.png\" alt=\"epoch bytes\">
</body></html>"' "$r" > "$out/report.html"
echo "drill-report: $out/report.html"

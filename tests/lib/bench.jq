# jq definitions shared by the throughput benchmarks (tests/bench/
# pgbench.sh, sysbench.sh): jq -L tests/lib, then include "bench";

# the element at fraction $p of the sorted array $a (null if empty)
def pct($a; $p): ($a | sort) as $s | if ($s | length) == 0 then null
	else $s[(($s | length) * $p | floor)] end;

def median: sort | if length == 0 then null
	elif length % 2 == 1 then .[length / 2 | floor]
	else (.[length / 2 - 1] + .[length / 2]) / 2 end;

# the median of the values that are not null
def nmedian: map(select(. != null)) | median;

# A row's checkpoint fields, all null unless $protected: the primary's
# status before ($s0) and after ($s1) the run, the backup's after ($k1),
# the primary's per-epoch records ($ep, remusdbctl epochs --json) of
# which those whose pause ended inside the run [$t0, $t1] give the pause
# (the status p50 covers the last 4096 pauses, boot and warm-up
# included: pause_ms_p50_ring), $secs the run's length.
def checkpoint_fields($protected; $s0; $s1; $k1; $ep; $t0; $t1; $secs):
	($s0.vms[0]) as $a | ($s1.vms[0]) as $b |
	(($b.checkpoints // 0) - ($a.checkpoints // 0)) as $epochs |
	([range(0; ($ep.t // []) | length)] | map(select($ep.t[.] >= $t0 and $ep.t[.] <= $t1))) as $w |
	($w | map($ep.pause_ms[.])) as $wp |
	{ epochs_per_s: ($epochs / $secs),
	  pause_ms_p50: pct($wp; 0.5),
	  pause_ms_p99: pct($wp; 0.99),
	  pause_epochs: ($wp | length),
	  pause_ms_p50_ring: $b.pause_ms_p50,
	  pause_share: (if ($wp | length) > 0
		then (pct($wp; 0.5) * $epochs / $secs / 1000) else null end),
	  bytes_per_epoch_p50: pct($w | map($ep.bytes[.]); 0.5),
	  ack_ms_p50: $b.ack_ms_p50,
	  ack_ms_p99: $b.ack_ms_p99,
	  backup_commit_ms_p50: ($k1.vms[0].commit_ms_p50 // null),
	  backup_commit_ms_p99: ($k1.vms[0].commit_ms_p99 // null) } |
	if $protected then . else map_values(null) end;

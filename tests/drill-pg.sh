#!/usr/bin/env bash
# The PostgreSQL power-pull drill: K times, a protected PostgreSQL VM under
# the ledger workload and pgbench loses its primary's power at a random
# moment (tests/e2e/pg-failover.sh, a fresh pair of hosts each time).
# Writes build/drill/pg-report.json and, per drill, a report with plots
# (build/drill/pg-drill-K/report.html); exits non-zero if any commit was
# lost, any invariant failed or pg_amcheck found corruption.
#
#   tests/drill-pg.sh [--drills K]      (default DRILLS or 3)
set -u
cd "$(dirname "$0")/.."
. tests/lib/common.sh
k=${DRILLS:-3}
[ "${1:-}" = --drills ] && k=$2
[[ "$k" =~ ^[1-9][0-9]*$ ]] || rdb_fail "--drills wants a positive number"
rdb_require_root
mkdir -p build/drill
results=()
for i in $(seq 1 "$k"); do
	rdb_log "drill-pg: drill $i of $k"
	rm -rf "build/e2e/drillpg$i"
	RDB_RUN=drillpg$i timeout --kill-after=10 600 bash tests/e2e/pg-failover.sh
	rc=$?
	f=build/e2e/drillpg$i/result.json
	if [ -s "$f" ]; then
		results+=("$f")
		# its report with plots (made and checked by the test)
		[ -d "build/e2e/drillpg$i/report" ] && rm -rf "build/drill/pg-drill-$i" &&
			cp -r "build/e2e/drillpg$i/report" "build/drill/pg-drill-$i" &&
			echo "drill $i: build/drill/pg-drill-$i/report.html"
	else
		jq -n --argjson rc $rc '{invariants_ok: false, amcheck_ok: false,
			error: "drill did not complete", rc: $rc}' > "build/drill/pg-drill-$i-error.json"
		results+=("build/drill/pg-drill-$i-error.json")
	fi
done
jq -s --argjson k "$k" '
	def pct(p): (map(select(. != null and . >= 0)) | sort) as $s |
		if ($s | length) == 0 then null
		else $s[((($s | length) - 1) * p / 100 | floor)] end;
	{ drills: $k,
	  completed: map(select(.acked_commits != null)) | length,
	  acked_commits: (map(.acked_commits // 0) | add),
	  lost_commits: (map(.lost_commits // 0) | add),
	  phantom_txns: (map(.phantom_txns // 0) | add),
	  partial_txns: (map(.partial_txns // 0) | add),
	  broken_connections: (map(.broken_connections // 0) | add),
	  invariants_ok: all(.invariants_ok == true),
	  amcheck_ok: all(.amcheck_ok == true),
	  disks_equal_frozen: all(.disk_equal_frozen == true),
	  failover_ms_p50: (map(.failover_ms) | pct(50)),
	  failover_ms_max: (map(.failover_ms // -1) | max),
	  restore_ms_max: (map(.restore_ms // -1) | max),
	  tps_before_mean: (map(.tps_before // 0) | add / length),
	  tps_after_mean: (map(.tps_after // 0) | add / length),
	  per_drill: . }' "${results[@]}" > build/drill/pg-report.json ||
	rdb_fail "could not write the report"
jq 'del(.per_drill)' build/drill/pg-report.json
jq -e '.completed == .drills and .lost_commits == 0 and .invariants_ok and .amcheck_ok' \
	build/drill/pg-report.json >/dev/null

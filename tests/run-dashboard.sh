#!/usr/bin/env bash
# The Grafana dashboard (tools/grafana/remusdb.json) against the daemon it
# watches: valid JSON with titled panels on one data source input; every
# query parses as PromQL (promtool check rules, each query made a
# recording rule); every remusdb_ metric it queries is one remusdbd
# writes (the family names in dom0-daemon/), so a renamed metric turns
# this red instead of leaving an empty panel.  Exit 0 pass, 1 fail.
set -u
cd "$(dirname "$0")/.."
. tests/lib/common.sh
dash=tools/grafana/remusdb.json
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT

jq -e '(.panels | length) > 0 and all(.panels[]; (.title | length) > 0 and
	(.targets | length) > 0 and all(.targets[]; (.expr | length) > 0) and
	.datasource.uid == "${DS_PROMETHEUS}") and
	(.__inputs[0].name == "DS_PROMETHEUS")' "$dash" >/dev/null ||
	rdb_fail "$dash: not JSON, a panel without title or query, or another data source"

# every query as a rule; the dashboard's $vm variable as Grafana expands "All"
{
	echo "groups:"
	echo "- name: dashboard"
	echo "  rules:"
	jq -r '.panels[].targets[].expr, .templating.list[].definition' "$dash" |
		grep -v '^label_values(' | sed 's/\$vm/.*/g' | awk '{
			gsub(/\x27/, "\x27\x27")
			printf "  - record: dashboard:q%d\n    expr: \x27%s\x27\n", NR, $0 }'
} > "$d/rules.yml"
out=$(promtool check rules "$d/rules.yml" 2>&1) ||
	rdb_fail "a dashboard query is not valid PromQL: $out"

# the families remusdbd writes (rdb_prom_add / rdb_prom_add_hist names)
grep -ho '"remusdb_[a-z0-9_]*"' dom0-daemon/*.c | tr -d '"' | sort -u > "$d/written"
[ "$(wc -l < "$d/written")" -gt 20 ] || rdb_fail "found too few metric names in dom0-daemon/"
missing=0 n=0
for m in $(jq -r '.panels[].targets[].expr, .templating.list[].definition' "$dash" |
	   grep -o 'remusdb_[a-z0-9_]*' | sort -u); do
	base=$m
	case $m in *_bucket|*_sum|*_count)
		grep -qx "$m" "$d/written" || base=${m%_*} ;;
	esac
	n=$((n + 1))
	grep -qx "$base" "$d/written" || { echo "dashboard: $m is not a metric remusdbd writes"; missing=1; }
done
[ $missing = 0 ] || rdb_fail "the dashboard queries metrics that do not exist"
echo "dashboard: $(jq '.panels | length' "$dash") panels, $n metrics, all written by remusdbd, queries valid PromQL"

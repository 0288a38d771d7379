# shellcheck shell=bash
# The metrics file as Prometheus sees it (docs/operations.md, "Metrics").
# Source after common.sh and netns.sh.
#
#   metrics_lint FILE                 promtool's lint of the text format:
#                                     HELP and TYPE per family, one family
#                                     together, names and suffixes
#   metrics_scrape NS FILE OUT        a real scrape: node_exporter's
#                                     textfile collector in netns NS reads
#                                     FILE's directory, OUT is its /metrics;
#                                     fails when the collector refused the
#                                     file (node_textfile_scrape_error 1)
#   metrics_value FILE NAME [k=v...]  the value of the sample of NAME with
#                                     those labels (any order, others
#                                     ignored); empty when there is none,
#                                     fails when more than one matches
#
# Every wait has a deadline.

metrics_lint() {
	local file=$1 out
	[ -s "$file" ] || { echo "metrics_lint: $file is missing or empty" >&2; return 1; }
	if ! out=$(promtool check metrics < "$file" 2>&1); then
		echo "metrics_lint: promtool refused $file:" >&2
		printf '%s\n' "$out" | head -n 20 >&2
		return 1
	fi
	return 0
}

metrics_scrape() {
	local ns=$1 file=$2 out=$3 port=9187 pid rc=0 url
	url=http://127.0.0.1:$port/metrics
	ip netns exec "$ns" ip link set lo up 2>/dev/null
	ip netns exec "$ns" prometheus-node-exporter \
		--web.listen-address="127.0.0.1:$port" \
		--collector.disable-defaults --collector.textfile \
		--collector.textfile.directory="$(dirname "$file")" \
		>"$out.exporter.log" 2>&1 &
	pid=$!
	wait_for 10 "node_exporter on $ns" \
		ip netns exec "$ns" curl -sf -o "$out" "$url" || rc=1
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	[ $rc = 0 ] || { echo "metrics_scrape: no answer from node_exporter" >&2; return 1; }
	if [ "$(metrics_value "$out" node_textfile_scrape_error)" != 0 ]; then
		echo "metrics_scrape: node_exporter refused $file:" >&2
		grep -i "textfile\|error" "$out.exporter.log" | head -n 10 >&2
		return 1
	fi
	metrics_lint "$out"
}

metrics_value() {
	local file=$1 name=$2; shift 2
	awk -v name="$name" -v want="$*" '
	BEGIN { n = split(want, w, " ") }
	/^#/ { next }
	{
		sample = $1; val = $2
		if (index(sample, "{")) {
			mname = substr(sample, 1, index(sample, "{") - 1)
			labels = substr(sample, index(sample, "{") + 1)
			sub(/}$/, "", labels)
		} else { mname = sample; labels = "" }
		if (mname != name) next
		for (i = 1; i <= n; i++) {
			k = substr(w[i], 1, index(w[i], "=") - 1)
			v = substr(w[i], index(w[i], "=") + 1)
			if (index("," labels ",", "," k "=\"" v "\",") == 0) next
		}
		found++; value = val
	}
	END {
		if (found > 1) { print "metrics_value: " found " samples match " name " " want > "/dev/stderr"; exit 1 }
		if (found) print value
	}' "$file"
}

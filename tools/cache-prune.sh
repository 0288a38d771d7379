#!/usr/bin/env bash
# cache-prune.sh ROOT PREFIX [KEEP]: of the content-keyed cache entries
# ROOT/PREFIX-<key> (guest images, DBMS builds, the test QEMU), keep the
# KEEP (default 3) most recently used and delete the others.  Every build
# script touches its entry's .used when it uses it, so an entry that
# another checkout still uses is not the one that goes; KEEP > 1 leaves
# room for a CI clone and a working tree on different commits.
set -u
root=$1 prefix=$2 keep=${3:-3}
[[ "$keep" =~ ^[1-9][0-9]*$ ]] || { echo "cache-prune: KEEP must be a positive number" >&2; exit 2; }
[ -d "$root" ] || exit 0
mapfile -t entries < <(
	for d in "$root/$prefix"-*/; do
		[ -d "$d" ] || continue
		d=${d%/}
		# an entry still being built (no .done) is another build's: left alone
		[ -f "$d/.done" ] || continue
		t=$(stat -c %Y "$d/.used" 2>/dev/null || stat -c %Y "$d")
		echo "$t $d"
	done | sort -rn | cut -d' ' -f2-)
for ((i = keep; i < ${#entries[@]}; i++)); do
	echo "cache-prune: removing ${entries[i]} (not among the $keep most recently used)" >&2
	rm -rf "${entries[i]}"
done
exit 0

#!/usr/bin/env bash
# The manual pages build and render without a warning (groff -ww, and
# man -l as a reader sees them), and the option pages list every option
# of the daemon's tables.  Exit 0 pass, 1 fail.
set -u
cd "$(dirname "$0")/.."
ctl=${RDB_BUILD:-build}/remusdbctl
out=build/man
fail=0
bash tools/mkman.sh "$ctl" "$out" || { echo "man: tools/mkman.sh failed"; exit 1; }
for f in "$out"/*.[58]; do
	w=$( { groff -man -ww -z "$f" 2>&1 >/dev/null
	       LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$f" 2>&1 >/dev/null; } )
	if [ -n "$w" ]; then
		echo "man: $f: $w"
		fail=1
	fi
	LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$f" 2>/dev/null | grep -q '^NAME' ||
		{ echo "man: $f does not render"; fail=1; }
done
for kind in "" vm; do
	page=$out/remusdb.conf.5
	[ "$kind" = vm ] && page=$out/remusdb-vm.conf.5
	want=$("$ctl" config --dump-defaults $kind | grep -cE '^(# )?[a-z_0-9]+ = ?')
	have=$(grep -c '^\.TP' "$page")
	[ "$want" = "$have" ] || { echo "man: $page lists $have options, the daemon has $want"; fail=1; }
done
# what the pages document: both programs answer --help and -h with their
# usage on stdout, exit 0
for prog in remusdbd remusdbctl; do
	for h in --help -h; do
		u=$("${RDB_BUILD:-build}/$prog" $h 2>/dev/null) && [ "${u#usage: $prog}" != "$u" ] ||
			{ echo "man: $prog $h does not print its usage"; fail=1; }
	done
done
[ $fail = 0 ] && echo "man: $(ls "$out" | wc -l) pages, no warnings"
exit $fail

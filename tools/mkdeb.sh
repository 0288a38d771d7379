#!/usr/bin/env bash
# The Debian packages -> build/deb/*.deb: remusdb (the hosts: remusdbd,
# remusdbctl, the systemd unit, manual pages, a commented configuration),
# remusdb-xen (a Xen dom0, beside remusdb: the helper remusdb-xen and its
# device scripts), remusdb-dkms (the guest: remusdb.ko's source for DKMS)
# and remusdb-guest (the guest: remusdb-eventd).  The top level has no
# debian/: the tree's files (tracked, plus new ones git does not ignore,
# as they are in the working tree) are copied to build/deb/remusdb-VERSION/, tools/debian
# becomes its debian/, and dpkg-buildpackage builds the binary packages
# there (the copy is removed once it built).  Build dependencies: tools/setup-deps.sh (make deb runs it).
#   tools/mkdeb.sh            (from anywhere; writes ROOT/build/deb/)
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "mkdeb: $*" >&2; }

ver=$(dpkg-parsechangelog -l tools/debian/changelog -S Version)
out=build/deb
src=$out/remusdb-$ver
rm -rf "$out"
mkdir -p "$src"

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# a tracked file deleted in the working tree is left out
	git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
		tar --null -T - -cf - | tar -C "$src" -xf -
else
	tar --exclude=./build -cf - . | tar -C "$src" -xf -
fi
rm -rf "$src/debian"
cp -a tools/debian "$src/debian"

log "building remusdb $ver in $src (log: $out/build.log)"
if ! (cd "$src" && dpkg-buildpackage -b -us -uc -j1) > "$out/build.log" 2>&1; then
	tail -30 "$out/build.log" >&2
	log "dpkg-buildpackage failed; the whole log is $out/build.log, the tree $src"
	exit 1
fi
# The copy goes: its build/ has .d files the top-level Makefile would
# pick up (it includes every build/**/*.d).
rm -rf "$src"
ls "$out"/*.deb

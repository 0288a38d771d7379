#!/usr/bin/env bash
# The daemon's pipeline talks to hypervisor/hv.h only (issue 14's design
# constraint): no file outside hypervisor/ may include a backend's own
# headers (hypervisor/qemu/, hypervisor/xen/) or Xen's libraries'.
# Tests of a backend (tests/unit, tests/fuzz, tests/helpers) may.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](qemu/|xen/|xenctrl\.h|xenguest\.h|xenstore\.h|libxl[a-z_]*\.h)' \
	dom0-daemon tools guest-kmod 2>/dev/null || true)
if [ -n "$bad" ]; then
	echo "FAIL layers: these include a hypervisor backend's own headers; use hypervisor/hv.h:" >&2
	echo "$bad" >&2
	exit 1
fi
# A peer's text reaches our logs only through rdb_msg_text_parse (proto.c),
# which turns anything but printable ASCII into '?': no other daemon file
# formats a frame's payload as a string.  A statement (its lines joined up
# to the next ';', '{' or '}') that holds a %s conversion and a .payload
# or ->payload is refused.
bad=$(find dom0-daemon -name '*.[ch]' ! -path dom0-daemon/proto.c -print0 | sort -z |
	xargs -0 awk '
		FNR == 1 { stmt = "" }
		stmt == "" && NF { start = FNR; first = $0 }
		NF { stmt = stmt " " $0 }
		/[;{}]/ {
			if (stmt ~ /%[-+ #0-9.*]*s/ &&
			    stmt ~ /(\.|->)payload([^A-Za-z0-9_]|$)/)
				print FILENAME ":" start ":" first
			stmt = ""
		}')
if [ -n "$bad" ]; then
	echo "FAIL layers: these format a frame's payload as a string; use rdb_msg_text_parse:" >&2
	echo "$bad" >&2
	exit 1
fi
n=$(grep -rlE '#include "hv.h"' dom0-daemon | wc -l)
echo "layers: nothing outside hypervisor/ includes a backend's headers ($n daemon files use hv.h); no payload printed raw outside proto.c"
# No new circles among the daemon's files, and no file joins one (issue 28;
# tests/file-cycles.sh, from the objects' symbol tables).  Its report is
# shown only when it fails; otherwise its summary line, and a line naming
# any allowed file that has left its circle.
if ! out=$(bash tests/file-cycles.sh 2>&1); then
	echo "$out" >&2
	exit 1
fi
printf '%s\n' "$out" | grep '^file-cycles:'

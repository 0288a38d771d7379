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
n=$(grep -rlE '#include "hv.h"' dom0-daemon | wc -l)
echo "layers: nothing outside hypervisor/ includes a backend's headers ($n daemon files use hv.h)"

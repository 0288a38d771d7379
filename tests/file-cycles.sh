#!/usr/bin/env bash
# Circles among the daemon's files (issue 28).  File A refers to a function
# or global that file B defines, and B (perhaps through other files) to one
# that A defines: such files cannot be read, tested or replaced one at a
# time.  The edges come from the objects' symbol tables (nm): a global that
# an object leaves undefined (U) and another daemon object defines.  Static
# functions never make an edge, and symbols defined outside dom0-daemon/
# (libc, hypervisor/, other libraries) are ignored.
#
#   tests/file-cycles.sh          the circles (strongly connected components
#                                 of more than one file), up to 3 symbols per
#                                 edge; exit 1 if one is not within a line
#                                 of tests/file-cycles.allow
#   tests/file-cycles.sh --count  the number of files in circles
#
# The objects are the Makefile's: RDB_BUILD/obj/dom0-daemon/*.o (RDB_BUILD
# as the other test scripts take it, build or build/san); without
# RDB_BUILD, whichever of build and build/san holds the newer daemon
# objects.  make brings them up to date first (-j1), which does nothing
# when they are.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=report
case "${1:-}" in
"") ;;
--count) mode=count ;;
*)
	echo "usage: tests/file-cycles.sh [--count]" >&2
	exit 2
	;;
esac

shopt -s nullglob
srcs=(dom0-daemon/*.c dom0-daemon/lib/*.c)
shopt -u nullglob

if [ -n "${RDB_BUILD:-}" ]; then
	b=${RDB_BUILD%/}
else
	b=build
	newest() { { find "$1/obj/dom0-daemon" -name '*.o' -printf '%T@\n' 2>/dev/null || true; } | sort -g | tail -1; }
	tb=$(newest build) ts=$(newest build/san)
	if [ -n "$ts" ] && { [ -z "$tb" ] || [ "$(printf '%s\n' "$tb" "$ts" | sort -g | tail -1)" != "$tb" ]; }; then
		b=build/san
	fi
fi
objs=()
for s in "${srcs[@]}"; do
	objs+=("$b/obj/${s%.c}.o")
done

# SAN=1 gives the sanitizer's flags, as the Makefile's build/san has them;
# B on the command line overrides the Makefile's directory, so the objects
# are the ones under RDB_BUILD.  The parent make's flags (its jobserver,
# its -j) are not passed on.
san=
case "$b" in */san | san) san=1 ;; esac
MAKEFLAGS= make -j1 -s --no-print-directory SAN="$san" B="$b" "${objs[@]}" >&2

python3 - "$mode" tests/file-cycles.allow "$b" "${objs[@]}" <<'EOF'
import subprocess, sys

mode, allow_path, bdir, objs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
prefix = bdir + "/obj/dom0-daemon/"

def name(obj):
    # The name a reader knows the file by: primary.c, lib/buf.c.
    return obj[len(prefix):-2] + ".c"

files = [name(o) for o in objs]
defined = {}            # symbol -> files that define it
refs = {f: set() for f in files}
out = subprocess.run(["nm", "-A", "-P"] + objs, check=True,
                     capture_output=True, text=True).stdout
for line in out.splitlines():
    path, rest = line.split(": ", 1)
    f = rest.split()
    sym, kind = f[0], f[1]
    if kind in "Uwv":
        refs[name(path)].add(sym)
    elif kind in "TDBRCGSWVi":
        defined.setdefault(sym, set()).add(name(path))

# edges[a][b]: the symbols a uses that b defines.
edges = {f: {} for f in files}
for a in files:
    for sym in refs[a]:
        for b in defined.get(sym, ()):
            if b != a:
                edges[a].setdefault(b, []).append(sym)

def reach(a):
    seen, todo = {a}, [a]
    while todo:
        for b in edges[todo.pop()]:
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return seen

# 50-odd files: reachability from each is cheap, and two files are in one
# component when each reaches the other.
r = {f: reach(f) for f in files}
sccs, placed = [], set()
for f in sorted(files):
    if f in placed:
        continue
    comp = sorted(g for g in r[f] if f in r[g])
    placed.update(comp)
    if len(comp) > 1:
        sccs.append(comp)

allowed = []
try:
    fh = open(allow_path)
except OSError as e:
    print(f"FAIL file-cycles: {allow_path}: {e.strerror}", file=sys.stderr)
    sys.exit(1)
with fh:
    for line in fh:
        line = line.split("#", 1)[0].split()
        if line:
            allowed.append(set(line))

nfiles = sum(len(c) for c in sccs)
if mode == "count":
    print(nfiles)
    sys.exit(0)

for i, comp in enumerate(sccs, 1):
    print(f"circle {i} ({len(comp)} files): {' '.join(comp)}")
    for a in comp:
        for b in sorted(edges[a]):
            if b not in comp:
                continue
            syms = sorted(edges[a][b])
            more = f" (+{len(syms) - 3} more)" if len(syms) > 3 else ""
            print(f"  {a} -> {b}: {', '.join(syms[:3])}{more}")

bad = []
for comp in sccs:
    if any(set(comp) <= line for line in allowed):
        continue
    best = max(allowed, key=lambda line: len(line & set(comp)), default=set())
    if not best & set(comp):
        bad.append(f"a new circle: {' '.join(comp)}")
    else:
        bad.append(f"{' '.join(sorted(set(comp) - best))} joined the circle "
                   f"allowed as: {' '.join(sorted(best))}")
if bad:
    for msg in bad:
        print(f"FAIL file-cycles: {msg}", file=sys.stderr)
    print("FAIL file-cycles: break it (move the shared part into a file both "
          "use, or pass a callback); tests/file-cycles.allow only shrinks",
          file=sys.stderr)
    sys.exit(1)

# An allowed line that is larger than any circle now can be cut down.
for line in allowed:
    inside = set().union(*[set(c) for c in sccs if set(c) <= line])
    if inside != line:
        gone = " ".join(sorted(line - inside))
        print(f"file-cycles: no longer in a circle, drop from "
              f"{allow_path}: {gone}")
print(f"file-cycles: {nfiles} daemon files in {len(sccs)} circle(s), "
      f"all within {allow_path} (issue 28: zero is the goal)")
EOF

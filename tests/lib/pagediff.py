#!/usr/bin/env python3
# pagediff.py A B: compares two RAM images page by page (4 KiB).  Prints
# "pages N differ M" and, when M > 0, the first differing pages' offsets
# within the block (hex).  Exit 0 equal, 1 different, 2 on an error
# (sizes differ, unreadable).
import mmap
import sys

PAGE = 4096
CHUNK = 1 << 20


def main():
    if len(sys.argv) != 3:
        print("usage: pagediff.py A B", file=sys.stderr)
        return 2
    try:
        fa, fb = open(sys.argv[1], "rb"), open(sys.argv[2], "rb")
        a = mmap.mmap(fa.fileno(), 0, access=mmap.ACCESS_READ)
        b = mmap.mmap(fb.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as e:
        print(f"pagediff: {e}", file=sys.stderr)
        return 2
    if len(a) != len(b):
        print(f"pagediff: sizes differ: {len(a)} and {len(b)}", file=sys.stderr)
        return 2
    diff = []
    for off in range(0, len(a), CHUNK):
        end = min(off + CHUNK, len(a))
        if a[off:end] == b[off:end]:
            continue
        for p in range(off, end, PAGE):
            if a[p:p + PAGE] != b[p:p + PAGE]:
                diff.append(p)
    print(f"pages {len(a) // PAGE} differ {len(diff)}" +
          ("".join(f" {p:#x}" for p in diff[:16]) if diff else ""))
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())

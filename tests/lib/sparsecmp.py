#!/usr/bin/env python3
# sparsecmp.py A B: are two (sparse) disk images byte-equal?  Reads only
# where either has data (SEEK_DATA / SEEK_HOLE; a hole reads as zeroes),
# so a 1 GiB image with 200 MiB of data costs 200 MiB of reads, not 1 GiB
# (through crashfs as well: it answers SEEK_DATA/SEEK_HOLE).  Exit 0
# equal, 1 different (the first differing byte on stdout, as cmp says
# it), 2 on an error.
import os
import sys

CHUNK = 1 << 20


def extents(fd, size):
    """The file's data ranges [start, end)."""
    out, pos = [], 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError:          # ENXIO: no data after pos
            break
        end = os.lseek(fd, start, os.SEEK_HOLE)
        out.append((start, end))
        pos = end
    return out


def union(a, b):
    merged = []
    for s, e in sorted(a + b):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def main():
    if len(sys.argv) != 3:
        print("usage: sparsecmp.py A B", file=sys.stderr)
        return 2
    fa = os.open(sys.argv[1], os.O_RDONLY)
    fb = os.open(sys.argv[2], os.O_RDONLY)
    sa, sb = os.fstat(fa).st_size, os.fstat(fb).st_size
    if sa != sb:
        print("%s and %s differ in size: %d, %d" % (sys.argv[1], sys.argv[2], sa, sb))
        return 1
    for start, end in union(extents(fa, sa), extents(fb, sb)):
        pos = start
        while pos < end:
            n = min(CHUNK, end - pos)
            da, db = os.pread(fa, n, pos), os.pread(fb, n, pos)
            if da != db:
                i = next(k for k in range(min(len(da), len(db)))
                         if da[k] != db[k]) if len(da) == len(db) else min(len(da), len(db))
                print("%s %s differ: byte %d" % (sys.argv[1], sys.argv[2], pos + i + 1))
                return 1
            pos += n
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except OSError as e:
        print("sparsecmp: %s" % e, file=sys.stderr)
        sys.exit(2)

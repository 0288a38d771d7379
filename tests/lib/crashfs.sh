# shellcheck shell=bash
# A disk with a volatile cache for the primary's image (tests/crashfs):
# only what was fdatasync()ed reaches the backing file, and killing
# crashfs loses the rest, as a power loss loses a disk's cache.  Source
# after common.sh; set CRASH (the directory: backing/ and mnt/) first.
#
#   crashfs_check        the binary and /dev/fuse are there (or fail)
#   crashfs_fresh        an empty CRASH/backing and CRASH/mnt
#   crashfs_up           mounted on CRASH/mnt (waits for disk.img there);
#                        before the daemons start: `ip netns exec` gives
#                        each a copy of the mounts as they are then
#   crashfs_pull         the power: crashfs SIGKILLed, its cache lost
#   crashfs_cleanup RC   for the EXIT trap: killed, unmounted, and the
#                        directory removed if RC is 0

CRASHFS_BIN=$RDB_ROOT/build/harness/crashfs

crashfs_check() {
	[ -x "$CRASHFS_BIN" ] || rdb_fail "$CRASHFS_BIN missing (make all)"
	[ -c /dev/fuse ] || rdb_fail "/dev/fuse missing: crashfs cannot mount"
}

crashfs_fresh() {
	umount -l "$CRASH/mnt" 2>/dev/null
	rm -rf "$CRASH"
	mkdir -p "$CRASH/backing" "$CRASH/mnt"
}

crashfs_up() {
	umount -l "$CRASH/mnt" 2>/dev/null
	"$CRASHFS_BIN" "$CRASH/backing" "$CRASH/mnt" 2>>"$CRASH/crashfs.log" &
	echo $! > "$CRASH/pid"
	disown $!
	wait_for 10 "crashfs mounted" test -f "$CRASH/mnt/disk.img" || {
		rdb_log "crashfs did not mount ($(tail -n 2 "$CRASH/crashfs.log"))"
		return 1
	}
}

crashfs_pull() {
	kill -9 "$(cat "$CRASH/pid")"
	wait_for 10 "crashfs gone" sh -c "! kill -0 $(cat "$CRASH/pid") 2>/dev/null" ||
		rdb_fail "crashfs survived the power pull"
	umount -l "$CRASH/mnt" 2>/dev/null
}

crashfs_cleanup() {
	[ -f "$CRASH/pid" ] && kill -9 "$(cat "$CRASH/pid")" 2>/dev/null
	umount -l "$CRASH/mnt" 2>/dev/null
	[ "$1" = 0 ] && rm -rf "$CRASH"
	return 0
}

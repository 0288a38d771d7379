# shellcheck shell=bash
# An earlier release of remusdbd, for the rolling-upgrade tests
# (tests/e2e/upgrade-*.sh): this repository's own history at a pinned
# commit, built once and cached by commit.
#
# rdb_old_build COMMIT: builds remusdbd and remusdbctl of COMMIT (the
# tree from `git archive`, no worktree left behind) into
# ${REMUSDB_CACHE:-/var/cache/remusdb}/rdb-COMMIT and prints that
# directory; a cached build is reused.  Fails (1) when the commit is not
# in this clone's history or does not build.

rdb_old_build() {
	local commit=$1 cache src out
	commit=$(git -C "$RDB_ROOT" rev-parse --verify -q "$commit^{commit}") || {
		echo "rdb_old_build: $1 is not a commit of $RDB_ROOT (a shallow clone?)" >&2
		return 1
	}
	cache=${REMUSDB_CACHE:-/var/cache/remusdb}/rdb-$commit
	if [ -x "$cache/remusdbd" ] && [ -x "$cache/remusdbctl" ]; then
		echo "$cache"
		return 0
	fi
	echo "rdb_old_build: building remusdbd of ${commit:0:12} (about a minute on 2 cores)" >&2
	src=$(mktemp -d "${TMPDIR:-/tmp}/rdb-old.XXXXXX") || return 1
	out=$src.log
	if ! git -C "$RDB_ROOT" archive "$commit" | tar -x -C "$src" ||
	   ! make -C "$src" -j2 build/remusdbd build/remusdbctl >"$out" 2>&1; then
		echo "rdb_old_build: ${commit:0:12} did not build: $(tail -n 5 "$out")" >&2
		rm -rf "$src" "$out"
		return 1
	fi
	mkdir -p "$cache.tmp" &&
		cp "$src/build/remusdbd" "$src/build/remusdbctl" "$cache.tmp/" &&
		rm -rf "$cache" && mv "$cache.tmp" "$cache" || {
		rm -rf "$src" "$out" "$cache.tmp"
		return 1
	}
	rm -rf "$src" "$out"
	echo "$cache"
}

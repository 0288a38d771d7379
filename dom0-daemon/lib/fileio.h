/* SPDX-License-Identifier: GPL-2.0-only */
/* Whole-buffer file I/O (EINTR and short transfers handled); 0 or a
 * negative errno. */
#ifndef RDB_FILEIO_H
#define RDB_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int rdb_write_all(int fd, const void *p, uint64_t len);
int rdb_pwrite_all(int fd, const void *p, uint64_t len, uint64_t off);
/* Bytes past the end of the file read as zeroes. */
int rdb_pread_all(int fd, void *p, uint64_t len, uint64_t off);
/* Makes [off, off+len) read as zeroes, size kept: punches a hole if
 * punch, else zeroes the range; falls back to the other fallocate mode,
 * then to writing zeroes, where the filesystem cannot. */
int rdb_zero_range(int fd, uint64_t off, uint64_t len, bool punch);

/* The directory's entries on disk (after a rename or an unlink). */
int rdb_sync_dir(const char *dir);
/* dir/file replaced whole by text and a newline, durably: written to
 * file.tmp (0600, not through a link), synced, renamed over file, dir
 * synced; on failure file is as it was and no .tmp is left. */
int rdb_replace_file(const char *dir, const char *file, const char *text);
/* The same, atomic but not durable (nothing synced: no disk wait), for
 * what only matters while this boot lasts. */
int rdb_replace_file_nosync(const char *file, const char *text);
/* dir/file gone, durably (dir synced); none there: 0. */
int rdb_remove_file(const char *dir, const char *file);

/* A command name as execvp would find it (a name with a '/' as it is;
 * else the first executable in PATH, /usr/bin:/bin without one), into
 * buf; false if there is none. */
bool rdb_find_command(const char *name, char *buf, size_t len);

#endif

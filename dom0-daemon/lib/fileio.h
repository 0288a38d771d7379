/* SPDX-License-Identifier: GPL-2.0-only */
/* Whole-buffer file I/O (EINTR and short transfers handled); 0 or a
 * negative errno. */
#ifndef RDB_FILEIO_H
#define RDB_FILEIO_H

#include <stdbool.h>
#include <stdint.h>

int rdb_write_all(int fd, const void *p, uint64_t len);
int rdb_pwrite_all(int fd, const void *p, uint64_t len, uint64_t off);
/* Bytes past the end of the file read as zeroes. */
int rdb_pread_all(int fd, void *p, uint64_t len, uint64_t off);
/* Makes [off, off+len) read as zeroes, size kept: punches a hole if
 * punch, else zeroes the range; falls back to the other fallocate mode,
 * then to writing zeroes, where the filesystem cannot. */
int rdb_zero_range(int fd, uint64_t off, uint64_t len, bool punch);

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A file published whole, off the event loop: the metrics file.
 *
 * Writing a file can block far longer than any loop may wait: a rename
 * over the old copy waits for the filesystem's journal, a write for
 * writeback when the host flushes (seen: remusdbd's loop held 484 ms
 * writing its 4 KiB metrics file while a backup on the same host wrote a
 * RAM image, the protected guest's output held meanwhile).  So the loop
 * only hands the text over; a thread of its own writes PATH.tmp and
 * renames it over PATH, so a reader (node exporter's textfile collector)
 * never sees half of it.
 *
 * Text handed over while a write is under way replaces any text still
 * waiting: a slow disk skips versions, it never queues them.  The result
 * of the last write is kept for the caller to report (0, -errno; 1 before
 * the first write ends).
 */
#ifndef RDB_FILEPUB_H
#define RDB_FILEPUB_H

#include <stddef.h>

struct rdb_filepub;

/* 0, or -errno (the thread could not start).  PATH is copied. */
int rdb_filepub_start(struct rdb_filepub **out, const char *path);

/* Hands TEXT (malloc'ed, LEN bytes) over: the publisher frees it. */
void rdb_filepub_submit(struct rdb_filepub *fp, char *text, size_t len);

/* The last write's result: 0, -errno, or 1 if none has ended yet. */
int rdb_filepub_result(struct rdb_filepub *fp);

/* Writes what is still waiting, then stops the thread and frees FP.
 * NULL is a no-op. */
void rdb_filepub_stop(struct rdb_filepub *fp);

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A job on a thread of its own whose end is taken on the event loop:
 * what may block for seconds (a backup's restore, an epoch's replica
 * writes and sync, a primary's connect to its backup, COLO's start in
 * QEMU) runs there while the loop serves every VM's heartbeats.
 *
 *   rdb_bgjob_start(loop, run, done, arg, &job)
 *       run(arg) on a thread of its own (a kept one that finished an
 *       earlier job, or a new one); when it returns the loop is woken (a
 *       non-blocking pipe), frees the job and calls done(arg) there.  The
 *       caller's own state (results, a "cancelled" flag, whom to tell)
 *       lives in arg; the job holds nothing else.
 *   rdb_bgjob_join(job)
 *       on the loop, instead: waits for run to return, frees the job;
 *       done is not called (the caller takes the result itself, now).
 *
 * A job whose result nobody wants any more is left to end: its done sees
 * that in arg (and frees arg).  An event left over for a pipe that a join
 * closed, whose fd number a later job's pipe took, reads nothing there
 * and is ignored.
 */
#ifndef RDB_BGJOB_H
#define RDB_BGJOB_H

#include "evloop.h"

struct rdb_bgjob;

/* 0 with *out, or -errno (nothing started, neither callback called). */
int rdb_bgjob_start(struct rdb_evloop *loop, void (*run)(void *arg),
		    void (*done)(void *arg), void *arg, struct rdb_bgjob **out);
void rdb_bgjob_join(struct rdb_bgjob *j);

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/* The host side of a VM's NIC: a tap device on the host's bridge. */
#ifndef RDB_TAP_H
#define RDB_TAP_H

#include <stddef.h>
#include <stdint.h>

#include "netstream.h"

/* Attaches to the tap named name (created if missing; the bridge
 * membership is the host's business).  Non-blocking, no packet info. */
int rdb_tap_open(const char *name, int *fd_out);
/* Never blocks: a full tap queue drops the frame (-EAGAIN). */
int rdb_tap_write(int fd, const uint8_t *frame, size_t len);
/* Reads up to a bounded number of frames and hands each to cb. */
int rdb_tap_read_all(int fd, rdb_frame_cb cb, void *opaque);

#endif

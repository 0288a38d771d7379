/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The host side of a VM's NIC: a Linux tap device (IFF_TAP | IFF_NO_PI,
 * no vnet header, so frames are plain Ethernet, as on the stream).
 *
 * rdb_tap_open attaches to the tap called name when it exists (the
 * normal case: the operator creates it persistent and enslaves it to the
 * bridge, `ip tuntap add NAME mode tap; ip link set NAME master BR up`).
 * When no interface of that name exists it creates one, non-persistent
 * (it vanishes when the fd is closed), and sets it up; putting it on a
 * bridge is then still the host's business.  An existing tap created
 * with other flags (tun, multi_queue, vnet_hdr) or already attached to
 * another process answers -EINVAL / -EBUSY.
 */
#ifndef RDB_TAP_H
#define RDB_TAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "netstream.h"

/* Non-blocking, CLOEXEC.  0 or a negative errno; created_out (may be
 * NULL) says whether the tap had to be created. */
int rdb_tap_open_ex(const char *name, int *fd_out, bool *created_out);
/* rdb_tap_open_ex without created_out; logs which one happened. */
int rdb_tap_open(const char *name, int *fd_out);

/* Sends one frame; never blocks.  0, or the frame was not sent and the
 * caller counts it as dropped: -EAGAIN (the tap's queue is full), -EIO
 * (the tap is down), -EINVAL (too short for Ethernet), other errno. */
int rdb_tap_write(int fd, const uint8_t *frame, size_t len);

/* Reads up to 64 frames and hands each to cb.  Returns how many were
 * delivered (0 when none was waiting), or a negative errno. */
int rdb_tap_read_all(int fd, rdb_frame_cb cb, void *opaque);

#endif

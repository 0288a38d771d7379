/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * remusdb-xen (hypervisor/xen/helper/remusdb-xen.c), the only program of
 * the Xen backend that links Xen's libraries (libxenctrl, libxenguest,
 * libxenstore, libxenlight): remusdbd runs it, as libxl runs its
 * libxl-save-helper, so the daemon itself needs none of them.
 *
 *   remusdb-xen save DOMAIN SOCKET INTERVAL_MS
 *       connects to SOCKET (the daemon listens) and checkpoints DOMAIN
 *       into it until the daemon stops answering or hangs up; the domain
 *       runs on by itself then.  On SOCKET:
 *
 *         helper -> daemon:  preamble  libxc-stream
 *           preamble  = "RDBXEN01" len:le32 xl[len]   (xl's save-file
 *                       header and the domain's config, as `xl save`
 *                       writes them; len <= 1 MiB)
 *           libxc-stream = what xc_domain_save writes (XC_STREAM_REMUS,
 *                       live): its headers, static records, pages, and
 *                       per checkpoint the epoch's records and CHECKPOINT;
 *                       before each checkpoint but the first, a REQUEST
 *                       record (xen_state.h) from the helper
 *         daemon -> helper:  reply:le32, one per event:
 *           the first CHECKPOINT     -> START   (the guest runs again)
 *           a REQUEST                -> STOP    (the guest is suspended)
 *           each later CHECKPOINT    -> RESUME  (the guest runs again)
 *
 *       The guest is suspended from STOP to RESUME, as a QEMU COLO
 *       primary is from REPLY to LOADED.  A reply missing for
 *       RDB_XEN_REPLY_TIMEOUT_MS, a hang-up or a write error ends the
 *       save: the guest is resumed if it was suspended, log-dirty mode
 *       is left, and the helper exits 1.
 *
 *   remusdb-xen ctl DOMAIN pause|unpause|state|resume
 *       one control call; `state` prints running, paused, suspended
 *       (shut down for a checkpoint), or shutdown.  `resume` resumes a
 *       domain left suspended (cooperatively: the guest sees a cancelled
 *       suspend) and is a no-op otherwise.  Exit 0, or 1 with the reason
 *       on stderr; 3: no such domain.
 *
 *   remusdb-xen vif DOMAIN SOCKET LOG
 *       relays the domain's vif (vif<domid>.0 in dom0) to SOCKET, the
 *       daemon's NIC socket, in QEMU's -netdev stream framing (nic.h):
 *       frames from the guest, their offloaded checksums finished
 *       (vif_frame.h), to the daemon; the daemon's frames to the guest.
 *       It answers on stdout and exits once the relay runs (a process of
 *       its own, in its own session, logging to LOG), or when another
 *       relay has the vif (exit 0 both), or with why (exit 1; 3: no such
 *       domain).  The relay reconnects to a daemon that went away and
 *       ends when the vif does.  The vif's frames must not be GSO: its
 *       script (hypervisor/xen/vif-remusdb) turns GSO off.
 */
#ifndef RDB_XEN_HELPER_H
#define RDB_XEN_HELPER_H

#define RDB_XEN_PREAMBLE "RDBXEN01"
#define RDB_XEN_PREAMBLE_MAX (1u << 20)

enum rdb_xen_reply {
	RDB_XEN_REPLY_START = 1,
	RDB_XEN_REPLY_STOP = 2,
	RDB_XEN_REPLY_RESUME = 3,
};

#define RDB_XEN_REPLY_TIMEOUT_MS 30000
#define RDB_XEN_EXIT_NO_DOMAIN 3
/* The hotplug script of a protected domain's replicated disk (xl: disk =
 * [ 'vdev=xvda,format=raw,script=block-remusdb,target=DISK_SOCKET' ];
 * hypervisor/xen/block-remusdb, in /etc/xen/scripts): a restore points
 * that disk, and no other, at the backup's replica. */
#define RDB_XEN_BLOCK_SCRIPT "block-remusdb"

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The primary's checkpoint device kinds (ckdev.h): a NIC
 * (primary_nic.c) and a disk (primary_disk.c).  They know the pipeline
 * only through struct rdb_ckpt and struct rdb_ckdev_host, never the
 * primary's own files: those call them, not the other way round.
 */
#ifndef RDB_PRIMARY_DEV_H
#define RDB_PRIMARY_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckdev.h"
#include "clock.h"
#include "disk.h"
#include "flowbuf.h"
#include "netbuf.h"
#include "nic.h"

/* Bytes queued for the backup beyond this mean the link cannot keep up:
 * protection is dropped rather than letting memory grow without bound. */
#define RDB_PRI_QUEUE_MAX (512u << 20)
/* The initial disk copy queues more only below this much waiting. */
#define RDB_PRI_LOW_WATER (16u << 20)
/* The initial disk copy: read in chunks, at most COPY_BUDGET bytes looked
 * at and COPY_SLICE_NS spent per turn of the event loop (reading and
 * queueing a chunk is slow where the host is, or the daemon runs
 * emulated), paced by the replication queue. */
#define RDB_PRI_COPY_CHUNK (1u << 20)
#define RDB_PRI_COPY_BUDGET (32u << 20)
#define RDB_PRI_COPY_SLICE_NS (20 * RDB_NS_PER_MS)
#define RDB_PRI_COPY_RETRY_NS (1 * RDB_NS_PER_MS)

/* ---- NIC: the guest's frames, held per epoch (plain) or per flow ---- */

struct rdb_pri_nic {
	struct rdb_ckdev dev;
	struct rdb_nic nic;
	struct rdb_netbuf nb;		/* plain Remus, or a decision pending */
	struct rdb_flowbuf fb;		/* commit protection */
	const uint32_t *dscp;		/* the guest module's mark: the VM's
					 * protect_dscp, read per frame */
};

/* A NIC device, nothing open (its buffers ready); -ENOMEM. */
int rdb_pri_nic_new(struct rdb_pri_nic **out, unsigned index, const char *vm,
		    const uint32_t *dscp, struct rdb_ckpt *ck,
		    const struct rdb_ckdev_host *host, struct rdb_vm_stats *st);
/* Relays QEMU's stream socket sock_path and the tap (nic.h). */
int rdb_pri_nic_open(struct rdb_pri_nic *n, struct rdb_evloop *loop,
		     const char *sock_path, const char *tap, char *err,
		     size_t errlen);
/* Frees a NIC device that never joined a table (closed first). */
void rdb_pri_nic_free(struct rdb_pri_nic *n);
/* The frame callback a NIC moved in from elsewhere (nic.h rdb_nic_move)
 * must be given, with n as its opaque; then rdb_pri_nic_adopted. */
void rdb_pri_nic_from_guest(void *n, const uint8_t *frame, size_t len);
void rdb_pri_nic_adopted(struct rdb_pri_nic *n);
/* Held frames of epochs <= upto leave (the flow buffer's first), to sink
 * or, NULL, to the wire. */
void rdb_pri_nic_release(struct rdb_pri_nic *n, uint64_t upto,
			 rdb_netbuf_sink sink, void *opaque);
/* Only what the epoch buffer holds (a decision's, an owner check's). */
void rdb_pri_nic_release_held(struct rdb_pri_nic *n, rdb_netbuf_sink sink,
			      void *opaque);
/* Everything held is dropped: the number of frames. */
uint64_t rdb_pri_nic_discard(struct rdb_pri_nic *n);
uint64_t rdb_pri_nic_discard_held(struct rdb_pri_nic *n);
/* A frame held again for epoch (a handover that did not happen). */
void rdb_pri_nic_hold(struct rdb_pri_nic *n, uint64_t epoch,
		      const uint8_t *frame, size_t len);
void rdb_pri_nic_to_guest(struct rdb_pri_nic *n, const uint8_t *frame,
			  size_t len);
void rdb_pri_nic_to_wire(struct rdb_pri_nic *n, const uint8_t *frame,
			 size_t len);
uint64_t rdb_pri_nic_held_frames(const struct rdb_pri_nic *n);
uint64_t rdb_pri_nic_held_bytes(const struct rdb_pri_nic *n);
bool rdb_pri_nic_connected(const struct rdb_pri_nic *n);
/* Adds n's commit-protection counters to sum (maxima: the larger), its
 * tracked flows to flows. */
void rdb_pri_nic_add_flow_stats(const struct rdb_pri_nic *n,
				struct rdb_flowbuf_stats *sum, uint64_t *flows);

/* ---- disk: the guest's changes, replicated per epoch ---- */

/* Resync blocks (docs/resync.md). */
#define RDB_RESYNC_BLOCK 4096u

struct rdb_pri_disk {
	struct rdb_ckdev dev;
	struct rdb_disk disk;
	struct rdb_evloop *loop;
	char actlog_path[512];		/* the disk's activity log (actlog.h) */
	uint64_t log_gen;		/* its generation for this protection */
	/*
	 * Resync: this VM was restored here from epoch base_epoch of
	 * protection base_gen, and the guest's writes since are in the
	 * written map base_wmap.  When the backup holds the old primary's
	 * image of that protection, the copy sends only the blocks set in
	 * resync: written here since, or in an extent of the old primary's
	 * activity log.
	 */
	uint64_t base_gen, base_epoch;
	char base_wmap[512];
	/*
	 * Or: this host's image was the primary's of protection cont_gen,
	 * whose backup committed up to epoch cont_epoch, and its activity
	 * log, armed for cont_log_gen, was kept since that protection was
	 * lost (rdb_pri_disk_keep): the extents it has set are all that may
	 * differ from that backup's replica.  Protecting again (cont: the
	 * log goes on with the same generation) offers that replica as the
	 * base; the backup takes it if it is whole (docs/resync.md).
	 */
	uint64_t cont_gen, cont_epoch, cont_log_gen;
	bool cont;
	bool awaiting_base;		/* DISK_SETUP sent, DISK_BASE not yet */
	uint64_t *resync;		/* NULL: the whole disk (full copy) */
	uint64_t resync_blocks, resync_wmap_blocks, resync_al_extents;
	uint64_t resync_own_extents;	/* of this host's kept log (cont) */
	uint64_t resync_zero_bytes;
	uint32_t resync_al_shift;
	/* the initial copy; the last one's kind and bytes, this disk's */
	bool copy_was_resync;
	uint64_t copy_bytes;
	bool copying;
	uint64_t copy_off, copy_sent, copy_start_ns, copy_timer;
	uint8_t *copy_buf;
	/* the ring's position at each epoch's close, until acknowledged
	 * (the disk server retires activity-log extents behind it) */
	uint64_t pos_epoch[256], pos_tail[256];
	unsigned pos_first, pos_n;
};

/* A disk device, nothing open; -ENOMEM. */
int rdb_pri_disk_new(struct rdb_pri_disk **out, unsigned index,
		     const char *vm, struct rdb_evloop *loop, struct rdb_ckpt *ck,
		     const struct rdb_ckdev_host *host, struct rdb_vm_stats *st);
/*
 * Serves image on sock_path (disk.h rdb_disk_open), its activity log at
 * actlog (holding at most al_max extents), and for a restored VM the
 * written map wmap (or NULL).  ring_bytes, room_wait_ns: rdb_disk_open's.
 * With cont_gen, cont_epoch and cont_log_gen set before (a primary's
 * disk re-adopted: the lineage record names its protection and log),
 * the log is kept from the server's first change on.
 */
int rdb_pri_disk_open(struct rdb_pri_disk *k, const char *image,
		      const char *sock_path, const char *actlog, uint32_t al_max,
		      const char *wmap, uint64_t ring_bytes,
		      uint64_t room_wait_ns, char *err, size_t errlen);
void rdb_pri_disk_free(struct rdb_pri_disk *k);
/*
 * A protection of this disk ended with the VM running on here: keep its
 * activity log (committed: the backup had committed its initial state,
 * up to epoch committed_epoch, so its replica is a base for a resync
 * from the log) or not (invalidated at the next change, as before).
 */
void rdb_pri_disk_keep(struct rdb_pri_disk *k, bool keep, uint64_t gen,
		       uint64_t committed_epoch);
/* Protecting again: continue the kept log (true: the generation of the
 * log and the base to offer are set), or start a new one. */
bool rdb_pri_disk_continue(struct rdb_pri_disk *k);
/* The activity log's generation for a new protection (above every one
 * the log was armed for, and the wall clock's nanoseconds). */
uint64_t rdb_pri_disk_next_log_gen(const struct rdb_pri_disk *k);

#endif

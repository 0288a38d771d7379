// SPDX-License-Identifier: GPL-2.0-only
/*
 * The primary's disk device (primary_dev.h): the guest's changes,
 * drained from the disk server's ring at each epoch's close and queued
 * for the backup in that epoch; the initial copy (or a resync) before
 * the first checkpoint; the activity log's retirement as epochs commit.
 */
#define RDB_COMPONENT "primary"
#include "primary_dev.h"
#include "actlog.h"
#include "clock.h"
#include "log.h"
#include "vm.h"
#include "wmap.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct rdb_buf *epoch_out(struct rdb_pri_disk *k)
{
	return k->dev.host->epoch_out(k->dev.host->opaque);
}

static struct rdb_buf *link_out(struct rdb_pri_disk *k)
{
	return k->dev.host->link_out(k->dev.host->opaque);
}

static void want_write(struct rdb_pri_disk *k)
{
	k->dev.host->want_write(k->dev.host->opaque);
}

static void fail(struct rdb_pri_disk *k, const char *why)
{
	k->dev.host->fail(k->dev.host->opaque, why);
}

/*
 * A change the guest made (the disk server completed it: in the ring
 * before QEMU got its answer).  QEMU drains the guest's disk before the
 * pause, and the epoch's close drains the ring (disk_checkpoint): so
 * every change completed before that pause is queued here, tagged N,
 * ahead of N's pages and EPOCH_END.
 */
static void disk_changed(void *opaque, enum rdb_disk_op op, uint64_t off,
			 uint64_t len, const uint8_t *data)
{
	struct rdb_pri_disk *k = opaque;
	struct rdb_ckpt *ck = k->dev.ck;
	uint64_t e = ck->open_epoch;
	int rc = 0;

	if (!ck->active)
		return;
	if (ck->fault_stop_in_disk_pause && ck->in_pause) {
		ck->fault_stop_in_disk_pause = false;
		LOGVM(WARN, k->dev.vm, "fault injection: stopping remusdbd at a "
		      "disk change inside the pause of epoch %llu",
		      (unsigned long long)e);
		raise(SIGSTOP);
	}
	switch (op) {
	case RDB_DISK_WRITE:
		while (rc == 0 && len) {
			uint64_t n = len < RDB_PROTO_MAX_DISK_WRITE ? len :
				RDB_PROTO_MAX_DISK_WRITE;

			rc = rdb_proto_put_disk_write(epoch_out(k), k->dev.index,
						      e, off, data, n);
			ck->epoch_recs++;
			ck->epoch_bytes += n;
			k->dev.st->disk_bytes += n;
			off += n;
			data += n;
			len -= n;
		}
		break;
	case RDB_DISK_ZERO:
		rc = rdb_proto_put_disk_zero(epoch_out(k), k->dev.index, e,
					     off, len);
		ck->epoch_recs++;
		break;
	case RDB_DISK_FLUSH:
		rc = rdb_proto_put_disk_flush(epoch_out(k), k->dev.index, e);
		ck->epoch_recs++;
		break;
	}
	k->dev.st->disk_ops++;
	if (rc == 0 && k->dev.host->queued(k->dev.host->opaque) >
	    RDB_PRI_QUEUE_MAX)
		rc = -ENOBUFS;
	if (rc < 0) {
		fail(k, rc == -ENOBUFS ?
		     "replication queue over its bound: the link cannot keep "
		     "up with the guest's disk writes" :
		     "cannot queue a disk write for the backup");
		return;
	}
	want_write(k);
}

/* The disk server could not pass every change on (or exited): the
 * replica cannot equal the image any more. */
static void disk_lost(void *opaque, const char *why)
{
	struct rdb_pri_disk *k = opaque;

	if (k->dev.ck->active)
		fail(k, why);
}

/* ---- the initial copy ---- */

static bool all_zero(const uint8_t *b, size_t n)
{
	static const uint8_t z[4096];

	for (size_t i = 0; i < n; i += sizeof(z)) {
		size_t m = n - i < sizeof(z) ? n - i : sizeof(z);

		if (memcmp(b + i, z, m))
			return false;
	}
	return true;
}

/* The next run of blocks set in the resync map at or after block `from`,
 * at most max blocks long: 1 and *start and *n, or 0 when none is left. */
static int next_run(const struct rdb_pri_disk *k, uint64_t from, uint64_t max,
		    uint64_t *start, uint64_t *n)
{
	uint64_t nblocks = k->disk.size / RDB_RESYNC_BLOCK, b = from, e;

	while (b < nblocks) {
		uint64_t w = k->resync[b / 64] >> (b % 64);

		if (w) {
			b += (uint64_t)__builtin_ctzll(w);
			break;
		}
		b = (b / 64 + 1) * 64;
	}
	if (b >= nblocks)
		return 0;
	for (e = b; e < nblocks && e - b < max &&
	     (k->resync[e / 64] >> (e % 64) & 1); e++)
		;
	*start = b;
	*n = e - b;
	return 1;
}

/* One chunk of the copy at off: its data, or — on a replica that is an
 * old image, not zeroes — a DISK_ZERO where the chunk is all zero. */
static int copy_chunk(struct rdb_pri_disk *k, uint64_t off, uint64_t n,
		      bool zero_skip, char *err, size_t errlen)
{
	struct rdb_ckpt *ck = k->dev.ck;
	int rc = rdb_disk_pread(&k->disk, off, k->copy_buf, n);

	if (rc < 0) {
		snprintf(err, errlen, "initial disk copy: reading %s at %llu: %s",
			 k->disk.image, (unsigned long long)off, strerror(-rc));
		return rc;
	}
	if (all_zero(k->copy_buf, n)) {
		if (zero_skip)
			return 0;
		rc = rdb_proto_put_disk_zero(link_out(k), k->dev.index, 0,
					     off, n);
		k->resync_zero_bytes += n;
	} else {
		rc = rdb_proto_put_disk_write(link_out(k), k->dev.index, 0,
					      off, k->copy_buf, n);
		ck->epoch_bytes += n;
		k->copy_sent += n;
	}
	if (rc < 0) {
		snprintf(err, errlen, "initial disk copy: out of memory");
		return rc;
	}
	ck->epoch_recs++;
	return 0;
}

/*
 * The initial copy: the whole disk goes to the backup as epoch 0, holes
 * and all-zero chunks skipped (the backup's replica starts as a sparse
 * file of zeroes) — or, resyncing an old image (k->resync), only the
 * blocks that may differ, zeroes included.  The guest runs and writes
 * meanwhile; its changes are queued in order with the copy's chunks, so
 * a chunk read after a write carries it, and a write after a chunk is
 * applied after it.  When the last chunk is queued the device is ready:
 * once every device is, checkpoints start and their initial state
 * closes epoch 0.
 */
static uint64_t on_copy(struct rdb_evloop *loop, uint64_t id, void *opaque)
{
	struct rdb_pri_disk *k = opaque;
	struct rdb_vm_stats *st = k->dev.st;
	uint64_t size = k->disk.size, looked = 0;
	uint64_t until = rdb_now_ns() + RDB_PRI_COPY_SLICE_NS;
	char err[512] = "";
	int rc;

	(void)loop;
	(void)id;
	if (!k->copying) {
		k->copy_timer = 0;
		return 0;
	}
	while (k->copy_off < size && looked < RDB_PRI_COPY_BUDGET &&
	       link_out(k)->len < RDB_PRI_LOW_WATER &&
	       (looked == 0 || rdb_now_ns() < until)) {
		uint64_t n, start, nb;

		if (k->resync) {
			if (!next_run(k, k->copy_off / RDB_RESYNC_BLOCK,
				      RDB_PRI_COPY_CHUNK / RDB_RESYNC_BLOCK,
				      &start, &nb)) {
				k->copy_off = size;
				break;
			}
			k->copy_off = start * RDB_RESYNC_BLOCK;
			n = nb * RDB_RESYNC_BLOCK;
		} else {
			off_t data = lseek(k->disk.img_fd, (off_t)k->copy_off,
					   SEEK_DATA);

			if (data < 0 && errno == ENXIO) {
				k->copy_off = size;	/* a hole to the end */
				break;
			}
			if (data > (off_t)k->copy_off) {
				k->copy_off = (uint64_t)data;
				continue;
			}
			n = size - k->copy_off < RDB_PRI_COPY_CHUNK ?
				size - k->copy_off : RDB_PRI_COPY_CHUNK;
		}
		rc = copy_chunk(k, k->copy_off, n, !k->resync, err, sizeof(err));
		if (rc < 0) {
			k->copy_timer = 0;
			fail(k, err);
			return 0;
		}
		looked += n;
		k->copy_off += n;
	}
	want_write(k);
	if (k->copy_off < size)
		return RDB_PRI_COPY_RETRY_NS;
	k->copying = false;
	k->copy_timer = 0;
	if (k->resync) {
		char why[160];

		/* what bounded it: this host's kept log, or the written map
		 * since the restore and the old primary's log */
		if (k->cont)
			snprintf(why, sizeof(why), "%llu extent(s) of this host's "
				 "activity log, %llu of the backup's",
				 (unsigned long long)k->resync_own_extents,
				 (unsigned long long)k->resync_al_extents);
		else
			snprintf(why, sizeof(why), "%llu written here since the "
				 "restore, %llu extent(s) of the old primary's "
				 "activity log",
				 (unsigned long long)k->resync_wmap_blocks,
				 (unsigned long long)k->resync_al_extents);
		LOGVM(INFO, k->dev.vm, "%s: resync queued: %llu MiB of data and "
		      "%llu MiB of zeroes in %llu blocks that may differ (%s), of "
		      "a %llu MiB disk, %.1f s", k->dev.id,
		      (unsigned long long)(k->copy_sent >> 20),
		      (unsigned long long)(k->resync_zero_bytes >> 20),
		      (unsigned long long)k->resync_blocks, why,
		      (unsigned long long)(size >> 20),
		      (double)(rdb_now_ns() - k->copy_start_ns) / RDB_NS_PER_S);
	} else
		LOGVM(INFO, k->dev.vm, "%s: initial disk copy queued: %llu of "
		      "%llu MiB had data, %.1f s", k->dev.id,
		      (unsigned long long)(k->copy_sent >> 20),
		      (unsigned long long)(size >> 20),
		      (double)(rdb_now_ns() - k->copy_start_ns) / RDB_NS_PER_S);
	k->copy_was_resync = k->resync != NULL;
	k->copy_bytes = k->copy_sent + k->resync_zero_bytes;
	st->resync_bytes += k->copy_bytes;
	st->resync_blocks += k->resync ? k->resync_blocks : 0;
	/* the VM's: some disk was resynced (each disk's own: status) */
	st->resynced = st->resynced || k->copy_was_resync;
	st->copy_ns = rdb_now_ns() - k->copy_start_ns;
	free(k->copy_buf);
	k->copy_buf = NULL;
	k->dev.host->ready(k->dev.host->opaque);
	return 0;
}

/* Starts the copy: everything, or the resync map's blocks. */
static int copy_start(struct rdb_pri_disk *k)
{
	k->copy_buf = malloc(RDB_PRI_COPY_CHUNK);
	if (!k->copy_buf)
		return -ENOMEM;
	k->copying = true;
	k->copy_off = k->copy_sent = k->resync_zero_bytes = 0;
	k->copy_start_ns = rdb_now_ns();
	/* the kept log's extents go in this copy (all of the disk, or the
	 * resync read them): the changes that never reached the backup are
	 * retired once it has committed this epoch */
	if (k->cont)
		rdb_disk_adopt_log(&k->disk);
	if (k->resync)
		LOGVM(INFO, k->dev.vm, "%s: resync of %s (%llu MiB) to the "
		      "backup's old image: %llu blocks of 4 KiB may differ",
		      k->dev.id, k->disk.image,
		      (unsigned long long)(k->disk.size >> 20),
		      (unsigned long long)k->resync_blocks);
	else
		LOGVM(INFO, k->dev.vm, "%s: initial disk copy of %s (%llu MiB) "
		      "to the backup", k->dev.id, k->disk.image,
		      (unsigned long long)(k->disk.size >> 20));
	return rdb_evloop_add_timer(k->loop, 1, on_copy, k, &k->copy_timer);
}

/* ORs the written map of the restore into the resync map. */
static int read_wmap(struct rdb_pri_disk *k, char *err, size_t errlen)
{
	struct rdb_wmap m;
	struct rdb_wmap_snap snap = { 0 };
	int rc = rdb_wmap_open(&m, k->base_wmap, k->disk.size, false, err, errlen);

	if (rc < 0)
		return rc;
	rc = rdb_wmap_snapshot(&m, &snap);
	rdb_wmap_close(&m);
	if (rc < 0) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	for (uint64_t w = 0; w < snap.nr_words; w++)
		k->resync[w] |= snap.words[w];
	k->resync_wmap_blocks = snap.nr_set;
	rdb_wmap_snap_dispose(&snap);
	return 0;
}

/* Every resync block of extent x (2^shift bytes) may differ. */
static void resync_extent(struct rdb_pri_disk *k, uint64_t x, uint32_t shift)
{
	uint64_t nblocks = k->disk.size / RDB_RESYNC_BLOCK;
	uint64_t b0 = (x << shift) / RDB_RESYNC_BLOCK;
	uint64_t b1 = ((x + 1) << shift) / RDB_RESYNC_BLOCK;

	for (uint64_t b = b0; b < b1 && b < nblocks; b++)
		k->resync[b / 64] |= 1ull << (b % 64);
}

/*
 * Protecting again to the replica of the protection this disk's kept
 * activity log speaks of (k->cont): the log's extents are what may
 * differ.  Read now, with recording on: a change after this is in the
 * ring, so a bit it sets that this read missed costs nothing.
 */
static int read_own_log(struct rdb_pri_disk *k, char *err, size_t errlen)
{
	struct rdb_actlog_view v;
	int rc = rdb_actlog_read(k->actlog_path, k->disk.size, &v, err, errlen);

	if (rc < 0)
		return rc;
	if (v.generation != k->log_gen) {
		snprintf(err, errlen, "armed for %016llx, not %016llx",
			 (unsigned long long)v.generation,
			 (unsigned long long)k->log_gen);
		rdb_actlog_view_dispose(&v);
		return -ESTALE;
	}
	for (uint64_t x = 0; x < v.nr_extents; x++)
		if (rdb_actlog_view_test(&v, x))
			resync_extent(k, x, v.extent_shift);
	k->resync_own_extents = v.nr_set;
	rdb_actlog_view_dispose(&v);
	return 0;
}

/*
 * The backup said what its disk is (DISK_BASE).  The old primary's image
 * of the protection we were restored from: resync what may differ — the
 * blocks written here since the restore (our written map, read now that
 * every later change reaches the backup through the ring) and the
 * extents of its activity log.  Anything else: the whole disk.
 */
static int handle_disk_base(struct rdb_pri_disk *k, const struct rdb_frame *f)
{
	struct rdb_disk_base base;
	uint64_t nblocks = k->disk.size / RDB_RESYNC_BLOCK, words;
	char err[300] = "";
	int rc;

	if (rdb_msg_disk_base_parse(f, &base) < 0)
		return -EPROTO;
	k->awaiting_base = false;
	if (!base.generation) {
		if (k->base_gen)
			LOGVM(WARN, k->dev.vm, "%s: the backup holds no base for "
			      "a resync (%s): the whole disk is copied",
			      k->dev.id, base.reason);
		return copy_start(k);
	}
	if (!k->base_gen || base.generation != k->base_gen ||
	    k->disk.size % RDB_RESYNC_BLOCK)
		return -EPROTO;
	words = (nblocks + 63) / 64;
	k->resync = calloc(words ? words : 1, sizeof(uint64_t));
	if (!k->resync)
		return -ENOMEM;
	k->resync_own_extents = 0;
	rc = k->cont ? read_own_log(k, err, sizeof(err)) :
		      read_wmap(k, err, sizeof(err));
	if (rc < 0) {
		/* Without it, nothing bounds what we wrote: fall back is not
		 * possible (the backup's replica is its old image, not
		 * zeroes), so every block goes. */
		LOGVM(WARN, k->dev.vm, "%s %s: %s: resyncing every block",
		      k->cont ? "activity log" : "written map",
		      k->cont ? k->actlog_path : k->base_wmap, err);
		memset(k->resync, 0xff, words * sizeof(uint64_t));
		if (nblocks % 64)
			k->resync[words - 1] = (1ull << (nblocks % 64)) - 1;
	}
	k->resync_al_shift = base.shift;
	k->resync_al_extents = base.count;
	for (uint32_t i = 0; i < base.count; i++)
		resync_extent(k, rdb_disk_base_extent(&base, i), base.shift);
	k->resync_blocks = 0;
	for (uint64_t w = 0; w < words; w++)
		k->resync_blocks += (uint64_t)__builtin_popcountll(k->resync[w]);
	return copy_start(k);
}

/* ---- hooks ---- */

/*
 * Every change from here on reaches the backup, after the copy's chunk
 * of its range or in it.  Output leaves and the guest's flushes are
 * synced here until the guest stops for the initial state (the epoch's
 * close); from then on the backup's replica carries them (disk.h) and
 * output waits for the backup's acknowledgement.  The activity log is
 * armed for this protection before the first change is recorded
 * (actlog.h).
 */
static int disk_start(struct rdb_ckdev *dev, char *err, size_t errlen)
{
	struct rdb_pri_disk *k = (struct rdb_pri_disk *)dev;
	int rc;

	rdb_disk_set_log_generation(&k->disk, k->log_gen);
	rdb_disk_set_recording(&k->disk, true);
	if (dev->ck->features & RDB_FEATURE_RESYNC) {
		/* the copy waits for the backup's DISK_BASE */
		k->awaiting_base = true;
		if (k->cont)
			LOGVM(INFO, dev->vm, "%s: offering the backup a resync: "
			      "its replica of protection %016llx (committed up "
			      "to epoch %llu at least) and this host's "
			      "activity log since", dev->id,
			      (unsigned long long)k->base_gen,
			      (unsigned long long)k->base_epoch);
		else if (k->base_gen)
			LOGVM(INFO, dev->vm, "%s: offering the backup a resync: "
			      "this VM was restored from epoch %llu of "
			      "protection %016llx", dev->id,
			      (unsigned long long)k->base_epoch,
			      (unsigned long long)k->base_gen);
		rc = rdb_proto_put_disk_setup_base(link_out(k), k->dev.index,
						   k->disk.size, k->base_gen,
						   k->base_epoch);
	} else {
		rc = rdb_proto_put_disk_setup(link_out(k), k->dev.index,
					      k->disk.size);
		if (rc == 0)
			rc = copy_start(k);
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s: starting the initial copy: %s",
			 dev->id, strerror(-rc));
		return rc;
	}
	return 1;
}

/* QEMU drained the guest's disk before it sent this: every change
 * completed before the pause is in the disk server's ring now. */
static int disk_checkpoint(struct rdb_ckdev *dev, uint64_t epoch)
{
	struct rdb_pri_disk *k = (struct rdb_pri_disk *)dev;
	const unsigned cap = sizeof(k->pos_epoch) / sizeof(k->pos_epoch[0]);
	unsigned at;

	rdb_disk_drain(&k->disk);
	if (!dev->ck->active)
		return -ECANCELED;	/* the server lost changes */
	/* every change up to here is epoch <= N: once N is acknowledged
	 * the disk server may retire it (actlog.h) */
	if (k->pos_n == cap) {
		k->pos_first = (k->pos_first + 1) % cap;
		k->pos_n--;	/* the oldest: its ACK publishes nothing */
	}
	at = (k->pos_first + k->pos_n++) % cap;
	k->pos_epoch[at] = epoch;
	k->pos_tail[at] = rdb_disk_ring_pos(&k->disk);
	/* the guest is stopped, its disk drained: every flush it was
	 * answered was synced here; from now on the backup's replica
	 * carries them (before any output tells of them) */
	if (epoch == 0)
		rdb_disk_set_replicated(&k->disk, true);
	/* Reads drained from here on are the next epoch's (read tracking:
	 * the encoders of this one must not take them, readidx.h). */
	k->disk.read_epoch = epoch + 1;
	return 0;
}

/* Epoch N is on the backup: the disk server may retire activity-log
 * extents whose changes are all behind N's ring position. */
static void disk_committed(struct rdb_ckdev *dev, uint64_t epoch)
{
	struct rdb_pri_disk *k = (struct rdb_pri_disk *)dev;
	const unsigned cap = sizeof(k->pos_epoch) / sizeof(k->pos_epoch[0]);
	uint64_t pos = 0;
	bool any = false;

	while (k->pos_n && k->pos_epoch[k->pos_first] <= epoch) {
		pos = k->pos_tail[k->pos_first];
		any = true;
		k->pos_first = (k->pos_first + 1) % cap;
		k->pos_n--;
	}
	if (any)
		rdb_disk_set_committed_pos(&k->disk, pos);
}

static int disk_peer_msg(struct rdb_ckdev *dev, const struct rdb_frame *f)
{
	struct rdb_pri_disk *k = (struct rdb_pri_disk *)dev;
	int rc;

	if (f->type != RDB_MSG_DISK_BASE || f->device != dev->index ||
	    !k->awaiting_base)
		return 0;
	rc = handle_disk_base(k, f);
	return rc < 0 ? rc : 1;
}

static void disk_stop(struct rdb_ckdev *dev)
{
	struct rdb_pri_disk *k = (struct rdb_pri_disk *)dev;

	rdb_disk_set_recording(&k->disk, false);
	k->copying = false;
	if (k->copy_timer)
		rdb_evloop_del_timer(k->loop, k->copy_timer);
	k->copy_timer = 0;
}

static int disk_unreplicate(struct rdb_ckdev *dev)
{
	return rdb_disk_set_replicated(&((struct rdb_pri_disk *)dev)->disk, false);
}

static void disk_reset(struct rdb_ckdev *dev)
{
	struct rdb_pri_disk *k = (struct rdb_pri_disk *)dev;

	disk_stop(dev);
	free(k->copy_buf);
	k->copy_buf = NULL;
	free(k->resync);
	k->resync = NULL;
	k->awaiting_base = false;
	k->pos_n = 0;
	k->disk.read_epoch = 0;
}

static bool disk_in_use(const struct rdb_ckdev *dev)
{
	return rdb_disk_connected(&((const struct rdb_pri_disk *)dev)->disk);
}

static void disk_close(struct rdb_ckdev *dev)
{
	rdb_pri_disk_free((struct rdb_pri_disk *)dev);
}

static void disk_status(const struct rdb_ckdev *dev, json_t *o)
{
	const struct rdb_pri_disk *k = (const struct rdb_pri_disk *)dev;
	const struct rdb_dring_shared *ds = rdb_disk_stats(&k->disk);
	const struct rdb_vm_stats *st = dev->st;
	char gen[17];
	json_t *base;

	base = json_pack(
		"{s:s, s:s, s:I, s:b, s:I, s:I, s:I, s:I, s:I, s:I}",
		"image", k->disk.image, "socket", k->disk.sock_path,
		"size", (json_int_t)k->disk.size,
		"client_connected", rdb_disk_connected(&k->disk),
		"reads", (json_int_t)atomic_load(&ds->reads),
		"writes", (json_int_t)atomic_load(&ds->writes),
		"flushes", (json_int_t)atomic_load(&ds->flushes),
		"syncs", (json_int_t)(atomic_load(&ds->syncs) + k->disk.syncs),
		"zeroes", (json_int_t)atomic_load(&ds->zeroes),
		"errors", (json_int_t)atomic_load(&ds->errors));
	if (base) {
		json_object_update(o, base);
		json_decref(base);
	}
	json_object_set_new(o, "server", json_pack(
		"{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:s}",
		"pid", k->disk.pid,
		"restarts", (json_int_t)k->disk.restarts,
		"ring_bytes", (json_int_t)k->disk.ring_bytes,
		"ring_used_bytes", (json_int_t)rdb_dring_used(&k->disk.ring),
		"changes_passed_on", (json_int_t)atomic_load(&ds->recorded),
		"readbacks", (json_int_t)atomic_load(&ds->readbacks),
		"room_waits", (json_int_t)atomic_load(&ds->room_waits),
		"room_wait_max_ms", (double)atomic_load(&ds->room_wait_max_ns) /
				    RDB_NS_PER_MS,
		"lost_changes", (json_int_t)(atomic_load(&ds->lost) != 0),
		"lost_reason", atomic_load(&ds->lost) == RDB_DRING_OVERFLOW ?
			"ring full past the deadline" :
			atomic_load(&ds->lost) == RDB_DRING_UNREADABLE ?
			"a failed change could not be read back" : ""));
	if (k->copying)
		json_object_set_new(o, "initial_copy_done_bytes",
				    json_integer((json_int_t)k->copy_off));
	snprintf(gen, sizeof(gen), "%016llx",
		 (unsigned long long)atomic_load(&ds->al_armed_gen));
	json_object_set_new(o, "activity_log", json_pack(
		"{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		"path", k->actlog_path, "valid_for", gen,
		"extents", (json_int_t)atomic_load(&ds->al_active),
		"adds", (json_int_t)atomic_load(&ds->al_adds),
		"log_syncs", (json_int_t)atomic_load(&ds->al_log_syncs),
		"retired", (json_int_t)atomic_load(&ds->al_retired),
		"image_syncs", (json_int_t)atomic_load(&ds->al_image_syncs),
		"full_stalls", (json_int_t)atomic_load(&ds->al_full_stalls),
		"invalidations", (json_int_t)atomic_load(&ds->al_invalidations)));
	/* the last initial copy: whole, or a resync */
	json_object_set_new(o, "initial_copy", json_pack(
		"{s:b, s:I, s:I, s:I, s:I, s:f}",
		"resync", k->copy_was_resync,
		"bytes", (json_int_t)k->copy_bytes,
		"blocks_that_could_differ",
		(json_int_t)(k->copy_was_resync ? k->resync_blocks : 0),
		"written_since_restore_blocks",
		(json_int_t)(k->copy_was_resync ? k->resync_wmap_blocks : 0),
		"old_primary_log_extents",
		(json_int_t)(k->copy_was_resync ? k->resync_al_extents : 0),
		"queued_s", (double)st->copy_ns / RDB_NS_PER_S));
}

static void disk_metrics(const struct rdb_ckdev *dev, struct rdb_prom *m)
{
	const struct rdb_pri_disk *k = (const struct rdb_pri_disk *)dev;
	const struct rdb_dring_shared *ds = rdb_disk_stats(&k->disk);
	const enum rdb_prom_type C = RDB_PROM_COUNTER, G = RDB_PROM_GAUGE;
	static const char *const H = "Guest disk requests served, by operation.";
	const char *id = dev->id;

	rdb_prom_add(m, "remusdb_disk_requests_total", C, H,
		     (double)atomic_load(&ds->reads), "disk", id, "op", "read", NULL);
	rdb_prom_add(m, "remusdb_disk_requests_total", C, H,
		     (double)atomic_load(&ds->writes), "disk", id, "op", "write",
		     NULL);
	rdb_prom_add(m, "remusdb_disk_requests_total", C, H,
		     (double)atomic_load(&ds->flushes), "disk", id, "op", "flush",
		     NULL);
	rdb_prom_add(m, "remusdb_disk_requests_total", C, H,
		     (double)atomic_load(&ds->zeroes), "disk", id, "op",
		     "write_zeroes", NULL);
	rdb_prom_add(m, "remusdb_disk_request_errors_total", C,
		     "Guest disk requests answered with an error.",
		     (double)atomic_load(&ds->errors), "disk", id, NULL);
	rdb_prom_add(m, "remusdb_disk_server_restarts_total", C,
		     "Restarts of the disk server process.",
		     (double)k->disk.restarts, "disk", id, NULL);
	rdb_prom_add(m, "remusdb_disk_ring_bytes", G,
		     "Size of the disk change ring between the disk server and remusdbd.",
		     (double)k->disk.ring_bytes, "disk", id, NULL);
	rdb_prom_add(m, "remusdb_disk_ring_used_bytes", G,
		     "Bytes of disk changes in the ring, not yet taken by remusdbd.",
		     (double)rdb_dring_used(&k->disk.ring), "disk", id, NULL);
	rdb_prom_add(m, "remusdb_disk_ring_waits_total", C,
		     "Guest writes that waited for room in the disk change ring.",
		     (double)atomic_load(&ds->room_waits), "disk", id, NULL);
	rdb_prom_add(m, "remusdb_disk_changes_lost", G,
		     "1 when disk changes were lost to replication (protection must be restarted).",
		     atomic_load(&ds->lost) != 0, "disk", id, NULL);
	rdb_prom_add(m, "remusdb_activity_log_extents", G,
		     "Disk extents in the activity log (may differ after a power pull).",
		     (double)atomic_load(&ds->al_active), "disk", id, NULL);
	rdb_prom_add(m, "remusdb_activity_log_syncs_total", C,
		     "Synchronous writes of the activity log.",
		     (double)atomic_load(&ds->al_log_syncs), "disk", id, NULL);
}

static const struct rdb_ckdev_ops disk_ops = {
	.kind = "disk",
	.start = disk_start,
	.checkpoint = disk_checkpoint,
	.committed = disk_committed,
	.peer_msg = disk_peer_msg,
	.stop = disk_stop,
	.unreplicate = disk_unreplicate,
	.reset = disk_reset,
	.in_use = disk_in_use,
	.close = disk_close,
	.status = disk_status,
	.metrics = disk_metrics,
};

/* ---- the role's calls ---- */

int rdb_pri_disk_new(struct rdb_pri_disk **out, unsigned index,
		     const char *vm, struct rdb_evloop *loop, struct rdb_ckpt *ck,
		     const struct rdb_ckdev_host *host, struct rdb_vm_stats *st)
{
	struct rdb_pri_disk *k = calloc(1, sizeof(*k));

	if (!k)
		return -ENOMEM;
	rdb_ckdev_init(&k->dev, &disk_ops, index, vm, ck, host, st);
	k->loop = loop;
	rdb_disk_init(&k->disk);
	*out = k;
	return 0;
}

int rdb_pri_disk_open(struct rdb_pri_disk *k, const char *image,
		      const char *sock_path, const char *actlog, uint32_t al_max,
		      const char *wmap, uint64_t ring_bytes,
		      uint64_t room_wait_ns, char *err, size_t errlen)
{
	struct rdb_disk_logs logs = {
		.activity_log = actlog,
		.activity_log_max = al_max,
		.written_map = wmap,
		/* (a restored VM's written map comes first: no log kept) */
		.keep_gen = wmap ? 0 : k->cont_log_gen,
	};

	snprintf(k->actlog_path, sizeof(k->actlog_path), "%s", actlog);
	return rdb_disk_open(&k->disk, k->loop, k->dev.vm, image, sock_path,
			     ring_bytes, room_wait_ns, &logs, disk_changed,
			     disk_lost, k, err, errlen);
}

void rdb_pri_disk_free(struct rdb_pri_disk *k)
{
	if (!k)
		return;
	disk_reset(&k->dev);
	rdb_disk_close(&k->disk);
	free(k);
}

void rdb_pri_disk_keep(struct rdb_pri_disk *k, bool keep, uint64_t gen,
		       uint64_t committed_epoch)
{
	if (keep && gen && k->log_gen) {
		k->cont_gen = gen;
		k->cont_epoch = committed_epoch;
		k->cont_log_gen = k->log_gen;
	}
	/* a protection that went on with the kept log and ended before its
	 * initial state committed keeps it too: the log still bounds what
	 * differs from the older replica (which the backup will not offer if
	 * that protection's resync began writing into it) */
	if (!keep || !k->cont_gen || k->cont_log_gen != k->log_gen) {
		k->cont_gen = k->cont_epoch = k->cont_log_gen = 0;
		keep = false;
	}
	k->cont = false;
	rdb_disk_keep_log(&k->disk, keep);
	if (keep)
		LOGVM(INFO, k->dev.vm, "%s: activity log kept for protection "
		      "%016llx (committed up to epoch %llu): protecting again "
		      "to its backup resyncs the extents it sets", k->dev.id,
		      (unsigned long long)k->cont_gen,
		      (unsigned long long)k->cont_epoch);
}

bool rdb_pri_disk_continue(struct rdb_pri_disk *k)
{
	struct rdb_actlog_view v;
	uint64_t armed = 0;
	char err[300];

	/* The log file's header, not the server's word in the ring: a
	 * server just started (a re-adopted VM protected at once) has not
	 * published it yet.  A server that invalidates the log later makes
	 * the resync's own read of it fail, and every block go. */
	if (k->cont_gen && rdb_actlog_read(k->actlog_path, k->disk.size, &v, err,
					   sizeof(err)) == 0) {
		armed = v.generation;
		rdb_actlog_view_dispose(&v);
	}

	/* (a base of an earlier attempt that never committed: ours) */
	if (k->base_gen && k->base_gen == k->cont_gen && !k->base_wmap[0])
		k->base_gen = k->base_epoch = 0;
	k->cont = false;
	if (!k->cont_gen)
		return false;
	if (k->base_gen || armed != k->cont_log_gen) {
		/* a restored VM's resync comes first; a log that was
		 * invalidated meanwhile (full, a failed sync) bounds nothing */
		if (!k->base_gen)
			LOGVM(INFO, k->dev.vm, "%s: the activity log kept for "
			      "protection %016llx is no longer valid for it: "
			      "the backup gets the whole disk", k->dev.id,
			      (unsigned long long)k->cont_gen);
		k->cont_gen = k->cont_epoch = k->cont_log_gen = 0;
		rdb_disk_keep_log(&k->disk, false);
		return false;
	}
	k->log_gen = k->cont_log_gen;
	k->base_gen = k->cont_gen;
	k->base_epoch = k->cont_epoch;
	k->base_wmap[0] = 0;
	k->cont = true;
	return true;
}

uint64_t rdb_pri_disk_next_log_gen(const struct rdb_pri_disk *k)
{
	struct rdb_actlog_view v;
	struct timespec ts;
	uint64_t gen = 1;
	char err[300];

	if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
		gen = (uint64_t)ts.tv_sec * RDB_NS_PER_S + (uint64_t)ts.tv_nsec;
	if (rdb_actlog_read(k->actlog_path, k->disk.size, &v, err,
			    sizeof(err)) == 0) {
		if (v.generation >= gen)
			gen = v.generation + 1;
		if (v.dead_gen >= gen)
			gen = v.dead_gen + 1;
		rdb_actlog_view_dispose(&v);
	}
	return gen;
}

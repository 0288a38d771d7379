// SPDX-License-Identifier: GPL-2.0-only
/*
 * The backup's disk device (backup_dev.h): one of the VM's disks here —
 * its replica and the epoch in flight's writes (the stage replays every
 * disk's in one apply), its part of the VM's lineage record, and after a
 * failover the process serving it to the restored guest, with the
 * written map of what the guest wrote since.
 */
#define RDB_COMPONENT "backup"
#include "backup_dev.h"
#include "actlog.h"
#include "daemon.h"
#include "disk.h"
#include "hv.h"
#include "lineage.h"
#include "log.h"
#include "qcow2.h"
#include "replmark.h"
#include "role.h"
#include "vm.h"
#include "wmap.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A lineage record names every disk a backup keeps. */
_Static_assert(RDB_DISKS_MAX <= RDB_LINEAGE_DISKS,
	       "a lineage record must name every disk");

struct bak_disk {
	struct rdb_bakdev dev;
	struct rdb_diskbuf db;		/* the replica and the epoch's writes */
	char path[512];
	char sock[108];			/* where serve serves it */
	char arg[400];			/* serve's drive, for the restore */
	int pid;			/* after failover: the replica's server */
	/* feature RESYNC: the replica is this host's old image of the
	 * protection the primary named (its lineage entry), whose activity
	 * log was base_actlog */
	bool base_used;
	char base_actlog[256];
	char wmap_path[512];		/* after failover: blocks written since */
};

static struct bak_disk *disk_of(const struct rdb_bakdev *dev)
{
	return (struct bak_disk *)dev;
}

static const char *vm_name(const struct bak_disk *dk)
{
	return dk->dev.host->vm->name;
}

/* path, of size bytes, opened in place as the replica (never
 * truncated: what it holds is the base). */
static int attach_copy(struct bak_disk *dk, const char *path, const char *what,
		       uint64_t size, char *why, size_t whylen)
{
	struct stat sb = { .st_size = -1 };
	int rc, fd;

	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(why, whylen, "%s %s: %s", what, path, strerror(errno));
		return rc;
	}
	if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size != size) {
		snprintf(why, whylen, "%s %s is %lld bytes, the disk %llu", what,
			 path, (long long)sb.st_size, (unsigned long long)size);
		close(fd);
		return -EINVAL;
	}
	rdb_diskbuf_attach_fd(&dk->db, fd, size);
	return 0;
}

/*
 * May this host's copy of the VM's disk k stand in for a fresh replica?
 * On 0, l says which copy it is:
 *  - primary: its old image as the primary of exactly the protection the
 *    primary names (base_gen), its activity log still valid for it: it
 *    differs from that protection's committed state only in the log's
 *    extents (actlog.h), which go back in *view;
 *  - replica: its replica of that protection, which the marker found
 *    whole at a committed epoch at or past base_epoch, in this boot
 *    (replmark.h; read before the first disk's setup marked the set
 *    applying): it differs from the primary's disk only where the
 *    primary wrote since base_epoch, which the primary's own log knows.
 * why says why not.
 */
static int try_base(struct bak_disk *dk, unsigned k, uint64_t size,
		    uint64_t base_gen, uint64_t base_epoch, struct rdb_lineage *l,
		    struct rdb_actlog_view *view, char *why, size_t whylen)
{
	const struct rdb_bakdev_host *h = dk->dev.host;
	const struct rdb_lineage_disk *ld;
	char err[700] = "";
	int rc;

	rc = rdb_lineage_load(h->d->cfg.state_dir, h->vm->name, l, err,
			      sizeof(err));
	if (rc == -ENOENT) {
		snprintf(why, whylen, "no lineage record for %s on this host",
			 h->vm->name);
		return rc;
	}
	if (rc < 0) {
		snprintf(why, whylen, "%s", err);
		return rc;
	}
	if ((l->role != RDB_LINEAGE_PRIMARY && l->role != RDB_LINEAGE_REPLICA) ||
	    l->generation != base_gen) {
		snprintf(why, whylen, "this host's copy is the %s of protection "
			 "%016llx, not the primary's or a replica of %016llx",
			 rdb_lineage_role_name(l->role),
			 (unsigned long long)l->generation,
			 (unsigned long long)base_gen);
		return -ESTALE;
	}
	if (k >= l->ndisks) {
		snprintf(why, whylen, "this host's lineage record names %u "
			 "disk(s), not disk %u", l->ndisks, k);
		return -ESTALE;
	}
	ld = &l->d[k];
	if (l->role == RDB_LINEAGE_REPLICA) {
		if (!rdb_replmark_vouches(&h->mark->found, base_gen, base_epoch,
					  err, sizeof(err))) {
			snprintf(why, whylen, "this host's replica of it is not "
				 "known whole: %s", err);
			return -ESTALE;
		}
		return attach_copy(dk, ld->disk, "replica", size, why, whylen);
	}
	rc = rdb_actlog_read(ld->actlog, size, view, err, sizeof(err));
	if (rc < 0 || !view->generation || view->generation != ld->log_gen) {
		snprintf(why, whylen, "activity log %s is not valid for "
			 "protection %016llx%s%s", ld->actlog,
			 (unsigned long long)base_gen, err[0] ? ": " : "", err);
		if (rc == 0)
			rdb_actlog_view_dispose(view);
		return rc < 0 ? rc : -ESTALE;
	}
	rc = attach_copy(dk, ld->disk, "old image", size, why, whylen);
	if (rc < 0)
		rdb_actlog_view_dispose(view);
	return rc;
}

/* The old primary's image as the replica: the primary is told which
 * extents of its activity log may differ. */
static int base_primary(struct bak_disk *dk, uint32_t k, uint64_t base_gen,
			uint64_t base_epoch, const struct rdb_lineage *l,
			struct rdb_actlog_view *view)
{
	const struct rdb_bakdev_host *h = dk->dev.host;
	const char *vm = h->vm->name;
	uint64_t *ext;
	uint32_t count = 0;
	int rc;

	ext = malloc((view->nr_set ? view->nr_set : 1) * sizeof(*ext));
	if (!ext) {
		rdb_actlog_view_dispose(view);
		return -ENOMEM;
	}
	for (uint64_t x = 0; x < view->nr_extents; x++)
		if (rdb_actlog_view_test(view, x) && count < view->nr_set)
			ext[count++] = x;
	snprintf(dk->path, sizeof(dk->path), "%s", l->d[k].disk);
	dk->base_used = true;
	snprintf(dk->base_actlog, sizeof(dk->base_actlog), "%s",
		 l->d[k].actlog);
	rc = rdb_proto_put_disk_base(h->link_out(h->opaque), k, base_gen,
				     view->extent_shift, ext, count, NULL);
	LOGVM(INFO, vm, "disk %u replica: this host's old image %s, "
	      "the primary's of protection %016llx; %u extent(s) of "
	      "%llu KiB in its activity log may differ, the primary "
	      "sends those and what it wrote since epoch %llu", k, l->d[k].disk,
	      (unsigned long long)base_gen, count,
	      (unsigned long long)((1ull << view->extent_shift) >> 10),
	      (unsigned long long)base_epoch);
	{
		char list[400] = "";
		size_t at = 0;

		for (uint32_t i = 0; i < count && at + 24 < sizeof(list); i++)
			at += (size_t)snprintf(list + at, sizeof(list) - at,
					       "%s%llu", i ? " " : "",
					       (unsigned long long)ext[i]);
		LOGVM(INFO, vm, "disk %u: activity log extents "
		      "that may differ: %s%s", k, count ? list : "none",
		      at + 24 >= sizeof(list) ? " ..." : "");
	}
	free(ext);
	rdb_actlog_view_dispose(view);
	return rc;
}

/*
 * This host's replica of the protection, kept in place: the primary
 * sends what its own log says it wrote since base_epoch, so no extent
 * of ours goes back (the replica holds nothing the primary's disk did
 * not, at an epoch it committed).  It goes on as a replica like one
 * copied whole: no old image's activity log to retire (base_used stays
 * false; disk_recorded).
 */
static int base_replica(struct bak_disk *dk, uint32_t k, uint64_t base_gen,
			uint64_t base_epoch, const struct rdb_lineage *l)
{
	const struct rdb_bakdev_host *h = dk->dev.host;

	snprintf(dk->path, sizeof(dk->path), "%s", l->d[k].disk);
	LOGVM(INFO, h->vm->name, "disk %u replica: this host's replica %s of "
	      "protection %016llx, whole at epoch %llu (this boot): the "
	      "primary sends what may have changed since epoch %llu", k,
	      dk->path, (unsigned long long)base_gen,
	      (unsigned long long)h->mark->found.epoch,
	      (unsigned long long)base_epoch);
	/* (the shift is the activity log's, for a list that is empty) */
	return rdb_proto_put_disk_base(h->link_out(h->opaque), k, base_gen,
				       RDB_ACTLOG_SHIFT, NULL, 0, NULL);
}

/* The replica: this host's old image of protection base_gen or its
 * replica of it, whole (the primary is told what may differ), or a
 * fresh one, all zeroes. */
static int setup(struct bak_disk *dk, const struct rdb_frame *f,
		 uint32_t features)
{
	const struct rdb_bakdev_host *h = dk->dev.host;
	const char *vm = h->vm->name;
	struct rdb_actlog_view view = { 0 };
	struct rdb_lineage l;
	uint64_t size, base_gen, base_epoch;
	char dir[400], why[800] = "no base offered";
	uint32_t k = f->device;
	int rc;

	rc = rdb_msg_disk_setup_parse(f, &size, &base_gen, &base_epoch);
	if (rc < 0)
		return rc;
	if (base_gen && !(features & RDB_FEATURE_RESYNC))
		return -EPROTO;
	rc = h->vm_dir(h->opaque, dir, sizeof(dir));
	if (rc < 0)
		return rc;
	/* From here on a replica is made, or kept and written by the
	 * initial copy: the set is at no epoch until the first commit.
	 * (Whether it was whole before is what the marker said when it
	 * was opened: try_base reads that.) */
	rc = rdb_bak_disks_applying(h, 0, 0);
	if (rc < 0)
		return rc;
	if (base_gen && try_base(dk, k, size, base_gen, base_epoch, &l, &view,
				 why, sizeof(why)) == 0) {
		rc = l.role == RDB_LINEAGE_REPLICA ?
			base_replica(dk, k, base_gen, base_epoch, &l) :
			base_primary(dk, k, base_gen, base_epoch, &l, &view);
		if (rc < 0)
			return rc;
		h->want_write(h->opaque);
		return 0;
	}
	if (base_gen)
		LOGVM(WARN, vm, "the primary offered a resync of "
		      "disk %u from protection %016llx epoch %llu, but %s: "
		      "the whole disk is copied", k,
		      (unsigned long long)base_gen,
		      (unsigned long long)base_epoch, why);
	if (k == 0)
		snprintf(dk->path, sizeof(dk->path), "%s/disk.img", dir);
	else
		snprintf(dk->path, sizeof(dk->path), "%s/disk%u.img", dir, k);
	rc = rdb_diskbuf_create(&dk->db, dk->path, size);
	if (rc < 0) {
		LOGVM(ERROR, vm, "disk %u replica: %s", k,
		      rdb_diskbuf_error(&dk->db));
		return rc;
	}
	if (k == 0)
		LOGVM(INFO, vm, "disk replica %s (%llu MiB) created",
		      dk->path, (unsigned long long)(size >> 20));
	else
		LOGVM(INFO, vm, "disk %u replica %s (%llu MiB) "
		      "created", k, dk->path,
		      (unsigned long long)(size >> 20));
	if (features & RDB_FEATURE_RESYNC) {
		rc = rdb_proto_put_disk_base(h->link_out(h->opaque), k, 0, 0,
					     NULL, 0, why);
		if (rc < 0)
			return rc;
		h->want_write(h->opaque);
	}
	return 0;
}

/* ---- the set's marker ---- */

int rdb_bak_disks_applying(const struct rdb_bakdev_host *h, uint64_t gen,
			   uint64_t epoch)
{
	struct rdb_replmark *m = h->mark;
	int rc = rdb_replmark_applying(m, gen, epoch);

	if (rc > 0)
		LOGVM(WARN, h->vm->name, "%s; removed instead: this host's "
		      "replicas will not be offered as a resync base", m->err);
	else if (rc < 0)
		LOGVM(ERROR, h->vm->name, "%s: the replicas are not written "
		      "(epoch %llu), or they could pass for whole at an epoch "
		      "they are not at", m->err, (unsigned long long)epoch);
	return rc < 0 ? rc : 0;
}

void rdb_bak_disks_done(const struct rdb_bakdev_host *h, uint64_t gen,
			uint64_t epoch)
{
	if (rdb_replmark_done(h->mark, gen, epoch) < 0)
		LOGVM(WARN, h->vm->name, "%s: a resync from this host's "
		      "replicas will copy every disk whole", h->mark->err);
}

void rdb_bak_disks_served(const struct rdb_bakdev_host *h, uint64_t gen,
			  uint64_t epoch)
{
	int rc = rdb_replmark_served(h->mark, gen, epoch);

	if (rc > 0)
		LOGVM(WARN, h->vm->name, "%s; removed instead", h->mark->err);
	else if (rc < 0)
		LOGVM(ERROR, h->vm->name, "%s: only the lineage record "
		      "(restored) keeps the replicas the restored guest writes "
		      "from being taken for a resync base", h->mark->err);
}

/* ---- hooks ---- */

/* A "replica" record names the image; a "restored" one its written map
 * too, which every disk has or none does. */
static int disk_record(const struct rdb_bakdev *dev, struct rdb_lineage *l)
{
	const struct bak_disk *dk = disk_of(dev);
	struct rdb_lineage_disk *ld = &l->d[dev->index];

	if (l->role == RDB_LINEAGE_RESTORED && !dk->wmap_path[0])
		return -ENOENT;
	snprintf(ld->disk, sizeof(ld->disk), "%.255s", dk->path);
	if (l->role == RDB_LINEAGE_RESTORED)
		snprintf(ld->wmap, sizeof(ld->wmap), "%.255s", dk->wmap_path);
	if (l->ndisks < dev->index + 1)
		l->ndisks = dev->index + 1;
	return 0;
}

static void disk_recorded(struct rdb_bakdev *dev)
{
	struct bak_disk *dk = disk_of(dev);
	const struct rdb_bakdev_host *h = dev->host;
	char err[300] = "", al[600];

	/* the old image changes from here: its log vouches for nothing */
	if (dk->base_used) {
		if (rdb_actlog_invalidate_file(dk->base_actlog, err,
					       sizeof(err)) < 0)
			LOGVM(WARN, vm_name(dk), "activity log %s: %s (the "
			      "lineage record already says replica: it "
			      "is not used)", dk->base_actlog, err);
		return;
	}
	/* A whole copy: should this host be the VM's primary again, its
	 * image is this replica, and what the log said of an earlier image
	 * (that it lost writes, say) is no longer true (actlog.h). */
	rdb_lineage_disk_file(al, sizeof(al), h->d->cfg.state_dir,
			      h->vm->name, dev->index, "disk", "al");
	if (access(al, F_OK) == 0 &&
	    rdb_actlog_reset_file(al, err, sizeof(err)) < 0)
		LOGVM(WARN, vm_name(dk), "activity log %s: %s", al, err);
}

static void disk_counters(const struct rdb_bakdev *dev, struct rdb_bakdev_sum *s)
{
	const struct bak_disk *dk = disk_of(dev);

	s->n++;
	s->buffered += dk->db.data_bytes;
	s->applied += dk->db.applied_bytes;
	s->syncs += dk->db.syncs;
	s->consistent = s->consistent && rdb_diskbuf_consistent(&dk->db);
}

/* A set of replicas an epoch's replay left torn is never served (none of
 * its disks: they are at no common epoch).  (On the loop only when no
 * disk step runs: it owns the replicas.) */
static int disk_check(struct rdb_bakdev *dev)
{
	struct bak_disk *dk = disk_of(dev);

	if (rdb_diskbuf_consistent(&dk->db))
		return 0;
	LOGVM(ERROR, vm_name(dk), "disk %u replica %s is inconsistent "
	      "(an epoch's writes were applied only in part: %s); not "
	      "serving it or any other disk of the VM", dev->index,
	      dk->path, rdb_diskbuf_error(&dk->db));
	return -EIO;
}

static int disk_sync(struct rdb_bakdev *dev)
{
	struct bak_disk *dk = disk_of(dev);
	int rc = rdb_diskbuf_sync(&dk->db);

	if (rc < 0)
		LOGVM(ERROR, vm_name(dk), "disk %u replica: %s", dev->index,
		      rdb_diskbuf_error(&dk->db));
	return rc;
}

/*
 * The restored VM's lineage, before its guest can write: its disk is the
 * protection's committed state at this epoch, plus what the written map
 * (fresh, all clear) will say the guest wrote.  With both, the VM can be
 * protected again to the old primary by copying only what may differ
 * (docs/resync.md).
 */
static int disk_fresh(struct rdb_bakdev *dev, char *err, size_t errlen)
{
	struct bak_disk *dk = disk_of(dev);
	const struct rdb_bakdev_host *h = dev->host;
	struct rdb_wmap m;
	int rc;

	rdb_lineage_disk_file(dk->wmap_path, sizeof(dk->wmap_path),
			      h->d->cfg.state_dir, h->vm->name, dev->index,
			      "written", "map");
	rc = rdb_wmap_open(&m, dk->wmap_path, dk->db.size, true, err, errlen);
	if (rc == -EINVAL && unlink(dk->wmap_path) == 0)
		rc = rdb_wmap_open(&m, dk->wmap_path, dk->db.size, true,
				   err, errlen);
	if (rc == 0) {
		rdb_wmap_reset(&m);	/* from this restore on */
		rdb_wmap_close(&m);
	}
	return rc;
}

static void disk_forget(struct rdb_bakdev *dev)
{
	disk_of(dev)->wmap_path[0] = 0;
}

/* The replica of disk k served on run_dir/NAME.disk (disk 0) or
 * NAME.disk<k> (its drive: QEMU's -drive for it, id disk_id for disk 0
 * and disk<k> for the others, as on the primary: config.c), the guest's
 * writes from now on in its written map. */
static int disk_serve(struct rdb_bakdev *dev)
{
	struct bak_disk *dk = disk_of(dev);
	const struct rdb_bakdev_host *h = dev->host;
	const struct rdb_vm *vm = h->vm;
	unsigned k = dev->index;
	char drive[400], id[32], err[300];
	int rc;

	if (k == 0)
		snprintf(dk->sock, sizeof(dk->sock), "%s/%s.disk",
			 h->d->cfg.run_dir, vm->name);
	else
		snprintf(dk->sock, sizeof(dk->sock), "%s/%s.disk%u",
			 h->d->cfg.run_dir, vm->name, k);
	snprintf(id, sizeof(id), "disk%u", k);
	rc = rdb_disk_serve_child(vm->name, dk->path, dk->sock,
				  dk->wmap_path[0] ? dk->wmap_path : NULL,
				  &dk->pid, err, sizeof(err));
	if (rc < 0) {
		LOGVM(ERROR, vm->name, "serving the disk %u replica: %s", k, err);
		return rc;
	}
	rc = rdb_daemon_share_with_qemu(h->d, dk->sock, -1);
	if (rc == 0) {
		/* a qcow2 image's bytes, as the primary served them (the
		 * replica has the primary's header since the initial copy) */
		struct rdb_qcow2_info qi;
		int q = rdb_qcow2_probe_path(dk->path, &qi, err, sizeof(err));

		unsigned fl = (q == 1 ? RDB_HV_DISK_QCOW2 : 0) |
			(rdb_vm_config_disk_is_nvram(&vm->cfg, k) ?
			 RDB_HV_DISK_PFLASH : 0);

		rc = q < 0 ? q : rdb_vm_hv(vm)->disk_arg(drive, sizeof(drive),
							 k == 0 ? vm->cfg.disk_id :
							 id, dk->sock, fl);
		if (rc < 0)
			LOGVM(ERROR, vm->name, "disk %u replica %s: %s", k, dk->path,
			      q < 0 ? err : rc == -EOPNOTSUPP ? "a qcow2 image or a "
			      "UEFI variable store, which this hypervisor's disk path "
			      "cannot restore" : "its drive argument does not fit");
	}
	if (rc == 0) {
		snprintf(dk->arg, sizeof(dk->arg), "%s", drive);
		/* (disk 0's line as it read before there were several:
		 * operators' and tests' log parsers take it) */
		if (k == 0)
			LOGVM(INFO, vm->name, "disk replica %s served on %s",
			      dk->path, dk->sock);
		else
			LOGVM(INFO, vm->name, "disk %u replica %s served on %s", k,
			      dk->path, dk->sock);
	}
	return rc;
}

static void disk_unserve(struct rdb_bakdev *dev)
{
	struct bak_disk *dk = disk_of(dev);

	if (dk->pid > 0) {
		kill(dk->pid, SIGTERM);
		waitpid(dk->pid, NULL, 0);
		dk->pid = -1;
	}
}

/* Its drive, once served (disk 0's socket goes with it). */
static void disk_restore(const struct rdb_bakdev *dev, struct rdb_bakdev_restore *r)
{
	const struct bak_disk *dk = disk_of(dev);

	if (!dk->arg[0] || r->ndrives == RDB_DISKS_MAX)
		return;
	if (r->ndrives == 0)
		r->disk_sock = dk->sock;
	r->drives[r->ndrives++] = dk->arg;
}

/* Its replica and written map go to the primary role, which serves them
 * (the server here stops after: unserve). */
static int disk_hand_over(struct rdb_bakdev *dev, const struct rdb_nic_dst *dst,
			  unsigned ndst, struct rdb_handover *h, char *err,
			  size_t errlen)
{
	const struct bak_disk *dk = disk_of(dev);
	unsigned k = dev->index;

	if (h->ndisks < k + 1)
		h->ndisks = k + 1;
	snprintf(h->disk_paths[k], sizeof(h->disk_paths[k]), "%s", dk->path);
	snprintf(h->wmap_paths[k], sizeof(h->wmap_paths[k]), "%s", dk->wmap_path);
	return 0;
}

/* The replica, and its server with when it started (the re-adoption
 * stops that process, not a later one with its number). */
static int disk_restored(const struct rdb_bakdev *dev, json_t *o)
{
	const struct bak_disk *dk = disk_of(dev);
	json_t *disks = json_object_get(o, "disks");
	json_t *servers = json_object_get(o, "servers");
	uint64_t start = dk->pid > 0 ? rdb_hv_proc_start(dk->pid) : 0;

	if (!json_is_array(disks) || !json_is_array(servers) ||
	    json_array_append_new(disks, json_string(dk->path)) < 0)
		return -ENOMEM;
	if (start && json_array_append_new(servers, json_pack("{s:i, s:I}",
			"pid", (int)dk->pid, "start", (json_int_t)start)) < 0)
		return -ENOMEM;
	return 0;
}

static void disk_poll(struct rdb_bakdev *dev)
{
	struct bak_disk *dk = disk_of(dev);
	const struct rdb_bakdev_host *h = dev->host;
	char why[160];
	int status = 0;

	if (dk->pid > 0 && waitpid(dk->pid, &status, WNOHANG) == dk->pid) {
		dk->pid = -1;
		snprintf(why, sizeof(why), "the disk %u replica's server exited "
			 "(status 0x%x): the guest has lost that disk",
			 dev->index, status);
		h->fail(h->opaque, why);
	}
}

/* The replica's server, like the restored QEMU, outlives the role. */
static void disk_free(struct rdb_bakdev *dev)
{
	struct bak_disk *dk = disk_of(dev);

	rdb_diskbuf_dispose(&dk->db);
	free(dk);
}

/* "disks", one object each, and "disk": the first one's replica and the
 * set's state.  While an epoch's disk step or a restore runs, its thread
 * owns the replicas' counters (and the restore their servers): what they
 * were when it began. */
static void disks_status(const struct rdb_bakdev_host *h,
			 struct rdb_bakdev *const *v, unsigned n, json_t *o)
{
	struct rdb_bakdev_owned own;
	struct rdb_bakdev_sum now;
	const struct rdb_bakdev_sum *s;
	bool busy, served;
	json_t *a;

	if (!n)
		return;
	h->owned(h->opaque, &own);
	busy = own.commit || own.restore;
	served = !own.restore;
	if (busy) {
		s = &own.at;
	} else {
		now.n = 0;
		now.buffered = now.applied = now.syncs = 0;
		now.consistent = true;
		for (unsigned k = 0; k < n; k++)
			disk_counters(v[k], &now);
		s = &now;
	}
	a = json_array();
	for (unsigned k = 0; k < n; k++) {
		const struct bak_disk *dk = disk_of(v[k]);

		served = served && dk->pid > 0;
		json_array_append_new(a, json_pack("{s:I, s:s, s:I, s:b, s:b}",
			"index", (json_int_t)k, "replica", dk->path,
			"size", (json_int_t)dk->db.size,
			"consistent", busy ? s->consistent :
				rdb_diskbuf_consistent(&dk->db),
			"served", !own.restore && dk->pid > 0));
	}
	json_object_set_new(o, "disk", json_pack("{s:s, s:I, s:b, s:b, s:I, s:I, s:b}",
		"replica", disk_of(v[0])->path,
		"size", (json_int_t)disk_of(v[0])->db.size,
		"consistent", s->consistent,
		"served", served,
		"buffered_bytes", (json_int_t)s->buffered,
		"applied_bytes", (json_int_t)s->applied,
		"writing", own.commit || own.restore_devs));
	json_object_set_new(o, "disks", a);
}

const struct rdb_bakdev_ops rdb_bak_disk_ops = {
	.kind = "disk",
	.record = disk_record,
	.recorded = disk_recorded,
	.counters = disk_counters,
	.check = disk_check,
	.sync = disk_sync,
	.fresh = disk_fresh,
	.forget = disk_forget,
	.serve = disk_serve,
	.unserve = disk_unserve,
	.restore = disk_restore,
	.hand_over = disk_hand_over,
	.restored = disk_restored,
	.poll = disk_poll,
	.free = disk_free,
	.status = disks_status,
};

int rdb_bak_disk_setup(struct rdb_bakdevs *t, struct rdb_stage *st,
		       const struct rdb_frame *f, bool committed)
{
	const struct rdb_bakdev_host *host = t->host;
	uint32_t k = f->device;
	struct bak_disk *dk;
	int rc;

	/* (a disk's initial copy may already be under way in epoch 0: a
	 * primary without RESYNC starts it right after its DISK_SETUP,
	 * before the next disk's) */
	if (k != st->ndisks || committed || (k == 0 && st->open)) {
		LOGVM(ERROR, host->vm->name, "DISK_SETUP for disk %u: %s", k,
		      k >= RDB_DISKS_MAX ? "more disks than a backup keeps" :
		      k != st->ndisks ? "not the next disk" :
		      "after the initial state began");
		return -EPROTO;
	}
	if (k >= RDB_DISKS_MAX)
		return -EPROTO;
	dk = calloc(1, sizeof(*dk));
	if (!dk)
		return -ENOMEM;
	rdb_bakdev_init(&dk->dev, &rdb_bak_disk_ops, k, host);
	/* (the config's bound if VM_SETUP came first; else VM_SETUP sets
	 * it, backup.c) */
	rdb_diskbuf_init(&dk->db, (uint64_t)host->vm->cfg.disk_epoch_max_mb << 20);
	dk->pid = -1;
	rc = setup(dk, f, st->features);
	if (rc == 0)
		rc = rdb_bakdevs_add(t, &dk->dev);
	if (rc < 0) {
		disk_free(&dk->dev);
		return rc;
	}
	st->disks[k] = &dk->db;
	st->ndisks = k + 1;
	return 0;
}

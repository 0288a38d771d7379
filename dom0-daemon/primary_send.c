// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "primary"
#include "primary_int.h"

#include <errno.h>
#include <sched.h>
#include <sys/random.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- sending to the backup ---- */

/*
 * Nothing is sent to the backup while the guest is paused: the pause is
 * for reading QEMU's stream only.  Sending then would take CPU from QEMU's
 * own copy (and wake the backup to compete for it too); the epoch goes
 * out as soon as the guest runs again.  Unless the pause has lasted a
 * heartbeat period: QEMU is then waiting for something else, a disk
 * drain behind a busy disk most often, and the backup must go on hearing
 * this host.  Seen in CI: the disk server blocked 1.9 s in the host's
 * I/O with a pause under way, nothing sent meanwhile, and the backup,
 * silent past failover_timeout_ms, failed over from a live primary.
 */
bool rdb_pri_may_send(const struct rdb_primary *p)
{
	return !p->ck.in_pause ||
	       rdb_now_ns() - p->ckpt_start_ns >=
	       (uint64_t)p->d->cfg.heartbeat_ms * RDB_NS_PER_MS;
}

void rdb_pri_peer_want_write(struct rdb_primary *p)
{
	if (p->peer_fd >= 0)
		rdb_evloop_mod_fd(p->d->loop, p->peer_fd, RDB_EV_READ |
				  (p->out.len && rdb_pri_may_send(p) ?
				   RDB_EV_WRITE : 0));
}

int rdb_pri_peer_flush(struct rdb_primary *p)
{
	int rc;

	if (p->peer_fd < 0)
		return -ENOTCONN;
	rc = rdb_buf_write_fd(&p->out, p->peer_fd);
	if (rc < 0 && rc != -EAGAIN)
		return rc;
	rdb_pri_peer_want_write(p);
	return 0;
}

/* Frames runs of records as PAGES messages of at most PAGES_BATCH_BYTES
 * and PAGES_BATCH_PAGES each, cut on record boundaries. */
static int frame_runs(struct rdb_buf *out, uint64_t epoch, const uint8_t *recs,
		      const struct rdb_page_run *runs, size_t nruns)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < nruns; i++) {
		const struct rdb_page_run *r = &runs[i];
		const uint8_t *at = recs + r->start;
		uint32_t n = r->count;

		while (rc == 0 && n) {
			size_t take = 0;
			uint32_t k = 0;

			while (k < n && take < PAGES_BATCH_BYTES &&
			       k < PAGES_BATCH_PAGES) {
				take += rdb_proto_page_record_size(at + take);
				k++;
			}
			rc = rdb_proto_put_pages(out, epoch, r->block, k, at, take);
			at += take;
			n -= k;
		}
	}
	return rc;
}

int rdb_pri_batch_flush(struct rdb_primary *p)
{
	int rc = frame_runs(&p->out, p->batch_epoch, p->batch.data, p->runs,
			    p->nruns);

	p->vm->st.bytes += p->batch.len;
	rdb_buf_reset(&p->batch);
	p->nruns = 0;
	return rc;
}

/* Where frames tagged with the open epoch go: behind an epoch still being
 * encoded, if there is one. */
struct rdb_buf *rdb_pri_epoch_out(struct rdb_primary *p)
{
	return p->encoding ? &p->held : &p->out;
}

/* ---- compression: epochs encoded by the pool while the guest runs ---- */

/* Frames the encoded epoch (PAGES, DEVSTATE, EPOCH_END), then whatever
 * of later epochs waited behind it. */
static int finish_encoded(struct rdb_primary *p)
{
	struct rdb_vm *vm = p->vm;
	uint64_t recs = 0, bytes = 0, digest = 0, pages = 0;
	int rc = 0;

	p->encoding = false;
	for (unsigned w = 0; rc == 0 && w < rdb_encpool_nworkers(p->pool); w++) {
		const struct rdb_enc_out *o = rdb_encpool_out(p->pool, w);

		rc = o->err;
		if (rc == 0)
			rc = frame_runs(&p->out, p->enc_epoch, o->recs.data,
					o->runs, o->nruns);
		recs += o->nrecs;
		bytes += o->body_bytes;
		digest += o->digest;
		vm->st.bytes += o->recs.len;
	}
	pages = recs;
	if (rc == 0 && (p->ck.features & RDB_FEATURE_VERIFY))
		rc = rdb_proto_put_verify(&p->out, p->enc_epoch, digest, pages);
	if (rc == 0)
		rc = rdb_proto_put_devstate(&p->out, p->enc_epoch, p->enc_dev,
					    p->enc_dev_len);
	if (rc == 0)
		rc = rdb_proto_put_epoch_end(&p->out, p->enc_epoch,
					     recs + p->enc_disk_recs,
					     bytes + p->enc_disk_bytes +
					     p->enc_dev_len);
	rdb_vm_epoch_framed(vm, p->enc_epoch, bytes + p->enc_disk_bytes + p->enc_dev_len);
	if (rc == 0 && p->held.len)
		rc = rdb_buf_append(&p->out, p->held.data, p->held.len);
	rdb_buf_reset(&p->held);
	vm->st.bytes += p->enc_dev_len;
	rdb_encpool_stats(p->pool, &vm->st.codec);
	if (rc < 0) {
		p->life->drop_protection(p, "out of memory framing an encoded epoch");
		return rc;
	}
	rdb_pri_peer_want_write(p);
	return 0;
}

int rdb_pri_submit_epoch(struct rdb_primary *p, uint64_t epoch,
			const uint8_t *dev, size_t len)
{
	struct rdb_buf tb;
	struct rdb_page_run *tr;
	size_t tc;
	int rc;

	/* One epoch in the pool at a time, in order: the previous one is
	 * finished first.  (Not in the checkpoint pipeline: a checkpoint's
	 * STOP waits for the pool, rdb_pri_stop_waits, so the pool is idle
	 * by its end.) */
	if (p->encoding) {
		rdb_encpool_wait(p->pool);
		rc = finish_encoded(p);
		if (rc < 0)
			return rc;
	}
	if (len > p->enc_dev_cap) {
		uint8_t *d = realloc(p->enc_dev, len);

		if (!d)
			return -ENOMEM;
		p->enc_dev = d;
		p->enc_dev_cap = len;
	}
	memcpy(p->enc_dev, dev, len);
	p->enc_dev_len = len;
	/* The pool reads this epoch's records; the next pause fills the
	 * other buffer. */
	tb = p->enc_batch;
	p->enc_batch = p->batch;
	p->batch = tb;
	rdb_buf_reset(&p->batch);
	tr = p->enc_runs;
	p->enc_runs = p->runs;
	p->runs = tr;
	tc = p->enc_cap_runs;
	p->enc_cap_runs = p->cap_runs;
	p->cap_runs = tc;
	p->enc_nruns = p->nruns;
	p->nruns = 0;
	p->enc_epoch = epoch;
	p->enc_disk_recs = p->ck.epoch_recs;
	p->enc_disk_bytes = p->ck.epoch_bytes;
	p->encoding = true;
	return rdb_encpool_submit(p->pool, epoch, p->enc_batch.data, p->enc_runs,
				  p->enc_nruns);
}

static void on_pool_done(struct rdb_evloop *loop, int fd, unsigned ev,
			 void *opaque)
{
	struct rdb_primary *p = opaque;
	uint64_t v;

	(void)loop;
	(void)ev;
	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	/* (A wakeup for an epoch submit_epoch already finished is stale.) */
	if (p->encoding && !rdb_encpool_busy(p->pool) &&
	    finish_encoded(p) == 0)
		p->life->encoded(p);
}

/*
 * Disk read tracking (docs/read-tracking.md): the disk server hashes what
 * the guest reads, the drain keeps the index, the encoders look pages up.
 * The hashes are keyed per protection, so a guest cannot aim collisions
 * at a key it does not know.
 */
_Static_assert(RDB_RT_DISKS_MAX >= RDB_DISKS_MAX, "read tracking covers every disk");

static int start_read_tracking(struct rdb_primary *p)
{
	struct rdb_vm *vm = p->vm;
	struct rdb_readidx_stats st;
	struct rdb_rt rt = { 0 };
	int rc;

	rc = rdb_readidx_create(&p->ridx, (uint64_t)vm->cfg.read_index_mb << 20);
	if (rc < 0)
		return rc;
	if (getrandom(&rt.seed, sizeof(rt.seed), 0) != sizeof(rt.seed))
		rt.seed = rdb_now_ns() ^ p->generation;
	rt.ix = p->ridx;
	/* Every disk, if the backup can tell them apart in a reference;
	 * else the first (a backup of an earlier version). */
	rt.ndisks = p->ck.features & RDB_FEATURE_DISKREF_DEVS ? p->ndisks : 1;
	for (unsigned k = 0; k < rt.ndisks; k++) {
		struct rdb_rt_disk *d = &rt.disk[k];

		d->fd = p->disks[k]->disk.img_fd;
		/* (to ask the page cache, never to read: see pagecodec.c) */
		d->len = p->disks[k]->disk.size;
		d->map = d->len ? mmap(NULL, d->len, PROT_READ, MAP_SHARED,
				       d->fd, 0) : MAP_FAILED;
		if (d->map == MAP_FAILED) {
			LOGVM(WARN, vm->name, "disk read tracking: cannot map "
			      "disk %u's image to ask the page cache (%s): a "
			      "candidate block's read may wait for the disk",
			      k, strerror(errno));
			d->map = NULL;
			d->len = 0;
		}
		p->rt_map[k] = d->map;
		p->rt_map_len[k] = d->len;
	}
	p->rt_ndisks = rt.ndisks;
	rdb_encpool_set_rt(p->pool, &rt);
	for (unsigned k = 0; k < rt.ndisks; k++)
		rdb_disk_set_read_tracking(&p->disks[k]->disk, p->ridx, k,
					   rt.seed);
	rdb_readidx_stats(p->ridx, &st);
	LOGVM(INFO, vm->name, "disk read tracking on: %u of %u disk%s, read "
	      "index of %llu blocks (%u MiB)", rt.ndisks, p->ndisks,
	      p->ndisks == 1 ? "" : "s", (unsigned long long)st.capacity,
	      vm->cfg.read_index_mb);
	return 0;
}

/*
 * compress_threads, but no more than the CPUs remusdbd may run on (its
 * `cpus`, or the affinity it was started with): a second encoder on the
 * one CPU only adds a wake-up and a second walk over every record of
 * the epoch, and halves each one's page cache (issue 30).
 */
static unsigned encoder_threads(const struct rdb_vm *vm)
{
	unsigned n = vm->cfg.compress_threads, cpus = 0;
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		cpus = (unsigned)CPU_COUNT(&set);
	return cpus && n > cpus ? cpus : n;
}

/* After the backup granted encodings and QEMU told us the RAM size. */
int rdb_pri_start_pool(struct rdb_primary *p, uint64_t ram_bytes)
{
	struct rdb_vm *vm = p->vm;
	uint64_t cache = ram_bytes / RDB_PAGE_SIZE * vm->cfg.page_cache_percent / 100;
	unsigned threads = encoder_threads(vm);
	int rc;

	if (!(p->ck.features & POOL_FEATURES) || p->pool)
		return 0;
	p->pool_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (p->pool_fd < 0)
		return -errno;
	rc = rdb_evloop_add_fd(p->d->loop, p->pool_fd, RDB_EV_READ, on_pool_done, p);
	if (rc == 0)
		rc = rdb_encpool_create(&p->pool, threads,
					cache > UINT32_MAX ? UINT32_MAX : (uint32_t)cache,
					p->ck.features & POOL_ALLOWED, p->pool_fd);
	if (rc == 0 && (p->ck.features & RDB_FEATURE_DISKREF))
		rc = start_read_tracking(p);
	if (rc < 0)
		return rc;
	if (threads < vm->cfg.compress_threads)
		LOGVM(INFO, vm->name, "compress_threads %u: %u encoder thread%s, "
		      "one per CPU remusdbd runs on", vm->cfg.compress_threads,
		      threads, threads == 1 ? "" : "s");
	LOGVM(INFO, vm->name, "compression on: %u encoder threads, page cache "
	      "%llu pages (%u%% of %llu MiB RAM)%s%s", threads,
	      (unsigned long long)cache, vm->cfg.page_cache_percent,
	      (unsigned long long)(ram_bytes >> 20),
	      p->ck.features & RDB_FEATURE_XORRLE ? ", XOR+RLE" : "",
	      p->ck.features & RDB_FEATURE_LZ4 ? ", LZ4" : "");
	return 0;
}

void rdb_pri_stop_pool(struct rdb_primary *p)
{
	for (unsigned k = 0; p->ridx && k < p->rt_ndisks; k++)
		rdb_disk_set_read_tracking(&p->disks[k]->disk, NULL, k, 0);
	if (p->pool) {
		rdb_encpool_destroy(p->pool);	/* waits for an epoch in flight */
		p->pool = NULL;
	}
	rdb_readidx_destroy(p->ridx);		/* after its last user */
	p->ridx = NULL;
	for (unsigned k = 0; k < p->rt_ndisks; k++) {
		if (p->rt_map[k])
			munmap((void *)p->rt_map[k], p->rt_map_len[k]);
		p->rt_map[k] = NULL;
	}
	p->rt_ndisks = 0;
	if (p->pool_fd >= 0) {
		rdb_evloop_del_fd(p->d->loop, p->pool_fd);
		close(p->pool_fd);
		p->pool_fd = -1;
	}
	p->encoding = false;
	rdb_buf_reset(&p->held);
}

/* ---- capture mode ---- */

void rdb_pri_capture_stop(struct rdb_primary *p, const char *why)
{
	if (p->cap_fd >= 0) {
		close(p->cap_fd);
		LOGVM(INFO, p->vm->name, "capture ended: %s", why);
	}
	p->cap_fd = -1;
	p->cap_left = 0;
}

void rdb_pri_capture_epoch(struct rdb_primary *p, uint64_t epoch)
{
	uint32_t n = (uint32_t)p->nruns;
	int rc = rdb_write_all(p->cap_fd, "EPOC", 4);

	if (rc == 0)
		rc = rdb_write_all(p->cap_fd, &epoch, 8);
	if (rc == 0)
		rc = rdb_write_all(p->cap_fd, &n, 4);
	for (size_t i = 0; rc == 0 && i < p->nruns; i++) {
		const struct rdb_page_run *r = &p->runs[i];
		uint64_t len = r->len;

		rc = rdb_write_all(p->cap_fd, &r->block, 4);
		if (rc == 0)
			rc = rdb_write_all(p->cap_fd, &r->count, 4);
		if (rc == 0)
			rc = rdb_write_all(p->cap_fd, &len, 8);
		if (rc == 0)
			rc = rdb_write_all(p->cap_fd, p->batch.data + r->start, r->len);
	}
	if (rc < 0) {
		LOGVM(ERROR, p->vm->name, "capture: %s", strerror(-rc));
		rdb_pri_capture_stop(p, "write error");
		return;
	}
	if (--p->cap_left == 0)
		rdb_pri_capture_stop(p, "all epochs written");
}

int rdb_primary_capture(struct rdb_vm *vm, const char *path, uint64_t epochs,
			char *err, size_t errlen)
{
	struct rdb_primary *p = vm->pri;
	int fd, rc;

	if (!p || !p->ck.active) {
		snprintf(err, errlen, "%s is not being protected here", vm->name);
		return -EINVAL;
	}
	if (p->cap_fd >= 0) {
		snprintf(err, errlen, "a capture is already running");
		return -EBUSY;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	rc = rdb_write_all(fd, "RDBCORP1", 8);
	if (rc < 0) {
		close(fd);
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	p->cap_fd = fd;
	p->cap_left = epochs;
	LOGVM(INFO, vm->name, "capturing the dirty pages of %llu epochs to %s",
	      (unsigned long long)epochs, path);
	return 0;
}

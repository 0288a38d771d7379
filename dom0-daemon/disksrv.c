// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "disk-server"
#include "disksrv.h"
#include "qcow2.h"
#include "readidx.h"
#include "clock.h"
#include "diskbuf.h"
#include "fileio.h"
#include "log.h"
#include "sockutil.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* QEMU's export name is free-form; we serve one export per socket. */
#define EXPORT_NAME ""
#define ROOM_POLL_NS (100 * 1000)
/* How often the activity log looks for extents to retire: it starts a
 * sync at most once a second (RDB_ACTLOG_RETIRE_NS), or at every tick
 * once 3/4 full, as the backup's acknowledgements come. */
#define RETIRE_TICK_NS (50 * RDB_NS_PER_MS)

#define BUMP(field, n) atomic_fetch_add_explicit(&s->ring.sh->field, (n), \
						 memory_order_relaxed)

static int failed(struct rdb_disksrv *s, const char *what, uint64_t off,
		  uint32_t len, int rc)
{
	BUMP(errors, 1);
	LOGVM(ERROR, s->vm, "disk %s: %s of %u bytes at %llu failed: %s "
	      "(the guest gets an I/O error)", s->image, what, len,
	      (unsigned long long)off, strerror(-rc));
	return rc;
}

/* The activity log's state and counters, for remusdbd. */
static void publish_al(struct rdb_disksrv *s)
{
	struct rdb_dring_shared *sh = s->ring.sh;
	const struct rdb_actlog_stats *st = &s->al.st;

	if (!s->has_al)
		return;
	atomic_store(&sh->al_armed_gen, rdb_actlog_armed_gen(&s->al));
	atomic_store(&sh->al_active, st->active);
	atomic_store(&sh->al_adds, st->adds);
	atomic_store(&sh->al_log_syncs, st->log_syncs);
	atomic_store(&sh->al_retired, st->retired);
	atomic_store(&sh->al_image_syncs, st->image_syncs);
	atomic_store(&sh->al_full_stalls, st->full_stalls);
	atomic_store(&sh->al_invalidations, st->invalidations);
}

static int sync_image(struct rdb_disksrv *s)
{
	if (fdatasync(s->img_fd) < 0) {
		int rc = -errno;

		/* the kernel may have dropped what it could not write: no
		 * later sync proves the image holds it */
		if (s->has_al) {
			rdb_actlog_image_sync_failed(&s->al);
			publish_al(s);
		}
		return rc;
	}
	BUMP(syncs, 1);
	s->dirty = false;
	return 0;
}

static void notify(struct rdb_disksrv *s)
{
	uint64_t one = 1;

	if (s->notify_fd >= 0 && write(s->notify_fd, &one, sizeof(one)) < 0 &&
	    errno != EAGAIN)
		LOGVM(WARN, s->vm, "disk server: notifying remusdbd: %s",
		      strerror(errno));
}

/*
 * The replica can no longer be made equal to the image: say why, stop
 * recording, and make the guest's flushes durable here again — the ones
 * already answered as carried by the backup with them.
 */
static void give_up(struct rdb_disksrv *s, enum rdb_dring_lost why,
		    const char *what)
{
	struct rdb_dring_shared *sh = s->ring.sh;
	int rc;

	atomic_store(&sh->lost_ns, rdb_now_ns());
	atomic_store(&sh->lost, (uint32_t)why);
	atomic_store(&sh->record, 0);
	atomic_store(&sh->replicated, 0);
	rc = sync_image(s);
	LOGVM(ERROR, s->vm, "ALARM: disk server: %s; the backup's replica "
	      "misses the guest's changes from here (remusdbd drops "
	      "protection), the guest's flushes are local again (image sync: "
	      "%s)", what, rc < 0 ? strerror(-rc) : "done");
	notify(s);
}

/* Puts one record, waiting at most room_wait_ns for room; whether it
 * did. */
static bool put(struct rdb_disksrv *s, enum rdb_disk_op op, uint64_t off,
		uint32_t len, const uint8_t *data)
{
	struct rdb_dring_shared *sh = s->ring.sh;
	uint64_t t0 = 0, waited;
	int rc;

	while ((rc = rdb_dring_put(&s->ring, op, off, len, data)) == -ENOSPC) {
		uint64_t now = rdb_now_ns();
		struct timespec ts = { 0, ROOM_POLL_NS };

		if (!t0) {
			t0 = now;
			BUMP(room_waits, 1);
			notify(s);
		}
		if (!atomic_load(&sh->record))
			return false;	/* remusdbd stopped wanting them */
		if (now - t0 > atomic_load(&sh->room_wait_ns)) {
			char what[160];

			snprintf(what, sizeof(what), "no room in the ring to "
				 "remusdbd for %llu ms (remusdbd stalled?)",
				 (unsigned long long)((now - t0) / RDB_NS_PER_MS));
			give_up(s, RDB_DRING_OVERFLOW, what);
			return false;
		}
		nanosleep(&ts, NULL);
	}
	if (rc < 0) {
		give_up(s, RDB_DRING_OVERFLOW, "a change too big for the ring");
		return false;
	}
	if (t0) {
		waited = rdb_now_ns() - t0;
		if (waited > atomic_load(&sh->room_wait_max_ns))
			atomic_store(&sh->room_wait_max_ns, waited);
	}
	BUMP(recorded, 1);
	BUMP(recorded_bytes, op == RDB_DISK_WRITE ? len : 0);
	return true;
}

/* remusdbd's own fdatasync of the image failed: as if ours had. */
static void daemon_sync_failed(struct rdb_disksrv *s)
{
	if (s->has_al && !s->al.image_lost &&
	    atomic_load(&s->ring.sh->image_sync_failed)) {
		rdb_actlog_image_sync_failed(&s->al);
		publish_al(s);
	}
}

/* What remusdbd asks of the log besides recording (diskring.h): keep it
 * while not recording, count what never reached the backup as copied. */
static void al_requests(struct rdb_disksrv *s)
{
	struct rdb_dring_shared *sh = s->ring.sh;
	uint64_t req = atomic_load(&sh->al_adopt_req);

	rdb_actlog_keep(&s->al, atomic_load(&sh->al_keep) != 0);
	if (req != s->al_adopt_seen) {
		s->al_adopt_seen = req;
		rdb_actlog_adopt(&s->al, atomic_load(&sh->al_adopt_pos));
	}
}

/*
 * The activity log takes a change of [off, off + len) before it reaches
 * the image (recording: `record` as read then), and again before it goes
 * into the ring.  A log that could neither take it nor be invalidated
 * may claim what is untrue: the replica is given up (remusdbd drops the
 * protection) and the change goes on all the same.
 */
static void log_change(struct rdb_disksrv *s, bool recording, uint64_t off,
		       uint64_t len)
{
	struct rdb_dring_shared *sh = s->ring.sh;
	int rc;

	if (!s->has_al)
		return;
	daemon_sync_failed(s);
	al_requests(s);
	rc = rdb_actlog_before(&s->al, recording, atomic_load(&sh->al_gen),
			       atomic_load(&sh->committed_pos), off, len);
	publish_al(s);
	if (rc < 0 && atomic_load(&sh->record))
		give_up(s, RDB_DRING_ACTLOG, "its activity log could neither "
			"be written nor invalidated");
}

/* Before a change of [off, off + len) touches the image. */
static void change_begin(struct rdb_disksrv *s, uint64_t off, uint64_t len)
{
	if (s->has_wmap)
		rdb_wmap_mark(&s->wmap, off, len);
	log_change(s, s->has_ring && atomic_load(&s->ring.sh->record), off, len);
}

/* After it completed (or failed); whole: it went into the ring whole. */
static void change_end(struct rdb_disksrv *s, uint64_t off, uint64_t len,
		       bool whole)
{
	if (!s->has_al)
		return;
	rdb_actlog_after(&s->al, off, len, whole ?
			 atomic_load(&s->ring.sh->head) : RDB_ACTLOG_NEVER);
}

/* A change for the replica, if remusdbd wants them; whether it went into
 * the ring whole.  Tested after the change reached the image: a `record`
 * turned on after this test finds the change in the image (the initial
 * copy reads it after).  One turned on between the test before the
 * change and this one finds it unlogged: the log takes it now. */
static bool pass_on(struct rdb_disksrv *s, enum rdb_disk_op op, uint64_t off,
		    uint32_t len, const uint8_t *data)
{
	bool whole = true;

	if (!s->has_ring || !atomic_load(&s->ring.sh->record))
		return false;
	if (op != RDB_DISK_FLUSH)
		log_change(s, true, off, len);
	if (op != RDB_DISK_WRITE)
		whole = put(s, op, off, len, NULL);
	while (op == RDB_DISK_WRITE && len && atomic_load(&s->ring.sh->record)) {
		uint32_t n = len < RDB_DRING_REC_MAX ? len : RDB_DRING_REC_MAX;

		whole = put(s, op, off, n, data) && whole;
		off += n;
		data += n;
		len -= n;
	}
	notify(s);
	return whole && (op != RDB_DISK_WRITE || !len);
}

/*
 * A write or zeroing that failed may have reached the image in part (a
 * short write, then ENOSPC; or it all did, and the FUA sync after it
 * failed): the replica gets what the image now holds, read back.
 */
static bool pass_on_readback(struct rdb_disksrv *s, uint64_t off, uint32_t len)
{
	bool whole = true;
	uint8_t *b;

	if (!s->has_ring || !atomic_load(&s->ring.sh->record))
		return false;
	b = malloc(len < RDB_DRING_REC_MAX ? len : RDB_DRING_REC_MAX);
	while (b && len) {
		uint32_t n = len < RDB_DRING_REC_MAX ? len : RDB_DRING_REC_MAX;

		if (rdb_pread_all(s->img_fd, b, n, off) < 0)
			break;
		whole = pass_on(s, RDB_DISK_WRITE, off, n, b) && whole;
		off += n;
		len -= n;
	}
	free(b);
	if (len) {
		char what[160];

		snprintf(what, sizeof(what), "a failed change at %llu could "
			 "not be read back from the image",
			 (unsigned long long)off);
		give_up(s, RDB_DRING_UNREADABLE, what);
		return false;
	}
	BUMP(readbacks, 1);
	return whole;
}

/* A FLUSH or FUA write: durable here, or carried by the backup. */
static int flush_point(struct rdb_disksrv *s)
{
	return atomic_load(&s->ring.sh->replicated) ? 0 : sync_image(s);
}

static bool all_zero(const uint8_t *b)
{
	uint64_t w;

	for (size_t i = 0; i < RDB_READIDX_BLOCK; i += 8) {
		memcpy(&w, b + i, 8);
		if (w)
			return false;
	}
	return true;
}

/*
 * Disk read tracking: the hashes of the whole, aligned blocks a read
 * returned go to remusdbd's read index (readidx.h).  Only a hint: a READ
 * record never waits for room and never takes the second half of the
 * ring, which stays for the changes the replica needs.
 */
static void track_read(struct rdb_disksrv *s, uint64_t off, uint32_t len,
		       const uint8_t *data)
{
	struct rdb_dring_shared *sh = s->ring.sh;
	uint64_t first = (off + RDB_READIDX_BLOCK - 1) / RDB_READIDX_BLOCK;
	uint64_t end = (off + len) / RDB_READIDX_BLOCK, seed;
	uint64_t h[RDB_DRING_READ_MAX];
	bool idle;

	if (!s->has_ring || first >= end || !atomic_load(&sh->record) ||
	    !atomic_load(&sh->track_reads))
		return;
	seed = atomic_load(&sh->read_seed);
	/* remusdbd takes reads while the guest runs, not in the next pause
	 * (the pause's drain is for changes): woken when the ring was empty,
	 * it takes everything, so one wake-up per batch of reads is enough */
	idle = rdb_dring_used(&s->ring) == 0;
	while (first < end) {
		uint32_t n = end - first < RDB_DRING_READ_MAX ?
			(uint32_t)(end - first) : RDB_DRING_READ_MAX;

		for (uint32_t i = 0; i < n; i++) {
			const uint8_t *b = data + (first + i) * RDB_READIDX_BLOCK - off;

			h[i] = all_zero(b) ? 0 : rdb_readidx_hash(b, seed);
		}
		if (rdb_dring_used(&s->ring) + 16 + n * 8 > sh->size / 2 ||
		    rdb_dring_put(&s->ring, RDB_DRING_READ,
				  first * RDB_READIDX_BLOCK, n * 8,
				  (const uint8_t *)h) < 0) {
			BUMP(reads_skipped, end - first);
			return;
		}
		BUMP(reads_tracked, n);
		first += n;
	}
	if (idle)
		notify(s);
}

static int op_read(void *opaque, uint64_t off, uint32_t len, uint8_t *dst)
{
	struct rdb_disksrv *s = opaque;
	int rc = rdb_pread_all(s->img_fd, dst, len, off);

	if (rc < 0)
		return failed(s, "read", off, len, rc);
	BUMP(reads, 1);
	BUMP(read_bytes, len);
	track_read(s, off, len, dst);
	return 0;
}

static int op_write(void *opaque, uint64_t off, uint32_t len,
		    const uint8_t *src, bool fua)
{
	struct rdb_disksrv *s = opaque;
	int rc;

	change_begin(s, off, len);
	rc = rdb_pwrite_all(s->img_fd, src, len, off);
	if (rc < 0) {
		/* part of it may be in the image: the replica gets that */
		s->dirty = true;
		change_end(s, off, len, pass_on_readback(s, off, len));
		return failed(s, "write", off, len, rc);
	}
	s->dirty = true;
	BUMP(writes, 1);
	BUMP(written_bytes, len);
	/* in the image, whatever the FUA sync says next: replicated */
	change_end(s, off, len, pass_on(s, RDB_DISK_WRITE, off, len, src));
	if (fua) {
		rc = flush_point(s);
		if (rc < 0)
			return failed(s, "write's FUA sync", off, len, rc);
		pass_on(s, RDB_DISK_FLUSH, 0, 0, NULL);
	}
	return 0;
}

static int op_flush(void *opaque)
{
	struct rdb_disksrv *s = opaque;
	int rc = flush_point(s);

	if (rc < 0)
		return failed(s, "flush", 0, 0, rc);
	BUMP(flushes, 1);
	pass_on(s, RDB_DISK_FLUSH, 0, 0, NULL);
	return 0;
}

/* Both trim and write-zeroes leave zeroes behind, so the replica can be
 * made equal by zeroing the same range. */
static int zero(struct rdb_disksrv *s, uint64_t off, uint32_t len, bool punch)
{
	int rc;

	change_begin(s, off, len);
	rc = rdb_zero_range(s->img_fd, off, len, punch);
	s->dirty = true;
	if (rc < 0) {
		change_end(s, off, len, pass_on_readback(s, off, len));
		return failed(s, punch ? "trim" : "write-zeroes", off, len, rc);
	}
	BUMP(zeroes, 1);
	change_end(s, off, len, pass_on(s, RDB_DISK_ZERO, off, len, NULL));
	return 0;
}

static int op_trim(void *opaque, uint64_t off, uint32_t len)
{
	return zero(opaque, off, len, true);
}

static int op_write_zeroes(void *opaque, uint64_t off, uint32_t len,
			   bool may_trim)
{
	return zero(opaque, off, len, may_trim);
}

static const struct rdb_nbd_ops disk_ops = {
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.trim = op_trim,
	.write_zeroes = op_write_zeroes,
};

static void drop_client(struct rdb_disksrv *s)
{
	if (s->client_fd >= 0) {
		rdb_evloop_del_fd(s->loop, s->client_fd);
		close(s->client_fd);
		s->client_fd = -1;
	}
	if (s->nbd_init) {
		rdb_nbd_server_dispose(&s->nbd);
		s->nbd_init = false;
	}
	atomic_store(&s->ring.sh->connected, 0);
}

static void want(struct rdb_disksrv *s)
{
	rdb_evloop_mod_fd(s->loop, s->client_fd, RDB_EV_READ |
			  (s->nbd.out.len ? RDB_EV_WRITE : 0));
}

static void on_client(struct rdb_evloop *loop, int fd, unsigned ev,
		      void *opaque)
{
	struct rdb_disksrv *s = opaque;
	static uint8_t b[64 << 10];
	int rc = 0;

	(void)loop;
	/* Replies first: a client that does not read its replies must not
	 * make us buffer without bound, so we read only when they are out. */
	if (s->nbd.out.len) {
		rc = rdb_buf_write_fd(&s->nbd.out, fd);
		if (rc < 0 && rc != -EAGAIN)
			goto gone;
	}
	if ((ev & RDB_EV_READ) && s->nbd.out.len < (8u << 20)) {
		ssize_t n = read(fd, b, sizeof(b));

		if (n == 0) {
			rc = -ECONNRESET;
			goto gone;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			rc = -errno;
			goto gone;
		}
		if (n > 0) {
			rc = rdb_nbd_server_feed(&s->nbd, b, (size_t)n);
			if (rc == 1) {
				LOGVM(INFO, s->vm, "disk client disconnected");
				drop_client(s);
				return;
			}
			if (rc < 0) {
				LOGVM(ERROR, s->vm, "disk: NBD client broke the "
				      "protocol: %s", rdb_nbd_server_error(&s->nbd));
				drop_client(s);
				return;
			}
			rc = rdb_buf_write_fd(&s->nbd.out, fd);
			if (rc < 0 && rc != -EAGAIN)
				goto gone;
		}
	}
	want(s);
	return;
gone:
	LOGVM(WARN, s->vm, "disk client gone: %s",
	      rc == -ECONNRESET ? "QEMU disconnected" : strerror(-rc));
	drop_client(s);
}

static void on_accept(struct rdb_evloop *loop, int fd, unsigned ev,
		      void *opaque)
{
	struct rdb_disksrv *s = opaque;
	int c = rdb_sock_accept(fd), rc;

	(void)ev;
	if (c < 0)
		return;
	/* A QEMU that reconnects has given up on the old connection. */
	if (s->client_fd >= 0) {
		LOGVM(WARN, s->vm, "disk: new NBD client replaces the old one");
		drop_client(s);
	}
	rc = rdb_nbd_server_init(&s->nbd, EXPORT_NAME, s->size, &disk_ops, s);
	if (rc == 0)
		rc = rdb_evloop_add_fd(loop, c, RDB_EV_READ | RDB_EV_WRITE,
				       on_client, s);
	if (rc < 0) {
		if (rc != -ENOMEM)
			rdb_nbd_server_dispose(&s->nbd);
		close(c);
		return;
	}
	s->nbd_init = true;
	s->client_fd = c;
	BUMP(connects, 1);
	atomic_store(&s->ring.sh->connected, 1);
	LOGVM(INFO, s->vm, "disk client connected (%s, %llu bytes)",
	      s->image, (unsigned long long)s->size);
}

/* ---- the activity log's retiring, its image syncs in a thread ---- */

static void *retire_worker(void *opaque)
{
	struct rdb_disksrv *s = opaque;
	char c;

	pthread_setname_np(pthread_self(), "rdb-retire");
	for (;;) {
		ssize_t n = read(s->rt_req[0], &c, 1);
		int rc;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return NULL;	/* the loop closed its end: stopping */
		rc = fdatasync(s->img_fd) < 0 ? -errno : 0;
		if (rdb_write_all(s->rt_done[1], &rc, sizeof(rc)) < 0)
			return NULL;
	}
}

static void on_retire_done(struct rdb_evloop *loop, int fd, unsigned ev,
			   void *opaque)
{
	struct rdb_disksrv *s = opaque;
	int rc;

	(void)loop;
	(void)ev;
	/* committed_pos read now, after the sync: what the backup has
	 * committed by now and this host holds durably may go */
	while (read(fd, &rc, sizeof(rc)) == (ssize_t)sizeof(rc)) {
		rdb_actlog_retire_end(&s->al, s->rt_covered, rc,
				      atomic_load(&s->ring.sh->al_gen),
				      atomic_load(&s->ring.sh->committed_pos));
		publish_al(s);
	}
}

static uint64_t on_retire_tick(struct rdb_evloop *loop, uint64_t id,
			       void *opaque)
{
	struct rdb_disksrv *s = opaque;
	uint64_t now = rdb_now_ns();
	char c = 1;

	(void)loop;
	(void)id;
	daemon_sync_failed(s);
	al_requests(s);
	if (rdb_actlog_arm_idle(&s->al, atomic_load(&s->ring.sh->record),
				atomic_load(&s->ring.sh->al_gen)) < 0 &&
	    atomic_load(&s->ring.sh->record))
		give_up(s, RDB_DRING_ACTLOG, "its activity log could neither "
			"be armed nor invalidated");
	if (rdb_actlog_retire_due(&s->al, now, atomic_load(&s->ring.sh->al_gen),
				  atomic_load(&s->ring.sh->committed_pos))) {
		s->rt_covered = rdb_actlog_retire_begin(&s->al, now);
		if (write(s->rt_req[1], &c, 1) != 1) {
			LOGVM(WARN, s->vm, "activity log: starting a retire "
			      "sync: %s", strerror(errno));
			rdb_actlog_retire_cancel(&s->al);
		}
	}
	publish_al(s);
	return RETIRE_TICK_NS;
}

static int start_log(struct rdb_disksrv *s, const struct rdb_disk_logs *logs,
		     char *err, size_t errlen)
{
	int rc;

	if (!s->has_ring) {
		snprintf(err, errlen, "activity log %s: needs a ring",
			 logs->activity_log);
		return -EINVAL;
	}
	rc = rdb_actlog_open(&s->al, s->vm, logs->activity_log, s->img_fd,
			     s->size, logs->activity_log_max, err, errlen);
	if (rc < 0)
		return rc;
	s->has_al = true;
	publish_al(s);
	if (pipe2(s->rt_req, O_CLOEXEC) < 0 ||
	    pipe2(s->rt_done, O_CLOEXEC | O_NONBLOCK) < 0) {
		rc = -errno;
		snprintf(err, errlen, "activity log: pipe: %s", strerror(errno));
		return rc;
	}
	rc = -pthread_create(&s->rt_thread, NULL, retire_worker, s);
	if (rc < 0) {
		snprintf(err, errlen, "activity log: thread: %s", strerror(-rc));
		return rc;
	}
	s->rt_started = true;
	rc = rdb_evloop_add_fd(s->loop, s->rt_done[0], RDB_EV_READ,
			       on_retire_done, s);
	if (rc == 0)
		rc = rdb_evloop_add_timer(s->loop, RETIRE_TICK_NS,
					  on_retire_tick, s, &s->rt_timer);
	if (rc < 0)
		snprintf(err, errlen, "event loop: %s", strerror(-rc));
	return rc;
}

static void stop_log(struct rdb_disksrv *s)
{
	if (s->rt_timer) {
		rdb_evloop_del_timer(s->loop, s->rt_timer);
		s->rt_timer = 0;
	}
	if (s->rt_req[1] >= 0) {
		close(s->rt_req[1]);	/* the thread ends after its sync */
		s->rt_req[1] = -1;
	}
	if (s->rt_started) {
		pthread_join(s->rt_thread, NULL);
		s->rt_started = false;
	}
	if (s->rt_done[0] >= 0)
		rdb_evloop_del_fd(s->loop, s->rt_done[0]);
	for (int i = 0; i < 2; i++) {
		if (s->rt_req[i] >= 0)
			close(s->rt_req[i]);
		if (s->rt_done[i] >= 0)
			close(s->rt_done[i]);
		s->rt_req[i] = s->rt_done[i] = -1;
	}
	rdb_actlog_dispose(&s->al);
	s->has_al = false;
}

static const char busy_msg[] = "another disk server serves it (a remusdbd "
	"--disk-server still running: a VM restored on this host before "
	"remusdbd restarted, whose QEMU still uses it, or another daemon's): "
	"stop that VM (or that server) first";

/*
 * The byte a disk server locks: far past any image's end, and apart from
 * the bytes QEMU's own image locking uses (file-posix: 100.. and 200..),
 * so that qemu-img (check, info -U) still opens an image being served.
 */
#define SERVER_LOCK_BYTE ((off_t)1 << 62)

int rdb_disk_image_lock(int fd, const char *image, char *err, size_t errlen)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
			    .l_start = SERVER_LOCK_BYTE, .l_len = 1 };

	if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
		return 0;
	if (errno == EAGAIN || errno == EACCES) {
		snprintf(err, errlen, "disk image %s: %s", image, busy_msg);
		return -EBUSY;
	}
	snprintf(err, errlen, "disk image %s: locking it: %s", image,
		 strerror(errno));
	return -errno;
}

int rdb_disk_image_free(const char *image, uint64_t wait_ns, char *err,
			size_t errlen)
{
	uint64_t until = rdb_now_ns() + wait_ns;
	int fd = open(image, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;	/* (opening it says what is wrong) */
	for (;;) {
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
				    .l_start = SERVER_LOCK_BYTE, .l_len = 1 };

		if (fcntl(fd, F_OFD_GETLK, &fl) < 0 || fl.l_type == F_UNLCK)
			break;
		if (rdb_now_ns() >= until) {
			close(fd);
			snprintf(err, errlen, "disk image %s: %s", image, busy_msg);
			return -EBUSY;
		}
		usleep(20000);
	}
	close(fd);
	return 0;
}

int rdb_disk_open_image(const char *image, int *fd_out, uint64_t *size_out,
			char *err, size_t errlen)
{
	struct stat sb;
	int fd = open(image, O_RDWR | O_CLOEXEC), rc;

	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "disk image %s: %s", image, strerror(errno));
		return rc;
	}
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size <= 0) {
		close(fd);
		snprintf(err, errlen, "disk image %s: not a regular file with "
			 "data", image);
		return -EINVAL;
	}
	/* qcow2: its file's bytes, at the size it may grow to (qcow2.h) */
	{
		struct rdb_qcow2_info q;
		char why[600];

		rc = rdb_qcow2_probe(fd, (uint64_t)sb.st_size, &q, why, sizeof(why));
		if (rc < 0) {
			close(fd);
			snprintf(err, errlen, "disk image %s: %s", image, why);
			return rc;
		}
		if (rc == 1 && (uint64_t)sb.st_size < rdb_qcow2_ceiling(&q)) {
			if (ftruncate(fd, (off_t)rdb_qcow2_ceiling(&q)) < 0 ||
			    fstat(fd, &sb) < 0) {
				rc = -errno;
				close(fd);
				snprintf(err, errlen, "disk image %s: extending the "
					 "qcow2 file to %llu bytes: %s", image,
					 (unsigned long long)rdb_qcow2_ceiling(&q),
					 strerror(-rc));
				return rc;
			}
		}
	}
	if (sb.st_size % 512) {
		close(fd);
		snprintf(err, errlen, "disk image %s: its size is not a multiple "
			 "of 512", image);
		return -EINVAL;
	}
	*fd_out = fd;
	*size_out = (uint64_t)sb.st_size;
	return 0;
}

int rdb_disksrv_start(struct rdb_disksrv *s, struct rdb_evloop *loop,
		      const char *vm, const char *image, int listen_fd,
		      void *ring_map, int notify_fd,
		      const struct rdb_disk_logs *logs, char *err, size_t errlen)
{
	int rc;

	memset(s, 0, sizeof(*s));
	s->img_fd = s->client_fd = -1;
	rdb_wmap_init(&s->wmap);
	rdb_actlog_init(&s->al);
	s->rt_req[0] = s->rt_req[1] = s->rt_done[0] = s->rt_done[1] = -1;
	s->listen_fd = listen_fd;
	s->notify_fd = notify_fd;
	s->loop = loop;
	snprintf(s->vm, sizeof(s->vm), "%s", vm);
	snprintf(s->image, sizeof(s->image), "%s", image);
	if (ring_map) {
		rdb_dring_attach(&s->ring, ring_map);
		s->has_ring = true;
	} else {
		s->ring.sh = &s->own;
	}
	rc = rdb_disk_open_image(image, &s->img_fd, &s->size, err, errlen);
	if (rc < 0)
		return rc;
	rc = rdb_disk_image_lock(s->img_fd, image, err, errlen);
	if (rc < 0)
		return rc;
	if (logs && logs->written_map) {
		rc = rdb_wmap_open(&s->wmap, logs->written_map, s->size, true,
				   err, errlen);
		if (rc < 0)
			return rc;
		s->has_wmap = true;
	}
	if (logs && logs->activity_log) {
		rc = start_log(s, logs, err, errlen);
		if (rc < 0)
			return rc;
	}
	rc = rdb_evloop_add_fd(loop, listen_fd, RDB_EV_READ, on_accept, s);
	if (rc < 0)
		snprintf(err, errlen, "event loop: %s", strerror(-rc));
	return rc;
}

void rdb_disksrv_stop(struct rdb_disksrv *s)
{
	if (!s->loop)
		return;
	drop_client(s);
	if (s->listen_fd >= 0) {
		rdb_evloop_del_fd(s->loop, s->listen_fd);
		close(s->listen_fd);
		s->listen_fd = -1;
	}
	stop_log(s);
	rdb_wmap_close(&s->wmap);
	s->has_wmap = false;
	if (s->img_fd >= 0) {
		close(s->img_fd);
		s->img_fd = -1;
	}
	s->loop = NULL;
}

/* ---- the process ---- */

static void on_life(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	char b[64];
	ssize_t n = read(fd, b, sizeof(b));

	(void)ev;
	(void)opaque;
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		rdb_evloop_stop(loop);
}

static int fd_arg(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	return *end || v < -1 || v > 65535 ? -2 : (int)v;
}

/* The options after the fds; 0, or -1 on a bad one. */
static int parse_logs(int argc, char **argv, struct rdb_disk_logs *logs)
{
	memset(logs, 0, sizeof(*logs));
	for (int i = 0; i < argc; i += 2) {
		char *end;
		unsigned long v;

		if (i + 1 >= argc)
			return -1;
		if (strcmp(argv[i], "--activity-log") == 0) {
			logs->activity_log = argv[i + 1];
		} else if (strcmp(argv[i], "--written-map") == 0) {
			logs->written_map = argv[i + 1];
		} else if (strcmp(argv[i], "--activity-log-max") == 0) {
			v = strtoul(argv[i + 1], &end, 10);
			if (*end || !v || v > (1ul << 24))
				return -1;
			logs->activity_log_max = (uint32_t)v;
		} else {
			return -1;
		}
	}
	return 0;
}

int rdb_disksrv_main(int argc, char **argv)
{
	struct rdb_evloop *loop = NULL;
	struct rdb_disksrv s;
	struct rdb_disk_logs logs;
	int listen_fd, ring_fd, notify_fd, life_fd;
	void *map = NULL;
	char err[300] = "";
	struct stat sb;
	sigset_t none;

	rdb_log_setup("remusdbd-disk", RDB_LOG_INFO);
	if (argc < 7 || (listen_fd = fd_arg(argv[3])) < 0 ||
	    (ring_fd = fd_arg(argv[4])) < -1 || (notify_fd = fd_arg(argv[5])) < -1 ||
	    (life_fd = fd_arg(argv[6])) < -1 ||
	    parse_logs(argc - 7, argv + 7, &logs) < 0) {
		fprintf(stderr, "usage: remusdbd --disk-server VM IMAGE LISTEN_FD "
			"RING_FD NOTIFY_FD LIFE_FD (fds by number, -1: none) "
			"[--activity-log PATH [--activity-log-max N]] "
			"[--written-map PATH]\n");
		return 2;
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (ring_fd >= 0) {
		if (fstat(ring_fd, &sb) < 0 || (uint64_t)sb.st_size <= RDB_DRING_HDR_SIZE) {
			LOGVM(ERROR, argv[1], "disk server: bad ring fd %d", ring_fd);
			return 1;
		}
		map = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE,
			   MAP_SHARED, ring_fd, 0);
		if (map == MAP_FAILED) {
			LOGVM(ERROR, argv[1], "disk server: mapping the ring: %s",
			      strerror(errno));
			return 1;
		}
		close(ring_fd);
	}
	if (rdb_evloop_create(&loop) < 0 ||
	    rdb_disksrv_start(&s, loop, argv[1], argv[2], listen_fd, map,
			      notify_fd, &logs, err, sizeof(err)) < 0 ||
	    (life_fd >= 0 &&
	     rdb_evloop_add_fd(loop, life_fd, RDB_EV_READ, on_life, NULL) < 0)) {
		LOGVM(ERROR, argv[1], "disk server: %s", err[0] ? err : "no event loop");
		return 1;
	}
	LOGVM(INFO, argv[1], "disk server (pid %d) serving %s%s%s%s%s%s",
	      (int)getpid(), argv[2], map ? ", its changes to remusdbd" : "",
	      logs.activity_log ? ", activity log " : "",
	      logs.activity_log ? logs.activity_log : "",
	      logs.written_map ? ", written map " : "",
	      logs.written_map ? logs.written_map : "");
	rdb_evloop_run(loop);
	LOGVM(INFO, argv[1], "disk server (pid %d) exits: remusdbd closed its end",
	      (int)getpid());
	rdb_disksrv_stop(&s);
	rdb_evloop_destroy(loop);
	return 0;
}

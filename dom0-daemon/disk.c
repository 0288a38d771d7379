// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "disk"
#include "disk.h"
#include "disksrv.h"
#include "clock.h"
#include "fileio.h"
#include "log.h"
#include "sdunit.h"
#include "sockutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *rdb_disk_server_exe = "/proc/self/exe";

/* A server that dies sooner than this after its start is not restarted. */
#define RESTART_MIN_NS (2 * RDB_NS_PER_S)
#define CLOSE_WAIT_NS (2 * RDB_NS_PER_S)

static struct rdb_dring_shared no_stats;

void rdb_disk_init(struct rdb_disk *dk)
{
	memset(dk, 0, sizeof(*dk));
	dk->img_fd = dk->notify_fd = dk->life_fd = dk->ring_fd = -1;
	dk->pid = -1;
}

int rdb_disk_pread(struct rdb_disk *dk, uint64_t off, uint8_t *dst,
		   uint64_t len)
{
	return rdb_pread_all(dk->img_fd, dst, len, off);
}

const struct rdb_dring_shared *rdb_disk_stats(const struct rdb_disk *dk)
{
	return dk->ring.sh ? dk->ring.sh : &no_stats;
}

bool rdb_disk_connected(const struct rdb_disk *dk)
{
	return dk->ring.sh && atomic_load(&dk->ring.sh->connected);
}

/* Moves fd to number `to` in a child about to exec (no CLOEXEC there). */
static int place_fd(int fd, int to)
{
	if (fd < 0)
		return 0;
	if (fd == to)
		return fcntl(fd, F_SETFD, 0);
	return dup2(fd, to) < 0 ? -1 : 0;
}

/*
 * Starts `remusdbd --disk-server` serving image on sock_path (listening
 * here first: the socket accepts connections when this returns).  Its fds:
 * 3 the listening socket, 4 the ring, 5 the eventfd, 6 its end of the
 * life socketpair (each -1 if not given).  al_path, wmap_path: "" or NULL
 * for none.
 */
static int spawn(const char *vm, const char *image, const char *sock_path,
		 int ring_fd, int notify_fd, const char *al_path,
		 uint32_t al_max, const char *wmap_path, int *life_out,
		 int *pid_out, char *err, size_t errlen)
{
	int listen_fd = -1, life[2] = { -1, -1 }, ep[2] = { -1, -1 }, hi[4];
	int rc, child_errno = 0, argc = 0;
	char *argv[16], *full[16 + RDB_UNITS_PRE_MAX], max_arg[16], self_exe[32];
	const char *exe = rdb_disk_server_exe;
	char **args = argv;
	struct rdb_unit_scope scope;
	int npre;
	ssize_t n;
	pid_t pid;

	/* built here: the child runs async-signal-safe code only */
	argv[argc++] = "remusdbd";
	argv[argc++] = "--disk-server";
	argv[argc++] = (char *)vm;
	argv[argc++] = (char *)image;
	argv[argc++] = "3";
	argv[argc++] = ring_fd >= 0 ? "4" : "-1";
	argv[argc++] = notify_fd >= 0 ? "5" : "-1";
	argv[argc++] = life_out ? "6" : "-1";
	if (al_path && al_path[0]) {
		snprintf(max_arg, sizeof(max_arg), "%u", al_max);
		argv[argc++] = "--activity-log";
		argv[argc++] = (char *)al_path;
		if (al_max) {
			argv[argc++] = "--activity-log-max";
			argv[argc++] = max_arg;
		}
	}
	if (wmap_path && wmap_path[0]) {
		argv[argc++] = "--written-map";
		argv[argc++] = (char *)wmap_path;
	}
	argv[argc] = NULL;
	/* under systemd, in a scope of its own (sdunit.h): a stop or restart
	 * of remusdbd.service stops remusdbd alone (a primary's disk server
	 * still ends with the daemon, by its life socket), and its CPU and
	 * memory are its own */
	npre = rdb_units_scope_prefix(&scope, vm, "disk");
	if (npre > 0) {
		/* (systemd-run's own /proc/self/exe would be systemd-run:
		 * this daemon's binary by its pid, the same file even after
		 * an upgrade replaced it on disk) */
		if (!strcmp(rdb_disk_server_exe, "/proc/self/exe")) {
			snprintf(self_exe, sizeof(self_exe), "/proc/%d/exe",
				 (int)getpid());
			argv[0] = self_exe;
		} else {
			argv[0] = (char *)rdb_disk_server_exe;
		}
		memcpy(full, scope.pre, sizeof(char *) * (size_t)npre);
		memcpy(full + npre, argv, sizeof(char *) * (size_t)(argc + 1));
		exe = scope.pre[0];
		args = full;
	}

	rc = rdb_sock_listen_unix(sock_path, &listen_fd);
	if (rc < 0) {
		snprintf(err, errlen, "listen on %s: %s", sock_path, strerror(-rc));
		return rc;
	}
	if ((life_out && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, life) < 0) ||
	    pipe2(ep, O_CLOEXEC) < 0) {
		rc = -errno;
		snprintf(err, errlen, "disk server: %s", strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		snprintf(err, errlen, "disk server: fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		/* async-signal-safe only, up to exec: another thread of the
		 * daemon may have held any lock at the fork */
		int src[4] = { listen_fd, ring_fd, notify_fd, life[1] };
		int efd = ep[1], e;

		/* out of the way of 3..7 first, then into place */
		efd = fcntl(efd, F_DUPFD_CLOEXEC, 100);
		if (efd < 0)
			_exit(126);
		for (int i = 0; i < 4; i++) {
			hi[i] = src[i] < 0 ? -1 : fcntl(src[i], F_DUPFD_CLOEXEC, 100);
			if (src[i] >= 0 && hi[i] < 0)
				goto fail;
		}
		for (int i = 0; i < 4; i++) {
			if (hi[i] < 0)
				close(3 + i);
			else if (place_fd(hi[i], 3 + i) < 0)
				goto fail;
		}
		if (dup2(efd, 7) < 0 || fcntl(7, F_SETFD, FD_CLOEXEC) < 0)
			goto fail;
		efd = 7;
		close_range(8, ~0U, 0);
		execv(exe, args);
fail:
		e = errno;
		if (write(efd, &e, sizeof(e)) < 0)
			_exit(126);
		_exit(127);
	}
	close(ep[1]);
	ep[1] = -1;
	/* EOF: the exec happened (the pipe was close-on-exec) */
	do
		n = read(ep[0], &child_errno, sizeof(child_errno));
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		waitpid(pid, NULL, 0);
		rc = -child_errno;
		snprintf(err, errlen, "disk server: exec %s: %s", exe,
			 strerror(child_errno));
		goto out;
	}
	*pid_out = (int)pid;
	if (life_out) {
		*life_out = life[0];
		life[0] = -1;
	}
	rc = 0;
out:
	close(listen_fd);
	for (int i = 0; i < 2; i++) {
		if (life[i] >= 0)
			close(life[i]);
		if (ep[i] >= 0)
			close(ep[i]);
	}
	return rc;
}

static int sync_image(struct rdb_disk *dk)
{
	const struct rdb_dring_shared *sh = rdb_disk_stats(dk);
	uint64_t changes = atomic_load(&sh->writes) + atomic_load(&sh->zeroes) +
			   atomic_load(&sh->errors);

	if (fdatasync(dk->img_fd) < 0)
		return -errno;
	dk->syncs++;
	dk->synced_changes = changes;
	return 0;
}

int rdb_disk_set_replicated(struct rdb_disk *dk, bool on)
{
	const struct rdb_dring_shared *sh = rdb_disk_stats(dk);
	bool was = dk->replicated;
	int rc = 0;

	dk->replicated = on;
	if (dk->ring.sh)
		atomic_store(&dk->ring.sh->replicated, on ? 1 : 0);
	/* After the store: a flush the server answers from now on syncs
	 * itself; one it answered before is covered by this sync. */
	if (!on && was && dk->img_fd >= 0 &&
	    atomic_load(&sh->writes) + atomic_load(&sh->zeroes) +
	    atomic_load(&sh->errors) != dk->synced_changes) {
		uint64_t t0 = rdb_now_ns();

		rc = sync_image(dk);
		if (rc < 0 && dk->ring.sh)
			/* its activity log must not vouch for the image */
			atomic_store(&dk->ring.sh->image_sync_failed, 1);
		if (rc < 0)
			LOGVM(ERROR, dk->vm, "disk %s: syncing the image as "
			      "replication ends: %s", dk->image, strerror(-rc));
		else
			LOGVM(INFO, dk->vm, "disk %s synced as replication ends "
			      "(%.0f ms): the guest's flushes are durable here "
			      "again", dk->image,
			      (double)(rdb_now_ns() - t0) / RDB_NS_PER_MS);
	}
	return rc;
}

void rdb_disk_drain(struct rdb_disk *dk)
{
	const struct rdb_dring_rec *r;
	uint32_t lost;

	if (!dk->ring.sh)
		return;
	lost = atomic_load(&dk->ring.sh->lost);
	if (lost && !dk->lost_seen) {
		dk->lost_seen = true;
		if (dk->lost)
			dk->lost(dk->opaque, lost == RDB_DRING_OVERFLOW ?
				 "the disk server could not pass the guest's "
				 "changes on: its ring to remusdbd stayed full "
				 "past the checkpoint deadline" :
				 lost == RDB_DRING_ACTLOG ?
				 "the disk server's activity log could neither "
				 "be written nor invalidated: it may claim what "
				 "is untrue, this protection's generation is no "
				 "base for a resync" :
				 "the disk server could not read back a failed "
				 "change: the replica cannot be made equal");
	}
	while ((r = rdb_dring_peek(&dk->ring))) {
		if (r->op == RDB_DRING_READ) {
			const uint8_t *h = (const uint8_t *)(r + 1);

			for (uint32_t i = 0; dk->ridx && i < r->len / 8; i++) {
				uint64_t v;

				memcpy(&v, h + 8 * i, 8);
				if (v)
					rdb_readidx_insert(dk->ridx,
							   rdb_readidx_key(dk->ridx_dev,
									   r->off / RDB_READIDX_BLOCK + i),
							   v, dk->read_epoch);
			}
			rdb_dring_pop(&dk->ring);
			continue;
		}
		/* a change: whatever the index knew of its blocks is stale */
		if (dk->ridx && r->op != RDB_DISK_FLUSH)
			rdb_readidx_invalidate(dk->ridx, dk->ridx_dev, r->off,
					       r->len);
		if (dk->hook)
			dk->hook(dk->opaque, (enum rdb_disk_op)r->op, r->off,
				 r->len, (const uint8_t *)(r + 1));
		rdb_dring_pop(&dk->ring);
	}
}

void rdb_disk_set_read_tracking(struct rdb_disk *dk, struct rdb_readidx *ix,
				unsigned dev, uint64_t seed)
{
	struct rdb_dring_shared *sh = dk->ring.sh;

	dk->ridx_dev = dev;
	if (ix)
		rdb_readidx_clear(ix);
	if (sh) {
		atomic_store(&sh->read_seed, seed);
		atomic_store(&sh->track_reads, ix ? 1 : 0);
	}
	dk->ridx = sh ? ix : NULL;
}

void rdb_disk_set_recording(struct rdb_disk *dk, bool on)
{
	struct rdb_dring_shared *sh = dk->ring.sh;

	if (!sh)
		return;
	if (on) {
		/* what it put there before is in the image already */
		while (rdb_dring_peek(&dk->ring))
			rdb_dring_pop(&dk->ring);
		atomic_store(&sh->lost, RDB_DRING_OK);
		dk->lost_seen = false;
	}
	/* Not recording, changes no longer reach the index either: what it
	 * holds would go stale unseen. */
	if (dk->ridx)
		rdb_readidx_clear(dk->ridx);
	atomic_store(&sh->record, on ? 1 : 0);
}

static void on_notify(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	uint64_t v;

	(void)loop;
	(void)ev;
	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		LOGVM(WARN, ((struct rdb_disk *)opaque)->vm, "disk: eventfd: %s",
		      strerror(errno));
	rdb_disk_drain(opaque);
}

static int start_server(struct rdb_disk *dk, char *err, size_t errlen);

static void stop_watching(struct rdb_disk *dk)
{
	if (dk->life_fd >= 0) {
		rdb_evloop_del_fd(dk->loop, dk->life_fd);
		close(dk->life_fd);
		dk->life_fd = -1;
	}
}

/* Our end of the server's socketpair: readable only at its exit. */
static void on_life(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct rdb_disk *dk = opaque;
	char b[16], err[300] = "", why[160];
	int status = 0;
	ssize_t n = read(fd, b, sizeof(b));

	(void)loop;
	(void)ev;
	/* EOF or a reset: the server is gone (it never writes here) */
	if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
		return;
	stop_watching(dk);
	if (dk->pid > 0)
		waitpid(dk->pid, &status, 0);
	dk->pid = -1;
	snprintf(why, sizeof(why), "the disk server exited (status 0x%x)", status);
	LOGVM(ERROR, dk->vm, "%s: changes in flight may not have reached the "
	      "backup", why);
	rdb_disk_drain(dk);
	if (dk->lost)
		dk->lost(dk->opaque, why);
	if (rdb_now_ns() - dk->started_ns < RESTART_MIN_NS) {
		LOGVM(ERROR, dk->vm, "disk server exited %llu ms after its "
		      "start: not restarted, the disk %s is not served",
		      (unsigned long long)((rdb_now_ns() - dk->started_ns) /
					   RDB_NS_PER_MS), dk->image);
		return;
	}
	dk->restarts++;
	if (start_server(dk, err, sizeof(err)) < 0)
		LOGVM(ERROR, dk->vm, "restarting the disk server: %s", err);
	else
		LOGVM(WARN, dk->vm, "disk server restarted (pid %d): QEMU "
		      "reconnects its disk", dk->pid);
}

static int start_server(struct rdb_disk *dk, char *err, size_t errlen)
{
	int rc = spawn(dk->vm, dk->image, dk->sock_path, dk->ring_fd,
		       dk->notify_fd, dk->al_path, dk->al_max, dk->wmap_path,
		       &dk->life_fd, &dk->pid, err, errlen);

	if (rc < 0)
		return rc;
	dk->started_ns = rdb_now_ns();
	atomic_store(&dk->ring.sh->connected, 0);
	rc = rdb_evloop_add_fd(dk->loop, dk->life_fd, RDB_EV_READ, on_life, dk);
	if (rc < 0)
		snprintf(err, errlen, "event loop: %s", strerror(-rc));
	return rc;
}

int rdb_disk_open(struct rdb_disk *dk, struct rdb_evloop *loop,
		  const char *vm, const char *image, const char *sock_path,
		  uint64_t ring_bytes, uint64_t room_wait_ns,
		  const struct rdb_disk_logs *logs,
		  rdb_disk_hook hook, rdb_disk_lost_hook lost, void *opaque,
		  char *err, size_t errlen)
{
	int rc;

	dk->loop = loop;
	dk->hook = hook;
	dk->lost = lost;
	dk->opaque = opaque;
	snprintf(dk->vm, sizeof(dk->vm), "%s", vm);
	snprintf(dk->image, sizeof(dk->image), "%s", image);
	if (strlen(sock_path) >= sizeof(dk->sock_path)) {
		snprintf(err, errlen, "disk socket path too long: %s", sock_path);
		return -ENAMETOOLONG;
	}
	snprintf(dk->sock_path, sizeof(dk->sock_path), "%s", sock_path);
	if (logs && ((logs->activity_log &&
		      strlen(logs->activity_log) >= sizeof(dk->al_path)) ||
		     (logs->written_map &&
		      strlen(logs->written_map) >= sizeof(dk->wmap_path)))) {
		snprintf(err, errlen, "disk %s: activity log or written map "
			 "path too long", image);
		return -ENAMETOOLONG;
	}
	if (logs && logs->activity_log)
		snprintf(dk->al_path, sizeof(dk->al_path), "%s", logs->activity_log);
	if (logs && logs->written_map)
		snprintf(dk->wmap_path, sizeof(dk->wmap_path), "%s", logs->written_map);
	dk->al_max = logs ? logs->activity_log_max : 0;
	/* one server per image (disksrv.h): say it here, not as a server
	 * that died at its start */
	rc = rdb_disk_image_free(image, 0, err, errlen);
	if (rc < 0)
		return rc;
	rc = rdb_disk_open_image(image, &dk->img_fd, &dk->size, err, errlen);
	if (rc < 0)
		return rc;
	/* A daemon before us may have left the guest's flushes to a backup
	 * (a kill while protected): they are durable here from now on. */
	rc = sync_image(dk);
	if (rc < 0) {
		snprintf(err, errlen, "disk image %s: fdatasync: %s", image,
			 strerror(-rc));
		return rc;
	}
	if (ring_bytes < RDB_DRING_MIN)
		ring_bytes = RDB_DRING_MIN;
	dk->ring_bytes = ring_bytes & ~(uint64_t)15;
	dk->room_wait_ns = room_wait_ns;
	dk->map_len = rdb_dring_map_size(dk->ring_bytes);
	dk->ring_fd = memfd_create("remusdb-disk-ring", MFD_CLOEXEC);
	if (dk->ring_fd < 0 || ftruncate(dk->ring_fd, (off_t)dk->map_len) < 0) {
		rc = -errno;
		snprintf(err, errlen, "disk ring: %s", strerror(errno));
		return rc;
	}
	dk->map = mmap(NULL, dk->map_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		       dk->ring_fd, 0);
	if (dk->map == MAP_FAILED) {
		rc = -errno;
		dk->map = NULL;
		snprintf(err, errlen, "disk ring: mmap: %s", strerror(errno));
		return rc;
	}
	rdb_dring_init(&dk->ring, dk->map, dk->ring_bytes);
	atomic_store(&dk->ring.sh->room_wait_ns, room_wait_ns);
	if (logs && logs->keep_gen && dk->al_path[0]) {
		atomic_store(&dk->ring.sh->al_gen, logs->keep_gen);
		atomic_store(&dk->ring.sh->al_keep, 1);
	}
	dk->notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (dk->notify_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "disk eventfd: %s", strerror(errno));
		return rc;
	}
	rc = rdb_evloop_add_fd(loop, dk->notify_fd, RDB_EV_READ, on_notify, dk);
	if (rc < 0) {
		snprintf(err, errlen, "event loop: %s", strerror(-rc));
		close(dk->notify_fd);
		dk->notify_fd = -1;
		return rc;
	}
	return start_server(dk, err, errlen);
}

void rdb_disk_close(struct rdb_disk *dk)
{
	stop_watching(dk);	/* the server sees EOF and exits */
	if (dk->pid > 0) {
		uint64_t deadline = rdb_now_ns() + CLOSE_WAIT_NS;

		while (waitpid(dk->pid, NULL, WNOHANG) == 0) {
			if (rdb_now_ns() > deadline) {
				LOGVM(WARN, dk->vm, "disk server %d did not exit: "
				      "killed", dk->pid);
				kill(dk->pid, SIGKILL);
				waitpid(dk->pid, NULL, 0);
				break;
			}
			usleep(1000);
		}
		dk->pid = -1;
		unlink(dk->sock_path);
	}
	if (dk->notify_fd >= 0) {
		rdb_evloop_del_fd(dk->loop, dk->notify_fd);
		close(dk->notify_fd);
		dk->notify_fd = -1;
	}
	if (dk->map) {
		munmap(dk->map, dk->map_len);
		dk->map = NULL;
		dk->ring.sh = NULL;
	}
	if (dk->ring_fd >= 0) {
		close(dk->ring_fd);
		dk->ring_fd = -1;
	}
	if (dk->img_fd >= 0) {
		close(dk->img_fd);
		dk->img_fd = -1;
	}
}

int rdb_disk_serve_child(const char *vm, const char *image,
			 const char *sock_path, const char *written_map,
			 int *pid_out, char *err, size_t errlen)
{
	int rc = rdb_disk_image_free(image, 0, err, errlen);

	if (rc < 0)
		return rc;
	return spawn(vm, image, sock_path, -1, -1, NULL, 0, written_map, NULL,
		     pid_out, err, errlen);
}

void rdb_disk_set_log_generation(struct rdb_disk *dk, uint64_t gen)
{
	if (dk->ring.sh)
		atomic_store(&dk->ring.sh->al_gen, gen);
}

void rdb_disk_keep_log(struct rdb_disk *dk, bool keep)
{
	if (dk->ring.sh)
		atomic_store(&dk->ring.sh->al_keep, keep ? 1 : 0);
}

uint64_t rdb_disk_adopt_log(struct rdb_disk *dk)
{
	uint64_t pos;

	if (!dk->ring.sh)
		return 0;
	pos = atomic_load(&dk->ring.sh->head);
	atomic_store(&dk->ring.sh->al_adopt_pos, pos);
	atomic_fetch_add(&dk->ring.sh->al_adopt_req, 1);
	return pos;
}

void rdb_disk_set_committed_pos(struct rdb_disk *dk, uint64_t pos)
{
	if (dk->ring.sh && pos > atomic_load(&dk->ring.sh->committed_pos))
		atomic_store(&dk->ring.sh->committed_pos, pos);
}

uint64_t rdb_disk_ring_pos(const struct rdb_disk *dk)
{
	return dk->ring.sh ? atomic_load(&dk->ring.sh->tail) : 0;
}

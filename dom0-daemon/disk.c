// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "disk"
#include "disk.h"
#include "fileio.h"
#include "log.h"
#include "sockutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"

/* QEMU's export name is free-form; we serve one export per socket. */
#define EXPORT_NAME ""

void rdb_disk_init(struct rdb_disk *dk)
{
	memset(dk, 0, sizeof(*dk));
	dk->img_fd = dk->listen_fd = dk->client_fd = -1;
}

int rdb_disk_pread(struct rdb_disk *dk, uint64_t off, uint8_t *dst,
		   uint64_t len)
{
	return rdb_pread_all(dk->img_fd, dst, len, off);
}

static int failed(struct rdb_disk *dk, const char *what, uint64_t off,
		  uint32_t len, int rc)
{
	dk->errors++;
	LOGVM(ERROR, dk->vm, "disk %s: %s of %u bytes at %llu failed: %s "
	      "(the guest gets an I/O error)", dk->image, what, len,
	      (unsigned long long)off, strerror(-rc));
	return rc;
}

static int op_read(void *opaque, uint64_t off, uint32_t len, uint8_t *dst)
{
	struct rdb_disk *dk = opaque;
	int rc = rdb_pread_all(dk->img_fd, dst, len, off);

	if (rc < 0)
		return failed(dk, "read", off, len, rc);
	dk->reads++;
	dk->read_bytes += len;
	return 0;
}

static int sync_image(struct rdb_disk *dk)
{
	if (fdatasync(dk->img_fd) < 0)
		return -errno;
	dk->syncs++;
	dk->dirty = false;
	return 0;
}

/* A FLUSH or FUA write: durable here, or carried by the backup. */
static int flush_point(struct rdb_disk *dk)
{
	return dk->replicated ? 0 : sync_image(dk);
}

int rdb_disk_set_replicated(struct rdb_disk *dk, bool on)
{
	int rc = 0;

	if (!on && dk->replicated && dk->dirty && dk->img_fd >= 0) {
		uint64_t t0 = rdb_now_ns();

		rc = sync_image(dk);
		if (rc < 0)
			LOGVM(ERROR, dk->vm, "disk %s: syncing the image as "
			      "replication ends: %s", dk->image, strerror(-rc));
		else
			LOGVM(INFO, dk->vm, "disk %s synced as replication ends "
			      "(%.0f ms): the guest's flushes are durable here "
			      "again", dk->image,
			      (double)(rdb_now_ns() - t0) / RDB_NS_PER_MS);
	}
	dk->replicated = on;
	return rc;
}

static int op_write(void *opaque, uint64_t off, uint32_t len,
		    const uint8_t *src, bool fua)
{
	struct rdb_disk *dk = opaque;
	int rc = rdb_pwrite_all(dk->img_fd, src, len, off);

	if (rc == 0)
		dk->dirty = true;
	if (rc == 0 && fua)
		rc = flush_point(dk);
	if (rc < 0)
		return failed(dk, "write", off, len, rc);
	dk->writes++;
	dk->written_bytes += len;
	if (dk->hook) {
		dk->hook(dk->opaque, RDB_DISK_WRITE, off, len, src);
		if (fua)
			dk->hook(dk->opaque, RDB_DISK_FLUSH, 0, 0, NULL);
	}
	return 0;
}

static int op_flush(void *opaque)
{
	struct rdb_disk *dk = opaque;
	int rc = flush_point(dk);

	if (rc < 0)
		return failed(dk, "flush", 0, 0, rc);
	dk->flushes++;
	if (dk->hook)
		dk->hook(dk->opaque, RDB_DISK_FLUSH, 0, 0, NULL);
	return 0;
}

/* Both trim and write-zeroes leave zeroes behind on the primary, so the
 * replica can be made equal by zeroing the same range. */
static int zero(struct rdb_disk *dk, uint64_t off, uint32_t len, bool punch)
{
	int rc = rdb_zero_range(dk->img_fd, off, len, punch);

	if (rc < 0)
		return failed(dk, punch ? "trim" : "write-zeroes", off, len, rc);
	dk->dirty = true;
	dk->zeroes++;
	if (dk->hook)
		dk->hook(dk->opaque, RDB_DISK_ZERO, off, len, NULL);
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

static void drop_client(struct rdb_disk *dk)
{
	if (dk->client_fd >= 0) {
		rdb_evloop_del_fd(dk->loop, dk->client_fd);
		close(dk->client_fd);
		dk->client_fd = -1;
	}
	if (dk->nbd_init) {
		rdb_nbd_server_dispose(&dk->nbd);
		dk->nbd_init = false;
	}
}

static void want(struct rdb_disk *dk)
{
	rdb_evloop_mod_fd(dk->loop, dk->client_fd, RDB_EV_READ |
			  (dk->nbd.out.len ? RDB_EV_WRITE : 0));
}

static void on_client(struct rdb_evloop *loop, int fd, unsigned ev,
		      void *opaque)
{
	struct rdb_disk *dk = opaque;
	uint8_t b[64 << 10];
	int rc = 0;

	(void)loop;
	/* Replies first: a client that does not read its replies must not
	 * make us buffer without bound, so we read only when they are out. */
	if (dk->nbd.out.len) {
		rc = rdb_buf_write_fd(&dk->nbd.out, fd);
		if (rc < 0 && rc != -EAGAIN)
			goto gone;
	}
	if ((ev & RDB_EV_READ) && dk->nbd.out.len < (8u << 20)) {
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
			rc = rdb_nbd_server_feed(&dk->nbd, b, (size_t)n);
			if (rc == 1) {
				LOGVM(INFO, dk->vm, "disk client disconnected");
				drop_client(dk);
				return;
			}
			if (rc < 0) {
				LOGVM(ERROR, dk->vm, "disk: NBD client broke the "
				      "protocol: %s", rdb_nbd_server_error(&dk->nbd));
				drop_client(dk);
				return;
			}
			rc = rdb_buf_write_fd(&dk->nbd.out, fd);
			if (rc < 0 && rc != -EAGAIN)
				goto gone;
		}
	}
	want(dk);
	return;
gone:
	LOGVM(WARN, dk->vm, "disk client gone: %s",
	      rc == -ECONNRESET ? "QEMU disconnected" : strerror(-rc));
	drop_client(dk);
}

static void on_accept(struct rdb_evloop *loop, int fd, unsigned ev,
		      void *opaque)
{
	struct rdb_disk *dk = opaque;
	int c = rdb_sock_accept(fd), rc;

	(void)ev;
	if (c < 0)
		return;
	/* A QEMU that reconnects has given up on the old connection. */
	if (dk->client_fd >= 0) {
		LOGVM(WARN, dk->vm, "disk: new NBD client replaces the old one");
		drop_client(dk);
	}
	rc = rdb_nbd_server_init(&dk->nbd, EXPORT_NAME, dk->size, &disk_ops, dk);
	if (rc == 0)
		rc = rdb_evloop_add_fd(loop, c, RDB_EV_READ | RDB_EV_WRITE,
				       on_client, dk);
	if (rc < 0) {
		if (rc != -ENOMEM)
			rdb_nbd_server_dispose(&dk->nbd);
		close(c);
		return;
	}
	dk->nbd_init = true;
	dk->client_fd = c;
	dk->connects++;
	LOGVM(INFO, dk->vm, "disk client connected (%s, %llu bytes)",
	      dk->image, (unsigned long long)dk->size);
}

int rdb_disk_open(struct rdb_disk *dk, struct rdb_evloop *loop,
		  const char *vm, const char *image, const char *sock_path,
		  rdb_disk_hook hook, void *opaque, char *err, size_t errlen)
{
	struct stat sb;
	int rc;

	dk->loop = loop;
	dk->hook = hook;
	dk->opaque = opaque;
	snprintf(dk->vm, sizeof(dk->vm), "%s", vm);
	snprintf(dk->image, sizeof(dk->image), "%s", image);
	if (strlen(sock_path) >= sizeof(dk->sock_path)) {
		snprintf(err, errlen, "disk socket path too long: %s", sock_path);
		return -ENAMETOOLONG;
	}
	snprintf(dk->sock_path, sizeof(dk->sock_path), "%s", sock_path);
	dk->img_fd = open(image, O_RDWR | O_CLOEXEC);
	if (dk->img_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "disk image %s: %s", image, strerror(errno));
		return rc;
	}
	if (fstat(dk->img_fd, &sb) < 0 || !S_ISREG(sb.st_mode) ||
	    sb.st_size <= 0 || sb.st_size % 512) {
		snprintf(err, errlen, "disk image %s: not a regular file whose "
			 "size is a non-zero multiple of 512", image);
		return -EINVAL;
	}
	dk->size = (uint64_t)sb.st_size;
	/* A daemon before us may have left the guest's flushes to a backup
	 * (a kill while protected): they are durable here from now on. */
	rc = sync_image(dk);
	if (rc < 0) {
		snprintf(err, errlen, "disk image %s: fdatasync: %s", image,
			 strerror(-rc));
		return rc;
	}
	rc = rdb_sock_listen_unix(sock_path, &dk->listen_fd);
	if (rc < 0) {
		snprintf(err, errlen, "listen on %s: %s", sock_path, strerror(-rc));
		return rc;
	}
	rc = rdb_evloop_add_fd(loop, dk->listen_fd, RDB_EV_READ, on_accept, dk);
	if (rc < 0)
		snprintf(err, errlen, "event loop: %s", strerror(-rc));
	return rc;
}

void rdb_disk_close(struct rdb_disk *dk)
{
	drop_client(dk);
	if (dk->listen_fd >= 0) {
		rdb_evloop_del_fd(dk->loop, dk->listen_fd);
		close(dk->listen_fd);
		unlink(dk->sock_path);
		dk->listen_fd = -1;
	}
	if (dk->img_fd >= 0) {
		close(dk->img_fd);
		dk->img_fd = -1;
	}
}

bool rdb_disk_connected(const struct rdb_disk *dk)
{
	return dk->client_fd >= 0;
}

int rdb_disk_serve_child(const char *vm, const char *image,
			 const char *sock_path, int *pid_out, char *err,
			 size_t errlen)
{
	uint64_t deadline;
	struct stat sb;
	pid_t pid;
	int status;

	unlink(sock_path);
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return -errno;
	}
	if (pid == 0) {
		struct rdb_evloop *loop = NULL;
		struct rdb_disk dk;
		char e[300] = "";

		/* Nothing of the daemon's: its listening sockets must not
		 * outlive it in here. */
		close_range(3, ~0U, 0);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		rdb_disk_init(&dk);
		if (rdb_evloop_create(&loop) < 0 ||
		    rdb_disk_open(&dk, loop, vm, image, sock_path, NULL, NULL,
				  e, sizeof(e)) < 0) {
			LOGVM(ERROR, vm, "disk server: %s", e[0] ? e : "no event loop");
			_exit(1);
		}
		LOGVM(INFO, vm, "disk server (pid %d) serving %s on %s",
		      (int)getpid(), image, sock_path);
		rdb_evloop_run(loop);
		_exit(0);
	}
	deadline = rdb_now_ns() + 5 * RDB_NS_PER_S;
	while (stat(sock_path, &sb) < 0 || !S_ISSOCK(sb.st_mode)) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			snprintf(err, errlen, "disk server exited (status 0x%x)", status);
			return -EIO;
		}
		if (rdb_now_ns() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			snprintf(err, errlen, "disk server did not listen within 5 s");
			return -ETIMEDOUT;
		}
		usleep(1000);
	}
	*pid_out = (int)pid;
	return 0;
}

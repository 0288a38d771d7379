// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "nic"
#include "nic.h"
#include "log.h"
#include "sockutil.h"
#include "tap.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void rdb_nic_init(struct rdb_nic *n)
{
	memset(n, 0, sizeof(*n));
	n->listen_fd = n->fd = n->tap_fd = -1;
	rdb_netstream_init(&n->ns);
}

static void want(struct rdb_nic *n)
{
	rdb_evloop_mod_fd(n->loop, n->fd, RDB_EV_READ |
			  (rdb_netstream_pending(&n->ns) ? RDB_EV_WRITE : 0));
}

static void drop_qemu(struct rdb_nic *n)
{
	rdb_evloop_del_fd(n->loop, n->fd);
	close(n->fd);
	n->fd = -1;
	rdb_netstream_reset(&n->ns);
}

static void on_qemu(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct rdb_nic *n = opaque;
	int rc = 0;

	if (ev & RDB_EV_READ)
		rc = rdb_netstream_read(&n->ns, fd, n->from_guest, n->opaque);
	if ((rc == 0 || rc == -EAGAIN) && (ev & RDB_EV_WRITE))
		rc = rdb_netstream_flush(&n->ns, fd);
	if (rc < 0 && rc != -EAGAIN) {
		LOGVM(WARN, n->vm, "guest NIC stream closed: %s",
		      rc == -ECONNRESET ? "QEMU disconnected" :
		      rc == -EPROTO ? "bad frame length" : strerror(-rc));
		drop_qemu(n);
		return;
	}
	want(n);
}

static void on_accept(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct rdb_nic *n = opaque;
	int c = rdb_sock_accept(fd);

	if (c < 0)
		return;
	/* QEMU reconnected: the old stream is dead. */
	if (n->fd >= 0)
		drop_qemu(n);
	if (rdb_evloop_add_fd(loop, c, RDB_EV_READ, on_qemu, n) < 0) {
		close(c);
		return;
	}
	n->fd = c;
	LOGVM(INFO, n->vm, "guest NIC connected (%s)", n->path);
}

static void to_guest(void *opaque, const uint8_t *frame, size_t len)
{
	struct rdb_nic *n = opaque;

	if (n->from_wire && !n->from_wire(n->opaque, frame, len))
		return;
	if (n->fd >= 0)
		rdb_netstream_queue(&n->ns, frame, len);
}

void rdb_nic_to_guest(struct rdb_nic *n, const uint8_t *frame, size_t len)
{
	if (n->fd < 0)
		return;
	rdb_netstream_queue(&n->ns, frame, len);
	rdb_netstream_flush(&n->ns, n->fd);
	want(n);
}

void rdb_nic_set_wire_filter(struct rdb_nic *n,
			     bool (*f)(void *opaque, const uint8_t *frame, size_t len))
{
	n->from_wire = f;
}

void rdb_nic_poll_guest(struct rdb_nic *n)
{
	if (n->fd >= 0)
		on_qemu(n->loop, n->fd, RDB_EV_READ, n);
}

static void on_tap(struct rdb_evloop *loop, int fd, unsigned ev, void *opaque)
{
	struct rdb_nic *n = opaque;

	rdb_tap_read_all(fd, to_guest, n);
	if (n->fd >= 0 && rdb_netstream_pending(&n->ns)) {
		rdb_netstream_flush(&n->ns, n->fd);
		want(n);
	}
}

int rdb_nic_open(struct rdb_nic *n, struct rdb_evloop *loop, const char *vm,
		 const char *sock_path, const char *tap, rdb_frame_cb from_guest,
		 void *opaque, char *err, size_t errlen)
{
	int rc;

	n->loop = loop;
	n->from_guest = from_guest;
	n->opaque = opaque;
	snprintf(n->vm, sizeof(n->vm), "%s", vm);
	snprintf(n->path, sizeof(n->path), "%s", sock_path);
	rc = rdb_tap_open(tap, &n->tap_fd);
	if (rc < 0) {
		snprintf(err, errlen, "tap %s: %s", tap, strerror(-rc));
		return rc;
	}
	rc = rdb_sock_listen_unix(sock_path, &n->listen_fd);
	if (rc < 0) {
		snprintf(err, errlen, "listen on %s: %s", sock_path, strerror(-rc));
		return rc;
	}
	rc = rdb_evloop_add_fd(loop, n->tap_fd, RDB_EV_READ, on_tap, n);
	if (rc == 0)
		rc = rdb_evloop_add_fd(loop, n->listen_fd, RDB_EV_READ, on_accept, n);
	if (rc < 0)
		snprintf(err, errlen, "event loop: %s", strerror(-rc));
	return rc;
}

void rdb_nic_close(struct rdb_nic *n)
{
	if (n->fd >= 0)
		drop_qemu(n);
	if (n->listen_fd >= 0) {
		rdb_evloop_del_fd(n->loop, n->listen_fd);
		close(n->listen_fd);
		unlink(n->path);
		n->listen_fd = -1;
	}
	if (n->tap_fd >= 0) {
		rdb_evloop_del_fd(n->loop, n->tap_fd);
		close(n->tap_fd);
		n->tap_fd = -1;
	}
	rdb_netstream_dispose(&n->ns);
}

/* Out of the loop, or back in under n's address. */
static void loop_detach(struct rdb_nic *n)
{
	if (n->fd >= 0)
		rdb_evloop_del_fd(n->loop, n->fd);
	if (n->listen_fd >= 0)
		rdb_evloop_del_fd(n->loop, n->listen_fd);
	if (n->tap_fd >= 0)
		rdb_evloop_del_fd(n->loop, n->tap_fd);
}

static int loop_attach(struct rdb_nic *n)
{
	int rc = 0;

	if (n->tap_fd >= 0)
		rc = rdb_evloop_add_fd(n->loop, n->tap_fd, RDB_EV_READ, on_tap, n);
	if (rc == 0 && n->listen_fd >= 0)
		rc = rdb_evloop_add_fd(n->loop, n->listen_fd, RDB_EV_READ,
				       on_accept, n);
	if (rc == 0 && n->fd >= 0) {
		rc = rdb_evloop_add_fd(n->loop, n->fd, RDB_EV_READ, on_qemu, n);
		if (rc == 0)
			want(n);
	}
	return rc;
}

int rdb_nic_move(struct rdb_nic *dst, struct rdb_nic *src,
		 rdb_frame_cb from_guest, void *opaque)
{
	struct rdb_nic was = *src;
	int rc;

	loop_detach(src);
	*dst = *src;
	rdb_nic_init(src);
	dst->from_guest = from_guest;
	dst->opaque = opaque;
	dst->from_wire = NULL;
	rc = loop_attach(dst);
	if (rc < 0) {
		/* src keeps its sockets, tap and callbacks, as before */
		loop_detach(dst);
		rdb_nic_init(dst);
		*src = was;
		if (loop_attach(src) < 0)
			LOG(ERROR, "%s: NIC left out of the event loop (%s): its "
			    "frames stop", src->vm, strerror(-rc));
	}
	return rc;
}

void rdb_nic_to_wire(struct rdb_nic *n, const uint8_t *frame, size_t len)
{
	if (n->tap_fd >= 0)
		rdb_tap_write(n->tap_fd, frame, len);
}

bool rdb_nic_connected(const struct rdb_nic *n)
{
	return n->fd >= 0;
}

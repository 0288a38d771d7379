// SPDX-License-Identifier: GPL-2.0-only
/*
 * The QEMU/KVM backend (hv.h): the checkpoint stream is QEMU's COLO
 * migration stream (colo_stream.h), control is QMP (qmp.h), and a backup
 * restores into a fresh QEMU, its own or libvirt's (lvrestore.h), fed a
 * migration stream built from the committed state (restore.h).
 */
#define RDB_COMPONENT "qemu"
#include "hv.h"
#include "sdunit.h"
#include "clock.h"
#include "cpulist.h"
#include "log.h"
#include "sockutil.h"
#include "qemu/colo_stream.h"
#include "qemu/lvrestore.h"
#include "qemu/qmp.h"
#include "qemu/restore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* From the restored QEMU's start to its QMP answering. */
#define START_DEADLINE_NS (10 * RDB_NS_PER_S)

/* ---- the stream ---- */

/* With x-colo-mapped-ram, a block QEMU keeps in shared memory is mapped
 * here read-only, and its pages at checkpoints are read from it. */
struct rdb_hv_stream {
	struct rdb_colo_parser parser;
	struct rdb_colo_ops ops;
	const struct rdb_hv_stream_cb *cb;
	void *opaque;
	struct {
		const uint8_t *base;	/* NULL: not mapped */
		size_t len;
	} map[RDB_MAX_RAM_BLOCKS];
};

static int s_config(void *o, const uint8_t *section, size_t len)
{
	struct rdb_hv_stream *s = o;

	return s->cb->config(s->opaque, section, len);
}

static int s_ram_blocks(void *o, const struct rdb_ram_block *blocks, size_t n)
{
	struct rdb_hv_stream *s = o;

	return s->cb->ram_blocks(s->opaque, blocks, n);
}

static int s_page(void *o, uint32_t block, uint64_t offset,
		  const uint8_t *data, uint8_t fill)
{
	struct rdb_hv_stream *s = o;

	return s->cb->page(s->opaque, block, offset, data, fill);
}

static int s_epoch_end(void *o, uint64_t epoch, const uint8_t *dev, size_t len)
{
	struct rdb_hv_stream *s = o;

	return s->cb->epoch_end(s->opaque, epoch, dev, len);
}

static int s_checkpoint_request(void *o, uint64_t epoch)
{
	struct rdb_hv_stream *s = o;

	return s->cb->checkpoint_request(s->opaque, epoch);
}

static int s_initial_stop(void *o)
{
	struct rdb_hv_stream *s = o;

	return s->cb->initial_stop ? s->cb->initial_stop(s->opaque) : 0;
}

/* The protection fails at its start: say how to go on without the mapping. */
static int map_failed(struct rdb_hv_stream *s, int rc)
{
	(void)s;
	LOG(ERROR, "checkpoints cannot read the guest's pages from QEMU's shared "
	    "memory: protection fails; shared_ram = false in the VM's file "
	    "keeps them on the checkpoint stream");
	return rc;
}

/*
 * Block blk's memory, passed by QEMU: mapped read-only (reopened
 * O_RDONLY, so no bug here can write guest RAM) and shared.  Refused
 * unless it is a regular file (a memfd is one) holding the whole block.
 */
static int s_map_block(void *o, uint32_t blk, int fd, uint64_t fd_offset,
		       uint64_t length)
{
	struct rdb_hv_stream *s = o;
	struct stat st;
	char path[64];
	void *m;
	int ro, rc = 0;

	if (fstat(fd, &st) < 0)
		rc = -errno;
	else if (!S_ISREG(st.st_mode))
		rc = -EBADF;
	else if ((uint64_t)st.st_size < fd_offset ||
		 (uint64_t)st.st_size - fd_offset < length)
		rc = -ERANGE;
	if (rc == -ERANGE)
		LOG(ERROR, "RAM block %s: QEMU's memory file is too short (%lld "
		    "bytes for %llu at offset %llu)", s->parser.blocks[blk].idstr,
		    (long long)st.st_size, (unsigned long long)length,
		    (unsigned long long)fd_offset);
	else if (rc < 0)
		LOG(ERROR, "RAM block %s: QEMU's memory file: %s",
		    s->parser.blocks[blk].idstr, rc == -EBADF ?
		    "not a regular file or memfd" : strerror(-rc));
	if (rc < 0) {
		close(fd);
		return map_failed(s, rc);
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	close(fd);
	if (ro < 0) {
		rc = -errno;
		LOG(ERROR, "RAM block %s: reopening QEMU's memory file read-only: %s",
		    s->parser.blocks[blk].idstr, strerror(-rc));
		return map_failed(s, rc);
	}
	m = mmap(NULL, length, PROT_READ, MAP_SHARED, ro, (off_t)fd_offset);
	rc = m == MAP_FAILED ? -errno : 0;
	close(ro);
	if (rc < 0) {
		LOG(ERROR, "RAM block %s: mapping QEMU's memory (%llu bytes): %s",
		    s->parser.blocks[blk].idstr, (unsigned long long)length,
		    strerror(-rc));
		return map_failed(s, rc);
	}
	s->map[blk].base = m;
	s->map[blk].len = length;
	LOG(INFO, "RAM block %s (%llu MiB): checkpoints read its pages from "
	    "QEMU's shared memory", s->parser.blocks[blk].idstr,
	    (unsigned long long)(length >> 20));
	return 0;
}

static int s_mapped_page(void *o, uint32_t blk, uint64_t offset)
{
	struct rdb_hv_stream *s = o;

	/* (the parser checked the block is mapped and offset within it) */
	return s->cb->page(s->opaque, blk, offset, s->map[blk].base + offset, 0);
}

static int stream_new(struct rdb_hv_stream **out,
		      const struct rdb_hv_stream_cb *cb, void *opaque)
{
	struct rdb_hv_stream *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return -ENOMEM;
	s->cb = cb;
	s->opaque = opaque;
	s->ops = (struct rdb_colo_ops){
		.config = s_config,
		.ram_blocks = s_ram_blocks,
		.page = s_page,
		.map_block = s_map_block,
		.mapped_page = s_mapped_page,
		.epoch_end = s_epoch_end,
		.checkpoint_request = s_checkpoint_request,
		.initial_stop = s_initial_stop,
	};
	rc = rdb_colo_parser_init(&s->parser, &s->ops, s);
	if (rc < 0) {
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

static int stream_feed(struct rdb_hv_stream *s, const uint8_t *buf, size_t len)
{
	return rdb_colo_parser_feed(&s->parser, buf, len);
}

static int stream_take_fd(struct rdb_hv_stream *s, int fd)
{
	return rdb_colo_parser_take_fd(&s->parser, fd);
}

static const char *stream_error(const struct rdb_hv_stream *s)
{
	return rdb_colo_parser_error(&s->parser);
}

static void stream_free(struct rdb_hv_stream *s)
{
	if (!s)
		return;
	rdb_colo_parser_dispose(&s->parser);
	for (size_t i = 0; i < RDB_MAX_RAM_BLOCKS; i++)
		if (s->map[i].base)
			munmap((void *)s->map[i].base, s->map[i].len);
	free(s);
}

static size_t reply(enum rdb_hv_reply r, uint8_t out[RDB_HV_REPLY_MAX_BYTES])
{
	switch (r) {
	case RDB_HV_START:
		rdb_colo_msg_encode(RDB_COLO_CHECKPOINT_READY, out);
		return 4;
	case RDB_HV_STOP:
		rdb_colo_msg_encode(RDB_COLO_CHECKPOINT_REPLY, out);
		return 4;
	case RDB_HV_RESUME:
		/* RECEIVED then LOADED, as QEMU reads them from one buffer */
		rdb_colo_msg_encode(RDB_COLO_VMSTATE_RECEIVED, out);
		rdb_colo_msg_encode(RDB_COLO_VMSTATE_LOADED, out + 4);
		return 8;
	case RDB_HV_REPLY__MAX:
		break;
	}
	return 0;
}

/* ---- control: QMP ---- */

struct rdb_hv_ctl {
	struct rdb_qmp qmp;
};

static int ctl_open(struct rdb_hv_ctl **out, const char *path, const char *vm,
		    uint64_t deadline_ns, char *err, size_t errlen)
{
	struct rdb_hv_ctl *c = calloc(1, sizeof(*c));
	int rc;

	if (!c) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	rc = rdb_qmp_connect(&c->qmp, path, vm, deadline_ns);
	if (rc < 0) {
		snprintf(err, errlen, "QMP %s: %s", path,
			 c->qmp.last_error[0] ? c->qmp.last_error : strerror(-rc));
		rdb_qmp_close(&c->qmp);
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

static void ctl_close(struct rdb_hv_ctl *c)
{
	if (!c)
		return;
	rdb_qmp_close(&c->qmp);
	free(c);
}

static int ctl_fd(const struct rdb_hv_ctl *c)
{
	return rdb_qmp_fd(&c->qmp);
}

static const char *ctl_error(const struct rdb_hv_ctl *c)
{
	return rdb_qmp_last_error(&c->qmp);
}

static int stop(struct rdb_hv_ctl *c, uint64_t deadline_ns)
{
	return rdb_qmp_stop(&c->qmp, deadline_ns);
}

static int cont(struct rdb_hv_ctl *c, uint64_t deadline_ns)
{
	return rdb_qmp_cont(&c->qmp, deadline_ns);
}

static int guest(struct rdb_hv_ctl *c, enum rdb_hv_guest *out,
		 uint64_t deadline_ns)
{
	static const char *const loading[] = {
		"inmigrate", "prelaunch", "finish-migrate",
	};
	char status[32];
	int rc = rdb_qmp_query_status(&c->qmp, status, sizeof(status),
				      deadline_ns);

	if (rc < 0)
		return rc;
	*out = RDB_HV_GUEST_OTHER;
	if (strcmp(status, "running") == 0)
		*out = RDB_HV_GUEST_RUNNING;
	else if (strcmp(status, "paused") == 0)
		*out = RDB_HV_GUEST_PAUSED;
	for (size_t i = 0; i < sizeof(loading) / sizeof(loading[0]); i++)
		if (strcmp(status, loading[i]) == 0)
			*out = RDB_HV_GUEST_LOADING;
	if (*out == RDB_HV_GUEST_OTHER)
		snprintf(c->qmp.last_error, sizeof(c->qmp.last_error),
			 "status %s", status);
	return 0;
}

/*
 * With RDB_HV_CKPT_SHARED_RAM and the guest's main RAM (pc.ram) shared,
 * capability x-colo-mapped-ram (QEMU patch 0007) is asked for: a RAM
 * block QEMU keeps in shared memory (a memfd or a shared file backend)
 * is passed over the stream once, and each checkpoint's pages of it are
 * read from there (colo_stream.h).  A QEMU without the capability is not
 * an error: its stream carries the pages.  Otherwise it is switched off,
 * in a QEMU that knows it (a capability outlives a protection in the
 * same QEMU): with it, QEMU's main loop waits for the end of every
 * checkpoint, which is only worth it when pages are read from memory.
 */
static int checkpoint_start(struct rdb_hv_ctl *c, const char *stream_path,
			    unsigned checkpoint_ms, unsigned flags,
			    uint64_t deadline_ns)
{
	bool mapped = false;
	char uri[160];
	int rc;

	if ((size_t)snprintf(uri, sizeof(uri), "unix:%s", stream_path) >=
	    sizeof(uri))
		return -ENAMETOOLONG;
	if (flags & RDB_HV_CKPT_SHARED_RAM) {
		rc = rdb_qmp_memdev_shared(&c->qmp, RDB_RESTORE_SHARED_BLOCK,
					   &mapped, deadline_ns);
		if (rc == -EREMOTEIO)
			mapped = false;		/* no query-memdev: not shared */
		else if (rc < 0)
			return rc;
	}
	/* the mapped capability after x-colo (QEMU refuses it without) */
	rc = rdb_qmp_colo_caps(&c->qmp, deadline_ns);
	if (rc < 0)
		return rc;
	rc = rdb_qmp_set_capability(&c->qmp, RDB_QMP_CAP_MAPPED_RAM, mapped,
				    deadline_ns);
	if (rc == -EREMOTEIO) {
		if (mapped)
			LOG(INFO, "%s: QEMU has no %s (%s): checkpoints carry the "
			    "guest's pages over the stream", c->qmp.vm,
			    RDB_QMP_CAP_MAPPED_RAM, c->qmp.last_error);
		rc = 0;
	}
	if (rc == 0)
		rc = rdb_qmp_migrate_colo(&c->qmp, uri, checkpoint_ms, deadline_ns);
	return rc;
}

static int checkpoint_end(struct rdb_hv_ctl *c, uint64_t deadline_ns)
{
	return rdb_qmp_colo_lost_heartbeat(&c->qmp, deadline_ns);
}

/* ---- the restore ---- */

static void lv_of(const struct rdb_hv_restore *req, struct rdb_lvrestore *lr)
{
	*lr = (struct rdb_lvrestore){
		.uri = req->libvirt_uri, .name = req->vm,
		.ram_image = req->ram_image, .qmp = req->ctl_path,
		.net = req->net_path, .disk = req->disk_path,
		.event = req->event_path, .work_dir = req->work_dir,
		.more_nets = req->more_nets, .nmore_nets = req->nmore_nets,
		.nmore_disks = req->disk_path ? req->nmore_drives : 0,
	};
}

/*
 * The cpus for the QEMU libvirt started (paused, before it loads the
 * checkpoint): what our own QEMU would get at its fork.  A refusal (the
 * domain's cgroup cpuset excludes them) is logged; the restore goes on.
 */
static void place_libvirt(const struct rdb_hv_restore *req, pid_t pid)
{
	char cpus[128];
	int n = rdb_hv_place(pid, req->cpus);

	rdb_cpulist_format(req->cpus, cpus, sizeof(cpus));
	if (n < 0)
		LOGVM(WARN, req->vm, "libvirt's QEMU (pid %d) not placed on "
		      "guest_cpus = %s: %s (put it in the domain's <vcpu cpuset> "
		      "and <cputune> instead)", (int)pid, cpus, strerror(-n));
	else
		LOGVM(INFO, req->vm, "libvirt's QEMU (pid %d): its %d threads "
		      "placed on CPUs %s (guest_cpus)", (int)pid, n, cpus);
}

static int restore_prepare(const struct rdb_hv_restore *req,
			   struct rdb_hv_restored *out, uint64_t deadline_ns,
			   char *err, size_t errlen)
{
	uint64_t t = rdb_now_ns();
	char **argv = NULL;
	char uri[160];
	int rc;

	out->via_libvirt = false;
	if (req->libvirt_uri && req->libvirt_uri[0]) {
		struct rdb_lvrestore lr;
		char e[400];

		/* (the enrolled domain's XML names every disk and NIC:
		 * lvrestore checks it) */
		lv_of(req, &lr);
		rc = rdb_lvrestore_create(&lr, deadline_ns, e, sizeof(e));
		if (rc == 0) {
			out->via_libvirt = true;
			LOGVM(INFO, req->vm, "restore: domain %s created through "
			      "libvirt at %s in %.1f ms", req->vm, req->libvirt_uri,
			      (double)(rdb_now_ns() - t) / RDB_NS_PER_MS);
		} else {
			LOGVM(WARN, req->vm, "restore through libvirt at %s: %s; "
			      "restoring into remusdbd's own QEMU instead",
			      req->libvirt_uri, e);
		}
	}
	if (!out->via_libvirt) {
		char e[400];

		rc = rdb_restore_argv(req->binary, req->args, req->nargs,
				      req->ram_image, req->ram_bytes, req->ctl_path,
				      req->wd_ctl_path, req->net_path,
				      req->console_path, req->serial_path,
				      req->disk_arg, req->event_path,
				      req->more_drives, req->nmore_drives,
				      req->more_nets, req->nmore_nets, &argv);
		if (rc < 0) {
			snprintf(err, errlen, "QEMU's arguments: %s", strerror(-rc));
			return rc;
		}
		rc = rdb_units_spawn_service(req->vm, "qemu", argv,
					     req->log_path, req->cpus,
					     &out->proc, e, sizeof(e));
		rdb_restore_argv_free(argv);
		if (rc < 0) {
			snprintf(err, errlen, "starting %s: %s", req->binary, e);
			return rc;
		}
	}
	rc = ctl_open(&out->ctl, req->ctl_path, req->vm,
		      rdb_now_ns() + START_DEADLINE_NS, err, errlen);
	if (rc == 0 && out->via_libvirt) {
		/* libvirt's child, not ours: watched through a pidfd */
		struct ucred cr;
		socklen_t cl = sizeof(cr);

		if (getsockopt(ctl_fd(out->ctl), SOL_SOCKET, SO_PEERCRED, &cr,
			       &cl) < 0)
			rc = -errno;
		else
			rc = rdb_hv_adopt(cr.pid, &out->proc);
		if (rc < 0) {
			snprintf(err, errlen, "the domain's QEMU: %s", strerror(-rc));
			ctl_close(out->ctl);
			out->ctl = NULL;
		} else if (req->cpus && req->cpus_chosen) {
			place_libvirt(req, cr.pid);
		}
	}
	if (rc < 0) {
		size_t n = strlen(err);

		snprintf(err + n, errlen - n, " (see %s)", out->via_libvirt ?
			 "libvirt's log of the domain" : req->log_path);
		if (out->via_libvirt) {
			struct rdb_lvrestore lr;

			lv_of(req, &lr);
			rdb_lvrestore_destroy(&lr, rdb_now_ns() + 10 * RDB_NS_PER_S);
		}
		return rc;
	}
	out->ctl_ns = rdb_now_ns() - t;
	rc = rdb_qmp_set_capability(&out->ctl->qmp, "x-ignore-shared", true,
				    deadline_ns);
	if (rc == 0) {
		snprintf(uri, sizeof(uri), "unix:%s", req->incoming_path);
		rc = rdb_qmp_migrate_incoming(&out->ctl->qmp, uri, deadline_ns);
	}
	if (rc < 0)
		snprintf(err, errlen, "the restored QEMU's incoming stream: %s",
			 rc == -EREMOTEIO ? ctl_error(out->ctl) : strerror(-rc));
	return rc;
}

static int restore_load(const struct rdb_hv_restore *req,
			struct rdb_hv_restored *r, const struct rdb_hv_state *st,
			uint64_t deadline_ns, char *err, size_t errlen)
{
	struct rdb_restore_block *rb;
	struct rdb_restore_spec spec;
	uint8_t *stream = NULL;
	size_t stream_len = 0;
	enum rdb_hv_guest g;
	int rc, fd = -1;

	rb = calloc(st->nblocks, sizeof(*rb));
	if (!rb)
		return -ENOMEM;
	for (size_t i = 0; i < st->nblocks; i++) {
		rb[i].idstr = st->blocks[i].idstr;
		rb[i].used_length = st->blocks[i].used_length;
		rb[i].shared = strcmp(rb[i].idstr, RDB_RESTORE_SHARED_BLOCK) == 0;
		rb[i].data = st->block_data[i];
	}
	spec = (struct rdb_restore_spec){
		.config = st->config,
		.config_len = st->config_len,
		.blocks = rb,
		.nblocks = st->nblocks,
		.devstate = st->devstate,
		.devstate_len = st->devstate_len,
	};
	rc = rdb_restore_stream_build(&spec, &stream, &stream_len);
	if (rc < 0) {
		snprintf(err, errlen, "building the restore stream: %s",
			 strerror(-rc));
		goto out;
	}
	r->built_ns = rdb_now_ns();
	rc = rdb_sock_connect_unix(req->incoming_path, deadline_ns, &fd);
	if (rc == 0)
		rc = rdb_restore_stream_send(fd, stream, stream_len, deadline_ns);
	if (fd >= 0)
		close(fd);	/* end of stream: QEMU must not wait for more */
	if (rc < 0) {
		snprintf(err, errlen, "feeding the restore stream: %s",
			 strerror(-rc));
		goto out;
	}
	r->fed_ns = rdb_now_ns();
	r->stream_bytes = stream_len;
	r->guest_may_run = true;	/* all of it: QEMU may run it now */
	/* QEMU starts the guest by itself once the stream is loaded. */
	for (;;) {
		rc = guest(r->ctl, &g, deadline_ns);
		if (rc < 0) {
			snprintf(err, errlen, "the restored QEMU's status: %s",
				 rc == -EREMOTEIO ? ctl_error(r->ctl) : strerror(-rc));
			goto out;
		}
		if (g == RDB_HV_GUEST_RUNNING)
			break;
		if (g == RDB_HV_GUEST_OTHER) {
			snprintf(err, errlen, "restored QEMU is not running: %s "
				 "(see %s)", ctl_error(r->ctl), req->log_path);
			rc = -EIO;
			goto out;
		}
		if (rdb_now_ns() > deadline_ns) {
			snprintf(err, errlen, "the restored QEMU did not run the "
				 "guest in time");
			rc = -ETIMEDOUT;
			goto out;
		}
		usleep(1000);
	}
	r->running_ns = rdb_now_ns();
	rc = rdb_qmp_announce_self(&r->ctl->qmp, deadline_ns);
	if (rc < 0)
		LOGVM(WARN, req->vm, "announce-self: %s", strerror(-rc));
	rc = 0;
out:
	free(stream);
	free(rb);
	return rc;
}

const struct rdb_hv_ops rdb_hv_qemu_ops = {
	.name = "qemu",
	.restored_ended = "QEMU exited",
	.restored_reprotect = true,
	.no_checkpoint_hint = "this QEMU does not enter COLO (10.0.0-10.0.6 "
			      "need upstream fix 0b5bf4ea; hypervisor/qemu/README.md)",
	.main_block = RDB_RESTORE_SHARED_BLOCK,
	.stream_new = stream_new,
	.stream_feed = stream_feed,
	.stream_take_fd = stream_take_fd,
	.stream_error = stream_error,
	.stream_free = stream_free,
	.reply = reply,
	.ctl_open = ctl_open,
	.ctl_close = ctl_close,
	.ctl_fd = ctl_fd,
	.ctl_error = ctl_error,
	.stop = stop,
	.cont = cont,
	.guest = guest,
	.checkpoint_start = checkpoint_start,
	.checkpoint_end = checkpoint_end,
	.disk_arg = rdb_qemu_nbd_drive,
	.restore_prepare = restore_prepare,
	.restore_load = restore_load,
};

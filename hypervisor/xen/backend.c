// SPDX-License-Identifier: GPL-2.0-only
/*
 * The Xen backend (hv.h) for x86 PV domains.  remusdbd links none of Xen's
 * libraries: each call that needs them runs remusdb-xen (xen_helper.h),
 * whose `save` is the checkpointing process (xc_domain_save, Remus mode)
 * and whose `ctl` answers one control call.  The checkpoint stream is
 * that helper's: a preamble with xl's header and the domain's config,
 * then libxc's stream, parsed by xc_stream.c and kept by xen_state.c as
 * the config and devstate blobs the daemon carries like QEMU's.  A backup
 * restores the VM by writing those, with the committed RAM, as an xl save
 * image and running `xl restore` on it.
 *
 * What names what: the VM's control "socket" (qmp, watchdog_qmp) is the
 * domain's name, and a restored domain is the VM's name.
 */
#define RDB_COMPONENT "xen"
#include "hv.h"
#include "sdunit.h"
#include "clock.h"
#include "le.h"
#include "log.h"
#include "xen/xc_stream.h"
#include "xen/xen_helper.h"
#include "xen/xen_state.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XEN_RAM_BLOCK "xen.ram"
#define HELPER "remusdb-xen"
#define XEN_PAGES_PER_FEED 16
/* A control call of the helper (a domain lookup and one hypercall). */
#define CTL_NS (5 * RDB_NS_PER_S)

/* ---- the stream ---- */

enum phase { PH_PREAMBLE, PH_XL, PH_XC };

struct rdb_hv_stream {
	const struct rdb_hv_stream_cb *cb;
	void *opaque;
	enum phase phase;
	uint8_t pre[12];
	size_t pre_have;
	uint8_t *xl;
	uint32_t xl_len, xl_have;
	struct rdb_xc_parser xp;
	struct rdb_xen_state st;
	struct rdb_buf dev;
	char err[200];
};

static int s_fail(struct rdb_hv_stream *s, const char *why)
{
	snprintf(s->err, sizeof(s->err), "%s", why);
	return -EPROTO;
}

static int x_domain(void *o, const struct rdb_xc_domain *d)
{
	struct rdb_hv_stream *s = o;
	int rc = rdb_xen_state_domain(&s->st, d);

	if (rc == 0)
		rc = rdb_xen_state_xl_header(&s->st, s->xl, s->xl_len);
	return rc;
}

static int x_page(void *o, uint64_t epoch, uint64_t pfn, unsigned type,
		  const uint8_t *data)
{
	struct rdb_hv_stream *s = o;
	int rc = rdb_xen_state_page(&s->st, pfn, type);

	if (rc < 0)
		return rc;
	return s->cb->page(s->opaque, 0, pfn * RDB_XC_PAGE_SIZE, data, 0);
}

static int x_record(void *o, uint64_t epoch, bool libxl, uint32_t type,
		    const uint8_t *body, size_t len)
{
	struct rdb_hv_stream *s = o;
	struct rdb_ram_block b = { .idstr = XEN_RAM_BLOCK };
	int rc;

	if (type == RDB_XEN_REC_REQUEST)
		return s->cb->checkpoint_request(s->opaque, epoch);
	rc = rdb_xen_state_record(&s->st, type, body, len);
	if (rc != 1)
		return rc;
	/* the static data is complete: the RAM's size is known */
	rc = s->cb->config(s->opaque, s->st.config.data, s->st.config.len);
	if (rc < 0)
		return rc;
	b.used_length = s->st.npfns * RDB_XC_PAGE_SIZE;
	return s->cb->ram_blocks(s->opaque, &b, 1);
}

static int x_epoch_end(void *o, uint64_t epoch)
{
	struct rdb_hv_stream *s = o;
	int rc = rdb_xen_state_epoch_end(&s->st, &s->dev);

	if (rc < 0)
		return rc;
	return s->cb->epoch_end(s->opaque, epoch, s->dev.data, s->dev.len);
}

static int x_end(void *o)
{
	return s_fail(o, "the checkpoint stream ended (libxc's END): the helper "
		      "stopped checkpointing");
}

static const struct rdb_xc_ops xc_ops = {
	.domain = x_domain, .page = x_page, .record = x_record,
	.epoch_end = x_epoch_end, .end = x_end,
};

static int stream_new(struct rdb_hv_stream **out,
		      const struct rdb_hv_stream_cb *cb, void *opaque)
{
	struct rdb_hv_stream *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return -ENOMEM;
	s->cb = cb;
	s->opaque = opaque;
	rdb_xen_state_init(&s->st);
	rdb_buf_init(&s->dev);
	rc = rdb_xc_parser_init(&s->xp, RDB_XC_RAW, &xc_ops, s);
	if (rc < 0) {
		rdb_xen_state_dispose(&s->st);
		free(s);
		return rc;
	}
	/* a PAGE_DATA record carries up to 1024 pages: taken 16 at a time,
	 * the daemon's loop keeps its turns where taking a page is slow (a
	 * dom0 short of CPU, or emulated) */
	s->xp.page_budget = XEN_PAGES_PER_FEED;
	*out = s;
	return 0;
}

static int stream_feed(struct rdb_hv_stream *s, const uint8_t *buf, size_t len)
{
	int rc;

	if (s->err[0])
		return -EPROTO;
	while (len && s->phase != PH_XC) {
		if (s->phase == PH_PREAMBLE) {
			size_t n = sizeof(s->pre) - s->pre_have;

			n = n < len ? n : len;
			memcpy(s->pre + s->pre_have, buf, n);
			s->pre_have += n;
			buf += n;
			len -= n;
			if (s->pre_have < sizeof(s->pre))
				return 0;
			if (memcmp(s->pre, RDB_XEN_PREAMBLE, 8) != 0)
				return s_fail(s, "not remusdb-xen's stream (no "
					      RDB_XEN_PREAMBLE " preamble)");
			s->xl_len = rdb_le_get32(s->pre + 8);
			if (s->xl_len < 48 || s->xl_len > RDB_XEN_PREAMBLE_MAX)
				return s_fail(s, "xl's header of a size out of range");
			s->xl = malloc(s->xl_len);
			if (!s->xl)
				return -ENOMEM;
			s->phase = PH_XL;
		} else {
			size_t n = s->xl_len - s->xl_have;

			n = n < len ? n : len;
			memcpy(s->xl + s->xl_have, buf, n);
			s->xl_have += (uint32_t)n;
			buf += n;
			len -= n;
			if (s->xl_have == s->xl_len) {
				if (memcmp(s->xl, "Xen saved domain, xl format\n",
					   28) != 0)
					return s_fail(s, "the preamble is not xl's "
						      "save-file header");
				s->phase = PH_XC;
			}
		}
	}
	if (!len && !rdb_xc_parser_pending(&s->xp))
		return 0;
	rc = rdb_xc_parser_feed(&s->xp, buf, len);
	if (rc == -EPROTO && !s->err[0])
		snprintf(s->err, sizeof(s->err), "%s", s->st.err[0] ? s->st.err :
			 rdb_xc_parser_error(&s->xp));
	return rc;
}

static bool stream_pending(const struct rdb_hv_stream *s)
{
	return rdb_xc_parser_pending(&s->xp);
}

static const char *stream_error(const struct rdb_hv_stream *s)
{
	return s->err[0] ? s->err : "no error";
}

static void stream_free(struct rdb_hv_stream *s)
{
	if (!s)
		return;
	rdb_xc_parser_dispose(&s->xp);
	rdb_xen_state_dispose(&s->st);
	rdb_buf_dispose(&s->dev);
	free(s->xl);
	free(s);
}

static size_t reply(enum rdb_hv_reply r, uint8_t out[RDB_HV_REPLY_MAX_BYTES])
{
	static const uint32_t code[RDB_HV_REPLY__MAX] = {
		[RDB_HV_START] = RDB_XEN_REPLY_START,
		[RDB_HV_STOP] = RDB_XEN_REPLY_STOP,
		[RDB_HV_RESUME] = RDB_XEN_REPLY_RESUME,
	};

	if (r >= RDB_HV_REPLY__MAX)
		return 0;
	rdb_le_put32(out, code[r]);
	return 4;
}

/* ---- control: remusdb-xen ctl ---- */

struct rdb_hv_ctl {
	char dom[65];
	char err[256];
	struct rdb_hv_proc saver;	/* remusdb-xen save, once started */
};

/* remusdb-xen ctl DOMAIN cmd; its first output line in line (if any). */
static int ctl_run(struct rdb_hv_ctl *c, const char *cmd, uint64_t deadline_ns,
		   char *line, size_t linelen)
{
	char *argv[] = { HELPER, "ctl", c->dom, (char *)cmd, NULL };
	char *out = NULL;
	int code = 0, rc;

	rc = rdb_hv_run(argv, deadline_ns, &out, &code);
	if (line)
		snprintf(line, linelen, "%.*s", (int)strcspn(out ? out : "", "\n"),
			 out ? out : "");
	if (rc == -EIO) {
		snprintf(c->err, sizeof(c->err), "%s ctl %s %s: %.*s", HELPER,
			 c->dom, cmd, (int)strcspn(out ? out : "", "\n"),
			 out && out[0] ? out : "failed");
		rc = code == RDB_XEN_EXIT_NO_DOMAIN ? -ENOENT : -EREMOTEIO;
	}
	free(out);
	return rc;
}

static int ctl_open(struct rdb_hv_ctl **out, const char *path, const char *vm,
		    uint64_t deadline_ns, char *err, size_t errlen)
{
	struct rdb_hv_ctl *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	snprintf(c->dom, sizeof(c->dom), "%s", path);
	rdb_hv_proc_init(&c->saver);
	rc = ctl_run(c, "state", deadline_ns, NULL, 0);
	if (rc < 0) {
		snprintf(err, errlen, "Xen domain %s: %s", path, rc == -ENOENT ||
			 rc == -EREMOTEIO ? c->err : strerror(-rc));
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
	/* a saver still there once the daemon let go of its stream: */
	if (c->saver.pid > 0 && rdb_hv_poll_exit(&c->saver, NULL) == 0)
		rdb_hv_kill(&c->saver, rdb_now_ns() + RDB_NS_PER_S);
	free(c);
}

static int ctl_fd(const struct rdb_hv_ctl *c)
{
	return -1;	/* nothing to cancel or ask: each call is a process */
}

static const char *ctl_error(const struct rdb_hv_ctl *c)
{
	return c->err;
}

static int stop(struct rdb_hv_ctl *c, uint64_t deadline_ns)
{
	return ctl_run(c, "pause", deadline_ns, NULL, 0);
}

static int cont(struct rdb_hv_ctl *c, uint64_t deadline_ns)
{
	return ctl_run(c, "unpause", deadline_ns, NULL, 0);
}

static int guest(struct rdb_hv_ctl *c, enum rdb_hv_guest *out,
		 uint64_t deadline_ns)
{
	char st[32];
	int rc = ctl_run(c, "state", deadline_ns, st, sizeof(st));

	if (rc < 0)
		return rc;
	*out = !strcmp(st, "running") ? RDB_HV_GUEST_RUNNING :
	       !strcmp(st, "paused") || !strcmp(st, "suspended") ?
	       RDB_HV_GUEST_PAUSED : RDB_HV_GUEST_OTHER;
	if (*out == RDB_HV_GUEST_OTHER)
		snprintf(c->err, sizeof(c->err), "domain %s is %s", c->dom, st);
	return 0;
}

static int checkpoint_start(struct rdb_hv_ctl *c, const char *stream_path,
			    unsigned checkpoint_ms, unsigned flags,
			    uint64_t deadline_ns)
{
	(void)flags;	/* the save helper's stream always carries the pages */
	char ms[16], log[160];
	char *argv[] = { HELPER, "save", c->dom, (char *)stream_path, ms, NULL };
	int rc;

	if (c->saver.pid > 0 && rdb_hv_poll_exit(&c->saver, NULL) == 0) {
		snprintf(c->err, sizeof(c->err), "already checkpointing");
		return -EREMOTEIO;
	}
	snprintf(ms, sizeof(ms), "%u", checkpoint_ms);
	snprintf(log, sizeof(log), "%s.log", stream_path);
	rc = rdb_hv_spawn(argv, log, NULL, &c->saver);
	if (rc < 0)
		snprintf(c->err, sizeof(c->err), "starting %s: %s", HELPER,
			 strerror(-rc));
	return rc < 0 ? -EREMOTEIO : 0;
}

/*
 * The daemon has let go of the stream (drop, the watchdog): the saver
 * sees it at its next read or write, resumes the guest if it suspended
 * it, and leaves.  One that does not by the deadline is killed, and a
 * guest it left suspended is resumed from here.
 */
static int checkpoint_end(struct rdb_hv_ctl *c, uint64_t deadline_ns)
{
	while (c->saver.pid > 0 && rdb_hv_poll_exit(&c->saver, NULL) == 0 &&
	       rdb_now_ns() < deadline_ns)
		usleep(2000);
	if (c->saver.pid > 0 && rdb_hv_poll_exit(&c->saver, NULL) == 0) {
		LOGVM(WARN, c->dom, "%s save did not end by itself: killed (the "
		      "domain's log-dirty mode may stay on)", HELPER);
		rdb_hv_kill(&c->saver, rdb_now_ns());
	}
	return ctl_run(c, "resume", rdb_now_ns() + CTL_NS, NULL, 0);
}

/* ---- the restore ---- */

/*
 * The replica's socket, for the restored domain's config: its disk's
 * hotplug script (block-remusdb, installed in /etc/xen/scripts) takes it
 * as xl's target= and attaches it as a kernel NBD device that blkback
 * serves to the domain.
 */
static int disk_arg(char *buf, size_t len, const char *id, const char *sock,
		    unsigned flags)
{
	(void)id;	/* the saved config names the domain's device */
	if (flags)
		return -EOPNOTSUPP;	/* blkback serves raw bytes, to a PV disk */
	if ((size_t)snprintf(buf, len, "%s", sock) >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* ---- the NIC: remusdb-xen vif ---- */

/*
 * The domain's vif carries its frames to and from the daemon's NIC socket
 * through `remusdb-xen vif`, which answers once it relays (or found the
 * vif relayed already) and runs on by itself (xen_helper.h).
 */
static int nic_attach(const char *vm, const char *net_path,
		      const char *log_path, uint64_t deadline_ns, char *err,
		      size_t errlen)
{
	char *argv[] = { HELPER, "vif", (char *)vm, (char *)net_path,
			 (char *)log_path, NULL };
	char *out = NULL;
	int code = 0, rc;
	int n;

	rc = rdb_hv_run(argv, deadline_ns, &out, &code);
	n = (int)strcspn(out ? out : "", "\n");
	if (rc < 0) {
		snprintf(err, errlen, "%s vif %s: %.*s", HELPER, vm,
			 rc == -ETIMEDOUT ? 9 : n > 0 ? n : 6,
			 rc == -ETIMEDOUT ? "timed out" : n > 0 ? out : "failed");
		if (rc == -EIO && code == RDB_XEN_EXIT_NO_DOMAIN)
			rc = -ENOENT;
	} else if (n > 0) {
		LOGVM(INFO, vm, "NIC: %.*s", n, out);
	}
	free(out);
	return rc;
}

static int restore_prepare(const struct rdb_hv_restore *req,
			   struct rdb_hv_restored *out, uint64_t deadline_ns,
			   char *err, size_t errlen)
{
	/* xl creates the domain with its state (restore_load): nothing
	 * waits here, nothing runs */
	out->via_libvirt = false;
	out->ctl_ns = 0;
	if (req->nmore_drives || req->nmore_nets) {
		snprintf(err, errlen, "a Xen domain is restored with one "
			 "replicated disk and one NIC, this one has %zu and %zu",
			 req->nmore_drives + 1, req->nmore_nets + 1);
		return -EOPNOTSUPP;
	}
	return 0;
}

static int restore_load(const struct rdb_hv_restore *req,
			struct rdb_hv_restored *r, const struct rdb_hv_state *st,
			uint64_t deadline_ns, char *err, size_t errlen)
{
	char img[600], *out = NULL;
	char *argv[] = { "xl", "restore", "-e", img, NULL };
	const uint8_t *config = st->config;
	size_t config_len = st->config_len;
	struct rdb_buf disk_config;
	enum rdb_hv_guest g;
	int fd, rc;

	if (st->nblocks != 1 || strcmp(st->blocks[0].idstr, XEN_RAM_BLOCK)) {
		snprintf(err, errlen, "the state is not a Xen PV domain's (RAM "
			 "block %s)", st->nblocks ? st->blocks[0].idstr : "none");
		return -EPROTO;
	}
	/* the domain as saved, but its replicated disk on this host's
	 * replica (the primary's socket is gone with the primary) */
	rdb_buf_init(&disk_config);
	if (req->disk_arg && req->disk_arg[0]) {
		rc = rdb_xen_config_set_disk(st->config, st->config_len,
					     RDB_XEN_BLOCK_SCRIPT, req->disk_arg,
					     &disk_config, err, errlen);
		if (rc < 0)
			return rc;
		config = disk_config.data;
		config_len = disk_config.len;
	}
	snprintf(img, sizeof(img), "%s/xen-restore.img", req->work_dir);
	fd = open(img, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", img, strerror(-rc));
		rdb_buf_dispose(&disk_config);
		return rc;
	}
	rc = rdb_xen_image_write(fd, config, config_len, st->devstate,
				 st->devstate_len, st->block_data[0],
				 st->blocks[0].used_length, err, errlen);
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	rdb_buf_dispose(&disk_config);
	r->built_ns = rdb_now_ns();
	r->stream_bytes = (size_t)st->blocks[0].used_length;
	if (rc == 0) {
		/* from here the domain may exist and run, even when xl
		 * fails or runs out of time */
		r->guest_may_run = true;
		rc = rdb_hv_run(argv, deadline_ns, &out, NULL);
		if (rc < 0)
			snprintf(err, errlen, "xl restore %s: %.300s", img,
				 rc == -ETIMEDOUT ? "timed out" : out ? out : "failed");
	}
	free(out);
	unlink(img);
	r->fed_ns = rdb_now_ns();
	if (rc == 0)
		rc = ctl_open(&r->ctl, req->vm, req->vm, deadline_ns, err, errlen);
	if (rc == 0)
		rc = guest(r->ctl, &g, deadline_ns);
	if (rc == 0 && g != RDB_HV_GUEST_RUNNING) {
		snprintf(err, errlen, "the restored domain %s: %s", req->vm,
			 r->ctl->err);
		rc = -EIO;
	}
	if (rc < 0 && r->guest_may_run) {
		/* A failed restore leaves nothing running (a QEMU one is
		 * killed by rdb_hv_restored_dispose; a domain is no process):
		 * destroyed, or found not to exist */
		char *dargv[] = { "xl", "destroy", (char *)req->vm, NULL };
		char *largv[] = { "xl", "domid", (char *)req->vm, NULL };
		int code = 0;

		if (rdb_hv_run(dargv, rdb_now_ns() + 30 * RDB_NS_PER_S, NULL,
			       NULL) == 0 ||
		    (rdb_hv_run(largv, rdb_now_ns() + 30 * RDB_NS_PER_S, NULL,
				&code) == -EIO && code > 0))
			r->guest_may_run = false;
		else
			LOGVM(ERROR, req->vm, "the failed restore's domain may "
			      "still run: xl destroy %s failed", req->vm);
	}
	r->running_ns = rdb_now_ns();
	if (rc == 0) {
		/* The domain is no process: `remusdb-xen watch` stands for
		 * it, and ends with it (the daemon sees r->proc exit). */
		struct rdb_unit_scope scope;
		int npre = rdb_units_scope_prefix(&scope, req->vm, "watch");
		char *wargv[RDB_UNITS_PRE_MAX + 4];
		int wrc;

		memcpy(wargv, scope.pre, sizeof(char *) * (size_t)npre);
		wargv[npre] = HELPER;
		wargv[npre + 1] = "watch";
		wargv[npre + 2] = (char *)req->vm;
		wargv[npre + 3] = NULL;
		/* (under systemd in a scope of its own: sdunit.h) */
		wrc = rdb_hv_spawn(wargv, req->log_path, NULL, &r->proc);

		/* the restored domain is the VM's only copy now: it runs on,
		 * unwatched, rather than die for this */
		if (wrc < 0)
			LOGVM(ERROR, req->vm, "the restored domain runs unwatched: "
			      "starting %s watch: %s", HELPER, strerror(-wrc));
	}
	return rc;
}

const struct rdb_hv_ops rdb_hv_xen_ops = {
	.name = "xen",
	.restored_ended = "domain ended",
	.no_checkpoint_hint = "libxenguest's save did not start checkpointing "
			      "(see the remusdb-xen helper's log)",
	.main_block = XEN_RAM_BLOCK,
	.stream_new = stream_new,
	.stream_feed = stream_feed,
	.stream_pending = stream_pending,
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
	.nic_attach = nic_attach,
	.disk_arg = disk_arg,
	.restore_prepare = restore_prepare,
	.restore_load = restore_load,
};

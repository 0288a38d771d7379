/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What remusdbd asks of a hypervisor: one ops table per backend
 * (hypervisor/qemu/backend.c: QEMU's COLO stream, QMP and an incoming
 * migration; hypervisor/xen/backend.c: Xen PV domains).  The daemon's
 * pipeline uses this header, proc.h and ramblock.h, never a backend's
 * own headers, so it does not know which hypervisor it drives.
 *
 * A protected VM, as the daemon sees it:
 *
 *   primary   nic_attach(vm, NIC socket)         (a NIC that does not connect
 *                                                by itself: Xen's vif)
 *             ctl_open(control path)            a running VM's control
 *             checkpoint_start(ctl, STREAM, ms)  the hypervisor connects to
 *                                                STREAM (the daemon listens)
 *                                                and sends the VM's state
 *             stream: config, ram_blocks, page*, [initial_stop,]
 *                     page*, epoch_end(0)
 *                     the guest is stopped:  reply START  (it runs; the
 *                                                checkpoints begin)
 *             stream: checkpoint_request(k)      reply STOP (the guest stops)
 *                     page*, epoch_end(k)        the guest is still stopped:
 *                                                reply RESUME (it runs again)
 *             checkpoint_end(ctl)                no more checkpoints: the
 *                                                guest runs on by itself
 *   backup    restore_prepare(req)               a hypervisor process for the
 *                                                VM, waiting for its state
 *             restore_load(state)                the last committed epoch
 *                                                loaded; the guest runs
 *             nic_attach(vm, NIC socket)
 *
 * The stream's parser is pure (bytes in any split, callbacks out); the
 * control calls block until their deadline at most and never retry by
 * themselves.  -EREMOTEIO from a control call: the hypervisor refused,
 * ctl_error() says why in its words.
 */
#ifndef RDB_HV_H
#define RDB_HV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc.h"
#include "ramblock.h"

struct rdb_hv_ctl;		/* a control connection to one VM */
struct rdb_hv_stream;		/* the parser of one VM's checkpoint stream */

/* What the checkpoint stream carries, as it arrives.  A callback's
 * negative return fails the feed with it. */
struct rdb_hv_stream_cb {
	/* The machine's configuration, opaque: kept for the restore. */
	int (*config)(void *opaque, const uint8_t *blob, size_t len);
	int (*ram_blocks)(void *opaque, const struct rdb_ram_block *blocks,
			  size_t n);
	/* data: 4096 bytes valid during the call, or NULL: every byte fill */
	int (*page)(void *opaque, uint32_t block, uint64_t offset,
		    const uint8_t *data, uint8_t fill);
	/* The epoch's state is whole; devstate (opaque, kept for the
	 * restore) is what is not RAM.  The guest is stopped until the
	 * daemon replies START (epoch 0) or RESUME. */
	int (*epoch_end)(void *opaque, uint64_t epoch, const uint8_t *devstate,
			 size_t len);
	/* The hypervisor asks to take checkpoint epoch: reply STOP. */
	int (*checkpoint_request)(void *opaque, uint64_t epoch);
	/* The hypervisor stopped the guest by itself to send the last of
	 * the initial state (epoch 0): from now until our START the guest
	 * is frozen.  Once per stream, as soon as the stream shows it; a
	 * backend whose stream does not show it never calls it (may be
	 * NULL). */
	int (*initial_stop)(void *opaque);
};

/* The daemon's replies on the stream's connection. */
enum rdb_hv_reply {
	RDB_HV_START,		/* epoch 0 is taken: run, checkpoints begin */
	RDB_HV_STOP,		/* take the checkpoint asked for */
	RDB_HV_RESUME,		/* the epoch is taken: run again */
	RDB_HV_REPLY__MAX
};
#define RDB_HV_REPLY_MAX_BYTES 16

enum rdb_hv_guest {
	RDB_HV_GUEST_RUNNING,
	RDB_HV_GUEST_PAUSED,
	RDB_HV_GUEST_LOADING,	/* waiting for or loading its state */
	RDB_HV_GUEST_OTHER,	/* stopped for another reason (an error) */
};

/* The backup's hypervisor process for a VM, before its state is loaded. */
struct rdb_hv_restore {
	const char *vm;			/* the VM's name */
	const char *binary;		/* the hypervisor's program */
	char *const *args;		/* the VM's own arguments */
	size_t nargs;
	const char *ram_image;		/* the main RAM block's image file */
	uint64_t ram_bytes;		/* its size */
	/* this host's sockets and files for the VM (NULL: none) */
	const char *ctl_path;		/* its control socket */
	const char *wd_ctl_path;	/* the watchdog's control socket */
	const char *incoming_path;	/* where restore_load feeds the state */
	const char *net_path;		/* the NIC's stream socket */
	/* the VM's other NICs' stream sockets, in order (netdev net1, ...;
	 * a backend that cannot restore them refuses) */
	const char *const *more_nets;
	size_t nmore_nets;
	const char *disk_path;		/* the replica's disk server socket */
	const char *disk_arg;		/* disk_arg() of it */
	/* the VM's other disks' replicas, disk_arg() of each, in order (a
	 * backend that cannot restore them refuses: restore_prepare) */
	const char *const *more_drives;
	size_t nmore_drives;
	const char *event_path;		/* the failover event port */
	const char *console_path, *serial_path, *log_path;
	const char *work_dir;		/* the VM's state directory */
	const char *libvirt_uri;	/* restore into this libvirt's domain
					 * of the VM's name (NULL: our own) */
	const cpu_set_t *cpus;		/* where it runs (NULL: anywhere) */
	bool cpus_chosen;		/* the operator chose them: a libvirt
					 * domain's process is placed there too */
};

/* What restore_prepare started; rdb_hv_restored_init makes it empty. */
struct rdb_hv_restored {
	struct rdb_hv_proc proc;
	struct rdb_hv_ctl *ctl;
	bool via_libvirt;		/* proc is the libvirt domain's */
	uint64_t ctl_ns;		/* from start to its control answering */
	/* restore_load's steps, for the log */
	uint64_t built_ns, fed_ns, running_ns;
	size_t stream_bytes;
	/* restore_load got far enough that the guest may have run (the
	 * whole state fed to QEMU, `xl restore` started); a backend clears
	 * it again when its failure left nothing running */
	bool guest_may_run;
};

/* The committed state restore_load brings back. */
struct rdb_hv_state {
	const uint8_t *config;		/* as the stream's config callback */
	size_t config_len;
	const struct rdb_ram_block *blocks;
	size_t nblocks;
	const uint8_t *const *block_data;	/* each block's bytes */
	const uint8_t *devstate;	/* the last epoch_end's */
	size_t devstate_len;
};

/* checkpoint_start: the checkpoints' pages may be read from the
 * hypervisor's shared memory (passed over the stream: stream_take_fd)
 * where the hypervisor can; not asked, the stream carries them. */
#define RDB_HV_CKPT_SHARED_RAM 1u

#define RDB_HV_DISK_QCOW2 1u
#define RDB_HV_DISK_PFLASH 2u

struct rdb_hv_ops {
	const char *name;
	/* the log's words when restore_load's proc ends: "QEMU exited",
	 * "domain ended" (a Xen domain's watch process ends with it) */
	const char *restored_ended;
	/* restore_load's proc is the guest itself (QEMU): a restored VM can
	 * be protected again from its host, the process handed over.  Not a
	 * Xen domain's watch: killing that would not stop the domain. */
	bool restored_reprotect;
	/* Why, most likely, no checkpoint follows the initial state (the
	 * stream silent, not throttled by the daemon): said to operators */
	const char *no_checkpoint_hint;
	/* The RAM block restore_prepare maps from its image file. */
	const char *main_block;

	/* ---- the checkpoint stream (primary) ---- */
	int (*stream_new)(struct rdb_hv_stream **out,
			  const struct rdb_hv_stream_cb *cb, void *opaque);
	/* 0: all taken; -EPROTO: malformed (stream_error says how), or a
	 * callback's error.  A failed stream stays failed. */
	/* Optional: stream_feed kept work back (its share per call is
	 * bounded); a feed of nothing (buf NULL, len 0) takes more of it. */
	bool (*stream_pending)(const struct rdb_hv_stream *s);
	int (*stream_feed)(struct rdb_hv_stream *s, const uint8_t *buf,
			   size_t len);
	const char *(*stream_error)(const struct rdb_hv_stream *s);
	/* Optional (NULL: close it): a file descriptor that came over the
	 * stream's connection, given before the bytes read with it are fed.
	 * The stream owns it.  0, or -EPROTO (not expected there). */
	int (*stream_take_fd)(struct rdb_hv_stream *s, int fd);
	void (*stream_free)(struct rdb_hv_stream *s);	/* NULL is fine */
	/* The bytes of a reply, to write on the stream's connection at once
	 * (one write: one wake-up of the hypervisor). */
	size_t (*reply)(enum rdb_hv_reply r,
			uint8_t out[RDB_HV_REPLY_MAX_BYTES]);

	/* ---- control of a running VM (both roles) ---- */
	/* Retries a control socket that is not there yet until the
	 * deadline (the hypervisor may be starting).  err: why not. */
	int (*ctl_open)(struct rdb_hv_ctl **out, const char *path,
			const char *vm, uint64_t deadline_ns, char *err,
			size_t errlen);
	void (*ctl_close)(struct rdb_hv_ctl *c);	/* NULL is fine */
	/* Its file descriptor: shut down by another thread to cancel a call
	 * under way; its peer is the hypervisor's process (SO_PEERCRED). */
	int (*ctl_fd)(const struct rdb_hv_ctl *c);
	const char *(*ctl_error)(const struct rdb_hv_ctl *c);
	int (*stop)(struct rdb_hv_ctl *c, uint64_t deadline_ns);
	int (*cont)(struct rdb_hv_ctl *c, uint64_t deadline_ns);
	int (*guest)(struct rdb_hv_ctl *c, enum rdb_hv_guest *out,
		     uint64_t deadline_ns);
	/* Protection starts: the hypervisor sends the VM's state to
	 * stream_path, then a checkpoint every checkpoint_ms.  flags:
	 * RDB_HV_CKPT_*. */
	int (*checkpoint_start)(struct rdb_hv_ctl *c, const char *stream_path,
				unsigned checkpoint_ms, unsigned flags,
				uint64_t deadline_ns);
	/* No more checkpoints: the guest runs on by itself, now or as soon
	 * as the one under way fails (the stream cut). */
	int (*checkpoint_end)(struct rdb_hv_ctl *c, uint64_t deadline_ns);

	/* ---- the guest's NIC (both roles) ---- */
	/* Connects the VM's NIC to the daemon's NIC socket net_path (nic.h:
	 * the daemon listens), for a hypervisor whose NIC does not connect
	 * by itself; NULL for one that does (QEMU's -netdev stream).  The
	 * primary calls it once its NIC listens, the backup after
	 * restore_load.  What it starts outlives the call and the daemon:
	 * it reconnects to a restarted daemon, as QEMU does, and ends with
	 * the VM.  Called again for a VM already connected, it succeeds and
	 * starts nothing.  log_path: where that says what it does. */
	int (*nic_attach)(const char *vm, const char *net_path,
			  const char *log_path, uint64_t deadline_ns,
			  char *err, size_t errlen);

	/* ---- the restore (backup) ---- */
	/* The disk argument of a restored VM whose disk is the replica
	 * served on sock; flags: RDB_HV_DISK_QCOW2, a qcow2 image's bytes
	 * (qcow2.h); RDB_HV_DISK_PFLASH, the UEFI variable store (config.h:
	 * nvram).  -ENAMETOOLONG if it does not fit; -EOPNOTSUPP for what
	 * the hypervisor's disk path does not take. */
	int (*disk_arg)(char *buf, size_t len, const char *id,
			const char *sock, unsigned flags);
	/* Starts the VM's hypervisor process waiting for its state, its
	 * control connected; the guest does not run.  On error err says
	 * why, and what was started is in out, for rdb_hv_restored_dispose. */
	int (*restore_prepare)(const struct rdb_hv_restore *req,
			       struct rdb_hv_restored *out, uint64_t deadline_ns,
			       char *err, size_t errlen);
	/* Loads state into what restore_prepare started; the guest runs
	 * on 0, and its network hears of its new place. */
	int (*restore_load)(const struct rdb_hv_restore *req,
			    struct rdb_hv_restored *r,
			    const struct rdb_hv_state *state,
			    uint64_t deadline_ns, char *err, size_t errlen);
};

/* The backend of that name ("qemu"), or NULL. */
const struct rdb_hv_ops *rdb_hv_find(const char *name);

void rdb_hv_restored_init(struct rdb_hv_restored *r);
/* Closes its control; kills its process if kill (else it runs the VM).
 * With kill: 0 when its guest surely runs no more (it never ran, or the
 * process it ran in is gone), -EBUSY when it may run on. */
int rdb_hv_restored_dispose(const struct rdb_hv_ops *ops,
			    struct rdb_hv_restored *r, bool kill);

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/* The one remusdbd process per host: every VM it protects or backs up. */
#ifndef RDB_DAEMON_H
#define RDB_DAEMON_H

#include <sched.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "config.h"
#include "evloop.h"

struct rdb_vm;
struct rdb_ctl;
struct rdb_watchdog;
struct rdb_witness;
struct rdb_linksec;
struct rdb_filepub;

struct rdb_daemon {
	struct rdb_daemon_config cfg;
	struct rdb_evloop *loop;
	struct rdb_vm *vms;
	struct rdb_ctl *ctl;
	struct rdb_watchdog *wd;
	struct rdb_witness *witness;	/* NULL: none configured */
	char node[65];			/* node_name, or the hostname */
	struct rdb_linksec *linksec;	/* every replication link's TLS */
	int repl_listen_fd;		/* backups accept primaries here */
	uint64_t started_ns;
	time_t started_unix;		/* the same, wall clock */
	uint64_t metrics_timer;
	struct rdb_filepub *metrics_pub;	/* NULL: no metrics_file */
	cpu_set_t cpus;			/* where remusdbd runs (`cpus`) */
	cpu_set_t guest_cpus;		/* where the QEMU it starts runs */
	gid_t qemu_gid;			/* qemu_group; 0: none (root only) */
	uint64_t sd_watchdog_ns;	/* systemd's WatchdogSec; 0: none */
	uint64_t sd_last_ping_ns;
	/* a peer's silence over failover_timeout_ms withheld as this host's
	 * stall (watchdog.h, rdb_peer_silence) */
	uint64_t peer_stall_waits;
	/* VMs re-adopted at start from their definitions (vmdef.h), and
	 * those that could not be */
	unsigned readopted, readopt_failed;
};

/*
 * A file QEMU must reach when it does not run as root (qemu_group): a
 * socket it connects to, or a RAM image it maps, made group-accessible
 * (0660, qemu_group).  Nothing without qemu_group.  fd >= 0: that open
 * file, else path.  A failure is logged and returned: QEMU would get
 * "Permission denied" later, with less to go on.
 */
int rdb_daemon_share_with_qemu(const struct rdb_daemon *d, const char *path,
			       int fd);

#endif

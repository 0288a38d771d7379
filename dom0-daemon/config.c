// SPDX-License-Identifier: GPL-2.0-only
#include "config.h"
#include "cpulist.h"
#include "diskbuf.h"
#include "roimage.h"
#include "hv.h"
#include "sockutil.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OFF(type, field) offsetof(struct type, field)

static int v_hostport(const char *v)
{
	char h[256], p[16];

	if (rdb_sock_split_hostport(v, h, sizeof(h), p, sizeof(p)) < 0)
		return -EINVAL;
	for (const char *c = p; *c; c++)
		if (!isdigit((unsigned char)*c))
			return -EINVAL;
	return atoi(p) > 0 && atoi(p) < 65536 ? 0 : -EINVAL;
}

static int v_name(const char *v)
{
	size_t n = strlen(v);

	if (n == 0 || n > 64)
		return -EINVAL;
	for (const char *c = v; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr("_.-", *c))
			return -EINVAL;
	return 0;
}

static int v_mac(const char *v)
{
	unsigned b[6];
	char tail;

	return strlen(v) == 17 && sscanf(v, "%2x:%2x:%2x:%2x:%2x:%2x%c",
		b, b + 1, b + 2, b + 3, b + 4, b + 5, &tail) == 6 ? 0 : -EINVAL;
}

static int v_level(const char *v)
{
	const char *ok[] = { "debug", "info", "warn", "error" };

	for (size_t i = 0; i < 4; i++)
		if (strcmp(v, ok[i]) == 0)
			return 0;
	return -EINVAL;
}

static int v_name_or_empty(const char *v)
{
	return v[0] ? v_name(v) : 0;
}

static int v_peer_loss(const char *v)
{
	return !v[0] || !strcmp(v, "witness") || !strcmp(v, "manual") ||
	       !strcmp(v, "unsafe-auto") ? 0 : -EINVAL;
}

static int v_witness(const char *v)
{
	/* each comma-separated endpoint: http(s)://host:port */
	const char *p = v;

	while (*p) {
		size_t n = strcspn(p, ",");

		if (!(n > 7 && !strncmp(p, "http://", 7)) &&
		    !(n > 8 && !strncmp(p, "https://", 8)))
			return -EINVAL;
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

static int v_mode(const char *v)
{
	return !strcmp(v, "plain") || !strcmp(v, "commit-protection") ?
		0 : -EINVAL;
}

static int v_hypervisor(const char *v)
{
	return rdb_hv_find(v) ? 0 : -EINVAL;
}

static int v_link_security(const char *v)
{
	return !strcmp(v, "psk") || !strcmp(v, "insecure") ? 0 : -EINVAL;
}

static int v_process_units(const char *v)
{
	return !strcmp(v, "auto") || !strcmp(v, "systemd") ||
	       !strcmp(v, "none") ? 0 : -EINVAL;
}

static int v_cpulist(const char *v)
{
	cpu_set_t set;

	return rdb_cpulist_parse(v, &set);
}

static const struct rdb_option daemon_opts[] = {
	{ "listen", RDB_OPT_STRING, OFF(rdb_daemon_config, listen), "0.0.0.0:7788", 0, 0, v_hostport,
	  "address:port where this host accepts primaries it backs up" },
	{ "control_socket", RDB_OPT_STRING, OFF(rdb_daemon_config, control_socket), "/run/remusdb/remusdbd.sock", 0, 0, NULL,
	  "root-only unix socket for remusdbctl" },
	{ "run_dir", RDB_OPT_STRING, OFF(rdb_daemon_config, run_dir), "/run/remusdb", 0, 0, NULL,
	  "sockets shared with QEMU (0700 root; 0770 with qemu_group)" },
	{ "state_dir", RDB_OPT_STRING, OFF(rdb_daemon_config, state_dir), "/var/lib/remusdb", 0, 0, NULL,
	  "RAM images of backed-up VMs; needs room for each VM's RAM" },
	{ "log_level", RDB_OPT_STRING, OFF(rdb_daemon_config, log_level), "info", 0, 0, v_level,
	  "debug, info, warn or error" },
	{ "heartbeat_ms", RDB_OPT_U32, OFF(rdb_daemon_config, heartbeat_ms), "100", 10, 10000, NULL,
	  "heartbeat period on every replication link" },
	{ "failover_timeout_ms", RDB_OPT_U32, OFF(rdb_daemon_config, failover_timeout_ms), "1000", 50, 60000, NULL,
	  "silence after which a backup fails over (and a primary drops its backup)" },
	{ "ack_timeout_ms", RDB_OPT_U32, OFF(rdb_daemon_config, ack_timeout_ms), "0", 0, 3600000, NULL,
	  "longest a protected VM's oldest checkpoint may wait for the backup's acknowledgement (its output held all the while) before the primary raises an alarm and treats the backup as lost (the failover decision), as for silence; a backup that answers heartbeats but cannot commit (its disk stuck, say) is caught by this bound; 0: 5 x failover_timeout_ms" },
	{ "auto_reprotect_s", RDB_OPT_U32, OFF(rdb_daemon_config, auto_reprotect_s), "600", 0, 86400, NULL,
	  "after a backup's remusdbd went away while its host stayed up (it closed the replication link: a restart, an upgrade, a crash), the primary protects the VM to it again on its own, retrying 1 s, 2 s, 4 s ... up to every 30 s for this long; not after a host or link loss (silence), a refusal, or the operator's unprotect; 0: never (protect by hand)" },
	{ "qemu_binary", RDB_OPT_STRING, OFF(rdb_daemon_config, qemu_binary), "qemu-system-x86_64", 0, 0, NULL,
	  "QEMU started on failover" },
	{ "metrics_file", RDB_OPT_STRING, OFF(rdb_daemon_config, metrics_file), "", 0, 0, NULL,
	  "metrics in the Prometheus text format, rewritten every second (atomically: write and rename); name it *.prom in node_exporter's textfile directory (/var/lib/prometheus/node-exporter/remusdb.prom on Debian); empty: off" },
	{ "node_name", RDB_OPT_STRING, OFF(rdb_daemon_config, node_name), "", 0, 0, v_name_or_empty,
	  "this host's name at the witness ([A-Za-z0-9_.-], 1-64); empty: the hostname. Unique per host" },
	{ "witness", RDB_OPT_STRING, OFF(rdb_daemon_config, witness), "", 0, 0, v_witness,
	  "the failover witness: etcd client URLs, comma-separated (http://10.0.0.9:2379); empty: none, and every VM must say its on_peer_loss" },
	{ "witness_prefix", RDB_OPT_STRING, OFF(rdb_daemon_config, witness_prefix), "/remusdb", 0, 0, NULL,
	  "root of RemusDB's keys at the witness (one key per VM: PREFIX/vm/NAME); the same on both hosts" },
	{ "witness_timeout_ms", RDB_OPT_U32, OFF(rdb_daemon_config, witness_timeout_ms), "1000", 50, 60000, NULL,
	  "longest one request to the witness may take (it is retried while a decision is pending)" },
	{ "allow_fault_injection", RDB_OPT_BOOL, OFF(rdb_daemon_config, allow_fault_injection), "false", 0, 0, NULL,
	  "accept `remusdbctl inject` (tests only)" },
	{ "link_security", RDB_OPT_STRING, OFF(rdb_daemon_config, link_security), "psk", 0, 0, v_link_security,
	  "replication link: psk (TLS 1.3, both hosts prove they hold link_psk_file) or insecure (plaintext: anyone who reaches `listen` can overwrite a backed-up VM)" },
	{ "link_psk_file", RDB_OPT_STRING, OFF(rdb_daemon_config, link_psk_file), "/etc/remusdb/link.psk", 0, 0, NULL,
	  "the cluster's link key, the same file on every host: 32-128 hex digits (openssl rand -hex 32), mode 0600; the daemon does not start without it unless link_security = insecure" },
	{ "cpus", RDB_OPT_STRING, OFF(rdb_daemon_config, cpus), "", 0, 0, v_cpulist,
	  "CPUs remusdbd and its helpers (disk servers, watchdog, encoder threads) run on, as a list (0 or 0-1,4); empty: wherever it was started. Keep the guests' QEMU off them: a shared CPU lengthens every checkpoint pause (docs/performance.md)" },
	{ "guest_cpus", RDB_OPT_STRING, OFF(rdb_daemon_config, guest_cpus), "", 0, 0, v_cpulist,
	  "CPUs for the QEMU a backup starts on failover; empty: the CPUs remusdbd was started with (before `cpus` applied)" },
	{ "process_units", RDB_OPT_STRING, OFF(rdb_daemon_config, process_units), "auto", 0, 0, v_process_units,
	  "where the processes remusdbd leaves running go: systemd (transient units: a QEMU it starts on failover or migration is a service of its own, remusdb-VM-qemu-ID.service in machine.slice, started by systemd so none of remusdbd.service's sandboxing reaches it; a disk server or Xen watch process, which keeps fds the daemon gives it, is started through systemd-run --scope into a scope of its own, remusdb-VM-disk-ID.scope; a stop or restart of remusdbd stops remusdbd alone), none (they stay in remusdbd's session and cgroup; KillMode=process keeps them alive), or auto (systemd when it runs this host, remusdbd is root and systemd-run is in PATH, else none)" },
	{ "qemu_group", RDB_OPT_STRING, OFF(rdb_daemon_config, qemu_group), "", 0, 0, NULL,
	  "the group QEMU runs as when remusdbd does not start it (libvirt's qemu.conf `group`: libvirt-qemu on Debian), a name or a number: run_dir is made 0770 with it, the sockets QEMU connects to (disk, network, migration) 0660, a backup's RAM images 0660; empty: all root only, and QEMU must run as root" },
};

static const struct rdb_option vm_opts[] = {
	{ "name", RDB_OPT_STRING, OFF(rdb_vm_config, name), "", 0, 0, v_name,
	  "VM name: [A-Za-z0-9_.-], 1-64 characters (required)" },
	{ "hypervisor", RDB_OPT_STRING, OFF(rdb_vm_config, hypervisor), "qemu", 0, 0, v_hypervisor,
	  "the VM's hypervisor backend: qemu (QEMU/KVM, its COLO migration stream and QMP) or xen (an x86 PV domain, through the remusdb-xen helper; qmp and watchdog_qmp name the domain, which is the VM's name; its vif (script=vif-remusdb) is relayed to net_socket by remusdb-xen vif; its disk, a raw image, is served on disk_socket to the domain's disk line with script=block-remusdb and replicated as a QEMU VM's is; one disk and one NIC: no extra_disk, nvram or extra_nic)" },
	{ "qmp", RDB_OPT_STRING, OFF(rdb_vm_config, qmp), "", 0, 0, NULL,
	  "the VM's QMP unix socket (required; remusdbctl makes it run_dir/NAME.qmp when a VM file leaves it out)" },
	{ "watchdog_qmp", RDB_OPT_STRING, OFF(rdb_vm_config, watchdog_qmp), "", 0, 0, NULL,
	  "a second QMP socket for the watchdog; without it a stalled daemon can freeze the guest (remusdbctl makes it run_dir/NAME.wd.qmp when a VM file leaves it out)" },
	{ "net_socket", RDB_OPT_STRING, OFF(rdb_vm_config, net_socket), "", 0, 0, NULL,
	  "unix socket remusdbd listens on for the VM's -netdev stream (required; remusdbctl makes it run_dir/NAME.net when a VM file leaves it out)" },
	{ "tap", RDB_OPT_STRING, OFF(rdb_vm_config, tap), "vmtap0", 0, 0, NULL,
	  "tap device on this host's bridge" },
	{ "backup_tap", RDB_OPT_STRING, OFF(rdb_vm_config, backup_tap), "", 0, 0, NULL,
	  "tap device on the backup's bridge; empty: same as tap" },
	{ "mac", RDB_OPT_STRING, OFF(rdb_vm_config, mac), "", 0, 0, v_mac,
	  "guest MAC, announced after failover" },
	{ "peer", RDB_OPT_STRING, OFF(rdb_vm_config, peer), "", 0, 0, v_hostport,
	  "backup host's remusdbd, address:port (required)" },
	{ "checkpoint_ms", RDB_OPT_U32, OFF(rdb_vm_config, checkpoint_ms), "25", 5, 10000, NULL,
	  "epoch length" },
	{ "checkpoint_deadline_ms", RDB_OPT_U32, OFF(rdb_vm_config, checkpoint_deadline_ms), "500", 10, 60000, NULL,
	  "longest the guest may stay paused for a checkpoint before protection is dropped" },
	{ "ram_mb", RDB_OPT_U32, OFF(rdb_vm_config, ram_mb), "0", 0, 16u << 20, NULL,
	  "guest RAM in MiB as in -m (0: take it from the checkpoint stream)" },
	{ "mode", RDB_OPT_STRING, OFF(rdb_vm_config, mode), "plain", 0, 0, v_mode,
	  "plain (every output packet waits for its checkpoint: no guest change needed) or commit-protection (only packets the guest's DBMS marks wait, with the rest of their TCP flow behind them: needs remusdb.ko and a patched DBMS in the guest, and event_port)" },
	{ "on_peer_loss", RDB_OPT_STRING, OFF(rdb_vm_config, on_peer_loss), "", 0, 0, v_peer_loss,
	  "when the hosts lose each other: witness (the side that wins the witness's decision runs; the other stops), manual (output stays held and the guest pauses until the operator decides: remusdbctl unprotect --force on the primary or failover --force on the backup) or unsafe-auto (plain Remus: both may run on a partition); empty: witness if the daemon has one, otherwise protect refuses" },
	{ "hold_bound_ms", RDB_OPT_U32, OFF(rdb_vm_config, hold_bound_ms), "2000", 0, 3600000, NULL,
	  "while a decision is pending on the primary, its guest runs with all output held for at most this long; then it is paused until the decision" },
	{ "failover_fence_ms", RDB_OPT_U32, OFF(rdb_vm_config, failover_fence_ms), "1000", 0, 60000, NULL,
	  "commit-protection: after a failover, clients' TCP input reaches the guest once it acknowledged the failover event (its DBMS aborted what was not committing), or after this long" },
	{ "disk", RDB_OPT_STRING, OFF(rdb_vm_config, disk), "", 0, 0, NULL,
	  "the VM's disk image on this host (raw, or qcow2: served as the file's bytes with QEMU's qcow2 driver on the NBD export); empty: no disk. remusdbd serves it over NBD and replicates it" },
	{ "disk_socket", RDB_OPT_STRING, OFF(rdb_vm_config, disk_socket), "", 0, 0, NULL,
	  "unix socket remusdbd serves the disk on, for QEMU's -drive driver=nbd,server.type=unix, or a Xen domain's disk = [ '...,script=block-remusdb,target=SOCKET' ] (required with disk; remusdbctl makes it run_dir/NAME.disk when a VM file leaves it out)" },
	{ "disk_id", RDB_OPT_STRING, OFF(rdb_vm_config, disk_id), "disk0", 0, 0, v_name,
	  "the -drive id the VM's disk device names (drive=...); the backup gives its replica the same id (QEMU only: a Xen domain's saved config names its device)" },
	{ "extra_disk", RDB_OPT_STRLIST, OFF(rdb_vm_config, extra_disk), NULL, 0, 0, NULL,
	  "one more disk image of the VM on this host (raw or qcow2), repeatable: the k-th (k = 1, 2, ...) is served on disk_socket with k appended (NAME.disk1) and its QEMU -drive id is disk<k>. Every disk is replicated, and one epoch's writes to all of them commit together on the backup. Needs disk; up to 7; hypervisor qemu; read tracking and the resync after a failover cover every disk" },
	{ "extra_nic", RDB_OPT_STRLIST, OFF(rdb_vm_config, extra_nic), NULL, 0, 0, NULL,
	  "one more NIC of the VM, repeatable (up to 4 NICs in all): tap=TAP[,backup_tap=TAP][,mac=MAC]. The k-th (k = 1, 2, ...) is served on net_socket with k appended (NAME.net1) and its QEMU -netdev id is net<k>; its output waits for the checkpoint like the first NIC's (under commit protection its own flows' only), and after a failover the backup runs it on backup_tap (default: tap). Not with hypervisor = xen" },
	{ "nvram", RDB_OPT_STRING, OFF(rdb_vm_config, nvram), "", 0, 0, NULL,
	  "the UEFI variable store of the VM on this host (OVMF_VARS, raw), replicated as the last of its disks: served on disk_socket with its number k appended (NAME.disk<k>, k = the number of extra_disk + 1), attached by QEMU as the second pflash (-drive if=pflash,unit=1 with driver=nbd on that socket; the firmware's code, the first pflash, is a read-only image in qemu_arg). Needs disk; hypervisor qemu. The primary's QEMU needs the pflash patch (hypervisor/qemu/README.md), or variables set while protected are lost at a failover" },
	{ "disk_ring_mb", RDB_OPT_U32, OFF(rdb_vm_config, disk_ring_mb), "32", 4, 1024, NULL,
	  "the ring carrying the disk server's changes to remusdbd; full for longer than checkpoint_deadline_ms (remusdbd stalled), the server stops waiting and protection drops" },
	{ "activity_log_extents", RDB_OPT_U32, OFF(rdb_vm_config, activity_log_extents), "1024", 16, 1u << 20, NULL,
	  "the primary's activity log: at most this many 1 MiB extents of its image may hold writes not yet both committed on the backup and synced here (each new one costs a sync of the log before the write); after a power pull, protecting the VM back to this image resyncs at most these plus what the survivor wrote" },
	{ "disk_epoch_max_mb", RDB_OPT_U32, OFF(rdb_vm_config, disk_epoch_max_mb), "256", 1, 65536, NULL,
	  "disk writes one epoch may carry before the backup refuses it (its buffer bound)" },
	{ "compression", RDB_OPT_BOOL, OFF(rdb_vm_config, compression), "true", 0, 0, NULL,
	  "checkpoint compression (XOR+RLE deltas against a page cache, LZ4), if the backup supports it" },
	{ "page_cache_percent", RDB_OPT_U32, OFF(rdb_vm_config, page_cache_percent), "10", 0, 100, NULL,
	  "page cache for XOR deltas, as a share of guest RAM (0: LZ4 only)" },
	{ "compress_threads", RDB_OPT_U32, OFF(rdb_vm_config, compress_threads), "2", 1, 64, NULL,
	  "encoder threads per VM, at most one per CPU remusdbd may run on (they run while the guest runs, not in the pause)" },
	{ "read_tracking", RDB_OPT_BOOL, OFF(rdb_vm_config, read_tracking), "true", 0, 0, NULL,
	  "disk read tracking: a dirty page holding a disk block the guest read (and nothing wrote since) goes as a reference to it, if the VM has a disk and the backup supports it" },
	{ "read_index_mb", RDB_OPT_U32, OFF(rdb_vm_config, read_index_mb), "32", 1, 4096, NULL,
	  "memory of the read index (48 bytes per 4 KiB block read: 32 MiB tracks ~2.8 GiB of reads); the least recently used entries go" },
	{ "verify_pages", RDB_OPT_BOOL, OFF(rdb_vm_config, verify_pages), "false", 0, 0, NULL,
	  "test and debug: each epoch carries a digest of its pages as QEMU sent them, the backup checks its RAM image against it after every commit (costs a hash of every page on both hosts; needs compression or read tracking)" },
	{ "shared_ram", RDB_OPT_BOOL, OFF(rdb_vm_config, shared_ram), "true", 0, 0, NULL,
	  "QEMU: checkpoints read the guest's pages from the primary QEMU's shared memory instead of the checkpoint stream, when its pc.ram is shared (memory-backend-memfd, or -file with share=on) and QEMU has x-colo-mapped-ram (hypervisor/qemu patch 0007); otherwise, or false, the stream carries them" },
	{ "protect_dscp", RDB_OPT_U32, OFF(rdb_vm_config, protect_dscp), "43", 0, 63, NULL,
	  "IPv6 DSCP the guest module marks protected packets with (its dscp parameter; 43 = 0x2b)" },
	{ "event_port", RDB_OPT_BOOL, OFF(rdb_vm_config, event_port), "false", 0, 0, NULL,
	  "the VM has the failover event port (virtserialport name=org.remusdb.0 on chardev rdbevent): after a failover the backup tells the guest" },
	{ "libvirt_restore", RDB_OPT_STRING, OFF(rdb_vm_config, libvirt_restore), "", 0, 0, NULL,
	  "the backup restores the VM into its libvirt domain of the VM's name (defined and enrolled there, libvirt's qemu hook installed) through libvirt at this URI, e.g. qemu:///system; if that fails, into its own QEMU. Empty: always its own QEMU (docs/libvirt.md)" },
	{ "qemu_arg", RDB_OPT_STRLIST, OFF(rdb_vm_config, qemu_arg), NULL, 0, 0, NULL,
	  "one QEMU argument per line, common to both hosts; no -qmp/-netdev/-serial/-incoming; NIC on netdev=net0" },
};

const struct rdb_config_table rdb_daemon_config_table = {
	"daemon", daemon_opts, sizeof(daemon_opts) / sizeof(daemon_opts[0]),
};

const struct rdb_config_table rdb_vm_config_table = {
	"vm", vm_opts, sizeof(vm_opts) / sizeof(vm_opts[0]),
};

static const struct rdb_option *find(const struct rdb_config_table *t,
				     const char *key)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->opts[i].name, key) == 0)
			return &t->opts[i];
	return NULL;
}

static int set_opt(const struct rdb_option *o, void *cfg, const char *v,
		   char *err, size_t errlen)
{
	char *field = (char *)cfg + o->offset;

	switch (o->type) {
	case RDB_OPT_BOOL:
		if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1"))
			*(bool *)field = true;
		else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "0"))
			*(bool *)field = false;
		else
			goto bad;
		return 0;
	case RDB_OPT_U32: {
		char *end;
		unsigned long n;

		errno = 0;
		n = strtoul(v, &end, 10);
		if (errno || end == v || *end || n < o->min || n > o->max) {
			snprintf(err, errlen, "%s = %s: want an integer in %u..%u",
				 o->name, v, o->min, o->max);
			return -EINVAL;
		}
		*(uint32_t *)field = (uint32_t)n;
		return 0;
	}
	case RDB_OPT_STRING: {
		char *s;

		if (o->validate && v[0] && o->validate(v) < 0)
			goto bad;
		s = strdup(v);
		if (!s)
			return -ENOMEM;
		free(*(char **)field);
		*(char **)field = s;
		return 0;
	}
	case RDB_OPT_STRLIST: {
		struct rdb_strlist *l = (struct rdb_strlist *)field;
		char **nv = realloc(l->v, (l->n + 2) * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		l->v = nv;
		l->v[l->n] = strdup(v);
		if (!l->v[l->n])
			return -ENOMEM;
		l->v[++l->n] = NULL;
		return 0;
	}
	}
bad:
	snprintf(err, errlen, "%s = %s: invalid value (%s)", o->name, v, o->doc);
	return -EINVAL;
}

void rdb_strlist_clear(struct rdb_strlist *l)
{
	for (size_t k = 0; k < l->n; k++)
		free(l->v[k]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

void rdb_config_dispose(const struct rdb_config_table *t, void *cfg)
{
	for (size_t i = 0; i < t->n; i++) {
		char *field = (char *)cfg + t->opts[i].offset;

		if (t->opts[i].type == RDB_OPT_STRING) {
			free(*(char **)field);
			*(char **)field = NULL;
		} else if (t->opts[i].type == RDB_OPT_STRLIST) {
			rdb_strlist_clear((struct rdb_strlist *)field);
		}
	}
}

void rdb_config_defaults(const struct rdb_config_table *t, void *cfg)
{
	char err[256];

	for (size_t i = 0; i < t->n; i++) {
		char *field = (char *)cfg + t->opts[i].offset;

		if (t->opts[i].type == RDB_OPT_STRING)
			*(char **)field = NULL;
		else if (t->opts[i].type == RDB_OPT_STRLIST)
			memset(field, 0, sizeof(struct rdb_strlist));
		if (t->opts[i].def)
			set_opt(&t->opts[i], cfg, t->opts[i].def, err, sizeof(err));
	}
}

int rdb_config_set(const struct rdb_config_table *t, void *cfg,
		   const char *key, const char *value, char *err, size_t errlen)
{
	const struct rdb_option *o = find(t, key);

	if (!o) {
		snprintf(err, errlen, "unknown %s option '%s'", t->what, key);
		return -EINVAL;
	}
	return set_opt(o, cfg, value, err, errlen);
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

int rdb_config_load_file(const struct rdb_config_table *t, const char *path,
			 void *cfg, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL, e2[512];
	size_t cap = 0;
	ssize_t n;
	bool seen[64] = { false };
	int lineno = 0, rc = 0;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	while ((n = getline(&line, &cap, f)) > 0) {
		size_t len = strlen(line);
		char *s, *eq;
		const struct rdb_option *o;

		lineno++;
		/* a NUL would end the line early, unseen: the whole line is
		 * refused, the last one too (no '\n' there) */
		if (len != (size_t)n ||
		    len - (line[len - 1] == '\n') > RDB_CONFIG_LINE_MAX) {
			snprintf(err, errlen, "%s:%d: line longer than %d bytes or "
				 "with a NUL byte", path, lineno, RDB_CONFIG_LINE_MAX);
			rc = -EINVAL;
			break;
		}
		s = trim(line);
		if (!*s || *s == '#')
			continue;
		eq = strchr(s, '=');
		if (!eq) {
			snprintf(err, errlen, "%s:%d: expected key = value", path, lineno);
			rc = -EINVAL;
			break;
		}
		*eq = 0;
		o = find(t, trim(s));
		if (!o) {
			snprintf(err, errlen, "%s:%d: unknown %s option '%s'", path,
				 lineno, t->what, trim(s));
			rc = -EINVAL;
			break;
		}
		if (o->type != RDB_OPT_STRLIST && seen[o - t->opts]) {
			snprintf(err, errlen, "%s:%d: '%s' set twice", path, lineno,
				 o->name);
			rc = -EINVAL;
			break;
		}
		seen[o - t->opts] = true;
		rc = set_opt(o, cfg, trim(eq + 1), e2, sizeof(e2));
		if (rc < 0) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, e2);
			break;
		}
	}
	free(line);
	fclose(f);
	return rc;
}

void rdb_config_dump_defaults(const struct rdb_config_table *t, FILE *f)
{
	for (size_t i = 0; i < t->n; i++) {
		const struct rdb_option *o = &t->opts[i];

		fprintf(f, "# %s", o->doc);
		if (o->type == RDB_OPT_U32)
			fprintf(f, " [%u..%u]", o->min, o->max);
		fprintf(f, "\n%s%s = %s\n\n", o->type == RDB_OPT_STRLIST ? "# " : "",
			o->name, o->def ? o->def : "");
	}
}

/* A QEMU option string "type,key=value,..." has key=value (",," is an
 * escaped comma, not a separator). */
static bool has_opt(const char *opts, const char *key, const char *value)
{
	size_t kl = strlen(key), vl = strlen(value);

	for (const char *p = opts; (p = strchr(p, ',')); ) {
		if (p[1] == ',') {
			p += 2;
			continue;
		}
		p++;
		if (!strncmp(p, key, kl) && p[kl] == '=' &&
		    !strncmp(p + kl + 1, value, vl) &&
		    (p[kl + 1 + vl] == 0 || p[kl + 1 + vl] == ','))
			return true;
	}
	return false;
}

/* -m as QEMU reads it: [size=]N[M|G|T][,...], N in MiB without a suffix.
 * Returns the MiB, or 0 when the form is not one of these. */
static uint64_t qemu_m_mib(const char *a)
{
	char *end;
	unsigned long long n;

	if (!strncmp(a, "size=", 5))
		a += 5;
	errno = 0;
	n = strtoull(a, &end, 10);
	if (errno || end == a)
		return 0;
	switch (*end) {
	case 'M': case 'm': end++; break;
	case 'G': case 'g': n <<= 10; end++; break;
	case 'T': case 't': n <<= 20; end++; break;
	}
	return *end == 0 || *end == ',' ? n : 0;
}

const char *rdb_peer_loss_name(enum rdb_peer_loss p)
{
	return p == RDB_PEER_LOSS_WITNESS ? "witness" :
	       p == RDB_PEER_LOSS_MANUAL ? "manual" : "unsafe-auto";
}

int rdb_vm_config_peer_loss(const struct rdb_vm_config *c, bool have_witness,
			    enum rdb_peer_loss *out, char *err, size_t errlen)
{
	const char *v = c->on_peer_loss ? c->on_peer_loss : "";

	if (!v[0] || !strcmp(v, "witness")) {
		if (!have_witness) {
			snprintf(err, errlen, "VM %s: no witness is configured "
				 "(remusdbd.conf: witness = http://HOST:2379), so the "
				 "VM must say what happens when its hosts lose each "
				 "other: on_peer_loss = manual, or unsafe-auto (both "
				 "copies may run after a partition)", c->name);
			return -EINVAL;
		}
		*out = RDB_PEER_LOSS_WITNESS;
	} else if (!strcmp(v, "manual")) {
		*out = RDB_PEER_LOSS_MANUAL;
	} else if (!strcmp(v, "unsafe-auto")) {
		*out = RDB_PEER_LOSS_UNSAFE_AUTO;
	} else {
		snprintf(err, errlen, "on_peer_loss: %s", v);
		return -EINVAL;
	}
	return 0;
}

int rdb_nic_spec_parse(const char *v, struct rdb_nic_spec *out, char *err,
		       size_t errlen)
{
	char buf[200], *save = NULL, *kv;

	memset(out, 0, sizeof(*out));
	if (strlen(v) >= sizeof(buf)) {
		snprintf(err, errlen, "extra_nic %.40s...: too long", v);
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", v);
	for (kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');
		char *dst = NULL;
		size_t cap = 0;

		if (eq) {
			*eq = 0;
			if (!strcmp(kv, "tap"))
				dst = out->tap, cap = sizeof(out->tap);
			else if (!strcmp(kv, "backup_tap"))
				dst = out->backup_tap, cap = sizeof(out->backup_tap);
			else if (!strcmp(kv, "mac"))
				dst = out->mac, cap = sizeof(out->mac);
		}
		if (!dst || !eq[1] || strlen(eq + 1) >= cap ||
		    (dst == out->mac && v_mac(eq + 1) < 0) ||
		    (dst != out->mac && v_name(eq + 1) < 0)) {
			snprintf(err, errlen, "extra_nic %s: expected tap=TAP"
				 "[,backup_tap=TAP][,mac=MAC] (%s)", v, eq ?
				 (dst ? "bad value" : "unknown key") : "not key=value");
			return -EINVAL;
		}
		snprintf(dst, cap, "%s", eq + 1);
	}
	if (!out->tap[0]) {
		snprintf(err, errlen, "extra_nic %s: tap= is required", v);
		return -EINVAL;
	}
	return 0;
}

unsigned rdb_vm_config_nnics(const struct rdb_vm_config *c)
{
	return 1 + (unsigned)c->extra_nic.n;
}

unsigned rdb_vm_config_ndisks(const struct rdb_vm_config *c)
{
	if (!c->disk || !c->disk[0])
		return 0;
	return 1 + (unsigned)c->extra_disk.n + (c->nvram && c->nvram[0] ? 1 : 0);
}

const char *rdb_vm_config_disk_image(const struct rdb_vm_config *c, unsigned k)
{
	if (k >= rdb_vm_config_ndisks(c))
		return NULL;
	if (k == 0)
		return c->disk;
	if (k <= c->extra_disk.n)
		return c->extra_disk.v[k - 1];
	return c->nvram;
}

bool rdb_vm_config_disk_is_nvram(const struct rdb_vm_config *c, unsigned k)
{
	return c->nvram && c->nvram[0] && k == c->extra_disk.n + 1 &&
	       k < rdb_vm_config_ndisks(c);
}

int rdb_vm_config_nic(const struct rdb_vm_config *c, unsigned k, char *sock,
		      size_t socklen, struct rdb_nic_spec *spec)
{
	char err[160];

	if (k >= rdb_vm_config_nnics(c) || !c->net_socket)
		return -EINVAL;
	if (k == 0) {
		memset(spec, 0, sizeof(*spec));
		snprintf(spec->tap, sizeof(spec->tap), "%s", c->tap ? c->tap : "");
		snprintf(spec->backup_tap, sizeof(spec->backup_tap), "%s",
			 c->backup_tap && c->backup_tap[0] ? c->backup_tap :
			 spec->tap);
		snprintf(spec->mac, sizeof(spec->mac), "%s", c->mac ? c->mac : "");
		snprintf(sock, socklen, "%s", c->net_socket);
		return 0;
	}
	if (rdb_nic_spec_parse(c->extra_nic.v[k - 1], spec, err, sizeof(err)) < 0)
		return -EINVAL;
	if (!spec->backup_tap[0])
		snprintf(spec->backup_tap, sizeof(spec->backup_tap), "%s", spec->tap);
	snprintf(sock, socklen, "%s%u", c->net_socket, k);
	return 0;
}

int rdb_vm_config_check(const struct rdb_vm_config *c, char *err, size_t errlen)
{
	bool xen = c->hypervisor && !strcmp(c->hypervisor, "xen");
	const char *missing = !c->name || !c->name[0] ? "name" :
		!c->qmp || !c->qmp[0] ? "qmp" :
		!c->net_socket || !c->net_socket[0] ? "net_socket" :
		!c->peer || !c->peer[0] ? "peer" :
		c->qemu_arg.n == 0 && !xen ? "qemu_arg" : NULL;

	if (missing) {
		snprintf(err, errlen, "VM config: '%s' is required", missing);
		return -EINVAL;
	}
	if (xen && (c->qemu_arg.n ||
		    (c->libvirt_restore && c->libvirt_restore[0]))) {
		snprintf(err, errlen, "VM config: hypervisor = xen takes no %s",
			 c->qemu_arg.n ? "qemu_arg" : "libvirt_restore");
		return -EINVAL;
	}
	if (c->disk && c->disk[0] && (!c->disk_socket || !c->disk_socket[0])) {
		snprintf(err, errlen, "VM config: 'disk_socket' is required with 'disk'");
		return -EINVAL;
	}
	if (c->extra_nic.n) {
		struct rdb_nic_spec sp;
		const char *why = c->extra_nic.n + 1 > RDB_NICS_MAX ?
			"more than 4 NICs in all" :
			xen ? "is for hypervisor = qemu" : NULL;

		if (why) {
			snprintf(err, errlen, "VM config: extra_nic %s", why);
			return -EINVAL;
		}
		for (size_t i = 0; i < c->extra_nic.n; i++)
			if (rdb_nic_spec_parse(c->extra_nic.v[i], &sp, err, errlen) < 0)
				return -EINVAL;
	}
	if (c->nvram && c->nvram[0]) {
		const char *why = !c->disk || !c->disk[0] ? "needs 'disk' (the first)" :
			xen ? "is for hypervisor = qemu" :
			!strcmp(c->nvram, c->disk) ? "is the first disk again" : NULL;

		for (size_t i = 0; !why && i < c->extra_disk.n; i++)
			if (!strcmp(c->extra_disk.v[i], c->nvram))
				why = "is an extra_disk too";
		if (why) {
			snprintf(err, errlen, "VM config: nvram %s", why);
			return -EINVAL;
		}
	}
	if (rdb_vm_config_ndisks(c) > RDB_DISKS_MAX) {
		snprintf(err, errlen, "VM config: more than 8 disks in all "
			 "(disk, extra_disk, nvram)");
		return -EINVAL;
	}
	if (c->extra_disk.n) {
		const char *why = !c->disk || !c->disk[0] ? "needs 'disk' (the first)" :
			c->extra_disk.n + 1 > RDB_DISKS_MAX ? "more than 8 disks in all" :
			xen ? "is for hypervisor = qemu" : NULL;

		if (why) {
			snprintf(err, errlen, "VM config: extra_disk %s", why);
			return -EINVAL;
		}
		for (size_t i = 0; i < c->extra_disk.n; i++)
			if (!c->extra_disk.v[i][0] || !strcmp(c->extra_disk.v[i], c->disk)) {
				snprintf(err, errlen, "VM config: extra_disk %zu is %s",
					 i + 1, c->extra_disk.v[i][0] ?
					 "the first disk again" : "empty");
				return -EINVAL;
			}
	}
	for (size_t i = 0; i < c->qemu_arg.n; i++) {
		const char *a = c->qemu_arg.v[i];
		const char *next = i + 1 < c->qemu_arg.n ? c->qemu_arg.v[i + 1] : "";

		if (!strcmp(a, "-qmp") || !strcmp(a, "-netdev") ||
		    !strcmp(a, "-serial") || !strcmp(a, "-incoming") ||
		    !strcmp(a, "-daemonize")) {
			snprintf(err, errlen, "VM config: qemu_arg %s is host-specific: "
				 "remusdbd adds it", a);
			return -EINVAL;
		}
		/* The guest RAM's backend is each host's own: the backup
		 * restores onto its RAM image (memory-backend-file id=pc.ram,
		 * restore.c), which one here would meet at failover (-machine
		 * memory-backend=pc.ram, as libvirt writes it, is the same on
		 * both and stays). */
		if (!strcmp(a, "-object") &&
		    ((!strncmp(next, "memory-backend-", 15) && has_opt(next, "id", "pc.ram")) ||
		     (next[0] == '{' && strstr(next, "\"memory-backend-") &&
		      strstr(next, "\"pc.ram\"")))) {
			snprintf(err, errlen, "VM config: qemu_arg %s %s: the guest "
				 "RAM's backend (id=pc.ram) is host-specific: the backup "
				 "adds its own; give the primary's on its QEMU command "
				 "line only", a, next);
			return -EINVAL;
		}
	}
	{
		/* drives in qemu_arg: read-only ones only (roimage.h) */
		struct rdb_roimage ro[RDB_ROIMAGE_MAX];
		unsigned nro;
		char why[600];

		if (rdb_roimages_list(c->qemu_arg.v, c->qemu_arg.n, ro, &nro,
				      why, sizeof(why)) < 0) {
			snprintf(err, errlen, "VM config: %s", why);
			return -EINVAL;
		}
	}
	for (size_t i = 0; c->ram_mb && i + 1 < c->qemu_arg.n; i++) {
		uint64_t m = strcmp(c->qemu_arg.v[i], "-m") ? 0 :
			qemu_m_mib(c->qemu_arg.v[i + 1]);

		if (m && m != c->ram_mb) {
			snprintf(err, errlen, "VM config: ram_mb = %u but qemu_arg "
				 "-m %s", c->ram_mb, c->qemu_arg.v[i + 1]);
			return -EINVAL;
		}
	}
	if (c->checkpoint_deadline_ms <= c->checkpoint_ms / 2) {
		snprintf(err, errlen, "VM config: checkpoint_deadline_ms (%u) is too "
			 "short for checkpoint_ms (%u)", c->checkpoint_deadline_ms,
			 c->checkpoint_ms);
		return -EINVAL;
	}
	return 0;
}

int rdb_vm_config_supported(const struct rdb_vm_config *c, char *err,
			    size_t errlen)
{
	(void)c;
	(void)err;
	(void)errlen;
	return 0;
}

bool rdb_vm_config_commit_protection(const struct rdb_vm_config *c)
{
	return c->mode && !strcmp(c->mode, "commit-protection");
}

/* How a VM is protected, as opposed to what is served for it. */
static const char *const protection_opts[] = {
	"peer", "mode", "checkpoint_ms", "checkpoint_deadline_ms", "compression",
	"page_cache_percent", "compress_threads", "protect_dscp", "event_port",
	"failover_fence_ms", "on_peer_loss", "hold_bound_ms", "read_tracking",
	"read_index_mb", "verify_pages", "libvirt_restore", "shared_ram",
};

int rdb_vm_config_take_protection(struct rdb_vm_config *dst,
				  const struct rdb_vm_config *src)
{
	for (size_t i = 0; i < sizeof(protection_opts) / sizeof(protection_opts[0]); i++) {
		const struct rdb_option *o = find(&rdb_vm_config_table, protection_opts[i]);
		const char *from = (const char *)src + o->offset;
		char *to = (char *)dst + o->offset;

		switch (o->type) {
		case RDB_OPT_BOOL:
			*(bool *)to = *(const bool *)from;
			break;
		case RDB_OPT_U32:
			*(uint32_t *)to = *(const uint32_t *)from;
			break;
		case RDB_OPT_STRING: {
			const char *v = *(char *const *)from;
			char *d;

			if (!v || !v[0])
				break;	/* unset in the request: keep */
			d = strdup(v);
			if (!d)
				return -ENOMEM;
			free(*(char **)to);
			*(char **)to = d;
			break;
		}
		case RDB_OPT_STRLIST:
			break;
		}
	}
	return 0;
}

/*
 * Options an earlier release (the rolling upgrade's, upgrade-rolling.sh)
 * does not know: left out of the JSON at their default, so that a newer
 * remusdbctl or primary still talks to an older daemon or backup, which
 * refuses an unknown option (and behaves as the default anyway).
 */
static const char *const newer_bool_opts[] = { "shared_ram" };

static bool newer_at_default(const struct rdb_option *opt, const char *field)
{
	for (size_t i = 0; i < sizeof(newer_bool_opts) / sizeof(newer_bool_opts[0]); i++)
		if (opt->type == RDB_OPT_BOOL && !strcmp(opt->name, newer_bool_opts[i]))
			return *(const bool *)field == !strcmp(opt->def, "true");
	return false;
}

json_t *rdb_vm_config_to_json(const struct rdb_vm_config *c)
{
	json_t *o = json_object();

	for (size_t i = 0; o && i < rdb_vm_config_table.n; i++) {
		const struct rdb_option *opt = &rdb_vm_config_table.opts[i];
		const char *field = (const char *)c + opt->offset;

		if (newer_at_default(opt, field))
			continue;
		switch (opt->type) {
		case RDB_OPT_BOOL:
			json_object_set_new(o, opt->name, json_boolean(*(const bool *)field));
			break;
		case RDB_OPT_U32:
			json_object_set_new(o, opt->name, json_integer(*(const uint32_t *)field));
			break;
		case RDB_OPT_STRING:
			json_object_set_new(o, opt->name,
					    json_string(*(char *const *)field ? *(char *const *)field : ""));
			break;
		case RDB_OPT_STRLIST: {
			const struct rdb_strlist *l = (const struct rdb_strlist *)field;
			json_t *a = json_array();

			for (size_t k = 0; a && k < l->n; k++)
				json_array_append_new(a, json_string(l->v[k]));
			json_object_set_new(o, opt->name, a);
			break;
		}
		}
	}
	return o;
}

int rdb_vm_config_write_file(const struct rdb_vm_config *c, const char *path,
			     char *err, size_t errlen)
{
	char tmp[600];
	FILE *f;
	int rc = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", tmp, strerror(-rc));
		return rc;
	}
	fprintf(f, "# written by remusdbd: the VM as this host serves it\n");
	for (size_t i = 0; i < rdb_vm_config_table.n; i++) {
		const struct rdb_option *opt = &rdb_vm_config_table.opts[i];
		const char *field = (const char *)c + opt->offset;

		switch (opt->type) {
		case RDB_OPT_BOOL:
			fprintf(f, "%s = %s\n", opt->name,
				*(const bool *)field ? "true" : "false");
			break;
		case RDB_OPT_U32:
			fprintf(f, "%s = %u\n", opt->name, *(const uint32_t *)field);
			break;
		case RDB_OPT_STRING:
			if (*(char *const *)field && **(char *const *)field)
				fprintf(f, "%s = %s\n", opt->name,
					*(char *const *)field);
			break;
		case RDB_OPT_STRLIST: {
			const struct rdb_strlist *l = (const struct rdb_strlist *)field;

			for (size_t k = 0; k < l->n; k++)
				fprintf(f, "%s = %s\n", opt->name, l->v[k]);
			break;
		}
		}
	}
	if (fflush(f) != 0 || fsync(fileno(f)) < 0)
		rc = -errno;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		unlink(tmp);
	}
	return rc;
}

int rdb_vm_config_from_json(json_t *obj, struct rdb_vm_config *c, char *err,
			    size_t errlen)
{
	const char *key;
	json_t *v;
	int rc;

	if (!json_is_object(obj)) {
		snprintf(err, errlen, "VM config must be a JSON object");
		return -EINVAL;
	}
	json_object_foreach(obj, key, v) {
		char num[32];
		const char *s = NULL;

		if (json_is_array(v)) {
			size_t i;
			json_t *e;

			json_array_foreach(v, i, e) {
				if (!json_is_string(e)) {
					snprintf(err, errlen, "%s: list of strings expected", key);
					return -EINVAL;
				}
				rc = rdb_config_set(&rdb_vm_config_table, c, key,
						    json_string_value(e), err, errlen);
				if (rc < 0)
					return rc;
			}
			continue;
		}
		if (json_is_string(v)) {
			s = json_string_value(v);
		} else if (json_is_integer(v)) {
			snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
			s = num;
		} else if (json_is_boolean(v)) {
			s = json_is_true(v) ? "true" : "false";
		} else {
			snprintf(err, errlen, "%s: unsupported JSON type", key);
			return -EINVAL;
		}
		rc = rdb_config_set(&rdb_vm_config_table, c, key, s, err, errlen);
		if (rc < 0)
			return rc;
	}
	rc = rdb_vm_config_check(c, err, errlen);
	if (rc == 0)
		rc = rdb_vm_config_supported(c, err, errlen);
	return rc;
}

int rdb_vm_config_copy(const struct rdb_vm_config *src,
		       struct rdb_vm_config *dst, char *err, size_t errlen)
{
	json_t *j;
	int rc;

	rdb_config_defaults(&rdb_vm_config_table, dst);
	j = rdb_vm_config_to_json(src);
	rc = j ? rdb_vm_config_from_json(j, dst, err, errlen) : -ENOMEM;
	json_decref(j);
	return rc;
}

uint32_t rdb_daemon_ack_timeout_ms(const struct rdb_daemon_config *c)
{
	return c->ack_timeout_ms ? c->ack_timeout_ms : 5 * c->failover_timeout_ms;
}

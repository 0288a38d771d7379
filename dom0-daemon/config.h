/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Configuration as tables (Redis config.c's standardConfig): each option
 * has a name, a type, bounds, a default that works out of the box, and a
 * line of documentation.  Files are `key = value` lines; `#` comments.
 */
#ifndef RDB_CONFIG_H
#define RDB_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

enum rdb_opt_type {
	RDB_OPT_BOOL,
	RDB_OPT_U32,
	RDB_OPT_STRING,
	RDB_OPT_STRLIST,	/* repeatable key */
};

struct rdb_strlist {
	char **v;
	size_t n;
};

struct rdb_option {
	const char *name;
	enum rdb_opt_type type;
	size_t offset;
	const char *def;
	uint32_t min, max;	/* U32 */
	int (*validate)(const char *value);	/* 0 or -EINVAL; may be NULL */
	const char *doc;
};

struct rdb_config_table {
	const char *what;
	const struct rdb_option *opts;
	size_t n;
};

struct rdb_daemon_config {
	char *listen;
	char *control_socket;
	char *run_dir;
	char *state_dir;
	char *log_level;
	uint32_t heartbeat_ms;
	uint32_t failover_timeout_ms;
	uint32_t ack_timeout_ms;
	uint32_t auto_reprotect_s;
	char *qemu_binary;
	char *metrics_file;
	bool allow_fault_injection;
	char *node_name;
	char *witness;
	char *witness_prefix;
	uint32_t witness_timeout_ms;
	char *link_security;
	char *link_psk_file;
	char *cpus;
	char *guest_cpus;
	char *qemu_group;
	char *process_units;
};

struct rdb_vm_config {
	char *name;
	char *hypervisor;
	char *qmp;
	char *watchdog_qmp;
	char *net_socket;
	char *tap;
	char *backup_tap;
	char *mac;
	char *peer;
	uint32_t checkpoint_ms;
	uint32_t checkpoint_deadline_ms;
	uint32_t ram_mb;
	char *mode;
	char *disk;
	char *disk_socket;
	char *disk_id;
	struct rdb_strlist extra_disk;	/* disks 1, 2, ... */
	char *nvram;			/* UEFI variables: the last disk */
	struct rdb_strlist extra_nic;	/* NICs 1, 2, ... (rdb_nic_spec) */
	uint32_t disk_epoch_max_mb;
	uint32_t disk_ring_mb;
	uint32_t activity_log_extents;
	bool compression;
	uint32_t page_cache_percent;
	uint32_t compress_threads;
	bool read_tracking;
	uint32_t read_index_mb;
	bool verify_pages;
	bool shared_ram;	/* pages from QEMU's shared memory where it can */
	uint32_t protect_dscp;
	bool event_port;
	char *libvirt_restore;	/* URI: restore into the libvirt domain */
	uint32_t failover_fence_ms;
	char *on_peer_loss;
	uint32_t hold_bound_ms;
	struct rdb_strlist qemu_arg;
};

extern const struct rdb_config_table rdb_daemon_config_table;
extern const struct rdb_config_table rdb_vm_config_table;

/* ack_timeout_ms as it applies: 0 (the default) is 5 x
 * failover_timeout_ms. */
uint32_t rdb_daemon_ack_timeout_ms(const struct rdb_daemon_config *c);

/* A VM's NICs: its first (net_socket, tap, backup_tap, mac) and up to
 * RDB_NICS_MAX - 1 more (extra_nic = tap=T[,backup_tap=B][,mac=M]). */
#define RDB_NICS_MAX 4
struct rdb_nic_spec {
	char tap[32], backup_tap[32], mac[18];
};
int rdb_nic_spec_parse(const char *v, struct rdb_nic_spec *out, char *err,
		       size_t errlen);
/* NIC k's socket (net_socket, then net_socket with k appended), tap on
 * the primary's host and on the backup's, MAC ("" if not given); -EINVAL
 * for a k the VM has not or a malformed extra_nic. */
int rdb_vm_config_nic(const struct rdb_vm_config *c, unsigned k, char *sock,
		      size_t socklen, struct rdb_nic_spec *spec);
unsigned rdb_vm_config_nnics(const struct rdb_vm_config *c);
/* A VM's disks: disk, each extra_disk, then nvram (the UEFI variable
 * store, a pflash drive), in that order; their number, disk k's image
 * (NULL past the last), and whether disk k is the variable store. */
unsigned rdb_vm_config_ndisks(const struct rdb_vm_config *c);
const char *rdb_vm_config_disk_image(const struct rdb_vm_config *c, unsigned k);
bool rdb_vm_config_disk_is_nvram(const struct rdb_vm_config *c, unsigned k);
void rdb_config_defaults(const struct rdb_config_table *t, void *cfg);
void rdb_strlist_clear(struct rdb_strlist *l);	/* empty again */
void rdb_config_dispose(const struct rdb_config_table *t, void *cfg);
int rdb_config_set(const struct rdb_config_table *t, void *cfg,
		   const char *key, const char *value, char *err, size_t errlen);
/* A missing file is an error; call only for files that should exist.  A
 * line holds at most RDB_CONFIG_LINE_MAX bytes besides its '\n' and no NUL
 * byte, or the load fails naming file:line; a line never continues on the
 * next. */
#define RDB_CONFIG_LINE_MAX 4094
int rdb_config_load_file(const struct rdb_config_table *t, const char *path,
			 void *cfg, char *err, size_t errlen);
/* Prints every option with its default and doc, as a config file. */
void rdb_config_dump_defaults(const struct rdb_config_table *t, FILE *f);

/* Required fields and cross-field rules of a VM config. */
int rdb_vm_config_check(const struct rdb_vm_config *c, char *err, size_t errlen);
/* What this remusdbd can run (-EOPNOTSUPP, with a message): everything
 * the table accepts, today. */
int rdb_vm_config_supported(const struct rdb_vm_config *c, char *err,
			    size_t errlen);
bool rdb_vm_config_commit_protection(const struct rdb_vm_config *c);

enum rdb_peer_loss {
	RDB_PEER_LOSS_WITNESS,
	RDB_PEER_LOSS_MANUAL,
	RDB_PEER_LOSS_UNSAFE_AUTO,
};
/* The VM's on_peer_loss, resolved against whether this daemon has a
 * witness: "" means witness when there is one; with none, the VM must say
 * (-EINVAL with the reason: unsafe-auto is never chosen silently). */
int rdb_vm_config_peer_loss(const struct rdb_vm_config *c, bool have_witness,
			    enum rdb_peer_loss *out, char *err, size_t errlen);
const char *rdb_peer_loss_name(enum rdb_peer_loss p);
/* A protect of an attached VM: the options that say how it is protected
 * (peer, mode, checkpoint_ms, ...) come from the protect request; what is
 * served for it (disk, NIC, QEMU arguments) stays as attached.  Strings
 * left empty in src keep dst's value. */
int rdb_vm_config_take_protection(struct rdb_vm_config *dst,
				  const struct rdb_vm_config *src);
json_t *rdb_vm_config_to_json(const struct rdb_vm_config *c);
/* c as a VM file (key = value lines, rdb_config_load_file reads it back;
 * empty strings left out), written to a temporary file, synced and
 * renamed over path. */
int rdb_vm_config_write_file(const struct rdb_vm_config *c, const char *path,
			     char *err, size_t errlen);
/* The daemon's intake: applies every key of obj (strings, numbers,
 * booleans, string arrays), then rdb_vm_config_check and
 * rdb_vm_config_supported. */
int rdb_vm_config_from_json(json_t *obj, struct rdb_vm_config *c, char *err,
			    size_t errlen);
/* dst (not initialised) an owned copy of src, through its JSON: the
 * defaults, then every key of src; dispose of dst either way. */
int rdb_vm_config_copy(const struct rdb_vm_config *src,
		       struct rdb_vm_config *dst, char *err, size_t errlen);

#endif

/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What this host was told to do with each of its VMs, kept across
 * restarts: <state_dir>/<vm>/definition.json, written durably (a
 * temporary file, synced, renamed, the directory synced) by the control
 * commands that change it, and read at start, when remusdbd re-adopts
 * every VM it finds there (docs/operations.md, "Restarting remusdbd").
 *
 *   attach            -> attached, the VM's config
 *   protect           -> protected, the VM's config
 *   unprotect         -> attached
 *   detach            -> removed
 *   a switchover's end (the VM runs on the other host) -> removed
 *   a failover's restore here (backup.c) -> restored, the primary's config
 *                     as this host received it, and what the restore
 *                     made (the replicas, their servers: restored)
 *   protect NAME of a restored VM -> protected, its config as served here
 *
 * The config is the VM's as the daemon holds it (rdb_vm_config_to_json),
 * so a re-adoption asks for exactly what the operator last asked for.
 * A file this code cannot read is never removed or rewritten: it is
 * reported (its path and why) and skipped, so an operator can repair it.
 */
#ifndef RDB_VMDEF_H
#define RDB_VMDEF_H

#include <stddef.h>

#include <jansson.h>

enum rdb_vmdef_intent {
	RDB_VMDEF_ATTACHED,
	RDB_VMDEF_PROTECTED,
	RDB_VMDEF_RESTORED,
};

const char *rdb_vmdef_intent_name(enum rdb_vmdef_intent i);

/* Records NAME's intent and config (not taken); 0 or -errno, err says
 * what failed. */
int rdb_vmdef_save(const char *state_dir, const char *name,
		   enum rdb_vmdef_intent intent, json_t *config, char *err,
		   size_t errlen);
/* The same for a VM a failover restored here (atomic, not synced: it
 * matters only while its QEMU runs in this boot): restored (not taken) is
 * what the re-adoption needs besides the config, { "generation",
 * "epoch", "disks": [replica paths, disk 0 first], "servers": [{ "pid",
 * "start" }] (the replicas' disk servers, which outlive the daemon:
 * start is the process's start time in clock ticks, /proc/PID/stat) }. */
int rdb_vmdef_save_restored(const char *state_dir, const char *name,
			    json_t *config, json_t *restored, char *err,
			    size_t errlen);

/* Forgets NAME (no definition: 0). */
int rdb_vmdef_remove(const char *state_dir, const char *name);
/* The same where the caller goes on regardless (a detach, a switchover's
 * end, this host becoming the VM's backup): a failure is logged, with
 * what it means (the next start would re-adopt the VM). */
void rdb_vmdef_forget(const char *state_dir, const char *name);

struct rdb_vmdef {
	char name[65];
	enum rdb_vmdef_intent intent;
	json_t *config;		/* borrowed for the callback's duration */
	json_t *restored;	/* RESTORED: what the restore made (ditto) */
	char saved[40];		/* when it was written, UTC, as stored */
};

/*
 * Calls each() for every definition under state_dir, in name order, and
 * bad() for every one that cannot be read (path, why).  A missing
 * state_dir is no definition.  Returns how many each() got, or -errno
 * when state_dir cannot be listed.
 */
int rdb_vmdef_each(const char *state_dir,
		   void (*each)(void *opaque, const struct rdb_vmdef *def),
		   void (*bad)(void *opaque, const char *path, const char *why),
		   void *opaque);

#endif

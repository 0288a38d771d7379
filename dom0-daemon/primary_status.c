// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "primary"
#include "primary_int.h"
#include "cpulist.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

static bool nics_connected(const struct rdb_primary *p)
{
	for (unsigned i = 0; i < p->nnics; i++)
		if (!rdb_pri_nic_connected(p->nics[i]))
			return false;
	return p->nnics > 0;
}

/* Commit protection's counters over every NIC: the tracked flows. */
static uint64_t flow_totals(const struct rdb_primary *p,
			    struct rdb_flowbuf_stats *sum)
{
	uint64_t flows = 0;

	for (unsigned i = 0; i < p->nnics; i++)
		rdb_pri_nic_add_flow_stats(p->nics[i], sum, &flows);
	return flows;
}

void rdb_primary_status(const struct rdb_vm *vm, json_t *o)
{
	const struct rdb_primary *p = vm->pri;

	if (!p)
		return;
	json_object_set_new(o, "peer", json_string(vm->cfg.peer));
	json_object_set_new(o, "mode", json_string(vm->cfg.mode ? vm->cfg.mode : "plain"));
	/* re-adopted as protected: protect starts once the witness answers
	 * (remusdbctl wait ... protected waits through it) */
	json_object_set_new(o, "protect_pending", json_boolean(p->readopt_protect ||
							      p->arp.pending));
	/* protected again on its own after the backup's remusdbd went
	 * away (primary_auto.c): the attempts so far, the next's time */
	if (p->arp.pending) {
		uint64_t now = rdb_now_ns();

		json_object_set_new(o, "auto_reprotect", json_pack(
			"{s:s, s:i, s:f, s:f, s:b}", "why", p->arp.why,
			"attempts", (int)p->arp.attempts,
			"since_seconds", (double)(now - p->arp.since_ns) / RDB_NS_PER_S,
			"next_in_seconds", p->arp.attempting || p->arp.next_ns <= now ?
			0.0 : (double)(p->arp.next_ns - now) / RDB_NS_PER_S,
			"attempting", p->arp.attempting));
	}
	json_object_set_new(o, "open_epoch", json_integer((json_int_t)p->ck.open_epoch));
	/* the guest is stopped by a checkpoint right now */
	json_object_set_new(o, "in_pause", json_boolean(p->ck.active && p->ck.in_pause));
	/* the last protection's start, until epoch 0 was committed: the
	 * disk copy (queued), then the memory copy (COLO start to ACK 0) */
	if (vm->st.initial_ns) {
		json_t *is = json_pack(
			"{s:f, s:f, s:f, s:I, s:I}",
			"seconds", (double)vm->st.initial_ns / RDB_NS_PER_S,
			"disk_queued_seconds", (double)vm->st.copy_ns / RDB_NS_PER_S,
			"memory_seconds", (double)vm->st.initial_mem_ns / RDB_NS_PER_S,
			"memory_bytes", (json_int_t)vm->st.initial_mem_bytes,
			"disk_bytes", (json_int_t)vm->st.resync_bytes);

		/* the guest's one long stop of it (when the stream shows it) */
		if (is && vm->st.initial_stop_ns)
			json_object_set_new(is, "guest_stopped_ms", json_real(
				(double)vm->st.initial_stop_ns / RDB_NS_PER_MS));
		json_object_set_new(o, "initial_state", is);
	}
	if (p->qemu_pid > 0) {
		cpu_set_t q, shared;
		char a[256], b[256], c[256];

		/* read now: libvirt or an operator may move QEMU's threads */
		if (rdb_cpulist_of_process(p->qemu_pid, &q) == 0) {
			CPU_AND(&shared, &q, &p->d->cpus);
			json_object_set_new(o, "placement", json_pack(
				"{s:i, s:s, s:s, s:s, s:b}",
				"qemu_pid", (int)p->qemu_pid,
				"qemu_cpus", rdb_cpulist_format(&q, a, sizeof(a)),
				"daemon_cpus", rdb_cpulist_format(&p->d->cpus, b, sizeof(b)),
				"shared_cpus", rdb_cpulist_format(&shared, c, sizeof(c)),
				"daemon_pinned", p->d->cfg.cpus[0] != 0));
		}
	}
	json_object_set_new(o, "held_frames", json_integer((json_int_t)
		rdb_pri_held_frames(p)));
	json_object_set_new(o, "held_bytes", json_integer((json_int_t)
		rdb_pri_held_bytes(p)));
	if (p->ck.cp) {
		struct rdb_flowbuf_stats sum = { 0 }, *st = &sum;
		uint64_t flows = flow_totals(p, &sum);

		json_object_set_new(o, "commit_protection", json_pack(
			"{s:{s:I,s:I}, s:{s:I,s:I}, s:{s:I,s:I}, s:I, s:I, s:{s:I,s:I}, "
			"s:I, s:I, s:I, s:I, s:I, s:I, s:f}",
			"released_at_once", "frames", (json_int_t)st->now_frames,
			"bytes", (json_int_t)st->now_bytes,
			"held_marked", "frames", (json_int_t)st->marked_frames,
			"bytes", (json_int_t)st->marked_bytes,
			"held_behind", "frames", (json_int_t)st->behind_frames,
			"bytes", (json_int_t)st->behind_bytes,
			"held_synack", (json_int_t)st->synack_frames,
			"held_ack", (json_int_t)st->ack_frames,
			"released_at_commit", "frames", (json_int_t)st->released,
			"bytes", (json_int_t)st->released_bytes,
			"acks_superseded", (json_int_t)st->superseded,
			"dropped", (json_int_t)st->dropped,
			"dropped_place_kept", (json_int_t)st->placeholders,
			"untracked", (json_int_t)st->untracked,
			"flows", (json_int_t)flows,
			"flows_created", (json_int_t)st->flows_created,
			"max_hold_ms", (double)st->max_hold_ns / RDB_NS_PER_MS));
	}
	json_object_set_new(o, "replication_queue_bytes", json_integer((json_int_t)p->out.len));
	json_object_set_new(o, "guest_nic_connected", json_boolean(nics_connected(p)));
	json_object_set_new(o, "capture_epochs_left", json_integer((json_int_t)p->cap_left));
	{
		/* every device; the first disk's object also as "disk" (as
		 * before there could be several) */
		json_t *devs = rdb_ckdevs_status(&p->devs);

		for (size_t i = 0; p->ndisks && devs && i < json_array_size(devs); i++) {
			json_t *d = json_array_get(devs, i);

			if (!strcmp(json_string_value(json_object_get(d, "id")),
				    p->disks[0]->dev.id)) {
				json_object_set(o, "disk", d);
				break;
			}
		}
		json_object_set_new(o, "devices", devs);
	}
	if (p->ridx && p->rt_ndisks) {
		const struct rdb_codec_stats *c = &vm->st.codec;
		struct rdb_readidx_stats rs;
		uint64_t rd = 0, skip = 0;
		json_t *disks = json_array(), *rt;

		/* by tracked disk: blocks read, and DISKREF pages naming it */
		for (unsigned k = 0; k < p->rt_ndisks; k++) {
			const struct rdb_dring_shared *ds = p->disks[k]->disk.ring.sh;
			uint64_t r = ds ? atomic_load(&ds->reads_tracked) : 0;

			rd += r;
			skip += ds ? atomic_load(&ds->reads_skipped) : 0;
			if (disks)
				json_array_append_new(disks, json_pack("{s:s, s:I, s:I}",
					"id", p->disks[k]->dev.id,
					"blocks_read", (json_int_t)r,
					"diskref_pages", (json_int_t)c->rt_refs[k]));
		}
		rdb_readidx_stats(p->ridx, &rs);
		rt = json_pack(
			"{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			"index_capacity", (json_int_t)rs.capacity,
			"index_entries", (json_int_t)rs.entries,
			"index_bytes", (json_int_t)rs.mem_bytes,
			"blocks_read", (json_int_t)rd,
			"blocks_not_tracked", (json_int_t)skip,
			"invalidated", (json_int_t)rs.invalidated,
			"evicted", (json_int_t)rs.evicted,
			"lookups", (json_int_t)rs.lookups,
			"hits", (json_int_t)rs.hits,
			"unconfirmed", (json_int_t)c->rt_unconfirmed,
			"not_cached", (json_int_t)c->rt_uncached,
			"delta_smaller", (json_int_t)c->rt_delta_smaller,
			"diskref_pages", (json_int_t)c->pages[RDB_PAGE_DISKREF],
			"diskref_bytes", (json_int_t)c->out_bytes[RDB_PAGE_DISKREF],
			"diskref_of_earlier_reads", (json_int_t)c->rt_older_reads);
		if (rt && disks)
			json_object_set_new(rt, "disks", disks);
		else
			json_decref(disks);
		if (rt)
			json_object_set_new(o, "read_tracking", rt);
	}
}

void rdb_primary_metrics(const struct rdb_vm *vm, struct rdb_prom *prom)
{
	const struct rdb_primary *p = vm->pri;
	const enum rdb_prom_type C = RDB_PROM_COUNTER, G = RDB_PROM_GAUGE;

	if (!p)
		return;
	rdb_prom_add(prom, "remusdb_output_held_frames", G,
		     "Guest packets held until their checkpoint commits.",
		     (double)rdb_pri_held_frames(p), NULL);
	rdb_prom_add(prom, "remusdb_output_held_bytes", G,
		     "Bytes of guest packets held until their checkpoint commits.",
		     (double)rdb_pri_held_bytes(p), NULL);
	rdb_prom_add(prom, "remusdb_replication_queue_bytes", G,
		     "Bytes queued for the backup, not yet written to the link.",
		     (double)p->out.len, NULL);
	rdb_ckdevs_metrics(&p->devs, prom);
	{
		static const char help[] = "Protecting the VM again on its own "
			"after its backup's remusdbd went away (auto_reprotect_s): "
			"protected again, attempts that failed, windows given up, "
			"attempts the backup refused.";
		const struct { const char *r; uint64_t n; } a[] = {
			{ "protected", p->arp.protected }, { "failed", p->arp.failed },
			{ "gave_up", p->arp.gave_up }, { "refused", p->arp.refusals },
		};

		for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++)
			rdb_prom_add(prom, "remusdb_auto_reprotects_total", C, help,
				     (double)a[i].n, "result", a[i].r, NULL);
	}
	if (p->ridx) {
		struct rdb_readidx_stats rs;

		rdb_readidx_stats(p->ridx, &rs);
		rdb_prom_add(prom, "remusdb_read_index_entries", G,
			     "Guest pages known to hold a disk block (read tracking).",
			     (double)rs.entries, NULL);
		rdb_prom_add(prom, "remusdb_read_index_bytes", G,
			     "Memory used by the read-tracking index.",
			     (double)rs.mem_bytes, NULL);
		rdb_prom_add(prom, "remusdb_read_index_lookups_total", C,
			     "Dirty pages looked up in the read-tracking index.",
			     (double)rs.lookups, NULL);
		rdb_prom_add(prom, "remusdb_read_index_hits_total", C,
			     "Dirty pages sent as disk references.",
			     (double)rs.hits, NULL);
	}
	if (p->ck.cp) {
		struct rdb_flowbuf_stats sum = { 0 }, *st = &sum;
		uint64_t flows = flow_totals(p, &sum);
		static const char *const HF = "Guest packets by commit-protection path.";
		static const char *const HB = "Guest packet bytes by commit-protection path.";
		const struct { const char *path; uint64_t frames, bytes; } paths[] = {
			{ "at_once", st->now_frames, st->now_bytes },
			{ "held_marked", st->marked_frames, st->marked_bytes },
			{ "held_behind", st->behind_frames, st->behind_bytes },
			{ "held_synack", st->synack_frames, 0 },
			{ "held_ack", st->ack_frames, 0 },
		};

		for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
			rdb_prom_add(prom, "remusdb_output_frames_total", C, HF,
				     (double)paths[i].frames, "path", paths[i].path, NULL);
		for (size_t i = 0; i < 3; i++)
			rdb_prom_add(prom, "remusdb_output_bytes_total", C, HB,
				     (double)paths[i].bytes, "path", paths[i].path, NULL);
		rdb_prom_add(prom, "remusdb_output_dropped_frames_total", C,
			     "Guest packets dropped by the output buffer.",
			     (double)st->dropped, NULL);
		rdb_prom_add(prom, "remusdb_output_flows", G,
			     "TCP flows tracked by commit protection.",
			     (double)flows, NULL);
	}
}

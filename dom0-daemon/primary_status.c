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

void rdb_primary_status(const struct rdb_vm *vm, json_t *o)
{
	const struct rdb_primary *p = vm->pri;

	if (!p)
		return;
	json_object_set_new(o, "peer", json_string(vm->cfg.peer));
	json_object_set_new(o, "mode", json_string(vm->cfg.mode ? vm->cfg.mode : "plain"));
	json_object_set_new(o, "open_epoch", json_integer((json_int_t)p->open_epoch));
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
		(rdb_netbuf_frames(&p->nb) + rdb_flowbuf_frames(&p->fb))));
	json_object_set_new(o, "held_bytes", json_integer((json_int_t)
		(rdb_netbuf_bytes(&p->nb) + rdb_flowbuf_bytes(&p->fb))));
	if (p->cp) {
		const struct rdb_flowbuf_stats *st = &p->fb.st;

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
			"flows", (json_int_t)rdb_flowbuf_flows(&p->fb),
			"flows_created", (json_int_t)st->flows_created,
			"max_hold_ms", (double)st->max_hold_ns / RDB_NS_PER_MS));
	}
	json_object_set_new(o, "replication_queue_bytes", json_integer((json_int_t)p->out.len));
	json_object_set_new(o, "guest_nic_connected", json_boolean(rdb_nic_connected(&p->nic)));
	json_object_set_new(o, "capture_epochs_left", json_integer((json_int_t)p->cap_left));
	if (p->has_disk) {
		const struct rdb_dring_shared *ds = rdb_disk_stats(&p->disk);
		json_t *dk = json_pack("{s:s, s:s, s:I, s:b, s:I, s:I, s:I, s:I, s:I, s:I}",
			"image", p->disk.image, "socket", p->disk.sock_path,
			"size", (json_int_t)p->disk.size,
			"client_connected", rdb_disk_connected(&p->disk),
			"reads", (json_int_t)atomic_load(&ds->reads),
			"writes", (json_int_t)atomic_load(&ds->writes),
			"flushes", (json_int_t)atomic_load(&ds->flushes),
			"syncs", (json_int_t)(atomic_load(&ds->syncs) + p->disk.syncs),
			"zeroes", (json_int_t)atomic_load(&ds->zeroes),
			"errors", (json_int_t)atomic_load(&ds->errors));

		if (dk)
			json_object_set_new(dk, "server", json_pack(
				"{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:s}",
				"pid", p->disk.pid,
				"restarts", (json_int_t)p->disk.restarts,
				"ring_bytes", (json_int_t)p->disk.ring_bytes,
				"ring_used_bytes", (json_int_t)rdb_dring_used(&p->disk.ring),
				"changes_passed_on", (json_int_t)atomic_load(&ds->recorded),
				"readbacks", (json_int_t)atomic_load(&ds->readbacks),
				"room_waits", (json_int_t)atomic_load(&ds->room_waits),
				"room_wait_max_ms", (double)atomic_load(&ds->room_wait_max_ns) /
						    RDB_NS_PER_MS,
				"lost_changes", (json_int_t)(atomic_load(&ds->lost) != 0),
				"lost_reason", atomic_load(&ds->lost) == RDB_DRING_OVERFLOW ?
					"ring full past the deadline" :
					atomic_load(&ds->lost) == RDB_DRING_UNREADABLE ?
					"a failed change could not be read back" : ""));
		if (dk && p->copying)
			json_object_set_new(dk, "initial_copy_done_bytes",
					    json_integer((json_int_t)p->copy_off));
		if (dk) {
			char gen[17];

			snprintf(gen, sizeof(gen), "%016llx", (unsigned long long)
				 atomic_load(&ds->al_armed_gen));
			json_object_set_new(dk, "activity_log", json_pack(
				"{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
				"path", p->actlog_path, "valid_for", gen,
				"extents", (json_int_t)atomic_load(&ds->al_active),
				"adds", (json_int_t)atomic_load(&ds->al_adds),
				"log_syncs", (json_int_t)atomic_load(&ds->al_log_syncs),
				"retired", (json_int_t)atomic_load(&ds->al_retired),
				"image_syncs", (json_int_t)atomic_load(&ds->al_image_syncs),
				"full_stalls", (json_int_t)atomic_load(&ds->al_full_stalls),
				"invalidations", (json_int_t)atomic_load(&ds->al_invalidations)));
			/* the last initial copy: whole, or a resync */
			json_object_set_new(dk, "initial_copy", json_pack(
				"{s:b, s:I, s:I, s:I, s:I, s:f}",
				"resync", vm->st.resynced,
				"bytes", (json_int_t)vm->st.resync_bytes,
				"blocks_that_could_differ", (json_int_t)vm->st.resync_blocks,
				"written_since_restore_blocks",
				(json_int_t)(vm->st.resynced ? p->resync_wmap_blocks : 0),
				"old_primary_log_extents",
				(json_int_t)(vm->st.resynced ? p->resync_al_extents : 0),
				"queued_s", (double)vm->st.copy_ns / RDB_NS_PER_S));
		}
		json_object_set_new(o, "disk", dk);
	}
	if (p->ridx) {
		const struct rdb_dring_shared *ds = p->disk.ring.sh;
		const struct rdb_codec_stats *c = &vm->st.codec;
		struct rdb_readidx_stats rs;

		rdb_readidx_stats(p->ridx, &rs);
		json_object_set_new(o, "read_tracking", json_pack(
			"{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			"index_capacity", (json_int_t)rs.capacity,
			"index_entries", (json_int_t)rs.entries,
			"index_bytes", (json_int_t)rs.mem_bytes,
			"blocks_read", (json_int_t)(ds ? atomic_load(&ds->reads_tracked) : 0),
			"blocks_not_tracked", (json_int_t)(ds ? atomic_load(&ds->reads_skipped) : 0),
			"invalidated", (json_int_t)rs.invalidated,
			"evicted", (json_int_t)rs.evicted,
			"lookups", (json_int_t)rs.lookups,
			"hits", (json_int_t)rs.hits,
			"unconfirmed", (json_int_t)c->rt_unconfirmed,
			"delta_smaller", (json_int_t)c->rt_delta_smaller,
			"diskref_pages", (json_int_t)c->pages[RDB_PAGE_DISKREF],
			"diskref_bytes", (json_int_t)c->out_bytes[RDB_PAGE_DISKREF],
			"diskref_of_earlier_reads", (json_int_t)c->rt_older_reads));
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
		     (double)(rdb_netbuf_frames(&p->nb) + rdb_flowbuf_frames(&p->fb)), NULL);
	rdb_prom_add(prom, "remusdb_output_held_bytes", G,
		     "Bytes of guest packets held until their checkpoint commits.",
		     (double)(rdb_netbuf_bytes(&p->nb) + rdb_flowbuf_bytes(&p->fb)), NULL);
	rdb_prom_add(prom, "remusdb_replication_queue_bytes", G,
		     "Bytes queued for the backup, not yet written to the link.",
		     (double)p->out.len, NULL);
	if (p->has_disk) {
		const struct rdb_dring_shared *ds = rdb_disk_stats(&p->disk);
		static const char *const H = "Guest disk requests served, by operation.";

		rdb_prom_add(prom, "remusdb_disk_requests_total", C, H,
			     (double)atomic_load(&ds->reads), "op", "read", NULL);
		rdb_prom_add(prom, "remusdb_disk_requests_total", C, H,
			     (double)atomic_load(&ds->writes), "op", "write", NULL);
		rdb_prom_add(prom, "remusdb_disk_requests_total", C, H,
			     (double)atomic_load(&ds->flushes), "op", "flush", NULL);
		rdb_prom_add(prom, "remusdb_disk_requests_total", C, H,
			     (double)atomic_load(&ds->zeroes), "op", "write_zeroes", NULL);
		rdb_prom_add(prom, "remusdb_disk_request_errors_total", C,
			     "Guest disk requests answered with an error.",
			     (double)atomic_load(&ds->errors), NULL);
		rdb_prom_add(prom, "remusdb_disk_server_restarts_total", C,
			     "Restarts of the disk server process.",
			     (double)p->disk.restarts, NULL);
		rdb_prom_add(prom, "remusdb_disk_ring_bytes", G,
			     "Size of the disk change ring between the disk server and remusdbd.",
			     (double)p->disk.ring_bytes, NULL);
		rdb_prom_add(prom, "remusdb_disk_ring_used_bytes", G,
			     "Bytes of disk changes in the ring, not yet taken by remusdbd.",
			     (double)rdb_dring_used(&p->disk.ring), NULL);
		rdb_prom_add(prom, "remusdb_disk_ring_waits_total", C,
			     "Guest writes that waited for room in the disk change ring.",
			     (double)atomic_load(&ds->room_waits), NULL);
		rdb_prom_add(prom, "remusdb_disk_changes_lost", G,
			     "1 when disk changes were lost to replication (protection must be restarted).",
			     atomic_load(&ds->lost) != 0, NULL);
		rdb_prom_add(prom, "remusdb_activity_log_extents", G,
			     "Disk extents in the activity log (may differ after a power pull).",
			     (double)atomic_load(&ds->al_active), NULL);
		rdb_prom_add(prom, "remusdb_activity_log_syncs_total", C,
			     "Synchronous writes of the activity log.",
			     (double)atomic_load(&ds->al_log_syncs), NULL);
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
	if (p->cp) {
		const struct rdb_flowbuf_stats *st = &p->fb.st;
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
			     (double)rdb_flowbuf_flows(&p->fb), NULL);
	}
}

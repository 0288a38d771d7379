#!/usr/bin/env bash
# pausebreak.sh TRACE_LOG [FROM_LINE] -> JSON on stdout: where each part of
# the guest's checkpoint pause goes, from the primary QEMU's trace events
# (cluster.sh CL_QEMU_TRACE; QEMU's "log" trace backend).  Per checkpoint,
# in the order QEMU's COLO thread does them (migration/colo.c):
#   stop_vcpus_drain_flush    vm_stop: the vCPUs stopped, the block layer
#                             drained, and a FLUSH sent to remusdbd's disk
#                             server and answered (runstate -> colo, then
#                             vm_stop_flush_all)
#   to_vmstate_send           to VMSTATE_SEND on the stream
#   device_state              qemu_save_device_state into a buffer
#   bitmap_sync               the dirty-bitmap sync
#   ram_to_stream             dirty RAM into the stream (to remusdbd)
#   ram_done_to_devstate_sent the device-state buffer's size
#   devstate_sent_to_received device state onto the stream, and remusdbd's
#                             turnaround (it reads to the end, answers)
#   received_to_loaded        remusdbd's LOADED after RECEIVED
#   loaded_to_running         vm_start
#   total                     runstate -> colo ... runstate -> running
# and devices: the device-state sections costing most, by p50.
# Percentiles over the checkpoints in the log (from FROM_LINE on).
set -eu
log=$1 from=${2:-1}
tail -n +"$from" "$log" | awk '
function ms(a, b) { return (t[b] - t[a]) * 1000 }
/:colo_send_message .*checkpoint-request/ { split("", t); split("", dev); cur = 1; next }
!cur { next }
{
	split($0, h, ":"); split(h[1], at, "@"); now = at[2]
	ev = h[2]; sub(/ .*/, "", ev)
	args = substr($0, index($0, ":") + 1); sub(/^[^ ]* ?/, "", args)
}
ev == "runstate_set" && args ~ /new_state [0-9]+ \(colo\)/ { t["stop0"] = now }
ev == "vm_stop_flush_all" { t["flushed"] = now }
ev == "colo_send_message" && args ~ /vmstate-send/ { t["vsend"] = now }
ev == "migration_bitmap_sync_start" { t["bs0"] = now }
# QEMU traces its num_dirty_pages_period, which adds up over the syncs
# of up to a second and is reset after the sync that passes it: the
# epoch's own pages are the growth since the last sync, or all of it
# after a reset
ev == "migration_bitmap_sync_end" { t["bs1"] = now; n = split(args, w, " ")
	v = w[n] + 0; dirty = v >= lastv ? v - lastv : v; lastv = v }
ev == "savevm_section_start" { name = args; sub(/,.*/, "", name); if (name != "ram") { sname = name; st = now } }
ev == "savevm_section_end" { name = args; sub(/,.*/, "", name); if (name == sname) dev[name] += now - st; sname = "" }
ev == "vmstate_downtime_checkpoint" && args ~ /src-iterable-saved/ { t["ram1"] = now }
ev == "colo_send_message" && args ~ /vmstate-size/ { t["vsize"] = now }
ev == "colo_receive_message" && args ~ /vmstate-received/ { t["recv"] = now }
ev == "colo_receive_message" && args ~ /vmstate-loaded/ { t["loaded"] = now }
ev == "runstate_set" && args ~ /new_state [0-9]+ \(running\)/ {
	t["run"] = now; cur = 0
	if (!("stop0" in t) || !("flushed" in t) || !("vsend" in t) || !("bs0" in t) ||
	    !("bs1" in t) || !("ram1" in t) || !("vsize" in t) || !("recv" in t) || !("loaded" in t))
		next
	k++
	P["stop_vcpus_drain_flush"] = P["stop_vcpus_drain_flush"] " " ms("stop0", "flushed")
	P["to_vmstate_send"] = P["to_vmstate_send"] " " ms("flushed", "vsend")
	P["device_state"] = P["device_state"] " " ms("vsend", "bs0")
	P["bitmap_sync"] = P["bitmap_sync"] " " ms("bs0", "bs1")
	P["ram_to_stream"] = P["ram_to_stream"] " " ms("bs1", "ram1")
	P["ram_done_to_devstate_sent"] = P["ram_done_to_devstate_sent"] " " ms("ram1", "vsize")
	P["devstate_sent_to_received"] = P["devstate_sent_to_received"] " " ms("vsize", "recv")
	P["received_to_loaded"] = P["received_to_loaded"] " " ms("recv", "loaded")
	P["loaded_to_running"] = P["loaded_to_running"] " " ms("loaded", "run")
	P["total"] = P["total"] " " ms("stop0", "run")
	P["dirty_pages"] = P["dirty_pages"] " " dirty
	for (d in dev) D[d] = D[d] " " dev[d] * 1000
}
function pct(list, p,    n, v, i, j, x) {
	n = split(list, v, " ")
	for (i = 2; i <= n; i++) { x = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
	i = int(p * n) + 1; if (i > n) i = n
	return v[i] + 0
}
END {
	printf "{\"checkpoints\":%d", k
	split("stop_vcpus_drain_flush to_vmstate_send device_state bitmap_sync ram_to_stream ram_done_to_devstate_sent devstate_sent_to_received received_to_loaded loaded_to_running total", order, " ")
	for (i = 1; i in order; i++) {
		f = order[i]
		printf ",\"%s_ms\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f}", f, pct(P[f], .5), pct(P[f], .9), pct(P[f], .99)
	}
	printf ",\"dirty_pages_p50\":%d,\"devices_ms_p50\":{", pct(P["dirty_pages"], .5)
	# the three costliest sections
	for (r = 0; r < 3; r++) {
		best = ""; bv = -1
		for (d in D) if (!(d in used) && (v = pct(D[d], .5)) > bv) { bv = v; best = d }
		if (best == "") break
		used[best] = 1
		printf "%s\"%s\":%.3f", r ? "," : "", best, bv
	}
	printf "}}\n"
}'

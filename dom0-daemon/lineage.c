// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "lineage"
#include "lineage.h"
#include "fileio.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const role_names[] = {
	[RDB_LINEAGE_NONE] = "none",
	[RDB_LINEAGE_PRIMARY] = "primary",
	[RDB_LINEAGE_RESTORED] = "restored",
	[RDB_LINEAGE_REPLICA] = "replica",
};

const char *rdb_lineage_role_name(enum rdb_lineage_role r)
{
	return (unsigned)r < sizeof(role_names) / sizeof(role_names[0]) ?
		role_names[r] : "?";
}

static int paths(const char *state_dir, const char *vm, char *dir, size_t dlen,
		 char *file, size_t flen)
{
	int n = snprintf(dir, dlen, "%s/%s", state_dir, vm);

	if (n < 0 || (size_t)n >= dlen)
		return -ENAMETOOLONG;
	n = snprintf(file, flen, "%s/lineage.json", dir);
	return n < 0 || (size_t)n >= flen ? -ENAMETOOLONG : 0;
}

static int copy_str(json_t *o, const char *key, char *dst, size_t len,
		    bool required)
{
	const char *v = json_string_value(json_object_get(o, key));

	if (!v) {
		dst[0] = 0;
		return required ? -EBADMSG : 0;
	}
	if (strlen(v) >= len)
		return -EBADMSG;
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

static int get_hex(json_t *o, const char *key, uint64_t *out)
{
	const char *v = json_string_value(json_object_get(o, key));
	char *end;

	if (!v || !v[0])
		return -EBADMSG;
	errno = 0;
	*out = strtoull(v, &end, 16);
	return *end || errno ? -EBADMSG : 0;
}

/* One disk's entry: at the top level for disk 0, in more_disks after. */
static int load_disk(json_t *o, enum rdb_lineage_role role,
		     struct rdb_lineage_disk *dk)
{
	int rc = copy_str(o, "disk", dk->disk, sizeof(dk->disk), true);

	if (rc == 0)
		rc = copy_str(o, "activity_log", dk->actlog, sizeof(dk->actlog),
			      role == RDB_LINEAGE_PRIMARY);
	if (rc == 0 && role == RDB_LINEAGE_PRIMARY)
		rc = get_hex(o, "activity_log_generation", &dk->log_gen);
	if (rc == 0)
		rc = copy_str(o, "written_map", dk->wmap, sizeof(dk->wmap),
			      role == RDB_LINEAGE_RESTORED);
	return rc;
}

static void save_disk(json_t *o, const struct rdb_lineage_disk *dk)
{
	json_object_set_new(o, "disk", json_string(dk->disk));
	if (dk->actlog[0]) {
		char lg[17];

		snprintf(lg, sizeof(lg), "%016" PRIx64, dk->log_gen);
		json_object_set_new(o, "activity_log", json_string(dk->actlog));
		json_object_set_new(o, "activity_log_generation", json_string(lg));
	}
	if (dk->wmap[0])
		json_object_set_new(o, "written_map", json_string(dk->wmap));
}

void rdb_lineage_disk_file(char *buf, size_t len, const char *state_dir,
			   const char *vm, unsigned k, const char *stem,
			   const char *ext)
{
	if (k == 0)
		snprintf(buf, len, "%s/%s/%s.%s", state_dir, vm, stem, ext);
	else
		snprintf(buf, len, "%s/%s/%s%u.%s", state_dir, vm, stem, k, ext);
}

int rdb_lineage_load(const char *state_dir, const char *vm,
		     struct rdb_lineage *out, char *err, size_t errlen)
{
	char dir[512], file[540];
	const char *role;
	json_error_t je;
	json_t *o, *base, *more;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = paths(state_dir, vm, dir, sizeof(dir), file, sizeof(file));
	if (rc < 0)
		return rc;
	if (access(file, F_OK) < 0)
		return -errno;
	o = json_load_file(file, 0, &je);
	if (!o) {
		snprintf(err, errlen, "%s: %s", file, je.text);
		return -EBADMSG;
	}
	role = json_string_value(json_object_get(o, "role"));
	rc = -EBADMSG;
	for (unsigned i = 1; role && i < sizeof(role_names) / sizeof(role_names[0]); i++)
		if (!strcmp(role, role_names[i])) {
			out->role = i;
			rc = 0;
		}
	if (rc == 0)
		rc = get_hex(o, "generation", &out->generation);
	if (rc == 0 && out->role == RDB_LINEAGE_RESTORED) {
		json_t *e = json_object_get(o, "epoch");

		if (!json_is_integer(e) || json_integer_value(e) < 0)
			rc = -EBADMSG;
		else
			out->epoch = (uint64_t)json_integer_value(e);
	}
	if (rc == 0)
		rc = load_disk(o, out->role, &out->d[0]);
	if (rc == 0)
		rc = copy_str(o, "peer", out->peer, sizeof(out->peer), false);
	base = json_object_get(o, "base");
	if (rc == 0 && base) {
		json_t *e = json_object_get(base, "epoch");

		out->has_base = true;
		rc = get_hex(base, "generation", &out->base_generation);
		if (rc == 0 && (!json_is_integer(e) || json_integer_value(e) < 0))
			rc = -EBADMSG;
		if (rc == 0) {
			out->base_epoch = (uint64_t)json_integer_value(e);
			rc = copy_str(base, "written_map", out->d[0].base_wmap,
				      sizeof(out->d[0].base_wmap), true);
		}
	}
	out->ndisks = 1;
	more = json_object_get(o, "more_disks");
	if (rc == 0 && more && (!json_is_array(more) ||
				json_array_size(more) >= RDB_LINEAGE_DISKS))
		rc = -EBADMSG;
	for (size_t i = 0; rc == 0 && more && i < json_array_size(more); i++) {
		struct rdb_lineage_disk *dk = &out->d[out->ndisks++];
		json_t *m = json_array_get(more, i);

		rc = json_is_object(m) ? load_disk(m, out->role, dk) : -EBADMSG;
		if (rc == 0)
			rc = copy_str(m, "base_written_map", dk->base_wmap,
				      sizeof(dk->base_wmap), false);
	}
	json_decref(o);
	if (rc < 0) {
		snprintf(err, errlen, "%s: not a lineage record this daemon "
			 "understands", file);
		memset(out, 0, sizeof(*out));
	}
	return rc;
}

int rdb_lineage_save(const char *state_dir, const char *vm,
		     const struct rdb_lineage *l, char *err, size_t errlen)
{
	char dir[512], file[540], gen[17];
	json_t *o;
	char *text = NULL;
	int rc;

	rc = paths(state_dir, vm, dir, sizeof(dir), file, sizeof(file));
	if (rc < 0)
		return rc;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return rc;
	}
	snprintf(gen, sizeof(gen), "%016" PRIx64, l->generation);
	o = json_pack("{s:s, s:s, s:s}", "vm", vm,
		      "role", rdb_lineage_role_name(l->role), "generation", gen);
	if (o)
		save_disk(o, &l->d[0]);
	if (o && l->role == RDB_LINEAGE_RESTORED)
		json_object_set_new(o, "epoch", json_integer((json_int_t)l->epoch));
	if (o && l->peer[0])
		json_object_set_new(o, "peer", json_string(l->peer));
	if (o && l->has_base) {
		char bgen[17];

		snprintf(bgen, sizeof(bgen), "%016" PRIx64, l->base_generation);
		json_object_set_new(o, "base", json_pack("{s:s, s:I, s:s}",
			"generation", bgen, "epoch", (json_int_t)l->base_epoch,
			"written_map", l->d[0].base_wmap));
	}
	if (o && l->ndisks > 1) {
		json_t *more = json_array();

		for (unsigned k = 1; more && k < l->ndisks &&
		     k < RDB_LINEAGE_DISKS; k++) {
			json_t *m = json_object();

			if (!m)
				break;
			save_disk(m, &l->d[k]);
			if (l->has_base && l->d[k].base_wmap[0])
				json_object_set_new(m, "base_written_map",
						    json_string(l->d[k].base_wmap));
			json_array_append_new(more, m);
		}
		json_object_set_new(o, "more_disks", more);
	}
	text = o ? json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	if (!text) {
		snprintf(err, errlen, "lineage record: out of memory");
		return -ENOMEM;
	}
	rc = rdb_replace_file(dir, file, text);
	if (rc < 0)
		snprintf(err, errlen, "writing %s: %s", file, strerror(-rc));
	free(text);
	return rc;
}

int rdb_lineage_remove(const char *state_dir, const char *vm)
{
	char dir[512], file[540];
	int rc = paths(state_dir, vm, dir, sizeof(dir), file, sizeof(file));

	if (rc < 0)
		return rc;
	return rdb_remove_file(dir, file);
}

// SPDX-License-Identifier: GPL-2.0-only
#define RDB_COMPONENT "vmdef"
#include "vmdef.h"

#include "fileio.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define FORMAT 1
#define FILE_NAME "definition.json"

const char *rdb_vmdef_intent_name(enum rdb_vmdef_intent i)
{
	return i == RDB_VMDEF_PROTECTED ? "protected" :
	       i == RDB_VMDEF_RESTORED ? "restored" : "attached";
}

static int name_ok(const char *name)
{
	return name && name[0] && name[0] != '.' && strlen(name) < 65 &&
	       !strchr(name, '/');
}

static int save(const char *state_dir, const char *name,
		enum rdb_vmdef_intent intent, json_t *config, json_t *restored,
		char *err, size_t errlen)
{
	char dir[512], file[540], when[40];
	time_t now = time(NULL);
	struct tm tm;
	char *text = NULL;
	json_t *o;
	int rc, n;

	if (!name_ok(name) || !json_is_object(config) ||
	    (intent == RDB_VMDEF_RESTORED) != json_is_object(restored)) {
		snprintf(err, errlen, "VM definition: bad name or config");
		return -EINVAL;
	}
	n = snprintf(dir, sizeof(dir), "%s/%s", state_dir, name);
	if (n < 0 || (size_t)n >= sizeof(dir)) {
		snprintf(err, errlen, "VM definition: path too long");
		return -ENAMETOOLONG;
	}
	snprintf(file, sizeof(file), "%s/" FILE_NAME, dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(-rc));
		return rc;
	}
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	o = json_pack("{s:i, s:s, s:s, s:s, s:O}", "format", FORMAT, "name", name,
		      "intent", rdb_vmdef_intent_name(intent), "saved", when,
		      "config", config);
	if (o && restored && json_object_set(o, "restored", restored) < 0) {
		json_decref(o);
		o = NULL;
	}
	text = o ? json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	if (!text) {
		snprintf(err, errlen, "VM definition: out of memory");
		return -ENOMEM;
	}
	/* A restored VM's definition matters only while its QEMU runs, in
	 * this boot (a new daemon re-adopts it; after a reboot it is
	 * removed unread): written at the failover's end on the event
	 * loop, it waits for no disk. */
	rc = intent == RDB_VMDEF_RESTORED ? rdb_replace_file_nosync(file, text) :
		rdb_replace_file(dir, file, text);
	if (rc < 0)
		snprintf(err, errlen, "writing %s: %s", file, strerror(-rc));
	free(text);
	return rc;
}

int rdb_vmdef_save(const char *state_dir, const char *name,
		   enum rdb_vmdef_intent intent, json_t *config, char *err,
		   size_t errlen)
{
	if (intent == RDB_VMDEF_RESTORED) {
		snprintf(err, errlen, "VM definition: restored wants what the "
			 "restore made");
		return -EINVAL;
	}
	return save(state_dir, name, intent, config, NULL, err, errlen);
}

int rdb_vmdef_save_restored(const char *state_dir, const char *name,
			    json_t *config, json_t *restored, char *err,
			    size_t errlen)
{
	return save(state_dir, name, RDB_VMDEF_RESTORED, config, restored, err,
		    errlen);
}

int rdb_vmdef_remove(const char *state_dir, const char *name)
{
	char dir[512], file[540];
	int n;

	if (!name_ok(name))
		return -EINVAL;
	n = snprintf(dir, sizeof(dir), "%s/%s", state_dir, name);
	if (n < 0 || (size_t)n >= sizeof(dir))
		return -ENAMETOOLONG;
	snprintf(file, sizeof(file), "%s/" FILE_NAME, dir);
	return rdb_remove_file(dir, file);
}

void rdb_vmdef_forget(const char *state_dir, const char *name)
{
	int rc = rdb_vmdef_remove(state_dir, name);

	if (rc < 0)
		LOGVM(ERROR, name, "its definition here could not be removed "
		      "(%s): a restart of remusdbd would try to run it here",
		      strerror(-rc));
}

/* One definition file: 0 and *def filled (config to be decref'd), or
 * < 0 with why. */
static int load_one(const char *path, const char *dirname,
		    struct rdb_vmdef *def, char *why, size_t whylen)
{
	json_error_t je;
	json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	const char *name, *intent, *saved;
	json_t *cfg, *restored;

	if (!o) {
		snprintf(why, whylen, "not JSON (line %d: %s)", je.line, je.text);
		return -EBADMSG;
	}
	name = json_string_value(json_object_get(o, "name"));
	intent = json_string_value(json_object_get(o, "intent"));
	saved = json_string_value(json_object_get(o, "saved"));
	cfg = json_object_get(o, "config");
	restored = json_object_get(o, "restored");
	if (json_integer_value(json_object_get(o, "format")) != FORMAT) {
		snprintf(why, whylen, "format is not %d (written by another "
			 "version of remusdbd?)", FORMAT);
		goto bad;
	}
	if (!name || strcmp(name, dirname) != 0) {
		snprintf(why, whylen, "its name is not its directory's (%s)",
			 dirname);
		goto bad;
	}
	if (!intent || (strcmp(intent, "attached") && strcmp(intent, "protected") &&
			strcmp(intent, "restored"))) {
		snprintf(why, whylen, "intent is none of attached, protected, "
			 "restored");
		goto bad;
	}
	if ((strcmp(intent, "restored") == 0) != json_is_object(restored)) {
		snprintf(why, whylen, "a restored VM's definition wants a "
			 "\"restored\" object, and only it");
		goto bad;
	}
	if (!json_is_object(cfg)) {
		snprintf(why, whylen, "no config object");
		goto bad;
	}
	memset(def, 0, sizeof(*def));
	snprintf(def->name, sizeof(def->name), "%s", name);
	def->intent = strcmp(intent, "protected") == 0 ? RDB_VMDEF_PROTECTED :
		      strcmp(intent, "restored") == 0 ? RDB_VMDEF_RESTORED :
		      RDB_VMDEF_ATTACHED;
	snprintf(def->saved, sizeof(def->saved), "%s", saved ? saved : "");
	def->config = json_incref(cfg);
	def->restored = restored ? json_incref(restored) : NULL;
	json_decref(o);
	return 0;
bad:
	json_decref(o);
	return -EBADMSG;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int rdb_vmdef_each(const char *state_dir,
		   void (*each)(void *opaque, const struct rdb_vmdef *def),
		   void (*bad)(void *opaque, const char *path, const char *why),
		   void *opaque)
{
	DIR *dp = opendir(state_dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int got = 0;

	if (!dp)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(dp))) {
		char **nn;

		if (!name_ok(e->d_name))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			nn = realloc(names, cap * sizeof(*names));
			if (!nn)
				break;
			names = nn;
		}
		if (!(names[n] = strdup(e->d_name)))
			break;
		n++;
	}
	closedir(dp);
	if (n)
		qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; i < n; i++) {
		char path[600], why[300];
		struct rdb_vmdef def;
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s/" FILE_NAME, state_dir, names[i]);
		if (lstat(path, &st) < 0) {
			if (errno != ENOENT && bad)
				bad(opaque, path, strerror(errno));
		} else if (!S_ISREG(st.st_mode)) {
			if (bad)
				bad(opaque, path, "not a regular file");
		} else if (load_one(path, names[i], &def, why, sizeof(why)) < 0) {
			if (bad)
				bad(opaque, path, why);
		} else {
			each(opaque, &def);
			json_decref(def.config);
			json_decref(def.restored);
			got++;
		}
		free(names[i]);
	}
	free(names);
	return got;
}

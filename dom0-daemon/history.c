// SPDX-License-Identifier: GPL-2.0-only
/* A VM's state changes across restarts (history.h). */
#define RDB_COMPONENT "history"
#include "history.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int name_ok(const char *vm)
{
	return vm && vm[0] && strcmp(vm, ".") && strcmp(vm, "..") &&
	       !strchr(vm, '/');
}

int rdb_history_append(const char *state_dir, const char *vm,
		       const char *from, const char *to, const char *role,
		       double after_s, const char *reason, char *err,
		       size_t errlen)
{
	char path[600], old[610], when[48], frac[24];
	struct timespec ts;
	struct tm tm;
	struct stat sb;
	json_t *o;
	char *line;
	size_t len;
	int fd, rc = 0;

	if (!state_dir || !state_dir[0] || !name_ok(vm)) {
		snprintf(err, errlen, "no state directory or VM name");
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "%s/%s", state_dir, vm);
	if (mkdir(path, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	snprintf(path, sizeof(path), "%s/%s/history.jsonl", state_dir, vm);
	if (stat(path, &sb) == 0 && sb.st_size >= RDB_HISTORY_MAX_BYTES) {
		snprintf(old, sizeof(old), "%s.1", path);
		if (rename(path, old) < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s: rotating it: %s", path,
				 strerror(errno));
			return rc;
		}
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when) - sizeof(frac), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(frac, sizeof(frac), ".%03dZ", (int)(ts.tv_nsec / 1000000) % 1000);
	strcat(when, frac);
	o = json_pack("{s:s, s:s, s:s, s:s, s:f, s:s}", "time", when,
		      "from", from ? from : "", "to", to ? to : "",
		      "role", role ? role : "", "after_s", after_s,
		      "reason", reason ? reason : "");
	line = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!line) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	len = strlen(line);
	line[len++] = '\n';	/* (over the NUL: written by length) */
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
	} else {
		ssize_t w = write(fd, line, len);

		if (w != (ssize_t)len) {
			rc = w < 0 ? -errno : -EIO;
			snprintf(err, errlen, "%s: %s", path,
				 w < 0 ? strerror(errno) : "short write");
		}
		close(fd);
	}
	free(line);
	return rc;
}

/* Every line of path that parses, appended to arr; missing: 0. */
static int read_file(const char *path, json_t *arr, size_t *bad)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while ((n = getline(&line, &cap, f)) > 0) {
		json_t *o = json_loads(line, 0, NULL);

		if (json_is_object(o))
			json_array_append_new(arr, o);
		else {
			json_decref(o);
			(*bad)++;
		}
	}
	free(line);
	fclose(f);
	return 1;
}

int rdb_history_read(const char *state_dir, const char *vm, size_t n,
		     json_t **out, size_t *bad, char *err, size_t errlen)
{
	char path[600], old[610];
	json_t *all, *tail;
	int r1, r2;
	size_t total;

	*out = NULL;
	*bad = 0;
	if (!name_ok(vm)) {
		snprintf(err, errlen, "not a VM name: \"%s\"", vm ? vm : "");
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "%s/%s/history.jsonl", state_dir, vm);
	snprintf(old, sizeof(old), "%s.1", path);
	all = json_array();
	if (!all)
		return -ENOMEM;
	r1 = read_file(old, all, bad);
	r2 = read_file(path, all, bad);
	if (r1 < 0 || r2 < 0) {
		snprintf(err, errlen, "%s: %s", r1 < 0 ? old : path,
			 strerror(r1 < 0 ? -r1 : -r2));
		json_decref(all);
		return r1 < 0 ? r1 : r2;
	}
	if (r1 == 0 && r2 == 0) {
		snprintf(err, errlen, "no history for VM %s here", vm);
		json_decref(all);
		return -ENOENT;
	}
	total = json_array_size(all);
	if (!n || n >= total) {
		*out = all;
		return 0;
	}
	tail = json_array();
	for (size_t i = total - n; tail && i < total; i++)
		json_array_append(tail, json_array_get(all, i));
	json_decref(all);
	if (!tail)
		return -ENOMEM;
	*out = tail;
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only
/* The VM's read-only images: found in its QEMU arguments, fingerprinted
 * on the primary, checked on the backup (roimage.h). */
#include "roimage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#define MIB (1u << 20)

/* The value of key in a QEMU option string ("a=b,c=d"; ",," is a comma
 * inside a value), unescaped into out; false if absent. */
static bool opt_get(const char *s, const char *key, char *out, size_t len)
{
	size_t klen = strlen(key);

	while (*s) {
		const char *item = s;
		size_t o = 0;

		/* the item's end: a comma not doubled */
		while (*s && !(*s == ',' && s[1] != ',')) {
			if (*s == ',' && s[1] == ',')
				s++;
			s++;
		}
		if (!strncmp(item, key, klen) && item[klen] == '=') {
			for (const char *p = item + klen + 1; p < s && o + 1 < len; p++) {
				if (*p == ',' && p[1] == ',')
					p++;
				out[o++] = *p;
			}
			out[o] = 0;
			return true;
		}
		if (*s == ',')
			s++;
	}
	return false;
}

static bool is_on(const char *v)
{
	return !strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "yes");
}

static int add(struct rdb_roimage *out, unsigned *count, const char *opt,
	       const char *path, char *err, size_t errlen)
{
	if (path[0] != '/') {
		snprintf(err, errlen, "%s %s: a read-only image is named by its "
			 "absolute path (the backup opens the same path)", opt, path);
		return -EINVAL;
	}
	for (unsigned i = 0; i < *count; i++)
		if (!strcmp(out[i].path, path))
			return 0;
	if (*count == RDB_ROIMAGE_MAX) {
		snprintf(err, errlen, "more than %d read-only images", RDB_ROIMAGE_MAX);
		return -E2BIG;
	}
	memset(&out[*count], 0, sizeof(out[*count]));
	if (strlen(path) >= sizeof(out[*count].path)) {
		snprintf(err, errlen, "%s: path too long", opt);
		return -EINVAL;
	}
	snprintf(out[*count].path, sizeof(out[*count].path), "%s", path);
	(*count)++;
	return 0;
}

static int blockdev(const char *v, struct rdb_roimage *out, unsigned *count,
		    char *err, size_t errlen)
{
	char file[512] = "", ro[16] = "";
	bool has_file, readonly;

	if (v[0] == '{') {
		json_t *j = json_loads(v, 0, NULL);
		const char *f = json_string_value(json_object_get(j, "filename"));

		has_file = f != NULL;
		if (f)
			snprintf(file, sizeof(file), "%s", f);
		readonly = json_is_true(json_object_get(j, "read-only"));
		json_decref(j);
	} else {
		has_file = opt_get(v, "filename", file, sizeof(file));
		readonly = opt_get(v, "read-only", ro, sizeof(ro)) && is_on(ro);
	}
	if (!has_file)
		return 0;	/* a format layer or a protocol node: no file */
	if (!readonly) {
		snprintf(err, errlen, "-blockdev %s: a writable image in "
			 "qemu_arg is not replicated (use disk or extra_disk)", file);
		return -EINVAL;
	}
	return add(out, count, "-blockdev", file, err, errlen);
}

int rdb_roimages_list(char *const *args, size_t n, struct rdb_roimage *out,
		      unsigned *count, char *err, size_t errlen)
{
	*count = 0;
	for (size_t i = 0; i < n; i++) {
		const char *a = args[i], *v = i + 1 < n ? args[i + 1] : NULL;
		char file[512], ro[16], media[16], iface[16];
		int rc = 0;

		if (a[0] == '-' && a[1] == '-')
			a++;	/* QEMU takes --drive as -drive */
		if (!strcmp(a, "-hda") || !strcmp(a, "-hdb") || !strcmp(a, "-hdc") ||
		    !strcmp(a, "-hdd") || !strcmp(a, "-pflash") || !strcmp(a, "-sd") ||
		    !strcmp(a, "-mtdblock")) {
			snprintf(err, errlen, "qemu_arg %s %s: a writable drive in "
				 "qemu_arg is not replicated (use disk or extra_disk)",
				 a, v ? v : "");
			return -EINVAL;
		}
		if (!v)
			continue;
		if (!strcmp(a, "-cdrom")) {
			rc = add(out, count, a, v, err, errlen);
		} else if (!strcmp(a, "-blockdev")) {
			rc = blockdev(v, out, count, err, errlen);
		} else if (!strcmp(a, "-drive")) {
			bool readonly = (opt_get(v, "readonly", ro, sizeof(ro)) && is_on(ro)) ||
				(opt_get(v, "media", media, sizeof(media)) &&
				 !strcmp(media, "cdrom"));

			if (!opt_get(v, "file", file, sizeof(file)))
				file[0] = 0;	/* an empty drive (a CD-ROM tray) */
			if (!readonly) {
				bool pflash = opt_get(v, "if", iface, sizeof(iface)) &&
					!strcmp(iface, "pflash");

				snprintf(err, errlen, "qemu_arg -drive %s: %s",
					 file[0] ? file : v, pflash ?
					 "a writable pflash (a UEFI variable store) in "
					 "qemu_arg is not replicated (use nvram: remusdbd "
					 "serves and replicates it, QEMU takes it as -drive "
					 "if=pflash,unit=1,driver=nbd,...)" :
					 "a writable drive in qemu_arg is not replicated "
					 "(use disk or extra_disk; a CD-ROM or a read-only "
					 "image takes media=cdrom or readonly=on)");
				return -EINVAL;
			}
			if (file[0])
				rc = add(out, count, a, file, err, errlen);
		} else {
			continue;
		}
		if (rc < 0)
			return rc;
		i++;
	}
	return 0;
}

static int fingerprint(const char *path, uint64_t *size, char hex[65],
		       char *err, size_t errlen)
{
	static const char digits[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	EVP_MD_CTX *ctx;
	struct stat sb;
	uint8_t *buf;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	*size = (uint64_t)sb.st_size;
	buf = malloc(MIB);
	ctx = EVP_MD_CTX_new();
	if (!buf || !ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		snprintf(err, errlen, "%s: out of memory", path);
		rc = -ENOMEM;
	}
	/* the first MiB, then the last (they overlap in a small file) */
	for (int part = 0; rc == 0 && part < 2; part++) {
		off_t at = part == 0 || *size <= MIB ? 0 : (off_t)(*size - MIB);
		size_t want = *size < MIB ? (size_t)*size : MIB;
		ssize_t got = pread(fd, buf, want, at);

		if (got != (ssize_t)want) {
			rc = got < 0 ? -errno : -EIO;
			snprintf(err, errlen, "%s: reading %zu bytes at %lld: %s", path,
				 want, (long long)at, got < 0 ? strerror(errno) :
				 "short read");
		} else if (!EVP_DigestUpdate(ctx, buf, want)) {
			rc = -EIO;
			snprintf(err, errlen, "%s: SHA-256 failed", path);
		}
	}
	if (rc == 0 && !EVP_DigestFinal_ex(ctx, md, &mdlen)) {
		rc = -EIO;
		snprintf(err, errlen, "%s: SHA-256 failed", path);
	}
	for (unsigned i = 0; rc == 0 && i < mdlen && i < 32; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	if (rc == 0)
		hex[64] = 0;
	EVP_MD_CTX_free(ctx);
	free(buf);
	close(fd);
	return rc;
}

int rdb_roimage_fingerprint(struct rdb_roimage *im, char *err, size_t errlen)
{
	return fingerprint(im->path, &im->size, im->sha256, err, errlen);
}

int rdb_roimage_verify(const struct rdb_roimage *want, char *err,
		       size_t errlen)
{
	char hex[65], why[300];
	uint64_t size;
	int rc = fingerprint(want->path, &size, hex, why, sizeof(why));

	if (rc < 0) {
		snprintf(err, errlen, "read-only image %s: not usable on this "
			 "host (%s)", want->path, why);
		return rc == -ENOENT ? -ENOENT : -EIO;
	}
	if (size != want->size) {
		snprintf(err, errlen, "read-only image %s: %llu bytes on this "
			 "host, %llu on the primary's", want->path,
			 (unsigned long long)size, (unsigned long long)want->size);
		return -EINVAL;
	}
	if (strcmp(hex, want->sha256)) {
		snprintf(err, errlen, "read-only image %s: other contents on this "
			 "host than on the primary's (SHA-256 of its first and "
			 "last MiB %.16s... against %.16s...)", want->path, hex,
			 want->sha256);
		return -EINVAL;
	}
	return 0;
}

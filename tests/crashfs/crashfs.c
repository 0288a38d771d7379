// SPDX-License-Identifier: GPL-2.0-only
/*
 * crashfs: a power loss for one directory of files, in user space (the
 * host kernel has no dm-flakey or dm-log-writes here).
 *
 *   crashfs BACKING_DIR MOUNTPOINT
 *
 * MOUNTPOINT shows BACKING_DIR's regular files.  What is written through
 * it stays in crashfs's memory until an fsync or fdatasync of that file
 * writes it to the backing file and syncs it there: only synced data is
 * ever on the "disk".  Killing crashfs (SIGKILL) is the power loss:
 * whatever was written and not synced is gone, as from a disk's volatile
 * cache, and BACKING_DIR holds exactly what a host would find on reboot.
 * A clean unmount (SIGTERM, fusermount3 -u) loses it too: nothing but a
 * sync makes data durable.  The files cannot be created, renamed or
 * resized through the mount; every open is direct I/O (no page cache in
 * the way of the test).
 *
 * The state kept: per file, a hash of the 4 KiB pages written since its
 * last sync.  A test harness's tool, not a filesystem for real data.
 * SEEK_DATA and SEEK_HOLE see the backing file's data and the pages
 * written since (data, whatever they hold): a sparse image is compared
 * through the mount in the time its data takes, not its size.
 */
#define FUSE_USE_VERSION 31
#include <fuse.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PG 4096u

struct page {
	uint64_t idx;
	struct page *next;
	uint8_t data[PG];
};

struct file {
	char name[NAME_MAX + 1];
	int fd;				/* the backing file */
	struct page **tab;		/* pages written since the last sync */
	size_t nbuckets, npages;
	struct file *next;
};

static char backing[PATH_MAX];
static struct file *files;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long syncs, synced_pages;

static struct page **slot(struct file *f, uint64_t idx)
{
	struct page **p = &f->tab[(idx * 0x9E3779B97F4A7C15ull) % f->nbuckets];

	while (*p && (*p)->idx != idx)
		p = &(*p)->next;
	return p;
}

static int grow(struct file *f)
{
	size_t n = f->nbuckets ? f->nbuckets * 2 : 1024;
	struct page **old = f->tab;
	size_t oldn = f->nbuckets;

	f->tab = calloc(n, sizeof(*f->tab));
	if (!f->tab) {
		f->tab = old;
		return -ENOMEM;
	}
	f->nbuckets = n;
	for (size_t i = 0; i < oldn; i++) {
		for (struct page *p = old[i], *nx; p; p = nx) {
			nx = p->next;
			p->next = NULL;
			*slot(f, p->idx) = p;
		}
	}
	free(old);
	return 0;
}

/* The file's current contents of page idx: written, else backing. */
static int read_page(struct file *f, uint64_t idx, uint8_t *out)
{
	struct page *p = f->nbuckets ? *slot(f, idx) : NULL;
	ssize_t r;

	if (p) {
		memcpy(out, p->data, PG);
		return 0;
	}
	memset(out, 0, PG);
	r = pread(f->fd, out, PG, (off_t)(idx * PG));
	return r < 0 ? -errno : 0;
}

static struct file *find(const char *path)
{
	if (path[0] != '/' || strchr(path + 1, '/'))
		return NULL;
	for (struct file *f = files; f; f = f->next)
		if (!strcmp(f->name, path + 1))
			return f;
	return NULL;
}

/* Opened once, kept: the backing files are the "disk". */
static struct file *get(const char *path, int *err)
{
	struct file *f = find(path);
	char full[PATH_MAX * 2];
	struct stat sb;

	if (f)
		return f;
	if (path[0] != '/' || strchr(path + 1, '/') || !path[1] ||
	    strlen(path + 1) > NAME_MAX) {
		*err = -ENOENT;
		return NULL;
	}
	snprintf(full, sizeof(full), "%s/%s", backing, path + 1);
	if (stat(full, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		*err = -ENOENT;
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		*err = -ENOMEM;
		return NULL;
	}
	f->fd = open(full, O_RDWR | O_CLOEXEC);
	if (f->fd < 0) {
		*err = -errno;
		free(f);
		return NULL;
	}
	snprintf(f->name, sizeof(f->name), "%s", path + 1);
	f->next = files;
	files = f;
	return f;
}

static int cf_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	char full[PATH_MAX * 2];

	if (!strcmp(path, "/")) {
		memset(st, 0, sizeof(*st));
		st->st_mode = S_IFDIR | 0700;
		st->st_nlink = 2;
		return 0;
	}
	if (strchr(path + 1, '/'))
		return -ENOENT;
	snprintf(full, sizeof(full), "%s/%s", backing, path + 1);
	if (stat(full, st) < 0)
		return -errno;
	return S_ISREG(st->st_mode) ? 0 : -ENOENT;
}

static int cf_readdir(const char *path, void *buf, fuse_fill_dir_t fill,
		      off_t off, struct fuse_file_info *fi,
		      enum fuse_readdir_flags flags)
{
	DIR *d;
	struct dirent *e;

	if (strcmp(path, "/"))
		return -ENOENT;
	d = opendir(backing);
	if (!d)
		return -errno;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	while ((e = readdir(d)))
		if (e->d_type == DT_REG)
			fill(buf, e->d_name, NULL, 0, 0);
	closedir(d);
	return 0;
}

static int cf_open(const char *path, struct fuse_file_info *fi)
{
	int err = 0;

	if (fi->flags & (O_TRUNC | O_CREAT))
		return -EPERM;
	pthread_mutex_lock(&lock);
	if (!get(path, &err) && !err)
		err = -ENOENT;
	pthread_mutex_unlock(&lock);
	fi->direct_io = 1;
	return err;
}

static int cf_read(const char *path, char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct file *f;
	struct stat sb;
	uint8_t pg[PG];
	size_t done = 0;
	int err = 0;

	pthread_mutex_lock(&lock);
	f = get(path, &err);
	if (!f || fstat(f->fd, &sb) < 0) {
		pthread_mutex_unlock(&lock);
		return f ? -errno : err;
	}
	if (off >= sb.st_size) {
		pthread_mutex_unlock(&lock);
		return 0;
	}
	if ((uint64_t)off + size > (uint64_t)sb.st_size)
		size = (size_t)(sb.st_size - off);
	while (done < size) {
		uint64_t pos = (uint64_t)off + done, idx = pos / PG;
		size_t in = pos % PG, n = PG - in < size - done ? PG - in : size - done;

		err = read_page(f, idx, pg);
		if (err)
			break;
		memcpy(buf + done, pg + in, n);
		done += n;
	}
	pthread_mutex_unlock(&lock);
	return err ? err : (int)done;
}

static int cf_write(const char *path, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct file *f;
	struct stat sb;
	size_t done = 0;
	int err = 0;

	pthread_mutex_lock(&lock);
	f = get(path, &err);
	if (!f || fstat(f->fd, &sb) < 0) {
		pthread_mutex_unlock(&lock);
		return f ? -errno : err;
	}
	/* a disk has a size: no writing past it */
	if ((uint64_t)off + size > (uint64_t)sb.st_size) {
		pthread_mutex_unlock(&lock);
		return -ENOSPC;
	}
	while (done < size) {
		uint64_t pos = (uint64_t)off + done, idx = pos / PG;
		size_t in = pos % PG, n = PG - in < size - done ? PG - in : size - done;
		struct page **s, *p;

		if (f->npages + 1 > f->nbuckets && (err = grow(f)) < 0)
			break;
		s = slot(f, idx);
		p = *s;
		if (!p) {
			p = malloc(sizeof(*p));
			if (!p) {
				err = -ENOMEM;
				break;
			}
			if ((err = read_page(f, idx, p->data)) < 0) {
				free(p);
				break;
			}
			p->idx = idx;
			p->next = NULL;
			*s = p;
			f->npages++;
		}
		memcpy(p->data + in, buf + done, n);
		done += n;
	}
	pthread_mutex_unlock(&lock);
	return err ? err : (int)done;
}

/* The only way to the backing file: write every page held, then sync. */
static int cf_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	struct file *f;
	struct stat sb;
	int err = 0;

	pthread_mutex_lock(&lock);
	f = get(path, &err);
	if (!f || fstat(f->fd, &sb) < 0) {
		pthread_mutex_unlock(&lock);
		return f ? -errno : err;
	}
	for (size_t i = 0; i < f->nbuckets && !err; i++) {
		while (f->tab[i]) {
			struct page *p = f->tab[i];
			uint64_t at = p->idx * PG;
			size_t n = at + PG > (uint64_t)sb.st_size ?
				   (size_t)(sb.st_size - at) : PG;

			if (pwrite(f->fd, p->data, n, (off_t)at) != (ssize_t)n) {
				err = -EIO;
				break;
			}
			f->tab[i] = p->next;
			free(p);
			f->npages--;
			synced_pages++;
		}
	}
	if (!err && fdatasync(f->fd) < 0)
		err = -errno;
	if (!err)
		syncs++;
	pthread_mutex_unlock(&lock);
	return err;
}

static int cf_statfs(const char *path, struct statvfs *st)
{
	return statvfs(backing, st) < 0 ? -errno : 0;
}

/* A page written since the last sync covers pos: the next page's
 * start, else pos itself. */
static uint64_t past_written(struct file *f, uint64_t pos)
{
	while (f->nbuckets && *slot(f, pos / PG))
		pos = (pos / PG + 1) * PG;
	return pos;
}

static off_t cf_lseek(const char *path, off_t off, int whence,
		      struct fuse_file_info *fi)
{
	struct file *f;
	struct stat sb;
	uint64_t size, pos = (uint64_t)off, best;
	int err = 0;
	off_t r;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	pthread_mutex_lock(&lock);
	f = get(path, &err);
	if (!f || fstat(f->fd, &sb) < 0) {
		pthread_mutex_unlock(&lock);
		return f ? -errno : err;
	}
	size = (uint64_t)sb.st_size;
	if (off < 0 || pos >= size) {
		pthread_mutex_unlock(&lock);
		return -ENXIO;
	}
	if (whence == SEEK_DATA) {
		r = lseek(f->fd, off, SEEK_DATA);
		best = r < 0 ? size : (uint64_t)r;
		for (size_t b = 0; b < f->nbuckets; b++)
			for (struct page *p = f->tab[b]; p; p = p->next) {
				uint64_t start = p->idx * PG;

				if (start + PG > pos && start < best)
					best = start > pos ? start : pos;
			}
		pthread_mutex_unlock(&lock);
		return best >= size ? -ENXIO : (off_t)best;
	}
	/* SEEK_HOLE: past written pages and the backing file's data, until
	 * neither covers the position (the end counts as a hole) */
	for (;;) {
		pos = past_written(f, pos);
		if (pos >= size)
			break;
		r = lseek(f->fd, (off_t)pos, SEEK_HOLE);
		if (r < 0 || (uint64_t)r >= size) {
			pos = size;
			break;
		}
		if ((uint64_t)r == pos)
			break;
		pos = (uint64_t)r;
	}
	pthread_mutex_unlock(&lock);
	return (off_t)(pos < size ? pos : size);
}

static int cf_flush(const char *path, struct fuse_file_info *fi)
{
	return 0;	/* close() is not a sync */
}

static const struct fuse_operations ops = {
	.getattr = cf_getattr,
	.readdir = cf_readdir,
	.open = cf_open,
	.read = cf_read,
	.write = cf_write,
	.fsync = cf_fsync,
	.flush = cf_flush,
	.statfs = cf_statfs,
	.lseek = cf_lseek,
};

int main(int argc, char **argv)
{
	char *fargv[] = { argv[0], "-f", "-o", "allow_other,default_permissions",
			  NULL, NULL };
	int rc;

	if (argc != 3) {
		fprintf(stderr, "usage: crashfs BACKING_DIR MOUNTPOINT\n");
		return 2;
	}
	if (!realpath(argv[1], backing)) {
		fprintf(stderr, "crashfs: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	fargv[4] = argv[2];
	rc = fuse_main(5, fargv, &ops, NULL);
	fprintf(stderr, "crashfs: unmounted after %llu syncs (%llu pages); "
		"what was not synced is lost\n", syncs, synced_pages);
	return rc;
}

// SPDX-License-Identifier: GPL-2.0-only
/* Read-only images in a VM's QEMU arguments: found, writable drives
 * refused, fingerprints compared (roimage.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "roimage.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/rdb-roimage-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static int list(char **args, size_t n, struct rdb_roimage *ro, unsigned *count,
		char *err)
{
	return rdb_roimages_list(args, n, ro, count, err, 600);
}

static void test_found_and_refused(void **state)
{
	struct rdb_roimage ro[RDB_ROIMAGE_MAX];
	unsigned n = 99;
	char err[600];
	char *ok[] = { "-m", "512", "-cdrom", "/iso/debian.iso",
		       "-drive", "if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE.fd",
		       "-drive", "if=none,id=cd1,media=cdrom,file=/iso/a,,b.iso",
		       "-drive", "if=none,id=cd2,media=cdrom",
		       "-blockdev", "{\"driver\":\"file\",\"filename\":\"/img/ro.raw\",\"node-name\":\"f\",\"read-only\":true}",
		       "-blockdev", "driver=raw,file=f,node-name=r,read-only=on",
		       "--drive", "file=/iso/debian.iso,readonly=on,if=none,id=again" };

	(void)state;
	assert_int_equal(list(ok, sizeof(ok) / sizeof(ok[0]), ro, &n, err), 0);
	assert_int_equal(n, 4);
	assert_string_equal(ro[0].path, "/iso/debian.iso");
	assert_string_equal(ro[1].path, "/usr/share/OVMF/OVMF_CODE.fd");
	assert_string_equal(ro[2].path, "/iso/a,b.iso");	/* ",," unescaped */
	assert_string_equal(ro[3].path, "/img/ro.raw");

	{
		char *a[] = { "-drive", "file=/img/data.raw,if=virtio" };

		assert_int_equal(list(a, 2, ro, &n, err), -EINVAL);
		assert_non_null(strstr(err, "not replicated"));
	}
	{
		char *a[] = { "-drive", "if=pflash,format=raw,file=/var/lib/OVMF_VARS.fd" };

		assert_int_equal(list(a, 2, ro, &n, err), -EINVAL);
		assert_non_null(strstr(err, "UEFI variable store"));
	}
	{
		char *a[] = { "-hda", "/img/x.raw" };

		assert_int_equal(list(a, 2, ro, &n, err), -EINVAL);
		assert_non_null(strstr(err, "-hda"));
	}
	{
		char *a[] = { "-blockdev", "driver=file,filename=/img/w.raw,node-name=w" };

		assert_int_equal(list(a, 2, ro, &n, err), -EINVAL);
	}
	{
		char *a[] = { "-drive", "file=rel.iso,media=cdrom" };

		assert_int_equal(list(a, 2, ro, &n, err), -EINVAL);
		assert_non_null(strstr(err, "absolute path"));
	}
	{
		/* a value that merely contains "readonly=on" is not the option */
		char *a[] = { "-drive", "file=/img/readonly=on.raw,if=virtio" };

		assert_int_equal(list(a, 2, ro, &n, err), -EINVAL);
	}
}

static void write_file(const char *p, size_t size, unsigned seed)
{
	FILE *f = fopen(p, "w");

	assert_non_null(f);
	for (size_t i = 0; i < size; i++)
		fputc((int)((i * 31 + seed) & 0xff), f);
	fclose(f);
}

static void test_fingerprint_verified(void **state)
{
	struct rdb_roimage im = { 0 }, other;
	char err[600];
	int fd;

	(void)state;
	snprintf(im.path, sizeof(im.path), "%s/cd.iso", dir);
	write_file(im.path, 3u << 20, 1);
	assert_int_equal(rdb_roimage_fingerprint(&im, err, sizeof(err)), 0);
	assert_int_equal(im.size, 3u << 20);
	assert_int_equal(strlen(im.sha256), 64);
	assert_int_equal(rdb_roimage_verify(&im, err, sizeof(err)), 0);
	/* a byte changed in the last MiB */
	fd = open(im.path, O_WRONLY);
	assert_int_equal(pwrite(fd, "X", 1, (3 << 20) - 10), 1);
	close(fd);
	assert_int_equal(rdb_roimage_verify(&im, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "other contents"));
	/* another size */
	other = im;
	write_file(im.path, (3u << 20) + 1, 1);
	assert_int_equal(rdb_roimage_verify(&other, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "bytes on this host"));
	/* missing */
	unlink(im.path);
	assert_int_equal(rdb_roimage_verify(&other, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "not usable on this host"));
	/* a file smaller than a MiB */
	write_file(im.path, 1000, 2);
	assert_int_equal(rdb_roimage_fingerprint(&im, err, sizeof(err)), 0);
	assert_int_equal(im.size, 1000);
	assert_int_equal(rdb_roimage_verify(&im, err, sizeof(err)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_found_and_refused),
		cmocka_unit_test_setup_teardown(test_fingerprint_verified, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

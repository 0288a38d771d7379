/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Bringing a VM back on the backup: a fresh QEMU started with
 * `-incoming defer` loads a migration stream we synthesize from the last
 * committed checkpoint:
 *
 *   stream  = magic:be32 version:be32 config ramstart ramend devstate vmdesc
 *   config  = the primary's configuration section + subsection
 *             "configuration/capabilities" [x-ignore-shared]
 *   ramstart= 0x01 id "ram" v4  be64(total|MEM_SIZE)
 *             { len:u8 idstr used:be64 addr:be64 }*  be64(EOS) footer
 *   ramend  = 0x03 id  page*  be64(EOS) footer
 *             (pages of the small blocks only: ROMs, ACPI tables)
 *   devstate= the last committed device sections + EOF
 *   vmdesc  = 0x06 len:be32 json  (a stub: the loader reads one)
 *
 * The main RAM block (pc.ram) is not in the stream: QEMU maps the
 * backup's image file of it (memory-backend-file share=on) and skips it
 * (x-ignore-shared), so failover time does not grow with guest RAM.
 */
#ifndef RDB_RESTORE_H
#define RDB_RESTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDB_RESTORE_SHARED_BLOCK "pc.ram"

struct rdb_restore_block {
	const char *idstr;
	uint64_t used_length;
	bool shared;		/* mapped from the image file, not sent */
	const uint8_t *data;	/* !shared: used_length bytes */
};

struct rdb_restore_spec {
	const uint8_t *config;	/* from its 0x07 byte */
	size_t config_len;
	const struct rdb_restore_block *blocks;
	size_t nblocks;
	const uint8_t *devstate;
	size_t devstate_len;
};

int rdb_restore_stream_build(const struct rdb_restore_spec *spec,
			     uint8_t **buf_out, size_t *len_out);
int rdb_restore_stream_send(int fd, const uint8_t *buf, size_t len,
			    uint64_t deadline_ns);

/*
 * argv for the restored QEMU: qemu_binary, the VM's common arguments, then
 * the memory backend on image_path (ram_bytes), QMP, the NIC's stream
 * socket, the serial console file and -incoming defer.  NULL-terminated;
 * free with rdb_restore_argv_free.
 */
int rdb_restore_argv(const char *qemu_binary, char *const *common,
		     size_t ncommon, const char *image_path, uint64_t ram_bytes,
		     const char *qmp_path, const char *net_path,
		     const char *console_path, char ***argv_out);
void rdb_restore_argv_free(char **argv);

#endif

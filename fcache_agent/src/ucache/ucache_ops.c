/* SPDX-License-Identifier: Apache-2.0 */
/* The fc_io_ops the NBD server calls for a ucache volume: the table of
 * the request paths (ucache_read.c, ucache_write.c, ucache_status.c).
 * Apart from their shared helpers (ucache_io.c), which the paths call:
 * the table calls the paths, the paths call the helpers, and nothing
 * calls back up. */
#include "common/log.h"
#include "ucache_io.h"

/* A client that opens the export is the volume's VM (QEMU reconnecting
 * after an agent restart, or starting): the volume is in use here, so
 * its dirty blocks are current and their write-back may go on. */
static void
uc_opened(void *handle, const char *where)
{
  struct fc_ucache *uc = handle;

  if (fc_ucache_claim(uc))
    log_warning("volume %s: a client opened its export: the write-back of "
                "its %u unwritten blocks, held since the agent restarted, "
                "resumes (export %s)", uc_volume(uc), fc_ucache_dirty(uc), where);
}

const struct fc_io_ops fc_ucache_io_ops = {
  .pread = uc_pread,
  .pread_start = uc_pread_start,
  .pwrite = uc_pwrite,
  .flush = uc_flush,
  .trim = uc_trim,
  .zero = uc_zero,
  .block_status = uc_block_status,
  .cache = uc_cache,
  .opened = uc_opened,
};

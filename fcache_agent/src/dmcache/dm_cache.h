/* SPDX-License-Identifier: Apache-2.0 */
/* The kernel's dm-cache target: its table line, its modes and its status.
 *
 * Vocabulary (Documentation/admin-guide/device-mapper/cache.rst): the
 * origin is the slow device, the cache data device holds cache block n at
 * sector n * block_size, the metadata device holds the mapping, dirty bits
 * and policy hints.  block_size is in sectors, a multiple of 64 (32 KiB)
 * from 64 to 2097152 (1 GiB). */
#ifndef FCACHE_DM_CACHE_H
#define FCACHE_DM_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/types.h"

#define FC_DMC_MIN_BLOCK_SECTORS 64u
#define FC_DMC_MAX_BLOCK_SECTORS 2097152u

enum fc_dmc_mode {
  FC_DMC_WRITETHROUGH = 0,
  FC_DMC_WRITEBACK = 1,
  /* Reads from origin; a write hit invalidates the block.  The kernel
   * accepts it only while no block is dirty. */
  FC_DMC_PASSTHROUGH = 2,
};

const char *fc_dmc_mode_name(enum fc_dmc_mode m);
/* read_only and write_through both run as writethrough: dm-cache has no
 * "invalidate on write" mode, and writethrough keeps cache and origin
 * equal, which is what read_only promises the VM. */
enum fc_dmc_mode fc_dmc_mode_for(enum fc_write_policy p);

bool fc_dmc_block_sectors_valid(uint64_t sectors);

/* Bytes of metadata device for nr_blocks cache blocks: the 4 MiB the
 * superblock, space maps and btree roots need plus 28 bytes per block
 * (mapping, dirty bit, 4-byte smq hint), the sizing of
 * thin-provisioning-tools' cache_metadata_size, plus one 4 KiB block of
 * slack. */
uint64_t fc_dmc_metadata_bytes(uint64_t nr_blocks);

struct fc_dmc_table {
  const char *metadata_dev;     /* "major:minor" or path */
  const char *data_dev;
  const char *origin_dev;
  uint64_t block_sectors;
  enum fc_dmc_mode mode;
  const char *policy;           /* "smq", or "cleaner" to drain dirty blocks */
};

/* The params of a cache target line.  -ENAMETOOLONG if len is short. */
int fc_dmc_table_params(const struct fc_dmc_table *t, char *buf, size_t len);

struct fc_dmc_status {
  uint64_t block_sectors;
  uint64_t used_blocks, total_blocks, dirty_blocks;
  uint64_t metadata_used, metadata_total;   /* metadata blocks */
  uint64_t read_hits, read_misses, write_hits, write_misses;
  uint64_t promotions, demotions;
  enum fc_dmc_mode mode;
  char policy[32];
  bool fail, error, needs_check, read_only;
};

/* Parse a cache target's status params with libdevmapper's
 * dm_get_status_cache.  -EINVAL for a line it does not understand. */
int fc_dmc_status_parse(const char *params, struct fc_dmc_status *st);

#endif

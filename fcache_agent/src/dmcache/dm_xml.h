/* SPDX-License-Identifier: Apache-2.0 */
/* thin-provisioning-tools' XML for dm-cache and dm-era metadata: what
 * cache_dump writes and cache_restore reads, and era_invalidate's block
 * list.  Pure text handling; running the tools is dm_tools.h.
 *
 * The tools write one element per line (checked against 0.9.0):
 *   <superblock uuid="" block_size="128" nr_cache_blocks="128"
 *               policy="smq" hint_width="4">
 *   <mapping cache_block="1" origin_block="3" dirty="true"/>
 *   <hint cache_block="1" data="PwAAAA=="/>   (base64; smq: the entry's
 *                                              queue level, 0..63, LE32)
 *   <block block="6"/>  <range begin="10" end = "12"/>   (end exclusive)
 */
#ifndef FCACHE_DM_XML_H
#define FCACHE_DM_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/types.h"

struct fc_dmc_mapping {
  oblock_t oblock;
  cblock_t cblock;
  uint32_t hint;        /* smq level; 0 when the dump has none */
  bool dirty;
};

struct fc_dmc_dump {
  uint64_t block_sectors;
  uint64_t nr_cache_blocks;
  char policy[32];
  struct fc_dmc_mapping *map;   /* in the dump's order (cache block order) */
  uint32_t n;
};

/* The most cache blocks a dump may describe (its map is indexed by them). */
#define FC_DMC_XML_MAX_CACHE_BLOCKS (1u << 26)

/* Parse a cache_dump file.  -EINVAL with a message for a file that is
 * not one, -E2BIG for one of more than FC_DMC_XML_MAX_CACHE_BLOCKS. */
int fc_dmc_xml_read(const char *path, struct fc_dmc_dump *out, char *err, size_t errlen);
void fc_dmc_dump_free(struct fc_dmc_dump *d);

/* Write metadata for cache_restore: smq, 4-byte hints. */
int fc_dmc_xml_write(const char *path, uint64_t block_sectors, uint64_t nr_cache_blocks,
                     const struct fc_dmc_mapping *map, uint32_t n, char *err,
                     size_t errlen);

/* Parse era_invalidate's output: the blocks it lists (ranges expanded,
 * at most max_block).  Caller frees *blocks. */
int fc_era_xml_read(const char *path, uint64_t max_block, uint64_t **blocks,
                    uint32_t *n, char *err, size_t errlen);

/* Base64 of a little-endian 32-bit value, and back (exposed for tests). */
void fc_b64_le32(uint32_t v, char out[9]);
int fc_b64_to_le32(const char *s, uint32_t *v);

#endif

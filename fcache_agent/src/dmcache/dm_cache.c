/* SPDX-License-Identifier: Apache-2.0 */
/* dm-cache table and status; see dm_cache.h. */
#include <errno.h>
#include <libdevmapper.h>
#include <stdio.h>
#include <string.h>

#include "dm_cache.h"
#include "common/enum_names.h"

static const char *const mode_names[] = { "writethrough", "writeback", "passthrough" };

const char *
fc_dmc_mode_name(enum fc_dmc_mode m)
{
  return fc_enum_name(mode_names, FC_NAMES_COUNT(mode_names), m);
}

enum fc_dmc_mode
fc_dmc_mode_for(enum fc_write_policy p)
{
  return p == FC_WRITE_BACK ? FC_DMC_WRITEBACK : FC_DMC_WRITETHROUGH;
}

bool
fc_dmc_block_sectors_valid(uint64_t s)
{
  return s >= FC_DMC_MIN_BLOCK_SECTORS && s <= FC_DMC_MAX_BLOCK_SECTORS &&
         s % FC_DMC_MIN_BLOCK_SECTORS == 0;
}

uint64_t
fc_dmc_metadata_bytes(uint64_t nr_blocks)
{
  return 4ull * 1024 * 1024 + nr_blocks * 28 + 4096;
}

int
fc_dmc_table_params(const struct fc_dmc_table *t, char *buf, size_t len)
{
  /* <meta> <data> <origin> <block size> <#features> <features>
   * <policy> <#policy args> */
  int n = snprintf(buf, len, "%s %s %s %llu 1 %s %s 0", t->metadata_dev, t->data_dev,
                   t->origin_dev, (unsigned long long)t->block_sectors,
                   fc_dmc_mode_name(t->mode), t->policy ? t->policy : "smq");
  return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int
fc_dmc_status_parse(const char *params, struct fc_dmc_status *st)
{
  struct dm_pool *mem = dm_pool_create("fcache-status", 1024);
  struct dm_status_cache *s;
  int r = 0;

  memset(st, 0, sizeof *st);
  if (!mem)
    return -ENOMEM;
  if (!dm_get_status_cache(mem, params, &s)) {
    r = -EINVAL;
    goto out;
  }
  st->fail = s->fail;
  st->error = s->error;
  st->needs_check = s->needs_check;
  st->read_only = s->read_only;
  if (s->fail || s->error)
    goto out;                   /* "Fail" / "Error": no counters follow */
  st->block_sectors = s->block_size;
  st->used_blocks = s->used_blocks;
  st->total_blocks = s->total_blocks;
  st->dirty_blocks = s->dirty_blocks;
  st->metadata_used = s->metadata_used_blocks;
  st->metadata_total = s->metadata_total_blocks;
  st->read_hits = s->read_hits;
  st->read_misses = s->read_misses;
  st->write_hits = s->write_hits;
  st->write_misses = s->write_misses;
  st->promotions = s->promotions;
  st->demotions = s->demotions;
  if (s->feature_flags & DM_CACHE_FEATURE_WRITEBACK)
    st->mode = FC_DMC_WRITEBACK;
  else if (s->feature_flags & DM_CACHE_FEATURE_PASSTHROUGH)
    st->mode = FC_DMC_PASSTHROUGH;
  else
    st->mode = FC_DMC_WRITETHROUGH;
  snprintf(st->policy, sizeof st->policy, "%s", s->policy_name ? s->policy_name : "");
out:
  dm_pool_destroy(mem);
  return r;
}

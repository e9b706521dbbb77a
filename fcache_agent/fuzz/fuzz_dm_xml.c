/* SPDX-License-Identifier: Apache-2.0 */
/* thin-provisioning-tools' XML (dmcache/dm_xml.c): cache_dump's metadata,
 * which the dmcache engine reads back to rebuild its map and to migrate a
 * cache, and era_invalidate's block list.  The first input byte chooses
 * the reader (even: cache_dump, odd: era), the rest is the file.  What
 * parses must be consistent: every mapping's cache block below
 * nr_cache_blocks and unique, every era block below the limit. */
#include "fuzz.h"
#include "dmcache/dm_xml.h"

/* The origin blocks era_invalidate may name: large enough for real dumps
 * in the corpus, small enough that a list of ranges stays in memory. */
#define ERA_MAX_BLOCK 4096u

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_setup();
  return 0;
}

static void cache_dump(const char *path)
{
  struct fc_dmc_dump d;
  char err[512];

  if (fc_dmc_xml_read(path, &d, err, sizeof err) != 0)
    return;
  if (d.n > d.nr_cache_blocks)
    abort();
  for (uint32_t i = 0; i < d.n; i++) {
    if (d.map[i].cblock.n >= d.nr_cache_blocks)
      abort();
    for (uint32_t j = 0; j < i; j++)
      if (d.map[j].cblock.n == d.map[i].cblock.n)
        abort();
  }
  fc_dmc_dump_free(&d);
}

static void era(const char *path)
{
  uint64_t *blocks = NULL;
  uint32_t n = 0;
  char err[512];

  if (fc_era_xml_read(path, ERA_MAX_BLOCK, &blocks, &n, err, sizeof err) == 0)
    for (uint32_t i = 0; i < n; i++)
      if (blocks[i] >= ERA_MAX_BLOCK)
        abort();
  free(blocks);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *path;

  if (size < 1)
    return 0;
  path = fuzz_file("meta.xml", data + 1, size - 1);
  if (data[0] & 1)
    era(path);
  else
    cache_dump(path);
  return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The dmcache engine's flash pool table (dmcache/flash_pool.c): the input
 * is <state_dir>/flash_pool, the "owner start length" lines that
 * fc_flash_pool_load() reads over a pool initialised from cache_size when
 * the agent starts.  The pool here is 64 extents (64 MiB).  What loads
 * must be a table the pool could have made: segments sorted, inside the
 * capacity, not overlapping; saved and loaded again it is the same. */
#include "fuzz.h"
#include "dmcache/flash_pool.h"

#define CAPACITY (64ull * FC_FLASH_EXTENT)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *path = fuzz_file("flash_pool", data, size);
  struct fc_flash_pool p, q;
  char err[1024], again[600];
  uint64_t end = 0;

  fc_flash_pool_init(&p, CAPACITY);
  if (fc_flash_pool_load(&p, path, err, sizeof err) == 0) {
    for (unsigned i = 0; i < p.nr_segs; i++) {
      const struct fc_flash_seg *s = &p.segs[i];

      if (s->len == 0 || s->start < end || s->start > p.nr_extents ||
          s->len > p.nr_extents - s->start || !s->owner[0])
        abort();
      end = s->start + s->len;
    }
    snprintf(again, sizeof again, "%s.again", path);
    fc_flash_pool_init(&q, CAPACITY);
    if (fc_flash_pool_save(&p, again, err, sizeof err) ||
        fc_flash_pool_load(&q, again, err, sizeof err) || q.nr_segs != p.nr_segs)
      abort();
    for (unsigned i = 0; i < p.nr_segs; i++)
      if (strcmp(p.segs[i].owner, q.segs[i].owner) ||
          p.segs[i].start != q.segs[i].start || p.segs[i].len != q.segs[i].len)
        abort();
    fc_flash_pool_fini(&q);
  }
  fc_flash_pool_fini(&p);
  return 0;
}

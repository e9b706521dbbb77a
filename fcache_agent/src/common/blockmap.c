/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>

#include "bigtable.h"
#include "blockmap.h"

/* Fibonacci hashing spreads sequential block numbers (the common case for
 * a disk) across buckets without a modulo -- provided the bucket comes
 * from the product's top bits, where the multiplication mixes best. */
static uint32_t
bucket_of(const struct fc_blockmap *map, oblock_t ob)
{
  return (uint32_t)((ob.n * 0x9E3779B97F4A7C15ull) >> map->shift);
}

int
fc_blockmap_init(struct fc_blockmap *map, uint32_t capacity)
{
  uint32_t n = 16;

  while (n < capacity && n < (1u << 31))
    n <<= 1;
  map->buckets = fc_bigtable_alloc(n, sizeof *map->buckets);
  if (!map->buckets)
    return -ENOMEM;
  for (uint32_t i = 0; i < n; i++)
    map->buckets[i] = CBLOCK_NONE;
  map->mask = n - 1;
  map->shift = 64 - (uint32_t)__builtin_ctz(n);
  map->count = 0;
  return 0;
}

void
fc_blockmap_destroy(struct fc_blockmap *map)
{
  fc_bigtable_free(map->buckets, (size_t)map->mask + 1, sizeof *map->buckets);
  map->buckets = NULL;
  map->count = 0;
}

int
fc_blockmap_resize(struct fc_blockmap *map, struct fc_entry *table,
                   uint32_t capacity)
{
  struct fc_blockmap old = *map;
  int r;

  if ((r = fc_blockmap_init(map, capacity))) {
    *map = old;
    return r;
  }
  /* Every chain of the old array into the new one; the order within a
   * chain does not matter (oblocks are unique). */
  for (uint32_t b = 0; b <= old.mask; b++) {
    for (uint32_t i = old.buckets[b], next; i != CBLOCK_NONE; i = next) {
      next = table[i].hash_next;
      fc_blockmap_insert(map, table, to_cblock(i));
    }
  }
  fc_blockmap_destroy(&old);
  return 0;
}

cblock_t
fc_blockmap_lookup(const struct fc_blockmap *map, const struct fc_entry *table,
                   oblock_t ob)
{
  uint32_t i = map->buckets[bucket_of(map, ob)];

  while (i != CBLOCK_NONE) {
    if (table[i].oblock == ob.n)
      return to_cblock(i);
    i = table[i].hash_next;
  }
  return to_cblock(CBLOCK_NONE);
}

void
fc_blockmap_insert(struct fc_blockmap *map, struct fc_entry *table, cblock_t cb)
{
  uint32_t b = bucket_of(map, to_oblock(table[cb.n].oblock));

  table[cb.n].hash_next = map->buckets[b];
  map->buckets[b] = cb.n;
  map->count++;
}

int
fc_blockmap_remove(struct fc_blockmap *map, struct fc_entry *table, cblock_t cb)
{
  uint32_t *link = &map->buckets[bucket_of(map, to_oblock(table[cb.n].oblock))];

  while (*link != CBLOCK_NONE) {
    if (*link == cb.n) {
      *link = table[cb.n].hash_next;
      table[cb.n].hash_next = CBLOCK_NONE;
      map->count--;
      return 0;
    }
    link = &table[*link].hash_next;
  }
  return -ENOENT;
}

size_t
fc_blockmap_memory(const struct fc_blockmap *map)
{
  return ((size_t)map->mask + 1) * sizeof *map->buckets;
}

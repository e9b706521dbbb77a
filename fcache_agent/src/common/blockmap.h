/* SPDX-License-Identifier: Apache-2.0 */
/* One volume's map from origin block to cache block: a chained hash table
 * whose chains run through the block table (fc_entry.hash_next), so the
 * only memory it adds per cached block is its share of the bucket array.
 * Not thread-safe: the owning volume's lock protects it. */
#ifndef FCACHE_BLOCKMAP_H
#define FCACHE_BLOCKMAP_H

#include <stddef.h>
#include <stdint.h>
#include "entry.h"

struct fc_blockmap {
  uint32_t *buckets;      /* cblock index of each chain's first entry */
  uint32_t mask;          /* nr_buckets - 1 (a power of two) */
  uint32_t shift;         /* 64 - log2(nr_buckets): the hash's top bits */
  uint32_t count;
};

/* Size the table for about `capacity` entries. 0 or -ENOMEM. */
int fc_blockmap_init(struct fc_blockmap *map, uint32_t capacity);
void fc_blockmap_destroy(struct fc_blockmap *map);
/* Re-size the bucket array for about `capacity` entries, keeping every
 * mapping (a cache whose quota grew: its chains would lengthen).  0, or
 * -ENOMEM with the map as it was. */
int fc_blockmap_resize(struct fc_blockmap *map, struct fc_entry *table,
                       uint32_t capacity);

/* CBLOCK_NONE in .n when absent. */
cblock_t fc_blockmap_lookup(const struct fc_blockmap *map,
                            const struct fc_entry *table, oblock_t ob);
/* table[cb].oblock must already be set; the oblock must not be mapped. */
void fc_blockmap_insert(struct fc_blockmap *map, struct fc_entry *table,
                        cblock_t cb);
/* Returns 0, or -ENOENT if cb is not in the map. */
int fc_blockmap_remove(struct fc_blockmap *map, struct fc_entry *table,
                       cblock_t cb);
size_t fc_blockmap_memory(const struct fc_blockmap *map);

#endif

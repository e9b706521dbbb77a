/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "rws_priv.h"

/* The limit is lowered by histogram rather than entry by entry (SHARDS
 * keeps a priority queue for that): a queue would cost memory inside the
 * bound and an update per access, a pass over the table costs neither.
 * Each pass drops about 1/64 of the entries, so passes are rare and the
 * sample stays within 2 % of the table's capacity. */
#define EVICT_FRACTION 64u
#define HIST_BITS 10u
#define HIST_BUCKETS (1u << HIST_BITS)

uint32_t
rws_sampled_slots(size_t max_bytes)
{
  size_t slots;

  if (max_bytes < sizeof(struct fc_rws))
    return 0;
  slots = (max_bytes - sizeof(struct fc_rws)) / RWS_BYTES_PER_SLOT;
  if (slots > (1u << 31))
    slots = 1u << 31;
  return (uint32_t)slots;
}

/* Keys under the limit are uniform over [0, limit], so the histogram's
 * top buckets tell where to put the new limit for about `target` of them
 * to fall above it.  When all the keys share the lowest bucket, the limit
 * first drops to that bucket's top (dropping nothing) and the histogram
 * is taken again, finer. */
void
rws_sampled_evict(struct fc_rws *t)
{
  const struct rws_table *tb = &t->table;
  uint32_t target = tb->used / EVICT_FRACTION;
  uint32_t hist[HIST_BUCKETS];

  if (target == 0)
    target = 1;
  for (;;) {
    uint64_t width = (t->limit >> HIST_BITS) + 1;
    uint32_t above = 0, b;

    memset(hist, 0, sizeof hist);
    for (uint32_t s = 0; s < tb->slots; s++)
      if (tb->counts[s])
        hist[tb->keys[s] / width]++;
    for (b = HIST_BUCKETS - 1; b > 0; b--) {
      above += hist[b];
      if (above >= target)
        break;
    }
    if (b > 0) {
      t->limit = b * width - 1;
      break;
    }
    /* Width 1: the buckets are single keys and everything is key 0, one
     * entry at most -- a table that small cannot be full. */
    if (width == 1)
      return;
    t->limit = width - 1;
  }
  rws_table_drop_above(&t->table, t->limit);
}

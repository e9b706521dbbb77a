/* SPDX-License-Identifier: Apache-2.0 */
#include "rws_priv.h"

/* Three quarters full: linear probing's runs stay a few slots long, and
 * the exact table, doubling from there, is between 3/8 and 3/4 full. */
uint32_t
rws_max_used(uint32_t slots)
{
  return (uint32_t)((uint64_t)slots * 3 / 4);
}

bool
rws_exact_grow(struct fc_rws *t)
{
  struct rws_table bigger;
  uint32_t want;

  if (t->table.slots >= t->cap_slots)
    return false;
  want = t->table.slots > t->cap_slots / 2 ? t->cap_slots : t->table.slots * 2;
  if (rws_table_init(&bigger, want) < 0)
    return false;
  rws_table_move(&bigger, &t->table);
  t->table = bigger;
  t->max_used = rws_max_used(bigger.slots);
  return true;
}

/* A table left at the size of a past burst (a backup's scan) would hold
 * tens of megabytes for windows that need a few.  The table is sized for
 * twice the last window, so a window a little bigger does not regrow it at
 * once, and only shrinks when four times that, so a window size that
 * wavers does not reallocate at every window. */
void
rws_exact_shrink(struct fc_rws *t, uint32_t last_used)
{
  struct rws_table smaller;
  uint32_t want = RWS_EXACT_MIN_SLOTS;

  while (want < (1u << 31) && rws_max_used(want) < 2 * (uint64_t)last_used)
    want *= 2;
  if (t->table.slots < 4 * (uint64_t)want)
    return;
  /* No memory for the smaller table: keeping the big one is still right. */
  if (rws_table_init(&smaller, want) < 0)
    return;
  rws_table_destroy(&t->table);
  t->table = smaller;
  t->max_used = rws_max_used(want);
}

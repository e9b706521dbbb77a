/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rws_priv.h"

/* The home slot from the key's low 32 bits: the sampled tracker only keeps
 * keys under a limit, so their high bits are mostly zero, while the low
 * bits stay uniform.  Multiply-shift maps them onto any table size, which
 * lets a memory bound that is not a power of two be used in full. */
static uint32_t
home_of(const struct rws_table *tb, uint64_t key)
{
  return (uint32_t)(((uint64_t)(uint32_t)key * tb->slots) >> 32);
}

static uint32_t
next_slot(const struct rws_table *tb, uint32_t s)
{
  return s + 1 == tb->slots ? 0 : s + 1;
}

int
rws_table_init(struct rws_table *tb, uint32_t slots)
{
  void *mem = malloc((size_t)slots * RWS_BYTES_PER_SLOT);

  if (!mem)
    return -ENOMEM;
  tb->keys = mem;
  tb->counts = (uint8_t *)(tb->keys + slots);
  tb->slots = slots;
  tb->used = 0;
  memset(tb->counts, 0, slots);
  return 0;
}

void
rws_table_destroy(struct rws_table *tb)
{
  free(tb->keys);
  tb->keys = NULL;
  tb->counts = NULL;
  tb->slots = tb->used = 0;
}

uint32_t
rws_table_find(const struct rws_table *tb, uint64_t key)
{
  uint32_t s = home_of(tb, key);

  while (tb->counts[s] && tb->keys[s] != key)
    s = next_slot(tb, s);
  return s;
}

void
rws_table_put(struct rws_table *tb, uint32_t slot, uint64_t key, uint8_t count)
{
  tb->keys[slot] = key;
  tb->counts[slot] = count;
  tb->used++;
}

/* Backward-shift deletion: later entries of the probe run move up into the
 * hole unless that would put them before their home, so lookups never
 * need tombstones and the table does not rot as the limit falls. */
static void
remove_at(struct rws_table *tb, uint32_t hole)
{
  uint32_t s = hole;

  for (;;) {
    s = next_slot(tb, s);
    if (!tb->counts[s])
      break;
    uint32_t home = home_of(tb, tb->keys[s]);
    bool stays = hole <= s ? (hole < home && home <= s)
                           : (hole < home || home <= s);
    if (stays)
      continue;
    tb->keys[hole] = tb->keys[s];
    tb->counts[hole] = tb->counts[s];
    hole = s;
  }
  tb->counts[hole] = 0;
  tb->used--;
}

/* Entries only ever shift backwards, towards their home: one that lands on
 * the slot being visited is looked at again, and one that wraps round to
 * the end of the array is visited there, so a single pass drops them all. */
void
rws_table_drop_above(struct rws_table *tb, uint64_t limit)
{
  for (uint32_t s = 0; s < tb->slots; s++)
    while (tb->counts[s] && tb->keys[s] > limit)
      remove_at(tb, s);
}

void
rws_table_clear(struct rws_table *tb)
{
  memset(tb->counts, 0, tb->slots);
  tb->used = 0;
}

void
rws_table_move(struct rws_table *to, struct rws_table *from)
{
  for (uint32_t s = 0; s < from->slots; s++)
    if (from->counts[s])
      rws_table_put(to, rws_table_find(to, from->keys[s]), from->keys[s],
                    from->counts[s]);
  rws_table_destroy(from);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Reuse history (reuse_history.h): two linear-probing tables of packed
 * words, multiply-shift homes (so a table can be exactly the size its
 * bound affords, not the next power of two) and backward-shift deletion
 * (no tombstones: a table that takes entries stays as short to probe as
 * its load says). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "reuse_history.h"

#define EMPTY 0u
#define COUNT_BITS 3u
#define COUNT_MASK ((1u << COUNT_BITS) - 1)
/* A table starts this small and doubles as it fills. */
#define START_SLOTS 256u

struct rh_table {
  uint64_t *w;       /* block << 3 | count; 0 is empty (count >= 1) */
  uint32_t slots;
  uint32_t used;
};

struct fc_rhist {
  uint32_t gen;
  struct rh_table cur, old;
};

/* The slots a generation may take: at most 3/4 full with gen entries. */
static uint32_t
cap_slots(uint32_t gen)
{
  return gen + gen / 3 + 1;
}

static uint32_t
clamp_gen(uint32_t gen)
{
  if (gen < FC_RHIST_MIN_GEN)
    return FC_RHIST_MIN_GEN;
  return gen > FC_RHIST_MAX_GEN ? FC_RHIST_MAX_GEN : gen;
}

/* splitmix64's finaliser, as the RWS tracker's key: sequential blocks (a
 * scan) land all over the table. */
static uint32_t
home_of(const struct rh_table *t, uint64_t block)
{
  uint64_t z = block;

  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (uint32_t)(((z >> 32) * t->slots) >> 32);
}

static uint32_t
next_slot(const struct rh_table *t, uint32_t s)
{
  return s + 1 == t->slots ? 0 : s + 1;
}

static uint64_t
block_of(uint64_t w)
{
  return w >> COUNT_BITS;
}

/* The slot holding block, or the empty slot that ends its probe. */
static uint32_t
find(const struct rh_table *t, uint64_t block)
{
  uint32_t s = home_of(t, block);

  while (t->w[s] != EMPTY && block_of(t->w[s]) != block)
    s = next_slot(t, s);
  return s;
}

static void
table_free(struct rh_table *t)
{
  free(t->w);
  memset(t, 0, sizeof *t);
}

static int
table_init(struct rh_table *t, uint32_t slots)
{
  t->w = calloc(slots, sizeof *t->w);
  if (!t->w)
    return -ENOMEM;
  t->slots = slots;
  t->used = 0;
  return 0;
}

/* Rehash t into a table of `slots` (which holds t's entries). */
static int
table_rehash(struct rh_table *t, uint32_t slots)
{
  struct rh_table n;
  int r = table_init(&n, slots);

  if (r < 0)
    return r;
  for (uint32_t s = 0; s < t->slots; s++)
    if (t->w[s] != EMPTY) {
      n.w[find(&n, block_of(t->w[s]))] = t->w[s];
      n.used++;
    }
  table_free(t);
  *t = n;
  return 0;
}

/* Remove the entry in slot i and shift back the entries of its cluster
 * whose probe passed over it (Knuth's algorithm R). */
static void
table_remove(struct rh_table *t, uint32_t i)
{
  uint32_t j = i;

  for (;;) {
    uint32_t k;

    j = next_slot(t, j);
    if (t->w[j] == EMPTY)
      break;
    k = home_of(t, block_of(t->w[j]));
    /* Leave it if its home lies cyclically in (i, j]. */
    if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
      continue;
    t->w[i] = t->w[j];
    i = j;
  }
  t->w[i] = EMPTY;
  t->used--;
}

static unsigned
table_take(struct rh_table *t, uint64_t block)
{
  uint32_t s;
  unsigned count;

  if (!t->used)
    return 0;
  s = find(t, block);
  if (t->w[s] == EMPTY)
    return 0;
  count = (unsigned)(t->w[s] & COUNT_MASK);
  table_remove(t, s);
  return count;
}

/* The current generation is full: it becomes the older one. */
static void
rotate(struct fc_rhist *h)
{
  table_free(&h->old);
  h->old = h->cur;
  memset(&h->cur, 0, sizeof h->cur);
}

int
fc_rhist_new(uint32_t gen, struct fc_rhist **out)
{
  struct fc_rhist *h;

  if (!out)
    return -EINVAL;
  h = calloc(1, sizeof *h);
  if (!h)
    return -ENOMEM;
  h->gen = clamp_gen(gen);
  *out = h;
  return 0;
}

void
fc_rhist_free(struct fc_rhist *h)
{
  if (!h)
    return;
  table_free(&h->cur);
  table_free(&h->old);
  free(h);
}

/* Room for one more entry in the current generation: rotate when it
 * holds a generation, grow its table when it is 3/4 full. */
static int
make_room(struct fc_rhist *h)
{
  struct rh_table *t = &h->cur;
  uint32_t cap = cap_slots(h->gen);

  if (t->used >= h->gen)
    rotate(h);
  if (!t->slots)
    return table_init(t, cap < START_SLOTS ? cap : START_SLOTS);
  if ((uint64_t)(t->used + 1) * 4 > (uint64_t)t->slots * 3 && t->slots < cap) {
    uint64_t n = (uint64_t)t->slots * 2;

    return table_rehash(t, n > cap ? cap : (uint32_t)n);
  }
  return 0;
}

void
fc_rhist_put(struct fc_rhist *h, uint64_t block, unsigned count)
{
  uint32_t s;

  if (block >= FC_RHIST_BLOCK_LIMIT)
    return;
  if (count < 1)
    count = 1;
  if (count > FC_RHIST_MAX_COUNT)
    count = FC_RHIST_MAX_COUNT;
  /* A block lives in one generation: an older entry is superseded. */
  (void)table_take(&h->old, block);
  if (h->cur.used) {
    s = find(&h->cur, block);
    if (h->cur.w[s] != EMPTY) {
      h->cur.w[s] = block << COUNT_BITS | count;
      return;
    }
  }
  if (make_room(h) < 0)
    return;
  s = find(&h->cur, block);
  h->cur.w[s] = block << COUNT_BITS | count;
  h->cur.used++;
}

unsigned
fc_rhist_take(struct fc_rhist *h, uint64_t block)
{
  unsigned c;

  if (block >= FC_RHIST_BLOCK_LIMIT)
    return 0;
  c = table_take(&h->cur, block);
  return c ? c : table_take(&h->old, block);
}

void
fc_rhist_resize(struct fc_rhist *h, uint32_t gen)
{
  uint32_t cap;

  gen = clamp_gen(gen);
  if (gen == h->gen)
    return;
  h->gen = gen;
  cap = cap_slots(gen);
  if (h->cur.used >= gen)
    rotate(h);
  if (h->old.used > gen)
    table_free(&h->old);
  /* A table bigger than the new bound gives its memory back now; if it
   * cannot be rehashed (no memory), it is forgotten instead. */
  if (h->old.slots > cap && table_rehash(&h->old, cap) < 0)
    table_free(&h->old);
  if (h->cur.slots > cap && table_rehash(&h->cur, cap) < 0)
    table_free(&h->cur);
}

void
fc_rhist_age(struct fc_rhist *h)
{
  rotate(h);
}

uint64_t
fc_rhist_entries(const struct fc_rhist *h)
{
  return (uint64_t)h->cur.used + h->old.used;
}

size_t
fc_rhist_memory(const struct fc_rhist *h)
{
  return sizeof *h + ((size_t)h->cur.slots + h->old.slots) * sizeof(uint64_t);
}

size_t
fc_rhist_memory_max(uint32_t gen)
{
  gen = clamp_gen(gen);
  return sizeof(struct fc_rhist) + 2 * (size_t)cap_slots(gen) * sizeof(uint64_t);
}

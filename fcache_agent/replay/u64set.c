/* SPDX-License-Identifier: Apache-2.0 */
/* A set of 64-bit keys by linear probing, grown at half full.  Keys are
 * stored plus one so that 0 can mark an empty slot; a key of UINT64_MAX
 * is folded onto UINT64_MAX - 1 (regions of 4 MiB never get there). */
#include <stdlib.h>

#include "replay_priv.h"

static uint64_t
mix(uint64_t x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

static bool
grow(struct rp_u64set *s)
{
  uint64_t cap = s->cap ? s->cap * 2 : 1024;
  uint64_t *slots = calloc(cap, sizeof *slots);

  if (!slots)
    return false;
  for (uint64_t i = 0; i < s->cap; i++) {
    uint64_t k = s->slots[i], j;

    if (!k)
      continue;
    for (j = mix(k) & (cap - 1); slots[j]; j = (j + 1) & (cap - 1))
      ;
    slots[j] = k;
  }
  free(s->slots);
  s->slots = slots;
  s->cap = cap;
  return true;
}

bool
rp_u64set_test_and_set(struct rp_u64set *s, uint64_t key)
{
  uint64_t k = (key == UINT64_MAX ? key - 1 : key) + 1, i;

  if (2 * (s->n + 1) > s->cap && !grow(s))
    return false;
  for (i = mix(k) & (s->cap - 1); s->slots[i]; i = (i + 1) & (s->cap - 1))
    if (s->slots[i] == k)
      return true;
  s->slots[i] = k;
  s->n++;
  return false;
}

void
rp_u64set_free(struct rp_u64set *s)
{
  free(s->slots);
  s->slots = NULL;
  s->cap = s->n = 0;
}

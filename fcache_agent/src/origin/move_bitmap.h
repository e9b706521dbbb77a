/* SPDX-License-Identifier: Apache-2.0 */
/* A bitmap of grains (move_priv.h): DBT's dirty blocks, LR's and SLR's
 * "B holds the newest data".  Private to origin/; callers lock. */
#ifndef FCACHE_MOVE_BITMAP_H
#define FCACHE_MOVE_BITMAP_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct move_bitmap {
  uint64_t *w;
  uint64_t nbits, set;
};

static inline int
move_bitmap_init(struct move_bitmap *b, uint64_t nbits)
{
  b->nbits = nbits;
  b->set = 0;
  b->w = calloc((size_t)((nbits + 63) / 64) + 1, sizeof *b->w);
  return b->w ? 0 : -ENOMEM;
}

static inline void
move_bitmap_free(struct move_bitmap *b)
{
  free(b->w);
  b->w = NULL;
  b->nbits = b->set = 0;
}

static inline bool
move_bitmap_test(const struct move_bitmap *b, uint64_t i)
{
  return i < b->nbits && (b->w[i / 64] >> (i % 64)) & 1;
}

static inline void
move_bitmap_set(struct move_bitmap *b, uint64_t i)
{
  if (i < b->nbits && !move_bitmap_test(b, i)) {
    b->w[i / 64] |= 1ull << (i % 64);
    b->set++;
  }
}

static inline void
move_bitmap_clear(struct move_bitmap *b, uint64_t i)
{
  if (move_bitmap_test(b, i)) {
    b->w[i / 64] &= ~(1ull << (i % 64));
    b->set--;
  }
}

/* The first set bit at or after i, or nbits. */
static inline uint64_t
move_bitmap_next(const struct move_bitmap *b, uint64_t i)
{
  while (i < b->nbits) {
    uint64_t word = b->w[i / 64] >> (i % 64);

    if (word)
      return i + (uint64_t)__builtin_ctzll(word) < b->nbits ?
             i + (uint64_t)__builtin_ctzll(word) : b->nbits;
    i = (i / 64 + 1) * 64;
  }
  return b->nbits;
}

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Inside the RWS tracker (rws.h).  Both trackers are one structure: a
 * linear-probing table of (key, access count) for the blocks whose key is
 * at most `limit`.  The key is a bijective 64-bit mix of the block number,
 * so it identifies the block and doubles as the uniform hash that sampling
 * needs.  Both grow the table as blocks come, up to their cap: the
 * exact tracker's is 2^31 slots, the sampled one's what its memory bound
 * affords.  At the cap the limit is lowered (SHARDS, fixed-size variant),
 * so the tracker follows the fraction (limit + 1) / 2^64 of the blocks.
 * Growing rather than allocating the cap at once keeps a quiet volume's
 * tracker at a few KiB: a host has hundreds of volumes. */
#ifndef FCACHE_ALLOC_RWS_PRIV_H
#define FCACHE_ALLOC_RWS_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rws.h"

/* One allocation: `slots` keys, then `slots` counts.  A count of 0 marks
 * an empty slot (a tracked block has been accessed at least once). */
struct rws_table {
  uint64_t *keys;
  uint8_t *counts;
  uint32_t slots;
  uint32_t used;
};

struct fc_rws {
  enum fc_rws_mode mode;
  uint64_t accesses;      /* all accesses of the window, sampled or not */
  uint64_t limit;         /* blocks whose key is above it are not tracked */
  uint32_t max_used;      /* the table takes no entry beyond this */
  uint32_t cap_slots;     /* the table grows no bigger */
  struct rws_table table;
};

#define RWS_COUNT_MAX 255u
#define RWS_BYTES_PER_SLOT (sizeof(uint64_t) + sizeof(uint8_t))

/* splitmix64's finaliser: a bijection of 64-bit integers whose every
 * output bit depends on every input bit, so sequential block numbers (a
 * scan) give keys spread uniformly over the whole range. */
static inline uint64_t
rws_key_of(uint64_t block)
{
  uint64_t z = block;

  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* rws_table.c */
int rws_table_init(struct rws_table *tb, uint32_t slots);
void rws_table_destroy(struct rws_table *tb);
/* The slot holding key, or the empty slot where it would go. */
uint32_t rws_table_find(const struct rws_table *tb, uint64_t key);
/* Take an empty slot found by rws_table_find. */
void rws_table_put(struct rws_table *tb, uint32_t slot, uint64_t key, uint8_t count);
/* Remove every entry whose key is above limit. */
void rws_table_drop_above(struct rws_table *tb, uint64_t limit);
/* Empty the table, keeping its slots. */
void rws_table_clear(struct rws_table *tb);
/* Move every entry of from into to (sized to hold them); frees from. */
void rws_table_move(struct rws_table *to, struct rws_table *from);

#define RWS_EXACT_MIN_SLOTS 1024u

/* rws_exact.c: the load the exact table grows at (and the sampled table's
 * entries bound, for the same probe lengths). */
uint32_t rws_max_used(uint32_t slots);
/* Make room for one more entry by growing the table (doubling, up to
 * cap_slots); false at the cap or when no memory. */
bool rws_exact_grow(struct fc_rws *t);
/* After a window of last_used blocks, emptied: give memory back when the
 * table is far above what such a window needs. */
void rws_exact_shrink(struct fc_rws *t, uint32_t last_used);

/* rws_sampled.c */
/* Slots a sampled tracker can afford within max_bytes; 0 when too few. */
uint32_t rws_sampled_slots(size_t max_bytes);
/* Make room by lowering the limit so that a small fraction of the entries
 * fall above it, and dropping them. */
void rws_sampled_evict(struct fc_rws *t);

#endif

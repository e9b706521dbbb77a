/* SPDX-License-Identifier: Apache-2.0 */
/* One slot of the cache's block table: what cache block n holds.
 *
 * The table is an array indexed by cblock, owned by the cache device; each
 * volume links the entries it owns into its own hash chains and LRU list
 * by cblock index rather than by pointer, which keeps an entry at 24
 * bytes (memory per cached block is a published figure).
 */
#ifndef FCACHE_ENTRY_H
#define FCACHE_ENTRY_H

#include <stdint.h>
#include "types.h"

enum {
  FC_ENTRY_VALID = 1u << 0,  /* data in the cache block is usable */
  FC_ENTRY_DIRTY = 1u << 1,  /* newer than origin (write_back only) */
  FC_ENTRY_BUSY = 1u << 2,   /* a request is reading/writing it: never evict */
  FC_ENTRY_ALLOCATED = 1u << 3, /* owned by a volume (possibly not yet mapped) */
};

struct fc_entry {
  uint64_t oblock;
  uint32_t hash_next;
  uint32_t lru_prev;
  uint32_t lru_next;
  uint32_t flags;
};

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The invalidation filter's table (FirepanIF, Algorithm 1): the set of
 * origin blocks the VM wrote while cache blocks were still arriving from
 * the source.  A copy that arrives for such a block is stale and must be
 * discarded; a cached copy of it must be dropped.
 *
 * A hash table with separate chaining, as in the paper, with chain nodes
 * taken from a growing pool so that an insert is O(1) and never frees.
 * Not thread-safe: the owner's lock protects it.
 */
#ifndef FCACHE_INVFILTER_H
#define FCACHE_INVFILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "types.h"

struct fc_invfilter {
  uint32_t *chains;        /* node index + 1 of each chain's head; 0 = empty */
  uint32_t mask;
  uint32_t shift;          /* 64 - log2(number of chains) */
  struct fc_if_node { uint64_t oblock; uint32_t next; uint32_t pad; } *nodes;
  uint32_t nr_nodes, cap_nodes;
  uint32_t free_head;      /* node index + 1; removed nodes are reused */
  uint32_t count;
};

int fc_invfilter_init(struct fc_invfilter *f, uint32_t expected);
void fc_invfilter_destroy(struct fc_invfilter *f);
/* 1 if newly added, 0 if already present, -ENOMEM. */
int fc_invfilter_add(struct fc_invfilter *f, oblock_t ob);
bool fc_invfilter_contains(const struct fc_invfilter *f, oblock_t ob);
/* true if it was present. */
bool fc_invfilter_remove(struct fc_invfilter *f, oblock_t ob);
void fc_invfilter_clear(struct fc_invfilter *f);
/* Calls fn for every member (order unspecified). */
void fc_invfilter_for_each(const struct fc_invfilter *f,
                           void (*fn)(void *opaque, oblock_t ob), void *opaque);
size_t fc_invfilter_memory(const struct fc_invfilter *f);

#endif

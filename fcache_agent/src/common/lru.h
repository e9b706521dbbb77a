/* SPDX-License-Identifier: Apache-2.0 */
/* Least-recently-used order of one volume's cache blocks: an intrusive
 * doubly linked list threaded through the block table by cblock index.
 * head is the most recently used block, tail the eviction candidate.
 * Not thread-safe: the owning volume's lock protects it. */
#ifndef FCACHE_LRU_H
#define FCACHE_LRU_H

#include <stdint.h>
#include "entry.h"

struct fc_lru {
  uint32_t head;
  uint32_t tail;
  uint32_t count;
};

void fc_lru_init(struct fc_lru *lru);
void fc_lru_push_head(struct fc_lru *lru, struct fc_entry *table, cblock_t cb);
void fc_lru_push_tail(struct fc_lru *lru, struct fc_entry *table, cblock_t cb);
/* Link cb just below (colder than) the linked block after. */
void fc_lru_insert_after(struct fc_lru *lru, struct fc_entry *table,
                         cblock_t after, cblock_t cb);
void fc_lru_remove(struct fc_lru *lru, struct fc_entry *table, cblock_t cb);
/* Move an already linked block to the head (a hit). */
void fc_lru_touch(struct fc_lru *lru, struct fc_entry *table, cblock_t cb);

/* Visit every linked block once, walking in from both ends at the same
 * time until they meet: visit(ctx, cb, rank) with rank its place from the
 * head (0 = most recently used).  Blocks come in no useful order, but the
 * walk is a chase of links through a table far larger than the CPU's
 * caches, and two chases at once keep two misses in flight instead of
 * one: less than half the time of a walk from the head on a 2-vCPU VM
 * (doc/reference/migration.rst), under a lock every request of the volume waits
 * for.  visit must not change the list. */
typedef void (*fc_lru_visit_fn)(void *ctx, uint32_t cb, uint32_t rank);
void fc_lru_walk_both_ends(const struct fc_lru *lru, const struct fc_entry *table,
                           fc_lru_visit_fn visit, void *ctx);

#endif

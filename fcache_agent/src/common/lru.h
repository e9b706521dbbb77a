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

#endif

/* SPDX-License-Identifier: Apache-2.0 */
#include "lru.h"

void
fc_lru_init(struct fc_lru *lru)
{
  lru->head = lru->tail = CBLOCK_NONE;
  lru->count = 0;
}

void
fc_lru_push_head(struct fc_lru *lru, struct fc_entry *table, cblock_t cb)
{
  struct fc_entry *e = &table[cb.n];

  e->lru_prev = CBLOCK_NONE;
  e->lru_next = lru->head;
  if (lru->head != CBLOCK_NONE)
    table[lru->head].lru_prev = cb.n;
  else
    lru->tail = cb.n;
  lru->head = cb.n;
  lru->count++;
}

void
fc_lru_push_tail(struct fc_lru *lru, struct fc_entry *table, cblock_t cb)
{
  struct fc_entry *e = &table[cb.n];

  e->lru_next = CBLOCK_NONE;
  e->lru_prev = lru->tail;
  if (lru->tail != CBLOCK_NONE)
    table[lru->tail].lru_next = cb.n;
  else
    lru->head = cb.n;
  lru->tail = cb.n;
  lru->count++;
}

void
fc_lru_insert_after(struct fc_lru *lru, struct fc_entry *table, cblock_t after,
                    cblock_t cb)
{
  struct fc_entry *a = &table[after.n], *e = &table[cb.n];

  e->lru_prev = after.n;
  e->lru_next = a->lru_next;
  if (a->lru_next != CBLOCK_NONE)
    table[a->lru_next].lru_prev = cb.n;
  else
    lru->tail = cb.n;
  a->lru_next = cb.n;
  lru->count++;
}

void
fc_lru_remove(struct fc_lru *lru, struct fc_entry *table, cblock_t cb)
{
  struct fc_entry *e = &table[cb.n];

  if (e->lru_prev != CBLOCK_NONE)
    table[e->lru_prev].lru_next = e->lru_next;
  else
    lru->head = e->lru_next;
  if (e->lru_next != CBLOCK_NONE)
    table[e->lru_next].lru_prev = e->lru_prev;
  else
    lru->tail = e->lru_prev;
  e->lru_prev = e->lru_next = CBLOCK_NONE;
  lru->count--;
}

void
fc_lru_touch(struct fc_lru *lru, struct fc_entry *table, cblock_t cb)
{
  if (lru->head == cb.n)
    return;
  fc_lru_remove(lru, table, cb);
  fc_lru_push_head(lru, table, cb);
}

void
fc_lru_walk_both_ends(const struct fc_lru *lru, const struct fc_entry *table,
                      fc_lru_visit_fn visit, void *ctx)
{
  uint32_t hot = lru->head, cold = lru->tail;
  uint32_t hot_rank = 0, cold_rank = lru->count - 1;

  while (hot != CBLOCK_NONE) {
    visit(ctx, hot, hot_rank++);
    if (hot == cold)
      break;
    visit(ctx, cold, cold_rank--);
    hot = table[hot].lru_next;
    if (hot == cold)
      break;
    cold = table[cold].lru_prev;
  }
}

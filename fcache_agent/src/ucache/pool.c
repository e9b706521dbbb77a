/* SPDX-License-Identifier: Apache-2.0 */
/* Where a block to fill comes from when it is not a free one of the
 * device: the least recently used clean block of a volume, its own, or,
 * for a volume under its share on a full device, one of the member of its
 * pool (the volumes sharing the device) most over its share.  Below
 * the install path (blocks.c), which asks for a block, and calls nothing
 * of the cache's but the metadata records. */
#include <errno.h>
#include <stdlib.h>

#include "alloc/victim.h"
#include "common/lockcheck.h"
#include "ucache_priv.h"

struct fc_ucache_pool {
  pthread_mutex_t lock;
  struct fc_ucache *members[FC_UCACHE_POOL_MAX];
  unsigned n;
  /* Under lock: the rule's state (where a tie starts) and its scratch,
   * the members as last seen, here rather than on a request's stack. */
  struct fc_victim_cursor cursor;
  struct fc_victim_cand cand[FC_UCACHE_POOL_MAX];
};

struct fc_ucache_pool *
fc_ucache_pool_new(void)
{
  struct fc_ucache_pool *pool = calloc(1, sizeof *pool);

  if (pool)
    pthread_mutex_init(&pool->lock, NULL);
  return pool;
}

void
fc_ucache_pool_free(struct fc_ucache_pool *pool)
{
  if (!pool)
    return;
  pthread_mutex_destroy(&pool->lock);
  free(pool);
}

int
fc_ucache_pool_add(struct fc_ucache_pool *pool, struct fc_ucache *uc)
{
  int r = -EMFILE;

  pthread_mutex_lock(&pool->lock);
  if (pool->n < FC_UCACHE_POOL_MAX) {
    pool->members[pool->n++] = uc;
    r = 0;
  }
  pthread_mutex_unlock(&pool->lock);
  return r;
}

void
fc_ucache_pool_remove(struct fc_ucache_pool *pool, struct fc_ucache *uc)
{
  pthread_mutex_lock(&pool->lock);
  for (unsigned i = 0; i < pool->n; i++)
    if (pool->members[i] == uc) {
      pool->members[i] = pool->members[--pool->n];
      break;
    }
  pthread_mutex_unlock(&pool->lock);
}

/* The victim is chosen by alloc/victim (the volume most over its share,
 * the rule fcache-replay simulates) from the members as seen a moment
 * ago: each member's lock is only tried, held just long enough to read
 * its counts, never two at once.  The chosen one is locked again (tried)
 * and asked again before a block is taken, since its counts may have
 * moved; a member that is busy, no longer over its share or has no clean
 * block to give is skipped and the next best tried.  Cost per take: one
 * trylock per member and one more per candidate tried, O(members). */
int
uc_take_from_pool_locked(struct fc_ucache *uc, cblock_t *out)
{
  FC_ASSERT_HELD(&uc->lock);
  struct fc_ucache_pool *pool = uc->p.pool;
  size_t i;
  int r = -ENOSPC;

  if (!pool)
    return r;
  pthread_mutex_lock(&pool->lock);
  for (unsigned k = 0; k < pool->n; k++) {
    struct fc_ucache *m = pool->members[k];
    struct fc_victim_cand *c = &pool->cand[k];

    /* Only tried: the member may be taking from us at this moment, and
     * one miss served by the origin is cheaper than a lock order. */
    c->skip = m == uc || pthread_mutex_trylock(&m->lock);
    if (c->skip)
      continue;
    c->used = m->used;
    c->share = m->share;
    pthread_mutex_unlock(&m->lock);
  }
  while (r && fc_victim_pick(pool->cand, pool->n, false, &pool->cursor, &i) == 0) {
    struct fc_ucache *victim = pool->members[i];

    pool->cand[i].skip = true;  /* whatever happens, not asked twice */
    if (pthread_mutex_trylock(&victim->lock))
      continue;
    struct fc_victim_cand now = { .used = victim->used, .share = victim->share };
    if (fc_victim_may_give(&now, false)) {
      r = uc_evict_clean_locked(victim, out);
      if (r == 0)
        victim->given++;
    }
    pthread_mutex_unlock(&victim->lock);
  }
  pthread_mutex_unlock(&pool->lock);
  return r;
}

int
uc_evict_clean_locked(struct fc_ucache *uc, cblock_t *out)
{
  FC_ASSERT_HELD(&uc->lock);
  struct fc_entry *table = uc->dev->table;
  uint32_t i = uc->lru.tail;

  for (unsigned scanned = 0; i != CBLOCK_NONE && scanned < FC_EVICT_SCAN;
       scanned++, i = table[i].lru_prev) {
    /* ON_DISK_DIRTY: just written back, its clean record not synced yet
     * (the write-back pass does that in a moment). */
    if (table[i].flags & (FC_ENTRY_BUSY | FC_ENTRY_DIRTY | FC_ENTRY_ON_DISK_DIRTY))
      continue;
    /* The record goes before the block leaves the map: no block ever
     * holds other data than its record names (metadata.h). */
    if (fc_md_forget(uc->md, to_cblock(i)))
      continue;
    fc_blockmap_remove(&uc->map, table, to_cblock(i));
    fc_lru_remove(&uc->lru, table, to_cblock(i));
    table[i].flags = FC_ENTRY_ALLOCATED;
    uc->used--;
    STAT_ADD(&uc->stats, evictions, 1);
    *out = to_cblock(i);
    return 0;
  }
  return -ENOSPC;
}

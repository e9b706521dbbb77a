/* SPDX-License-Identifier: Apache-2.0 */
/* The user-space cache as a whole: create and destroy it, adopt the blocks
 * recovery found and release them all, and report its counts.  The top of
 * the cache's files, not the home of its API: ucache.h, which every file
 * implements part of, and ucache_priv.h, its structure, are below them
 * all.  The stripe locks are in stripes.c, a block's install in blocks.c
 * and eviction in pool.c, the request paths in ucache_read.c and
 * ucache_write.c (their table in ucache_ops.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/lockcheck.h"
#include "common/log.h"
#include "ucache_layer.h"

/* uc->lock is taken twice per request by every connection's reader, for a
 * lookup and a few list updates: a waiter that spins that long instead of
 * sleeping spares its holder the futex wake-up, the largest cost of the
 * contended lock on the hit path (perf, doc/research/benchmarks.rst). */
static void
init_adaptive_mutex(pthread_mutex_t *mutex)
{
  pthread_mutexattr_t attr;

  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
  pthread_mutex_init(mutex, &attr);
  pthread_mutexattr_destroy(&attr);
}

int
fc_ucache_create(struct fc_cachedev *dev, struct fc_metadata *md,
                 struct fc_origin *origin, const struct fc_ucache_params *params,
                 struct fc_ucache **out)
{
  struct fc_ucache *uc;
  int r;

  if (params->quota_blocks == 0 || params->share_blocks > params->quota_blocks)
    return -EINVAL;
  uc = calloc(1, sizeof *uc);
  if (!uc)
    return -ENOMEM;
  uc->dev = dev;
  uc->md = md;
  uc->origin = origin;
  uc->p = *params;
  uc->bs = dev->block_size;
  uc->nr_oblocks = (origin->size + uc->bs - 1) / uc->bs;
  uc->share = params->share_blocks ? params->share_blocks : params->quota_blocks;
  fc_lru_init(&uc->lru);
  r = uc_layer_init(uc);
  if (r)
    goto out;
  r = fc_blockmap_init(&uc->map, params->quota_blocks);
  if (r)
    goto out;
  r = fc_rws_new(params->rws_mode, UC_RWS_MAX_BYTES, &uc->rws);
  if (r)
    goto out;
  if (params->admission == FC_ADMIT_RWS) {
    r = fc_staging_new(params->staging, uc_staging_area(uc, uc->share), uc->bs,
                       params->rws_n ? params->rws_n : 1, &uc->stage);
    if (r)
      goto out;
    r = fc_staging_set_history(uc->stage, uc_history_blocks(uc, uc->share));
    if (r)
      goto out;
  }
  init_adaptive_mutex(&uc->lock);
  pthread_cond_init(&uc->wb_cond, NULL);
  pthread_mutex_init(&uc->durable_lock, NULL);
  pthread_cond_init(&uc->around_cond, NULL);
  pthread_cond_init(&uc->pause_cond, NULL);
  for (unsigned i = 0; i < FC_STRIPES; i++)
    pthread_mutex_init(&uc->stripes[i], NULL);
  if (params->pool && (r = fc_ucache_pool_add(params->pool, uc))) {
    uc->p.pool = NULL;
    fc_ucache_destroy(uc);
    return r;
  }
  *out = uc;
  return 0;

out:
  uc_layer_destroy(uc);
  fc_blockmap_destroy(&uc->map);
  fc_staging_free(uc->stage);
  fc_rws_free(uc->rws);
  free(uc);
  return r;
}

void
fc_ucache_destroy(struct fc_ucache *uc)
{
  if (!uc)
    return;
  /* Out of the pool first: nobody may take a block from it from now on. */
  if (uc->p.pool)
    fc_ucache_pool_remove(uc->p.pool, uc);
  fc_ucache_stop(uc);
  uc_layer_destroy(uc);
  pthread_mutex_destroy(&uc->durable_lock);
  uc_unsynced_free(uc);
  /* Held dropped blocks: after a sync they are free; without one they
   * stay allocated in memory, and the next start frees them (their
   * records are clear). */
  (void)uc_settle_dropped(uc);
  free(uc->settling);
  pthread_cond_destroy(&uc->around_cond);
  pthread_cond_destroy(&uc->pause_cond);
  fc_blockmap_destroy(&uc->map);
  fc_staging_free(uc->stage);
  fc_rws_free(uc->rws);
  fc_wknee_free(uc->wknee);
  for (unsigned i = 0; i < FC_STRIPES; i++)
    pthread_mutex_destroy(&uc->stripes[i]);
  pthread_cond_destroy(&uc->wb_cond);
  pthread_mutex_destroy(&uc->lock);
  free(uc);
}

int
fc_ucache_adopt(struct fc_ucache *uc, cblock_t cb, oblock_t ob, bool dirty)
{
  struct fc_entry *e = &uc->dev->table[cb.n];

  if (ob.n >= uc->nr_oblocks)
    return -EINVAL;
  if (uc->used >= uc->p.quota_blocks)
    return -ENOSPC;
  if (fc_blockmap_lookup(&uc->map, uc->dev->table, ob).n != CBLOCK_NONE)
    return -EEXIST;
  e->oblock = ob.n;
  /* Recovery rewrote a dirty record FC_MD_SYNCED (recovery.c). */
  e->flags = FC_ENTRY_ALLOCATED | FC_ENTRY_VALID |
             (dirty ? FC_ENTRY_DIRTY | FC_ENTRY_ON_DISK_DIRTY : 0);
  fc_blockmap_insert(&uc->map, uc->dev->table, cb);
  fc_lru_push_head(&uc->lru, uc->dev->table, cb);
  uc->used++;
  if (dirty)
    uc->nr_dirty++;
  return 0;
}

/* Under uc->lock: unmap on disk, then drop, n blocks in descending device
 * order; stops before dropping any if their records cannot be cleared. */
static int
release_batch_locked(struct fc_ucache *uc, const cblock_t *desc, uint32_t n)
{
  FC_ASSERT_HELD(&uc->lock);
  int r = uc_forget_many_locked(uc, desc, n);

  for (uint32_t i = 0; i < n && !r; i++)
    uc_drop_forgotten_locked(uc, desc[i], 0);
  return r;
}

int
fc_ucache_release(struct fc_ucache *uc)
{
  cblock_t batch[UC_DROP_BATCH];
  uint64_t *mark = NULL;
  uint32_t words, k = 0;
  int r = 0;

  pthread_mutex_lock(&uc->lock);
  if (uc->nr_dirty) {
    r = -EBUSY;
    goto out;
  }
  /* From the device's end down: the free list hands the blocks out again
   * from its start up, in runs the next volume can write with one call
   * each (in LRU order they come back scattered). */
  if (!(mark = uc_device_bitmap_locked(uc, NULL, &words))) {
    r = -ENOMEM;
    goto out;
  }
  for (uint32_t w = words; w-- > 0 && !r;) {
    for (uint64_t bits = mark[w]; bits && !r;) {
      uint32_t top = 63 - (uint32_t)__builtin_clzll(bits);

      bits &= ~(1ull << top);
      batch[k++] = to_cblock(w * 64 + top);
      if (k == UC_DROP_BATCH) {
        r = release_batch_locked(uc, batch, k);
        k = 0;
      }
    }
  }
  if (!r)
    r = release_batch_locked(uc, batch, k);
out:
  free(mark);
  pthread_mutex_unlock(&uc->lock);
  if (!r)
    r = uc_sync_records(uc);
  return r;
}

void
fc_ucache_dump_records(struct fc_ucache *uc, struct fc_md_record *recs)
{
  const struct fc_entry *table = uc->dev->table;
  uint32_t rank = 0;

  pthread_mutex_lock(&uc->lock);
  for (uint32_t i = uc->lru.head; i != CBLOCK_NONE; i = table[i].lru_next) {
    struct fc_md_record *rec = &recs[i];

    memset(rec, 0, sizeof *rec);
    rec->oblock = table[i].oblock;
    rec->volume_tag = uc->p.volume_tag;
    /* The caller synced the cache file first (ucache_engine_ops.c). */
    rec->flags = FC_MD_VALID |
                 (table[i].flags & FC_ENTRY_DIRTY ? FC_MD_DIRTY | FC_MD_SYNCED : 0);
    rec->lru_rank = rank++;
  }
  pthread_mutex_unlock(&uc->lock);
}

int
fc_ucache_grow(struct fc_ucache *uc, uint64_t size)
{
  int r = 0;

  pthread_mutex_lock(&uc->lock);
  if (uc->origin->size % uc->bs)
    r = -EOPNOTSUPP;
  else if (size < uc->origin->size)
    r = -EINVAL;
  /* Readers outside the lock see the old values or the new: both bound
   * every block they can meet, since nothing addresses past the old end
   * until the export grows, after this. */
  if (!r) {
    uc->origin->size = size;
    uc->nr_oblocks = (size + uc->bs - 1) / uc->bs;
  }
  pthread_mutex_unlock(&uc->lock);
  return r;
}

void
fc_ucache_info(struct fc_ucache *uc, struct fc_ucache_info *info)
{
  pthread_mutex_lock(&uc->lock);
  info->block_size = uc->bs;
  info->size = uc->origin->size;
  info->quota_blocks = uc->p.quota_blocks;
  info->cached_blocks = uc->map.count;
  info->dirty_blocks = uc->nr_dirty;
  info->writeback_held = uc->wb_held;
  info->memory_bytes = sizeof *uc + fc_blockmap_memory(&uc->map) + fc_rws_memory(uc->rws);
  if (uc->stage) {
    struct fc_staging_stats st;

    fc_staging_get_stats(uc->stage, &st);
    info->memory_bytes += st.area_bytes + st.history_bytes;
  }
  pthread_mutex_unlock(&uc->lock);
}

uint32_t
fc_ucache_dirty(struct fc_ucache *uc)
{
  uint32_t n;

  pthread_mutex_lock(&uc->lock);
  n = uc->nr_dirty;
  pthread_mutex_unlock(&uc->lock);
  return n;
}

struct fc_stats *
fc_ucache_stats(struct fc_ucache *uc)
{
  return &uc->stats;
}

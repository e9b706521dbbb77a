/* SPDX-License-Identifier: Apache-2.0 */
/* On-demand allocation inside one host's cache (CloudCache §4.3): each
 * volume's demand window, its share, the staging area that goes with it,
 * and the replacement-time enforcement that lets a volume under its share
 * take a clean block from one above it.  What the shares are is decided
 * above, by the engine's allocator (allocator.c); here they are obeyed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ucache_priv.h"
#include "common/lockcheck.h"

/* A staging area under this holds too few entries to see any reuse; its
 * memory is nothing next to the cache it guards. */
#define STAGING_AREA_MIN (64u << 10)

struct fc_ucache_pool {
  pthread_mutex_t lock;
  struct fc_ucache *members[FC_UCACHE_POOL_MAX];
  unsigned n;
  unsigned cursor;        /* where the next search for a victim starts */
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

int
uc_take_from_pool_locked(struct fc_ucache *uc, cblock_t *out)
{
  FC_ASSERT_HELD(&uc->lock);
  struct fc_ucache_pool *pool = uc->p.pool;
  int r = -ENOSPC;

  if (!pool)
    return r;
  pthread_mutex_lock(&pool->lock);
  for (unsigned k = 0; k < pool->n && r; k++) {
    unsigned i = (pool->cursor + k) % pool->n;
    struct fc_ucache *victim = pool->members[i];

    /* Only tried: the victim may be taking from us at this moment, and
     * one miss served by the origin is cheaper than a lock order. */
    if (victim == uc || pthread_mutex_trylock(&victim->lock))
      continue;
    if (victim->used > victim->share) {
      r = uc_evict_clean_locked(victim, out);
      if (r == 0) {
        victim->given++;
        pool->cursor = i + 1;
      }
    }
    pthread_mutex_unlock(&victim->lock);
  }
  pthread_mutex_unlock(&pool->lock);
  return r;
}

size_t
uc_staging_area(const struct fc_ucache *uc, uint32_t share_blocks)
{
  double area = uc->p.staging_fraction * (double)share_blocks * uc->bs;

  return area < STAGING_AREA_MIN ? STAGING_AREA_MIN : (size_t)area;
}

uint32_t
uc_history_blocks(const struct fc_ucache *uc, uint32_t share_blocks)
{
  /* A reused set as large as the share must still be seen reused; a
   * volume smaller than its share has no more blocks to remember.  Never
   * 0, which would drop the history: a share of 0 (no reuse predicted)
   * keeps the smallest one, so reuse that comes back is still seen. */
  uint64_t n = uc->nr_oblocks < share_blocks ? uc->nr_oblocks : share_blocks;

  return n ? (uint32_t)n : 1;
}

void
uc_track_access_locked(struct fc_ucache *uc, uint64_t first, uint32_t n)
{
  FC_ASSERT_HELD(&uc->lock);
  for (uint32_t i = 0; i < n && first + i < uc->nr_oblocks; i++)
    fc_rws_access(uc->rws, first + i);
}

void
uc_stage_forget_locked(struct fc_ucache *uc, uint64_t first, uint64_t n)
{
  FC_ASSERT_HELD(&uc->lock);
  if (uc->stage)
    fc_staging_invalidate(uc->stage, first, n);
}

bool
uc_stage_read(struct fc_ucache *uc, oblock_t ob, void *data)
{
  bool served, admit = false;

  pthread_mutex_lock(&uc->lock);
  /* During a migration the staged copies are not kept current by its
   * installs: they are neither made nor used then. */
  served = !atomic_load(&uc->m.on) && fc_staging_read_data(uc->stage, ob.n, data);
  if (served)
    admit = fc_staging_access(uc->stage, ob.n, false);
  pthread_mutex_unlock(&uc->lock);
  if (!served)
    return false;
  STAT_ADD(&uc->stats, staging_hits, 1);
  /* Reused enough: it enters the cache now, with the data that was
   * staged, which is what the origin holds (a writer would have dropped
   * it).  A failed install only costs a future miss. */
  if (admit)
    (void)uc_install_admitted(uc, ob, data);
  return true;
}

void
fc_ucache_close_window(struct fc_ucache *uc, struct fc_rws_sizes *out)
{
  pthread_mutex_lock(&uc->lock);
  fc_rws_close_window(uc->rws, out);
  uc->reuse_epoch++;            /* every cached block's reuses start again */
  if (uc->stage)
    fc_staging_end_window(uc->stage);
  pthread_mutex_unlock(&uc->lock);
}

void
fc_ucache_set_share(struct fc_ucache *uc, uint32_t share_blocks)
{
  if (share_blocks > uc->p.quota_blocks)
    share_blocks = uc->p.quota_blocks;
  pthread_mutex_lock(&uc->lock);
  uc->share = share_blocks;
  if (uc->stage) {
    fc_staging_resize(uc->stage, uc_staging_area(uc, share_blocks));
    /* Out of memory, the history keeps its old size (or none). */
    (void)fc_staging_set_history(uc->stage, uc_history_blocks(uc, share_blocks));
  }
  pthread_mutex_unlock(&uc->lock);
}

void
fc_ucache_alloc_info(struct fc_ucache *uc, struct fc_ucache_alloc_info *info)
{
  memset(info, 0, sizeof *info);
  pthread_mutex_lock(&uc->lock);
  info->share_blocks = uc->share;
  info->used_blocks = uc->used;
  info->quota_blocks = uc->p.quota_blocks;
  info->staging = uc->stage != NULL;
  if (uc->stage)
    fc_staging_get_stats(uc->stage, &info->st);
  info->taken = uc->taken;
  info->given = uc->given;
  info->rws_memory = fc_rws_memory(uc->rws);
  info->rws_sample_rate = fc_rws_sample_rate(uc->rws);
  pthread_mutex_unlock(&uc->lock);
  info->staging_hits = STAT_GET(&uc->stats, staging_hits);
}

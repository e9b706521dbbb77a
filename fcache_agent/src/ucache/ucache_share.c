/* SPDX-License-Identifier: Apache-2.0 */
/* On-demand allocation inside one host's cache (CloudCache §4.3): each
 * volume's demand window, its share and the staging area that goes with
 * it.  What the shares are is decided above, by the engine's allocator
 * (allocator.c); here they are obeyed, and the replacement-time
 * enforcement that lets a volume under its share take a clean block from
 * one above it is pool.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ucache_layer.h"
#include "common/clock.h"
#include "common/lockcheck.h"

/* A staging area under this holds too few entries to see any reuse; its
 * memory is nothing next to the cache it guards. */
#define STAGING_AREA_MIN (64u << 10)

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
  uint64_t now_ms = uc->wknee ? fc_now_ms() : 0;

  for (uint32_t i = 0; i < n && first + i < uc->nr_oblocks; i++) {
    fc_rws_access(uc->rws, first + i);
    if (uc->wknee)
      fc_wknee_access(uc->wknee, first + i, now_ms);
  }
}

int
fc_ucache_follow_reuse(struct fc_ucache *uc, uint32_t longest_s)
{
  struct fc_wknee *w;
  int r = fc_wknee_new(longest_s, &w);

  if (r)
    return r;
  pthread_mutex_lock(&uc->lock);
  if (uc->wknee) {
    fc_wknee_free(w);
    r = -EEXIST;
  } else {
    uc->wknee = w;
  }
  pthread_mutex_unlock(&uc->lock);
  return r;
}

int
fc_ucache_knee_window(struct fc_ucache *uc, uint32_t min_s, uint32_t max_s,
                      uint32_t *window_s)
{
  int r = -ENOENT;

  pthread_mutex_lock(&uc->lock);
  if (uc->wknee)
    r = fc_wknee_choose(uc->wknee, min_s, max_s, fc_now_ms(), window_s);
  pthread_mutex_unlock(&uc->lock);
  return r;
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
  served = !uc_layer_on(uc) && fc_staging_read_data(uc->stage, ob.n, data);
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
  info->knee_memory = uc->wknee ? fc_wknee_memory(uc->wknee) : 0;
  pthread_mutex_unlock(&uc->lock);
  info->staging_hits = STAT_GET(&uc->stats, staging_hits);
}

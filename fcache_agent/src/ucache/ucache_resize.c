/* SPDX-License-Identifier: Apache-2.0 */
/* Changing a serving cache's size (volume-set --cache-size), with its
 * VM's I/O going on and nothing lost.
 *
 * The quota (uc->p.quota_blocks) is only an upper bound on the blocks the
 * volume takes from the shared device as it needs them (blocks.c), so
 * growing is raising it.  Shrinking lowers it first, under uc->lock, so
 * that from then on the volume replaces its own blocks instead of taking
 * more (its share is at most the quota), then gives blocks back to the
 * device until it holds no more than the new quota:
 *
 *   - clean blocks are evicted from the cold end (uc_evict_clean_locked:
 *     the record is cleared before the block leaves the map), a few
 *     hundred per hold of uc->lock;
 *   - when what is left at the cold end is dirty, a write-back pass
 *     (writeback.c) writes dirty blocks to the origin and flushes it, and
 *     their clean records are synced; they are evicted on the next round.
 *     A dirty block is never evicted: it leaves only once clean.
 *
 * The VM's reads and writes go on meanwhile: they replace the volume's
 * own blocks, which keeps its count from growing.  The evicted blocks go
 * back to the device once the metadata file is synced (a block whose
 * record might still name it on disk must not take another volume's
 * data).  If the origin fails a write-back, or the cold end stays in the
 * VM's hands for seconds, the old quota comes back: the blocks evicted
 * so far were clean (the origin has their data), the dirty ones are
 * still cached and dirty, nothing is lost. */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "common/lockcheck.h"
#include "common/log.h"
#include "ucache_priv.h"

/* Blocks evicted per hold of uc->lock: the VM's lookups wait for one
 * batch at most. */
#define RESIZE_EVICT_BATCH 256u
/* Blocks per write-back pass when the cold end is dirty. */
#define RESIZE_PASS_BLOCKS 256u
/* Rounds that neither evict nor write back anything (every block at the
 * cold end is in a request's hands) before the shrink gives up, 1 ms
 * apart. */
#define RESIZE_IDLE_TRIES 2000u

/* Under uc->lock: the share follows the quota (a share that was the
 * whole quota stays so: allocation = fixed), and never exceeds it.  The
 * map's buckets were sized for the quota at attach: a larger one gets
 * buckets to match, so that its chains stay short (without memory it
 * keeps the old ones, longer chains but correct). */
static void
set_quota_locked(struct fc_ucache *uc, uint32_t old, uint32_t quota)
{
  FC_ASSERT_HELD(&uc->lock);
  if (quota > uc->map.mask + 1 &&
      fc_blockmap_resize(&uc->map, uc->dev->table, quota))
    log_warning("volume %s: no memory for a larger block map; lookups in "
                "the grown cache walk longer chains", uc_volume(uc));
  uc->p.quota_blocks = quota;
  if (uc->share == old || uc->share > quota)
    uc->share = quota;
  if (uc->stage)
    fc_staging_resize(uc->stage, uc_staging_area(uc, uc->share));
}

/* Evict up to RESIZE_EVICT_BATCH clean blocks while the volume holds more
 * than quota; their numbers are appended to out. */
static uint32_t
evict_round(struct fc_ucache *uc, uint32_t quota, uint32_t *out, uint32_t room)
{
  uint32_t n = 0;
  cblock_t cb;

  pthread_mutex_lock(&uc->lock);
  while (uc->used > quota && n < room && n < RESIZE_EVICT_BATCH &&
         uc_evict_clean_locked(uc, &cb) == 0)
    out[n++] = cb.n;
  pthread_mutex_unlock(&uc->lock);
  return n;
}

static uint32_t
used_now(struct fc_ucache *uc)
{
  uint32_t n;

  pthread_mutex_lock(&uc->lock);
  n = uc->used;
  pthread_mutex_unlock(&uc->lock);
  return n;
}

/* Give the evicted blocks back to the device: their cleared records are
 * synced first.  A sync that fails keeps them out of use (leaked until
 * the agent restarts, not reused under a stale record). */
static int
give_back(struct fc_ucache *uc, const uint32_t *cbs, uint32_t n)
{
  int r;

  if (!n)
    return 0;
  r = uc_sync_records(uc);
  if (r) {
    log_error("volume %s: cannot sync the cache metadata (%d): %u evicted "
              "blocks stay out of use until the agent restarts", uc_volume(uc),
              r, n);
    return r;
  }
  for (uint32_t i = 0; i < n; i++)
    fc_cachedev_free(uc->dev, to_cblock(cbs[i]));
  return 0;
}

static int
shrink(struct fc_ucache *uc, uint32_t quota, uint32_t *written,
       uint32_t *evicted)
{
  uint32_t room = used_now(uc) > quota ? used_now(uc) - quota : 0;
  uint32_t *cbs = NULL, n = 0;
  unsigned idle = 0;
  int r = 0;

  /* The VM's misses may add blocks in flight beyond the count read here:
   * the array grows with need. */
  room += RESIZE_EVICT_BATCH;
  if (!(cbs = malloc((size_t)room * sizeof *cbs)))
    return -ENOMEM;
  while (!r && used_now(uc) > quota) {
    uint32_t got, done = 0;

    if (room - n < RESIZE_EVICT_BATCH) {
      uint32_t *more = realloc(cbs, (size_t)(room + RESIZE_EVICT_BATCH * 4u) *
                                    sizeof *cbs);
      if (!more) {
        r = -ENOMEM;
        break;
      }
      cbs = more;
      room += RESIZE_EVICT_BATCH * 4u;
    }
    got = evict_round(uc, quota, cbs + n, room - n);
    n += got;
    if (got) {
      idle = 0;
      continue;
    }
    /* Nothing clean at the cold end: write dirty blocks back (the pass
     * syncs their clean records, so they are evictable next round). */
    r = uc_writeback_pass(uc, RESIZE_PASS_BLOCKS, &done);
    *written += done;
    if (r)
      break;
    if (!done) {
      if (++idle > RESIZE_IDLE_TRIES)
        r = -EAGAIN;
      else
        nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
    }
  }
  *evicted = n;
  {
    int gr = give_back(uc, cbs, n);

    if (!r)
      r = gr;
  }
  free(cbs);
  return r;
}

int
fc_ucache_resize(struct fc_ucache *uc, uint32_t quota_blocks, uint32_t *written,
                 uint32_t *evicted)
{
  uint32_t old;
  int r = 0;

  *written = *evicted = 0;
  if (quota_blocks == 0)
    return -EINVAL;
  pthread_mutex_lock(&uc->lock);
  old = uc->p.quota_blocks;
  /* Held dirty blocks may be older than the origin (ucache.h): a shrink
   * that has to write them back is for whoever claims the volume. */
  if (quota_blocks < old && uc->wb_held && uc->nr_dirty &&
      uc->used > quota_blocks) {
    pthread_mutex_unlock(&uc->lock);
    return -EBUSY;
  }
  set_quota_locked(uc, old, quota_blocks);
  pthread_mutex_unlock(&uc->lock);
  if (quota_blocks >= old)
    return 0;

  r = shrink(uc, quota_blocks, written, evicted);
  if (r) {
    pthread_mutex_lock(&uc->lock);
    set_quota_locked(uc, quota_blocks, old);
    pthread_mutex_unlock(&uc->lock);
    log_error("volume %s: cache shrink to %u blocks failed (%d): back to %u "
              "blocks; %u clean blocks evicted, %u written back, nothing lost",
              uc_volume(uc), quota_blocks, r, old, *evicted, *written);
  }
  return r;
}

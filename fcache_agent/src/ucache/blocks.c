/* SPDX-License-Identifier: Apache-2.0 */
/* One cached block's life: looked up, allocated (evicting a clean idle
 * block when the quota is used), installed and placed in the LRU, marked
 * dirty, dropped.  Separate from ucache_lifecycle.c so the map, LRU and quota rules
 * sit in one place that the request, migration and write-back paths call. */
#include <errno.h>
#include <stdlib.h>

#include "common/lockcheck.h"
#include "common/log.h"

#include "ucache_layer.h"

void
uc_drop_locked(struct fc_ucache *uc, cblock_t cb)
{
  FC_ASSERT_HELD(&uc->lock);
  /* Before the block can be reused or the origin change under it (a
   * failure disarms the warm restart: metadata.h). */
  uc_drop_forgotten_locked(uc, cb, fc_md_forget(uc->md, cb));
}

int
uc_forget_many_locked(struct fc_ucache *uc, const cblock_t *desc, uint32_t n)
{
  FC_ASSERT_HELD(&uc->lock);
  cblock_t asc[UC_DROP_BATCH];

  if (n > UC_DROP_BATCH)
    return -E2BIG;
  for (uint32_t i = 0; i < n; i++)
    asc[i] = desc[n - 1 - i];
  return fc_md_forget_many(uc->md, asc, n);
}

void
uc_drop_forgotten_locked(struct fc_ucache *uc, cblock_t cb, int fr)
{
  FC_ASSERT_HELD(&uc->lock);
  struct fc_entry *e = &uc->dev->table[cb.n];

  fc_blockmap_remove(&uc->map, uc->dev->table, cb);
  fc_lru_remove(&uc->lru, uc->dev->table, cb);
  if (e->flags & FC_ENTRY_DIRTY)
    uc->nr_dirty--;
  /* A synced dirty record may still be on disk: the cleared one must be
   * too before another volume's data goes in (durable.c).  The block
   * waits for the next sync, or is synced now; if that cannot be made
   * sure, it is kept out of use until the next start. */
  uc->used--;
  if (e->flags & FC_ENTRY_ON_DISK_DIRTY) {
    if (!fr && uc_hold_dropped_locked(uc, cb))
      return;
    if (fr || uc_settle_on_disk_dirty_locked(uc, cb)) {
      log_error("volume %s: cache block %u: its dirty record could not be "
                "cleared on disk; the block stays out of use until the agent "
                "restarts", uc_volume(uc), cb.n);
      e->flags = FC_ENTRY_ALLOCATED;
      return;
    }
  }
  fc_cachedev_free(uc->dev, cb);
}

struct marking {
  const struct fc_entry *table;
  bool (*want)(const struct fc_entry *);
  uint64_t *mark;
};

static void
mark_block(void *ctx, uint32_t cb, uint32_t rank)
{
  struct marking *m = ctx;

  (void)rank;
  if (!m->want || m->want(&m->table[cb]))
    m->mark[cb / 64] |= 1ull << (cb % 64);
}

uint64_t *
uc_device_bitmap_locked(struct fc_ucache *uc, bool (*want)(const struct fc_entry *),
                        uint32_t *words)
{
  FC_ASSERT_HELD(&uc->lock);
  struct marking m = { .table = uc->dev->table, .want = want };

  *words = (uc->dev->nr_blocks + 63) / 64;
  if (!(m.mark = calloc(*words ? *words : 1, sizeof *m.mark)))
    return NULL;
  fc_lru_walk_both_ends(&uc->lru, uc->dev->table, mark_block, &m);
  return m.mark;
}

/* Under uc->lock: a block to fill.  Below its share a volume takes a free
 * block of the device, or, the device full, one from a volume above its
 * share; at or above its share (or with nothing to take) it replaces its
 * own least recently used clean block. */
static int
get_block_locked(struct fc_ucache *uc, cblock_t *out)
{
  FC_ASSERT_HELD(&uc->lock);
  if (uc->used < uc->share) {
    if (fc_cachedev_alloc(uc->dev, out) == 0) {
      uc->used++;
      return 0;
    }
    if (uc_take_from_pool_locked(uc, out) == 0) {
      uc->used++;
      uc->taken++;
      return 0;
    }
  }
  if (uc_evict_clean_locked(uc, out) == 0) {
    uc->used++;
    return 0;
  }
  /* Everything evictable is dirty or in use: ask for write-back (we hold
   * uc->lock already, which is the condition's mutex). */
  if (uc->nr_dirty)
    pthread_cond_signal(&uc->wb_cond);
  return -ENOSPC;
}

enum placement {
  AT_HEAD,            /* a miss or a write: most recently used */
  AT_TAIL,            /* a copy or a preload, hottest first */
};

/* admit: the block must pass the admission policy (a miss of the VM;
 * copies and preloads were chosen by the source).  is_write: it counts as
 * a write miss (only its address is staged). */
static int install(struct fc_ucache *uc, oblock_t ob, const void *data, bool dirty,
                   bool admit, bool is_write, bool reused, enum placement where);

int
uc_install(struct fc_ucache *uc, oblock_t ob, const void *data, bool dirty,
           enum uc_install_why why)
{
  bool admit = why != UC_FETCHED || !dirty;

  return install(uc, ob, data, dirty, admit, why == UC_WRITE_MISS, false, AT_HEAD);
}

int
uc_install_admitted(struct fc_ucache *uc, oblock_t ob, const void *data)
{
  return install(uc, ob, data, false, false, false, true, AT_HEAD);
}

int
uc_install_cold(struct fc_ucache *uc, oblock_t ob, const void *data, bool dirty)
{
  return install(uc, ob, data, dirty, false, false, false, AT_TAIL);
}

/* Under uc->lock. */
static void
place(struct fc_ucache *uc, cblock_t cb, enum placement where)
{
  struct fc_entry *table = uc->dev->table;

  if (where == AT_TAIL)
    fc_lru_push_tail(&uc->lru, table, cb);
  else
    fc_lru_push_head(&uc->lru, table, cb);
}

/* reused: admitted because it was reused rws_n times in the window, which
 * its reuse count starts from. */
static int
install(struct fc_ucache *uc, oblock_t ob, const void *data, bool dirty,
        bool admit, bool is_write, bool reused, enum placement where)
{
  struct fc_entry *e;
  cblock_t cb;
  int r;

  pthread_mutex_lock(&uc->lock);
  if (admit && uc->stage && !fc_staging_access(uc->stage, ob.n, is_write)) {
    /* Not reused enough yet.  A read miss leaves its data staged, so a
     * re-read before admission is served from memory; never during a
     * migration, whose installs the staged copies would not see. */
    if (!is_write && !dirty && !uc_layer_on(uc))
      fc_staging_put_data(uc->stage, ob.n, data);
    pthread_mutex_unlock(&uc->lock);
    return 1;
  }
  reused |= admit && uc->stage;
  r = get_block_locked(uc, &cb);
  if (r) {
    pthread_mutex_unlock(&uc->lock);
    return r;
  }
  e = &uc->dev->table[cb.n];
  e->oblock = ob.n;
  /* Not yet in the map or LRU: invisible to lookups and to eviction. */
  e->flags = FC_ENTRY_ALLOCATED | FC_ENTRY_BUSY;
  pthread_mutex_unlock(&uc->lock);

  r = fc_cachedev_write(uc->dev, cb, 0, data, uc->bs);
  if (r == 0) {
    STAT_ADD(&uc->stats, cache_write_bytes, uc->bs);
    if (dirty)
      r = fc_md_set(uc->md, cb, ob.n, uc->p.volume_tag,
                    FC_MD_VALID | FC_MD_DIRTY);
  }

  pthread_mutex_lock(&uc->lock);
  /* A failed clean record leaves the block served but not restored. */
  if (r == 0 && !dirty)
    (void)uc_record_clean_locked(uc, cb, ob);
  if (r) {
    (void)fc_md_forget(uc->md, cb);
    e->flags = 0;
    uc->used--;
    fc_cachedev_free(uc->dev, cb);
    STAT_ADD(&uc->stats, io_errors, 1);
  } else {
    e->flags = FC_ENTRY_ALLOCATED | FC_ENTRY_VALID | (dirty ? FC_ENTRY_DIRTY : 0);
    if (reused)
      uc_entry_set_reuses(e, uc->reuse_epoch, uc->p.rws_n);
    fc_blockmap_insert(&uc->map, uc->dev->table, cb);
    place(uc, cb, where);
    if (dirty) {
      uc->nr_dirty++;
      uc_note_unsynced_locked(uc, cb);
    }
    STAT_ADD(&uc->stats, promotions, 1);
  }
  pthread_mutex_unlock(&uc->lock);
  return r;
}

int
uc_alloc_busy_locked(struct fc_ucache *uc, oblock_t ob, cblock_t *out)
{
  FC_ASSERT_HELD(&uc->lock);
  int r = get_block_locked(uc, out);

  if (r)
    return r;
  uc->dev->table[out->n].oblock = ob.n;
  /* Not yet in the map or LRU: invisible to lookups and to eviction. */
  uc->dev->table[out->n].flags = FC_ENTRY_ALLOCATED | FC_ENTRY_BUSY;
  return 0;
}

void
uc_unalloc_locked(struct fc_ucache *uc, cblock_t cb)
{
  FC_ASSERT_HELD(&uc->lock);
  uc->dev->table[cb.n].flags = 0;
  uc->used--;
  fc_cachedev_free(uc->dev, cb);
}

void
uc_publish_cold_locked(struct fc_ucache *uc, cblock_t cb, bool dirty)
{
  FC_ASSERT_HELD(&uc->lock);
  uc->dev->table[cb.n].flags = FC_ENTRY_ALLOCATED | FC_ENTRY_VALID |
                               (dirty ? FC_ENTRY_DIRTY : 0);
  fc_blockmap_insert(&uc->map, uc->dev->table, cb);
  place(uc, cb, AT_TAIL);
  if (dirty) {
    uc->nr_dirty++;
    uc_note_unsynced_locked(uc, cb);
  }
  STAT_ADD(&uc->stats, promotions, 1);
}

int
uc_record_clean_locked(struct fc_ucache *uc, cblock_t cb, oblock_t ob)
{
  FC_ASSERT_HELD(&uc->lock);
  /* A write going around the cache may change the origin under this
   * block before its second hold drops it: the block stays unrecorded
   * (served, but not restored after a crash). */
  if (uc->stripe_around[ob.n & (FC_STRIPES - 1)])
    return 0;
  return fc_md_set(uc->md, cb, ob.n, uc->p.volume_tag, FC_MD_VALID);
}

int
uc_drop_dirty(struct fc_ucache *uc, cblock_t cb)
{
  /* Record first: a crash after it loses nothing the caller has not
   * already made obsolete (the origin got the trim). */
  int r = fc_md_set(uc->md, cb, 0, 0, 0);

  if (r)
    return r;
  pthread_mutex_lock(&uc->lock);
  uc_drop_locked(uc, cb);
  pthread_mutex_unlock(&uc->lock);
  return 0;
}

int
uc_mark_dirty(struct fc_ucache *uc, cblock_t cb)
{
  struct fc_entry *e = &uc->dev->table[cb.n];
  bool was_dirty;
  int r;

  pthread_mutex_lock(&uc->lock);
  /* New data: whatever a write-back pass sent to origin is now old. */
  e->flags &= ~FC_ENTRY_WB_PENDING;
  was_dirty = e->flags & FC_ENTRY_DIRTY;
  pthread_mutex_unlock(&uc->lock);
  if (was_dirty)
    return 0;
  r = fc_md_set(uc->md, cb, e->oblock, uc->p.volume_tag,
                FC_MD_VALID | FC_MD_DIRTY);
  if (r)
    return r;
  pthread_mutex_lock(&uc->lock);
  e->flags |= FC_ENTRY_DIRTY;
  uc->nr_dirty++;
  uc_note_unsynced_locked(uc, cb);
  pthread_mutex_unlock(&uc->lock);
  return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* ucache, source of a live migration: freeze the VM's writes at the
 * switch, list and read the cached blocks for the destination, forget
 * what it now holds, and write back what settling needs.  Separate from
 * the destination's side (ucache_migr.c, ucache_migr_copies.c): the two
 * ends share no state. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>

#include "ucache_layer.h"
#include "ucache_migr_priv.h"
#include "common/lockcheck.h"

void
fc_ucache_migr_freeze(struct fc_ucache *uc, bool frozen)
{
  /* Take every stripe so the writes already inside finish first, and
   * wait for those on their way to the origin between two holds. */
  struct stripe_set set;

  uc_lock_stripes(uc, 0, FC_STRIPES, &set);
  pthread_mutex_lock(&uc->lock);
  uc->m->src.frozen = frozen;
  uc_migr_update_on_locked(uc);
  pthread_mutex_unlock(&uc->lock);
  uc_unlock_stripes(uc, &set);
  pthread_mutex_lock(&uc->lock);
  while (frozen && uc->writes_around)
    pthread_cond_wait(&uc->around_cond, &uc->lock);
  pthread_mutex_unlock(&uc->lock);
}

static bool
valid(const struct fc_entry *e)
{
  return e->flags & FC_ENTRY_VALID;
}

static bool
valid_dirty(const struct fc_entry *e)
{
  return (e->flags & FC_ENTRY_VALID) && (e->flags & FC_ENTRY_DIRTY);
}

static uint64_t
list_entry(const struct fc_entry *e)
{
  return e->oblock | (e->flags & FC_ENTRY_DIRTY ? FC_BLOCK_DIRTY_BIT : 0);
}

/* Under uc->lock.  The volume's blocks are scattered over a device shared
 * with other volumes: mark them in a bitmap of the device, then read it
 * in order, O(blocks + device / 64) with no sort. */
static int
snapshot_device_order_locked(struct fc_ucache *uc, uint64_t *v, uint32_t *k,
                             bool dirty_only)
{
  FC_ASSERT_HELD(&uc->lock);
  uint32_t words;
  uint64_t *mark = uc_device_bitmap_locked(uc, dirty_only ? valid_dirty : valid, &words);

  if (!mark)
    return -ENOMEM;
  for (uint32_t w = 0; w < words; w++)
    for (uint64_t bits = mark[w]; bits; bits &= bits - 1)
      v[(*k)++] = list_entry(&uc->dev->table[w * 64 + (uint32_t)__builtin_ctzll(bits)]);
  free(mark);
  return 0;
}

/* No block id has every bit set: volumes end below 2^64 bytes. */
#define NOT_LISTED UINT64_MAX

struct listing {
  const struct fc_entry *table;
  bool dirty_only;
  unsigned min_reuse;           /* > 0: dirty blocks and clean ones reused this often */
  uint8_t epoch;
  uint64_t *v;
};

static bool
wanted(const struct listing *l, const struct fc_entry *e)
{
  if (l->min_reuse)
    return valid_dirty(e) || (valid(e) && uc_entry_reuses(e, l->epoch) >= l->min_reuse);
  return l->dirty_only ? valid_dirty(e) : valid(e);
}

static void
list_block(void *ctx, uint32_t cb, uint32_t rank)
{
  struct listing *l = ctx;
  const struct fc_entry *e = &l->table[cb];

  l->v[rank] = wanted(l, e) ? list_entry(e) : NOT_LISTED;
}

/* Under uc->lock: the LRU from the head, each block at its rank, walked
 * from both ends at once (the lock is held for the whole walk), then the
 * blocks not wanted squeezed out. */
static void
snapshot_hottest_first_locked(struct fc_ucache *uc, uint64_t *v, uint32_t *k,
                              struct listing l)
{
  FC_ASSERT_HELD(&uc->lock);
  l.table = uc->dev->table;
  l.v = v;

  fc_lru_walk_both_ends(&uc->lru, uc->dev->table, list_block, &l);
  for (uint32_t i = 0; i < uc->lru.count; i++)
    if (v[i] != NOT_LISTED)
      v[(*k)++] = v[i];
}

int
fc_ucache_migr_snapshot(struct fc_ucache *uc, uint64_t **list, uint32_t *n,
                        bool dirty_only, bool device_order)
{
  uint64_t *v;
  uint32_t k = 0;
  int r = 0;

  pthread_mutex_lock(&uc->lock);
  v = malloc(((size_t)uc->lru.count + 1) * sizeof *v);
  if (!v) {
    pthread_mutex_unlock(&uc->lock);
    return -ENOMEM;
  }
  if (device_order)
    r = snapshot_device_order_locked(uc, v, &k, dirty_only);
  else
    snapshot_hottest_first_locked(uc, v, &k, (struct listing){ .dirty_only = dirty_only });
  pthread_mutex_unlock(&uc->lock);
  if (r) {
    free(v);
    return r;
  }
  *list = v;
  *n = k;
  return 0;
}

int
fc_ucache_migr_snapshot_reused(struct fc_ucache *uc, unsigned min_reuse, uint64_t **list,
                               uint32_t *n)
{
  uint64_t *v;
  uint32_t k = 0;

  pthread_mutex_lock(&uc->lock);
  v = malloc(((size_t)uc->lru.count + 1) * sizeof *v);
  if (!v) {
    pthread_mutex_unlock(&uc->lock);
    return -ENOMEM;
  }
  snapshot_hottest_first_locked(uc, v, &k, (struct listing){
                                  .min_reuse = min_reuse ? min_reuse : 1,
                                  .epoch = uc->reuse_epoch });
  pthread_mutex_unlock(&uc->lock);
  *list = v;
  *n = k;
  return 0;
}

int
fc_ucache_migr_read_block(struct fc_ucache *uc, oblock_t ob, void *data, bool *dirty)
{
  struct stripe_set set;
  cblock_t cb;
  int r;

  uc_lock_stripes_to_read(uc, ob.n, ob.n, &set);
  pthread_mutex_lock(&uc->lock);
  cb = uc_lookup_locked(uc, ob);
  if (cb.n != CBLOCK_NONE)
    *dirty = uc->dev->table[cb.n].flags & FC_ENTRY_DIRTY;
  pthread_mutex_unlock(&uc->lock);
  r = cb.n == CBLOCK_NONE ? -ENOENT : fc_cachedev_read(uc->dev, cb, 0, data, uc->bs);
  if (r == 0)
    STAT_ADD(&uc->stats, cache_read_bytes, uc->bs);
  uc_unlock_stripes(uc, &set);
  return r;
}

int
fc_ucache_migr_forget(struct fc_ucache *uc, oblock_t ob)
{
  struct stripe_set set;
  cblock_t cb;
  bool dirty = false;
  int r = 0;

  uc_lock_stripes(uc, ob.n, ob.n, &set);
  pthread_mutex_lock(&uc->lock);
  cb = uc_lookup_locked(uc, ob);
  if (cb.n != CBLOCK_NONE) {
    dirty = uc->dev->table[cb.n].flags & FC_ENTRY_DIRTY;
    if (!dirty)
      uc_drop_locked(uc, cb);
  }
  pthread_mutex_unlock(&uc->lock);
  if (dirty)
    r = uc_drop_dirty(uc, cb);   /* record cleared before the space is reused */
  uc_unlock_stripes(uc, &set);
  return r;
}

/* fc_ucache_migr_forget for n listed blocks (ascending device order) at
 * once, from the last down: one hold of their stripes and of uc->lock, and
 * the clean ones' records cleared with one write per run of adjacent
 * blocks.  A dirty one goes as fc_ucache_migr_forget's, record first. */
static int
forget_batch(struct fc_ucache *uc, const uint64_t *list, uint32_t n)
{
  cblock_t clean[UC_DROP_BATCH], dirty[UC_DROP_BATCH];
  struct stripe_set set = { { 0 } };
  uint32_t nc = 0, nd = 0;
  int fr, r = 0;

  for (uint32_t i = 0; i < n; i++)
    uc_stripe_set_add(&set, to_oblock(list[i] & ~FC_BLOCK_DIRTY_BIT));
  uc_lock_stripe_set(uc, &set, false);
  pthread_mutex_lock(&uc->lock);
  for (uint32_t i = n; i-- > 0;) {
    cblock_t cb = uc_lookup_locked(uc, to_oblock(list[i] & ~FC_BLOCK_DIRTY_BIT));

    if (cb.n == CBLOCK_NONE)
      continue;
    if (uc->dev->table[cb.n].flags & FC_ENTRY_DIRTY)
      dirty[nd++] = cb;
    else
      clean[nc++] = cb;
  }
  /* As uc_drop_locked: a record that cannot be cleared disarms the warm
   * restart, and the block goes all the same. */
  fr = uc_forget_many_locked(uc, clean, nc);
  for (uint32_t i = 0; i < nc; i++)
    uc_drop_forgotten_locked(uc, clean[i], fr);
  pthread_mutex_unlock(&uc->lock);
  for (uint32_t i = 0; i < nd && !r; i++)
    r = uc_drop_dirty(uc, dirty[i]);   /* record cleared before the space is reused */
  uc_unlock_stripes(uc, &set);
  return r;
}

int
fc_ucache_migr_forget_all(struct fc_ucache *uc)
{
  uint64_t *list;
  uint32_t n;
  int r;

  /* From the device's end down: the free list hands the blocks out again
   * from its start up, in runs the next volume's copies and misses can
   * write with one call each (in LRU order they come back scattered). */
  r = fc_ucache_migr_snapshot(uc, &list, &n, false, true);
  for (uint32_t end = n; end > 0 && !r;) {
    uint32_t start = end > UC_DROP_BATCH ? end - UC_DROP_BATCH : 0;

    r = forget_batch(uc, list + start, end - start);
    end = start;
    /* Let a request waiting for the volume's lock (agent-status reads
     * its counters) in between batches: the adaptive lock would otherwise
     * go back to this thread, batch after batch, until the last. */
    sched_yield();
  }
  if (!r)
    r = uc_sync_records(uc);
  free(list);
  return r;
}

int
fc_ucache_migr_writeback_block(struct fc_ucache *uc, oblock_t ob)
{
  char *buf = malloc(uc->bs);
  bool dirty = false;
  int r;

  if (!buf)
    return -ENOMEM;
  r = fc_ucache_migr_read_block(uc, ob, buf, &dirty);
  if (r == 0 && !dirty)
    r = 1;
  if (r == 0)
    r = fc_origin_pwrite(uc->origin, buf, uc_block_bytes(uc, ob.n),
                         ob.n * uc->bs, false);
  if (r == 0)
    STAT_ADD(&uc->stats, origin_write_bytes, uc->bs);
  free(buf);
  return r;
}

int
fc_ucache_flush_origin(struct fc_ucache *uc)
{
  return fc_origin_flush(uc->origin);
}

int
fc_ucache_release_origin(struct fc_ucache *uc)
{
  return fc_origin_release(uc->origin);
}

void
fc_ucache_invalidate_origin(struct fc_ucache *uc)
{
  fc_origin_invalidate(uc->origin);
}

int
fc_ucache_sync_records(struct fc_ucache *uc)
{
  return uc_sync_records(uc);
}

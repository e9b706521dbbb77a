/* SPDX-License-Identifier: Apache-2.0 */
/* ucache request paths: the helpers the read and write sides share
 * (pinning, invalidating, the origin's counted I/O).  The read and
 * prefetch paths are in ucache_read.c, block status in ucache_status.c,
 * the write, trim, zero and flush paths in ucache_write.c, and the table
 * of them the NBD server calls in ucache_ops.c. */
#include <errno.h>

#include "common/lockcheck.h"
#include "ucache_io.h"

/* The VM's own access to blocks [first, first+n), whose cache blocks (or
 * CBLOCK_NONE) are cbs: the demand the allocator sizes the volume's share
 * by, and the hits' recency.  cbs must still be what the lookup found:
 * pinned, or under uc->lock since. */
static void
uc_touch_locked(struct fc_ucache *uc, uint64_t first, uint32_t n,
                const uint32_t *cbs)
{
  FC_ASSERT_HELD(&uc->lock);
  uc_track_access_locked(uc, first, n);
  for (uint32_t i = 0; i < n; i++)
    if (cbs[i] != CBLOCK_NONE)
      uc_hit_locked(uc, (cblock_t){ cbs[i] });
}

void
uc_hit_locked(struct fc_ucache *uc, cblock_t cb)
{
  FC_ASSERT_HELD(&uc->lock);
  struct fc_entry *e = &uc->dev->table[cb.n];

  fc_lru_touch(&uc->lru, uc->dev->table, cb);
  uc_entry_set_reuses(e, uc->reuse_epoch, uc_entry_reuses(e, uc->reuse_epoch) + 1);
}

void
uc_lookup_and_pin(struct fc_ucache *uc, uint64_t first, uint32_t n, uint32_t *cbs,
                  bool touch)
{
  pthread_mutex_lock(&uc->lock);
  for (uint32_t i = 0; i < n; i++) {
    uint64_t b = first + i;
    cblock_t cb = { CBLOCK_NONE };

    if (b < uc->nr_oblocks)
      cb = uc_lookup_locked(uc, to_oblock(b));
    cbs[i] = cb.n;
    if (cb.n != CBLOCK_NONE)
      uc->dev->table[cb.n].flags |= FC_ENTRY_BUSY;
  }
  if (touch)
    uc_touch_locked(uc, first, n, cbs);
  pthread_mutex_unlock(&uc->lock);
}

void
uc_touch(struct fc_ucache *uc, uint64_t first, uint32_t n)
{
  pthread_mutex_lock(&uc->lock);
  uc_track_access_locked(uc, first, n);
  for (uint64_t b = first; b < first + n && b < uc->nr_oblocks; b++) {
    cblock_t cb = uc_lookup_locked(uc, to_oblock(b));

    if (cb.n != CBLOCK_NONE)
      uc_hit_locked(uc, cb);
  }
  pthread_mutex_unlock(&uc->lock);
}

static bool
any_pinned(const uint32_t *cbs, uint32_t n)
{
  for (uint32_t i = 0; i < n; i++)
    if (cbs[i] != CBLOCK_NONE)
      return true;
  return false;
}

static void
unpin_locked(struct fc_ucache *uc, const uint32_t *cbs, uint32_t n)
{
  FC_ASSERT_HELD(&uc->lock);
  for (uint32_t i = 0; i < n; i++)
    if (cbs[i] != CBLOCK_NONE)
      uc->dev->table[cbs[i]].flags &= ~FC_ENTRY_BUSY;
}

/* A run of misses pinned nothing: no lock to take for it. */
void
uc_unpin(struct fc_ucache *uc, const uint32_t *cbs, uint32_t n)
{
  if (!any_pinned(cbs, n))
    return;
  pthread_mutex_lock(&uc->lock);
  unpin_locked(uc, cbs, n);
  pthread_mutex_unlock(&uc->lock);
}

void
uc_unpin_and_touch(struct fc_ucache *uc, uint64_t first, uint32_t n,
                   const uint32_t *cbs)
{
  pthread_mutex_lock(&uc->lock);
  uc_touch_locked(uc, first, n, cbs);
  unpin_locked(uc, cbs, n);
  pthread_mutex_unlock(&uc->lock);
}

void
uc_invalidate(struct fc_ucache *uc, uint32_t *cbs, uint32_t n)
{
  pthread_mutex_lock(&uc->lock);
  for (uint32_t i = 0; i < n; i++) {
    if (cbs[i] == CBLOCK_NONE || (uc->dev->table[cbs[i]].flags & FC_ENTRY_DIRTY))
      continue;
    uc_drop_locked(uc, to_cblock(cbs[i]));
    STAT_ADD(&uc->stats, invalidations, 1);
    cbs[i] = CBLOCK_NONE;
  }
  pthread_mutex_unlock(&uc->lock);
}

int
uc_origin_read(struct fc_ucache *uc, void *buf, uint32_t len, uint64_t off)
{
  FC_ASSERT_NOT_HELD(&uc->lock);
  int r = fc_origin_pread(uc->origin, buf, len, off);

  if (r == 0)
    STAT_ADD(&uc->stats, origin_read_bytes, len);
  return r;
}

int
uc_origin_write(struct fc_ucache *uc, const void *buf, uint32_t len, uint64_t off,
                bool fua)
{
  FC_ASSERT_NOT_HELD(&uc->lock);
  int r = fc_origin_pwrite(uc->origin, buf, len, off, fua);

  if (r == 0)
    STAT_ADD(&uc->stats, origin_write_bytes, len);
  return r;
}

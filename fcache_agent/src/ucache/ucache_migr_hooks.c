/* SPDX-License-Identifier: Apache-2.0 */
/* The live migration's answers at the data path's hook points
 * (ucache_layer.h): each combines what the two ends ask of a request --
 * the destination's gate, write tracking and pinned blocks, the source's
 * freeze -- so that a request path makes one call where it used to test
 * the migration's fields itself.  The state and the work behind them are
 * in ucache_migr.c (the destination's state), ucache_migr_copies.c (the
 * blocks that arrive) and ucache_migr_source.c (the source). */
#include <errno.h>

#include "common/lockcheck.h"
#include "ucache_layer.h"
#include "ucache_migr_priv.h"

int
uc_layer_before_change(struct fc_ucache *uc)
{
  int r = uc_migr_gate(uc);

  if (!r && uc->m->src.frozen)
    r = -EROFS;       /* the VM has moved on: this host must not diverge */
  return r;
}

int
uc_layer_changing(struct fc_ucache *uc, uint64_t first, uint32_t n,
                  uint64_t off, uint32_t count, enum uc_layer_change how)
{
  int r = 0;

  if (uc->m->dst.tracking) {
    if ((r = uc_migr_note_write(uc, first, n, off, count)))
      return r;
    /* note_write dropped the copied blocks this write makes stale; the
     * rest of the write goes to the origin. */
    if (how == UC_CHANGE_WRITE && uc->m->dst.bypass)
      return 1;
  }
  if (how == UC_CHANGE_ORIGIN)
    for (uint64_t b = first; !r && b < first + n && b < uc->nr_oblocks; b++)
      r = uc_layer_to_origin(uc, b);
  return r;
}

int
uc_layer_flush(struct fc_ucache *uc)
{
  bool gated;

  pthread_mutex_lock(&uc->lock);
  gated = uc_migr_gated_locked(uc) && !uc->m->dst.failed;
  pthread_mutex_unlock(&uc->lock);
  /* Before the switchover writes wait at the gate, so this export has
   * acknowledged none: there is nothing to make durable.  (The
   * hypervisor flushed the source's before it let the VM go.) */
  if (gated)
    return 1;
  return uc_migr_gate(uc);
}

int
uc_layer_read(struct fc_ucache *uc, void *buf, uint32_t count, uint64_t off)
{
  int r = uc_migr_read_gated(uc, buf, count, off);

  if (r <= 0)
    return r;         /* served before the switchover, or failed */
  /* A firepan_if copy in progress: the cache is not attached yet. */
  return uc->m->dst.bypass ? UC_READ_ORIGIN : UC_READ_CACHE;
}

bool
uc_layer_unsure_locked(const struct fc_ucache *uc)
{
  FC_ASSERT_HELD(&uc->lock);
  return uc_layer_on(uc) || uc->m->dst.fetch || uc->m->dst.failed ||
         uc->m->dst.remote_dirty.count > 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* ucache, destination of a live migration: the blocks that arrive, and
 * the VM's writes that make a late one stale.  A miss on a block the
 * source holds is fetched from it, and copies the source pushes are
 * installed unless the VM wrote the block meanwhile.  Separate from
 * ucache_migr.c, which holds the state these consult, because this is
 * the per-block data path; cachemior's warmer, which reads what the
 * source chose from the origin, is ucache_migr_warm.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "ucache_layer.h"
#include "ucache_migr_priv.h"

/* Look up remote state of ob and claim it (remove from the sets). */
static int
take_remote(struct fc_ucache *uc, oblock_t ob, bool *dirty)
{
  int where = 0;

  pthread_mutex_lock(&uc->lock);
  if (fc_invfilter_remove(&uc->m->dst.remote_dirty, ob)) {
    where = 2;
  } else if (fc_invfilter_remove(&uc->m->dst.remote_clean, ob)) {
    where = 1;
  }
  *dirty = where == 2;
  pthread_mutex_unlock(&uc->lock);
  return where;
}

/* Read without uc->lock, as the request paths always did: a miss that
 * races a change of either is looked at again under the lock in
 * uc_layer_read_miss. */
bool
uc_layer_serves_misses(const struct fc_ucache *uc)
{
  return uc->m->dst.fetch || uc->m->dst.failed;
}

int
uc_layer_read_miss(struct fc_ucache *uc, oblock_t ob, void *data)
{
  fc_ucache_fetch_fn fetch;
  fc_ucache_fetched_fn fetched;
  void *ctx;
  bool dirty, src_dirty = false;
  int where, r;

  pthread_mutex_lock(&uc->lock);
  fetch = uc->m->dst.fetch;
  fetched = uc->m->dst.fetched_fn;
  ctx = uc->m->dst.fetch_ctx;
  if (uc->m->dst.failed && fc_invfilter_contains(&uc->m->dst.remote_dirty, ob)) {
    pthread_mutex_unlock(&uc->lock);
    log_error("volume %s: block %llu is dirty on a migration source that was "
              "lost: refusing to serve the stale origin copy", uc_volume(uc),
              (unsigned long long)ob.n);
    return -EIO;
  }
  pthread_mutex_unlock(&uc->lock);
  if (!fetch)
    return 1;
  where = take_remote(uc, ob, &dirty);
  if (!where)
    return 1;
  r = fetch(ctx, ob, data, &src_dirty, dirty);
  if (r == 0) {
    pthread_mutex_lock(&uc->lock);
    uc->m->dst.fetched++;
    pthread_mutex_unlock(&uc->lock);
    /* Dirty data now lives only here: it must be installed, or written
     * to the origin if the cache has no room. */
    r = uc_install(uc, ob, data, src_dirty, UC_FETCHED);
    if (r == 0 && src_dirty) {
      pthread_mutex_lock(&uc->lock);
      uc->m->dst.copied_dirty = uc->m->dst.source_dirty = true;
      pthread_mutex_unlock(&uc->lock);
      /* After copied_dirty: the next fc_ucache_migr_durable, which the
       * acknowledgement waits for, covers this block.  One written to
       * the origin instead (no room here) is not acknowledged: the source
       * keeps its copy until the migration completes, as before. */
      if (fetched)
        fetched(ctx, ob);
    }
    if (r < 0 && src_dirty && !(r = uc_layer_to_origin(uc, ob.n)))
      r = fc_origin_pwrite(uc->origin, data, uc_block_bytes(uc, ob.n),
                           ob.n * uc->bs, true);
    /* A clean block is also at the origin: the data in hand is good, and
     * a cache with no room (all dirty) only costs a future miss. */
    return src_dirty && r < 0 ? r : 0;
  }
  if (!dirty) {
    /* A clean block is also at the origin: the VM need not wait for a
     * source that is slow or gone. */
    pthread_mutex_lock(&uc->lock);
    uc->m->dst.fetch_fallbacks++;
    pthread_mutex_unlock(&uc->lock);
    return 1;
  }
  /* Put it back: it is still only on the source. */
  pthread_mutex_lock(&uc->lock);
  fc_invfilter_add(&uc->m->dst.remote_dirty, ob);
  pthread_mutex_unlock(&uc->lock);
  log_error("volume %s: cannot fetch dirty block %llu from the migration source: %s",
            uc_volume(uc), (unsigned long long)ob.n, strerror(-r));
  return -EIO;
}

int
uc_migr_note_write(struct fc_ucache *uc, uint64_t first, uint32_t n,
                   uint64_t off, uint32_t count)
{
  bool fetched[2] = { false, false };   /* the first and the last block */
  char *buf = NULL;
  int r = 0;

  /* First the partial blocks the source holds dirty: the rest of each is
   * only there, so it is fetched before the write lands on it.  Nothing
   * is marked until they are in: a write that fails here (the source is
   * lost) must leave each of its blocks as it was, dirty on the source,
   * or a whole block it covers would read the origin's stale copy after
   * (not the write's data, not the source's: the write never happened). */
  for (uint32_t i = 0; i < n && !r; i += n > 1 ? n - 1 : 1) {
    uint64_t b = first + i, bstart = b * uc->bs;
    bool remote_dirty;

    if (b >= uc->nr_oblocks || (off <= bstart && off + count >= bstart + uc->bs))
      continue;
    pthread_mutex_lock(&uc->lock);
    remote_dirty = fc_invfilter_contains(&uc->m->dst.remote_dirty, to_oblock(b));
    pthread_mutex_unlock(&uc->lock);
    if (!remote_dirty)
      continue;
    if (!buf && !(buf = malloc(uc->bs)))
      return -ENOMEM;
    r = uc_layer_read_miss(uc, to_oblock(b), buf);
    if (r == 1)
      r = 0;
    fetched[i != 0] = r == 0;
  }
  free(buf);
  if (r)
    return r;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t b = first + i;

    if (b >= uc->nr_oblocks)
      continue;
    pthread_mutex_lock(&uc->lock);
    /* The VM's data supersedes the source's copy (a partial block's was
     * fetched above and is under it now). */
    fc_invfilter_add(&uc->m->dst.written, to_oblock(b));
    fc_invfilter_remove(&uc->m->dst.remote_dirty, to_oblock(b));
    fc_invfilter_remove(&uc->m->dst.remote_clean, to_oblock(b));
    if (uc->m->dst.bypass && !(i == 0 && fetched[0]) &&
        !(i == n - 1 && n > 1 && fetched[1])) {
      cblock_t cb = uc_lookup_locked(uc, to_oblock(b));
      /* Only a copied block can be here; the VM's write makes it stale. */
      if (cb.n != CBLOCK_NONE && !(uc->dev->table[cb.n].flags & FC_ENTRY_BUSY)) {
        uc_drop_locked(uc, cb);
        STAT_ADD(&uc->stats, invalidations, 1);
      }
    }
    pthread_mutex_unlock(&uc->lock);
  }
  return 0;
}

int
fc_ucache_migr_install_copy(struct fc_ucache *uc, oblock_t ob, const void *data,
                            bool dirty)
{
  struct stripe_set set;
  bool stale;
  int r;

  if (ob.n >= uc->nr_oblocks)
    return -ERANGE;
  uc_lock_stripes(uc, ob.n, ob.n, &set);
  pthread_mutex_lock(&uc->lock);
  stale = fc_invfilter_contains(&uc->m->dst.written, ob) ||
          uc_lookup_locked(uc, ob).n != CBLOCK_NONE;
  fc_invfilter_remove(&uc->m->dst.remote_dirty, ob);
  fc_invfilter_remove(&uc->m->dst.remote_clean, ob);
  if (stale)
    uc->m->dst.discarded++;
  pthread_mutex_unlock(&uc->lock);
  if (stale) {
    uc_unlock_stripes(uc, &set);
    return 1;
  }
  r = uc_install_cold(uc, ob, data, dirty);
  if (r == 1 || r == -ENOSPC) {
    /* Admission or space said no.  A clean copy can be dropped; a dirty
     * one is the only copy and goes to the origin. */
    r = dirty ? uc_layer_to_origin(uc, ob.n) : 1;
    if (r == 0)
      r = fc_origin_pwrite(uc->origin, data, uc_block_bytes(uc, ob.n),
                           ob.n * uc->bs, true);
  }
  if (r == 0) {
    pthread_mutex_lock(&uc->lock);
    uc->m->dst.installed_copies++;
    uc->m->dst.copied_dirty |= dirty;
    uc->m->dst.source_dirty |= dirty;
    pthread_mutex_unlock(&uc->lock);
  }
  uc_unlock_stripes(uc, &set);
  return r;
}

int
fc_ucache_migr_durable(struct fc_ucache *uc, bool final)
{
  bool sync;
  int r = 0;

  /* Serialised: a caller that finds nothing to sync may be relying on
   * blocks whose sync another caller has started and not finished. */
  pthread_mutex_lock(&uc->m->dst.durable_lock);
  pthread_mutex_lock(&uc->lock);
  sync = uc->m->dst.copied_dirty || (final && uc->m->dst.source_dirty);
  uc->m->dst.copied_dirty = false;
  pthread_mutex_unlock(&uc->lock);
  if (sync) {
    /* The source forgets what we acknowledge: our records must survive a
     * power cut, not only a crash (durable.c). */
    r = uc_make_durable(uc);
    if (r) {
      pthread_mutex_lock(&uc->lock);
      uc->m->dst.copied_dirty = true;
      pthread_mutex_unlock(&uc->lock);
    }
  }
  pthread_mutex_unlock(&uc->m->dst.durable_lock);
  return r;
}

/* The VM's requests wait on the volume's lock meanwhile: a few
 * microseconds per step. */
#define ORDER_STEP 256u

void
fc_ucache_migr_order(struct fc_ucache *uc, const uint64_t *ids, uint32_t n)
{
  struct fc_entry *table = uc->dev->table;

  for (uint32_t i = 0; i < n; i += ORDER_STEP) {
    uint32_t end = n - i < ORDER_STEP ? n : i + ORDER_STEP;

    pthread_mutex_lock(&uc->lock);
    for (uint32_t j = i; j < end; j++) {
      cblock_t cb = uc_lookup_locked(uc, to_oblock(ids[j] & ~FC_BLOCK_DIRTY_BIT));

      if (cb.n == CBLOCK_NONE)
        continue;
      fc_lru_remove(&uc->lru, table, cb);
      fc_lru_push_tail(&uc->lru, table, cb);
    }
    pthread_mutex_unlock(&uc->lock);
  }
}

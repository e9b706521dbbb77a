/* SPDX-License-Identifier: Apache-2.0 */
/* ucache, both ends of a migration copy, a batch of blocks at a time.
 *
 * Per block, a copy costs two locks, a stripe and a 4 KiB system call on
 * each side; at line rate that is most of the CPU.  A batch takes its
 * stripes once, reads the source's blocks with one preadv per run of
 * adjacent cache blocks, and at the destination writes the data with one
 * pwritev per run and the dirty blocks' records with one write per run.
 *
 * The rules are those of the per-block calls (ucache_migr_source.c,
 * ucache_migr_copies.c), which stay for fetches and as the fallback: a
 * copy of a block the VM wrote (the invalidation filter) or already holds
 * is discarded, decided under the block's stripe, and a dirty block's
 * record is written after its data and before the block is mapped.  Only
 * the data write moves out of the stripes: it goes to blocks that are
 * busy and unmapped, invisible to everyone until they are published, so
 * the VM's requests on those stripes do not wait for it.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "ucache_layer.h"
#include "ucache_migr_priv.h"
#include "common/lockcheck.h"

struct slot {
  uint64_t ob;
  uint32_t cb;
  uint32_t i;            /* index in the caller's batch */
  bool dirty, have, stale;
};

static int
by_cb(const void *a, const void *b)
{
  const struct slot *x = a, *y = b;

  return x->cb < y->cb ? -1 : x->cb > y->cb;
}

static int
by_ob(const void *a, const void *b)
{
  const struct slot *x = *(struct slot *const *)a, *y = *(struct slot *const *)b;

  if (x->ob != y->ob)
    return x->ob < y->ob ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

/* Where the run of adjacent cache blocks that starts at s[i] ends. */
static uint32_t
run_end(const struct slot *s, uint32_t n, uint32_t i)
{
  uint32_t j = i + 1;

  while (j < n && s[j].cb == s[j - 1].cb + 1 && j - i < IOV_MAX)
    j++;
  return j;
}

/* Ask the device for every run from s[i] on, without waiting for any. */
static void
prefetch_runs(struct fc_ucache *uc, const struct slot *s, uint32_t n, uint32_t i)
{
  while (i < n) {
    uint32_t j = run_end(s, n, i);

    fc_cachedev_prefetch(uc->dev, to_cblock(s[i].cb), j - i);
    i = j;
  }
}

/* The runs of adjacent cache blocks among s[0..n) (sorted by cb), one
 * vectored call each; bufs[s[k].i] is block k's buffer.
 *
 * Reading, each run is first taken only from the page cache.  The first
 * run that is not there means the batch comes from the device (a cache
 * larger than memory): every run left is then asked for at once, so the
 * device works on the whole batch instead of one run at a time.  Once
 * the VM's hits have reordered the LRU, a hottest-first batch is 4 KiB
 * runs scattered over the device, and one read in flight at a time ran
 * at a few thousand blocks a second. */
static int
each_run(struct fc_ucache *uc, struct slot *s, uint32_t n, void *const *bufs,
         struct iovec *iov, bool writing)
{
  bool prefetched = false;
  uint32_t i = 0;
  int r = 0;

  while (i < n && !r) {
    uint32_t j = run_end(s, n, i);
    cblock_t first = to_cblock(s[i].cb);

    for (uint32_t k = i; k < j; k++)
      iov[k - i] = (struct iovec){ bufs[s[k].i], uc->bs };
    if (writing) {
      r = fc_cachedev_writev(uc->dev, first, iov, (int)(j - i));
    } else {
      r = prefetched ? -EAGAIN : fc_cachedev_readv_nowait(uc->dev, first, iov, (int)(j - i));
      if (r == -EAGAIN) {
        if (!prefetched)
          prefetch_runs(uc, s, n, i);
        prefetched = true;
        r = fc_cachedev_readv(uc->dev, first, iov, (int)(j - i));
      }
    }
    i = j;
  }
  return r;
}

int
fc_ucache_migr_read_many(struct fc_ucache *uc, const uint64_t *obs, uint32_t n,
                         void *const *data, bool *dirty, int *res)
{
  struct stripe_set set = { { 0 } };
  struct slot *s = malloc((size_t)n * sizeof *s);
  struct iovec *iov = malloc((size_t)n * sizeof *iov);
  uint32_t k = 0;
  int r = 0;

  if (!s || !iov) {
    r = -ENOMEM;
    goto out;
  }
  for (uint32_t i = 0; i < n; i++)
    uc_stripe_set_add(&set, to_oblock(obs[i]));
  /* As one read_block per block: no block changes under the read. */
  uc_lock_stripe_set(uc, &set, true);
  pthread_mutex_lock(&uc->lock);
  for (uint32_t i = 0; i < n; i++) {
    cblock_t cb = uc_lookup_locked(uc, to_oblock(obs[i]));

    res[i] = cb.n == CBLOCK_NONE ? -ENOENT : 0;
    if (cb.n == CBLOCK_NONE)
      continue;
    dirty[i] = uc->dev->table[cb.n].flags & FC_ENTRY_DIRTY;
    s[k++] = (struct slot){ .ob = obs[i], .cb = cb.n, .i = i };
  }
  pthread_mutex_unlock(&uc->lock);
  /* Hot blocks were cached in the order the VM touched them, so sorting
   * by cache block turns a hotness-ordered batch into a few long runs. */
  qsort(s, k, sizeof *s, by_cb);
  r = each_run(uc, s, k, data, iov, false);
  uc_unlock_stripes(uc, &set);
  if (!r)
    STAT_ADD(&uc->stats, cache_read_bytes, (uint64_t)k * uc->bs);
out:
  free(iov);
  free(s);
  return r;
}

/* Phase 1, no stripe held: blocks for every copy, and their data. */
static int
write_data(struct fc_ucache *uc, struct slot *s, uint32_t n, const void *const *data,
           struct iovec *iov, uint32_t *nhave)
{
  uint32_t k = 0;
  int r;

  pthread_mutex_lock(&uc->lock);
  for (uint32_t i = 0; i < n; i++) {
    cblock_t cb;

    /* No room (everything evictable is dirty or busy): the per-block
     * path decides, after the batch, as it would have alone. */
    s[i].have = uc_alloc_busy_locked(uc, to_oblock(s[i].ob), &cb) == 0;
    s[i].cb = s[i].have ? cb.n : CBLOCK_NONE;
    k += s[i].have;
  }
  pthread_mutex_unlock(&uc->lock);
  qsort(s, n, sizeof *s, by_cb);     /* the blocks without room sort last */
  r = each_run(uc, s, k, (void *const *)data, iov, true);
  if (r) {
    pthread_mutex_lock(&uc->lock);
    for (uint32_t i = 0; i < k; i++)
      uc_unalloc_locked(uc, to_cblock(s[i].cb));
    STAT_ADD(&uc->stats, io_errors, 1);
    pthread_mutex_unlock(&uc->lock);
    return r;
  }
  STAT_ADD(&uc->stats, cache_write_bytes, (uint64_t)k * uc->bs);
  *nhave = k;
  return 0;
}

/* Phase 2, under the stripes and uc->lock: which copies are stale.  A
 * block the batch names twice keeps its first copy. */
static void
judge_locked(struct fc_ucache *uc, struct slot *s, uint32_t n, struct slot **byob)
{
  FC_ASSERT_HELD(&uc->lock);
  for (uint32_t i = 0; i < n; i++)
    byob[i] = &s[i];
  qsort(byob, n, sizeof *byob, by_ob);
  for (uint32_t k = 0; k < n; k++) {
    struct slot *x = byob[k];
    oblock_t ob = to_oblock(x->ob);

    if (!x->have)
      continue;
    x->stale = (k && byob[k - 1]->ob == x->ob) ||
               fc_invfilter_contains(&uc->m->dst.written, ob) ||
               uc_lookup_locked(uc, ob).n != CBLOCK_NONE;
    fc_invfilter_remove(&uc->m->dst.remote_dirty, ob);
    fc_invfilter_remove(&uc->m->dst.remote_clean, ob);
    if (x->stale)
      uc->m->dst.discarded++;
  }
}

/* Phase 3: the dirty copies' records, one write per run (s sorted by cb,
 * the ones with a block first). */
static int
write_records(struct fc_ucache *uc, const struct slot *s, uint32_t nhave)
{
  cblock_t *cbs = malloc((size_t)nhave * sizeof *cbs);
  uint64_t *obs = malloc((size_t)nhave * sizeof *obs);
  uint32_t k = 0;
  int r;

  if (!cbs || !obs) {
    r = -ENOMEM;
    goto out;
  }
  for (uint32_t i = 0; i < nhave; i++)
    if (s[i].dirty && !s[i].stale) {
      cbs[k] = to_cblock(s[i].cb);
      obs[k++] = s[i].ob;
    }
  r = fc_md_set_many(uc->md, cbs, obs, k, uc->p.volume_tag, FC_MD_VALID | FC_MD_DIRTY);
out:
  free(cbs);
  free(obs);
  return r;
}

int
fc_ucache_migr_install_many(struct fc_ucache *uc, const uint64_t *ids,
                            const void *const *data, uint32_t n, int *res)
{
  struct stripe_set set = { { 0 } };
  struct slot *s = malloc((size_t)n * sizeof *s);
  struct slot **byob = malloc((size_t)n * sizeof *byob);
  struct iovec *iov = malloc((size_t)n * sizeof *iov);
  uint32_t nhave = 0, installed = 0;
  int r = 0;

  if (!s || !byob || !iov) {
    r = -ENOMEM;
    goto out;
  }
  for (uint32_t i = 0; i < n; i++) {
    uint64_t ob = ids[i] & ~FC_BLOCK_DIRTY_BIT;

    if (ob >= uc->nr_oblocks) {
      r = -ERANGE;
      goto out;
    }
    s[i] = (struct slot){ .ob = ob, .i = i, .dirty = ids[i] & FC_BLOCK_DIRTY_BIT };
    uc_stripe_set_add(&set, to_oblock(ob));
  }
  r = write_data(uc, s, n, data, iov, &nhave);
  if (r)
    goto out;

  uc_lock_stripe_set(uc, &set, false);
  pthread_mutex_lock(&uc->lock);
  judge_locked(uc, s, n, byob);
  pthread_mutex_unlock(&uc->lock);
  /* A dirty block is the only copy once the source forgets it: its
   * record goes down before it is mapped, as uc_install_cold does. */
  r = write_records(uc, s, nhave);
  /* Published in the batch's order, the source's hotness order, which
   * the cold end of the LRU keeps. */
  for (uint32_t k = 0; k < n; k++)
    byob[s[k].i] = &s[k];
  pthread_mutex_lock(&uc->lock);
  for (uint32_t i = 0; i < n; i++) {
    struct slot *x = byob[i];

    if (!x->have)
      continue;
    if (r || x->stale) {
      uc_unalloc_locked(uc, to_cblock(x->cb));
    } else {
      uc_publish_cold_locked(uc, to_cblock(x->cb), x->dirty);
      uc->m->dst.copied_dirty |= x->dirty;
      uc->m->dst.source_dirty |= x->dirty;
      installed++;
    }
    res[i] = x->stale ? 1 : 0;
  }
  uc->m->dst.installed_copies += installed;
  pthread_mutex_unlock(&uc->lock);
  uc_unlock_stripes(uc, &set);
  if (r)
    goto out;

  /* The copies that found no room, one by one: a dirty one goes to the
   * origin there, under its stripe, as it would have alone. */
  for (uint32_t i = nhave; i < n && !r; i++) {
    r = fc_ucache_migr_install_copy(uc, to_oblock(s[i].ob), data[s[i].i], s[i].dirty);
    if (r >= 0) {
      res[s[i].i] = r;
      r = 0;
    }
  }
out:
  free(iov);
  free(byob);
  free(s);
  return r;
}

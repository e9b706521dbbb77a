/* SPDX-License-Identifier: Apache-2.0 */
/* The paths that change data or make it durable: write (through, back
 * or around the cache), trim, write zeroes (zeroed at the origin, sparse
 * where the client allows) and flush.  Separate from the
 * read path: they share only the helpers of ucache_io.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ucache_io.h"
#include "ucache_layer.h"

/* Whole blocks zeroed per hold of their stripes (zero_blocks). */
#define ZERO_CHUNK (64u << 20)

/* write_through: origin first, so the cache never holds data the origin
 * refused; then refresh hits and install fully written misses. */
static int
write_through(struct fc_ucache *uc, const char *buf, uint32_t count,
              uint64_t off, uint64_t first, uint32_t n, uint32_t *cbs, bool fua)
{
  int r;

  /* Between the origin write and the cache's, a cached block is older
   * than the origin: its clean record goes first and comes back after
   * (metadata.h), or a crash in between would restart it stale. */
  for (uint32_t i = 0; i < n; i++)
    if (cbs[i] != CBLOCK_NONE && fc_md_forget(uc->md, to_cblock(cbs[i])))
      uc_invalidate(uc, &cbs[i], 1);
  r = uc_origin_write(uc, buf, count, off, fua);
  if (r) {
    uc_invalidate(uc, cbs, n);
    return r;
  }
  for (uint32_t i = 0; i < n; i++) {
    uint64_t b = first + i;
    struct seg s = seg_of(uc, b, off, count);

    if (cbs[i] != CBLOCK_NONE) {
      STAT_ADD(&uc->stats, write_hits, 1);
      if (fc_cachedev_write(uc->dev, to_cblock(cbs[i]), s.in_block,
                            buf + s.in_buf, s.len) == 0) {
        STAT_ADD(&uc->stats, cache_write_bytes, s.len);
        /* A failed record leaves the block served but not restored. */
        pthread_mutex_lock(&uc->lock);
        (void)uc_record_clean_locked(uc, to_cblock(cbs[i]), to_oblock(b));
        pthread_mutex_unlock(&uc->lock);
      } else {
        uc_invalidate(uc, &cbs[i], 1);
      }
    } else if (b < uc->nr_oblocks) {
      STAT_ADD(&uc->stats, write_misses, 1);
      if (s.len == uc->bs)
        uc_install(uc, to_oblock(b), buf + s.in_buf, false, UC_WRITE_MISS);
    }
  }
  return 0;
}

/* write_back: whole blocks land in the cache as dirty; a partial write to
 * an uncached block, or a block we cannot find room for, goes around the
 * cache to the origin. */
static int
write_back(struct fc_ucache *uc, const char *buf, uint32_t count,
           uint64_t off, uint64_t first, uint32_t n, uint32_t *cbs, bool fua)
{
  bool wrote_cache = false;
  int r = 0;

  for (uint32_t i = 0; i < n && !r; i++) {
    uint64_t b = first + i;
    struct seg s = seg_of(uc, b, off, count);

    if (cbs[i] != CBLOCK_NONE) {
      STAT_ADD(&uc->stats, write_hits, 1);
      /* A clean block is about to differ from the origin: its clean
       * record goes before its data changes, its dirty one comes after
       * (metadata.h).  A dirty record is current either way. */
      if (!(uc->dev->table[cbs[i]].flags & FC_ENTRY_DIRTY) &&
          fc_md_forget(uc->md, to_cblock(cbs[i]))) {
        STAT_ADD(&uc->stats, io_errors, 1);
        uc_invalidate(uc, &cbs[i], 1);
        r = uc_layer_to_origin(uc, b);
        if (!r)
          r = uc_origin_write(uc, buf + s.in_buf, s.len, s.start, fua);
        continue;
      }
      r = fc_cachedev_write(uc->dev, to_cblock(cbs[i]), s.in_block,
                            buf + s.in_buf, s.len);
      if (r == 0) {
        STAT_ADD(&uc->stats, cache_write_bytes, s.len);
        r = uc_mark_dirty(uc, to_cblock(cbs[i]));
        if (r == 0) {
          wrote_cache = true;
          continue;
        }
        /* No DIRTY record: the block, still clean, now differs from the
         * origin.  Drop it and send the write around it. */
        STAT_ADD(&uc->stats, io_errors, 1);
        uc_invalidate(uc, &cbs[i], 1);
        r = uc_layer_to_origin(uc, b);
        if (!r)
          r = uc_origin_write(uc, buf + s.in_buf, s.len, s.start, fua);
        continue;
      }
      STAT_ADD(&uc->stats, io_errors, 1);
      if (uc->dev->table[cbs[i]].flags & FC_ENTRY_DIRTY)
        continue;   /* r stands: the only copy may now be damaged */
      /* A clean block can be dropped and the write sent around it. */
      uc_invalidate(uc, &cbs[i], 1);
      r = uc_layer_to_origin(uc, b);
      if (!r)
        r = uc_origin_write(uc, buf + s.in_buf, s.len, s.start, fua);
      continue;
    }
    if (b < uc->nr_oblocks)
      STAT_ADD(&uc->stats, write_misses, 1);
    if (b < uc->nr_oblocks && s.len == uc->bs) {
      r = uc_install(uc, to_oblock(b), buf + s.in_buf, true, UC_WRITE_MISS);
      if (r == 0) {
        wrote_cache = true;
        continue;
      }
    }
    r = uc_layer_to_origin(uc, b);
    if (!r)
      r = uc_origin_write(uc, buf + s.in_buf, s.len, s.start, fua);
  }
  if (!r && fua && wrote_cache)
    r = uc_make_durable(uc);
  pthread_mutex_lock(&uc->lock);
  if (uc->nr_dirty * 100ull > (uint64_t)uc->p.quota_blocks * uc->p.dirty_high_percent)
    pthread_cond_signal(&uc->wb_cond);
  pthread_mutex_unlock(&uc->lock);
  return r;
}

/* Under the stripes: drop the clean cached copies of [first, first+n). */
static void
drop_clean(struct fc_ucache *uc, uint64_t first, uint32_t n, bool count_hits)
{
  pthread_mutex_lock(&uc->lock);
  for (uint32_t i = 0; i < n; i++) {
    cblock_t cb = { CBLOCK_NONE };

    if (first + i < uc->nr_oblocks)
      cb = uc_lookup_locked(uc, to_oblock(first + i));
    if (cb.n == CBLOCK_NONE)
      continue;
    if (count_hits)
      STAT_ADD(&uc->stats, write_hits, 1);
    if (uc->dev->table[cb.n].flags & FC_ENTRY_DIRTY)
      continue;
    uc_drop_locked(uc, cb);
    STAT_ADD(&uc->stats, invalidations, 1);
  }
  pthread_mutex_unlock(&uc->lock);
}

/* Under uc->lock: count a write around the cache in or out of the
 * stripes it covers. */
static void
around_count(struct fc_ucache *uc, const struct stripe_set *set, int d)
{
  for (unsigned w = 0; w < FC_STRIPES / 64; w++)
    for (uint64_t bits = set->bits[w]; bits; bits &= bits - 1)
      uc->stripe_around[w * 64 + (unsigned)__builtin_ctzll(bits)] += (uint32_t)d;
}

/* A write that leaves the cache out (read_only, or a firepan_if copy in
 * progress), called with its stripes held and its cached copies dropped.
 * The origin write, the slow part, runs with no stripe held so that the
 * VM's other requests and the migration installer do not queue behind
 * it.  In that window a read may install the old data, or a source's copy
 * arrive; the second hold drops whatever got in (the write's lock bumped
 * the stripes' sequence, so a read that began before it does not install,
 * and the invalidation filter discards late copies). */
static int
write_around(struct fc_ucache *uc, const char *buf, uint32_t count,
             uint64_t off, bool fua, uint64_t first, uint32_t n,
             struct stripe_set *set)
{
  int r;

  struct stripe_set held = *set;

  pthread_mutex_lock(&uc->lock);
  uc->writes_around++;
  around_count(uc, &held, 1);
  pthread_mutex_unlock(&uc->lock);
  uc_unlock_stripes(uc, set);
  r = uc_origin_write(uc, buf, count, off, fua);
  uc_lock_stripes(uc, first, first + n - 1, set);
  drop_clean(uc, first, n, false);
  uc_unlock_stripes(uc, set);
  pthread_mutex_lock(&uc->lock);
  around_count(uc, &held, -1);
  if (--uc->writes_around == 0)
    pthread_cond_broadcast(&uc->around_cond);
  pthread_mutex_unlock(&uc->lock);
  return r;
}

/* A write of the VM's, counted by the caller. */
static int
write_range(struct fc_ucache *uc, const char *buf, uint32_t count,
            uint64_t off, bool fua)
{
  uint64_t first = off / uc->bs, last = (off + count - 1) / uc->bs;
  uint32_t n = (uint32_t)(last - first + 1);
  uint32_t stack_cbs[16], *cbs = n <= 16 ? stack_cbs : malloc(n * sizeof *cbs);
  struct stripe_set set;
  int r;

  if (!cbs)
    return -ENOMEM;
  if (uc_layer_on(uc) && (r = uc_layer_before_change(uc)))
    goto out;
  uc_pause_gate(uc);
  /* The policy is read under the stripes: a change takes them all. */
  uc_lock_stripes(uc, first, last, &set);
  if (uc_layer_on(uc)) {
    r = uc_layer_changing(uc, first, n, off, count, UC_CHANGE_WRITE);
    if (r < 0) {
      uc_unlock_stripes(uc, &set);
      goto out;
    }
    if (r == 1) {
      r = write_around(uc, buf, count, off, fua, first, n, &set);
      goto out;
    }
  }
  if (uc->p.write_policy == FC_WRITE_READ_ONLY) {
    drop_clean(uc, first, n, true);
    r = write_around(uc, buf, count, off, fua, first, n, &set);
    goto out;
  }
  uc_lookup_and_pin(uc, first, n, cbs, true);
  if (uc->p.write_policy == FC_WRITE_THROUGH)
    r = write_through(uc, buf, count, off, first, n, cbs, fua);
  else
    r = write_back(uc, buf, count, off, first, n, cbs, fua);
  uc_unpin(uc, cbs, n);
  uc_unlock_stripes(uc, &set);
out:
  if (cbs != stack_cbs)
    free(cbs);
  return r;
}

int
uc_pwrite(void *handle, const void *vbuf, uint32_t count, uint64_t off, bool fua)
{
  struct fc_ucache *uc = handle;

  STAT_ADD(&uc->stats, writes, 1);
  STAT_ADD(&uc->stats, write_bytes, count);
  return write_range(uc, vbuf, count, off, fua);
}

int
uc_flush(void *handle)
{
  struct fc_ucache *uc = handle;
  bool write_back;
  int r = 0;

  STAT_ADD(&uc->stats, flushes, 1);
  if (uc_layer_on(uc) && (r = uc_layer_flush(uc)))
    return r > 0 ? 0 : r;     /* 1: nothing acknowledged to make durable */
  /* Under the lock: a policy change may be under way.  A flush that
   * sees the new policy (not write_back) finds no dirty block: the change
   * wrote them all back and synced their records before it switched. */
  pthread_mutex_lock(&uc->lock);
  write_back = uc->p.write_policy == FC_WRITE_BACK;
  pthread_mutex_unlock(&uc->lock);
  if (write_back) {
    /* Acknowledged dirty data lives in the cache file: that, and the
     * records naming it, are what must reach stable storage. */
    r = uc_make_durable(uc);
  }
  if (!r)
    r = fc_origin_flush(uc->origin);
  return r;
}

static int
trim_block(struct fc_ucache *uc, uint64_t b, bool whole)
{
  cblock_t cb;
  bool dirty;

  pthread_mutex_lock(&uc->lock);
  cb = uc_lookup_locked(uc, to_oblock(b));
  if (cb.n == CBLOCK_NONE) {
    pthread_mutex_unlock(&uc->lock);
    return 0;
  }
  dirty = uc->dev->table[cb.n].flags & FC_ENTRY_DIRTY;
  if (!dirty) {
    /* The origin changed under a clean block: it must not stay. */
    uc_drop_locked(uc, cb);
    STAT_ADD(&uc->stats, invalidations, 1);
  }
  pthread_mutex_unlock(&uc->lock);
  /* A partly trimmed dirty block keeps its data: trim is only a hint and
   * the rest of the block is still the newest copy. */
  if (dirty && whole) {
    STAT_ADD(&uc->stats, invalidations, 1);
    return uc_drop_dirty(uc, cb);
  }
  return 0;
}

int
uc_trim(void *handle, uint32_t count, uint64_t off, bool fua)
{
  struct fc_ucache *uc = handle;
  uint64_t first = off / uc->bs, last = (off + count - 1) / uc->bs;
  struct stripe_set set;
  int r;

  STAT_ADD(&uc->stats, trims, 1);
  if (uc_layer_on(uc) && (r = uc_layer_before_change(uc)))
    return r;
  uc_pause_gate(uc);
  uc_lock_stripes(uc, first, last, &set);
  /* A trim changes the origin like a write: late copies are stale. */
  if (uc_layer_on(uc) &&
      (r = uc_layer_changing(uc, first, (uint32_t)(last - first + 1), off, count,
                             UC_CHANGE_ORIGIN))) {
    uc_unlock_stripes(uc, &set);
    return r;
  }
  /* Clean copies go before the origin changes under them (their records
   * with them: metadata.h); dirty ones after, as below. */
  drop_clean(uc, first, (uint32_t)(last - first + 1), false);
  /* Origin first: if it fails, the cache still holds its dirty data. */
  r = fc_origin_trim(uc->origin, count, off);
  if (r == -EOPNOTSUPP)
    r = 0;
  for (uint64_t b = first; !r && b <= last && b < uc->nr_oblocks; b++) {
    struct seg s = seg_of(uc, b, off, count);
    r = trim_block(uc, b, s.len == uc->bs);
  }
  if (!r && fua)
    r = uc_flush(uc);
  uc_unlock_stripes(uc, &set);
  return r;
}

/* After the origin zeroed whole block b, with b's stripe held: no copy
 * of what the zeroes replaced may stay.  A clean one went before the
 * origin changed (drop_clean); a dirty one goes now, its record first
 * (uc_drop_dirty), so that a restart does not bring it back.  If that
 * record cannot be cleared, the block keeps its place, still dirty, and
 * takes the zeroes instead, as a write would; write-back then sends them
 * (its pass in flight, if any, is made to send again: uc_mark_dirty). */
static int
zero_cached_block(struct fc_ucache *uc, uint64_t b, const char *zeroes)
{
  cblock_t cb;
  bool dirty;
  int r;

  pthread_mutex_lock(&uc->lock);
  cb = uc_lookup_locked(uc, to_oblock(b));
  if (cb.n == CBLOCK_NONE) {
    pthread_mutex_unlock(&uc->lock);
    return 0;
  }
  dirty = uc->dev->table[cb.n].flags & FC_ENTRY_DIRTY;
  if (!dirty)
    uc_drop_locked(uc, cb);
  pthread_mutex_unlock(&uc->lock);
  STAT_ADD(&uc->stats, invalidations, 1);
  if (!dirty || uc_drop_dirty(uc, cb) == 0)
    return 0;
  STAT_ADD(&uc->stats, io_errors, 1);
  r = fc_cachedev_write(uc->dev, cb, 0, zeroes, uc->bs);
  if (r == 0)
    r = uc_mark_dirty(uc, cb);
  return r;
}

/* Whole blocks [first, first+n) of the origin zeroed where they are --
 * a hole where the client allows one -- rather than written: what makes
 * WRITE_ZEROES cheap and the origin sparse.  Like a trim, under the
 * blocks' stripes: clean copies dropped before the origin changes, dirty
 * ones after it succeeded (if it fails, the cache still holds them). */
static int
zero_blocks(struct fc_ucache *uc, uint64_t first, uint32_t n, bool may_trim,
            const char *zeroes)
{
  uint64_t off = first * uc->bs;
  uint32_t count = n * uc->bs;
  struct stripe_set set;
  int r = 0;

  uc_lock_stripes(uc, first, first + n - 1, &set);
  /* A change of the origin like a write: late copies are stale. */
  if (uc_layer_on(uc))
    r = uc_layer_changing(uc, first, n, off, count, UC_CHANGE_ORIGIN);
  if (!r) {
    drop_clean(uc, first, n, true);
    r = fc_origin_zero(uc->origin, count, off, may_trim);
    if (r)
      STAT_ADD(&uc->stats, io_errors, 1);
  }
  for (uint64_t b = first; !r && b < first + n; b++)
    r = zero_cached_block(uc, b, zeroes);
  uc_unlock_stripes(uc, &set);
  return r;
}

/* Zeroes written through the write path, at most a block at a time. */
static int
zero_by_writing(struct fc_ucache *uc, uint64_t off, uint64_t end,
                const char *zeroes, bool fua)
{
  int r = 0;

  while (off < end && !r) {
    uint32_t len = end - off < uc->bs ? (uint32_t)(end - off) : uc->bs;

    r = write_range(uc, zeroes, len, off, fua);
    off += len;
  }
  return r;
}

/* WRITE_ZEROES: the partial blocks at either end through the write path,
 * so that every policy treats their other bytes as for any write; the
 * whole blocks between zeroed at the origin (zero_blocks). */
int
uc_zero(void *handle, uint32_t count, uint64_t off, bool fua, bool may_trim)
{
  struct fc_ucache *uc = handle;
  uint64_t end = off + count;
  /* The whole blocks: [first, stop).  The origin's partial last block
   * is never one: the write path writes its part inside the origin. */
  uint64_t first = (off + uc->bs - 1) / uc->bs, stop = end / uc->bs;
  char *zeroes = calloc(1, uc->bs);
  int r = 0;

  if (!zeroes)
    return -ENOMEM;
  STAT_ADD(&uc->stats, writes, 1);
  STAT_ADD(&uc->stats, write_bytes, count);
  if (uc_layer_on(uc) && (r = uc_layer_before_change(uc)))
    goto out;
  uc_pause_gate(uc);
  if (first >= stop) {
    /* No whole block: a write, FUA and all. */
    r = zero_by_writing(uc, off, end, zeroes, fua);
    goto out;
  }
  r = zero_by_writing(uc, off, first * uc->bs, zeroes, false);
  while (!r && first < stop) {
    uint32_t n = stop - first < ZERO_CHUNK / uc->bs
                 ? (uint32_t)(stop - first) : ZERO_CHUNK / uc->bs;

    r = zero_blocks(uc, first, n, may_trim, zeroes);
    first += n;
  }
  if (!r)
    r = zero_by_writing(uc, stop * uc->bs, end, zeroes, false);
  /* As for a trim: the zeroes at the origin and whatever the cache holds
   * for the ends, durable together. */
  if (!r && fua)
    r = uc_flush(uc);
out:
  free(zeroes);
  return r;
}

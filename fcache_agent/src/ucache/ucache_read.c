/* SPDX-License-Identifier: Apache-2.0 */
/* The read path: hits served under the stripes, misses read from the
 * origin with no stripe held and installed only if nothing overtook them,
 * the prefetch (NBD_CMD_CACHE) built on it, and the source's
 * side-effect-free peek.  Separate from the write path:
 * it shares only the helpers of ucache_io.c with it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "ucache_io.h"
#include "ucache_layer.h"

/* Not waiting for the origin: the block was served in the first phase. */
#define NO_FILL UINT64_MAX
/* How long the origin's thread waits for a fill's stripes (fill_arrived). */
#define FILL_LOCK_WAIT_US 2000u

/* What a run of missed blocks [b, b+n) read from the origin (in tmp, which
 * is inside buf when `direct`) does once it arrived: its part of the
 * caller's buffer, and the blocks installed.  seq[i] is the stripe's
 * count when block b+i was found missing; a block is installed only if
 * its stripe's count is still that, so a write, trim or migration
 * install that overtook the origin read wins.  The read still returns
 * what the origin gave: it was concurrent with whatever overtook it.
 * With `may_wait` false (on the origin's own thread, where a stripe's
 * holder may be waiting for this very thread to read its reply) a stripe
 * still taken after FILL_LOCK_WAIT_US skips the installs: a skipped
 * install, like a failed one, only costs a future miss.  Readers hold
 * stripes for microseconds (a 1 MiB read's lookup takes all of them), so
 * the wait rarely runs out but for a holder that waits for the origin. */
static void
fill_arrived(struct fc_ucache *uc, char *buf, uint32_t count, uint64_t off,
             uint64_t b, uint32_t n, const uint64_t *seq, const char *tmp,
             bool direct, bool may_wait)
{
  struct stripe_set set;

  STAT_ADD(&uc->stats, origin_read_bytes,
           (uint64_t)(n - 1) * uc->bs + uc_block_bytes(uc, b + n - 1));
  STAT_ADD(&uc->stats, read_misses, n);
  if (!direct)
    for (uint32_t i = 0; i < n; i++) {
      struct seg s = seg_of(uc, b + i, off, count);

      memcpy(buf + s.in_buf, tmp + (size_t)i * uc->bs + s.in_block, s.len);
    }
  if (may_wait)
    uc_lock_stripes_to_read(uc, b, b + n - 1, &set);
  else if (!uc_lock_stripes_to_read_within(uc, b, b + n - 1,
                                           FILL_LOCK_WAIT_US, &set)) {
    STAT_ADD(&uc->stats, fills_skipped, n);
    return;
  }
  for (uint32_t i = 0; i < n; i++)
    /* A failed install only costs a future miss: the read succeeded. */
    if (uc_fill_allowed(uc, to_oblock(b + i), seq[i]))
      uc_install(uc, to_oblock(b + i), tmp + (size_t)i * uc->bs, false,
                 UC_READ_MISS);
  uc_unlock_stripes(uc, &set);
}

/* Is the run [b, b+n) wholly inside the caller's [off, off+count)? Then
 * the origin reads straight into the caller's buffer. */
static bool
run_is_direct(const struct fc_ucache *uc, uint32_t count, uint64_t off,
              uint64_t b, uint32_t n)
{
  uint64_t rstart = b * uc->bs;

  return rstart >= off && rstart + (uint64_t)n * uc->bs <= off + count;
}

/* Bytes of the run [b, b+n) inside the origin; the rest of tmp, past a
 * partial last block, is zeroed here (a run that reaches it is never
 * read into the caller's buffer directly: it ends past the request). */
static uint32_t
run_bytes(const struct fc_ucache *uc, char *tmp, uint64_t b, uint32_t n)
{
  uint32_t last = uc_block_bytes(uc, b + n - 1);

  if (last < uc->bs)
    memset(tmp + (size_t)(n - 1) * uc->bs + last, 0, uc->bs - last);
  return (n - 1) * uc->bs + last;
}

/* A run of missed blocks, read from the origin with no stripe held. */
static int
fill_run(struct fc_ucache *uc, char *buf, uint32_t count, uint64_t off,
         uint64_t b, uint32_t n, const uint64_t *seq)
{
  uint64_t rstart = b * uc->bs;
  bool direct = run_is_direct(uc, count, off, b, n);
  char *tmp = direct ? buf + (rstart - off) : malloc((size_t)n * uc->bs);
  int r;

  if (!tmp)
    return -ENOMEM;
  r = fc_origin_pread(uc->origin, tmp, run_bytes(uc, tmp, b, n), rstart);
  if (r == 0)
    fill_arrived(uc, buf, count, off, b, n, seq, tmp, direct, true);
  if (!direct)
    free(tmp);
  return r;
}

/* A run of missed blocks whose origin read ends on the origin's thread
 * (fc_origin_pread_async), which then finishes the caller's read. */
struct async_fill {
  struct fc_ucache *uc;
  char *buf;                    /* the caller's */
  uint32_t count;
  uint64_t off;
  uint64_t b;
  uint32_t n;
  bool direct;
  char *tmp;
  fc_io_done_fn *done;
  void *ctx;
  uint64_t seq[];               /* n of them, then tmp unless direct */
};

static void
async_fill_arrived(void *arg, int err)
{
  struct async_fill *f = arg;
  fc_io_done_fn *done = f->done;
  void *ctx = f->ctx;

  if (err == 0)
    fill_arrived(f->uc, f->buf, f->count, f->off, f->b, f->n, f->seq,
                 f->tmp, f->direct, false);
  free(f);
  done(ctx, err);
}

/* 0: started, done(ctx, err) ends the read.  -EAGAIN: the origin cannot
 * read asynchronously now; read it with fill_run.  Other -errno: failed. */
static int
fill_run_async(struct fc_ucache *uc, char *buf, uint32_t count, uint64_t off,
               uint64_t b, uint32_t n, const uint64_t *seq,
               fc_io_done_fn *done, void *ctx)
{
  bool direct = run_is_direct(uc, count, off, b, n);
  size_t extra = direct ? 0 : (size_t)n * uc->bs;
  struct async_fill *f = malloc(sizeof *f + n * sizeof *seq + extra);
  int r;

  if (!f)
    return -ENOMEM;
  *f = (struct async_fill){ .uc = uc, .buf = buf, .count = count,
                            .off = off, .b = b, .n = n, .direct = direct,
                            .done = done, .ctx = ctx };
  memcpy(f->seq, seq, n * sizeof *seq);
  f->tmp = direct ? buf + (b * uc->bs - off) : (char *)(f->seq + n);
  r = fc_origin_pread_async(uc->origin, f->tmp, run_bytes(uc, f->tmp, b, n),
                            b * uc->bs, async_fill_arrived, f);
  if (r)
    free(f);
  return r;
}

static int
read_hit(struct fc_ucache *uc, char *buf, uint32_t count, uint64_t off,
         uint64_t b, uint32_t *cbp)
{
  struct seg s = seg_of(uc, b, off, count);
  cblock_t cb = to_cblock(*cbp);
  int r = fc_cachedev_read(uc->dev, cb, s.in_block, buf + s.in_buf, s.len);

  if (r == 0) {
    STAT_ADD(&uc->stats, read_hits, 1);
    STAT_ADD(&uc->stats, cache_read_bytes, s.len);
    return 0;
  }
  STAT_ADD(&uc->stats, io_errors, 1);
  if (uc->dev->table[cb.n].flags & FC_ENTRY_DIRTY) {
    log_error("volume %s: cache device read error %d on dirty block %u: the only copy",
              uc_volume(uc), r, cb.n);
    return r;
  }
  /* A clean block has a good copy at the origin: drop ours and use that. */
  log_warning("volume %s: cache device read error %d on block %u, reading origin",
              uc_volume(uc), r, cb.n);
  uc_invalidate(uc, cbp, 1);
  return uc_origin_read(uc, buf + s.in_buf, s.len, s.start);
}

/* First phase of a read, under the stripes: serve hits and blocks
 * fetched from a migration source; leave in seq the misses to be filled
 * from the origin. */
static int
read_cached(struct fc_ucache *uc, char *buf, uint32_t count, uint64_t off,
            uint64_t first, uint32_t n, uint32_t *cbs, uint64_t *seq)
{
  struct stripe_set set;
  char *blk = NULL;
  int r = 0;

  uc_lock_stripes_to_read(uc, first, first + n - 1, &set);
  uc_lookup_and_pin(uc, first, n, cbs, true);
  for (uint32_t i = 0; i < n && !r; i++) {
    uint64_t b = first + i;
    struct seg s = seg_of(uc, b, off, count);

    seq[i] = NO_FILL;
    if (cbs[i] != CBLOCK_NONE) {
      r = read_hit(uc, buf, count, off, b, &cbs[i]);
    } else {
      if (uc_layer_serves_misses(uc)) {
        /* Incoming migration: the source may hold this block. */
        if (!blk && !(blk = malloc(uc->bs))) {
          r = -ENOMEM;
          break;
        }
        r = uc_layer_read_miss(uc, to_oblock(b), blk);
        if (r == 0) {
          memcpy(buf + s.in_buf, blk + s.in_block, s.len);
          STAT_ADD(&uc->stats, read_hits, 1);
          continue;
        }
        if (r < 0)
          break;
        r = 0;
      } else if (uc->stage) {
        if (!blk && !(blk = malloc(uc->bs))) {
          r = -ENOMEM;
          break;
        }
        if (uc_stage_read(uc, to_oblock(b), blk)) {
          memcpy(buf + s.in_buf, blk + s.in_block, s.len);
          continue;
        }
      }
      seq[i] = uc_stripe_seq(uc, to_oblock(b));
    }
  }
  uc_unpin(uc, cbs, n);
  uc_unlock_stripes(uc, &set);
  free(blk);
  return r;
}

/* Does no run of misses start at or after seq[j]? */
static bool
last_run(const uint64_t *seq, uint32_t j, uint32_t n)
{
  while (j < n && seq[j] == NO_FILL)
    j++;
  return j == n;
}

/* A read; with `done`, the read's last run of misses may end on the
 * origin's thread (uc_pread_start), else everything happens here.  0
 * when done here, 1 when pending, or -errno. */
static int
pread_any(struct fc_ucache *uc, char *buf, uint32_t count, uint64_t off,
          fc_io_done_fn *done, void *ctx)
{
  uint64_t first = off / uc->bs, last = (off + count - 1) / uc->bs;
  uint32_t n = (uint32_t)(last - first + 1);
  uint32_t stack_cbs[16], *cbs = n <= 16 ? stack_cbs : malloc(n * sizeof *cbs);
  uint64_t stack_seq[16], *seq = n <= 16 ? stack_seq : malloc(n * sizeof *seq);
  int r = 0;

  if (!cbs || !seq) {
    r = -ENOMEM;
    goto out;
  }
  STAT_ADD(&uc->stats, reads, 1);
  STAT_ADD(&uc->stats, read_bytes, count);
  if (uc_layer_on(uc)) {
    r = uc_layer_read(uc, buf, count, off);
    if (r <= 0)
      goto out;     /* served by the layer, or failed */
    if (r == UC_READ_ORIGIN) {
      /* The cache is not attached yet (a firepan_if copy). */
      STAT_ADD(&uc->stats, read_misses, n);
      r = uc_origin_read(uc, buf, count, off);
      goto out;
    }
    /* The gate above and the fetches from the source (read_cached) stay
     * on this thread; what is left to read from the origin may end on
     * the origin's thread like any miss: an install there is refused the
     * same way if a copy or a write overtook it (the stripe's sequence).
     * Kept synchronous, these misses made the first second after a
     * switchover slower than a cold start's (tools/run-demo.sh). */
  }
  r = read_cached(uc, buf, count, off, first, n, cbs, seq);
  for (uint32_t i = 0; i < n && !r;) {
    uint32_t j = i;

    while (j < n && seq[j] != NO_FILL)
      j++;
    if (j > i && done && last_run(seq, j, n)) {
      r = fill_run_async(uc, buf, count, off, first + i, j - i, seq + i,
                         done, ctx);
      if (r == 0) {
        r = 1;
        break;
      }
      if (r != -EAGAIN)
        break;
      r = 0;
    }
    if (j > i)
      r = fill_run(uc, buf, count, off, first + i, j - i, seq + i);
    i = j + 1;
  }
out:
  if (cbs != stack_cbs)
    free(cbs);
  if (seq != stack_seq)
    free(seq);
  return r;
}

/* Blocks of the largest read pread_nowait takes; a larger one is not
 * worth keeping the connection's reader busy for. */
#define NOWAIT_MAX_BLOCKS 64u

/* read_cached for a reader that must not wait (FC_IO_NOWAIT): -EAGAIN,
 * having changed nothing, wherever read_cached would wait -- for a
 * stripe, the cache device, a migration source -- or act on the staging
 * area (whose reads admit blocks).  The hits are not counted, and touched
 * only when every block hit (the read is then done): the caller does the
 * rest once the read goes on. */
static int
read_cached_nowait(struct fc_ucache *uc, char *buf, uint32_t count,
                   uint64_t off, uint64_t first, uint32_t n, uint32_t *cbs,
                   uint64_t *seq, uint32_t *hits, uint64_t *hit_bytes)
{
  struct stripe_set set;
  int r = 0;

  if (first + n > uc->nr_oblocks || uc->stage)
    return -EAGAIN;
  if (!uc_lock_stripes_to_read_within(uc, first, first + n - 1, 0, &set))
    return -EAGAIN;
  uc_lookup_and_pin(uc, first, n, cbs, false);
  for (uint32_t i = 0; i < n && !r; i++) {
    uint64_t b = first + i;
    struct seg s = seg_of(uc, b, off, count);

    seq[i] = NO_FILL;
    if (cbs[i] != CBLOCK_NONE) {
      /* Not in the page cache, or failed: the waiting read deals with
       * it (read_hit's recovery included). */
      if (fc_cachedev_read_nowait(uc->dev, to_cblock(cbs[i]), s.in_block,
                                  buf + s.in_buf, s.len) != 0) {
        r = -EAGAIN;
        break;
      }
      (*hits)++;
      *hit_bytes += s.len;
    } else if (uc_layer_serves_misses(uc)) {
      r = -EAGAIN;
    } else {
      seq[i] = uc_stripe_seq(uc, to_oblock(b));
    }
  }
  /* All hits: the read is done, and one lock both touches and unpins.
   * Some misses: the hits stay pinned for the caller, which touches them
   * only if it goes on (a read that falls back to waiting touches them
   * there; touched twice, a block read once would count as reused). */
  if (r == 0 && *hits == n)
    uc_unpin_and_touch(uc, first, n, cbs);
  else if (r != 0)
    uc_unpin(uc, cbs, n);
  uc_unlock_stripes(uc, &set);
  return r;
}

/* A read on the thread that reads the connection's requests: hits from
 * the page cache, and at most one run of misses -- the last -- started
 * at the origin to end on its thread.  0 when done, 1 when pending, or
 * -EAGAIN with nothing changed (every failure is one: the waiting read
 * that follows meets it again and deals with it). */
static int
pread_nowait(struct fc_ucache *uc, char *buf, uint32_t count, uint64_t off,
             fc_io_done_fn *done, void *ctx)
{
  uint64_t first = off / uc->bs, last = (off + count - 1) / uc->bs;
  uint32_t n = (uint32_t)(last - first + 1), hits = 0, i = 0, j;
  uint32_t cbs[NOWAIT_MAX_BLOCKS];
  uint64_t seq[NOWAIT_MAX_BLOCKS], hit_bytes = 0;
  int r = 0;

  if (n > NOWAIT_MAX_BLOCKS || uc_layer_on(uc) ||
      read_cached_nowait(uc, buf, count, off, first, n, cbs, seq, &hits,
                         &hit_bytes) != 0)
    return -EAGAIN;
  if (hits == n)
    goto counted;               /* touched and unpinned already */
  while (i < n && seq[i] == NO_FILL)
    i++;
  for (j = i; j < n && seq[j] != NO_FILL; j++)
    ;
  if (!last_run(seq, j, n)) {
    uc_unpin(uc, cbs, n);
    return -EAGAIN;             /* the first run would be read here */
  }
  if (j > i) {
    if (fill_run_async(uc, buf, count, off, first + i, j - i, seq + i,
                       done, ctx) != 0) {
      uc_unpin(uc, cbs, n);
      return -EAGAIN;
    }
    r = 1;                      /* buf is the end's now */
  }
  /* The hits as they were pinned, not what is cached by now: the run
   * filling meanwhile may already be in, and it was missed. */
  uc_unpin_and_touch(uc, first, n, cbs);
counted:
  STAT_ADD(&uc->stats, reads, 1);
  STAT_ADD(&uc->stats, read_bytes, count);
  STAT_ADD(&uc->stats, read_hits, hits);
  STAT_ADD(&uc->stats, cache_read_bytes, hit_bytes);
  return r;
}

int
uc_pread(void *handle, void *buf, uint32_t count, uint64_t off)
{
  return pread_any(handle, buf, count, off, NULL, NULL);
}

int
uc_pread_start(void *handle, void *buf, uint32_t count, uint64_t off,
               fc_io_done_fn *done, void *ctx, unsigned flags)
{
  if (flags & FC_IO_NOWAIT)
    return pread_nowait(handle, buf, count, off, done, ctx);
  return pread_any(handle, buf, count, off, done, ctx);
}

/* NBD_CMD_CACHE, a prefetch hint: read the range through the read path
 * and drop the data.  Misses are filled as any read miss (the admission
 * policy decides, and the reads count in the stats as the VM's), hits
 * cost a read of the cache device; the chunk bounds the memory. */
#define PREFETCH_CHUNK (1u << 20)

int
uc_cache(void *handle, uint32_t count, uint64_t off)
{
  uint32_t chunk = count < PREFETCH_CHUNK ? count : PREFETCH_CHUNK;
  void *buf = malloc(chunk);
  int r = 0;

  if (!buf)
    return -ENOMEM;
  while (count && !r) {
    uint32_t len = count < chunk ? count : chunk;

    r = uc_pread(handle, buf, len, off);
    off += len;
    count -= len;
  }
  free(buf);
  return r;
}

/* Misses are read from the origin under the stripes: this path serves a
 * few probe reads, not the VM, and must see no block change under it. */
int
fc_ucache_peek(struct fc_ucache *uc, void *vbuf, uint32_t count, uint64_t off)
{
  char *buf = vbuf;
  uint64_t first, last;
  uint32_t n, *cbs = NULL;
  struct stripe_set set;
  int r = 0;

  if (count == 0 || off > uc->origin->size || count > uc->origin->size - off)
    return -EINVAL;
  first = off / uc->bs;
  last = (off + count - 1) / uc->bs;
  n = (uint32_t)(last - first + 1);
  if (!(cbs = malloc(n * sizeof *cbs)))
    return -ENOMEM;
  uc_lock_stripes_to_read(uc, first, last, &set);
  uc_lookup_and_pin(uc, first, n, cbs, false);
  for (uint32_t i = 0; i < n && !r;) {
    struct seg s = seg_of(uc, first + i, off, count);
    uint32_t j = i + 1, len = s.len;

    if (cbs[i] != CBLOCK_NONE) {
      r = fc_cachedev_read(uc->dev, to_cblock(cbs[i]), s.in_block, buf + s.in_buf,
                           s.len);
      if (r && !(uc->dev->table[cbs[i]].flags & FC_ENTRY_DIRTY))
        r = fc_origin_pread(uc->origin, buf + s.in_buf, s.len, s.start);
      i = j;
      continue;
    }
    /* A run of misses is one origin read. */
    while (j < n && cbs[j] == CBLOCK_NONE)
      len += seg_of(uc, first + j++, off, count).len;
    r = fc_origin_pread(uc->origin, buf + s.in_buf, len, s.start);
    i = j;
  }
  uc_unpin(uc, cbs, n);
  uc_unlock_stripes(uc, &set);
  free(cbs);
  return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The composite origin of a move: requests and their routing by scheme
 * (doc/reference/storage-migration.rst has the rules of each).  The copier, the
 * switch and the fallback are in move_copy.c, AIO's duplicates in
 * move_aio.c.
 *
 * Every request takes mu: unrouted (no move) it only counts itself in
 * `passers`, so that a move starting or ending knows when nobody still
 * uses the origin it replaces; routed, it holds its grains (a range) for
 * the whole request, which is what keeps a decision taken from the
 * bitmap and the cursor true until the I/O is done, keeps the copier out
 * of them (LR's "requests for blocks being copied wait in a queue",
 * mirroring's "writes to the region being copied are held") and orders
 * overlapping writes the way a single disk would.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/enum_names.h"
#include "common/lockcheck.h"
#include "common/log.h"
#include "move_priv.h"

uint64_t
mv_now_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct move_origin *
mo(struct fc_origin *o)
{
  return (struct move_origin *)o;
}

static bool
overlaps(uint64_t lo1, uint64_t hi1, uint64_t lo2, uint64_t hi2)
{
  return lo1 <= hi2 && lo2 <= hi1;
}

bool
mv_claimed_locked(const struct move_origin *m, const struct mv_range *r)
{
  FC_ASSERT_HELD(&m->mu);
  return m->claimed && overlaps(r->lo, r->hi, m->claim_lo, m->claim_hi);
}

static bool
range_busy_locked(struct move_origin *m, const struct mv_range *r)
{
  FC_ASSERT_HELD(&m->mu);
  if (m->paused)
    return true;
  if (!r->reader && !r->passes_claim && mv_claimed_locked(m, r))
    return true;
  for (struct mv_range *x = m->ranges; x; x = x->next)
    if (!(r->reader && (x->reader || (r->reads_b ? x->b_settled : x->a_settled))) &&
        overlaps(r->lo, r->hi, x->lo, x->hi))
      return true;
  return false;
}

bool
mv_range_acquire_locked(struct move_origin *m, struct mv_range *r)
{
  FC_ASSERT_HELD(&m->mu);
  while (m->moving && range_busy_locked(m, r))
    pthread_cond_wait(&m->cond, &m->mu);
  if (!m->moving)
    return false;
  r->next = m->ranges;
  m->ranges = r;
  return true;
}

void
mv_range_release_locked(struct move_origin *m, struct mv_range *r)
{
  FC_ASSERT_HELD(&m->mu);
  for (struct mv_range **p = &m->ranges; *p; p = &(*p)->next)
    if (*p == r) {
      *p = r->next;
      break;
    }
  pthread_cond_broadcast(&m->cond);
}

void
mv_drain_locked(struct move_origin *m)
{
  FC_ASSERT_HELD(&m->mu);
  while (m->ranges || m->passers)
    pthread_cond_wait(&m->cond, &m->mu);
}

void
mv_claim_locked(struct move_origin *m, uint64_t lo, uint64_t hi)
{
  FC_ASSERT_HELD(&m->mu);
  /* New requests on these grains wait from now on; those in flight end. */
  m->claimed = true;
  m->claim_lo = lo;
  m->claim_hi = hi;
  m->claim_seq++;
  for (;;) {
    struct mv_range probe = { .lo = lo, .hi = hi };
    bool busy = false;

    for (struct mv_range *x = m->ranges; x; x = x->next)
      busy |= !x->reader && x->passed_claim != m->claim_seq &&
              overlaps(probe.lo, probe.hi, x->lo, x->hi);
    if (!busy)
      return;
    pthread_cond_wait(&m->cond, &m->mu);
  }
}

void
mv_unclaim_locked(struct move_origin *m)
{
  FC_ASSERT_HELD(&m->mu);
  m->claimed = false;
  pthread_cond_broadcast(&m->cond);
}

void
mv_b_failed_locked(struct move_origin *m, int r)
{
  FC_ASSERT_HELD(&m->mu);
  if (!m->b_error)
    m->b_error = r;
  pthread_cond_broadcast(&m->cond);
}

static void
count_io(struct move_origin *m, bool on_b, bool write, uint64_t n)
{
  pthread_mutex_lock(&m->mu);
  if (on_b)
    *(write ? &m->st.b_write : &m->st.b_read) += n;
  else
    *(write ? &m->st.a_write : &m->st.a_read) += n;
  pthread_mutex_unlock(&m->mu);
}

/* Under mu, with the grains held: where the newest data of grain g is. */
static bool
newest_on_b_locked(struct move_origin *m, uint64_t g)
{
  FC_ASSERT_HELD(&m->mu);
  switch (m->p.scheme) {
  case FC_MOVE_LR:
    return g < m->cursor || move_bitmap_test(&m->bm, g);
  case FC_MOVE_SLR:
    return g < m->cursor && move_bitmap_test(&m->bm, g);
  default:
    /* dbt writes A; mirror and aio write A whenever they write B (aio's
     * reads of B, request(), do not come here). */
    return false;
  }
}

/* AIO, under mu: does a read of grains [lo, hi] go to B?  The paper's
 * AIO (§5.2.2) serves I/O from the faster disk: a read wholly in the
 * copied region, where B holds A's data and every duplicate since, goes
 * to B when B has been writing faster (mv_aio_b_faster_locked, the same
 * judgement that picks the half a duplicate is acknowledged by).  The
 * cursor only grows, so the region stays copied for the whole read. */
static bool
aio_reads_b_locked(const struct move_origin *m, uint64_t hi)
{
  FC_ASSERT_HELD(&m->mu);
  return m->p.scheme == FC_MOVE_AIO && hi < m->cursor && mv_aio_b_faster_locked(m);
}

/* An AIO read of B, its grains held (every duplicate's half on B in
 * them written).  1 when B failed (the caller waits for the fallback
 * and retries). */
static int
read_b(struct move_origin *m, char *buf, uint32_t count, uint64_t off)
{
  int r = fc_origin_pread(m->b, buf, count, off);

  if (r) {
    pthread_mutex_lock(&m->mu);
    mv_b_failed_locked(m, r);
    pthread_mutex_unlock(&m->mu);
    return 1;
  }
  count_io(m, true, false, count);
  return 0;
}

/* A routed read, its grains held: runs of grains with their newest data
 * on the same side are one read each.  1 when B failed (the caller waits
 * for the fallback and retries). */
static int
read_routed(struct move_origin *m, char *buf, uint32_t count, uint64_t off)
{
  uint64_t end = off + count, pos = off;

  while (pos < end) {
    uint64_t g = pos / MOVE_GRAIN, stop;
    bool on_b;
    int r;

    pthread_mutex_lock(&m->mu);
    on_b = newest_on_b_locked(m, g);
    for (stop = (g + 1) * MOVE_GRAIN; stop < end &&
         newest_on_b_locked(m, stop / MOVE_GRAIN) == on_b; stop += MOVE_GRAIN)
      ;
    pthread_mutex_unlock(&m->mu);
    if (stop > end)
      stop = end;
    r = fc_origin_pread(on_b ? m->b : m->cur, buf + (pos - off),
                        (uint32_t)(stop - pos), pos);
    if (r && on_b) {
      pthread_mutex_lock(&m->mu);
      mv_b_failed_locked(m, r);
      pthread_mutex_unlock(&m->mu);
      return 1;
    }
    if (r)
      return r;
    count_io(m, on_b, false, stop - pos);
    pos = stop;
  }
  return 0;
}

/* A write to B alone (lr, slr): logged with its data first, because A
 * does not get it.  1 when B failed. */
static int
write_b_logged(struct move_origin *m, const void *buf, uint32_t count, uint64_t off,
               bool fua)
{
  int r = move_log_append(&m->log, buf, count, off);

  if (!r && fua)
    r = move_log_sync(&m->log);
  if (r)
    return r;
  r = fc_origin_pwrite(m->b, buf, count, off, fua);
  if (r) {
    pthread_mutex_lock(&m->mu);
    mv_b_failed_locked(m, r);
    pthread_mutex_unlock(&m->mu);
    return 1;
  }
  count_io(m, true, true, count);
  return 0;
}

/* LR: a write goes to B whole grains at a time where B does not hold the
 * grain yet, so that "B holds the newest" may be true of whole grains:
 * the rest of a partial grain is read first from where it is newest. */
static int
write_lr(struct move_origin *m, const char *buf, uint32_t count, uint64_t off, bool fua)
{
  uint64_t g0 = off / MOVE_GRAIN, g1 = (off + count - 1) / MOVE_GRAIN;
  uint64_t lo = g0 * MOVE_GRAIN, hi = (g1 + 1) * MOVE_GRAIN;
  char *whole;
  int r;

  if (hi > m->base.size)
    hi = m->base.size;
  if (lo == off && hi == off + count) {
    whole = NULL;
  } else {
    if (!(whole = malloc(hi - lo)))
      return -ENOMEM;
    r = 0;
    if (off > lo)
      r = read_routed(m, whole, (uint32_t)(hi - lo < MOVE_GRAIN ? hi - lo : MOVE_GRAIN), lo);
    if (!r && off + count < hi)
      r = read_routed(m, whole + (g1 - g0) * MOVE_GRAIN,
                      (uint32_t)(hi - g1 * MOVE_GRAIN), g1 * MOVE_GRAIN);
    if (r) {
      free(whole);
      return r;
    }
    memcpy(whole + (off - lo), buf, count);
  }
  r = whole ? write_b_logged(m, whole, (uint32_t)(hi - lo), lo, fua) :
              write_b_logged(m, buf, count, off, fua);
  free(whole);
  if (r)
    return r;
  pthread_mutex_lock(&m->mu);
  for (uint64_t g = g0; g <= g1; g++)
    if (g >= m->cursor)
      move_bitmap_set(&m->bm, g);
  pthread_mutex_unlock(&m->mu);
  return 0;
}

/* A routed write, its grains held.  1 when B failed. */
static int
write_routed(struct move_origin *m, const void *buf, uint32_t count, uint64_t off,
             bool fua)
{
  uint64_t g0 = off / MOVE_GRAIN, g1 = (off + count - 1) / MOVE_GRAIN, cursor;
  bool copied;
  int r;

  /* The cursor cannot pass these grains while they are held: the
   * copier's next claim waits for them. */
  pthread_mutex_lock(&m->mu);
  m->st.vm_write += count;
  cursor = m->cursor;
  copied = g0 < cursor;
  pthread_mutex_unlock(&m->mu);

  switch (m->p.scheme) {
  case FC_MOVE_LR:
    return write_lr(m, buf, count, off, fua);
  case FC_MOVE_SLR:
    /* The copied region's part of a write goes to B and is recorded,
     * the rest to A, which the copier will copy from. */
    if (copied && g1 < cursor) {
      r = write_b_logged(m, buf, count, off, fua);
      if (r)
        return r;
      pthread_mutex_lock(&m->mu);
      for (uint64_t g = g0; g <= g1; g++)
        move_bitmap_set(&m->bm, g);
      pthread_mutex_unlock(&m->mu);
      return 0;
    }
    if (copied) {
      /* Straddles the cursor: the copied part to B, the rest to A. */
      uint64_t split = cursor * MOVE_GRAIN;
      uint32_t low = (uint32_t)(split - off);

      r = write_routed(m, buf, low, off, fua);
      pthread_mutex_lock(&m->mu);
      m->st.vm_write -= low;
      pthread_mutex_unlock(&m->mu);
      if (r)
        return r;
      r = fc_origin_pwrite(m->cur, (const char *)buf + low, count - low, split, fua);
      if (!r)
        count_io(m, false, true, count - low);
      return r;
    }
    r = fc_origin_pwrite(m->cur, buf, count, off, fua);
    if (!r)
      count_io(m, false, true, count);
    return r;
  case FC_MOVE_MIRROR: {
    int rb;

    if (!copied) {
      r = fc_origin_pwrite(m->cur, buf, count, off, fua);
      goto a_only;
    }
    /* To A and B at once, the whole request, even a part above the
     * cursor: the copier writes the same data there later.  (A write to
     * the chunk being copied waited for the copy, its claim: it is in
     * the copied region now, as the paper holds it.) */
    r = mv_mirror_write(m, buf, count, off, fua, &rb);
    if (!r)
      count_io(m, false, true, count);
    if (!rb)
      count_io(m, true, true, count);
    if (rb || r) {
      /* B failed; or A did and B did not, which would leave B with a
       * write A lacks, in a region the copier does not copy again.
       * Either way the move falls back to a consistent A, and the write
       * is tried again there. */
      pthread_mutex_lock(&m->mu);
      mv_b_failed_locked(m, rb ? rb : -EIO);
      pthread_mutex_unlock(&m->mu);
      return 1;
    }
    return 0;
  }
  default:                      /* dbt */
    r = fc_origin_pwrite(m->cur, buf, count, off, fua);
    if (r)
      return r;
    count_io(m, false, true, count);
    pthread_mutex_lock(&m->mu);
    for (uint64_t g = g0; g <= g1 && g < m->cursor; g++)
      move_bitmap_set(&m->bm, g);
    pthread_mutex_unlock(&m->mu);
    return 0;
  }
a_only:
  if (!r)
    count_io(m, false, true, count);
  return r;
}

/* A request no move routes passes through to the current origin: from
 * passer_enter_locked(), which gives it that origin, to passer_leave() it
 * counts in `passers`, so that a move starting (its copier reads only
 * after what is on its way to A) or ending waits until it is done. */
static struct fc_origin *
passer_enter_locked(struct move_origin *m)
{
  FC_ASSERT_HELD(&m->mu);
  m->passers++;
  return m->cur;
}

static void
passer_leave_locked(struct move_origin *m)
{
  FC_ASSERT_HELD(&m->mu);
  if (--m->passers == 0)
    pthread_cond_broadcast(&m->cond);
}

static void
passer_leave(struct move_origin *m)
{
  pthread_mutex_lock(&m->mu);
  passer_leave_locked(m);
  pthread_mutex_unlock(&m->mu);
}

/* For the operations a move does not route (trim, zero, block status):
 * once no pause holds them, true with *cur the origin to use, a passer
 * until passer_leave(); false while a move runs.  mu is not held on
 * return. */
static bool
pass_unrouted(struct move_origin *m, struct fc_origin **cur)
{
  bool pass;

  pthread_mutex_lock(&m->mu);
  while (m->paused)
    pthread_cond_wait(&m->cond, &m->mu);
  pass = !m->moving;
  if (pass)
    *cur = passer_enter_locked(m);
  pthread_mutex_unlock(&m->mu);
  return pass;
}

enum req_kind { REQ_READ, REQ_WRITE };

/* One request: unrouted when no move runs, else routed; retried
 * unrouted when B failed under it and the move fell back to A. */
static int
request(struct move_origin *m, enum req_kind kind, void *buf, uint32_t count,
        uint64_t off, bool fua)
{
  struct mv_range range;
  struct fc_origin *o;
  int r;

  if (count == 0)
    return 0;
  for (;;) {
    pthread_mutex_lock(&m->mu);
    while (m->paused)
      pthread_cond_wait(&m->cond, &m->mu);
    if (!m->moving) {
      o = passer_enter_locked(m);
      pthread_mutex_unlock(&m->mu);
      r = kind == REQ_READ ? fc_origin_pread(o, buf, count, off) :
                             fc_origin_pwrite(o, buf, count, off, fua);
      passer_leave(m);
      return r;
    }
    if (kind == REQ_WRITE && m->p.scheme == FC_MOVE_AIO) {
      pthread_mutex_unlock(&m->mu);
      r = mv_aio_write(m, buf, count, off, fua);
      if (r == 1)
        continue;
      return r;
    }
    range.lo = off / MOVE_GRAIN;
    range.hi = (off + count - 1) / MOVE_GRAIN;
    range.reader = kind == REQ_READ;
    range.a_settled = range.b_settled = range.passes_claim = false;
    range.reads_b = range.reader && aio_reads_b_locked(m, range.hi);
    range.passed_claim = 0;
    if (!mv_range_acquire_locked(m, &range)) {
      pthread_mutex_unlock(&m->mu);
      continue;
    }
    pthread_mutex_unlock(&m->mu);
    if (range.reads_b)
      r = read_b(m, buf, count, off);
    else
      r = kind == REQ_READ ? read_routed(m, buf, count, off) :
                             write_routed(m, buf, count, off, fua);
    pthread_mutex_lock(&m->mu);
    mv_range_release_locked(m, &range);
    if (r != 1) {
      pthread_mutex_unlock(&m->mu);
      return r;
    }
    /* B failed: the copier makes A whole again; then this is served
     * from A like any request after the move. */
    while (m->moving)
      pthread_cond_wait(&m->cond, &m->mu);
    pthread_mutex_unlock(&m->mu);
  }
}

static int
mv_pread(struct fc_origin *o, void *buf, uint32_t count, uint64_t off)
{
  return request(mo(o), REQ_READ, buf, count, off, false);
}

/* An unrouted read passing through asynchronously: a passer until its
 * end, like a synchronous one. */
struct mv_async {
  struct move_origin *m;
  fc_origin_done_fn *done;
  void *ctx;
};

static void
mv_async_done(void *arg, int err)
{
  struct mv_async a = *(struct mv_async *)arg;

  free(arg);
  passer_leave(a.m);
  a.done(a.ctx, err);
}

/* Only while no move runs: a routed read decides from the bitmap under
 * its grains, which it would have to hold until the end arrives on the
 * origin's thread; the caller reads synchronously instead. */
static int
mv_pread_async(struct fc_origin *o, void *buf, uint32_t count, uint64_t off,
               fc_origin_done_fn *done, void *ctx)
{
  struct move_origin *m = mo(o);
  struct mv_async *a;
  struct fc_origin *cur;
  int r;

  if (count == 0)
    return -EAGAIN;
  if (!(a = malloc(sizeof *a)))
    return -ENOMEM;
  *a = (struct mv_async){ .m = m, .done = done, .ctx = ctx };
  pthread_mutex_lock(&m->mu);
  if (m->paused || m->moving) {
    pthread_mutex_unlock(&m->mu);
    free(a);
    return -EAGAIN;
  }
  cur = passer_enter_locked(m);
  pthread_mutex_unlock(&m->mu);
  r = fc_origin_pread_async(cur, buf, count, off, mv_async_done, a);
  if (r) {
    free(a);
    passer_leave(m);
  }
  return r;
}

static int
mv_pwrite(struct fc_origin *o, const void *buf, uint32_t count, uint64_t off, bool fua)
{
  return request(mo(o), REQ_WRITE, (void *)buf, count, off, fua);
}

static int
mv_flush(struct fc_origin *o)
{
  struct move_origin *m = mo(o);
  struct fc_origin *a, *b;
  bool logging;
  int r;

  for (;;) {
    pthread_mutex_lock(&m->mu);
    while (m->paused)
      pthread_cond_wait(&m->cond, &m->mu);
    if (!m->moving) {
      a = passer_enter_locked(m);
      pthread_mutex_unlock(&m->mu);
      r = fc_origin_flush(a);
      passer_leave(m);
      return r;
    }
    /* AIO: a flush covers every write acknowledged before it, their
     * second halves included. */
    while (m->moving && m->pending)
      pthread_cond_wait(&m->cond, &m->mu);
    if (!m->moving) {
      pthread_mutex_unlock(&m->mu);
      continue;
    }
    r = m->a_error;
    m->a_error = 0;
    a = passer_enter_locked(m);
    b = m->b;
    logging = m->logging;
    pthread_mutex_unlock(&m->mu);
    /* The log first: what only B has must be recoverable before a
     * flush says it is durable. */
    if (!r && logging)
      r = move_log_sync(&m->log);
    if (!r)
      r = fc_origin_flush(a);
    if (!r && fc_origin_flush(b) != 0) {
      /* B failed: once the copier has made A whole, flush A instead. */
      pthread_mutex_lock(&m->mu);
      mv_b_failed_locked(m, -EIO);
      passer_leave_locked(m);
      while (m->moving)
        pthread_cond_wait(&m->cond, &m->mu);
      pthread_mutex_unlock(&m->mu);
      continue;
    }
    passer_leave(m);
    return r;
  }
}

/* A hint: while a move runs a discard is dropped (reads of a trimmed
 * range may return anything, its old data included), so no scheme needs
 * a rule for it. */
static int
mv_trim(struct fc_origin *o, uint32_t count, uint64_t off)
{
  struct move_origin *m = mo(o);
  struct fc_origin *a;
  int r;

  if (!pass_unrouted(m, &a))
    return 0;
  r = fc_origin_trim(a, count, off);
  passer_leave(m);
  return r;
}

/* Not a hint: the zeroes must be in whichever origin a read goes to.
 * While a move runs, -EOPNOTSUPP has fc_origin_zero write them through
 * mv_pwrite, which knows where a change must go; otherwise the current
 * origin zeroes them its own way. */
static int
mv_zero(struct fc_origin *o, uint32_t count, uint64_t off, bool may_trim)
{
  struct move_origin *m = mo(o);
  struct fc_origin *a;
  int r;

  if (!pass_unrouted(m, &a))
    return -EOPNOTSUPP;
  r = fc_origin_zero(a, count, off, may_trim);
  passer_leave(m);
  return r;
}

/* During a move everything is data: the map of two origins half copied
 * is not worth merging for a hint. */
static int
mv_block_status(struct fc_origin *o, uint32_t count, uint64_t off,
                struct fc_origin_extent *ext, uint32_t max)
{
  struct move_origin *m = mo(o);
  struct fc_origin *a;
  int r;

  if (!pass_unrouted(m, &a))
    return fc_origin_block_status_unknown(count, ext);
  r = fc_origin_block_status(a, count, off, ext, max);
  passer_leave(m);
  return r;
}

/* A live migration's source, frozen: whatever it writes to gives way. */
static int
mv_release(struct fc_origin *o)
{
  struct move_origin *m = mo(o);
  int r;

  pthread_mutex_lock(&m->mu);
  r = fc_origin_release(m->cur);
  if (r == 0 && m->moving)
    r = fc_origin_release(m->b);
  pthread_mutex_unlock(&m->mu);
  return r;
}

static void
mv_invalidate(struct fc_origin *o)
{
  struct move_origin *m = mo(o);

  pthread_mutex_lock(&m->mu);
  fc_origin_invalidate(m->cur);
  if (m->moving)
    fc_origin_invalidate(m->b);
  pthread_mutex_unlock(&m->mu);
}

/* Not while a move runs: A and B would have to grow together. */
static int
mv_size_now(struct fc_origin *o, uint64_t *size)
{
  struct move_origin *m = mo(o);
  int r;

  pthread_mutex_lock(&m->mu);
  if (m->moving) {
    r = -EBUSY;
  } else {
    r = fc_origin_size_now(m->cur, size);
    /* The current origin's own size follows: this composite is its only
     * user. */
    if (!r && *size > m->cur->size)
      m->cur->size = *size;
  }
  pthread_mutex_unlock(&m->mu);
  return r;
}

static void
mv_close(struct fc_origin *o)
{
  struct move_origin *m = mo(o);

  fc_origin_move_abort(o);
  move_bitmap_free(&m->bm);
  fc_origin_close(m->cur);
  pthread_cond_destroy(&m->cond);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static const struct fc_origin_ops move_ops = {
  .pread = mv_pread,
  .pread_async = mv_pread_async,
  .pwrite = mv_pwrite,
  .flush = mv_flush,
  .trim = mv_trim,
  .zero = mv_zero,
  .block_status = mv_block_status,
  .release = mv_release,
  .invalidate = mv_invalidate,
  .size_now = mv_size_now,
  .close = mv_close,
};

int
fc_origin_move_wrap(struct fc_origin *cur, struct fc_origin **out)
{
  struct move_origin *m = calloc(1, sizeof *m);

  if (!m) {
    fc_origin_close(cur);
    return -ENOMEM;
  }
  m->base.ops = &move_ops;
  m->base.size = cur->size;
  /* fc_origin_trim asks this; the current origin's answer is in mv_trim. */
  m->base.can_trim = true;
  m->cur = cur;
  m->log.fd = -1;
  pthread_mutex_init(&m->mu, NULL);
  pthread_cond_init(&m->cond, NULL);
  *out = &m->base;
  return 0;
}

bool
fc_origin_is_move(const struct fc_origin *o)
{
  return o && o->ops == &move_ops;
}

static int
check_params(const struct fc_move_params *p, char *err, size_t errlen)
{
  if ((unsigned)p->scheme >= FC_MOVE_NR_SCHEMES) {
    snprintf(err, errlen, "unknown scheme");
    return -EINVAL;
  }
  if (mv_scheme_is_dbt(p->scheme) && p->max_rounds < 1) {
    snprintf(err, errlen, "max_rounds must be at least 1");
    return -EINVAL;
  }
  if (p->scheme == FC_MOVE_AIO && p->aio_threshold < 1) {
    snprintf(err, errlen, "aio_threshold must be at least 1");
    return -EINVAL;
  }
  if (mv_scheme_logs(p->scheme) && (!p->log_path || !p->log_path[0])) {
    snprintf(err, errlen, "scheme %s needs a recovery log",
             fc_move_scheme_name(p->scheme));
    return -EINVAL;
  }
  return 0;
}

int
fc_origin_move_start(struct fc_origin *o, struct fc_origin *to,
                     const struct fc_move_params *p, char *err, size_t errlen)
{
  struct move_origin *m = mo(o);
  int r;

  if ((r = check_params(p, err, errlen)))
    goto fail;
  if (to->size < o->size) {
    snprintf(err, errlen, "the destination holds %llu bytes, less than the "
             "volume's %llu", (unsigned long long)to->size,
             (unsigned long long)o->size);
    r = -EINVAL;
    goto fail;
  }
  pthread_mutex_lock(&m->mu);
  if (m->moving) {
    pthread_mutex_unlock(&m->mu);
    snprintf(err, errlen, "a move of this volume is already running");
    r = -EBUSY;
    goto fail;
  }
  pthread_mutex_unlock(&m->mu);
  /* The copier of the last move, ended: its status is replaced now. */
  if (m->thread_running) {
    pthread_join(m->thread, NULL);
    m->thread_running = false;
  }

  /* Nothing routes yet: the state is the copier's and ours alone. */
  m->nr_grains = (o->size + MOVE_GRAIN - 1) / MOVE_GRAIN;
  move_bitmap_free(&m->bm);
  if ((r = move_bitmap_init(&m->bm, m->nr_grains))) {
    snprintf(err, errlen, "no memory for the move's bitmap");
    goto fail;
  }
  m->p = *p;
  snprintf(m->log_path, sizeof m->log_path, "%s", p->log_path ? p->log_path : "");
  snprintf(m->a_uri, sizeof m->a_uri, "%s", p->a_uri ? p->a_uri : "");
  m->p.log_path = m->log_path;
  m->p.a_uri = m->a_uri;
  /* lr, slr, aio: some acknowledged writes may be on B alone. */
  m->logging = mv_scheme_logs(p->scheme);
  if (m->logging && (r = move_log_create(&m->log, m->log_path, m->a_uri,
                                         p->b_uri ? p->b_uri : "", p->scheme))) {
    snprintf(err, errlen, "cannot create the recovery log %s: %s", m->log_path,
             strerror(-r));
    m->logging = false;
    goto fail_bm;
  }
  m->cursor = 0;
  m->b_error = m->a_error = 0;
  m->stop = false;
  m->pending = 0;
  m->aio_draining = false;
  m->lat_a_ns = m->lat_b_ns = 0;
  m->first_copy_bytes = 0;
  m->held_bytes = m->held_ns = m->last_dirty = 0;
  m->stalled_rounds = 0;
  memset(&m->st, 0, sizeof m->st);
  m->st.scheme = p->scheme;
  m->st.state = FC_MOVE_COPYING;
  m->st.bytes_total = o->size;
  m->start_ns = mv_now_ns();
  m->b = to;
  if (p->scheme == FC_MOVE_AIO && (r = mv_aio_start(m))) {
    snprintf(err, errlen, "cannot start the AIO thread: %s", strerror(-r));
    goto fail_log;
  }
  if (mv_scheme_uses_bwriters(p->scheme) && (r = mv_bwriters_start(m))) {
    snprintf(err, errlen, "cannot start the writers to the destination: %s",
             strerror(-r));
    goto fail_log;
  }
  pthread_mutex_lock(&m->mu);
  m->moving = true;
  /* Requests already on their way to A alone finish before the copier
   * reads anything. */
  while (m->passers)
    pthread_cond_wait(&m->cond, &m->mu);
  r = pthread_create(&m->thread, NULL, mv_copier, m);
  if (r) {
    m->moving = false;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->mu);
    mv_aio_stop(m);
    mv_bwriters_stop(m);
    snprintf(err, errlen, "cannot start the copier: %s", strerror(r));
    r = -r;
    goto fail_log;
  }
  m->thread_running = true;
  pthread_mutex_unlock(&m->mu);
  return 0;

fail_log:
  m->b = NULL;
  m->st.state = FC_MOVE_NONE;
  if (m->logging) {
    move_log_close(&m->log);
    unlink(m->log_path);
    m->logging = false;
  }
fail_bm:
  move_bitmap_free(&m->bm);
fail:
  fc_origin_close(to);
  return r;
}

int
fc_origin_move_abort(struct fc_origin *o)
{
  struct move_origin *m = mo(o);
  bool running;

  /* Called by one owner at a time (the volume's control path, or its
   * close): thread_running is not raced. */
  pthread_mutex_lock(&m->mu);
  running = m->moving;
  m->stop = running;
  /* A target that stopped answering must not hold the abort (nor the
   * VM's writes routed to it) until its stall limit: what waits on it
   * fails now, and the move falls back to A as for a failed B.  B stays
   * valid while m->mu is held (the copier clears it under m->mu). */
  if (running && m->b)
    fc_origin_cancel(m->b);
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->mu);
  if (m->thread_running) {
    pthread_join(m->thread, NULL);
    m->thread_running = false;
  }
  return running ? 0 : -ENOENT;
}

bool
fc_origin_move_running(struct fc_origin *o)
{
  struct move_origin *m = mo(o);
  bool r;

  pthread_mutex_lock(&m->mu);
  r = m->moving;
  pthread_mutex_unlock(&m->mu);
  return r;
}

void
fc_origin_move_status(struct fc_origin *o, struct fc_move_status *st)
{
  struct move_origin *m = mo(o);
  uint64_t done_vm, written;

  pthread_mutex_lock(&m->mu);
  *st = m->st;
  if (m->moving) {
    uint64_t ns = mv_now_ns() - m->start_ns, left;

    st->elapsed_ms = ns / 1000000;
    st->dirty_bytes = mv_scheme_is_dbt(m->p.scheme) ? m->bm.set * MOVE_GRAIN : 0;
    left = st->bytes_total - st->bytes_copied + st->dirty_bytes;
    st->eta_s = st->bytes_copied && ns ?
        (uint64_t)((double)left / ((double)st->bytes_copied / ((double)ns / 1e9))) : 0;
  }
  /* Whatever was written beyond one write per VM write and one copy of
   * each block the VM did not write first. */
  done_vm = st->vm_write + m->first_copy_bytes;
  written = st->a_write + st->b_write;
  st->redundant_write = written > done_vm ? written - done_vm : 0;
  pthread_mutex_unlock(&m->mu);
}

static const char *const scheme_names[] = { "dbt", "mirror", "lr", "slr", "aio",
                                            "dbt_capped" };
static const char *const state_names[] = { "none", "copying", "switching", "done",
                                           "failed", "aborted" };
_Static_assert(FC_NAMES_COUNT(scheme_names) == FC_MOVE_NR_SCHEMES,
               "a move scheme without a name");
_Static_assert(FC_NAMES_COUNT(state_names) == FC_MOVE_ABORTED + 1,
               "a move state without a name");

FC_DEFINE_ENUM_NAMES(fc_move_scheme, enum fc_move_scheme, scheme_names)

const char *
fc_move_state_name(enum fc_move_state s)
{
  return fc_enum_name(state_names, FC_NAMES_COUNT(state_names), s);
}

int
fc_origin_move_recover(const char *log_path, const char *a_uri, struct fc_origin *a,
                       struct fc_move_recovered *out, char *err, size_t errlen)
{
  struct move_log_info info;
  int matches, r = move_log_replay(log_path, a_uri, a, &matches, &info);

  memset(out, 0, sizeof *out);
  if (r >= 0 && matches) {
    out->found = true;
    out->scheme = (enum fc_move_scheme)info.scheme;     /* checked: lr..aio */
    snprintf(out->to, sizeof out->to, "%s", info.b_uri);
  }

  if (r == -ENOENT)
    return 0;
  if (r == -EPROTONOSUPPORT) {
    /* Not read as lr: the log of a scheme this agent does not know may
     * hold writes that are on neither side yet, or on both. */
    out->found = false;
    snprintf(err, errlen, "the recovery log %s of a move from %s names move "
             "scheme %u, which this agent does not know (it replays lr, slr "
             "and aio logs: a newer agent's log, or a damaged one); it is not "
             "replayed and is kept, and the volume is not served until an agent "
             "that knows the scheme starts", log_path, a_uri, info.scheme);
    log_error("%s", err);
    return r;
  }
  if (r < 0) {
    snprintf(err, errlen, "cannot replay the recovery log %s to %s: %s; it is "
             "kept for the next start", log_path, a_uri, strerror(-r));
    return r;
  }
  unlink(log_path);
  return r;
}

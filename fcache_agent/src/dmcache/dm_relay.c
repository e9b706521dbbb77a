/* SPDX-License-Identifier: Apache-2.0 */
/* The relay's source side (dm_relay.h): the kernel's reads of the
 * destination's cache blocks, mapped to origin blocks and fetched from
 * the source, many in flight from few threads. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "dm_relay.h"

/* The kernel's largest request (dm_nbd.c refuses a smaller maximum). */
#define RELAY_MAX_REQUEST (32u << 20)

struct dm_relay {
  char *volume;
  uint32_t bs;
  uint64_t nr_blocks;
  uint64_t *oblock;
  unsigned max_inflight;
  dm_relay_fetch_fn *fetch;
  void *fetch_ctx;

  pthread_mutex_t lock;
  pthread_cond_t cond;          /* a fetch ended: room for another */
  struct dm_relay_stats st;
};

/* One of the kernel's reads: ends when its last fetch does. */
struct relay_read {
  struct dm_relay *r;
  fc_io_done_fn *done;
  void *ctx;
  unsigned pending;             /* fetches not ended, plus the starter's hold */
  int err;
};

/* One block of a read, fetched into the read's buffer when the read
 * covers it whole, else into bounce and copied from [skip, skip+len). */
struct relay_fetch {
  struct relay_read *rd;
  char *dst;
  uint32_t skip, len;
  uint64_t cblock, ob;
  uint8_t *bounce;
  uint64_t t0;                  /* now_ns() when started */
};

static uint64_t
now_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int
dm_relay_new(const struct dm_relay_params *p, struct dm_relay **out)
{
  struct dm_relay *r;

  if (p->block_size < 512 || p->block_size % 512 || p->block_size > (1u << 30) ||
      !p->nr_blocks || p->nr_blocks > UINT64_MAX / p->block_size || !p->max_inflight ||
      !p->fetch)
    return -EINVAL;
  if (!(r = calloc(1, sizeof *r)))
    return -ENOMEM;
  r->volume = strdup(p->volume ? p->volume : "-");
  r->oblock = malloc(p->nr_blocks * sizeof *r->oblock);
  if (!r->volume || !r->oblock) {
    free(r->volume);
    free(r->oblock);
    free(r);
    return -ENOMEM;
  }
  memcpy(r->oblock, p->oblock, p->nr_blocks * sizeof *r->oblock);
  r->bs = p->block_size;
  r->nr_blocks = p->nr_blocks;
  r->max_inflight = p->max_inflight;
  r->fetch = p->fetch;
  r->fetch_ctx = p->fetch_ctx;
  pthread_mutex_init(&r->lock, NULL);
  pthread_cond_init(&r->cond, NULL);
  *out = r;
  return 0;
}

void
dm_relay_free(struct dm_relay *r)
{
  if (!r)
    return;
  pthread_cond_destroy(&r->cond);
  pthread_mutex_destroy(&r->lock);
  free(r->oblock);
  free(r->volume);
  free(r);
}

void
dm_relay_stats(struct dm_relay *r, struct dm_relay_stats *out)
{
  pthread_mutex_lock(&r->lock);
  *out = r->st;
  pthread_mutex_unlock(&r->lock);
}

/* Drop one of rd's pending: true when that was the last, and rd is the
 * caller's to end. */
static bool
read_put_locked(struct relay_read *rd, int err)
{
  if (err && !rd->err)
    rd->err = err;
  return --rd->pending == 0;
}

static void
fetch_ended(void *arg, int err, bool dirty)
{
  struct relay_fetch *f = arg;
  struct relay_read *rd = f->rd;
  struct dm_relay *r = rd->r;
  bool last;

  (void)dirty;        /* the restored metadata has the block's dirty bit */
  if (!err && f->bounce)
    memcpy(f->dst, f->bounce + f->skip, f->len);
  if (err)
    /* -ENOENT: the source does not hold a block its own frozen metadata
     * mapped; timeouts and a lost source alike: never zeros, an error. */
    log_warning("volume %s: relay: cache block %llu (origin block %llu) could not be "
                "fetched from the source: %s", r->volume, (unsigned long long)f->cblock,
                (unsigned long long)f->ob, strerror(-err));
  pthread_mutex_lock(&r->lock);
  r->st.inflight--;
  if (err)
    r->st.fetch_errors++;
  else {
    r->st.fetched++;
    uint64_t ns = now_ns() - f->t0;

    r->st.fetch_ns += ns;
    if (!r->st.fetch_ns_min || ns < r->st.fetch_ns_min)
      r->st.fetch_ns_min = ns;
  }
  pthread_cond_signal(&r->cond);
  last = read_put_locked(rd, err ? -EIO : 0);
  pthread_mutex_unlock(&r->lock);
  free(f->bounce);
  free(f);
  if (last) {
    rd->done(rd->ctx, rd->err);
    free(rd);
  }
}

/* Start fetching block c of the read (its bytes [skip, skip+len) go to
 * dst), waiting for room first.  Under r->lock; 0, or -errno with
 * nothing started. */
static int
fetch_start_locked(struct dm_relay *r, struct relay_read *rd, uint64_t c, char *dst,
                   uint32_t skip, uint32_t len)
{
  struct relay_fetch *f = calloc(1, sizeof *f);
  int e;

  if (!f)
    return -ENOMEM;
  if (len < r->bs && !(f->bounce = malloc(r->bs))) {
    free(f);
    return -ENOMEM;
  }
  *f = (struct relay_fetch){ .rd = rd, .dst = dst, .skip = skip, .len = len, .cblock = c,
                             .ob = r->oblock[c], .bounce = f->bounce };
  while (r->st.inflight >= r->max_inflight)
    pthread_cond_wait(&r->cond, &r->lock);
  r->st.inflight++;
  if (r->st.inflight > r->st.inflight_peak)
    r->st.inflight_peak = r->st.inflight;
  rd->pending++;
  pthread_mutex_unlock(&r->lock);
  f->t0 = now_ns();
  e = r->fetch(r->fetch_ctx, to_oblock(f->ob), f->bounce ? f->bounce : (uint8_t *)dst, true,
               fetch_ended, f);
  pthread_mutex_lock(&r->lock);
  if (!e)
    return 0;
  log_warning("volume %s: relay: cannot fetch cache block %llu (origin block %llu) from the "
              "source: %s", r->volume, (unsigned long long)c, (unsigned long long)f->ob,
              strerror(-e));
  r->st.inflight--;
  r->st.fetch_errors++;
  rd->pending--;
  pthread_cond_signal(&r->cond);
  free(f->bounce);
  free(f);
  return -EIO;
}

static int
relay_pread_start(void *handle, void *vbuf, uint32_t count, uint64_t offset, fc_io_done_fn *done,
                  void *ctx, unsigned flags)
{
  struct dm_relay *r = handle;
  char *buf = vbuf;
  uint64_t first = offset / r->bs, end = (offset + count + r->bs - 1) / r->bs;
  struct relay_read *rd;
  uint64_t zeros = 0;
  bool mapped = false, last;
  int err = 0;

  if (!count || offset + count > r->nr_blocks * r->bs)
    return -EINVAL;
  for (uint64_t c = first; c < end && !mapped; c++)
    mapped = r->oblock[c] != DM_RELAY_UNMAPPED;
  if (mapped && (flags & FC_IO_NOWAIT))
    return -EAGAIN;             /* a fetch may wait: the NBD layer hands it on */
  if (!mapped) {
    memset(buf, 0, count);
    pthread_mutex_lock(&r->lock);
    r->st.reads++;
    r->st.zero_blocks += end - first;
    pthread_mutex_unlock(&r->lock);
    return 0;
  }
  if (!(rd = calloc(1, sizeof *rd)))
    return -ENOMEM;
  *rd = (struct relay_read){ .r = r, .done = done, .ctx = ctx, .pending = 1 };
  pthread_mutex_lock(&r->lock);
  r->st.reads++;
  for (uint64_t c = first; c < end && !err; c++) {
    uint64_t lo = c * r->bs > offset ? c * r->bs : offset;
    uint64_t hi = (c + 1) * r->bs < offset + count ? (c + 1) * r->bs : offset + count;
    char *dst = buf + (lo - offset);

    if (r->oblock[c] == DM_RELAY_UNMAPPED) {
      memset(dst, 0, hi - lo);
      zeros++;
      continue;
    }
    err = fetch_start_locked(r, rd, c, dst, (uint32_t)(lo - c * r->bs), (uint32_t)(hi - lo));
  }
  r->st.zero_blocks += zeros;
  /* The starter's hold: the fetches that ended meanwhile did not end the
   * read, so done is never called from inside this call. */
  last = read_put_locked(rd, err);
  pthread_mutex_unlock(&r->lock);
  if (!last)
    return 1;
  err = rd->err;
  free(rd);
  return err;
}

struct relay_wait {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool ended;
  int err;
};

static void
relay_wait_done(void *ctx, int err)
{
  struct relay_wait *w = ctx;

  pthread_mutex_lock(&w->lock);
  w->err = err;
  w->ended = true;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

/* The NBD layer reads with pread only when it has no memory to keep a
 * read pending: the same, waited for here. */
static int
relay_pread(void *handle, void *buf, uint32_t count, uint64_t offset)
{
  struct relay_wait w = { .ended = false };
  int r;

  pthread_mutex_init(&w.lock, NULL);
  pthread_cond_init(&w.cond, NULL);
  r = relay_pread_start(handle, buf, count, offset, relay_wait_done, &w, 0);
  if (r == 1) {
    pthread_mutex_lock(&w.lock);
    while (!w.ended)
      pthread_cond_wait(&w.cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
    r = w.err;
  }
  pthread_cond_destroy(&w.cond);
  pthread_mutex_destroy(&w.lock);
  return r;
}

static int
relay_pwrite(void *handle, const void *buf, uint32_t count, uint64_t offset, bool fua)
{
  return -EPERM;
}

static int
relay_flush(void *handle)
{
  return 0;                     /* nothing is written here */
}

static int
relay_trim(void *handle, uint32_t count, uint64_t offset, bool fua)
{
  return -EPERM;
}

static int
relay_zero(void *handle, uint32_t count, uint64_t offset, bool fua, bool may_trim)
{
  return -EPERM;
}

static const struct fc_io_ops relay_ops = {
  .pread = relay_pread,
  .pread_start = relay_pread_start,
  .pwrite = relay_pwrite,
  .flush = relay_flush,
  .trim = relay_trim,
  .zero = relay_zero,
};

void
dm_relay_export(struct dm_relay *r, struct fc_export *exp)
{
  *exp = (struct fc_export){
    .name = "",
    .description = "fcache relay: the migration source's cache",
    .volume = r->volume,
    .size = r->nr_blocks * r->bs,
    .min_block = 512,
    .pref_block = r->bs,
    .max_block = RELAY_MAX_REQUEST,
    .read_only = true,
    .ops = &relay_ops,
    .handle = r,
  };
}

/* SPDX-License-Identifier: Apache-2.0 */
/* ucache side of live cache migration: what the engine does differently
 * while a volume is migrating in (destination) or out (source).
 *
 * Destination, per strategy (see doc/reference/migration.rst):
 *   - until the source has switched over (its VM stopped, dirty data
 *     flushed or listed) the gate is closed: writes, trims and flushes
 *     wait, and reads are answered at once with current data -- from the
 *     source, or from the origin where that is provably current -- since
 *     the hypervisor starts the destination VM, which reads its disk,
 *     before it lets the source's VM go (uc_migr_read_gated);
 *   - writes are recorded in the invalidation filter's table (`written`):
 *     a copy arriving later for such a block is stale and is discarded;
 *   - FC_MIGR_BYPASS (firepan_if): until the copy completes every request
 *     goes to the origin and a write also drops any copied block, so the
 *     cache is attached consistent;
 *   - FC_MIGR_ONDEMAND (cloudcache, hybrid): a miss on a block the source
 *     still holds is fetched from the source; a dirty one must be.
 *
 * This file holds the destination's migration state over its life: the
 * gate, the sets of blocks the source holds, the pinned blocks and their
 * superseded log, the switch, the end and the settling.  The blocks that
 * arrive (fetched, copied, preloaded) are in ucache_migr_copies.c, the
 * source's side in ucache_migr_source.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/deadline.h"
#include "common/lockcheck.h"
#include "common/log.h"
#include "common/superseded.h"
#include "ucache_layer.h"
#include "ucache_migr_priv.h"

/* A write_back volume's reads before the source connects wait this long
 * for it: until then only the source knows which blocks it holds dirty. */
#define PRECONNECT_READ_WAIT_MS 30000

int
uc_layer_init(struct fc_ucache *uc)
{
  struct uc_migr *m = calloc(1, sizeof *m);

  if (!m)
    return -ENOMEM;
  pthread_cond_init(&m->dst.gate_cond, NULL);
  pthread_mutex_init(&m->dst.durable_lock, NULL);
  m->dst.superseded_fd = -1;
  uc->m = m;
  return 0;
}

void
uc_layer_destroy(struct fc_ucache *uc)
{
  struct uc_migr *m = uc->m;

  if (!m)
    return;
  fc_invfilter_destroy(&m->dst.written);
  fc_invfilter_destroy(&m->dst.remote_dirty);
  fc_invfilter_destroy(&m->dst.remote_clean);
  fc_invfilter_destroy(&m->dst.pinned);
  if (m->dst.superseded_fd >= 0)
    close(m->dst.superseded_fd);
  pthread_cond_destroy(&m->dst.gate_cond);
  pthread_mutex_destroy(&m->dst.durable_lock);
  free(m);
  uc->m = NULL;
}

void
uc_migr_update_on_locked(struct fc_ucache *uc)
{
  FC_ASSERT_HELD(&uc->lock);
  atomic_store(&uc->layer_on, uc->m->src.frozen || uc->m->dst.tracking ||
                              uc->m->dst.gated || uc->m->dst.failed);
}

int
uc_migr_gate(struct fc_ucache *uc)
{
  int r = 0;

  pthread_mutex_lock(&uc->lock);
  while (uc->m->dst.gated && !uc->m->dst.failed)
    pthread_cond_wait(&uc->m->dst.gate_cond, &uc->lock);
  if (uc->m->dst.gated && uc->m->dst.failed)
    r = -EIO;
  pthread_mutex_unlock(&uc->lock);
  return r;
}

bool
uc_migr_gated_locked(const struct fc_ucache *uc)
{
  FC_ASSERT_HELD(&uc->lock);
  return uc->m->dst.gated;
}

/* Before the source connects the origin answers if every write the source
 * acknowledged reached it first: true unless the source may hold dirty
 * blocks.  Both ends run the volume with the same write policy. */
static bool
origin_is_current(const struct fc_ucache *uc)
{
  return uc->p.write_policy != FC_WRITE_BACK;
}

int
uc_migr_read_gated(struct fc_ucache *uc, void *buf, uint32_t count, uint64_t off)
{
  struct timespec until = fc_deadline_ms(PRECONNECT_READ_WAIT_MS);
  bool source_declined = false;
  int r;

  pthread_mutex_lock(&uc->lock);
  for (;;) {
    if (!uc->m->dst.gated) {
      r = 1;
      break;
    }
    if (uc->m->dst.failed) {
      r = -EIO;
      break;
    }
    if (!uc->m->dst.source_connected && origin_is_current(uc)) {
      pthread_mutex_unlock(&uc->lock);
      r = fc_origin_pread(uc->origin, buf, count, off);
      if (r == 0)
        STAT_ADD(&uc->stats, origin_read_bytes, count);
      return r;
    }
    if (uc->m->dst.source_connected && uc->m->dst.read_source && !source_declined) {
      fc_ucache_read_fn fn = uc->m->dst.read_source;
      void *ctx = uc->m->dst.fetch_ctx;

      pthread_mutex_unlock(&uc->lock);
      r = fn(ctx, buf, count, off);
      if (r != -EAGAIN)
        return r;
      /* The source is switching over: SWITCH is on its way. */
      source_declined = true;
      pthread_mutex_lock(&uc->lock);
      continue;
    }
    if (uc->m->dst.source_connected) {
      pthread_cond_wait(&uc->m->dst.gate_cond, &uc->lock);
    } else if (pthread_cond_timedwait(&uc->m->dst.gate_cond, &uc->lock, &until) ==
               ETIMEDOUT) {
      r = -ETIMEDOUT;
      break;
    }
  }
  pthread_mutex_unlock(&uc->lock);
  if (r == -ETIMEDOUT)
    log_warning("volume %s: a read of %u bytes at %llu before the migration "
                "source connected: the volume is write_back, so only the source "
                "knows the current data, and it did not connect within %d s",
                uc_volume(uc), count, (unsigned long long)off, PRECONNECT_READ_WAIT_MS / 1000);
  return r;
}

int
fc_ucache_migr_in_begin(struct fc_ucache *uc, enum fc_ucache_migr_mode mode,
                        fc_ucache_fetch_fn fetch, fc_ucache_fetched_fn fetched,
                        fc_ucache_read_fn read_source, void *ctx,
                        const char *superseded_path)
{
  int r;

  if ((r = fc_invfilter_init(&uc->m->dst.written, 1024)) ||
      (r = fc_invfilter_init(&uc->m->dst.remote_dirty, 1024)) ||
      (r = fc_invfilter_init(&uc->m->dst.remote_clean, uc->p.quota_blocks)) ||
      (r = fc_invfilter_init(&uc->m->dst.pinned, 1024)))
    return r;
  r = fc_superseded_create(superseded_path);
  if (r < 0) {
    log_error("volume %s: cannot create %s: %s", uc_volume(uc), superseded_path,
              strerror(-r));
    return r;
  }
  uc->m->dst.superseded_fd = r;
  snprintf(uc->m->dst.superseded_path, sizeof uc->m->dst.superseded_path, "%s",
           superseded_path);
  pthread_mutex_lock(&uc->lock);
  uc->m->dst.gated = true;
  uc->m->dst.source_connected = false;
  uc->m->dst.failed = false;
  uc->m->dst.tracking = true;
  uc->m->dst.bypass = mode == FC_MIGR_BYPASS;
  uc->m->dst.fetch = mode == FC_MIGR_ONDEMAND ? fetch : NULL;
  uc->m->dst.fetched_fn = fetched;
  uc->m->dst.read_source = read_source;
  uc->m->dst.fetch_ctx = ctx;
  uc->m->dst.copied_dirty = uc->m->dst.source_dirty = false;
  uc_migr_update_on_locked(uc);
  /* What this host staged before holds nothing of what the source wrote. */
  uc_stage_forget_locked(uc, 0, UINT64_MAX);
  pthread_mutex_unlock(&uc->lock);
  return 0;
}

int
fc_ucache_migr_add_remote(struct fc_ucache *uc, oblock_t ob, bool dirty)
{
  int r;

  if (ob.n >= uc->nr_oblocks)
    return -ERANGE;
  pthread_mutex_lock(&uc->lock);
  r = fc_invfilter_add(dirty ? &uc->m->dst.remote_dirty : &uc->m->dst.remote_clean, ob);
  if (r >= 0 && dirty)
    r = fc_invfilter_add(&uc->m->dst.pinned, ob);
  uc->m->dst.source_dirty |= dirty;
  pthread_mutex_unlock(&uc->lock);
  return r < 0 ? r : 0;
}

struct oblock_list {
  uint64_t *v;
  uint32_t k;
};

static void
collect_oblock(void *opaque, oblock_t ob)
{
  struct oblock_list *c = opaque;

  c->v[c->k++] = ob.n;
}

bool
uc_layer_pinned_locked(struct fc_ucache *uc, oblock_t ob)
{
  FC_ASSERT_HELD(&uc->lock);
  return uc_layer_on(uc) && uc->m->dst.pinned.count &&
         fc_invfilter_contains(&uc->m->dst.pinned, ob);
}

int
uc_layer_to_origin(struct fc_ucache *uc, uint64_t b)
{
  bool p;
  int r;

  /* Nothing is pinned while no layer is on (uc_layer_pinned_locked). */
  if (!uc_layer_on(uc))
    return 0;
  pthread_mutex_lock(&uc->lock);
  p = uc_layer_pinned_locked(uc, to_oblock(b)) && uc->m->dst.superseded_fd >= 0;
  pthread_mutex_unlock(&uc->lock);
  if (!p)
    return 0;
  r = fc_superseded_append(uc->m->dst.superseded_fd, b);
  if (r) {
    log_error("volume %s: block %llu: cannot record in %s that the migration "
              "source's copy is superseded (%s): the write is refused",
              uc_volume(uc), (unsigned long long)b,
              uc->m->dst.superseded_path, strerror(-r));
    return -EIO;
  }
  pthread_mutex_lock(&uc->lock);
  fc_invfilter_remove(&uc->m->dst.pinned, to_oblock(b));
  pthread_mutex_unlock(&uc->lock);
  return 0;
}

/* Under uc->lock. */
static void
drop_superseded_locked(struct fc_ucache *uc)
{
  FC_ASSERT_HELD(&uc->lock);
  if (uc->m->dst.superseded_fd < 0)
    return;
  close(uc->m->dst.superseded_fd);
  uc->m->dst.superseded_fd = -1;
  unlink(uc->m->dst.superseded_path);
}

void
fc_ucache_migr_unpin(struct fc_ucache *uc)
{
  pthread_mutex_lock(&uc->lock);
  fc_invfilter_clear(&uc->m->dst.pinned);
  drop_superseded_locked(uc);
  pthread_cond_signal(&uc->wb_cond);
  pthread_mutex_unlock(&uc->lock);
}

int
fc_ucache_migr_remote_list(struct fc_ucache *uc, uint64_t **list, uint32_t *n)
{
  struct oblock_list c = { NULL, 0 };

  pthread_mutex_lock(&uc->lock);
  c.v = malloc(((size_t)uc->m->dst.remote_dirty.count + 1) * sizeof *c.v);
  if (c.v)
    fc_invfilter_for_each(&uc->m->dst.remote_dirty, collect_oblock, &c);
  pthread_mutex_unlock(&uc->lock);
  if (!c.v)
    return -ENOMEM;
  *list = c.v;
  *n = c.k;
  return 0;
}

void
fc_ucache_migr_settled(struct fc_ucache *uc)
{
  struct stripe_set set;

  /* Whatever the source still held is at the origin now (or, forced,
   * given up): the origin answers for it from here on. */
  uc_lock_stripes(uc, 0, FC_STRIPES, &set);
  pthread_mutex_lock(&uc->lock);
  fc_invfilter_clear(&uc->m->dst.remote_dirty);
  fc_invfilter_clear(&uc->m->dst.remote_clean);
  fc_invfilter_clear(&uc->m->dst.written);
  fc_invfilter_clear(&uc->m->dst.pinned);
  drop_superseded_locked(uc);
  uc->m->dst.failed = false;
  uc->m->dst.fetch = NULL;
  uc->m->dst.read_source = NULL;
  uc->m->dst.tracking = false;
  uc->m->dst.bypass = false;
  uc->m->dst.gated = false;
  uc_migr_update_on_locked(uc);
  pthread_cond_broadcast(&uc->m->dst.gate_cond);
  pthread_cond_signal(&uc->wb_cond);
  pthread_mutex_unlock(&uc->lock);
  uc_unlock_stripes(uc, &set);
}

void
fc_ucache_migr_source_connected(struct fc_ucache *uc)
{
  pthread_mutex_lock(&uc->lock);
  uc->m->dst.source_connected = true;
  /* A write_back volume's early reads were waiting for this. */
  pthread_cond_broadcast(&uc->m->dst.gate_cond);
  pthread_mutex_unlock(&uc->lock);
}

void
fc_ucache_migr_open_gate(struct fc_ucache *uc)
{
  pthread_mutex_lock(&uc->lock);
  uc->m->dst.gated = false;
  pthread_cond_broadcast(&uc->m->dst.gate_cond);
  pthread_mutex_unlock(&uc->lock);
}

void
fc_ucache_migr_shutdown(struct fc_ucache *uc)
{
  /* The agent is stopping: a request held at the gate must end (EIO)
   * so the export can stop. */
  pthread_mutex_lock(&uc->lock);
  uc->m->dst.failed = true;
  pthread_cond_broadcast(&uc->m->dst.gate_cond);
  pthread_mutex_unlock(&uc->lock);
}

void
fc_ucache_migr_source_lost(struct fc_ucache *uc)
{
  pthread_mutex_lock(&uc->lock);
  uc->m->dst.failed = true;
  uc->m->dst.fetch = NULL;
  uc->m->dst.read_source = NULL;
  fc_invfilter_clear(&uc->m->dst.remote_clean);
  pthread_cond_broadcast(&uc->m->dst.gate_cond);
  pthread_mutex_unlock(&uc->lock);
}

struct drop_ctx {
  struct fc_ucache *uc;
  uint32_t dropped;
};

static void
drop_written(void *opaque, oblock_t ob)
{
  struct drop_ctx *d = opaque;
  cblock_t cb = uc_lookup_locked(d->uc, ob);

  if (cb.n != CBLOCK_NONE && d->uc->m->dst.bypass &&
      !(d->uc->dev->table[cb.n].flags & (FC_ENTRY_BUSY | FC_ENTRY_DIRTY))) {
    uc_drop_locked(d->uc, cb);
    d->dropped++;
  }
}

uint32_t
fc_ucache_migr_in_end(struct fc_ucache *uc)
{
  struct drop_ctx d = { uc, 0 };

  /* Quiesce: all stripes, so no request is half way through. */
  struct stripe_set set;
  uc_lock_stripes(uc, 0, FC_STRIPES, &set);
  pthread_mutex_lock(&uc->lock);
  /* Algorithm 1's after-copy check, done once for the whole table: any
   * block written during the copy that still has a copied block. */
  fc_invfilter_for_each(&uc->m->dst.written, drop_written, &d);
  STAT_ADD(&uc->stats, invalidations, d.dropped);
  uc->m->dst.bypass = false;
  uc->m->dst.tracking = false;
  uc->m->dst.fetch = NULL;
  uc->m->dst.read_source = NULL;
  uc->m->dst.gated = false;
  uc_migr_update_on_locked(uc);
  fc_invfilter_clear(&uc->m->dst.written);
  fc_invfilter_clear(&uc->m->dst.remote_clean);
  pthread_cond_broadcast(&uc->m->dst.gate_cond);
  pthread_mutex_unlock(&uc->lock);
  uc_unlock_stripes(uc, &set);
  return d.dropped;
}

uint32_t
fc_ucache_migr_remote_dirty(struct fc_ucache *uc)
{
  uint32_t n;

  pthread_mutex_lock(&uc->lock);
  n = uc->m->dst.remote_dirty.count;
  pthread_mutex_unlock(&uc->lock);
  return n;
}

void
fc_ucache_migr_stats(struct fc_ucache *uc, struct fc_ucache_migr_stats *st)
{
  pthread_mutex_lock(&uc->lock);
  st->fetched = uc->m->dst.fetched;
  st->fetch_fallbacks = uc->m->dst.fetch_fallbacks;
  st->discarded = uc->m->dst.discarded;
  st->installed_copies = uc->m->dst.installed_copies;
  st->written = uc->m->dst.written.count;
  st->remote_dirty = uc->m->dst.remote_dirty.count;
  st->remote_clean = uc->m->dst.remote_clean.count;
  pthread_mutex_unlock(&uc->lock);
}

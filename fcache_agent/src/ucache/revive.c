/* SPDX-License-Identifier: Apache-2.0 */
/* Volumes whose origin could not be opened when the agent started.
 *
 * Recovery keeps such a volume listed, unavailable, with its cache blocks
 * held untouched (recovery.c): its dirty blocks are the only copy of
 * writes the VM was told are done.  Storage that comes up a little after
 * the compute host is common after a power cut, so rather than wait for
 * an operator to restart the agent, a thread tries the origin again every
 * origin_retry_ms.  The origin is opened with no lock held (connecting
 * may take as long as the network's timeouts); only then is the volume
 * looked up again, under host->lock, and revived if it is still the same
 * unavailable volume: its cache is built over the origin, its held blocks
 * are adopted (unwritten ones first, so they always fit), and its export
 * is served, exactly as a start would have done. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/lockcheck.h"
#include "common/log.h"
#include "origin/origin.h"
#include "origin/origin_policy.h"
#include "ucache_engine_priv.h"

struct uc_reviver {
  struct fc_host *host;
  pthread_mutex_t lock;           /* stopping, and the condition's */
  pthread_cond_t cond;
  bool stopping;
  pthread_t thread;
};

/* The volumes to try: copied under host->lock, tried without it. */
struct candidate {
  char id[FC_VOLUME_ID_MAX + 1];
  char origin[FC_ORIGIN_MAX + 1];
};

static int
cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

  return x < y ? -1 : x > y;
}

/* Can every unwritten held block be adopted by a cache of `quota` blocks
 * over an origin of `size` bytes?  Checked before adopting any, so that
 * a refusal leaves the held blocks exactly as they were. */
static int
check_unwritten(struct fc_host *host, struct fc_volume *v, uint64_t size,
                uint32_t quota, char *err, size_t errlen)
{
  struct uc_vol *uv = UV(v);
  uint64_t *obs = malloc(((size_t)uv->nr_held_dirty + 1) * sizeof *obs);
  uint32_t n = 0;
  int r = 0;

  if (!obs)
    return -ENOMEM;
  for (uint32_t i = 0; i < uv->nr_held; i++)
    if (uv->held[i].flags & FC_MD_DIRTY)
      obs[n++] = uv->held[i].oblock;
  qsort(obs, n, sizeof *obs, cmp_u64);
  if (n > quota) {
    snprintf(err, errlen, "it holds %u unwritten blocks, more than its cache of %u",
             n, quota);
    r = -ENOSPC;
  }
  for (uint32_t i = 0; i < n && !r; i++) {
    if (obs[i] >= size / host->cfg.block_size) {     /* as ucache_lifecycle.c counts */
      snprintf(err, errlen, "unwritten block %llu lies past the end of the "
               "origin (%llu bytes): is it the same volume?",
               (unsigned long long)obs[i], (unsigned long long)size);
      r = -EINVAL;
    } else if (i && obs[i] == obs[i - 1]) {
      snprintf(err, errlen, "two cache blocks hold unwritten data of block %llu",
               (unsigned long long)obs[i]);
      r = -EEXIST;
    }
  }
  free(obs);
  return r;
}

/* Give the new cache the held blocks, unwritten ones first; a clean one
 * that does not fit (past the quota, or a second copy of a block) is
 * forgotten, its cache block freed. */
static int
adopt_held(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  struct uc_vol *uv = UV(v);

  for (int pass = 0; pass < 2; pass++) {
    for (uint32_t i = 0; i < uv->nr_held; i++) {
      const struct fc_md_record *rec = &uv->held[i];
      bool dirty = rec->flags & FC_MD_DIRTY;
      cblock_t cb = to_cblock(uv->held_cb[i]);
      int r;

      if (dirty != (pass == 0))
        continue;
      r = fc_ucache_adopt(uv->uc, cb, to_oblock(rec->oblock), dirty);
      if (!r)
        continue;
      if (dirty) {
        /* check_unwritten said this cannot happen. */
        snprintf(err, errlen, "cannot adopt unwritten block %llu from cache "
                 "block %u: %s", (unsigned long long)rec->oblock, cb.n, strerror(-r));
        return r;
      }
      r = fc_md_forget(UCE(host)->md, cb);
      if (r) {
        snprintf(err, errlen, "cannot clear the metadata record of cache block "
                 "%u: %s", cb.n, strerror(-r));
        return r;
      }
      fc_cachedev_free(UCE(host)->dev, cb);
    }
  }
  return 0;
}

int
uc_volume_revive_locked(struct fc_host *host, struct fc_volume *v, struct fc_origin *o,
                        char *err, size_t errlen)
{
  FC_ASSERT_HELD(&host->lock);
  struct uc_vol *uv = UV(v);
  uint32_t blocks = uv->nr_held, dirty = uv->nr_held_dirty;
  char why[400] = "";
  int r;

  r = check_unwritten(host, v, o->size, (uint32_t)(v->p.cache_size / host->cfg.block_size),
                      why, sizeof why);
  if (r) {
    fc_origin_close(o);
    snprintf(err, errlen, "its origin opens again, but %s; its blocks stay held", why);
    return r;
  }
  uv->origin = o;
  r = uc_volume_build(host, v, err, errlen);
  if (r)
    return r;
  r = adopt_held(host, v, err, errlen);
  if (r) {
    /* Only a failing metadata write gets here: the cache file and its
     * records are as they were, and the next start recovers them. */
    log_error("volume %s: %s; restart the agent once the cache's metadata "
              "can be written", v->p.id, err);
    return r;
  }
  free(uv->held);
  free(uv->held_cb);
  uv->held = NULL;
  uv->held_cb = NULL;
  uv->nr_held = uv->nr_held_dirty = 0;
  /* Recovered at start like any other: may be stale (evacuated). */
  uc_volume_hold_recovered(v);
  r = uc_volume_start(host, v, err, errlen);
  if (r)
    return r;
  v->error[0] = '\0';
  uc_allocator_rebalance_locked(UCE(host)->alloc);
  log_info("volume %s: its origin %s opens again: serving %s with %u cached "
           "blocks back (%u of them unwritten)", v->p.id, v->p.origin, UV(v)->export_path,
           blocks, dirty);
  return 0;
}

/* Under host->lock: the volumes still waiting for their origin.  A
 * volume left behind by a live migration is not one: its blocks may be
 * current on the other host. */
static unsigned
candidates_locked(struct fc_host *host, struct candidate *out)
{
  FC_ASSERT_HELD(&host->lock);
  unsigned n = 0;

  for (unsigned i = 0; i < host->nr_volumes; i++) {
    struct fc_volume *v = host->volumes[i];

    if (!v->priv || UV(v)->uc || UV(v)->origin || v->p.migration[0])
      continue;
    snprintf(out[n].id, sizeof out[n].id, "%s", v->p.id);
    snprintf(out[n].origin, sizeof out[n].origin, "%s", v->p.origin);
    n++;
  }
  return n;
}

static void
try_one(struct fc_host *host, const struct candidate *c)
{
  struct fc_origin_policy pol;
  struct fc_origin *o = NULL;
  struct fc_volume *v;
  char err[512];

  fc_origin_policy_init(&pol, &host->cfg);
  pol.volume_id = c->id;
  if (fc_origin_open(c->origin, host->cfg.origin_connections, &pol, &o, err, sizeof err))
    return;     /* still down: said once, at start */
  /* A stop waits for this thread: never block on host->lock. */
  if (pthread_mutex_trylock(&host->lock)) {
    fc_origin_close(o);
    return;
  }
  v = fc_host_find_locked(host, c->id);
  if (!v || !v->priv || UV(v)->uc || UV(v)->origin || v->p.migration[0] ||
      strcmp(v->p.origin, c->origin)) {
    fc_origin_close(o);     /* detached, or no longer waiting, meanwhile */
  } else if (uc_volume_revive_locked(host, v, o, err, sizeof err) &&
             strncmp(v->error, err, sizeof v->error - 1)) {
    /* Said once, not at every try. */
    snprintf(v->error, sizeof v->error, "%s", err);
    log_error("volume %s: %s", v->p.id, err);
  }
  pthread_mutex_unlock(&host->lock);
}

static void
tick(struct fc_host *host)
{
  struct candidate *cs = calloc(FC_MAX_VOLUMES, sizeof *cs);
  unsigned n;

  if (!cs)
    return;
  if (pthread_mutex_trylock(&host->lock)) {
    free(cs);
    return;
  }
  n = candidates_locked(host, cs);
  pthread_mutex_unlock(&host->lock);
  for (unsigned i = 0; i < n; i++)
    try_one(host, &cs[i]);
  free(cs);
}

static void *
run(void *arg)
{
  struct uc_reviver *rv = arg;
  unsigned ms = rv->host->cfg.origin_retry_ms;

  pthread_mutex_lock(&rv->lock);
  while (!rv->stopping) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&rv->cond, &rv->lock, &ts);
    if (rv->stopping)
      break;
    pthread_mutex_unlock(&rv->lock);
    tick(rv->host);
    pthread_mutex_lock(&rv->lock);
  }
  pthread_mutex_unlock(&rv->lock);
  return NULL;
}

int
uc_reviver_start(struct fc_host *host, struct uc_reviver **out)
{
  struct uc_reviver *rv;
  pthread_condattr_t attr;
  int r;

  *out = NULL;
  if (!host->cfg.origin_retry_ms)
    return 0;
  rv = calloc(1, sizeof *rv);
  if (!rv)
    return -ENOMEM;
  rv->host = host;
  pthread_mutex_init(&rv->lock, NULL);
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&rv->cond, &attr);
  pthread_condattr_destroy(&attr);
  r = pthread_create(&rv->thread, NULL, run, rv);
  if (r) {
    pthread_cond_destroy(&rv->cond);
    pthread_mutex_destroy(&rv->lock);
    free(rv);
    return -r;
  }
  *out = rv;
  return 0;
}

void
uc_reviver_stop(struct uc_reviver *rv)
{
  if (!rv)
    return;
  pthread_mutex_lock(&rv->lock);
  rv->stopping = true;
  pthread_cond_signal(&rv->cond);
  pthread_mutex_unlock(&rv->lock);
  pthread_join(rv->thread, NULL);
  pthread_cond_destroy(&rv->cond);
  pthread_mutex_destroy(&rv->lock);
  free(rv);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* dmcache's live migration, the destination of `hybrid`: the cache's
 * data device is a dm-clone whose source is a kernel NBD device this
 * agent feeds with the migration's FETCHes (dm_nbd, dm_relay), so that a
 * block not copied yet is read from the source's frozen cache while the
 * VM waits (doc/reference/dmcache.rst, "hybrid and cloudcache on
 * dmcache").  The steps:
 *
 *   begin    carve the clone's metadata (clmeta) beside cmeta and cdata;
 *   LIST     every block the source caches, hottest first, numbered
 *            0, 1, 2, ... here: that is the restored metadata and the
 *            relay's map alike (dm_migr_dest.c keeps the list);
 *   SWITCH   cache_restore the list; connect /dev/nbdN to a relay over
 *            the list; the clone (no_hydration) over clmeta, cdata and
 *            /dev/nbdN; the export's cache table over the clone; then
 *            enable_hydration.  SWITCHED follows once this table is live;
 *   end      wait for hydrated == total, reload the cache table over cdata,
 *            remove the clone, disconnect the device: only then does the
 *            migration send COMPLETE and let the source go.
 *
 * Pacing: the source paces its answers to the rate limit, and the
 * clone's regions in flight are set to cover the link's bandwidth-delay
 * product, ceil(rate x round trip / block) + 1, the round trip being the
 * relay's measured fetch time. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "dm_migr_priv.h"
#include "dm_nbd.h"
#include "dm_relay.h"
#include "dm_xml.h"
#include "common/clock.h"
#include "common/lockcheck.h"
#include "common/log.h"

#define POLL_MS 50
/* Fetches in flight through the relay: dm-clone's threshold at most,
 * and the VM's misses besides; far below the migration's own bound. */
#define RELAY_INFLIGHT 64
#define RELAY_THREADS 4
/* Regions one hydration copy takes at most: 1 MiB, as volume moves do. */
#define HYDRATION_BATCH_BYTES (1u << 20)
/* The round trip assumed until the relay has measured one. */
#define RTT_GUESS_NS 1000000u
/* dm-clone copies only while the clone has none of the VM's I/O in
 * flight; a VM that keeps it busy starves the copy.  After this long
 * without progress the export is suspended for a moment so that the
 * clone's worker can start copies (dm_move.c does the same for moves). */
#define STALL_MS 300
#define PULSE_MAX_MS 20

struct dm_hybrid {
  char clone[FC_DM_NAME_MAX + 16], clmeta[FC_DM_NAME_MAX + 16];
  struct dm_relay *relay;
  struct dm_nbd *nbd;
  /* The relay's fetches go through e while it is not cut; cut (the
   * migration failed or the agent stops) every later fetch fails, so that
   * the relay never reaches a migration that is gone. */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct fc_engine_migr *e;
  unsigned calls;               /* fetch starts inside e right now */
  bool cut;
  /* progress, under lock */
  bool attached, finished;
  unsigned threshold;
  uint64_t regions_total, regions_hydrated;
  uint64_t attached_ms, progress_ms, hydrated_ms;   /* hydrated_ms: or cut */
  uint64_t pulses;
  uint64_t restored, restored_dirty, dirty_at_attach;
  char stopped[160];            /* why the copy stopped unfinished, "" */
  struct dm_relay_stats relay_final;   /* the relay's, once it is gone */
};

static void
clmeta_owner(const char *id, char *buf, size_t len)
{
  fc_dmv_owner(id, "mclmeta", buf, len);
}

/* dm-clone's metadata: a superblock, space maps and a bit a region. */
static uint64_t
clmeta_bytes(uint64_t regions)
{
  return FC_FLASH_EXTENT + regions / 2;
}

int
dm_hyb_begin(struct fc_engine_migr *m, struct fc_dm_migr *st, char *err, size_t errlen)
{
  struct fc_host *host = m->host;
  struct fc_dm_engine *de = DME(host);
  struct fc_volume *v = m->vol;
  struct dm_hybrid *hy;
  char owner[FC_FLASH_OWNER_MAX];
  uint64_t bsec = de->block_sectors;
  int r;

  /* The clone's region is the cache block: a power of two, for dm-clone. */
  if (bsec & (bsec - 1)) {
    snprintf(err, errlen, "strategy hybrid on dmcache needs a cache block of a power "
             "of two sectors (dm-clone's region), not %" PRIu64, bsec);
    return -ENOTSUP;
  }
  if (!(hy = calloc(1, sizeof *hy)))
    return -ENOMEM;
  pthread_mutex_init(&hy->lock, NULL);
  pthread_cond_init(&hy->cond, NULL);
  hy->e = m;
  snprintf(hy->clone, sizeof hy->clone, "%s-mclone", DV(v)->name);
  snprintf(hy->clmeta, sizeof hy->clmeta, "%s-mclmeta", DV(v)->name);
  clmeta_owner(v->p.id, owner, sizeof owner);
  fc_flash_pool_free(&de->pool, owner);      /* a previous migration's leftover */
  r = fc_flash_pool_alloc(&de->pool, owner, clmeta_bytes(st->nr_cblocks));
  if (r)
    snprintf(err, errlen, "flash device full: the dm-clone metadata of volume %s needs "
             "%" PRIu64 " bytes", v->p.id, clmeta_bytes(st->nr_cblocks));
  else
    r = fc_flash_pool_save(&de->pool, de->pool_path, err, errlen);
  if (r) {
    fc_flash_pool_free(&de->pool, owner);
    pthread_cond_destroy(&hy->cond);
    pthread_mutex_destroy(&hy->lock);
    free(hy);
    return r;
  }
  st->hy = hy;
  return 0;
}

/* The relay's fetch: the migration's, unless cut. */
static int
hyb_fetch(void *ctx, oblock_t ob, void *data, bool required, fc_engine_fetch_done_fn *done,
          void *arg)
{
  struct dm_hybrid *hy = ctx;
  struct fc_engine_migr *e;
  int r;

  pthread_mutex_lock(&hy->lock);
  if (hy->cut) {
    pthread_mutex_unlock(&hy->lock);
    return -ENOTCONN;
  }
  e = hy->e;
  hy->calls++;
  pthread_mutex_unlock(&hy->lock);
  r = e->fetch_source_start(e->ctx, ob, data, required, done, arg);
  pthread_mutex_lock(&hy->lock);
  if (--hy->calls == 0)
    pthread_cond_broadcast(&hy->cond);
  pthread_mutex_unlock(&hy->lock);
  return r;
}

/* No fetch reaches the migration after this returns. */
static void
cut(struct dm_hybrid *hy)
{
  pthread_mutex_lock(&hy->lock);
  if (!hy->cut && !hy->finished)
    hy->hydrated_ms = fc_now_ms();      /* the copy's time ends here */
  hy->cut = true;
  while (hy->calls)
    pthread_cond_wait(&hy->cond, &hy->lock);
  pthread_mutex_unlock(&hy->lock);
}

/* Regions in flight to keep the link busy at the rate limit:
 * ceil(rate x rtt / block) + 1, the round trip being the relay's shortest
 * fetch (a mean would count the time fetches wait behind one another at
 * the source's pacing, and grow the threshold that makes them wait); half
 * what the relay takes when nothing limits the rate, leaving the VM's
 * misses the other half. */
static unsigned
threshold_for(struct dm_hybrid *hy, uint64_t rate, uint64_t bs)
{
  struct dm_relay_stats rs;
  uint64_t rtt = RTT_GUESS_NS;
  double d;

  dm_relay_stats(hy->relay, &rs);
  if (rs.fetch_ns_min)
    rtt = rs.fetch_ns_min;
  if (!rate)
    return RELAY_INFLIGHT / 2;
  /* In floating point, capped before it is an integer again: a rate near
   * 2^64 times a round trip overflows. */
  d = ceil((double)rate * (double)rtt / 1e9 / (double)bs) + 1;
  return d >= RELAY_INFLIGHT / 2 ? RELAY_INFLIGHT / 2 : (unsigned)d;
}

/* Keep the relay's figures for migration-status, then free it (its
 * device no longer served). */
static void
relay_drop(struct dm_hybrid *hy)
{
  struct dm_relay *r;

  pthread_mutex_lock(&hy->lock);
  r = hy->relay;
  if (r)
    dm_relay_stats(r, &hy->relay_final);
  hy->relay = NULL;
  pthread_mutex_unlock(&hy->lock);
  dm_relay_free(r);
}

static void
undo(struct fc_host *host, struct fc_volume *v, struct dm_hybrid *hy)
{
  struct fc_dm_info info;
  char e2[256];

  if (!fc_dm_info(hy->clone, &info) && info.exists && fc_dm_remove(hy->clone, e2, sizeof e2))
    log_error("volume %s: %s", v->p.id, e2);
  cut(hy);
  if (hy->nbd) {
    int r = dm_nbd_disconnect(hy->nbd);

    if (r)
      log_warning("volume %s: disconnecting /dev/nbd of its migration: %s", v->p.id,
                  strerror(-r));
  }
  hy->nbd = NULL;
  relay_drop(hy);
  if (!fc_dm_info(hy->clmeta, &info) && info.exists &&
      fc_dm_remove(hy->clmeta, e2, sizeof e2))
    log_error("volume %s: %s", v->p.id, e2);
  (void)host;
}

/* SWITCH, under host->lock with the export suspended and the list
 * restored as the cache's metadata (dm_migr_dest.c): the device stack
 * over the relay, and the export's cache table on it. */
int
dm_hyb_attach(struct fc_engine_migr *m, char *err, size_t errlen)
{
  FC_ASSERT_HELD(&m->host->lock);
  struct fc_host *host = m->host;
  struct fc_volume *v = m->vol;
  struct fc_dm_migr *st = dm_migr_state(m);
  struct dm_hybrid *hy = st->hy;
  uint64_t bsec = DME(host)->block_sectors, *map = NULL;
  uint64_t batch = HYDRATION_BATCH_BYTES / st->bs ? HYDRATION_BATCH_BYTES / st->bs : 1;
  char owner[FC_FLASH_OWNER_MAX], uuid[FC_DM_UUID_MAX], params[FC_ORIGIN_MAX + 160];
  char nbdpath[32], odev[32], mdev[32], cdev[32];
  struct dm_relay_params rp = { .volume = v->p.id, .block_size = (uint32_t)st->bs,
                                .nr_blocks = st->nr_cblocks, .max_inflight = RELAY_INFLIGHT,
                                .fetch = hyb_fetch, .fetch_ctx = hy };
  struct dm_nbd_params np = { .index = -1, .threads = RELAY_THREADS };
  struct fc_dm_info mi, di, ci, xi;
  struct fc_dmc_status cs;
  struct fc_export exp;
  uint64_t bytes;
  dev_t nbd_dev;
  uint32_t dirty = 0;
  int r;

  if (!(map = malloc((size_t)st->nr_cblocks * sizeof *map)))
    return -ENOMEM;
  for (uint32_t c = 0; c < st->nr_cblocks; c++)
    map[c] = DM_RELAY_UNMAPPED;
  for (uint32_t i = 0; i < st->ninst; i++) {
    map[st->inst[i].cblock.n] = st->inst[i].oblock.n;
    dirty += st->inst[i].dirty;
  }
  rp.oblock = map;
  r = dm_relay_new(&rp, &hy->relay);
  free(map);
  if (r) {
    snprintf(err, errlen, "cannot make the relay: %s", strerror(-r));
    return r;
  }
  /* With timeout 0 the kernel waits for the relay, whose fetches have
   * their own bound (an EIO then, never zeros); without a dead-connection
   * timeout a relay that died with this agent fails reads at once (no
   * restarted agent reattaches one yet: doc/reference/dmcache.rst). */
  dm_relay_export(hy->relay, &exp);
  r = dm_nbd_connect(&exp, &np, &hy->nbd);
  if (r) {
    snprintf(err, errlen, "cannot connect a kernel NBD device for the relay: %s",
             strerror(-r));
    goto fail;
  }
  snprintf(nbdpath, sizeof nbdpath, "/dev/nbd%d", dm_nbd_index(hy->nbd));
  if ((r = fc_dm_blockdev_size(nbdpath, &bytes, &nbd_dev, err, errlen)))
    goto fail;
  clmeta_owner(v->p.id, owner, sizeof owner);
  if ((r = fc_dmv_zero_first_block(host, owner, err, errlen)) ||
      (r = fc_dmv_create_linear(host, v, hy->clmeta, "mclmeta", err, errlen)))
    goto fail;
  if ((r = fc_dm_info(hy->clmeta, &mi)) || (r = fc_dm_info(DV(v)->data, &di)))
    goto fail;
  hy->threshold = threshold_for(hy, m->rate_limit_bps, st->bs);
  if (batch > hy->threshold)
    batch = hy->threshold;
  snprintf(params, sizeof params, "%u:%u %u:%u %u:%u %" PRIu64 " 1 no_hydration 4 "
           "hydration_threshold %u hydration_batch_size %" PRIu64, mi.major, mi.minor,
           di.major, di.minor, major(nbd_dev), minor(nbd_dev), bsec, hy->threshold, batch);
  fc_dmv_uuid(v->p.tag, "mclone", uuid, sizeof uuid);
  r = fc_dm_create(hy->clone, uuid,
                   &(struct fc_dm_target){ 0, (uint64_t)st->nr_cblocks * bsec, "clone", params },
                   1, err, errlen);
  if (r || (r = fc_dm_info(hy->clone, &ci)) || (r = fc_dm_info(DV(v)->meta, &xi)))
    goto fail;
  snprintf(mdev, sizeof mdev, "%u:%u", xi.major, xi.minor);
  snprintf(cdev, sizeof cdev, "%u:%u", ci.major, ci.minor);
  snprintf(odev, sizeof odev, "%u:%u", major(DV(v)->origin_dev), minor(DV(v)->origin_dev));
  r = fc_dmc_table_params(&(struct fc_dmc_table){
                            .metadata_dev = mdev, .data_dev = cdev, .origin_dev = odev,
                            .block_sectors = bsec,
                            .mode = fc_dmc_mode_for(v->p.write_policy), .policy = "smq" },
                          params, sizeof params);
  if (!r)
    r = fc_dmv_swap(DV(v)->name,
                    &(struct fc_dm_target){ 0, DV(v)->origin_sectors, "cache", params },
                    err, errlen);
  if (r)
    goto fail;
  /* The dirty count dm-cache reports for the restored blocks: the
   * settle's design relies on it (doc/reference/dmcache.rst). */
  if (!fc_dmv_status(DV(v), &cs, err, errlen))
    hy->dirty_at_attach = cs.dirty_blocks;
  r = fc_dm_message(hy->clone, "enable_hydration", err, errlen);
  if (r)
    goto fail;
  pthread_mutex_lock(&hy->lock);
  hy->attached = true;
  hy->regions_total = st->nr_cblocks;    /* a region is a cache block */
  hy->restored = st->ninst;
  hy->restored_dirty = dirty;
  hy->attached_ms = hy->progress_ms = fc_now_ms();
  pthread_mutex_unlock(&hy->lock);
  log_info("migration %s: volume %s runs here over /dev/nbd%d: %u cache blocks restored "
           "(%u dirty, dm-cache reports %" PRIu64 " dirty), hydrating", m->id, v->p.id,
           dm_nbd_index(hy->nbd), st->ninst, dirty, hy->dirty_at_attach);
  return 0;
fail:
  undo(host, v, hy);
  return r ? r : -EIO;
}

/* Give the kernel's clone a moment without the VM's I/O: suspend the
 * export (its I/O waits there), wake the clone's worker, resume once the
 * copies it started stop growing (dm_move.c's pulse).  Under host->lock. */
static void
pulse(struct fc_volume *v, struct dm_hybrid *hy)
{
  uint64_t hydrated, total, hydrating = 0, last = 0;
  bool failed = false;
  char err[256];

  if (fc_dm_suspend(DV(v)->name, err, sizeof err)) {
    log_warning("volume %s: hydration: %s", v->p.id, err);
    return;
  }
  if (!fc_dm_message(hy->clone, "disable_hydration", err, sizeof err) &&
      !fc_dm_message(hy->clone, "enable_hydration", err, sizeof err)) {
    for (int i = 0; i < PULSE_MAX_MS; i++) {
      nanosleep(&(struct timespec){ 0, 1000000L }, NULL);
      if (fc_dm_clone_status(hy->clone, &hydrated, &total, &hydrating, &failed) || failed ||
          (hydrating && hydrating == last))
        break;
      last = hydrating;
    }
  }
  if (fc_dm_resume(DV(v)->name, err, sizeof err))
    log_error("volume %s: cannot resume %s after a hydration pause: %s", v->p.id,
              DV(v)->name, err);
  pthread_mutex_lock(&hy->lock);
  hy->pulses++;
  pthread_mutex_unlock(&hy->lock);
}

static void
free_clmeta(struct fc_host *host, struct fc_volume *v)
{
  struct fc_dm_engine *de = DME(host);
  char owner[FC_FLASH_OWNER_MAX], err[512];

  clmeta_owner(v->p.id, owner, sizeof owner);
  if (fc_flash_pool_free(&de->pool, owner) &&
      fc_flash_pool_save(&de->pool, de->pool_path, err, sizeof err))
    log_error("volume %s: freeing its dm-clone metadata flash: %s", v->p.id, err);
}

/* Every region is on cdata: the cache table straight over it, the clone
 * and the relay gone.  Under host->lock. */
static int
finish(struct fc_host *host, struct fc_volume *v, struct dm_hybrid *hy, char *err,
       size_t errlen)
{
  int r = fc_dmv_load_cache(host, v, fc_dmc_mode_for(v->p.write_policy), "smq", err,
                            errlen);

  if (r)
    return r;
  undo(host, v, hy);
  free_clmeta(host, v);
  return 0;
}

/* One look, under host->lock: 1 hydrated and finished, 0 not yet, -errno. */
static int
step(struct fc_engine_migr *m, struct dm_hybrid *hy, char *err, size_t errlen)
{
  FC_ASSERT_HELD(&m->host->lock);
  struct fc_dm_migr *st = dm_migr_state(m);
  uint64_t hydrated = 0, total = 0, hydrating = 0;
  unsigned want;
  bool failed = false;
  char msg[64];
  int r = fc_dm_clone_status(hy->clone, &hydrated, &total, &hydrating, &failed);

  if (r || failed) {
    snprintf(err, errlen, "dm-clone device %s %s", hy->clone,
             r ? "cannot be queried" : "failed its metadata");
    return r ? r : -EIO;
  }
  pthread_mutex_lock(&hy->lock);
  if (hydrated != hy->regions_hydrated)
    hy->progress_ms = fc_now_ms();
  hy->regions_hydrated = hydrated;
  hy->regions_total = total;
  pthread_mutex_unlock(&hy->lock);
  if (hydrated < total) {
    want = threshold_for(hy, m->rate_limit_bps, st->bs);
    if (want != hy->threshold) {
      snprintf(msg, sizeof msg, "hydration_threshold %u", want);
      if (!fc_dm_message(hy->clone, msg, err, errlen)) {
        pthread_mutex_lock(&hy->lock);
        hy->threshold = want;
        pthread_mutex_unlock(&hy->lock);
      }
    }
    if (fc_now_ms() - hy->progress_ms >= STALL_MS) {
      pulse(m->vol, hy);
      pthread_mutex_lock(&hy->lock);
      hy->progress_ms = fc_now_ms();
      pthread_mutex_unlock(&hy->lock);
    }
    return 0;
  }
  r = finish(m->host, m->vol, hy, err, errlen);
  if (r)
    return r;
  pthread_mutex_lock(&hy->lock);
  hy->finished = true;
  hy->hydrated_ms = fc_now_ms();
  pthread_mutex_unlock(&hy->lock);
  return 1;
}

/* in_end: wait for the clone to hold everything, then stop relying on
 * the source.  The VM runs meanwhile; a failure leaves the stack as it is
 * (reads of regions not yet copied fail, never stale) and fails the
 * migration, which then keeps the source's copy. */
uint32_t
dm_hyb_end(struct fc_engine_migr *m)
{
  struct fc_host *host = m->host;
  struct dm_hybrid *hy;
  char err[512] = "", msg[800];
  int r = 0;

  for (;;) {
    pthread_mutex_lock(&host->lock);
    hy = m->vol && dm_migr_state(m) ? dm_migr_state(m)->hy : NULL;
    if (!hy || !hy->attached || hy->finished) {
      pthread_mutex_unlock(&host->lock);
      return 0;
    }
    pthread_mutex_lock(&hy->lock);
    r = hy->cut ? -ECANCELED : 0;
    pthread_mutex_unlock(&hy->lock);
    if (!r && !m->live(m->ctx))
      r = -ESHUTDOWN;
    if (!r)
      r = step(m, hy, err, sizeof err);
    pthread_mutex_unlock(&host->lock);
    if (r)
      break;
    nanosleep(&(struct timespec){ 0, POLL_MS * 1000000L }, NULL);
  }
  if (r == 1) {
    log_info("migration %s: volume %s hydrated: %" PRIu64 " regions in %.2f s, %" PRIu64
             " pauses for the copy; the relay is gone", m->id, m->volume_id,
             hy->regions_total, (double)(hy->hydrated_ms - hy->attached_ms) / 1000.0,
             hy->pulses);
    return 0;
  }
  if (r == -ECANCELED)
    return 0;           /* dm_hyb_lost failed the migration, and said why */
  if (r == -ESHUTDOWN) {
    /* It failed, or ends, elsewhere: nothing may fetch through it any more. */
    dm_hyb_lost(m, "the migration ended");
    return 0;
  }
  snprintf(msg, sizeof msg, "hydrating volume %s from the source failed: %s; reads of "
           "the %" PRIu64 " of %" PRIu64 " cache blocks not yet copied fail with EIO",
           m->volume_id, err, hy->regions_total - hy->regions_hydrated, hy->regions_total);
  cut(hy);
  m->fail(m->ctx, msg);
  return 0;
}

/* The source is gone or the agent stops mid-hydration: no fetch may
 * reach the migration any more, and the clone stops copying (each copy
 * would fail).  A read of a block not yet copied fails with EIO from now
 * on: the relay answers without a source; never zeros, never the
 * origin's copy (which is older for a block dirty at the freeze). */
void
dm_hyb_lost(struct fc_engine_migr *m, const char *why)
{
  struct fc_dm_migr *st = m->vol ? dm_migr_state(m) : NULL;
  struct dm_hybrid *hy = st ? st->hy : NULL;
  uint64_t left = 0, total = 0;
  bool hydrating;
  char err[256], msg[700];

  if (!hy)
    return;
  pthread_mutex_lock(&hy->lock);
  hydrating = hy->attached && !hy->finished && !hy->cut;
  if (hydrating) {
    left = hy->regions_total - hy->regions_hydrated;
    total = hy->regions_total;
  }
  pthread_mutex_unlock(&hy->lock);
  if (hydrating) {
    /* Failed before the copy's end is seen as cut: no COMPLETE then. */
    snprintf(msg, sizeof msg, "%s with %" PRIu64 " of %" PRIu64 " cache blocks of volume "
             "%s not yet copied from the source: reads of those fail with EIO (never "
             "older data) until the volume is settled, which dmcache cannot do yet "
             "(doc/reference/dmcache.rst, \"Settling on dmcache\"); the source's frozen "
             "cache still holds them: keep the source host's devices", why, left, total,
             m->volume_id);
    m->fail(m->ctx, msg);
  }
  if (hydrating) {
    pthread_mutex_lock(&hy->lock);
    snprintf(hy->stopped, sizeof hy->stopped, "%s", why);
    pthread_mutex_unlock(&hy->lock);
  }
  cut(hy);
  if (hydrating && fc_dm_message(hy->clone, "disable_hydration", err, sizeof err))
    log_warning("volume %s: %s", m->volume_id, err);
}

/* The agent stops: the relay stops with it (the kernel then fails reads
 * of blocks not yet copied: no restarted agent reattaches one yet), the
 * devices stay for the operator. */
void
dm_hyb_shutdown(struct fc_engine_migr *m)
{
  struct fc_dm_migr *st = m->vol ? dm_migr_state(m) : NULL;
  struct dm_hybrid *hy = st ? st->hy : NULL;

  if (!hy)
    return;
  dm_hyb_lost(m, "the agent stops");
  if (hy->nbd)
    dm_nbd_release(hy->nbd);
  hy->nbd = NULL;
  relay_drop(hy);
}

/* The volume goes (detach) or its migration state does: the stack down
 * to cdata.  A cache table still over the clone is replaced by an error
 * table first (the detach removes the export next).  Under host->lock. */
void
dm_hyb_teardown(struct fc_host *host, struct fc_volume *v, struct fc_dm_migr *st)
{
  struct dm_hybrid *hy = st ? st->hy : NULL;
  char err[512];

  if (!hy)
    return;
  if (hy->attached && !hy->finished && dm_migr_to_error(v, err, sizeof err))
    log_error("volume %s: %s", v->p.id, err);
  undo(host, v, hy);
  free_clmeta(host, v);
  pthread_mutex_lock(&st->lock);
  st->hy = NULL;
  pthread_mutex_unlock(&st->lock);
  dm_hyb_free(hy);
}

/* Memory only: the devices are teardown's (or the operator's). */
void
dm_hyb_free(struct dm_hybrid *hy)
{
  if (!hy)
    return;
  cut(hy);
  if (hy->nbd)
    dm_nbd_release(hy->nbd);
  relay_drop(hy);
  pthread_cond_destroy(&hy->cond);
  pthread_mutex_destroy(&hy->lock);
  free(hy);
}

/* Dirty blocks of the freeze the clone may not hold yet. */
uint32_t
dm_hyb_remote_dirty(struct fc_dm_migr *st)
{
  struct dm_hybrid *hy = st ? st->hy : NULL;
  uint32_t n;

  if (!hy)
    return 0;
  pthread_mutex_lock(&hy->lock);
  n = hy->finished ? 0 : (uint32_t)hy->restored_dirty;
  pthread_mutex_unlock(&hy->lock);
  return n;
}

void
dm_hyb_stats_json(struct fc_dm_migr *st, json_t *o)
{
  struct dm_hybrid *hy = st ? st->hy : NULL;
  struct dm_relay_stats rs;
  json_t *h;

  if (!hy)
    return;
  pthread_mutex_lock(&hy->lock);
  rs = hy->relay_final;
  if (hy->relay)
    dm_relay_stats(hy->relay, &rs);
  h = json_pack("{s:I, s:I, s:I, s:I, s:I, s:b, s:f, s:I, s:I, s:I, s:I, s:I, s:f, s:f}",
                "restored_blocks", (json_int_t)hy->restored,
                "restored_dirty_blocks", (json_int_t)hy->restored_dirty,
                "dirty_at_attach", (json_int_t)hy->dirty_at_attach,
                "regions_total", (json_int_t)hy->regions_total,
                "regions_hydrated", (json_int_t)hy->regions_hydrated,
                "hydrated", hy->finished,
                "hydration_s", (double)((hy->finished || hy->cut ? hy->hydrated_ms :
                                         fc_now_ms()) -
                                        hy->attached_ms) / 1000.0 * (hy->attached ? 1 : 0),
                "hydration_threshold", (json_int_t)hy->threshold,
                "pauses", (json_int_t)hy->pulses,
                "relay_fetched", (json_int_t)rs.fetched,
                "relay_fetch_errors", (json_int_t)rs.fetch_errors,
                "relay_inflight_peak", (json_int_t)rs.inflight_peak,
                "fetch_ms_min", (double)rs.fetch_ns_min / 1e6,
                "fetch_ms_mean", rs.fetched ? (double)rs.fetch_ns / rs.fetched / 1e6 : 0.0);
  pthread_mutex_unlock(&hy->lock);
  if (h)
    json_object_set_new(o, "hydration", h);
  json_object_set_new(o, "fetched_blocks", json_integer((json_int_t)rs.fetched));
}

void
fc_dm_migr_volume_json(struct fc_dm_migr *st, json_t *o)
{
  struct dm_hybrid *hy;
  char msg[400];

  if (!st)
    return;
  pthread_mutex_lock(&st->lock);
  hy = st->hy;
  if (hy) {
    pthread_mutex_lock(&hy->lock);
    if (hy->attached && !hy->finished) {
      json_object_set_new(o, "state", json_string(hy->stopped[0] ? "degraded" : "migrating"));
      json_object_set_new(o, "regions_hydrated", json_integer((json_int_t)hy->regions_hydrated));
      json_object_set_new(o, "regions_total", json_integer((json_int_t)hy->regions_total));
      if (hy->stopped[0]) {
        snprintf(msg, sizeof msg, "%s before the cache was copied from the source: reads "
                 "of the %" PRIu64 " cache blocks not yet copied fail with EIO (see "
                 "migration-status)", hy->stopped, hy->regions_total - hy->regions_hydrated);
        json_object_set_new(o, "error", json_string(msg));
      }
    }
    pthread_mutex_unlock(&hy->lock);
  }
  pthread_mutex_unlock(&st->lock);
}

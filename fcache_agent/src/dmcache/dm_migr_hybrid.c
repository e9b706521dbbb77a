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
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "dm_migr_priv.h"
#include "dm_nbd.h"
#include "dm_origin_fetch.h"
#include "dm_relay.h"
#include "dm_xml.h"
#include "flash_pool.h"
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
/* Once the relay's socket is gone with the agent, the kernel holds the
 * reads of blocks not copied for this long, for a restarted agent to
 * reattach a relay (they then fail with EIO, never older data); after it
 * they fail at once until one is attached. */
#define RELAY_DEAD_S 10
/* A request the relay has not answered for this long: the kernel gives
 * the socket up (as if the agent had died), and holds the request as
 * above.  What it is for is an agent killed while one of its threads
 * waits, uninterruptibly, on a request only its own relay would answer
 * (dm-cache's postsuspend waits for background work that reads through
 * the clone): the process cannot exit, so its socket never closes, until
 * the kernel gives up.  A live relay answers within a fetch's bound
 * (FETCH_TIMEOUT_S, 10 s) unless many wait behind one another; if the
 * kernel drops its socket all the same, the watcher reattaches it
 * (step(), dm_nbd_revive). */
#define RELAY_REQUEST_S 15

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
  bool closed;                  /* nor the origin: the relay is going */
  /* progress, under lock */
  bool attached, finished;
  unsigned threshold;
  uint64_t regions_total, regions_hydrated;
  uint64_t attached_ms, progress_ms, hydrated_ms;   /* hydrated_ms: or cut */
  uint64_t pulses;
  uint64_t restored, restored_dirty, dirty_at_attach;
  char stopped[160];            /* why the copy stopped unfinished, "" */
  struct dm_relay_stats relay_final;   /* the relay's, once it is gone */
  /* Settled with the source lost: the relay reads the origin from then
   * on, and a thread of its own watches the clone to the end (there is no
   * migration left to do it). */
  struct dm_origin_fetch *origin;
  uint64_t given_up, origin_fetched;
  /* Settled with the source reachable: the relay fetches through the
   * settle session (dm_hyb_settle_finish), while that runs. */
  fc_engine_fetch_start_fn *remote;
  void *remote_ctx;
  bool settled_from_source;
  struct fc_host *host;
  struct fc_volume *vol;
  pthread_t finisher;
  bool finisher_running;
  atomic_bool finisher_stop;
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

/* hybrid's state for volume v, no device made yet. */
static struct dm_hybrid *
hyb_new(struct fc_host *host, struct fc_volume *v)
{
  struct dm_hybrid *hy = calloc(1, sizeof *hy);

  if (!hy)
    return NULL;
  pthread_mutex_init(&hy->lock, NULL);
  pthread_cond_init(&hy->cond, NULL);
  atomic_init(&hy->finisher_stop, false);
  hy->host = host;
  hy->vol = v;
  snprintf(hy->clone, sizeof hy->clone, "%s-mclone", DV(v)->name);
  snprintf(hy->clmeta, sizeof hy->clmeta, "%s-mclmeta", DV(v)->name);
  return hy;
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
  if (!(hy = hyb_new(host, v)))
    return -ENOMEM;
  hy->e = m;
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

/* The relay's fetch: the migration's, unless cut; the origin's once
 * settled with the source lost. */
static int
hyb_fetch(void *ctx, oblock_t ob, void *data, bool required, fc_engine_fetch_done_fn *done,
          void *arg)
{
  struct dm_hybrid *hy = ctx;
  struct dm_origin_fetch *origin;
  fc_engine_fetch_start_fn *remote;
  void *remote_ctx;
  struct fc_engine_migr *e;
  int r;

  pthread_mutex_lock(&hy->lock);
  origin = hy->closed ? NULL : hy->origin;
  remote = hy->closed ? NULL : hy->remote;
  remote_ctx = hy->remote_ctx;
  if (hy->closed || (hy->cut && !origin && !remote)) {
    pthread_mutex_unlock(&hy->lock);
    return -ENOTCONN;
  }
  e = hy->e;
  hy->calls++;
  pthread_mutex_unlock(&hy->lock);
  r = origin ? dm_origin_fetch_start(origin, ob, data, required, done, arg) :
      remote ? remote(remote_ctx, ob, data, required, done, arg) :
               e->fetch_source_start(e->ctx, ob, data, required, done, arg);
  pthread_mutex_lock(&hy->lock);
  if (--hy->calls == 0)
    pthread_cond_broadcast(&hy->cond);
  pthread_mutex_unlock(&hy->lock);
  return r;
}

/* No fetch reaches the migration after this returns (nor the origin,
 * when the relay reads it). */
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

/* Once the relay is gone: nothing reads through the origin's fetcher. */
static void
origin_drop(struct dm_hybrid *hy)
{
  struct dm_origin_fetch *f;

  pthread_mutex_lock(&hy->lock);
  f = hy->origin;
  if (f)
    hy->origin_fetched = dm_origin_fetch_count(f);
  hy->origin = NULL;
  pthread_mutex_unlock(&hy->lock);
  dm_origin_fetch_free(f);
}

static void
undo(struct fc_host *host, struct fc_volume *v, struct dm_hybrid *hy)
{
  struct fc_dm_info info;
  char e2[256];

  if (!fc_dm_info(hy->clone, &info) && info.exists && fc_dm_remove(hy->clone, e2, sizeof e2))
    log_error("volume %s: %s", v->p.id, e2);
  pthread_mutex_lock(&hy->lock);
  hy->closed = true;
  pthread_mutex_unlock(&hy->lock);
  cut(hy);
  if (hy->nbd) {
    int r = dm_nbd_disconnect(hy->nbd);

    if (r)
      log_warning("volume %s: disconnecting /dev/nbd of its migration: %s", v->p.id,
                  strerror(-r));
  }
  hy->nbd = NULL;
  origin_drop(hy);    /* its reads end into the relay: first */
  relay_drop(hy);
  if (!fc_dm_info(hy->clmeta, &info) && info.exists &&
      fc_dm_remove(hy->clmeta, e2, sizeof e2))
    log_error("volume %s: %s", v->p.id, e2);
  (void)host;
}

/* The relay's map: destination cache block -> origin block, from the
 * restored list.  Caller frees; NULL out of memory. */
static uint64_t *
relay_map(const struct fc_dm_migr *st)
{
  uint64_t *map = malloc(((size_t)st->nr_cblocks + 1) * sizeof *map);

  if (!map)
    return NULL;
  for (uint32_t c = 0; c < st->nr_cblocks; c++)
    map[c] = DM_RELAY_UNMAPPED;
  for (uint32_t i = 0; i < st->ninst; i++)
    map[st->inst[i].cblock.n] = st->inst[i].oblock.n;
  return map;
}

/* The relay over the restored list, served on a new kernel NBD device
 * (*nbd_dev).  With timeout 0 the kernel would wait for the relay as long
 * as it takes; RELAY_REQUEST_S and RELAY_DEAD_S say why it does not. */
static int
relay_connect(struct fc_volume *v, struct fc_dm_migr *st, struct dm_hybrid *hy,
              dev_t *nbd_dev, char *err, size_t errlen)
{
  struct dm_relay_params rp = { .volume = v->p.id, .block_size = (uint32_t)st->bs,
                                .nr_blocks = st->nr_cblocks, .max_inflight = RELAY_INFLIGHT,
                                .fetch = hyb_fetch, .fetch_ctx = hy };
  struct dm_nbd_params np = { .index = -1, .threads = RELAY_THREADS,
                              .timeout_s = RELAY_REQUEST_S,
                              .dead_conn_timeout_s = RELAY_DEAD_S };
  uint64_t *map = relay_map(st), bytes;
  struct fc_export exp;
  char nbdpath[32];
  int r;

  if (!map)
    return -ENOMEM;
  rp.oblock = map;
  r = dm_relay_new(&rp, &hy->relay);
  free(map);
  if (r) {
    snprintf(err, errlen, "cannot make the relay: %s", strerror(-r));
    return r;
  }
  dm_relay_export(hy->relay, &exp);
  if ((r = dm_nbd_connect(&exp, &np, &hy->nbd))) {
    snprintf(err, errlen, "cannot connect a kernel NBD device for the relay: %s",
             strerror(-r));
    return r;
  }
  snprintf(nbdpath, sizeof nbdpath, "/dev/nbd%d", dm_nbd_index(hy->nbd));
  return fc_dm_blockdev_size(nbdpath, &bytes, nbd_dev, err, errlen);
}

/* The clone over clmeta, cdata and the relay's device, hydration off;
 * then the export's cache table over the clone in *params.  threshold 0:
 * dm-clone's own hydration settings (a clone taken up again, whose
 * settle sets them). */
static int
clone_create(struct fc_host *host, struct fc_volume *v, struct fc_dm_migr *st,
             struct dm_hybrid *hy, dev_t nbd_dev, unsigned threshold, uint64_t batch,
             char *params, size_t len, char *err, size_t errlen)
{
  uint64_t bsec = DME(host)->block_sectors;
  char uuid[FC_DM_UUID_MAX], mdev[32], cdev[32], odev[32], tuning[96] = "";
  struct fc_dm_info mi, di, ci, xi;
  int r;

  if ((r = fc_dm_info(hy->clmeta, &mi)) || (r = fc_dm_info(DV(v)->data, &di)))
    return r;
  if (threshold)
    snprintf(tuning, sizeof tuning, " 4 hydration_threshold %u hydration_batch_size %" PRIu64,
             threshold, batch);
  snprintf(params, len, "%u:%u %u:%u %u:%u %" PRIu64 " 1 no_hydration%s", mi.major,
           mi.minor, di.major, di.minor, major(nbd_dev), minor(nbd_dev), bsec, tuning);
  fc_dmv_uuid(v->p.tag, "mclone", uuid, sizeof uuid);
  r = fc_dm_create(hy->clone, uuid,
                   &(struct fc_dm_target){ 0, (uint64_t)st->nr_cblocks * bsec, "clone", params },
                   1, err, errlen);
  if (r || (r = fc_dm_info(hy->clone, &ci)) || (r = fc_dm_info(DV(v)->meta, &xi)))
    return r;
  snprintf(mdev, sizeof mdev, "%u:%u", xi.major, xi.minor);
  snprintf(cdev, sizeof cdev, "%u:%u", ci.major, ci.minor);
  snprintf(odev, sizeof odev, "%u:%u", major(DV(v)->origin_dev), minor(DV(v)->origin_dev));
  return fc_dmc_table_params(&(struct fc_dmc_table){
                               .metadata_dev = mdev, .data_dev = cdev, .origin_dev = odev,
                               .block_sectors = bsec,
                               .mode = fc_dmc_mode_for(v->p.write_policy), .policy = "smq" },
                             params, len);
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
  uint64_t batch = HYDRATION_BATCH_BYTES / st->bs ? HYDRATION_BATCH_BYTES / st->bs : 1;
  char owner[FC_FLASH_OWNER_MAX], params[FC_ORIGIN_MAX + 160];
  struct fc_dmc_status cs;
  dev_t nbd_dev;
  uint32_t dirty = 0;
  int r;

  for (uint32_t i = 0; i < st->ninst; i++)
    dirty += st->inst[i].dirty;
  if ((r = relay_connect(v, st, hy, &nbd_dev, err, errlen)))
    goto fail;
  clmeta_owner(v->p.id, owner, sizeof owner);
  if ((r = fc_dmv_zero_first_block(host, owner, err, errlen)) ||
      (r = fc_dmv_create_linear(host, v, hy->clmeta, "mclmeta", err, errlen)))
    goto fail;
  hy->threshold = threshold_for(hy, m->rate_limit_bps, st->bs);
  if (batch > hy->threshold)
    batch = hy->threshold;
  r = clone_create(host, v, st, hy, nbd_dev, hy->threshold, batch, params, sizeof params,
                   err, errlen);
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

/* Give the kernel's clone a moment without the VM's I/O (dm_move.c
 * does the same for moves).  Under host->lock. */
static void
pulse(struct fc_volume *v, struct dm_hybrid *hy)
{
  uint64_t copying;
  char err[256];

  if (fc_dm_clone_pulse(DV(v)->name, hy->clone, PULSE_MAX_MS, &copying, err, sizeof err))
    log_error("volume %s: a hydration pause of %s: %s", v->p.id, DV(v)->name, err);
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

/* One look, under host->lock: 1 hydrated and finished, 0 not yet, -errno.
 * rate: the bytes/s the relay's source answers at (0: unlimited). */
static int
step(struct fc_host *host, struct fc_volume *v, struct dm_hybrid *hy, uint64_t rate,
     char *err, size_t errlen)
{
  FC_ASSERT_HELD(&host->lock);
  uint64_t bs = DME(host)->block_sectors * FC_SECTOR;
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
  /* A request the relay was slow to answer made the kernel drop its
   * socket (RELAY_REQUEST_S): reattach before the held reads fail. */
  if (hy->nbd)
    (void)dm_nbd_revive(hy->nbd);
  pthread_mutex_lock(&hy->lock);
  if (hydrated != hy->regions_hydrated)
    hy->progress_ms = fc_now_ms();
  hy->regions_hydrated = hydrated;
  hy->regions_total = total;
  pthread_mutex_unlock(&hy->lock);
  if (hydrated < total) {
    want = threshold_for(hy, rate, bs);
    if (want != hy->threshold) {
      snprintf(msg, sizeof msg, "hydration_threshold %u", want);
      if (!fc_dm_message(hy->clone, msg, err, errlen)) {
        pthread_mutex_lock(&hy->lock);
        hy->threshold = want;
        pthread_mutex_unlock(&hy->lock);
      }
    }
    if (fc_now_ms() - hy->progress_ms >= STALL_MS) {
      pulse(v, hy);
      pthread_mutex_lock(&hy->lock);
      hy->progress_ms = fc_now_ms();
      pthread_mutex_unlock(&hy->lock);
    }
    return 0;
  }
  r = finish(host, v, hy, err, errlen);
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
      r = step(host, m->vol, hy, m->rate_limit_bps, err, sizeof err);
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

/* ---- settled with the source lost: the rest comes from the origin ---- */

/* The clone's watcher once no migration is left: dm_hyb_end's loop, with
 * no rate limit (the origin is this host's to read).  host->lock is taken
 * by trylock: a detach or the agent's stop joins this thread, possibly
 * under host->lock, and must not wait behind it. */
static void *
finisher_main(void *arg)
{
  struct dm_hybrid *hy = arg;
  char err[512] = "";
  int r = 0;

  while (!atomic_load(&hy->finisher_stop)) {
    if (pthread_mutex_trylock(&hy->host->lock)) {
      nanosleep(&(struct timespec){ 0, 1000000L }, NULL);
      continue;
    }
    r = step(hy->host, hy->vol, hy, 0, err, sizeof err);
    pthread_mutex_unlock(&hy->host->lock);
    if (r)
      break;
    nanosleep(&(struct timespec){ 0, POLL_MS * 1000000L }, NULL);
  }
  if (r == 1) {
    log_info("volume %s: hydrated from the origin after its settle: %" PRIu64 " regions "
             "in %.2f s; the clone is gone", hy->vol->p.id, hy->regions_total,
             (double)(hy->hydrated_ms - hy->attached_ms) / 1000.0);
  } else if (r) {
    log_error("volume %s: copying its cache from the origin failed: %s; reads of the "
              "cache blocks not yet copied may fail with EIO, never older data",
              hy->vol->p.id, err);
    pthread_mutex_lock(&hy->lock);
    snprintf(hy->stopped, sizeof hy->stopped, "copying from the origin failed: %.100s",
             err);
    pthread_mutex_unlock(&hy->lock);
  }
  return NULL;
}

static void
finisher_stop(struct dm_hybrid *hy)
{
  atomic_store(&hy->finisher_stop, true);
  if (hy->finisher_running)
    pthread_join(hy->finisher, NULL);
  hy->finisher_running = false;
}

/* Is cache block c of the clone hydrated?  With the relay cut (every
 * fetch fails), a read of a region not hydrated fails and a hydrated one
 * never leaves cdata.  -errno when the clone cannot be read at all. */
static int
probe_hydrated(int fd, void *buf, uint64_t bs, uint64_t c)
{
  ssize_t n = pread(fd, buf, bs, (off_t)(c * bs));

  if (n == (ssize_t)bs)
    return 1;
  return n < 0 && errno == EIO ? 0 : n < 0 ? -errno : -EIO;
}

int
dm_hyb_settle_lost(struct fc_host *host, struct fc_volume *v, struct fc_dm_migr *st,
                   uint32_t *given_up, char *err, size_t errlen)
{
  FC_ASSERT_HELD(&host->lock);
  struct dm_hybrid *hy = st->hy;
  struct dm_origin_fetch *origin = NULL;
  char path[FC_DM_NAME_MAX + 32], msg[64];
  uint64_t lost = 0;
  void *buf = NULL;
  int fd = -1, r;

  pthread_mutex_lock(&hy->lock);
  r = hy->cut ? 0 : -EBUSY;
  pthread_mutex_unlock(&hy->lock);
  if (r) {
    snprintf(err, errlen, "volume %s is still hydrating from its source", v->p.id);
    return r;
  }
  /* Which blocks dirty at the switchover the clone does not hold: their
   * newest copy was on the source, and the origin's (older, or written
   * back here before the failure) is what the VM will read. */
  dm_migr_dev_path(hy->clone, path, sizeof path);
  if ((r = dm_migr_open_dev(path, O_RDONLY, &fd, err, errlen)))
    return r;
  if (posix_memalign(&buf, 4096, st->bs)) {
    close(fd);
    return -ENOMEM;
  }
  for (uint32_t i = 0; i < st->ninst; i++) {
    if (!st->inst[i].dirty)
      continue;
    r = probe_hydrated(fd, buf, st->bs, st->inst[i].cblock.n);
    if (r < 0) {
      snprintf(err, errlen, "cannot read cache block %" PRIu64 " of %s: %s",
               (uint64_t)st->inst[i].cblock.n, path, strerror(-r));
      break;
    }
    lost += r == 0;
    r = 0;
  }
  free(buf);
  close(fd);
  if (!r)
    r = dm_origin_fetch_new(v->p.origin, DV(v)->origin_sectors * FC_SECTOR,
                            (uint32_t)st->bs, &origin, err, errlen);
  if (r)
    return r;
  pthread_mutex_lock(&hy->lock);
  hy->origin = origin;
  hy->given_up = lost;
  hy->stopped[0] = '\0';
  hy->progress_ms = fc_now_ms();
  pthread_mutex_unlock(&hy->lock);
  snprintf(msg, sizeof msg, "hydration_threshold %u", RELAY_INFLIGHT / 2);
  if (!(r = fc_dm_message(hy->clone, msg, err, errlen)))
    r = fc_dm_message(hy->clone, "enable_hydration", err, errlen);
  if (!r) {
    atomic_store(&hy->finisher_stop, false);
    r = -pthread_create(&hy->finisher, NULL, finisher_main, hy);
    if (r)
      snprintf(err, errlen, "cannot start the copy from the origin: %s", strerror(-r));
  }
  if (r) {
    pthread_mutex_lock(&hy->lock);
    snprintf(hy->stopped, sizeof hy->stopped, "the settle could not start the copy from "
             "the origin");
    pthread_mutex_unlock(&hy->lock);
    return r;
  }
  hy->finisher_running = true;
  pthread_mutex_lock(&hy->lock);
  hy->threshold = RELAY_INFLIGHT / 2;
  pthread_mutex_unlock(&hy->lock);
  *given_up = (uint32_t)lost;
  log_info("volume %s: settled with its source lost: the %" PRIu64 " cache blocks not "
           "yet copied are read from the origin %s (%" PRIu64 " of them dirty at the "
           "switchover, given up)", v->p.id, hy->regions_total - hy->regions_hydrated,
           v->p.origin, lost);
  return 0;
}

/* Copying what is left from a source reachable again: give up after this
 * long without a region copied (the session broke, or the source cannot
 * read); nothing is lost then, the settle can be run again. */
#define FINISH_STALL_MS 30000

int
dm_hyb_settle_finish(struct fc_host *host, struct fc_volume *v, struct fc_dm_migr *st,
                     fc_engine_fetch_start_fn *fetch, void *ctx, char *err, size_t errlen)
{
  FC_ASSERT_NOT_HELD(&host->lock);
  struct dm_hybrid *hy = st->hy;
  uint64_t t0 = fc_now_ms(), last = 0;
  char msg[64], e2[256];
  int r = 0;

  pthread_mutex_lock(&host->lock);
  pthread_mutex_lock(&hy->lock);
  if (!hy->cut || hy->origin || hy->finished)
    r = -EBUSY;
  if (!r) {
    hy->remote = fetch;
    hy->remote_ctx = ctx;
    hy->stopped[0] = '\0';
    hy->progress_ms = fc_now_ms();
    hy->threshold = RELAY_INFLIGHT / 2;
  }
  pthread_mutex_unlock(&hy->lock);
  if (r)
    snprintf(err, errlen, "volume %s is not waiting for its source", v->p.id);
  snprintf(msg, sizeof msg, "hydration_threshold %u", RELAY_INFLIGHT / 2);
  if (!r && !(r = fc_dm_message(hy->clone, msg, err, errlen)))
    r = fc_dm_message(hy->clone, "enable_hydration", err, errlen);
  pthread_mutex_unlock(&host->lock);
  while (!r) {
    pthread_mutex_lock(&host->lock);
    r = step(host, v, hy, 0, err, errlen);
    pthread_mutex_unlock(&host->lock);
    if (r)
      break;
    pthread_mutex_lock(&hy->lock);
    if (hy->regions_hydrated != last) {
      last = hy->regions_hydrated;
      t0 = fc_now_ms();
    }
    pthread_mutex_unlock(&hy->lock);
    if (fc_now_ms() - t0 > FINISH_STALL_MS) {
      snprintf(err, errlen, "no cache block of volume %s copied from the source for "
               "%u s", v->p.id, FINISH_STALL_MS / 1000);
      r = -ETIMEDOUT;
      break;
    }
    nanosleep(&(struct timespec){ 0, POLL_MS * 1000000L }, NULL);
  }
  if (r == 1) {
    pthread_mutex_lock(&hy->lock);
    hy->settled_from_source = true;
    pthread_mutex_unlock(&hy->lock);
    log_info("volume %s: its cache copied from the source after the migration failed: "
             "%" PRIu64 " regions, the clone is gone", v->p.id, hy->regions_total);
    return 0;
  }
  /* Back to waiting: no fetch reaches the session once this returns. */
  pthread_mutex_lock(&hy->lock);
  hy->remote = NULL;
  while (hy->calls)
    pthread_cond_wait(&hy->cond, &hy->lock);
  snprintf(hy->stopped, sizeof hy->stopped, "copying from the source again stopped");
  pthread_mutex_unlock(&hy->lock);
  pthread_mutex_lock(&host->lock);
  if (!hy->finished && fc_dm_message(hy->clone, "disable_hydration", e2, sizeof e2))
    log_warning("volume %s: %s", v->p.id, e2);
  pthread_mutex_unlock(&host->lock);
  return r ? r : -EIO;
}

/* The cache still reads blocks through the clone: its devices may not be
 * replaced (a detach's drain, a move, a migration's freeze would load the
 * cache over cdata, where those blocks are not yet). */
int
fc_dm_migr_busy(struct fc_volume *v, char *err, size_t errlen)
{
  struct fc_dm_migr *st = DV(v)->migr;
  struct dm_hybrid *hy = st ? st->hy : NULL;
  int r = 0;

  if (!hy)
    return 0;
  pthread_mutex_lock(&hy->lock);
  if (hy->attached && !hy->finished) {
    snprintf(err, errlen, "volume %s is still copying its cache (%" PRIu64 " of %" PRIu64
             " regions, from %s; volume-show): try again once it is done", v->p.id,
             hy->regions_hydrated, hy->regions_total,
             hy->origin ? "the origin" : hy->cut ? "nowhere: settle it first" :
             "the source");
    r = -EBUSY;
  }
  pthread_mutex_unlock(&hy->lock);
  return r;
}

bool
dm_hyb_phase(struct fc_dm_migr *st, struct dm_hyb_phase *ph)
{
  struct dm_hybrid *hy = st ? st->hy : NULL;

  *ph = (struct dm_hyb_phase){ 0 };
  if (!hy)
    return false;
  pthread_mutex_lock(&hy->lock);
  ph->attached = hy->attached;
  ph->finished = hy->finished;
  ph->from_origin = hy->origin != NULL;
  pthread_mutex_unlock(&hy->lock);
  return true;
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
             "older data); the source's frozen cache still holds them: keep the source "
             "host's devices.  Settle on this host (fcache migrate ... --phase "
             "settle): with the source reachable the rest is copied from it; with "
             "--source-lost from the origin, giving up those of them that were dirty "
             "at the switchover "
             "(doc/reference/dmcache.rst, \"Settling on dmcache\")", why, left, total,
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

/* The agent stops: the relay stops with it (the kernel holds the reads of
 * blocks not yet copied for RELAY_DEAD_S, for the restarted agent's
 * dm_hyb_recover), the devices stay for the operator. */
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
  finisher_stop(hy);
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
  finisher_stop(hy);
  pthread_mutex_lock(&hy->lock);
  hy->closed = true;
  pthread_mutex_unlock(&hy->lock);
  cut(hy);
  if (hy->nbd)
    dm_nbd_release(hy->nbd);     /* waits for the reads it serves */
  origin_drop(hy);
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
  h = json_pack("{s:I, s:I, s:I, s:I, s:I, s:b, s:f, s:I, s:I, s:I, s:I, s:I, s:f, s:f, "
                "s:b, s:b, s:I, s:I}",
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
                "fetch_ms_mean", rs.fetched ? (double)rs.fetch_ns / rs.fetched / 1e6 : 0.0,
                "from_origin", hy->origin != NULL || hy->origin_fetched,
                "settled_from_source", hy->settled_from_source,
                "origin_fetched", (json_int_t)(hy->origin ? dm_origin_fetch_count(hy->origin) :
                                               hy->origin_fetched),
                "given_up_blocks", (json_int_t)hy->given_up);
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
      json_object_set_new(o, "state", json_string(hy->stopped[0] ? "degraded" :
                                                  hy->origin ? "hydrating" : "migrating"));
      if (hy->origin)
        json_object_set_new(o, "hydrating_from", json_string("origin"));
      json_object_set_new(o, "regions_hydrated", json_integer((json_int_t)hy->regions_hydrated));
      json_object_set_new(o, "regions_total", json_integer((json_int_t)hy->regions_total));
      if (hy->stopped[0]) {
        snprintf(msg, sizeof msg, "%s before the cache was copied from the source: reads "
                 "of the %" PRIu64 " cache blocks not yet copied fail with EIO until the "
                 "volume is settled from this host (fcache migrate ... --phase settle)",
                 hy->stopped, hy->regions_total - hy->regions_hydrated);
        json_object_set_new(o, "error", json_string(msg));
      }
    }
    pthread_mutex_unlock(&hy->lock);
  }
  pthread_mutex_unlock(&st->lock);
}

/* ---- a destination agent that restarted mid-hydration ---- */

/* /dev/nbdN the clone reads: its table's third device. */
static int
clone_source_index(const char *clone, int *index)
{
  char params[512], path[96], line[128];
  unsigned maj, min;
  FILE *f;
  int r = -ENOENT;

  if (fc_dm_table(clone, params, sizeof params, line, sizeof line) ||
      sscanf(params, "%*s %*s %u:%u", &maj, &min) != 2)
    return -EIO;
  snprintf(path, sizeof path, "/sys/dev/block/%u:%u/uevent", maj, min);
  if (!(f = fopen(path, "re")))
    return -errno;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "DEVNAME=nbd%d", index) == 1) {
      r = 0;
      break;
    }
  fclose(f);
  return r;
}

/* After a reboot: cmeta and cdata, clmeta (its bitmap as the clone left
 * it), the relay on a new NBD device, the clone over them without
 * hydration, and the export's cache table over the clone.  Under
 * host->lock at start-up. */
static int
rebuild_stack(struct fc_host *host, struct fc_volume *v, struct fc_dm_migr *st,
              struct dm_hybrid *hy, char *err, size_t errlen)
{
  char params[FC_ORIGIN_MAX + 160], uuid[FC_DM_UUID_MAX];
  dev_t nbd_dev;
  int r;

  if ((r = fc_dmv_ensure_linear(host, v, DV(v)->meta, "cmeta", err, errlen)) ||
      (r = fc_dmv_ensure_linear(host, v, DV(v)->data, "cdata", err, errlen)) ||
      (r = fc_dmv_ensure_linear(host, v, hy->clmeta, "mclmeta", err, errlen)) ||
      (r = relay_connect(v, st, hy, &nbd_dev, err, errlen)) ||
      (r = clone_create(host, v, st, hy, nbd_dev, 0, 0, params, sizeof params, err,
                        errlen)))
    return r;
  fc_dmv_uuid(v->p.tag, "cache", uuid, sizeof uuid);
  return fc_dm_create(DV(v)->name, uuid,
                      &(struct fc_dm_target){ 0, DV(v)->origin_sectors, "cache", params }, 1,
                      err, errlen);
}

/* The recovery of a destination that restarted mid-hydration: with the
 * devices still there (the agent died: the relay is given to the clone's
 * NBD device again) or, with rebuild, gone (the host rebooted: the clone
 * is built again over its metadata and a new NBD device, then the cache
 * over the clone). */
static int
hyb_recover(struct fc_host *host, struct fc_volume *v, bool rebuild, char *err,
            size_t errlen)
{
  struct fc_dm_engine *de = DME(host);
  char xml[FC_PATH_MAX + 200], owner[FC_FLASH_OWNER_MAX];
  struct fc_dmc_dump d = { 0 };
  struct dm_nbd_params np = { .threads = RELAY_THREADS, .timeout_s = RELAY_REQUEST_S,
                              .dead_conn_timeout_s = RELAY_DEAD_S };
  struct fc_dm_migr *st = NULL;
  struct dm_hybrid *hy = NULL;
  uint64_t hydrated = 0, total = 0, hydrating = 0, *map = NULL;
  struct fc_export exp;
  struct fc_dm_info xi;
  bool failed = false;
  int r;

  if (!(st = dm_migr_state_new(host, v)) || !(hy = hyb_new(host, v))) {
    fc_dm_migr_free(st);
    return -ENOMEM;
  }
  fc_dmv_owner(v->p.id, "cdata", owner, sizeof owner);
  st->nr_cblocks = (uint32_t)(fc_flash_pool_owned(&de->pool, owner) * FC_FLASH_EXTENT /
                              st->bs);
  /* The map the relay served: the metadata restored at the switchover,
   * kept beside the volume's state until the migration ends. */
  snprintf(xml, sizeof xml, "%s/%s.restore.xml", host->volumes_dir, v->p.id);
  if ((r = fc_dmc_xml_read(xml, &d, err, errlen)))
    goto fail;
  if (d.nr_cache_blocks != st->nr_cblocks || d.n > st->nr_cblocks) {
    snprintf(err, errlen, "%s maps %" PRIu64 " cache blocks, the volume has %u", xml,
             d.nr_cache_blocks, st->nr_cblocks);
    r = -EINVAL;
    goto fail;
  }
  if (!(st->inst = calloc((size_t)st->nr_cblocks + 1, sizeof *st->inst))) {
    r = -ENOMEM;
    goto fail;
  }
  for (uint32_t i = 0; i < d.n; i++) {
    st->inst[i] = d.map[i];
    hy->restored_dirty += d.map[i].dirty;
  }
  st->ninst = d.n;
  st->switched = true;
  hy->cut = true;           /* no migration left: every fetch fails until a settle */
  hy->attached = true;
  hy->restored = d.n;
  if (rebuild && (r = rebuild_stack(host, v, st, hy, err, errlen)))
    goto fail;
  if ((r = fc_dm_clone_status(hy->clone, &hydrated, &total, &hydrating, &failed)) ||
      failed) {
    snprintf(err, errlen, "dm-clone device %s %s", hy->clone,
             r ? "cannot be queried" : "failed its metadata");
    r = r ? r : -EIO;
    goto fail;
  }
  hy->regions_hydrated = hydrated;
  hy->regions_total = total;
  hy->attached_ms = hy->progress_ms = hy->hydrated_ms = fc_now_ms();
  /* Rebuilt, the clone reads a new device the relay serves already.
   * Otherwise the kernel held the reads of blocks not copied for
   * RELAY_DEAD_S: given a relay again, they go through, and fail with EIO
   * (the relay is cut). */
  if (!rebuild) {
    struct dm_relay_params rp = { .volume = v->p.id, .block_size = (uint32_t)st->bs,
                                  .nr_blocks = st->nr_cblocks,
                                  .max_inflight = RELAY_INFLIGHT, .fetch = hyb_fetch,
                                  .fetch_ctx = hy };

    if (!(map = relay_map(st))) {
      r = -ENOMEM;
      goto fail;
    }
    rp.oblock = map;
    if ((r = dm_relay_new(&rp, &hy->relay))) {
      snprintf(err, errlen, "cannot make the relay: %s", strerror(-r));
      goto fail;
    }
    dm_relay_export(hy->relay, &exp);
    if ((r = clone_source_index(hy->clone, &np.index))) {
      snprintf(err, errlen, "cannot tell which /dev/nbd the clone %s reads: %s",
               hy->clone, strerror(-r));
      goto fail;
    }
    if ((r = dm_nbd_reattach(&exp, &np, &hy->nbd))) {
      snprintf(err, errlen, "cannot give /dev/nbd%d a relay again: %s (down longer "
               "than %u s?)", np.index, strerror(-r), RELAY_DEAD_S);
      goto fail;
    }
  }
  /* An agent killed during a hydration pause (pulse) left the export
   * suspended, its own table still the live one: the VM's I/O waits there
   * until it is resumed.  A table loaded but not resumed would be a swap
   * cut short: left for the operator. */
  if (!fc_dm_info(DV(v)->name, &xi) && xi.exists && xi.suspended) {
    if (xi.inactive_table) {
      snprintf(err, errlen, "%s is suspended with a table loaded and not resumed",
               DV(v)->name);
      r = -EBUSY;
      goto fail;
    }
    if ((r = fc_dm_resume(DV(v)->name, err, errlen)))
      goto fail;
    log_warning("volume %s: %s was left suspended (a hydration pause cut short): "
                "resumed", v->p.id, DV(v)->name);
  }
  snprintf(hy->stopped, sizeof hy->stopped, "%s",
           rebuild ? "the host restarted" : "the agent restarted");
  (void)fc_dm_message(hy->clone, "disable_hydration", err, errlen);
  err[0] = '\0';
  st->hy = hy;
  DV(v)->migr = st;
  free(map);
  fc_dmc_dump_free(&d);
  log_warning("volume %s: taken up again mid-hydration after %s: %" PRIu64 " of "
              "%" PRIu64 " regions copied, %" PRIu64 " of the restored blocks dirty; "
              "reads of the others fail with EIO until the volume is settled from this "
              "host (fcache migrate ... --phase settle)", v->p.id,
              rebuild ? "a reboot" : "a restart", hydrated, total, hy->restored_dirty);
  return 0;
fail:
  free(map);
  fc_dmc_dump_free(&d);
  dm_hyb_free(hy);           /* the devices stay as they are, for the operator */
  fc_dm_migr_free(st);
  return r ? r : -EIO;
}

int
fc_dm_migr_recover(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  char clone[FC_DM_NAME_MAX + 16];
  struct fc_dm_info info;
  int r;

  if (DV(v)->migr && DV(v)->migr->hy)
    return 1;           /* rebuilt after a reboot (fc_dm_migr_rebuild) */
  snprintf(clone, sizeof clone, "%s-mclone", DV(v)->name);
  if (strncmp(v->p.migration, "in:", 3) || fc_dm_info(clone, &info) || !info.exists)
    return 0;
  r = dm_hyb_recover(host, v, err, errlen);
  return r ? r : 1;
}

int
dm_hyb_recover(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  return hyb_recover(host, v, false, err, errlen);
}

bool
fc_dm_migr_needs_clone(struct fc_host *host, struct fc_volume *v)
{
  struct fc_dm_engine *de = DME(host);
  char owner[FC_FLASH_OWNER_MAX];

  if (strncmp(v->p.migration, "in:", 3))
    return false;
  clmeta_owner(v->p.id, owner, sizeof owner);
  return fc_flash_pool_owned(&de->pool, owner) > 0;
}

int
fc_dm_migr_rebuild(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  return hyb_recover(host, v, true, err, errlen);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* volume-move for the dmcache engine: a kernel target under the cache
 * moves the origin, and the cache table is reloaded onto B at the end.
 * Two schemes, each a target that does what the scheme says:
 *
 * lr, with dm-clone: LR in the kernel.  A write goes to the destination
 * B, a read of a region not yet hydrated goes to the source A, and
 * background hydration copies the rest, skipping regions the VM wrote.
 *
 * mirror, with dm-mirror (legs A then B, core log): IO Mirroring in the
 * kernel, in dm_move_mirror.c.  This file has what both share (the move
 * record, the watcher, the control operations) and dm-clone's part.
 *
 * With dm-clone, the stack during a move: cache (origin = clone) over
 * clone (dest B, source A, metadata on the host's flash).  The cache's
 * blocks stay valid throughout: the clone device presents exactly A's
 * data plus the VM's writes, so nothing in the cache is stale and no
 * block is dropped.  Once every region is hydrated the cache table is
 * reloaded over B itself (the downtime: one suspend and resume of the
 * cache) and the clone goes.
 *
 * Persisted: "<volumes_dir>/<id>.clone" names B from just before the
 * cache is stacked on the clone until the clone is gone after the switch,
 * and dm-clone's metadata keeps its hydration bitmap on flash.  A restarted agent finds
 * both and the move goes on from where it was; after a host reboot the
 * clone is rebuilt over its metadata before the cache.
 *
 * Not like ucache's lr: there is no way back to A.  Writes since the start
 * are on B only and the kernel keeps no log of them, so abort is refused
 * and a failing B fails the VM's I/O, as a failing origin would. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fdio.h"
#include "common/log.h"
#include "dm_move_priv.h"

#define POLL_MS 100
/* Regions of dm-clone: a power of two from 8 sectors, and at most this
 * many, so the hydration bitmap of a TiB volume stays within a few MiB of
 * flash (2^22 regions of 256 KiB for 1 TiB). */
#define CLONE_MAX_REGIONS (1u << 22)
/* dm-clone copies in the background only while the clone has no I/O of
 * the VM's in flight, so a busy VM leaves it short idle moments; the
 * kernel's default of one region at a time then moves a region per
 * moment.  These let one moment start 8 MiB, in 1 MiB copies. */
#define HYDRATION_IN_FLIGHT (8u << 20)
#define HYDRATION_BATCH (1u << 20)
/* A VM that always has I/O in flight leaves no idle moment at all, and
 * the move would never end.  After this long without progress the
 * watcher makes one: it suspends the cache above the clone (the VM's I/O
 * waits there), wakes the clone's worker, which starts the next 8 MiB,
 * and resumes the cache once the copies are under way.  At most one such
 * pause per STALL_MS, each as long as the VM's in-flight I/O takes to
 * drain plus the worker's wake-up (PULSE_MAX_MS at most). */
#define STALL_MS 500
#define PULSE_MAX_MS 20

static const char *const state_names[] = { "copying", "switching", "done", "failed",
                                            "aborted" };
static const char *const kind_schemes[] = { "lr", "mirror" };
static const char *const kind_targets[] = { "dm-clone", "dm-mirror" };
static const char *const kind_suffixes[] = { "clone", "mirror" };

static void
move_names(const struct fc_host *host, const char *id, struct fc_dm_move *mv)
{
  snprintf(mv->clone, sizeof mv->clone, "%s-%s-clone", host->cfg.dm_prefix, id);
  snprintf(mv->cmeta, sizeof mv->cmeta, "%s-%s-clmeta", host->cfg.dm_prefix, id);
  snprintf(mv->mirror, sizeof mv->mirror, "%s-%s-mirror", host->cfg.dm_prefix, id);
}

static void
state_path(const struct fc_host *host, const char *id, enum dm_move_kind kind, char *buf,
           size_t len)
{
  snprintf(buf, len, "%s/%s.%s", host->volumes_dir, id, kind_suffixes[kind]);
}

/* A region covers whole cache blocks, so a block written back is one
 * region's hydration skipped, not two half-written ones. */
static uint64_t
region_sectors_for(uint64_t origin_sectors, uint64_t block_sectors)
{
  uint64_t r = 8;

  while (r < block_sectors)
    r <<= 1;
  while (origin_sectors / r > CLONE_MAX_REGIONS)
    r <<= 1;
  return r;
}

/* dm-clone's metadata: a superblock, space maps and a bitset of one bit
 * per region; four bits per region and a MiB of headroom cover them. */
static uint64_t
metadata_bytes(uint64_t regions)
{
  return FC_FLASH_EXTENT + regions / 2;
}

/* "from", "to" and "region_sectors" lines. */
int
fc_dmm_save_state(const struct fc_dm_move *mv, char *err, size_t errlen)
{
  char path[FC_PATH_MAX + 160], text[FC_ORIGIN_MAX * 2 + 96];
  int n, r;

  state_path(mv->host, mv->v->p.id, mv->kind, path, sizeof path);
  n = snprintf(text, sizeof text, "from %s\nto %s\nregion_sectors %" PRIu64 "\n",
               mv->from, mv->to, mv->region_sectors);
  r = fc_replace_file_durable(mv->host->volumes_dir, path, text, (size_t)n);
  if (r)
    snprintf(err, errlen, "cannot record the move of volume %s in %s: %s", mv->v->p.id,
             path, strerror(-r));
  return r;
}

/* 1: mv has the record of a move of mv->kind; 0: none. */
static int
load_state(const struct fc_host *host, const char *id, struct fc_dm_move *mv)
{
  char path[FC_PATH_MAX + 160], line[FC_ORIGIN_MAX + 32];
  FILE *f;
  int got = 0;

  state_path(host, id, mv->kind, path, sizeof path);
  if (!(f = fopen(path, "re")))
    return errno == ENOENT ? 0 : -errno;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    if (!strncmp(line, "from ", 5))
      got |= snprintf(mv->from, sizeof mv->from, "%s", line + 5) > 0 ? 1 : 0;
    else if (!strncmp(line, "to ", 3))
      got |= snprintf(mv->to, sizeof mv->to, "%s", line + 3) > 0 ? 2 : 0;
    else if (!strncmp(line, "region_sectors ", 15))
      got |= sscanf(line + 15, "%" SCNu64, &mv->region_sectors) == 1 ? 4 : 0;
  }
  fclose(f);
  return got == 7 && mv->region_sectors >= 8 ? 1 : -EINVAL;
}

void
fc_dmm_remove_state(const struct fc_dm_move *mv)
{
  char path[FC_PATH_MAX + 160];

  state_path(mv->host, mv->v->p.id, mv->kind, path, sizeof path);
  if (unlink(path) && errno != ENOENT)
    log_warning("volume %s: cannot remove %s: %s", mv->v->p.id, path, strerror(errno));
}

static int
clone_params(const struct fc_dm_move *mv, dev_t meta, char *buf, size_t len)
{
  /* Created with hydration off; the watcher turns it on once the cache
   * is stacked on the clone.  Before that the VM writes to A directly, and
   * a region copied then could go stale on B. */
  uint64_t rb = mv->region_sectors * FC_SECTOR;
  uint64_t threshold = HYDRATION_IN_FLIGHT / rb ? HYDRATION_IN_FLIGHT / rb : 1;
  uint64_t batch = HYDRATION_BATCH / rb ? HYDRATION_BATCH / rb : 1;
  int n = snprintf(buf, len, "%u:%u %u:%u %u:%u %" PRIu64 " 1 no_hydration 4 "
                   "hydration_threshold %" PRIu64 " hydration_batch_size %" PRIu64,
                   major(meta), minor(meta), major(mv->b_dev), minor(mv->b_dev),
                   major(mv->a_dev), minor(mv->a_dev), mv->region_sectors, threshold,
                   batch);

  return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/* The metadata's linear device and the clone over it.  fresh: a new move
 * (metadata zeroed first); otherwise dm-clone reads its bitmap back. */
static int
build_clone(struct fc_dm_move *mv, bool fresh, dev_t *clone_dev, char *err, size_t errlen)
{
  struct fc_host *host = mv->host;
  struct fc_volume *v = mv->v;
  char owner[FC_FLASH_OWNER_MAX], uuid[FC_DM_UUID_MAX], params[192], e2[256];
  struct fc_dm_info mi, ci;
  bool made_meta = false;
  int r;

  fc_dmv_owner(v->p.id, "clmeta", owner, sizeof owner);
  if (fresh && (r = fc_dmv_zero_first_block(host, owner, err, errlen)))
    return r;
  if ((r = fc_dm_info(mv->cmeta, &mi)))
    return r;
  if (!mi.exists) {
    if ((r = fc_dmv_create_linear(host, v, mv->cmeta, "clmeta", err, errlen)) ||
        (r = fc_dm_info(mv->cmeta, &mi)))
      return r;
    made_meta = true;
  }
  if ((r = fc_dm_info(mv->clone, &ci)))
    goto out;
  if (!ci.exists) {
    if ((r = clone_params(mv, makedev(mi.major, mi.minor), params, sizeof params))) {
      snprintf(err, errlen, "clone table line too long");
      goto out;
    }
    fc_dmv_uuid(v->p.tag, "clone", uuid, sizeof uuid);
    r = fc_dm_create(mv->clone, uuid,
                     &(struct fc_dm_target){ 0, DV(v)->origin_sectors, "clone", params },
                     1, err, errlen);
    if (r || (r = fc_dm_info(mv->clone, &ci)))
      goto out;
  }
  *clone_dev = makedev(ci.major, ci.minor);
  return 0;
out:
  if (made_meta)
    fc_dm_remove(mv->cmeta, e2, sizeof e2);
  return r;
}

static void
free_metadata_flash(struct fc_host *host, const char *id)
{
  char owner[FC_FLASH_OWNER_MAX], e2[256];

  fc_dmv_owner(id, "clmeta", owner, sizeof owner);
  fc_flash_pool_free(&DME(host)->pool, owner);
  if (fc_flash_pool_save(&DME(host)->pool, DME(host)->pool_path, e2, sizeof e2))
    log_error("volume %s: freeing its dm-clone metadata flash: %s", id, e2);
}

/* regions_done and regions_total as the kernel has them now; left as
 * they were if it cannot tell. */
static void
read_counts(struct fc_dm_move *mv)
{
  uint64_t hydrating;
  bool failed;

  (void)fc_dm_clone_status(mv->clone, &mv->regions_done, &mv->regions_total, &hydrating,
                     &failed);
}

/* Every region is on B: put the cache straight on B and drop the clone.
 * Under host->lock. */
static int
switch_to_b(struct fc_dm_move *mv, char *err, size_t errlen)
{
  struct fc_host *host = mv->host;
  struct fc_volume *v = mv->v;
  struct fc_dmvol *dv = DV(v);
  struct fc_volume_params p = v->p;
  dev_t clone_dev = dv->origin_dev;
  struct timespec t0, t1;
  char e2[256];
  int r;

  /* B in the state file before the table names it: after a crash in
   * between, the volume comes back on B, which holds every region. */
  snprintf(p.origin, sizeof p.origin, "%s", mv->to);
  if ((r = fc_volume_params_save(host->volumes_dir, &p, err, errlen)))
    return r;
  dv->origin_dev = mv->b_dev;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  r = fc_dmv_load_cache(host, v, fc_dmc_mode_for(v->p.write_policy), "smq", err, errlen);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (r) {
    dv->origin_dev = clone_dev;
    if (fc_volume_params_save(host->volumes_dir, &v->p, e2, sizeof e2))
      log_error("volume %s: %s", v->p.id, e2);
    return r;
  }
  mv->downtime_us = fc_us_between(&t0, &t1);
  v->p = p;
  /* Devices, record, flash, in that order: a restart between any two
   * finds the record with the flash and removes the rest (adoption), or
   * no record and only flash the volume's detach frees. */
  if (fc_dm_remove(mv->clone, e2, sizeof e2) || fc_dm_remove(mv->cmeta, e2, sizeof e2)) {
    log_warning("volume %s: moved to %s, but %s; the next start removes it", v->p.id,
                mv->to, e2);
    return 0;
  }
  fc_dmm_remove_state(mv);
  free_metadata_flash(host, v->p.id);
  return 0;
}

/* Make an idle moment for the clone (see STALL_MS).  Under host->lock. */
static void
pulse(struct fc_dm_move *mv)
{
  uint64_t copying, us;
  struct timespec t0, t1;
  char err[256];
  int r;

  clock_gettime(CLOCK_MONOTONIC, &t0);
  r = fc_dm_clone_pulse(DV(mv->v)->name, mv->clone, PULSE_MAX_MS, &copying, err,
                        sizeof err);
  if (r) {
    log_error("volume %s: move: a pause of %s for the copy: %s", mv->v->p.id,
              DV(mv->v)->name, err);
    return;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  us = fc_us_between(&t0, &t1);
  mv->pulses++;
  log_debug("volume %s: move: paused the cache %" PRIu64 " us, %" PRIu64 " regions copying",
            mv->v->p.id, us, copying);
  if (us > mv->pulse_us_max)
    mv->pulse_us_max = us;
}

void
fc_dmm_end(struct fc_dm_move *mv, enum dm_move_state state)
{
  mv->state = state;
  mv->ended_ms = fc_now_ms();
  if (state == DMM_DONE)
    log_info("volume %s: origin moved from %s to %s with %s in %.1f s, downtime "
             "%.1f ms", mv->v->p.id, mv->from, mv->to, kind_targets[mv->kind],
             (double)(mv->ended_ms - mv->started_ms) / 1000.0,
             (double)mv->downtime_us / 1000.0);
  else if (state == DMM_ABORTED)
    log_info("volume %s: move to %s aborted; the origin is %s again", mv->v->p.id,
             mv->to, mv->from);
  else
    log_error("volume %s: move to %s: %s", mv->v->p.id, mv->to, mv->error);
}

/* One look at the clone, under host->lock: false once the move ended. */
static bool
clone_poll(struct fc_dm_move *mv)
{
  bool failed = false;
  char err[512];
  int r = 0;

  if (!mv->hydrating) {
    r = fc_dm_message(mv->clone, "enable_hydration", err, sizeof err);
    mv->hydrating = !r;
  }
  if (!r) {
    uint64_t before = mv->regions_done, hydrating;

    r = fc_dm_clone_status(mv->clone, &mv->regions_done, &mv->regions_total, &hydrating,
                     &failed);
    if (!r && mv->regions_done != before)
      mv->progress_ms = fc_now_ms();
  }
  if (r || failed) {
    snprintf(mv->error, sizeof mv->error, "dm-clone device %.128s %s; the VM's I/O to "
             "regions not yet on %.1024s fails until it is repaired (see "
             "doc/reference/storage-migration.rst)", mv->clone,
             r ? "cannot be queried" : "failed its metadata", mv->to);
    goto failed;
  }
  if (mv->regions_done < mv->regions_total) {
    if (fc_now_ms() - mv->progress_ms >= STALL_MS) {
      pulse(mv);
      mv->progress_ms = fc_now_ms();
    }
    return true;
  }
  mv->state = DMM_SWITCHING;
  if (switch_to_b(mv, err, sizeof err)) {
    snprintf(mv->error, sizeof mv->error, "cannot switch the cache to %.1024s: %.200s",
             mv->to, err);
    goto failed;
  }
  fc_dmm_end(mv, DMM_DONE);
  return false;
failed:
  fc_dmm_end(mv, DMM_FAILED);
  return false;
}

static void *
watch_main(void *arg)
{
  struct fc_dm_move *mv = arg;
  bool going = true;

  while (going && !atomic_load(&mv->stop)) {
    nanosleep(&(struct timespec){ 0, POLL_MS * 1000000L }, NULL);
    /* Not a plain lock: a detach frees the move (and joins this thread)
     * under host->lock, so waiting for the lock must give way to stop. */
    while (pthread_mutex_trylock(&mv->host->lock)) {
      if (atomic_load(&mv->stop))
        return NULL;
      nanosleep(&(struct timespec){ 0, 1000000L }, NULL);
    }
    /* An abort ends the move under the lock, between two looks. */
    if (mv->state <= DMM_SWITCHING && !atomic_load(&mv->stop))
      going = mv->kind == DMM_MIRROR ? fc_dmm_mirror_poll(mv) : clone_poll(mv);
    else
      going = false;
    pthread_mutex_unlock(&mv->host->lock);
  }
  return NULL;
}

static int
start_watch(struct fc_dm_move *mv, char *err, size_t errlen)
{
  int r = pthread_create(&mv->thread, NULL, watch_main, mv);

  if (r) {
    snprintf(err, errlen, "cannot start the move's watcher: %s", strerror(r));
    return -r;
  }
  mv->thread_running = true;
  return 0;
}

/* Stop watching (the agent stops; the kernel keeps copying), with or
 * without host->lock held: the watcher gives way to stop. */
void
fc_dm_move_free(struct fc_dm_move *mv)
{
  if (!mv)
    return;
  atomic_store(&mv->stop, true);
  if (mv->thread_running)
    pthread_join(mv->thread, NULL);
  free(mv);
}

static struct fc_dm_move *
move_new(struct fc_host *host, struct fc_volume *v)
{
  struct fc_dm_move *mv = calloc(1, sizeof *mv);

  if (!mv)
    return NULL;
  mv->host = host;
  mv->v = v;
  atomic_init(&mv->stop, false);
  move_names(host, v->p.id, mv);
  return mv;
}

static int
dm_move_start(struct fc_host *host, struct fc_volume *v, const struct fc_move_request *req,
              char *err, size_t errlen)
{
  struct fc_dmvol *dv = DV(v);
  struct fc_dm_move *mv = NULL;
  char owner[FC_FLASH_OWNER_MAX], e2[256];
  bool allocated = false, stacked = false;
  uint64_t bbytes;
  dev_t clone_dev = 0;
  int r;

  if (strcmp(req->scheme, "lr") && strcmp(req->scheme, "mirror")) {
    snprintf(err, errlen, "engine dmcache runs the schemes the kernel has targets for: "
             "mirror (dm-mirror) and lr (dm-clone); %s needs engine ucache "
             "(doc/reference/storage-migration.rst, Engines)", req->scheme);
    return -ENOTSUP;
  }
  if (req->rate_limit_bps) {
    snprintf(err, errlen, "engine dmcache cannot rate-limit a move: %s copies as fast "
             "as %s takes it", strcmp(req->scheme, "lr") ? "dm-mirror" : "dm-clone",
             req->to);
    return -ENOTSUP;
  }
  /* control_move.c refuses a volume in a live migration. */
  if (v->error[0]) {
    snprintf(err, errlen, "volume %s is unavailable (%s); move its origin once that "
             "is resolved", v->p.id, v->error);
    return -EBUSY;
  }
  if ((r = fc_dm_migr_busy(v, err, errlen)))
    return r;
  if (dv->move && dv->move->state <= DMM_SWITCHING) {
    snprintf(err, errlen, "volume %s is already moving its origin to %s", v->p.id,
             dv->move->to);
    return -EBUSY;
  }
  /* Its clone or mirror, recorded, is still under the cache. */
  if (dv->move && dv->move->state == DMM_FAILED && dv->origin_dev != dv->move->a_dev &&
      dv->origin_dev != dv->move->b_dev) {
    snprintf(err, errlen, "the last move of volume %s to %s failed and its %s is "
             "still under the cache; restart the agent to take that move up again, "
             "or detach the volume", v->p.id, dv->move->to,
             kind_targets[dv->move->kind]);
    return -EBUSY;
  }
  if (!(mv = move_new(host, v)))
    return -ENOMEM;
  mv->kind = strcmp(req->scheme, "lr") ? DMM_MIRROR : DMM_CLONE;
  snprintf(mv->from, sizeof mv->from, "%s", v->p.origin);
  snprintf(mv->to, sizeof mv->to, "%s", req->to);
  mv->a_dev = dv->origin_dev;
  r = fc_dm_checked_blockdev(host, req->to, &bbytes, &mv->b_dev, err, errlen);
  if (r)
    goto out;
  if (mv->b_dev == mv->a_dev) {
    snprintf(err, errlen, "%s is the volume's origin already", req->to);
    r = -EINVAL;
    goto out;
  }
  if (bbytes < dv->origin_sectors * FC_SECTOR) {
    snprintf(err, errlen, "%s (%llu bytes) is smaller than the volume's origin %s "
             "(%llu bytes)", req->to, (unsigned long long)bbytes, v->p.origin,
             (unsigned long long)(dv->origin_sectors * FC_SECTOR));
    r = -ENOSPC;
    goto out;
  }
  mv->region_sectors = region_sectors_for(dv->origin_sectors, DME(host)->block_sectors);
  if (mv->kind == DMM_MIRROR) {
    if ((r = fc_dmm_mirror_start(mv, err, errlen)))
      goto out;
    stacked = true;
  } else {
    fc_dmv_owner(v->p.id, "clmeta", owner, sizeof owner);
    r = fc_flash_pool_alloc(&DME(host)->pool, owner,
                            metadata_bytes(dv->origin_sectors / mv->region_sectors + 1));
    if (r) {
      snprintf(err, errlen, "no flash for the dm-clone metadata of volume %s: %s",
               v->p.id, strerror(-r));
      goto out;
    }
    allocated = true;
    if ((r = fc_flash_pool_save(&DME(host)->pool, DME(host)->pool_path, err, errlen)) ||
        (r = build_clone(mv, true, &clone_dev, err, errlen)))
      goto out;
    /* Recorded before the cache is stacked on the clone: a restarted
     * agent must know the clone is in the VM's path. */
    if ((r = fc_dmm_save_state(mv, err, errlen)))
      goto out;
    dv->origin_dev = clone_dev;
    r = fc_dmv_load_cache(host, v, fc_dmc_mode_for(v->p.write_policy), "smq", err,
                          errlen);
    if (r) {
      dv->origin_dev = mv->a_dev;
      fc_dmm_remove_state(mv);
      goto out;
    }
    stacked = true;
  }
  mv->started_ms = mv->progress_ms = fc_now_ms();
  mv->state = DMM_COPYING;
  if (mv->kind == DMM_CLONE)
    read_counts(mv);
  if ((r = start_watch(mv, err, errlen)))
    goto out;
  fc_dm_move_free(dv->move);
  dv->move = mv;
  log_info("volume %s: moving its origin from %s to %s with %s (%s), %" PRIu64
           "-sector regions", v->p.id, mv->from, mv->to, kind_targets[mv->kind],
           kind_schemes[mv->kind], mv->region_sectors);
  return 0;
out:
  if (stacked) {
    /* The VM may have written through the clone or mirror since the
     * reload, so it stays and the move is reported failed. */
    snprintf(mv->error, sizeof mv->error, "%s", err);
    mv->state = DMM_FAILED;
    fc_dm_move_free(dv->move);
    dv->move = mv;
    return r;
  }
  if (clone_dev) {
    fc_dm_remove(mv->clone, e2, sizeof e2);
    fc_dm_remove(mv->cmeta, e2, sizeof e2);
  }
  if (allocated)
    free_metadata_flash(host, v->p.id);
  free(mv);
  return r;
}

static int
dm_move_abort(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  struct fc_dm_move *mv = DV(v)->move;

  (void)host;
  if (!mv || mv->state > DMM_SWITCHING) {
    snprintf(err, errlen, "volume %s is not moving its origin", v->p.id);
    return -ENOENT;
  }
  if (mv->kind == DMM_MIRROR)
    return fc_dmm_mirror_abort(mv, err, errlen);
  snprintf(err, errlen, "engine dmcache cannot abort a move with scheme lr: dm-clone "
           "keeps the VM's writes since the start on %s only, so %s is no longer "
           "whole; the move finishes by itself (%" PRIu64 " of %" PRIu64 " regions)",
           mv->to, mv->from, mv->regions_done, mv->regions_total);
  return -ENOTSUP;
}

static json_t *
dm_move_status_json(struct fc_host *host, struct fc_volume *v)
{
  struct fc_dm_move *mv = DV(v)->move;
  uint64_t rb = 0, end, elapsed, done, total, eta = 0;
  json_t *o;

  (void)host;
  if (!mv)
    return NULL;
  rb = mv->region_sectors * FC_SECTOR;
  end = mv->ended_ms ? mv->ended_ms : fc_now_ms();
  elapsed = end - mv->started_ms;
  total = DV(v)->origin_sectors * FC_SECTOR;
  done = mv->regions_done * rb < total ? mv->regions_done * rb : total;
  if (mv->state == DMM_DONE)
    done = total;
  if (mv->state == DMM_COPYING && done && elapsed)
    eta = (total - done) * elapsed / done / 1000;
  o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:i, s:f, s:f}",
                "volume_id", v->p.id, "scheme", kind_schemes[mv->kind],
                "engine_path", kind_targets[mv->kind],
                "state", state_names[mv->state], "from", mv->from, "to", mv->to,
                "bytes_total", (json_int_t)total, "bytes_copied", (json_int_t)done,
                "regions_total", (json_int_t)mv->regions_total,
                mv->kind == DMM_MIRROR ? "regions_in_sync" : "regions_hydrated",
                (json_int_t)mv->regions_done,
                "eta_s", (json_int_t)eta, "rounds", 0,
                "downtime_ms", (double)mv->downtime_us / 1000.0,
                "elapsed_s", (double)elapsed / 1000.0);
  if (o) {
    json_object_set_new(o, "pauses", json_integer((json_int_t)mv->pulses));
    json_object_set_new(o, "pause_ms_max", json_real((double)mv->pulse_us_max / 1000.0));
  }
  if (o)
    json_object_set_new(o, "error", mv->error[0] ? json_string(mv->error) : json_null());
  return o;
}

static bool
dm_move_running(const struct fc_volume *v)
{
  return DV(v) && DV(v)->move && DV(v)->move->state <= DMM_SWITCHING;
}

bool
fc_dm_move_claims(const struct fc_dmvol *dv, const char *name)
{
  return dv->move && (!strcmp(name, dv->move->clone) || !strcmp(name, dv->move->cmeta) ||
                      !strcmp(name, dv->move->mirror));
}

/* After the cache device is gone: a failed move's clone or mirror goes
 * with it, and B is left as the move left it. */
static int
remove_move(struct fc_host *host, struct fc_volume *v, struct fc_dm_move *mv, char *err,
            size_t errlen)
{
  struct fc_dm_info ci, mi;
  int r;

  (void)host;
  (void)v;
  if (mv->kind == DMM_MIRROR)
    return fc_dmm_mirror_remove(mv, err, errlen);
  if ((r = fc_dm_info(mv->clone, &ci)) || (r = fc_dm_info(mv->cmeta, &mi)))
    return r;
  if ((ci.exists && (r = fc_dm_remove(mv->clone, err, errlen))) ||
      (mi.exists && (r = fc_dm_remove(mv->cmeta, err, errlen))))
    return r;
  fc_dmm_remove_state(mv);
  return 0;
}

int
fc_dm_move_detach(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  return DV(v)->move ? remove_move(host, v, DV(v)->move, err, errlen) : 0;
}

int
fc_dmm_cache_on(const struct fc_dmvol *dv, dev_t dev)
{
  char table[FC_ORIGIN_MAX + 256], err[256], want[32];
  struct fc_dm_info info;
  int r = fc_dm_info(dv->name, &info);

  if (r)
    return r;
  if (!info.exists)
    return 1;
  if ((r = fc_dm_table(dv->name, table, sizeof table, err, sizeof err)))
    return r;
  snprintf(want, sizeof want, " %u:%u ", major(dev), minor(dev));
  return strstr(table, want) ? 2 : 0;
}

/* A recorded dm-clone move: it goes on, or is cleaned up. */
static int
clone_adopt(struct fc_dm_move *mv, char *err, size_t errlen)
{
  struct fc_host *host = mv->host;
  struct fc_volume *v = mv->v;
  struct fc_dmvol *dv = DV(v);
  dev_t clone_dev;
  uint64_t bbytes;
  int r;

  /* The state file may already name B (a crash during the switch, which
   * only starts once every region is on B): the devices come from the
   * record, and the watcher finishes the switch. */
  r = fc_dm_blockdev_size(mv->from, &bbytes, &mv->a_dev, err, errlen);
  if (!r)
    r = fc_dm_blockdev_size(mv->to, &bbytes, &mv->b_dev, err, errlen);
  if (!r)
    r = build_clone(mv, false, &clone_dev, err, errlen);
  if (r)
    return r;
  r = fc_dmm_cache_on(dv, clone_dev);
  if (r <= 0) {
    if (r == 0 && !strcmp(v->p.origin, mv->to)) {
      /* Stopped after the switch to B, before the clean-up. */
      log_info("volume %s: its move to %s had switched; removing the clone", v->p.id,
               mv->to);
    } else if (r == 0) {
      /* Stopped between building the clone and stacking the cache on
       * it: hydration never ran, and A has every write. */
      log_warning("volume %s: its move to %s never started (the agent stopped "
                  "before the cache was put on the clone); forgotten", v->p.id,
                  mv->to);
    }
    if (r == 0) {
      r = remove_move(host, v, mv, err, errlen);
      if (!r)
        free_metadata_flash(host, v->p.id);
    } else {
      snprintf(err, errlen, "cannot read the table of %s", dv->name);
    }
    return r;
  }
  /* The cache is (or will be rebuilt) over the clone, not over A. */
  dv->origin_dev = clone_dev;
  read_counts(mv);
  log_info("volume %s: resuming the move of its origin from %s to %s (dm-clone keeps "
           "its progress)", v->p.id, mv->from, mv->to);
  return 1;
}

int
fc_dm_move_adopt(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  struct fc_dm_move *mv = move_new(host, v);
  int r;

  if (!mv)
    return -ENOMEM;
  /* One record at most: a move is recorded from before its device is
   * in the VM's path until after it is out of it, one move at a time. */
  mv->kind = DMM_CLONE;
  if ((r = load_state(host, v->p.id, mv)) == 0) {
    mv->kind = DMM_MIRROR;
    r = load_state(host, v->p.id, mv);
  }
  if (r > 0) {
    mv->state = DMM_COPYING;
    mv->started_ms = mv->progress_ms = fc_now_ms();
    r = mv->kind == DMM_MIRROR ? fc_dmm_mirror_adopt(mv, err, errlen)
                               : clone_adopt(mv, err, errlen);
  } else if (r < 0) {
    snprintf(err, errlen, "the move record of volume %s is unreadable: %s", v->p.id,
             strerror(-r));
  }
  if (r > 0 && (r = start_watch(mv, err, errlen)) == 0) {
    DV(v)->move = mv;
    return 0;
  }
  free(mv);
  return r;
}

/* The schemes the kernel has a target for, in the agent's order:
 * dm-mirror is IO Mirroring, dm-clone lazy replication. */
static json_t *
dm_move_schemes_json(void)
{
  return json_pack("[s, s]", "mirror", "lr");
}

const struct fc_engine_move_ops fc_dm_move_ops = {
  .start = dm_move_start,
  .abort = dm_move_abort,
  .status_json = dm_move_status_json,
  .running = dm_move_running,
  .schemes_json = dm_move_schemes_json,
};

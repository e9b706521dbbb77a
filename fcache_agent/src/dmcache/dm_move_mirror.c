/* SPDX-License-Identifier: Apache-2.0 */
/* volume-move with scheme mirror on the dmcache engine: the kernel's
 * dm-mirror target (drivers/md/dm-raid1.c) with legs A then B and a core
 * (in-memory) region log is IO Mirroring as the paper defines it:
 *
 * - at resume every region is out of sync, and the kernel recovers them
 *   one at a time, copying the region from the first leg (A) to B with
 *   kcopyd, whatever the VM is doing;
 * - a write to a region in sync goes to both legs at once (one dm-io
 *   request to both) and completes when both have it: the VM's write
 *   latency is the slower leg's;
 * - a write to a region not yet in sync goes to A only (the copy will
 *   take it there);
 * - a write to the region being recovered is held until its copy ends,
 *   then goes to both legs;
 * - reads go to A.
 *
 * So A has every write throughout (abort goes back to it), and once the
 * status line counts every region in sync B equals A.  The cache is then
 * suspended (its in-flight I/O drains), the count checked again, and the
 * cache table reloaded straight over B: the downtime.
 *
 * The stack during a move: cache (origin = mirror) over mirror (A, B).
 * The cache's blocks stay valid throughout (the mirror presents A's data
 * and every write reaches A), so none is dropped.  A write_back cache's
 * dirty blocks are on neither leg; they stay dirty in the cache's
 * metadata across both reloads and are written back through the mirror
 * (to both legs, or to A and then copied) before the switch and to B
 * after it, so B plus the cache is the volume at every moment.
 *
 * Persisted: "<volumes_dir>/<id>.mirror" names B from before the mirror
 * is in the VM's path until after it left it.  The core log is in kernel
 * memory: an agent restart finds the mirror and goes on; after a host
 * reboot the mirror is rebuilt and the copy starts over from A, which has
 * every write.  A disk log would keep the progress, but it needs its own
 * device and a region written per region in sync; the copy of a volume is
 * cheap next to that machinery for a case that needs a reboot.
 *
 * B failing (a leg whose health is not 'A'): the kernel keeps writing A
 * (no handle_errors: a failed leg only marks its regions out of sync),
 * and the watcher puts the cache back on A and drops the mirror. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "dm_move_priv.h"

/* "core 1 <region> 2 <A> 0 <B> 0": no features, so a failing leg does
 * not stop the mirror (handle_errors would hold every write until
 * userspace removed the leg). */
static int
mirror_params(const struct fc_dm_move *mv, char *buf, size_t len)
{
  int n = snprintf(buf, len, "core 1 %" PRIu64 " 2 %u:%u 0 %u:%u 0", mv->region_sectors,
                   major(mv->a_dev), minor(mv->a_dev), major(mv->b_dev), minor(mv->b_dev));

  return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/* Created and resumed: the kernel starts copying A to B at once, so the
 * VM must not write A except through the mirror from here on (the
 * caller has the cache suspended, or gone). */
static int
build_mirror(struct fc_dm_move *mv, dev_t *dev, char *err, size_t errlen)
{
  char params[128], uuid[FC_DM_UUID_MAX];
  struct fc_dm_info info;
  int r;

  if ((r = fc_dm_info(mv->mirror, &info)))
    return r;
  if (!info.exists) {
    if (mirror_params(mv, params, sizeof params)) {
      snprintf(err, errlen, "mirror table line too long");
      return -ENAMETOOLONG;
    }
    fc_dmv_uuid(mv->v->p.tag, "mirror", uuid, sizeof uuid);
    r = fc_dm_create(mv->mirror, uuid,
                     &(struct fc_dm_target){ 0, DV(mv->v)->origin_sectors, "mirror",
                                             params },
                     1, err, errlen);
    if (r) {
      size_t n = strlen(err);
      snprintf(err + n, errlen - n, " (is the dm-mirror module loaded?)");
      return r;
    }
    if ((r = fc_dm_info(mv->mirror, &info)))
      return r;
  }
  *dev = makedev(info.major, info.minor);
  return 0;
}

/* "2 <A> <B> <in sync>/<regions> 1 <health A><health B> <log status>";
 * health 'A' is alive, anything else a failure the kernel saw. */
static int
mirror_status(const char *name, uint64_t *in_sync, uint64_t *total, char health[2])
{
  char params[512], e2[256], a[64], b[64], h[8];
  unsigned long long s, t;
  unsigned legs, nh;
  int r = fc_dm_status(name, params, sizeof params, e2, sizeof e2);

  if (r)
    return r;
  if (sscanf(params, "%u %63s %63s %llu/%llu %u %7s", &legs, a, b, &s, &t, &nh, h) != 7 ||
      legs != 2 || nh != 1 || strlen(h) != 2)
    return -EPROTO;
  *in_sync = s;
  *total = t;
  health[0] = h[0];
  health[1] = h[1];
  return 0;
}

static void
mirror_remove_device(struct fc_dm_move *mv)
{
  char e2[256];

  if (fc_dm_remove(mv->mirror, e2, sizeof e2))
    log_warning("volume %s: %s; the next start removes it", mv->v->p.id, e2);
}

/* The cache over origin dev, resumed; it may be suspended already. */
static int
put_cache_on(struct fc_dm_move *mv, dev_t dev, char *err, size_t errlen)
{
  struct fc_volume *v = mv->v;
  dev_t was = DV(v)->origin_dev;
  int r;

  DV(v)->origin_dev = dev;
  r = fc_dmv_load_cache(mv->host, v, fc_dmc_mode_for(v->p.write_policy), "smq", err,
                        errlen);
  if (r)
    DV(v)->origin_dev = was;
  return r;
}

static void
resume_cache(struct fc_dm_move *mv)
{
  char e2[256];

  if (fc_dm_resume(DV(mv->v)->name, e2, sizeof e2))
    log_error("volume %s: cannot resume %s: %s", mv->v->p.id, DV(mv->v)->name, e2);
}

int
fc_dmm_mirror_start(struct fc_dm_move *mv, char *err, size_t errlen)
{
  struct fc_dmvol *dv = DV(mv->v);
  struct timespec t0, t1;
  dev_t mdev = 0;
  int r;

  /* The VM's I/O waits in the suspended cache from before the kernel
   * starts copying until the cache writes through the mirror: a write
   * to A beside the mirror could land in a region already copied. */
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if ((r = fc_dm_suspend(dv->name, err, errlen)))
    return r;
  if ((r = build_mirror(mv, &mdev, err, errlen)))
    goto out;
  /* Recorded before the cache is stacked on the mirror: a restarted
   * agent must know the mirror is in the VM's path. */
  if ((r = fc_dmm_save_state(mv, err, errlen)))
    goto out;
  if ((r = put_cache_on(mv, mdev, err, errlen))) {
    fc_dmm_remove_state(mv);
    goto out;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  mv->pulses = 1;
  mv->pulse_us_max = fc_us_between(&t0, &t1);
  return 0;
out:
  resume_cache(mv);
  if (mdev)
    mirror_remove_device(mv);
  return r;
}

/* Leave the mirror for A, which has every write: the cache suspended,
 * A's health checked while nothing can write, the cache reloaded over
 * A, the mirror and the record gone. */
static int
back_to_a(struct fc_dm_move *mv, char *err, size_t errlen)
{
  const char *cache = DV(mv->v)->name;
  uint64_t in_sync, total;
  char health[2];
  int r;

  if ((r = fc_dm_suspend(cache, err, errlen)))
    return r;
  if ((r = mirror_status(mv->mirror, &in_sync, &total, health))) {
    snprintf(err, errlen, "cannot read the status of %s: %s", mv->mirror, strerror(-r));
    goto out;
  }
  if (health[0] != 'A') {
    snprintf(err, errlen, "%s failed under the mirror (health %c): it may lack writes "
             "that reached %s only", mv->from, health[0], mv->to);
    r = -EIO;
    goto out;
  }
  if ((r = put_cache_on(mv, mv->a_dev, err, errlen)))
    goto out;
  mirror_remove_device(mv);
  fc_dmm_remove_state(mv);
  return 0;
out:
  resume_cache(mv);
  return r;
}

int
fc_dmm_mirror_abort(struct fc_dm_move *mv, char *err, size_t errlen)
{
  int r = back_to_a(mv, err, errlen);

  if (r)
    return r;
  fc_dmm_end(mv, DMM_ABORTED);
  return 0;
}

/* Every region in sync: the cache onto B.  0 when switched, 1 when the
 * mirror fell out of sync meanwhile (the move goes on), -errno. */
static int
switch_to_b(struct fc_dm_move *mv, char *err, size_t errlen)
{
  struct fc_host *host = mv->host;
  struct fc_volume *v = mv->v;
  struct fc_volume_params p = v->p;
  dev_t mdev = DV(v)->origin_dev;
  uint64_t in_sync, total;
  struct timespec t0, t1;
  char health[2], e2[256];
  int r;

  clock_gettime(CLOCK_MONOTONIC, &t0);
  if ((r = fc_dm_suspend(DV(v)->name, err, errlen)))
    return r;
  /* With the cache suspended nothing writes the mirror: in sync now is
   * B equal to A until the cache runs over B. */
  r = mirror_status(mv->mirror, &in_sync, &total, health);
  if (r || in_sync < total || health[0] != 'A' || health[1] != 'A') {
    resume_cache(mv);
    if (r)
      snprintf(err, errlen, "cannot read the status of %s: %s", mv->mirror,
               strerror(-r));
    return r ? r : 1;
  }
  /* B in the state file before the table names it: after a crash in
   * between, the volume comes back on B, which equals A. */
  snprintf(p.origin, sizeof p.origin, "%s", mv->to);
  if ((r = fc_volume_params_save(host->volumes_dir, &p, err, errlen))) {
    resume_cache(mv);
    return r;
  }
  if ((r = put_cache_on(mv, mv->b_dev, err, errlen))) {
    if (fc_volume_params_save(host->volumes_dir, &v->p, e2, sizeof e2))
      log_error("volume %s: %s", v->p.id, e2);
    DV(v)->origin_dev = mdev;
    resume_cache(mv);
    return r;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  mv->downtime_us = fc_us_between(&t0, &t1);
  v->p = p;
  mirror_remove_device(mv);
  fc_dmm_remove_state(mv);
  return 0;
}

bool
fc_dmm_mirror_poll(struct fc_dm_move *mv)
{
  uint64_t in_sync, total;
  char health[2], err[512];
  int r = mirror_status(mv->mirror, &in_sync, &total, health);

  if (r) {
    snprintf(mv->error, sizeof mv->error, "dm-mirror device %.128s cannot be queried "
             "(%s); the volume stays on it (see doc/reference/storage-migration.rst)",
             mv->mirror, strerror(-r));
    goto failed;
  }
  if (health[1] != 'A') {
    /* The kernel took B out of the writes; A has them all. */
    r = back_to_a(mv, err, sizeof err);
    snprintf(mv->error, sizeof mv->error, "%.1024s failed under the mirror (health "
             "%c)%s%.300s", mv->to, health[1],
             r ? "; cannot go back to the source: " : "; the volume is back on its "
             "source, which has every write", r ? err : "");
    goto failed;
  }
  if (health[0] != 'A') {
    snprintf(mv->error, sizeof mv->error, "%.500s failed under the mirror (health "
             "%c); %.500s has only the regions in sync (%" PRIu64 " of %" PRIu64
             "); the volume stays on the mirror", mv->from, health[0], mv->to, in_sync,
             total);
    goto failed;
  }
  if (in_sync != mv->regions_done)
    mv->progress_ms = fc_now_ms();
  mv->regions_done = in_sync;
  mv->regions_total = total;
  if (in_sync < total)
    return true;
  mv->state = DMM_SWITCHING;
  r = switch_to_b(mv, err, sizeof err);
  if (r == 1) {
    mv->state = DMM_COPYING;
    return true;
  }
  if (r) {
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

int
fc_dmm_mirror_remove(struct fc_dm_move *mv, char *err, size_t errlen)
{
  struct fc_dm_info info;
  int r;

  if ((r = fc_dm_info(mv->mirror, &info)) ||
      (info.exists && (r = fc_dm_remove(mv->mirror, err, errlen))))
    return r;
  fc_dmm_remove_state(mv);
  return 0;
}

/* The cache device, when suspended by an agent that stopped, reloaded
 * over dev and resumed: its inactive table, if any, was loaded by that
 * agent for a step it did not finish, and a bare resume would run it. */
static int
settle_cache(struct fc_dm_move *mv, dev_t dev, char *err, size_t errlen)
{
  struct fc_dm_info info;
  int r = fc_dm_info(DV(mv->v)->name, &info);

  if (r || !info.exists || !info.suspended)
    return r;
  log_info("volume %s: its cache device was left suspended; resuming it", mv->v->p.id);
  return put_cache_on(mv, dev, err, errlen);
}

int
fc_dmm_mirror_adopt(struct fc_dm_move *mv, char *err, size_t errlen)
{
  struct fc_volume *v = mv->v;
  struct fc_dmvol *dv = DV(v);
  struct fc_dm_info info;
  bool switched = !strcmp(v->p.origin, mv->to);
  dev_t mdev = 0;
  uint64_t bytes;
  int r, on;

  if ((r = fc_dm_blockdev_size(mv->from, &bytes, &mv->a_dev, err, errlen)) ||
      (r = fc_dm_blockdev_size(mv->to, &bytes, &mv->b_dev, err, errlen)) ||
      (r = fc_dm_info(mv->mirror, &info)))
    return r;
  if (info.exists)
    mdev = makedev(info.major, info.minor);
  /* 1: no cache device (a reboot), 2: on the mirror, 0: elsewhere (with
   * no mirror device, the cache cannot be on it). */
  on = fc_dmm_cache_on(dv, mdev);
  if (on < 0) {
    snprintf(err, errlen, "cannot read the table of %s", dv->name);
    return on;
  }
  if (on == 2) {
    /* The mirror is in the VM's path and the kernel kept copying. */
    if ((r = settle_cache(mv, mdev, err, errlen)))
      return r;
    dv->origin_dev = mdev;
    log_info("volume %s: resuming the move of its origin from %s to %s (dm-mirror "
             "kept copying)", v->p.id, mv->from, mv->to);
    return 1;
  }
  if (on == 1 && !switched) {
    /* A reboot: the core log is gone, A has every write; the copy
     * starts over, before the cache is rebuilt over the mirror. */
    if ((r = build_mirror(mv, &mdev, err, errlen)))
      return r;
    dv->origin_dev = mdev;
    log_info("volume %s: resuming the move of its origin from %s to %s (the mirror "
             "is rebuilt: its region log was in memory, the copy starts over)",
             v->p.id, mv->from, mv->to);
    return 1;
  }
  /* The cache is not on the mirror: stopped after the switch (the state
   * file names B, which equals A or has every write since), or before
   * the cache was put on the mirror (A has every write).  A suspended
   * cache is resumed on the origin its state file names. */
  if (on == 0 && (r = settle_cache(mv, dv->origin_dev, err, errlen)))
    return r;
  if (switched)
    log_info("volume %s: its move to %s had switched; removing the mirror", v->p.id,
             mv->to);
  else
    log_warning("volume %s: its move to %s never started (the agent stopped before "
                "the cache was put on the mirror); forgotten", v->p.id, mv->to);
  if ((r = fc_dmm_mirror_remove(mv, err, errlen)))
    return r;
  return 0;
}

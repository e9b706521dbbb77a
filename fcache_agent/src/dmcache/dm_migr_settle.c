/* SPDX-License-Identifier: Apache-2.0 */
/* Settling a dmcache migration that failed past its switchover
 * (engine.h's fc_engine_settle_ops; doc/reference/dmcache.rst, "Settling
 * on dmcache").  Only hybrid gets there on this engine: its destination
 * runs on a dm-clone that reads the blocks not copied yet from the
 * source's frozen cache.  Three cases:
 *
 *   reachable  settled from the destination's host (or from the
 *              source's, which asks the destination to): the migration
 *              layer opens a settle session, the source serves FETCH there
 *              (source_read) and the clone hydrates through it to the end
 *              (dest_finish); then nothing is only on the source, which
 *              drops its copy (the "missing" steps with an empty list);
 *   hydrated   the clone held everything before the failure (COMPLETE was
 *              lost): the same steps at once;
 *   lost       the operator gives the source up (--source-lost): the
 *              blocks not copied are read from the origin from then on,
 *              and those dirty at the switchover are counted as given up.
 *
 * A frozen source never writes a block back (its cache table is gone, and
 * the destination cannot tell which of those blocks it wrote back and
 * demoted since), so the steps that would ask it to are refused.  A
 * destination agent that restarted mid-hydration took its clone up again
 * at start (dm_hyb_recover) and settles the same way. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dm_migr_priv.h"
#include "common/log.h"

static bool
is_source(const struct fc_volume *v)
{
  return !strncmp(v->p.migration, "out:", 4);
}

static int
usable(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  struct fc_dm_migr *st = DV(v)->migr;
  struct dm_hyb_phase ph;

  (void)host;
  if (is_source(v) || !v->p.migration[0])
    return 0;     /* the source drops its copy; unmarked: completed */
  if (!st || !st->hy) {
    snprintf(err, errlen, "volume %s cannot be settled on engine dmcache: %s (see "
             "doc/reference/dmcache.rst, \"Settling on dmcache\")", v->p.id,
             st ? "only hybrid's destination can be, and this migration's strategy "
                  "is another" :
                  "this agent restarted since the migration failed and could not take "
                  "up its copy from the source (see the volume's error); reads of the "
                  "blocks not copied fail with EIO, never older data; keep the source "
                  "host's devices");
    return -EIO;
  }
  if (!dm_hyb_phase(st, &ph) || !ph.attached) {
    snprintf(err, errlen, "volume %s: its migration failed before the switchover: "
             "abort it (migration-abort on both hosts), there is nothing to settle",
             v->p.id);
    return -EINVAL;
  }
  return 0;
}

static int
dest_list(struct fc_host *host, struct fc_volume *v, bool missing, uint64_t **list,
          uint32_t *n, char *err, size_t errlen)
{
  struct dm_hyb_phase ph;

  (void)host;
  *list = NULL;
  *n = 0;
  if (missing && dm_hyb_phase(DV(v)->migr, &ph) && ph.finished)
    return 0;
  snprintf(err, errlen, "volume %s (dmcache) still reads the cache blocks not yet copied "
           "from the source's frozen cache: settle it through the agents, from the "
           "destination host (fcache migrate VOL --to DST --migration MID --phase "
           "settle) or the source's (--from SRC), which copies them from the source "
           "first; keep the source host's devices until then.  "
           "If the source is gone for good, --source-lost gives them up instead (the "
           "origin's copies are read; the ones dirty at the switchover are lost and "
           "counted) (doc/reference/dmcache.rst, \"Settling on dmcache\")", v->p.id);
  return -ENOTSUP;
}

static int
dest_end(struct fc_host *host, struct fc_volume *v, bool missing, bool source_lost,
         uint32_t *given_up, char *err, size_t errlen)
{
  struct fc_dm_migr *st = DV(v)->migr;
  struct dm_hyb_phase ph;
  int r;

  *given_up = 0;
  if (!missing)
    return -ENOTSUP;    /* a restarted destination settles in missing mode too */
  if (dm_hyb_phase(st, &ph) && ph.finished)
    return 0;
  if (!source_lost) {
    snprintf(err, errlen, "volume %s (dmcache) still reads cache blocks from the "
             "source: ending with source=released would serve the origin's older "
             "copies of those dirty at the switchover; end with source=lost to give "
             "them up (--source-lost)", v->p.id);
    return -EBUSY;
  }
  pthread_mutex_lock(&host->lock);
  r = dm_hyb_settle_lost(host, v, st, given_up, err, errlen);
  pthread_mutex_unlock(&host->lock);
  return r;
}

/* Still reading from the source's frozen cache: not hydrated, and not
 * given up to the origin (dm_hyb_settle_lost). */
static bool
dest_needs_source(struct fc_host *host, struct fc_volume *v)
{
  struct dm_hyb_phase ph;

  (void)host;
  return !strncmp(v->p.migration, "in:", 3) && dm_hyb_phase(DV(v)->migr, &ph) &&
         ph.attached && !ph.finished && !ph.from_origin;
}

/* The restarted destination took the clone up again (dm_hyb_recover):
 * what is only on the source is what the clone has not copied. */
static bool
dest_exact_after_restart(struct fc_host *host, struct fc_volume *v)
{
  struct dm_hyb_phase ph;

  (void)host;
  return dm_hyb_phase(DV(v)->migr, &ph) && ph.attached;
}

static int
dest_finish(struct fc_host *host, struct fc_volume *v, fc_engine_fetch_start_fn *fetch,
            void *ctx, char *err, size_t errlen)
{
  if (!dest_needs_source(host, v))
    return 0;
  return dm_hyb_settle_finish(host, v, DV(v)->migr, fetch, ctx, err, errlen);
}

static int
source_read(struct fc_host *host, struct fc_volume *v, oblock_t ob, void *data, bool *dirty)
{
  char err[512] = "";
  int r;

  pthread_mutex_lock(&host->lock);
  r = is_source(v) ? dm_migr_frozen_reopen(host, v, err, sizeof err) : -EINVAL;
  pthread_mutex_unlock(&host->lock);
  if (r) {
    log_error("volume %s: cannot serve its frozen cache to the settle: %s", v->p.id,
              err[0] ? err : strerror(-r));
    return r == -ENOENT ? -EIO : r;
  }
  return dm_migr_frozen_read(v, ob, data, dirty);
}

static int
dest_resume(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  (void)host;
  snprintf(err, errlen, "volume %s: a restarted dmcache destination is not settled "
           "in held mode", v->p.id);
  return -ENOTSUP;
}

/* Dropping is all a frozen source does per block: its cache is removed
 * whole when it releases. */
static int
source_block(struct fc_volume *v, oblock_t ob, bool write_back)
{
  (void)v;
  (void)ob;
  return write_back ? -ENOTSUP : 0;
}

static int
source_sync(struct fc_volume *v, bool written_back)
{
  (void)v;
  (void)written_back;
  return 0;
}

static int
source_forget_all(struct fc_volume *v)
{
  if (DV(v)->migr)
    dm_migr_close_fds(DV(v)->migr);
  /* A restarted source's "did not complete" is what the settle resolved:
   * the volume detaches (its frozen devices go, nothing written back). */
  v->error[0] = '\0';
  return 0;
}

const struct fc_engine_settle_ops fc_dm_settle_ops = {
  .usable = usable,
  .dest_list = dest_list,
  .dest_end = dest_end,
  .dest_resume = dest_resume,
  .source_block = source_block,
  .source_sync = source_sync,
  .source_forget_all = source_forget_all,
  .dest_exact_after_restart = dest_exact_after_restart,
  .dest_needs_source = dest_needs_source,
  .dest_finish = dest_finish,
  .source_read = source_read,
  .source_no_writeback = "a frozen dmcache source cannot write its blocks back (its "
                         "cache table is gone): only the destination settles a dmcache "
                         "migration, and the source then drops its copy "
                         "(release rest=drop)",
};

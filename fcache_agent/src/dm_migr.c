/* dmcache's side of live migration (engine.h).  The kernel serves the
 * VM; the agent moves cache blocks between the hosts' cache data devices
 * (cache block n at sector n * block_size) and writes the destination's
 * metadata with cache_restore.  doc/dmcache.rst has the why; in short:
 *
 * Source.  Freezing swaps the export's table for an `error` table (the VM
 * has left: a stray request fails instead of diverging).  The cache
 * table's suspend writes dirty bits and smq hints to the metadata, which
 * no table then holds, so cache_dump can read it: that dump is the block
 * list, hottest (highest smq level) first.  A write_back volume whose
 * destination reads the origin is drained with the cleaner policy in
 * between (the hints are taken from the dump before the drain: the
 * cleaner's own suspend drops them).
 *
 * Destination.  The export starts as a linear table over the origin (the
 * hypervisor may probe the disk), is suspended when the source connects
 * (the gate: the kernel queues the VM's requests) and gets its final
 * table at the switchover:
 *   none        a cache table over the fresh metadata;
 *   firepan     blocks copied before the switchover are written at their
 *               cache block offsets and cache_restore'd with their dirty
 *               bits before COMPLETE; the cache table loads them;
 *   firepan_if, cachemior
 *               a dm-era table over the origin, so the VM runs uncached
 *               while the blocks arrive (from the source, or preloaded
 *               from the origin) and the kernel records every block it
 *               writes.  Then: cache_restore the arrived blocks, swap the
 *               era table for a passthrough cache table (the kernel
 *               invalidates on any later write), invalidate_cblocks what
 *               era_invalidate lists, reload in the volume's mode.
 * cloudcache and hybrid need an on-demand fetch the kernel cannot do:
 * refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "dm_engine.h"
#include "dm_priv.h"
#include "dm_tools.h"
#include "dm_xml.h"
#include "invfilter.h"
#include "log.h"
#include "xfer_frame.h"

#define ERA_FIRST 1u            /* a fresh dm-era device's first era */
#define INVALIDATE_PER_MSG 32   /* cache blocks per invalidate_cblocks message */
#define NR_LEVELS 64u           /* smq's queue levels: hints are 0..63 */

struct fc_dm_migr {
  pthread_mutex_t lock;
  uint64_t bs;                  /* bytes per cache block */
  uint64_t nr_oblocks;
  int data_fd;                  /* the cache data device, O_DIRECT */
  int origin_fd;                /* destination, cachemior: preload reads */
  /* source */
  bool frozen;
  struct fc_dmc_mapping *map;   /* the dump, sorted by oblock */
  uint32_t n;
  /* destination */
  bool gated, switched, ended, era;
  char emeta[FC_DM_NAME_MAX + 8];   /* dm-era metadata device, "" if none */
  struct fc_invfilter have;     /* oblocks installed or being written */
  struct fc_dmc_mapping *inst;  /* in arrival order (hottest first) */
  uint32_t ninst, next_cb, nr_cblocks, uncommitted;
  uint64_t installed, discarded, era_written;
};

static struct fc_dm_migr *
state(struct fc_migration *m)
{
  return m->vol->dm->migr;
}

static void
xml_path(struct fc_migration *m, const char *what, char *buf, size_t len)
{
  snprintf(buf, len, "%s/%s.%s.xml", m->agent->volumes_dir, m->volume_id, what);
}

static void
dev_path(const char *name, char *buf, size_t len)
{
  snprintf(buf, len, "/dev/mapper/%s", name);
}

/* One block at a page-aligned bounce buffer: the devices are opened
 * O_DIRECT (the kernel's cache writes bypass their page cache, so a
 * buffered read could return an old page). */
static int
block_io(int fd, bool write, void *data, uint64_t bs, uint64_t off)
{
  void *buf;
  ssize_t n;
  int r = 0;

  if (posix_memalign(&buf, 4096, bs))
    return -ENOMEM;
  if (write)
    memcpy(buf, data, bs);
  n = write ? pwrite(fd, buf, bs, (off_t)off) : pread(fd, buf, bs, (off_t)off);
  if (n < 0)
    r = -errno;
  else if ((uint64_t)n != bs)
    r = -EIO;
  if (!r && !write)
    memcpy(data, buf, bs);
  free(buf);
  return r;
}

static struct fc_dm_migr *
state_new(struct fc_agent *agent, struct fc_volume *v)
{
  struct fc_dm_migr *st = calloc(1, sizeof *st);

  if (!st)
    return NULL;
  pthread_mutex_init(&st->lock, NULL);
  st->bs = agent->dm->block_sectors * FC_SECTOR;
  st->nr_oblocks = v->dm->origin_sectors * FC_SECTOR / st->bs;
  st->data_fd = st->origin_fd = -1;
  return st;
}

void
fc_dm_migr_free(struct fc_dm_migr *st)
{
  if (!st)
    return;
  if (st->data_fd >= 0)
    close(st->data_fd);
  if (st->origin_fd >= 0)
    close(st->origin_fd);
  free(st->map);
  free(st->inst);
  fc_invfilter_destroy(&st->have);
  pthread_mutex_destroy(&st->lock);
  free(st);
}

static int
open_dev(const char *path, int flags, int *fd, char *err, size_t errlen)
{
  *fd = open(path, flags | O_DIRECT | O_CLOEXEC);
  if (*fd >= 0)
    return 0;
  snprintf(err, errlen, "cannot open %.300s: %s", path, strerror(errno));
  return -errno;
}

/* The devices must not be held open once the volume may be detached. */
static void
close_fds(struct fc_dm_migr *st)
{
  pthread_mutex_lock(&st->lock);
  if (st->data_fd >= 0)
    close(st->data_fd);
  if (st->origin_fd >= 0)
    close(st->origin_fd);
  st->data_fd = st->origin_fd = -1;
  pthread_mutex_unlock(&st->lock);
}

static int
supports(enum fc_strategy s, char *err, size_t errlen)
{
  switch (s) {
  case FC_STRAT_NONE:
  case FC_STRAT_CACHEMIOR:
  case FC_STRAT_FIREPAN:
  case FC_STRAT_FIREPAN_IF:
    return 0;
  default:
    snprintf(err, errlen, "strategy %s needs engine ucache: it fetches a block from "
             "the source's cache when the VM misses on it, and the kernel's dm-cache "
             "cannot hold a request while a block comes over the network (see "
             "doc/dmcache.rst); on dmcache use none, cachemior, firepan or firepan_if",
             fc_strategy_name(s));
    return -ENOTSUP;
  }
}

/* ---- source ---- */

static int
to_error(struct fc_volume *v, char *err, size_t errlen)
{
  return fc_dmv_swap(v->dm->name,
                     &(struct fc_dm_target){ 0, v->dm->origin_sectors, "error", "" },
                     err, errlen);
}

static int
dump(struct fc_migration *m, struct fc_dmc_dump *d, char *err, size_t errlen)
{
  char meta[FC_DM_NAME_MAX + 32], xml[FC_PATH_MAX + 200];
  int r;

  dev_path(m->vol->dm->meta, meta, sizeof meta);
  xml_path(m, "dump", xml, sizeof xml);
  r = fc_dmc_dump_run(meta, xml, err, errlen);
  if (!r)
    r = fc_dmc_xml_read(xml, d, err, errlen);
  return r;
}

static int
cmp_oblock(const void *a, const void *b)
{
  uint64_t x = ((const struct fc_dmc_mapping *)a)->oblock.n;
  uint64_t y = ((const struct fc_dmc_mapping *)b)->oblock.n;

  return x < y ? -1 : x > y;
}

/* Hottest first: smq's level, then the lower cache block (smq fills
 * cache blocks in order, so an older block of the same level first). */
static int
cmp_hot(const void *a, const void *b)
{
  const struct fc_dmc_mapping *x = a, *y = b;

  if (x->hint != y->hint)
    return x->hint > y->hint ? -1 : 1;
  return x->cblock.n < y->cblock.n ? -1 : x->cblock.n > y->cblock.n;
}

/* After a drain the mappings are the same blocks, now clean; keep the
 * smq levels the first dump had. */
static void
carry_hints(struct fc_dmc_dump *to, const struct fc_dmc_dump *from)
{
  uint32_t j = 0;

  for (uint32_t i = 0; i < to->n; i++) {
    while (j < from->n && from->map[j].cblock.n < to->map[i].cblock.n)
      j++;
    if (j < from->n && from->map[j].cblock.n == to->map[i].cblock.n &&
        from->map[j].oblock.n == to->map[i].oblock.n)
      to->map[i].hint = from->map[j].hint;
  }
}

static int
freeze_locked(struct fc_migration *m, bool flush, char *err, size_t errlen)
{
  struct fc_agent *agent = m->agent;
  struct fc_volume *v = m->vol;
  struct fc_dm_migr *st = v->dm->migr;
  struct fc_dmc_dump d1 = { 0 }, d2 = { 0 };
  char data[FC_DM_NAME_MAX + 32];
  bool dirty = false;
  int r;

  close_fds(st);
  r = to_error(v, err, errlen);
  if (r)
    return r;
  st->frozen = true;
  r = dump(m, &d1, err, errlen);
  for (uint32_t i = 0; !r && i < d1.n; i++)
    dirty |= d1.map[i].dirty;
  if (!r && flush && dirty) {
    /* The destination will read these from the origin. */
    r = fc_dmv_drain(agent, v, err, errlen);
    if (!r)
      r = to_error(v, err, errlen);
    if (!r)
      r = dump(m, &d2, err, errlen);
    if (!r) {
      carry_hints(&d2, &d1);
      fc_dmc_dump_free(&d1);
      d1 = d2;
    }
  }
  if (r)
    goto out;
  dev_path(v->dm->data, data, sizeof data);
  r = open_dev(data, O_RDONLY, &st->data_fd, err, errlen);
  if (r)
    goto out;
  qsort(d1.map, d1.n, sizeof *d1.map, cmp_oblock);
  st->map = d1.map;
  st->n = d1.n;
  d1.map = NULL;
  log_info("volume %s: frozen for migration %s, %u cached blocks%s", v->p.id, m->id,
           st->n, flush && dirty ? " (dirty blocks written back)" : "");
out:
  fc_dmc_dump_free(&d1);
  return r;
}

static int
thaw_locked(struct fc_migration *m)
{
  struct fc_volume *v = m->vol;
  struct fc_dm_migr *st = v->dm->migr;
  char err[512];
  int r;

  if (!st || !st->frozen)
    return 0;
  r = fc_dmv_load_cache(m->agent, v, fc_dmc_mode_for(v->p.write_policy), "smq", err,
                        sizeof err);
  if (r) {
    log_error("volume %s: cannot serve again after migration %s: %s", v->p.id, m->id,
              err);
    return r;
  }
  /* The state stays until the volume goes: migration-status of an older
   * migration of this volume may be reading its counters. */
  close_fds(st);
  pthread_mutex_lock(&st->lock);
  st->frozen = false;
  free(st->map);
  st->map = NULL;
  st->n = 0;
  pthread_mutex_unlock(&st->lock);
  log_info("volume %s: serving again (migration %s rolled back)", v->p.id, m->id);
  return 0;
}

static int
out_freeze(struct fc_migration *m, bool flush, char *err, size_t errlen)
{
  struct fc_agent *agent = m->agent;
  struct fc_volume *v = m->vol;
  int r = 0;

  pthread_mutex_lock(&agent->lock);
  /* A volume that arrived by migration keeps that state (its counters
   * may still be read); the source side uses the same structure. */
  if (!v->dm->migr && !(v->dm->migr = state_new(agent, v)))
    r = -ENOMEM;
  if (!r && !v->dm->migr->frozen) {
    r = freeze_locked(m, flush, err, errlen);
    /* The migration fails and will be aborted: until then the VM must
     * not hit the error table for nothing. */
    if (r && v->dm->migr->frozen)
      thaw_locked(m);
  }
  pthread_mutex_unlock(&agent->lock);
  return r;
}

static int
out_thaw(struct fc_migration *m)
{
  return thaw_locked(m);
}

static int
out_list(struct fc_migration *m, uint64_t **list, uint32_t *n, bool dirty_only)
{
  struct fc_dm_migr *st = state(m);
  struct fc_dmc_mapping *hot = malloc(((size_t)st->n + 1) * sizeof *hot);
  uint64_t *v = malloc(((size_t)st->n + 1) * sizeof *v);
  uint32_t k = 0;

  if (!hot || !v) {
    free(hot);
    free(v);
    return -ENOMEM;
  }
  memcpy(hot, st->map, (size_t)st->n * sizeof *hot);
  qsort(hot, st->n, sizeof *hot, cmp_hot);
  for (uint32_t i = 0; i < st->n; i++)
    if (!dirty_only || hot[i].dirty)
      v[k++] = hot[i].oblock.n | (hot[i].dirty ? FC_XFER_DIRTY_BIT : 0);
  free(hot);
  *list = v;
  *n = k;
  return 0;
}

static int
out_read(struct fc_migration *m, oblock_t ob, void *data, bool *dirty)
{
  struct fc_dm_migr *st = state(m);
  struct fc_dmc_mapping key = { .oblock = ob };
  struct fc_dmc_mapping *e = st && st->map ?
    bsearch(&key, st->map, st->n, sizeof key, cmp_oblock) : NULL;

  if (!e || st->data_fd < 0)
    return -ENOENT;
  *dirty = e->dirty;
  return block_io(st->data_fd, false, data, st->bs, (uint64_t)e->cblock.n * st->bs);
}

/* Nothing per block: the frozen cache is removed whole when the
 * migration completes (dropping one block would need a reload into
 * passthrough, and nothing reads it meanwhile). */
static int
out_forget(struct fc_migration *m, oblock_t ob)
{
  return 0;
}

static int
out_forget_all(struct fc_migration *m)
{
  if (state(m))
    close_fds(state(m));
  return 0;
}

/* ---- destination ---- */

static int
era_alloc(struct fc_agent *agent, struct fc_volume *v, struct fc_dm_migr *st,
          char *err, size_t errlen)
{
  struct fc_dm_engine *e = agent->dm;
  char owner[FC_FLASH_OWNER_MAX];
  /* The size dm-era needs: fixed structures plus a writeset bit and a
   * 4-byte era per block, with room for the btrees. */
  uint64_t bytes = 4ull * 1024 * 1024 + st->nr_oblocks * 8;
  int r;

  fc_dmv_owner(v->p.id, "emeta", owner, sizeof owner);
  fc_flash_pool_free(&e->pool, owner);    /* a previous migration's leftover */
  r = fc_flash_pool_alloc(&e->pool, owner, bytes);
  if (r) {
    snprintf(err, errlen, "flash device full: the dm-era metadata of volume %s needs "
             "%llu bytes", v->p.id, (unsigned long long)bytes);
    return r;
  }
  if ((r = fc_flash_pool_save(&e->pool, e->pool_path, err, errlen)) ||
      (r = fc_dmv_zero_first_block(agent, owner, err, errlen)))
    goto fail;
  snprintf(st->emeta, sizeof st->emeta, "%s-emeta", v->dm->name);
  r = fc_dmv_create_linear(agent, v, st->emeta, "emeta", err, errlen);
  if (!r)
    return 0;
  st->emeta[0] = '\0';
fail:
  fc_flash_pool_free(&e->pool, owner);
  return r;
}

void
fc_dm_migr_detach(struct fc_agent *agent, struct fc_volume *v)
{
  struct fc_dm_engine *e = agent->dm;
  char owner[FC_FLASH_OWNER_MAX], name[FC_DM_NAME_MAX + 8], err[512];
  struct fc_dm_info info;

  snprintf(name, sizeof name, "%s-emeta", v->dm->name);
  if (!fc_dm_info(name, &info) && info.exists && fc_dm_remove(name, err, sizeof err))
    log_error("volume %s: %s", v->p.id, err);
  fc_dmv_owner(v->p.id, "emeta", owner, sizeof owner);
  if (fc_flash_pool_free(&e->pool, owner) &&
      fc_flash_pool_save(&e->pool, e->pool_path, err, sizeof err))
    log_error("%s", err);
  if (v->dm->migr) {
    close_fds(v->dm->migr);
    v->dm->migr->emeta[0] = '\0';
  }
}

static int
to_linear(struct fc_volume *v, char *err, size_t errlen)
{
  char params[FC_ORIGIN_MAX + 8];

  snprintf(params, sizeof params, "%s 0", v->p.origin);
  return fc_dmv_swap(v->dm->name,
                     &(struct fc_dm_target){ 0, v->dm->origin_sectors, "linear", params },
                     err, errlen);
}

static int
in_begin(struct fc_migration *m)
{
  struct fc_agent *agent = m->agent;
  struct fc_volume *v = m->vol;
  struct fc_dm_migr *st = state_new(agent, v);
  char owner[FC_FLASH_OWNER_MAX], path[FC_DM_NAME_MAX + 32], err[512] = "";
  int r = -ENOMEM;

  if (!st)
    return r;
  fc_dmv_owner(v->p.id, "cdata", owner, sizeof owner);
  st->nr_cblocks = (uint32_t)(fc_flash_pool_owned(&agent->dm->pool, owner) *
                              FC_FLASH_EXTENT / st->bs);
  st->era = m->strategy == FC_STRAT_FIREPAN_IF || m->strategy == FC_STRAT_CACHEMIOR;
  st->inst = calloc((size_t)st->nr_cblocks + 1, sizeof *st->inst);
  if (!st->inst || (r = fc_invfilter_init(&st->have, 1024)))
    goto out;
  dev_path(v->dm->data, path, sizeof path);
  r = open_dev(path, O_RDWR, &st->data_fd, err, sizeof err);
  if (!r && m->strategy == FC_STRAT_CACHEMIOR)
    r = open_dev(v->p.origin, O_RDONLY, &st->origin_fd, err, sizeof err);
  if (!r && st->era)
    r = era_alloc(agent, v, st, err, sizeof err);
  /* The fresh cache table goes (its metadata stays formatted and clean,
   * free for cache_restore); the hypervisor's probe reads see the origin. */
  if (!r)
    r = to_linear(v, err, sizeof err);
out:
  if (r) {
    log_error("migration %s: cannot prepare volume %s: %s", m->id, v->p.id,
              err[0] ? err : strerror(-r));
    fc_dm_migr_free(st);
    return r;
  }
  v->dm->migr = st;
  return 0;
}

static void
in_connected(struct fc_migration *m)
{
  struct fc_agent *agent = m->agent;
  char err[512];

  pthread_mutex_lock(&agent->lock);
  if (m->vol && state(m) && !state(m)->switched) {
    /* The gate: the kernel holds the VM's requests while suspended. */
    if (fc_dm_suspend(m->vol->dm->name, err, sizeof err))
      log_error("migration %s: %s", m->id, err);
    else
      state(m)->gated = true;
  }
  pthread_mutex_unlock(&agent->lock);
}

static int
in_add_remote(struct fc_migration *m, oblock_t ob, bool dirty)
{
  return -EPROTO;     /* only on-demand strategies list remote blocks */
}

/* Write what arrived as the metadata, with hints from the arrival order
 * (the source sends hottest first): the first 1/64 get smq's top level.
 * Under agent->lock, while no table holds the metadata. */
static int
commit(struct fc_migration *m, char *err, size_t errlen)
{
  struct fc_volume *v = m->vol;
  struct fc_dm_migr *st = state(m);
  char xml[FC_PATH_MAX + 200], meta[FC_DM_NAME_MAX + 32];
  struct fc_dmc_mapping *map;
  uint32_t n;
  int r;

  pthread_mutex_lock(&st->lock);
  n = st->ninst;
  map = malloc(((size_t)n + 1) * sizeof *map);
  if (map) {
    memcpy(map, st->inst, (size_t)n * sizeof *map);
    st->uncommitted = 0;
  }
  pthread_mutex_unlock(&st->lock);
  if (!map)
    return -ENOMEM;
  for (uint32_t i = 0; i < n; i++)
    map[i].hint = NR_LEVELS - 1 - (uint32_t)((uint64_t)i * NR_LEVELS / n);
  r = fdatasync(st->data_fd) ? -errno : 0;
  if (r)
    snprintf(err, errlen, "cannot sync the cache data of volume %s: %s", v->p.id,
             strerror(-r));
  xml_path(m, "restore", xml, sizeof xml);
  dev_path(v->dm->meta, meta, sizeof meta);
  if (!r)
    r = fc_dmc_xml_write(xml, m->agent->dm->block_sectors, st->nr_cblocks, map, n, err,
                         errlen);
  if (!r)
    r = fc_dmc_restore_run(xml, meta, err, errlen);
  free(map);
  if (r) {
    pthread_mutex_lock(&st->lock);
    st->uncommitted = 1;
    pthread_mutex_unlock(&st->lock);
  }
  return r;
}

static bool
any_dirty(struct fc_dm_migr *st)
{
  bool d = false;

  pthread_mutex_lock(&st->lock);
  for (uint32_t i = 0; i < st->ninst && !d; i++)
    d = st->inst[i].dirty;
  pthread_mutex_unlock(&st->lock);
  return d;
}

/* Give the VM something when the cache cannot be attached: the origin
 * when it is current (every strategy but firepan with dirty blocks), an
 * error otherwise -- never stale data. */
static void
fallback_locked(struct fc_migration *m)
{
  char err[512];
  int r = any_dirty(state(m)) ? to_error(m->vol, err, sizeof err)
                              : to_linear(m->vol, err, sizeof err);

  if (r)
    log_error("migration %s: cannot set a fallback table on %s: %s", m->id,
              m->vol->dm->name, err);
}

static void
in_switch(struct fc_migration *m)
{
  struct fc_agent *agent = m->agent;
  struct fc_volume *v;
  struct fc_dm_migr *st;
  char err[512] = "", params[FC_ORIGIN_MAX + 64];
  int r = 0;

  pthread_mutex_lock(&agent->lock);
  v = m->vol;
  st = v ? state(m) : NULL;
  if (!st || st->switched) {
    pthread_mutex_unlock(&agent->lock);
    return;
  }
  if (st->era) {
    struct fc_dm_info mi;
    r = fc_dm_info(st->emeta, &mi);
    if (!r && !mi.exists)
      r = -ENODEV;
    if (!r) {
      snprintf(params, sizeof params, "%u:%u %s %" PRIu64, mi.major, mi.minor,
               v->p.origin, agent->dm->block_sectors);
      r = fc_dmv_swap(v->dm->name,
                      &(struct fc_dm_target){ 0, v->dm->origin_sectors, "era", params },
                      err, sizeof err);
    }
  } else {
    if (m->strategy == FC_STRAT_FIREPAN && st->uncommitted)
      r = commit(m, err, sizeof err);
    if (!r)
      r = fc_dmv_load_cache(agent, v, fc_dmc_mode_for(v->p.write_policy), "smq", err,
                            sizeof err);
  }
  st->switched = true;
  st->gated = false;
  if (r)
    fallback_locked(m);
  pthread_mutex_unlock(&agent->lock);
  if (r)
    fc_migr_fail(m, "cannot attach the cache at the switchover: %s",
                 err[0] ? err : strerror(-r));
  else
    log_info("migration %s: volume %s runs here (%s)", m->id, m->volume_id,
             st->era ? "origin, writes recorded by dm-era" : "cache attached");
}

static int
in_install(struct fc_migration *m, oblock_t ob, const void *data, bool dirty)
{
  struct fc_dm_migr *st = state(m);
  uint32_t cb;
  int r;

  if (ob.n >= st->nr_oblocks)
    return -ERANGE;
  pthread_mutex_lock(&st->lock);
  if (fc_invfilter_contains(&st->have, ob)) {
    st->discarded++;
    pthread_mutex_unlock(&st->lock);
    return 1;
  }
  if (st->next_cb >= st->nr_cblocks) {
    st->discarded++;
    pthread_mutex_unlock(&st->lock);
    /* A clean block is at the origin too; a dirty one has no other home
     * here (the caches are the same size, so this means a smaller one). */
    return dirty ? -ENOSPC : 1;
  }
  r = fc_invfilter_add(&st->have, ob);
  cb = st->next_cb++;
  pthread_mutex_unlock(&st->lock);
  if (r < 0)
    return r;
  r = block_io(st->data_fd, true, (void *)data, st->bs, (uint64_t)cb * st->bs);
  pthread_mutex_lock(&st->lock);
  if (!r) {
    st->inst[st->ninst++] = (struct fc_dmc_mapping){ .oblock = ob,
                                                      .cblock = to_cblock(cb),
                                                      .dirty = dirty };
    st->installed++;
    st->uncommitted++;
  }
  pthread_mutex_unlock(&st->lock);
  return r;
}

static int
in_preload(struct fc_migration *m, oblock_t ob)
{
  struct fc_dm_migr *st = state(m);
  bool have;
  void *buf;
  int r;

  if (ob.n >= st->nr_oblocks)
    return -ERANGE;
  pthread_mutex_lock(&st->lock);
  have = fc_invfilter_contains(&st->have, ob);
  pthread_mutex_unlock(&st->lock);
  if (have)
    return 1;
  buf = malloc(st->bs);
  if (!buf)
    return -ENOMEM;
  r = block_io(st->origin_fd, false, buf, st->bs, ob.n * st->bs);
  if (!r)
    r = in_install(m, ob, buf, false);
  free(buf);
  return r;
}

static int
cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

  return x < y ? -1 : x > y;
}

/* The cache blocks of installed copies whose origin block dm-era saw
 * written; *all: era's list could not be read, so every copy is suspect. */
static int
era_victims(struct fc_migration *m, uint32_t **cbs, uint32_t *n, char *err,
            size_t errlen)
{
  struct fc_dm_migr *st = state(m);
  char xml[FC_PATH_MAX + 200], meta[FC_DM_NAME_MAX + 32];
  uint64_t *written = NULL;
  uint32_t nw = 0, k = 0;
  int r;

  dev_path(st->emeta, meta, sizeof meta);
  xml_path(m, "era", xml, sizeof xml);
  r = fc_era_invalidate_run(meta, ERA_FIRST, xml, err, errlen);
  if (!r)
    r = fc_era_xml_read(xml, st->nr_oblocks, &written, &nw, err, errlen);
  if (r)
    return r;
  qsort(written, nw, sizeof *written, cmp_u64);
  *cbs = malloc(((size_t)st->ninst + 1) * sizeof **cbs);
  if (!*cbs) {
    free(written);
    return -ENOMEM;
  }
  for (uint32_t i = 0; i < st->ninst; i++)
    if (bsearch(&st->inst[i].oblock.n, written, nw, sizeof *written, cmp_u64))
      (*cbs)[k++] = st->inst[i].cblock.n;
  st->era_written = nw;
  free(written);
  *n = k;
  return 0;
}

static int
invalidate(struct fc_volume *v, const uint32_t *cbs, uint32_t n, char *err, size_t errlen)
{
  char msg[32 + INVALIDATE_PER_MSG * 12];
  int r = 0;

  for (uint32_t i = 0; i < n && !r; i += INVALIDATE_PER_MSG) {
    size_t len = (size_t)snprintf(msg, sizeof msg, "invalidate_cblocks");
    for (uint32_t j = i; j < n && j < i + INVALIDATE_PER_MSG; j++)
      len += (size_t)snprintf(msg + len, sizeof msg - len, " %u", cbs[j]);
    r = fc_dm_message(v->dm->name, msg, err, errlen);
  }
  return r;
}

/* firepan_if and cachemior: every block is in.  See the top comment. */
static uint32_t
finish_era(struct fc_migration *m)
{
  struct fc_agent *agent = m->agent;
  struct fc_volume *v;
  struct fc_dm_migr *st;
  uint32_t *cbs = NULL, n = 0;
  char err[512] = "";
  int r;

  pthread_mutex_lock(&agent->lock);
  v = m->vol;
  st = v ? state(m) : NULL;
  if (!st || !st->era || !st->switched || st->ended) {
    pthread_mutex_unlock(&agent->lock);
    return 0;
  }
  st->ended = true;
  r = commit(m, err, sizeof err);
  /* Atomic for the VM: its requests queue during the swap, and from here
   * on passthrough invalidates whatever it writes. */
  if (!r)
    r = fc_dmv_load_cache(agent, v, FC_DMC_PASSTHROUGH, "smq", err, sizeof err);
  if (r)
    goto fail;
  if (era_victims(m, &cbs, &n, err, sizeof err)) {
    log_error("migration %s: %s; dropping every copied block", m->id, err);
    cbs = malloc(((size_t)st->ninst + 1) * sizeof *cbs);
    for (uint32_t i = 0; cbs && i < st->ninst; i++)
      cbs[n++] = st->inst[i].cblock.n;
  }
  r = cbs ? invalidate(v, cbs, n, err, sizeof err) : -ENOMEM;
  if (!r)
    r = fc_dmv_load_cache(agent, v, fc_dmc_mode_for(v->p.write_policy), "smq", err,
                          sizeof err);
  if (r)
    goto fail;
  fc_dm_migr_detach(agent, v);
  pthread_mutex_unlock(&agent->lock);
  free(cbs);
  log_info("migration %s: cache of volume %s attached: %u blocks copied, %u written "
           "during the copy (dm-era: %" PRIu64 " blocks) invalidated", m->id,
           m->volume_id, st->ninst, n, st->era_written);
  return n;
fail:
  /* Everything the VM needs is at the origin (the source drained). */
  if (to_linear(v, err + strlen(err), sizeof err - strlen(err)))
    log_error("migration %s: no fallback table either", m->id);
  pthread_mutex_unlock(&agent->lock);
  free(cbs);
  fc_migr_fail(m, "cannot attach the copied cache: %s; volume %s is served from the "
               "origin, uncached", err, m->volume_id);
  return 0;
}

static uint32_t
in_end(struct fc_migration *m)
{
  return m->strategy == FC_STRAT_FIREPAN_IF ? finish_era(m) : 0;
}

static uint32_t
in_preloaded(struct fc_migration *m)
{
  return finish_era(m);
}

static int
in_durable(struct fc_migration *m, bool final)
{
  struct fc_dm_migr *st = state(m);
  char err[512];
  int r;

  /* After the cache was attached the fds are closed: finish_era synced. */
  if (st->data_fd >= 0 && fdatasync(st->data_fd))
    return -errno;
  /* firepan: COMPLETE lets the source forget its copies, so the
   * metadata naming them must be on the destination's flash first. */
  if (!final || m->strategy != FC_STRAT_FIREPAN || !st->uncommitted)
    return 0;
  pthread_mutex_lock(&m->agent->lock);
  r = st->switched ? 0 : commit(m, err, sizeof err);
  pthread_mutex_unlock(&m->agent->lock);
  if (r)
    log_error("migration %s: %s", m->id, err);
  return r;
}

static void
in_lost(struct fc_migration *m)
{
  /* Nothing on the source is needed any more: firepan completed before
   * the switchover, and the other strategies moved only clean blocks. */
}

/* The agent stops: a VM held at the gate gets EIO, not a hang. */
static void
in_shutdown(struct fc_migration *m)
{
  char err[512];

  pthread_mutex_lock(&m->agent->lock);
  if (m->vol && state(m) && !state(m)->switched && to_error(m->vol, err, sizeof err))
    log_error("migration %s: %s", m->id, err);
  pthread_mutex_unlock(&m->agent->lock);
}

static uint32_t
in_remote_dirty(struct fc_migration *m)
{
  return 0;
}

static void
in_completed(struct fc_migration *m)
{
  struct fc_dm_migr *st = state(m);

  close_fds(st);
}

/* Abort: nothing the destination received is used.  Requests held at
 * the gate end (EIO) so the devices can go. */
static int
in_forget_all(struct fc_migration *m)
{
  char err[512];
  int r = 0;

  if (state(m) && !state(m)->switched)
    r = to_error(m->vol, err, sizeof err);
  if (r)
    log_error("migration %s: %s", m->id, err);
  return r;
}

static void
stats_json(struct fc_migration *m, json_t *o)
{
  struct fc_dm_migr *st = m->vol->dm ? m->vol->dm->migr : NULL;

  if (!st || m->role != FC_MIGR_DEST)
    return;
  pthread_mutex_lock(&st->lock);
  json_object_set_new(o, "installed_copies", json_integer((json_int_t)st->installed));
  json_object_set_new(o, "discarded_copies", json_integer((json_int_t)st->discarded));
  json_object_set_new(o, "era_written_blocks", json_integer((json_int_t)st->era_written));
  pthread_mutex_unlock(&st->lock);
  json_object_set_new(o, "fetched_blocks", json_integer(0));
  json_object_set_new(o, "remote_dirty_blocks", json_integer(0));
  json_object_set_new(o, "remote_clean_blocks", json_integer(0));
}

const struct fc_engine_migr_ops fc_dm_migr_ops = {
  .supports = supports,
  .can_settle = false,
  .out_freeze = out_freeze,
  .out_thaw = out_thaw,
  .out_list = out_list,
  .out_read = out_read,
  .out_forget = out_forget,
  .out_forget_all = out_forget_all,
  .in_begin = in_begin,
  .in_connected = in_connected,
  .in_add_remote = in_add_remote,
  .in_switch = in_switch,
  .in_install = in_install,
  .in_preload = in_preload,
  .in_end = in_end,
  .in_preloaded = in_preloaded,
  .in_durable = in_durable,
  .in_lost = in_lost,
  .in_shutdown = in_shutdown,
  .in_remote_dirty = in_remote_dirty,
  .in_completed = in_completed,
  .in_forget_all = in_forget_all,
  .stats_json = stats_json,
};

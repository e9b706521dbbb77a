/* SPDX-License-Identifier: Apache-2.0 */
/* dmcache's live migration, the destination side: gate the export,
 * write the arriving blocks at their cache block offsets, cache_restore
 * them and attach the cache, through dm-era for firepan_if and cachemior.
 * dm_migr.c's top comment has the whole picture. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dm_migr_priv.h"
#include "dm_tools.h"
#include "dm_xml.h"
#include "common/invfilter.h"
#include "common/lockcheck.h"
#include "common/log.h"

#define ERA_FIRST 1u            /* a fresh dm-era device's first era */
#define INVALIDATE_PER_MSG 32   /* cache blocks per invalidate_cblocks message */
#define NR_LEVELS 64u           /* smq's queue levels: hints are 0..63 */

static int
era_alloc(struct fc_host *host, struct fc_volume *v, struct fc_dm_migr *st,
          char *err, size_t errlen)
{
  struct fc_dm_engine *e = DME(host);
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
      (r = fc_dmv_zero_first_block(host, owner, err, errlen)))
    goto fail;
  snprintf(st->emeta, sizeof st->emeta, "%s-emeta", DV(v)->name);
  r = fc_dmv_create_linear(host, v, st->emeta, "emeta", err, errlen);
  if (!r)
    return 0;
  st->emeta[0] = '\0';
fail:
  fc_flash_pool_free(&e->pool, owner);
  return r;
}

void
fc_dm_migr_detach(struct fc_host *host, struct fc_volume *v)
{
  struct fc_dm_engine *e = DME(host);
  char owner[FC_FLASH_OWNER_MAX], name[FC_DM_NAME_MAX + 16], err[512];
  struct fc_dm_info info;

  /* hybrid's clone and relay hold the cache data under the export. */
  dm_hyb_teardown(host, v, DV(v)->migr);
  /* What a migration left that no state names any more (an agent that
   * restarted meanwhile): its devices, then their flash. */
  for (unsigned i = 0; i < 3; i++) {
    static const char *const role[] = { "emeta", "mclone", "mclmeta" };

    snprintf(name, sizeof name, "%s-%s", DV(v)->name, role[i]);
    if (!fc_dm_info(name, &info) && info.exists && fc_dm_remove(name, err, sizeof err))
      log_error("volume %s: %s", v->p.id, err);
  }
  fc_dmv_owner(v->p.id, "emeta", owner, sizeof owner);
  if (fc_flash_pool_free(&e->pool, owner) &&
      fc_flash_pool_save(&e->pool, e->pool_path, err, sizeof err))
    log_error("volume %s: freeing its dm-era metadata flash: %s", v->p.id, err);
  fc_dmv_owner(v->p.id, "mclmeta", owner, sizeof owner);
  if (fc_flash_pool_free(&e->pool, owner) &&
      fc_flash_pool_save(&e->pool, e->pool_path, err, sizeof err))
    log_error("volume %s: freeing its dm-clone metadata flash: %s", v->p.id, err);
  if (DV(v)->migr) {
    dm_migr_close_fds(DV(v)->migr);
    DV(v)->migr->emeta[0] = '\0';
  }
}

static int
to_linear(struct fc_volume *v, char *err, size_t errlen)
{
  char params[FC_ORIGIN_MAX + 8];

  snprintf(params, sizeof params, "%s 0", v->p.origin);
  return fc_dmv_swap(DV(v)->name,
                     &(struct fc_dm_target){ 0, DV(v)->origin_sectors, "linear", params },
                     err, errlen);
}

int
dm_migr_in_begin(struct fc_engine_migr *m)
{
  struct fc_host *host = m->host;
  struct fc_volume *v = m->vol;
  struct fc_dm_migr *st = dm_migr_state_new(host, v);
  char owner[FC_FLASH_OWNER_MAX], path[FC_DM_NAME_MAX + 32], err[512] = "";
  int r = -ENOMEM;

  if (!st)
    return r;
  fc_dmv_owner(v->p.id, "cdata", owner, sizeof owner);
  st->nr_cblocks = (uint32_t)(fc_flash_pool_owned(&DME(host)->pool, owner) *
                              FC_FLASH_EXTENT / st->bs);
  /* dm-era records the VM's writes while a copy or a preload runs beside
   * it, so that what arrives for a block written meanwhile is dropped. */
  st->era = fc_strategy(m->strategy)->invalidation_filter ||
            fc_strategy(m->strategy)->preload;
  st->inst = calloc((size_t)st->nr_cblocks + 1, sizeof *st->inst);
  if (!st->inst || (r = fc_invfilter_init(&st->have, 1024)))
    goto out;
  dm_migr_dev_path(DV(v)->data, path, sizeof path);
  r = dm_migr_open_dev(path, O_RDWR, &st->data_fd, err, sizeof err);
  if (!r && fc_strategy(m->strategy)->preload)
    r = dm_migr_open_dev(v->p.origin, O_RDONLY, &st->origin_fd, err, sizeof err);
  if (!r && st->era)
    r = era_alloc(host, v, st, err, sizeof err);
  if (!r && fc_strategy(m->strategy)->on_demand)
    r = dm_hyb_begin(m, st, err, sizeof err);
  /* The fresh cache table goes (its metadata stays formatted and clean,
   * free for cache_restore).  Until the switchover only the hypervisor
   * reads here (the guest stays paused: doc/reference/dmcache.rst), and a read gets
   * current data or fails, never waits: the kernel cannot hold writes and
   * let reads pass, nor ask the source.  The origin is current unless the
   * source may hold dirty blocks. */
  if (!r && v->p.write_policy == FC_WRITE_BACK)
    r = dm_migr_to_error(v, err, sizeof err);
  else if (!r)
    r = to_linear(v, err, sizeof err);
out:
  if (r) {
    log_error("migration %s: cannot prepare volume %s: %s", m->id, v->p.id,
              err[0] ? err : strerror(-r));
    dm_hyb_teardown(host, v, st);
    fc_dm_migr_free(st);
    return r;
  }
  DV(v)->migr = st;
  return 0;
}

void
dm_migr_in_connected(struct fc_engine_migr *m)
{
  /* No gate here: a suspended device would hold the destination QEMU's
   * own read at device realize, inside the hypervisor's migrate call,
   * which the switchover waits for.  The hypervisor keeps the guest
   * paused until the switchover instead. */
  log_info("migration %s: source connected; volume %s %s until the switchover",
           m->id, m->volume_id,
           m->vol && m->vol->p.write_policy == FC_WRITE_BACK ?
           "fails reads (the source holds its dirty blocks)" : "reads the origin");
}

/* hybrid: the source's blocks, hottest first, each at the next cache
 * block here -- the numbering of the restored metadata and of the relay
 * alike (dm_migr_hybrid.c).  A cache smaller than the source's leaves
 * the coldest clean blocks out; a dirty block has no other home. */
int
dm_migr_in_add_remote(struct fc_engine_migr *m, oblock_t ob, bool dirty)
{
  struct fc_dm_migr *st = dm_migr_state(m);
  int r = 0;

  if (!st || !st->hy)
    return -EPROTO;     /* only on-demand strategies list remote blocks */
  if (ob.n >= st->nr_oblocks)
    return -ERANGE;
  pthread_mutex_lock(&st->lock);
  if (st->switched || fc_invfilter_contains(&st->have, ob))
    r = -EPROTO;        /* after the switch, or listed twice */
  else if (st->next_cb >= st->nr_cblocks)
    r = dirty ? -ENOSPC : 0;
  else if ((r = fc_invfilter_add(&st->have, ob)) >= 0) {
    st->inst[st->ninst++] = (struct fc_dmc_mapping){ .oblock = ob,
                                                      .cblock = to_cblock(st->next_cb++),
                                                      .dirty = dirty };
    st->uncommitted++;
    r = 0;
  }
  pthread_mutex_unlock(&st->lock);
  return r;
}

/* Write what arrived as the metadata, with hints from the arrival order
 * (the source sends hottest first): the first 1/64 get smq's top level.
 * Under host->lock, while no table holds the metadata. */
static int
commit(struct fc_engine_migr *m, char *err, size_t errlen)
{
  struct fc_volume *v = m->vol;
  struct fc_dm_migr *st = dm_migr_state(m);
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
  dm_migr_xml_path(m, "restore", xml, sizeof xml);
  dm_migr_dev_path(DV(v)->meta, meta, sizeof meta);
  if (!r)
    r = fc_dmc_xml_write(xml, DME(m->host)->block_sectors, st->nr_cblocks, map, n, err,
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
fallback_locked(struct fc_engine_migr *m)
{
  FC_ASSERT_HELD(&m->host->lock);
  char err[512];
  int r = any_dirty(dm_migr_state(m)) ? dm_migr_to_error(m->vol, err, sizeof err)
                                      : to_linear(m->vol, err, sizeof err);

  if (r)
    log_error("migration %s of volume %s: cannot set a fallback table on %s: %s",
              m->id, m->volume_id, DV(m->vol)->name, err);
}

void
dm_migr_in_switch(struct fc_engine_migr *m)
{
  struct fc_host *host = m->host;
  struct fc_volume *v;
  struct fc_dm_migr *st;
  char err[512] = "", params[FC_ORIGIN_MAX + 64];
  int r = 0;

  pthread_mutex_lock(&host->lock);
  v = m->vol;
  st = v ? dm_migr_state(m) : NULL;
  if (!st || st->switched) {
    pthread_mutex_unlock(&host->lock);
    return;
  }
  /* Suspend before the final table is even loaded, as the gate did when
   * the device was suspended from the connection on: loading firepan's
   * cache table while the interim table still served left stale blocks
   * after the resume (seen in test_dmcache_uml's firepan migration). */
  r = fc_dm_suspend(DV(v)->name, err, sizeof err);
  if (r) {
    /* fallback_locked below */
  } else if (st->era) {
    struct fc_dm_info mi;
    r = fc_dm_info(st->emeta, &mi);
    if (!r && !mi.exists)
      r = -ENODEV;
    if (!r) {
      snprintf(params, sizeof params, "%u:%u %s %" PRIu64, mi.major, mi.minor,
               v->p.origin, DME(host)->block_sectors);
      r = fc_dmv_swap(DV(v)->name,
                      &(struct fc_dm_target){ 0, DV(v)->origin_sectors, "era", params },
                      err, sizeof err);
    }
  } else if (st->hy) {
    /* The metadata first (no table holds cmeta yet), then the stack. */
    r = commit(m, err, sizeof err);
    if (!r)
      r = dm_hyb_attach(m, err, sizeof err);
  } else {
    if (fc_strategy(m->strategy)->copy_before_switch && st->uncommitted)
      r = commit(m, err, sizeof err);
    if (!r)
      r = fc_dmv_load_cache(host, v, fc_dmc_mode_for(v->p.write_policy), "smq", err,
                            sizeof err);
  }
  st->switched = true;
  if (r)
    fallback_locked(m);
  pthread_mutex_unlock(&host->lock);
  if (r) {
    char msg[600];

    snprintf(msg, sizeof msg, "cannot attach the cache at the switchover: %s",
             err[0] ? err : strerror(-r));
    m->fail(m->ctx, msg);
  } else
    log_info("migration %s: volume %s runs here (%s)", m->id, m->volume_id,
             st->era ? "origin, writes recorded by dm-era" :
             st->hy ? "cache over the source's, hydrating" : "cache attached");
}

int
dm_migr_in_install(struct fc_engine_migr *m, oblock_t ob, const void *data, bool dirty)
{
  struct fc_dm_migr *st = dm_migr_state(m);
  uint32_t cb;
  int r;

  if (ob.n >= st->nr_oblocks)
    return -ERANGE;
  pthread_mutex_lock(&st->lock);
  /* hybrid: the clone copies every block; a source that sends a copy
   * anyway (one that predates WELCOME's "background") is ignored, as
   * nothing may write cdata under the clone. */
  if (fc_invfilter_contains(&st->have, ob) || st->hy) {
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
  r = dm_migr_block_io(st->data_fd, true, (void *)data, st->bs, (uint64_t)cb * st->bs);
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

int
dm_migr_in_preload(struct fc_engine_migr *m, oblock_t ob)
{
  struct fc_dm_migr *st = dm_migr_state(m);
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
  r = dm_migr_block_io(st->origin_fd, false, buf, st->bs, ob.n * st->bs);
  if (!r)
    r = dm_migr_in_install(m, ob, buf, false);
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
era_victims(struct fc_engine_migr *m, uint32_t **cbs, uint32_t *n, char *err,
            size_t errlen)
{
  struct fc_dm_migr *st = dm_migr_state(m);
  char xml[FC_PATH_MAX + 200], meta[FC_DM_NAME_MAX + 32];
  uint64_t *written = NULL;
  uint32_t nw = 0, k = 0;
  int r;

  dm_migr_dev_path(st->emeta, meta, sizeof meta);
  dm_migr_xml_path(m, "era", xml, sizeof xml);
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
    r = fc_dm_message(DV(v)->name, msg, err, errlen);
  }
  return r;
}

/* firepan_if and cachemior: every block is in.  See dm_migr.c's top comment. */
static uint32_t
finish_era(struct fc_engine_migr *m)
{
  struct fc_host *host = m->host;
  struct fc_volume *v;
  struct fc_dm_migr *st;
  uint32_t *cbs = NULL, n = 0;
  char err[512] = "", msg[700];
  int r;

  pthread_mutex_lock(&host->lock);
  v = m->vol;
  st = v ? dm_migr_state(m) : NULL;
  if (!st || !st->era || !st->switched || st->ended) {
    pthread_mutex_unlock(&host->lock);
    return 0;
  }
  st->ended = true;
  r = commit(m, err, sizeof err);
  /* Atomic for the VM: its requests queue during the swap, and from here
   * on passthrough invalidates whatever it writes. */
  if (!r)
    r = fc_dmv_load_cache(host, v, FC_DMC_PASSTHROUGH, "smq", err, sizeof err);
  if (r)
    goto fail;
  if (era_victims(m, &cbs, &n, err, sizeof err)) {
    log_error("migration %s of volume %s: %s; dropping every copied block", m->id,
              m->volume_id, err);
    cbs = malloc(((size_t)st->ninst + 1) * sizeof *cbs);
    for (uint32_t i = 0; cbs && i < st->ninst; i++)
      cbs[n++] = st->inst[i].cblock.n;
  }
  r = cbs ? invalidate(v, cbs, n, err, sizeof err) : -ENOMEM;
  if (!r)
    r = fc_dmv_load_cache(host, v, fc_dmc_mode_for(v->p.write_policy), "smq", err,
                          sizeof err);
  if (r)
    goto fail;
  fc_dm_migr_detach(host, v);
  pthread_mutex_unlock(&host->lock);
  free(cbs);
  log_info("migration %s: cache of volume %s attached: %u blocks copied, %u written "
           "during the copy (dm-era: %" PRIu64 " blocks) invalidated", m->id,
           m->volume_id, st->ninst, n, st->era_written);
  return n;
fail:
  /* Everything the VM needs is at the origin (the source drained). */
  if (to_linear(v, err + strlen(err), sizeof err - strlen(err)))
    log_error("migration %s of volume %s: no fallback table either", m->id, m->volume_id);
  pthread_mutex_unlock(&host->lock);
  free(cbs);
  snprintf(msg, sizeof msg, "cannot attach the copied cache: %s; volume %s is "
           "served from the origin, uncached", err, m->volume_id);
  m->fail(m->ctx, msg);
  return 0;
}

uint32_t
dm_migr_in_end(struct fc_engine_migr *m)
{
  if (fc_strategy(m->strategy)->on_demand)
    return dm_hyb_end(m);
  return fc_strategy(m->strategy)->invalidation_filter ? finish_era(m) : 0;
}

uint32_t
dm_migr_in_preloaded(struct fc_engine_migr *m)
{
  return finish_era(m);
}

int
dm_migr_in_durable(struct fc_engine_migr *m, bool final)
{
  struct fc_dm_migr *st = dm_migr_state(m);
  char err[512];
  int r;

  /* After the cache was attached the fds are closed: finish_era synced. */
  if (st->data_fd >= 0 && fdatasync(st->data_fd))
    return -errno;
  /* firepan: COMPLETE lets the source forget its copies, so the
   * metadata naming them must be on the destination's flash first. */
  if (!final || !fc_strategy(m->strategy)->copy_before_switch || !st->uncommitted)
    return 0;
  pthread_mutex_lock(&m->host->lock);
  r = st->switched ? 0 : commit(m, err, sizeof err);
  pthread_mutex_unlock(&m->host->lock);
  if (r)
    log_error("migration %s of volume %s: %s", m->id, m->volume_id, err);
  return r;
}

void
dm_migr_in_lost(struct fc_engine_migr *m)
{
  /* Nothing on the source is needed any more: firepan completed before
   * the switchover, and the other strategies moved only clean blocks --
   * except hybrid's until its clone is hydrated. */
  pthread_mutex_lock(&m->host->lock);
  dm_hyb_lost(m, "the source was lost");
  pthread_mutex_unlock(&m->host->lock);
}

/* The agent stops: the export must not go on reading the origin. */
void
dm_migr_in_shutdown(struct fc_engine_migr *m)
{
  char err[512];

  pthread_mutex_lock(&m->host->lock);
  if (m->vol && dm_migr_state(m) && !dm_migr_state(m)->switched &&
      dm_migr_to_error(m->vol, err, sizeof err))
    log_error("migration %s of volume %s: %s", m->id, m->volume_id, err);
  dm_hyb_shutdown(m);
  pthread_mutex_unlock(&m->host->lock);
}

uint32_t
dm_migr_in_remote_dirty(struct fc_engine_migr *m)
{
  return m->vol ? dm_hyb_remote_dirty(dm_migr_state(m)) : 0;
}

void
dm_migr_in_completed(struct fc_engine_migr *m)
{
  struct fc_dm_migr *st = dm_migr_state(m);

  dm_migr_close_fds(st);
}

/* Abort: nothing the destination received is used; the export fails
 * any request from now on, so the devices can go. */
int
dm_migr_in_forget_all(struct fc_engine_migr *m)
{
  char err[512];
  int r = 0;

  if (dm_migr_state(m) && !dm_migr_state(m)->switched)
    r = dm_migr_to_error(m->vol, err, sizeof err);
  if (r)
    log_error("migration %s of volume %s: %s", m->id, m->volume_id, err);
  return r;
}

void
dm_migr_stats_json(struct fc_engine_migr *m, json_t *o)
{
  struct fc_dm_migr *st = DV(m->vol) ? DV(m->vol)->migr : NULL;

  if (!st || m->role != FC_MIGR_DEST)
    return;
  pthread_mutex_lock(&st->lock);
  json_object_set_new(o, "installed_copies", json_integer((json_int_t)st->installed));
  json_object_set_new(o, "discarded_copies", json_integer((json_int_t)st->discarded));
  json_object_set_new(o, "era_written_blocks", json_integer((json_int_t)st->era_written));
  dm_hyb_stats_json(st, o);
  pthread_mutex_unlock(&st->lock);
  if (!json_object_get(o, "fetched_blocks"))
    json_object_set_new(o, "fetched_blocks", json_integer(0));
  json_object_set_new(o, "remote_dirty_blocks", json_integer(0));
  json_object_set_new(o, "remote_clean_blocks", json_integer(0));
}


/* SPDX-License-Identifier: Apache-2.0 */
/* dmcache's live migration, the source side: freeze the export behind an
 * error table, dump the cache metadata (drained first if the destination
 * reads the origin) and serve the cached blocks from the data device.
 * dm_migr.c's top comment has the whole picture. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dm_migr_priv.h"
#include "dm_tools.h"
#include "dm_xml.h"
#include "common/lockcheck.h"
#include "common/log.h"

int
dm_migr_to_error(struct fc_volume *v, char *err, size_t errlen)
{
  return fc_dmv_swap(DV(v)->name,
                     &(struct fc_dm_target){ 0, DV(v)->origin_sectors, "error", "" },
                     err, errlen);
}

static int
dump_volume(struct fc_host *host, struct fc_volume *v, struct fc_dmc_dump *d, char *err,
            size_t errlen)
{
  char meta[FC_DM_NAME_MAX + 32], xml[FC_PATH_MAX + 200];
  int r;

  dm_migr_dev_path(DV(v)->meta, meta, sizeof meta);
  snprintf(xml, sizeof xml, "%s/%s.dump.xml", host->volumes_dir, v->p.id);
  r = fc_dmc_dump_run(meta, xml, err, errlen);
  if (!r)
    r = fc_dmc_xml_read(xml, d, err, errlen);
  return r;
}

static int
dump(struct fc_engine_migr *m, struct fc_dmc_dump *d, char *err, size_t errlen)
{
  return dump_volume(m->host, m->vol, d, err, errlen);
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

static int
cmp_cblock(const void *a, const void *b)
{
  uint32_t x = ((const struct fc_dmc_mapping *)a)->cblock.n;
  uint32_t y = ((const struct fc_dmc_mapping *)b)->cblock.n;

  return x < y ? -1 : x > y;
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
freeze_locked(struct fc_engine_migr *m, bool flush, char *err, size_t errlen)
{
  FC_ASSERT_HELD(&m->host->lock);
  struct fc_host *host = m->host;
  struct fc_volume *v = m->vol;
  struct fc_dm_migr *st = DV(v)->migr;
  struct fc_dmc_dump d1 = { 0 }, d2 = { 0 };
  char data[FC_DM_NAME_MAX + 32];
  bool dirty = false;
  int r;

  dm_migr_close_fds(st);
  r = dm_migr_to_error(v, err, errlen);
  if (r)
    return r;
  st->frozen = true;
  r = dump(m, &d1, err, errlen);
  for (uint32_t i = 0; !r && i < d1.n; i++)
    dirty |= d1.map[i].dirty;
  if (!r && flush && dirty) {
    /* The destination will read these from the origin. */
    r = fc_dmv_drain(host, v, err, errlen);
    if (!r)
      r = dm_migr_to_error(v, err, errlen);
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
  dm_migr_dev_path(DV(v)->data, data, sizeof data);
  r = dm_migr_open_dev(data, O_RDONLY, &st->data_fd, err, errlen);
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
thaw_locked(struct fc_engine_migr *m)
{
  FC_ASSERT_HELD(&m->host->lock);
  struct fc_volume *v = m->vol;
  struct fc_dm_migr *st = DV(v)->migr;
  char err[512];
  int r;

  if (!st || !st->frozen)
    return 0;
  r = fc_dmv_load_cache(m->host, v, fc_dmc_mode_for(v->p.write_policy), "smq", err,
                        sizeof err);
  if (r) {
    log_error("volume %s: cannot serve again after migration %s: %s", v->p.id, m->id,
              err);
    return r;
  }
  /* The state stays until the volume goes: migration-status of an older
   * migration of this volume may be reading its counters. */
  dm_migr_close_fds(st);
  pthread_mutex_lock(&st->lock);
  st->frozen = false;
  free(st->map);
  st->map = NULL;
  st->n = 0;
  pthread_mutex_unlock(&st->lock);
  log_info("volume %s: serving again (migration %s rolled back)", v->p.id, m->id);
  return 0;
}

int
dm_migr_out_freeze(struct fc_engine_migr *m, bool flush, char *err, size_t errlen)
{
  struct fc_host *host = m->host;
  struct fc_volume *v = m->vol;
  int r = 0;

  FC_ASSERT_NOT_HELD(&host->lock);
  pthread_mutex_lock(&host->lock);
  /* A volume that arrived by migration keeps that state (its counters
   * may still be read); the source side uses the same structure. */
  if (!DV(v)->migr && !(DV(v)->migr = dm_migr_state_new(host, v)))
    r = -ENOMEM;
  if (!r && !DV(v)->migr->frozen && !(r = fc_dm_migr_busy(v, err, errlen))) {
    r = freeze_locked(m, flush, err, errlen);
    /* The migration fails and will be aborted: until then the VM must
     * not hit the error table for nothing. */
    if (r && DV(v)->migr->frozen)
      thaw_locked(m);
  }
  pthread_mutex_unlock(&host->lock);
  return r;
}

int
dm_migr_out_thaw(struct fc_engine_migr *m)
{
  return thaw_locked(m);
}

int
dm_migr_out_list(struct fc_engine_migr *m, uint64_t **list, uint32_t *n, bool dirty_only,
                 enum fc_list_order order)
{
  struct fc_dm_migr *st = dm_migr_state(m);
  struct fc_dmc_mapping *hot = malloc(((size_t)st->n + 1) * sizeof *hot);
  uint64_t *v = malloc(((size_t)st->n + 1) * sizeof *v);
  uint32_t k = 0;

  if (!hot || !v) {
    free(hot);
    free(v);
    return -ENOMEM;
  }
  memcpy(hot, st->map, (size_t)st->n * sizeof *hot);
  qsort(hot, st->n, sizeof *hot, order == FC_LIST_DEVICE ? cmp_cblock : cmp_hot);
  for (uint32_t i = 0; i < st->n; i++)
    if (!dirty_only || hot[i].dirty)
      v[k++] = hot[i].oblock.n | (hot[i].dirty ? FC_BLOCK_DIRTY_BIT : 0);
  free(hot);
  *list = v;
  *n = k;
  return 0;
}

int
dm_migr_out_read(struct fc_engine_migr *m, oblock_t ob, void *data, bool *dirty)
{
  return dm_migr_frozen_read(m->vol, ob, data, dirty);
}

int
dm_migr_frozen_read(struct fc_volume *v, oblock_t ob, void *data, bool *dirty)
{
  struct fc_dm_migr *st = DV(v)->migr;
  struct fc_dmc_mapping key = { .oblock = ob };
  struct fc_dmc_mapping *e = st && st->map ?
    bsearch(&key, st->map, st->n, sizeof key, cmp_oblock) : NULL;

  if (!e || st->data_fd < 0)
    return -ENOENT;
  *dirty = e->dirty;
  return dm_migr_block_io(st->data_fd, false, data, st->bs,
                          (uint64_t)e->cblock.n * st->bs);
}

/* Nothing per block: the frozen cache is removed whole when the
 * migration completes (dropping one block would need a reload into
 * passthrough, and nothing reads it meanwhile). */
int
dm_migr_out_forget(struct fc_engine_migr *m, oblock_t ob)
{
  return 0;
}

int
dm_migr_out_forget_all(struct fc_engine_migr *m)
{
  if (dm_migr_state(m))
    dm_migr_close_fds(dm_migr_state(m));
  return 0;
}

/* A frozen source whose agent restarted (or whose migration's state went)
 * serves a settle: its map again from the metadata, which no table holds
 * since the freeze, and its data device.  Under host->lock. */
int
dm_migr_frozen_reopen(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  FC_ASSERT_HELD(&host->lock);
  struct fc_dmc_dump d = { 0 };
  struct fc_dm_migr *st = DV(v)->migr;
  char data[FC_DM_NAME_MAX + 32], params[256];
  int r;

  if (st && st->map && st->data_fd >= 0)
    return 0;
  /* Only behind its error table (the one target without parameters): a
   * cache table would still change the metadata and data. */
  if ((r = fc_dm_table(DV(v)->name, params, sizeof params, err, errlen)))
    return r;
  if (params[0]) {
    snprintf(err, errlen, "volume %s is not frozen here (its export serves a table "
             "other than error)", v->p.id);
    return -EBUSY;
  }
  if (!st && !(st = DV(v)->migr = dm_migr_state_new(host, v)))
    return -ENOMEM;
  if (!st->map) {
    if ((r = dump_volume(host, v, &d, err, errlen)))
      return r;
    qsort(d.map, d.n, sizeof *d.map, cmp_oblock);
    pthread_mutex_lock(&st->lock);
    st->map = d.map;
    st->n = d.n;
    st->frozen = true;
    pthread_mutex_unlock(&st->lock);
    d.map = NULL;
    fc_dmc_dump_free(&d);
    log_info("volume %s: frozen cache read again for a settle: %u cached blocks",
             v->p.id, st->n);
  }
  if (st->data_fd < 0) {
    dm_migr_dev_path(DV(v)->data, data, sizeof data);
    r = dm_migr_open_dev(data, O_RDONLY, &st->data_fd, err, errlen);
  }
  return r;
}

int
fc_dm_migr_rebuild_frozen(struct fc_host *host, struct fc_volume *v, char *err,
                          size_t errlen)
{
  char uuid[FC_DM_UUID_MAX];
  int r;

  if ((r = fc_dmv_ensure_linear(host, v, DV(v)->meta, "cmeta", err, errlen)) ||
      (r = fc_dmv_ensure_linear(host, v, DV(v)->data, "cdata", err, errlen)))
    return r;
  fc_dmv_uuid(v->p.tag, "cache", uuid, sizeof uuid);
  return fc_dm_create(DV(v)->name, uuid,
                      &(struct fc_dm_target){ 0, DV(v)->origin_sectors, "error", "" }, 1,
                      err, errlen);
}

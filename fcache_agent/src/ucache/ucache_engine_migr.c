/* SPDX-License-Identifier: Apache-2.0 */
/* ucache's side of live migration (engine.h), over ucache.h's migration
 * calls: every strategy runs here, on-demand fetch included. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/superseded.h"
#include "ucache_engine_priv.h"

#define UC(m) (UV((m)->vol)->uc)

static int
supports(enum fc_strategy s, char *err, size_t errlen)
{
  return 0;
}

static int
out_freeze(struct fc_engine_migr *m, bool flush, char *err, size_t errlen)
{
  int r = 0;

  fc_ucache_migr_freeze(UC(m), true);
  fc_ucache_stop(UC(m));
  if (flush) {
    r = fc_ucache_writeback_all(UC(m));
    if (r)
      snprintf(err, errlen, "cannot write dirty blocks back before switchover: %s",
               strerror(-r));
  }
  /* Nothing more is written here unless the migration fails: the
   * destination takes the origin over (an RBD image's lock moves). */
  if (r == 0) {
    r = fc_ucache_release_origin(UC(m));
    if (r)
      snprintf(err, errlen, "cannot give the origin's exclusive lock up for "
               "the destination: %s", strerror(-r));
  }
  return r;
}

static int
out_thaw(struct fc_engine_migr *m)
{
  /* The destination may have written the origin before the migration
   * failed back to us. */
  fc_ucache_invalidate_origin(UC(m));
  fc_ucache_migr_freeze(UC(m), false);
  return fc_ucache_start(UC(m));
}

static int
out_list(struct fc_engine_migr *m, uint64_t **list, uint32_t *n, bool dirty_only,
         enum fc_list_order order)
{
  return fc_ucache_migr_snapshot(UC(m), list, n, dirty_only, order == FC_LIST_DEVICE);
}

static int
out_list_reused(struct fc_engine_migr *m, unsigned min_reuse, uint64_t **list, uint32_t *n)
{
  return fc_ucache_migr_snapshot_reused(UC(m), min_reuse, list, n);
}

static int
out_read(struct fc_engine_migr *m, oblock_t ob, void *data, bool *dirty)
{
  return fc_ucache_migr_read_block(UC(m), ob, data, dirty);
}

static int
out_read_many(struct fc_engine_migr *m, const uint64_t *obs, uint32_t n,
              void *const *data, bool *dirty, int *res)
{
  return fc_ucache_migr_read_many(UC(m), obs, n, data, dirty, res);
}

static int
out_peek(struct fc_engine_migr *m, void *buf, uint32_t count, uint64_t off)
{
  return fc_ucache_peek(UC(m), buf, count, off);
}

static int
out_forget(struct fc_engine_migr *m, oblock_t ob)
{
  return fc_ucache_migr_forget(UC(m), ob);
}

static int
out_forget_all(struct fc_engine_migr *m)
{
  return fc_ucache_migr_forget_all(UC(m));
}

static enum fc_ucache_migr_mode
mode_of(enum fc_strategy s)
{
  const struct fc_strategy_desc *how = fc_strategy(s);

  if (how->invalidation_filter)
    return FC_MIGR_BYPASS;
  return how->on_demand ? FC_MIGR_ONDEMAND : FC_MIGR_PLAIN;
}

static int
in_begin(struct fc_engine_migr *m)
{
  char path[FC_PATH_MAX + 100];

  uc_superseded_path(m->host, m->volume_id, path, sizeof path);
  return fc_ucache_migr_in_begin(UC(m), mode_of(m->strategy), m->fetch_source,
                                 m->fetched_dirty, m->read_source, m->ctx, path);
}

static void
in_connected(struct fc_engine_migr *m)
{
  fc_ucache_migr_source_connected(UC(m));
}

static int
in_order(struct fc_engine_migr *m, const uint64_t *ids, uint32_t n)
{
  fc_ucache_migr_order(UC(m), ids, n);
  return 0;
}

static int
in_add_remote(struct fc_engine_migr *m, oblock_t ob, bool dirty)
{
  return fc_ucache_migr_add_remote(UC(m), ob, dirty);
}

static void
in_switch(struct fc_engine_migr *m)
{
  /* Before the VM reads anything here: the source has written the
   * origin since this host last read it. */
  fc_ucache_invalidate_origin(UC(m));
  fc_ucache_migr_open_gate(UC(m));
}

static int
in_install(struct fc_engine_migr *m, oblock_t ob, const void *data, bool dirty)
{
  return fc_ucache_migr_install_copy(UC(m), ob, data, dirty);
}

static int
in_install_many(struct fc_engine_migr *m, const uint64_t *ids, const void *const *data,
                uint32_t n, int *res)
{
  return fc_ucache_migr_install_many(UC(m), ids, data, n, res);
}

static int
in_warm(struct fc_engine_migr *m, const uint64_t *ids, uint32_t n, unsigned depth,
        bool (*each)(void *ctx, int r), void *ctx, unsigned *peak)
{
  return fc_ucache_migr_warm(UC(m), ids, n, depth, each, ctx, peak);
}

static uint32_t
in_end(struct fc_engine_migr *m)
{
  return fc_ucache_migr_in_end(UC(m));
}

static int
in_durable(struct fc_engine_migr *m, bool final)
{
  return fc_ucache_migr_durable(UC(m), final);
}

static void
in_lost(struct fc_engine_migr *m)
{
  fc_ucache_migr_source_lost(UC(m));
}

static void
in_shutdown(struct fc_engine_migr *m)
{
  fc_ucache_migr_shutdown(UC(m));
}

static uint32_t
in_remote_dirty(struct fc_engine_migr *m)
{
  return fc_ucache_migr_remote_dirty(UC(m));
}

static void
in_completed(struct fc_engine_migr *m)
{
  fc_ucache_migr_unpin(UC(m));
}

static int
in_forget_all(struct fc_engine_migr *m)
{
  fc_ucache_migr_source_lost(UC(m));
  return fc_ucache_migr_forget_all(UC(m));
}

static void
stats_json(struct fc_engine_migr *m, json_t *o)
{
  struct fc_ucache_migr_stats st;

  if (!UC(m))
    return;
  fc_ucache_migr_stats(UC(m), &st);
  json_object_set_new(o, "fetched_blocks", json_integer((json_int_t)st.fetched));
  json_object_set_new(o, "fetch_fallbacks", json_integer((json_int_t)st.fetch_fallbacks));
  json_object_set_new(o, "discarded_copies", json_integer((json_int_t)st.discarded));
  json_object_set_new(o, "installed_copies", json_integer((json_int_t)st.installed_copies));
  json_object_set_new(o, "remote_dirty_blocks", json_integer(st.remote_dirty));
  json_object_set_new(o, "remote_clean_blocks", json_integer(st.remote_clean));
}

/* ---- settling a migration that failed past its switchover ---- */

static int
settle_usable(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  if (UV(v)->uc)
    return 0;
  snprintf(err, errlen, "volume %s cannot be settled while its origin is "
           "unavailable (%s)", v->p.id, v->error);
  return -EIO;
}

/* Held mode: the dirty blocks this host holds, and the pinned blocks that
 * went to the origin from here anyway (superseded.h): the source's copies
 * of both are stale. */
static int
held_list(struct fc_host *host, struct fc_volume *v, uint64_t **list, uint32_t *n)
{
  char path[FC_PATH_MAX + 100];
  uint64_t *held = NULL, *sup = NULL, *all;
  uint32_t nh = 0, ns = 0;
  int r;

  uc_superseded_path(host, v->p.id, path, sizeof path);
  r = fc_ucache_migr_snapshot(UV(v)->uc, &held, &nh, true, false);
  if (!r)
    r = fc_superseded_load(path, &sup, &ns);
  if (!r && !(all = realloc(held, ((size_t)nh + ns + 1) * sizeof *held)))
    r = -ENOMEM;
  if (r) {
    free(held);
    free(sup);
    return r;
  }
  for (uint32_t i = 0; i < nh; i++)
    all[i] &= ~FC_BLOCK_DIRTY_BIT;
  for (uint32_t i = 0; i < ns; i++)
    all[nh + i] = sup[i];
  free(sup);
  *list = all;
  *n = nh + ns;
  return 0;
}

static int
settle_dest_list(struct fc_host *host, struct fc_volume *v, bool missing,
                 uint64_t **list, uint32_t *n, char *err, size_t errlen)
{
  (void)err;
  (void)errlen;
  if (missing)
    return fc_ucache_migr_remote_list(UV(v)->uc, list, n);
  return held_list(host, v, list, n);
}

static int
settle_dest_end(struct fc_host *host, struct fc_volume *v, bool missing,
                bool source_lost, uint32_t *given_up, char *err, size_t errlen)
{
  char path[FC_PATH_MAX + 100];

  (void)err;
  (void)errlen;
  *given_up = 0;
  if (missing) {
    if (source_lost)
      *given_up = fc_ucache_migr_remote_dirty(UV(v)->uc);
    fc_ucache_migr_settled(UV(v)->uc);
  }
  uc_superseded_path(host, v->p.id, path, sizeof path);
  unlink(path);      /* held mode: the source has acted on it */
  return 0;
}

static int
settle_dest_resume(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  return uc_volume_start(host, v, err, errlen);
}

static int
settle_source_block(struct fc_volume *v, oblock_t ob, bool write_back)
{
  if (write_back)
    return fc_ucache_migr_writeback_block(UV(v)->uc, ob);
  return fc_ucache_migr_forget(UV(v)->uc, ob);
}

static int
settle_source_sync(struct fc_volume *v, bool written_back)
{
  /* Written back means durable at the origin before the destination is
   * told it may read it there. */
  if (written_back)
    return fc_ucache_flush_origin(UV(v)->uc);
  return fc_ucache_sync_records(UV(v)->uc);
}

static int
settle_source_forget_all(struct fc_volume *v)
{
  return fc_ucache_migr_forget_all(UV(v)->uc);
}

static json_t *
out_allocation(struct fc_engine_migr *m)
{
  json_t *o;

  pthread_mutex_lock(&m->host->lock);
  o = m->vol ? uc_allocator_volume_export(UCE(m->host)->alloc, m->vol) : NULL;
  pthread_mutex_unlock(&m->host->lock);
  return o;
}

static void
in_allocation(struct fc_engine_migr *m, json_t *state)
{
  char from[FC_MIGRATION_ID_MAX + 32];

  snprintf(from, sizeof from, "migration %s's source", m->id);
  pthread_mutex_lock(&m->host->lock);
  if (m->vol)
    uc_allocator_volume_adopt(UCE(m->host)->alloc, m->vol, state, from);
  pthread_mutex_unlock(&m->host->lock);
}

static const struct fc_engine_settle_ops settle_ops = {
  .usable = settle_usable,
  .dest_list = settle_dest_list,
  .dest_end = settle_dest_end,
  .dest_resume = settle_dest_resume,
  .source_block = settle_source_block,
  .source_sync = settle_source_sync,
  .source_forget_all = settle_source_forget_all,
};

const struct fc_engine_migr_ops fc_ucache_migr_ops = {
  .supports = supports,
  .acks_fetched = true,
  .settle = &settle_ops,
  .out_freeze = out_freeze,
  .out_thaw = out_thaw,
  .out_list = out_list,
  .out_list_reused = out_list_reused,
  .out_read = out_read,
  .out_read_many = out_read_many,
  .out_peek = out_peek,
  .out_forget = out_forget,
  .out_forget_all = out_forget_all,
  .in_begin = in_begin,
  .in_connected = in_connected,
  .in_add_remote = in_add_remote,
  .in_switch = in_switch,
  .in_install = in_install,
  .in_install_many = in_install_many,
  .in_order = in_order,
  .in_warm = in_warm,
  .in_preload = NULL,
  .in_end = in_end,
  .in_preloaded = NULL,
  .in_durable = in_durable,
  .in_lost = in_lost,
  .in_shutdown = in_shutdown,
  .in_remote_dirty = in_remote_dirty,
  .in_completed = in_completed,
  .in_forget_all = in_forget_all,
  .stats_json = stats_json,
  .out_allocation = out_allocation,
  .in_allocation = in_allocation,
};

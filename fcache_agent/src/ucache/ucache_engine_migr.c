/* ucache's side of live migration (engine.h), over ucache.h's migration
 * calls: every strategy runs here, on-demand fetch included. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"
#include "engine/engine.h"
#include "ucache.h"

#define UC(m) ((m)->vol->uc)

/* The destination's fetch callback (migr_dest.c). */
int fc_migr_dest_fetch(void *ctx, oblock_t ob, void *data, bool *dirty, bool required);

static int
supports(enum fc_strategy s, char *err, size_t errlen)
{
  return 0;
}

static int
out_freeze(struct fc_migration *m, bool flush, char *err, size_t errlen)
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
  return r;
}

static int
out_thaw(struct fc_migration *m)
{
  fc_ucache_migr_freeze(UC(m), false);
  return fc_ucache_start(UC(m));
}

static int
out_list(struct fc_migration *m, uint64_t **list, uint32_t *n, bool dirty_only)
{
  return fc_ucache_migr_snapshot(UC(m), list, n, dirty_only);
}

static int
out_read(struct fc_migration *m, oblock_t ob, void *data, bool *dirty)
{
  return fc_ucache_migr_read_block(UC(m), ob, data, dirty);
}

static int
out_peek(struct fc_migration *m, void *buf, uint32_t count, uint64_t off)
{
  return fc_ucache_peek(UC(m), buf, count, off);
}

static int
out_forget(struct fc_migration *m, oblock_t ob)
{
  return fc_ucache_migr_forget(UC(m), ob);
}

static int
out_forget_all(struct fc_migration *m)
{
  return fc_ucache_migr_forget_all(UC(m));
}

static enum fc_ucache_migr_mode
mode_of(enum fc_strategy s)
{
  switch (s) {
  case FC_STRAT_FIREPAN_IF: return FC_MIGR_BYPASS;
  case FC_STRAT_CLOUDCACHE:
  case FC_STRAT_HYBRID: return FC_MIGR_ONDEMAND;
  default: return FC_MIGR_PLAIN;
  }
}

static int
in_begin(struct fc_migration *m)
{
  char path[FC_PATH_MAX + 100];

  fc_migr_superseded_path(m->agent, m->volume_id, path, sizeof path);
  return fc_ucache_migr_in_begin(UC(m), mode_of(m->strategy), fc_migr_dest_fetch,
                                 fc_migr_dest_read, m, path);
}

static void
in_connected(struct fc_migration *m)
{
  fc_ucache_migr_source_connected(UC(m));
}

static int
in_add_remote(struct fc_migration *m, oblock_t ob, bool dirty)
{
  return fc_ucache_migr_add_remote(UC(m), ob, dirty);
}

static void
in_switch(struct fc_migration *m)
{
  fc_ucache_migr_open_gate(UC(m));
}

static int
in_install(struct fc_migration *m, oblock_t ob, const void *data, bool dirty)
{
  return fc_ucache_migr_install_copy(UC(m), ob, data, dirty);
}

static int
in_preload(struct fc_migration *m, oblock_t ob)
{
  return fc_ucache_migr_preload(UC(m), ob);
}

static uint32_t
in_end(struct fc_migration *m)
{
  return fc_ucache_migr_in_end(UC(m));
}

static int
in_durable(struct fc_migration *m, bool final)
{
  int r = fc_cachedev_sync(m->agent->dev);

  return r ? r : fc_md_sync(m->agent->md);
}

static void
in_lost(struct fc_migration *m)
{
  fc_ucache_migr_source_lost(UC(m));
}

static void
in_shutdown(struct fc_migration *m)
{
  fc_ucache_migr_shutdown(UC(m));
}

static uint32_t
in_remote_dirty(struct fc_migration *m)
{
  return fc_ucache_migr_remote_dirty(UC(m));
}

static void
in_completed(struct fc_migration *m)
{
  fc_ucache_migr_unpin(UC(m));
}

static int
in_forget_all(struct fc_migration *m)
{
  fc_ucache_migr_source_lost(UC(m));
  return fc_ucache_migr_forget_all(UC(m));
}

static void
stats_json(struct fc_migration *m, json_t *o)
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

const struct fc_engine_migr_ops fc_ucache_migr_ops = {
  .supports = supports,
  .can_settle = true,
  .out_freeze = out_freeze,
  .out_thaw = out_thaw,
  .out_list = out_list,
  .out_read = out_read,
  .out_peek = out_peek,
  .out_forget = out_forget,
  .out_forget_all = out_forget_all,
  .in_begin = in_begin,
  .in_connected = in_connected,
  .in_add_remote = in_add_remote,
  .in_switch = in_switch,
  .in_install = in_install,
  .in_preload = in_preload,
  .in_end = in_end,
  .in_preloaded = NULL,
  .in_durable = in_durable,
  .in_lost = in_lost,
  .in_shutdown = in_shutdown,
  .in_remote_dirty = in_remote_dirty,
  .in_completed = in_completed,
  .in_forget_all = in_forget_all,
  .stats_json = stats_json,
};

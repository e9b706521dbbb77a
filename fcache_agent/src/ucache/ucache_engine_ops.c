/* SPDX-License-Identifier: Apache-2.0 */
/* The ucache engine: the host's cache file and its metadata, one ucache
 * per volume behind an NBD export, and the engine's ops table.  The top of
 * the engine's files: ucache_engine.h (its public side) and
 * ucache_engine_priv.h (its state) are below them all.  Its migration
 * side is in ucache_engine_migr.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/lockcheck.h"
#include "common/log.h"
#include "common/version.h"
#include "nbd/nbd_server.h"
#include "origin/origin.h"
#include "ucache_engine.h"
#include "ucache_engine_priv.h"
#include "warm.h"

static int
reconcile_geometry(struct fc_host *host, const char *md_path, char *err, size_t errlen)
{
  uint32_t dirty = 0, n = UCE(host)->md->nr_blocks;
  struct fc_md_record rec;
  int r;

  /* Cheap enough at start: one pass over the old records. */
  for (uint32_t i = 0; i < n; i++) {
    r = fc_md_read(UCE(host)->md, i, 1, &rec);
    if (r)
      return r;
    if (!fc_md_record_ok(&rec) || (rec.flags & FC_MD_DIRTY))
      dirty++;
  }
  if (dirty) {
    snprintf(err, errlen, "%s was made for %u blocks of %u bytes and still holds "
             "%u blocks of unwritten data; restore the previous cache_size and "
             "block_size so they can be written back", md_path, n,
             UCE(host)->md->block_size, dirty);
    return -EMEDIUMTYPE;
  }
  log_warning("cache geometry changed: discarding the old clean cache map in %s",
              md_path);
  return fc_md_reinit(UCE(host)->md, host->cfg.block_size,
                      (uint32_t)(host->cfg.cache_size / host->cfg.block_size));
}

static int
uc_open(struct fc_host *host, char *err, size_t errlen)
{
  const struct fc_config *cfg = &host->cfg;
  char md_path[FC_PATH_MAX + 32], marker[FC_PATH_MAX + 32];
  bool was_clean = true, same_boot;
  int r;

  host->engine = calloc(1, sizeof(struct uc_engine));
  if (!host->engine)
    return -ENOMEM;
  UCE(host)->pool = fc_ucache_pool_new();
  if (!UCE(host)->pool) {
    r = -ENOMEM;
    goto out;
  }
  r = uc_allocator_new(host, &UCE(host)->alloc, err, errlen);
  if (r)
    goto out;
  snprintf(md_path, sizeof md_path, "%s/cache.meta", cfg->state_dir);
  r = fc_cachedev_open(cfg->cache_path, cfg->cache_size, cfg->block_size,
                       &UCE(host)->dev, err, errlen);
  if (r)
    goto out;
  r = fc_md_open(md_path, cfg->block_size, UCE(host)->dev->nr_blocks, &was_clean,
                 &UCE(host)->md, err, errlen);
  if (r == -EMEDIUMTYPE) {
    r = reconcile_geometry(host, md_path, err, errlen);
    was_clean = true;
  }
  if (r)
    goto out;
  uc_warm_marker_path(cfg->state_dir, marker, sizeof marker);
  same_boot = uc_warm_same_boot(marker);
  if (!was_clean && same_boot)
    log_info("the agent stopped uncleanly with no reboot since: its clean "
             "cache blocks are current and kept");
  r = uc_recover(host, was_clean, same_boot, err, errlen);
  if (r)
    goto out;
  /* From here every record follows metadata.h's rules again. */
  if (uc_warm_arm(marker) == 0)
    snprintf(UCE(host)->md->warm_marker, sizeof UCE(host)->md->warm_marker,
             "%s", marker);
  else
    log_warning("cannot write %s: after a crash the cache restarts cold", marker);
  /* From here on the clean records on disk may go stale. */
  r = fc_md_set_state(UCE(host)->md, FC_MD_STATE_RUNNING);
  if (r) {
    snprintf(err, errlen, "cannot write cache metadata %s: %s", md_path, strerror(-r));
    goto out;
  }
  for (unsigned i = 0; i < host->nr_volumes; i++) {
    struct fc_volume *v = host->volumes[i];
    char verr[512];

    if (!UV(v)->uc)
      continue;
    if (v->p.migration[0]) {
      snprintf(v->error, sizeof v->error, "live migration %s did not complete: "
               "the current copy of some blocks may be on the other host, so "
               "this volume is neither served nor written back here; its %u "
               "dirty blocks are kept", v->p.migration, fc_ucache_dirty(UV(v)->uc));
      log_error("volume %s: %s", v->p.id, v->error);
      continue;
    }
    uc_volume_hold_recovered(v);
    r = uc_volume_start(host, v, verr, sizeof verr);
    if (r) {
      log_error("volume %s: %s", v->p.id, verr);
      snprintf(v->error, sizeof v->error, "%s", verr);
    } else {
      log_info("volume %s: serving %s", v->p.id, UV(v)->export_path);
    }
  }
  /* Nobody else reaches the registry yet (the control socket and the
   * migration listener start after open), but the rule has no exception:
   * the allocator's state is host->lock's. */
  pthread_mutex_lock(&host->lock);
  uc_allocator_rebalance_locked(UCE(host)->alloc);
  pthread_mutex_unlock(&host->lock);
  r = uc_allocator_start(UCE(host)->alloc);
  if (r) {
    snprintf(err, errlen, "cannot start the allocator thread: %s", strerror(-r));
    goto out;
  }
  r = uc_reviver_start(host, &UCE(host)->reviver);
  if (r) {
    snprintf(err, errlen, "cannot start the thread that retries unavailable "
             "origins: %s", strerror(-r));
    goto out;
  }
  return 0;
out:
  uc_allocator_free(UCE(host)->alloc);
  fc_host_free_volumes(host);
  fc_ucache_pool_free(UCE(host)->pool);
  fc_md_close(UCE(host)->md);
  fc_cachedev_close(UCE(host)->dev);
  free(host->engine);
  host->engine = NULL;
  return r;
}

/* Clean shutdown: stop every export, persist the whole cache map (dirty
 * blocks stay dirty, to be written back once claimed after the restart:
 * uc_volume_hold_recovered), mark it clean. */
static int
uc_close(struct fc_host *host)
{
  struct fc_md_record *recs;
  int r;

  /* First: it may revive a volume, which needs the allocator.  It may
   * be connecting to an origin: that ends within the origin's timeouts. */
  uc_reviver_stop(UCE(host)->reviver);
  UCE(host)->reviver = NULL;
  /* The allocator last saved each volume's state at its last window. */
  uc_allocator_free(UCE(host)->alloc);
  UCE(host)->alloc = NULL;
  /* No request may run while the map is written out. */
  for (unsigned i = 0; i < host->nr_volumes; i++) {
    struct fc_volume *v = host->volumes[i];
    /* A move stopped by a shutdown leaves the volume on its old origin,
     * which the state file names. */
    uc_move_stop(v);
    nbd_server_stop(UV(v)->srv);
    UV(v)->srv = NULL;
    if (UV(v)->uc)
      fc_ucache_stop(UV(v)->uc);
  }
  recs = calloc(UCE(host)->dev->nr_blocks, sizeof *recs);
  if (!recs) {
    r = -ENOMEM;
    goto out;
  }
  for (unsigned i = 0; i < host->nr_volumes; i++) {
    struct fc_volume *v = host->volumes[i];
    if (UV(v)->uc)
      fc_ucache_dump_records(UV(v)->uc, recs);
    for (uint32_t j = 0; j < UV(v)->nr_held; j++)
      recs[UV(v)->held_cb[j]] = UV(v)->held[j];
  }
  r = fc_cachedev_sync(UCE(host)->dev);
  if (!r)
    r = fc_md_write_all(UCE(host)->md, recs);
  if (!r)
    r = fc_md_set_state(UCE(host)->md, FC_MD_STATE_CLEAN);
  free(recs);
out:
  if (r)
    log_error("could not save the cache map (%s): the next start treats the "
              "cache as after a crash (clean blocks dropped, dirty kept)", strerror(-r));
  else
    log_info("cache map saved; %u volume(s) will be re-attached at next start",
             host->nr_volumes);
  fc_host_free_volumes(host);
  fc_ucache_pool_free(UCE(host)->pool);
  fc_md_close(UCE(host)->md);
  fc_cachedev_close(UCE(host)->dev);
  free(host->engine);
  host->engine = NULL;
  return r;
}

static int
uc_open_origin(struct fc_host *host, const char *volume_id, const char *origin,
               void **opened, char *err, size_t errlen)
{
  struct fc_origin_policy pol;
  struct fc_origin *o;
  int r;

  /* An origin may take seconds to answer (engine.h, open_origin). */
  FC_ASSERT_NOT_HELD(&host->lock);
  fc_origin_policy_init(&pol, &host->cfg);
  pol.volume_id = volume_id;
  r = fc_origin_open(origin, host->cfg.origin_connections, &pol, &o, err,
                     errlen);
  if (r == 0)
    *opened = o;
  return r;
}

static void
uc_release_origin(struct fc_host *host, void *opened)
{
  FC_ASSERT_NOT_HELD(&host->lock);
  fc_origin_close(opened);
}

static int
uc_claim(struct fc_host *host, struct fc_volume *v, const char *by)
{
  (void)host;
  if (!UV(v)->uc || !fc_ucache_claim(UV(v)->uc))
    return 0;
  log_warning("volume %s: %s claims it: the write-back of its %u unwritten "
              "blocks, held since the agent restarted, resumes", v->p.id, by,
              fc_ucache_dirty(UV(v)->uc));
  return 1;
}

static int
uc_attach(struct fc_host *host, const struct fc_attach_request *req,
          struct fc_volume **out, char *err, size_t errlen)
{
  uint32_t bs = host->cfg.block_size;
  uint64_t size = req->cache_size;
  struct fc_volume *v;
  bool reserved = false;
  int r;

  r = fc_attach_request_check(req, err, errlen);
  if (r)
    return r;
  if (size == 0) {
    /* Default: a quarter of the device, the share a host with four
     * cached volumes would give each. */
    size = (uint64_t)UCE(host)->dev->nr_blocks / 4 * bs;
    if (size == 0)
      size = bs;
  }
  size = (size + bs - 1) / bs * bs;
  r = fc_host_attach_precheck_locked(host, req, size, out, err, errlen);
  if (r > 0)
    uc_claim(host, *out, "volume-attach");   /* Nova attaching it again */
  if (r)
    return r > 0 ? 0 : r;
  if (size / bs > UCE(host)->dev->nr_blocks) {
    snprintf(err, errlen, "cache size %llu bytes is larger than the whole cache "
             "device (%llu bytes)", (unsigned long long)size,
             (unsigned long long)UCE(host)->dev->nr_blocks * bs);
    return -ENOSPC;
  }

  v = fc_volume_from_request(req, size);
  if (!v)
    return -ENOMEM;
  r = uc_volume_new(v);
  if (r)
    goto out;
  r = fc_volume_new_tag(&v->p.tag);
  if (r)
    goto out;
  /* A new attachment, a new name: a migration's destination makes its
   * own, and a volume attached again after a detach does not answer to
   * what its earlier VM was told. */
  r = fc_export_secret_new(v->p.export_secret);
  if (r)
    goto out;
  /* allocation = rwss: cache_size is an upper bound, nothing is set
   * aside; the volumes of a host may ask for more than its flash. */
  r = uc_allocator_reserves(UCE(host)->alloc) ?
      fc_cachedev_reserve(UCE(host)->dev, (uint32_t)(size / bs)) : 0;
  if (r) {
    uint64_t free_b = (uint64_t)(UCE(host)->dev->nr_blocks - UCE(host)->dev->reserved) * bs;
    snprintf(err, errlen, "cache device full: volume %s asks for %llu bytes, "
             "%llu of %llu bytes are not reserved by other volumes", v->p.id,
             (unsigned long long)size, (unsigned long long)free_b,
             (unsigned long long)UCE(host)->dev->nr_blocks * bs);
    goto out;
  }
  reserved = true;
  if (req->opened && *req->opened) {
    UV(v)->origin = *req->opened;   /* the volume owns it from here on */
    *req->opened = NULL;
    r = uc_volume_build(host, v, err, errlen);
  } else {
    r = uc_volume_prepare(host, v, err, errlen);
  }
  if (r)
    goto out;
  /* Persist before serving: a write_back block must never be written
   * under a tag that a restarted agent would not recognise. */
  r = fc_volume_params_save(host->volumes_dir, &v->p, err, errlen);
  if (r)
    goto out;
  r = uc_volume_start(host, v, err, errlen);
  if (r) {
    fc_volume_params_remove(host->volumes_dir, v->p.id);
    goto out;
  }
  host->volumes[host->nr_volumes++] = v;
  uc_allocator_rebalance_locked(UCE(host)->alloc);
  log_info("volume %s attached: origin %s, %llu bytes of cache, %s, admission %s, "
           "export socket %s", v->p.id, v->p.origin, (unsigned long long)size,
           fc_write_policy_name(v->p.write_policy), fc_admission_name(v->p.admission),
           UV(v)->export_path);
  *out = v;
  return 0;

out:
  if (reserved && uc_allocator_reserves(UCE(host)->alloc))
    fc_cachedev_unreserve(UCE(host)->dev, (uint32_t)(size / bs));
  fc_host_volume_free(host, v);
  return r;
}

static int
uc_detach(struct fc_host *host, const char *id, bool discard_dirty, uint32_t *dropped,
          char *err, size_t errlen)
{
  struct fc_volume *v = fc_host_find_locked(host, id);
  uint32_t lost = 0;
  unsigned clients;
  char serr[512];
  int r;

  if (!v) {
    snprintf(err, errlen, "volume %.80s is not attached to this agent", id);
    return -ENOENT;
  }
  if (!UV(v)->uc && UV(v)->nr_held_dirty && !discard_dirty) {
    snprintf(err, errlen, "volume %s holds %u blocks of unwritten data and its "
             "origin is unavailable (%s); make the origin reachable and restart "
             "the agent so they can be written back", id, UV(v)->nr_held_dirty, v->error);
    return -EBUSY;
  }
  /* Dropping what a running VM wrote is never what was meant: the blocks
   * to discard are those of a VM that is gone (evacuated). */
  if (discard_dirty && UV(v)->srv && (clients = nbd_server_connections(UV(v)->srv))) {
    snprintf(err, errlen, "volume %s: %u client(s) have its export %s open; "
             "discarding would drop blocks a running VM wrote: stop it first",
             id, clients, UV(v)->export_path);
    return -EBUSY;
  }
  if (!discard_dirty)
    uc_claim(host, v, "volume-detach");
  /* A running move falls back first: the write-back below must reach
   * the origin the state file names. */
  uc_move_stop(v);
  /* Disconnect the VM first: no write may arrive after the last write-back. */
  nbd_server_stop(UV(v)->srv);
  UV(v)->srv = NULL;
  if (UV(v)->uc) {
    fc_ucache_stop(UV(v)->uc);
    lost = discard_dirty ? fc_ucache_dirty(UV(v)->uc) : 0;
    /* Every block goes, dirty ones included, records cleared first. */
    r = discard_dirty ? fc_ucache_migr_forget_all(UV(v)->uc) :
                        fc_ucache_writeback_all(UV(v)->uc);
    if (!r)
      r = fc_ucache_release(UV(v)->uc);
    if (r) {
      struct fc_ucache_info info;
      fc_ucache_info(UV(v)->uc, &info);
      if (discard_dirty)
        snprintf(err, errlen, "cannot detach volume %s: dropping its cache "
                 "blocks failed (%u dirty left): %s; the volume stays attached",
                 id, info.dirty_blocks, strerror(-r));
      else
        snprintf(err, errlen, "cannot detach volume %s: writing back its %u dirty "
                 "blocks to %s failed: %s; the volume stays attached", id,
                 info.dirty_blocks, v->p.origin, strerror(-r));
      if (uc_volume_start(host, v, serr, sizeof serr))
        log_error("volume %s: cannot serve again after failed detach: %s", id, serr);
      return r;
    }
  } else {
    lost = UV(v)->nr_held_dirty;
    for (uint32_t i = 0; i < UV(v)->nr_held; i++) {
      r = fc_md_set(UCE(host)->md, to_cblock(UV(v)->held_cb[i]), 0, 0, 0);
      if (r) {
        snprintf(err, errlen, "cannot update cache metadata: %s", strerror(-r));
        return r;
      }
    }
    fc_md_sync(UCE(host)->md);
    for (uint32_t i = 0; i < UV(v)->nr_held; i++)
      fc_cachedev_free(UCE(host)->dev, to_cblock(UV(v)->held_cb[i]));
    UV(v)->nr_held = UV(v)->nr_held_dirty = 0;
  }
  if (uc_allocator_reserves(UCE(host)->alloc))
    fc_cachedev_unreserve(UCE(host)->dev,
                          (uint32_t)(v->p.cache_size / host->cfg.block_size));
  r = fc_volume_params_remove(host->volumes_dir, id);
  if (r)
    log_warning("volume %s: cannot remove its state file: %s", id, strerror(-r));
  {
    char log_path[FC_PATH_MAX + 128];

    uc_move_log_path(host, id, log_path, sizeof log_path);
    unlink(log_path);
  }
  if (lost)
    log_error("volume %s detached with discard_dirty: %u unwritten blocks "
              "dropped, never written to its origin %s", id, lost, v->p.origin);
  else
    log_info("volume %s detached%s", id, discard_dirty ? " (discard_dirty: "
             "it had no unwritten blocks)" : "");
  uc_allocator_volume_forget(UCE(host)->alloc, v);
  fc_host_forget_locked(host, v);
  uc_allocator_rebalance_locked(UCE(host)->alloc);
  if (dropped)
    *dropped = lost;
  return 0;
}

static bool
uc_serving(const struct fc_volume *v)
{
  return UV(v)->uc && UV(v)->srv;
}

static json_t *
uc_volume_json(struct fc_host *host, struct fc_volume *v)
{
  json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s}",
                        "volume_id", v->p.id, "origin", v->p.origin,
                        "export_uri", UV(v)->srv ? v->export_uri : "",
                        "cache_size", (json_int_t)v->p.cache_size,
                        "write_policy", fc_write_policy_name(v->p.write_policy),
                        "admission", fc_admission_name(v->p.admission));

  if (!o)
    return NULL;
  json_object_set_new(o, "engine", json_string(host->cfg.engine));
  json_object_set_new(o, "state", json_string(UV(v)->srv ? "attached" : "unavailable"));
  if (v->error[0] && !UV(v)->srv)
    json_object_set_new(o, "error", json_string(v->error));
  json_object_set_new(o, "block_size", json_integer(host->cfg.block_size));
  if (UV(v)->uc) {
    struct fc_ucache_info info;
    struct fc_stats *s = fc_ucache_stats(UV(v)->uc);
    uint64_t hits = STAT_GET(s, read_hits), misses = STAT_GET(s, read_misses);

    fc_ucache_info(UV(v)->uc, &info);
    json_object_set_new(o, "size", json_integer((json_int_t)info.size));
    json_object_set_new(o, "cached_blocks", json_integer(info.cached_blocks));
    json_object_set_new(o, "dirty_blocks", json_integer(info.dirty_blocks));
    if (v->p.write_policy == FC_WRITE_BACK && UV(v)->srv) {
      json_object_set_new(o, "writeback",
                          json_string(info.writeback_held ? "held" : "running"));
      if (info.writeback_held)
        json_object_set_new(o, "writeback_held", json_string(UC_HELD_WHY));
    }
    json_object_set_new(o, "quota_blocks", json_integer(info.quota_blocks));
    json_object_set_new(o, "memory_bytes", json_integer((json_int_t)info.memory_bytes));
    json_object_set_new(o, "hit_ratio",
                        json_real(hits + misses ? (double)hits / (double)(hits + misses) : 0.0));
#define S(name) json_object_set_new(o, #name, json_integer((json_int_t)STAT_GET(s, name)))
    S(reads); S(writes); S(read_bytes); S(write_bytes); S(read_hits); S(read_misses);
    S(write_hits); S(write_misses); S(trims); S(flushes); S(origin_read_bytes);
    S(origin_write_bytes); S(cache_read_bytes); S(cache_write_bytes); S(promotions);
    S(evictions); S(invalidations); S(writebacks); S(io_errors); S(staging_hits);
    S(fills_skipped);
#undef S
    json_object_set_new(o, "rws_n", json_integer(v->p.rws_n));
    json_object_set_new(o, "staging", json_string(fc_staging_kind_name(v->p.staging)));
    json_object_set_new(o, "allocation", uc_allocator_volume_json(UCE(host)->alloc, v));
  } else {
    json_object_set_new(o, "cached_blocks", json_integer(UV(v)->nr_held));
    json_object_set_new(o, "dirty_blocks", json_integer(UV(v)->nr_held_dirty));
  }
  if (UV(v)->srv)
    json_object_set_new(o, "connections", json_integer(nbd_server_connections(UV(v)->srv)));
  return o;
}

/* Host totals: what the host's flash and the shared storage see from all
 * volumes together. */
static json_t *
host_totals(struct fc_host *host)
{
  uint64_t t[9] = { 0 };
  uint32_t dirty = 0;

  for (unsigned i = 0; i < host->nr_volumes; i++) {
    struct fc_volume *v = host->volumes[i];
    struct fc_ucache_info info;
    struct fc_stats *s;

    if (!UV(v)->uc)
      continue;
    s = fc_ucache_stats(UV(v)->uc);
    fc_ucache_info(UV(v)->uc, &info);
    dirty += info.dirty_blocks;
    t[0] += STAT_GET(s, reads);
    t[1] += STAT_GET(s, writes);
    t[2] += STAT_GET(s, read_hits);
    t[3] += STAT_GET(s, read_misses);
    t[4] += STAT_GET(s, origin_read_bytes);
    t[5] += STAT_GET(s, origin_write_bytes);
    t[6] += STAT_GET(s, cache_write_bytes);
    t[7] += STAT_GET(s, evictions);
    t[8] += STAT_GET(s, io_errors);
  }
  return json_pack("{s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I}",
                   "reads", (json_int_t)t[0], "writes", (json_int_t)t[1],
                   "read_hits", (json_int_t)t[2], "read_misses", (json_int_t)t[3],
                   "hit_ratio", t[2] + t[3] ? (double)t[2] / (double)(t[2] + t[3]) : 0.0,
                   "origin_read_bytes", (json_int_t)t[4],
                   "origin_write_bytes", (json_int_t)t[5],
                   "cache_write_bytes", (json_int_t)t[6], "evictions", (json_int_t)t[7],
                   "io_errors", (json_int_t)t[8], "dirty_blocks", (json_int_t)dirty);
}

static json_t *
uc_status_json(struct fc_host *host)
{
  uint64_t bs = host->cfg.block_size;
  json_t *vols = json_array(), *o;

  for (unsigned i = 0; i < host->nr_volumes; i++) {
    struct fc_volume *v = host->volumes[i];
    json_array_append_new(vols, json_pack("{s:s, s:s, s:s, s:I}", "volume_id", v->p.id,
                                          "export_uri", UV(v)->srv ? v->export_uri : "",
                                          "state", UV(v)->srv ? "attached" : "unavailable",
                                          "cache_size", (json_int_t)v->p.cache_size));
  }
  o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:o}",
                "version", fc_version(), "engine", host->cfg.engine,
                "capacity_bytes", (json_int_t)(UCE(host)->dev->nr_blocks * bs),
                "used_bytes", (json_int_t)(fc_cachedev_used(UCE(host)->dev) * bs),
                "reserved_bytes", (json_int_t)(UCE(host)->dev->reserved * bs),
                "block_size", (json_int_t)bs,
                "table_memory_bytes", (json_int_t)fc_cachedev_memory(UCE(host)->dev),
                "volumes", vols);
  if (o) {
    json_object_set_new(o, "cache_path", json_string(host->cfg.cache_path));
    json_object_set_new(o, "totals", host_totals(host));
    json_object_set_new(o, "allocation", uc_allocator_json(UCE(host)->alloc));
  }
  return o;
}

const struct fc_engine_ops fc_ucache_engine = {
  .name = "ucache",
  .open = uc_open,
  .close = uc_close,
  .open_origin = uc_open_origin,
  .release_origin = uc_release_origin,
  .attach = uc_attach,
  .detach = uc_detach,
  .claim = uc_claim,
  .grow = uc_grow,
  .set_policy = uc_set_policy,
  .set_cache_size = uc_set_cache_size,
  .serving = uc_serving,
  .volume_free = uc_volume_free,
  .volume_json = uc_volume_json,
  .status_json = uc_status_json,
  .migr = &fc_ucache_migr_ops,
  .move = &fc_ucache_move_ops,
};

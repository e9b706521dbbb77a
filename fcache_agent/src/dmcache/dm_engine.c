/* SPDX-License-Identifier: Apache-2.0 */
/* The dmcache engine; see dm_engine.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "dm_cache.h"
#include "dm_dev.h"
#include "dm_engine.h"
#include "dm_priv.h"
#include "engine/engine.h"
#include "flash_pool.h"
#include "common/log.h"
#include "common/version.h"
#include "origin/origin_policy.h"

#define SECTOR FC_SECTOR
#define MAX_SEGS 256
#define DRAIN_TIMEOUT_S 120

enum { ORIGIN_RD, ORIGIN_WR, CACHE_RD, CACHE_WR };

int
fc_dm_blockdev_size(const char *path, uint64_t *bytes, dev_t *rdev, char *err, size_t errlen)
{
  struct stat st;
  int fd, r = 0;

  if (stat(path, &st) == -1) {
    r = -errno;
    snprintf(err, errlen, "cannot open %s: %s", path, strerror(-r));
    return r;
  }
  if (!S_ISBLK(st.st_mode)) {
    snprintf(err, errlen, "%s is not a block device; engine dmcache caches block "
             "devices (what os-brick hands over), use engine ucache for files "
             "and NBD URIs", path);
    return -ENOTBLK;
  }
  *rdev = st.st_rdev;
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd == -1 || ioctl(fd, BLKGETSIZE64, bytes) == -1) {
    r = -errno;
    snprintf(err, errlen, "cannot read the size of %s: %s", path, strerror(-r));
  }
  if (fd != -1)
    close(fd);
  return r;
}

/* An origin being attached: it must pass origin_prefixes
 * (origin/origin_policy.h), and be a block device.  Not opened
 * exclusively: dm-cache claims it itself (a mounted device fails the table
 * load), and a migration's destination may share it on one kernel. */
int
fc_dm_checked_blockdev(struct fc_host *host, const char *path, uint64_t *bytes,
                    dev_t *rdev, char *err, size_t errlen)
{
  struct fc_origin_policy pol;
  struct stat st;
  int fd, r;

  fc_origin_policy_init(&pol, &host->cfg);
  r = fc_origin_policy_open(&pol, path, O_RDONLY, &fd, err, errlen);
  if (r)
    return r;
  if (fstat(fd, &st) == -1 || !S_ISBLK(st.st_mode)) {
    r = -ENOTBLK;
    snprintf(err, errlen, "%s is not a block device; engine dmcache caches "
             "block devices (what os-brick hands over), use engine ucache for "
             "files and NBD URIs", path);
  } else if (ioctl(fd, BLKGETSIZE64, bytes) == -1) {
    r = -errno;
    snprintf(err, errlen, "cannot read the size of %s: %s", path, strerror(-r));
  } else {
    *rdev = st.st_rdev;
  }
  close(fd);
  return r;
}

/* Sectors read and written by a block device since boot (diskstats). */
static void
disk_sectors(dev_t dev, uint64_t *rd, uint64_t *wr)
{
  char path[96];
  unsigned long long v[7] = { 0 };
  FILE *f;

  *rd = *wr = 0;
  snprintf(path, sizeof path, "/sys/dev/block/%u:%u/stat", major(dev), minor(dev));
  f = fopen(path, "re");
  if (!f)
    return;
  if (fscanf(f, "%llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
             &v[4], &v[5], &v[6]) == 7) {
    *rd = v[2];
    *wr = v[6];
  }
  fclose(f);
}

static void
sample(const struct fc_dmvol *dv, uint64_t s[4])
{
  disk_sectors(dv->origin_dev, &s[ORIGIN_RD], &s[ORIGIN_WR]);
  disk_sectors(dv->data_dev, &s[CACHE_RD], &s[CACHE_WR]);
}

/* A dm-linear table over the owner's flash segments. */
static void
release_space(struct fc_host *host, const char *id)
{
  char owner[FC_FLASH_OWNER_MAX], e2[256];

  fc_dmv_owner(id, "cmeta", owner, sizeof owner);
  fc_flash_pool_free(&DME(host)->pool, owner);
  fc_dmv_owner(id, "cdata", owner, sizeof owner);
  fc_flash_pool_free(&DME(host)->pool, owner);
  fc_dmv_owner(id, "clmeta", owner, sizeof owner);
  fc_flash_pool_free(&DME(host)->pool, owner);
  if (fc_flash_pool_save(&DME(host)->pool, DME(host)->pool_path, e2, sizeof e2))
    log_error("volume %s: freeing its flash: %s", id, e2);
}

static int
dm_attach(struct fc_host *host, const struct fc_attach_request *req,
                    struct fc_volume **out, char *err, size_t errlen)
{
  struct fc_dm_engine *e = DME(host);
  uint64_t bs = e->block_sectors * SECTOR, size = req->cache_size, obytes, nr;
  char owner[FC_FLASH_OWNER_MAX];
  struct fc_volume *v;
  bool allocated = false;
  int r;

  r = fc_attach_request_check(req, err, errlen);
  if (r)
    return r;
  if (req->origin[0] != '/') {
    snprintf(err, errlen, "origin must be an absolute block device path for "
             "engine dmcache");
    return -EINVAL;
  }
  if (size == 0)
    size = e->pool.nr_extents * FC_FLASH_EXTENT / 4;
  size = (size + bs - 1) / bs * bs;
  r = fc_host_attach_precheck_locked(host, req, size, out, err, errlen);
  if (r)
    return r > 0 ? 0 : r;
  v = fc_volume_from_request(req, size);
  if (!v || !(v->priv = calloc(1, sizeof(struct fc_dmvol)))) {
    r = -ENOMEM;
    goto out;
  }
  fc_dmv_names(host, v->p.id, DV(v));
  r = fc_dm_checked_blockdev(host, v->p.origin, &obytes, &DV(v)->origin_dev, err,
                          errlen);
  if (r)
    goto out;
  DV(v)->origin_sectors = obytes / SECTOR;
  if (obytes < bs) {
    snprintf(err, errlen, "origin %s (%llu bytes) is smaller than one cache block",
             v->p.origin, (unsigned long long)obytes);
    r = -EINVAL;
    goto out;
  }
  if ((r = fc_dmv_check_not_foreign(DV(v), err, errlen)) || (r = fc_volume_new_tag(&v->p.tag)))
    goto out;
  nr = size / bs;
  {
    uint64_t meta = fc_dmc_metadata_bytes(nr);
    uint64_t need = (meta + FC_FLASH_EXTENT - 1) / FC_FLASH_EXTENT +
                    (size + FC_FLASH_EXTENT - 1) / FC_FLASH_EXTENT;
    uint64_t free_x = e->pool.nr_extents - fc_flash_pool_used(&e->pool);

    if (need > free_x) {
      snprintf(err, errlen, "flash device full: volume %s needs %llu bytes "
               "(%llu of cache data + %llu of metadata, in %u-byte extents), "
               "%llu of %llu bytes are free", v->p.id,
               (unsigned long long)need * FC_FLASH_EXTENT, (unsigned long long)size,
               (unsigned long long)need * FC_FLASH_EXTENT - (size + FC_FLASH_EXTENT - 1) /
               FC_FLASH_EXTENT * FC_FLASH_EXTENT, FC_FLASH_EXTENT,
               (unsigned long long)free_x * FC_FLASH_EXTENT,
               (unsigned long long)e->pool.nr_extents * FC_FLASH_EXTENT);
      r = -ENOSPC;
      goto out;
    }
    fc_dmv_owner(v->p.id, "cmeta", owner, sizeof owner);
    r = fc_flash_pool_alloc(&e->pool, owner, meta);
    if (!r) {
      allocated = true;
      fc_dmv_owner(v->p.id, "cdata", owner, sizeof owner);
      r = fc_flash_pool_alloc(&e->pool, owner, size);
    }
    if (r) {
      snprintf(err, errlen, "cannot allocate flash for volume %s: %s", v->p.id,
               strerror(-r));
      goto out;
    }
  }
  /* The table first, then the devices on it: a restarted agent can
   * always tell which flash a device of ours uses. */
  r = fc_flash_pool_save(&e->pool, e->pool_path, err, errlen);
  if (r)
    goto out;
  r = fc_dmv_build(host, v, true, err, errlen);
  if (r)
    goto out;
  r = fc_volume_params_save(host->volumes_dir, &v->p, err, errlen);
  if (r) {
    char e2[256];
    fc_dm_remove(DV(v)->name, e2, sizeof e2);
    fc_dm_remove(DV(v)->data, e2, sizeof e2);
    fc_dm_remove(DV(v)->meta, e2, sizeof e2);
    goto out;
  }
  fc_dmv_set_export(v);
  sample(DV(v), DV(v)->base);
  host->volumes[host->nr_volumes++] = v;
  log_info("volume %s attached (dmcache): origin %s, %llu bytes of cache in %llu "
           "blocks of %llu bytes, %s as %s, export %s", v->p.id, v->p.origin,
           (unsigned long long)size, (unsigned long long)nr, (unsigned long long)bs,
           fc_write_policy_name(v->p.write_policy),
           fc_dmc_mode_name(fc_dmc_mode_for(v->p.write_policy)), DV(v)->export_path);
  *out = v;
  return 0;
out:
  if (allocated)
    release_space(host, v->p.id);
  if (v)
    fc_host_volume_free(host, v);
  return r;
}

static int
dm_detach(struct fc_host *host, const char *id, bool discard_dirty, uint32_t *dropped,
          char *err, size_t errlen)
{
  struct fc_volume *v = fc_host_find_locked(host, id);
  struct fc_dmc_status st;
  struct fc_dm_info info;
  uint32_t lost = 0;
  char e2[256];
  int r;

  if (!v) {
    snprintf(err, errlen, "volume %.80s is not attached to this agent", id);
    return -ENOENT;
  }
  if (v->error[0]) {
    snprintf(err, errlen, "volume %s is unavailable (%s); resolve that first", id,
             v->error);
    return -EBUSY;
  }
  if (fc_dm_move_ops.running(v)) {
    snprintf(err, errlen, "volume %s is moving its origin (volume-move); detach it "
             "once the move is done", id);
    return -EBUSY;
  }
  if ((r = fc_dm_migr_busy(v, err, errlen)))
    return r;
  r = fc_dm_info(DV(v)->name, &info);
  if (r)
    return r;
  if (info.exists && info.open_count > 0) {
    snprintf(err, errlen, "volume %s: %s is still open (%d holder(s)); the VM must "
             "release it before detach", id, DV(v)->name, info.open_count);
    return -EBUSY;
  }
  /* Nor is one detached with discard_dirty: removing the cache without
   * the cleaner writes none of its dirty blocks back. */
  if (discard_dirty && info.exists) {
    r = fc_dmv_status(DV(v), &st, err, errlen);
    if (r)
      return r;
    lost = (uint32_t)st.dirty_blocks;
  }
  /* A volume a finished migration releases is not drained: its blocks
   * are at the destination, or older than what the VM wrote there. */
  if (info.exists && v->p.write_policy == FC_WRITE_BACK && !v->releasing &&
      !discard_dirty) {
    r = fc_dmv_drain(host, v, err, errlen);
    if (r) {
      char msg[512];
      snprintf(msg, sizeof msg, "cannot detach volume %s: %s; the volume stays "
               "attached", id, err);
      snprintf(err, errlen, "%s", msg);
      if (fc_dmv_load_cache(host, v, FC_DMC_WRITEBACK, "smq", e2, sizeof e2))
        log_error("volume %s: cannot return to smq after a failed drain: %s", id, e2);
      return r;
    }
  }
  /* Removing the cache suspends it: dirty bits and hints reach the
   * metadata, which nobody needs any more. */
  fc_dm_migr_detach(host, v);
  if ((info.exists && (r = fc_dm_remove(DV(v)->name, err, errlen))) ||
      (r = fc_dm_remove(DV(v)->data, err, errlen)) ||
      (r = fc_dm_remove(DV(v)->meta, err, errlen)) ||
      (r = fc_dm_move_detach(host, v, err, errlen)))
    return r;
  release_space(host, id);
  r = fc_volume_params_remove(host->volumes_dir, id);
  if (r)
    log_warning("volume %s: cannot remove its state file: %s", id, strerror(-r));
  if (lost)
    log_error("volume %s detached with discard_dirty (dmcache): %u unwritten "
              "blocks dropped, never written to its origin %s", id, lost,
              v->p.origin);
  fc_host_forget_locked(host, v);
  log_info("volume %s detached (dmcache)", id);
  if (dropped)
    *dropped = lost;
  return 0;
}

static json_t *
dm_volume_json(struct fc_host *host, struct fc_volume *v)
{
  struct fc_dmc_status st;
  uint64_t now[4], bs = DME(host)->block_sectors * SECTOR;
  char err[512];
  json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:I}",
                        "volume_id", v->p.id, "origin", v->p.origin,
                        "export_uri", v->error[0] ? "" : v->export_uri,
                        "cache_size", (json_int_t)v->p.cache_size,
                        "write_policy", fc_write_policy_name(v->p.write_policy),
                        "admission", fc_admission_name(v->p.admission),
                        "engine", "dmcache", "block_size", (json_int_t)bs);

  if (!o)
    return NULL;
  json_object_set_new(o, "dm_device", json_string(DV(v)->name));
  if (v->error[0] || fc_dmv_status(DV(v), &st, err, sizeof err)) {
    /* A migrating volume's export is not a cache table for a while
     * (dm_migr.c): say so rather than "unavailable". */
    if (!v->error[0] && DV(v)->migr) {
      json_object_set_new(o, "state", json_string("migrating"));
      return o;
    }
    json_object_set_new(o, "state", json_string("unavailable"));
    json_object_set_new(o, "error", json_string(v->error[0] ? v->error : err));
    return o;
  }
  json_object_set_new(o, "state", json_string(st.fail ? "failed" : "attached"));
  fc_dm_migr_volume_json(DV(v)->migr, o);
  json_object_set_new(o, "size", json_integer((json_int_t)(DV(v)->origin_sectors * SECTOR)));
  json_object_set_new(o, "mode", json_string(fc_dmc_mode_name(st.mode)));
  json_object_set_new(o, "policy", json_string(st.policy));
  json_object_set_new(o, "needs_check", json_boolean(st.needs_check));
  json_object_set_new(o, "metadata_used_blocks", json_integer((json_int_t)st.metadata_used));
  json_object_set_new(o, "metadata_total_blocks",
                      json_integer((json_int_t)st.metadata_total));
  sample(DV(v), now);
#define I(k, val) json_object_set_new(o, k, json_integer((json_int_t)(val)))
  I("cached_blocks", st.used_blocks);
  I("quota_blocks", st.total_blocks);
  I("dirty_blocks", st.dirty_blocks);
  /* dm-cache counts bios, not blocks; reads/writes are those bios. */
  I("reads", st.read_hits + st.read_misses);
  I("writes", st.write_hits + st.write_misses);
  I("read_hits", st.read_hits);
  I("read_misses", st.read_misses);
  I("write_hits", st.write_hits);
  I("write_misses", st.write_misses);
  I("promotions", st.promotions);
  I("demotions", st.demotions);
  I("evictions", st.demotions);
  I("origin_read_bytes", (now[ORIGIN_RD] - DV(v)->base[ORIGIN_RD]) * SECTOR);
  I("origin_write_bytes", (now[ORIGIN_WR] - DV(v)->base[ORIGIN_WR]) * SECTOR);
  I("cache_read_bytes", (now[CACHE_RD] - DV(v)->base[CACHE_RD]) * SECTOR);
  I("cache_write_bytes", (now[CACHE_WR] - DV(v)->base[CACHE_WR]) * SECTOR);
  I("io_errors", st.fail || st.error);
#undef I
  json_object_set_new(o, "hit_ratio",
                      json_real(st.read_hits + st.read_misses
                                ? (double)st.read_hits / (double)(st.read_hits + st.read_misses)
                                : 0.0));
  return o;
}

static json_t *
dm_status_json(struct fc_host *host)
{
  struct fc_dm_engine *e = DME(host);
  uint64_t used = fc_flash_pool_used(&e->pool) * FC_FLASH_EXTENT, meta = 0;
  json_t *vols = json_array();

  for (unsigned i = 0; i < host->nr_volumes; i++) {
    struct fc_volume *v = host->volumes[i];
    char owner[FC_FLASH_OWNER_MAX];

    fc_dmv_owner(v->p.id, "cmeta", owner, sizeof owner);
    meta += fc_flash_pool_owned(&e->pool, owner) * FC_FLASH_EXTENT;
    json_array_append_new(vols, json_pack("{s:s, s:s, s:s, s:I}", "volume_id", v->p.id,
                                          "export_uri", v->error[0] ? "" : v->export_uri,
                                          "state", v->error[0] ? "unavailable" : "attached",
                                          "cache_size", (json_int_t)v->p.cache_size));
  }
  /* Exact flash accounting: capacity == allocated + free, in bytes of
   * whole extents; allocated == data + metadata of every volume. */
  return json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:o}",
                   "version", fc_version(), "engine", "dmcache",
                   "capacity_bytes", (json_int_t)(e->pool.nr_extents * FC_FLASH_EXTENT),
                   "used_bytes", (json_int_t)used, "reserved_bytes", (json_int_t)used,
                   "free_bytes", (json_int_t)(e->pool.nr_extents * FC_FLASH_EXTENT - used),
                   "metadata_bytes", (json_int_t)meta,
                   "block_size", (json_int_t)(e->block_sectors * SECTOR),
                   "cache_path", host->cfg.cache_path, "dm_prefix", host->cfg.dm_prefix,
                   "volumes", vols);
}

/* engine.h's volume_free. */
static void
dmvol_free(struct fc_volume *v)
{
  struct fc_dmvol *dv = DV(v);

  fc_dm_migr_free(dv->migr);
  fc_dm_move_free(dv->move);
  free(dv);
  v->priv = NULL;
}

static void
engine_free(struct fc_dm_engine *e)
{
  if (!e)
    return;
  fc_flash_pool_fini(&e->pool);
  free(e);
}

/* ---- start-up: adopt our devices, refuse the others ---- */

static void
adopt(struct fc_host *host, struct fc_volume *v)
{
  struct fc_dmvol *dv = DV(v);
  char expect[FC_DM_UUID_MAX], err[512];
  struct fc_dm_info info;
  uint64_t obytes;

  fc_dmv_names(host, v->p.id, dv);
  fc_dmv_set_export(v);
  if (fc_dm_blockdev_size(v->p.origin, &obytes, &dv->origin_dev, err, sizeof err)) {
    snprintf(v->error, sizeof v->error, "%s", err);
    return;
  }
  dv->origin_sectors = obytes / SECTOR;
  if (fc_dm_move_adopt(host, v, err, sizeof err) < 0) {
    snprintf(v->error, sizeof v->error, "cannot resume the move of volume %s's "
             "origin: %.300s", v->p.id, err);
    return;
  }
  fc_dmv_uuid(v->p.tag, "cache", expect, sizeof expect);
  if (fc_dm_info(dv->name, &info)) {
    snprintf(v->error, sizeof v->error, "cannot query device-mapper for %s", dv->name);
    return;
  }
  if (info.exists && strcmp(info.uuid, expect)) {
    snprintf(v->error, sizeof v->error, "device-mapper device %s was not created "
             "by this agent for volume %s (uuid '%.80s', expected '%.80s'); refusing "
             "to adopt it", dv->name, v->p.id, info.uuid, expect);
    return;
  }
  if (info.exists) {
    struct fc_dm_info di;
    if (!fc_dm_info(dv->data, &di) && di.exists)
      dv->data_dev = makedev(di.major, di.minor);
    log_info("volume %s: adopted %s", v->p.id, dv->name);
  } else if (!strncmp(v->p.migration, "out:", 4)) {
    /* The source of a migration past its switchover: frozen.  A cache
     * table would write its dirty blocks back over what the destination's
     * VM wrote since; the error table keeps the frozen metadata and data
     * as they were, for a settle (dm_migr_frozen_reopen). */
    if (fc_dm_migr_rebuild_frozen(host, v, err, sizeof err)) {
      snprintf(v->error, sizeof v->error, "the host restarted while this volume was "
               "frozen for migration %.80s, and its frozen devices cannot be built "
               "again: %.200s", v->p.migration + 4, err);
      return;
    }
    log_info("volume %s: re-created %s frozen (an error table) for migration %s",
             v->p.id, dv->name, v->p.migration + 4);
  } else if (fc_dm_migr_needs_clone(host, v)) {
    /* Over its data segment the cache would read blocks never copied. */
    if (fc_dm_migr_rebuild(host, v, err, sizeof err)) {
      snprintf(v->error, sizeof v->error, "the host restarted while this volume "
               "copied its cache from migration %.80s's source, and its cache cannot "
               "be built over that copy again: %.160s; nothing serves the volume (its "
               "data segment lacks the blocks not copied yet)", v->p.migration + 3, err);
      return;
    }
    log_info("volume %s: re-created %s over its copy from migration %s's source",
             v->p.id, dv->name, v->p.migration + 3);
  } else if (fc_dmv_build(host, v, false, err, sizeof err)) {
    snprintf(v->error, sizeof v->error, "cannot re-create the cache of volume %s: %.300s",
             v->p.id, err);
    return;
  } else {
    log_info("volume %s: re-created %s over its flash (warm)", v->p.id, dv->name);
  }
  sample(dv, dv->base);
}

static int
adopt_dm(struct fc_host *host, struct fc_volume *v)
{
  char err[512] = "";
  int r;

  if (!(v->priv = calloc(1, sizeof(struct fc_dmvol))))
    return -ENOMEM;
  adopt(host, v);
  r = v->error[0] || !v->p.migration[0] ? 0 : fc_dm_migr_recover(host, v, err, sizeof err);
  if (r < 0)
    snprintf(v->error, sizeof v->error, "live migration %.80s did not complete, and its "
             "copy of the cache from the source could not be taken up again: %.200s; "
             "the agent leaves the volume alone (see doc/reference/dmcache.rst)",
             v->p.migration, err);
  else if (!r && !v->error[0] && v->p.migration[0])
    /* The kernel may still serve the device; the agent will not manage
     * it (detach, migrate) while the other host may hold newer blocks. */
    snprintf(v->error, sizeof v->error, "live migration %s did not complete: the "
             "current copy of some blocks may be on the other host; the agent "
             "leaves %s alone (see doc/reference/dmcache.rst)", v->p.migration, DV(v)->name);
  if (v->error[0])
    log_error("volume %s is unavailable: %s", v->p.id, v->error);
  return 0;
}

/* Devices with our prefix that no volume claims: never touched, since
 * they may hold another agent's (or an operator's) data; reported. */
static int
report_stranger(void *ctx, const char *name)
{
  struct fc_host *host = ctx;
  size_t pl = strlen(host->cfg.dm_prefix);
  struct fc_dm_info info;

  if (strncmp(name, host->cfg.dm_prefix, pl) || name[pl] != '-')
    return 0;
  for (unsigned i = 0; i < host->nr_volumes; i++) {
    const struct fc_dmvol *dv = DV(host->volumes[i]);
    if (!strcmp(name, dv->name) || !strcmp(name, dv->meta) || !strcmp(name, dv->data) ||
        fc_dm_move_claims(dv, name))
      return 0;
  }
  if (fc_dm_info(name, &info) == 0 && info.exists)
    log_warning("device-mapper device %s (uuid '%s') has this agent's prefix but "
                "belongs to no volume in %s: %s; left alone", name, info.uuid,
                host->volumes_dir,
                strncmp(info.uuid, "FCACHE-", 7) ? "not created by fcache"
                                                 : "an fcache device whose state file is gone");
  return 0;
}

static int
dm_open(struct fc_host *host, char *err, size_t errlen)
{
  const struct fc_config *cfg = &host->cfg;
  struct fc_dm_engine *e;
  uint64_t dev_bytes;
  dev_t rdev;
  int r;

  if (cfg->block_size % (FC_DMC_MIN_BLOCK_SECTORS * SECTOR) ||
      !fc_dmc_block_sectors_valid(cfg->block_size / SECTOR)) {
    snprintf(err, errlen, "engine dmcache needs block_size to be a multiple of 32K "
             "(dm-cache's smallest block); block_size is %u", cfg->block_size);
    return -EINVAL;
  }
  r = fc_dm_blockdev_size(cfg->cache_path, &dev_bytes, &rdev, err, errlen);
  if (r)
    return r;
  if (cfg->cache_size > dev_bytes) {
    snprintf(err, errlen, "cache_size %llu is larger than the flash device %s (%llu "
             "bytes)", (unsigned long long)cfg->cache_size, cfg->cache_path,
             (unsigned long long)dev_bytes);
    return -ENOSPC;
  }
  e = calloc(1, sizeof *e);
  if (!e)
    return -ENOMEM;
  fc_dm_setup();
  e->block_sectors = cfg->block_size / SECTOR;
  fc_flash_pool_init(&e->pool, cfg->cache_size);
  snprintf(e->pool_path, sizeof e->pool_path, "%s/flash_pool", cfg->state_dir);
  r = fc_flash_pool_load(&e->pool, e->pool_path, err, errlen);
  if (r) {
    engine_free(e);
    return r;
  }
  host->engine = e;
  r = fc_host_load_volumes(host, adopt_dm, err, errlen);
  if (!r)
    fc_dm_list(report_stranger, host);
  if (r) {
    fc_host_free_volumes(host);
    host->engine = NULL;
    engine_free(e);
  }
  return r;
}

/* The dm-cache devices keep serving the VMs; a restarted agent adopts
 * them.  Only memory is freed. */
static int
dm_close(struct fc_host *host)
{
  log_info("dmcache: %u volume(s) left serving, to be adopted at next start",
           host->nr_volumes);
  fc_host_free_volumes(host);
  engine_free(DME(host));
  host->engine = NULL;
  return 0;
}

static bool
dm_serving(const struct fc_volume *v)
{
  return DV(v) && !v->error[0];
}

const struct fc_engine_ops fc_dm_engine = {
  .name = "dmcache",
  .open = dm_open,
  .close = dm_close,
  .attach = dm_attach,
  .detach = dm_detach,
  .serving = dm_serving,
  .volume_free = dmvol_free,
  .volume_json = dm_volume_json,
  .status_json = dm_status_json,
  .migr = &fc_dm_migr_ops,
  .move = &fc_dm_move_ops,
};

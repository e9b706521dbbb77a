/* SPDX-License-Identifier: Apache-2.0 */
/* A dmcache volume's device-mapper devices: their names and UUIDs, the
 * dm-linear devices over its flash segments, its dm-cache table, and the
 * table swaps a mode change or a migration needs.  dm_engine.c attaches,
 * detaches and adopts volumes with these. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "dm_cache.h"
#include "dm_dev.h"
#include "dm_priv.h"
#include "flash_pool.h"

#define SECTOR FC_SECTOR
#define MAX_SEGS 256
#define DRAIN_TIMEOUT_S 120

void
fc_dmv_names(const struct fc_host *host, const char *id, struct fc_dmvol *dv)
{
  snprintf(dv->name, sizeof dv->name, "%s-%s", host->cfg.dm_prefix, id);
  snprintf(dv->meta, sizeof dv->meta, "%s-%s-cmeta", host->cfg.dm_prefix, id);
  snprintf(dv->data, sizeof dv->data, "%s-%s-cdata", host->cfg.dm_prefix, id);
}

void
fc_dmv_uuid(uint64_t tag, const char *role, char *buf, size_t len)
{
  snprintf(buf, len, "FCACHE-%016" PRIx64 "-%s", tag, role);
}

void
fc_dmv_owner(const char *id, const char *role, char *buf, size_t len)
{
  snprintf(buf, len, "%s/%s", id, role);
}

static int
linear_targets(struct fc_host *host, const char *owner, struct fc_dm_target *t,
               char (*params)[FC_PATH_MAX + 32], unsigned *nr, char *err, size_t errlen)
{
  const struct fc_flash_seg *segs[MAX_SEGS];
  unsigned n = fc_flash_pool_segments(&DME(host)->pool, owner, segs, MAX_SEGS);
  uint64_t at = 0, per = FC_FLASH_EXTENT / SECTOR;

  if (n == 0) {
    snprintf(err, errlen, "the flash pool table has no space for %s", owner);
    return -ENOENT;
  }
  for (unsigned i = 0; i < n; i++) {
    snprintf(params[i], sizeof params[i], "%s %" PRIu64, host->cfg.cache_path,
             segs[i]->start * per);
    t[i] = (struct fc_dm_target){ at, segs[i]->len * per, "linear", params[i] };
    at += segs[i]->len * per;
  }
  *nr = n;
  return 0;
}

/* A new cache starts from a zeroed first metadata block: the kernel then
 * formats fresh metadata instead of trusting whatever the flash held. */
int
fc_dmv_zero_first_block(struct fc_host *host, const char *owner, char *err, size_t errlen)
{
  const struct fc_flash_seg *seg;
  void *buf = NULL;
  int fd, r = 0;

  if (fc_flash_pool_segments(&DME(host)->pool, owner, &seg, 1) != 1)
    return -ENOENT;
  fd = open(host->cfg.cache_path, O_WRONLY | O_DIRECT | O_DSYNC | O_CLOEXEC);
  if (fd == -1 || posix_memalign(&buf, 4096, 4096)) {
    r = fd == -1 ? -errno : -ENOMEM;
    goto out;
  }
  memset(buf, 0, 4096);
  if (pwrite(fd, buf, 4096, (off_t)(seg->start * FC_FLASH_EXTENT)) != 4096)
    r = errno ? -errno : -EIO;
out:
  if (r)
    snprintf(err, errlen, "cannot initialise cache metadata on %s: %s",
             host->cfg.cache_path, strerror(-r));
  free(buf);
  if (fd != -1)
    close(fd);
  return r;
}

/* Create a linear device, or keep it if it is already there with our
 * UUID (an agent that stopped half-way through building, or a device
 * stack partly removed by hand); another device of that name is refused. */
static int
ensure_linear(struct fc_host *host, struct fc_volume *v, const char *name,
              const char *role, bool *made, char *err, size_t errlen)
{
  char uuid[FC_DM_UUID_MAX];
  struct fc_dm_info info;
  int r = fc_dm_info(name, &info);

  *made = false;
  if (r)
    return r;
  fc_dmv_uuid(v->p.tag, role, uuid, sizeof uuid);
  if (info.exists && !strcmp(info.uuid, uuid))
    return 0;
  if (info.exists) {
    snprintf(err, errlen, "device-mapper device %s already exists and was not "
             "created by this agent (uuid '%s'); refusing to take it over", name,
             info.uuid);
    return -EEXIST;
  }
  r = fc_dmv_create_linear(host, v, name, role, err, errlen);
  *made = !r;
  return r;
}

int
fc_dmv_ensure_linear(struct fc_host *host, struct fc_volume *v, const char *name,
                     const char *role, char *err, size_t errlen)
{
  bool made;

  return ensure_linear(host, v, name, role, &made, err, errlen);
}

int
fc_dmv_create_linear(struct fc_host *host, struct fc_volume *v, const char *name,
                     const char *role, char *err, size_t errlen)
{
  struct fc_dm_target *t = calloc(MAX_SEGS, sizeof *t);
  char (*params)[FC_PATH_MAX + 32] = calloc(MAX_SEGS, sizeof *params);
  char owner[FC_FLASH_OWNER_MAX], uuid[FC_DM_UUID_MAX];
  unsigned nr = 0;
  int r = -ENOMEM;

  if (!t || !params)
    goto out;
  fc_dmv_owner(v->p.id, role, owner, sizeof owner);
  fc_dmv_uuid(v->p.tag, role, uuid, sizeof uuid);
  r = linear_targets(host, owner, t, params, &nr, err, errlen);
  if (!r)
    r = fc_dm_create(name, uuid, t, nr, err, errlen);
out:
  free(t);
  free(params);
  return r;
}

int
fc_dmv_cache_params(struct fc_host *host, struct fc_volume *v, enum fc_dmc_mode mode,
             const char *policy, char *buf, size_t len, char *err, size_t errlen)
{
  struct fc_dmvol *dv = DV(v);
  struct fc_dm_info mi, di;
  char mdev[32], ddev[32], odev[32];
  int r;

  if ((r = fc_dm_info(dv->meta, &mi)) || (r = fc_dm_info(dv->data, &di)))
    return r;
  if (!mi.exists || !di.exists) {
    snprintf(err, errlen, "cache metadata or data device of %s is missing", dv->name);
    return -ENODEV;
  }
  dv->data_dev = makedev(di.major, di.minor);
  snprintf(mdev, sizeof mdev, "%u:%u", mi.major, mi.minor);
  snprintf(ddev, sizeof ddev, "%u:%u", di.major, di.minor);
  /* By number, like the flash segments: the origin was checked
   * (origin_prefixes) as the device it was then, and a path could name
   * another device by the time the kernel resolves it. */
  snprintf(odev, sizeof odev, "%u:%u", major(dv->origin_dev),
           minor(dv->origin_dev));
  r = fc_dmc_table_params(&(struct fc_dmc_table){
                            .metadata_dev = mdev, .data_dev = ddev,
                            .origin_dev = odev,
                            .block_sectors = DME(host)->block_sectors,
                            .mode = mode, .policy = policy },
                          buf, len);
  if (r)
    snprintf(err, errlen, "origin path %s is too long for a table line", v->p.origin);
  return r;
}

/* Build the three devices.  fresh: a new cache (metadata zeroed first);
 * otherwise the devices are re-created over the flash as it was (after
 * a host restart), keeping the cache warm. */
int
fc_dmv_build(struct fc_host *host, struct fc_volume *v, bool fresh, char *err, size_t errlen)
{
  struct fc_dmvol *dv = DV(v);
  char params[FC_ORIGIN_MAX + 128], uuid[FC_DM_UUID_MAX], owner[FC_FLASH_OWNER_MAX];
  char e2[256];
  int r;

  bool made_meta = false, made_data = false;

  fc_dmv_owner(v->p.id, "cmeta", owner, sizeof owner);
  if (fresh && (r = fc_dmv_zero_first_block(host, owner, err, errlen)))
    return r;
  r = ensure_linear(host, v, dv->meta, "cmeta", &made_meta, err, errlen);
  if (r)
    return r;
  r = ensure_linear(host, v, dv->data, "cdata", &made_data, err, errlen);
  if (r)
    goto undo_meta;
  r = fc_dmv_cache_params(host, v, fc_dmc_mode_for(v->p.write_policy), "smq", params,
                   sizeof params, err, errlen);
  if (r)
    goto undo_data;
  fc_dmv_uuid(v->p.tag, "cache", uuid, sizeof uuid);
  r = fc_dm_create(dv->name, uuid,
                   &(struct fc_dm_target){ 0, dv->origin_sectors, "cache", params }, 1,
                   err, errlen);
  if (!r)
    return 0;
undo_data:
  if (made_data)
    fc_dm_remove(dv->data, e2, sizeof e2);
undo_meta:
  if (made_meta)
    fc_dm_remove(dv->meta, e2, sizeof e2);
  return r;
}

void
fc_dmv_set_export(struct fc_volume *v)
{
  /* A name is at most 31 + 1 + 64 bytes (dm_prefix, '-', volume id). */
  snprintf(DV(v)->export_path, sizeof DV(v)->export_path, "/dev/mapper/%.95s", DV(v)->name);
  snprintf(v->export_uri, sizeof v->export_uri, "%s", DV(v)->export_path);
}

/* A device with one of our names that we did not create: refuse it. */
int
fc_dmv_check_not_foreign(const struct fc_dmvol *dv, char *err, size_t errlen)
{
  const char *n[3] = { dv->name, dv->meta, dv->data };

  for (int i = 0; i < 3; i++) {
    struct fc_dm_info info;
    int r = fc_dm_info(n[i], &info);
    if (r)
      return r;
    if (info.exists) {
      snprintf(err, errlen, "device-mapper device %s already exists and was not "
               "created for this attachment (uuid '%s'); refusing to take it "
               "over. Remove it, or give this agent another dm_prefix", n[i],
               info.uuid);
      return -EEXIST;
    }
  }
  return 0;
}

int
fc_dmv_status(const struct fc_dmvol *dv, struct fc_dmc_status *st, char *err, size_t errlen)
{
  char params[1024];
  int r = fc_dm_status(dv->name, params, sizeof params, err, errlen);

  if (r)
    return r;
  r = fc_dmc_status_parse(params, st);
  if (r)
    snprintf(err, errlen, "cannot parse the status of %s: '%.200s'", dv->name, params);
  return r;
}

int
fc_dmv_swap(const char *name, const struct fc_dm_target *t, char *err, size_t errlen)
{
  struct fc_dm_info info;
  int r = fc_dm_reload(name, t, 1, err, errlen);

  if (!r && !(r = fc_dm_info(name, &info)) && !info.suspended)
    r = fc_dm_suspend(name, err, errlen);
  if (!r)
    r = fc_dm_resume(name, err, errlen);
  return r;
}

int
fc_dmv_load_cache(struct fc_host *host, struct fc_volume *v, enum fc_dmc_mode mode,
                  const char *policy, char *err, size_t errlen)
{
  char params[FC_ORIGIN_MAX + 128];
  int r = fc_dmv_cache_params(host, v, mode, policy, params, sizeof params, err, errlen);

  if (!r)
    r = fc_dmv_swap(DV(v)->name,
                    &(struct fc_dm_target){ 0, DV(v)->origin_sectors, "cache", params },
                    err, errlen);
  return r;
}

/* The VM has closed the device (detach) or left the host (migration), so
 * nothing dirties it again while the cleaner runs. */
int
fc_dmv_drain(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  struct fc_dmc_status st;
  int r = fc_dmv_load_cache(host, v, FC_DMC_WRITEBACK, "cleaner", err, errlen);

  for (int i = 0; !r && i < DRAIN_TIMEOUT_S * 10; i++) {
    r = fc_dmv_status(DV(v), &st, err, errlen);
    if (r || st.fail || st.dirty_blocks == 0)
      break;
    nanosleep(&(struct timespec){ 0, 100 * 1000 * 1000 }, NULL);
  }
  if (!r && (st.fail || st.dirty_blocks)) {
    snprintf(err, errlen, "cannot write back the %llu dirty blocks of volume %s to "
             "%s%s", (unsigned long long)st.dirty_blocks, v->p.id, v->p.origin,
             st.fail ? " (the cache device failed)" : " in time");
    r = -EIO;
  }
  return r;
}

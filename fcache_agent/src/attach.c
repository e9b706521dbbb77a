/* volume-attach and volume-detach. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "dm_engine.h"
#include "log.h"
#include "migration.h"
#include "nbd_server.h"
#include "origin.h"
#include "ucache.h"

static bool
same_request(const struct fc_volume *v, const struct fc_attach_request *req,
             uint64_t cache_size)
{
  return !strcmp(v->p.origin, req->origin) && v->p.write_policy == req->write_policy &&
         v->p.admission == req->admission && v->p.cache_size == cache_size;
}

static void
remove_from_registry(struct fc_agent *agent, struct fc_volume *v)
{
  for (unsigned i = 0; i < agent->nr_volumes; i++) {
    if (agent->volumes[i] == v) {
      agent->volumes[i] = agent->volumes[--agent->nr_volumes];
      return;
    }
  }
}

int
fc_agent_attach_locked(struct fc_agent *agent, const struct fc_attach_request *req,
                       struct fc_volume **out, char *err, size_t errlen)
{
  uint32_t bs = agent->cfg.block_size;
  uint64_t size = req->cache_size;
  struct fc_volume *v, *old;
  bool reserved = false;
  int r;

  if (agent->dm)
    return fc_dm_attach_locked(agent, req, out, err, errlen);
  if (!fc_volume_id_valid(req->volume_id)) {
    snprintf(err, errlen, "invalid volume id '%.80s': use 1-%d letters, digits, "
             "'-', '_' or '.', not starting with '.'", req->volume_id, FC_VOLUME_ID_MAX);
    return -EINVAL;
  }
  if (strlen(req->origin) >= FC_ORIGIN_MAX) {
    snprintf(err, errlen, "origin is longer than %d bytes", FC_ORIGIN_MAX - 1);
    return -ENAMETOOLONG;
  }
  if (size == 0) {
    /* Default: a quarter of the device, the share a host with four
     * cached volumes would give each. */
    size = (uint64_t)agent->dev->nr_blocks / 4 * bs;
    if (size == 0)
      size = bs;
  }
  size = (size + bs - 1) / bs * bs;
  old = fc_agent_find_locked(agent, req->volume_id);
  if (old) {
    /* Attach is idempotent so a retried Nova call does no harm. */
    if (same_request(old, req, size) && old->srv) {
      *out = old;
      return 0;
    }
    snprintf(err, errlen, "volume %s is already attached with other parameters "
             "(origin %s, %s, %llu bytes); detach it first", req->volume_id,
             old->p.origin, fc_write_policy_name(old->p.write_policy),
             (unsigned long long)old->p.cache_size);
    return -EEXIST;
  }
  if (agent->nr_volumes >= FC_MAX_VOLUMES) {
    snprintf(err, errlen, "this agent already serves %d volumes", FC_MAX_VOLUMES);
    return -EMFILE;
  }
  if (size / bs > agent->dev->nr_blocks) {
    snprintf(err, errlen, "cache size %llu bytes is larger than the whole cache "
             "device (%llu bytes)", (unsigned long long)size,
             (unsigned long long)agent->dev->nr_blocks * bs);
    return -ENOSPC;
  }

  v = calloc(1, sizeof *v);
  if (!v)
    return -ENOMEM;
  snprintf(v->p.id, sizeof v->p.id, "%s", req->volume_id);
  snprintf(v->p.origin, sizeof v->p.origin, "%s", req->origin);
  v->p.cache_size = size;
  v->p.write_policy = req->write_policy;
  v->p.admission = req->admission;
  r = fc_volume_new_tag(&v->p.tag);
  if (r)
    goto out;
  r = fc_cachedev_reserve(agent->dev, (uint32_t)(size / bs));
  if (r) {
    uint64_t free_b = (uint64_t)(agent->dev->nr_blocks - agent->dev->reserved) * bs;
    snprintf(err, errlen, "cache device full: volume %s asks for %llu bytes, "
             "%llu of %llu bytes are not reserved by other volumes", v->p.id,
             (unsigned long long)size, (unsigned long long)free_b,
             (unsigned long long)agent->dev->nr_blocks * bs);
    goto out;
  }
  reserved = true;
  r = fc_volume_prepare(agent, v, err, errlen);
  if (r)
    goto out;
  /* Persist before serving: a write_back block must never be written
   * under a tag that a restarted agent would not recognise. */
  r = fc_volume_params_save(agent->volumes_dir, &v->p, err, errlen);
  if (r)
    goto out;
  r = fc_volume_start(agent, v, err, errlen);
  if (r) {
    fc_volume_params_remove(agent->volumes_dir, v->p.id);
    goto out;
  }
  agent->volumes[agent->nr_volumes++] = v;
  log_info("volume %s attached: origin %s, %llu bytes of cache, %s, admission %s, "
           "export %s", v->p.id, v->p.origin, (unsigned long long)size,
           fc_write_policy_name(v->p.write_policy), fc_admission_name(v->p.admission),
           v->export_uri);
  *out = v;
  return 0;

out:
  if (reserved)
    fc_cachedev_unreserve(agent->dev, (uint32_t)(size / bs));
  fc_volume_free(v);
  return r;
}

int
fc_agent_detach_locked(struct fc_agent *agent, const char *id, char *err, size_t errlen)
{
  struct fc_volume *v = fc_agent_find_locked(agent, id);
  char serr[512];
  int r;

  if (agent->dm)
    return fc_dm_detach_locked(agent, id, err, errlen);
  if (!v) {
    snprintf(err, errlen, "volume %.80s is not attached to this agent", id);
    return -ENOENT;
  }
  if (fc_migration_for_volume(agent, v) && !v->releasing) {
    snprintf(err, errlen, "volume %s is migrating; finish or abort the migration first",
             id);
    return -EBUSY;
  }
  if (v->p.migration[0] && !v->releasing) {
    snprintf(err, errlen, "volume %s belongs to unfinished live migration %s; "
             "detaching would write back (source) or drop (destination) blocks "
             "whose current copy may be on the other host", id, v->p.migration);
    return -EBUSY;
  }
  if (!v->uc && v->nr_held_dirty) {
    snprintf(err, errlen, "volume %s holds %u blocks of unwritten data and its "
             "origin is unavailable (%s); make the origin reachable and restart "
             "the agent so they can be written back", id, v->nr_held_dirty, v->error);
    return -EBUSY;
  }
  /* Disconnect the VM first: no write may arrive after the last write-back. */
  nbd_server_stop(v->srv);
  v->srv = NULL;
  if (v->uc) {
    fc_ucache_stop(v->uc);
    r = fc_ucache_writeback_all(v->uc);
    if (!r)
      r = fc_ucache_release(v->uc);
    if (r) {
      struct fc_ucache_info info;
      fc_ucache_info(v->uc, &info);
      snprintf(err, errlen, "cannot detach volume %s: writing back its %u dirty "
               "blocks to %s failed: %s; the volume stays attached", id,
               info.dirty_blocks, v->p.origin, strerror(-r));
      if (fc_volume_start(agent, v, serr, sizeof serr))
        log_error("volume %s: cannot serve again after failed detach: %s", id, serr);
      return r;
    }
  } else {
    for (uint32_t i = 0; i < v->nr_held; i++) {
      r = fc_md_set(agent->md, to_cblock(v->held_cb[i]), 0, 0, 0);
      if (r) {
        snprintf(err, errlen, "cannot update cache metadata: %s", strerror(-r));
        return r;
      }
    }
    fc_md_sync(agent->md);
    for (uint32_t i = 0; i < v->nr_held; i++)
      fc_cachedev_free(agent->dev, to_cblock(v->held_cb[i]));
    v->nr_held = 0;
  }
  fc_cachedev_unreserve(agent->dev, (uint32_t)(v->p.cache_size / agent->cfg.block_size));
  r = fc_volume_params_remove(agent->volumes_dir, id);
  if (r)
    log_warning("volume %s: cannot remove its state file: %s", id, strerror(-r));
  remove_from_registry(agent, v);
  fc_migration_drop_volume(agent, v);
  fc_volume_free(v);
  log_info("volume %s detached", id);
  return 0;
}

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "dmcache/dm_engine.h"
#include "engine/engine.h"
#include "common/log.h"
#include "migration/migration.h"
#include "nbd/nbd_server.h"
#include "origin/origin.h"
#include "ucache/ucache.h"

#define NBD_MAX_BLOCK (32u << 20)

static int
make_dir(const char *path, mode_t mode, char *err, size_t errlen)
{
  if (mkdir(path, mode) == -1 && errno != EEXIST) {
    int r = -errno;
    snprintf(err, errlen, "cannot create directory %s: %s", path, strerror(-r));
    return r;
  }
  return 0;
}

/* Open the origin and build the (not yet serving) cache engine. */
int
fc_volume_prepare(struct fc_agent *agent, struct fc_volume *v, char *err, size_t errlen)
{
  struct fc_ucache_params up = {
    .quota_blocks = (uint32_t)(v->p.cache_size / agent->cfg.block_size),
    .write_policy = v->p.write_policy,
    .admission = v->p.admission,
    .volume_tag = v->p.tag,
    .writeback_interval_ms = agent->cfg.writeback_interval_ms,
    .dirty_high_percent = agent->cfg.dirty_high_percent,
  };
  int r;

  r = fc_origin_open(v->p.origin, agent->cfg.origin_connections, &v->origin,
                     err, errlen);
  if (r)
    return r;
  r = fc_ucache_create(agent->dev, agent->md, v->origin, &up, &v->uc);
  if (r) {
    snprintf(err, errlen, "cannot create cache for volume %s: %s", v->p.id,
             strerror(-r));
    fc_origin_close(v->origin);
    v->origin = NULL;
  }
  return r;
}

int
fc_volume_start(struct fc_agent *agent, struct fc_volume *v, char *err, size_t errlen)
{
  int n, r;

  n = snprintf(v->export_path, sizeof v->export_path, "%s/%s.sock",
               agent->cfg.export_dir, v->p.id);
  if (n < 0 || (size_t)n >= sizeof v->export_path) {
    snprintf(err, errlen, "export socket path %s/%s.sock is longer than a unix "
             "socket path may be (%zu bytes); use a shorter export_dir",
             agent->cfg.export_dir, v->p.id, sizeof v->export_path - 1);
    return -ENAMETOOLONG;
  }
  snprintf(v->export_uri, sizeof v->export_uri, "nbd+unix:///?socket=%s",
           v->export_path);
  v->exp = (struct fc_export){
    .name = v->p.id,
    .description = "fcache ucache export",
    .size = v->origin->size,
    .min_block = 512,
    .pref_block = agent->cfg.block_size,
    .max_block = NBD_MAX_BLOCK,
    .read_only = false,
    .ops = &fc_ucache_io_ops,
    .handle = v->uc,
  };
  v->srv = nbd_server_start(v->export_path, 0660, &v->exp, agent->cfg.nbd_threads);
  if (!v->srv) {
    r = -errno;
    snprintf(err, errlen, "cannot serve volume %s on %s: %s", v->p.id,
             v->export_path, strerror(-r));
    return r;
  }
  if (agent->cfg.export_group[0]) {
    /* The hypervisor runs as its own user (libvirt: libvirt-qemu), not
     * as root; the export is its disk, and only its. */
    struct group *g = getgrnam(agent->cfg.export_group);
    r = !g ? -ENOENT : chown(v->export_path, (uid_t)-1, g->gr_gid) ? -errno : 0;
    if (r) {
      snprintf(err, errlen, "cannot give export %s to group '%s' (export_group): %s",
               v->export_path, agent->cfg.export_group,
               r == -ENOENT ? "no such group" : strerror(-r));
      nbd_server_stop(v->srv);
      v->srv = NULL;
      return r;
    }
  }
  r = fc_ucache_start(v->uc);
  if (r) {
    snprintf(err, errlen, "cannot start writeback for volume %s: %s", v->p.id,
             strerror(-r));
    nbd_server_stop(v->srv);
    v->srv = NULL;
  }
  return r;
}

void
fc_volume_free(struct fc_volume *v)
{
  if (!v)
    return;
  nbd_server_stop(v->srv);
  fc_ucache_destroy(v->uc);
  fc_dmvol_free(v->dm);
  fc_origin_close(v->origin);
  free(v->held);
  free(v->held_cb);
  free(v);
}

int
fc_agent_load_volumes(struct fc_agent *agent,
                      int (*adopt)(struct fc_agent *agent, struct fc_volume *v),
                      char *err, size_t errlen)
{
  DIR *d = opendir(agent->volumes_dir);
  struct dirent *de;
  int r = 0;

  if (!d) {
    r = -errno;
    snprintf(err, errlen, "cannot read %s: %s", agent->volumes_dir, strerror(-r));
    return r;
  }
  while ((de = readdir(d))) {
    size_t len = strlen(de->d_name);
    char path[FC_PATH_MAX + 400];
    struct fc_volume *v;

    if (len < 6 || strcmp(de->d_name + len - 5, ".json"))
      continue;
    if (agent->nr_volumes >= FC_MAX_VOLUMES) {
      r = -EMFILE;
      snprintf(err, errlen, "more than %d volumes in %s", FC_MAX_VOLUMES,
               agent->volumes_dir);
      break;
    }
    v = calloc(1, sizeof *v);
    if (!v) {
      r = -ENOMEM;
      break;
    }
    snprintf(path, sizeof path, "%s/%s", agent->volumes_dir, de->d_name);
    r = fc_volume_params_load(path, &v->p, err, errlen);
    if (!r && (r = adopt(agent, v)))
      snprintf(err, errlen, "volume %s: %s", v->p.id, strerror(-r));
    if (r) {
      fc_volume_free(v);
      break;
    }
    agent->volumes[agent->nr_volumes++] = v;
  }
  closedir(d);
  return r;
}

int
fc_agent_open(const struct fc_config *cfg, struct fc_agent **out,
              char *err, size_t errlen)
{
  const struct fc_engine_ops *engine = fc_engine_find(cfg->engine);
  struct fc_agent *agent;
  int r;

  if (!engine) {
    snprintf(err, errlen, "engine '%s' is not available in this build; use engine = "
             "ucache or dmcache", cfg->engine);
    return -ENOTSUP;
  }
  agent = calloc(1, sizeof *agent);
  if (!agent)
    return -ENOMEM;
  agent->cfg = *cfg;
  agent->engine = engine;
  pthread_mutex_init(&agent->lock, NULL);
  pthread_mutex_init(&agent->migr_lock, NULL);
  snprintf(agent->volumes_dir, sizeof agent->volumes_dir, "%s/volumes", cfg->state_dir);
  if ((r = make_dir(cfg->state_dir, 0700, err, errlen)) ||
      (r = make_dir(agent->volumes_dir, 0700, err, errlen)) ||
      (r = make_dir(cfg->export_dir, 0755, err, errlen)))
    goto out;
  r = engine->open(agent, err, errlen);
  if (r)
    goto out;
  agent->listener = fc_migr_listen(agent, cfg->migration_listen, err, errlen);
  if (!agent->listener) {
    r = -EADDRNOTAVAIL;
    engine->close(agent);
    goto out;
  }
  *out = agent;
  return 0;

out:
  pthread_mutex_destroy(&agent->lock);
  pthread_mutex_destroy(&agent->migr_lock);
  free(agent);
  return r;
}

int
fc_agent_close(struct fc_agent *agent)
{
  int r;

  /* No stream may arrive and no migration thread may run while the
   * engine saves its state. */
  fc_migr_listener_stop(agent->listener);
  fc_migration_stop_all(agent);
  r = agent->engine->close(agent);
  pthread_mutex_destroy(&agent->lock);
  pthread_mutex_destroy(&agent->migr_lock);
  free(agent);
  return r;
}

struct fc_volume *
fc_agent_find_locked(struct fc_agent *agent, const char *id)
{
  for (unsigned i = 0; i < agent->nr_volumes; i++)
    if (!strcmp(agent->volumes[i]->p.id, id))
      return agent->volumes[i];
  return NULL;
}

int
fc_agent_attach_precheck_locked(struct fc_agent *agent,
                                const struct fc_attach_request *req,
                                uint64_t cache_size, struct fc_volume **out,
                                char *err, size_t errlen)
{
  struct fc_volume *old = fc_agent_find_locked(agent, req->volume_id);

  if (old) {
    if (!strcmp(old->p.origin, req->origin) &&
        old->p.write_policy == req->write_policy &&
        old->p.admission == req->admission && old->p.cache_size == cache_size &&
        agent->engine->serving(old)) {
      *out = old;
      return 1;
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
  return 0;
}

/* The agent: its cache engine (engine.h) and the registry of attached
 * volumes.  Every control operation lands here.  One lock
 * serialises attach/detach/show: control operations are rare and some
 * (detach with write-back) are long, and a simple order is worth more
 * than concurrency there; the data path never takes this lock. */
#ifndef FCACHE_AGENT_H
#define FCACHE_AGENT_H

#include <pthread.h>
#include <stddef.h>

#include "ucache/cachedev.h"
#include "common/config.h"
#include "ucache/metadata.h"
#include "engine/volume.h"

struct fc_migration;
struct fc_migr_listener;
struct fc_dm_engine;
struct fc_engine_ops;

#define FC_MAX_VOLUMES 256
#define FC_MAX_MIGRATIONS 64
#define FC_VERSION "0.1.0"

struct fc_agent {
  struct fc_config cfg;
  struct fc_cachedev *dev;
  struct fc_metadata *md;
  char volumes_dir[FC_PATH_MAX + 16];
  pthread_mutex_t lock;
  struct fc_volume *volumes[FC_MAX_VOLUMES];
  unsigned nr_volumes;
  /* Live migrations: their own lock, because attach/detach hold `lock`
   * for long and the migration listener must not wait on them. */
  pthread_mutex_t migr_lock;
  struct fc_migration *migrations[FC_MAX_MIGRATIONS];
  unsigned nr_migrations;
  struct fc_migr_listener *listener;
  const struct fc_engine_ops *engine;
  /* The engines' own state: dev and md for ucache, dm for dmcache. */
  struct fc_dm_engine *dm;
};

/* Open the cache, recover its metadata, re-attach the persisted volumes
 * and start serving them. */
int fc_agent_open(const struct fc_config *cfg, struct fc_agent **out,
                  char *err, size_t errlen);
/* Clean shutdown: stop every export, persist the whole cache map (dirty
 * blocks stay dirty, to be written back after restart), mark it clean. */
int fc_agent_close(struct fc_agent *agent);

struct fc_attach_request {
  const char *volume_id;
  const char *origin;
  uint64_t cache_size;            /* 0 = default */
  enum fc_write_policy write_policy;
  enum fc_admission admission;
};

/* Under agent->lock. */
int fc_agent_attach_locked(struct fc_agent *agent, const struct fc_attach_request *req,
                           struct fc_volume **out, char *err, size_t errlen);
int fc_agent_detach_locked(struct fc_agent *agent, const char *id,
                           char *err, size_t errlen);
struct fc_volume *fc_agent_find_locked(struct fc_agent *agent, const char *id);
/* For an engine's attach, once it knows the cache size: 1 with *out set
 * when the volume is attached and serving with these parameters already
 * (attach is idempotent, so a retried Nova call does no harm), 0 when a
 * new volume may be attached, or -errno with a message. */
int fc_agent_attach_precheck_locked(struct fc_agent *agent,
                                    const struct fc_attach_request *req,
                                    uint64_t cache_size, struct fc_volume **out,
                                    char *err, size_t errlen);
/* The engine released the volume: take it out of the registry and free it. */
void fc_agent_forget_locked(struct fc_agent *agent, struct fc_volume *v);

/* Internal to agent.c and recovery.c. */
int fc_agent_recover(struct fc_agent *agent, bool was_clean, char *err, size_t errlen);
int fc_volume_prepare(struct fc_agent *agent, struct fc_volume *v, char *err, size_t errlen);
/* Load every persisted volume of agent->volumes_dir into the registry,
 * calling the engine's adopt() on each (which reports an unusable volume
 * in v->error and returns 0, or fails the start with -errno). */
int fc_agent_load_volumes(struct fc_agent *agent,
                          int (*adopt)(struct fc_agent *agent, struct fc_volume *v),
                          char *err, size_t errlen);
int fc_volume_start(struct fc_agent *agent, struct fc_volume *v, char *err, size_t errlen);
void fc_volume_free(struct fc_volume *v);

#endif

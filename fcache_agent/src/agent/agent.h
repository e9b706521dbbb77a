/* SPDX-License-Identifier: Apache-2.0 */
/* The agent core: one host's engine, the registry of its volumes (shared
 * with the engine, engine.h's struct fc_host) and the rules of attach and
 * detach that every engine shares.  Every control operation on a volume
 * lands here; live migrations (migration/) sit above and use it.
 *
 * May use: engine/ and common/.  It never calls the migration layer: the
 * migration registry below is carried here so that the control socket
 * and the listener reach it, and only migration/ reads or writes it. */
#ifndef FCACHE_AGENT_H
#define FCACHE_AGENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "common/config.h"
#include "engine/engine.h"
#include "engine/volume.h"

struct fc_metrics;
struct fc_migration;
struct fc_migr_listener;
struct fc_xfer_tls;

#define FC_MAX_MIGRATIONS 64

/* How a live migration ended, for the totals below. */
enum fc_migr_outcome { FC_MIGR_COMPLETED, FC_MIGR_FAILED, FC_MIGR_ABORTED,
                       FC_MIGR_OUTCOMES };

/* The live migrations that ended on this agent since it started, by role
 * (0 source, 1 destination): each counted once, by migration/, when it
 * first ends (a registry evicts finished migrations, so the totals cannot
 * be summed from it).  Atomics: read by the metrics without the
 * migrations' locks. */
struct fc_migr_totals {
  atomic_uint_fast64_t ended[2][FC_MIGR_OUTCOMES];
  atomic_uint_fast64_t bytes[2];            /* blocks' bytes sent or received */
  /* The last completed one's: nanoseconds from start to completion, and
   * of the VM's pause at the switchover. */
  atomic_uint_fast64_t last_duration_ns[2];
  atomic_uint_fast64_t last_downtime_ns[2];
};

struct fc_agent {
  struct fc_host host;
  /* Live migrations (owned by migration/): their own lock, because
   * attach/detach hold host.lock for long and the migration listener must
   * not wait on them. */
  pthread_mutex_t migr_lock;
  struct fc_migration *migrations[FC_MAX_MIGRATIONS];
  unsigned nr_migrations;
  struct fc_migr_listener *listener;
  struct fc_xfer_tls *tls;          /* the streams' TLS setup (NULL: none) */
  struct fc_migr_totals migr_totals;
  /* The metrics sampler (owned by control/metrics.c), for the control
   * operations; NULL until started. */
  struct fc_metrics *metrics;
};

/* Open the cache with engine ops (fc_engine_find), recover its metadata,
 * re-attach the persisted volumes and start serving them. */
int fc_agent_open(const struct fc_config *cfg, const struct fc_engine_ops *ops,
                  struct fc_agent **out, char *err, size_t errlen);
/* Clean shutdown, once every migration has stopped: stop every export,
 * persist the whole cache map (dirty blocks stay dirty, to be written back
 * after restart), mark it clean. */
int fc_agent_close(struct fc_agent *agent);

/* volume-attach as a client asks it: the origin of a new volume opened
 * without host.lock when the engine can (a slow or silent origin must not
 * hold up every other control request), the attach itself under it.
 * Called without agent->host.lock.  export_uri gets what the VM opens. */
int fc_agent_attach(struct fc_agent *agent, struct fc_attach_request *req,
                    char *export_uri, size_t export_len, char *err,
                    size_t errlen);
/* The rest under agent->host.lock.  The attach itself, the origin opened
 * or not (req->opened). */
int fc_agent_attach_locked(struct fc_agent *agent, const struct fc_attach_request *req,
                           struct fc_volume **out, char *err, size_t errlen);
/* Detach; the caller has checked that no live migration holds the volume
 * (migration.h's fc_migration_detach_locked does both). */
int fc_agent_detach_locked(struct fc_agent *agent, const char *id,
                           char *err, size_t errlen);
/* The same, dropping its dirty blocks instead of writing them back
 * (volume-detach's discard_dirty); *dropped gets how many. */
int fc_agent_discard_locked(struct fc_agent *agent, const char *id,
                            uint32_t *dropped, char *err, size_t errlen);
/* The attached volume named id, or NULL. */
struct fc_volume *fc_agent_find_locked(struct fc_agent *agent, const char *id);

#endif

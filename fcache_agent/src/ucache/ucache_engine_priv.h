/* SPDX-License-Identifier: Apache-2.0 */
/* Inside the ucache engine: shared by ucache_engine_ops.c (open, close,
 * attach, detach, status), ucache_volume.c (a volume's origin, cache and
 * export), ucache_engine_migr.c (live migration and settling) and
 * recovery.c (start-up).  Not for other modules. */
#ifndef FCACHE_UCACHE_ENGINE_PRIV_H
#define FCACHE_UCACHE_ENGINE_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include "allocator.h"
#include "cachedev.h"
#include "engine/engine.h"
#include "metadata.h"
#include "nbd/io_ops.h"
#include "ucache.h"

/* host->engine */
struct uc_engine {
  struct fc_cachedev *dev;
  struct fc_metadata *md;
  struct fc_ucache_pool *pool;      /* every volume's cache */
  struct uc_allocator *alloc;
  struct uc_reviver *reviver;
};

/* v->priv */
struct uc_vol {
  struct fc_origin *origin;
  struct fc_ucache *uc;
  struct nbd_server *srv;
  struct fc_export exp;
  char export_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  /* Blocks recovered for a volume whose origin could not be opened: kept,
   * untouched, until it can be written back. */
  struct fc_md_record *held;
  uint32_t *held_cb;
  uint32_t nr_held;
  uint32_t nr_held_dirty;
  struct uc_vol_alloc alloc;        /* its demand, under host->lock */
  struct uc_move *move;             /* its last live storage migration */
};

#define UCE(host) ((struct uc_engine *)(host)->engine)
#define UV(v) ((struct uc_vol *)(v)->priv)

extern const struct fc_engine_migr_ops fc_ucache_migr_ops;

/* engine.h's grow (ucache_engine_grow.c). */
int uc_grow(struct fc_host *host, struct fc_volume *v, uint64_t *size,
            char *err, size_t errlen);
/* engine.h's set_policy (ucache_engine_policy.c). */
int uc_set_policy(struct fc_host *host, struct fc_volume *v,
                  enum fc_write_policy to, uint32_t *written, char *err,
                  size_t errlen);
/* engine.h's set_cache_size (ucache_engine_resize.c). */
int uc_set_cache_size(struct fc_host *host, struct fc_volume *v, uint64_t size,
                      uint32_t *written, uint32_t *evicted, char *err,
                      size_t errlen);
extern const struct fc_engine_move_ops fc_ucache_move_ops;

/* Live storage migration (ucache_engine_move.c).  After opening the
 * volume's origin: replay the recovery log of a move the agent did not
 * finish, then wrap the origin in the composite every move uses. */
int uc_move_prepare(struct fc_host *host, struct fc_volume *v, char *err,
                    size_t errlen);
/* Detach, shutdown: stop a running move (back to the old origin). */
void uc_move_stop(struct fc_volume *v);
void uc_move_free(struct fc_volume *v);
/* The recovery log's path. */
void uc_move_log_path(struct fc_host *host, const char *volume_id, char *buf,
                      size_t len);

/* Give a new volume its (empty) engine state. */
int uc_volume_new(struct fc_volume *v);
/* Open the origin and build the (not yet serving) cache. */
int uc_volume_prepare(struct fc_host *host, struct fc_volume *v, char *err,
                      size_t errlen);
/* The same over UV(v)->origin, opened already (closed on failure). */
int uc_volume_build(struct fc_host *host, struct fc_volume *v, char *err,
                    size_t errlen);
/* Serve the volume's NBD export and start its write-back. */
int uc_volume_start(struct fc_host *host, struct fc_volume *v, char *err,
                    size_t errlen);
/* A volume the agent found at start, before uc_volume_start: hold the
 * write-back of its dirty blocks until it is claimed (doc/reference/ucache.rst). */
void uc_volume_hold_recovered(struct fc_volume *v);
/* volume-show's words for a held write-back. */
#define UC_HELD_WHY "the agent restarted with unwritten blocks of this " \
  "volume and nothing has claimed it since, so none is written back: if " \
  "its VM was evacuated to another host they are stale and the origin " \
  "holds newer data. They go to the origin once its VM opens the export " \
  "(QEMU reconnecting), or on volume-claim, volume-attach or " \
  "volume-detach; volume-detach with discard_dirty drops them"
/* engine.h's volume_free. */
void uc_volume_free(struct fc_volume *v);
/* Re-attach the persisted volumes and give each its cache blocks back:
 * dirty blocks always, clean ones after a clean shutdown or, if same_boot,
 * a process crash (metadata.h, warm.h). */
int uc_recover(struct fc_host *host, bool was_clean, bool same_boot, char *err,
               size_t errlen);
/* Volumes whose origin could not be opened at start (revive.c): tried
 * again every cfg.origin_retry_ms by a thread of their own; one that
 * opens gets its held blocks back and serves its export.  Stopped before
 * the volumes are freed. */
struct uc_reviver;
int uc_reviver_start(struct fc_host *host, struct uc_reviver **out);
void uc_reviver_stop(struct uc_reviver *rv);
/* Under host->lock: v's origin `o` (owned from now on) opened; build its
 * cache over it, give it its held blocks and serve it.  -errno (err) and
 * v stays unavailable, its held blocks untouched. */
int uc_volume_revive_locked(struct fc_host *host, struct fc_volume *v,
                            struct fc_origin *o, char *err, size_t errlen);

/* Where the destination records pinned blocks that reached the origin. */
void uc_superseded_path(struct fc_host *host, const char *volume_id, char *buf,
                        size_t len);

#endif

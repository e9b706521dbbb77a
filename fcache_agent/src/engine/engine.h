/* A cache engine: what the agent calls to run the host's cache and its
 * volumes, and what a live migration asks of either end.
 *
 * Two engines implement it (ARCHITECTURE.md §2):
 *   ucache   (ucache_engine.c, ucache_engine_migr.c) the cache in user
 *            space, exported over NBD;
 *   dmcache  (dm_engine.c, dm_migr*.c) kernel dm-cache devices.
 * The agent picks one by cfg.engine when it opens and calls through
 * agent->engine from then on; nothing else branches on the engine.
 *
 * Every function returns 0 or a negative errno; those with err/errlen
 * write a one-line message there on failure.
 */
#ifndef FCACHE_ENGINE_H
#define FCACHE_ENGINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "migration/migration.h"
#include "common/types.h"

struct fc_agent;
struct fc_attach_request;
struct fc_volume;

/* What a live migration asks of the engine.  m->vol is the volume, and
 * m->agent its agent.  Each side's calls come in protocol order (see
 * doc/migration.rst): the source is frozen before it lists or reads, the
 * destination begins before it installs.  Unless noted, a call is made
 * without agent->lock and the engine takes what it needs. */
struct fc_engine_migr_ops {
  /* Can this engine run strategy s?  0, or -ENOTSUP and a message that
   * says why and which engine can. */
  int (*supports)(enum fc_strategy s, char *err, size_t errlen);
  /* Settling a migration that failed past its switchover (migr_settle.c)
   * is implemented for this engine. */
  bool can_settle;

  /* ---- source ---- */
  /* The VM stops using this host's copy: from now on its I/O here is
   * refused.  flush: write every dirty block to the origin first (the
   * destination will read the origin).  Idempotent. */
  int (*out_freeze)(struct fc_migration *m, bool flush, char *err, size_t errlen);
  /* Abort before switchover: the VM goes on here with its cache.  Under
   * agent->lock. */
  int (*out_thaw)(struct fc_migration *m);
  /* The cached blocks, hottest first, as oblock | FC_BLOCK_DIRTY_BIT for
   * a dirty one.  Caller frees. */
  int (*out_list)(struct fc_migration *m, uint64_t **list, uint32_t *n,
                  bool dirty_only);
  /* A destination read before the switchover: [off, off+count) as the VM
   * sees it now, changing nothing here.  NULL when the engine's
   * destination cannot forward reads (the kernel serves its VM). */
  int (*out_peek)(struct fc_migration *m, void *buf, uint32_t count, uint64_t off);
  /* One cached block's data; -ENOENT if it is no longer cached here. */
  int (*out_read)(struct fc_migration *m, oblock_t ob, void *data, bool *dirty);
  /* The destination holds ob durably (after the switchover). */
  int (*out_forget)(struct fc_migration *m, oblock_t ob);
  /* The destination holds everything: forget every block, never write
   * one back.  Under agent->lock, before the volume is detached. */
  int (*out_forget_all)(struct fc_migration *m);

  /* ---- destination ---- */
  /* The volume was just attached for this migration: hold the VM's
   * writes until the switchover; reads before it get current data (from
   * the source through fc_migr_dest_read, or the origin where that is
   * provably current).  Under agent->lock. */
  int (*in_begin)(struct fc_migration *m);
  /* The source connected (and m->peer_reads says whether it answers
   * reads). */
  void (*in_connected)(struct fc_migration *m);
  /* A LIST entry of an on-demand strategy (the source holds ob). */
  int (*in_add_remote)(struct fc_migration *m, oblock_t ob, bool dirty);
  /* SWITCH arrived: the VM runs here from now on; let its I/O through. */
  void (*in_switch)(struct fc_migration *m);
  /* A copied block: 0 installed, 1 discarded (the VM wrote it, or it is
   * here already), -errno. */
  int (*in_install)(struct fc_migration *m, oblock_t ob, const void *data,
                    bool dirty);
  /* cachemior: warm ob from the origin.  0 installed, 1 skipped. */
  int (*in_preload)(struct fc_migration *m, oblock_t ob);
  /* Every copied block is in (or the source is gone): attach what
   * arrived minus what the VM overwrote.  Returns blocks invalidated. */
  uint32_t (*in_end)(struct fc_migration *m);
  /* cachemior, after the preload, for an engine whose preloaded blocks
   * become usable only once it ends (NULL: they are usable at once).
   * Returns blocks invalidated. */
  uint32_t (*in_preloaded)(struct fc_migration *m);
  /* Make what was installed survive a crash of this host: before an ACK
   * lets the source forget those blocks, or (final) the COMPLETE lets it
   * forget everything. */
  int (*in_durable)(struct fc_migration *m, bool final);
  /* The source is gone: stop relying on it. */
  void (*in_lost)(struct fc_migration *m);
  /* The agent is stopping: end requests held at the gate. */
  void (*in_shutdown)(struct fc_migration *m);
  /* Dirty blocks whose only copy is still on the source. */
  uint32_t (*in_remote_dirty)(struct fc_migration *m);
  /* The migration completed: the source holds nothing this host needs. */
  void (*in_completed)(struct fc_migration *m);
  /* Abort: forget what arrived, never write it back.  Under agent->lock,
   * before the volume is detached. */
  int (*in_forget_all)(struct fc_migration *m);
  /* Engine figures for migration-status; under m->lock. */
  void (*stats_json)(struct fc_migration *m, json_t *o);
};

struct fc_engine_ops {
  const char *name;
  /* Open the host's cache and bring back the persisted volumes. */
  int (*open)(struct fc_agent *agent, char *err, size_t errlen);
  /* Stop serving and free; migrations have ended.  -errno if the state
   * could not be saved (reported here). */
  int (*close)(struct fc_agent *agent);
  /* Under agent->lock. */
  int (*attach)(struct fc_agent *agent, const struct fc_attach_request *req,
                struct fc_volume **out, char *err, size_t errlen);
  int (*detach)(struct fc_agent *agent, const char *id, char *err, size_t errlen);
  /* The volume serves its export (not unavailable). */
  bool (*serving)(const struct fc_volume *v);
  json_t *(*volume_json)(struct fc_agent *agent, struct fc_volume *v);
  /* agent-status, without the migrations. */
  json_t *(*status_json)(struct fc_agent *agent);
  const struct fc_engine_migr_ops *migr;
};

extern const struct fc_engine_ops fc_ucache_engine;
extern const struct fc_engine_ops fc_dm_engine;

/* The engine called name, or NULL. */
const struct fc_engine_ops *fc_engine_find(const char *name);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* A cache engine: what the agent calls to run the host's cache and its
 * volumes, and what a live migration asks of either end.
 *
 * Two engines implement it (doc/contributor/design.rst, "Layers"):
 *   ucache   (ucache/) the cache in user space, exported over NBD;
 *   dmcache  (dmcache/) kernel dm-cache devices.
 * src/engines.c registers them; the agent picks one by cfg.engine when it
 * opens and calls through host->ops from then on; nothing else branches on
 * the engine.
 *
 * An engine sees the agent only as the struct fc_host below (its
 * configuration, its lock, the registry of volumes) and a live migration
 * only as a struct fc_engine_migr: it includes neither agent/ nor
 * migration/ (doc/contributor/design.rst, "Layers").  Its own state hangs off
 * host->engine and each volume's v->priv, opaque to everyone else.
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

#include <pthread.h>

#include "common/config.h"
#include "alloc/staging.h"
#include "common/types.h"
#include "strategy.h"
#include "volume.h"

#define FC_MAX_VOLUMES 256
#define FC_MIGRATION_ID_MAX 64

struct fc_engine_ops;

/* What the agent lends its engine: one per agent. */
struct fc_host {
  struct fc_config cfg;
  char volumes_dir[FC_PATH_MAX + 16];   /* the volumes' state files */
  /* Serialises attach/detach/show, the registry and (dmcache) every
   * device-mapper call.  Control operations are rare and some (detach
   * with write-back) are long: a simple order is worth more than
   * concurrency there; the data path never takes this lock. */
  pthread_mutex_t lock;
  struct fc_volume *volumes[FC_MAX_VOLUMES];
  unsigned nr_volumes;
  const struct fc_engine_ops *ops;
  void *engine;                         /* the engine's own state */
  /* Called under lock just before a volume leaves the registry, by
   * whoever above the engine keeps pointers to volumes (migration/). */
  void (*forgetting)(struct fc_host *host, struct fc_volume *v);
  void *forgetting_ctx;
};

struct fc_attach_request {
  const char *volume_id;
  const char *origin;
  uint64_t cache_size;            /* 0 = default */
  enum fc_write_policy write_policy;
  enum fc_admission admission;
  unsigned rws_n;                 /* 0 = 1: reuses before admission (rws) */
  enum fc_staging_kind staging;   /* with rws; FC_STAGING_ADDRESS is 0 */
  bool staging_set;               /* false: the default, hybrid */
  unsigned rws_window_s;          /* 0 = the agent's allocation_window */
  /* The origin, already opened by the engine's open_origin, or NULL (a
   * pointer to the caller's variable: attach sets it to NULL once the
   * volume owns the origin). */
  void **opened;
};

/* The policy arguments of an attach as JSON carries them (the control
 * socket's volume-attach, a migration's incoming): write_policy,
 * admission, rws_n, staging, rws_window_s; each optional, each checked
 * for type and range.  0 or -EINVAL with a message naming the argument. */
int fc_attach_request_policy_from_json(json_t *args, struct fc_attach_request *req,
                                       char *err, size_t errlen);
/* The same arguments for a volume, as a migration hands them on. */
int fc_volume_policy_to_json(const struct fc_volume_params *p, json_t *o);

/* What every engine checks of an attach request first: a volume id that
 * may name files, an origin that fits its field.  0 or -errno with a
 * message. */
int fc_attach_request_check(const struct fc_attach_request *req, char *err,
                            size_t errlen);
/* A new volume for req with cache_size bytes of cache, not yet in the
 * registry: its parameters filled in, no tag and no engine state yet. */
struct fc_volume *fc_volume_from_request(const struct fc_attach_request *req,
                                         uint64_t cache_size);

/* The registry (host.c), under host->lock. */
struct fc_volume *fc_host_find_locked(struct fc_host *host, const char *id);
/* For an engine's attach, once it knows the cache size: 1 with *out set
 * when the volume is attached and serving with these parameters already
 * (attach is idempotent, so a retried Nova call does no harm), 0 when a
 * new volume may be attached, or -errno with a message. */
int fc_host_attach_precheck_locked(struct fc_host *host,
                                   const struct fc_attach_request *req,
                                   uint64_t cache_size, struct fc_volume **out,
                                   char *err, size_t errlen);
/* Load every persisted volume of host->volumes_dir into the registry,
 * calling adopt() on each (which reports an unusable volume in v->error
 * and returns 0, or fails the start with -errno). */
int fc_host_load_volumes(struct fc_host *host,
                         int (*adopt)(struct fc_host *host, struct fc_volume *v),
                         char *err, size_t errlen);
/* True when attaching req would make a new volume: no volume has its id,
 * none caches its origin's disk.  (Only then is the origin worth opening
 * ahead of the attach.) */
bool fc_host_attach_is_new_locked(struct fc_host *host,
                                  const struct fc_attach_request *req);
/* The engine released the volume: take it out of the registry and free it. */
void fc_host_forget_locked(struct fc_host *host, struct fc_volume *v);
/* Free a volume and, through the engine, its engine state. */
void fc_host_volume_free(struct fc_host *host, struct fc_volume *v);
/* Free every volume of the registry (engine close, failed open). */
void fc_host_free_volumes(struct fc_host *host);

/* The order of a source's list of cached blocks. */
enum fc_list_order {
  /* Most recently used first: for a destination that uses each block as
   * it arrives (and for the hot list itself). */
  FC_LIST_HOTTEST,
  /* By position on the cache device: for a copy nobody uses before it
   * ends.  After the VM's hits have reordered the LRU, hottest first is
   * a random walk over the device; this order reads it sequentially. */
  FC_LIST_DEVICE,
};

enum fc_migr_role { FC_MIGR_SOURCE, FC_MIGR_DEST };

/* The end of a fc_engine_migr.fetch_source_start. */
typedef void fc_engine_fetch_done_fn(void *arg, int r, bool dirty);
/* Start fetching block ob into data; see fc_engine_migr.fetch_source_start. */
typedef int fc_engine_fetch_start_fn(void *ctx, oblock_t ob, void *data, bool required,
                                     fc_engine_fetch_done_fn *done, void *arg);

/* What an engine sees of one live migration of one of its volumes; the
 * migration (migration/) owns it and passes it to every call below. */
struct fc_engine_migr {
  char id[FC_MIGRATION_ID_MAX + 1];
  char volume_id[FC_VOLUME_ID_MAX + 1];
  enum fc_migr_role role;
  enum fc_strategy strategy;
  struct fc_host *host;
  struct fc_volume *vol;            /* NULL once the volume was released */
  /* Destination, before the switchover: read [off, off+count) from the
   * source's volume.  0, -EAGAIN once the source has begun its switchover
   * (wait for the switch, then read here), or -errno. */
  int (*read_source)(void *ctx, void *buf, uint32_t count, uint64_t off);
  /* Destination, on-demand strategies: fetch block ob from the source's
   * cache (required: the source holds its only current copy). */
  int (*fetch_source)(void *ctx, oblock_t ob, void *data, bool *dirty, bool required);
  /* The same fetch, ended by a call instead of in the caller's thread, so
   * that one thread can keep many in flight (dmcache's relay).  0: started;
   * done(arg, r, dirty) is called exactly once, never from inside this
   * call, with r 0 (data filled), -ENOENT (the source does not hold ob),
   * -ETIMEDOUT, or -errno; data is the fetch's until then.  A fetch waits
   * through a reconnect of the source, within the bound fetch_source
   * gives up after.  -EBUSY: too many in flight (not started); -ENOTCONN:
   * the migration has ended.  May send on the migration's stream: not
   * from a thread that must never wait on the network. */
  int (*fetch_source_start)(void *ctx, oblock_t ob, void *data, bool required,
                            fc_engine_fetch_done_fn *done, void *arg);
  /* Destination: a dirty block fetch_source returned is installed in
   * this host's cache, so durable once in_durable next returns.  Where the
   * source accepts it (HELLO's "ack_fetched"), the migration then
   * acknowledges the block, and the source frees its copy before the
   * migration completes (CloudCache §5.2: blocks leave the source on
   * demand as well as in the background).  Only for engines that say so
   * (fc_engine_migr_ops.acks_fetched); from any thread, no lock held. */
  void (*fetched_dirty)(void *ctx, oblock_t ob);
  /* Destination: the source's rate limit for this migration, bytes/s, as
   * its HELLO said (0: none, or a source that does not say).  What
   * paces the source's answers to FETCH too. */
  uint64_t rate_limit_bps;
  /* The migration cannot go on: fail it with this message. */
  void (*fail)(void *ctx, const char *msg);
  /* False once the migration failed, was aborted or is ending (its
   * threads are being joined): an engine's own long step (fetch_hydrates'
   * in_end) stops then, whatever ended it. */
  bool (*live)(void *ctx);
  void *ctx;                        /* for the calls above */
};

/* Settling a migration that failed after its switchover, block by block
 * (migr_settle.c has the protocol and doc/reference/migration.rst the rules).  Every
 * call is on a volume marked with the failed migration, whose threads have
 * ended. */
struct fc_engine_settle_ops {
  /* The volume can be settled (its engine state is there): 0, or -EIO
   * and why not. */
  int (*usable)(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen);
  /* Destination: the blocks whose newest copy is still only on the
   * source (missing), or the dirty blocks held here and the pinned
   * blocks that went to the origin from here (held).  Caller frees.
   * -errno and why when this engine cannot settle that way. */
  int (*dest_list)(struct fc_host *host, struct fc_volume *v, bool missing,
                   uint64_t **list, uint32_t *n, char *err, size_t errlen);
  /* Destination: settling ends; missing mode with the source lost gives
   * up the blocks only it had (*given_up counts them).  -errno and why,
   * the volume still marked, when it cannot end that way. */
  int (*dest_end)(struct fc_host *host, struct fc_volume *v, bool missing,
                  bool source_lost, uint32_t *given_up, char *err, size_t errlen);
  /* Destination, held mode: serve the volume again.  Under host->lock. */
  int (*dest_resume)(struct fc_host *host, struct fc_volume *v, char *err,
                     size_t errlen);
  /* Source: write ob back to the origin (1 or -ENOENT/-ERANGE: no dirty
   * copy here) or forget it. */
  int (*source_block)(struct fc_volume *v, oblock_t ob, bool write_back);
  /* Source: after a batch of source_block, make it durable. */
  int (*source_sync)(struct fc_volume *v, bool written_back);
  /* Source: forget every block, never write one back.  Under host->lock. */
  int (*source_forget_all)(struct fc_volume *v);
  /* Destination: after a restart this engine still knows exactly which
   * blocks are only on the source (dmcache's hybrid: its clone), so the
   * settle runs in "missing" mode rather than "held".  NULL: never. */
  bool (*dest_exact_after_restart)(struct fc_host *host, struct fc_volume *v);
  /* Destination, engines whose cache reads the source's blocks itself
   * (dmcache's hybrid): true while some are still only there, so that
   * settling from a reachable source first finishes the copy with
   * dest_finish.  NULL: never. */
  bool (*dest_needs_source)(struct fc_host *host, struct fc_volume *v);
  /* Destination: copy what is left from the source through fetch (the
   * contract of fc_engine_migr.fetch_source_start), and return once the
   * volume no longer needs the source: 0, or -errno and why (nothing is
   * given up then). */
  int (*dest_finish)(struct fc_host *host, struct fc_volume *v,
                     fc_engine_fetch_start_fn *fetch, void *ctx, char *err, size_t errlen);
  /* Source: block ob of its frozen cache (host->cfg.block_size bytes) for
   * the destination's dest_finish: 0, -ENOENT (not cached here), -errno.
   * NULL: not served. */
  int (*source_read)(struct fc_host *host, struct fc_volume *v, oblock_t ob, void *data,
                     bool *dirty);
  /* Source: the engine cannot write its blocks back once frozen (the
   * "writeback" step and "release rest=writeback" are refused with this
   * reason); NULL when it can. */
  const char *source_no_writeback;
};

/* What a live migration asks of the engine.  m->vol is the volume, and
 * m->host its agent.  Each side's calls come in protocol order (see
 * doc/reference/migration.rst): the source is frozen before it lists or reads, the
 * destination begins before it installs.  Unless noted, a call is made
 * without host->lock and the engine takes what it needs. */
struct fc_engine_migr_ops {
  /* Can this engine run strategy s?  0, or -ENOTSUP and a message that
   * says why and which engine can. */
  int (*supports)(enum fc_strategy s, char *err, size_t errlen);
  /* Strategy s runs on this engine as a preview only: supports refuses
   * it, and a migration-incoming / migration-outgoing that says
   * "experimental": true may use it all the same.  NULL: no previews. */
  bool (*preview)(enum fc_strategy s);
  /* Settling a migration that failed past its switchover (migr_settle.c);
   * NULL when this engine cannot. */
  const struct fc_engine_settle_ops *settle;
  /* The destination of an on-demand strategy copies every listed block
   * itself, with fetch_source_start (dmcache: dm-clone hydrating through
   * its relay): the source sends no background copy (WELCOME's
   * "background": false), and in_switch may fetch, so the receiver goes
   * on delivering the source's answers while it runs. */
  bool fetch_hydrates;
  /* The engine calls m->fetched_dirty for every dirty block it fetched
   * and installed in its cache: the destination offers the source ACKs of
   * fetched blocks (WELCOME's "ack_fetched").  False: the source frees
   * what it served to a fetch at COMPLETE. */
  bool acks_fetched;

  /* ---- source ---- */
  /* The VM stops using this host's copy: from now on its I/O here is
   * refused.  flush: write every dirty block to the origin first (the
   * destination will read the origin).  Idempotent.  Without host->lock
   * (the kernel engine takes it). */
  int (*out_freeze)(struct fc_engine_migr *m, bool flush, char *err, size_t errlen);
  /* Abort before switchover: the VM goes on here with its cache.  Under
   * host->lock. */
  int (*out_thaw)(struct fc_engine_migr *m);
  /* The cached blocks, as oblock | FC_BLOCK_DIRTY_BIT for a dirty one,
   * in the given order.  Caller frees. */
  int (*out_list)(struct fc_engine_migr *m, uint64_t **list, uint32_t *n,
                  bool dirty_only, enum fc_list_order order);
  /* CloudCache's background copy of the reuse working set, most recent
   * first: every dirty block (as out_list marks them), and the clean ones
   * reused at least min_reuse times in the volume's current window.
   * Caller frees.  NULL: the engine cannot tell (its copy is the whole
   * cache). */
  int (*out_list_reused)(struct fc_engine_migr *m, unsigned min_reuse, uint64_t **list,
                         uint32_t *n);
  /* A destination read before the switchover: [off, off+count) as the VM
   * sees it now, changing nothing here.  NULL when the engine's
   * destination cannot forward reads (the kernel serves its VM). */
  int (*out_peek)(struct fc_engine_migr *m, void *buf, uint32_t count, uint64_t off);
  /* One cached block's data; -ENOENT if it is no longer cached here. */
  int (*out_read)(struct fc_engine_migr *m, oblock_t ob, void *data, bool *dirty);
  /* A batch of the background copy in one pass: res[i] 0 with data[i]
   * (block_size bytes) and dirty[i] filled, or -ENOENT as out_read; the
   * call returns 0, or -errno for the whole batch.  Blocks are read in
   * whatever order is cheapest (runs of adjacent cache blocks).  NULL:
   * the migration calls out_read for each block. */
  int (*out_read_many)(struct fc_engine_migr *m, const uint64_t *obs, uint32_t n,
                       void *const *data, bool *dirty, int *res);
  /* The destination holds ob durably (after the switchover). */
  int (*out_forget)(struct fc_engine_migr *m, oblock_t ob);
  /* The destination holds everything: forget every block, never write
   * one back.  Before the volume is detached, and not under host->lock
   * (it may take a minute at TiB sizes): the migration still holds the
   * volume, so nothing detaches it meanwhile; take the volume's own
   * locks. */
  int (*out_forget_all)(struct fc_engine_migr *m);

  /* ---- destination ---- */
  /* The volume was just attached for this migration: hold the VM's
   * writes until the switchover; reads before it get current data (from
   * the source through m->read_source, or the origin where that is
   * provably current).  Under host->lock. */
  int (*in_begin)(struct fc_engine_migr *m);
  /* The source connected (and m->peer_reads says whether it answers
   * reads). */
  void (*in_connected)(struct fc_engine_migr *m);
  /* A LIST entry of an on-demand strategy (the source holds ob). */
  int (*in_add_remote)(struct fc_engine_migr *m, oblock_t ob, bool dirty);
  /* SWITCH arrived: the VM runs here from now on; let its I/O through. */
  void (*in_switch)(struct fc_engine_migr *m);
  /* A copied block: 0 installed, 1 discarded (the VM wrote it, or it is
   * here already), -errno. */
  int (*in_install)(struct fc_engine_migr *m, oblock_t ob, const void *data,
                    bool dirty);
  /* A batch of copied blocks, ids[i] = oblock | FC_BLOCK_DIRTY_BIT for a
   * dirty one: res[i] as in_install's result, each block judged exactly
   * as in_install would (a copy the VM wrote or already holds is
   * discarded; a dirty one is durable once in_durable returns).  The call
   * returns 0, or -errno for the whole batch (the migration fails).
   * Called by several installer threads at once, each with its own batch.
   * NULL: the migration calls in_install for each block, from one
   * thread. */
  int (*in_install_many)(struct fc_engine_migr *m, const uint64_t *ids,
                         const void *const *data, uint32_t n, int *res);
  /* A copy that came in the cache device's order (firepan, firepan_if):
   * the source's hot list, hottest first, a chunk at a time, once every
   * copied block is installed.  Put the listed blocks in that order at
   * the cold end of the LRU, so the copy ends in the order it had at the
   * source (blocks not listed, which the VM used here, stay hotter).
   * NULL: the engine cannot, the destination does not offer it and the
   * source copies hottest first, in which case arrival order is the LRU
   * order. */
  int (*in_order)(struct fc_engine_migr *m, const uint64_t *ids, uint32_t n);
  /* cachemior, the paper's warmer: one thread (the caller's) preloads
   * ids[0..n), the hot list hottest first, from the origin with up to
   * depth reads in flight, skipping blocks already cached; each(ctx, r)
   * per block in list order (0 installed, 1 skipped, -errno), false to
   * stop.  *peak: the most reads in flight at once.  0 or -errno.  NULL:
   * the migration calls in_preload instead. */
  int (*in_warm)(struct fc_engine_migr *m, const uint64_t *ids, uint32_t n,
                 unsigned depth, bool (*each)(void *ctx, int r), void *ctx,
                 unsigned *peak);
  /* cachemior, an engine without in_warm: warm ob from the origin, called
   * from a few threads at once.  0 installed, 1 skipped. */
  int (*in_preload)(struct fc_engine_migr *m, oblock_t ob);
  /* Every copied block is in (or the source is gone): attach what
   * arrived minus what the VM overwrote.  Returns blocks invalidated.
   * With fetch_hydrates, the copy is the engine's own: this returns once
   * it ended and the source is no longer needed (COMPLETE follows), or
   * it failed (m->fail), and the migration does not end meanwhile. */
  uint32_t (*in_end)(struct fc_engine_migr *m);
  /* cachemior, after the preload, for an engine whose preloaded blocks
   * become usable only once it ends (NULL: they are usable at once).
   * Returns blocks invalidated. */
  uint32_t (*in_preloaded)(struct fc_engine_migr *m);
  /* Make what was installed survive a crash of this host: before an ACK
   * lets the source forget those blocks, or (final) the COMPLETE lets it
   * forget everything. */
  int (*in_durable)(struct fc_engine_migr *m, bool final);
  /* The source is gone: stop relying on it. */
  void (*in_lost)(struct fc_engine_migr *m);
  /* The agent is stopping: end requests held at the gate. */
  void (*in_shutdown)(struct fc_engine_migr *m);
  /* Dirty blocks whose only copy is still on the source. */
  uint32_t (*in_remote_dirty)(struct fc_engine_migr *m);
  /* The migration completed: the source holds nothing this host needs. */
  void (*in_completed)(struct fc_engine_migr *m);
  /* Abort: forget what arrived, never write it back.  Under host->lock,
   * before the volume is detached. */
  int (*in_forget_all)(struct fc_engine_migr *m);
  /* Engine figures for migration-status; under m->lock. */
  void (*stats_json)(struct fc_engine_migr *m, json_t *o);

  /* ---- both: what the volume's allocation learned goes with it ---- */
  /* Source: its account (demand history, window), sent in HELLO, or NULL
   * when there is none yet.  Caller frees.  NULL op: the engine keeps
   * none (the destination then starts as a new volume). */
  json_t *(*out_allocation)(struct fc_engine_migr *m);
  /* Destination: the source's account, from its authenticated HELLO but
   * checked value by value all the same.  Takes host->lock. */
  void (*in_allocation)(struct fc_engine_migr *m, json_t *state);
};

/* What volume-move asks (doc/reference/storage-migration.rst); checked by the
 * engine. */
struct fc_move_request {
  const char *to;                 /* the new origin, as attach takes it */
  const char *scheme;             /* dbt, mirror, lr, slr, aio, dbt_capped */
  unsigned max_rounds;            /* 0: the default */
  uint64_t converge_bytes;        /* 0: the default */
  unsigned downtime_ms;           /* 0: the default */
  unsigned aio_threshold;         /* 0: the default */
  unsigned aio_delay_us;          /* 0: the default */
  uint64_t rate_limit_bps;        /* 0: unlimited */
  /* The new origin, already opened by the engine's open_origin without
   * the host lock (so that a target that does not answer holds no
   * control request), or NULL.  start takes it (sets *opened to NULL)
   * when it starts the move. */
  void **opened;
};

/* Live storage migration of a volume's origin while its VM runs.  Every
 * call under host->lock. */
struct fc_engine_move_ops {
  int (*start)(struct fc_host *host, struct fc_volume *v,
               const struct fc_move_request *req, char *err, size_t errlen);
  /* Stop a running move and stay on the old origin: -ENOENT if none. */
  int (*abort)(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen);
  /* The running or last move's status, or NULL when none ran. */
  json_t *(*status_json)(struct fc_host *host, struct fc_volume *v);
  bool (*running)(const struct fc_volume *v);
  /* The schemes start takes, as a JSON array of names (capabilities). */
  json_t *(*schemes_json)(void);
};

struct fc_engine_ops {
  const char *name;
  /* Open the host's cache, set host->engine and bring back the persisted
   * volumes into the registry. */
  int (*open)(struct fc_host *host, char *err, size_t errlen);
  /* Stop serving and free; migrations have ended.  -errno if the state
   * could not be saved (reported here). */
  int (*close)(struct fc_host *host);
  /* Optional, called without host->lock: open an origin ahead of its
   * attach (req->opened), since an origin may take seconds to answer, or
   * never does, and every control request waits for host->lock.  What
   * attach does not take is given back to release_origin, also without
   * the lock. */
  int (*open_origin)(struct fc_host *host, const char *volume_id, const char *origin,
                     void **opened, char *err, size_t errlen);
  void (*release_origin)(struct fc_host *host, void *opened);
  /* Under host->lock. */
  int (*attach)(struct fc_host *host, const struct fc_attach_request *req,
                struct fc_volume **out, char *err, size_t errlen);
  /* Under host->lock: write every dirty block back, then forget the
   * volume; with discard_dirty forget it without writing any back (an
   * engine that cannot says so with -EOPNOTSUPP), *dropped (if not NULL)
   * set to the blocks dropped. */
  int (*detach)(struct fc_host *host, const char *id, bool discard_dirty,
                uint32_t *dropped, char *err, size_t errlen);
  /* Optional, under host->lock: someone (`by`, for the log) asked for the
   * volume, so the write-back an agent restart held (doc/reference/ucache.rst) may
   * go on.  1 if it was held, 0 if not. */
  int (*claim)(struct fc_host *host, struct fc_volume *v, const char *by);
  /* Optional, under host->lock: the volume's origin grew (Cinder's
   * online extend, then os-brick's rescan or librbd's refresh): cache and
   * serve up to its new end.  *size: the size served now, in bytes (the
   * old one when the origin did not grow).  NULL: the engine cannot. */
  int (*grow)(struct fc_host *host, struct fc_volume *v, uint64_t *size,
              char *err, size_t errlen);
  /* Optional, under host->lock: change a serving volume's write policy
   * while its VM runs (volume-set), and persist it, so that a restarted
   * agent keeps it.  Leaving write_back, success means every dirty block
   * is at the origin and none is left under the new policy; on any
   * failure the old policy stays, in the engine and on disk.  *written:
   * the blocks written back.  The caller refused during a live migration
   * or storage move.  NULL: the engine cannot (detach, attach again). */
  int (*set_policy)(struct fc_host *host, struct fc_volume *v,
                    enum fc_write_policy to, uint32_t *written, char *err,
                    size_t errlen);
  /* Optional, under host->lock: change a serving volume's cache size
   * while its VM runs (volume-set), and persist it.  Shrinking writes
   * dirty blocks back as needed before it gives blocks up; the host's
   * accounting (reserved cache) follows.  On any failure the old size
   * stays, in the engine and on disk, and nothing is lost.  *written:
   * blocks written back, *evicted: blocks given back to the device.  The
   * caller refused during a live migration or storage move.  NULL: the
   * engine cannot (detach, attach again). */
  int (*set_cache_size)(struct fc_host *host, struct fc_volume *v,
                        uint64_t size, uint32_t *written, uint32_t *evicted,
                        char *err, size_t errlen);
  /* The volume serves its export (not unavailable). */
  bool (*serving)(const struct fc_volume *v);
  /* Free v->priv (the volume is leaving the registry). */
  void (*volume_free)(struct fc_volume *v);
  json_t *(*volume_json)(struct fc_host *host, struct fc_volume *v);
  /* agent-status, without the migrations. */
  json_t *(*status_json)(struct fc_host *host);
  const struct fc_engine_migr_ops *migr;
  /* NULL: the engine cannot move a volume's origin live. */
  const struct fc_engine_move_ops *move;
};

/* The engine called name among the engines src/engines.c registers, or
 * NULL. */
const struct fc_engine_ops *fc_engine_find(const char *name);

#endif

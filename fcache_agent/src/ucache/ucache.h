/* SPDX-License-Identifier: Apache-2.0 */
/* ucache: the user-space cache engine for one volume.
 *
 * Blocks of the origin are cached in blocks of the host's cache device,
 * LRU-replaced within the volume's quota.  Write policies:
 *   read_only      a write invalidates the cached block and goes to origin;
 *   write_through  a write goes to origin, then updates/installs the block;
 *   write_back     a write lands in the cache and is marked dirty; a
 *                  background thread writes dirty blocks back.
 *
 * Concurrency: requests lock the stripes of the origin blocks they touch
 * (so two requests never work on one block at once) and take the volume
 * lock only briefly, to look up, install or evict.  Entries a request is
 * using are marked BUSY so that another request's eviction skips them.
 */
#ifndef FCACHE_UCACHE_H
#define FCACHE_UCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cachedev.h"
#include "nbd/io_ops.h"
#include "metadata.h"
#include "origin/origin.h"
#include "stats.h"
#include "alloc/rws.h"
#include "alloc/staging.h"
#include "alloc/window_knee.h"
#include "common/types.h"

struct fc_ucache;

/* Fetch one block from the migration source, blocking; fills data and
 * *dirty.  -ENOENT if the source no longer has it, other -errno if the
 * source cannot be reached.  When !required (the origin has the block too)
 * the fetcher may decline at once with -EBUSY, or give up early, so a slow
 * source never makes the VM wait longer than the origin would. */
typedef int (*fc_ucache_fetch_fn)(void *ctx, oblock_t ob, void *data, bool *dirty,
                                  bool required);

/* Destination, before the switchover: read [off, off+count) from the
 * migration source's volume, which is the current copy until then.  0,
 * -EAGAIN when the source no longer answers (its switchover has begun, or
 * it cannot forward reads): the read then waits for the switch. */
typedef int (*fc_ucache_read_fn)(void *ctx, void *buf, uint32_t count, uint64_t off);

/* A dirty block the fetch returned is in the cache now (durable at the
 * next fc_ucache_migr_durable): the migration may acknowledge it to the
 * source.  Called from the VM's thread, no lock held. */
typedef void (*fc_ucache_fetched_fn)(void *ctx, oblock_t ob);

struct fc_ucache_pool;

struct fc_ucache_params {
  uint32_t quota_blocks;        /* the volume's cache_size: its upper bound */
  uint32_t share_blocks;        /* its share now (<= quota); 0 = quota */
  enum fc_write_policy write_policy;
  enum fc_admission admission;
  unsigned rws_n;               /* admission rws: reuses before admission */
  enum fc_staging_kind staging; /* admission rws: the staging kind */
  double staging_fraction;      /* the staging area, of the share */
  enum fc_rws_mode rws_mode;    /* how the reuse working set is measured */
  /* The host's volumes that may take blocks from each other (shares
   * enforced at replacement time); NULL for a cache of its own. */
  struct fc_ucache_pool *pool;
  uint64_t volume_tag;
  /* The volume's id, for log lines only; it must outlive the cache (the
   * volume owns both).  NULL logs as "-". */
  const char *volume_id;
  unsigned writeback_interval_ms;
  unsigned dirty_high_percent;
};

struct fc_ucache_info {
  uint32_t block_size;
  uint64_t size;
  uint32_t quota_blocks;
  uint32_t cached_blocks;
  uint32_t dirty_blocks;
  size_t memory_bytes;          /* map + staging; block table is the device's */
  bool writeback_held;          /* fc_ucache_hold_writeback, not yet claimed */
};

/* The I/O callbacks for the NBD server; handle is the struct fc_ucache. */
extern const struct fc_io_ops fc_ucache_io_ops;

int fc_ucache_create(struct fc_cachedev *dev, struct fc_metadata *md,
                     struct fc_origin *origin,
                     const struct fc_ucache_params *params,
                     struct fc_ucache **out);

/* Recovery, before fc_ucache_start: take over cache block cb (already
 * claimed on the device) as holding oblock.  -EINVAL if the oblock is past
 * the origin's end, -ENOSPC if the quota is full. */
int fc_ucache_adopt(struct fc_ucache *uc, cblock_t cb, oblock_t ob, bool dirty);

/* Start the writeback thread (write_back only; a no-op otherwise). */
int fc_ucache_start(struct fc_ucache *uc);
/* Stop the writeback thread; dirty blocks stay dirty. */
void fc_ucache_stop(struct fc_ucache *uc);

/* After a restart a volume's dirty blocks may be older than its origin:
 * its VM may have been evacuated and written the origin from another
 * host.  While held, the writeback thread writes nothing back (reads
 * and writes are served as ever, and fc_ucache_writeback_all, asked for
 * explicitly, still writes).  fc_ucache_claim lets the thread go again
 * at once and returns whether the volume was held (fc_ucache_info says
 * whether it is). */
void fc_ucache_hold_writeback(struct fc_ucache *uc);
bool fc_ucache_claim(struct fc_ucache *uc);

/* Write every dirty block back and flush the origin.  Call with no I/O
 * running (after the NBD server stopped).  -errno if any block could not
 * be written back: they stay dirty and cached. */
int fc_ucache_writeback_all(struct fc_ucache *uc);

/* Give every cache block back to the device, clearing their records
 * first (released space is unmapped before reuse).  Fails with -EBUSY
 * while dirty blocks remain. */
int fc_ucache_release(struct fc_ucache *uc);

/* Fill the records of this volume's blocks for a clean shutdown. */
void fc_ucache_dump_records(struct fc_ucache *uc, struct fc_md_record *recs);

/* The origin grew to size bytes (an online extend; origin_size_now):
 * blocks up to the new end may be cached from now on.  The old size must
 * be a multiple of the block size (a cached partial last block would
 * keep zeroes where the origin now has data): -EOPNOTSUPP otherwise.
 * Call before the export grows, so that no request reaches past the old
 * end before the cache knows the new one. */
int fc_ucache_grow(struct fc_ucache *uc, uint64_t size);

/* Change the write policy of a serving cache, its VM's I/O going on
 * (volume-set; ucache_policy.c has the order of the steps).  Leaving
 * write_back, every dirty block reaches the origin, which is flushed,
 * before the switch, and no write is left dirty after it; *written: the
 * blocks written back.  -EBUSY: the write-back is held since a restart
 * (claim the volume first).  Any other -errno (a write-back or flush the
 * origin failed): the old policy stays, nothing lost.  Not during a live
 * migration or storage move of the volume. */
int fc_ucache_set_write_policy(struct fc_ucache *uc, enum fc_write_policy to,
                               uint32_t *written);

/* Change a serving cache's quota, its VM's I/O going on (volume-set
 * --cache-size; ucache_resize.c has the order).  Shrinking gives clean
 * blocks back to the device from the cold end until the volume holds at
 * most quota_blocks, writing dirty blocks back to the origin first as
 * needed; *written: blocks written back, *evicted: blocks given back.
 * -EBUSY: a shrink would write back dirty blocks held since a restart
 * (claim the volume first).  -EAGAIN: the cold end stayed in requests'
 * hands.  Any -errno: the old quota stays, the blocks evicted were clean,
 * nothing lost.  Not during a live migration or storage move. */
int fc_ucache_resize(struct fc_ucache *uc, uint32_t quota_blocks,
                     uint32_t *written, uint32_t *evicted);

void fc_ucache_info(struct fc_ucache *uc, struct fc_ucache_info *info);
uint32_t fc_ucache_dirty(struct fc_ucache *uc);
struct fc_stats *fc_ucache_stats(struct fc_ucache *uc);

/* ---- live migration (ucache_migr.c) ---- */

enum fc_ucache_migr_mode {
  FC_MIGR_PLAIN = 0,        /* none, cachemior, firepan: normal cache */
  FC_MIGR_BYPASS = 1,       /* firepan_if: origin only until the copy is done */
  FC_MIGR_ONDEMAND = 2,     /* cloudcache, hybrid: fetch remote blocks */
};

/* Destination: close the gate (writes wait for the switchover, reads are
 * answered from current data) and start tracking writes. */
int fc_ucache_migr_in_begin(struct fc_ucache *uc, enum fc_ucache_migr_mode mode,
                            fc_ucache_fetch_fn fetch, fc_ucache_fetched_fn fetched,
                            fc_ucache_read_fn read_source, void *ctx,
                            const char *superseded_path);
/* Destination: a block the source holds; dirty ones must be fetched. */
int fc_ucache_migr_add_remote(struct fc_ucache *uc, oblock_t ob, bool dirty);
/* Destination: the source connected; reads before the switchover go to
 * it from now on. */
void fc_ucache_migr_source_connected(struct fc_ucache *uc);
/* Destination: the source switched over: let the VM's I/O through. */
void fc_ucache_migr_open_gate(struct fc_ucache *uc);
/* Destination: the source is gone.  Clean remote blocks fall back to the
 * origin; remote dirty blocks fail with EIO (never stale data). */
void fc_ucache_migr_source_lost(struct fc_ucache *uc);
/* The agent is stopping: end requests held at the gate. */
void fc_ucache_migr_shutdown(struct fc_ucache *uc);
/* Destination: install a copied block unless the VM wrote it or already
 * holds it.  0 installed, 1 discarded, -errno. */
int fc_ucache_migr_install_copy(struct fc_ucache *uc, oblock_t ob,
                                const void *data, bool dirty);
/* Destination: the same for a batch of copies, ids[i] = oblock |
 * FC_BLOCK_DIRTY_BIT for a dirty one (ucache_migr_batch.c).  res[i] is 0
 * or 1 as above; the call returns 0 or -errno for the batch. */
int fc_ucache_migr_install_many(struct fc_ucache *uc, const uint64_t *ids,
                                const void *const *data, uint32_t n, int *res);
/* Destination: make the dirty blocks that came from the source survive a
 * crash of this host (cache file, then records): those since the last
 * call, or (final, before COMPLETE) everything, if the source had any
 * dirty block at all. */
int fc_ucache_migr_durable(struct fc_ucache *uc, bool final);
/* Destination, a copy that came in the cache device's order: ids[0..n)
 * (oblock | dirty bit), the next part of the source's hot list, hottest
 * first, go to the cold end in that order; ids not cached here are
 * skipped.  Takes the volume's lock for a few hundred blocks at a time. */
void fc_ucache_migr_order(struct fc_ucache *uc, const uint64_t *ids, uint32_t n);
/* Destination (cachemior): the cache warmer (ucache_migr_warm.c).  Reads
 * ids[0..n), the source's hot list hottest first, from the origin with up
 * to depth reads in flight, and installs each block not already cached
 * at the cold end, in the list's order; calls each(ctx, r) for every
 * block in that order (0 installed, 1 skipped, -errno), from the calling
 * thread, and stops asking for more once it returns false.  *peak: the
 * most reads that were in flight at once.  0, or -ENOMEM. */
typedef bool fc_ucache_warm_fn(void *ctx, int r);
int fc_ucache_migr_warm(struct fc_ucache *uc, const uint64_t *ids, uint32_t n,
                        unsigned depth, fc_ucache_warm_fn *each, void *ctx,
                        unsigned *peak);
/* Destination: the copy is complete: drop what the filter names, attach
 * the cache, stop tracking.  Returns blocks invalidated. */
uint32_t fc_ucache_migr_in_end(struct fc_ucache *uc);
uint32_t fc_ucache_migr_remote_dirty(struct fc_ucache *uc);
/* Destination: the source no longer holds anything this host needs (the
 * migration completed): pinned blocks may be written back again. */
void fc_ucache_migr_unpin(struct fc_ucache *uc);
/* Destination, settling a migration that failed after its switchover:
 * the blocks whose newest copy is only on the source (unsorted; caller
 * frees), then, once the source wrote them back, forget all remote state. */
int fc_ucache_migr_remote_list(struct fc_ucache *uc, uint64_t **list, uint32_t *n);
void fc_ucache_migr_settled(struct fc_ucache *uc);
/* Source, settling: write one dirty block back to the origin (no flush).
 * 0 written, 1 cached but clean, -ENOENT not cached, -errno. */
int fc_ucache_migr_writeback_block(struct fc_ucache *uc, oblock_t ob);
int fc_ucache_flush_origin(struct fc_ucache *uc);
/* Source, frozen for the switchover: the origin's exclusive hold (an RBD
 * image's lock) goes, for the destination to take (fc_origin_release). */
int fc_ucache_release_origin(struct fc_ucache *uc);
/* Destination at the switchover, or a source taking its volume back:
 * another host wrote the origin (fc_origin_invalidate). */
void fc_ucache_invalidate_origin(struct fc_ucache *uc);
/* Source, before the switchover: [off, off+count) as the VM sees it now
 * (cache, else origin), changing nothing: no fill, no LRU move, no
 * counters.  A destination read is forwarded here. */
int fc_ucache_peek(struct fc_ucache *uc, void *buf, uint32_t count, uint64_t off);
int fc_ucache_sync_records(struct fc_ucache *uc);

/* Source: refuse writes (the VM has left) or accept them again (rollback). */
void fc_ucache_migr_freeze(struct fc_ucache *uc, bool frozen);
/* Source: the cached blocks, as oblock | FC_BLOCK_DIRTY_BIT-style
 * dirty<<63, most recently used first, or with device_order in the order
 * of their cache blocks (which costs a bit per block of the cache device
 * while it runs).  Caller frees. */
int fc_ucache_migr_snapshot(struct fc_ucache *uc, uint64_t **list, uint32_t *n,
                            bool dirty_only, bool device_order);
/* Source, CloudCache's background copy: the reuse working set, most
 * recently used first -- every dirty block, and the clean ones the VM
 * reused at least min_reuse (>= 1) times in the current demand window
 * (uc_entry_reuses).  Caller frees. */
int fc_ucache_migr_snapshot_reused(struct fc_ucache *uc, unsigned min_reuse, uint64_t **list,
                                   uint32_t *n);
/* Source: read a cached block's data. -ENOENT if not cached. */
int fc_ucache_migr_read_block(struct fc_ucache *uc, oblock_t ob, void *data,
                              bool *dirty);
/* Source: the same for a batch: res[i] 0 (data[i], dirty[i] filled) or
 * -ENOENT; the call returns 0 or -errno for the batch. */
int fc_ucache_migr_read_many(struct fc_ucache *uc, const uint64_t *obs, uint32_t n,
                             void *const *data, bool *dirty, int *res);
/* Source: forget a block the destination now holds (dirty included). */
int fc_ucache_migr_forget(struct fc_ucache *uc, oblock_t ob);
/* Source: forget every block (the destination holds all it needs). */
int fc_ucache_migr_forget_all(struct fc_ucache *uc);

struct fc_ucache_migr_stats {
  uint64_t fetched, fetch_fallbacks, discarded, installed_copies;
  uint32_t written, remote_dirty, remote_clean;
};
void fc_ucache_migr_stats(struct fc_ucache *uc, struct fc_ucache_migr_stats *st);

/* Frees memory only: blocks still owned stay claimed on the device. */
void fc_ucache_destroy(struct fc_ucache *uc);

/* ---- on-demand allocation (ucache_share.c) ---- */

/* The caches of one host's volumes that share its cache device.  A cache
 * below its share whose device is full takes a clean block from a member
 * above its share (CloudCache's replacement-time enforcement).  Lock
 * order: a cache's lock, then the pool's; a cache's lock is only ever
 * tried, never waited for, under the pool's. */
struct fc_ucache_pool *fc_ucache_pool_new(void);
void fc_ucache_pool_free(struct fc_ucache_pool *pool);
/* Join or leave (before fc_ucache_destroy); at most FC_UCACHE_POOL_MAX. */
#define FC_UCACHE_POOL_MAX 256
int fc_ucache_pool_add(struct fc_ucache_pool *pool, struct fc_ucache *uc);
void fc_ucache_pool_remove(struct fc_ucache_pool *pool, struct fc_ucache *uc);

/* Close the volume's demand window: the sizes of its reuse working sets. */
void fc_ucache_close_window(struct fc_ucache *uc, struct fc_rws_sizes *out);
/* An automatic window: from now on follow the reuse times of the
 * volume's accesses (alloc/window_knee.h), longest_s the longest window
 * that will be asked about.  Once; -ENOMEM. */
int fc_ucache_follow_reuse(struct fc_ucache *uc, uint32_t longest_s);
/* The window at the knee of the volume's hit ratio against the window,
 * within [min_s, max_s]: fc_wknee_choose's answers (-EAGAIN: not known
 * yet), -ENOENT when the volume does not follow reuse times. */
int fc_ucache_knee_window(struct fc_ucache *uc, uint32_t min_s, uint32_t max_s,
                          uint32_t *window_s);
/* A new share (blocks, at most the quota) and with it the staging area.
 * Blocks above the share stay until a cache under its share needs them. */
void fc_ucache_set_share(struct fc_ucache *uc, uint32_t share_blocks);

struct fc_ucache_alloc_info {
  uint32_t share_blocks;
  uint32_t used_blocks;
  uint32_t quota_blocks;
  bool staging;                     /* admission rws */
  struct fc_staging_stats st;       /* when staging */
  uint64_t staging_hits;            /* reads served from staged data */
  uint64_t taken, given;            /* blocks taken from / given to others */
  size_t rws_memory;
  double rws_sample_rate;
  size_t knee_memory;               /* 0: the window is not automatic */
};
void fc_ucache_alloc_info(struct fc_ucache *uc, struct fc_ucache_alloc_info *info);

#endif

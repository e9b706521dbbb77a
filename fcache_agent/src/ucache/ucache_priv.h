/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by ucache_lifecycle.c (create, destroy), stripes.c
 * (the stripe locks), blocks.c (install, evict), the request paths
 * (ucache_io.h, which the read and write paths share), writeback.c and
 * the migration layer (ucache_layer.h, ucache_migr_priv.h).  Not a
 * public header. */
#ifndef FCACHE_UCACHE_PRIV_H
#define FCACHE_UCACHE_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/blockmap.h"
#include "common/lockcheck.h"
#include "common/lru.h"
#include "ucache.h"

#define FC_STRIPES 256u
/* An entry whose data a write-back pass has sent to origin; a write to
 * the block clears it, so the pass knows not to mark newer data clean. */
#define FC_ENTRY_WB_PENDING (1u << 4)
/* Power-cut ordering (durable.c).  UNSYNCED: the block's dirty record was
 * written without FC_MD_SYNCED, and the block is listed for the next
 * flush to vouch for.  ON_DISK_DIRTY: a dirty record with FC_MD_SYNCED
 * may be what the disk holds for the block, so it must not take other
 * data until a record that is not dirty has been synced.  SNAP and SEEN
 * are a flush's and a compaction's marks, set and cleared under uc->lock. */
#define FC_ENTRY_UNSYNCED (1u << 5)
#define FC_ENTRY_ON_DISK_DIRTY (1u << 6)
#define FC_ENTRY_SNAP (1u << 7)
#define FC_ENTRY_SEEN (1u << 8)
/* A cached block's reuses in the volume's current demand window, for a
 * CloudCache migration's background copy of the reuse working set (the
 * blocks reused at least N times in the window, most recent first).  In
 * the entry's spare flag bits, so it costs no memory: a count (saturating
 * at 255) and the window it was counted in, modulo 256; a count from an
 * older window reads as 0.  Not a second RWS tracker: the volume's own
 * (uc->rws) sizes the window's sets by sampling and cannot name their
 * blocks; this names the cached ones. */
#define FC_ENTRY_REUSE_SHIFT 16
#define FC_ENTRY_EPOCH_SHIFT 24
#define FC_ENTRY_REUSE_MASK (0xffu << FC_ENTRY_REUSE_SHIFT)
#define FC_ENTRY_EPOCH_MASK (0xffu << FC_ENTRY_EPOCH_SHIFT)

/* Reuses of e in window `epoch`. */
static inline unsigned
uc_entry_reuses(const struct fc_entry *e, uint8_t epoch)
{
  if (((e->flags & FC_ENTRY_EPOCH_MASK) >> FC_ENTRY_EPOCH_SHIFT) != epoch)
    return 0;
  return (e->flags & FC_ENTRY_REUSE_MASK) >> FC_ENTRY_REUSE_SHIFT;
}

/* Set e's reuses in window `epoch` to n (at most 255). */
static inline void
uc_entry_set_reuses(struct fc_entry *e, uint8_t epoch, unsigned n)
{
  e->flags = (e->flags & ~(FC_ENTRY_REUSE_MASK | FC_ENTRY_EPOCH_MASK)) |
             ((uint32_t)(n > 255 ? 255 : n) << FC_ENTRY_REUSE_SHIFT) |
             ((uint32_t)epoch << FC_ENTRY_EPOCH_SHIFT);
}

/* How far from the LRU tail eviction looks for a clean, idle victim. */
#define FC_EVICT_SCAN 128u
/* The sampled demand tracker's bound per volume. */
#define UC_RWS_MAX_BYTES (1u << 20)

struct fc_ucache {
  struct fc_cachedev *dev;
  struct fc_metadata *md;
  struct fc_origin *origin;
  struct fc_ucache_params p;
  uint32_t bs;
  /* Blocks of the origin, the last one partial when the origin's size
   * is not a multiple of bs: cached like the others, but only its part
   * inside the origin is ever read from or written to it
   * (uc_block_bytes). */
  uint64_t nr_oblocks;

  pthread_mutex_t lock;         /* map, lru, stage, rws, counters below, entry flags */
  struct fc_blockmap map;
  struct fc_lru lru;
  struct fc_staging *stage;     /* admission rws; NULL for all */
  struct fc_rws *rws;           /* every block the VM touches */
  /* The same accesses' reuse times, for a volume whose window is
   * automatic (fc_ucache_follow_reuse); NULL otherwise. */
  struct fc_wknee *wknee;
  uint8_t reuse_epoch;          /* the demand window's number, mod 256 (FC_ENTRY_REUSE_SHIFT) */
  uint32_t used;                /* blocks owned, including installs in flight */
  uint32_t share;               /* blocks this volume may grow to now */
  uint32_t nr_dirty;
  uint64_t taken, given;        /* blocks moved from / to others by their shares */

  pthread_mutex_t stripes[FC_STRIPES];
  /* Bumped, under its stripe, by every holder that may change the data of
   * a block of the stripe.  A read miss reads the origin with no stripe
   * held (the origin is slow, and the migration installer and the other
   * requests of the stripe must not queue behind it); it installs what it
   * read only if the stripe's count did not move meanwhile. */
  uint64_t stripe_seq[FC_STRIPES];
  /* Writes that go around the cache (read_only, or a firepan_if copy in
   * progress) send their data to the origin with no stripe held, between
   * two holds; they are counted, under uc->lock, so that a source freezing
   * for the switch can wait for them. */
  uint32_t writes_around;
  /* The same per stripe: a block of a stripe with one in flight is not
   * recorded clean (uc_record_clean_locked). */
  uint32_t stripe_around[FC_STRIPES];
  /* Blocks with FC_ENTRY_UNSYNCED, as (cb, oblock) so that an entry is
   * looked at only once our own map says it is still ours; stale and
   * repeated pairs are skipped (durable.c).  Under uc->lock. */
  struct uc_unsynced { uint32_t cb; uint64_t ob; } *unsynced;
  uint32_t nr_unsynced, cap_unsynced;
  bool unsynced_lost;           /* the list could not grow: walk the LRU */
  /* Dropped blocks whose synced dirty record was cleared in the page
   * cache only: held out of use until a sync of the metadata file, so
   * that a run of drops (a migration source forgetting what it sent)
   * costs one sync, not one each (durable.c).  Under uc->lock. */
  uint32_t *settling;
  uint32_t nr_settling, cap_settling;
  pthread_mutex_t durable_lock; /* one uc_make_durable at a time */
  pthread_cond_t around_cond;
  struct fc_stats stats;

  /* What is layered on the data path: a live migration, either end
   * (ucache_layer.h).  Its state is the layer's own, opaque here
   * (ucache_migr_priv.h); layer_on, set by the layer under lock, lets a
   * request skip every hook point with one load. */
  struct uc_migr *m;
  atomic_bool layer_on;

  /* A change of write policy (ucache_policy.c) holds the VM's writes,
   * trims and zeroes at their start, before they take a stripe, while it
   * writes the last dirty blocks back.  paused is under lock; paused_on
   * lets the fast path skip it. */
  bool paused;
  atomic_bool paused_on;
  pthread_cond_t pause_cond;

  pthread_t wb_thread;
  bool wb_running;
  bool wb_stopping;
  /* Under lock: the thread's passes write nothing back until a claim
   * (fc_ucache_hold_writeback). */
  bool wb_held;
  pthread_cond_t wb_cond;
};

struct stripe_set {
  uint64_t bits[FC_STRIPES / 64];
};

/* For a holder that may change blocks' data (writes, trims, migration
 * installs and drops, write-back): bumps each stripe's seq. */
void uc_lock_stripes(struct fc_ucache *uc, uint64_t first, uint64_t last,
                     struct stripe_set *set);
/* For a holder that changes no block's data as the VM sees it: reads,
 * installs of what the origin holds, write-back of a cached block. */
void uc_lock_stripes_to_read(struct fc_ucache *uc, uint64_t first,
                             uint64_t last, struct stripe_set *set);
void uc_unlock_stripes(struct fc_ucache *uc, const struct stripe_set *set);
/* uc_lock_stripes_to_read waiting at most max_us in all: false, holding
 * nothing, when a stripe stayed taken that long (for a thread that must
 * not wait indefinitely on a holder that may be waiting for it). */
bool uc_lock_stripes_to_read_within(struct fc_ucache *uc, uint64_t first,
                                    uint64_t last, unsigned max_us,
                                    struct stripe_set *set);
/* For a batch of scattered blocks (migration): add ob's stripe to a set
 * (zeroed by the caller), then lock the set in the one ascending order;
 * reader as in uc_lock_stripes_to_read.  uc_unlock_stripes releases it. */
void uc_stripe_set_add(struct stripe_set *set, oblock_t ob);
void uc_lock_stripe_set(struct fc_ucache *uc, const struct stripe_set *set, bool reader);

/* Under the block's stripe: its stripe's sequence number now. */
uint64_t uc_stripe_seq(const struct fc_ucache *uc, oblock_t ob);
/* Under the block's stripe, after reading ob from the origin with no
 * stripe held: may what was read be installed?  Only if nothing changed
 * the stripe since seq was taken and nobody installed ob meanwhile. */
bool uc_fill_allowed(struct fc_ucache *uc, oblock_t ob, uint64_t seq);

/* Under uc->lock: the cached block for ob, VALID, or CBLOCK_NONE.
 * Inline: every request looks its blocks up, and the files that keep the
 * map in step with the records (blocks.c, durable.c) both need it. */
static inline cblock_t
uc_lookup_locked(struct fc_ucache *uc, oblock_t ob)
{
  FC_ASSERT_HELD(&uc->lock);
  cblock_t cb = fc_blockmap_lookup(&uc->map, uc->dev->table, ob);

  if (cb.n != CBLOCK_NONE && !(uc->dev->table[cb.n].flags & FC_ENTRY_VALID))
    cb.n = CBLOCK_NONE;
  return cb;
}

/* Under uc->lock: unmap and free a clean block. */
void uc_drop_locked(struct fc_ucache *uc, cblock_t cb);
/* A volume leaving drops its blocks in batches of at most this many: one
 * metadata write per run of adjacent blocks instead of one per block (at
 * 4 KiB blocks and a TiB of cache, minutes under the volume's lock). */
#define UC_DROP_BATCH 1024u
/* Under uc->lock: clear the records of n <= UC_DROP_BATCH blocks given in
 * descending device order (the order they are freed in); fc_md_forget_many's
 * result.  Then uc_drop_forgotten_locked each, with that result. */
int uc_forget_many_locked(struct fc_ucache *uc, const cblock_t *desc, uint32_t n);
/* Under uc->lock: uc_drop_locked for a block whose record the caller
 * cleared, fr being how that went (not 0: the block is freed all the same
 * unless a synced dirty record of it may remain, as uc_drop_locked). */
void uc_drop_forgotten_locked(struct fc_ucache *uc, cblock_t cb, int fr);
/* Under uc->lock: a bitmap of the cache device (one bit per cache block,
 * *words 64-bit words; caller frees) marking the volume's blocks that
 * want() accepts, for walking them in the device's order; NULL if out of
 * memory. */
uint64_t *uc_device_bitmap_locked(struct fc_ucache *uc, bool (*want)(const struct fc_entry *),
                                  uint32_t *words);
/* Under uc->lock: unmap the least recently used clean block nobody is
 * using and hand it over (still allocated on the device, uc->used one
 * less); -ENOSPC when the tail holds none. */
int uc_evict_clean_locked(struct fc_ucache *uc, cblock_t *out);
/* Under uc->lock, for a cache under its share on a full device: a clean
 * block taken from a pool member above its share (ucache_share.c). */
int uc_take_from_pool_locked(struct fc_ucache *uc, cblock_t *out);

/* The staging area for a share of share_blocks (ucache_share.c). */
size_t uc_staging_area(const struct fc_ucache *uc, uint32_t share_blocks);
/* The staging's reuse history for a share of share_blocks: one share's
 * worth of addresses, no more than the volume has blocks. */
uint32_t uc_history_blocks(const struct fc_ucache *uc, uint32_t share_blocks);
/* Under uc->lock: the VM touched [first, first+n) (demand tracking). */
void uc_track_access_locked(struct fc_ucache *uc, uint64_t first, uint32_t n);
/* Under uc->lock: the data of [first, first+n) changes; staged copies of
 * it are stale.  n = UINT64_MAX: all of them. */
void uc_stage_forget_locked(struct fc_ucache *uc, uint64_t first, uint64_t n);
/* Under the block's reader stripe, for a miss: serve it from the staging
 * area's data if it is there (admitting it when this access makes it
 * reused enough).  True when data holds the block. */
bool uc_stage_read(struct fc_ucache *uc, oblock_t ob, void *data);

/* Why a block is installed at the hot end: the admission policy counts
 * the VM's misses, reads and writes alike (CloudCache §4.3), and lets a
 * block fetched from a migration source in unless it is clean. */
enum uc_install_why {
  UC_READ_MISS,       /* what the origin holds; may be staged with its data */
  UC_WRITE_MISS,      /* a whole block the VM wrote */
  UC_FETCHED,         /* from a migration source: a dirty one is the only copy */
};

/* Install a block's data (caller holds its stripe).  Returns 0 when
 * installed, 1 when not admitted, -ENOSPC when no clean block could be
 * evicted, other -errno on I/O failure. */
int uc_install(struct fc_ucache *uc, oblock_t ob, const void *data, bool dirty,
               enum uc_install_why why);
/* A clean block the staging area has just admitted, with the data it
 * staged: no second admission test. */
int uc_install_admitted(struct fc_ucache *uc, oblock_t ob, const void *data);
/* The same as uc_install, but the block enters at the cold end of the LRU: copies and
 * cachemior's preloads, which arrive hottest first, then keep the source's order. */
int uc_install_cold(struct fc_ucache *uc, oblock_t ob, const void *data, bool dirty);

/* A batch install in three steps (ucache_migr_batch.c), all under
 * uc->lock: take a block for ob as install() does, busy and out of the
 * map (-ENOSPC as above); give it back unused; or, its data written (and
 * a dirty block's record), map it at the cold end as uc_install_cold
 * would. */
int uc_alloc_busy_locked(struct fc_ucache *uc, oblock_t ob, cblock_t *out);
void uc_unalloc_locked(struct fc_ucache *uc, cblock_t cb);
void uc_publish_cold_locked(struct fc_ucache *uc, cblock_t cb, bool dirty);

/* Under uc->lock, the block's data equal to the origin's and its record
 * clear: record it clean, so a restart after a process crash serves it
 * warm (warm.h) -- unless a write around the cache is in flight.  On
 * failure the block may stay, unrecorded. */
int uc_record_clean_locked(struct fc_ucache *uc, cblock_t cb, oblock_t ob);

/* Clear a dirty block's record and drop it (caller holds its stripe). */
int uc_drop_dirty(struct fc_ucache *uc, cblock_t cb);

/* durable.c.  Under uc->lock, right after a dirty record without
 * FC_MD_SYNCED was written for cb (ours, mapped or about to be): list it
 * for the next uc_make_durable.  Cannot fail: when the list cannot grow,
 * the next flush walks the volume's LRU instead. */
void uc_note_unsynced_locked(struct fc_ucache *uc, cblock_t cb);
/* Make every write acknowledged so far survive a power cut: the cache
 * file's data first, then the records naming it, marked FC_MD_SYNCED,
 * then the metadata file.  One at a time per volume. */
int uc_make_durable(struct fc_ucache *uc);
/* Under uc->lock: cb's on-disk record may still be a synced dirty one;
 * sync the metadata file before the block may hold other data.  0 when
 * the block may be reused. */
int uc_settle_on_disk_dirty_locked(struct fc_ucache *uc, cblock_t cb);
/* Under uc->lock, for a dropped block (unmapped, record cleared) that was
 * ON_DISK_DIRTY: hold it until uc_settle_dropped.  False when it cannot
 * be held (no memory): the caller settles it at once. */
bool uc_hold_dropped_locked(struct fc_ucache *uc, cblock_t cb);
/* Sync the metadata file, then free the dropped blocks held for it. */
int uc_sync_records(struct fc_ucache *uc);
/* The same, only when blocks are held (the write-back thread's tick). */
int uc_settle_dropped(struct fc_ucache *uc);
void uc_unsynced_free(struct fc_ucache *uc);

/* Writes, trims and zeroes wait here while a policy change holds them
 * (ucache_policy.c); called with no stripe held. */
void uc_pause_gate(struct fc_ucache *uc);

/* Mark a cached block dirty after its data was rewritten (caller holds its
 * stripe): record first, flag second. */
int uc_mark_dirty(struct fc_ucache *uc, cblock_t cb);


void uc_wake_writeback(struct fc_ucache *uc);
/* Start the write-back thread whatever the policy (a policy change about
 * to enter write_back); 0 if it runs already. */
int uc_writeback_start(struct fc_ucache *uc);
int uc_writeback_pass(struct fc_ucache *uc, uint32_t max_blocks, uint32_t *done);

/* Bytes of block b (< nr_oblocks) inside the origin: bs but for a
 * partial last block.  Whole-block origin I/O -- fills, write-back, a
 * migration's copies -- reads and writes this much, never past the
 * origin's end (a file would grow, an NBD server refuse); the rest of a
 * cached partial block is zeroes. */
static inline uint32_t
uc_block_bytes(const struct fc_ucache *uc, uint64_t b)
{
  uint64_t left = uc->origin->size - b * uc->bs;

  return left < uc->bs ? (uint32_t)left : uc->bs;
}

/* The volume this cache is for, as log lines name it. */
static inline const char *
uc_volume(const struct fc_ucache *uc)
{
  return uc->p.volume_id ? uc->p.volume_id : "-";
}

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Background writeback of dirty blocks (write_back volumes).
 *
 * A pass copies up to N dirty blocks, oldest in LRU order first, from the
 * cache to the origin, flushes the origin once, and only then clears the
 * blocks' dirty records: a crash at any point leaves each block either
 * still dirty (written again after restart: harmless) or safely at the
 * origin.  A block written again while its pass was in flight loses its
 * WB_PENDING mark and stays dirty.
 *
 * Held (after a restart, until the volume is claimed: doc/reference/ucache.rst),
 * the thread still wakes up but writes nothing back.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "common/deadline.h"
#include "common/lockcheck.h"
#include "common/log.h"
#include "ucache_layer.h"

#define WB_BATCH 256u

struct wb_item {
  uint32_t cb;
  uint64_t ob;
};

static uint32_t
collect_dirty(struct fc_ucache *uc, struct wb_item *items, uint32_t max)
{
  const struct fc_entry *table = uc->dev->table;
  uint32_t n = 0;

  pthread_mutex_lock(&uc->lock);
  for (uint32_t i = uc->lru.tail; i != CBLOCK_NONE && n < max;
       i = table[i].lru_prev) {
    if ((table[i].flags & FC_ENTRY_DIRTY) && !(table[i].flags & FC_ENTRY_BUSY) &&
        !uc_layer_pinned_locked(uc, to_oblock(table[i].oblock)))
      items[n++] = (struct wb_item){ i, table[i].oblock };
  }
  pthread_mutex_unlock(&uc->lock);
  return n;
}

/* Writing a cached block back changes no block's data as the VM sees it,
 * so it leaves the stripe's sequence alone: a read filling another block
 * of the stripe from the origin may still install what it read. */
static void
lock_one(struct fc_ucache *uc, uint64_t ob, struct stripe_set *set)
{
  uc_lock_stripes_to_read(uc, ob, ob, set);
}

/* Still the same dirty block we collected (not trimmed and reused)? */
static bool
still_ours_locked(struct fc_ucache *uc, const struct wb_item *it)
{
  FC_ASSERT_HELD(&uc->lock);
  const struct fc_entry *e = &uc->dev->table[it->cb];

  return (e->flags & (FC_ENTRY_VALID | FC_ENTRY_DIRTY)) ==
           (FC_ENTRY_VALID | FC_ENTRY_DIRTY) && e->oblock == it->ob;
}

/* Up to this many of a pass's blocks travel to the origin at once.  Each
 * write waits for the origin's acknowledgement, which on remote storage
 * (an OSD's commit, an iSCSI round trip) takes a millisecond or more: one
 * at a time, writeback would manage a few hundred blocks a second. */
#define WB_SENDERS 8u

struct wb_send {
  struct fc_ucache *uc;
  const struct wb_item *items;
  bool *sent;                   /* per item: at the origin, not flushed */
  uint32_t n;
  atomic_uint next;             /* the next item to take */
  atomic_uint nr_sent;
  atomic_int err;               /* the first failure; the others stop */
};

/* One block to the origin.  Its stripe is held from the check to the
 * origin's answer, as by a write: a write around the cache to this block
 * cannot reach the origin between our read of it and our write. */
static int
send_one(struct fc_ucache *uc, const struct wb_item *it, char *buf,
         bool *sent)
{
  struct stripe_set set;
  bool ours;
  int r = 0;

  lock_one(uc, it->ob, &set);
  pthread_mutex_lock(&uc->lock);
  ours = still_ours_locked(uc, it);
  pthread_mutex_unlock(&uc->lock);
  if (ours) {
    r = fc_cachedev_read(uc->dev, to_cblock(it->cb), 0, buf, uc->bs);
    if (!r)
      r = fc_origin_pwrite(uc->origin, buf, uc_block_bytes(uc, it->ob),
                           it->ob * uc->bs, false);
    if (!r) {
      STAT_ADD(&uc->stats, origin_write_bytes, uc_block_bytes(uc, it->ob));
      pthread_mutex_lock(&uc->lock);
      uc->dev->table[it->cb].flags |= FC_ENTRY_WB_PENDING;
      pthread_mutex_unlock(&uc->lock);
      *sent = true;
    }
  }
  uc_unlock_stripes(uc, &set);
  return r;
}

static void *
sender(void *arg)
{
  struct wb_send *s = arg;
  char *buf = malloc(s->uc->bs);
  int expected = 0;

  if (!buf) {
    atomic_compare_exchange_strong(&s->err, &expected, -ENOMEM);
    return NULL;
  }
  while (atomic_load(&s->err) == 0) {
    uint32_t i = atomic_fetch_add(&s->next, 1);
    int r;

    if (i >= s->n)
      break;
    r = send_one(s->uc, &s->items[i], buf, &s->sent[i]);
    if (r) {
      STAT_ADD(&s->uc->stats, io_errors, 1);
      atomic_compare_exchange_strong(&s->err, &expected, r);
      break;
    }
    if (s->sent[i])
      atomic_fetch_add(&s->nr_sent, 1);
  }
  free(buf);
  return NULL;
}

/* Sends items[0..n) with up to WB_SENDERS threads, the caller one of them
 * (a thread that cannot be started only means fewer at once).  Returns
 * how many were sent; *err is the first failure, after which the rest
 * are left for the next pass. */
static uint32_t
send_all(struct fc_ucache *uc, const struct wb_item *items, bool *sent,
         uint32_t n, int *err)
{
  struct wb_send s = { .uc = uc, .items = items, .sent = sent, .n = n };
  pthread_t helpers[WB_SENDERS - 1];
  uint32_t want = n < WB_SENDERS ? n : WB_SENDERS, started = 0;

  atomic_init(&s.next, 0);
  atomic_init(&s.nr_sent, 0);
  atomic_init(&s.err, 0);
  while (started + 1 < want &&
         pthread_create(&helpers[started], NULL, sender, &s) == 0)
    started++;
  sender(&s);
  for (uint32_t i = 0; i < started; i++)
    pthread_join(helpers[i], NULL);
  *err = atomic_load(&s.err);
  return atomic_load(&s.nr_sent);
}

int
uc_writeback_pass(struct fc_ucache *uc, uint32_t max_blocks, uint32_t *done)
{
  struct wb_item items[WB_BATCH];
  bool sent_item[WB_BATCH] = { false };
  uint32_t n, sent, cleaned = 0, settle = 0;
  int r = 0;

  *done = 0;
  n = collect_dirty(uc, items, max_blocks < WB_BATCH ? max_blocks : WB_BATCH);
  sent = send_all(uc, items, sent_item, n, &r);
  if (sent) {
    int fr = fc_origin_flush(uc->origin);
    if (fr) {
      log_error("volume %s: writeback: origin flush failed (%d): blocks stay dirty",
                uc_volume(uc), fr);
      return fr;
    }
  }
  for (uint32_t i = 0; i < n; i++) {
    struct stripe_set set;
    bool clean_it;
    int mr;

    if (!sent_item[i])
      continue;
    lock_one(uc, items[i].ob, &set);
    pthread_mutex_lock(&uc->lock);
    clean_it = still_ours_locked(uc, &items[i]) &&
               (uc->dev->table[items[i].cb].flags & FC_ENTRY_WB_PENDING);
    pthread_mutex_unlock(&uc->lock);
    if (clean_it) {
      struct fc_entry *e = &uc->dev->table[items[i].cb];

      /* Clean now, recorded clean unless a write around the cache may
       * change the origin under it (then unrecorded: ucache_priv.h).
       * Record and flags change in one hold, so that a flush vouching
       * for dirty records (durable.c) sees the block dirty or clean,
       * never a clean record under a dirty flag. */
      pthread_mutex_lock(&uc->lock);
      mr = uc->stripe_around[items[i].ob & (FC_STRIPES - 1)] ?
           fc_md_forget(uc->md, to_cblock(items[i].cb)) :
           fc_md_set(uc->md, to_cblock(items[i].cb), items[i].ob,
                     uc->p.volume_tag, FC_MD_VALID);
      if (mr == 0) {
        e->flags &= ~(FC_ENTRY_DIRTY | FC_ENTRY_WB_PENDING | FC_ENTRY_UNSYNCED);
        uc->nr_dirty--;
        if (e->flags & FC_ENTRY_ON_DISK_DIRTY)
          items[settle++] = items[i];
      }
      pthread_mutex_unlock(&uc->lock);
      if (mr == 0) {
        STAT_ADD(&uc->stats, writebacks, 1);
        cleaned++;
      } else if (!r) {
        r = mr;
      }
    }
    uc_unlock_stripes(uc, &set);
  }
  /* Blocks whose synced dirty record may still be on disk: once their
   * clean records are synced they may take other data (evictable). */
  if (settle && uc_sync_records(uc) == 0) {
    pthread_mutex_lock(&uc->lock);
    for (uint32_t i = 0; i < settle; i++) {
      struct fc_entry *e = &uc->dev->table[items[i].cb];

      if (uc_lookup_locked(uc, to_oblock(items[i].ob)).n == items[i].cb &&
          !(e->flags & FC_ENTRY_DIRTY))
        e->flags &= ~FC_ENTRY_ON_DISK_DIRTY;
    }
    pthread_mutex_unlock(&uc->lock);
  }
  *done = cleaned;
  return r;
}

void
uc_wake_writeback(struct fc_ucache *uc)
{
  pthread_mutex_lock(&uc->lock);
  pthread_cond_signal(&uc->wb_cond);
  pthread_mutex_unlock(&uc->lock);
}

static bool
above_high_watermark(struct fc_ucache *uc)
{
  bool above;

  pthread_mutex_lock(&uc->lock);
  above = !uc->wb_stopping && uc->nr_dirty * 100ull >
          (uint64_t)uc->p.quota_blocks * uc->p.dirty_high_percent;
  pthread_mutex_unlock(&uc->lock);
  return above;
}

static void *
writeback_thread(void *arg)
{
  struct fc_ucache *uc = arg;

  for (;;) {
    struct timespec until = fc_deadline_ms(uc->p.writeback_interval_ms);
    uint32_t done = 0;
    bool stop, held;

    pthread_mutex_lock(&uc->lock);
    if (!uc->wb_stopping)
      pthread_cond_timedwait(&uc->wb_cond, &uc->lock, &until);
    stop = uc->wb_stopping;
    held = uc->wb_held;
    pthread_mutex_unlock(&uc->lock);
    if (stop)
      break;
    /* One batch per tick trickles dirty data out while the volume is
     * busy; above the watermark we keep going until below it. */
    while (!held) {
      int r = uc_writeback_pass(uc, WB_BATCH, &done);
      if (r) {
        log_warning("volume %s: writeback: pass failed (%d), retrying next interval",
                    uc_volume(uc), r);
        break;
      }
      if (!done || !above_high_watermark(uc))
        break;
    }
    /* Blocks dropped since the last tick (a migration source forgetting
     * what it sent) go back to the device after one sync. */
    if (uc_settle_dropped(uc))
      log_warning("volume %s: writeback: cannot sync the cache metadata; dropped "
                  "blocks stay out of use until it can", uc_volume(uc));
  }
  return NULL;
}

int
fc_ucache_start(struct fc_ucache *uc)
{
  if (uc->p.write_policy != FC_WRITE_BACK)
    return 0;
  return uc_writeback_start(uc);
}

int
uc_writeback_start(struct fc_ucache *uc)
{
  int r;

  if (uc->wb_running)
    return 0;
  uc->wb_stopping = false;
  r = -pthread_create(&uc->wb_thread, NULL, writeback_thread, uc);
  if (r == 0)
    uc->wb_running = true;
  return r;
}

void
fc_ucache_hold_writeback(struct fc_ucache *uc)
{
  pthread_mutex_lock(&uc->lock);
  uc->wb_held = true;
  pthread_mutex_unlock(&uc->lock);
}

bool
fc_ucache_claim(struct fc_ucache *uc)
{
  bool was;

  pthread_mutex_lock(&uc->lock);
  was = uc->wb_held;
  uc->wb_held = false;
  /* What waited for the claim goes now, not an interval later. */
  if (was)
    pthread_cond_signal(&uc->wb_cond);
  pthread_mutex_unlock(&uc->lock);
  return was;
}

void
fc_ucache_stop(struct fc_ucache *uc)
{
  if (!uc->wb_running)
    return;
  pthread_mutex_lock(&uc->lock);
  uc->wb_stopping = true;
  pthread_cond_signal(&uc->wb_cond);
  pthread_mutex_unlock(&uc->lock);
  pthread_join(uc->wb_thread, NULL);
  uc->wb_running = false;
}

int
fc_ucache_writeback_all(struct fc_ucache *uc)
{
  uint32_t done;
  int r;

  for (;;) {
    pthread_mutex_lock(&uc->lock);
    uint32_t left = uc->nr_dirty;
    pthread_mutex_unlock(&uc->lock);
    if (!left)
      break;
    r = uc_writeback_pass(uc, WB_BATCH, &done);
    if (r)
      return r;
    if (!done)
      return -EAGAIN;   /* dirty blocks we could not reach: caller reports */
  }
  r = fc_origin_flush(uc->origin);
  if (!r)
    r = fc_md_sync(uc->md);
  return r;
}

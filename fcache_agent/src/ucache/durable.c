/* SPDX-License-Identifier: Apache-2.0 */
/* Power-cut ordering of dirty records: what a flush vouches for.
 *
 * A dirty record is written as soon as its data is in the cache file's
 * page cache, so that a process crash (kill -9) loses no acknowledged
 * write.  The kernel may write that record to disk before the data it
 * names, though, and after a power cut such a record would hand the VM
 * whatever the block held before: another block of its disk, or another
 * tenant's.  So a dirty record only counts after a power cut once a flush
 * has vouched for it: the flush syncs the cache file, rewrites the records
 * of the blocks dirtied since the last one with FC_MD_SYNCED, and syncs
 * the metadata file.  Recovery after a reboot drops dirty records without
 * it (their writes were never flushed, so losing them is allowed).
 *
 * The blocks waiting for a flush are listed per volume, so that a flush
 * costs what was dirtied since the last one, not the size of the cache.
 * Which blocks were waiting is fixed (marked SNAP) before the cache file
 * is synced: a block dirtied after that point may have its data written
 * after the sync, and waits for the next flush.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/lockcheck.h"
#include "common/log.h"
#include "cachedev.h"
#include "metadata.h"
#include "ucache_priv.h"

#define LIST_MIN 64u
/* Records rewritten per hold of uc->lock, so that a flush after a burst of
 * writes does not hold the VM's requests for long. */
#define VOUCH_CHUNK 256u

/* Under uc->lock: the entry a pair names, if our own map says it is still
 * ours and it still waits for a flush; NULL otherwise.  (An entry that has
 * left us belongs to another volume and its lock: not looked at.) */
static struct fc_entry *
waiting_locked(struct fc_ucache *uc, const struct uc_unsynced *u)
{
  FC_ASSERT_HELD(&uc->lock);
  cblock_t cb = uc_lookup_locked(uc, to_oblock(u->ob));
  struct fc_entry *e;

  if (cb.n != u->cb)
    return NULL;
  e = &uc->dev->table[cb.n];
  if ((e->flags & (FC_ENTRY_DIRTY | FC_ENTRY_UNSYNCED)) !=
      (FC_ENTRY_DIRTY | FC_ENTRY_UNSYNCED))
    return NULL;
  return e;
}

/* Under uc->lock: drop the pairs that no longer wait and the repeats (a
 * block dropped and dirtied again is listed twice). */
static void
compact_locked(struct fc_ucache *uc)
{
  FC_ASSERT_HELD(&uc->lock);
  uint32_t kept = 0;

  for (uint32_t i = 0; i < uc->nr_unsynced; i++) {
    struct fc_entry *e = waiting_locked(uc, &uc->unsynced[i]);

    if (!e || (e->flags & FC_ENTRY_SEEN))
      continue;
    e->flags |= FC_ENTRY_SEEN;
    uc->unsynced[kept++] = uc->unsynced[i];
  }
  for (uint32_t i = 0; i < kept; i++)
    uc->dev->table[uc->unsynced[i].cb].flags &= ~FC_ENTRY_SEEN;
  uc->nr_unsynced = kept;
}

void
uc_note_unsynced_locked(struct fc_ucache *uc, cblock_t cb)
{
  FC_ASSERT_HELD(&uc->lock);
  struct fc_entry *e = &uc->dev->table[cb.n];

  e->flags |= FC_ENTRY_UNSYNCED;
  if (uc->unsynced_lost)
    return;
  if (uc->nr_unsynced == uc->cap_unsynced) {
    compact_locked(uc);
    /* Grow only when compaction left the list more than half full, so
     * that each append costs O(1) amortised. */
    if (uc->nr_unsynced > uc->cap_unsynced / 2 || uc->cap_unsynced == 0) {
      uint32_t cap = uc->cap_unsynced ? uc->cap_unsynced * 2 : LIST_MIN;
      struct uc_unsynced *p = cap > uc->cap_unsynced
                              ? realloc(uc->unsynced, (size_t)cap * sizeof *p)
                              : NULL;

      if (!p) {
        /* The next flush finds every waiting block by walking the LRU. */
        log_warning("no memory to list the blocks the next flush must "
                    "vouch for: it will walk the whole volume instead");
        free(uc->unsynced);
        uc->unsynced = NULL;
        uc->nr_unsynced = uc->cap_unsynced = 0;
        uc->unsynced_lost = true;
        return;
      }
      uc->unsynced = p;
      uc->cap_unsynced = cap;
    }
  }
  uc->unsynced[uc->nr_unsynced++] = (struct uc_unsynced){ cb.n, e->oblock };
}

void
uc_unsynced_free(struct fc_ucache *uc)
{
  free(uc->unsynced);
  uc->unsynced = NULL;
  uc->nr_unsynced = uc->cap_unsynced = 0;
}

/* Under uc->lock: mark SNAP the blocks this flush vouches for. */
static void
snap_locked(struct fc_ucache *uc, const struct uc_unsynced *list, uint32_t n,
            bool walk)
{
  FC_ASSERT_HELD(&uc->lock);
  struct fc_entry *table = uc->dev->table;

  if (walk) {
    for (uint32_t i = uc->lru.head; i != CBLOCK_NONE; i = table[i].lru_next)
      if ((table[i].flags & (FC_ENTRY_DIRTY | FC_ENTRY_UNSYNCED)) ==
          (FC_ENTRY_DIRTY | FC_ENTRY_UNSYNCED))
        table[i].flags |= FC_ENTRY_SNAP;
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    struct fc_entry *e = waiting_locked(uc, &list[i]);

    if (e)
      e->flags |= FC_ENTRY_SNAP;
  }
}

/* Under uc->lock, for an entry marked SNAP: with its data synced, rewrite
 * its record SYNCED.  On failure it waits for the next flush. */
static int
vouch_locked(struct fc_ucache *uc, cblock_t cb)
{
  FC_ASSERT_HELD(&uc->lock);
  struct fc_entry *e = &uc->dev->table[cb.n];
  int r;

  e->flags &= ~FC_ENTRY_SNAP;
  if ((e->flags & (FC_ENTRY_DIRTY | FC_ENTRY_UNSYNCED)) !=
      (FC_ENTRY_DIRTY | FC_ENTRY_UNSYNCED))
    return 0;
  r = fc_md_set(uc->md, cb, e->oblock, uc->p.volume_tag,
                FC_MD_VALID | FC_MD_DIRTY | FC_MD_SYNCED);
  if (r) {
    uc_note_unsynced_locked(uc, cb);
    return r;
  }
  e->flags = (e->flags & ~FC_ENTRY_UNSYNCED) | FC_ENTRY_ON_DISK_DIRTY;
  return 0;
}

/* After the cache file's sync (ok) or its failure (!ok: the SNAP marks go,
 * and the next flush walks the volume for what still waits). */
static int
vouch(struct fc_ucache *uc, const struct uc_unsynced *list, uint32_t n,
      bool walk, bool ok)
{
  struct fc_entry *table = uc->dev->table;
  int r = 0;

  if (walk || !ok) {
    pthread_mutex_lock(&uc->lock);
    for (uint32_t i = uc->lru.head; i != CBLOCK_NONE; i = table[i].lru_next) {
      if (!(table[i].flags & FC_ENTRY_SNAP))
        continue;
      if (!ok) {
        table[i].flags &= ~FC_ENTRY_SNAP;
        continue;
      }
      int vr = vouch_locked(uc, to_cblock(i));
      if (vr && !r)
        r = vr;
    }
    if (!ok) {
      uc_unsynced_free(uc);
      uc->unsynced_lost = true;
    }
    pthread_mutex_unlock(&uc->lock);
    return r;
  }
  for (uint32_t i = 0; i < n; i += VOUCH_CHUNK) {
    uint32_t end = n - i < VOUCH_CHUNK ? n : i + VOUCH_CHUNK;

    pthread_mutex_lock(&uc->lock);
    for (uint32_t k = i; k < end; k++) {
      cblock_t cb = uc_lookup_locked(uc, to_oblock(list[k].ob));

      if (cb.n != list[k].cb || !(table[cb.n].flags & FC_ENTRY_SNAP))
        continue;
      int vr = vouch_locked(uc, cb);
      if (vr && !r)
        r = vr;
    }
    pthread_mutex_unlock(&uc->lock);
  }
  return r;
}

int
uc_make_durable(struct fc_ucache *uc)
{
  struct uc_unsynced *list;
  uint32_t n;
  bool walk;
  int r;

  pthread_mutex_lock(&uc->durable_lock);
  pthread_mutex_lock(&uc->lock);
  list = uc->unsynced;
  n = uc->nr_unsynced;
  walk = uc->unsynced_lost;
  uc->unsynced = NULL;
  uc->nr_unsynced = uc->cap_unsynced = 0;
  uc->unsynced_lost = false;
  snap_locked(uc, list, n, walk);
  pthread_mutex_unlock(&uc->lock);

  r = fc_cachedev_sync(uc->dev);
  if (r) {
    (void)vouch(uc, list, n, walk, false);
  } else {
    r = vouch(uc, list, n, walk, true);
    if (!r)
      r = uc_sync_records(uc);
  }
  pthread_mutex_unlock(&uc->durable_lock);
  free(list);
  return r;
}

int
uc_settle_on_disk_dirty_locked(struct fc_ucache *uc, cblock_t cb)
{
  FC_ASSERT_HELD(&uc->lock);
  struct fc_entry *e = &uc->dev->table[cb.n];
  int r;

  if (!(e->flags & FC_ENTRY_ON_DISK_DIRTY))
    return 0;
  r = fc_md_sync(uc->md);
  if (r == 0)
    e->flags &= ~FC_ENTRY_ON_DISK_DIRTY;
  return r;
}

bool
uc_hold_dropped_locked(struct fc_ucache *uc, cblock_t cb)
{
  FC_ASSERT_HELD(&uc->lock);
  if (uc->nr_settling == uc->cap_settling) {
    uint32_t cap = uc->cap_settling ? uc->cap_settling * 2 : LIST_MIN;
    uint32_t *p = realloc(uc->settling, (size_t)cap * sizeof *p);

    if (!p)
      return false;
    uc->settling = p;
    uc->cap_settling = cap;
  }
  uc->settling[uc->nr_settling++] = cb.n;
  uc->dev->table[cb.n].flags = FC_ENTRY_ALLOCATED;   /* out of use, not free */
  return true;
}

int
uc_sync_records(struct fc_ucache *uc)
{
  uint32_t *list = NULL, n;
  int r;

  /* Taken before the sync: every block held now has its cleared record
   * in the page cache already; blocks held later wait for the next one. */
  pthread_mutex_lock(&uc->lock);
  n = uc->nr_settling;
  if (n) {
    list = uc->settling;
    uc->settling = NULL;
    uc->nr_settling = uc->cap_settling = 0;
  }
  pthread_mutex_unlock(&uc->lock);
  r = fc_md_sync(uc->md);
  if (!n)
    return r;
  pthread_mutex_lock(&uc->lock);
  for (uint32_t i = 0; i < n; i++) {
    if (r == 0)
      fc_cachedev_free(uc->dev, to_cblock(list[i]));
    else if (!uc_hold_dropped_locked(uc, to_cblock(list[i])))
      log_error("volume %s: cache block %u stays out of use until the agent "
                "restarts: its cleared record could not be synced", uc_volume(uc),
                list[i]);
  }
  pthread_mutex_unlock(&uc->lock);
  free(list);
  return r;
}

int
uc_settle_dropped(struct fc_ucache *uc)
{
  uint32_t n;

  pthread_mutex_lock(&uc->lock);
  n = uc->nr_settling;
  pthread_mutex_unlock(&uc->lock);
  return n ? uc_sync_records(uc) : 0;
}

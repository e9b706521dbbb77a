#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "ucache_priv.h"

int
fc_ucache_create(struct fc_cachedev *dev, struct fc_metadata *md,
                 struct fc_origin *origin, const struct fc_ucache_params *params,
                 struct fc_ucache **out)
{
  struct fc_ucache *uc;
  int r;

  if (params->quota_blocks == 0)
    return -EINVAL;
  uc = calloc(1, sizeof *uc);
  if (!uc)
    return -ENOMEM;
  uc->dev = dev;
  uc->md = md;
  uc->origin = origin;
  uc->p = *params;
  uc->bs = dev->block_size;
  uc->nr_oblocks = origin->size / uc->bs;
  fc_lru_init(&uc->lru);
  r = fc_blockmap_init(&uc->map, params->quota_blocks);
  if (r)
    goto out;
  if (params->admission == FC_ADMIT_RWS) {
    /* Remember as many recent misses as the cache holds blocks: a block
     * must come back before a cache-full of other misses went by. */
    r = fc_staging_init(&uc->staging, params->quota_blocks);
    if (r)
      goto out;
  }
  pthread_mutex_init(&uc->lock, NULL);
  pthread_cond_init(&uc->wb_cond, NULL);
  pthread_cond_init(&uc->m.gate_cond, NULL);
  uc->m.chosen_cursor = CBLOCK_NONE;
  pthread_cond_init(&uc->around_cond, NULL);
  uc->m.superseded_fd = -1;
  for (unsigned i = 0; i < FC_STRIPES; i++)
    pthread_mutex_init(&uc->stripes[i], NULL);
  *out = uc;
  return 0;

out:
  fc_blockmap_destroy(&uc->map);
  fc_staging_destroy(&uc->staging);
  free(uc);
  return r;
}

void
fc_ucache_destroy(struct fc_ucache *uc)
{
  if (!uc)
    return;
  fc_ucache_stop(uc);
  fc_invfilter_destroy(&uc->m.written);
  fc_invfilter_destroy(&uc->m.remote_dirty);
  fc_invfilter_destroy(&uc->m.remote_clean);
  fc_invfilter_destroy(&uc->m.pinned);
  if (uc->m.superseded_fd >= 0)
    close(uc->m.superseded_fd);
  pthread_cond_destroy(&uc->m.gate_cond);
  pthread_cond_destroy(&uc->around_cond);
  fc_blockmap_destroy(&uc->map);
  fc_staging_destroy(&uc->staging);
  for (unsigned i = 0; i < FC_STRIPES; i++)
    pthread_mutex_destroy(&uc->stripes[i]);
  pthread_cond_destroy(&uc->wb_cond);
  pthread_mutex_destroy(&uc->lock);
  free(uc);
}

static void
lock_stripes(struct fc_ucache *uc, uint64_t first, uint64_t last,
             struct stripe_set *set, bool reader)
{
  memset(set, 0, sizeof *set);
  if (last - first + 1 >= FC_STRIPES) {
    memset(set, 0xff, sizeof *set);
  } else {
    for (uint64_t b = first; b <= last; b++) {
      unsigned s = (unsigned)(b & (FC_STRIPES - 1));
      set->bits[s / 64] |= 1ull << (s % 64);
    }
  }
  /* Ascending order everywhere is what keeps two multi-block requests
   * from deadlocking. */
  for (unsigned s = 0; s < FC_STRIPES; s++)
    if (set->bits[s / 64] & (1ull << (s % 64))) {
      pthread_mutex_lock(&uc->stripes[s]);
      if (!reader)
        uc->stripe_seq[s]++;
    }
}

void
uc_lock_stripes(struct fc_ucache *uc, uint64_t first, uint64_t last,
                struct stripe_set *set)
{
  lock_stripes(uc, first, last, set, false);
}

void
uc_lock_stripes_to_read(struct fc_ucache *uc, uint64_t first, uint64_t last,
                        struct stripe_set *set)
{
  lock_stripes(uc, first, last, set, true);
}

void
uc_unlock_stripes(struct fc_ucache *uc, const struct stripe_set *set)
{
  for (unsigned s = FC_STRIPES; s-- > 0;)
    if (set->bits[s / 64] & (1ull << (s % 64)))
      pthread_mutex_unlock(&uc->stripes[s]);
}

uint64_t
uc_stripe_seq(const struct fc_ucache *uc, oblock_t ob)
{
  return uc->stripe_seq[ob.n & (FC_STRIPES - 1)];
}

bool
uc_fill_allowed(struct fc_ucache *uc, oblock_t ob, uint64_t seq)
{
  bool absent;

  pthread_mutex_lock(&uc->lock);
  absent = uc_lookup_locked(uc, ob).n == CBLOCK_NONE;
  pthread_mutex_unlock(&uc->lock);
  return absent && uc_stripe_seq(uc, ob) == seq;
}

cblock_t
uc_lookup_locked(struct fc_ucache *uc, oblock_t ob)
{
  cblock_t cb = fc_blockmap_lookup(&uc->map, uc->dev->table, ob);

  if (cb.n != CBLOCK_NONE && !(uc->dev->table[cb.n].flags & FC_ENTRY_VALID))
    cb.n = CBLOCK_NONE;
  return cb;
}

void
uc_drop_locked(struct fc_ucache *uc, cblock_t cb)
{
  struct fc_entry *e = &uc->dev->table[cb.n];

  fc_blockmap_remove(&uc->map, uc->dev->table, cb);
  fc_lru_remove(&uc->lru, uc->dev->table, cb);
  if (e->flags & FC_ENTRY_DIRTY)
    uc->nr_dirty--;
  e->flags = 0;
  uc->used--;
  fc_cachedev_free(uc->dev, cb);
}

/* Under uc->lock: a block to fill, either fresh within the quota or the
 * least recently used clean block nobody is using. */
static int
get_block_locked(struct fc_ucache *uc, cblock_t *out)
{
  struct fc_entry *table = uc->dev->table;
  uint32_t i = uc->lru.tail;
  int r;

  if (uc->used < uc->p.quota_blocks) {
    r = fc_cachedev_alloc(uc->dev, out);
    if (r == 0) {
      uc->used++;
      return 0;
    }
  }
  for (unsigned scanned = 0; i != CBLOCK_NONE && scanned < FC_EVICT_SCAN;
       scanned++, i = table[i].lru_prev) {
    if (table[i].flags & (FC_ENTRY_BUSY | FC_ENTRY_DIRTY))
      continue;
    fc_blockmap_remove(&uc->map, table, to_cblock(i));
    fc_lru_remove(&uc->lru, table, to_cblock(i));
    table[i].flags = FC_ENTRY_ALLOCATED;
    STAT_ADD(&uc->stats, evictions, 1);
    *out = to_cblock(i);
    return 0;
  }
  /* Everything evictable is dirty or in use: ask for write-back (we hold
   * uc->lock already, which is the condition's mutex). */
  if (uc->nr_dirty)
    pthread_cond_signal(&uc->wb_cond);
  return -ENOSPC;
}

enum placement {
  AT_HEAD,            /* a miss or a write: most recently used */
  AT_TAIL,            /* a copy arriving before the VM resumes, hottest first */
  BELOW_CHOSEN,       /* see uc_install_chosen */
};

/* admit: a clean block must pass the admission policy (a miss; copies and
 * preloads were chosen by the source). */
static int install(struct fc_ucache *uc, oblock_t ob, const void *data, bool dirty,
                   bool admit, enum placement where);

int
uc_install(struct fc_ucache *uc, oblock_t ob, const void *data, bool dirty)
{
  return install(uc, ob, data, dirty, !dirty, AT_HEAD);
}

int
uc_install_cold(struct fc_ucache *uc, oblock_t ob, const void *data, bool dirty)
{
  return install(uc, ob, data, dirty, false, AT_TAIL);
}

int
uc_install_chosen(struct fc_ucache *uc, oblock_t ob, const void *data)
{
  return install(uc, ob, data, false, false, BELOW_CHOSEN);
}

/* Under uc->lock. */
static void
place(struct fc_ucache *uc, cblock_t cb, enum placement where)
{
  struct fc_entry *table = uc->dev->table;
  uint32_t cur = uc->m.chosen_cursor;

  if (where == AT_TAIL) {
    fc_lru_push_tail(&uc->lru, table, cb);
    return;
  }
  if (where == BELOW_CHOSEN && cur != CBLOCK_NONE &&
      (table[cur].flags & FC_ENTRY_VALID) &&
      table[cur].oblock == uc->m.chosen_cursor_ob)
    fc_lru_insert_after(&uc->lru, table, to_cblock(cur), cb);
  else
    fc_lru_push_head(&uc->lru, table, cb);
  if (where == BELOW_CHOSEN) {
    uc->m.chosen_cursor = cb.n;
    uc->m.chosen_cursor_ob = table[cb.n].oblock;
  }
}

static int
install(struct fc_ucache *uc, oblock_t ob, const void *data, bool dirty,
        bool admit, enum placement where)
{
  struct fc_entry *e;
  cblock_t cb;
  int r;

  pthread_mutex_lock(&uc->lock);
  if (admit && uc->p.admission == FC_ADMIT_RWS &&
      !fc_staging_miss(&uc->staging, ob)) {
    pthread_mutex_unlock(&uc->lock);
    return 1;
  }
  r = get_block_locked(uc, &cb);
  if (r) {
    pthread_mutex_unlock(&uc->lock);
    return r;
  }
  e = &uc->dev->table[cb.n];
  e->oblock = ob.n;
  /* Not yet in the map or LRU: invisible to lookups and to eviction. */
  e->flags = FC_ENTRY_ALLOCATED | FC_ENTRY_BUSY;
  pthread_mutex_unlock(&uc->lock);

  r = fc_cachedev_write(uc->dev, cb, 0, data, uc->bs);
  if (r == 0) {
    STAT_ADD(&uc->stats, cache_write_bytes, uc->bs);
    if (dirty)
      r = fc_md_set(uc->md, cb, ob.n, uc->p.volume_tag,
                    FC_MD_VALID | FC_MD_DIRTY);
  }

  pthread_mutex_lock(&uc->lock);
  if (r) {
    e->flags = 0;
    uc->used--;
    fc_cachedev_free(uc->dev, cb);
    STAT_ADD(&uc->stats, io_errors, 1);
  } else {
    e->flags = FC_ENTRY_ALLOCATED | FC_ENTRY_VALID | (dirty ? FC_ENTRY_DIRTY : 0);
    fc_blockmap_insert(&uc->map, uc->dev->table, cb);
    place(uc, cb, where);
    if (dirty)
      uc->nr_dirty++;
    STAT_ADD(&uc->stats, promotions, 1);
  }
  pthread_mutex_unlock(&uc->lock);
  return r;
}

int
uc_drop_dirty(struct fc_ucache *uc, cblock_t cb)
{
  /* Record first: a crash after it loses nothing the caller has not
   * already made obsolete (the origin got the trim). */
  int r = fc_md_set(uc->md, cb, 0, 0, 0);

  if (r)
    return r;
  pthread_mutex_lock(&uc->lock);
  uc_drop_locked(uc, cb);
  pthread_mutex_unlock(&uc->lock);
  return 0;
}

int
uc_mark_dirty(struct fc_ucache *uc, cblock_t cb)
{
  struct fc_entry *e = &uc->dev->table[cb.n];
  bool was_dirty;
  int r;

  pthread_mutex_lock(&uc->lock);
  /* New data: whatever a write-back pass sent to origin is now old. */
  e->flags &= ~FC_ENTRY_WB_PENDING;
  was_dirty = e->flags & FC_ENTRY_DIRTY;
  pthread_mutex_unlock(&uc->lock);
  if (was_dirty)
    return 0;
  r = fc_md_set(uc->md, cb, e->oblock, uc->p.volume_tag,
                FC_MD_VALID | FC_MD_DIRTY);
  if (r)
    return r;
  pthread_mutex_lock(&uc->lock);
  e->flags |= FC_ENTRY_DIRTY;
  uc->nr_dirty++;
  pthread_mutex_unlock(&uc->lock);
  return 0;
}

int
fc_ucache_adopt(struct fc_ucache *uc, cblock_t cb, oblock_t ob, bool dirty)
{
  struct fc_entry *e = &uc->dev->table[cb.n];

  if (ob.n >= uc->nr_oblocks)
    return -EINVAL;
  if (uc->used >= uc->p.quota_blocks)
    return -ENOSPC;
  if (fc_blockmap_lookup(&uc->map, uc->dev->table, ob).n != CBLOCK_NONE)
    return -EEXIST;
  e->oblock = ob.n;
  e->flags = FC_ENTRY_ALLOCATED | FC_ENTRY_VALID | (dirty ? FC_ENTRY_DIRTY : 0);
  fc_blockmap_insert(&uc->map, uc->dev->table, cb);
  fc_lru_push_head(&uc->lru, uc->dev->table, cb);
  uc->used++;
  if (dirty)
    uc->nr_dirty++;
  return 0;
}

int
fc_ucache_release(struct fc_ucache *uc)
{
  struct fc_entry *table = uc->dev->table;
  int r = 0;

  pthread_mutex_lock(&uc->lock);
  if (uc->nr_dirty) {
    r = -EBUSY;
    goto out;
  }
  while (uc->lru.tail != CBLOCK_NONE) {
    cblock_t cb = to_cblock(uc->lru.tail);

    /* Unmap on disk before the block can belong to someone else. */
    r = fc_md_set(uc->md, cb, 0, 0, 0);
    if (r)
      goto out;
    table[cb.n].flags &= ~FC_ENTRY_DIRTY;
    uc_drop_locked(uc, cb);
  }
  r = fc_md_sync(uc->md);
out:
  pthread_mutex_unlock(&uc->lock);
  return r;
}

void
fc_ucache_dump_records(struct fc_ucache *uc, struct fc_md_record *recs)
{
  const struct fc_entry *table = uc->dev->table;
  uint32_t rank = 0;

  pthread_mutex_lock(&uc->lock);
  for (uint32_t i = uc->lru.head; i != CBLOCK_NONE; i = table[i].lru_next) {
    struct fc_md_record *rec = &recs[i];

    memset(rec, 0, sizeof *rec);
    rec->oblock = table[i].oblock;
    rec->volume_tag = uc->p.volume_tag;
    rec->flags = FC_MD_VALID | (table[i].flags & FC_ENTRY_DIRTY ? FC_MD_DIRTY : 0);
    rec->lru_rank = rank++;
  }
  pthread_mutex_unlock(&uc->lock);
}

void
fc_ucache_info(struct fc_ucache *uc, struct fc_ucache_info *info)
{
  pthread_mutex_lock(&uc->lock);
  info->block_size = uc->bs;
  info->size = uc->origin->size;
  info->quota_blocks = uc->p.quota_blocks;
  info->cached_blocks = uc->map.count;
  info->dirty_blocks = uc->nr_dirty;
  info->memory_bytes = sizeof *uc + fc_blockmap_memory(&uc->map) +
    (uc->staging.slots ? ((size_t)uc->staging.mask + 1) * 8 + (uc->staging.mask + 1) / 2 : 0);
  pthread_mutex_unlock(&uc->lock);
}

uint32_t
fc_ucache_dirty(struct fc_ucache *uc)
{
  uint32_t n;

  pthread_mutex_lock(&uc->lock);
  n = uc->nr_dirty;
  pthread_mutex_unlock(&uc->lock);
  return n;
}

struct fc_stats *
fc_ucache_stats(struct fc_ucache *uc)
{
  return &uc->stats;
}

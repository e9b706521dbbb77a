/* SPDX-License-Identifier: Apache-2.0 */
/* Start-up recovery: re-attach the persisted volumes and give each one
 * back the cache blocks its records name.
 *
 * After a clean shutdown every record is current, so the whole cache comes
 * back warm, in its old LRU order.  After a process crash with no reboot
 * every record is current (warm.h).  After a reboot only the dirty records
 * a flush vouched for (FC_MD_SYNCED: durable.c) are trusted: a clean one
 * may name data that never reached the disk, and so may a dirty one
 * written after the last flush, whose write the VM may lose.
 * Anything that could lose acknowledged data (a corrupt record, a dirty
 * block of an unknown volume or past its origin's end) stops the start
 * with a message that says what to do.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "ucache_engine_priv.h"

#define CHUNK 65536u

struct found {
  uint32_t cb;
  uint32_t rank;
  struct fc_md_record rec;
};

struct found_list {
  struct found *v;
  uint32_t n, cap;
};

static int
push(struct found_list *l, const struct found *f)
{
  if (l->n == l->cap) {
    uint32_t cap = l->cap ? l->cap * 2 : 64;
    struct found *nv = realloc(l->v, cap * sizeof *nv);
    if (!nv)
      return -ENOMEM;
    l->v = nv;
    l->cap = cap;
  }
  l->v[l->n++] = *f;
  return 0;
}

/* Least recently used first, so pushing each at the LRU head rebuilds
 * the old order. */
static int
by_rank_desc(const void *a, const void *b)
{
  uint32_t ra = ((const struct found *)a)->rank, rb = ((const struct found *)b)->rank;
  return ra < rb ? 1 : ra > rb ? -1 : 0;
}

/* Before its cache records are matched: open the origin and build the
 * ucache; a volume that cannot be opened stays listed, unavailable. */
static int
prepare_ucache(struct fc_host *host, struct fc_volume *v)
{
  int r = uc_volume_new(v);

  if (r)
    return r;
  if (uc_volume_prepare(host, v, v->error, sizeof v->error))
    log_error("volume %s is unavailable: %s", v->p.id, v->error);
  return 0;
}

static struct fc_volume *
by_tag(struct fc_host *host, uint64_t tag)
{
  for (unsigned i = 0; i < host->nr_volumes; i++)
    if (host->volumes[i]->p.tag == tag)
      return host->volumes[i];
  return NULL;
}

/* After a crash with no reboot (or a clean stop by an agent that wrote no
 * FC_MD_SYNCED): the cache file's data is what the dirty records name, so
 * sync it and vouch for the ones kept in lists, as the flush that never
 * came would have.  (From the lists: no second read of cache.meta.) */
static int
vouch_all(struct fc_host *host, struct found_list *lists, char *err,
          size_t errlen)
{
  int r = fc_cachedev_sync(UCE(host)->dev);

  if (r)
    snprintf(err, errlen, "cannot sync the cache file: %s", strerror(-r));
  for (unsigned k = 0; k < host->nr_volumes && !r; k++) {
    for (uint32_t i = 0; i < lists[k].n && !r; i++) {
      struct found *f = &lists[k].v[i];

      if ((f->rec.flags & (FC_MD_DIRTY | FC_MD_SYNCED)) != FC_MD_DIRTY)
        continue;
      f->rec.flags |= FC_MD_SYNCED;
      r = fc_md_set(UCE(host)->md, to_cblock(f->cb), f->rec.oblock,
                    f->rec.volume_tag, f->rec.flags);
      if (r)
        snprintf(err, errlen, "cannot update the metadata record of cache "
                 "block %u: %s", f->cb, strerror(-r));
    }
  }
  if (!r)
    r = fc_md_sync(UCE(host)->md);
  return r;
}

/* was_clean: a clean shutdown wrote every record; same_boot: a process
 * crash with no reboot since left every record current (warm.h). */
static int
scan_records(struct fc_host *host, bool was_clean, bool same_boot,
             struct found_list *lists, char *err, size_t errlen)
{
  struct fc_md_record *buf = malloc(CHUNK * sizeof *buf);
  uint32_t nr = UCE(host)->md->nr_blocks, dropped = 0, unflushed = 0;
  uint32_t vouched = 0;
  int r = 0;

  if (!buf)
    return -ENOMEM;
  for (uint32_t first = 0; first < nr && !r; first += CHUNK) {
    uint32_t n = nr - first < CHUNK ? nr - first : CHUNK;

    r = fc_md_read(UCE(host)->md, first, n, buf);
    for (uint32_t i = 0; i < n && !r; i++) {
      const struct fc_md_record *rec = &buf[i];
      bool dirty = rec->flags & FC_MD_DIRTY;
      struct fc_volume *v;
      bool unflushed_here;

      if (!fc_md_record_ok(rec)) {
        r = -EBADMSG;
        snprintf(err, errlen, "cache metadata record of cache block %u is corrupt, "
                 "so whether it held unwritten data is unknown; refusing to start. "
                 "Move %s/cache.meta aside to start with an empty cache (any "
                 "unwritten data in it is then lost)", first + i, host->cfg.state_dir);
        break;
      }
      if (!(rec->flags & FC_MD_VALID))
        continue;
      /* After a power cut a dirty record no flush vouched for may have
       * reached the disk before its data: the block may hold anything.
       * Its write was never flushed, so dropping it is allowed.  (After a
       * process crash the page cache holds the data: vouch_all.) */
      unflushed_here = dirty && !(rec->flags & FC_MD_SYNCED) && !was_clean &&
                       !same_boot;
      v = by_tag(host, rec->volume_tag);
      if (!v && dirty && !unflushed_here) {
        r = -EUCLEAN;
        snprintf(err, errlen, "cache block %u holds unwritten data of a volume "
                 "with tag %016llx that is not in %s; refusing to start rather "
                 "than lose it. Restore that volume's state file", first + i,
                 (unsigned long long)rec->volume_tag, host->volumes_dir);
        break;
      }
      /* After a crash, a volume caught in a live migration may have had
       * its origin written from the other host since: its clean blocks
       * are not kept (after a clean shutdown settling sorts them out). */
      if (unflushed_here || !v ||
          (!dirty && !was_clean && (!same_boot || v->p.migration[0]))) {
        /* Cleared, so that a free block never carries a record. */
        r = fc_md_forget(UCE(host)->md, to_cblock(first + i));
        if (r)
          snprintf(err, errlen, "cannot clear the metadata record of cache "
                   "block %u: %s", first + i, strerror(-r));
        if (unflushed_here)
          unflushed++;
        else
          dropped++;
        continue;
      }
      vouched += dirty && !(rec->flags & FC_MD_SYNCED);
      for (unsigned k = 0; k < host->nr_volumes; k++) {
        if (host->volumes[k] == v) {
          r = push(&lists[k], &(struct found){ first + i, rec->lru_rank, *rec });
          break;
        }
      }
    }
  }
  free(buf);
  if (!r && vouched)
    r = vouch_all(host, lists, err, errlen);
  if (!r && unflushed)
    log_warning("recovery: dropped %u dirty cache blocks written after the "
                "last flush: the machine rebooted, so their data may never "
                "have reached the cache file (the VM never had them flushed)",
                unflushed);
  if (!r && dropped)
    log_info("recovery: dropped %u clean cache blocks (%s)", dropped,
             was_clean || same_boot ? "no volume owns them, or a live "
             "migration of theirs did not complete" :
             "the machine rebooted since the agent last ran, or the agent "
             "could not keep its records current");
  return r;
}

static int
give_back(struct fc_host *host, struct fc_volume *v, struct found_list *l,
          char *err, size_t errlen)
{
  if (l->n)
    qsort(l->v, l->n, sizeof *l->v, by_rank_desc);
  if (!UV(v)->uc) {
    UV(v)->held = malloc((l->n ? l->n : 1) * sizeof *UV(v)->held);
    UV(v)->held_cb = malloc((l->n ? l->n : 1) * sizeof *UV(v)->held_cb);
    if (!UV(v)->held || !UV(v)->held_cb)
      return -ENOMEM;
  }
  for (uint32_t i = 0; i < l->n; i++) {
    const struct found *f = &l->v[i];
    bool dirty = f->rec.flags & FC_MD_DIRTY;

    if (!UV(v)->uc) {
      UV(v)->held[UV(v)->nr_held] = f->rec;
      UV(v)->held_cb[UV(v)->nr_held++] = f->cb;
      UV(v)->nr_held_dirty += dirty;
      fc_cachedev_claim(UCE(host)->dev, to_cblock(f->cb));
      continue;
    }
    int r = fc_ucache_adopt(UV(v)->uc, to_cblock(f->cb), to_oblock(f->rec.oblock), dirty);
    if (r == 0) {
      fc_cachedev_claim(UCE(host)->dev, to_cblock(f->cb));
    } else if (!dirty) {
      /* Not taken (past the quota, or a second record of the same
       * block): its record goes, the block is free. */
      r = fc_md_forget(UCE(host)->md, to_cblock(f->cb));
      if (r) {
        snprintf(err, errlen, "cannot clear the metadata record of cache block "
                 "%u: %s", f->cb, strerror(-r));
        return r;
      }
    } else {
      snprintf(err, errlen, "cannot recover unwritten block %llu of volume %s from "
               "cache block %u: %s; refusing to start rather than lose it",
               (unsigned long long)f->rec.oblock, v->p.id, f->cb, strerror(-r));
      return r;
    }
  }
  return 0;
}

int
uc_recover(struct fc_host *host, bool was_clean, bool same_boot, char *err,
           size_t errlen)
{
  struct found_list lists[FC_MAX_VOLUMES] = { 0 };
  uint32_t bs = host->cfg.block_size;
  int r;

  r = fc_host_load_volumes(host, prepare_ucache, err, errlen);
  if (r)
    goto out;
  r = scan_records(host, was_clean, same_boot, lists, err, errlen);
  if (r)
    goto out;
  for (unsigned i = 0; i < host->nr_volumes && !r; i++)
    r = give_back(host, host->volumes[i], &lists[i], err, errlen);
  if (r)
    goto out;
  fc_cachedev_rebuild_free(UCE(host)->dev);
  for (unsigned i = 0; i < host->nr_volumes; i++) {
    struct fc_volume *v = host->volumes[i];
    r = uc_allocator_reserves(UCE(host)->alloc) ?
        fc_cachedev_reserve(UCE(host)->dev, (uint32_t)(v->p.cache_size / bs)) : 0;
    if (r) {
      snprintf(err, errlen, "the attached volumes' cache sizes add up to more than "
               "cache_size (%llu bytes); raise cache_size",
               (unsigned long long)host->cfg.cache_size);
      goto out;
    }
    if (lists[i].n)
      log_info("recovery: volume %s gets back %u cached blocks", v->p.id, lists[i].n);
  }
out:
  for (unsigned i = 0; i < FC_MAX_VOLUMES; i++)
    free(lists[i].v);
  return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The host's flash device, carved into dm-linear segments for the dmcache
 * engine.
 *
 * The device's first `capacity` bytes are divided into extents of
 * FC_FLASH_EXTENT bytes; each allocation names its owner ("vol-1/data",
 * "vol-1/meta") and may span several segments (a dm-linear table takes
 * one line per segment), so freed space is reusable even when it is
 * fragmented.  Accounting is exact: used + free == capacity, in extents.
 *
 * The table is persisted as text, one "owner start length" line per
 * segment (in extents), written with fsync + rename before any device is
 * built on it: a restarted agent rebuilds or adopts exactly the segments
 * it handed out.  Pure data structure: no device-mapper here.
 */
#ifndef FCACHE_FLASH_POOL_H
#define FCACHE_FLASH_POOL_H

#include <stddef.h>
#include <stdint.h>

#define FC_FLASH_EXTENT (1024u * 1024u)
#define FC_FLASH_OWNER_MAX 80

struct fc_flash_seg {
  char owner[FC_FLASH_OWNER_MAX];
  uint64_t start;               /* extent number on the device */
  uint64_t len;                 /* extents */
};

struct fc_flash_pool {
  uint64_t nr_extents;          /* capacity / FC_FLASH_EXTENT */
  struct fc_flash_seg *segs;    /* sorted by start, never overlapping */
  unsigned nr_segs, cap_segs;
};

/* capacity is rounded down to whole extents. */
void fc_flash_pool_init(struct fc_flash_pool *p, uint64_t capacity);
void fc_flash_pool_fini(struct fc_flash_pool *p);

/* Allocate ceil(bytes / extent) extents for owner, first fit, lowest
 * addresses first.  -EEXIST if owner already holds space, -ENOSPC (and
 * nothing allocated) if the free extents do not suffice. */
int fc_flash_pool_alloc(struct fc_flash_pool *p, const char *owner, uint64_t bytes);
/* Give back every segment of owner; returns extents freed. */
uint64_t fc_flash_pool_free(struct fc_flash_pool *p, const char *owner);

uint64_t fc_flash_pool_used(const struct fc_flash_pool *p);      /* extents */
uint64_t fc_flash_pool_owned(const struct fc_flash_pool *p, const char *owner);
/* The segments of owner in logical order (the order of the dm-linear
 * table); returns how many were stored (at most max). */
unsigned fc_flash_pool_segments(const struct fc_flash_pool *p, const char *owner,
                                const struct fc_flash_seg **out, unsigned max);

int fc_flash_pool_save(const struct fc_flash_pool *p, const char *path,
                       char *err, size_t errlen);
/* Load over an initialised pool.  A missing file is an empty pool.  A
 * segment past the capacity or overlapping another is refused: the
 * device may hold data another volume owns. */
int fc_flash_pool_load(struct fc_flash_pool *p, const char *path,
                       char *err, size_t errlen);

#endif

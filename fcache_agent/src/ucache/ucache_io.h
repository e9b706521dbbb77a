/* SPDX-License-Identifier: Apache-2.0 */
/* What the request paths share: the helpers in ucache_io.c, and the
 * fc_io_ops callbacks of ucache_read.c and ucache_write.c that the table
 * in ucache_ops.c names.  Not a public header. */
#ifndef FCACHE_UCACHE_IO_H
#define FCACHE_UCACHE_IO_H

#include "ucache_priv.h"

/* The part of request [off, off+count) that falls in block b. */
struct seg {
  uint64_t start;     /* byte offset on the volume */
  uint32_t len;
  uint32_t in_block;  /* start - b * bs */
  uint32_t in_buf;    /* start - off */
};

/* Inline: on the hit path, once per block of every request. */
static inline struct seg
seg_of(const struct fc_ucache *uc, uint64_t b, uint64_t off, uint32_t count)
{
  uint64_t bstart = b * uc->bs;
  uint64_t s = off > bstart ? off : bstart;
  uint64_t e = off + count < bstart + uc->bs ? off + count : bstart + uc->bs;

  return (struct seg){ .start = s, .len = (uint32_t)(e - s),
                       .in_block = (uint32_t)(s - bstart),
                       .in_buf = (uint32_t)(s - off) };
}

/* Look up blocks [first, first+n) and pin the hits (BUSY). */
void uc_lookup_and_pin(struct fc_ucache *uc, uint64_t first, uint32_t n,
                       uint32_t *cbs, bool touch);
void uc_unpin(struct fc_ucache *uc, const uint32_t *cbs, uint32_t n);
/* What uc_lookup_and_pin's touch does, afterwards: for a read that looked
 * its blocks up untouched because it might have been given up.  uc_touch
 * looks them up again; uc_unpin_and_touch uses the pinned cbs and unpins
 * them under the same lock. */
void uc_touch(struct fc_ucache *uc, uint64_t first, uint32_t n);
void uc_unpin_and_touch(struct fc_ucache *uc, uint64_t first, uint32_t n,
                        const uint32_t *cbs);
/* Under uc->lock: the VM used cached block cb again: most recently used,
 * and one more reuse in the demand window (uc_entry_reuses). */
void uc_hit_locked(struct fc_ucache *uc, cblock_t cb);
/* Drop the clean blocks among cbs and forget them (CBLOCK_NONE). */
void uc_invalidate(struct fc_ucache *uc, uint32_t *cbs, uint32_t n);
/* The origin's I/O, counted in the stats.  Never under uc->lock: an
 * origin may take seconds to answer and every request of the volume
 * takes uc->lock. */
int uc_origin_read(struct fc_ucache *uc, void *buf, uint32_t len, uint64_t off);
int uc_origin_write(struct fc_ucache *uc, const void *buf, uint32_t len,
                    uint64_t off, bool fua);

/* The fc_io_ops callbacks: reads and prefetches in ucache_read.c, block
 * status in ucache_status.c, the rest in ucache_write.c. */
int uc_pread(void *handle, void *vbuf, uint32_t count, uint64_t off);
int uc_pread_start(void *handle, void *buf, uint32_t count, uint64_t off,
                   fc_io_done_fn *done, void *ctx, unsigned flags);
int uc_cache(void *handle, uint32_t count, uint64_t off);
int uc_block_status(void *handle, uint32_t count, uint64_t off,
                    struct fc_extent *ext, uint32_t max);
int uc_pwrite(void *handle, const void *vbuf, uint32_t count, uint64_t off,
              bool fua);
int uc_flush(void *handle);
int uc_trim(void *handle, uint32_t count, uint64_t off, bool fua);
int uc_zero(void *handle, uint32_t count, uint64_t off, bool fua,
            bool may_trim);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Block status (NBD's base:allocation) of a cached volume: which parts of
 * it are holes, so that a mirror, a backup or qemu-img convert can skip
 * them.
 *
 * A block cached dirty is data: the origin may still hold a hole there.
 * Every other block reads what the origin holds (a clean block is a copy
 * of it), so the origin's own block status answers for it, to the
 * sector.  Anything less sure is answered "data", which is always
 * correct: a false hole loses data in the client's copy, a false "data"
 * only costs reading it.  That is the answer during a live migration
 * (either side, before and after the switchover while blocks may be only
 * on the source), when the origin cannot tell, and when asking it fails.
 *
 * Order matters.  A block's cache state is looked at before the origin is
 * asked about it: a dirty block is written back to the origin (and the
 * origin flushed) before it becomes clean, so a block seen clean or
 * uncached already has its data at the origin.  Asking the origin first
 * could see the hole a write-back was about to fill, then find the block
 * clean.
 */
#include <errno.h>
#include <string.h>

#include "common/lockcheck.h"
#include "common/log.h"
#include "ucache_io.h"
#include "ucache_layer.h"

/* Blocks one answer looks at: the client asks again for the rest. */
#define BS_SCAN_BLOCKS 65536u
/* Blocks looked up per hold of the volume lock. */
#define BS_CHUNK_BLOCKS 4096u
/* Origin extents asked for at once. */
#define BS_ORIGIN_EXTENTS 64u

/* What the origin said about [start, end) of the current chunk, as a
 * cursor over its extents, refilled as the walk goes. */
struct origin_cursor {
  struct fc_origin_extent ext[BS_ORIGIN_EXTENTS];
  uint32_t n, i;
  uint64_t start;               /* offset of ext[i] */
  /* Extents asked for at once: 1 when the answer holds one (REQ_ONE,
   * which QEMU always sets), so that the origin describes only what is
   * needed; asked for the whole range, a server walks all of it on every
   * request, and qemu-img map over a volume of many extents slowed to a
   * crawl (several seconds for 3,000 extents in 64 MiB). */
  uint32_t want;
};

/* The answer being built: adjacent extents with equal flags merge. */
struct answer {
  struct fc_extent *ext;
  uint32_t max, n;
};

/* Is there a state in which the origin's answer may be wrong for blocks
 * the cache does not hold dirty?  Under uc->lock. */
static bool
unsure_locked(const struct fc_ucache *uc)
{
  FC_ASSERT_HELD(&uc->lock);
  return uc_layer_unsure_locked(uc);
}

/* The origin's flags at pos (inside [pos, chunk_end)), moving the cursor;
 * *until is where they stop applying.  An origin that fails to answer
 * says "data" for the rest of the chunk. */
static uint32_t
origin_flags(struct fc_ucache *uc, struct origin_cursor *oc, uint64_t pos,
             uint64_t chunk_end, uint64_t *until)
{
  for (;;) {
    while (oc->i < oc->n && oc->start + oc->ext[oc->i].length <= pos)
      oc->start += oc->ext[oc->i++].length;
    if (oc->i < oc->n) {
      *until = oc->start + oc->ext[oc->i].length;
      return oc->ext[oc->i].flags;
    }
    int r = fc_origin_block_status(uc->origin, (uint32_t)(chunk_end - pos),
                                   pos, oc->ext, oc->want);
    if (r <= 0) {
      log_debug("ucache: origin block status at %llu: %s; answering data",
                (unsigned long long)pos, r ? strerror(-r) : "empty");
      oc->ext[0] = (struct fc_origin_extent){
        .length = (uint32_t)(chunk_end - pos), .flags = 0 };
      r = 1;
    }
    oc->n = (uint32_t)r;
    oc->i = 0;
    oc->start = pos;
  }
}

/* Add [len bytes, flags]; false when the answer is full. */
static bool
answer_add(struct answer *a, uint32_t len, uint32_t flags)
{
  if (a->n > 0 && a->ext[a->n - 1].flags == flags) {
    a->ext[a->n - 1].length += len;   /* the total fits: it is <= count */
    return true;
  }
  if (a->n == a->max)
    return false;
  a->ext[a->n++] = (struct fc_extent){ .length = len, .flags = flags };
  return true;
}

/* The flags all of [pos, end) shares at the origin. */
static uint32_t
segment_flags(struct fc_ucache *uc, struct origin_cursor *oc, uint64_t pos,
              uint64_t end, uint64_t chunk_end)
{
  uint32_t flags = FC_EXTENT_HOLE | FC_EXTENT_ZERO;

  /* A block is a hole only if all of it is; zero likewise. */
  while (pos < end && flags) {
    uint64_t until;
    uint32_t f = origin_flags(uc, oc, pos, chunk_end, &until);

    flags &= (f & FC_ORIGIN_HOLE ? FC_EXTENT_HOLE : 0) |
             (f & FC_ORIGIN_ZERO ? FC_EXTENT_ZERO : 0);
    pos = until;
  }
  return flags;
}

/* The origin's own extents over [*pos, end), part of a block the cache
 * does not hold dirty, added to the answer.  Such a block reads what the
 * origin holds (a clean copy is the origin's data), so the origin's map
 * holds for it byte for byte, not only for the whole block: with cache
 * blocks larger than the origin's (64 KiB over a filesystem's 4 KiB) a
 * block half data is still half a hole, as nbdkit would say.  In whole
 * sectors, though: a sector the origin describes in pieces takes the
 * flags they share, since a client that honours the export's 512-byte
 * minimum cannot ask about less.  False when the answer is full (*pos is
 * then where it stopped). */
static bool
origin_segments(struct fc_ucache *uc, struct origin_cursor *oc,
                struct answer *a, uint64_t *pos, uint64_t end,
                uint64_t chunk_end)
{
  uint64_t p = *pos;
  bool room = true;

  while (p < end && room) {
    uint64_t until, stop;
    uint32_t f = origin_flags(uc, oc, p, chunk_end, &until), flags;

    stop = until < end ? until : end;
    flags = (f & FC_ORIGIN_HOLE ? FC_EXTENT_HOLE : 0) |
            (f & FC_ORIGIN_ZERO ? FC_EXTENT_ZERO : 0);
    if (stop < end && stop % 512) {
      if (stop / 512 * 512 > p) {
        stop = stop / 512 * 512;
      } else {
        stop = (stop + 511) / 512 * 512;
        if (stop > end)
          stop = end;
        flags = segment_flags(uc, oc, p, stop, chunk_end);
      }
    }
    room = answer_add(a, (uint32_t)(stop - p), flags);
    if (room)
      p = stop;
  }
  *pos = p;
  return room;
}

int
uc_block_status(void *handle, uint32_t count, uint64_t off,
                struct fc_extent *ext, uint32_t max)
{
  struct fc_ucache *uc = handle;
  struct answer a = { .ext = ext, .max = max, .n = 0 };
  uint64_t first = off / uc->bs, pos = off, end;
  uint64_t dirty[BS_CHUNK_BLOCKS / 64];
  struct origin_cursor oc;
  bool full = false;

  if (count > (first + BS_SCAN_BLOCKS) * uc->bs - off)
    count = (uint32_t)((first + BS_SCAN_BLOCKS) * uc->bs - off);
  end = off + count;
  while (pos < end && !full) {
    uint64_t b0 = pos / uc->bs;
    uint64_t chunk_end = (b0 + BS_CHUNK_BLOCKS) * uc->bs;
    bool unsure, any_dirty;

    if (chunk_end > end)
      chunk_end = end;
    memset(dirty, 0, sizeof dirty);
    pthread_mutex_lock(&uc->lock);
    unsure = unsure_locked(uc);
    any_dirty = uc->nr_dirty > 0;
    for (uint64_t b = b0; !unsure && any_dirty && b * uc->bs < chunk_end &&
                          b < uc->nr_oblocks; b++) {
      cblock_t cb = uc_lookup_locked(uc, to_oblock(b));

      if (cb.n != CBLOCK_NONE &&
          (uc->dev->table[cb.n].flags & FC_ENTRY_DIRTY))
        dirty[(b - b0) / 64] |= UINT64_C(1) << ((b - b0) % 64);
    }
    pthread_mutex_unlock(&uc->lock);
    if (unsure) {
      full = !answer_add(&a, (uint32_t)(end - pos), 0);
      break;
    }
    oc.n = oc.i = 0;
    oc.want = max == 1 ? 1 : BS_ORIGIN_EXTENTS;
    while (pos < chunk_end && !full) {
      uint64_t b = pos / uc->bs, bend = (b + 1) * uc->bs;
      bool is_dirty = dirty[(b - b0) / 64] & (UINT64_C(1) << ((b - b0) % 64));

      if (bend > chunk_end)
        bend = chunk_end;
      if (is_dirty) {
        full = !answer_add(&a, (uint32_t)(bend - pos), 0);
        pos = bend;
      } else {
        full = !origin_segments(uc, &oc, &a, &pos, bend, chunk_end);
      }
    }
  }
  return (int)a.n;
}

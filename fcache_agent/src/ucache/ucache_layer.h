/* SPDX-License-Identifier: Apache-2.0 */
/* The hook points of a volume's data path: where something layered on
 * the cache -- a live migration, either end of it -- may wait, refuse,
 * redirect or serve a request.  The request paths (ucache_read.c,
 * ucache_write.c, blocks.c, writeback.c, ucache_share.c, ucache_status.c)
 * call these and nothing else of the layer; the layer's state is its own
 * (ucache_migr_priv.h, behind uc->m), as a storage move's is behind an
 * origin (origin/origin_stack.c).  The layer is ucache_migr_hooks.c and
 * the ucache_migr*.c files behind it.
 *
 * Cost: a request first tests uc_layer_on(), one atomic load; only when
 * it is set does it call the hook points that take uc->lock.  The hooks
 * marked "any time" are on paths that go to the origin or take the lock
 * anyway. */
#ifndef FCACHE_UCACHE_LAYER_H
#define FCACHE_UCACHE_LAYER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ucache_priv.h"

/* Is a layer active on the volume?  False: no hook below but the "any
 * time" ones needs calling. */
static inline bool
uc_layer_on(const struct fc_ucache *uc)
{
  return atomic_load(&uc->layer_on);
}

/* The volume's layer state: set up at create (-ENOMEM), gone at destroy. */
int uc_layer_init(struct fc_ucache *uc);
void uc_layer_destroy(struct fc_ucache *uc);

/* When on, a write, trim or zero at its start, holding nothing: waits
 * while the destination's gate is closed; -EROFS on a frozen source (the
 * VM has moved on: this host must not diverge), -EIO when the gate can
 * no longer open. */
int uc_layer_before_change(struct fc_ucache *uc);

/* What a change of blocks' data does to the layer. */
enum uc_layer_change {
  UC_CHANGE_WRITE,    /* a write: the cache may take it */
  UC_CHANGE_ORIGIN,   /* a trim or zero: the origin changes under every block */
};

/* When on, under the stripes of [first, first+n), before the data of
 * those blocks changes (off, count: the bytes the VM named).  Late copies
 * of them become stale; a partial write first fetches a block only the
 * source holds; for UC_CHANGE_ORIGIN the pinned ones among them are
 * released (uc_layer_to_origin).  0, or 1 for a write that must go
 * around the cache (the cache is not attached yet), or -errno. */
int uc_layer_changing(struct fc_ucache *uc, uint64_t first, uint32_t n,
                      uint64_t off, uint32_t count, enum uc_layer_change how);

/* Any time, under block b's stripe, before a write of it to the origin:
 * a block pinned to the source is recorded durably as superseded there,
 * and unpinned.  0 or -EIO (the write must be refused). */
int uc_layer_to_origin(struct fc_ucache *uc, uint64_t b);

/* When on, a flush at its start: 1 when there is nothing to make durable
 * (no write has been let through yet), 0 to flush as usual, or -errno. */
int uc_layer_flush(struct fc_ucache *uc);

/* What a read does once the layer has seen it. */
enum uc_layer_read {
  UC_READ_SERVED = 0, /* buf holds the data */
  UC_READ_CACHE = 1,  /* read through the cache as usual */
  UC_READ_ORIGIN = 2, /* read the origin: the cache is not attached yet */
};

/* When on, a read at its start, holding nothing: an enum uc_layer_read,
 * or -errno. */
int uc_layer_read(struct fc_ucache *uc, void *buf, uint32_t count, uint64_t off);

/* Any time, under the block's stripe, for a miss: may the layer hold
 * this block (so the caller must ask uc_layer_read_miss before the
 * origin)? */
bool uc_layer_serves_misses(const struct fc_ucache *uc);
/* Under the block's stripe: 1 if the layer does not hold the block (the
 * caller reads the origin), 0 if data holds it (installed), or -errno. */
int uc_layer_read_miss(struct fc_ucache *uc, oblock_t ob, void *data);

/* Any time, under uc->lock: must this block's data stay away from the
 * origin for now (write-back skips it)? */
bool uc_layer_pinned_locked(struct fc_ucache *uc, oblock_t ob);

/* Any time, under uc->lock: may the origin's answer be wrong for blocks
 * the cache does not hold dirty? */
bool uc_layer_unsure_locked(const struct fc_ucache *uc);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Whose block goes when a volume under its share needs one and the flash
 * is full (CloudCache §4.3, replacement-time enforcement): the volume most
 * over its share.  One rule for the agent (ucache/pool.c) and the trace
 * replayer (replay/cache.c), so the replayer's figures are the agent's.
 *
 * Why the most over and not, say, round robin among those over: every
 * block taken then cuts the largest excess, so the cache reaches the
 * shares the allocator computed in the fewest replacements that move the
 * worst one first, and the blocks that go are those of the volume whose
 * demand fell furthest below what it holds (the least valuable by the
 * allocator's own estimate).  Round robin takes as much from a volume one
 * block over as from one a GiB over: the small excess is gone at once
 * while the large one lingers for windows, and a volume can be pushed to
 * its share while another still holds far more than its own.  Ties (equal
 * excess) go round robin from a cursor, so equal volumes give in turn. */
#ifndef FCACHE_ALLOC_VICTIM_H
#define FCACHE_ALLOC_VICTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One volume that might give a block up, as the caller saw it. */
struct fc_victim_cand {
  uint64_t used;        /* blocks it holds */
  uint64_t share;       /* blocks it may hold */
  bool skip;            /* never chosen: the taker, a busy or a tried one */
};

/* The caller's state between picks: where a tie starts.  Zeroed at first;
 * no other state lives in the module. */
struct fc_victim_cursor {
  size_t next;
};

/* May c give a block up?  It holds one, and it is over its share, or,
 * with under_ok, it may be at or under it (a caller whose shares may add
 * up to more than the cache: the replayer's limits under its lru policy;
 * the least under then goes first). */
bool fc_victim_may_give(const struct fc_victim_cand *c, bool under_ok);

/* The index of the volume to take from among c[0..n), the one of largest
 * used - share that may give (fc_victim_may_give), ties from cur->next
 * on; cur->next moves past it.  -ENOENT when none may give; -EINVAL on
 * bad input.  O(n), no allocation. */
int fc_victim_pick(const struct fc_victim_cand *c, size_t n, bool under_ok,
                   struct fc_victim_cursor *cur, size_t *out);

#endif

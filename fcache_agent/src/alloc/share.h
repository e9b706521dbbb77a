/* SPDX-License-Identifier: Apache-2.0 */
/* Cache shares across the volumes of one host (CloudCache §4.3), computed
 * at every window from the volumes' predicted RWSS.  A volume's cache_size
 * is its upper bound, not a reservation, so the volumes may together ask
 * for more than the flash: shares are then cut in proportion to demand.
 * Spare capacity (demand below the flash) is either given out in
 * proportion to demand or left idle to spare the flash writes.  Shares are
 * enforced at replacement time by the cache, not by moving data. */
#ifndef FCACHE_ALLOC_SHARE_H
#define FCACHE_ALLOC_SHARE_H

#include <stddef.h>
#include <stdint.h>

#define FC_SHARE_UNKNOWN UINT64_MAX

enum fc_spare_mode {
  FC_SPARE_PROPORTIONAL,
  FC_SPARE_IDLE,
};

struct fc_share_demand {
  uint64_t predicted;   /* blocks; FC_SHARE_UNKNOWN before a first window */
  uint64_t limit;       /* blocks: the volume's cache_size, its upper bound */
};

/* share[i] for each of the n volumes, in blocks:
 *  1. want = min(limit, ceil(predicted * (1 + headroom))); a volume with
 *     no prediction yet wants its limit;
 *  2. if the wants exceed capacity, share = want cut in proportion (the sum
 *     never exceeds capacity; rounding leftovers go to the largest wants);
 *  3. otherwise share = want, plus, with FC_SPARE_PROPORTIONAL, the spare
 *     split in proportion to want and capped at limit (repeated until the
 *     spare is gone or every volume is at its limit; the last few blocks
 *     go one each to the largest wants).  A volume that wants 0 (predicted
 *     no reuse) gets no spare, so with no wants at all the spare idles.
 * headroom >= 0 (the agent uses 0.10).  -EINVAL on bad input. */
int fc_share_compute(const struct fc_share_demand *d, size_t n, uint64_t capacity,
                     double headroom, enum fc_spare_mode spare, uint64_t *share);

const char *fc_spare_mode_name(enum fc_spare_mode m);
/* "proportional", "idle"; -EINVAL otherwise. */
int fc_spare_mode_parse(const char *name, enum fc_spare_mode *out);

#endif

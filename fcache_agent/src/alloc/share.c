/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "share.h"
#include "common/enum_names.h"

typedef unsigned __int128 u128;

/* headroom is a decimal fraction (0.10) whose binary value is a hair
 * above it: 30 * 0.1 comes out as 3.0000000000000004.  Taking this much
 * off before rounding up keeps a whole number of blocks whole. */
#define ROUNDING 1e-12

static uint64_t
add_capped(uint64_t a, uint64_t b)
{
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ceil(predicted * (1 + headroom)), computed as predicted plus the extra
 * so that the predicted blocks themselves stay exact above 2^53. */
static uint64_t
want_of(const struct fc_share_demand *d, double headroom)
{
  double extra;
  uint64_t want;

  if (d->predicted == FC_SHARE_UNKNOWN)
    return d->limit;
  extra = ceil((double)d->predicted * headroom * (1.0 - ROUNDING));
  want = extra >= 18446744073709551615.0
           ? UINT64_MAX : add_capped(d->predicted, (uint64_t)extra);
  return want < d->limit ? want : d->limit;
}

/* The volumes in order of want, largest first, lowest index first among
 * equals: the volume after prev (the first when prev == n), n after the
 * last.  Walking the order this way needs no sorted copy, so computing
 * shares cannot fail for memory; n is a host's volumes, tens to hundreds,
 * and the walk runs once per window. */
static size_t
next_by_want(const struct fc_share_demand *d, size_t n, double headroom, size_t prev)
{
  uint64_t pw = prev < n ? want_of(&d[prev], headroom) : 0;
  uint64_t bw = 0;
  size_t best = n;

  for (size_t i = 0; i < n; i++) {
    uint64_t w = want_of(&d[i], headroom);

    if (prev < n && !(w < pw || (w == pw && i > prev)))
      continue;
    if (best == n || w > bw) {
      best = i;
      bw = w;
    }
  }
  return best;
}

/* Wants beyond the capacity: each gets floor(want * capacity / total);
 * the fractions add up to fewer blocks than there are volumes with a
 * fraction, so one walk down the wants hands the rest out, one block each,
 * never above a want (floor(want * c / t) < want when c < t). */
static void
cut_in_proportion(const struct fc_share_demand *d, size_t n, uint64_t capacity,
                  double headroom, u128 total, uint64_t *share)
{
  uint64_t given = 0;

  for (size_t i = 0; i < n; i++) {
    share[i] = (uint64_t)((u128)want_of(&d[i], headroom) * capacity / total);
    given += share[i];
  }
  for (size_t i = next_by_want(d, n, headroom, n); i < n && given < capacity;
       i = next_by_want(d, n, headroom, i))
    if (share[i] < want_of(&d[i], headroom)) {
      share[i]++;
      given++;
    }
}

/* The spare goes out in proportion to want among the volumes still under
 * their limit; a volume that reaches its limit drops out and the next
 * round splits what it could not take.  When the spare is down to fewer
 * blocks than there are takers, they get one each, largest want first.
 * A volume that wants nothing gets nothing: its predicted reuse is 0, so
 * cache would not help it. */
static void
give_spare(const struct fc_share_demand *d, size_t n, double headroom,
           uint64_t spare, uint64_t *share)
{
  while (spare > 0) {
    u128 takers = 0;
    uint64_t given = 0;

    for (size_t i = 0; i < n; i++)
      if (share[i] < d[i].limit)
        takers += want_of(&d[i], headroom);
    if (takers == 0)
      return;
    for (size_t i = 0; i < n; i++) {
      uint64_t w = want_of(&d[i], headroom), add;

      if (share[i] >= d[i].limit || w == 0)
        continue;
      add = (uint64_t)((u128)spare * w / takers);
      if (add > d[i].limit - share[i])
        add = d[i].limit - share[i];
      share[i] += add;
      given += add;
    }
    if (given == 0)
      for (size_t i = next_by_want(d, n, headroom, n); i < n && given < spare;
           i = next_by_want(d, n, headroom, i))
        if (share[i] < d[i].limit && want_of(&d[i], headroom) > 0) {
          share[i]++;
          given++;
        }
    spare -= given;
  }
}

int
fc_share_compute(const struct fc_share_demand *d, size_t n, uint64_t capacity,
                 double headroom, enum fc_spare_mode spare, uint64_t *share)
{
  u128 total = 0;

  if ((n > 0 && (!d || !share)) || !isfinite(headroom) || headroom < 0.0 ||
      (spare != FC_SPARE_PROPORTIONAL && spare != FC_SPARE_IDLE))
    return -EINVAL;
  for (size_t i = 0; i < n; i++)
    total += want_of(&d[i], headroom);
  if (total > capacity) {
    cut_in_proportion(d, n, capacity, headroom, total, share);
    return 0;
  }
  for (size_t i = 0; i < n; i++)
    share[i] = want_of(&d[i], headroom);
  if (spare == FC_SPARE_PROPORTIONAL)
    give_spare(d, n, headroom, capacity - (uint64_t)total, share);
  return 0;
}

static const char *const spare_names[] = {
  [FC_SPARE_PROPORTIONAL] = "proportional",
  [FC_SPARE_IDLE] = "idle",
};

FC_DEFINE_ENUM_NAMES(fc_spare_mode, enum fc_spare_mode, spare_names)

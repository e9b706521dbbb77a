/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>

#include "victim.h"

bool
fc_victim_may_give(const struct fc_victim_cand *c, bool under_ok)
{
  return !c->skip && c->used > 0 && (under_ok || c->used > c->share);
}

/* a->used - a->share > b->used - b->share, rearranged so that neither
 * side goes below 0 (a volume under its share).  The counts are blocks of
 * one cache, far below 2^63, so the sums do not wrap. */
static bool
more_over(const struct fc_victim_cand *a, const struct fc_victim_cand *b)
{
  return a->used + b->share > b->used + a->share;
}

int
fc_victim_pick(const struct fc_victim_cand *c, size_t n, bool under_ok,
               struct fc_victim_cursor *cur, size_t *out)
{
  size_t best = n;

  if ((!c && n) || !cur || !out)
    return -EINVAL;
  for (size_t k = 0; k < n; k++) {
    size_t i = (cur->next + k) % n;

    if (!fc_victim_may_give(&c[i], under_ok))
      continue;
    /* Strictly more: of equals, the first from the cursor stays. */
    if (best == n || more_over(&c[i], &c[best]))
      best = i;
  }
  if (best == n)
    return -ENOENT;
  cur->next = best + 1;
  *out = best;
  return 0;
}

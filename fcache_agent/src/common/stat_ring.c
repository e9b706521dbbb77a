/* SPDX-License-Identifier: Apache-2.0 */
/* The per-minute ring of hit and miss snapshots (stat_ring.h). */
#include <errno.h>
#include <stdlib.h>

#include "stat_ring.h"

int
fc_stat_ring_init(struct fc_stat_ring *r)
{
  r->s = calloc(FC_STAT_RING_SLOTS, sizeof *r->s);
  r->head = 0;
  r->n = 0;
  return r->s ? 0 : -ENOMEM;
}

void
fc_stat_ring_free(struct fc_stat_ring *r)
{
  free(r->s);
  r->s = NULL;
  r->head = r->n = 0;
}

void
fc_stat_ring_clear(struct fc_stat_ring *r)
{
  r->head = r->n = 0;
}

/* The i-th newest snapshot (0: the newest); i < r->n. */
static const struct fc_stat_snap *
nth_newest(const struct fc_stat_ring *r, uint32_t i)
{
  return &r->s[(r->head + FC_STAT_RING_SLOTS - 1 - i) % FC_STAT_RING_SLOTS];
}

bool
fc_stat_ring_offer(struct fc_stat_ring *r, uint64_t now_s, uint64_t hits,
                   uint64_t misses)
{
  if (r->n > 0) {
    const struct fc_stat_snap *last = nth_newest(r, 0);

    if (now_s < last->t_s || hits < last->hits || misses < last->misses)
      fc_stat_ring_clear(r);
    else if (now_s - last->t_s < FC_STAT_RING_STEP_S)
      return false;
  }
  r->s[r->head] = (struct fc_stat_snap){ .t_s = now_s, .hits = hits, .misses = misses };
  r->head = (r->head + 1) % FC_STAT_RING_SLOTS;
  if (r->n < FC_STAT_RING_SLOTS)
    r->n++;
  return true;
}

struct fc_stat_window
fc_stat_ring_window(const struct fc_stat_ring *r, uint64_t now_s, uint64_t window_s,
                    uint64_t hits, uint64_t misses)
{
  struct fc_stat_window w = { 0 };
  const struct fc_stat_snap *from = NULL;

  /* Newest to oldest: the last one still inside the window is its start. */
  for (uint32_t i = 0; i < r->n; i++) {
    const struct fc_stat_snap *s = nth_newest(r, i);

    if (s->t_s > now_s)
      continue;
    if (now_s - s->t_s > window_s)
      break;
    from = s;
  }
  if (!from)
    return w;
  w.covered_s = now_s - from->t_s;
  w.hits = hits >= from->hits ? hits - from->hits : 0;
  w.misses = misses >= from->misses ? misses - from->misses : 0;
  return w;
}

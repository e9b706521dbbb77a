/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rws_priv.h"

/* 2^64 as a double: the rate is (limit + 1) / 2^64. */
#define KEY_SPACE 18446744073709551616.0

/* The smallest bound, 4 KiB, still gives a sample of a few hundred
 * blocks; below that the estimate is noise. */
#define SAMPLED_MIN_BYTES 4096u

int
fc_rws_new(enum fc_rws_mode mode, size_t max_bytes, struct fc_rws **out)
{
  struct fc_rws *t;
  uint32_t cap;
  int r;

  switch (mode) {
  case FC_RWS_EXACT:
    /* The home slot takes 32 bits of the key: 2^31 slots is the end. */
    cap = 1u << 31;
    break;
  case FC_RWS_SAMPLED:
    if (max_bytes < SAMPLED_MIN_BYTES)
      return -EINVAL;
    cap = rws_sampled_slots(max_bytes);
    break;
  default:
    return -EINVAL;
  }
  t = calloc(1, sizeof *t);
  if (!t)
    return -ENOMEM;
  r = rws_table_init(&t->table, cap < RWS_EXACT_MIN_SLOTS ? cap : RWS_EXACT_MIN_SLOTS);
  if (r < 0)
    goto out;
  t->mode = mode;
  t->limit = UINT64_MAX;
  t->cap_slots = cap;
  t->max_used = rws_max_used(t->table.slots);
  *out = t;
  return 0;
out:
  free(t);
  return r;
}

void
fc_rws_free(struct fc_rws *t)
{
  if (!t)
    return;
  rws_table_destroy(&t->table);
  free(t);
}

/* The table grows until its cap; then, or when it cannot (no memory), it
 * samples in the table it has for the rest of the window rather than stop
 * counting new blocks: the sizes stay unbiased, and fc_rws_sample_rate
 * tells the caller.  (The exact tracker samples only when out of memory
 * or at 2^31 slots.) */
static void
make_room(struct fc_rws *t)
{
  if (t->limit == UINT64_MAX && rws_exact_grow(t))
    return;
  rws_sampled_evict(t);
}

void
fc_rws_access(struct fc_rws *t, uint64_t block)
{
  uint64_t key = rws_key_of(block);
  uint32_t s;

  t->accesses++;
  if (key > t->limit)
    return;
  s = rws_table_find(&t->table, key);
  if (t->table.counts[s]) {
    if (t->table.counts[s] < RWS_COUNT_MAX)
      t->table.counts[s]++;
    return;
  }
  if (t->table.used >= t->max_used) {
    make_room(t);
    if (key > t->limit || t->table.used >= t->max_used)
      return;
    s = rws_table_find(&t->table, key);
  }
  rws_table_put(&t->table, s, key, 1);
}

double
fc_rws_sample_rate(const struct fc_rws *t)
{
  return ((double)t->limit + 1.0) / KEY_SPACE;
}

/* A window's sizes are its tracked counts scaled up by the rate it ended
 * with: every block whose key is under the final limit was tracked from
 * its first access, since the limit only falls.  The rate starts again at
 * 1 at every window: a window much smaller than the last (the week after
 * a backup) is then measured from all its blocks, not from the few that
 * fall under the old limit, and a window that needs sampling lowers it
 * again for a bounded amount of work (some 45 passes over the table per
 * halving of the rate, each dropping 1/64 of the sample). */
void
fc_rws_close_window(struct fc_rws *t, struct fc_rws_sizes *out)
{
  uint64_t at_least[RWS_COUNT_MAX + 2] = { 0 };
  const struct rws_table *tb = &t->table;
  double rate = fc_rws_sample_rate(t);
  uint32_t used = tb->used;

  /* An idle window (a trace's gap, a volume nobody reads) saw no block:
   * every size is 0 and the table is clear already.  Not scanning it
   * keeps a long idle stretch, window after window, cheap. */
  if (used == 0) {
    memset(out, 0, sizeof *out);
    out->accesses = t->accesses;
    t->accesses = 0;
    t->limit = UINT64_MAX;
    rws_exact_shrink(t, 0);
    return;
  }
  for (uint32_t s = 0; s < tb->slots; s++)
    at_least[tb->counts[s]]++;
  /* at_least[c] holds the blocks seen exactly c times; make it >= c. */
  for (unsigned c = RWS_COUNT_MAX; c > 0; c--)
    at_least[c - 1] += at_least[c];
  memset(out, 0, sizeof *out);
  for (unsigned n = 0; n <= FC_RWS_MAX_N; n++) {
    double blocks = (double)at_least[n + 1] / rate;
    out->blocks[n] = (uint64_t)(blocks + 0.5);
  }
  out->accesses = t->accesses;

  t->accesses = 0;
  t->limit = UINT64_MAX;
  rws_table_clear(&t->table);
  rws_exact_shrink(t, used);
}

size_t
fc_rws_memory(const struct fc_rws *t)
{
  return sizeof *t + (size_t)t->table.slots * RWS_BYTES_PER_SLOT;
}

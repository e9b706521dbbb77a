/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "knee.h"
#include "rws_priv.h"   /* rws_key_of: the sampling hash of the RWS tracker */
#include "window_knee.h"

/* The one key rws_key_of gives that is never followed (the limit stays
 * below it): it marks an empty slot. */
#define EMPTY UINT64_MAX

struct fc_wknee {
  uint64_t limit;                     /* blocks whose key is above: not followed */
  uint32_t longest_s;
  uint32_t used;
  bool started;
  uint64_t start_ms;                  /* the first access followed */
  double accesses;                    /* followed accesses, decayed */
  double reuses[FC_WKNEE_BUCKETS];    /* by reuse time, decayed */
  uint64_t keys[FC_WKNEE_SLOTS];
  uint32_t last_s[FC_WKNEE_SLOTS];    /* seconds after start_ms */
};

int
fc_wknee_new(uint32_t longest_s, struct fc_wknee **out)
{
  struct fc_wknee *w;

  if (!out || longest_s == 0)
    return -EINVAL;
  w = calloc(1, sizeof *w);
  if (!w)
    return -ENOMEM;
  w->limit = EMPTY - 1;
  w->longest_s = longest_s;
  for (uint32_t i = 0; i < FC_WKNEE_SLOTS; i++)
    w->keys[i] = EMPTY;
  *out = w;
  return 0;
}

void
fc_wknee_free(struct fc_wknee *w)
{
  free(w);
}

size_t
fc_wknee_memory(const struct fc_wknee *w)
{
  return sizeof *w;
}

/* The key's low bits: uniform (keys are uniform below the limit), and
 * still so however far the limit falls, which the high bits are not. */
static uint32_t
slot_of(uint64_t key)
{
  return (uint32_t)key & (FC_WKNEE_SLOTS - 1);
}

/* The slot holding key, or the empty one where it would go. */
static uint32_t
find(const struct fc_wknee *w, uint64_t key)
{
  uint32_t i = slot_of(key);

  while (w->keys[i] != EMPTY && w->keys[i] != key)
    i = (i + 1) & (FC_WKNEE_SLOTS - 1);
  return i;
}

/* Forget the blocks above the limit and those not seen for longer than
 * the longest window, then put every entry left where a probe from its
 * home finds it: linear probing cannot just blank a slot.  The second
 * pass starts after an empty slot, so no run of entries wraps past the
 * point where it begins, and each entry only ever moves towards its
 * home.  In place: this runs on the I/O path, whose stack is small. */
static void
filter(struct fc_wknee *w, uint32_t now_s)
{
  uint32_t start = 0;

  w->used = 0;
  for (uint32_t i = 0; i < FC_WKNEE_SLOTS; i++) {
    if (w->keys[i] == EMPTY)
      continue;
    if (w->keys[i] > w->limit || now_s - w->last_s[i] > w->longest_s)
      w->keys[i] = EMPTY;
    else
      w->used++;
  }
  while (w->keys[start] != EMPTY)    /* never full: at most 3/4 */
    start++;
  for (uint32_t k = 1; k <= FC_WKNEE_SLOTS; k++) {
    uint32_t i = (start + k) & (FC_WKNEE_SLOTS - 1), s;
    uint64_t key = w->keys[i];

    if (key == EMPTY)
      continue;
    w->keys[i] = EMPTY;
    s = find(w, key);
    w->keys[s] = key;
    w->last_s[s] = w->last_s[i];
  }
}

static void
decay(struct fc_wknee *w)
{
  w->accesses /= 2;
  for (unsigned b = 0; b < FC_WKNEE_BUCKETS; b++)
    w->reuses[b] /= 2;
}

/* Room for one more: forget the blocks too old to matter, then, while
 * that is not enough, follow half as many blocks.  The counters are
 * halved with the rate: of the blocks whose first access was counted,
 * half are no longer followed and their reuse will never be, so the
 * accesses counted so far must weigh as the half that stays (otherwise
 * a volume whose sample keeps shrinking looks to reuse less than it
 * does: SHARDS's adjustment, in the large). */
static void
make_room(struct fc_wknee *w, uint32_t now_s)
{
  filter(w, now_s);
  while (w->used >= FC_WKNEE_FOLLOWED && w->limit > 0) {
    w->limit /= 2;
    decay(w);
    filter(w, now_s);
  }
}

static unsigned
bucket_of(uint32_t reuse_s)
{
  unsigned b = 0;

  while (b + 1 < FC_WKNEE_BUCKETS && (UINT64_C(1) << b) < reuse_s)
    b++;
  return b;
}

void
fc_wknee_access(struct fc_wknee *w, uint64_t block, uint64_t now_ms)
{
  uint64_t key = rws_key_of(block);
  uint32_t now_s, s;

  if (key > w->limit)
    return;
  if (!w->started) {
    w->started = true;
    w->start_ms = now_ms;
  }
  /* Rounded up: a reuse 1.2 s later is counted at 2 s, so a window of
   * T seconds is credited only with reuses it surely holds. */
  now_s = (uint32_t)((now_ms - w->start_ms + 999) / 1000);
  w->accesses++;
  s = find(w, key);
  if (w->keys[s] == key) {
    w->reuses[bucket_of(now_s - w->last_s[s])]++;
    w->last_s[s] = now_s;
    return;
  }
  if (w->used >= FC_WKNEE_FOLLOWED) {
    make_room(w, now_s);
    if (key > w->limit)
      return;
    s = find(w, key);
  }
  w->keys[s] = key;
  w->last_s[s] = now_s;
  w->used++;
}

double
fc_wknee_hit_ratio(const struct fc_wknee *w, unsigned b)
{
  double hits = 0;

  if (!(w->accesses > 0) || b >= FC_WKNEE_BUCKETS)
    return 0;
  for (unsigned i = 0; i <= b; i++)
    hits += w->reuses[i];
  return hits / w->accesses;
}

int
fc_wknee_choose(struct fc_wknee *w, uint32_t min_s, uint32_t max_s,
                uint64_t now_ms, uint32_t *window_s)
{
  double x[FC_WKNEE_BUCKETS], y[FC_WKNEE_BUCKETS];
  uint64_t followed_s;
  size_t n = 0, knee;
  int r;

  if (!window_s || min_s == 0 || min_s > max_s)
    return -EINVAL;
  followed_s = w->started && now_ms > w->start_ms ? (now_ms - w->start_ms) / 1000 : 0;
  for (unsigned b = 0; b < FC_WKNEE_BUCKETS; b++) {
    uint64_t t = UINT64_C(1) << b;

    if (t < min_s || t > max_s || t > followed_s)
      continue;
    x[n] = (double)t;
    y[n++] = fc_wknee_hit_ratio(w, b);
  }
  if (n < 3)
    return -EAGAIN;
  r = fc_knee_point(x, y, n, FC_KNEE_MIN_GAIN, &knee);
  if (r)
    return r;
  *window_s = (uint32_t)x[knee];
  /* Half the weight to the past at every choice: the curve follows the
   * volume's recent accesses, and what it did a day ago fades. */
  decay(w);
  return 0;
}

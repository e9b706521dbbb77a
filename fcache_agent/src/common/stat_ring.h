/* SPDX-License-Identifier: Apache-2.0 */
/* A ring of per-minute snapshots of a volume's cumulative read hits and
 * misses, from which the metrics (control/metrics.c) derive the hit
 * ratio over the last 5 minutes, hour and day, as bcache's
 * stats_five_minute/hour/day do.
 *
 * Snapshots, not per-minute deltas: a window's figure is the current
 * counters less the snapshot at the window's start, one subtraction
 * whatever the window's length, and a missed minute (a busy or stopped
 * sampler) widens one step instead of losing its I/O.
 *
 * Memory: FC_STAT_RING_SLOTS * 24 bytes = 34,584 bytes per volume for a
 * day at one-minute steps.  Not thread-safe: its owner locks. */
#ifndef FCACHE_STAT_RING_H
#define FCACHE_STAT_RING_H

#include <stdbool.h>
#include <stdint.h>

#define FC_STAT_RING_STEP_S 60u
/* A day of steps, plus one for the snapshot at the day's start. */
#define FC_STAT_RING_SLOTS (86400u / FC_STAT_RING_STEP_S + 1u)

struct fc_stat_snap {
  uint64_t t_s;         /* when, in the owner's clock (seconds) */
  uint64_t hits, misses;
};

struct fc_stat_ring {
  struct fc_stat_snap *s;   /* FC_STAT_RING_SLOTS entries */
  uint32_t head;            /* the next slot written */
  uint32_t n;               /* slots holding a snapshot */
};

/* What a window saw: hits and misses in it, and the seconds it covers
 * (less than asked while the ring is younger than the window). */
struct fc_stat_window {
  uint64_t hits, misses;
  uint64_t covered_s;
};

/* 0 or -ENOMEM. */
int fc_stat_ring_init(struct fc_stat_ring *r);
void fc_stat_ring_free(struct fc_stat_ring *r);
/* Forget every snapshot (a reset of the volume's figures). */
void fc_stat_ring_clear(struct fc_stat_ring *r);
/* Offer the counters at now_s: kept when the ring is empty or the newest
 * snapshot is at least a step old, else ignored.  True when kept.  A
 * clock that went back, or counters below the newest snapshot's (the
 * engine's counters started again), start the ring again from this
 * snapshot. */
bool fc_stat_ring_offer(struct fc_stat_ring *r, uint64_t now_s, uint64_t hits,
                        uint64_t misses);
/* The window of window_s seconds ending at now_s with the counters
 * (hits, misses) of now: measured from the oldest snapshot not older
 * than window_s (an empty ring, or one whose snapshots are all newer
 * than now_s, covers nothing). */
struct fc_stat_window fc_stat_ring_window(const struct fc_stat_ring *r, uint64_t now_s,
                                          uint64_t window_s, uint64_t hits,
                                          uint64_t misses);

#endif

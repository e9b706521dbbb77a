/* SPDX-License-Identifier: Apache-2.0 */
/* A volume's RWS window chosen online at the knee of its hit ratio
 * against the window size (CloudCache §4.1, Figure 3), what
 * `fcache-replay --profile-windows` finds offline by replaying a trace
 * once per window.
 *
 * The agent cannot replay; it measures instead the curve those replays
 * draw, to first order: under RWS allocation with window T a volume is
 * given about the blocks it reused within T, so an access hits when the
 * block's previous access was at most T ago and misses otherwise.  The
 * hit ratio at window T is then the fraction of accesses whose reuse
 * time (seconds since the same block's previous access) is at most T,
 * the cumulative reuse-time distribution.  It ignores what admission
 * costs (the N reuses a block waits in staging under RWS_N) and the
 * headroom, the same for every window, so the knee is where it is.
 * The curve does not depend on the window in force: choosing a window
 * cannot feed back into the next choice.
 *
 * Reuse times are measured on a spatially hashed sample of the blocks
 * (as the sampled RWS tracker, after SHARDS): at most FC_WKNEE_FOLLOWED
 * blocks are followed, with their last access time; when the table is
 * full, the blocks not seen for longer than the longest candidate window
 * are forgotten (a reuse that late is a miss at every window anyway) and,
 * if that is not enough, the sampling rate is halved.  Reuse times go
 * into one counter per power of two of seconds.  The counters decay by
 * half at every choice, so the curve follows the volume's recent past.
 *
 * Candidate windows are the powers of two seconds within the bounds the
 * caller gives, and only those the volume has been followed long enough
 * to have seen (a reuse time longer than the time followed cannot have
 * been measured yet).  With fewer than three candidates there is no knee
 * to find and the window stays as it is.  The knee is alloc/knee's, with
 * FC_KNEE_MIN_GAIN: a curve without a clear knee gets the smallest
 * candidate, as the paper advises.
 *
 * Cost per volume, allocated only for a volume whose window is automatic:
 * one fixed block of 49,448 bytes (fc_wknee_memory: 12 bytes per slot
 * of the table, 16 per block followed, and 296 of counters), whatever the
 * volume's size.  Per access: one 64-bit mix and a compare; for a sampled block
 * a probe of the table.  Per choice: a pass over FC_WKNEE_BUCKETS
 * counters.  Not thread-safe: the owner's lock protects it. */
#ifndef FCACHE_ALLOC_WINDOW_KNEE_H
#define FCACHE_ALLOC_WINDOW_KNEE_H

#include <stddef.h>
#include <stdint.h>

/* Slots of the sampled table; it is kept at most 3/4 full. */
#define FC_WKNEE_SLOTS 4096u
#define FC_WKNEE_FOLLOWED (FC_WKNEE_SLOTS / 4 * 3)
/* Reuse-time counters: bucket b counts reuse times in (2^(b-1), 2^b]
 * seconds (bucket 0: at most 1 s), up to 2^31 s. */
#define FC_WKNEE_BUCKETS 32u

struct fc_wknee;

/* longest_s: the longest candidate window the caller will ask about
 * (blocks not seen for longer are forgotten first when the table is
 * full).  -EINVAL, -ENOMEM. */
int fc_wknee_new(uint32_t longest_s, struct fc_wknee **out);
void fc_wknee_free(struct fc_wknee *w);

/* One access of block at now_ms (a monotonic clock, never going back). */
void fc_wknee_access(struct fc_wknee *w, uint64_t block, uint64_t now_ms);

/* The window at the knee among the candidates within [min_s, max_s]
 * (1 <= min_s <= max_s), at now_ms: 0 and *window_s, or -EAGAIN when
 * there are fewer than three candidates yet (the caller keeps its
 * window), -EINVAL on bad bounds.  The counters then decay by half. */
int fc_wknee_choose(struct fc_wknee *w, uint32_t min_s, uint32_t max_s,
                    uint64_t now_ms, uint32_t *window_s);

/* The estimated hit ratio at a window of 2^b seconds (b < FC_WKNEE_BUCKETS)
 * as the next choice would see it; 0 with no access yet.  For status and
 * tests. */
double fc_wknee_hit_ratio(const struct fc_wknee *w, unsigned b);

/* Bytes held: the structure, allocated whole. */
size_t fc_wknee_memory(const struct fc_wknee *w);

#endif

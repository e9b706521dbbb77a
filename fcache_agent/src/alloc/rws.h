/* SPDX-License-Identifier: Apache-2.0 */
/* Reuse working set tracking (CloudCache §4.1).  RWS_N(t, T) is the set of
 * distinct blocks a volume reused at least N times in the real-time window
 * [t - T, t], i.e. accessed at least N + 1 times; RWS_0 is the working set.
 * The window is closed by the caller (a timer in the agent, trace time in
 * the replayer), so idle volumes still end their windows.
 *
 * Two trackers behind one interface: exact (a hash table with one entry
 * per distinct block of the window: memory grows with the WSS) and sampled
 * (spatially hashed sampling after SHARDS: only blocks whose hash falls
 * under a threshold are tracked, the threshold falls when the table is
 * full, sizes are scaled by 1 / rate; memory stays under a fixed bound).
 * Not thread-safe: the owner's lock protects it. */
#ifndef FCACHE_ALLOC_RWS_H
#define FCACHE_ALLOC_RWS_H

#include <stddef.h>
#include <stdint.h>

#define FC_RWS_MAX_N 7u

enum fc_rws_mode {
  FC_RWS_EXACT,
  FC_RWS_SAMPLED,
};

/* The sizes of one closed window. */
struct fc_rws_sizes {
  uint64_t blocks[FC_RWS_MAX_N + 1];  /* [n]: |RWS_n| in blocks; [0] = WSS */
  uint64_t accesses;                  /* block accesses seen in the window */
};

struct fc_rws;

/* max_bytes: the sampled tracker's memory bound (at least 4 KiB; the agent
 * uses 1 MiB); ignored by the exact tracker.  -EINVAL, -ENOMEM. */
int fc_rws_new(enum fc_rws_mode mode, size_t max_bytes, struct fc_rws **out);
void fc_rws_free(struct fc_rws *t);

/* One access (read or write, hit or miss) of one block. */
void fc_rws_access(struct fc_rws *t, uint64_t block);

/* Close the current window: its sizes into *out, and start an empty one. */
void fc_rws_close_window(struct fc_rws *t, struct fc_rws_sizes *out);

/* Bytes the tracker holds now. */
size_t fc_rws_memory(const struct fc_rws *t);

/* The fraction of blocks the sampled tracker follows now (1.0: exact). */
double fc_rws_sample_rate(const struct fc_rws *t);

#endif

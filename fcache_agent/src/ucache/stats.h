/* SPDX-License-Identifier: Apache-2.0 */
/* Per-volume counters, updated without locks from the I/O threads.
 * reads/writes count NBD requests; read_hits/read_misses count cache
 * blocks touched by reads, so hit_ratio is a block hit ratio. */
#ifndef FCACHE_STATS_H
#define FCACHE_STATS_H

#include <stdatomic.h>
#include <stdint.h>

struct fc_stats {
  atomic_uint_fast64_t reads;
  atomic_uint_fast64_t writes;
  atomic_uint_fast64_t read_bytes;
  atomic_uint_fast64_t write_bytes;
  atomic_uint_fast64_t read_hits;
  atomic_uint_fast64_t read_misses;
  atomic_uint_fast64_t write_hits;
  atomic_uint_fast64_t write_misses;
  atomic_uint_fast64_t trims;
  atomic_uint_fast64_t flushes;
  atomic_uint_fast64_t origin_read_bytes;
  atomic_uint_fast64_t origin_write_bytes;
  atomic_uint_fast64_t cache_read_bytes;
  atomic_uint_fast64_t cache_write_bytes;
  atomic_uint_fast64_t promotions;     /* blocks installed */
  atomic_uint_fast64_t evictions;
  atomic_uint_fast64_t invalidations;
  atomic_uint_fast64_t writebacks;     /* dirty blocks cleaned */
  atomic_uint_fast64_t io_errors;
  atomic_uint_fast64_t staging_hits;   /* read blocks served from staged data */
  atomic_uint_fast64_t fills_skipped;  /* missed blocks read but not installed:
                                        * a stripe stayed held after the
                                        * origin's reply (ucache_read.c) */
};

#define STAT_ADD(s, field, v) \
  atomic_fetch_add_explicit(&(s)->field, (v), memory_order_relaxed)
#define STAT_GET(s, field) \
  atomic_load_explicit(&(s)->field, memory_order_relaxed)

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Admission staging (CloudCache §4.3): a missed block enters the cache
 * only once it has been accessed reuse_n + 1 times while staged, so scans
 * and one-off reads do not flush the reuse working set.  Three kinds:
 *  - address: a bounded LRU of missed addresses with their access counts;
 *  - data: a bounded LRU that also keeps the data of read misses in
 *    memory (write misses keep only their address), so a re-read before
 *    admission is served from memory: a staging hit, counted apart;
 *  - hybrid: the area split 1:7 between an address LRU and a data LRU;
 *    read misses enter the data LRU, whose evictions keep their address
 *    (and count) in the address LRU; write misses enter the address LRU.
 * Accounting follows the paper: 24 bytes per tracked address, plus the
 * block for staged data.  Memory is allocated as entries come and freed
 * as they go, never above the area's size.
 *
 * The area alone forgets a block once area / 24 B later misses have come
 * (1,363 addresses for a hybrid area of 250 KiB), so a reused set larger
 * than that, read in a loop, would never be admitted.  The agent
 * therefore sets a reuse history (fc_staging_set_history) sized from the
 * volume's share: what the area pushes out is remembered there as an
 * address and a count for at least one share's worth of later push-outs,
 * at 21.3 bytes per block of share at most (reuse_history.h).  Scans stay
 * out all the same: a block read once is never admitted, however long it
 * is remembered.  Not thread-safe: the owning volume's lock protects
 * it. */
#ifndef FCACHE_ALLOC_STAGING_H
#define FCACHE_ALLOC_STAGING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FC_STAGING_ADDR_BYTES 24u

enum fc_staging_kind {
  FC_STAGING_ADDRESS,
  FC_STAGING_DATA,
  FC_STAGING_HYBRID,
};

struct fc_staging_stats {
  uint64_t accesses;      /* fc_staging_access calls */
  uint64_t admitted;      /* of which answered "admit" */
  uint64_t data_hits;     /* fc_staging_read_data served a block */
  uint64_t evicted;       /* entries pushed out by the bound */
  uint64_t addresses;     /* entries tracked now (with or without data) */
  uint64_t data_blocks;   /* of which hold data now */
  size_t area_bytes;      /* the bound */
  size_t used_bytes;      /* accounted use now (24 B + data) */
  uint64_t recalled;      /* accesses whose count came from the history */
  uint64_t history_blocks;  /* addresses the history remembers now */
  size_t history_bytes;   /* the history's memory now (not in used_bytes) */
};

struct fc_staging;

/* area_bytes: the staging area (the agent sizes it as a fraction of the
 * volume's cache share); reuse_n: RWS_N's N, 1..FC_RWS_MAX_N.  An area too
 * small for one entry of each kind it needs is -EINVAL. */
int fc_staging_new(enum fc_staging_kind kind, size_t area_bytes,
                   uint32_t block_size, unsigned reuse_n, struct fc_staging **out);
void fc_staging_free(struct fc_staging *st);

/* A miss (read or write) of a block that is not cached.  True when this
 * access makes it reused reuse_n times: admit it now (its entry, and any
 * data, are dropped from the stage). */
bool fc_staging_access(struct fc_staging *st, uint64_t block, bool is_write);

/* A read miss that was not admitted: keep its data (data and hybrid kinds;
 * a no-op for address staging or a block no longer staged).  data NULL
 * accounts for the block without storing it (the trace replayer has no
 * data); fc_staging_read_data then zero-fills. */
void fc_staging_put_data(struct fc_staging *st, uint64_t block, const void *data);

/* Copy the staged data of block into buf: true if there was some (a
 * staging hit).  The caller still calls fc_staging_access for the access. */
bool fc_staging_read_data(struct fc_staging *st, uint64_t block, void *buf);

/* The data of [first, first + n) changed (a write, a trim, a migration
 * install): forget any staged data for it; counts stay. */
void fc_staging_invalidate(struct fc_staging *st, uint64_t first, uint64_t n);

/* A new bound (the share changed at a window); shrinking evicts LRU-first. */
void fc_staging_resize(struct fc_staging *st, size_t area_bytes);

/* Remember what the area pushes out for at least gen_blocks later
 * push-outs (the agent passes the volume's share; clamped to
 * FC_RHIST_MIN_GEN..FC_RHIST_MAX_GEN); 0 removes the history.  Called
 * again, it resizes.  -ENOMEM (the stage works on without). */
int fc_staging_set_history(struct fc_staging *st, uint64_t gen_blocks);

/* The RWS window ended: the history forgets its older half, so nothing
 * pushed out more than two windows ago is admitted by that count. */
void fc_staging_end_window(struct fc_staging *st);

void fc_staging_get_stats(const struct fc_staging *st, struct fc_staging_stats *out);

const char *fc_staging_kind_name(enum fc_staging_kind kind);
/* "address", "data", "hybrid"; -EINVAL otherwise. */
int fc_staging_kind_parse(const char *name, enum fc_staging_kind *out);

#endif

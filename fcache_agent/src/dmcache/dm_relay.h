/* SPDX-License-Identifier: Apache-2.0 */
/* The relay's source side: the NBD export (served to the kernel by
 * dm_nbd) that is the source of the destination's dm-clone during a
 * hybrid or cloudcache migration (doc/reference/dmcache.rst, "The NBD
 * relay through the agents").
 *
 * The device has the destination's cache-data layout: byte offset
 * c x block_size is destination cache block c, and reads there return
 * the data of the origin block the restored dm-cache metadata maps at c,
 * fetched from the source's frozen cache with the migration's FETCH of
 * that origin block (the source finds it in its own, differently
 * numbered, cache).  A cache block the metadata does not map reads as
 * zeros without asking anyone.  Writes are refused: the clone's source is
 * read-only. */
#ifndef FCACHE_DM_RELAY_H
#define FCACHE_DM_RELAY_H

#include <stdbool.h>
#include <stdint.h>

#include "common/types.h"
#include "engine/engine.h"
#include "nbd/io_ops.h"

/* A destination cache block the restored metadata does not map. */
#define DM_RELAY_UNMAPPED UINT64_MAX

/* Start fetching origin block ob into data (block_size bytes); the same
 * contract as fc_engine_migr.fetch_source_start. */
typedef int dm_relay_fetch_fn(void *ctx, oblock_t ob, void *data, bool required,
                              fc_engine_fetch_done_fn *done, void *arg);

struct dm_relay_params {
  const char *volume;           /* for log lines */
  uint32_t block_size;          /* the cache block: 512..2^30, a multiple of 512 */
  uint64_t nr_blocks;           /* destination cache blocks (the device's size) */
  /* Per destination cache block, its origin block or DM_RELAY_UNMAPPED
   * (copied). */
  const uint64_t *oblock;
  /* Fetches in flight at once: a read that needs more waits in its
   * (NBD worker) thread for some to end.  At least dm-clone's
   * hydration_threshold, so that hydration is never starved by the
   * relay; at most what fetch allows (the migration's 256). */
  unsigned max_inflight;
  dm_relay_fetch_fn *fetch;
  void *fetch_ctx;
};

struct dm_relay;

/* 0 with *out set, -EINVAL (a bad block size, no blocks, max_inflight 0),
 * -ENOMEM. */
int dm_relay_new(const struct dm_relay_params *p, struct dm_relay **out);

/* The export to serve (dm_nbd_connect): read-only, nr_blocks x
 * block_size bytes, 512-byte logical blocks, the cache block as its
 * preferred size, 32 MiB requests at most (the kernel's). */
void dm_relay_export(struct dm_relay *r, struct fc_export *exp);

struct dm_relay_stats {
  uint64_t reads;               /* the kernel's reads */
  uint64_t fetched;             /* blocks fetched from the source */
  uint64_t zero_blocks;         /* unmapped blocks answered with zeros */
  uint64_t fetch_errors;        /* fetches that failed (the read got EIO) */
  /* The fetched blocks' times from start to answer, summed, and the
   * shortest: the round trip to the source plus its read, and the time a
   * fetch waited behind others there (the shortest has waited least,
   * which sizes dm-clone's hydration threshold: dm_migr_hybrid.c). */
  uint64_t fetch_ns, fetch_ns_min;
  unsigned inflight, inflight_peak;
};
void dm_relay_stats(struct dm_relay *r, struct dm_relay_stats *out);

/* Free r once nothing serves its export any more and every read it
 * started has ended (stop the NBD server first: its stop waits for
 * them; the migration's end ends the fetches). */
void dm_relay_free(struct dm_relay *r);

#endif

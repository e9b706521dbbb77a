/* SPDX-License-Identifier: Apache-2.0 */
/* Fetches of origin blocks from the origin itself, with the contract of
 * fc_engine_migr.fetch_source_start: what hybrid's relay reads once a
 * migration that failed mid-hydration was settled with its source lost
 * (doc/reference/dmcache.rst, "Settling on dmcache").  A few threads read
 * the origin; each fetch ends by a call, never from inside the start. */
#ifndef FCACHE_DM_ORIGIN_FETCH_H
#define FCACHE_DM_ORIGIN_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/types.h"
#include "engine/engine.h"

struct dm_origin_fetch;

/* Read-only, O_DIRECT: the kernel's cache writes bypass the page cache.
 * origin_bytes long, block_size bytes per origin block (a multiple of
 * 512).  0, or -errno and why. */
int dm_origin_fetch_new(const char *origin, uint64_t origin_bytes, uint32_t block_size,
                        struct dm_origin_fetch **out, char *err, size_t errlen);

/* Start reading origin block ob into data (block_size bytes; past the
 * origin's end, zeros): 0, done(arg, r, false) called once from a worker
 * thread; -ENOMEM, or -ECANCELED once freeing began, with nothing
 * started. */
int dm_origin_fetch_start(void *ctx, oblock_t ob, void *data, bool required,
                          fc_engine_fetch_done_fn *done, void *arg);

/* Blocks read so far. */
uint64_t dm_origin_fetch_count(struct dm_origin_fetch *f);

/* Ends the fetches not started with -ECANCELED, waits for the others,
 * frees f. */
void dm_origin_fetch_free(struct dm_origin_fetch *f);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The destination's record of pinned blocks that reached the origin anyway.
 *
 * A block dirty on the migration source at the switchover stays in the
 * destination's cache until the migration completes (see ucache_priv.h,
 * `pinned`).  When it cannot -- no room in the cache, a trim, a partial
 * write to a block that is not cached -- its new content goes to the origin,
 * and the source's copy becomes stale.  Before that origin write the block
 * number is appended here and synced, so that a destination that crashes
 * and is settled in "held" mode can still tell the source to forget it.
 * One file per volume (<state_dir>/volumes/<id>.superseded): 8-byte
 * little-endian block numbers.
 */
#ifndef FCACHE_SUPERSEDED_H
#define FCACHE_SUPERSEDED_H

#include <stdint.h>

/* Start an empty record; returns an fd or -errno. */
int fc_superseded_create(const char *path);
/* Append ob and make it durable. */
int fc_superseded_append(int fd, uint64_t ob);
/* All recorded blocks (caller frees; *n = 0 and NULL if there is no file). */
int fc_superseded_load(const char *path, uint64_t **list, uint32_t *n);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The address history beneath admission staging (staging.h): blocks the
 * staging area pushed out before their reuse came, with their access
 * counts, so a reuse is still seen when the reused set is larger than the
 * area (a 16 MiB set read in a loop through a 250 KiB area would
 * otherwise never be admitted).
 *
 * Two generations of `gen` entries each.  New entries go to the current
 * one; when it holds `gen`, the older is forgotten and a new current one
 * begins.  So an entry is remembered for at least `gen` later entries and
 * at most 2 * gen, the order an LRU of that size would keep, and
 * fc_rhist_age (the window's end) rotates too: nothing is remembered for
 * longer than two windows.
 *
 * One 8-byte word per entry (block << 3 | count) in open-addressing
 * tables kept at most 3/4 full: at most 2 * 8 * 4/3 = 21.3 bytes per
 * block of `gen`, reached only when both generations are full; tables
 * grow as entries come, so a quiet volume holds a few KiB.  Not
 * thread-safe: the staging's owner locks it. */
#ifndef FCACHE_ALLOC_REUSE_HISTORY_H
#define FCACHE_ALLOC_REUSE_HISTORY_H

#include <stddef.h>
#include <stdint.h>

/* Counts are 1..7: RWS_N's N is at most 7 and a block is admitted at
 * N + 1 accesses, so a remembered one has at most N. */
#define FC_RHIST_MAX_COUNT 7u
/* Blocks at or above this are not remembered (61 bits of block number:
 * 8 EiB in 4 KiB blocks). */
#define FC_RHIST_BLOCK_LIMIT ((UINT64_C(1) << 61) - 1)
/* The smallest generation: a tiny share still remembers this many. */
#define FC_RHIST_MIN_GEN 1024u
/* The largest: its table (4/3 of it) still has 32-bit slot numbers. */
#define FC_RHIST_MAX_GEN (3u << 29)

struct fc_rhist;

/* gen: entries per generation, clamped to FC_RHIST_MIN_GEN..MAX_GEN.
 * -EINVAL, -ENOMEM. */
int fc_rhist_new(uint32_t gen, struct fc_rhist **out);
void fc_rhist_free(struct fc_rhist *h);

/* Remember block with count (clamped to 1..FC_RHIST_MAX_COUNT).  Out of
 * memory, it is not remembered: a reuse not seen, never a wrong one. */
void fc_rhist_put(struct fc_rhist *h, uint64_t block, unsigned count);

/* The count remembered for block, 0 if none; it is forgotten here (the
 * caller stages it again). */
unsigned fc_rhist_take(struct fc_rhist *h, uint64_t block);

/* A new generation size (the share changed).  Shrinking forgets what no
 * longer fits. */
void fc_rhist_resize(struct fc_rhist *h, uint32_t gen);

/* The window ended: the older generation is forgotten. */
void fc_rhist_age(struct fc_rhist *h);

uint64_t fc_rhist_entries(const struct fc_rhist *h);
/* Bytes held now: the structure and both tables. */
size_t fc_rhist_memory(const struct fc_rhist *h);
/* The most fc_rhist_memory can reach for a generation size. */
size_t fc_rhist_memory_max(uint32_t gen);

#endif

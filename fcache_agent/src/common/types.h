/* SPDX-License-Identifier: Apache-2.0 */
/* fcache — shared vocabulary of the data plane.
 *
 * Glossary
 *   origin      the remote volume being cached (shared storage, a Cinder volume).
 *   oblock      an origin block number: byte offset / block_size on the origin.
 *   cache file  the host's local flash, one file or device shared by every volume.
 *   cblock      a cache block number: byte offset / block_size in the cache file.
 *   dirty       a cached block whose data is newer than the origin (write_back).
 *
 * oblock and cblock are distinct struct types so that the compiler refuses to
 * mix them up (the same trick as the kernel's dm_oblock_t / dm_cblock_t).
 */
#ifndef FCACHE_TYPES_H
#define FCACHE_TYPES_H

#include <stdint.h>

typedef struct { uint64_t n; } oblock_t;
typedef struct { uint32_t n; } cblock_t;

#define CBLOCK_NONE UINT32_MAX

/* A block list (hot list, LIST frame, settle list) carries each oblock
 * with this bit set when the block is dirty where the list was made. */
#define FC_BLOCK_DIRTY_BIT (1ull << 63)

static inline oblock_t to_oblock(uint64_t n) { return (oblock_t){ n }; }
static inline cblock_t to_cblock(uint32_t n) { return (cblock_t){ n }; }

enum fc_write_policy {
  FC_WRITE_READ_ONLY = 0,   /* writes invalidate and go to origin */
  FC_WRITE_THROUGH = 1,     /* writes update cache and origin */
  FC_WRITE_BACK = 2,        /* writes land in cache, written back later */
};

enum fc_admission {
  FC_ADMIT_ALL = 0,
  FC_ADMIT_RWS = 1,
};

#endif

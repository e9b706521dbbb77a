/* SPDX-License-Identifier: Apache-2.0 */
/* Persistent cache metadata: what each cache block holds, so that a
 * restarted agent serves its cache warm and never loses a dirty block.
 *
 * File layout (little-endian):
 *   [0, 4096)         header: magic, version, geometry, shutdown state, crc
 *   [4096 + 32*n, +32) record for cache block n
 *
 * Crash-consistency rules the engine follows (see doc/reference/ucache.rst):
 *   - a record becomes DIRTY (pwrite) after the block's data is written
 *     and before the write is acknowledged; a flush (or FUA) syncs the
 *     data, rewrites the new dirty records SYNCED, then syncs them;
 *   - a block whose synced dirty record may be on disk takes no other
 *     data until a record that is not dirty has been synced;
 *   - a record stops being DIRTY only after the data reached the origin
 *     and the origin was flushed;
 *   - a record is VALID only while its block is in its volume's map: it is
 *     cleared (fc_md_forget) before the block is evicted, dropped or
 *     reused, so a block never holds other data than its record names;
 *   - a clean record is written only when the block's data equals the
 *     origin's, and cleared before anything (a write through the cache, a
 *     trim) changes the origin under it;
 *   - at clean shutdown every record is written at once (with LRU ranks).
 *     While the agent runs the header says RUNNING.  An agent that finds
 *     RUNNING at start trusts the clean records only if the machine did not
 *     reboot since (the page cache, which holds every record and block
 *     written before a process crash, survived: warm.h); otherwise it keeps
 *     only the dirty ones, which are always current.
 */
#ifndef FCACHE_METADATA_H
#define FCACHE_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/types.h"

#define FC_MD_HEADER_SIZE 4096u
#define FC_MD_MAGIC "FCACHEMD"
#define FC_MD_VERSION 1u

enum { FC_MD_STATE_CLEAN = 1, FC_MD_STATE_RUNNING = 2 };
/* SYNCED, on a dirty record: the data it names reached stable storage
 * before the record was written (a flush vouched for it).  After a power
 * cut only those dirty records are trusted; one without it may name a
 * block whose data never left the page cache (doc/reference/ucache.rst). */
enum { FC_MD_VALID = 1u << 0, FC_MD_DIRTY = 1u << 1, FC_MD_SYNCED = 1u << 2 };

struct fc_md_record {
  uint64_t oblock;
  uint64_t volume_tag;     /* random per attached volume; 0 never used */
  uint32_t flags;
  uint32_t lru_rank;       /* 0 = most recently used; kept across clean restarts */
  uint32_t reserved;
  uint32_t crc;            /* crc32c of the 28 bytes before it */
};

struct fc_metadata {
  int fd;
  uint32_t block_size;
  uint32_t nr_blocks;
  /* The warm-restart marker (warm.h); "" when none is armed. */
  char warm_marker[4352];
};

/* Open or create the metadata file for a cache of this geometry.
 * *was_clean tells whether the previous agent shut down cleanly (a new
 * file counts as clean and empty).  A file made for another geometry is
 * -EMEDIUMTYPE, with the old geometry in err; the caller decides. */
int fc_md_open(const char *path, uint32_t block_size, uint32_t nr_blocks,
               bool *was_clean, struct fc_metadata **out,
               char *err, size_t errlen);
void fc_md_close(struct fc_metadata *md);

/* Rewrite the file for the new geometry with no records.  */
int fc_md_reinit(struct fc_metadata *md, uint32_t block_size, uint32_t nr_blocks);

/* Read records [first, first+n). Records with flags 0 are free. */
int fc_md_read(struct fc_metadata *md, uint32_t first, uint32_t n,
               struct fc_md_record *out);
bool fc_md_record_ok(const struct fc_md_record *rec);

/* Write one record (not synced: fc_md_sync orders it for power loss;
 * for a process crash the page cache already has it). */
int fc_md_set(struct fc_metadata *md, cblock_t cb, uint64_t oblock,
              uint64_t volume_tag, uint32_t flags);
/* Clear one record: its block no longer holds what the record names.  A
 * failure disarms the warm-restart marker, so that the next start, not
 * knowing which clean record is stale, trusts none. */
int fc_md_forget(struct fc_metadata *md, cblock_t cb);
/* fc_md_forget for n blocks (a volume leaving): cbs must ascend; each
 * run of adjacent blocks is one write. */
int fc_md_forget_many(struct fc_metadata *md, const cblock_t *cbs, uint32_t n);
/* The same for n blocks at once (a batch of migrated blocks): cbs must
 * ascend; each run of adjacent blocks is one write; oblocks is not read
 * when flags is 0 (the records are cleared). */
int fc_md_set_many(struct fc_metadata *md, const cblock_t *cbs,
                   const uint64_t *oblocks, uint32_t n, uint64_t volume_tag,
                   uint32_t flags);
/* Write every record at once (clean shutdown). */
int fc_md_write_all(struct fc_metadata *md, struct fc_md_record *recs);
int fc_md_set_state(struct fc_metadata *md, uint32_t state);
int fc_md_sync(struct fc_metadata *md);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The live-migration layer's own state for one volume, and the functions
 * its files (ucache_migr*.c) share.  Only they include this header: the
 * request paths see the layer through the hook points of ucache_layer.h
 * and hold its state as an opaque pointer (uc->m), so no read or write of
 * a migration field can creep back into them.
 *
 * The state is kept in two parts, one per end of a migration, so that a
 * reader sees which end a field belongs to.  A volume is usually one end
 * or the other, but may be both at once: a destination that has switched
 * over, and has not yet settled with its source (remote dirty blocks,
 * pinned blocks, a lost source), can already be migrating on as a source
 * and be frozen. */
#ifndef FCACHE_UCACHE_MIGR_PRIV_H
#define FCACHE_UCACHE_MIGR_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/invfilter.h"
#include "ucache_priv.h"

/* Source: the VM is leaving or has left. */
struct uc_migr_source {
  bool frozen;                /* the VM left: refuse writes */
};

/* Destination: the VM is arriving or arrived, and the source still
 * answers for some blocks. */
struct uc_migr_dest {
  bool gated;                 /* before the source's switch */
  bool source_connected;      /* reads may be forwarded to the source */
  bool failed;                /* the source was lost before the switch */
  bool bypass;                /* firepan_if copy: cache not attached yet */
  bool tracking;              /* record writes to discard late copies */
  struct fc_invfilter written;       /* the invalidation filter's table */
  struct fc_invfilter remote_dirty;  /* newest copy only on the source */
  struct fc_invfilter remote_clean;  /* cached on the source, also at origin */
  /* Dirty on the source at the switch.  Until the migration completes or
   * is settled none of these reaches the origin from here: so that, if
   * this host crashes, "the destination does not hold it" always means
   * "the source's copy is the last durable one". */
  struct fc_invfilter pinned;
  int superseded_fd;          /* see superseded.h; -1 when not migrating in */
  char superseded_path[4200];
  fc_ucache_fetch_fn fetch;
  fc_ucache_fetched_fn fetched_fn;   /* NULL: nobody to tell */
  fc_ucache_read_fn read_source;
  void *fetch_ctx;            /* for all three */
  pthread_cond_t gate_cond;
  uint64_t fetched, fetch_fallbacks, discarded, installed_copies;
  /* A dirty block came from the source (copied or fetched) since the last
   * fc_ucache_migr_durable, which must then sync; source_dirty: one came
   * or was listed at all, so the final one syncs whatever the VM wrote
   * over it too.  A migration with neither needs no sync: after a crash
   * only dirty records are trusted, the origin holds what a clean block
   * holds, and it is as current as the source's copy was. */
  bool copied_dirty, source_dirty;
  pthread_mutex_t durable_lock;     /* one fc_ucache_migr_durable at a time */
};

/* All under uc->lock, but for durable_lock's own. */
struct uc_migr {
  struct uc_migr_source src;
  struct uc_migr_dest dst;
};

/* Under uc->lock: set uc->layer_on from both ends' state, so that the
 * request paths skip the layer exactly when neither end needs it. */
void uc_migr_update_on_locked(struct fc_ucache *uc);

/* Writes, trims and flushes wait here until the switchover (ucache_migr.c). */
int uc_migr_gate(struct fc_ucache *uc);
/* Under uc->lock: is the gate closed? */
bool uc_migr_gated_locked(const struct fc_ucache *uc);
/* A read before the switchover, answered with current data without
 * waiting for it (doc/reference/migration.rst, "Reads before the switchover").
 * 1 if the gate is open (the caller reads as usual), 0 when buf holds the
 * data, or -errno. */
int uc_migr_read_gated(struct fc_ucache *uc, void *buf, uint32_t count,
                       uint64_t off);
/* Under the stripes: note the VM writing [first, first+n); fetch remote
 * dirty blocks a partial write needs first (ucache_migr_copies.c). */
int uc_migr_note_write(struct fc_ucache *uc, uint64_t first, uint32_t n,
                       uint64_t off, uint32_t count);

#endif

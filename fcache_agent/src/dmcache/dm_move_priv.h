/* SPDX-License-Identifier: Apache-2.0 */
/* Inside volume-move on the dmcache engine: shared by dm_move.c (the move
 * record, the watcher, control operations, dm-clone) and dm_move_mirror.c
 * (dm-mirror).  Not for other modules. */
#ifndef FCACHE_DM_MOVE_PRIV_H
#define FCACHE_DM_MOVE_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dm_priv.h"

enum dm_move_state { DMM_COPYING, DMM_SWITCHING, DMM_DONE, DMM_FAILED, DMM_ABORTED };

/* The kernel target that moves the origin, and so the scheme. */
enum dm_move_kind { DMM_CLONE, DMM_MIRROR };

struct fc_dm_move {
  struct fc_host *host;
  struct fc_volume *v;
  enum dm_move_kind kind;
  char from[FC_ORIGIN_MAX], to[FC_ORIGIN_MAX];
  char clone[FC_DM_NAME_MAX], cmeta[FC_DM_NAME_MAX];   /* lr */
  char mirror[FC_DM_NAME_MAX];                         /* mirror */
  dev_t a_dev, b_dev;
  uint64_t region_sectors;
  /* Under host->lock. */
  enum dm_move_state state;
  /* Regions on B: hydrated (dm-clone) or in sync (dm-mirror). */
  uint64_t regions_total, regions_done, downtime_us;
  uint64_t progress_ms;         /* when regions_done last grew */
  uint64_t pulses, pulse_us_max;
  uint64_t started_ms, ended_ms;
  char error[FC_ORIGIN_MAX + 512];
  bool hydrating;               /* enable_hydration sent by this watcher */
  pthread_t thread;
  bool thread_running;
  atomic_bool stop;
};

/* ---- dm_move.c ---- */

/* Write the move record "<volumes_dir>/<id>.<clone|mirror>". */
int fc_dmm_save_state(const struct fc_dm_move *mv, char *err, size_t errlen);
void fc_dmm_remove_state(const struct fc_dm_move *mv);
/* 1: the cache device is gone (to be rebuilt), 2: it is stacked on dev,
 * 0: it is there over another device; -errno: unknown. */
int fc_dmm_cache_on(const struct fc_dmvol *dv, dev_t dev);
/* The move ended: state DONE, FAILED or ABORTED, logged. */
void fc_dmm_end(struct fc_dm_move *mv, enum dm_move_state state);

/* ---- dm_move_mirror.c: each under host->lock ---- */

/* Build the mirror A -> B and stack the cache on it (recorded first). */
int fc_dmm_mirror_start(struct fc_dm_move *mv, char *err, size_t errlen);
/* One look at the mirror: false once the move ended. */
bool fc_dmm_mirror_poll(struct fc_dm_move *mv);
/* Back to A, which has every write; the mirror goes. */
int fc_dmm_mirror_abort(struct fc_dm_move *mv, char *err, size_t errlen);
/* At start-up, for a recorded mirror move: 1 when the move goes on (the
 * cache's origin is then the mirror), 0 when it was finished or never
 * started and is cleaned up. */
int fc_dmm_mirror_adopt(struct fc_dm_move *mv, char *err, size_t errlen);
/* Detach: remove the mirror and the record (the cache device is gone). */
int fc_dmm_mirror_remove(struct fc_dm_move *mv, char *err, size_t errlen);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Inside the dmcache engine's live migration: shared by dm_migr.c (the
 * state and the ops table), dm_migr_source.c and dm_migr_dest.c.  Not for
 * other modules. */
#ifndef FCACHE_DM_MIGR_PRIV_H
#define FCACHE_DM_MIGR_PRIV_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dm_cache.h"
#include "dm_priv.h"
#include "common/invfilter.h"
#include "common/types.h"

struct fc_host;
struct fc_engine_migr;
struct fc_volume;
struct dm_hybrid;

struct fc_dm_migr {
  pthread_mutex_t lock;
  uint64_t bs;                  /* bytes per cache block */
  uint64_t nr_oblocks;
  int data_fd;                  /* the cache data device, O_DIRECT */
  int origin_fd;                /* destination, cachemior: preload reads */
  /* source */
  bool frozen;
  struct fc_dmc_mapping *map;   /* the dump, sorted by oblock */
  uint32_t n;
  /* destination */
  bool switched, ended, era;
  char emeta[FC_DM_NAME_MAX + 8];   /* dm-era metadata device, "" if none */
  struct fc_invfilter have;     /* oblocks installed or being written */
  struct fc_dmc_mapping *inst;  /* in arrival order (hottest first) */
  uint32_t ninst, next_cb, nr_cblocks, uncommitted;
  uint64_t installed, discarded, era_written;
  /* hybrid: the relay and the clone under the cache (dm_migr_hybrid.c);
   * the pointer under lock (migration-status reads it). */
  struct dm_hybrid *hy;
};

extern const struct fc_engine_settle_ops fc_dm_settle_ops;

/* Shared state and helpers (dm_migr.c). */
struct fc_dm_migr *dm_migr_state(struct fc_engine_migr *m);
/* "<volumes_dir>/<volume>.<what>.xml": the cache tools' XML files. */
void dm_migr_xml_path(struct fc_engine_migr *m, const char *what, char *buf, size_t len);
void dm_migr_dev_path(const char *name, char *buf, size_t len);
int dm_migr_block_io(int fd, bool write, void *data, uint64_t bs, uint64_t off);
struct fc_dm_migr *dm_migr_state_new(struct fc_host *host, struct fc_volume *v);
int dm_migr_open_dev(const char *path, int flags, int *fd, char *err, size_t errlen);
void dm_migr_close_fds(struct fc_dm_migr *st);

/* The source side (dm_migr_source.c); the destination uses to_error too
 * (its fallback, shutdown and abort). */
int dm_migr_to_error(struct fc_volume *v, char *err, size_t errlen);
int dm_migr_out_freeze(struct fc_engine_migr *m, bool flush, char *err, size_t errlen);
int dm_migr_out_thaw(struct fc_engine_migr *m);
int dm_migr_out_list(struct fc_engine_migr *m, uint64_t **list, uint32_t *n,
                     bool dirty_only, enum fc_list_order order);
int dm_migr_out_read(struct fc_engine_migr *m, oblock_t ob, void *data, bool *dirty);
int dm_migr_out_forget(struct fc_engine_migr *m, oblock_t ob);
int dm_migr_out_forget_all(struct fc_engine_migr *m);
/* The frozen cache by volume, for a settle (dm_migr_settle.c): its map
 * and data device again if the migration's state went (reopen, under
 * host->lock), and one block of it. */
int dm_migr_frozen_reopen(struct fc_host *host, struct fc_volume *v, char *err,
                          size_t errlen);
int dm_migr_frozen_read(struct fc_volume *v, oblock_t ob, void *data, bool *dirty);

/* The destination side (dm_migr_dest.c). */
int dm_migr_in_begin(struct fc_engine_migr *m);
void dm_migr_in_connected(struct fc_engine_migr *m);
int dm_migr_in_add_remote(struct fc_engine_migr *m, oblock_t ob, bool dirty);
void dm_migr_in_switch(struct fc_engine_migr *m);
int dm_migr_in_install(struct fc_engine_migr *m, oblock_t ob, const void *data, bool dirty);
int dm_migr_in_preload(struct fc_engine_migr *m, oblock_t ob);
uint32_t dm_migr_in_end(struct fc_engine_migr *m);
uint32_t dm_migr_in_preloaded(struct fc_engine_migr *m);
int dm_migr_in_durable(struct fc_engine_migr *m, bool final);
void dm_migr_in_lost(struct fc_engine_migr *m);
void dm_migr_in_shutdown(struct fc_engine_migr *m);
uint32_t dm_migr_in_remote_dirty(struct fc_engine_migr *m);
void dm_migr_in_completed(struct fc_engine_migr *m);
int dm_migr_in_forget_all(struct fc_engine_migr *m);
void dm_migr_stats_json(struct fc_engine_migr *m, json_t *o);

/* The destination of hybrid (dm_migr_hybrid.c): dm_migr_dest.c's steps
 * call these where the strategy needs the relay. */
int dm_hyb_begin(struct fc_engine_migr *m, struct fc_dm_migr *st, char *err, size_t errlen);
int dm_hyb_attach(struct fc_engine_migr *m, char *err, size_t errlen);
uint32_t dm_hyb_end(struct fc_engine_migr *m);
void dm_hyb_lost(struct fc_engine_migr *m, const char *why);
void dm_hyb_shutdown(struct fc_engine_migr *m);
void dm_hyb_teardown(struct fc_host *host, struct fc_volume *v, struct fc_dm_migr *st);
void dm_hyb_free(struct dm_hybrid *hy);
uint32_t dm_hyb_remote_dirty(struct fc_dm_migr *st);
/* Under st->lock. */
void dm_hyb_stats_json(struct fc_dm_migr *st, json_t *o);
/* Settling (dm_migr_settle.c): the source given up, the clone hydrates
 * from the origin on a thread of its own; *given_up counts the blocks
 * dirty at the switchover it did not hold.  Under host->lock, the
 * migration's threads gone. */
int dm_hyb_settle_lost(struct fc_host *host, struct fc_volume *v, struct fc_dm_migr *st,
                       uint32_t *given_up, char *err, size_t errlen);
/* The same with the source reachable: the clone hydrates through fetch
 * (a settle session) until done, or stops with -errno and why.  Without
 * host->lock. */
int dm_hyb_settle_finish(struct fc_host *host, struct fc_volume *v, struct fc_dm_migr *st,
                         fc_engine_fetch_start_fn *fetch, void *ctx, char *err,
                         size_t errlen);
/* Start-up: volume v, marked in:<migration>, still has hybrid's clone
 * under its cache (this agent died mid-hydration).  Take it up: the map
 * from the restore XML, a relay (cut: nothing to fetch from until a
 * settle) given to the clone's NBD device again.  0, or -errno and why
 * (the devices are left as they are). */
int dm_hyb_recover(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen);
/* Where hybrid's copy into this volume is: switched over onto the clone
 * (attached), hydrated to the end (finished: nothing is only on the
 * source any more), settled with the source lost (from_origin).  False
 * when the volume has no hybrid state. */
struct dm_hyb_phase {
  bool attached, finished, from_origin;
};
bool dm_hyb_phase(struct fc_dm_migr *st, struct dm_hyb_phase *ph);

#endif

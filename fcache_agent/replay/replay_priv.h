/* SPDX-License-Identifier: Apache-2.0 */
/* Inside the replayer (replay.h): the simulated host.  One file per
 * concept: cache.c (blocks, replacement, enforcement), volumes.c (the
 * volume table), hec.c and u64set.c (HEC's admission), window.c (windows,
 * prediction, shares), series.c, sim.c (the request loop), config.c,
 * report.c, profile.c. */
#ifndef FCACHE_REPLAY_PRIV_H
#define FCACHE_REPLAY_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/predict.h"
#include "alloc/rws.h"
#include "alloc/share.h"
#include "alloc/staging.h"
#include "alloc/victim.h"
#include "common/blockmap.h"
#include "common/entry.h"
#include "common/lru.h"
#include "replay.h"

#define HEC_REGION_BYTES (4ull << 20)   /* HEC's defaults: 4 MiB regions */
#define HEC_SEQ_BYTES (4ull << 20)      /* and sequences over 4 MiB rejected */

/* A growable list of doubles (a volume's per-window series). */
struct rp_dvec {
  double *v;
  size_t n, cap;
};

int rp_dvec_push(struct rp_dvec *d, double x);

/* A set of 64-bit keys (HEC's touched regions: a bitmap in HEC, but
 * oracle traces number blocks sparsely up to 2^64). */
struct rp_u64set {
  uint64_t *slots;       /* key + 1; 0 = empty */
  uint64_t cap;          /* a power of two */
  uint64_t n;
};

/* Insert key; true if it was there already.  false also on ENOMEM (the
 * region then looks new: a missed admission, not a crash). */
bool rp_u64set_test_and_set(struct rp_u64set *s, uint64_t key);
void rp_u64set_free(struct rp_u64set *s);

struct rp_hec {
  struct rp_u64set touched;
  uint64_t seq_next;     /* the block that would continue the sequence */
  uint64_t seq_blocks;   /* blocks in the current sequence */
  uint64_t seq_base;     /* of which before the current request */
};

struct rp_vol {
  char id[FC_TRACE_VOLUME_MAX];
  uint32_t idx;
  /* Cached blocks: the agent's structures. */
  struct fc_blockmap map;
  struct fc_lru lru;
  uint64_t used;
  uint64_t share;        /* the allocation in force, blocks */
  uint64_t limit;
  /* Admission and demand. */
  struct fc_staging *stage;         /* rws */
  struct fc_rws *rws;               /* wss, rws, hec */
  struct fc_outlier_filter filt;
  struct fc_predictor pred;
  bool predicted;
  double next_pred;
  struct rp_hec hec;
  /* Figures. */
  struct fc_replay_counts c;
  double sum_alloc, sum_cached;
  struct rp_dvec obs, predv;
  double sum_err;
  uint64_t nr_err;
};

struct rp_sim {
  struct fc_replay_config cfg;
  /* The flash: a table of fc_entry as in the agent's cache device. */
  struct fc_entry *table;
  uint64_t *stamp;       /* noalloc: last use of each block (global LRU) */
  uint64_t clock;
  uint32_t *free_stack;
  uint32_t nr_free;
  uint64_t next_fresh;   /* blocks never used yet start here */
  uint64_t used;
  uint64_t max_used;
  /* Volumes. */
  struct rp_vol **vols;
  size_t nr_vols, cap_vols;
  uint32_t *vol_slots;   /* open addressing by id hash: index + 1 */
  size_t nr_vol_slots;
  struct rp_vol *last_vol;
  struct fc_share_demand *demand;
  uint64_t *shares;
  /* The replacement rule's input (alloc/victim, the agent's rule), one
   * per volume, and its state. */
  struct fc_victim_cand *victim_cand;
  struct fc_victim_cursor victim_cursor;
  /* Windows. */
  bool started;
  double t0;
  uint64_t window_idx;
  double window_end;
  uint64_t windows;
  double sum_alloc, sum_cached;
  /* The trace ended inside this window: its demand is a fraction of a
   * window's, so it does not count in the prediction error. */
  bool closing_partial;
  char *err;
  size_t err_len;
};

/* cache.c */
int rp_cache_init(struct rp_sim *s);
void rp_cache_destroy(struct rp_sim *s);
int rp_cache_vol_init(struct rp_sim *s, struct rp_vol *v);
/* CBLOCK_NONE when not cached. */
uint32_t rp_cache_lookup(struct rp_sim *s, struct rp_vol *v, uint64_t block);
void rp_cache_hit(struct rp_sim *s, struct rp_vol *v, uint32_t cb);
/* 0: cached; 1: no room for this volume (a share of 0); -ENOMEM. */
int rp_cache_insert(struct rp_sim *s, struct rp_vol *v, uint64_t block);
/* Strict enforcement: drop v's LRU blocks down to its share. */
void rp_cache_trim(struct rp_sim *s, struct rp_vol *v);

/* volumes.c */
/* The volume of id, created (and shares recomputed) on first sight. */
int rp_vol_get(struct rp_sim *s, const char *id, struct rp_vol **out);
void rp_vols_destroy(struct rp_sim *s);

/* hec.c */
/* Start of a request: SSEQR's sequence tracking. */
void rp_hec_request(struct rp_hec *h, uint64_t first, uint64_t n);
/* One block of the request (i-th): true if HEC would admit it on a miss
 * (its region was touched before, its sequence is short). */
bool rp_hec_block(struct rp_hec *h, const struct fc_replay_config *c,
                  uint64_t block, uint64_t i);

/* window.c */
int rp_window_close(struct rp_sim *s);
/* New shares from the current predictions (and staging resized). */
int rp_shares_update(struct rp_sim *s);

/* report helpers */
double rp_ratio(uint64_t a, uint64_t b);

#endif

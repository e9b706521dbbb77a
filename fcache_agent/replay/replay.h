/* SPDX-License-Identifier: Apache-2.0 */
/* The trace replayer: a metadata-only simulation of one host's flash
 * cache shared by several volumes, driven through the same admission
 * (alloc/staging), demand tracking (alloc/rws), prediction
 * (alloc/predict) and shares (alloc/share) as the agent, over the agent's
 * own replacement structures (common/lru, common/blockmap, common/entry).
 * Time is the trace's: windows close on trace time, so a month of trace
 * replays in seconds.  doc/research/replay.rst describes the policies, the
 * metrics and the JSON schema. */
#ifndef FCACHE_REPLAY_H
#define FCACHE_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "alloc/predict.h"
#include "alloc/share.h"
#include "alloc/staging.h"
#include "trace.h"

enum fc_replay_policy {
  FC_REPLAY_LRU,        /* admit all; a fixed partition of its limit each */
  FC_REPLAY_NOALLOC,    /* admit all; one LRU over the whole cache */
  FC_REPLAY_WSS,        /* admit all; shares from the predicted WSS */
  FC_REPLAY_RWS,        /* staging admission; shares from predicted RWSS_N */
  FC_REPLAY_HEC,        /* HEC's touch count + SSEQR; shares from it */
};

enum fc_replay_enforce {
  FC_ENFORCE_REPLACEMENT,  /* shares taken back at replacement (the agent) */
  FC_ENFORCE_STRICT,       /* usage over a new share dropped at once */
};

struct fc_replay_config {
  enum fc_replay_policy policy;
  uint32_t block_size;
  uint64_t cache_blocks;          /* the host's flash */
  uint64_t volume_limit_blocks;   /* each volume's upper bound */
  unsigned rws_n;                 /* 1..FC_RWS_MAX_N */
  enum fc_staging_kind staging;
  double staging_fraction;        /* of the cache, 0.001..0.01 */
  enum fc_predictor_kind predictor;
  unsigned outlier_n;
  double outlier_lambda;
  double headroom;
  enum fc_spare_mode spare;
  double window_s;
  enum fc_replay_enforce enforce;
};

/* The paper's settings: policy rws, N = 1, hybrid staging on 1 % of the
 * cache, exp_self, outlier n = 20 lambda = 5, headroom 10 %, spare
 * proportional, one-hour windows, replacement-time enforcement, 4 KiB
 * blocks.  The cache and limit sizes are left 0: the caller sets them. */
void fc_replay_config_default(struct fc_replay_config *c);
/* 0, or -EINVAL with a one-line reason in err. */
int fc_replay_config_check(const struct fc_replay_config *c, char *err, size_t len);

/* One volume's or the whole host's figures (doc/research/replay.rst). */
struct fc_replay_counts {
  uint64_t requests;
  uint64_t block_accesses;
  uint64_t hits;
  uint64_t staging_hits;
  uint64_t flash_writes;
  uint64_t windows;
  double mean_allocation_blocks;
  double mean_cached_blocks;
  uint64_t max_cached_blocks;
};

struct fc_replay_volume {
  char id[FC_TRACE_VOLUME_MAX];
  struct fc_replay_counts c;
  size_t nr_windows;          /* of the two lists below */
  double *rwss_observed;      /* blocks, per window; empty for lru, noalloc */
  double *rwss_predicted;     /* the prediction in force; NAN: none yet */
  double prediction_mare;     /* NAN when no window had both */
};

struct fc_replay_result {
  struct fc_replay_config config;
  struct fc_replay_counts total;
  size_t nr_volumes;
  struct fc_replay_volume *volumes;   /* in order of first appearance */
  double prediction_mare;             /* over every volume's windows */
  double elapsed_s;
  double requests_per_s;
};

/* Replay the whole trace.  0; -EINVAL for malformed input (the trace's
 * error names the line); -ENOMEM; -EIO.  err gets a one-line reason. */
int fc_replay_run(const struct fc_replay_config *c, struct fc_trace *t,
                  struct fc_replay_result **out, char *err, size_t len);
void fc_replay_result_free(struct fc_replay_result *r);

void fc_replay_print_table(FILE *f, const struct fc_replay_result *r);
/* The JSON document of doc/research/replay.rst, one line.  0 or -ENOMEM. */
int fc_replay_print_json(FILE *f, const struct fc_replay_result *r);

/* Window profiling (CloudCache §4.1): one rws replay per window size. */
struct fc_replay_profile_point {
  double window_s;
  double hit_ratio;
  double mean_allocation_blocks;
  double flash_write_ratio;
};

struct fc_replay_profile {
  size_t n;
  struct fc_replay_profile_point *points;   /* window_s increasing */
  size_t knee;                              /* index of the proposed window */
  double elapsed_s;
  /* What the agent's allocation_window = auto would choose over the
   * whole trace (alloc/window_knee, no decay) among the powers of two
   * seconds within the profile's first and last window: the window (0
   * when the trace is too short for three candidates) and its estimated
   * curve, online_n points. */
  double online_window_s;
  size_t online_n;
  struct fc_replay_profile_point online[32];
};

/* open: reopens the trace for each pass (a trace is read once).  windows:
 * n >= 2 sizes, > 0, any order, no repeats. */
typedef int (*fc_replay_open_fn)(void *arg, struct fc_trace **t);
int fc_replay_profile(const struct fc_replay_config *c, const double *windows,
                      size_t n, fc_replay_open_fn open, void *arg,
                      struct fc_replay_profile *out, char *err, size_t len);
void fc_replay_profile_free(struct fc_replay_profile *p);
void fc_replay_profile_print_table(FILE *f, const struct fc_replay_profile *p);
int fc_replay_profile_print_json(FILE *f, const struct fc_replay_profile *p);

const char *fc_replay_policy_name(enum fc_replay_policy p);
int fc_replay_policy_parse(const char *name, enum fc_replay_policy *out);
const char *fc_replay_enforce_name(enum fc_replay_enforce e);
int fc_replay_enforce_parse(const char *name, enum fc_replay_enforce *out);

#endif

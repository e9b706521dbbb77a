/* SPDX-License-Identifier: Apache-2.0 */
/* The host's on-demand allocator (CloudCache §4): at the end of each
 * volume's window it measures the volume's reuse working set, filters and
 * predicts the next window's, and shares the cache device among the
 * volumes by those predictions; the caches enforce the shares at
 * replacement time (ucache_share.c).  Each volume's predictor history and
 * share are kept in <volumes_dir>/<id>.alloc so a restarted agent goes on
 * where it was.  Private to the ucache engine. */
#ifndef FCACHE_UCACHE_ALLOCATOR_H
#define FCACHE_UCACHE_ALLOCATOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/predict.h"
#include "alloc/rws.h"
#include "alloc/share.h"
#include "engine/engine.h"

struct uc_allocator;

/* Windows of filtered demand kept to rebuild a restarted predictor: at
 * the slowest self-tuned smoothing (alpha 0.05) older windows weigh under
 * 4 % of a prediction. */
#define UC_ALLOC_HISTORY 64

/* A volume's demand and its history (in struct uc_vol). */
struct uc_vol_alloc {
  struct fc_predictor pred;
  struct fc_outlier_filter filter;
  uint64_t window_start_ms;         /* CLOCK_MONOTONIC */
  unsigned windows;                 /* closed since attach or restart */
  bool observed;                    /* a window closed (here or before a restart) */
  struct fc_rws_sizes last;         /* the last closed window */
  uint64_t observed_blocks;         /* its demand: RWS_N, or the WSS for admission all */
  double predicted_blocks;          /* for the window now running */
  double error_sum;                 /* sum of |predicted - observed| / observed */
  unsigned error_n;
  double last_error;
  double hist[UC_ALLOC_HISTORY];    /* observed demand, oldest first */
  unsigned hist_len;
  /* allocation_window = auto and no rws_window_s of its own: the window
   * in force is window_s, chosen at the knee at each window's close
   * (alloc/window_knee.h); knee_known once a knee was found. */
  bool window_auto;
  bool knee_known;
  unsigned window_s;
};

/* Parse the [agent] allocation keys; -EINVAL with a message. */
int uc_allocator_new(struct fc_host *host, struct uc_allocator **out, char *err,
                     size_t errlen);
/* Start the window thread once the volumes are back. */
int uc_allocator_start(struct uc_allocator *a);
void uc_allocator_free(struct uc_allocator *a);

/* Does this agent reserve each volume's cache_size (allocation = fixed)? */
bool uc_allocator_reserves(const struct uc_allocator *a);
/* The share a volume starts with (its persisted one, or its quota), and
 * its restored predictor; under host->lock. */
uint32_t uc_allocator_volume_init(struct uc_allocator *a, struct fc_volume *v,
                                  uint32_t quota_blocks);
/* Once the volume's cache exists: an automatic window starts following
 * its reuse times (out of memory, the volume keeps a fixed window, with a
 * warning).  Where uc_allocator_volume_init is: at attach under
 * host->lock, at start-up before the allocator's thread runs. */
void uc_allocator_volume_follow(struct uc_allocator *a, struct fc_volume *v);
/* Recompute every share now (a volume came or went); under host->lock. */
void uc_allocator_rebalance_locked(struct uc_allocator *a);
/* A migration's source: what the volume's allocation learned, for the
 * destination (NULL: nothing yet, or no memory).  Caller frees. */
json_t *uc_allocator_volume_export(struct uc_allocator *a, struct fc_volume *v);
/* A migration's destination: take the source's account (from: the peer,
 * for the log) unless the volume has closed a window here; its share
 * follows the prediction from its first window's close here.  Under
 * host->lock. */
void uc_allocator_volume_adopt(struct uc_allocator *a, struct fc_volume *v, json_t *o,
                               const char *from);
/* The volume's state file goes with it (detach). */
void uc_allocator_volume_forget(struct uc_allocator *a, const struct fc_volume *v);

json_t *uc_allocator_volume_json(struct uc_allocator *a, struct fc_volume *v);
json_t *uc_allocator_json(struct uc_allocator *a);

#endif

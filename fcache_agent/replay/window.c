/* SPDX-License-Identifier: Apache-2.0 */
/* The end of a window (CloudCache §4.2, §4.3): each volume's demand of
 * the window is observed, filtered for outliers and fed to its
 * predictor; the prediction sets the shares of the next window, the
 * staging areas follow the shares, and strict enforcement drops what is
 * over a share at once (the paper's Figure 8 worst case). */
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "replay_priv.h"

static bool
allocates(const struct fc_replay_config *c)
{
  return c->policy == FC_REPLAY_WSS || c->policy == FC_REPLAY_RWS ||
         c->policy == FC_REPLAY_HEC;
}

int
rp_shares_update(struct rp_sim *s)
{
  const struct fc_replay_config *c = &s->cfg;
  double stage_total, sum = 0;
  int r;

  if (!allocates(c))
    return 0;
  for (size_t i = 0; i < s->nr_vols; i++) {
    struct rp_vol *v = s->vols[i];

    s->demand[i].limit = v->limit;
    s->demand[i].predicted = v->predicted ? (uint64_t)ceil(v->next_pred) :
                                            FC_SHARE_UNKNOWN;
  }
  r = fc_share_compute(s->demand, s->nr_vols, c->cache_blocks, c->headroom,
                       c->spare, s->shares);
  if (r) {
    snprintf(s->err, s->err_len, "share computation failed (%d)", r);
    return r;
  }
  for (size_t i = 0; i < s->nr_vols; i++) {
    s->vols[i]->share = s->shares[i];
    sum += (double)s->shares[i];
  }
  if (c->policy != FC_REPLAY_RWS)
    return 0;
  /* The paper sizes the whole staging area from the cache and splits it
   * in proportion to the shares (§4.4.2). */
  stage_total = c->staging_fraction * (double)c->cache_blocks * c->block_size;
  for (size_t i = 0; i < s->nr_vols; i++) {
    double part = sum > 0 ? (double)s->shares[i] / sum : 1.0 / (double)s->nr_vols;

    fc_staging_resize(s->vols[i]->stage, (size_t)(stage_total * part));
    /* The reuse history beneath it, one share long, as the agent keeps
     * it (ucache_share.c; a share of 0 keeps the smallest, not none). */
    r = fc_staging_set_history(s->vols[i]->stage,
                               s->shares[i] ? s->shares[i] : 1);
    if (r) {
      snprintf(s->err, s->err_len, "staging history: out of memory");
      return r;
    }
  }
  return 0;
}

static int
observe(struct rp_sim *s, struct rp_vol *v)
{
  struct fc_rws_sizes sz;
  double obs, in_force = v->predicted ? v->next_pred : NAN;
  int r;

  fc_rws_close_window(v->rws, &sz);
  if (v->stage)
    fc_staging_end_window(v->stage);
  obs = (double)sz.blocks[s->cfg.policy == FC_REPLAY_RWS ? s->cfg.rws_n : 0];
  r = rp_dvec_push(&v->obs, obs);
  if (!r)
    r = rp_dvec_push(&v->predv, in_force);
  if (r)
    return r;
  /* The paper's error: |predicted - observed| / observed; a window that
   * saw no demand has no relative error, the trace's last, cut short,
   * none either. */
  if (v->predicted && obs > 0 && !s->closing_partial) {
    v->sum_err += fabs(v->next_pred - obs) / obs;
    v->nr_err++;
  }
  v->next_pred = fc_predictor_observe(&v->pred,
                                      fc_outlier_filter_apply(&v->filt, obs, NULL));
  v->predicted = true;
  return 0;
}

int
rp_window_close(struct rp_sim *s)
{
  const struct fc_replay_config *c = &s->cfg;
  double alloc = 0;
  int r;

  for (size_t i = 0; i < s->nr_vols; i++) {
    struct rp_vol *v = s->vols[i];

    if (v->rws) {
      r = observe(s, v);
      if (r)
        return r;
    }
    v->sum_alloc += (double)v->share;
    v->sum_cached += (double)v->used;
    v->c.windows++;
    alloc += (double)v->share;
  }
  if (c->policy == FC_REPLAY_NOALLOC || alloc > (double)c->cache_blocks)
    alloc = (double)c->cache_blocks;
  s->sum_alloc += alloc;
  s->sum_cached += (double)s->used;
  s->windows++;
  if (!allocates(c))
    return 0;
  r = rp_shares_update(s);
  if (r)
    return r;
  if (c->enforce == FC_ENFORCE_STRICT)
    for (size_t i = 0; i < s->nr_vols; i++)
      rp_cache_trim(s, s->vols[i]);
  return 0;
}

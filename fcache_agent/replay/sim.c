/* SPDX-License-Identifier: Apache-2.0 */
/* The request loop: each request is split into blocks, each block looked
 * up in its volume's share of the simulated flash; a miss goes through
 * the policy's admission, and an admitted block takes a cache block by
 * the replacement rule of cache.c.  Windows close on trace time before
 * the request that crosses them.  Metadata only: no data moves, which is
 * what makes the replay run far faster than real time. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay_priv.h"

/* A trace spanning more windows than this has a broken timestamp (times
 * that switch units) or a window far too short for it: a week's trace
 * in hourly windows is 168 of them, and each window's close feeds every
 * volume's predictors, so a million took seconds for one request. */
#define MAX_WINDOWS 100000u

static double
now_s(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

double
rp_ratio(uint64_t a, uint64_t b)
{
  return b ? (double)a / (double)b : 0.0;
}

/* A miss: does the policy let the block in? */
static bool
admit(struct rp_sim *s, struct rp_vol *v, uint64_t block, bool is_write,
      bool hec_ok)
{
  const struct fc_replay_config *c = &s->cfg;
  bool in, keeps_data = c->staging != FC_STAGING_ADDRESS;

  switch (c->policy) {
  case FC_REPLAY_RWS:
    /* A read the stage holds the data of is served from memory (a
     * staging hit) and still counts as an access towards admission. */
    if (!is_write && keeps_data && fc_staging_read_data(v->stage, block, NULL))
      v->c.staging_hits++;
    in = fc_staging_access(v->stage, block, is_write);
    if (!in && !is_write && keeps_data)
      fc_staging_put_data(v->stage, block, NULL);
    return in;
  case FC_REPLAY_HEC:
    return hec_ok;
  default:
    return true;
  }
}

static int
access_block(struct rp_sim *s, struct rp_vol *v, uint64_t block, bool is_write,
             uint64_t i)
{
  const struct fc_replay_config *c = &s->cfg;
  bool hec_ok = false;
  uint32_t cb;
  int r;

  v->c.block_accesses++;
  if (c->policy == FC_REPLAY_HEC) {
    hec_ok = rp_hec_block(&v->hec, c, block, i);
    if (hec_ok)
      fc_rws_access(v->rws, block);
  } else if (v->rws) {
    fc_rws_access(v->rws, block);
  }
  cb = rp_cache_lookup(s, v, block);
  if (cb != CBLOCK_NONE) {
    v->c.hits++;
    /* Write-through: a write hit rewrites the cached block. */
    if (is_write)
      v->c.flash_writes++;
    rp_cache_hit(s, v, cb);
    return 0;
  }
  if (!admit(s, v, block, is_write, hec_ok))
    return 0;
  r = rp_cache_insert(s, v, block);
  if (r < 0) {
    snprintf(s->err, s->err_len, "out of memory");
    return r;
  }
  if (r == 0)
    v->c.flash_writes++;
  return 0;
}

static int
too_far(struct rp_sim *s, struct fc_trace *t, double time)
{
  int r = fc_trace_fail(t, "time %.17g is more than %u windows of %g s "
                        "after the trace's first; a broken timestamp, or use "
                        "a longer --window", time, MAX_WINDOWS,
                        s->cfg.window_s);

  snprintf(s->err, s->err_len, "%s", fc_trace_error(t));
  return r;
}

/* A time so large that adding a window to it leaves it as it is (a
 * double has 53 bits): no window could ever end, and the loop below
 * would close a million of them before giving up. */
static int
too_late(struct rp_sim *s, struct fc_trace *t, double time)
{
  int r = fc_trace_fail(t, "time %.17g is too large for windows of %g s",
                        time, s->cfg.window_s);

  snprintf(s->err, s->err_len, "%s", fc_trace_error(t));
  return r;
}

static int
advance_windows(struct rp_sim *s, struct fc_trace *t, double time)
{
  uint64_t closed = 0;
  double end;
  int r;

  if (!s->started) {
    s->started = true;
    s->t0 = time;
    s->window_end = time + s->cfg.window_s;
    return s->window_end > time ? 0 : too_late(s, t, time);
  }
  if (time < s->window_end)
    return 0;
  /* Refused before a window closes: closing the windows up to it would
   * take seconds, only to fail. */
  if ((time - s->t0) / s->cfg.window_s > MAX_WINDOWS)
    return too_far(s, t, time);
  while (time >= s->window_end) {
    if (++closed > MAX_WINDOWS)
      return too_far(s, t, time);
    r = rp_window_close(s);
    if (r)
      return r;
    s->window_idx++;
    /* From t0, not by repeated addition: no drift over a long trace. */
    end = s->t0 + (double)(s->window_idx + 1) * s->cfg.window_s;
    if (!(end > s->window_end))
      return too_late(s, t, time);
    s->window_end = end;
  }
  return 0;
}

static void
sum_counts(struct fc_replay_counts *t, const struct fc_replay_counts *c)
{
  t->requests += c->requests;
  t->block_accesses += c->block_accesses;
  t->hits += c->hits;
  t->staging_hits += c->staging_hits;
  t->flash_writes += c->flash_writes;
}

static int
collect(struct rp_sim *s, struct fc_replay_result *res)
{
  double sum_err = 0;
  uint64_t nr_err = 0;

  res->config = s->cfg;
  res->volumes = calloc(s->nr_vols ? s->nr_vols : 1, sizeof *res->volumes);
  if (!res->volumes)
    return -ENOMEM;
  res->nr_volumes = s->nr_vols;
  for (size_t i = 0; i < s->nr_vols; i++) {
    struct rp_vol *v = s->vols[i];
    struct fc_replay_volume *o = &res->volumes[i];

    memcpy(o->id, v->id, sizeof o->id);
    o->c = v->c;
    if (v->c.windows) {
      o->c.mean_allocation_blocks = v->sum_alloc / (double)v->c.windows;
      o->c.mean_cached_blocks = v->sum_cached / (double)v->c.windows;
    }
    /* The series move to the result. */
    o->nr_windows = v->obs.n;
    o->rwss_observed = v->obs.v;
    o->rwss_predicted = v->predv.v;
    v->obs.v = v->predv.v = NULL;
    o->prediction_mare = v->nr_err ? v->sum_err / (double)v->nr_err : NAN;
    sum_err += v->sum_err;
    nr_err += v->nr_err;
    sum_counts(&res->total, &v->c);
  }
  res->total.windows = s->windows;
  if (s->windows) {
    res->total.mean_allocation_blocks = s->sum_alloc / (double)s->windows;
    res->total.mean_cached_blocks = s->sum_cached / (double)s->windows;
  }
  res->total.max_cached_blocks = s->max_used;
  res->prediction_mare = nr_err ? sum_err / (double)nr_err : NAN;
  return 0;
}

static int
replay(struct rp_sim *s, struct fc_trace *t)
{
  struct fc_trace_req req;
  struct rp_vol *v;
  int r;

  while ((r = fc_trace_next(t, &req)) == 1) {
    r = advance_windows(s, t, req.time);
    if (!r)
      r = rp_vol_get(s, req.volume, &v);
    if (r)
      return r;
    v->c.requests++;
    if (s->cfg.policy == FC_REPLAY_HEC)
      rp_hec_request(&v->hec, req.first_block, req.nr_blocks);
    for (uint64_t i = 0; i < req.nr_blocks; i++) {
      r = access_block(s, v, req.first_block + i, req.is_write, i);
      if (r)
        return r;
    }
  }
  if (r < 0) {
    snprintf(s->err, s->err_len, "%s", fc_trace_error(t));
    return r;
  }
  /* The last window, however short, is part of the replay (its hits,
   * allocation and observation), but not of the prediction error. */
  s->closing_partial = true;
  return s->started ? rp_window_close(s) : 0;
}

int
fc_replay_run(const struct fc_replay_config *c, struct fc_trace *t,
              struct fc_replay_result **out, char *err, size_t len)
{
  struct rp_sim s;
  struct fc_replay_result *res = NULL;
  double start = now_s();
  int r;

  memset(&s, 0, sizeof s);
  r = fc_replay_config_check(c, err, len);
  if (r)
    return r;
  s.cfg = *c;
  s.err = err;
  s.err_len = len;
  err[0] = '\0';
  r = rp_cache_init(&s);
  if (r) {
    snprintf(err, len, "out of memory for a cache of %llu blocks",
             (unsigned long long)c->cache_blocks);
    goto out;
  }
  r = replay(&s, t);
  if (r)
    goto out;
  res = calloc(1, sizeof *res);
  if (!res || collect(&s, res)) {
    r = -ENOMEM;
    snprintf(err, len, "out of memory");
    goto out;
  }
  res->elapsed_s = now_s() - start;
  res->requests_per_s = res->elapsed_s > 0 ?
                        (double)res->total.requests / res->elapsed_s : 0;
  *out = res;
  res = NULL;
out:
  fc_replay_result_free(res);
  rp_vols_destroy(&s);
  rp_cache_destroy(&s);
  return r;
}

void
fc_replay_result_free(struct fc_replay_result *r)
{
  if (!r)
    return;
  for (size_t i = 0; r->volumes && i < r->nr_volumes; i++) {
    free(r->volumes[i].rwss_observed);
    free(r->volumes[i].rwss_predicted);
  }
  free(r->volumes);
  free(r);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The host's on-demand allocator: windows, prediction, shares (see
 * allocator.h).  One thread wakes every second, closes the windows that
 * are due and, if any closed, recomputes every share.  It only ever tries
 * the host's lock: a control operation that holds it (a long detach) costs
 * a late window, never a deadlock with whoever stops this thread. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "allocator.h"
#include "common/clock.h"
#include "common/lockcheck.h"
#include "common/log.h"
#include "ucache_engine_priv.h"

#define TICK_MS 1000
/* CloudCache's outlier filter (§4.2). */
#define OUTLIER_N 20
#define OUTLIER_LAMBDA 5.0
/* The paper's fixed smoothing parameters (§4.4.1). */
#define FIXED_ALPHA 0.3
#define FIXED_BETA 0.3

struct uc_allocator {
  struct fc_host *host;
  bool rwss;                      /* false: allocation = fixed */
  enum fc_spare_mode spare;
  double headroom;
  unsigned window_s;               /* fixed; with window_auto, window_min */
  bool window_auto;
  unsigned window_min, window_max;
  enum fc_predictor_kind kind;
  pthread_mutex_t lock;           /* stopping, and the condition's */
  pthread_cond_t cond;
  bool stopping;
  bool running;
  pthread_t thread;
};

int
uc_allocator_new(struct fc_host *host, struct uc_allocator **out, char *err,
                 size_t errlen)
{
  const struct fc_config *cfg = &host->cfg;
  struct uc_allocator *a = calloc(1, sizeof *a);
  pthread_condattr_t attr;

  if (!a)
    return -ENOMEM;
  a->host = host;
  a->rwss = !strcmp(cfg->allocation, "rwss");
  a->headroom = cfg->allocation_headroom_percent / 100.0;
  a->window_auto = cfg->allocation_window == FC_ALLOCATION_WINDOW_AUTO;
  a->window_min = cfg->allocation_window_min;
  a->window_max = cfg->allocation_window_max;
  /* A window any volume may have: the host's cadence as the balancer
   * reads it (the shortest, under auto). */
  a->window_s = a->window_auto ? a->window_min : cfg->allocation_window;
  /* config.c checked the names against the same lists. */
  if (fc_spare_mode_parse(cfg->allocation_spare, &a->spare) ||
      fc_predictor_parse(cfg->rws_predictor, &a->kind)) {
    snprintf(err, errlen, "allocation_spare '%s' or rws_predictor '%s' unknown",
             cfg->allocation_spare, cfg->rws_predictor);
    free(a);
    return -EINVAL;
  }
  pthread_mutex_init(&a->lock, NULL);
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&a->cond, &attr);
  pthread_condattr_destroy(&attr);
  *out = a;
  return 0;
}

bool
uc_allocator_reserves(const struct uc_allocator *a)
{
  return !a->rwss;
}

static unsigned
window_of(const struct uc_allocator *a, const struct fc_volume *v)
{
  const struct uc_vol_alloc *va = &UV(v)->alloc;

  if (va->window_auto)
    return va->window_s;
  return v->p.rws_window_s ? v->p.rws_window_s : a->window_s;
}

static unsigned
clamp_window(const struct uc_allocator *a, json_int_t s)
{
  if (s < (json_int_t)a->window_min)
    return a->window_min;
  return s > (json_int_t)a->window_max ? a->window_max : (unsigned)s;
}

static unsigned
demand_n(const struct fc_volume *v)
{
  /* What the cache would take in: the reused blocks under rws admission,
   * every block under admission all. */
  return v->p.admission == FC_ADMIT_RWS ? v->p.rws_n : 0;
}

static void
state_path(const struct uc_allocator *a, const struct fc_volume *v, char *buf,
           size_t len)
{
  snprintf(buf, len, "%s/%s.alloc", a->host->volumes_dir, v->p.id);
}

static void
predictor_reset(struct uc_allocator *a, struct uc_vol_alloc *va)
{
  fc_predictor_init(&va->pred, a->kind, FIXED_ALPHA, FIXED_BETA);
  fc_outlier_filter_init(&va->filter, OUTLIER_N, OUTLIER_LAMBDA);
}

/* Feed one window's demand: filtered, then predicted. */
static void
observe(struct uc_vol_alloc *va, double demand)
{
  double x = fc_outlier_filter_apply(&va->filter, demand, NULL);

  va->predicted_blocks = fc_predictor_observe(&va->pred, x);
  if (va->hist_len == UC_ALLOC_HISTORY) {
    memmove(va->hist, va->hist + 1, (UC_ALLOC_HISTORY - 1) * sizeof va->hist[0]);
    va->hist_len--;
  }
  /* Raw, as the filter keeps its own history: fed again after a restart
   * they rebuild the filter and the predictor as they were. */
  va->hist[va->hist_len++] = demand;
  va->observed = true;
}

/* What a volume's allocation has learned: its demand history, its share,
 * its prediction error and, once found, its window at the knee (the reuse
 * times themselves are not kept: 48 KiB a volume).  Kept in its state
 * file across a restart, and sent to a migration's destination. */
static json_t *
state_json(struct fc_volume *v)
{
  struct uc_vol_alloc *va = &UV(v)->alloc;
  struct fc_ucache_alloc_info info;
  json_t *o, *hist = json_array();

  if (!hist)
    return NULL;
  for (unsigned i = 0; i < va->hist_len; i++)
    json_array_append_new(hist, json_real(va->hist[i]));
  fc_ucache_alloc_info(UV(v)->uc, &info);
  o = json_pack("{s:o, s:I, s:f, s:I}", "history", hist,
                "share_blocks", (json_int_t)info.share_blocks,
                "error_sum", va->error_sum, "error_n", (json_int_t)va->error_n);
  if (o && va->window_auto && va->knee_known)
    json_object_set_new(o, "window_s", json_integer(va->window_s));
  return o;
}

static void
persist(struct uc_allocator *a, struct fc_volume *v)
{
  char path[FC_PATH_MAX + 200], tmp[FC_PATH_MAX + 210];
  json_t *o = state_json(v);

  if (!o)
    return;
  state_path(a, v, path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  /* Rename over the old: a crash leaves one whole file.  Not synced: a
   * lost window of history costs a less informed first prediction. */
  if (json_dump_file(o, tmp, JSON_COMPACT) || rename(tmp, path))
    log_warning("volume %s: cannot save its allocation state %s", v->p.id, path);
  json_decref(o);
}

/* Take what state_json made (read back from `from`, a file or a peer):
 * the window at the knee, the demand history fed again through this
 * host's predictor.  Every value is checked, as a damaged file or a peer
 * may send anything.  false: unreadable, nothing taken but the window. */
static bool
apply_state(struct uc_vol_alloc *va, const struct fc_volume *v,
            const struct uc_allocator *a, json_t *o, const char *from,
            json_int_t *share)
{
  json_int_t n = 0;
  json_t *hist = NULL;
  double sum = 0;

  if (va->window_auto) {
    json_t *w = json_object_get(o, "window_s");

    if (json_is_integer(w)) {
      va->window_s = clamp_window(a, json_integer_value(w));
      va->knee_known = true;
    }
  }
  if (json_unpack(o, "{s:o, s:I, s:F, s:I}", "history", &hist, "share_blocks", share,
                  "error_sum", &sum, "error_n", &n) || !json_is_array(hist)) {
    log_warning("volume %s: ignoring unreadable allocation state from %s", v->p.id, from);
    return false;
  }
  for (size_t i = json_array_size(hist) > UC_ALLOC_HISTORY ?
                  json_array_size(hist) - UC_ALLOC_HISTORY : 0;
       i < json_array_size(hist); i++) {
    json_t *e = json_array_get(hist, i);
    double d = json_number_value(e);

    /* A window's demand is a block count: a value no cache could hold
     * (1e308, negative) or no number at all is damage, not history to
     * learn from. */
    if (!json_is_number(e) || !(d >= 0 && d <= FC_DEMAND_MAX)) {
      log_warning("volume %s: ignoring allocation history value %g from %s",
                  v->p.id, d, from);
      continue;
    }
    observe(va, d);
  }
  va->error_sum = sum >= 0 && sum <= FC_DEMAND_MAX ? sum : 0;
  va->error_n = n > 0 && n <= UINT32_MAX ? (unsigned)n : 0;
  return true;
}

uint32_t
uc_allocator_volume_init(struct uc_allocator *a, struct fc_volume *v,
                         uint32_t quota_blocks)
{
  struct uc_vol_alloc *va = &UV(v)->alloc;
  char path[FC_PATH_MAX + 200];
  json_int_t share = 0;
  bool ok;
  json_t *o;

  memset(va, 0, sizeof *va);
  predictor_reset(a, va);
  va->window_start_ms = fc_now_ms();
  /* Until its knee is known a volume has the shortest window, as a curve
   * without a knee would: its first choice comes soonest. */
  va->window_auto = a->window_auto && !v->p.rws_window_s;
  va->window_s = a->window_min;
  state_path(a, v, path, sizeof path);
  o = json_load_file(path, 0, NULL);
  if (!o)
    return quota_blocks;
  ok = apply_state(va, v, a, o, path, &share);
  json_decref(o);
  if (!ok || !a->rwss || share <= 0 || (uint64_t)share > quota_blocks)
    return quota_blocks;
  log_info("volume %s: allocation restored: %u windows of history, share %lld blocks",
           v->p.id, va->hist_len, (long long)share);
  return (uint32_t)share;
}

json_t *
uc_allocator_volume_export(struct uc_allocator *a, struct fc_volume *v)
{
  const struct uc_vol_alloc *va = &UV(v)->alloc;

  if (!UV(v)->uc || (!va->observed && !(va->window_auto && va->knee_known)))
    return NULL;
  (void)a;
  return state_json(v);
}

void
uc_allocator_volume_adopt(struct uc_allocator *a, struct fc_volume *v, json_t *o,
                          const char *from)
{
  FC_ASSERT_HELD(&a->host->lock);
  struct uc_vol_alloc *va = &UV(v)->alloc;
  json_int_t share = 0;

  /* A volume that has closed windows here already knows more of its
   * present than the peer's account; otherwise the peer's history is all
   * there is.  The peer's share was of its own cache device, and the
   * shares here are not recomputed now: until the volume's first window
   * here closes it keeps what a new volume has, so the blocks the
   * migration is bringing are not cut by a prediction made before they
   * came (an idle last window while the VM was paused predicts none). */
  if (!UV(v)->uc || va->observed || (va->window_auto && va->knee_known))
    return;
  apply_state(va, v, a, o, from, &share);
  if (!va->observed && !(va->window_auto && va->knee_known))
    return;
  log_info("volume %s: allocation taken from %s: %u windows of history%s", v->p.id, from,
           va->hist_len, va->window_auto && va->knee_known ? ", window at its knee" : "");
  persist(a, v);
}

void
uc_allocator_volume_follow(struct uc_allocator *a, struct fc_volume *v)
{
  struct uc_vol_alloc *va = &UV(v)->alloc;
  int r;

  if (!va->window_auto)
    return;
  r = fc_ucache_follow_reuse(UV(v)->uc, a->window_max);
  if (r) {
    va->window_auto = false;
    log_warning("volume %s: cannot follow its reuse times (%s): its window "
                "stays %u s", v->p.id, strerror(-r), window_of(a, v));
  }
}

void
uc_allocator_volume_forget(struct uc_allocator *a, const struct fc_volume *v)
{
  char path[FC_PATH_MAX + 200];

  state_path(a, v, path, sizeof path);
  if (unlink(path) && errno != ENOENT)
    log_warning("volume %s: cannot remove %s: %s", v->p.id, path, strerror(errno));
}

void
uc_allocator_rebalance_locked(struct uc_allocator *a)
{
  FC_ASSERT_HELD(&a->host->lock);
  struct fc_host *host = a->host;
  struct fc_share_demand d[FC_MAX_VOLUMES];
  struct fc_volume *vs[FC_MAX_VOLUMES];
  uint64_t share[FC_MAX_VOLUMES];
  size_t n = 0;

  if (!a->rwss)
    return;       /* fixed: every share is the volume's cache_size, for good */
  for (unsigned i = 0; i < host->nr_volumes; i++) {
    struct fc_volume *v = host->volumes[i];
    struct uc_vol_alloc *va;

    if (!v->priv || !UV(v)->uc)
      continue;
    va = &UV(v)->alloc;
    d[n].predicted = va->observed ? (uint64_t)ceil(va->predicted_blocks) : FC_SHARE_UNKNOWN;
    d[n].limit = v->p.cache_size / host->cfg.block_size;
    vs[n++] = v;
  }
  if (n == 0 || fc_share_compute(d, n, UCE(host)->dev->nr_blocks, a->headroom, a->spare,
                                 share))
    return;
  for (size_t i = 0; i < n; i++)
    fc_ucache_set_share(UV(vs[i])->uc, (uint32_t)share[i]);
}

/* At the close of each of its windows an automatic volume's next window
 * is the knee of its hit ratio against the window; until enough of its
 * past is known (-EAGAIN) it keeps the one it has. */
static void
choose_window(struct uc_allocator *a, struct fc_volume *v)
{
  struct uc_vol_alloc *va = &UV(v)->alloc;
  uint32_t w;
  int r = fc_ucache_knee_window(UV(v)->uc, a->window_min, a->window_max, &w);

  if (r)
    return;
  if (w != va->window_s)
    log_info("volume %s: window %u s, at the knee of its hit ratio (was %u s)",
             v->p.id, w, va->window_s);
  va->window_s = w;
  va->knee_known = true;
}

static void
close_window(struct uc_allocator *a, struct fc_volume *v, uint64_t now)
{
  struct uc_vol_alloc *va = &UV(v)->alloc;
  struct fc_rws_sizes sizes;
  uint64_t demand;

  fc_ucache_close_window(UV(v)->uc, &sizes);
  va->window_start_ms = now;
  demand = sizes.blocks[demand_n(v)];
  if (va->observed && demand > 0) {
    va->last_error = fabs(va->predicted_blocks - (double)demand) / (double)demand;
    va->error_sum += va->last_error;
    va->error_n++;
  }
  va->last = sizes;
  va->observed_blocks = demand;
  va->windows++;
  observe(va, (double)demand);
  if (va->window_auto)
    choose_window(a, v);
}

static void
tick(struct uc_allocator *a)
{
  struct fc_host *host = a->host;
  bool closed[FC_MAX_VOLUMES] = { false }, any = false;
  uint64_t now = fc_now_ms();

  if (pthread_mutex_trylock(&host->lock))
    return;
  for (unsigned i = 0; i < host->nr_volumes; i++) {
    struct fc_volume *v = host->volumes[i];

    if (!v->priv || !UV(v)->uc ||
        now - UV(v)->alloc.window_start_ms < (uint64_t)window_of(a, v) * 1000)
      continue;
    close_window(a, v, now);
    closed[i] = any = true;
  }
  if (any) {
    uc_allocator_rebalance_locked(a);
    for (unsigned i = 0; i < host->nr_volumes; i++)
      if (closed[i])
        persist(a, host->volumes[i]);
  }
  pthread_mutex_unlock(&host->lock);
}

static void *
run(void *arg)
{
  struct uc_allocator *a = arg;

  pthread_mutex_lock(&a->lock);
  while (!a->stopping) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += TICK_MS / 1000;
    pthread_cond_timedwait(&a->cond, &a->lock, &ts);
    if (a->stopping)
      break;
    pthread_mutex_unlock(&a->lock);
    tick(a);
    pthread_mutex_lock(&a->lock);
  }
  pthread_mutex_unlock(&a->lock);
  return NULL;
}

int
uc_allocator_start(struct uc_allocator *a)
{
  int r = pthread_create(&a->thread, NULL, run, a);

  if (r)
    return -r;
  a->running = true;
  return 0;
}

void
uc_allocator_free(struct uc_allocator *a)
{
  if (!a)
    return;
  if (a->running) {
    pthread_mutex_lock(&a->lock);
    a->stopping = true;
    pthread_cond_signal(&a->cond);
    pthread_mutex_unlock(&a->lock);
    pthread_join(a->thread, NULL);
  }
  pthread_cond_destroy(&a->cond);
  pthread_mutex_destroy(&a->lock);
  free(a);
}

static json_t *
bytes_or_null(bool known, double blocks, uint32_t bs)
{
  return known ? json_integer((json_int_t)llround(blocks * bs)) : json_null();
}

json_t *
uc_allocator_volume_json(struct uc_allocator *a, struct fc_volume *v)
{
  struct uc_vol_alloc *va = &UV(v)->alloc;
  uint32_t bs = a->host->cfg.block_size;
  struct fc_ucache_alloc_info info;
  json_t *o, *rwss;

  if (!UV(v)->uc)
    return json_null();
  fc_ucache_alloc_info(UV(v)->uc, &info);
  rwss = json_array();
  for (unsigned n = 0; n <= FC_RWS_MAX_N && va->observed && va->windows; n++)
    json_array_append_new(rwss, json_integer((json_int_t)(va->last.blocks[n] * bs)));
  o = json_pack("{s:I, s:I, s:I, s:o, s:o, s:o, s:I, s:i, s:I, s:I, s:o}",
                "share_bytes", (json_int_t)info.share_blocks * bs,
                "used_bytes", (json_int_t)info.used_blocks * bs,
                "limit_bytes", (json_int_t)info.quota_blocks * bs,
                "rwss_observed_bytes",
                bytes_or_null(va->windows > 0, (double)va->observed_blocks, bs),
                "rwss_predicted_bytes", bytes_or_null(va->observed, va->predicted_blocks, bs),
                "prediction_error",
                va->error_n ? json_real(va->error_sum / va->error_n) : json_null(),
                "window_s", (json_int_t)window_of(a, v),
                "rws_n", (int)demand_n(v),
                "taken_blocks", (json_int_t)info.taken,
                "given_blocks", (json_int_t)info.given,
                "rwss_by_n_bytes", rwss);
  if (!o)
    return NULL;
  json_object_set_new(o, "windows", json_integer(va->windows));
  /* window_s above is the window in force; automatic or fixed, and, when
   * automatic, whether it is the knee yet or still the lower bound. */
  json_object_set_new(o, "window_auto", json_boolean(va->window_auto));
  json_object_set_new(o, "window_at_knee", json_boolean(va->window_auto && va->knee_known));
  json_object_set_new(o, "tracker", json_pack("{s:I, s:f, s:I}", "memory_bytes",
                                              (json_int_t)info.rws_memory,
                                              "sample_rate", info.rws_sample_rate,
                                              "knee_memory_bytes",
                                              (json_int_t)info.knee_memory));
  if (info.staging)
    json_object_set_new(o, "staging", json_pack(
        "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
        "kind", fc_staging_kind_name(v->p.staging),
        "area_bytes", (json_int_t)info.st.area_bytes,
        "used_bytes", (json_int_t)info.st.used_bytes,
        "addresses", (json_int_t)info.st.addresses,
        "data_blocks", (json_int_t)info.st.data_blocks,
        "admitted", (json_int_t)info.st.admitted,
        "data_hits", (json_int_t)info.staging_hits,
        "evicted", (json_int_t)info.st.evicted,
        "recalled", (json_int_t)info.st.recalled,
        "history_blocks", (json_int_t)info.st.history_blocks,
        "history_bytes", (json_int_t)info.st.history_bytes));
  else
    json_object_set_new(o, "staging", json_null());
  return o;
}

json_t *
uc_allocator_json(struct uc_allocator *a)
{
  struct fc_host *host = a->host;
  json_t *vols = json_array();

  for (unsigned i = 0; i < host->nr_volumes; i++) {
    struct fc_volume *v = host->volumes[i];
    json_t *vo;

    if (!v->priv || !UV(v)->uc)
      continue;
    vo = uc_allocator_volume_json(a, v);
    if (vo && json_is_object(vo))
      json_object_set_new(vo, "id", json_string(v->p.id));
    json_array_append_new(vols, vo);
  }
  return json_pack("{s:s, s:s, s:I, s:b, s:I, s:I, s:f, s:I, s:o}",
                   "mode", a->rwss ? "rwss" : "fixed",
                   "spare", fc_spare_mode_name(a->spare),
                   "window_s", (json_int_t)a->window_s,
                   "window_auto", a->window_auto,
                   "window_min_s", (json_int_t)a->window_min,
                   "window_max_s", (json_int_t)a->window_max,
                   "headroom", a->headroom,
                   "capacity_bytes",
                   (json_int_t)UCE(host)->dev->nr_blocks * host->cfg.block_size,
                   "volumes", vols);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Window profiling (CloudCache §4.1, Figure 3): replay the trace with the
 * rws policy (spare left idle) once per candidate window, and propose the
 * window at the knee of hit ratio against window size, where a longer
 * window stops paying for the cache it takes (alloc/knee). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/knee.h"
#include "alloc/window_knee.h"
#include "replay_priv.h"

static int
cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;

  return (x > y) - (x < y);
}

/* FNV-1a: a volume's blocks apart from another's in the one sample. */
static uint64_t
volume_hash(const char *id)
{
  uint64_t h = 14695981039346656037ull;

  for (; *id; id++)
    h = (h ^ (unsigned char)*id) * 1099511628211ull;
  return h;
}

/* One more pass: the trace's accesses through the agent's online
 * estimate (alloc/window_knee), in trace time, every volume in one
 * sample as the profile's replays are of the whole host. */
static int
online_knee(fc_replay_open_fn open, void *arg, const double *x, size_t n,
            struct fc_replay_profile *out, char *err, size_t len)
{
  uint32_t lo = (uint32_t)fmin(ceil(x[0]), UINT32_MAX);
  uint32_t hi = (uint32_t)fmin(floor(x[n - 1]), UINT32_MAX);
  struct fc_wknee *w = NULL;
  struct fc_trace_req req;
  struct fc_trace *t = NULL;
  double t0 = 0, last_ms = 0;
  bool started = false;
  uint32_t win;
  int r;

  out->online_window_s = 0;
  out->online_n = 0;
  if (lo == 0 || hi < lo)
    return 0;
  r = fc_wknee_new(hi, &w);
  if (!r)
    r = open(arg, &t);
  if (r) {
    snprintf(err, len, "online knee: %s", strerror(-r));
    goto out;
  }
  while ((r = fc_trace_next(t, &req)) == 1) {
    uint64_t vol = volume_hash(req.volume) << 44;
    double ms;

    if (!started) {
      t0 = req.time;
      started = true;
    }
    /* The estimate's clock never goes back; a trace's may, a little. */
    ms = fmax(last_ms, (req.time - t0) * 1000.0);
    last_ms = ms;
    for (uint64_t b = 0; b < req.nr_blocks; b++)
      fc_wknee_access(w, (req.first_block + b) ^ vol, (uint64_t)ms);
  }
  if (r < 0) {
    snprintf(err, len, "%s", fc_trace_error(t));
    goto out;
  }
  r = 0;
  for (unsigned b = 0; b < FC_WKNEE_BUCKETS; b++) {
    double s = ldexp(1.0, (int)b);

    if (s >= lo && s <= hi && s <= last_ms / 1000.0) {
      out->online[out->online_n].window_s = s;
      out->online[out->online_n++].hit_ratio = fc_wknee_hit_ratio(w, b);
    }
  }
  if (fc_wknee_choose(w, lo, hi, (uint64_t)last_ms, &win) == 0)
    out->online_window_s = win;
out:
  if (t)
    fc_trace_close(t);
  fc_wknee_free(w);
  return r;
}

int
fc_replay_profile(const struct fc_replay_config *c, const double *windows,
                  size_t n, fc_replay_open_fn open, void *arg,
                  struct fc_replay_profile *out, char *err, size_t len)
{
  struct fc_replay_config pc = *c;
  double *x = NULL, *y = NULL;
  int r;

  memset(out, 0, sizeof *out);
  if (n < 2) {
    snprintf(err, len, "--profile-windows: at least two window sizes");
    return -EINVAL;
  }
  out->points = calloc(n, sizeof *out->points);
  x = calloc(n, sizeof *x);
  y = calloc(n, sizeof *y);
  if (!out->points || !x || !y) {
    snprintf(err, len, "out of memory");
    r = -ENOMEM;
    goto out;
  }
  memcpy(x, windows, n * sizeof *x);
  qsort(x, n, sizeof *x, cmp_double);
  for (size_t i = 0; i < n; i++) {
    if (!(x[i] > 0) || (i && x[i] == x[i - 1])) {
      snprintf(err, len, "--profile-windows: sizes must be > 0 and distinct");
      r = -EINVAL;
      goto out;
    }
  }
  out->n = n;
  pc.policy = FC_REPLAY_RWS;
  /* The curve is of the hit ratio an allocation of the window's RWSS
   * buys (§4.1): spare capacity handed out would hide it. */
  pc.spare = FC_SPARE_IDLE;
  for (size_t i = 0; i < n; i++) {
    struct fc_replay_result *res;
    struct fc_trace *t;

    pc.window_s = x[i];
    r = open(arg, &t);
    if (r) {
      snprintf(err, len, "cannot reopen the trace: %s", strerror(-r));
      goto out;
    }
    r = fc_replay_run(&pc, t, &res, err, len);
    fc_trace_close(t);
    if (r)
      goto out;
    out->points[i].window_s = x[i];
    out->points[i].hit_ratio = rp_ratio(res->total.hits, res->total.block_accesses);
    out->points[i].mean_allocation_blocks = res->total.mean_allocation_blocks;
    out->points[i].flash_write_ratio =
      rp_ratio(res->total.flash_writes, res->total.block_accesses);
    out->elapsed_s += res->elapsed_s;
    y[i] = out->points[i].hit_ratio;
    fc_replay_result_free(res);
  }
  r = fc_knee_point(x, y, n, FC_KNEE_MIN_GAIN, &out->knee);
  if (r) {
    snprintf(err, len, "knee point: %s", strerror(-r));
    goto out;
  }
  r = online_knee(open, arg, x, n, out, err, len);
out:
  free(x);
  free(y);
  if (r)
    fc_replay_profile_free(out);
  return r;
}

void
fc_replay_profile_free(struct fc_replay_profile *p)
{
  free(p->points);
  p->points = NULL;
  p->n = 0;
}

void
fc_replay_profile_print_table(FILE *f, const struct fc_replay_profile *p)
{
  fprintf(f, "%12s %8s %14s %9s\n", "window_s", "hit", "mean_alloc", "fw_ratio");
  for (size_t i = 0; i < p->n; i++)
    fprintf(f, "%12g %7.2f%% %14.1f %9.3f%s\n", p->points[i].window_s,
            100 * p->points[i].hit_ratio, p->points[i].mean_allocation_blocks,
            p->points[i].flash_write_ratio, i == p->knee ? "  <- knee" : "");
  fprintf(f, "knee: window %g s (proposed), %.3f s of replay\n",
          p->points[p->knee].window_s, p->elapsed_s);
  if (p->online_window_s > 0)
    fprintf(f, "online (allocation_window = auto, from reuse times): window %g s\n",
            p->online_window_s);
  else
    fprintf(f, "online (allocation_window = auto): no choice, the trace is "
            "shorter than three powers of two seconds within the windows\n");
}

int
fc_replay_profile_print_json(FILE *f, const struct fc_replay_profile *p)
{
  json_t *doc = json_object(), *pts = json_array();
  int r = 0;

  if (!doc || !pts)
    goto fail;
  for (size_t i = 0; i < p->n; i++) {
    json_t *o = json_pack("{s:f, s:f, s:f, s:f}",
                          "window_s", p->points[i].window_s,
                          "hit_ratio", p->points[i].hit_ratio,
                          "mean_allocation_blocks",
                          p->points[i].mean_allocation_blocks,
                          "flash_write_ratio", p->points[i].flash_write_ratio);

    if (!o || json_array_append_new(pts, o))
      goto fail;
  }
  r |= json_object_set_new(doc, "schema_version", json_integer(1));
  r |= json_object_set_new(doc, "profile", pts);
  pts = NULL;
  r |= json_object_set_new(doc, "knee_index", json_integer((json_int_t)p->knee));
  r |= json_object_set_new(doc, "knee_window_s", json_real(p->points[p->knee].window_s));
  r |= json_object_set_new(doc, "elapsed_s", json_real(p->elapsed_s));
  pts = json_array();
  if (!pts)
    goto fail;
  for (size_t i = 0; i < p->online_n; i++) {
    json_t *o = json_pack("{s:f, s:f}", "window_s", p->online[i].window_s,
                          "hit_ratio", p->online[i].hit_ratio);

    if (!o || json_array_append_new(pts, o))
      goto fail;
  }
  r |= json_object_set_new(doc, "online_profile", pts);
  pts = NULL;
  r |= json_object_set_new(doc, "online_knee_window_s",
                           p->online_window_s > 0 ? json_real(p->online_window_s)
                                                  : json_null());
  if (r || json_dumpf(doc, f, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10)))
    goto fail;
  fputc('\n', f);
  json_decref(doc);
  return 0;
fail:
  json_decref(doc);
  json_decref(pts);
  return -ENOMEM;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The replay's results for people (a table) and for scripts (JSON, the
 * schema of doc/research/replay.rst: keys are only ever added, never renamed). */
#include <errno.h>
#include <jansson.h>
#include <math.h>

#include "replay_priv.h"

#define SCHEMA_VERSION 1

static json_t *
num_or_null(double x)
{
  return isfinite(x) ? json_real(x) : json_null();
}

static json_t *
uint_json(uint64_t x)
{
  return json_integer((json_int_t)x);
}

static int
set(json_t *o, const char *key, json_t *v)
{
  return v ? json_object_set_new(o, key, v) : -1;
}

static int
add_counts(json_t *o, const struct fc_replay_counts *c)
{
  int r = 0;

  r |= set(o, "requests", uint_json(c->requests));
  r |= set(o, "block_accesses", uint_json(c->block_accesses));
  r |= set(o, "hits", uint_json(c->hits));
  r |= set(o, "staging_hits", uint_json(c->staging_hits));
  r |= set(o, "hit_ratio", json_real(rp_ratio(c->hits, c->block_accesses)));
  r |= set(o, "flash_writes", uint_json(c->flash_writes));
  r |= set(o, "flash_write_ratio",
           json_real(rp_ratio(c->flash_writes, c->block_accesses)));
  r |= set(o, "mean_allocation_blocks", json_real(c->mean_allocation_blocks));
  r |= set(o, "mean_cached_blocks", json_real(c->mean_cached_blocks));
  r |= set(o, "max_cached_blocks", uint_json(c->max_cached_blocks));
  r |= set(o, "windows", uint_json(c->windows));
  return r;
}

static json_t *
series(const double *v, size_t n)
{
  json_t *a = json_array();

  for (size_t i = 0; a && i < n; i++) {
    if (json_array_append_new(a, num_or_null(v[i]))) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

static json_t *
config_json(const struct fc_replay_config *c)
{
  json_t *o = json_object();
  int r = 0;

  if (!o)
    return NULL;
  r |= set(o, "policy", json_string(fc_replay_policy_name(c->policy)));
  r |= set(o, "block_size", uint_json(c->block_size));
  r |= set(o, "cache_blocks", uint_json(c->cache_blocks));
  r |= set(o, "volume_limit_blocks", uint_json(c->volume_limit_blocks));
  r |= set(o, "window_s", json_real(c->window_s));
  r |= set(o, "enforce", json_string(fc_replay_enforce_name(c->enforce)));
  r |= set(o, "rws_n", uint_json(c->rws_n));
  r |= set(o, "staging", json_string(fc_staging_kind_name(c->staging)));
  r |= set(o, "staging_fraction", json_real(c->staging_fraction));
  r |= set(o, "predictor", json_string(fc_predictor_name(c->predictor)));
  r |= set(o, "spare", json_string(fc_spare_mode_name(c->spare)));
  r |= set(o, "headroom", json_real(c->headroom));
  r |= set(o, "outlier_n", uint_json(c->outlier_n));
  r |= set(o, "outlier_lambda", json_real(c->outlier_lambda));
  if (r) {
    json_decref(o);
    return NULL;
  }
  return o;
}

static int
dump(FILE *f, json_t *doc)
{
  int r = json_dumpf(doc, f, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));

  json_decref(doc);
  if (r)
    return -ENOMEM;
  fputc('\n', f);
  return 0;
}

int
fc_replay_print_json(FILE *f, const struct fc_replay_result *res)
{
  json_t *doc = json_object(), *vols = json_object();
  int r = 0;

  if (!doc || !vols) {
    json_decref(doc);
    json_decref(vols);
    return -ENOMEM;
  }
  r |= set(doc, "schema_version", json_integer(SCHEMA_VERSION));
  r |= add_counts(doc, &res->total);
  r |= set(doc, "elapsed_s", json_real(res->elapsed_s));
  r |= set(doc, "requests_per_s", json_real(res->requests_per_s));
  r |= set(doc, "prediction_mare", num_or_null(res->prediction_mare));
  r |= set(doc, "config", config_json(&res->config));
  for (size_t i = 0; i < res->nr_volumes; i++) {
    const struct fc_replay_volume *v = &res->volumes[i];
    json_t *o = json_object();

    if (!o) {
      r = -1;
      break;
    }
    r |= add_counts(o, &v->c);
    r |= set(o, "rwss_observed", series(v->rwss_observed, v->nr_windows));
    r |= set(o, "rwss_predicted", series(v->rwss_predicted, v->nr_windows));
    r |= set(o, "prediction_mare", num_or_null(v->prediction_mare));
    r |= set(vols, v->id, o);
  }
  r |= set(doc, "volumes", vols);
  if (r) {
    json_decref(doc);
    return -ENOMEM;
  }
  return dump(f, doc);
}

static void
row(FILE *f, const char *id, const struct fc_replay_counts *c, double mare)
{
  char m[16] = "-";

  if (isfinite(mare))
    snprintf(m, sizeof m, "%.3f", mare);
  fprintf(f, "%-16s %10llu %12llu %7.2f%% %10llu %12llu %7.3f %12.1f %12.1f "
          "%10llu %7s\n", id, (unsigned long long)c->requests,
          (unsigned long long)c->block_accesses,
          100 * rp_ratio(c->hits, c->block_accesses),
          (unsigned long long)c->staging_hits,
          (unsigned long long)c->flash_writes,
          rp_ratio(c->flash_writes, c->block_accesses),
          c->mean_allocation_blocks, c->mean_cached_blocks,
          (unsigned long long)c->max_cached_blocks, m);
}

void
fc_replay_print_table(FILE *f, const struct fc_replay_result *res)
{
  const struct fc_replay_config *c = &res->config;

  fprintf(f, "policy %s, cache %llu blocks of %u B, volume limit %llu, "
          "window %g s, enforce %s", fc_replay_policy_name(c->policy),
          (unsigned long long)c->cache_blocks, c->block_size,
          (unsigned long long)c->volume_limit_blocks, c->window_s,
          fc_replay_enforce_name(c->enforce));
  if (c->policy == FC_REPLAY_RWS)
    fprintf(f, ", RWS_%u, %s staging %g", c->rws_n,
            fc_staging_kind_name(c->staging), c->staging_fraction);
  if (c->policy == FC_REPLAY_RWS || c->policy == FC_REPLAY_WSS ||
      c->policy == FC_REPLAY_HEC)
    fprintf(f, ", %s, spare %s", fc_predictor_name(c->predictor),
            fc_spare_mode_name(c->spare));
  fprintf(f, "\n%-16s %10s %12s %8s %10s %12s %7s %12s %12s %10s %7s\n",
          "volume", "requests", "accesses", "hit", "stg_hits", "flash_wr",
          "fw_ratio", "mean_alloc", "mean_cached", "max_cached", "mare");
  for (size_t i = 0; i < res->nr_volumes; i++)
    row(f, res->volumes[i].id, &res->volumes[i].c,
        res->volumes[i].prediction_mare);
  row(f, "total", &res->total, res->prediction_mare);
  fprintf(f, "%llu windows, %.3f s, %.0f requests/s\n",
          (unsigned long long)res->total.windows, res->elapsed_s,
          res->requests_per_s);
}

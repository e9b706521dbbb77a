/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's metrics: the sampler, the reset, the text file (metrics.h).
 *
 * Locks.  sample_lock serialises whole samples and resets (two samplers
 * applying increases out of order would count one twice); inside it
 * host.lock is taken to read the volumes, then released, then mt->lock to
 * apply what was read.  mt->lock is never held while taking another lock,
 * so it nests under anything. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/fdio.h"
#include "common/lockcheck.h"
#include "common/log.h"
#include "common/prom_text.h"
#include "common/stat_ring.h"
#include "common/version.h"
#include "control_move.h"
#include "metrics.h"
#include "migration/migration.h"

/* The engines' cumulative per-volume counters, by their volume-show key. */
enum counter {
  C_HITS, C_MISSES, C_WHITS, C_WMISSES, C_READS, C_WRITES, C_READ_BYTES,
  C_WRITE_BYTES, C_CACHE_RD, C_CACHE_WR, C_ORIGIN_RD, C_ORIGIN_WR, C_PROMOTIONS,
  C_EVICTIONS, C_WRITEBACKS, C_IO_ERRORS, NC
};

static const struct {
  const char *key;        /* in volume-show */
  const char *name;       /* fcache_volume_<name>_total */
  const char *help;
} counters[NC] = {
  [C_HITS] = { "read_hits", "cache_hits",
               "Cache blocks read that the cache held (block hits)." },
  [C_MISSES] = { "read_misses", "cache_misses",
                 "Cache blocks read that the cache did not hold (block misses)." },
  [C_WHITS] = { "write_hits", "cache_write_hits",
                "Cache blocks written that the cache held." },
  [C_WMISSES] = { "write_misses", "cache_write_misses",
                  "Cache blocks written that the cache did not hold." },
  [C_READS] = { "reads", "read_requests", "Read requests from the VM." },
  [C_WRITES] = { "writes", "write_requests", "Write requests from the VM." },
  [C_READ_BYTES] = { "read_bytes", "read_bytes", "Bytes the VM read." },
  [C_WRITE_BYTES] = { "write_bytes", "written_bytes", "Bytes the VM wrote." },
  [C_CACHE_RD] = { "cache_read_bytes", "cache_read_bytes",
                   "Bytes read from the flash cache." },
  [C_CACHE_WR] = { "cache_write_bytes", "cache_written_bytes",
                   "Bytes written to the flash cache." },
  [C_ORIGIN_RD] = { "origin_read_bytes", "origin_read_bytes",
                    "Bytes read from the origin (shared storage)." },
  [C_ORIGIN_WR] = { "origin_write_bytes", "origin_written_bytes",
                    "Bytes written to the origin (shared storage), write-back included." },
  [C_PROMOTIONS] = { "promotions", "promotions", "Blocks installed in the cache." },
  [C_EVICTIONS] = { "evictions", "evictions", "Blocks evicted from the cache." },
  [C_WRITEBACKS] = { "writebacks", "writeback_blocks",
                     "Dirty blocks written back to the origin (ucache)." },
  [C_IO_ERRORS] = { "io_errors", "io_errors", "I/O errors." },
};

/* The hit-ratio windows. */
static const struct {
  const char *label;
  uint64_t s;
} windows[] = { { "5m", 300 }, { "1h", 3600 }, { "1d", 86400 } };
#define NW (sizeof windows / sizeof windows[0])

/* A move's outcomes, counted once each when the sampler first sees it
 * ended. */
enum move_outcome { MV_DONE, MV_FAILED, MV_ABORTED, NMV };
static const char *const move_outcome_names[NMV] = { "done", "failed", "aborted" };

/* What one sample read of one volume, under host.lock. */
struct seen {
  char id[FC_VOLUME_ID_MAX + 1];
  uint64_t tag;
  char state[16], engine[16], write_policy[16];
  uint64_t raw[NC];
  bool has[NC];
  uint64_t block_size, cache_size, cached_blocks, dirty_blocks;
  bool has_alloc;
  uint64_t share_bytes, alloc_used_bytes, limit_bytes;
  uint64_t window_s, window_auto;
  bool has_move, move_running;
  int move_outcome;                   /* enum move_outcome, or -1: running */
  uint64_t move_copied, move_total;
  double move_elapsed_s, move_downtime_s;
};

/* The sampler's state of one attached volume. */
struct mvol {
  char id[FC_VOLUME_ID_MAX + 1];
  uint64_t tag;                       /* the attachment it describes */
  uint64_t last_raw[NC];              /* the engine's figures at the last sample */
  uint64_t total[NC];                 /* increases since the reset */
  double reset_time;                  /* CLOCK_REALTIME seconds */
  struct fc_stat_ring ring;           /* of total[C_HITS], total[C_MISSES] */
  struct seen s;                      /* the last sample's gauges */
  /* The last ended move counted, told from the next one by its figures. */
  bool move_counted;
  uint64_t move_copied;
  double move_elapsed_s;
};

struct fc_metrics {
  struct fc_agent *agent;
  pthread_mutex_t sample_lock;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool stopping;
  pthread_t thread;
  bool running;

  struct mvol *vols[FC_MAX_VOLUMES];
  unsigned nr_vols;
  /* Host totals: every volume's increases, detached ones' included. */
  uint64_t host_total[NC];
  double host_reset_time;
  /* The migrations' and moves' totals at the last host reset. */
  struct {
    uint64_t ended[2][FC_MIGR_OUTCOMES], bytes[2];
  } migr_base;
  uint64_t moves[NMV];
  uint64_t move_bytes;                /* copied by the moves counted */
  uint64_t capacity_bytes, used_bytes, reserved_bytes;
  bool has_host;
  uint64_t samples;
  unsigned write_failures;            /* in a row, to log once */
};

static double
realtime_s(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t
monotonic_s(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec;
}

static uint64_t
get_u64(json_t *o, const char *key, bool *has)
{
  json_t *v = json_object_get(o, key);

  if (has)
    *has = json_is_integer(v) && json_integer_value(v) >= 0;
  return json_is_integer(v) && json_integer_value(v) >= 0 ?
    (uint64_t)json_integer_value(v) : 0;
}

static double
get_real(json_t *o, const char *key)
{
  json_t *v = json_object_get(o, key);

  return json_is_number(v) ? json_number_value(v) : 0.0;
}

static void
get_str(json_t *o, const char *key, char *out, size_t len)
{
  const char *v = json_string_value(json_object_get(o, key));

  snprintf(out, len, "%s", v ? v : "");
}

/* One volume's figures from the engine's volume_json and the move's
 * status, under host.lock. */
static void
read_volume(struct fc_agent *agent, struct fc_volume *v, struct seen *s)
{
  json_t *o = agent->host.ops->volume_json(&agent->host, v);
  json_t *mv = fc_move_json_locked(agent, v), *alloc;

  memset(s, 0, sizeof *s);
  snprintf(s->id, sizeof s->id, "%s", v->p.id);
  s->tag = v->p.tag;
  s->move_outcome = -1;
  if (o) {
    get_str(o, "state", s->state, sizeof s->state);
    get_str(o, "engine", s->engine, sizeof s->engine);
    get_str(o, "write_policy", s->write_policy, sizeof s->write_policy);
    for (int k = 0; k < NC; k++)
      s->raw[k] = get_u64(o, counters[k].key, &s->has[k]);
    s->block_size = get_u64(o, "block_size", NULL);
    s->cache_size = get_u64(o, "cache_size", NULL);
    s->cached_blocks = get_u64(o, "cached_blocks", NULL);
    s->dirty_blocks = get_u64(o, "dirty_blocks", NULL);
    alloc = json_object_get(o, "allocation");
    if (json_is_object(alloc)) {
      s->has_alloc = true;
      s->share_bytes = get_u64(alloc, "share_bytes", NULL);
      s->alloc_used_bytes = get_u64(alloc, "used_bytes", NULL);
      s->limit_bytes = get_u64(alloc, "limit_bytes", NULL);
      s->window_s = get_u64(alloc, "window_s", NULL);
      s->window_auto = json_is_true(json_object_get(alloc, "window_auto"));
    }
  }
  if (mv) {
    const char *st = json_string_value(json_object_get(mv, "state"));

    s->has_move = true;
    s->move_running = st && (!strcmp(st, "copying") || !strcmp(st, "switching"));
    if (st && !strcmp(st, "done"))
      s->move_outcome = MV_DONE;
    else if (st && !strcmp(st, "failed"))
      s->move_outcome = MV_FAILED;
    else if (st && !strcmp(st, "aborted"))
      s->move_outcome = MV_ABORTED;
    s->move_copied = get_u64(mv, "bytes_copied", NULL);
    s->move_total = get_u64(mv, "bytes_total", NULL);
    s->move_elapsed_s = get_real(mv, "elapsed_s");
    s->move_downtime_s = get_real(mv, "downtime_ms") / 1000.0;
  }
  json_decref(o);
  json_decref(mv);
}

static void
mvol_free(struct mvol *mv)
{
  if (!mv)
    return;
  fc_stat_ring_free(&mv->ring);
  free(mv);
}

/* Under mt->lock: zero a volume's counters and start its windows again
 * at now_s. */
static void
mvol_reset_locked(struct mvol *mv, uint64_t now_s, double now_real)
{
  memset(mv->total, 0, sizeof mv->total);
  mv->reset_time = now_real;
  fc_stat_ring_clear(&mv->ring);
  (void)fc_stat_ring_offer(&mv->ring, now_s, 0, 0);
}

/* A volume seen for the first time (or attached anew under its id): all
 * its figures so far are its increases, its windows start now. */
static struct mvol *
mvol_new(const struct seen *s, uint64_t now_s, double now_real)
{
  struct mvol *mv = calloc(1, sizeof *mv);

  if (!mv || fc_stat_ring_init(&mv->ring)) {
    free(mv);
    return NULL;
  }
  snprintf(mv->id, sizeof mv->id, "%s", s->id);
  mv->tag = s->tag;
  mvol_reset_locked(mv, now_s, now_real);
  return mv;
}

/* Apply one volume's reading: its increases into its totals and the
 * host's, its windows, its move's end. */
static void
apply_locked(struct fc_metrics *mt, struct mvol *mv, const struct seen *s, bool fresh,
             uint64_t now_s)
{
  FC_ASSERT_HELD(&mt->lock);
  for (int k = 0; k < NC; k++) {
    uint64_t d;

    if (!s->has[k])
      continue;
    /* Below the last reading: the engine's counter started again (the
     * volume's cache was reopened); all of it is new. */
    d = fresh || s->raw[k] < mv->last_raw[k] ? s->raw[k] : s->raw[k] - mv->last_raw[k];
    mv->total[k] += d;
    mt->host_total[k] += d;
    mv->last_raw[k] = s->raw[k];
  }
  (void)fc_stat_ring_offer(&mv->ring, now_s, mv->total[C_HITS], mv->total[C_MISSES]);
  if (s->has_move && s->move_outcome >= 0 &&
      !(mv->move_counted && mv->move_copied == s->move_copied &&
        mv->move_elapsed_s == s->move_elapsed_s)) {
    mt->moves[s->move_outcome]++;
    mt->move_bytes += s->move_copied;
    mv->move_counted = true;
    mv->move_copied = s->move_copied;
    mv->move_elapsed_s = s->move_elapsed_s;
  }
  mv->s = *s;
}

/* Read every volume and the host, then apply it.  Under sample_lock. */
static int
sample_locked(struct fc_metrics *mt)
{
  FC_ASSERT_HELD(&mt->sample_lock);
  struct fc_agent *agent = mt->agent;
  struct seen *seen = calloc(FC_MAX_VOLUMES, sizeof *seen);
  struct mvol *keep[FC_MAX_VOLUMES];
  unsigned n = 0, nkeep = 0;
  uint64_t now_s;
  double now_real;
  json_t *status;

  if (!seen)
    return -ENOMEM;
  pthread_mutex_lock(&agent->host.lock);
  for (unsigned i = 0; i < agent->host.nr_volumes && n < FC_MAX_VOLUMES; i++)
    read_volume(agent, agent->host.volumes[i], &seen[n++]);
  status = agent->host.ops->status_json(&agent->host);
  pthread_mutex_unlock(&agent->host.lock);
  /* When the figures were read, under sample_lock: samples' times only
   * go forward, as the windows' ring needs (a time before its newest
   * snapshot would restart it). */
  now_s = monotonic_s();
  now_real = realtime_s();

  pthread_mutex_lock(&mt->lock);
  if (status) {
    mt->has_host = true;
    mt->capacity_bytes = get_u64(status, "capacity_bytes", NULL);
    mt->used_bytes = get_u64(status, "used_bytes", NULL);
    mt->reserved_bytes = get_u64(status, "reserved_bytes", NULL);
  }
  for (unsigned i = 0; i < n; i++) {
    struct mvol *mv = NULL;
    bool fresh = false;

    for (unsigned j = 0; j < mt->nr_vols; j++)
      if (mt->vols[j] && !strcmp(mt->vols[j]->id, seen[i].id) &&
          mt->vols[j]->tag == seen[i].tag) {
        mv = mt->vols[j];
        mt->vols[j] = NULL;
        break;
      }
    if (!mv) {
      mv = mvol_new(&seen[i], now_s, now_real);
      fresh = true;
    }
    if (!mv)
      continue;   /* out of memory: this volume is missing from one sample */
    apply_locked(mt, mv, &seen[i], fresh, now_s);
    keep[nkeep++] = mv;
  }
  /* What was not seen was detached: its increases stay in the host's. */
  for (unsigned j = 0; j < mt->nr_vols; j++)
    mvol_free(mt->vols[j]);
  memcpy(mt->vols, keep, nkeep * sizeof *keep);
  mt->nr_vols = nkeep;
  mt->samples++;
  pthread_mutex_unlock(&mt->lock);
  json_decref(status);
  free(seen);
  return 0;
}

static int
sample(struct fc_metrics *mt)
{
  int r;

  pthread_mutex_lock(&mt->sample_lock);
  r = sample_locked(mt);
  pthread_mutex_unlock(&mt->sample_lock);
  return r;
}

static double
ratio(uint64_t hits, uint64_t misses)
{
  return hits + misses ? (double)hits / (double)(hits + misses) : NAN;
}

#define L1(n1, v1) (struct fc_prom_label[]){ { n1, v1 } }, 1
#define L2(n1, v1, n2, v2) (struct fc_prom_label[]){ { n1, v1 }, { n2, v2 } }, 2

static void
render_volumes_locked(struct fc_metrics *mt, struct fc_prom *p, uint64_t now_s)
{
  FC_ASSERT_HELD(&mt->lock);
  char name[96];
  struct fc_stat_window w[FC_MAX_VOLUMES][NW];

  for (unsigned i = 0; i < mt->nr_vols; i++)
    for (unsigned k = 0; k < NW; k++)
      w[i][k] = fc_stat_ring_window(&mt->vols[i]->ring, now_s, windows[k].s,
                                    mt->vols[i]->total[C_HITS],
                                    mt->vols[i]->total[C_MISSES]);

  fc_prom_family(p, "fcache_volume_info", "gauge",
                 "An attached volume (always 1) and its engine, write policy and state.");
  for (unsigned i = 0; i < mt->nr_vols; i++) {
    const struct seen *s = &mt->vols[i]->s;

    fc_prom_u64(p, "fcache_volume_info", (struct fc_prom_label[]){
                  { "volume", s->id }, { "engine", s->engine },
                  { "write_policy", s->write_policy }, { "state", s->state } }, 4, 1);
  }
  for (int k = 0; k < NC; k++) {
    snprintf(name, sizeof name, "fcache_volume_%s_total", counters[k].name);
    fc_prom_family(p, name, "counter", counters[k].help);
    for (unsigned i = 0; i < mt->nr_vols; i++)
      if (mt->vols[i]->s.has[k])
        fc_prom_u64(p, name, L1("volume", mt->vols[i]->id), mt->vols[i]->total[k]);
  }
  fc_prom_family(p, "fcache_volume_writeback_bytes_total", "counter",
                 "Bytes of dirty blocks written back to the origin (ucache); "
                 "rate() of it is the write-back rate.");
  for (unsigned i = 0; i < mt->nr_vols; i++)
    if (mt->vols[i]->s.has[C_WRITEBACKS])
      fc_prom_u64(p, "fcache_volume_writeback_bytes_total", L1("volume", mt->vols[i]->id),
                  mt->vols[i]->total[C_WRITEBACKS] * mt->vols[i]->s.block_size);
  fc_prom_family(p, "fcache_volume_stats_reset_timestamp_seconds", "gauge",
                 "When the volume's counters started from zero (its first sample "
                 "or its last volume-stats-reset), Unix time.");
  for (unsigned i = 0; i < mt->nr_vols; i++)
    fc_prom_double(p, "fcache_volume_stats_reset_timestamp_seconds",
                   L1("volume", mt->vols[i]->id), mt->vols[i]->reset_time);
  fc_prom_family(p, "fcache_volume_hit_ratio", "gauge",
                 "Block read hit ratio over the window (5m, 1h, 1d) ending now; "
                 "NaN when nothing was read in it.");
  for (unsigned i = 0; i < mt->nr_vols; i++)
    for (unsigned k = 0; k < NW; k++)
      fc_prom_double(p, "fcache_volume_hit_ratio",
                     L2("volume", mt->vols[i]->id, "window", windows[k].label),
                     ratio(w[i][k].hits, w[i][k].misses));
  fc_prom_family(p, "fcache_volume_hit_ratio_window_seconds", "gauge",
                 "Seconds the hit-ratio window actually covers: less than its "
                 "length while the volume's samples (or its reset) are younger.");
  for (unsigned i = 0; i < mt->nr_vols; i++)
    for (unsigned k = 0; k < NW; k++)
      fc_prom_u64(p, "fcache_volume_hit_ratio_window_seconds",
                  L2("volume", mt->vols[i]->id, "window", windows[k].label),
                  w[i][k].covered_s);

  static const struct {
    const char *name, *help;
    size_t off;
    bool bytes;       /* in blocks: multiply by the block size */
  } gauges[] = {
    { "fcache_volume_cache_size_bytes", "The volume's cache size.",
      offsetof(struct seen, cache_size), false },
    { "fcache_volume_cached_bytes", "Bytes of the volume's blocks in the cache.",
      offsetof(struct seen, cached_blocks), true },
    { "fcache_volume_dirty_blocks", "Dirty blocks: the write-back backlog.",
      offsetof(struct seen, dirty_blocks), false },
    { "fcache_volume_dirty_bytes", "Bytes of dirty blocks: the write-back backlog.",
      offsetof(struct seen, dirty_blocks), true },
  };
  for (size_t g = 0; g < sizeof gauges / sizeof gauges[0]; g++) {
    fc_prom_family(p, gauges[g].name, "gauge", gauges[g].help);
    for (unsigned i = 0; i < mt->nr_vols; i++) {
      const struct seen *s = &mt->vols[i]->s;
      uint64_t v = *(const uint64_t *)((const char *)s + gauges[g].off);

      fc_prom_u64(p, gauges[g].name, L1("volume", s->id),
                  gauges[g].bytes ? v * s->block_size : v);
    }
  }

  static const struct {
    const char *name, *help;
    size_t off;
  } alloc[] = {
    { "fcache_volume_allocation_share_bytes",
      "The volume's share of the cache under on-demand allocation.",
      offsetof(struct seen, share_bytes) },
    { "fcache_volume_allocation_used_bytes",
      "Bytes of its share the volume uses.", offsetof(struct seen, alloc_used_bytes) },
    { "fcache_volume_allocation_limit_bytes",
      "The most the volume may hold now.", offsetof(struct seen, limit_bytes) },
    { "fcache_volume_allocation_window_seconds",
      "The volume's RWS window in force (allocation_window, its own "
      "rws_window_s, or the knee when automatic).", offsetof(struct seen, window_s) },
    { "fcache_volume_allocation_window_auto",
      "1 when the volume's window is chosen at the knee of its hit ratio "
      "(allocation_window = auto).", offsetof(struct seen, window_auto) },
  };
  for (size_t g = 0; g < sizeof alloc / sizeof alloc[0]; g++) {
    fc_prom_family(p, alloc[g].name, "gauge", alloc[g].help);
    for (unsigned i = 0; i < mt->nr_vols; i++) {
      const struct seen *s = &mt->vols[i]->s;

      if (s->has_alloc)
        fc_prom_u64(p, alloc[g].name, L1("volume", s->id),
                    *(const uint64_t *)((const char *)s + alloc[g].off));
    }
  }

  fc_prom_family(p, "fcache_volume_move_running", "gauge",
                 "1 while the volume's origin is being moved (volume-move).");
  for (unsigned i = 0; i < mt->nr_vols; i++)
    fc_prom_u64(p, "fcache_volume_move_running", L1("volume", mt->vols[i]->id),
                mt->vols[i]->s.move_running);
  fc_prom_family(p, "fcache_volume_move_copied_bytes", "gauge",
                 "Bytes the running or last storage move copied.");
  for (unsigned i = 0; i < mt->nr_vols; i++)
    if (mt->vols[i]->s.has_move)
      fc_prom_u64(p, "fcache_volume_move_copied_bytes", L1("volume", mt->vols[i]->id),
                  mt->vols[i]->s.move_copied);
  fc_prom_family(p, "fcache_volume_move_duration_seconds", "gauge",
                 "How long the running or last storage move has taken.");
  for (unsigned i = 0; i < mt->nr_vols; i++)
    if (mt->vols[i]->s.has_move)
      fc_prom_double(p, "fcache_volume_move_duration_seconds",
                     L1("volume", mt->vols[i]->id), mt->vols[i]->s.move_elapsed_s);
  fc_prom_family(p, "fcache_volume_move_downtime_seconds", "gauge",
                 "The VM's I/O pause at the last storage move's switch.");
  for (unsigned i = 0; i < mt->nr_vols; i++)
    if (mt->vols[i]->s.has_move)
      fc_prom_double(p, "fcache_volume_move_downtime_seconds",
                     L1("volume", mt->vols[i]->id), mt->vols[i]->s.move_downtime_s);
}

static void
render_host_locked(struct fc_metrics *mt, struct fc_prom *p, uint64_t now_s)
{
  FC_ASSERT_HELD(&mt->lock);
  static const char *const roles[2] = { "source", "destination" };
  static const char *const outcomes[FC_MIGR_OUTCOMES] = { "completed", "failed",
                                                          "aborted" };
  struct fc_migr_totals *t = &mt->agent->migr_totals;
  const struct fc_config *cfg = &mt->agent->host.cfg;
  uint64_t wh[NW] = { 0 }, wm[NW] = { 0 }, dirty = 0;
  unsigned running[2];
  char name[96];

  fc_prom_family(p, "fcache_agent_info", "gauge",
                 "The agent (always 1), its version and engine.");
  fc_prom_u64(p, "fcache_agent_info", L2("version", fc_version(), "engine", cfg->engine), 1);
  fc_prom_family(p, "fcache_agent_metrics_timestamp_seconds", "gauge",
                 "When these figures were sampled, Unix time: a file that stops "
                 "moving is an agent that stopped.");
  fc_prom_double(p, "fcache_agent_metrics_timestamp_seconds", NULL, 0, realtime_s());
  fc_prom_family(p, "fcache_agent_metrics_interval_seconds", "gauge",
                 "metrics_interval: seconds between samples.");
  fc_prom_u64(p, "fcache_agent_metrics_interval_seconds", NULL, 0, cfg->metrics_interval);
  fc_prom_family(p, "fcache_host_stats_reset_timestamp_seconds", "gauge",
                 "When the host's counters started from zero (agent start or a "
                 "volume-stats-reset of every volume), Unix time.");
  fc_prom_double(p, "fcache_host_stats_reset_timestamp_seconds", NULL, 0,
                 mt->host_reset_time);
  fc_prom_family(p, "fcache_host_volumes", "gauge", "Volumes attached.");
  fc_prom_u64(p, "fcache_host_volumes", NULL, 0, mt->nr_vols);
  if (mt->has_host) {
    fc_prom_family(p, "fcache_host_cache_capacity_bytes", "gauge",
                   "The host's flash cache capacity.");
    fc_prom_u64(p, "fcache_host_cache_capacity_bytes", NULL, 0, mt->capacity_bytes);
    fc_prom_family(p, "fcache_host_cache_used_bytes", "gauge",
                   "Bytes of the host's flash cache in use (ucache) or allocated "
                   "(dmcache).");
    fc_prom_u64(p, "fcache_host_cache_used_bytes", NULL, 0, mt->used_bytes);
    fc_prom_family(p, "fcache_host_cache_reserved_bytes", "gauge",
                   "Bytes of the host's flash cache set aside for the volumes' "
                   "cache sizes (allocation = fixed; dmcache: allocated); "
                   "capacity minus this is what a new or grown cache may "
                   "take.");
    fc_prom_u64(p, "fcache_host_cache_reserved_bytes", NULL, 0,
                mt->reserved_bytes);
  }
  for (int k = 0; k < NC; k++) {
    snprintf(name, sizeof name, "fcache_host_%s_total", counters[k].name);
    fc_prom_family(p, name, "counter", counters[k].help);
    fc_prom_u64(p, name, NULL, 0, mt->host_total[k]);
  }
  fc_prom_family(p, "fcache_host_writeback_bytes_total", "counter",
                 "Bytes of dirty blocks written back to the origin (ucache); "
                 "rate() of it is the host's write-back rate.");
  fc_prom_u64(p, "fcache_host_writeback_bytes_total", NULL, 0,
              mt->host_total[C_WRITEBACKS] * cfg->block_size);
  for (unsigned i = 0; i < mt->nr_vols; i++) {
    dirty += mt->vols[i]->s.dirty_blocks * mt->vols[i]->s.block_size;
    for (unsigned k = 0; k < NW; k++) {
      struct fc_stat_window w = fc_stat_ring_window(&mt->vols[i]->ring, now_s,
                                                    windows[k].s,
                                                    mt->vols[i]->total[C_HITS],
                                                    mt->vols[i]->total[C_MISSES]);
      wh[k] += w.hits;
      wm[k] += w.misses;
    }
  }
  fc_prom_family(p, "fcache_host_dirty_bytes", "gauge",
                 "Bytes of dirty blocks of every volume: the host's write-back backlog.");
  fc_prom_u64(p, "fcache_host_dirty_bytes", NULL, 0, dirty);
  fc_prom_family(p, "fcache_host_hit_ratio", "gauge",
                 "Block read hit ratio of the attached volumes together over the "
                 "window; NaN when nothing was read in it.");
  for (unsigned k = 0; k < NW; k++)
    fc_prom_double(p, "fcache_host_hit_ratio", L1("window", windows[k].label),
                   ratio(wh[k], wm[k]));

  fc_migrations_in_progress(mt->agent, running);
  fc_prom_family(p, "fcache_migrations_in_progress", "gauge",
                 "Live migrations under way on this agent, by role.");
  for (int r = 0; r < 2; r++)
    fc_prom_u64(p, "fcache_migrations_in_progress", L1("role", roles[r]), running[r]);
  fc_prom_family(p, "fcache_migrations_total", "counter",
                 "Live migrations that ended on this agent, by role and outcome.");
  for (int r = 0; r < 2; r++)
    for (int o = 0; o < FC_MIGR_OUTCOMES; o++) {
      uint64_t v = atomic_load(&t->ended[r][o]);

      fc_prom_u64(p, "fcache_migrations_total", L2("role", roles[r], "outcome", outcomes[o]),
                  v >= mt->migr_base.ended[r][o] ? v - mt->migr_base.ended[r][o] : 0);
    }
  fc_prom_family(p, "fcache_migration_bytes_total", "counter",
                 "Bytes of cache blocks the ended live migrations sent (source) or "
                 "received (destination).");
  for (int r = 0; r < 2; r++) {
    uint64_t v = atomic_load(&t->bytes[r]);

    fc_prom_u64(p, "fcache_migration_bytes_total", L1("role", roles[r]),
                v >= mt->migr_base.bytes[r] ? v - mt->migr_base.bytes[r] : 0);
  }
  fc_prom_family(p, "fcache_migration_last_duration_seconds", "gauge",
                 "The last completed live migration's time from start to completion.");
  for (int r = 0; r < 2; r++)
    fc_prom_double(p, "fcache_migration_last_duration_seconds", L1("role", roles[r]),
                   (double)atomic_load(&t->last_duration_ns[r]) / 1e9);
  fc_prom_family(p, "fcache_migration_last_downtime_seconds", "gauge",
                 "The last completed live migration's I/O pause at the switchover.");
  for (int r = 0; r < 2; r++)
    fc_prom_double(p, "fcache_migration_last_downtime_seconds", L1("role", roles[r]),
                   (double)atomic_load(&t->last_downtime_ns[r]) / 1e9);
  fc_prom_family(p, "fcache_storage_moves_total", "counter",
                 "Storage moves (volume-move) seen ended, by outcome.");
  for (int o = 0; o < NMV; o++)
    fc_prom_u64(p, "fcache_storage_moves_total", L1("outcome", move_outcome_names[o]),
                mt->moves[o]);
  fc_prom_family(p, "fcache_storage_move_bytes_total", "counter",
                 "Bytes the storage moves counted in fcache_storage_moves_total copied.");
  fc_prom_u64(p, "fcache_storage_move_bytes_total", NULL, 0, mt->move_bytes);
}

int
fc_metrics_render(struct fc_metrics *mt, char **text, size_t *len)
{
  struct fc_prom p;
  uint64_t now_s;
  int r = sample(mt);

  if (r)
    return r;
  fc_prom_init(&p);
  now_s = monotonic_s();
  pthread_mutex_lock(&mt->lock);
  render_host_locked(mt, &p, now_s);
  render_volumes_locked(mt, &p, now_s);
  pthread_mutex_unlock(&mt->lock);
  return fc_prom_take(&p, text, len);
}

int
fc_metrics_reset(struct fc_metrics *mt, const char *volume_id, json_t **result,
                 char *err, size_t errlen)
{
  struct fc_migr_totals *t = &mt->agent->migr_totals;
  uint64_t now_s;
  double now_real;
  bool found = false;
  int r;

  /* The whole reset under sample_lock: no sample lands between the one
   * that takes in what came before the reset and the zeroing. */
  pthread_mutex_lock(&mt->sample_lock);
  r = sample_locked(mt);
  if (r) {
    pthread_mutex_unlock(&mt->sample_lock);
    return r;
  }
  now_s = monotonic_s();
  now_real = realtime_s();
  pthread_mutex_lock(&mt->lock);
  for (unsigned i = 0; i < mt->nr_vols; i++)
    if (!volume_id || !strcmp(mt->vols[i]->id, volume_id)) {
      mvol_reset_locked(mt->vols[i], now_s, now_real);
      found = true;
    }
  if (!volume_id) {
    memset(mt->host_total, 0, sizeof mt->host_total);
    memset(mt->moves, 0, sizeof mt->moves);
    mt->move_bytes = 0;
    for (int k = 0; k < 2; k++) {
      for (int o = 0; o < FC_MIGR_OUTCOMES; o++)
        mt->migr_base.ended[k][o] = atomic_load(&t->ended[k][o]);
      mt->migr_base.bytes[k] = atomic_load(&t->bytes[k]);
    }
    mt->host_reset_time = now_real;
  }
  pthread_mutex_unlock(&mt->lock);
  pthread_mutex_unlock(&mt->sample_lock);
  if (volume_id && !found) {
    snprintf(err, errlen, "volume %.80s is not attached to this agent", volume_id);
    return -ENOENT;
  }
  *result = volume_id ?
    json_pack("{s:s, s:f}", "volume_id", volume_id, "reset_time", now_real) :
    json_pack("{s:s, s:f}", "reset", "all", "reset_time", now_real);
  return *result ? 0 : -ENOMEM;
}

/* The text to path, atomically: a scrape reads the old file or the new
 * one, never half of one.  The temporary name does not end in .prom, so
 * the collector never reads it.  Not fsynced (fc_replace_file_durable
 * would): after a power cut the next interval rewrites it, and a sync
 * every few seconds costs the host's disks for nothing. */
static int
write_textfile(const char *path, const char *text, size_t len)
{
  char tmp[FC_PATH_MAX + 16];
  int fd, r = 0;

  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    return -errno;
  /* 0644 whatever the umask: node-exporter runs as its own user. */
  if (fchmod(fd, 0644) < 0)
    r = -errno;
  else
    r = fc_full_pwrite(fd, text, len, 0);
  if (close(fd) < 0 && !r)
    r = -errno;
  if (!r && rename(tmp, path) < 0)
    r = -errno;
  if (r)
    unlink(tmp);
  return r;
}

static void
tick(struct fc_metrics *mt)
{
  const char *path = mt->agent->host.cfg.metrics_path;
  char *text = NULL;
  size_t len = 0;
  int r;

  if (!path[0]) {
    (void)sample(mt);
    return;
  }
  r = fc_metrics_render(mt, &text, &len);
  if (!r)
    r = write_textfile(path, text, len);
  free(text);
  /* Once per run of failures: a missing directory must not fill the log
   * every interval. */
  if (r && mt->write_failures++ == 0)
    log_error("metrics: cannot write %s: %s (will keep trying every %u s)", path,
              strerror(-r), mt->agent->host.cfg.metrics_interval);
  else if (!r && mt->write_failures) {
    log_info("metrics: writing %s again", path);
    mt->write_failures = 0;
  }
}

static void *
metrics_thread(void *arg)
{
  struct fc_metrics *mt = arg;
  unsigned interval = mt->agent->host.cfg.metrics_interval;
  struct timespec next;

  clock_gettime(CLOCK_MONOTONIC, &next);
  pthread_mutex_lock(&mt->lock);
  while (!mt->stopping) {
    pthread_mutex_unlock(&mt->lock);
    tick(mt);
    pthread_mutex_lock(&mt->lock);
    next.tv_sec += interval;
    /* A tick that took longer than the interval (the control lock held by
     * a long detach) is followed by the next a whole interval later, not by
     * a burst catching up. */
    {
      struct timespec now;

      clock_gettime(CLOCK_MONOTONIC, &now);
      if (next.tv_sec < now.tv_sec) {
        next = now;
        next.tv_sec += interval;
      }
    }
    while (!mt->stopping &&
           pthread_cond_timedwait(&mt->cond, &mt->lock, &next) != ETIMEDOUT)
      ;
  }
  pthread_mutex_unlock(&mt->lock);
  return NULL;
}

int
fc_metrics_start(struct fc_agent *agent, struct fc_metrics **out, char *err, size_t errlen)
{
  struct fc_metrics *mt = calloc(1, sizeof *mt);
  pthread_condattr_t ca;
  int r;

  *out = NULL;
  if (!mt) {
    snprintf(err, errlen, "metrics: out of memory");
    return -ENOMEM;
  }
  mt->agent = agent;
  mt->host_reset_time = realtime_s();
  pthread_mutex_init(&mt->sample_lock, NULL);
  pthread_mutex_init(&mt->lock, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&mt->cond, &ca);
  pthread_condattr_destroy(&ca);
  r = -pthread_create(&mt->thread, NULL, metrics_thread, mt);
  if (r) {
    snprintf(err, errlen, "metrics: cannot start the sampler: %s", strerror(-r));
    fc_metrics_stop(mt);
    return r;
  }
  mt->running = true;
  *out = mt;
  return 0;
}

void
fc_metrics_stop(struct fc_metrics *mt)
{
  if (!mt)
    return;
  if (mt->running) {
    pthread_mutex_lock(&mt->lock);
    mt->stopping = true;
    pthread_cond_broadcast(&mt->cond);
    pthread_mutex_unlock(&mt->lock);
    pthread_join(mt->thread, NULL);
  }
  for (unsigned i = 0; i < mt->nr_vols; i++)
    mvol_free(mt->vols[i]);
  pthread_cond_destroy(&mt->cond);
  pthread_mutex_destroy(&mt->lock);
  pthread_mutex_destroy(&mt->sample_lock);
  free(mt);
}

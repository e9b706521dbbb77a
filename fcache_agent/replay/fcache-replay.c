/* SPDX-License-Identifier: Apache-2.0 */
/* fcache-replay: replay a block trace through CloudCache's on-demand
 * allocation (the simulator beside this file) far faster than real time,
 * and report hit ratio, cache usage, flash writes and RWSS prediction
 * per volume.  doc/research/replay.rst is its manual; --help lists the
 * options.
 *
 * Exit status: 0 done; 2 bad arguments, a trace that cannot be opened or
 * a malformed one (one line on stderr naming the file and line); 1
 * anything else (memory, a read error). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/predict.h"
#include "common/version.h"
#include "alloc/rws.h"
#include "alloc/share.h"
#include "alloc/staging.h"
#include "replay.h"
#include "trace.h"

#define MAX_PROFILE 64

struct opts {
  struct fc_replay_config cfg;
  const char *path;
  enum fc_trace_format format;
  unsigned oracle_shift;
  const char *cache_size, *volume_limit;
  bool json;
  size_t nr_profile;
  double profile[MAX_PROFILE];
};

static void
usage(FILE *f)
{
  fprintf(f,
"usage: fcache-replay [options] --cache-size SIZE TRACE\n"
"  --format csv|oracle        trace format (default: from the extension,\n"
"                             .csv, .oracleGeneral or .bin)\n"
"  --oracle-volume-shift S    oracle: volume = obj_id >> S (default: one\n"
"                             volume \"0\")\n"
"  --cache-size SIZE          the host's flash (bytes; K, M, G, T suffixes)\n"
"  --volume-limit SIZE        each volume's upper bound (default: the cache)\n"
"  --block-size BYTES         cache block (default 4096)\n"
"  --policy P                 lru|noalloc|wss|rws|hec (default rws)\n"
"  --rws-n N                  RWS_N, 1..7 (default 1)\n"
"  --staging K                address|data|hybrid (default hybrid)\n"
"  --staging-fraction F       staging area / cache, 0.001..0.01 (default 0.01)\n"
"  --predictor P              last|exp|exp_self|dexp|dexp_self (default exp_self)\n"
"  --spare M                  proportional|idle (default proportional)\n"
"  --headroom H               added to predictions (default 0.10)\n"
"  --window SECONDS           allocation window in trace time (default 3600)\n"
"  --enforce E                replacement|strict (default replacement)\n"
"  --profile-windows LIST     e.g. 60,300,900,3600: one rws replay per window,\n"
"                             and the knee as the proposed window\n"
"  --json                     one JSON document (doc/research/replay.rst) instead of a table\n"
"  --version                  print the version and exit\n");
}

/* One line on stderr; returns the exit status of bad input. */
__attribute__((format(printf, 1, 2))) static int
bad(const char *fmt, ...)
{
  va_list ap;

  fprintf(stderr, "fcache-replay: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return 2;
}

static int
parse_size(const char *s, uint64_t *out)
{
  char *end;
  unsigned long long v;
  unsigned shift = 0;

  if (!s || *s < '0' || *s > '9')
    return -EINVAL;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno)
    return -EINVAL;
  switch (*end) {
  case 'K': case 'k': shift = 10; end++; break;
  case 'M': case 'm': shift = 20; end++; break;
  case 'G': case 'g': shift = 30; end++; break;
  case 'T': case 't': shift = 40; end++; break;
  default: break;
  }
  if (shift && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0))
    end += strlen(end);
  if (*end || (shift && v > (UINT64_MAX >> shift)))
    return -EINVAL;
  *out = (uint64_t)v << shift;
  return 0;
}

static int
parse_uint(const char *s, unsigned long max, unsigned long *out)
{
  char *end;
  unsigned long v;

  if (!s || *s < '0' || *s > '9')
    return -EINVAL;
  errno = 0;
  v = strtoul(s, &end, 10);
  if (errno || *end || v > max)
    return -EINVAL;
  *out = v;
  return 0;
}

static int
parse_double(const char *s, double *out)
{
  char *end;

  if (!s || !*s)
    return -EINVAL;
  errno = 0;
  *out = strtod(s, &end);
  return errno || *end || !isfinite(*out) ? -EINVAL : 0;
}

static int
parse_profile(const char *s, struct opts *o)
{
  char *copy = strdup(s), *save = NULL;
  int r = 0;

  if (!copy)
    return -ENOMEM;
  o->nr_profile = 0;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (o->nr_profile == MAX_PROFILE || parse_double(tok, &o->profile[o->nr_profile]) ||
        !(o->profile[o->nr_profile] > 0)) {
      r = -EINVAL;
      break;
    }
    o->nr_profile++;
  }
  free(copy);
  return r;
}

enum {
  O_FORMAT = 256, O_SHIFT, O_CACHE, O_LIMIT, O_BS, O_POLICY, O_RWSN, O_STAGING,
  O_FRACTION, O_PREDICTOR, O_SPARE, O_HEADROOM, O_WINDOW, O_ENFORCE,
  O_PROFILE, O_JSON, O_HELP, O_VERSION,
};

static const struct option longopts[] = {
  { "format", required_argument, NULL, O_FORMAT },
  { "oracle-volume-shift", required_argument, NULL, O_SHIFT },
  { "cache-size", required_argument, NULL, O_CACHE },
  { "volume-limit", required_argument, NULL, O_LIMIT },
  { "block-size", required_argument, NULL, O_BS },
  { "policy", required_argument, NULL, O_POLICY },
  { "rws-n", required_argument, NULL, O_RWSN },
  { "staging", required_argument, NULL, O_STAGING },
  { "staging-fraction", required_argument, NULL, O_FRACTION },
  { "predictor", required_argument, NULL, O_PREDICTOR },
  { "spare", required_argument, NULL, O_SPARE },
  { "headroom", required_argument, NULL, O_HEADROOM },
  { "window", required_argument, NULL, O_WINDOW },
  { "enforce", required_argument, NULL, O_ENFORCE },
  { "profile-windows", required_argument, NULL, O_PROFILE },
  { "json", no_argument, NULL, O_JSON },
  { "help", no_argument, NULL, O_HELP },
  { "version", no_argument, NULL, O_VERSION },
  { NULL, 0, NULL, 0 },
};

/* 0, or the exit status. */
static int
parse_args(int argc, char **argv, struct opts *o)
{
  bool have_format = false;
  unsigned long u;
  uint64_t size;
  int c;

  fc_replay_config_default(&o->cfg);
  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    const char *a = optarg;

    switch (c) {
    case O_FORMAT:
      if (fc_trace_format_parse(a, &o->format))
        return bad("--format '%s': csv or oracle", a);
      have_format = true;
      break;
    case O_SHIFT:
      if (parse_uint(a, 63, &u) || u == 0)
        return bad("--oracle-volume-shift '%s': 1..63", a);
      o->oracle_shift = (unsigned)u;
      break;
    case O_CACHE:
      o->cache_size = a;
      break;
    case O_LIMIT:
      o->volume_limit = a;
      break;
    case O_BS:
      if (parse_uint(a, 1ul << 30, &u))
        return bad("--block-size '%s': bytes", a);
      o->cfg.block_size = (uint32_t)u;
      break;
    case O_POLICY:
      if (fc_replay_policy_parse(a, &o->cfg.policy))
        return bad("--policy '%s': lru, noalloc, wss, rws or hec", a);
      break;
    case O_RWSN:
      if (parse_uint(a, FC_RWS_MAX_N, &u) || u < 1)
        return bad("--rws-n '%s' out of range 1..7", a);
      o->cfg.rws_n = (unsigned)u;
      break;
    case O_STAGING:
      if (fc_staging_kind_parse(a, &o->cfg.staging))
        return bad("--staging '%s': address, data or hybrid", a);
      break;
    case O_FRACTION:
      if (parse_double(a, &o->cfg.staging_fraction) ||
          o->cfg.staging_fraction < 0.001 || o->cfg.staging_fraction > 0.01)
        return bad("--staging-fraction '%s' out of range 0.001..0.01", a);
      break;
    case O_PREDICTOR:
      if (fc_predictor_parse(a, &o->cfg.predictor))
        return bad("--predictor '%s': last, exp, exp_self, dexp or dexp_self", a);
      break;
    case O_SPARE:
      if (fc_spare_mode_parse(a, &o->cfg.spare))
        return bad("--spare '%s': proportional or idle", a);
      break;
    case O_HEADROOM:
      if (parse_double(a, &o->cfg.headroom) || o->cfg.headroom < 0)
        return bad("--headroom '%s': a number >= 0", a);
      break;
    case O_WINDOW:
      if (parse_double(a, &o->cfg.window_s) || !(o->cfg.window_s > 0))
        return bad("--window '%s': seconds, > 0", a);
      break;
    case O_ENFORCE:
      if (fc_replay_enforce_parse(a, &o->cfg.enforce))
        return bad("--enforce '%s': replacement or strict", a);
      break;
    case O_PROFILE:
      if (parse_profile(a, o))
        return bad("--profile-windows '%s': comma-separated seconds > 0", a);
      break;
    case O_JSON:
      o->json = true;
      break;
    case 'h':
    case O_HELP:
      usage(stdout);
      exit(0);
    case O_VERSION:
      printf("%s\n", fc_version());
      exit(0);
    default:
      usage(stderr);
      return 2;
    }
  }
  if (optind != argc - 1) {
    usage(stderr);
    return 2;
  }
  o->path = argv[optind];
  if (!have_format && fc_trace_format_guess(o->path, &o->format))
    return bad("%s: cannot tell the format from the name: use --format", o->path);
  if (!o->cache_size)
    return bad("%s", "--cache-size is required");
  if (parse_size(o->cache_size, &size) || size / o->cfg.block_size == 0)
    return bad("--cache-size '%s': bytes (K, M, G, T), at least one block",
               o->cache_size);
  o->cfg.cache_blocks = size / o->cfg.block_size;
  o->cfg.volume_limit_blocks = o->cfg.cache_blocks;
  if (o->volume_limit) {
    if (parse_size(o->volume_limit, &size) || size / o->cfg.block_size == 0)
      return bad("--volume-limit '%s': bytes (K, M, G, T), at least one block",
                 o->volume_limit);
    o->cfg.volume_limit_blocks = size / o->cfg.block_size;
  }
  return 0;
}

static int
open_trace(void *arg, struct fc_trace **t)
{
  const struct opts *o = arg;

  return fc_trace_open(o->path, o->format, o->cfg.block_size, o->oracle_shift, t);
}

static int
exit_for(int r)
{
  return r == -EINVAL ? 2 : 1;
}

int
main(int argc, char **argv)
{
  struct opts o = { 0 };
  struct fc_replay_result *res = NULL;
  struct fc_trace *t = NULL;
  char err[600];
  int r;

  r = parse_args(argc, argv, &o);
  if (r)
    return r;
  if (fc_replay_config_check(&o.cfg, err, sizeof err))
    return bad("%s", err);
  r = open_trace(&o, &t);
  if (r) {
    fprintf(stderr, "fcache-replay: %s: %s\n", o.path, strerror(-r));
    return r == -ENOMEM ? 1 : 2;
  }
  if (o.nr_profile) {
    struct fc_replay_profile p;

    fc_trace_close(t);
    r = fc_replay_profile(&o.cfg, o.profile, o.nr_profile, open_trace, &o, &p,
                          err, sizeof err);
    if (r) {
      fprintf(stderr, "fcache-replay: %s\n", err);
      return exit_for(r);
    }
    if (o.json)
      r = fc_replay_profile_print_json(stdout, &p);
    else
      fc_replay_profile_print_table(stdout, &p);
    fc_replay_profile_free(&p);
    return r ? 1 : 0;
  }
  r = fc_replay_run(&o.cfg, t, &res, err, sizeof err);
  fc_trace_close(t);
  if (r) {
    fprintf(stderr, "fcache-replay: %s\n", err);
    return exit_for(r);
  }
  if (o.json)
    r = fc_replay_print_json(stdout, res);
  else
    fc_replay_print_table(stdout, res);
  fc_replay_result_free(res);
  return r ? 1 : 0;
}

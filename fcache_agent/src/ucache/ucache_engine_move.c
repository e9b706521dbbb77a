/* SPDX-License-Identifier: Apache-2.0 */
/* The ucache engine's live storage migration (doc/reference/storage-migration.rst):
 * a volume's origin is always the composite of origin/origin_move.h, so a
 * move changes what the cache's origin routes to and never the cache's
 * own pointer: every request the cache sends, from whatever thread and
 * with or without its stripes, goes through the composite, which knows
 * exactly which are in flight.  The cache's consistency rules
 * (doc/reference/ucache.rst) hold unchanged because the composite keeps "reading
 * the origin returns the last write to it" true at every moment of a
 * move, whatever the scheme. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "origin/origin.h"
#include "origin/origin_move.h"
#include "ucache_engine_priv.h"

#define DEF_MAX_ROUNDS 30u
#define DEF_CONVERGE_BYTES (4ull << 20)
/* dbt_capped's pause: about what the paper measured for its own schemes'
 * switches (Table 5), one slow request to the guest. */
#define DEF_DOWNTIME_MS 200u
#define DEF_AIO_THRESHOLD 100u
#define DEF_AIO_DELAY_US 1000u

struct uc_move {
  struct fc_host *host;
  struct fc_volume *v;
  bool ran;
  char from[FC_ORIGIN_MAX], to[FC_ORIGIN_MAX];
  /* After a restart that replayed a log: the move's end, as found. */
  char recovered[256];
  enum fc_move_scheme recovered_scheme;
};

void
uc_move_log_path(struct fc_host *host, const char *volume_id, char *buf, size_t len)
{
  snprintf(buf, len, "%s/%s.movelog", host->volumes_dir, volume_id);
}

static struct uc_move *
move_of(struct fc_host *host, struct fc_volume *v)
{
  struct uc_vol *uv = UV(v);

  if (!uv->move && (uv->move = calloc(1, sizeof *uv->move))) {
    uv->move->host = host;
    uv->move->v = v;
  }
  return uv->move;
}

int
uc_move_prepare(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  struct uc_vol *uv = UV(v);
  char path[FC_PATH_MAX + 128];
  struct fc_move_recovered rec;
  struct uc_move *mv;
  int r;

  uc_move_log_path(host, v->p.id, path, sizeof path);
  r = fc_origin_move_recover(path, v->p.origin, uv->origin, &rec, err, errlen);
  if (r < 0)
    return r;
  if (rec.found && (mv = move_of(host, v))) {
    mv->ran = true;
    mv->recovered_scheme = rec.scheme;
    snprintf(mv->from, sizeof mv->from, "%s", v->p.origin);
    snprintf(mv->to, sizeof mv->to, "%s", rec.to);
    snprintf(mv->recovered, sizeof mv->recovered, "the agent stopped during "
             "a move (%s): %d logged writes, which the source may have lacked, "
             "were replayed to the source; the volume stays on the source",
             fc_move_scheme_name(rec.scheme), r);
    log_warning("volume %s: %s", v->p.id, mv->recovered);
  }
  return fc_origin_move_wrap(uv->origin, &uv->origin);
}

void
uc_move_stop(struct fc_volume *v)
{
  struct uc_vol *uv = UV(v);

  if (uv->origin && fc_origin_is_move(uv->origin) &&
      fc_origin_move_abort(uv->origin) == 0)
    log_warning("volume %s: its running move was stopped; it stays on %s",
                v->p.id, v->p.origin);
}

void
uc_move_free(struct fc_volume *v)
{
  free(UV(v)->move);
  UV(v)->move = NULL;
}

/* The copier, with every request of the volume held: B becomes the
 * volume's origin in its state file, so a restart from here on opens B.
 * host->lock is only tried: whoever holds it may be waiting for this move
 * to stop (detach, abort), and the copier gives up when it is stopped. */
static int
commit(void *ctx)
{
  struct uc_move *mv = ctx;
  struct fc_volume_params p;
  char err[256];
  int r;

  if (pthread_mutex_trylock(&mv->host->lock))
    return -EAGAIN;
  p = mv->v->p;
  snprintf(p.origin, sizeof p.origin, "%s", mv->to);
  r = fc_volume_params_save(mv->host->volumes_dir, &p, err, sizeof err);
  if (r)
    log_error("volume %s: %s", p.id, err);
  else
    snprintf(mv->v->p.origin, sizeof mv->v->p.origin, "%s", mv->to);
  pthread_mutex_unlock(&mv->host->lock);
  return r;
}

static bool move_running(const struct fc_volume *v);

static int
move_start(struct fc_host *host, struct fc_volume *v, const struct fc_move_request *req,
           char *err, size_t errlen)
{
  struct uc_vol *uv = UV(v);
  char log_path[FC_PATH_MAX + 128];
  struct fc_origin_policy pol;
  struct fc_move_params p = { 0 };
  char old_from[FC_ORIGIN_MAX], old_to[FC_ORIGIN_MAX];
  struct fc_origin *b;
  struct uc_move *mv;
  enum fc_move_scheme s;
  int r;

  if (!uv->uc || !uv->srv || !uv->origin || !fc_origin_is_move(uv->origin)) {
    snprintf(err, errlen, "volume %s is not being served: %s", v->p.id,
             v->error[0] ? v->error : "unavailable");
    return -EIO;
  }
  if (v->p.migration[0]) {
    snprintf(err, errlen, "volume %s has an unfinished live migration (%s)",
             v->p.id, v->p.migration);
    return -EBUSY;
  }
  if (fc_move_scheme_parse(req->scheme, &s)) {
    snprintf(err, errlen, "scheme '%.40s' is not one of dbt, mirror, lr, slr, aio, "
             "dbt_capped", req->scheme);
    return -EINVAL;
  }
  /* dbt pauses when its rounds stop shrinking the dirty set, for as long
   * as the rest takes: a bound it would not keep is refused, not
   * ignored. */
  if (s == FC_MOVE_DBT && (req->converge_bytes || req->downtime_ms)) {
    snprintf(err, errlen, "scheme dbt pauses once its dirty set is stable, however "
             "long the pause; converge_bytes and downtime_ms are dbt_capped's");
    return -EINVAL;
  }
  if (fc_origin_move_running(uv->origin)) {
    snprintf(err, errlen, "a move of volume %s is already running", v->p.id);
    return -EBUSY;
  }
  if (strcmp(req->to, v->p.origin) == 0) {
    snprintf(err, errlen, "volume %s's origin is %s already", v->p.id, req->to);
    return -EINVAL;
  }
  if (strlen(req->to) >= FC_ORIGIN_MAX) {
    snprintf(err, errlen, "argument 'to' is longer than %d bytes", FC_ORIGIN_MAX - 1);
    return -EINVAL;
  }
  /* Two volumes over one origin would overwrite each other. */
  for (unsigned i = 0; i < host->nr_volumes; i++) {
    struct fc_volume *o = host->volumes[i];
    struct uc_move *om = UV(o)->move;

    if (o != v && (!strcmp(o->p.origin, req->to) ||
                   (om && move_running(o) && !strcmp(om->to, req->to)))) {
      snprintf(err, errlen, "%.300s is the origin of volume %s, or where it moves",
               req->to, o->p.id);
      return -EBUSY;
    }
  }
  if (!(mv = move_of(host, v)))
    return -ENOMEM;
  if (req->opened && *req->opened) {
    b = *req->opened;
    *req->opened = NULL;
  } else {
    fc_origin_policy_init(&pol, &host->cfg);
    pol.volume_id = v->p.id;
    r = fc_origin_open(req->to, host->cfg.origin_connections, &pol, &b, err,
                       errlen);
    if (r)
      return r;
  }
  uc_move_log_path(host, v->p.id, log_path, sizeof log_path);
  p.scheme = s;
  p.max_rounds = req->max_rounds ? req->max_rounds : DEF_MAX_ROUNDS;
  p.converge_bytes = req->converge_bytes ? req->converge_bytes : DEF_CONVERGE_BYTES;
  p.downtime_ms = req->downtime_ms ? req->downtime_ms : DEF_DOWNTIME_MS;
  p.aio_threshold = req->aio_threshold ? req->aio_threshold : DEF_AIO_THRESHOLD;
  p.aio_delay_us = req->aio_delay_us ? req->aio_delay_us : DEF_AIO_DELAY_US;
  p.rate_limit_bps = req->rate_limit_bps;
  p.log_path = log_path;
  p.a_uri = v->p.origin;
  p.b_uri = req->to;
  p.commit = commit;
  p.ctx = mv;
  /* Set before the copier may commit, which reads `to`; put back if the
   * move does not start, so the last move's status stays whole. */
  memcpy(old_from, mv->from, sizeof old_from);
  memcpy(old_to, mv->to, sizeof old_to);
  snprintf(mv->from, sizeof mv->from, "%s", v->p.origin);
  snprintf(mv->to, sizeof mv->to, "%s", req->to);
  r = fc_origin_move_start(uv->origin, b, &p, err, errlen);
  if (r) {
    memcpy(mv->from, old_from, sizeof old_from);
    memcpy(mv->to, old_to, sizeof old_to);
    return r;
  }
  mv->recovered[0] = '\0';
  mv->ran = true;
  log_info("volume %s: moving its origin from %s to %s (%s)", v->p.id, mv->from,
           mv->to, fc_move_scheme_name(s));
  return 0;
}

static int
move_abort(struct fc_host *host, struct fc_volume *v, char *err, size_t errlen)
{
  struct uc_vol *uv = UV(v);

  if (!uv->origin || !fc_origin_is_move(uv->origin) ||
      fc_origin_move_abort(uv->origin) == -ENOENT) {
    snprintf(err, errlen, "no move of volume %s is running", v->p.id);
    return -ENOENT;
  }
  log_info("volume %s: move aborted; it stays on %s", v->p.id, v->p.origin);
  return 0;
}

static json_t *
move_status_json(struct fc_host *host, struct fc_volume *v)
{
  struct uc_vol *uv = UV(v);
  struct uc_move *mv = uv->move;
  struct fc_move_status st = { 0 };
  json_t *o, *io;

  if (!mv || !mv->ran)
    return NULL;
  if (mv->recovered[0]) {
    st.state = FC_MOVE_FAILED;
    st.scheme = mv->recovered_scheme;
    snprintf(st.error, sizeof st.error, "%s", mv->recovered);
  } else if (uv->origin && fc_origin_is_move(uv->origin)) {
    fc_origin_move_status(uv->origin, &st);
  }
  io = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}",
                 "a_read_bytes", (json_int_t)st.a_read,
                 "a_write_bytes", (json_int_t)st.a_write,
                 "b_read_bytes", (json_int_t)st.b_read,
                 "b_write_bytes", (json_int_t)st.b_write,
                 "vm_write_bytes", (json_int_t)st.vm_write,
                 "redundant_write_bytes", (json_int_t)st.redundant_write);
  o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:i, s:i, s:I, s:I, s:I, s:f, s:f, s:f, s:o}",
                "volume_id", v->p.id,
                "scheme", fc_move_scheme_name(st.scheme),
                "state", fc_move_state_name(st.state),
                "from", mv->from, "to", mv->to,
                "bytes_total", (json_int_t)st.bytes_total,
                "bytes_copied", (json_int_t)st.bytes_copied,
                "rounds", (int)st.rounds,
                "held_rounds_cut", (int)st.held_rounds_cut,
                "dirty_bytes", (json_int_t)st.dirty_bytes,
                "pause_estimate_ms", (json_int_t)st.pause_estimate_ms,
                "eta_s", (json_int_t)st.eta_s,
                "aio_delay_ms", (double)st.aio_delay_us / 1000.0,
                "downtime_ms", (double)st.downtime_us / 1000.0,
                "elapsed_s", (double)st.elapsed_ms / 1000.0,
                "io", io);
  if (o)
    json_object_set_new(o, "error", st.error[0] ? json_string(st.error) : json_null());
  return o;
}

static bool
move_running(const struct fc_volume *v)
{
  struct uc_vol *uv = UV(v);

  return uv->origin && fc_origin_is_move(uv->origin) &&
         fc_origin_move_running(uv->origin);
}

/* Every scheme origin_move runs. */
static json_t *
move_schemes_json(void)
{
  json_t *a = json_array();

  for (unsigned i = 0; a && i < 64; i++) {
    const char *name = fc_move_scheme_name((enum fc_move_scheme)i);
    if (!strcmp(name, "?"))
      break;
    if (json_array_append_new(a, json_string(name))) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

const struct fc_engine_move_ops fc_ucache_move_ops = {
  .start = move_start,
  .abort = move_abort,
  .status_json = move_status_json,
  .running = move_running,
  .schemes_json = move_schemes_json,
};

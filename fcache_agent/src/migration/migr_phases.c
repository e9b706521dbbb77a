/* SPDX-License-Identifier: Apache-2.0 */
/* The top of migration/: creating a migration and the phase operations
 * the control socket calls (incoming, outgoing, start, switchover,
 * finish, abort, status), and starting and stopping the agent's migration
 * service (TLS, the listener, the host's forgetting hook).  It calls the
 * ends (migr_source.c, migr_dest.c), the keys and the registry; none of
 * them calls it: what they share is migr_common.c.  Not named after
 * migration.h, the folder's public header: that header (struct
 * fc_migration, the operations control/ calls) is below every file here,
 * this file above them all. */
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/json_args.h"
#include "common/lockcheck.h"
#include "common/log.h"
#include "common/random_hex.h"
#include "migration.h"
#include "xfer_tls.h"
#include "engine/engine.h"
#include "engine/volume.h"

/* struct fc_engine_migr's fail(). */
static void
engine_fail(void *ctx, const char *msg)
{
  fc_migr_fail(ctx, "%s", msg);
}

/* struct fc_engine_migr's live(). */
static bool
engine_live(void *ctx)
{
  struct fc_migration *m = ctx;
  bool live;

  pthread_mutex_lock(&m->lock);
  live = !m->stopping && m->state != FC_MS_FAILED && m->state != FC_MS_ABORTED;
  pthread_mutex_unlock(&m->lock);
  return live;
}

static bool
token_valid(const char *t)
{
  if (strlen(t) != FC_TOKEN_HEX)
    return false;
  for (size_t i = 0; i < FC_TOKEN_HEX; i++)
    if (!strchr("0123456789abcdef", t[i]))
      return false;
  return true;
}


static struct fc_migration *
migration_new(struct fc_agent *agent, json_t *args, enum fc_migr_role role,
              char *err, size_t errlen)
{
  const char *id = json_string_value(json_object_get(args, "migration_id"));
  const char *vol = json_string_value(json_object_get(args, "volume_id"));
  const char *token = json_string_value(json_object_get(args, "token"));
  const char *strat = json_string_value(json_object_get(args, "strategy"));
  uint8_t peer_fp[FC_XFER_FP_BYTES] = { 0 };
  struct fc_xfer_key *key = NULL;
  struct fc_migration *m;
  enum fc_strategy s;

  if (!id || !fc_migration_id_valid(id)) {
    snprintf(err, errlen, "migration_id must be 1-%d letters, digits, '-', '_' or '.'",
             FC_MIGRATION_ID_MAX);
    return NULL;
  }
  if (!vol || !fc_volume_id_valid(vol)) {
    snprintf(err, errlen, "missing or invalid volume_id");
    return NULL;
  }
  if (!token || !token_valid(token)) {
    snprintf(err, errlen, "token must be %d lowercase hex digits", FC_TOKEN_HEX);
    return NULL;
  }
  if (!strat || fc_strategy_parse(strat, &s)) {
    char known[128];

    fc_strategy_names(known, sizeof known);
    snprintf(err, errlen, "strategy must be one of %s (auto is resolved by the "
             "orchestrator)", known);
    return NULL;
  }
  if (agent->host.ops->migr->supports(s, err, errlen)) {
    /* A preview is used only when asked for by name, on both sides. */
    if (!(json_is_true(json_object_get(args, "experimental")) &&
          agent->host.ops->migr->preview && agent->host.ops->migr->preview(s)))
      return NULL;
    log_warning("migration %s of volume %s: strategy %s is a preview on this engine "
                "(\"experimental\": true)", id, vol, strat);
    err[0] = '\0';
  }
  if (fc_xfer_tls_pinned(agent->tls) &&
      fc_xfer_fp_parse(json_string_value(json_object_get(args, "peer_fingerprint")),
                       peer_fp)) {
    snprintf(err, errlen, "peer_fingerprint is required with migration_tls = pinned: "
             "the SHA-256 fingerprint (%d hex digits) of the %s agent's certificate "
             "for this migration, from its %s; run the same fcache version and "
             "migration_tls mode on both hosts", FC_XFER_FP_HEX, role == FC_MIGR_DEST ? "source" : "destination",
             role == FC_MIGR_DEST ? "migration-key" : "migration-incoming");
    return NULL;
  }
  m = fc_migration_find(agent, id);
  if (m) {
    fc_migration_put(m);
    snprintf(err, errlen, "migration %s already exists on this agent", id);
    return NULL;
  }
  if (fc_xfer_tls_pinned(agent->tls)) {
    /* The destination's key is new here; the source's was made before
     * the destination prepared, so that it could pin it. */
    if ((role == FC_MIGR_DEST ? fc_xfer_key_new(&key, err, errlen)
                              : fc_migr_key_take(id, vol, &key, err, errlen)))
      return NULL;
  }
  m = calloc(1, sizeof *m);
  if (!m) {
    fc_xfer_key_free(key);
    return NULL;
  }
  m->key = key;
  memcpy(m->peer_fp, peer_fp, sizeof peer_fp);
  snprintf(m->e.id, sizeof m->e.id, "%s", id);
  snprintf(m->e.volume_id, sizeof m->e.volume_id, "%s", vol);
  snprintf(m->token, sizeof m->token, "%s", token);
  m->e.role = role;
  m->e.strategy = s;
  m->refs = 1;                  /* the registry's, once it is added */
  m->agent = agent;
  m->e.host = &agent->host;
  m->e.read_source = fc_migr_dest_read;
  m->e.fetch_source = fc_migr_dest_fetch;
  m->e.fetch_source_start = fc_migr_dest_fetch_start;
  m->e.fetched_dirty = fc_migr_dest_fetched;
  m->e.fail = engine_fail;
  m->e.live = engine_live;
  m->e.ctx = m;
  m->bs = agent->host.cfg.block_size;
  m->conn.fd = -1;
  m->started_ns = fc_monotonic_ns();
  pthread_mutex_init(&m->lock, NULL);
  pthread_cond_init(&m->cond, NULL);
  return m;
}


int
fc_migration_incoming(struct fc_agent *agent, json_t *args, json_t **result,
                      char *err, size_t errlen)
{
  struct fc_attach_request req = { 0 };
  struct fc_migration *m;
  struct fc_volume *v;
  void *opened = NULL;
  bool exists;
  int r;

  m = migration_new(agent, args, FC_MIGR_DEST, err, errlen);
  if (!m)
    return -EINVAL;
  req.volume_id = m->e.volume_id;
  req.origin = json_string_value(json_object_get(args, "origin"));
  req.cache_size = fc_arg_size(args, "cache_size");
  if (!req.origin) {
    snprintf(err, errlen, "the volume's origin is required");
    r = -EINVAL;
    goto out;
  }
  r = fc_attach_request_policy_from_json(args, &req, err, errlen);
  if (r)
    goto out;
  /* The origin is opened before the host lock is taken, as for an
   * attach: a storage server that does not answer must not stop every
   * control request for the length of its connect deadline. */
  pthread_mutex_lock(&agent->host.lock);
  exists = fc_agent_find_locked(agent, m->e.volume_id) != NULL;
  pthread_mutex_unlock(&agent->host.lock);
  if (!exists && agent->host.ops->open_origin) {
    r = agent->host.ops->open_origin(&agent->host, m->e.volume_id, req.origin,
                                     &opened, err, errlen);
    if (r)
      goto out;
    req.opened = &opened;
  }
  pthread_mutex_lock(&agent->host.lock);
  if (exists || fc_agent_find_locked(agent, m->e.volume_id)) {
    pthread_mutex_unlock(&agent->host.lock);
    snprintf(err, errlen, "volume %s is already attached on the destination agent",
             m->e.volume_id);
    r = -EEXIST;
    goto out;
  }
  r = fc_agent_attach_locked(agent, &req, &v, err, errlen);
  if (r == 0) {
    m->e.vol = v;
    r = fc_migr_dest_begin(m);
    if (r) {
      snprintf(err, errlen, "cannot prepare volume %s for migration: %s",
               m->e.volume_id, strerror(-r));
      char derr[256];
      fc_agent_detach_locked(agent, m->e.volume_id, derr, sizeof derr);
    }
  }
  pthread_mutex_unlock(&agent->host.lock);
  if (r)
    goto out;
  /* Made here, sent to the source only over the authenticated stream
   * (WELCOME): the orchestrator never sees it. */
  r = fc_random_hex(m->settle_secret, FC_SETTLE_SECRET_BYTES);
  if (r)
    snprintf(err, errlen, "cannot make the settle secret: %s", strerror(-r));
  if (!r)
    r = fc_migr_registry_add(agent, m, err, errlen);
  if (r) {
    /* Nothing arrived yet: forget the gated volume we attached for it. */
    char derr[256];

    pthread_mutex_lock(&agent->host.lock);
    agent->host.ops->migr->in_forget_all(&m->e);
    if (fc_agent_detach_locked(agent, m->e.volume_id, derr, sizeof derr))
      log_error("migration %s: cannot detach volume %s again: %s", m->e.id,
                m->e.volume_id, derr);
    pthread_mutex_unlock(&agent->host.lock);
    goto out;
  }
  fc_migr_mark_volume(m, "in");
  *result = json_pack("{s:s, s:s, s:s, s:s, s:s}", "migration_id", m->e.id,
                      "volume_id", m->e.volume_id, "export_uri", v->export_uri,
                      "listen", agent->host.cfg.migration_listen,
                      "tls", fc_xfer_tls_mode_name(agent->tls));
  if (*result && m->key)
    json_object_set_new(*result, "fingerprint",
                        json_string(fc_xfer_key_fingerprint(m->key)));
  log_info("migration %s: volume %s prepared to arrive (%s)", m->e.id, m->e.volume_id,
           fc_strategy_name(m->e.strategy));
  return 0;
out:
  /* Opened but not taken by an attach. */
  if (opened)
    agent->host.ops->release_origin(&agent->host, opened);
  fc_xfer_key_free(m->key);
  pthread_mutex_destroy(&m->lock);
  pthread_cond_destroy(&m->cond);
  free(m);
  return r;
}

int
fc_migration_outgoing(struct fc_agent *agent, json_t *args, json_t **result,
                      char *err, size_t errlen)
{
  const char *peer = json_string_value(json_object_get(args, "destination"));
  json_t *rate = json_object_get(args, "rate_limit_bps");
  struct fc_migration *m, *busy;
  struct fc_volume *v;
  char host[256], port[16];
  int r;

  if (!peer || fc_split_hostport(peer, host, sizeof host, port, sizeof port)) {
    snprintf(err, errlen, "destination must be the destination agent's "
             "migration_listen address, host:port");
    return -EINVAL;
  }
  if (rate && (!json_is_integer(rate) || json_integer_value(rate) < 0)) {
    snprintf(err, errlen, "rate_limit_bps must be a non-negative integer");
    return -EINVAL;
  }
  m = migration_new(agent, args, FC_MIGR_SOURCE, err, errlen);
  if (!m)
    return -EINVAL;
  snprintf(m->peer, sizeof m->peer, "%s", peer);
  m->src.rate_limit_bps = rate ? (uint64_t)json_integer_value(rate) : 0;
  fc_ratelimit_init(&m->src.rl, m->src.rate_limit_bps);
  pthread_mutex_lock(&agent->host.lock);
  v = fc_agent_find_locked(agent, m->e.volume_id);
  if (!v || !agent->host.ops->serving(v)) {
    pthread_mutex_unlock(&agent->host.lock);
    snprintf(err, errlen, "volume %s is not attached (and serving) on the source agent",
             m->e.volume_id);
    r = -ENOENT;
    goto out;
  }
  if ((busy = fc_migration_for_volume(agent, v))) {
    pthread_mutex_unlock(&agent->host.lock);
    fc_migration_put(busy);
    snprintf(err, errlen, "volume %s is already migrating", m->e.volume_id);
    r = -EBUSY;
    goto out;
  }
  m->e.vol = v;
  pthread_mutex_unlock(&agent->host.lock);
  r = fc_migr_registry_add(agent, m, err, errlen);
  if (r)
    goto out;
  *result = json_pack("{s:s, s:s}", "migration_id", m->e.id, "volume_id", m->e.volume_id);
  if (*result && m->key)
    json_object_set_new(*result, "fingerprint",
                        json_string(fc_xfer_key_fingerprint(m->key)));
  return 0;
out:
  fc_xfer_key_free(m->key);
  pthread_mutex_destroy(&m->lock);
  pthread_cond_destroy(&m->cond);
  free(m);
  return r;
}

int
fc_migration_start(struct fc_migration *m, char *err, size_t errlen)
{
  int r;

  if (m->e.role != FC_MIGR_SOURCE) {
    snprintf(err, errlen, "start is called on the source agent");
    return -EINVAL;
  }
  pthread_mutex_lock(&m->lock);
  r = m->state == FC_MS_PREPARED ? 0 : -EALREADY;
  if (r)
    snprintf(err, errlen, "migration %s is %s, not prepared", m->e.id,
             fc_migr_state_name(m->state));
  pthread_mutex_unlock(&m->lock);
  if (r)
    return r;
  r = fc_migr_source_connect(m, err, errlen);
  if (!r && fc_strategy(m->e.strategy)->copy_before_switch)
    r = fc_migr_source_copy_before_switch(m, err, errlen);
  return r;
}

int
fc_migration_switchover(struct fc_migration *m, char *err, size_t errlen)
{
  if (m->e.role != FC_MIGR_SOURCE) {
    snprintf(err, errlen, "switchover is called on the source agent");
    return -EINVAL;
  }
  /* The receiver thread may fail the migration meanwhile; the switch
   * itself checks the state again under the lock. */
  pthread_mutex_lock(&m->lock);
  if (m->state != FC_MS_CONNECTED) {
    snprintf(err, errlen, "migration %s is %s%s%s; switchover needs a started "
             "migration", m->e.id, fc_migr_state_name(m->state), m->error[0] ? ": " : "",
             m->error);
    pthread_mutex_unlock(&m->lock);
    return -EINVAL;
  }
  pthread_mutex_unlock(&m->lock);
  return fc_migr_source_switch(m, err, errlen);
}

int
fc_migration_finish(struct fc_migration *m, int timeout_ms, char *err, size_t errlen)
{
  struct fc_agent *agent = m->agent;
  struct timespec until;
  enum fc_migr_state state;
  bool mine;
  int r = 0;

  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += timeout_ms / 1000;
  pthread_mutex_lock(&m->lock);
  while (m->state == FC_MS_SWITCHED && r == 0)
    r = pthread_cond_timedwait(&m->cond, &m->lock, &until);
  state = m->state;
  if (state != FC_MS_COMPLETED)
    snprintf(err, errlen, "migration %s is %s%s%s", m->e.id, fc_migr_state_name(state),
             m->error[0] ? ": " : "", m->error);
  pthread_mutex_unlock(&m->lock);
  if (state != FC_MS_COMPLETED)
    return state == FC_MS_SWITCHED ? -ETIMEDOUT : -EIO;
  if (m->e.role == FC_MIGR_DEST)
    return 0;
  /* One finish releases the source's volume; a second one (a retry after
   * a client timeout) waits for it and answers the same.  The claim is
   * made under host.lock as well, where a settle of the same migration
   * (migr_settle.c) looks for it before releasing the volume itself. */
  for (;;) {
    pthread_mutex_lock(&agent->host.lock);
    pthread_mutex_lock(&m->lock);
    if (!m->src.releasing_source)
      break;
    pthread_mutex_unlock(&agent->host.lock);
    pthread_cond_wait(&m->cond, &m->lock);
    pthread_mutex_unlock(&m->lock);
  }
  mine = m->e.vol != NULL;
  m->src.releasing_source = mine;
  if (mine)
    m->e.vol->leaving = true;
  pthread_mutex_unlock(&m->lock);
  pthread_mutex_unlock(&agent->host.lock);
  if (!mine)
    return 0;
  /* The destination holds everything it needs, dirty blocks included and
   * synced: only now may the source forget them.  Not under host.lock,
   * which every control request takes: forgetting is a write per run of
   * blocks, about a minute for a 1 TiB cache.  The volume stays this
   * migration's meanwhile (volume-detach is refused, and the agent stops
   * only after its control requests end), and the engine takes the
   * volume's own locks, as the VM's requests still might. */
  fc_migr_join(m);
  r = agent->host.ops->migr->out_forget_all(&m->e);
  pthread_mutex_lock(&agent->host.lock);
  m->e.vol->releasing = true;
  if (r == 0)
    r = fc_agent_detach_locked(agent, m->e.volume_id, err, errlen);
  else
    snprintf(err, errlen, "cannot release the source cache of volume %s: %s",
             m->e.volume_id, strerror(-r));
  if (r == 0)
    m->e.vol = NULL;
  else
    m->e.vol->leaving = false;
  pthread_mutex_unlock(&agent->host.lock);
  pthread_mutex_lock(&m->lock);
  m->src.releasing_source = false;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->lock);
  if (r == 0)
    log_info("migration %s: source released volume %s", m->e.id, m->e.volume_id);
  return r;
}

int
fc_migration_abort(struct fc_migration *m, char *err, size_t errlen)
{
  struct fc_agent *agent = m->agent;
  int r = 0;

  /* Checked and set at once: a switchover between the two would leave
   * a VM running on the destination of an aborted migration. */
  pthread_mutex_lock(&m->lock);
  if (m->state == FC_MS_SWITCHED || m->state == FC_MS_COMPLETED) {
    snprintf(err, errlen, "migration %s is %s: the VM runs on the destination, "
             "there is nothing to roll back to", m->e.id, fc_migr_state_name(m->state));
    pthread_mutex_unlock(&m->lock);
    return -EINVAL;
  }
  m->state = FC_MS_ABORTED;
  fc_migr_account_locked(m);
  snprintf(m->error, sizeof m->error, "aborted");
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->lock);
  fc_migr_join(m);
  pthread_mutex_lock(&agent->host.lock);
  if (m->e.vol && m->e.role == FC_MIGR_SOURCE) {
    /* The VM stays here with its cache exactly as it was. */
    r = agent->host.ops->migr->out_thaw(&m->e);
  } else if (m->e.vol) {
    /* Everything the destination got is still on the source: forget it,
     * never write it back (the source's copies may be newer by now). */
    r = agent->host.ops->migr->in_forget_all(&m->e);
    m->e.vol->releasing = true;
    if (!r)
      r = fc_agent_detach_locked(agent, m->e.volume_id, err, errlen);
    if (!r)
      m->e.vol = NULL;
  }
  pthread_mutex_unlock(&agent->host.lock);
  log_info("migration %s of volume %s aborted on the %s", m->e.id, m->e.volume_id,
           m->e.role == FC_MIGR_SOURCE ? "source" : "destination");
  return r;
}

json_t *
fc_migration_json(struct fc_migration *m)
{
  uint64_t now = fc_monotonic_ns(), end;
  double elapsed, rate;
  json_t *o;

  pthread_mutex_lock(&m->lock);
  end = m->completed_ns ? m->completed_ns : now;
  elapsed = (double)(end - m->started_ns) / 1e9;
  rate = elapsed > 0 ? (double)m->bytes_done / elapsed : 0;
  o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:I}",
                "migration_id", m->e.id, "volume_id", m->e.volume_id,
                "role", m->e.role == FC_MIGR_SOURCE ? "source" : "destination",
                "strategy", fc_strategy_name(m->e.strategy),
                "state", fc_migr_state_name(m->state),
                "blocks_total", (json_int_t)m->blocks_total,
                "blocks_done", (json_int_t)m->blocks_done,
                "bytes_total", (json_int_t)(m->blocks_total * m->bs),
                "bytes_done", (json_int_t)m->bytes_done,
                "rate_bytes_per_s", rate,
                "duration_s", elapsed,
                "downtime_s", (double)m->downtime_ns / 1e9,
                "invalidated_blocks", (json_int_t)m->invalidated);
  if (o) {
    double eta = rate > 0 && m->blocks_total > m->blocks_done ?
      (double)((m->blocks_total - m->blocks_done) * m->bs) / rate : 0;
    json_object_set_new(o, "eta_s", json_real(eta));
    json_object_set_new(o, "rate_limit_bytes_per_s", json_integer((json_int_t)m->src.rate_limit_bps));
    if (m->error[0])
      json_object_set_new(o, "error", json_string(m->error));
    if (m->e.role == FC_MIGR_DEST)
      json_object_set_new(o, "forwarded_reads", json_integer((json_int_t)m->dst.forwarded_reads));
    /* cloudcache's on_demand variant: why nothing is queued yet. */
    if (m->e.role == FC_MIGR_SOURCE && m->src.bg_hold_until_ns)
      json_object_set_new(o, "background_in_s",
                          json_real(m->src.bg_hold_until_ns > now ?
                                    (double)(m->src.bg_hold_until_ns - now) / 1e9 : 0));
    if (m->e.role == FC_MIGR_DEST && fc_strategy(m->e.strategy)->preload)
      json_object_set_new(o, "preload_peak_in_flight", json_integer((json_int_t)m->dst.preload_peak));
  }
  /* Under m->lock: a detach clears m->e.vol under it. */
  if (o && m->e.vol)
    m->agent->host.ops->migr->stats_json(&m->e, o);
  pthread_mutex_unlock(&m->lock);
  return o;
}

/* The host's forgetting hook (engine.h): the volume is going away, so no
 * migration may keep pointing at it. */
static void
drop_volume(struct fc_host *host, struct fc_volume *v)
{
  struct fc_agent *agent = host->forgetting_ctx;

  pthread_mutex_lock(&agent->migr_lock);
  for (unsigned i = 0; i < agent->nr_migrations; i++) {
    struct fc_migration *m = agent->migrations[i];
    if (m->e.vol != v)
      continue;
    /* Its threads may still be finishing with the volume. */
    fc_migr_join(m);
    pthread_mutex_lock(&m->lock);
    m->e.vol = NULL;
    pthread_mutex_unlock(&m->lock);
  }
  pthread_mutex_unlock(&agent->migr_lock);
}

int
fc_migrations_start(struct fc_agent *agent, char *err, size_t errlen)
{
  int r = fc_xfer_tls_new(&agent->host.cfg, &agent->tls, err, errlen);

  if (r)
    return r;
  agent->host.forgetting = drop_volume;
  agent->host.forgetting_ctx = agent;
  agent->listener = fc_migr_listen(agent, agent->host.cfg.migration_listen, err, errlen);
  if (!agent->listener) {
    fc_xfer_tls_free(agent->tls);
    agent->tls = NULL;
    return -EADDRNOTAVAIL;
  }
  log_info("migration streams: TLS %s", fc_xfer_tls_mode_name(agent->tls));
  return 0;
}

void
fc_migrations_stop(struct fc_agent *agent)
{
  /* No stream may arrive and no migration thread may run while the
   * engine saves its state. */
  fc_migr_listener_stop(agent->listener);
  agent->listener = NULL;
  fc_migr_registry_stop_all(agent);
  fc_migr_keys_clear();
  fc_xfer_tls_free(agent->tls);
  agent->tls = NULL;
}

/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agent/agent.h"
#include "common/config.h"
#include "common/json_args.h"
#include "common/lockcheck.h"
#include "control_move.h"
#include "control_ops.h"
#include "engine/engine.h"
#include "migration/migration.h"

/* A hint longer than this outlives the evacuation that set it. */
#define HINT_TTL_MAX_S 86400u

static uint64_t
monotonic_ms(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static json_t *
volume_json(struct fc_agent *agent, struct fc_volume *v)
{
  json_t *o = agent->host.ops->volume_json(&agent->host, v);
  struct fc_migration *m = o ? fc_migration_for_volume(agent, v) : NULL;
  uint64_t now = monotonic_ms();

  if (o && v->strategy_hint[0] && now < v->hint_expires_ms)
    json_object_set_new(o, "strategy_hint", json_pack(
        "{s:s, s:I}", "strategy", v->strategy_hint,
        "expires_in_s", (json_int_t)((v->hint_expires_ms - now + 999) / 1000)));

  if (m) {
    json_object_set_new(o, "migration", fc_migration_json(m));
    fc_migration_put(m);
  }
  if (o) {
    json_t *mv = fc_move_json_locked(agent, v);

    if (mv)
      json_object_set_new(o, "move", mv);
  }
  return o;
}

static int
op_status(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_agent *agent = opaque;

  pthread_mutex_lock(&agent->host.lock);
  *result = agent->host.ops->status_json(&agent->host);
  pthread_mutex_unlock(&agent->host.lock);
  if (*result)
    json_object_set_new(*result, "migration_listen",
                        json_string(agent->host.cfg.migration_listen));
  return *result ? 0 : -ENOMEM;
}

static int
op_attach(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_agent *agent = opaque;
  struct fc_attach_request req = { 0 };
  char export_uri[sizeof(((struct fc_volume *)0)->export_uri)];
  int r;

  req.volume_id = fc_arg_string(args, "volume_id");
  req.origin = fc_arg_string(args, "origin");
  req.cache_size = fc_arg_size(args, "cache_size");
  if ((r = fc_attach_request_policy_from_json(args, &req, err, errlen)))
    return r;
  r = fc_agent_attach(agent, &req, export_uri, sizeof export_uri, err, errlen);
  if (r == 0)
    *result = json_pack("{s:s, s:s}", "volume_id", req.volume_id,
                        "export_uri", export_uri);
  return r || *result ? r : -ENOMEM;
}

/* fn(agent, v, ctx, result, err, errlen) under host->lock for the volume
 * args name: -ENOENT with the message when it is not attached, else fn's
 * answer.  ctx: what the op parsed of its other arguments, or NULL. */
typedef int on_volume_fn(struct fc_agent *agent, struct fc_volume *v,
                         const void *ctx, json_t **result, char *err,
                         size_t errlen);

static int
on_volume(struct fc_agent *agent, json_t *args, on_volume_fn *fn,
          const void *ctx, json_t **result, char *err, size_t errlen)
{
  struct fc_volume *v;
  const char *id = fc_arg_string(args, "volume_id");
  int r = 0;

  pthread_mutex_lock(&agent->host.lock);
  v = fc_agent_find_locked(agent, id);
  if (v)
    r = fn(agent, v, ctx, result, err, errlen);
  pthread_mutex_unlock(&agent->host.lock);
  if (!v) {
    snprintf(err, errlen, "volume %.80s is not attached to this agent", id);
    return -ENOENT;
  }
  return r;
}

static int
show_locked(struct fc_agent *agent, struct fc_volume *v, const void *ctx,
            json_t **result, char *err, size_t errlen)
{
  FC_ASSERT_HELD(&agent->host.lock);
  (void)err;
  (void)errlen;
  *result = volume_json(agent, v);
  return *result ? 0 : -ENOMEM;
}

static int
op_show(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  return on_volume(opaque, args, show_locked, NULL, result, err, errlen);
}

static int
op_list(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_agent *agent = opaque;
  json_t *vols = json_array();

  pthread_mutex_lock(&agent->host.lock);
  for (unsigned i = 0; i < agent->host.nr_volumes; i++)
    json_array_append_new(vols, volume_json(agent, agent->host.volumes[i]));
  pthread_mutex_unlock(&agent->host.lock);
  *result = json_pack("{s:o}", "volumes", vols);
  return *result ? 0 : -ENOMEM;
}

/* discard_dirty (an operator's, or Nova's for a volume whose VM was
 * evacuated away): forget the volume without writing its dirty blocks
 * back, which are then stale; the answer says how many were dropped. */
static int
op_detach(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_agent *agent = opaque;
  bool discard = fc_arg_bool(args, "discard_dirty");
  const char *id = fc_arg_string(args, "volume_id");
  uint32_t dropped = 0;
  int r;

  pthread_mutex_lock(&agent->host.lock);
  r = fc_migration_detach_locked(agent, id, discard, &dropped, err, errlen);
  pthread_mutex_unlock(&agent->host.lock);
  if (r == 0)
    *result = discard ?
              json_pack("{s:s, s:I}", "volume_id", id, "dirty_blocks_dropped",
                        (json_int_t)dropped) :
              json_pack("{s:s}", "volume_id", id);
  return r;
}

/* Someone who knows the volume is in use here (its VM runs on this host)
 * lets go the write-back an agent restart held (doc/reference/ucache.rst).  An
 * engine without the hold has nothing to let go. */
static int
claim_locked(struct fc_agent *agent, struct fc_volume *v, const void *ctx,
             json_t **result, char *err, size_t errlen)
{
  FC_ASSERT_HELD(&agent->host.lock);
  int r = agent->host.ops->claim ?
          agent->host.ops->claim(&agent->host, v, "volume-claim") : 0;

  (void)err;
  (void)errlen;
  if (r < 0)
    return r;
  *result = json_pack("{s:s, s:b}", "volume_id", v->p.id, "writeback_was_held",
                      r > 0);
  return *result ? 0 : -ENOMEM;
}

static int
op_claim(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  return on_volume(opaque, args, claim_locked, NULL, result, err, errlen);
}

/* Cinder extended the volume in use and os-brick (or librbd) sees the new
 * size: serve it.  Nova's driver then reopens the guest's NBD node, which
 * QEMU cannot grow in place, and resizes the guest's disk. */
static int
extend_locked(struct fc_agent *agent, struct fc_volume *v, const void *ctx,
              json_t **result, char *err, size_t errlen)
{
  FC_ASSERT_HELD(&agent->host.lock);
  struct fc_host *host = &agent->host;
  struct fc_migration *m = fc_migration_for_volume(agent, v);
  uint64_t size = 0;
  int r;

  if (m) {
    fc_migration_put(m);
    snprintf(err, errlen, "volume %s is migrating; extend it once the "
             "migration has finished", v->p.id);
    return -EBUSY;
  }
  if (!host->ops->grow) {
    snprintf(err, errlen, "the %s engine cannot grow a volume in use; detach "
             "and attach volume %s again to serve its new size",
             host->ops->name, v->p.id);
    return -EOPNOTSUPP;
  }
  if ((r = host->ops->grow(host, v, &size, err, errlen)))
    return r;
  *result = json_pack("{s:s, s:I}", "volume_id", v->p.id, "size",
                      (json_int_t)size);
  return *result ? 0 : -ENOMEM;
}

static int
op_extend(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  return on_volume(opaque, args, extend_locked, NULL, result, err, errlen);
}

/* volume-set: change an attached volume's write policy or cache size
 * while its VM runs (a detach and attach did it before).  Arguments are
 * checked before the volume is looked at, and the change is refused,
 * changing nothing, while the volume migrates or moves: both ends of a
 * migration run one policy and hold each other's block lists, and a
 * move's copy writes the origin under the old policy. */
struct set_request {
  const char *policy_name;
  enum fc_write_policy policy;
  uint64_t cache_size;
};

static int
set_locked(struct fc_agent *agent, struct fc_volume *v, const void *ctx,
           json_t **result, char *err, size_t errlen)
{
  FC_ASSERT_HELD(&agent->host.lock);
  const struct set_request *req = ctx;
  struct fc_host *host = &agent->host;
  struct fc_migration *m = fc_migration_for_volume(agent, v);
  enum fc_write_policy was = v->p.write_policy;
  uint64_t old_size = v->p.cache_size;
  uint32_t written = 0, resized_written = 0, evicted = 0;
  int r;

  if (m) {
    fc_migration_put(m);
    snprintf(err, errlen, "volume %s is migrating; change its policy or cache "
             "size once the migration has finished", v->p.id);
    return -EBUSY;
  }
  if (host->ops->move && host->ops->move->running(v)) {
    snprintf(err, errlen, "a storage move of volume %s is running; change its "
             "policy or cache size once the move has finished", v->p.id);
    return -EBUSY;
  }
  if (req->cache_size && req->cache_size != old_size &&
      !host->ops->set_cache_size)
    goto no_resize;
  if (req->cache_size && req->cache_size % host->cfg.block_size) {
    snprintf(err, errlen, "cache_size %llu bytes is not a multiple of the "
             "cache block (%u bytes, [agent] block_size); give for instance "
             "%llu", (unsigned long long)req->cache_size, host->cfg.block_size,
             (unsigned long long)((req->cache_size / host->cfg.block_size + 1) *
                                  host->cfg.block_size));
    return -EINVAL;
  }
  if (req->policy_name && req->policy != was) {
    if (!host->ops->set_policy) {
      snprintf(err, errlen, "the %s engine cannot change the write policy of a "
               "volume in use; detach volume %s and attach it again with "
               "write_policy %s", host->ops->name, v->p.id, req->policy_name);
      return -EOPNOTSUPP;
    }
    if ((r = host->ops->set_policy(host, v, req->policy, &written, err, errlen)))
      return r;
  }
  /* After the policy: leaving write_back first, a shrink has nothing
   * dirty left to write back. */
  if (req->cache_size && req->cache_size != old_size) {
    r = host->ops->set_cache_size(host, v, req->cache_size, &resized_written,
                                  &evicted, err, errlen);
    if (r) {
      if (req->policy_name && req->policy != was) {
        size_t len = strlen(err);

        snprintf(err + len, errlen - len, " (its write policy did change: "
                 "%s -> %s)", fc_write_policy_name(was),
                 fc_write_policy_name(v->p.write_policy));
      }
      return r;
    }
  }
  *result = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I}", "volume_id",
                      v->p.id,
                      "write_policy", fc_write_policy_name(v->p.write_policy),
                      "previous_write_policy", fc_write_policy_name(was),
                      "dirty_blocks_written",
                      (json_int_t)written + resized_written,
                      "cache_size", (json_int_t)v->p.cache_size,
                      "previous_cache_size", (json_int_t)old_size,
                      "blocks_evicted", (json_int_t)evicted);
  return *result ? 0 : -ENOMEM;

no_resize:
  snprintf(err, errlen, "the %s engine cannot resize the cache of a volume in "
           "use (volume %s has %llu bytes); detach it and attach it again "
           "with the new cache_size", host->ops->name, v->p.id,
           (unsigned long long)v->p.cache_size);
  return -EOPNOTSUPP;
}

static int
op_set(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_agent *agent = opaque;
  struct set_request req = { 0 };

  req.policy_name = fc_arg_string(args, "write_policy");
  req.cache_size = fc_arg_size(args, "cache_size");
  if (req.policy_name && fc_write_policy_parse(req.policy_name, &req.policy)) {
    snprintf(err, errlen, "write_policy '%.40s' is not one of read_only, "
             "write_through, write_back", req.policy_name);
    return -EINVAL;
  }
  if (!req.policy_name && !req.cache_size) {
    snprintf(err, errlen, "nothing to set: give write_policy or cache_size");
    return -EINVAL;
  }
  /* Under host->lock throughout, like a detach's write-back: no
   * migration or move of the volume can start while its dirty blocks go
   * out, and the flush is bounded by the dirty data (the VM's writes are
   * held only for its last pass: ucache_policy.c). */
  return on_volume(agent, args, set_locked, &req, result, err, errlen);
}

/* The strategy the next live migration of a volume should use, whatever
 * its volume type says (fcache evacuate plans one per volume; Nova's API
 * has no room for it).  The source's Nova driver reads it from
 * volume-show.  ttl_s bounds how long it holds: a plan not carried out
 * must not steer a migration days later.  strategy "" clears it. */
static int
op_hint(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_agent *agent = opaque;
  const char *id, *name;
  enum fc_strategy s;
  unsigned ttl_s = (unsigned)fc_arg_uint(args, "ttl_s", 600);
  struct fc_volume *v;

  id = fc_arg_string(args, "volume_id");
  name = fc_arg_string(args, "strategy");
  if (name[0] && fc_strategy_parse(name, &s)) {
    char known[128];

    fc_strategy_names(known, sizeof known);
    snprintf(err, errlen, "strategy '%.40s' is not one of %s", name, known);
    return -EINVAL;
  }
  pthread_mutex_lock(&agent->host.lock);
  v = fc_agent_find_locked(agent, id);
  if (v) {
    snprintf(v->strategy_hint, sizeof v->strategy_hint, "%s", name);
    v->hint_expires_ms = monotonic_ms() + (uint64_t)ttl_s * 1000;
  }
  pthread_mutex_unlock(&agent->host.lock);
  if (!v) {
    snprintf(err, errlen, "volume %.80s is not attached to this agent", id);
    return -ENOENT;
  }
  *result = json_pack("{s:s, s:s, s:i}", "volume_id", id, "strategy", name,
                      "ttl_s", (int)ttl_s);
  return *result ? 0 : -ENOMEM;
}

/* The host's cache shares: agent-status's "allocation", alone. */
static int
op_allocation(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_agent *agent = opaque;
  json_t *status, *alloc = NULL;

  pthread_mutex_lock(&agent->host.lock);
  status = agent->host.ops->status_json(&agent->host);
  pthread_mutex_unlock(&agent->host.lock);
  if (!status)
    return -ENOMEM;
  alloc = json_object_get(status, "allocation");
  if (!alloc) {
    snprintf(err, errlen, "engine %s does not share its cache on demand; "
             "see doc/reference/allocation.rst", agent->host.cfg.engine);
    json_decref(status);
    return -EOPNOTSUPP;
  }
  *result = json_incref(alloc);
  json_decref(status);
  return 0;
}

/* The arguments of each operation (control_args.h): the server refuses
 * what does not match before a handler runs, so the handlers read them
 * with common/json_args.h; doc/reference/control.rst lists them and
 * nova_ext/control_schema.py is their copy the Python client checks its
 * requests against. */
#define ARG(name, type, required, help) { name, type, required, 0, 0, help }
#define ARG_UINT(name, required, min, max, help) \
  { name, FC_ARG_UINT, required, min, max, help }
#define REQUIRED true
#define OPTIONAL false

/* The most a JSON integer carries. */
#define JSON_UINT_MAX ((uint64_t)INT64_MAX)

static const struct fc_control_arg no_args[] = { FC_CONTROL_ARGS_END };

static const struct fc_control_arg volume_args[] = {
  ARG("volume_id", FC_ARG_STRING, REQUIRED, "the Cinder volume's id"),
  FC_CONTROL_ARGS_END,
};

/* The cache policy of a volume (fc_attach_request_policy_from_json), as
 * volume-attach and migration-incoming take it. */
#define POLICY_ARGS \
  ARG("write_policy", FC_ARG_STRING, OPTIONAL, \
      "read_only, write_through (the default) or write_back"), \
  ARG("admission", FC_ARG_STRING, OPTIONAL, "all (the default) or rws"), \
  ARG("staging", FC_ARG_STRING, OPTIONAL, \
      "with admission rws: address, data or hybrid (the default)"), \
  ARG_UINT("rws_n", OPTIONAL, 1, FC_RWS_MAX_N, \
           "with admission rws: accesses within the window that admit a block"), \
  ARG_UINT("rws_window_s", OPTIONAL, 1, FC_RWS_WINDOW_MAX_S, \
           "with admission rws: the reuse window, in seconds")

static const struct fc_control_arg attach_args[] = {
  ARG("volume_id", FC_ARG_STRING, REQUIRED, "the Cinder volume's id"),
  ARG("origin", FC_ARG_STRING, REQUIRED,
      "the volume on shared storage: a block device path, an NBD URI or rbd:POOL/IMAGE"),
  ARG("cache_size", FC_ARG_SIZE, OPTIONAL,
      "this volume's share of the cache (the default: the agent's default_volume_cache)"),
  POLICY_ARGS,
  FC_CONTROL_ARGS_END,
};

static const struct fc_control_arg hint_args[] = {
  ARG("volume_id", FC_ARG_STRING, REQUIRED, "the Cinder volume's id"),
  ARG("strategy", FC_ARG_STRING, REQUIRED,
      "the strategy the next migration should use; \"\" clears the hint"),
  ARG_UINT("ttl_s", OPTIONAL, 1, HINT_TTL_MAX_S, "how long the hint holds (600 s)"),
  FC_CONTROL_ARGS_END,
};

static const struct fc_control_arg detach_args[] = {
  ARG("volume_id", FC_ARG_STRING, REQUIRED, "the Cinder volume's id"),
  ARG("discard_dirty", FC_ARG_BOOL, OPTIONAL,
      "forget the volume without writing its dirty blocks back"),
  FC_CONTROL_ARGS_END,
};

static const struct fc_control_arg set_args[] = {
  ARG("volume_id", FC_ARG_STRING, REQUIRED, "the Cinder volume's id"),
  ARG("write_policy", FC_ARG_STRING, OPTIONAL,
      "the new write policy: read_only, write_through or write_back"),
  ARG("cache_size", FC_ARG_SIZE, OPTIONAL, "the volume's new share of the cache"),
  FC_CONTROL_ARGS_END,
};

static const struct fc_control_arg move_args[] = {
  ARG("volume_id", FC_ARG_STRING, REQUIRED, "the Cinder volume's id"),
  ARG("to", FC_ARG_STRING, REQUIRED, "the new origin: a path or an NBD URI"),
  ARG("scheme", FC_ARG_STRING, OPTIONAL,
      "dbt, dbt_capped, mirror (the default), lr, slr or aio"),
  ARG_UINT("max_rounds", OPTIONAL, 1, FC_MOVE_MAX_ROUNDS, "dbt, dbt_capped: merge rounds at most (30)"),
  ARG_UINT("converge_bytes", OPTIONAL, 1, FC_MOVE_MAX_CONVERGE_BYTES,
           "dbt_capped: dirty bytes small enough to pause for (4 MiB)"),
  ARG_UINT("downtime_ms", OPTIONAL, 1, FC_MOVE_MAX_DOWNTIME_MS, "dbt_capped: the longest pause (200 ms)"),
  ARG_UINT("aio_threshold", OPTIONAL, 1, FC_MOVE_MAX_AIO_THRESHOLD,
           "aio: pending duplicates above which a new one waits (100)"),
  ARG_UINT("aio_delay_us", OPTIONAL, 1, FC_MOVE_MAX_AIO_DELAY_US,
           "aio: each wait of such a duplicate, microseconds (1000)"),
  ARG_UINT("rate_limit_mbps", OPTIONAL, 1, FC_MOVE_MAX_RATE_MBPS,
           "the background copy's rate, MB/s (unlimited)"),
  FC_CONTROL_ARGS_END,
};

static const struct fc_control_arg migration_args[] = {
  ARG("migration_id", FC_ARG_STRING, REQUIRED, "the migration's id"),
  FC_CONTROL_ARGS_END,
};

static const struct fc_control_arg migration_key_args[] = {
  ARG("migration_id", FC_ARG_STRING, REQUIRED, "the migration's id"),
  ARG("volume_id", FC_ARG_STRING, REQUIRED, "the Cinder volume's id"),
  FC_CONTROL_ARGS_END,
};

/* Both sides of a migration name it the same way. */
#define MIGRATION_SIDE_ARGS \
  ARG("migration_id", FC_ARG_STRING, REQUIRED, "the migration's id"), \
  ARG("volume_id", FC_ARG_STRING, REQUIRED, "the Cinder volume's id"), \
  ARG("token", FC_ARG_STRING, REQUIRED, \
      "the secret both sides share for this migration, 64 hex digits"), \
  ARG("strategy", FC_ARG_STRING, REQUIRED, "the strategy, resolved (not auto)"), \
  ARG("peer_fingerprint", FC_ARG_STRING, OPTIONAL, \
      "with migration_tls = pinned: the other agent's certificate's SHA-256"), \
  ARG("experimental", FC_ARG_BOOL, OPTIONAL, \
      "true: allow a strategy this engine runs only as a preview (dmcache: hybrid)")

static const struct fc_control_arg incoming_args[] = {
  MIGRATION_SIDE_ARGS,
  ARG("origin", FC_ARG_STRING, REQUIRED, "the volume on shared storage, as this host sees it"),
  ARG("cache_size", FC_ARG_SIZE, OPTIONAL, "the volume's share of this host's cache"),
  POLICY_ARGS,
  FC_CONTROL_ARGS_END,
};

static const struct fc_control_arg outgoing_args[] = {
  MIGRATION_SIDE_ARGS,
  ARG("destination", FC_ARG_STRING, REQUIRED,
      "the destination agent's migration_listen address, host:port"),
  ARG_UINT("rate_limit_bps", OPTIONAL, 0, JSON_UINT_MAX,
           "the cache copy's rate, bytes/s (0: unlimited)"),
  FC_CONTROL_ARGS_END,
};

static const struct fc_control_arg finish_args[] = {
  ARG("migration_id", FC_ARG_STRING, REQUIRED, "the migration's id"),
  ARG_UINT("timeout_s", OPTIONAL, 1, FC_MIGRATION_FINISH_MAX_S,
           "how long to wait for the migration to end (600 s)"),
  FC_CONTROL_ARGS_END,
};

static const struct fc_control_arg settle_args[] = {
  ARG("step", FC_ARG_STRING, REQUIRED,
      "all, or one step: list, writeback, drop, release, end"),
  ARG("migration_id", FC_ARG_STRING, REQUIRED, "the migration's id"),
  ARG("volume_id", FC_ARG_STRING, REQUIRED, "the Cinder volume's id"),
  ARG_UINT("after", OPTIONAL, 0, JSON_UINT_MAX, "list: the last block of the page before"),
  ARG_UINT("limit", OPTIONAL, 1, FC_SETTLE_LIST_MAX, "list: blocks a page holds at most"),
  { "blocks", FC_ARG_UINT_LIST, OPTIONAL, 0, JSON_UINT_MAX,
    "writeback, drop: the blocks a list page gave" },
  ARG("rest", FC_ARG_STRING, OPTIONAL, "release: writeback or drop"),
  ARG("source", FC_ARG_STRING, OPTIONAL, "end: released or lost"),
  FC_CONTROL_ARGS_END,
};

static const struct fc_control_arg stats_reset_args[] = {
  ARG("volume_id", FC_ARG_STRING, OPTIONAL, "the volume whose counters to zero"),
  ARG("all", FC_ARG_BOOL, OPTIONAL, "true: every volume's and the host's"),
  FC_CONTROL_ARGS_END,
};

const struct fc_control_op fc_agent_control_ops[] = {
  { "agent-status", op_status, FC_CONTROL_READ, fc_redact_export_names, no_args },
  { "capabilities", fc_op_capabilities, FC_CONTROL_READ, NULL, no_args },
  { "allocation", op_allocation, FC_CONTROL_READ, fc_redact_export_names, no_args },
  { "volume-attach", op_attach, FC_CONTROL_ADMIN, NULL, attach_args },
  { "volume-show", op_show, FC_CONTROL_READ, fc_redact_export_names, volume_args },
  { "volume-hint", op_hint, FC_CONTROL_ADMIN, NULL, hint_args },
  { "volume-list", op_list, FC_CONTROL_READ, fc_redact_export_names, no_args },
  { "volume-detach", op_detach, FC_CONTROL_ADMIN, NULL, detach_args },
  { "volume-claim", op_claim, FC_CONTROL_ADMIN, NULL, volume_args },
  { "volume-extend", op_extend, FC_CONTROL_ADMIN, NULL, volume_args },
  { "volume-set", op_set, FC_CONTROL_ADMIN, NULL, set_args },
  { "volume-move", fc_op_volume_move, FC_CONTROL_ADMIN, NULL, move_args },
  { "volume-move-status", fc_op_volume_move_status, FC_CONTROL_READ, fc_redact_export_names, volume_args },
  { "volume-move-abort", fc_op_volume_move_abort, FC_CONTROL_ADMIN, NULL, volume_args },
  { "migration-key", fc_op_migration_key, FC_CONTROL_ADMIN, NULL, migration_key_args },
  { "migration-incoming", fc_op_migration_incoming, FC_CONTROL_ADMIN, NULL, incoming_args },
  { "migration-outgoing", fc_op_migration_outgoing, FC_CONTROL_ADMIN, NULL, outgoing_args },
  { "migration-start", fc_op_migration_start, FC_CONTROL_ADMIN, NULL, migration_args },
  { "migration-switchover", fc_op_migration_switchover, FC_CONTROL_ADMIN, NULL, migration_args },
  { "migration-finish", fc_op_migration_finish, FC_CONTROL_ADMIN, NULL, finish_args },
  { "migration-abort", fc_op_migration_abort, FC_CONTROL_ADMIN, NULL, migration_args },
  { "migration-status", fc_op_migration_status, FC_CONTROL_READ, fc_redact_export_names, migration_args },
  { "migration-settle", fc_op_migration_settle, FC_CONTROL_ADMIN, NULL, settle_args },
  /* Volume ids and figures only, no export names: nothing to redact. */
  { "metrics", fc_op_metrics, FC_CONTROL_READ, NULL, no_args },
  { "volume-stats-reset", fc_op_volume_stats_reset, FC_CONTROL_ADMIN, NULL, stats_reset_args },
  { NULL, NULL, FC_CONTROL_ADMIN, NULL, NULL },
};

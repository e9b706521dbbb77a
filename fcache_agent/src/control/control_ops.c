/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agent/agent.h"
#include "common/config.h"
#include "common/lockcheck.h"
#include "control_move.h"
#include "control_ops.h"
#include "engine/engine.h"
#include "migration/migration.h"

/* Fetch an optional string argument; -EINVAL with a message if present
 * but not a string. */
static int
arg_string(json_t *args, const char *key, bool required, const char **out,
           char *err, size_t errlen)
{
  json_t *v = json_object_get(args, key);

  *out = NULL;
  if (!v || json_is_null(v)) {
    if (!required)
      return 0;
    snprintf(err, errlen, "missing argument '%s'", key);
    return -EINVAL;
  }
  if (!json_is_string(v)) {
    snprintf(err, errlen, "argument '%s' must be a string", key);
    return -EINVAL;
  }
  *out = json_string_value(v);
  return 0;
}

static int
arg_size(json_t *args, const char *key, uint64_t *out, char *err, size_t errlen)
{
  json_t *v = json_object_get(args, key);

  *out = 0;
  if (!v || json_is_null(v))
    return 0;
  if (json_is_integer(v) && json_integer_value(v) > 0) {
    *out = (uint64_t)json_integer_value(v);
    return 0;
  }
  if (json_is_string(v) && fc_parse_size(json_string_value(v), out) == 0 && *out > 0)
    return 0;
  snprintf(err, errlen, "argument '%s' must be a positive size in bytes "
           "(or with a K/M/G/T suffix)", key);
  return -EINVAL;
}

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

  if ((r = arg_string(args, "volume_id", true, &req.volume_id, err, errlen)) ||
      (r = arg_string(args, "origin", true, &req.origin, err, errlen)) ||
      (r = arg_size(args, "cache_size", &req.cache_size, err, errlen)) ||
      (r = fc_attach_request_policy_from_json(args, &req, err, errlen)))
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
  const char *id;
  int r;

  if ((r = arg_string(args, "volume_id", true, &id, err, errlen)))
    return r;
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
  json_t *discard = json_object_get(args, "discard_dirty");
  uint32_t dropped = 0;
  const char *id;
  int r;

  if ((r = arg_string(args, "volume_id", true, &id, err, errlen)))
    return r;
  if (discard && !json_is_null(discard) && !json_is_boolean(discard)) {
    snprintf(err, errlen, "argument 'discard_dirty' must be true or false");
    return -EINVAL;
  }
  pthread_mutex_lock(&agent->host.lock);
  r = fc_migration_detach_locked(agent, id, json_is_true(discard), &dropped, err,
                                 errlen);
  pthread_mutex_unlock(&agent->host.lock);
  if (r == 0)
    *result = json_is_true(discard) ?
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
  int r;

  if ((r = arg_string(args, "write_policy", false, &req.policy_name, err, errlen)) ||
      (r = arg_size(args, "cache_size", &req.cache_size, err, errlen)))
    return r;
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
  json_t *ttl = json_object_get(args, "ttl_s");
  unsigned ttl_s = 600;
  struct fc_volume *v;
  int r;

  if ((r = arg_string(args, "volume_id", true, &id, err, errlen)) ||
      (r = arg_string(args, "strategy", true, &name, err, errlen)))
    return r;
  if (name[0] && fc_strategy_parse(name, &s)) {
    snprintf(err, errlen, "strategy '%.40s' is not one of none, cachemior, "
             "firepan, firepan_if, cloudcache, hybrid", name);
    return -EINVAL;
  }
  if (ttl && !json_is_null(ttl)) {
    if (!json_is_integer(ttl) || json_integer_value(ttl) < 1 ||
        json_integer_value(ttl) > HINT_TTL_MAX_S) {
      snprintf(err, errlen, "argument 'ttl_s' must be an integer from 1 to %u",
               HINT_TTL_MAX_S);
      return -EINVAL;
    }
    ttl_s = (unsigned)json_integer_value(ttl);
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

const struct fc_control_op fc_agent_control_ops[] = {
  { "agent-status", op_status, FC_CONTROL_READ, fc_redact_export_names },
  { "capabilities", fc_op_capabilities, FC_CONTROL_READ, NULL },
  { "allocation", op_allocation, FC_CONTROL_READ, fc_redact_export_names },
  { "volume-attach", op_attach, FC_CONTROL_ADMIN, NULL },
  { "volume-show", op_show, FC_CONTROL_READ, fc_redact_export_names },
  { "volume-hint", op_hint, FC_CONTROL_ADMIN, NULL },
  { "volume-list", op_list, FC_CONTROL_READ, fc_redact_export_names },
  { "volume-detach", op_detach, FC_CONTROL_ADMIN, NULL },
  { "volume-claim", op_claim, FC_CONTROL_ADMIN, NULL },
  { "volume-extend", op_extend, FC_CONTROL_ADMIN, NULL },
  { "volume-set", op_set, FC_CONTROL_ADMIN, NULL },
  { "volume-move", fc_op_volume_move, FC_CONTROL_ADMIN, NULL },
  { "volume-move-status", fc_op_volume_move_status, FC_CONTROL_READ, fc_redact_export_names },
  { "volume-move-abort", fc_op_volume_move_abort, FC_CONTROL_ADMIN, NULL },
  { "migration-key", fc_op_migration_key, FC_CONTROL_ADMIN, NULL },
  { "migration-incoming", fc_op_migration_incoming, FC_CONTROL_ADMIN, NULL },
  { "migration-outgoing", fc_op_migration_outgoing, FC_CONTROL_ADMIN, NULL },
  { "migration-start", fc_op_migration_start, FC_CONTROL_ADMIN, NULL },
  { "migration-switchover", fc_op_migration_switchover, FC_CONTROL_ADMIN, NULL },
  { "migration-finish", fc_op_migration_finish, FC_CONTROL_ADMIN, NULL },
  { "migration-abort", fc_op_migration_abort, FC_CONTROL_ADMIN, NULL },
  { "migration-status", fc_op_migration_status, FC_CONTROL_READ, fc_redact_export_names },
  { "migration-settle", fc_op_migration_settle, FC_CONTROL_ADMIN, NULL },
  /* Volume ids and figures only, no export names: nothing to redact. */
  { "metrics", fc_op_metrics, FC_CONTROL_READ, NULL },
  { "volume-stats-reset", fc_op_volume_stats_reset, FC_CONTROL_ADMIN, NULL },
  { NULL, NULL, FC_CONTROL_ADMIN, NULL },
};

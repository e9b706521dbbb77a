#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "config.h"
#include "control_ops.h"
#include "dm_engine.h"
#include "migration.h"
#include "nbd_server.h"
#include "ucache.h"

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

static json_t *
volume_json(struct fc_agent *agent, struct fc_volume *v)
{
  if (v->dm)
    return fc_dm_volume_json(agent, v);
  json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s}",
                        "volume_id", v->p.id, "origin", v->p.origin,
                        "export_uri", v->srv ? v->export_uri : "",
                        "cache_size", (json_int_t)v->p.cache_size,
                        "write_policy", fc_write_policy_name(v->p.write_policy),
                        "admission", fc_admission_name(v->p.admission));

  if (!o)
    return NULL;
  json_object_set_new(o, "engine", json_string(agent->cfg.engine));
  json_object_set_new(o, "state", json_string(v->srv ? "attached" : "unavailable"));
  if (v->error[0] && !v->srv)
    json_object_set_new(o, "error", json_string(v->error));
  json_object_set_new(o, "block_size", json_integer(agent->cfg.block_size));
  if (v->uc) {
    struct fc_ucache_info info;
    struct fc_stats *s = fc_ucache_stats(v->uc);
    uint64_t hits = STAT_GET(s, read_hits), misses = STAT_GET(s, read_misses);

    fc_ucache_info(v->uc, &info);
    json_object_set_new(o, "size", json_integer((json_int_t)info.size));
    json_object_set_new(o, "cached_blocks", json_integer(info.cached_blocks));
    json_object_set_new(o, "dirty_blocks", json_integer(info.dirty_blocks));
    json_object_set_new(o, "quota_blocks", json_integer(info.quota_blocks));
    json_object_set_new(o, "memory_bytes", json_integer((json_int_t)info.memory_bytes));
    json_object_set_new(o, "hit_ratio",
                        json_real(hits + misses ? (double)hits / (double)(hits + misses) : 0.0));
#define S(name) json_object_set_new(o, #name, json_integer((json_int_t)STAT_GET(s, name)))
    S(reads); S(writes); S(read_bytes); S(write_bytes); S(read_hits); S(read_misses);
    S(write_hits); S(write_misses); S(trims); S(flushes); S(origin_read_bytes);
    S(origin_write_bytes); S(cache_read_bytes); S(cache_write_bytes); S(promotions);
    S(evictions); S(invalidations); S(writebacks); S(io_errors);
#undef S
  } else {
    json_object_set_new(o, "cached_blocks", json_integer(v->nr_held));
    json_object_set_new(o, "dirty_blocks", json_integer(v->nr_held_dirty));
  }
  if (v->srv)
    json_object_set_new(o, "connections", json_integer(nbd_server_connections(v->srv)));
  {
    struct fc_migration *m = fc_migration_for_volume(agent, v);
    if (m)
      json_object_set_new(o, "migration", fc_migration_json(m));
  }
  return o;
}

/* Host totals: what the host's flash and the shared storage see from all
 * volumes together. */
static json_t *
host_totals(struct fc_agent *agent)
{
  uint64_t t[9] = { 0 };
  uint32_t dirty = 0;

  for (unsigned i = 0; i < agent->nr_volumes; i++) {
    struct fc_volume *v = agent->volumes[i];
    struct fc_ucache_info info;
    struct fc_stats *s;

    if (!v->uc)
      continue;
    s = fc_ucache_stats(v->uc);
    fc_ucache_info(v->uc, &info);
    dirty += info.dirty_blocks;
    t[0] += STAT_GET(s, reads);
    t[1] += STAT_GET(s, writes);
    t[2] += STAT_GET(s, read_hits);
    t[3] += STAT_GET(s, read_misses);
    t[4] += STAT_GET(s, origin_read_bytes);
    t[5] += STAT_GET(s, origin_write_bytes);
    t[6] += STAT_GET(s, cache_write_bytes);
    t[7] += STAT_GET(s, evictions);
    t[8] += STAT_GET(s, io_errors);
  }
  return json_pack("{s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I}",
                   "reads", (json_int_t)t[0], "writes", (json_int_t)t[1],
                   "read_hits", (json_int_t)t[2], "read_misses", (json_int_t)t[3],
                   "hit_ratio", t[2] + t[3] ? (double)t[2] / (double)(t[2] + t[3]) : 0.0,
                   "origin_read_bytes", (json_int_t)t[4],
                   "origin_write_bytes", (json_int_t)t[5],
                   "cache_write_bytes", (json_int_t)t[6], "evictions", (json_int_t)t[7],
                   "io_errors", (json_int_t)t[8], "dirty_blocks", (json_int_t)dirty);
}

static int
op_status(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_agent *agent = opaque;
  uint64_t bs = agent->cfg.block_size;
  json_t *vols;

  if (agent->dm) {
    pthread_mutex_lock(&agent->lock);
    *result = fc_dm_status_json(agent);
    pthread_mutex_unlock(&agent->lock);
    return *result ? 0 : -ENOMEM;
  }
  vols = json_array();
  pthread_mutex_lock(&agent->lock);
  for (unsigned i = 0; i < agent->nr_volumes; i++) {
    struct fc_volume *v = agent->volumes[i];
    json_array_append_new(vols, json_pack("{s:s, s:s, s:s, s:I}", "volume_id", v->p.id,
                                          "export_uri", v->srv ? v->export_uri : "",
                                          "state", v->srv ? "attached" : "unavailable",
                                          "cache_size", (json_int_t)v->p.cache_size));
  }
  *result = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:o}",
                      "version", FC_VERSION, "engine", agent->cfg.engine,
                      "capacity_bytes", (json_int_t)(agent->dev->nr_blocks * bs),
                      "used_bytes", (json_int_t)(fc_cachedev_used(agent->dev) * bs),
                      "reserved_bytes", (json_int_t)(agent->dev->reserved * bs),
                      "block_size", (json_int_t)bs,
                      "table_memory_bytes", (json_int_t)fc_cachedev_memory(agent->dev),
                      "volumes", vols);
  if (*result) {
    json_object_set_new(*result, "cache_path", json_string(agent->cfg.cache_path));
    json_object_set_new(*result, "migration_listen",
                        json_string(agent->cfg.migration_listen));
    json_object_set_new(*result, "totals", host_totals(agent));
  }
  pthread_mutex_unlock(&agent->lock);
  return *result ? 0 : -ENOMEM;
}

static int
op_attach(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_agent *agent = opaque;
  struct fc_attach_request req = { 0 };
  const char *policy, *admission;
  struct fc_volume *v;
  int r;

  if ((r = arg_string(args, "volume_id", true, &req.volume_id, err, errlen)) ||
      (r = arg_string(args, "origin", true, &req.origin, err, errlen)) ||
      (r = arg_string(args, "write_policy", false, &policy, err, errlen)) ||
      (r = arg_string(args, "admission", false, &admission, err, errlen)) ||
      (r = arg_size(args, "cache_size", &req.cache_size, err, errlen)))
    return r;
  if (policy && fc_write_policy_parse(policy, &req.write_policy)) {
    snprintf(err, errlen, "write_policy '%.40s' is not one of read_only, "
             "write_through, write_back", policy);
    return -EINVAL;
  }
  if (admission && fc_admission_parse(admission, &req.admission)) {
    snprintf(err, errlen, "admission '%.40s' is not one of all, rws", admission);
    return -EINVAL;
  }
  pthread_mutex_lock(&agent->lock);
  r = fc_agent_attach_locked(agent, &req, &v, err, errlen);
  if (r == 0)
    *result = json_pack("{s:s, s:s}", "volume_id", v->p.id, "export_uri", v->export_uri);
  pthread_mutex_unlock(&agent->lock);
  return r;
}

static int
op_show(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_agent *agent = opaque;
  struct fc_volume *v;
  const char *id;
  int r;

  if ((r = arg_string(args, "volume_id", true, &id, err, errlen)))
    return r;
  pthread_mutex_lock(&agent->lock);
  v = fc_agent_find_locked(agent, id);
  if (v)
    *result = volume_json(agent, v);
  pthread_mutex_unlock(&agent->lock);
  if (!v) {
    snprintf(err, errlen, "volume %.80s is not attached to this agent", id);
    return -ENOENT;
  }
  return *result ? 0 : -ENOMEM;
}

static int
op_list(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_agent *agent = opaque;
  json_t *vols = json_array();

  pthread_mutex_lock(&agent->lock);
  for (unsigned i = 0; i < agent->nr_volumes; i++)
    json_array_append_new(vols, volume_json(agent, agent->volumes[i]));
  pthread_mutex_unlock(&agent->lock);
  *result = json_pack("{s:o}", "volumes", vols);
  return *result ? 0 : -ENOMEM;
}

static int
op_detach(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_agent *agent = opaque;
  const char *id;
  int r;

  if ((r = arg_string(args, "volume_id", true, &id, err, errlen)))
    return r;
  pthread_mutex_lock(&agent->lock);
  r = fc_agent_detach_locked(agent, id, err, errlen);
  pthread_mutex_unlock(&agent->lock);
  if (r == 0)
    *result = json_pack("{s:s}", "volume_id", id);
  return r;
}

/* Live cache migration runs on ucache only for now: every other
 * migration op needs a migration these two would have created. */
static int
refuse_dm_migration(struct fc_agent *agent, char *err, size_t errlen)
{
  snprintf(err, errlen, "live cache migration is not wired for engine dmcache yet "
           "(see doc/dmcache.rst); use strategy none, or engine ucache");
  return -ENOTSUP;
}

static int
op_migration_incoming(void *opaque, json_t *args, json_t **result, char *err,
                      size_t errlen)
{
  if (((struct fc_agent *)opaque)->dm)
    return refuse_dm_migration(opaque, err, errlen);
  return fc_op_migration_incoming(opaque, args, result, err, errlen);
}

static int
op_migration_outgoing(void *opaque, json_t *args, json_t **result, char *err,
                      size_t errlen)
{
  if (((struct fc_agent *)opaque)->dm)
    return refuse_dm_migration(opaque, err, errlen);
  return fc_op_migration_outgoing(opaque, args, result, err, errlen);
}

const struct fc_control_op fc_agent_control_ops[] = {
  { "agent-status", op_status },
  { "volume-attach", op_attach },
  { "volume-show", op_show },
  { "volume-list", op_list },
  { "volume-detach", op_detach },
  { "migration-incoming", op_migration_incoming },
  { "migration-outgoing", op_migration_outgoing },
  { "migration-start", fc_op_migration_start },
  { "migration-switchover", fc_op_migration_switchover },
  { "migration-finish", fc_op_migration_finish },
  { "migration-abort", fc_op_migration_abort },
  { "migration-status", fc_op_migration_status },
  { "migration-settle", fc_op_migration_settle },
  { NULL, NULL },
};

/* SPDX-License-Identifier: Apache-2.0 */
/* volume-move, volume-move-status, volume-move-abort: the contract of
 * doc/reference/storage-migration.rst, "Control operations"; the engine does the
 * work (engine.h, struct fc_engine_move_ops). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"
#include "control_move.h"
#include "engine/engine.h"
#include "migration/migration.h"
#include "common/json_args.h"
#include "common/lockcheck.h"

/* volume_id, and the volume under host.lock (held on success). */
static int
locked_volume(struct fc_agent *agent, json_t *args, struct fc_volume **out,
              char *err, size_t errlen)
{
  const char *id = json_string_value(json_object_get(args, "volume_id"));

  if (!id) {
    snprintf(err, errlen, "missing argument 'volume_id' (a string)");
    return -EINVAL;
  }
  if (!agent->host.ops->move) {
    snprintf(err, errlen, "engine %s cannot move a volume's origin live; see "
             "doc/reference/storage-migration.rst", agent->host.ops->name);
    return -ENOTSUP;
  }
  pthread_mutex_lock(&agent->host.lock);
  *out = fc_host_find_locked(&agent->host, id);
  if (!*out) {
    pthread_mutex_unlock(&agent->host.lock);
    snprintf(err, errlen, "volume %.80s is not attached to this agent", id);
    return -ENOENT;
  }
  return 0;
}

int
fc_op_volume_move(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_agent *agent = opaque;
  struct fc_move_request req = { 0 };
  /* locked_volume() refuses a request without it. */
  const char *id = json_string_value(json_object_get(args, "volume_id"));
  void *opened = NULL;
  struct fc_migration *m;
  struct fc_volume *v;
  int r;

  /* The table in control_ops.c has checked every argument's type and
   * bounds. */
  req.to = fc_arg_string(args, "to");
  if (!req.to[0]) {
    snprintf(err, errlen, "argument 'to' is empty: give the new origin, a path or an NBD URI");
    return -EINVAL;
  }
  /* IO mirroring when the caller does not choose: A stays whole the whole
   * time, with no log, and it converges whatever the VM writes. */
  req.scheme = fc_arg_present(args, "scheme") ? fc_arg_string(args, "scheme") : "mirror";
  req.max_rounds = (unsigned)fc_arg_uint(args, "max_rounds", 0);
  req.converge_bytes = fc_arg_uint(args, "converge_bytes", 0);
  req.downtime_ms = (unsigned)fc_arg_uint(args, "downtime_ms", 0);
  req.aio_threshold = (unsigned)fc_arg_uint(args, "aio_threshold", 0);
  req.aio_delay_us = (unsigned)fc_arg_uint(args, "aio_delay_us", 0);
  req.rate_limit_bps = fc_arg_uint(args, "rate_limit_mbps", 0) * 1000000;
  /* The target is opened without the host lock, after a first look that
   * the volume is there: a target that does not answer must not stop
   * every control request for its connect deadline. */
  if ((r = locked_volume(agent, args, &v, err, errlen)))
    return r;
  pthread_mutex_unlock(&agent->host.lock);
  if (agent->host.ops->open_origin) {
    r = agent->host.ops->open_origin(&agent->host, id, req.to, &opened, err, errlen);
    if (r)
      return r;
    req.opened = &opened;
  }
  if ((r = locked_volume(agent, args, &v, err, errlen)))
    goto out;
  m = fc_migration_for_volume(agent, v);
  if (m) {
    fc_migration_put(m);
    snprintf(err, errlen, "volume %s is in a live migration between hosts; move "
             "its origin after it ends", v->p.id);
    r = -EBUSY;
  } else {
    r = agent->host.ops->move->start(&agent->host, v, &req, err, errlen);
  }
  if (!r)
    *result = json_pack("{s:s, s:s, s:s}", "volume_id", v->p.id, "scheme", req.scheme,
                        "state", "copying");
  pthread_mutex_unlock(&agent->host.lock);
out:
  /* Opened but no move took it. */
  if (opened)
    agent->host.ops->release_origin(&agent->host, opened);
  return r ? r : *result ? 0 : -ENOMEM;
}

int
fc_op_volume_move_status(void *opaque, json_t *args, json_t **result, char *err,
                         size_t errlen)
{
  struct fc_agent *agent = opaque;
  struct fc_volume *v;
  int r;

  if ((r = locked_volume(agent, args, &v, err, errlen)))
    return r;
  *result = agent->host.ops->move->status_json(&agent->host, v);
  if (!*result) {
    snprintf(err, errlen, "volume %s has not moved its origin", v->p.id);
    r = -ENOENT;
  }
  pthread_mutex_unlock(&agent->host.lock);
  return r;
}

int
fc_op_volume_move_abort(void *opaque, json_t *args, json_t **result, char *err,
                        size_t errlen)
{
  struct fc_agent *agent = opaque;
  struct fc_volume *v;
  int r;

  if ((r = locked_volume(agent, args, &v, err, errlen)))
    return r;
  r = agent->host.ops->move->abort(&agent->host, v, err, errlen);
  if (!r)
    *result = agent->host.ops->move->status_json(&agent->host, v);
  pthread_mutex_unlock(&agent->host.lock);
  return r ? r : *result ? 0 : -ENOMEM;
}

json_t *
fc_move_json_locked(struct fc_agent *agent, struct fc_volume *v)
{
  FC_ASSERT_HELD(&agent->host.lock);
  return agent->host.ops->move ? agent->host.ops->move->status_json(&agent->host, v)
                               : NULL;
}

int
fc_move_check_no_move(struct fc_agent *agent, json_t *args, char *err, size_t errlen)
{
  const char *id = json_string_value(json_object_get(args, "volume_id"));
  struct fc_volume *v;
  int r = 0;

  if (!id || !agent->host.ops->move)
    return 0;
  pthread_mutex_lock(&agent->host.lock);
  v = fc_host_find_locked(&agent->host, id);
  if (v && agent->host.ops->move->running(v)) {
    snprintf(err, errlen, "volume %s is moving its origin (volume-move); migrate "
             "it after the move ends, or abort the move", id);
    r = -EBUSY;
  }
  pthread_mutex_unlock(&agent->host.lock);
  return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Control operations for live cache migration (see migration.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"
#include "common/json_args.h"
#include "control_move.h"
#include "control_ops.h"
#include "engine/engine.h"
#include "migration/migration.h"

static struct fc_migration *
find(struct fc_agent *agent, json_t *args, char *err, size_t errlen)
{
  const char *id = json_string_value(json_object_get(args, "migration_id"));
  struct fc_migration *m = id ? fc_migration_find(agent, id) : NULL;

  if (!m)
    snprintf(err, errlen, "no migration %.80s on this agent", id ? id : "(missing migration_id)");
  return m;
}

int
fc_op_migration_incoming(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  return fc_migration_incoming(opaque, args, result, err, errlen);
}

int
fc_op_migration_key(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  return fc_migration_key(opaque, args, result, err, errlen);
}

int
fc_op_migration_settle(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_agent *agent = opaque;

  if (!agent->host.ops->migr->settle) {
    snprintf(err, errlen, "settling a failed migration is not implemented for engine "
             "%s (see doc/reference/dmcache.rst)", agent->host.ops->name);
    return -ENOTSUP;
  }
  return fc_migration_settle(opaque, args, result, err, errlen);
}

int
fc_op_migration_outgoing(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  int r = fc_move_check_no_move(opaque, args, err, errlen);

  if (r)
    return r;
  return fc_migration_outgoing(opaque, args, result, err, errlen);
}

static int
status_result(struct fc_migration *m, json_t **result)
{
  *result = fc_migration_json(m);
  return *result ? 0 : -ENOMEM;
}

#define PHASE_OP(name, call)                                                    \
  int name(void *opaque, json_t *args, json_t **result, char *err,       \
                  size_t errlen)                                                \
  {                                                                             \
    struct fc_migration *m = find(opaque, args, err, errlen);                   \
    int r;                                                                      \
    if (!m)                                                                     \
      return -ENOENT;                                                           \
    r = call;                                                                   \
    if (!r)                                                                     \
      r = status_result(m, result);                                             \
    fc_migration_put(m);                                                        \
    return r;                                                                   \
  }

PHASE_OP(fc_op_migration_start, fc_migration_start(m, err, errlen))
PHASE_OP(fc_op_migration_switchover, fc_migration_switchover(m, err, errlen))
PHASE_OP(fc_op_migration_abort, fc_migration_abort(m, err, errlen))
PHASE_OP(fc_op_migration_status, 0)

int
fc_op_migration_finish(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_migration *m = find(opaque, args, err, errlen);
  int timeout_s = (int)fc_arg_uint(args, "timeout_s", 600);
  int r;

  if (!m)
    return -ENOENT;
  r = fc_migration_finish(m, timeout_s * 1000, err, errlen);
  if (!r)
    r = status_result(m, result);
  fc_migration_put(m);
  return r;
}


/* SPDX-License-Identifier: Apache-2.0 */
/* capabilities: what this agent runs, from the tables it parses with:
 * strategies (with whether this engine can run each, and why not), write
 * policies, admissions and staging kinds (the names volume-attach takes),
 * the storage move schemes this engine runs, the bounds it enforces, and
 * the control operations with their arguments (control_args.h).  nova_ext.vocabulary restates
 * these for the hosts that have no agent (the Cinder API); a functional
 * test holds the two equal. */
#include <errno.h>
#include <string.h>

#include "agent/agent.h"
#include "control_ops.h"
#include "engine/engine.h"

static const char *
policy_at(unsigned i)
{
  return fc_write_policy_name((enum fc_write_policy)i);
}

static const char *
admission_at(unsigned i)
{
  return fc_admission_name((enum fc_admission)i);
}

static const char *
staging_at(unsigned i)
{
  return fc_staging_kind_name((enum fc_staging_kind)i);
}

/* The names a name function gives for 0, 1, ... up to the first it does
 * not know (each spells that "?" or "unknown"). */
static json_t *
names(const char *(*name_at)(unsigned))
{
  json_t *a = json_array();

  for (unsigned i = 0; a && i < 64; i++) {
    const char *n = name_at(i);
    if (!strcmp(n, "?") || !strcmp(n, "unknown"))
      break;
    if (json_array_append_new(a, json_string(n))) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

static json_t *
strategies(const struct fc_agent *agent)
{
  json_t *a = json_array();

  for (unsigned i = 0; a && i < FC_STRAT_COUNT; i++) {
    const struct fc_strategy_desc *how = fc_strategy((enum fc_strategy)i);
    char why[512] = "";
    int r = agent->host.ops->migr->supports((enum fc_strategy)i, why, sizeof why);
    json_t *o = json_pack("{s:s, s:s, s:b}", "name", how->name, "summary",
                          how->summary, "supported", r == 0);

    if (o && r)
      json_object_set_new(o, "why_not", json_string(why));
    if (!o || json_array_append_new(a, o)) {
      json_decref(a);
      return NULL;
    }
  }
  return a;
}

int
fc_op_capabilities(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  const struct fc_agent *agent = opaque;

  (void)args;
  (void)err;
  (void)errlen;
  *result = json_pack("{s:s, s:o*, s:o*, s:o*, s:o*, s:o*, s:{s:i, s:i}, s:o*}",
                      "engine", agent->host.cfg.engine,
                      "strategies", strategies(agent),
                      "write_policies", names(policy_at),
                      "admissions", names(admission_at),
                      "staging_kinds", names(staging_at),
                      "move_schemes", agent->host.ops->move ?
                                      agent->host.ops->move->schemes_json() : json_array(),
                      "bounds",
                      "rws_n_max", (int)FC_RWS_MAX_N,
                      "rws_window_max_s", (json_int_t)FC_RWS_WINDOW_MAX_S,
                      "operations", fc_control_ops_json(fc_agent_control_ops));
  return *result ? 0 : -ENOMEM;
}

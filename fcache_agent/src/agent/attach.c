/* volume-attach and volume-detach: the rules every engine shares, then
 * the engine's own work (engine.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "engine/engine.h"
#include "common/log.h"
#include "migration/migration.h"

int
fc_agent_attach_locked(struct fc_agent *agent, const struct fc_attach_request *req,
                       struct fc_volume **out, char *err, size_t errlen)
{
  return agent->engine->attach(agent, req, out, err, errlen);
}

int
fc_agent_detach_locked(struct fc_agent *agent, const char *id, char *err, size_t errlen)
{
  struct fc_volume *v = fc_agent_find_locked(agent, id);

  if (!v) {
    snprintf(err, errlen, "volume %.80s is not attached to this agent", id);
    return -ENOENT;
  }
  if (fc_migration_for_volume(agent, v) && !v->releasing) {
    snprintf(err, errlen, "volume %s is migrating; finish or abort the migration first",
             id);
    return -EBUSY;
  }
  if (v->p.migration[0] && !v->releasing) {
    snprintf(err, errlen, "volume %s belongs to unfinished live migration %s; "
             "detaching would write back (source) or drop (destination) blocks "
             "whose current copy may be on the other host", id, v->p.migration);
    return -EBUSY;
  }
  return agent->engine->detach(agent, id, err, errlen);
}

void
fc_agent_forget_locked(struct fc_agent *agent, struct fc_volume *v)
{
  for (unsigned i = 0; i < agent->nr_volumes; i++) {
    if (agent->volumes[i] == v) {
      agent->volumes[i] = agent->volumes[--agent->nr_volumes];
      break;
    }
  }
  fc_migration_drop_volume(agent, v);
  fc_volume_free(v);
}

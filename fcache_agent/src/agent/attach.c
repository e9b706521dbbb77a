/* volume-attach and volume-detach: the rules every engine shares, then
 * the engine's own work (engine.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"

int
fc_agent_attach_locked(struct fc_agent *agent, const struct fc_attach_request *req,
                       struct fc_volume **out, char *err, size_t errlen)
{
  return agent->host.ops->attach(&agent->host, req, out, err, errlen);
}

int
fc_agent_detach_locked(struct fc_agent *agent, const char *id, char *err, size_t errlen)
{
  struct fc_volume *v = fc_agent_find_locked(agent, id);

  if (!v) {
    snprintf(err, errlen, "volume %.80s is not attached to this agent", id);
    return -ENOENT;
  }
  if (v->p.migration[0] && !v->releasing) {
    snprintf(err, errlen, "volume %s belongs to unfinished live migration %s; "
             "detaching would write back (source) or drop (destination) blocks "
             "whose current copy may be on the other host", id, v->p.migration);
    return -EBUSY;
  }
  return agent->host.ops->detach(&agent->host, id, err, errlen);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* volume-attach and volume-detach: the rules every engine shares, then
 * the engine's own work (engine.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "common/lockcheck.h"

int
fc_agent_attach_locked(struct fc_agent *agent, const struct fc_attach_request *req,
                       struct fc_volume **out, char *err, size_t errlen)
{
  FC_ASSERT_HELD(&agent->host.lock);
  return agent->host.ops->attach(&agent->host, req, out, err, errlen);
}

int
fc_agent_attach(struct fc_agent *agent, struct fc_attach_request *req,
                char *export_uri, size_t export_len, char *err, size_t errlen)
{
  struct fc_host *host = &agent->host;
  void *opened = NULL;
  struct fc_volume *v;
  int r;

  FC_ASSERT_NOT_HELD(&host->lock);
  if (host->ops->open_origin) {
    bool is_new;

    pthread_mutex_lock(&host->lock);
    is_new = fc_host_attach_is_new_locked(host, req);
    pthread_mutex_unlock(&host->lock);
    /* Otherwise the attach answers without the origin (the same volume
     * again) or refuses (another one): opening it would only contend
     * with the volume that holds it. */
    if (is_new) {
      r = host->ops->open_origin(host, req->volume_id, req->origin, &opened, err,
                                 errlen);
      if (r)
        return r;
      req->opened = &opened;
    }
  }
  pthread_mutex_lock(&host->lock);
  r = fc_agent_attach_locked(agent, req, &v, err, errlen);
  if (r == 0)
    snprintf(export_uri, export_len, "%s", v->export_uri);
  pthread_mutex_unlock(&host->lock);
  req->opened = NULL;
  if (opened)
    host->ops->release_origin(host, opened);
  return r;
}

static int
detach_locked(struct fc_agent *agent, const char *id, bool discard_dirty,
              uint32_t *dropped, char *err, size_t errlen)
{
  FC_ASSERT_HELD(&agent->host.lock);
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
  return agent->host.ops->detach(&agent->host, id, discard_dirty, dropped, err,
                                 errlen);
}

int
fc_agent_detach_locked(struct fc_agent *agent, const char *id, char *err, size_t errlen)
{
  FC_ASSERT_HELD(&agent->host.lock);
  return detach_locked(agent, id, false, NULL, err, errlen);
}

int
fc_agent_discard_locked(struct fc_agent *agent, const char *id, uint32_t *dropped,
                        char *err, size_t errlen)
{
  FC_ASSERT_HELD(&agent->host.lock);
  return detach_locked(agent, id, true, dropped, err, errlen);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Opening and closing the agent: its directories and its engine. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent.h"
#include "common/lockcheck.h"

static int
make_dir(const char *path, mode_t mode, char *err, size_t errlen)
{
  if (mkdir(path, mode) == -1 && errno != EEXIST) {
    int r = -errno;
    snprintf(err, errlen, "cannot create directory %s: %s", path, strerror(-r));
    return r;
  }
  return 0;
}

int
fc_agent_open(const struct fc_config *cfg, const struct fc_engine_ops *ops,
              struct fc_agent **out, char *err, size_t errlen)
{
  struct fc_agent *agent;
  struct fc_host *host;
  int r;

  agent = calloc(1, sizeof *agent);
  if (!agent)
    return -ENOMEM;
  host = &agent->host;
  host->cfg = *cfg;
  host->ops = ops;
  pthread_mutex_init(&host->lock, NULL);
  pthread_mutex_init(&agent->migr_lock, NULL);
  snprintf(host->volumes_dir, sizeof host->volumes_dir, "%s/volumes", cfg->state_dir);
  if ((r = make_dir(cfg->state_dir, 0700, err, errlen)) ||
      (r = make_dir(host->volumes_dir, 0700, err, errlen)) ||
      (r = make_dir(cfg->export_dir, 0755, err, errlen)))
    goto out;
  r = ops->open(host, err, errlen);
  if (r)
    goto out;
  *out = agent;
  return 0;

out:
  pthread_mutex_destroy(&host->lock);
  pthread_mutex_destroy(&agent->migr_lock);
  free(agent);
  return r;
}

int
fc_agent_close(struct fc_agent *agent)
{
  int r = agent->host.ops->close(&agent->host);

  pthread_mutex_destroy(&agent->host.lock);
  pthread_mutex_destroy(&agent->migr_lock);
  free(agent);
  return r;
}

struct fc_volume *
fc_agent_find_locked(struct fc_agent *agent, const char *id)
{
  FC_ASSERT_HELD(&agent->host.lock);
  return fc_host_find_locked(&agent->host, id);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The registry of an agent's migrations: finding one (with a reference),
 * giving it back, making room, the volume-detach rule that consults it,
 * and dropping them all at exit.  Below the files that find migrations
 * in it (the listener, the keys, settling, migr_phases.c): it calls none of
 * them.  Starting and stopping the service -- the listener, the host's
 * forgetting hook -- is migr_phases.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "common/invfilter.h"
#include "common/lockcheck.h"
#include "common/log.h"
#include "migration.h"

struct fc_migration *
fc_migration_find(struct fc_agent *agent, const char *id)
{
  struct fc_migration *m = NULL;

  pthread_mutex_lock(&agent->migr_lock);
  for (unsigned i = 0; i < agent->nr_migrations; i++)
    if (!strcmp(agent->migrations[i]->e.id, id))
      m = agent->migrations[i];
  if (m)
    m->refs++;
  pthread_mutex_unlock(&agent->migr_lock);
  return m;
}

/* Drop one reference, under migr_lock: true when it was the last, and the
 * caller frees m once it has let go of the lock (migration_free joins). */
static bool
unref_locked(struct fc_migration *m)
{
  FC_ASSERT_HELD(&m->agent->migr_lock);
  return --m->refs == 0;
}

void
fc_migration_put(struct fc_migration *m)
{
  struct fc_agent *agent;
  bool last;

  if (!m)
    return;
  agent = m->agent;
  pthread_mutex_lock(&agent->migr_lock);
  last = unref_locked(m);
  pthread_mutex_unlock(&agent->migr_lock);
  if (last)
    fc_migr_free(m);
}

void
fc_migrations_in_progress(struct fc_agent *agent, unsigned out[2])
{
  out[0] = out[1] = 0;
  pthread_mutex_lock(&agent->migr_lock);
  for (unsigned i = 0; i < agent->nr_migrations; i++) {
    struct fc_migration *x = agent->migrations[i];

    /* As fc_migration_for_volume: the state read under migr_lock. */
    if (x->state < FC_MS_COMPLETED)
      out[x->e.role == FC_MIGR_SOURCE ? 0 : 1]++;
  }
  pthread_mutex_unlock(&agent->migr_lock);
}

struct fc_migration *
fc_migration_for_volume(struct fc_agent *agent, const struct fc_volume *v)
{
  struct fc_migration *m = NULL;

  pthread_mutex_lock(&agent->migr_lock);
  for (unsigned i = 0; i < agent->nr_migrations; i++) {
    struct fc_migration *x = agent->migrations[i];
    if (x->e.vol == v && x->state != FC_MS_ABORTED && x->state != FC_MS_FAILED &&
        x->state != FC_MS_SETTLED &&
        !(x->state == FC_MS_COMPLETED && x->e.role == FC_MIGR_DEST))
      m = x;
  }
  if (m)
    m->refs++;
  pthread_mutex_unlock(&agent->migr_lock);
  return m;
}

/* One of the source's sets of blocks (fc_migr_src_record_locked). */
static void
set_free(struct fc_invfilter *set)
{
  if (!set)
    return;
  fc_invfilter_destroy(set);
  free(set);
}

/* Its threads joined, everything it owns freed. */
void
fc_migr_free(struct fc_migration *m)
{
  if (!m)
    return;
  fc_migr_join(m);
  free(m->src.bg);
  free(m->src.fetchq);
  free(m->src.readq);
  free(m->dst.hot);
  free(m->dst.to_ack);
  fc_xfer_key_free(m->key);
  explicit_bzero(m->settle_secret, sizeof m->settle_secret);
  set_free(m->src.fetched_dirty);
  set_free(m->src.served_dirty);
  set_free(m->src.sent_dirty);
  pthread_mutex_destroy(&m->lock);
  pthread_cond_destroy(&m->cond);
  free(m);
}

int
fc_migr_registry_add(struct fc_agent *agent, struct fc_migration *m, char *err, size_t errlen)
{
  struct fc_migration *evicted = NULL;
  int r = 0;

  pthread_mutex_lock(&agent->migr_lock);
  if (agent->nr_migrations >= FC_MAX_MIGRATIONS) {
    /* Forget a finished one to make room.  Whoever still holds a
     * reference to it (a migration-finish in progress, a status) frees it
     * when done; its threads are joined then. */
    for (unsigned i = 0; i < agent->nr_migrations; i++) {
      struct fc_migration *x = agent->migrations[i];
      if (x->state >= FC_MS_COMPLETED) {
        agent->migrations[i] = agent->migrations[--agent->nr_migrations];
        if (unref_locked(x))
          evicted = x;
        break;
      }
    }
  }
  if (agent->nr_migrations >= FC_MAX_MIGRATIONS) {
    snprintf(err, errlen, "too many migrations in progress on this agent "
             "(%d, none of them finished)", FC_MAX_MIGRATIONS);
    r = -EBUSY;
  } else {
    agent->migrations[agent->nr_migrations++] = m;
  }
  pthread_mutex_unlock(&agent->migr_lock);
  fc_migr_free(evicted);
  return r;
}

int
fc_migration_detach_locked(struct fc_agent *agent, const char *id,
                           bool discard_dirty, uint32_t *dropped, char *err,
                           size_t errlen)
{
  FC_ASSERT_HELD(&agent->host.lock);
  struct fc_volume *v = fc_agent_find_locked(agent, id);

  struct fc_migration *m = v && !v->releasing ? fc_migration_for_volume(agent, v) : NULL;

  if (m) {
    fc_migration_put(m);
    snprintf(err, errlen, "volume %s is migrating; finish or abort the migration first",
             id);
    return -EBUSY;
  }
  return discard_dirty ? fc_agent_discard_locked(agent, id, dropped, err, errlen) :
                         fc_agent_detach_locked(agent, id, err, errlen);
}

/* At exit, once the control socket and the listener are closed: nobody
 * else holds a reference any more. */
void
fc_migr_registry_stop_all(struct fc_agent *agent)
{
  pthread_mutex_lock(&agent->migr_lock);
  for (unsigned i = 0; i < agent->nr_migrations; i++) {
    struct fc_migration *m = agent->migrations[i];
    if (m->e.vol && m->e.role == FC_MIGR_DEST)
      agent->host.ops->migr->in_shutdown(&m->e);
    if (unref_locked(m))
      fc_migr_free(m);
    else
      log_error("migration %s of volume %s: still referenced at exit; not freed",
                m->e.id, m->e.volume_id);
  }
  agent->nr_migrations = 0;
  pthread_mutex_unlock(&agent->migr_lock);
}


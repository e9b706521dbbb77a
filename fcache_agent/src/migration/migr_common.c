/* SPDX-License-Identifier: Apache-2.0 */
/* What every part of a migration uses, whichever end and phase: its
 * state's names, failing it, counting it in the agent's totals, naming and
 * prioritising its threads and joining them, keeping its mark on the
 * volume's saved parameters, and what makes a valid migration id.  The
 * bottom of migration/: it calls nothing else of the folder but the
 * transfer stream (xfer_conn.c), so every other file may call it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/lockcheck.h"
#include "common/log.h"
#include "engine/volume.h"
#include "migration.h"

static const char *const state_names[] = {
  "prepared", "connected", "switched", "completed", "failed", "aborted",
  "settled",
};

const char *
fc_migr_state_name(enum fc_migr_state s)
{
  return (unsigned)s <= FC_MS_SETTLED ? state_names[s] : "?";
}

void
fc_migr_thread_setup(const char *name)
{
  pthread_setname_np(pthread_self(), name);
  /* A copy under a rate limit takes only what the limit allows, but on a
   * host whose cores are busy with the VMs and their neighbours a thread
   * at the default weight gets too little of it to keep the rate (the
   * testbed showed copies 4x slower than the link while the VM ran).
   * Root may raise it; otherwise it stays where it is. */
  if (setpriority(PRIO_PROCESS, (id_t)gettid(), FC_MIGR_NICE) == -1)
    log_debug("migration thread %s keeps its priority: %m", name);
}

void
fc_migr_account_locked(struct fc_migration *m)
{
  FC_ASSERT_HELD(&m->lock);
  struct fc_migr_totals *t = &m->agent->migr_totals;
  int role = m->e.role == FC_MIGR_SOURCE ? 0 : 1;
  enum fc_migr_outcome o;

  if (m->accounted)
    return;
  switch (m->state) {
  case FC_MS_COMPLETED: o = FC_MIGR_COMPLETED; break;
  case FC_MS_FAILED: o = FC_MIGR_FAILED; break;
  case FC_MS_ABORTED: o = FC_MIGR_ABORTED; break;
  default: return;
  }
  m->accounted = true;
  atomic_fetch_add(&t->ended[role][o], 1);
  atomic_fetch_add(&t->bytes[role], m->bytes_done);
  if (o == FC_MIGR_COMPLETED) {
    atomic_store(&t->last_duration_ns[role], m->completed_ns - m->started_ns);
    atomic_store(&t->last_downtime_ns[role], m->downtime_ns);
  }
}

void
fc_migr_fail(struct fc_migration *m, const char *fmt, ...)
{
  va_list ap;

  pthread_mutex_lock(&m->lock);
  if (m->state != FC_MS_FAILED && m->state != FC_MS_ABORTED &&
      m->state != FC_MS_COMPLETED) {
    va_start(ap, fmt);
    vsnprintf(m->error, sizeof m->error, fmt, ap);
    va_end(ap);
    m->state = FC_MS_FAILED;
    fc_migr_account_locked(m);
    log_error("migration %s of volume %s (%s): %s", m->e.id, m->e.volume_id,
              m->e.role == FC_MIGR_SOURCE ? "source" : "destination", m->error);
  }
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->lock);
}

bool
fc_migration_id_valid(const char *id)
{
  size_t n = strlen(id);

  if (n == 0 || n > FC_MIGRATION_ID_MAX)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!strchr("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_.", id[i]))
      return false;
  return true;
}

void
fc_migr_join(struct fc_migration *m)
{
  pthread_mutex_lock(&m->lock);
  m->stopping = true;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->lock);
  if (m->conn.fd >= 0)
    fc_xfer_conn_shutdown(&m->conn);
  if (m->rx_running)
    pthread_join(m->rx_thread, NULL);
  /* The destination's switch, where it runs beside the receiver. */
  if (m->dst.switcher_running)
    pthread_join(m->dst.switcher, NULL);
  m->dst.switcher_running = false;
  if (m->worker_running)
    pthread_join(m->worker_thread, NULL);
  m->rx_running = m->worker_running = false;
  if (m->conn.fd >= 0)
    fc_xfer_conn_destroy(&m->conn);
  /* The destination's fetches still in flight end (-ECONNRESET) and
   * their thread with them (migr_dest_remote.c, if one was started). */
  if (m->dst.fetcher_join)
    m->dst.fetcher_join(m);
  /* The destination's queue of blocks awaiting install, if it made one
   * (migr_dest_install.c sets the way to free it with the queue). */
  if (m->dst.inq_free)
    m->dst.inq_free(m);
}

/* Persist (or clear, with tag NULL) the volume's unfinished migration. */
int
fc_migr_mark_volume(struct fc_migration *m, const char *tag)
{
  struct fc_agent *agent = m->agent;
  char err[256];
  int r;

  pthread_mutex_lock(&agent->host.lock);
  if (!m->e.vol) {
    pthread_mutex_unlock(&agent->host.lock);
    return 0;
  }
  if (tag) {
    struct fc_volume_params *p = &m->e.vol->p;

    snprintf(p->migration, sizeof p->migration, "%s:%s", tag, m->e.id);
    pthread_mutex_lock(&m->lock);
    /* Both or neither: a secret is of use only with the peer to use it on. */
    if (m->settle_secret[0] && m->settle_peer[0]) {
      snprintf(p->settle_secret, sizeof p->settle_secret, "%s", m->settle_secret);
      snprintf(p->settle_peer, sizeof p->settle_peer, "%s", m->settle_peer);
    } else {
      explicit_bzero(p->settle_secret, sizeof p->settle_secret);
      p->settle_peer[0] = '\0';
    }
    pthread_mutex_unlock(&m->lock);
  } else {
    m->e.vol->p.migration[0] = '\0';
    explicit_bzero(m->e.vol->p.settle_secret, sizeof m->e.vol->p.settle_secret);
    m->e.vol->p.settle_peer[0] = '\0';
  }
  r = fc_volume_params_save(agent->host.volumes_dir, &m->e.vol->p, err, sizeof err);
  pthread_mutex_unlock(&agent->host.lock);
  if (r)
    log_error("migration %s of volume %s: %s", m->e.id, m->e.volume_id, err);
  return r;
}

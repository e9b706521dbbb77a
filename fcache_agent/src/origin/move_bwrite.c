/* SPDX-License-Identifier: Apache-2.0 */
/* B's writers (move_priv.h): MOVE_B_WRITERS threads that write to B for a
 * caller that has several writes to make there and must not make them one
 * after another.  Each write to a disk costs its own access (the emulated
 * HDD's 7 ms, a real disk's seek) on top of waiting behind whatever else
 * is queued there; written one by one, N writes wait in that queue N
 * times, handed over together they wait in it once.
 *
 * Mirroring hands each duplicate's half on B here while the request
 * writes A itself (move_mirror.c); LR's copier hands the runs of a chunk
 * between the grains the VM already wrote to B (move_copy.c).  The caller
 * keeps the job and its buffer until the job is done. */
#include <errno.h>
#include <stdlib.h>

#include "common/lockcheck.h"
#include "move_priv.h"

static void *
bwriter(void *arg)
{
  struct move_origin *m = arg;

  pthread_mutex_lock(&m->mu);
  for (;;) {
    struct mv_bwrite *job;
    int r;

    while (!m->bw_head && !m->bw_stop)
      pthread_cond_wait(&m->cond, &m->mu);
    if (!m->bw_head)
      break;
    job = m->bw_head;
    m->bw_head = job->next;
    if (!m->bw_head)
      m->bw_tail = NULL;
    pthread_mutex_unlock(&m->mu);
    /* m->b stays while its writes are queued: the requests and the
     * copier that queue them wait for them before the switch or the
     * fallback can take B away. */
    r = fc_origin_pwrite(m->b, job->buf, job->count, job->off, job->fua);
    pthread_mutex_lock(&m->mu);
    job->r = r;
    job->done = true;
    pthread_cond_broadcast(&m->cond);
  }
  pthread_mutex_unlock(&m->mu);
  return NULL;
}

int
mv_bwriters_start(struct move_origin *m)
{
  m->bw_stop = false;
  m->bw_head = m->bw_tail = NULL;
  m->bw_running = 0;
  while (m->bw_running < MOVE_B_WRITERS) {
    int r = pthread_create(&m->bw_threads[m->bw_running], NULL, bwriter, m);

    if (r) {
      mv_bwriters_stop(m);
      return -r;
    }
    m->bw_running++;
  }
  return 0;
}

void
mv_bwriters_stop(struct move_origin *m)
{
  if (!m->bw_running)
    return;
  pthread_mutex_lock(&m->mu);
  m->bw_stop = true;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->mu);
  while (m->bw_running)
    pthread_join(m->bw_threads[--m->bw_running], NULL);
}

void
mv_bwrite_queue_locked(struct move_origin *m, struct mv_bwrite *job)
{
  FC_ASSERT_HELD(&m->mu);
  job->next = NULL;
  job->done = false;
  job->r = 0;
  if (m->bw_tail)
    m->bw_tail->next = job;
  else
    m->bw_head = job;
  m->bw_tail = job;
  pthread_cond_broadcast(&m->cond);
}

int
mv_bwrite_wait_locked(struct move_origin *m, struct mv_bwrite *job)
{
  FC_ASSERT_HELD(&m->mu);
  while (!job->done)
    pthread_cond_wait(&m->cond, &m->mu);
  return job->r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* IO mirroring's duplicate writes (move_priv.h): a VM write to the copied
 * region goes to A and to B at the same time and is acknowledged when
 * both have it, so that it costs the slower of the two writes, not their
 * sum (the paper's synchronous mirroring, §2: "the two write requests are
 * synchronized").  The request writes A itself and hands B's half to one
 * of MIRROR_WORKERS threads; a request that finds them all busy waits in
 * their queue, which is still no longer than writing B after A.  The
 * request's grains stay held (origin_move.c) until both halves are done,
 * so overlapping writes reach both sides in the same order. */
#include <errno.h>
#include <stdlib.h>

#include "move_priv.h"

struct mirror_job {
  struct mirror_job *next;
  const void *buf;              /* the request's, which waits for the job */
  uint32_t count;
  uint64_t off;
  bool fua;
  bool done;
  int r;
};

static void *
mirror_worker(void *arg)
{
  struct move_origin *m = arg;

  pthread_mutex_lock(&m->mu);
  for (;;) {
    struct mirror_job *job;
    int r;

    while (!m->mq_head && !m->mirror_stop)
      pthread_cond_wait(&m->cond, &m->mu);
    if (!m->mq_head)
      break;
    job = m->mq_head;
    m->mq_head = job->next;
    if (!m->mq_head)
      m->mq_tail = NULL;
    pthread_mutex_unlock(&m->mu);
    /* m->b stays while a request holds grains: the switch and the
     * fallback drain them first. */
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
mv_mirror_start(struct move_origin *m)
{
  m->mirror_stop = false;
  m->mq_head = m->mq_tail = NULL;
  m->mirror_running = 0;
  while (m->mirror_running < MIRROR_WORKERS) {
    int r = pthread_create(&m->mirror_threads[m->mirror_running], NULL,
                           mirror_worker, m);

    if (r) {
      mv_mirror_stop(m);
      return -r;
    }
    m->mirror_running++;
  }
  return 0;
}

void
mv_mirror_stop(struct move_origin *m)
{
  if (!m->mirror_running)
    return;
  pthread_mutex_lock(&m->mu);
  m->mirror_stop = true;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->mu);
  while (m->mirror_running)
    pthread_join(m->mirror_threads[--m->mirror_running], NULL);
}

int
mv_mirror_write(struct move_origin *m, const void *buf, uint32_t count, uint64_t off,
                bool fua, int *rb)
{
  struct mirror_job job = {
    .buf = buf, .count = count, .off = off, .fua = fua,
  };
  int ra;

  pthread_mutex_lock(&m->mu);
  if (m->mq_tail)
    m->mq_tail->next = &job;
  else
    m->mq_head = &job;
  m->mq_tail = &job;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->mu);
  ra = fc_origin_pwrite(m->cur, buf, count, off, fua);
  pthread_mutex_lock(&m->mu);
  while (!job.done)
    pthread_cond_wait(&m->cond, &m->mu);
  pthread_mutex_unlock(&m->mu);
  *rb = job.r;
  return ra;
}

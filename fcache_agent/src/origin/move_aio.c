/* SPDX-License-Identifier: Apache-2.0 */
/* AIO (asynchronous IO mirroring): a write to the copied region is sent
 * to both sides, the faster one (by recent write latency) by the request
 * itself and the other by a worker thread, and acknowledged when the
 * request's own half completes.  `pending` counts duplicates with a half
 * not yet written; above aio_threshold a new duplicate first sleeps
 * aio_delay_us at a time, which is what keeps the slower side from
 * falling ever further behind.  The duplicate's grains stay held until
 * both halves are written, so a later write of them reaches both sides in
 * order; a read, which AIO serves from A, waits only for A's half.  A
 * flush waits for pending to reach 0.  Duplicates are logged
 * (move_log.h) because the acknowledging half may be B's: A may lack a
 * write the VM saw acknowledged until the worker writes it, and after a
 * crash only the log has it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "move_priv.h"
#include "common/lockcheck.h"

static void
note_latency(uint64_t *lat, uint64_t ns)
{
  *lat = *lat ? (*lat * 7 + ns) / 8 : ns;
}

bool
mv_aio_b_faster_locked(const struct move_origin *m)
{
  FC_ASSERT_HELD(&m->mu);
  return m->lat_a_ns && m->lat_b_ns && m->lat_b_ns < m->lat_a_ns;
}

/* Under mu: one half ended, on B or on A, written or not. */
static void
half_done_locked(struct move_origin *m, struct aio_job *job, bool on_b, bool written)
{
  FC_ASSERT_HELD(&m->mu);
  if (written) {
    *(on_b ? &job->range.b_settled : &job->range.a_settled) = true;
    pthread_cond_broadcast(&m->cond);
  }
  if (--job->halves)
    return;
  mv_range_release_locked(m, &job->range);
  m->pending--;
  pthread_cond_broadcast(&m->cond);
  free(job);
}

static void *
aio_worker(void *arg)
{
  struct move_origin *m = arg;

  pthread_mutex_lock(&m->mu);
  for (;;) {
    struct aio_job *job;
    uint64_t t;
    int r;

    while (!m->q_head && !m->aio_stop)
      pthread_cond_wait(&m->cond, &m->mu);
    if (!m->q_head)
      break;
    job = m->q_head;
    m->q_head = job->next;
    if (!m->q_head)
      m->q_tail = NULL;
    /* A write that passed a claim reaches B after the copier's copy of
     * the same grains, which may hold what A had before it.  Only that
     * claim: the next one waits for this write (mv_claim_locked). */
    while (job->dst_is_b && job->range.passed_claim && m->claimed &&
           m->claim_seq == job->range.passed_claim && !m->b_error)
      pthread_cond_wait(&m->cond, &m->mu);
    pthread_mutex_unlock(&m->mu);
    t = mv_now_ns();
    r = fc_origin_pwrite(job->dst, job->data, job->count, job->off, false);
    t = mv_now_ns() - t;
    pthread_mutex_lock(&m->mu);
    note_latency(job->dst_is_b ? &m->lat_b_ns : &m->lat_a_ns, t);
    if (r && job->dst_is_b)
      mv_b_failed_locked(m, r);
    else if (r && !m->a_error)
      m->a_error = r;     /* the next flush reports it */
    else if (!r)
      *(job->dst_is_b ? &m->st.b_write : &m->st.a_write) += job->count;
    half_done_locked(m, job, job->dst_is_b, !r);
  }
  pthread_mutex_unlock(&m->mu);
  return NULL;
}

int
mv_aio_start(struct move_origin *m)
{
  int r;

  m->aio_stop = false;
  m->q_head = m->q_tail = NULL;
  r = pthread_create(&m->aio_thread, NULL, aio_worker, m);
  if (r)
    return -r;
  m->aio_running = true;
  return 0;
}

void
mv_aio_stop(struct move_origin *m)
{
  if (!m->aio_running)
    return;
  pthread_mutex_lock(&m->mu);
  m->aio_stop = true;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->mu);
  pthread_join(m->aio_thread, NULL);
  m->aio_running = false;
}

int
mv_aio_write(struct move_origin *m, const void *buf, uint32_t count, uint64_t off,
             bool fua)
{
  struct aio_job *job = malloc(sizeof *job + count);
  struct fc_origin *fast, *a;
  bool fast_is_b;
  uint64_t t, cursor;
  bool claimed;
  int r, rb;

  if (!job)
    return -ENOMEM;
  memcpy(job->data, buf, count);
  job->count = count;
  job->off = off;
  job->next = NULL;
  job->range.lo = off / MOVE_GRAIN;
  job->range.hi = (off + count - 1) / MOVE_GRAIN;
  job->range.reader = job->range.a_settled = job->range.b_settled = false;
  job->range.reads_b = false;
  /* A FUA write is written to both sides before it is acknowledged, so
   * it waits for the claim like any request. */
  job->range.passes_claim = !fua;
  job->range.passed_claim = 0;
  pthread_mutex_lock(&m->mu);
  if (!mv_range_acquire_locked(m, &job->range)) {
    pthread_mutex_unlock(&m->mu);
    free(job);
    return 1;
  }
  m->st.vm_write += count;
  a = m->cur;
  /* The cursor cannot pass these grains while they are held, but for
   * the copier's claim, which this write passed: then the copier may
   * copy A's old data to B, so the write is duplicated like one to the
   * copied region, its half on B after the copy (aio_worker). */
  cursor = m->cursor;
  claimed = mv_claimed_locked(m, &job->range);
  job->range.passed_claim = claimed ? m->claim_seq : 0;
  pthread_mutex_unlock(&m->mu);
  if (job->range.lo < cursor) {
    /* The copied part is logged, every time, in order: the half the VM
     * is acknowledged by may be B's, and a restart must find on A every
     * write A may not have received (grains above the cursor are never
     * logged, so no record is older than a write A got unlogged). */
    uint64_t end = off + count < cursor * MOVE_GRAIN ? off + count : cursor * MOVE_GRAIN;

    r = move_log_append(&m->log, buf, (uint32_t)(end - off), off);
    if (!r && fua)
      r = move_log_sync(&m->log);
    if (r) {
      pthread_mutex_lock(&m->mu);
      mv_range_release_locked(m, &job->range);
      pthread_mutex_unlock(&m->mu);
      free(job);
      return r;
    }
  }
  pthread_mutex_lock(&m->mu);
  if ((job->range.lo >= cursor && !claimed) || fua) {
    /* Not copied yet: A alone (the copier brings it over).  FUA: both,
     * synchronously, since it must be durable when acknowledged. */
    bool both = job->range.lo < cursor;

    pthread_mutex_unlock(&m->mu);
    r = fc_origin_pwrite(a, buf, count, off, fua);
    rb = !r && both ? fc_origin_pwrite(m->b, buf, count, off, fua) : 0;
    pthread_mutex_lock(&m->mu);
    if (!r)
      m->st.a_write += count;
    if (!r && both && !rb)
      m->st.b_write += count;
    if (rb) {
      mv_b_failed_locked(m, rb);
      r = 1;
    }
    mv_range_release_locked(m, &job->range);
    free(job);
    goto out;
  }
  while (m->pending >= (m->aio_draining && AIO_DRAIN_PENDING < m->p.aio_threshold ?
                        AIO_DRAIN_PENDING : m->p.aio_threshold) &&
         m->moving && !m->b_error) {
    if (!m->aio_draining)
      m->st.aio_delay_us += m->p.aio_delay_us;
    pthread_mutex_unlock(&m->mu);
    usleep(m->p.aio_delay_us);
    pthread_mutex_lock(&m->mu);
  }
  /* Across the cursor A is written first: its part above the cursor is
   * not logged. */
  fast_is_b = job->range.hi < cursor && mv_aio_b_faster_locked(m);
  fast = fast_is_b ? m->b : a;
  job->dst = fast_is_b ? a : m->b;
  job->dst_is_b = !fast_is_b;
  job->halves = 2;
  m->pending++;
  if (m->q_tail)
    m->q_tail->next = job;
  else
    m->q_head = job;
  m->q_tail = job;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->mu);
  t = mv_now_ns();
  r = fc_origin_pwrite(fast, buf, count, off, false);
  t = mv_now_ns() - t;
  pthread_mutex_lock(&m->mu);
  note_latency(fast_is_b ? &m->lat_b_ns : &m->lat_a_ns, t);
  if (!r)
    *(fast_is_b ? &m->st.b_write : &m->st.a_write) += count;
  if (r && fast_is_b) {
    mv_b_failed_locked(m, r);
    r = 1;
  }
  half_done_locked(m, job, fast_is_b, !r);
out:
  if (r == 1)
    /* B failed: retried on A once the copier has fallen back. */
    while (m->moving)
      pthread_cond_wait(&m->cond, &m->mu);
  pthread_mutex_unlock(&m->mu);
  return r;
}

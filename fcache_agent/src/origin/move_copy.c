/* SPDX-License-Identifier: Apache-2.0 */
/* The copier of a move: the first pass over the volume, DBT's merge
 * rounds (dbt's until the dirty set is stable, dbt_capped's until it fits
 * its pause), the switch to B with requests held, and the fallback to A
 * (B failed, the move was aborted, dbt_capped did not converge).  One
 * thread per running move. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "move_priv.h"
#include "common/lockcheck.h"

static uint64_t
grain_end(const struct move_origin *m, uint64_t g)
{
  uint64_t e = (g + 1) * MOVE_GRAIN;

  return e < m->base.size ? e : m->base.size;
}

/* A run of grains [g, e] the copier writes to B. */
struct copy_run {
  uint64_t g, e;
};

/* At most this many runs in a chunk: grains B lacks, between grains B
 * holds, one run for every second grain at worst. */
#define MOVE_MAX_RUNS (MOVE_CHUNK / MOVE_GRAIN / 2 + 1)

/* Under mu: the runs of grains [lo, hi] that B lacks, all of them but
 * with skip_b (LR) those the VM wrote to B (the bitmap), which are
 * skipped, the paper's "the copy process could skip the data blocks that
 * are recorded in the bitmap".  [lo, hi] spans at most MOVE_CHUNK. */
static unsigned
runs_locked(struct move_origin *m, uint64_t lo, uint64_t hi, bool skip_b,
            struct copy_run *runs)
{
  unsigned n = 0;

  FC_ASSERT_HELD(&m->mu);
  for (uint64_t g = lo; g <= hi; g++) {
    if (skip_b && move_bitmap_test(&m->bm, g))
      continue;
    if (n && runs[n - 1].e + 1 == g)
      runs[n - 1].e = g;
    else
      runs[n++] = (struct copy_run){ .g = g, .e = g };
  }
  return n;
}

/* Copy grains [lo, hi] (at most MOVE_CHUNK) from A to B, grains held
 * (LR: but those B already holds).  *wrote: bytes written to B.
 *
 * A is read once, from the first grain to copy to the last, the grains B
 * holds between them included and dropped: a request costs a disk access
 * and a place in its queue, a grain read for nothing 4 KiB of its
 * bandwidth.  B gets each run, and no grain the VM wrote (LR writes
 * nothing twice), the runs written together by B's writers.  Reading and
 * writing run by run, one after the other, made a chunk the VM had
 * written to in 20 places cost 80 waits in the media's queues instead of
 * 2: under 16 requests in flight LR's copy went so slowly that no move
 * of 64 MiB ended within 20 s, and a VM write to the chunk being copied
 * waited for all of it (issue 35). */
static int
copy_grains(struct move_origin *m, char *buf, uint64_t lo, uint64_t hi, bool skip_b,
            uint64_t *wrote)
{
  struct copy_run runs[MOVE_MAX_RUNS];
  struct mv_bwrite jobs[MOVE_MAX_RUNS];
  uint64_t start, stop, bytes = 0;
  unsigned n;
  int r = 0;

  *wrote = 0;
  /* The bitmap of held grains does not change: the VM's writes to them
   * wait for the claim, and those in flight ended before it. */
  pthread_mutex_lock(&m->mu);
  n = runs_locked(m, lo, hi, skip_b, runs);
  pthread_mutex_unlock(&m->mu);
  if (!n)
    return 0;
  start = runs[0].g * MOVE_GRAIN;
  stop = grain_end(m, runs[n - 1].e);
  r = fc_origin_pread(m->cur, buf, (uint32_t)(stop - start), start);
  if (r)
    return r;
  pthread_mutex_lock(&m->mu);
  m->st.a_read += stop - start;
  pthread_mutex_unlock(&m->mu);
  if (n == 1) {
    r = fc_origin_pwrite(m->b, buf, (uint32_t)(stop - start), start, false);
    bytes = stop - start;
  } else {
    pthread_mutex_lock(&m->mu);
    for (unsigned i = 0; i < n; i++) {
      uint64_t off = runs[i].g * MOVE_GRAIN;

      jobs[i] = (struct mv_bwrite){
        .buf = buf + (off - start),
        .count = (uint32_t)(grain_end(m, runs[i].e) - off),
        .off = off,
      };
      mv_bwrite_queue_locked(m, &jobs[i]);
    }
    /* Every job is waited for, failed or not: they use buf. */
    for (unsigned i = 0; i < n; i++) {
      int rj = mv_bwrite_wait_locked(m, &jobs[i]);

      if (rj && !r)
        r = rj;
      if (!rj)
        bytes += jobs[i].count;
    }
    pthread_mutex_unlock(&m->mu);
  }
  pthread_mutex_lock(&m->mu);
  if (r)
    mv_b_failed_locked(m, r);
  m->st.b_write += bytes;
  pthread_mutex_unlock(&m->mu);
  *wrote = bytes;
  return r;
}

static bool
interrupted_locked(const struct move_origin *m)
{
  FC_ASSERT_HELD(&m->mu);
  return m->stop || m->b_error;
}

/* due_ns on mv_now_ns's clock as a CLOCK_REALTIME deadline, which
 * m->cond waits on. */
static void
realtime_deadline(uint64_t due_ns, struct timespec *ts)
{
  uint64_t now = mv_now_ns(), left = due_ns > now ? due_ns - now : 0;

  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_sec += (time_t)(left / 1000000000ull);
  ts->tv_nsec += (long)(left % 1000000000ull);
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

/* Sleep until due_ns (CLOCK_MONOTONIC, mv_now_ns), waking early for an
 * abort or a failure of B. */
static void
wait_until(struct move_origin *m, uint64_t due_ns)
{
  struct timespec ts;

  if (due_ns <= mv_now_ns())
    return;
  realtime_deadline(due_ns, &ts);
  pthread_mutex_lock(&m->mu);
  while (!interrupted_locked(m) && mv_now_ns() < due_ns)
    if (pthread_cond_timedwait(&m->cond, &m->mu, &ts) == ETIMEDOUT)
      break;
  pthread_mutex_unlock(&m->mu);
}

/* AIO puts the VM first.  Its duplicates and the copier share the slower
 * side, and once more than aio_threshold duplicates wait there the VM's
 * writes are delayed; a copier that never pauses keeps the slower side
 * busy with its chunks, one duplicate between two of them.  So before a
 * chunk the copier lets the queue fall to the few the switch drains with
 * requests held (AIO_DRAIN_PENDING), waiting at most as long as its last
 * chunk took: the copy keeps at least half of the slower side's time and
 * always ends.  The slower side is never idle for it (the duplicates are
 * its work meanwhile), and the queue stays short to the end: a queue left
 * at half the threshold made the switch's drain hold the VM's writes for
 * 150 ms (100 duplicates of an HDD's 2 ms, SSD to HDD). */
static void
aio_yield(struct move_origin *m, uint64_t last_chunk_ns)
{
  unsigned low = m->p.aio_threshold < AIO_DRAIN_PENDING ? m->p.aio_threshold
                                                        : AIO_DRAIN_PENDING;
  uint64_t due = mv_now_ns() + last_chunk_ns;
  struct timespec ts;

  realtime_deadline(due, &ts);
  pthread_mutex_lock(&m->mu);
  while (m->pending >= low && !interrupted_locked(m) && mv_now_ns() < due)
    if (pthread_cond_timedwait(&m->cond, &m->mu, &ts) == ETIMEDOUT)
      break;
  pthread_mutex_unlock(&m->mu);
}

/* Keep the copy at rate_limit_bps. */
static void
rate_wait(struct move_origin *m, uint64_t copied)
{
  if (!m->p.rate_limit_bps)
    return;
  wait_until(m, m->start_ns + (uint64_t)((double)copied * 1e9 /
                                          (double)m->p.rate_limit_bps));
}

static int
first_pass(struct move_origin *m, char *buf)
{
  const uint64_t per = MOVE_CHUNK / MOVE_GRAIN;
  uint64_t total = 0, chunk_ns = 0;

  for (uint64_t c = 0; c < m->nr_grains; c += per) {
    uint64_t hi = c + per < m->nr_grains ? c + per - 1 : m->nr_grains - 1, wrote, t;
    int r;

    if (m->p.scheme == FC_MOVE_AIO && chunk_ns)
      aio_yield(m, chunk_ns);
    pthread_mutex_lock(&m->mu);
    if (interrupted_locked(m)) {
      pthread_mutex_unlock(&m->mu);
      return -ECANCELED;
    }
    mv_claim_locked(m, c, hi);
    pthread_mutex_unlock(&m->mu);
    t = mv_now_ns();
    r = copy_grains(m, buf, c, hi, m->p.scheme == FC_MOVE_LR, &wrote);
    chunk_ns = mv_now_ns() - t;
    pthread_mutex_lock(&m->mu);
    if (!r) {
      m->cursor = hi + 1;
      m->st.bytes_copied = grain_end(m, hi);
      m->first_copy_bytes += wrote;
    }
    mv_unclaim_locked(m);
    pthread_mutex_unlock(&m->mu);
    if (r)
      return r;
    total += wrote;
    rate_wait(m, total);
  }
  return 0;
}

/* One pass over the dirty grains: each run is cleared and copied with
 * its grains held, so a write after it sets its bits again.  *busy_ns:
 * time spent copying, without the rate limit's waits.  With a deadline
 * (requests held for dbt_capped's last round): -EAGAIN once it passes
 * with grains still dirty, what was copied staying copied.  A held round
 * ends early only for an abort: dbt's may take seconds. */
static int
merge_round(struct move_origin *m, char *buf, bool held, uint64_t deadline_ns,
            uint64_t *copied, uint64_t *busy_ns)
{
  const uint64_t per = MOVE_CHUNK / MOVE_GRAIN;
  uint64_t g = 0;

  for (;;) {
    uint64_t e, wrote, t;
    int r;

    pthread_mutex_lock(&m->mu);
    if (held ? m->stop : interrupted_locked(m)) {
      pthread_mutex_unlock(&m->mu);
      return -ECANCELED;
    }
    g = move_bitmap_next(&m->bm, g);
    if (g >= m->nr_grains) {
      pthread_mutex_unlock(&m->mu);
      return 0;
    }
    if (deadline_ns && mv_now_ns() >= deadline_ns) {
      pthread_mutex_unlock(&m->mu);
      return -EAGAIN;
    }
    for (e = g; e + 1 < m->nr_grains && e + 1 - g < per &&
         move_bitmap_test(&m->bm, e + 1); e++)
      ;
    if (!held)
      mv_claim_locked(m, g, e);
    for (uint64_t i = g; i <= e; i++)
      move_bitmap_clear(&m->bm, i);
    pthread_mutex_unlock(&m->mu);
    t = mv_now_ns();
    r = copy_grains(m, buf, g, e, false, &wrote);
    *busy_ns += mv_now_ns() - t;
    pthread_mutex_lock(&m->mu);
    if (r)   /* copied again by whoever tries next */
      for (uint64_t i = g; i <= e; i++)
        move_bitmap_set(&m->bm, i);
    if (!held)
      mv_unclaim_locked(m);
    pthread_mutex_unlock(&m->mu);
    if (r)
      return r;
    *copied += wrote;
    if (!held)
      rate_wait(m, m->first_copy_bytes + *copied);
    g = e + 1;
  }
}

/* How long the last round would take with requests held, at the pace
 * of the last such round: with the VM's requests on the same disks, a
 * round while the VM runs is no measure of it (an HDD-like source the VM
 * keeps busy copies scattered grains several times slower).  UINT64_MAX
 * before any held round has measured it. */
static uint64_t
pause_estimate_ms(uint64_t dirty, uint64_t held_bytes, uint64_t held_ns)
{
  double ms;

  if (!dirty)
    return 0;
  if (!held_bytes)
    return UINT64_MAX;
  ms = (double)dirty * (double)held_ns / (double)held_bytes / 1e6;
  return ms >= 1e15 ? UINT64_MAX : (uint64_t)ms + 1;
}

/* Rounds in a row that shrank the dirty set by less than a tenth before
 * DBT calls it: the VM dirties about as fast as the copy cleans (or
 * faster), and more rounds only make the move longer. */
#define MOVE_STALLED_ROUNDS 3u

/* DBT as the paper runs it (§2, "incremental DBT"): merge rounds while
 * the VM runs until the dirty set is empty or stable -- MOVE_STALLED_ROUNDS
 * rounds in a row that shrank it by less than a tenth -- or max_rounds
 * have run; then switch_to_b copies what is left with every request held,
 * however long that takes.  A VM that dirties grains as fast as B takes
 * their copies never shrinks the set, and its pause is the copy of all of
 * it to B: the downtime the paper measured for DBT towards a slower disk
 * (Table 3, SSD to HDD: 4 s), which dbt_capped exists to avoid. */
static int
merge_rounds_until_stable(struct move_origin *m, char *buf)
{
  uint64_t copied = 0, last_dirty = 0;
  unsigned stalled = 0;

  for (;;) {
    uint64_t dirty, busy_ns = 0;
    unsigned rounds;
    int r;

    pthread_mutex_lock(&m->mu);
    dirty = m->bm.set * MOVE_GRAIN;
    m->st.dirty_bytes = dirty;
    rounds = m->st.rounds;
    pthread_mutex_unlock(&m->mu);
    /* Dirty bytes are at most a volume's size: times 10 fits. */
    stalled = rounds && dirty * 10 > last_dirty * 9 ? stalled + 1 : 0;
    last_dirty = dirty;
    if (!dirty || stalled >= MOVE_STALLED_ROUNDS || rounds >= m->p.max_rounds)
      return 0;
    r = merge_round(m, buf, false, 0, &copied, &busy_ns);
    if (r)
      return r;
    pthread_mutex_lock(&m->mu);
    m->st.rounds++;
    pthread_mutex_unlock(&m->mu);
  }
}

/* dbt_capped: merge rounds while the VM runs until what is left is small enough
 * for the pause: at most converge_bytes, and expected to copy within
 * downtime_ms (tried at once while no held round has measured the pace:
 * the held round stops at downtime_ms anyway).  Gives up after
 * max_rounds, or sooner once the rounds stop shrinking the dirty set. */
static int
merge_rounds(struct move_origin *m, char *buf, char *why, size_t whylen)
{
  uint64_t copied = 0, last_dirty = m->last_dirty;
  unsigned stalled = m->stalled_rounds;

  for (;;) {
    uint64_t dirty, est, busy_ns = 0;
    unsigned rounds;
    int r;

    pthread_mutex_lock(&m->mu);
    dirty = m->bm.set * MOVE_GRAIN;
    est = pause_estimate_ms(dirty, m->held_bytes, m->held_ns);
    m->st.dirty_bytes = dirty;
    m->st.pause_estimate_ms = est == UINT64_MAX ? 0 : est;
    rounds = m->st.rounds;
    pthread_mutex_unlock(&m->mu);
    /* Dirty bytes are at most a volume's size: times 10 fits. */
    stalled = rounds && dirty * 10 > last_dirty * 9 ? stalled + 1 : 0;
    m->stalled_rounds = stalled;
    m->last_dirty = last_dirty = dirty;
    if (dirty <= m->p.converge_bytes &&
        (!m->p.downtime_ms || est == UINT64_MAX || est <= m->p.downtime_ms))
      return 0;
    if (rounds >= m->p.max_rounds || stalled >= MOVE_STALLED_ROUNDS) {
      char pause[48] = "";

      if (est != UINT64_MAX)
        snprintf(pause, sizeof pause, " (a %llu ms pause)",
                 (unsigned long long)est);
      snprintf(why, whylen, "dbt_capped did not converge: %llu dirty bytes%s after %u merge "
               "rounds%s (converge_bytes %llu, downtime_ms %u); the volume stays on "
               "the source", (unsigned long long)dirty, pause, rounds,
               stalled >= MOVE_STALLED_ROUNDS ? ", the last ones shrinking it by less "
               "than a tenth" : "",
               (unsigned long long)m->p.converge_bytes, m->p.downtime_ms);
      return -ETIMEDOUT;
    }
    r = merge_round(m, buf, false, 0, &copied, &busy_ns);
    if (r)
      return r;
    pthread_mutex_lock(&m->mu);
    m->st.rounds++;
    pthread_mutex_unlock(&m->mu);
  }
}

/* AIO: the switch must wait for every duplicate B has not written yet,
 * with requests held; on a slow B a full queue is aio_threshold writes
 * of it.  So the queue is drained first with requests flowing.  As long
 * as it does not grow (to twice where it started: B keeps up with the
 * VM's duplicates) nothing is held, however long it hovers before it
 * touches AIO_SWITCH_PENDING: holding the VM's new duplicates until the
 * queue is down to a few cost every writer a stall as long as the queue
 * (35 to 65 ms SSD to HDD), and a B busy near its limit (an HDD taking
 * 480 duplicates a second of a VM's 400) lets the queue wander for
 * longer than the half second without a new low this drain used to
 * allow.  AIO is the scheme for gamma near 0, where a longer move costs
 * nothing.  Only when the queue grows, or after AIO_DRAIN_FREE_NS, are
 * new duplicates kept to AIO_DRAIN_PENDING, which always converges.  The
 * switch then waits for those few of B's writes.
 * When the duplicates go to A (B is the faster side), A also serves
 * every read of the VM and its queue does not drain on its own: waiting
 * for it only made the move longer (HDD to SSD, HDD to HDD). */
static void
aio_drain(struct move_origin *m)
{
  uint64_t due = mv_now_ns() + AIO_DRAIN_FREE_NS;
  unsigned ceiling;
  struct timespec ts;
  bool dups_to_b;

  realtime_deadline(due, &ts);
  pthread_mutex_lock(&m->mu);
  ceiling = 2 * (m->pending > AIO_DRAIN_PENDING ? m->pending : AIO_DRAIN_PENDING);
  dups_to_b = !mv_aio_b_faster_locked(m);
  /* Every change of pending, and an abort or B's failure, broadcasts. */
  while (dups_to_b && m->pending > AIO_SWITCH_PENDING && m->pending <= ceiling &&
         !interrupted_locked(m) && mv_now_ns() < due)
    if (pthread_cond_timedwait(&m->cond, &m->mu, &ts) == ETIMEDOUT)
      break;
  m->aio_draining = true;
  while (m->pending > AIO_DRAIN_PENDING && !interrupted_locked(m))
    pthread_cond_wait(&m->cond, &m->mu);
  pthread_mutex_unlock(&m->mu);
}

static void
hold_requests(struct move_origin *m)
{
  pthread_mutex_lock(&m->mu);
  m->paused = true;
  mv_drain_locked(m);
  pthread_mutex_unlock(&m->mu);
}

/* Back to A, requests held: for LR and SLR, A gets what only B had from
 * the log (not from B, which may be what failed). */
static void
fall_back(struct move_origin *m, uint64_t t0, enum fc_move_state state, const char *why)
{
  struct fc_origin *b;
  int matches = 0, r = 0;

  /* AIO: once its duplicates are drained A has them all; its log is
   * for a crash. */
  if (m->logging && m->p.scheme != FC_MOVE_AIO) {
    r = move_log_sync(&m->log);
    if (!r) {
      r = move_log_replay(m->log_path, m->a_uri, m->cur, &matches, NULL);
      r = r < 0 ? r : 0;
    }
  }
  pthread_mutex_lock(&m->mu);
  m->moving = false;
  b = m->b;
  m->b = NULL;
  m->st.state = state;
  if (r)
    snprintf(m->st.error, sizeof m->st.error, "%.120s; and replaying the recovery "
             "log to the source failed (%s): it is kept, replayed at the next start",
             why, strerror(-r));
  else
    snprintf(m->st.error, sizeof m->st.error, "%s", why);
  m->st.downtime_us = (mv_now_ns() - t0) / 1000;
  m->st.elapsed_ms = (mv_now_ns() - m->start_ns) / 1000000;
  m->st.dirty_bytes = 0;
  m->paused = false;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->mu);
  mv_aio_stop(m);
  mv_bwriters_stop(m);
  fc_origin_close(b);
  if (m->logging) {
    move_log_close(&m->log);
    if (!r)
      unlink(m->log_path);
    m->logging = false;
  }
}

/* Requests held: B holds all of the volume once DBT's last dirty grains
 * are copied; make it durable, let the owner commit, route to B.
 * -EAGAIN: dbt_capped's last round reached downtime_ms first; its pace is
 * kept for the next estimate and the caller lets requests go.  dbt's
 * last round has no deadline. */
static int
switch_to_b(struct move_origin *m, char *buf, uint64_t t0, char *why, size_t whylen)
{
  struct fc_origin *a;
  uint64_t copied = 0, busy_ns = 0;
  bool stopped;
  int r = 0;

  if (mv_scheme_is_dbt(m->p.scheme)) {
    bool capped = m->p.scheme == FC_MOVE_DBT_CAPPED;

    r = merge_round(m, buf, true,
                    capped && m->p.downtime_ms ?
                    t0 + m->p.downtime_ms * 1000000ull : 0, &copied, &busy_ns);
    if (copied) {
      m->held_bytes = copied;
      m->held_ns = busy_ns;
    }
    if (r == -EAGAIN)
      return r;
  }
  pthread_mutex_lock(&m->mu);
  stopped = m->stop;
  pthread_mutex_unlock(&m->mu);
  /* An abort says so itself (mv_copier), also when it cancelled B's
   * writes under a long dbt pause. */
  if (!r && (r = fc_origin_flush(m->b)) && !stopped)
    snprintf(why, whylen, "flushing the destination failed: %s", strerror(-r));
  else if (r && r != -ECANCELED && !stopped)
    snprintf(why, whylen, "the last merge failed: %s", strerror(-r));
  while (!r && (r = m->p.commit ? m->p.commit(m->p.ctx) : 0) == -EAGAIN) {
    pthread_mutex_lock(&m->mu);
    r = m->stop ? -ECANCELED : -EAGAIN;
    pthread_mutex_unlock(&m->mu);
    if (r == -ECANCELED)
      break;
    r = 0;
    usleep(1000);
  }
  if (r) {
    if (!why[0] && r != -ECANCELED && !stopped)
      snprintf(why, whylen, "making the destination the volume's origin failed: %s",
               strerror(-r));
    return r;
  }
  pthread_mutex_lock(&m->mu);
  m->moving = false;
  a = m->cur;
  m->cur = m->b;
  m->b = NULL;
  m->st.state = FC_MOVE_DONE;
  m->st.dirty_bytes = 0;
  m->st.bytes_copied = m->st.bytes_total;
  m->st.downtime_us = (mv_now_ns() - t0) / 1000;
  m->st.elapsed_ms = (mv_now_ns() - m->start_ns) / 1000000;
  m->paused = false;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->mu);
  mv_aio_stop(m);
  mv_bwriters_stop(m);
  /* Nobody uses A any more: requests held for the switch went to B. */
  fc_origin_close(a);
  if (m->logging) {
    /* The owner's commit made B the origin: the log is of no use now. */
    move_log_close(&m->log);
    unlink(m->log_path);
    m->logging = false;
  }
  return 0;
}

void *
mv_copier(void *arg)
{
  struct move_origin *m = arg;
  char why[256] = "";
  char *buf = malloc(MOVE_CHUNK);
  uint64_t t0;
  int r;

  r = buf ? first_pass(m, buf) : -ENOMEM;
  for (;;) {
    if (!r && m->p.scheme == FC_MOVE_DBT)
      r = merge_rounds_until_stable(m, buf);
    if (!r && m->p.scheme == FC_MOVE_DBT_CAPPED)
      r = merge_rounds(m, buf, why, sizeof why);
    if (!r && m->p.scheme == FC_MOVE_AIO)
      aio_drain(m);
    if (!r) {
      pthread_mutex_lock(&m->mu);
      m->st.state = FC_MOVE_SWITCHING;
      pthread_mutex_unlock(&m->mu);
    }
    t0 = mv_now_ns();
    hold_requests(m);
    if (!r) {
      pthread_mutex_lock(&m->mu);
      r = m->stop ? -ECANCELED : m->b_error;
      pthread_mutex_unlock(&m->mu);
    }
    if (!r)
      r = switch_to_b(m, buf, t0, why, sizeof why);
    if (!r)
      goto out;
    if (r != -EAGAIN)
      break;
    /* dbt_capped's last round ran out of downtime_ms: the VM goes on, and so
     * do the rounds, now knowing how fast a held round copies.  Not
     * paused again for as long, so that a VM never sees two pauses
     * back to back. */
    pthread_mutex_lock(&m->mu);
    m->st.state = FC_MOVE_COPYING;
    m->st.rounds++;
    m->st.held_rounds_cut++;
    m->paused = false;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->mu);
    wait_until(m, mv_now_ns() + m->p.downtime_ms * 1000000ull);
    r = 0;
  }
  pthread_mutex_lock(&m->mu);
  if (m->stop && !why[0])
    snprintf(why, sizeof why, "aborted; the volume stays on the source");
  else if (m->b_error && !why[0])
    snprintf(why, sizeof why, "the destination failed (%s); the volume stays "
             "on the source", strerror(-m->b_error));
  else if (!why[0])
    snprintf(why, sizeof why, "copying failed (%s); the volume stays on the "
             "source", strerror(r ? -r : EIO));
  r = m->stop ? 1 : 0;
  pthread_mutex_unlock(&m->mu);
  fall_back(m, t0, r ? FC_MOVE_ABORTED : FC_MOVE_FAILED, why);
out:
  free(buf);
  return NULL;
}

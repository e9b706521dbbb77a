/* SPDX-License-Identifier: Apache-2.0 */
/* Changing a serving cache's write policy (volume-set), with its VM's I/O
 * going on and nothing lost.
 *
 * Where the policy is read.  A write reads uc->p.write_policy once, under
 * the stripes of its blocks, and keeps them until it is answered; a flush
 * reads it under uc->lock.  The change writes it holding every stripe and
 * uc->lock, so each request sees one policy from start to end, and when
 * the change has its stripes no request under the old policy is still in
 * flight -- except a write around the cache (read_only), which lets its
 * stripes go while the origin writes (ucache_write.c): those are counted
 * in writes_around, and the change waits for them.
 *
 * Leaving write_back, every dirty block must be at the origin, and no new
 * one may appear, before the change reports success.  The order:
 *
 *   1. The write-back thread stops (its passes would race ours for the
 *      same blocks, harmlessly but confusingly), and passes run while the
 *      VM keeps writing, as write_back, until few dirty blocks are left.
 *      If the VM dirties blocks faster than they go out, each pass holds
 *      its writes and lets them through after (converge()).  This is the
 *      long part; the VM's writes wait one pass at most.
 *   2. New writes, trims and zeroes are held at their start, before they
 *      take a stripe (uc_pause_gate); reads go on.  Writes that passed the
 *      gate already may still add dirty blocks: they are finite.
 *   3. Passes write back what is left, then the origin is flushed and the
 *      clean records synced (so a crash after the switch does not bring
 *      back "dirty" blocks that a write_through volume would never write
 *      back).
 *   4. Holding every stripe: if a write that passed the gate before step 2
 *      left a dirty block meanwhile, back to 3 (it cannot happen again:
 *      the gate is closed and that write has ended); else the policy
 *      changes, with nr_dirty 0 and no write in flight.
 *   5. The gate opens.  Every write from now on reads the new policy, and
 *      a write_through or read_only write never makes a block dirty.
 *
 * If the origin fails any write-back or flush, the gate opens with the
 * old policy still in place and the write-back thread running again: the
 * blocks written back are clean (the origin has them), the others are
 * still dirty, and nothing was lost.
 *
 * Entering write_back needs no flush: the write-back thread starts (it
 * finds nothing dirty yet), then the policy changes under every stripe.
 */
#include <errno.h>
#include <stdatomic.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "ucache_priv.h"

/* Blocks per write-back pass (the thread's batch). */
#define POLICY_PASS_BLOCKS 256u
/* Step 1 stops here: what is left is written back with the VM's writes
 * held, a pass or two at most. */
#define POLICY_PAUSE_DIRTY 256u
/* Step 1 gives up gaining on the VM after this many passes in a row
 * that did not bring the dirty count to a new low. */
#define POLICY_STALL_PASSES 16u
/* Between two passes that hold the VM's writes, this long for the held
 * ones to go through. */
#define POLICY_GAP_NS 1000000L
/* Passes that find nothing they may write back (every dirty block is in
 * a request's hands) before the change gives up, 1 ms apart. */
#define POLICY_IDLE_TRIES 2000u

void
uc_pause_gate(struct fc_ucache *uc)
{
  if (!atomic_load(&uc->paused_on))
    return;
  pthread_mutex_lock(&uc->lock);
  while (uc->paused)
    pthread_cond_wait(&uc->pause_cond, &uc->lock);
  pthread_mutex_unlock(&uc->lock);
}

static void
set_paused(struct fc_ucache *uc, bool paused)
{
  pthread_mutex_lock(&uc->lock);
  uc->paused = paused;
  atomic_store(&uc->paused_on, paused);
  if (!paused)
    pthread_cond_broadcast(&uc->pause_cond);
  pthread_mutex_unlock(&uc->lock);
}

static uint32_t
dirty_now(struct fc_ucache *uc)
{
  uint32_t n;

  pthread_mutex_lock(&uc->lock);
  n = uc->nr_dirty;
  pthread_mutex_unlock(&uc->lock);
  return n;
}

/* One step-1 pass: *left the dirty count after it, *stalled reset on a
 * new low, counted up otherwise. */
static int
converge_pass(struct fc_ucache *uc, uint32_t *written, uint32_t *left,
              uint32_t *lowest, unsigned *stalled)
{
  uint32_t done = 0;
  int r = uc_writeback_pass(uc, POLICY_PASS_BLOCKS, &done);

  *written += done;
  if (r)
    return r;
  *left = dirty_now(uc);
  if (done && *left < *lowest) {
    *lowest = *left;
    *stalled = 0;
  } else {
    (*stalled)++;
  }
  return 0;
}

/* Step 1: write back while the VM writes on, until at most
 * POLICY_PAUSE_DIRTY blocks are dirty.  First freely; once the passes
 * stop gaining on the VM (POLICY_STALL_PASSES in a row without a new
 * lowest dirty count) each pass holds the VM's writes, and the writes
 * held go through between passes: a write waits one pass at most, and
 * between two passes the VM can dirty only what its queue holds, fewer
 * than a pass writes back.  Without this a VM that dirties blocks as
 * fast as they go out would leave them all for step 3, and its writes
 * would wait for all of them.  If even that stalls, step 2 holds it. */
static int
converge(struct fc_ucache *uc, uint32_t *written)
{
  uint32_t left = dirty_now(uc), lowest = left;
  unsigned stalled = 0;
  int r = 0;

  while (!r && left > POLICY_PAUSE_DIRTY && stalled < POLICY_STALL_PASSES)
    r = converge_pass(uc, written, &left, &lowest, &stalled);
  stalled = 0;
  while (!r && left > POLICY_PAUSE_DIRTY && stalled < POLICY_STALL_PASSES) {
    set_paused(uc, true);
    r = converge_pass(uc, written, &left, &lowest, &stalled);
    set_paused(uc, false);
    /* The gap the held writes go through in. */
    nanosleep(&(struct timespec){ 0, POLICY_GAP_NS }, NULL);
  }
  return r;
}

/* Step 3, writes held: every dirty block to the origin, the origin
 * flushed, the records synced. */
static int
flush_all(struct fc_ucache *uc, uint32_t *written)
{
  unsigned idle = 0;
  int r;

  while (dirty_now(uc)) {
    uint32_t done = 0;

    r = uc_writeback_pass(uc, POLICY_PASS_BLOCKS, &done);
    *written += done;
    if (r)
      return r;
    if (done) {
      idle = 0;
    } else {
      /* The dirty blocks left are in a read's hands (BUSY): it ends. */
      if (++idle > POLICY_IDLE_TRIES)
        return -EAGAIN;
      nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
    }
  }
  r = fc_origin_flush(uc->origin);
  if (!r)
    r = fc_md_sync(uc->md);
  return r;
}

/* Holding every stripe, then uc->lock: switch to policy to, unless
 * need_clean and a dirty block is left.  True when switched. */
static bool
switch_policy(struct fc_ucache *uc, enum fc_write_policy to, bool need_clean)
{
  struct stripe_set all;
  bool ok;

  uc_lock_stripes_to_read(uc, 0, FC_STRIPES - 1, &all);
  pthread_mutex_lock(&uc->lock);
  ok = !need_clean || uc->nr_dirty == 0;
  if (ok)
    uc->p.write_policy = to;
  pthread_mutex_unlock(&uc->lock);
  uc_unlock_stripes(uc, &all);
  return ok;
}

/* Writes around the cache hold no stripe while the origin writes them:
 * wait for those in flight (the gate keeps new ones out). */
static void
wait_writes_around(struct fc_ucache *uc)
{
  pthread_mutex_lock(&uc->lock);
  while (uc->writes_around)
    pthread_cond_wait(&uc->around_cond, &uc->lock);
  pthread_mutex_unlock(&uc->lock);
}

int
fc_ucache_set_write_policy(struct fc_ucache *uc, enum fc_write_policy to,
                           uint32_t *written)
{
  enum fc_write_policy from;
  bool held;
  int r = 0;

  *written = 0;
  pthread_mutex_lock(&uc->lock);
  from = uc->p.write_policy;
  held = uc->wb_held && uc->nr_dirty;
  pthread_mutex_unlock(&uc->lock);
  if (from == to)
    return 0;
  /* Held dirty blocks may be older than the origin (ucache.h): writing
   * them back is for whoever claims the volume to decide. */
  if (from == FC_WRITE_BACK && held)
    return -EBUSY;
  /* Entering write_back: the thread first (it finds nothing to do until
   * the switch), so that no dirty block is ever left without it. */
  if (to == FC_WRITE_BACK && (r = uc_writeback_start(uc)))
    return r;

  if (from == FC_WRITE_BACK) {
    fc_ucache_stop(uc);
    r = converge(uc, written);
  }
  if (!r) {
    uint32_t at_pause = dirty_now(uc);
    uint64_t t0 = fc_now_ms();

    set_paused(uc, true);
    wait_writes_around(uc);
    for (unsigned tries = 0; ; tries++) {
      if (from == FC_WRITE_BACK && (r = flush_all(uc, written)))
        break;
      if (switch_policy(uc, to, from == FC_WRITE_BACK))
        break;
      /* Only the writes that passed the gate before it closed can have
       * dirtied a block since flush_all: a second round sees none. */
      if (tries == 8) {
        r = -EAGAIN;
        break;
      }
    }
    set_paused(uc, false);
    if (from == FC_WRITE_BACK)
      log_info("write policy change: writes held %llu ms for the last %u dirty "
               "blocks", (unsigned long long)(fc_now_ms() - t0), at_pause);
  }
  if (r && from == FC_WRITE_BACK) {
    /* The old policy stays, and with it the thread. */
    int sr = uc_writeback_start(uc);

    if (sr)
      log_error("cannot restart the write-back thread (%d): the dirty blocks "
                "wait for the next volume-set or detach", sr);
  }
  return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* ucache, destination of a cachemior migration: the cache warmer.
 *
 * The FirepanIF paper (§3.1 and §4.2) describes Cachemior's warmer as one
 * thread that iterates the source's hot list from its head, skips a block
 * the migrated VM already brought into the cache, and keeps up to 128
 * reads of the shared storage in flight ("one asynchronous I/O thread ...
 * up to 128 requests concurrently").  This is that thread: one caller,
 * `depth` origin reads in flight through fc_origin_pread_async, each
 * completion handed back to this thread, which installs the blocks in
 * the list's order.  An origin without an asynchronous path (a file or
 * block device) is read one block at a time by the same thread.
 *
 * Placement: the paper's warmer "reconstructs" the source's cache, hot
 * blocks "restored earlier in time than the less recently used ones", and
 * a block the VM touched meanwhile is the VM's.  The placement that
 * reconstructs the source's order is the list's order below every block
 * the VM used here: each preloaded block enters at the cold end, under
 * the hotter ones preloaded before it (as the firepan copies do,
 * uc_install_cold).  So the VM's own misses, which are newer than
 * anything the source saw, stay above the preload, and when the cache
 * fills, the blocks evicted first are the ones the source would have
 * evicted first.  Installing in list order, whatever order the reads end
 * in, keeps that exact. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "ucache_priv.h"

/* The warmer's buffers are depth blocks; with large blocks fewer reads are
 * in flight so that a migration never holds more than this. */
#define WARM_MAX_BYTES (16u << 20)
/* A read whose stripe the VM changed meanwhile (a write to any block that
 * shares the stripe, not necessarily this one) cannot be installed; the
 * block, still absent, is read again this many times before it is given
 * up.  With 128 reads in flight each is out long enough for a VM writing
 * elsewhere to touch most stripes. */
#define WARM_RETRIES 3

enum slot_state { SLOT_FREE, SLOT_SKIP, SLOT_READING, SLOT_READ };

struct warm_slot {
  struct warmer *w;
  uint64_t ob;
  uint64_t seq;                 /* the block's stripe when the read began */
  int err;                      /* the read's */
  unsigned tries;               /* reads again after a changed stripe */
  enum slot_state state;        /* under w->lock once READING */
  char *buf;
};

struct warmer {
  struct fc_ucache *uc;
  pthread_mutex_t lock;         /* slot states, inflight */
  pthread_cond_t cond;
  unsigned inflight, peak;
  unsigned depth;
  struct warm_slot *slots;      /* a ring: list position i in slot i % depth */
};

/* On the origin's reply thread: hand the block to the warmer, nothing more
 * (an origin thread must not wait for the cache device or the stripes). */
static void
read_done(void *arg, int err)
{
  struct warm_slot *s = arg;
  struct warmer *w = s->w;

  pthread_mutex_lock(&w->lock);
  s->err = err;
  s->state = SLOT_READ;
  w->inflight--;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

/* Set up slot s for ob: skipped if the VM brought it in, else its read
 * started.  -EAGAIN: the origin cannot take another read now and some are
 * in flight (the caller waits for one and tries again); the slot is
 * untouched. */
static int
issue(struct warmer *w, struct warm_slot *s, uint64_t ob)
{
  struct fc_ucache *uc = w->uc;
  struct stripe_set set;
  uint32_t bytes;
  bool present, busy;
  int r;

  uc_lock_stripes_to_read(uc, ob, ob, &set);
  pthread_mutex_lock(&uc->lock);
  present = uc_lookup_locked(uc, to_oblock(ob)).n != CBLOCK_NONE;
  pthread_mutex_unlock(&uc->lock);
  s->seq = uc_stripe_seq(uc, to_oblock(ob));
  uc_unlock_stripes(uc, &set);
  s->ob = ob;
  s->err = 0;
  if (present) {
    s->state = SLOT_SKIP;       /* the VM got there first */
    return 0;
  }
  /* The origin read runs with no stripe held, as a read miss's does: the
   * preload must not make the VM's requests wait for the storage. */
  bytes = uc_block_bytes(uc, ob);
  memset(s->buf + bytes, 0, uc->bs - bytes);      /* past a partial last block */
  pthread_mutex_lock(&w->lock);
  s->state = SLOT_READING;
  w->inflight++;
  if (w->inflight > w->peak)
    w->peak = w->inflight;
  pthread_mutex_unlock(&w->lock);
  r = fc_origin_pread_async(uc->origin, s->buf, bytes, ob * uc->bs, read_done, s);
  if (r == 0)
    return 0;
  pthread_mutex_lock(&w->lock);
  w->inflight--;
  busy = w->inflight > 0;
  pthread_mutex_unlock(&w->lock);
  if (r == -EAGAIN && busy) {
    s->state = SLOT_FREE;
    return -EAGAIN;
  }
  if (r == -EAGAIN)             /* nothing asynchronous here: read it now */
    r = fc_origin_pread(uc->origin, s->buf, bytes, ob * uc->bs);
  s->err = r;
  s->state = SLOT_READ;
  return 0;
}

/* 0 installed, 1 skipped (the VM read or wrote it meanwhile, or every
 * block is dirty), 2 to be read again (its stripe changed and it is still
 * absent), -errno. */
static int
install(struct warmer *w, struct warm_slot *s)
{
  struct fc_ucache *uc = w->uc;
  struct stripe_set set;
  int r;

  if (s->state == SLOT_SKIP)
    return 1;
  if (s->err)
    return s->err;
  STAT_ADD(&uc->stats, origin_read_bytes, uc->bs);
  uc_lock_stripes_to_read(uc, s->ob, s->ob, &set);
  if (uc_fill_allowed(uc, to_oblock(s->ob), s->seq)) {
    r = uc_install_cold(uc, to_oblock(s->ob), s->buf, false);
    if (r == -ENOSPC)
      r = 1;                    /* no clean block to give: the VM's dirty data fills it */
  } else {
    /* Read or written meanwhile (the VM's data stands), or only a
     * neighbour in the stripe was written. */
    pthread_mutex_lock(&uc->lock);
    r = uc_lookup_locked(uc, to_oblock(s->ob)).n == CBLOCK_NONE ? 2 : 1;
    pthread_mutex_unlock(&uc->lock);
  }
  uc_unlock_stripes(uc, &set);
  return r;
}

int
fc_ucache_migr_warm(struct fc_ucache *uc, const uint64_t *ids, uint32_t n,
                    unsigned depth, fc_ucache_warm_fn *each, void *ctx,
                    unsigned *peak)
{
  struct warmer w = { .uc = uc };
  uint32_t head = 0, tail = 0;  /* list positions: next to install, next to issue */
  bool go = true;
  int r = 0;

  *peak = 0;
  if (depth > WARM_MAX_BYTES / uc->bs)
    depth = WARM_MAX_BYTES / uc->bs;
  w.depth = depth ? depth : 1;
  w.slots = calloc(w.depth, sizeof *w.slots);
  if (!w.slots)
    return -ENOMEM;
  for (unsigned i = 0; i < w.depth && !r; i++) {
    w.slots[i].w = &w;
    w.slots[i].buf = malloc(uc->bs);
    if (!w.slots[i].buf)
      r = -ENOMEM;
  }
  pthread_mutex_init(&w.lock, NULL);
  pthread_cond_init(&w.cond, NULL);

  while (!r) {
    /* Keep depth reads going, from the hottest block not yet asked for. */
    while (go && tail < n && tail - head < w.depth) {
      uint64_t ob = ids[tail];

      struct warm_slot *s = &w.slots[tail % w.depth];

      s->tries = 0;
      if (ob >= uc->nr_oblocks) {
        s->ob = ob;
        s->err = -ERANGE;
        s->state = SLOT_READ;
      } else if (issue(&w, s, ob) == -EAGAIN) {
        break;
      }
      tail++;
    }
    /* Install what has arrived, in the list's order. */
    for (;;) {
      struct warm_slot *s = &w.slots[head % w.depth];
      enum slot_state st;

      if (head == tail)
        break;
      pthread_mutex_lock(&w.lock);
      st = s->state;
      pthread_mutex_unlock(&w.lock);
      if (st == SLOT_READING)
        break;
      if (go) {
        int ir = install(&w, s);

        if (ir == 2 && s->tries < WARM_RETRIES) {
          s->tries++;
          if (issue(&w, s, s->ob) == 0) {
            if (s->state == SLOT_READING)
              break;          /* wait for it where it stands in the list */
            continue;         /* skipped or read at once: look again */
          }
        }
        go = each(ctx, ir == 2 ? 1 : ir);
      }
      s->state = SLOT_FREE;
      head++;
    }
    if (head == tail && (tail == n || !go))
      break;
    /* The hottest block still out is the next to install: wait for it
     * (or, stopping, for every read the origin still holds a buffer of). */
    pthread_mutex_lock(&w.lock);
    if (head != tail)
      while (w.slots[head % w.depth].state == SLOT_READING)
        pthread_cond_wait(&w.cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
  }

  /* Only after every read ended: the origin writes into the buffers. */
  pthread_mutex_lock(&w.lock);
  while (w.inflight)
    pthread_cond_wait(&w.cond, &w.lock);
  *peak = w.peak;
  pthread_mutex_unlock(&w.lock);
  pthread_cond_destroy(&w.cond);
  pthread_mutex_destroy(&w.lock);
  for (unsigned i = 0; i < w.depth; i++)
    free(w.slots[i].buf);
  free(w.slots);
  return r;
}

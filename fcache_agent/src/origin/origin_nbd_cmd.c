/* SPDX-License-Identifier: Apache-2.0 */
/* One caller's request to the NBD origin: split into commands of at most
 * max_request bytes, each started on a live connection, and a wait for
 * all of them on the caller's own semaphore.  The caller never waits for
 * a connection to become free: a connection carries many commands at once,
 * so a miss costs one round trip, not a round trip plus a queue.
 *
 * Adjacent misses are not merged here: the cache already reads a run of
 * missing blocks of one request as one origin read, and misses of
 * different requests are adjacent too rarely under random access to pay
 * for holding one back to wait for its neighbour.
 */
#include <errno.h>
#include <stdlib.h>

#include "origin_nbd_priv.h"

/* Commands started per batch; a larger request (rare: max_request is
 * 32 MiB or the server's maximum) goes in several batches. */
#define CMDS_PER_BATCH 16

/* An asynchronous read: its one command and its end, freed when done. */
struct nbd_async {
  struct nbd_wait w;            /* first: the allocation's address */
  struct nbd_cmd k;
};

void
nbd_cmd_finish(struct nbd_cmd *k, int err)
{
  struct nbd_wait *w = k->w;
  int none = 0;

  if (err)
    atomic_compare_exchange_strong(&w->err, &none, err);
  if (atomic_fetch_sub(&w->remaining, 1) != 1)
    return;
  if (w->done) {
    w->done(w->ctx, -atomic_load(&w->err));
    free(w);                    /* the nbd_async that holds it */
    return;
  }
  sem_post(&w->sem);
}

/* A live connection with room: the first one with fewer than
 * NBD_CONN_SPILL commands in flight, else the least busy.  Filling one
 * connection before the next keeps the others idle at low load and makes
 * each loop wake-up (and each of the server's) find several replies
 * (requests) at once; spilling over keeps a deep queue from waiting on one
 * socket.  Connections in the `skip` mask are not considered.  NULL when
 * every connection is down, and so is `*full` when some were only full. */
static struct nbd_conn *
pick(struct nbd_origin *n, uint32_t skip, bool *full)
{
  struct nbd_conn *best = NULL;
  unsigned best_load = NBD_CONN_MAX_IN_FLIGHT;
  bool any_live = false;

  for (unsigned i = 0; i < n->nr_conns; i++) {
    struct nbd_conn *c = &n->conns[i];
    unsigned load;

    if (!atomic_load(&c->live) || (skip & (UINT32_C(1) << i)))
      continue;
    any_live = true;
    load = atomic_load_explicit(&c->in_flight, memory_order_relaxed);
    if (load < NBD_CONN_SPILL) {
      *full = false;
      return c;
    }
    if (load < best_load) {
      best = c;
      best_load = load;
    }
  }
  *full = !best && any_live;
  return best;
}

/* Start `k` somewhere.  0, or -errno when it could not be started:
 * -EAGAIN when every connection is full and the caller may not wait. */
static int
start_cmd(struct nbd_origin *n, struct nbd_cmd *k, bool may_wait)
{
  uint32_t failed = 0;          /* connections found dead by this command */

  for (;;) {
    bool full;
    struct nbd_conn *c = pick(n, failed, &full);
    int r;

    if (!c && full && !may_wait)
      return -EAGAIN;
    if (!c && full) {
      /* Backstop (see NBD_CONN_MAX_IN_FLIGHT): wait for any completion. */
      pthread_mutex_lock(&n->slot_lock);
      atomic_fetch_add(&n->slot_waiters, 1);
      if (!pick(n, failed, &full) && full)
        pthread_cond_wait(&n->slot_cond, &n->slot_lock);
      atomic_fetch_sub(&n->slot_waiters, 1);
      pthread_mutex_unlock(&n->slot_lock);
      continue;
    }
    if (!c)
      return -ENOTCONN;         /* every connection is down: fail, not hang */
    r = nbd_conn_submit(c, k);
    if (r != -ENOTCONN)
      return r;
    /* It died under us: another connection may still be up. */
    failed |= UINT32_C(1) << c->index;
  }
}

static int
wait_all(struct nbd_wait *w)
{
  while (sem_wait(&w->sem) == -1)
    ;                           /* EINTR only: completion is guaranteed */
  return -atomic_load(&w->err);
}

int
nbdo_read_async(struct nbd_origin *n, void *buf, uint32_t count,
                uint64_t off, fc_origin_done_fn *done, void *ctx)
{
  struct nbd_async *a;
  int r;

  if (count == 0 || count > n->max_request)
    return -EAGAIN;
  if (!(a = malloc(sizeof *a)))
    return -ENOMEM;
  atomic_init(&a->w.remaining, 1);
  atomic_init(&a->w.err, 0);
  a->w.done = done;
  a->w.ctx = ctx;
  a->k = (struct nbd_cmd){ .op = NBD_OP_READ, .buf = buf, .count = count,
                           .off = off, .w = &a->w };
  /* Its caller goes on to other requests: it reads synchronously
   * instead, and waits there for a slot. */
  r = start_cmd(n, &a->k, false);
  if (r)
    free(a);                    /* never started: libnbd holds no reference */
  /* Started: the connection's thread may have ended and freed it already. */
  return r;
}

/* Run `count` bytes at `off` as commands of at most max_request bytes,
 * CMDS_PER_BATCH at a time, and wait for them.  Every started command
 * finishes: with its reply, with the connection's death, or when the
 * connection is closed (see origin_nbd_conn.c). */
int
nbdo_run(struct nbd_origin *n, enum nbd_cmd_op op, void *vbuf,
         uint64_t count, uint64_t off, uint32_t flags)
{
  struct nbd_cmd cmds[CMDS_PER_BATCH];
  struct nbd_wait w;
  char *buf = vbuf;
  int r = 0;

  if (count == 0 && op != NBD_OP_FLUSH)
    return 0;
  if (sem_init(&w.sem, 0, 0) == -1)
    return -errno;
  w.done = NULL;
  w.ctx = NULL;
  do {
    unsigned nr = 0;

    atomic_init(&w.err, 0);
    /* One for this function, dropped when every command is started, so
     * the semaphore is posted once, after the last. */
    atomic_init(&w.remaining, 1);
    while (nr < CMDS_PER_BATCH && (count || nr == 0)) {
      struct nbd_cmd *k = &cmds[nr];
      uint64_t len = op == NBD_OP_READ || op == NBD_OP_WRITE
                     ? (count < n->max_request ? count : n->max_request)
                     : count;
      int e;

      *k = (struct nbd_cmd){ .op = op, .buf = buf, .count = len, .off = off,
                             .flags = flags, .w = &w };
      atomic_fetch_add(&w.remaining, 1);
      e = start_cmd(n, k, true);
      if (e) {
        int none = 0;

        atomic_compare_exchange_strong(&w.err, &none, -e);
        atomic_fetch_sub(&w.remaining, 1);
        break;
      }
      nr++;
      if (op == NBD_OP_READ || op == NBD_OP_WRITE)
        buf += len;
      off += len;
      count -= len;
    }
    if (atomic_fetch_sub(&w.remaining, 1) != 1)
      r = wait_all(&w);
    else
      r = -atomic_load(&w.err);
  } while (!r && count);
  sem_destroy(&w.sem);
  return r;
}

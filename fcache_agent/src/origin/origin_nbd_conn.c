/* SPDX-License-Identifier: Apache-2.0 */
/* One connection to the NBD origin and the thread that drives it.
 *
 * Callers start commands themselves (nbd_aio_pread & co. send the request
 * from the caller's thread when the socket takes it), so the common path
 * costs no hand-off.  The connection's loop thread polls the socket and
 * lets libnbd read the replies; each reply's completion callback finishes
 * its command and wakes the caller waiting on it.  The loop is woken
 * through an eventfd only when a caller leaves libnbd wanting to write (the
 * socket was full) or finds the handle dead, and to stop.
 *
 * A dead connection -- the server closed it, a protocol error, a stall --
 * fails every command on it: libnbd calls the completion callback of each
 * with an error when its state machine enters DEAD, and frees every
 * callback when the handle is closed.  The loop then swaps the handle out
 * and connects again with back-off until the server answers or the origin
 * is closed.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "origin_nbd_priv.h"

static int
nbd_errno(int fallback)
{
  int e = nbd_get_errno();

  return e > 0 ? e : fallback;
}

static short
poll_events(struct nbd_handle *h)
{
  unsigned dir = nbd_aio_get_direction(h);
  short ev = 0;

  if (dir & LIBNBD_AIO_DIRECTION_READ)
    ev |= POLLIN;
  if (dir & LIBNBD_AIO_DIRECTION_WRITE)
    ev |= POLLOUT;
  return ev;
}

/* Let libnbd act on what poll saw.  -1 when the handle failed. */
static int
notify(struct nbd_handle *h, short revents)
{
  unsigned dir = nbd_aio_get_direction(h);  /* again: a caller may have moved it */

  if ((revents & (POLLIN | POLLHUP | POLLERR)) && (dir & LIBNBD_AIO_DIRECTION_READ))
    return nbd_aio_notify_read(h);
  if ((revents & (POLLOUT | POLLHUP | POLLERR)) && (dir & LIBNBD_AIO_DIRECTION_WRITE))
    return nbd_aio_notify_write(h);
  return 0;
}

static void
kick(struct nbd_conn *c)
{
  uint64_t one = 1;

  if (!atomic_exchange(&c->kicked, true) &&
      write(c->efd, &one, sizeof one) != sizeof one)
    atomic_store(&c->kicked, false);
}

static void
drain_kicks(struct nbd_conn *c)
{
  uint64_t v;

  atomic_store(&c->kicked, false);
  if (read(c->efd, &v, sizeof v) < 0 && errno != EAGAIN)
    log_debug("origin: eventfd read: %s", strerror(errno));
}

/* Wait up to `ms` for a kick (used for back-off); false once stopping. */
static bool
sleep_unless_stopped(struct nbd_conn *c, unsigned ms)
{
  struct pollfd p = { .fd = c->efd, .events = POLLIN };

  if (poll(&p, 1, (int)ms) > 0)
    drain_kicks(c);
  return !atomic_load(&c->stopping);
}

/* ---- completion callbacks (run with the handle's lock held: no nbd_*
 * call on the same handle from here) ------------------------------------ */

static int
cmd_completed(void *user_data, int *error)
{
  struct nbd_cmd *k = user_data;

  k->err = *error;
  k->completed = true;
  atomic_fetch_add_explicit(&k->conn->completions, 1, memory_order_relaxed);
  return 1;                     /* retire the command: nobody asks for it later */
}

/* base:allocation's extents for a block-status command, clamped to what
 * was asked (the server may describe more) and to ext's room. */
static int
cmd_extents(void *user_data, const char *metacontext, uint64_t offset,
            uint32_t *entries, size_t nr_entries, int *error)
{
  struct nbd_extents *x = user_data;
  uint64_t pos = x->off;

  if (strcmp(metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0 || *error ||
      x->got || offset != x->off)
    return 0;
  x->got = true;
  for (size_t i = 0; i + 1 < nr_entries && x->n < x->max && pos < x->end;
       i += 2) {
    uint64_t len = entries[i];

    if (len == 0)
      break;
    if (len > x->end - pos)
      len = x->end - pos;
    x->ext[x->n++] = (struct fc_origin_extent){
      .length = (uint32_t)len,
      .flags = entries[i + 1] & (FC_ORIGIN_HOLE | FC_ORIGIN_ZERO) };
    pos += len;
  }
  return 0;
}

static void
push_done(_Atomic(struct nbd_cmd *) *list, struct nbd_cmd *k)
{
  k->next = atomic_load_explicit(list, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(list, &k->next, k,
                                                memory_order_release,
                                                memory_order_relaxed))
    ;
}

/* The command this thread is handing to nbd_aio_*, during the call: the
 * one whose refusal (libnbd frees it without completing it, in this
 * thread, before the call returns -1) nbd_conn_submit reports itself.
 * Per thread, not a flag in the command: once the call succeeded the
 * loop may end an asynchronous command and free it at any moment. */
static _Thread_local const struct nbd_cmd *being_submitted;

/* libnbd's last word on a command, exactly once: after the completion
 * callback, or instead of it when the command never reached a reply
 * (refused by nbd_aio_*, or still queued when the handle was closed). */
static void
cmd_freed(void *user_data)
{
  struct nbd_cmd *k = user_data;
  struct nbd_conn *c = k->conn;

  if (!k->completed && being_submitted == k)
    return;                     /* nbd_aio_* failed: nbd_conn_submit reports it */
  if (!k->completed)
    k->err = ENOTCONN;
  atomic_fetch_sub(&c->in_flight, 1);
  push_done(k->w->done ? &c->done_async : &c->done, k);
}

/* End every command of `list` (taken off a done list), then let callers
 * waiting for a slot look again. */
static void
finish_list(struct nbd_conn *c, struct nbd_cmd *k)
{
  struct nbd_origin *n = c->origin;

  while (k) {
    struct nbd_cmd *next = k->next;

    nbd_cmd_finish(k, k->err);  /* `k` may be gone after this */
    k = next;
  }
  if (atomic_load(&n->slot_waiters)) {
    pthread_mutex_lock(&n->slot_lock);
    pthread_cond_broadcast(&n->slot_cond);
    pthread_mutex_unlock(&n->slot_lock);
  }
}

/* Wake the callers of the commands libnbd is done with.  Called, without
 * the handle's lock, by whichever thread last drove the handle. */
static void
wake_done(struct nbd_conn *c)
{
  if (atomic_load_explicit(&c->done, memory_order_relaxed))
    finish_list(c, atomic_exchange_explicit(&c->done, NULL,
                                            memory_order_acquire));
}

/* End the asynchronous requests libnbd is done with: on the loop's
 * thread only (see done_async), after wake_done, whose callers may be
 * what an end is waiting for. */
static void
end_async(struct nbd_conn *c)
{
  if (atomic_load_explicit(&c->done_async, memory_order_relaxed))
    finish_list(c, atomic_exchange_explicit(&c->done_async, NULL,
                                            memory_order_acquire));
}

int
nbd_conn_submit(struct nbd_conn *c, struct nbd_cmd *k)
{
  nbd_completion_callback cb = {
    .callback = cmd_completed, .user_data = k, .free = cmd_freed,
  };
  struct nbd_handle *h;
  int64_t cookie = -1;
  int r = 0;

  k->conn = c;
  k->completed = false;
  k->err = 0;
  if (!atomic_load(&c->live))
    return -ENOTCONN;           /* without queueing behind the loop's swap */
  pthread_rwlock_rdlock(&c->hlock);
  h = c->h;
  if (!h || !atomic_load(&c->live)) {
    r = -ENOTCONN;
    goto out;
  }
  atomic_fetch_add(&c->in_flight, 1);
  being_submitted = k;
  switch (k->op) {
  case NBD_OP_READ:
    cookie = nbd_aio_pread(h, k->buf, k->count, k->off, cb, 0);
    break;
  case NBD_OP_WRITE:
    cookie = nbd_aio_pwrite(h, k->buf, k->count, k->off, cb, k->flags);
    break;
  case NBD_OP_FLUSH:
    cookie = nbd_aio_flush(h, cb, 0);
    break;
  case NBD_OP_TRIM:
    cookie = nbd_aio_trim(h, k->count, k->off, cb, 0);
    break;
  case NBD_OP_ZERO:
    cookie = nbd_aio_zero(h, k->count, k->off, cb, k->flags);
    break;
  case NBD_OP_BLOCK_STATUS: {
    nbd_extent_callback ecb = { .callback = cmd_extents, .user_data = k->buf };

    cookie = nbd_aio_block_status(h, k->count, k->off, ecb, cb, k->flags);
    break;
  }
  }
  being_submitted = NULL;
  if (cookie == -1) {
    /* A dead handle refuses with EINVAL ("invalid state"); the caller
     * should see that as the lost connection it is, and may try another. */
    r = nbd_aio_is_dead(h) || nbd_aio_is_closed(h) ? -ENOTCONN : -nbd_errno(EIO);
    atomic_fetch_sub(&c->in_flight, 1);
    kick(c);                    /* the loop may not know yet */
    goto out;
  }
  /* From here on `k` may be ended and freed by the loop (asynchronous
   * commands): it is not touched again. */
  /* Sending may have stopped on a full socket, or met a dead server (and
   * ended asynchronous requests, which only the loop may finish): in
   * each case the loop must look again. */
  if (poll_events(h) != POLLIN ||
      atomic_load_explicit(&c->done_async, memory_order_relaxed))
    kick(c);
out:
  pthread_rwlock_unlock(&c->hlock);
  wake_done(c);                 /* if sending met a dead server */
  return r;
}

/* ---- connecting -------------------------------------------------------- */

struct nbd_handle *
nbd_conn_create_handle(const struct nbd_origin *n)
{
  struct nbd_handle *h = nbd_create();

  if (!h)
    return NULL;
  /* The URI comes from the control plane; never let it make libnbd read
   * local files (tls-psk-file=...) or spawn anything: TLS credentials are
   * the agent's own (origin_tls_dir, origin_tls_psk_file).  An nbds://
   * URI makes libnbd require TLS; nbd:// stays plaintext. */
  if (nbd_set_uri_allow_local_file(h, false) == -1 ||
      nbd_set_uri_allow_transports(h, LIBNBD_ALLOW_TRANSPORT_TCP |
                                      LIBNBD_ALLOW_TRANSPORT_UNIX) == -1 ||
      (n->tls_dir && nbd_set_tls_certificates(h, n->tls_dir) == -1) ||
      (n->tls_psk_file && nbd_set_tls_psk_file(h, n->tls_psk_file) == -1) ||
      /* libnbd's default PSK identity is the login name, which a daemon
       * has none of; a URI's tls-username= still wins. */
      (n->tls_psk_file && nbd_set_tls_username(h, "fcache") == -1) ||
      /* Asked for at connect; a server without it just says no. */
      nbd_add_meta_context(h, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1) {
    nbd_close(h);
    return NULL;
  }
  return h;
}

/* Connect h to the origin by `deadline`, driven by poll so that a server
 * that accepts and then says nothing costs a bounded wait.  With a
 * connection `c`, its eventfd is watched too and closing the origin
 * interrupts the wait (-ECANCELED). */
static int
drive_connect(struct nbd_origin *n, struct nbd_conn *c, struct nbd_handle *h,
              uint64_t deadline)
{
  if (nbd_aio_connect_uri(h, n->uri) == -1)
    return -nbd_errno(EIO);
  while (nbd_aio_is_connecting(h)) {
    struct pollfd p[2] = {
      { .fd = nbd_aio_get_fd(h), .events = poll_events(h) },
      { .fd = c ? c->efd : -1, .events = POLLIN },
    };
    uint64_t now = fc_now_ms();

    if (c && atomic_load(&c->stopping))
      return -ECANCELED;
    if (now >= deadline)
      return -ETIMEDOUT;
    if (poll(p, 2, (int)(deadline - now)) < 0 && errno != EINTR)
      return -errno;
    if (c && p[1].revents)
      drain_kicks(c);
    if (notify(h, p[0].revents) == -1)
      return -nbd_errno(EIO);
  }
  return nbd_aio_is_ready(h) ? 0 : -nbd_errno(ENOTCONN);
}

/* The first connections, at open, so that the operator gets libnbd's own
 * message when the origin cannot be reached. */
int
nbd_conn_connect(struct nbd_origin *n, struct nbd_handle **out,
                 char *err, size_t errlen)
{
  struct nbd_handle *h = nbd_conn_create_handle(n);
  int r;

  if (!h) {
    snprintf(err, errlen, "libnbd: %s", nbd_get_error());
    return -nbd_errno(ENOMEM);
  }
  r = drive_connect(n, NULL, h, fc_now_ms() + NBD_CONN_CONNECT_MS);
  if (r) {
    if (r == -ETIMEDOUT)
      snprintf(err, errlen, "cannot connect to origin %s: no answer to the "
               "NBD handshake within %d s", n->uri, NBD_CONN_CONNECT_MS / 1000);
    else
      snprintf(err, errlen, "cannot connect to origin %s: %s", n->uri,
               nbd_get_error());
    nbd_close(h);
    return r;
  }
  *out = h;
  return 0;
}

/* A new connection must serve the same volume the way the first one did. */
static int
check_same_export(struct nbd_origin *n, struct nbd_handle *h)
{
  int64_t size = nbd_get_size(h);

  if (size < 0 || (uint64_t)size != n->base.size) {
    log_error("volume %s: origin %s: reconnected, but the export's size is %lld, not "
              "%llu; not using it", n->volume, n->uri, (long long)size,
              (unsigned long long)n->base.size);
    return -ESTALE;
  }
  if ((nbd_can_fua(h) > 0) != n->can_fua ||
      (nbd_can_flush(h) > 0) != n->can_flush ||
      (nbd_can_trim(h) > 0) != n->base.can_trim ||
      (nbd_can_zero(h) > 0) != n->can_zero ||
      (n->nr_conns > 1 && nbd_can_multi_conn(h) <= 0)) {
    log_error("volume %s: origin %s: reconnected, but the server's flags changed; "
              "not using it", n->volume, n->uri);
    return -ESTALE;
  }
  return 0;
}

/* Wait for `cookie` on the new handle, driven by this thread's poll so
 * that closing the origin interrupts it.  0, or -errno. */
static int
await_cmd(struct nbd_conn *c, struct nbd_handle *h, int64_t cookie,
          uint64_t deadline)
{
  for (;;) {
    int done = nbd_aio_command_completed(h, cookie);
    struct pollfd p[2] = {
      { .fd = nbd_aio_get_fd(h), .events = poll_events(h) },
      { .fd = c->efd, .events = POLLIN },
    };
    uint64_t now = fc_now_ms();

    if (done == 1)
      return 0;
    if (done == -1)
      return -nbd_errno(EIO);
    if (atomic_load(&c->stopping))
      return -ECANCELED;
    if (now >= deadline)
      return -ETIMEDOUT;
    if (poll(p, 2, (int)(deadline - now)) < 0 && errno != EINTR)
      return -errno;
    if (p[1].revents)
      drain_kicks(c);
    if (notify(h, p[0].revents) == -1)
      return -nbd_errno(EIO);
  }
}

struct replay {
  struct nbd_conn *c;
  struct nbd_handle *h;
  uint64_t deadline;
};

/* One change of the redo log on the new handle, in commands of at most
 * max_request bytes as the first time. */
static int
replay_one(void *ctx, enum nbd_redo_op op, const void *buf, uint32_t count,
           uint64_t off)
{
  struct replay *rp = ctx;
  uint32_t max = rp->c->origin->max_request;
  const char *p = buf;

  do {
    uint32_t len = buf && count > max ? max : count;
    int64_t cookie;
    int r;

    switch (op) {
    case NBD_REDO_WRITE:
      cookie = nbd_aio_pwrite(rp->h, p, len, off, NBD_NULL_COMPLETION, 0);
      break;
    case NBD_REDO_TRIM:
      cookie = nbd_aio_trim(rp->h, len, off, NBD_NULL_COMPLETION, 0);
      break;
    default:
      cookie = nbd_aio_zero(rp->h, len, off, NBD_NULL_COMPLETION,
                            op == NBD_REDO_ZERO_NO_HOLE
                            ? LIBNBD_CMD_FLAG_NO_HOLE : 0);
      break;
    }
    if (cookie == -1)
      return -nbd_errno(EIO);
    r = await_cmd(rp->c, rp->h, cookie, rp->deadline);
    if (r)
      return r;
    if (p)
      p += len;
    off += len;
    count -= len;
  } while (count);
  return 0;
}

/* Before a new connection carries anything: what the server acknowledged
 * and no flush covered may be gone with the connection it came on (the
 * server restarted), so it is written again.  No write of a caller runs
 * meanwhile (nbd_redo_replay holds the log's order). */
static int
replay(struct nbd_conn *c, struct nbd_handle *h)
{
  struct nbd_origin *n = c->origin;
  struct replay rp = { c, h, fc_now_ms() + NBD_CONN_REPLAY_MS };
  unsigned done;
  int r;

  if (!n->can_flush)
    return 0;
  r = nbd_redo_replay(&n->redo, replay_one, &rp, &done);
  if (r)
    log_error("volume %s: origin %s: connection %u: cannot write again the changes "
              "no flush has covered (%u written, then: %s); not using the "
              "connection, trying again", n->volume, n->uri, c->index, done,
              r == -ETIMEDOUT ? "timed out" : strerror(-r));
  else if (done)
    log_warning("volume %s: origin %s: connection %u: wrote again %u change(s) the "
                "server had acknowledged before the connection was lost "
                "but no flush had covered", n->volume, n->uri, c->index, done);
  return r;
}

/* One attempt, driven by this thread's poll so that closing the origin
 * interrupts it. */
static int
reconnect(struct nbd_conn *c)
{
  struct nbd_origin *n = c->origin;
  struct nbd_handle *h = nbd_conn_create_handle(n);
  uint64_t deadline = fc_now_ms() + NBD_CONN_CONNECT_MS;
  int r;

  if (!h)
    return -nbd_errno(ENOMEM);
  r = drive_connect(n, c, h, deadline);
  if (r)
    goto out;
  r = check_same_export(n, h);
  if (r)
    goto out;
  r = replay(c, h);
  if (r)
    goto out;
  pthread_rwlock_wrlock(&c->hlock);
  c->h = h;
  h = NULL;
  atomic_store(&c->live, true);
  pthread_rwlock_unlock(&c->hlock);
out:
  if (h) {
    log_debug("volume %s: origin %s: connection %u: reconnect failed: %s",
              n->volume, n->uri, c->index, r == -ETIMEDOUT ? "timed out" : nbd_get_error());
    nbd_close(h);
  }
  return r;
}

/* Swap the dead handle out and close it.  Every command on it has been
 * completed with an error by libnbd already, or is freed (and so finished
 * with ENOTCONN) by nbd_close. */
static void
retire(struct nbd_conn *c, const char *why)
{
  struct nbd_handle *h;

  atomic_store(&c->live, false);
  pthread_rwlock_wrlock(&c->hlock);
  h = c->h;
  c->h = NULL;
  pthread_rwlock_unlock(&c->hlock);
  if (!atomic_load(&c->stopping))
    log_warning("volume %s: origin %s: connection %u lost (%s); its requests in "
                "flight failed, reconnecting", c->origin->volume, c->origin->uri,
                c->index, why);
  nbd_close(h);
  wake_done(c);
  end_async(c);
}

/* ---- the loop ---------------------------------------------------------- */

struct stall {
  unsigned seen;                /* completions at the last look */
  uint64_t since;               /* 0, or when progress was last seen */
};

/* True when commands are in flight and none completed for the stall
 * time: the server is not answering. */
static bool
stalled(struct nbd_conn *c, struct stall *s)
{
  unsigned done = atomic_load_explicit(&c->completions, memory_order_relaxed);
  uint64_t now;

  if (atomic_load(&c->in_flight) == 0) {
    s->since = 0;
    return false;
  }
  now = fc_now_ms();
  if (done != s->seen || s->since == 0) {
    s->seen = done;
    s->since = now;
    return false;
  }
  return now - s->since >= c->origin->stall_ms;
}

/* Drive a live handle until it dies or the origin closes.  Returns why it
 * died, or NULL when stopping. */
static const char *
drive(struct nbd_conn *c)
{
  struct nbd_handle *h = c->h;  /* only this thread changes c->h */
  /* Fixed while the handle lives (checked below before each poll);
   * asking again would take its lock. */
  int fd = nbd_aio_get_fd(h);
  struct stall st = { 0, 0 };

  while (!atomic_load(&c->stopping)) {
    struct pollfd p[2];
    int timeout = atomic_load(&c->in_flight) ? 1000 : NBD_CONN_IDLE_WAKE_MS;
    int r;

    /* Died in a caller's thread, sending: the reason is in that thread's
     * libnbd error, not ours. */
    if (nbd_aio_is_dead(h) || nbd_aio_is_closed(h))
      return "the connection failed while sending";
    p[0] = (struct pollfd){ .fd = fd, .events = poll_events(h) };
    p[1] = (struct pollfd){ .fd = c->efd, .events = POLLIN };
    if (poll(p, 2, timeout) < 0 && errno != EINTR)
      return strerror(errno);
    if (p[1].revents)
      drain_kicks(c);
    r = notify(h, p[0].revents);
    wake_done(c);
    end_async(c);
    if (r == -1)
      return nbd_get_error();
    if (stalled(c, &st)) {
      log_warning("volume %s: origin %s: connection %u: no reply for %d s with %u "
                  "request(s) in flight", c->origin->volume, c->origin->uri, c->index,
                  c->origin->stall_ms / 1000, atomic_load(&c->in_flight));
      /* retire() closes the handle, which fails every command on it.
       * (Not shutdown(2) on its socket: libnbd may have closed that fd
       * already, and the number may be someone else's by now.) */
      return "the server stopped answering";
    }
  }
  return NULL;
}

/* Closing: say goodbye if nothing is in flight, for a short while at most;
 * whatever is left is freed (and failed) by nbd_close in retire(). */
static void
disconnect(struct nbd_conn *c)
{
  struct nbd_handle *h = c->h;
  uint64_t deadline = fc_now_ms() + 1000;

  /* Cancelled: the server is being given up, likely for not answering. */
  if (!h || atomic_load(&c->in_flight) || atomic_load(&c->cancelled) ||
      nbd_aio_disconnect(h, 0) == -1)
    return;
  while (!nbd_aio_is_closed(h) && !nbd_aio_is_dead(h)) {
    struct pollfd p = { .fd = nbd_aio_get_fd(h), .events = poll_events(h) };
    uint64_t now = fc_now_ms();

    if (p.fd < 0 || now >= deadline ||
        poll(&p, 1, (int)(deadline - now)) < 0 || notify(h, p.revents) == -1)
      break;
  }
  wake_done(c);
  end_async(c);
}

static void *
conn_loop(void *arg)
{
  struct nbd_conn *c = arg;
  unsigned backoff = 0;

  while (!atomic_load(&c->stopping)) {
    const char *why;

    if (!c->h) {
      if (backoff && !sleep_unless_stopped(c, backoff))
        break;
      if (reconnect(c) == 0) {
        log_info("volume %s: origin %s: connection %u re-established",
                 c->origin->volume, c->origin->uri, c->index);
        backoff = 0;
      } else {
        backoff = backoff ? backoff * 2 : NBD_CONN_BACKOFF_MIN_MS;
        if (backoff > NBD_CONN_BACKOFF_MAX_MS)
          backoff = NBD_CONN_BACKOFF_MAX_MS;
      }
      continue;
    }
    why = drive(c);
    if (why) {
      retire(c, why);
      /* The server just went away: give it a moment before knocking. */
      backoff = NBD_CONN_BACKOFF_MIN_MS;
    }
  }
  disconnect(c);
  if (c->h)
    retire(c, "closing");
  return NULL;
}

/* Take over `h` (connected) and start the loop. */
int
nbd_conn_start(struct nbd_conn *c, struct nbd_origin *n, unsigned index,
               struct nbd_handle *h)
{
  pthread_rwlockattr_t attr;
  char name[16];
  int r;

  c->origin = n;
  c->index = index;
  c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (c->efd < 0)
    return -errno;
  /* Writer-preferring: the loop's swap must not starve behind callers
   * that keep trying a handle about to go. */
  pthread_rwlockattr_init(&attr);
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  r = -pthread_rwlock_init(&c->hlock, &attr);
  pthread_rwlockattr_destroy(&attr);
  if (r) {
    close(c->efd);
    c->efd = -1;
    return r;
  }
  c->h = h;
  atomic_store(&c->live, true);
  r = -pthread_create(&c->thread, NULL, conn_loop, c);
  if (r) {
    c->h = NULL;
    atomic_store(&c->live, false);
    pthread_rwlock_destroy(&c->hlock);
    close(c->efd);
    c->efd = -1;
    return r;
  }
  snprintf(name, sizeof name, "fc-origin-%u", index);
  pthread_setname_np(c->thread, name);
  c->thread_started = true;
  return 0;
}

void
nbd_conn_cancel(struct nbd_conn *c)
{
  if (!c->thread_started)
    return;
  atomic_store(&c->cancelled, true);
  atomic_store(&c->stopping, true);
  kick(c);
}

void
nbd_conn_stop(struct nbd_conn *c)
{
  if (!c->thread_started)
    return;
  atomic_store(&c->stopping, true);
  kick(c);
  pthread_join(c->thread, NULL);
  c->thread_started = false;
  pthread_rwlock_destroy(&c->hlock);
  close(c->efd);
  c->efd = -1;
}

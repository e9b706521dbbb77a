/* SPDX-License-Identifier: Apache-2.0 */
/* One NBD connection: the handshake (none for a socket that comes in
 * transmission already, the kernel's client), then its workers reading requests,
 * running the export's callbacks and sending replies.  Separate from
 * nbd_server.c, which only listens, accepts and keeps the list of
 * connections.
 *
 * The workers share the socket as leader and followers: whoever holds
 * read_lock is the reader.  It reads requests (through a buffer, so one
 * recv() brings in all the client queued) and serves itself those that
 * need no waiting: reads the export can answer from the page cache or
 * start at the origin (fc_io_ops.pread_start with FC_IO_NOWAIT), and
 * gathers the replies it makes to send them together.  The first
 * request that may wait -- a write, a flush, a hit that is not in
 * the page cache, a read during a migration -- it serves after dropping
 * read_lock, and a sibling becomes the reader.  So a stream of cache hits
 * and misses wakes no sibling at all, up to threads_per_conn requests
 * that wait are in the callbacks at once, and replies (each sent whole
 * under write_lock) may go out of order, which the protocol allows.
 *
 * A read the export ends later (a cache miss waiting for the origin)
 * does not hold its worker: the request, its buffer and its share of the
 * budget become a pending read.  The thread that ends the read -- the
 * origin's, shared by every connection of the export -- only queues it,
 * and the connection's own sender thread sends the reply: a client that
 * stops reading must not hold up the replies of another connection.  The
 * queue is bounded by the budget below.  The connection's thread waits
 * for its pending reads before it lets the connection go.
 *
 * Bounded: a request's payload or read reply is counted in the
 * connection's budget (NBD_CONN_INFLIGHT_MAX) from before its buffer is
 * filled until its reply is sent, or gathered into the reader's buffer
 * (OUTBUF_SIZE, the connection's own).  A reader that finds the budget spent
 * waits with read_lock held, so nothing more is read from a client that
 * does not read its replies; the send timeout then drops it.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/fdio.h"
#include "common/lockcheck.h"
#include "common/log.h"
#include "nbd_conn.h"
#include "nbd_handshake.h"
#include "nbd_meta.h"
#include "nbd_proto.h"
#include "nbd_request.h"

/* The spec says payloads under 32 MiB SHOULD NOT be treated as a DoS, so
 * an over-max_block write up to that size is drained and refused; beyond
 * it we cannot afford to skip the payload and drop the connection. */
#define WRITE_DRAIN_MAX (32u * 1024 * 1024)
/* Worker buffers grow on demand; ones above this are not kept around. */
#define BUF_KEEP (1u * 1024 * 1024)
#define BUF_MIN (128u * 1024)
/* The largest read the reader serves itself (read_until_blocking): a
 * page-cache copy of this costs less than waking a sibling; a larger one
 * would hold up the requests behind it. */
#define INLINE_READ_MAX (128u * 1024)
/* The replies of the reads the reader serves are gathered here and sent
 * together -- one sendmsg, and one wake-up of the client, for a batch of
 * its requests -- before the reader could wait for anything: when its
 * buffer holds no whole request (the next recv may wait), before a write's
 * payload or a wait for budget, and before it hands a request on. */
#define OUTBUF_SIZE (256u * 1024)
_Static_assert(OUTBUF_SIZE >= INLINE_READ_MAX + NBD_CHUNK_HDR_SIZE + 8,
               "a reply the reader serves fits in its gathering buffer");

struct pending_read;

struct worker {
  struct conn *c;
  pthread_t thread;
  uint8_t *buf;               /* write payload / read data / extents */
  size_t cap;
  uint64_t held;              /* bytes of the budget this request holds */
  uint32_t nextents;          /* in buf, for a block-status reply */
  struct pending_read *spare; /* for the next read that goes pending */
};

/* A read whose reply is sent by whoever ends it (see the top). */
struct pending_read {
  struct conn *c;
  struct pending_read *next;  /* in c->ended */
  int err;                    /* how it ended */
  struct nbd_request req;
  uint8_t *buf;               /* the worker's buffer, now this read's */
  uint64_t held;              /* its budget, given back after the reply */
};

/* Reads are at least this in the budget and in a pending read's buffer. */
#define READ_GRAIN 4096u

static uint32_t read_buf_size(uint32_t count)
{
  return (count + READ_GRAIN - 1) / READ_GRAIN * READ_GRAIN;
}

/* Bytes of agent memory request req needs until its reply is sent: none
 * for a payload the export refuses (drained, or never read). */
static uint64_t request_cost(const struct nbd_request *req,
                             const struct fc_export *exp)
{
  switch (req->type) {
  case NBD_CMD_READ:
    /* A pending read keeps a buffer of up to twice this (ensure_read_buf). */
    return req->count <= exp->max_block ? read_buf_size(req->count) : 0;
  case NBD_CMD_WRITE:
    return req->count <= exp->max_block ? req->count : 0;
  case NBD_CMD_BLOCK_STATUS:
    return NBD_BS_MAX_EXTENTS * sizeof(struct fc_extent);
  default:
    return 0;
  }
}

/* Takes `cost` bytes of the connection's budget, waiting while others'
 * requests hold it.  One request is always admitted when nothing else is
 * in flight, so any request the export allows can be served. */
static void budget_take(struct worker *w, uint64_t cost)
{
  struct conn *c = w->c;

  pthread_mutex_lock(&c->budget_lock);
  while (c->inflight > 0 && c->inflight + cost > NBD_CONN_INFLIGHT_MAX)
    pthread_cond_wait(&c->budget_cond, &c->budget_lock);
  c->inflight += cost;
  pthread_mutex_unlock(&c->budget_lock);
  w->held = cost;
}

/* Would budget_take wait now? */
static bool budget_short(struct conn *c, uint64_t cost)
{
  bool short_;

  pthread_mutex_lock(&c->budget_lock);
  short_ = c->inflight > 0 && c->inflight + cost > NBD_CONN_INFLIGHT_MAX;
  pthread_mutex_unlock(&c->budget_lock);
  return short_;
}

/* The last thing a pending read's end does with c: the connection's
 * thread may free it once the budget is all back. */
static void budget_return(struct conn *c, uint64_t held)
{
  if (held == 0)
    return;
  pthread_mutex_lock(&c->budget_lock);
  c->inflight -= held;
  pthread_cond_broadcast(&c->budget_cond);
  pthread_mutex_unlock(&c->budget_lock);
}

static void budget_give(struct worker *w)
{
  budget_return(w->c, w->held);
  w->held = 0;
}


static int ensure_buf(struct worker *w, size_t n)
{
  size_t want = n < BUF_MIN ? BUF_MIN : n;

  if (n <= w->cap)
    return 0;
  free(w->buf);
  w->buf = malloc(want);
  w->cap = w->buf ? want : 0;
  return w->buf ? 0 : -ENOMEM;
}

/* A read that may go pending hands its buffer over, so the buffer is
 * sized to the read (at most twice it, rounded to READ_GRAIN), not to the
 * largest request the worker served: what a pending read holds stays
 * within twice its budget. */
static int ensure_read_buf(struct worker *w, uint32_t count)
{
  size_t want = read_buf_size(count);

  if (w->cap >= want && w->cap <= 2 * want)
    return 0;
  free(w->buf);
  w->buf = malloc(want);
  w->cap = w->buf ? want : 0;
  return w->buf ? 0 : -ENOMEM;
}

/* Hard disconnect after a protocol violation: the request stream can no
 * longer be parsed, so no further request or reply makes sense. */
static void conn_fail(struct conn *c, const char *why, int err)
{
  atomic_store(&c->quit, true);
  log_info("nbd: volume %s: connection %u: %s (%s), disconnecting",
           nbd_server_volume(c->srv), c->id, why,
           strerror(-err));
  shutdown(c->fd, SHUT_RDWR);
}

/* A block-status request: the callback's extents, checked, in w->buf. */
static int block_status(struct worker *w, const struct fc_export *exp,
                        const struct nbd_request *req)
{
  /* REQ_ONE: exactly one descriptor, no longer than asked (spec). */
  uint32_t max = req->flags & NBD_CMD_FLAG_REQ_ONE ? 1 : NBD_BS_MAX_EXTENTS;
  struct fc_extent *ext = (struct fc_extent *)w->buf;
  int r = exp->ops->block_status(exp->handle, req->count, req->offset, ext,
                                 max);

  if (r < 0)
    return r;
  if (nbd_extents_check(req, exp, ext, r, max) < 0) {
    log_error("nbd: the export's block status for off %llu len %u is "
              "malformed", (unsigned long long)req->offset, req->count);
    return -EIO;
  }
  w->nextents = (uint32_t)r;
  return 0;
}

static int dispatch(struct worker *w, const struct fc_export *exp,
                    const struct nbd_request *req)
{
  const struct fc_io_ops *ops = exp->ops;
  bool fua = req->flags & NBD_CMD_FLAG_FUA;
  uint8_t *buf = w->buf;
  int r;

  switch (req->type) {
  case NBD_CMD_READ:
    r = ops->pread(exp->handle, buf, req->count, req->offset);
    break;
  case NBD_CMD_WRITE:
    r = ops->pwrite(exp->handle, buf, req->count, req->offset, fua);
    break;
  case NBD_CMD_FLUSH:
    r = ops->flush(exp->handle);
    break;
  case NBD_CMD_TRIM:
    r = ops->trim(exp->handle, req->count, req->offset, fua);
    break;
  case NBD_CMD_WRITE_ZEROES:
    r = ops->zero(exp->handle, req->count, req->offset, fua,
                  !(req->flags & NBD_CMD_FLAG_NO_HOLE));
    break;
  case NBD_CMD_CACHE:
    r = ops->cache(exp->handle, req->count, req->offset);
    break;
  case NBD_CMD_BLOCK_STATUS:
    r = block_status(w, exp, req);
    break;
  default:
    r = -EINVAL;
  }
  return r > 0 ? 0 : nbd_export_errno(r);
}

/* The export's send timeout in seconds. */
static unsigned send_timeout_s(const struct fc_export *exp)
{
  return exp->send_timeout_s ? exp->send_timeout_s : NBD_SEND_TIMEOUT_DEFAULT_S;
}

/* Sends all of iov, failing with -ETIMEDOUT once the client has taken
 * nothing for timeout_s.  Not SO_SNDTIMEO: a send that made some
 * progress before it blocked returns that progress when the timeout
 * expires, and the next call would wait a whole timeout again. */
static int send_all(int fd, struct iovec *iov, int iovcnt, unsigned timeout_s)
{
  while (iovcnt > 0) {
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = (size_t)iovcnt };
    ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);

    if (n < 0) {
      struct pollfd pfd = { .fd = fd, .events = POLLOUT };
      int p;

      if (errno == EINTR)
        continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        return -errno;
      p = poll(&pfd, 1, (int)(timeout_s * 1000));
      if (p == 0)
        return -ETIMEDOUT;
      if (p < 0 && errno != EINTR)
        return -errno;
      continue;                 /* writable, or an error sendmsg reports */
    }
    fc_iov_advance(&iov, &iovcnt, (size_t)n);
  }
  return 0;
}

/* The reply's header and payload, in iov (returns 1 or 2 entries); hdr
 * has room for a chunk header and the offset or error after it. */
static int build_reply(const struct conn *c, const struct nbd_request *req,
                       int err, uint8_t *buf, uint32_t nextents, uint8_t *hdr,
                       struct iovec *iov)
{
  bool read = req->type == NBD_CMD_READ;
  uint32_t wire = nbd_errno_to_wire(err);

  /* Structured replies only where the spec requires them: reads and
   * block status.  Every other command may keep its simple reply. */
  if (!c->sess.structured ||
      (!read && req->type != NBD_CMD_BLOCK_STATUS)) {
    nbd_reply_encode(hdr, wire, req->cookie);
    iov[0] = (struct iovec){ hdr, NBD_SIMPLE_REPLY_SIZE };
    iov[1] = (struct iovec){ buf, req->count };
    return read && !err ? 2 : 1;
  }
  if (err) {
    /* NBD_REPLY_TYPE_ERROR: error, and an empty message. */
    nbd_chunk_encode(hdr, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR,
                     req->cookie, 6);
    nbd_put32(hdr + NBD_CHUNK_HDR_SIZE, wire);
    nbd_put16(hdr + NBD_CHUNK_HDR_SIZE + 4, 0);
    iov[0] = (struct iovec){ hdr, NBD_CHUNK_HDR_SIZE + 6 };
    return 1;
  }
  if (read) {
    /* One NBD_REPLY_TYPE_OFFSET_DATA chunk for the whole read. */
    nbd_chunk_encode(hdr, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_OFFSET_DATA,
                     req->cookie, 8 + req->count);
    nbd_put64(hdr + NBD_CHUNK_HDR_SIZE, req->offset);
    iov[0] = (struct iovec){ hdr, NBD_CHUNK_HDR_SIZE + 8 };
    iov[1] = (struct iovec){ buf, req->count };
    return 2;
  }
  nbd_chunk_encode(hdr, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_BLOCK_STATUS,
                   req->cookie, 4 + nextents * 8);
  nbd_put32(hdr + NBD_CHUNK_HDR_SIZE, NBD_META_ID_BASE_ALLOCATION);
  nbd_extents_encode((struct fc_extent *)buf, nextents);
  iov[0] = (struct iovec){ hdr, NBD_CHUNK_HDR_SIZE + 4 };
  iov[1] = (struct iovec){ buf, nextents * 8 };
  return 2;
}

/* Sends iov whole, taking write_lock for it (so the caller must not hold
 * it); a failure drops the connection. */
static int send_whole(struct conn *c, struct iovec *iov, int n)
{
  FC_ASSERT_NOT_HELD(&c->write_lock);
  int r;

  pthread_mutex_lock(&c->write_lock);
  r = send_all(c->fd, iov, n, send_timeout_s(&c->srv->exp));
  pthread_mutex_unlock(&c->write_lock);
  if (r == -ETIMEDOUT)
    log_info("nbd: volume %s: connection %u: client did not read its replies for %d s, "
             "dropping it", nbd_server_volume(c->srv), c->id, send_timeout_s(&c->srv->exp));
  if (r < 0) {
    /* A partial reply desynchronises the stream; stop the readers too. */
    log_debug("nbd: volume %s: connection %u: sending reply: %s",
              nbd_server_volume(c->srv), c->id, strerror(-r));
    atomic_store(&c->quit, true);
    shutdown(c->fd, SHUT_RDWR);
  }
  return r;
}

static void log_failed(const struct conn *c, const struct nbd_request *req,
                       int err)
{
  if (err)
    log_debug("nbd: volume %s: connection %u: cmd %u off %llu len %u: %s",
              nbd_server_volume(c->srv), c->id,
              req->type, (unsigned long long)req->offset, req->count,
              strerror(-err));
}

static int send_reply(struct conn *c, const struct nbd_request *req, int err,
                      uint8_t *buf, uint32_t nextents)
{
  uint8_t hdr[NBD_CHUNK_HDR_SIZE + 8];
  /* Header and data in one sendmsg: one syscall, and no chance of
   * another worker's reply landing between them. */
  struct iovec iov[2];
  int n = build_reply(c, req, err, buf, nextents, hdr, iov);

  log_failed(c, req, err);
  return send_whole(c, iov, n);
}

/* The replies the reader gathered (c->obuf), sent as one. */
static int out_flush(struct conn *c)
{
  struct iovec iov = { .iov_base = c->obuf, .iov_len = c->olen };

  if (c->olen == 0)
    return 0;
  c->olen = 0;
  return send_whole(c, &iov, 1);
}

/* The reply to a read the reader served, added to the gathered ones
 * (copied: a 4 KiB copy costs less than a system call and the client's
 * wake-up it saves). */
static int out_add(struct conn *c, const struct nbd_request *req, int err,
                   const uint8_t *buf)
{
  uint8_t hdr[NBD_CHUNK_HDR_SIZE + 8];
  struct iovec iov[2];
  int n = build_reply(c, req, err, (uint8_t *)buf, 0, hdr, iov), r;
  size_t len = iov[0].iov_len + (n > 1 ? iov[1].iov_len : 0);

  log_failed(c, req, err);
  /* Never more than OUTBUF_SIZE: reads served here are INLINE_READ_MAX
   * at most. */
  if (c->olen + len > OUTBUF_SIZE && (r = out_flush(c)) < 0)
    return r;
  for (int i = 0; i < n; i++) {
    memcpy(c->obuf + c->olen, iov[i].iov_base, iov[i].iov_len);
    c->olen += iov[i].iov_len;
  }
  return 0;
}

/* Read the request header and any write payload, with read_lock held.
 * Returns 0 with *err possibly set to an errno the reply must carry, or
 * -1 when this worker should stop. */
static int read_request(struct worker *w, struct nbd_request *req, int *err)
{
  struct conn *c = w->c;
  const struct fc_export *exp = &c->srv->exp;
  uint8_t hdr[NBD_REQUEST_SIZE];
  uint64_t cost;
  int r;

  if (atomic_load(&c->quit))
    return -1;
  r = nbd_inbuf_read(&c->in, hdr, sizeof hdr);
  if (r == -ENODATA) {
    log_debug("nbd: volume %s: connection %u: client closed", nbd_server_volume(c->srv), c->id);
    atomic_store(&c->quit, true);
    return -1;
  }
  if (r < 0) {
    if (!atomic_load(&c->quit))
      conn_fail(c, "reading request header", r);
    return -1;
  }
  if (nbd_request_decode(hdr, req) < 0) {
    conn_fail(c, "bad request magic", -EPROTO);
    return -1;
  }
  if (req->type == NBD_CMD_DISC) {
    /* Siblings finish and answer what they hold, then everyone exits. */
    log_debug("nbd: volume %s: connection %u: NBD_CMD_DISC", nbd_server_volume(c->srv), c->id);
    atomic_store(&c->quit, true);
    return -1;
  }
  /* Before the payload is read or the reply buffer filled, and with
   * read_lock held: a full budget stops this connection's reading.  A
   * count the export refuses costs nothing (drained, or not served). */
  cost = request_cost(req, exp);
  if (req->count <= exp->max_block || cost > 0) {
    /* Gathered replies must not wait for the budget (or the client for
     * them): a client that reads them may be what frees it. */
    if (c->olen && budget_short(c, cost) && out_flush(c) < 0)
      return -1;
    budget_take(w, cost);
    /* The wait may have ended because the connection failed: a dropped
     * client's queued requests are not served. */
    if (atomic_load(&c->quit)) {
      budget_give(w);
      return -1;
    }
  }
  if (nbd_request_payload_len(req) == 0)
    return 0;
  if (nbd_inbuf_buffered(&c->in) < req->count && out_flush(c) < 0) {
    budget_give(w);
    return -1;
  }
  if (req->count > exp->max_block) {
    if (req->count > WRITE_DRAIN_MAX) {
      conn_fail(c, "write payload too large to skip", -EMSGSIZE);
      return -1;
    }
    *err = -EINVAL;
    r = nbd_inbuf_skip(&c->in, req->count);
  } else if (ensure_buf(w, req->count) < 0) {
    *err = -ENOMEM;
    r = nbd_inbuf_skip(&c->in, req->count);
  } else {
    r = nbd_inbuf_read(&c->in, w->buf, req->count);
  }
  if (r < 0) {
    conn_fail(c, "reading write payload", r == -ENODATA ? -ECONNRESET : r);
    return -1;
  }
  return 0;
}

/* The end of a pending read, on whichever thread ended it: queued for
 * the connection's sender, never sent here (see the top). */
static void read_ended(void *ctx, int err)
{
  struct pending_read *p = ctx;
  struct conn *c = p->c;

  p->err = err;
  p->next = NULL;
  /* c outlives this: its budget, which p holds, is not back yet. */
  pthread_mutex_lock(&c->ended_lock);
  *c->ended_tail = p;
  c->ended_tail = &p->next;
  pthread_cond_signal(&c->ended_cond);
  pthread_mutex_unlock(&c->ended_lock);
}

/* The connection's sender: the replies of its ended pending reads, in the
 * order they ended.  A client that takes none for the send timeout is
 * dropped by send_whole; the replies queued after it are then dropped
 * unsent, their budget given back. */
static void *sender_main(void *arg)
{
  struct conn *c = arg;

  pthread_mutex_lock(&c->ended_lock);
  for (;;) {
    struct pending_read *p = c->ended;
    uint64_t held;

    if (!p) {
      if (c->sender_stop)
        break;
      pthread_cond_wait(&c->ended_cond, &c->ended_lock);
      continue;
    }
    c->ended = p->next;
    if (!c->ended)
      c->ended_tail = &c->ended;
    pthread_mutex_unlock(&c->ended_lock);
    held = p->held;
    /* Sent even after a disconnect request: siblings answer what they
     * hold.  After a failure it fails at once. */
    (void)send_reply(c, &p->req, nbd_export_errno(p->err), p->buf, 0);
    free(p->buf);
    free(p);
    budget_return(c, held);
    pthread_mutex_lock(&c->ended_lock);
  }
  pthread_mutex_unlock(&c->ended_lock);
  return NULL;
}

static int sender_start(struct conn *c, pthread_t *t)
{
  pthread_mutex_init(&c->ended_lock, NULL);
  pthread_cond_init(&c->ended_cond, NULL);
  c->ended = NULL;
  c->ended_tail = &c->ended;
  c->sender_stop = false;
  return -pthread_create(t, NULL, sender_main, c);
}

static void sender_stop_unstarted(struct conn *c)
{
  pthread_cond_destroy(&c->ended_cond);
  pthread_mutex_destroy(&c->ended_lock);
}

/* After every pending read has ended and been sent. */
static void sender_stop(struct conn *c, pthread_t t)
{
  pthread_mutex_lock(&c->ended_lock);
  c->sender_stop = true;
  pthread_cond_signal(&c->ended_cond);
  pthread_mutex_unlock(&c->ended_lock);
  pthread_join(t, NULL);
  pthread_cond_destroy(&c->ended_cond);
  pthread_mutex_destroy(&c->ended_lock);
}

/* A read through pread_start (flags: FC_IO_NOWAIT or 0): 1 when it went
 * pending (the worker's buffer and budget are the pending read's now),
 * else 0 or -errno with w->buf filled as after dispatch(). */
static int read_start(struct worker *w, const struct fc_export *exp,
                      const struct nbd_request *req, unsigned flags)
{
  struct pending_read *p = w->spare;
  int r;

  if (!p && !(p = malloc(sizeof *p)))
    return flags & FC_IO_NOWAIT ? -EAGAIN : dispatch(w, exp, req);
  w->spare = p;
  *p = (struct pending_read){ .c = w->c, .req = *req, .buf = w->buf,
                              .held = w->held };
  r = exp->ops->pread_start(exp->handle, w->buf, req->count, req->offset,
                            read_ended, p, flags);
  if (r != 1)
    return r > 0 ? 0 : nbd_export_errno(r);
  /* p may be ended and freed already: nothing of it is touched again. */
  w->spare = NULL;
  w->buf = NULL;
  w->cap = 0;
  w->held = 0;
  return 1;
}

/* What every request passes before it is served: the errno its reply
 * carries (err, from reading it, first), or 0 with w->buf ready. */
static int admit(struct worker *w, const struct fc_export *exp,
                 const struct nbd_request *req, int err)
{
  /* shutdown() does not discard requests already queued in the socket,
   * so stop would otherwise keep running callbacks for them. */
  if (!err && atomic_load(&w->c->srv->stopping))
    err = -ESHUTDOWN;
  if (!err)
    err = nbd_request_validate(req, exp, &w->c->sess);
  if (!err && req->type == NBD_CMD_READ)
    err = exp->ops->pread_start ? ensure_read_buf(w, req->count)
                                : ensure_buf(w, req->count);
  if (!err && req->type == NBD_CMD_BLOCK_STATUS)
    err = ensure_buf(w, NBD_BS_MAX_EXTENTS * sizeof(struct fc_extent));
  return err;
}

/* Reply to a request this worker served and give its budget back; false
 * when the connection failed. */
static bool reply_and_release(struct worker *w, const struct nbd_request *req,
                              int err)
{
  int r = send_reply(w->c, req, err, w->buf, w->nextents);

  budget_give(w);
  if (w->cap > BUF_KEEP) {
    free(w->buf);
    w->buf = NULL;
    w->cap = 0;
  }
  return r == 0;
}

/* The same for a read the reader served: its reply gathered, its budget
 * back (the gathering buffer is the connection's, not the request's). */
static bool gather_and_release(struct worker *w,
                               const struct nbd_request *req, int err)
{
  int r = out_add(w->c, req, err, w->buf);

  budget_give(w);
  return r == 0;
}

/* The reader's part, with read_lock held: requests that can be served
 * without waiting are -- reads the export starts at the origin or
 * answers from memory (FC_IO_NOWAIT), replied to at once or by their end
 * -- and the reader reads on, so its siblings sleep on read_lock instead
 * of waking for every request.  The first request that may wait is left
 * in *req (1) for this worker to serve once read_lock is dropped, so that
 * a sibling reads meanwhile.  0: the worker should stop. */
static int read_until_blocking(struct worker *w, struct nbd_request *req,
                               int *err)
{
  struct conn *c = w->c;
  const struct fc_export *exp = &c->srv->exp;

  for (;;) {
    int r;

    if (nbd_inbuf_buffered(&c->in) < NBD_REQUEST_SIZE && out_flush(c) < 0)
      return 0;
    *err = 0;
    if (read_request(w, req, err) < 0) {
      (void)out_flush(c);
      return 0;
    }
    *err = admit(w, exp, req, *err);
    if (*err || req->type != NBD_CMD_READ || !exp->ops->pread_start ||
        req->count > INLINE_READ_MAX)
      return out_flush(c) < 0 ? 0 : 1;
    r = read_start(w, exp, req, FC_IO_NOWAIT);
    if (r == -EAGAIN)
      return out_flush(c) < 0 ? 0 : 1;
    if (r != 1 && !gather_and_release(w, req, r))
      return 0;
  }
}

/* Serve one request that may wait (after the reader's own); false when
 * the worker should exit. */
static bool serve_one(struct worker *w)
{
  struct conn *c = w->c;
  const struct fc_export *exp = &c->srv->exp;
  struct nbd_request req;
  int err = 0, r;

  pthread_mutex_lock(&c->read_lock);
  r = read_until_blocking(w, &req, &err);
  pthread_mutex_unlock(&c->read_lock);
  if (r == 0) {
    budget_give(w);
    return false;
  }
  if (!err && req.type == NBD_CMD_READ && exp->ops->pread_start) {
    r = read_start(w, exp, &req, 0);
    if (r == 1)
      return true;              /* its end replies */
    err = r;
  } else if (!err) {
    err = dispatch(w, exp, &req);
  }
  return reply_and_release(w, &req, err);
}

static void *worker_main(void *arg)
{
  struct worker *w = arg;

  while (serve_one(w))
    ;
  return NULL;
}

static void set_timeouts(int fd, int recv_s, int send_s)
{
  struct timeval rcv = { .tv_sec = recv_s }, snd = { .tv_sec = send_s };

  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof rcv);
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof snd);
}

void *nbd_conn_main(void *arg)
{
  struct conn *c = arg;
  struct nbd_server *srv = c->srv;
  struct worker *ws = NULL;
  pthread_t sender;
  bool sending = false;
  unsigned n = 0, i;
  int r;

  if (c->preconnected) {
    /* The kernel's client: the size and flags were given to it by whoever
     * handed it the other end, and it sends requests at once. */
    r = 1;
  } else {
    /* The accept thread enforces the whole handshake's deadline; these
     * only keep one call from outliving it. */
    set_timeouts(c->fd, NBD_HANDSHAKE_TIMEOUT_S, NBD_HANDSHAKE_TIMEOUT_S);
    r = nbd_handshake(c->fd, &srv->exp, &c->sess);
  }
  pthread_mutex_lock(&srv->lock);
  c->in_handshake = false;
  if (r == 1 && !nbd_server_claim_locked(srv, c))
    r = -EACCES;
  pthread_mutex_unlock(&srv->lock);
  if (r != 1) {
    if (r < 0)
      log_info("nbd: volume %s: connection %u: handshake failed: %s",
               nbd_server_volume(c->srv), c->id,
               strerror(-r));
    goto out;
  }
  if (atomic_load(&srv->stopping))
    goto out;
  if (srv->exp.ops->opened)
    srv->exp.ops->opened(srv->exp.handle, srv->path);
  /* An idle client is normal in transmission (no receive timeout; stop()
   * uses shutdown()); one that does not read its replies is not, and
   * send_all() times it out. */
  set_timeouts(c->fd, 0, 0);
  ws = calloc(srv->nthreads, sizeof *ws);
  c->obuf = malloc(OUTBUF_SIZE);
  if (!ws || !c->obuf || nbd_inbuf_init(&c->in, c->fd) < 0) {
    log_error("nbd: volume %s: connection %u: out of memory", nbd_server_volume(c->srv), c->id);
    goto out;
  }
  r = sender_start(c, &sender);
  if (r < 0) {
    log_error("nbd: volume %s: connection %u: cannot start its sender: %s",
              nbd_server_volume(c->srv), c->id,
              strerror(-r));
    sender_stop_unstarted(c);
    goto out;
  }
  sending = true;
  for (i = 0; i < srv->nthreads; i++)
    ws[i].c = c;
  log_debug("nbd: volume %s: connection %u: transmission phase", nbd_server_volume(c->srv), c->id);
  /* Fewer workers than asked for still serve correctly, just slower. */
  for (n = 1; n < srv->nthreads; n++) {
    if ((r = pthread_create(&ws[n].thread, NULL, worker_main, &ws[n]))) {
      log_warning("nbd: volume %s: connection %u: only %u workers: %s",
                  nbd_server_volume(c->srv), c->id, n,
                  strerror(r));
      break;
    }
  }
  worker_main(&ws[0]);
  for (i = 1; i < n; i++)
    pthread_join(ws[i].thread, NULL);
  for (i = 0; i < srv->nthreads; i++) {
    free(ws[i].buf);
    free(ws[i].spare);
  }
  /* The pending reads still end, and the sender sends their replies and
   * gives back their budget. */
  pthread_mutex_lock(&c->budget_lock);
  while (c->inflight > 0)
    pthread_cond_wait(&c->budget_cond, &c->budget_lock);
  pthread_mutex_unlock(&c->budget_lock);
out:
  if (sending)
    sender_stop(c, sender);
  free(ws);
  nbd_inbuf_free(&c->in);
  free(c->obuf);
  c->obuf = NULL;
  pthread_mutex_lock(&srv->lock);
  close(c->fd);
  c->fd = -1;
  c->done = true;
  srv->nconns--;
  srv->nowned -= c->owned;
  pthread_mutex_unlock(&srv->lock);
  log_info("nbd: volume %s: connection %u closed", nbd_server_volume(c->srv), c->id);
  return NULL;
}

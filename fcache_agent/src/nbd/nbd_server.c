/* NBD server: one listening unix socket, an accept thread, and per
 * connection a thread that negotiates and then serves requests together
 * with threads_per_conn - 1 sibling workers.
 *
 * The workers share the socket the way nbdkit's "parallel" thread model
 * does: whoever holds read_lock reads one whole request (header and write
 * payload), drops the lock so a sibling can read the next one, runs the
 * callback, and sends the whole reply under write_lock.  So up to
 * threads_per_conn requests per connection are in the callbacks at once,
 * and replies may go out of order, which the protocol allows.
 *
 * Lifetimes: only the accept thread adds connections and only it (lazily,
 * on the next accept) or nbd_server_stop joins finished ones.  A
 * connection's fd is closed under srv->lock, so stop can shutdown() every
 * open fd without racing against a close and a reused descriptor number.
 */
#include "nbd_server.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "nbd_handshake.h"
#include "nbd_proto.h"
#include "nbd_request.h"

/* Each connection costs threads_per_conn threads; a local client must not
 * be able to make us spawn thousands. */
#define MAX_CONNS 64u
#define MAX_THREADS_PER_CONN 64u
/* A client that stalls mid-handshake loses its socket after this. */
#define HANDSHAKE_TIMEOUT_S 30
/* The spec says payloads under 32 MiB SHOULD NOT be treated as a DoS, so
 * an over-max_block write up to that size is drained and refused; beyond
 * it we cannot afford to skip the payload and drop the connection. */
#define WRITE_DRAIN_MAX (32u * 1024 * 1024)
/* Worker buffers grow on demand; ones above this are not kept around. */
#define BUF_KEEP (1u * 1024 * 1024)
#define BUF_MIN (128u * 1024)

struct nbd_server;

struct conn {
  struct nbd_server *srv;
  struct conn *next;
  unsigned id;
  int fd;                     /* -1 once closed; close under srv->lock */
  pthread_t thread;           /* handshake, worker 0, joins its siblings */
  pthread_mutex_t read_lock;  /* one reader of the request stream */
  pthread_mutex_t write_lock; /* one writer of the reply stream */
  atomic_bool quit;           /* stop reading requests */
  bool done;                  /* thread finished; under srv->lock */
};

struct worker {
  struct conn *c;
  pthread_t thread;
  uint8_t *buf;               /* write payload / read data */
  size_t cap;
};

struct nbd_server {
  char *path;
  dev_t sock_dev;             /* to unlink only our own socket at stop */
  ino_t sock_ino;
  struct fc_export exp;
  unsigned nthreads;
  int listen_fd;
  int stop_fd;                /* eventfd: wakes the accept thread */
  pthread_t accept_thread;
  pthread_mutex_t lock;       /* conns, nconns, stopping, conn fd/done */
  struct conn *conns;
  unsigned nconns;            /* connections not yet done */
  unsigned next_id;
  atomic_bool stopping;       /* written under lock, read anywhere */
};

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

/* Hard disconnect after a protocol violation: the request stream can no
 * longer be parsed, so no further request or reply makes sense. */
static void conn_fail(struct conn *c, const char *why, int err)
{
  atomic_store(&c->quit, true);
  log_info("nbd: connection %u: %s (%s), disconnecting", c->id, why,
           strerror(-err));
  shutdown(c->fd, SHUT_RDWR);
}

static int dispatch(const struct fc_export *exp, const struct nbd_request *req,
                    uint8_t *buf)
{
  const struct fc_io_ops *ops = exp->ops;
  bool fua = req->flags & NBD_CMD_FLAG_FUA;
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
    r = ops->zero(exp->handle, req->count, req->offset, fua);
    break;
  default:
    r = -EINVAL;
  }
  return r > 0 ? 0 : r;
}

static int send_reply(struct conn *c, const struct nbd_request *req, int err,
                      const uint8_t *data)
{
  uint8_t hdr[NBD_SIMPLE_REPLY_SIZE];
  /* Header and data in one sendmsg: one syscall, and no chance of
   * another worker's reply landing between them. */
  struct iovec iov[2] = { { hdr, sizeof hdr }, { (void *)data, req->count } };
  int r;

  nbd_reply_encode(hdr, nbd_errno_to_wire(err), req->cookie);
  pthread_mutex_lock(&c->write_lock);
  r = nbd_send_full(c->fd, iov, req->type == NBD_CMD_READ && !err ? 2 : 1);
  pthread_mutex_unlock(&c->write_lock);
  if (r < 0) {
    /* A partial reply desynchronises the stream; stop the readers too. */
    log_debug("nbd: connection %u: sending reply: %s", c->id, strerror(-r));
    atomic_store(&c->quit, true);
    shutdown(c->fd, SHUT_RDWR);
  }
  return r;
}

/* Read the request header and any write payload, with read_lock held.
 * Returns 0 with *err possibly set to an errno the reply must carry, or
 * -1 when this worker should stop. */
static int read_request(struct worker *w, struct nbd_request *req, int *err)
{
  struct conn *c = w->c;
  const struct fc_export *exp = &c->srv->exp;
  uint8_t hdr[NBD_REQUEST_SIZE];
  int r;

  if (atomic_load(&c->quit))
    return -1;
  r = nbd_recv_full(c->fd, hdr, sizeof hdr);
  if (r == -ENODATA) {
    log_debug("nbd: connection %u: client closed", c->id);
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
    log_debug("nbd: connection %u: NBD_CMD_DISC", c->id);
    atomic_store(&c->quit, true);
    return -1;
  }
  if (nbd_request_payload_len(req) == 0)
    return 0;
  if (req->count > exp->max_block) {
    if (req->count > WRITE_DRAIN_MAX) {
      conn_fail(c, "write payload too large to skip", -EMSGSIZE);
      return -1;
    }
    *err = -EINVAL;
    r = nbd_recv_discard(c->fd, req->count);
  } else if (ensure_buf(w, req->count) < 0) {
    *err = -ENOMEM;
    r = nbd_recv_discard(c->fd, req->count);
  } else {
    r = nbd_recv_full(c->fd, w->buf, req->count);
  }
  if (r < 0) {
    conn_fail(c, "reading write payload", r == -ENODATA ? -ECONNRESET : r);
    return -1;
  }
  return 0;
}

/* Serve one request; false when the worker should exit. */
static bool serve_one(struct worker *w)
{
  struct conn *c = w->c;
  const struct fc_export *exp = &c->srv->exp;
  struct nbd_request req;
  int err = 0, r;

  pthread_mutex_lock(&c->read_lock);
  r = read_request(w, &req, &err);
  pthread_mutex_unlock(&c->read_lock);
  if (r < 0)
    return false;

  /* shutdown() does not discard requests already queued in the socket,
   * so stop would otherwise keep running callbacks for them. */
  if (!err && atomic_load(&c->srv->stopping))
    err = -ESHUTDOWN;
  if (!err)
    err = nbd_request_validate(&req, exp);
  if (!err && req.type == NBD_CMD_READ)
    err = ensure_buf(w, req.count);
  if (!err)
    err = dispatch(exp, &req, w->buf);
  if (err)
    log_debug("nbd: connection %u: cmd %u off %llu len %u: %s", c->id,
              req.type, (unsigned long long)req.offset, req.count,
              strerror(-err));
  r = send_reply(c, &req, err, w->buf);
  if (w->cap > BUF_KEEP) {
    free(w->buf);
    w->buf = NULL;
    w->cap = 0;
  }
  return r == 0;
}

static void *worker_main(void *arg)
{
  struct worker *w = arg;

  while (serve_one(w))
    ;
  return NULL;
}

static void set_timeouts(int fd, int seconds)
{
  struct timeval tv = { .tv_sec = seconds };

  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static void *conn_main(void *arg)
{
  struct conn *c = arg;
  struct nbd_server *srv = c->srv;
  struct worker *ws = NULL;
  unsigned n = 0, i;
  int r;

  set_timeouts(c->fd, HANDSHAKE_TIMEOUT_S);
  r = nbd_handshake(c->fd, &srv->exp);
  if (r != 1) {
    if (r < 0)
      log_info("nbd: connection %u: handshake failed: %s", c->id,
               strerror(-r));
    goto out;
  }
  if (atomic_load(&srv->stopping))
    goto out;
  /* An idle client is normal in transmission; stop() uses shutdown(). */
  set_timeouts(c->fd, 0);
  ws = calloc(srv->nthreads, sizeof *ws);
  if (!ws) {
    log_error("nbd: connection %u: out of memory", c->id);
    goto out;
  }
  for (i = 0; i < srv->nthreads; i++)
    ws[i].c = c;
  log_debug("nbd: connection %u: transmission phase", c->id);
  /* Fewer workers than asked for still serve correctly, just slower. */
  for (n = 1; n < srv->nthreads; n++) {
    if ((r = pthread_create(&ws[n].thread, NULL, worker_main, &ws[n]))) {
      log_warning("nbd: connection %u: only %u workers: %s", c->id, n,
                  strerror(r));
      break;
    }
  }
  worker_main(&ws[0]);
  for (i = 1; i < n; i++)
    pthread_join(ws[i].thread, NULL);
  for (i = 0; i < srv->nthreads; i++)
    free(ws[i].buf);
out:
  free(ws);
  pthread_mutex_lock(&srv->lock);
  close(c->fd);
  c->fd = -1;
  c->done = true;
  srv->nconns--;
  pthread_mutex_unlock(&srv->lock);
  log_info("nbd: connection %u closed", c->id);
  return NULL;
}

static void conn_free(struct conn *c)
{
  pthread_mutex_destroy(&c->read_lock);
  pthread_mutex_destroy(&c->write_lock);
  free(c);
}

/* Join connections whose threads have finished. */
static void reap(struct nbd_server *srv)
{
  struct conn **pp, *dead = NULL, *c;

  pthread_mutex_lock(&srv->lock);
  for (pp = &srv->conns; (c = *pp);) {
    if (c->done) {
      *pp = c->next;
      c->next = dead;
      dead = c;
    } else {
      pp = &c->next;
    }
  }
  pthread_mutex_unlock(&srv->lock);
  while ((c = dead)) {
    dead = c->next;
    pthread_join(c->thread, NULL);
    conn_free(c);
  }
}

static void add_conn(struct nbd_server *srv, int fd)
{
  struct conn *c = calloc(1, sizeof *c);
  int r;

  if (!c) {
    log_error("nbd: out of memory accepting a connection");
    close(fd);
    return;
  }
  c->srv = srv;
  c->fd = fd;
  atomic_init(&c->quit, false);
  pthread_mutex_init(&c->read_lock, NULL);
  pthread_mutex_init(&c->write_lock, NULL);

  pthread_mutex_lock(&srv->lock);
  if (atomic_load(&srv->stopping) || srv->nconns >= MAX_CONNS) {
    pthread_mutex_unlock(&srv->lock);
    if (!atomic_load(&srv->stopping))
      log_warning("nbd: %s: %u connections already, refusing another",
                  srv->path, MAX_CONNS);
    goto fail;
  }
  c->id = ++srv->next_id;
  /* Created under the lock so the list never holds a conn without a
   * thread; the new thread takes the lock only when it finishes. */
  if ((r = pthread_create(&c->thread, NULL, conn_main, c))) {
    pthread_mutex_unlock(&srv->lock);
    log_error("nbd: cannot start connection thread: %s", strerror(r));
    goto fail;
  }
  c->next = srv->conns;
  srv->conns = c;
  srv->nconns++;
  pthread_mutex_unlock(&srv->lock);
  log_info("nbd: %s: connection %u opened", srv->path, c->id);
  return;
fail:
  close(fd);
  conn_free(c);
}

static void *accept_main(void *arg)
{
  struct nbd_server *srv = arg;
  struct pollfd pfd[2] = { { .fd = srv->listen_fd, .events = POLLIN },
                           { .fd = srv->stop_fd, .events = POLLIN } };
  bool starved = false;

  for (;;) {
    int fd;

    if (poll(pfd, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      log_error("nbd: %s: poll: %s", srv->path, strerror(errno));
      break;
    }
    if (pfd[1].revents)
      break;
    fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED)
        continue;
      /* Out of fds or memory: the client stays queued and poll would
       * report it again at once, so back off instead of spinning, and
       * log only the first failure of a streak. */
      if (!starved)
        log_error("nbd: %s: accept: %s", srv->path, strerror(errno));
      starved = true;
      (void)poll(&pfd[1], 1, 100);
      if (pfd[1].revents)
        break;
      continue;
    }
    starved = false;
    reap(srv);
    add_conn(srv, fd);
  }
  return NULL;
}

/* Bind, restrict, then listen: nobody can connect before the mode is set. */
static int open_listener(struct nbd_server *srv, unsigned mode)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  struct stat st;
  int fd;

  if (strlen(srv->path) >= sizeof sa.sun_path)
    return -ENAMETOOLONG;
  strcpy(sa.sun_path, srv->path);
  /* Replace a stale socket, but never some other file at that path. */
  if (lstat(srv->path, &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return -EEXIST;
    if (unlink(srv->path) < 0)
      return -errno;
  }
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -errno;
  srv->listen_fd = fd;
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
    return -errno;
  if (chmod(srv->path, (mode_t)mode) < 0 || listen(fd, 128) < 0 ||
      stat(srv->path, &st) < 0) {
    int err = -errno;
    unlink(srv->path);
    return err;
  }
  srv->sock_dev = st.st_dev;
  srv->sock_ino = st.st_ino;
  return 0;
}

static void unlink_own_socket(const struct nbd_server *srv)
{
  struct stat st;

  if (lstat(srv->path, &st) == 0 && st.st_dev == srv->sock_dev &&
      st.st_ino == srv->sock_ino)
    unlink(srv->path);
}

static void server_free(struct nbd_server *srv)
{
  if (srv->listen_fd >= 0)
    close(srv->listen_fd);
  if (srv->stop_fd >= 0)
    close(srv->stop_fd);
  pthread_mutex_destroy(&srv->lock);
  free(srv->path);
  free(srv);
}

struct nbd_server *nbd_server_start(const char *socket_path, unsigned mode,
                                    const struct fc_export *exp,
                                    unsigned threads_per_conn)
{
  struct nbd_server *srv = NULL;
  const char *why = NULL;
  int err;

  if (!socket_path || threads_per_conn < 1 ||
      threads_per_conn > MAX_THREADS_PER_CONN) {
    why = "bad socket path or thread count";
    err = -EINVAL;
    goto fail;
  }
  if ((err = nbd_export_check(exp, &why)) < 0)
    goto fail;
  if (exp->size % exp->min_block)
    log_warning("nbd: export '%s': size is not a multiple of %u; the tail "
                "is unreachable", exp->name, exp->min_block);
  if (!(srv = calloc(1, sizeof *srv))) {
    err = -ENOMEM;
    goto fail;
  }
  srv->listen_fd = srv->stop_fd = -1;
  atomic_init(&srv->stopping, false);
  pthread_mutex_init(&srv->lock, NULL);
  srv->exp = *exp;
  srv->nthreads = threads_per_conn;
  if (!(srv->path = strdup(socket_path))) {
    err = -ENOMEM;
    goto fail;
  }
  if ((srv->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0) {
    err = -errno;
    goto fail;
  }
  if ((err = open_listener(srv, mode)) < 0)
    goto fail;
  if ((err = -pthread_create(&srv->accept_thread, NULL, accept_main, srv))) {
    unlink_own_socket(srv);
    goto fail;
  }
  log_info("nbd: serving export '%s' (%llu bytes%s) on %s", exp->name,
           (unsigned long long)exp->size, exp->read_only ? ", read-only" : "",
           socket_path);
  return srv;
fail:
  log_error("nbd: cannot serve on %s: %s", socket_path ? socket_path : "(null)",
            why ? why : strerror(-err));
  if (srv)
    server_free(srv);
  errno = -err;
  return NULL;
}

void nbd_server_stop(struct nbd_server *srv)
{
  const uint64_t one = 1;
  struct conn *c;

  if (!srv)
    return;
  pthread_mutex_lock(&srv->lock);
  atomic_store(&srv->stopping, true);
  pthread_mutex_unlock(&srv->lock);
  if (write(srv->stop_fd, &one, sizeof one) < 0)
    log_error("nbd: %s: waking accept thread: %s", srv->path, strerror(errno));
  pthread_join(srv->accept_thread, NULL);
  unlink_own_socket(srv);

  /* Wake every blocked recv/send; callbacks already running finish and
   * their replies fail harmlessly. */
  pthread_mutex_lock(&srv->lock);
  for (c = srv->conns; c; c = c->next)
    if (c->fd >= 0)
      shutdown(c->fd, SHUT_RDWR);
  pthread_mutex_unlock(&srv->lock);
  /* The accept thread is gone, so nothing else touches the list now. */
  while ((c = srv->conns)) {
    srv->conns = c->next;
    pthread_join(c->thread, NULL);
    conn_free(c);
  }
  log_info("nbd: stopped serving %s", srv->path);
  server_free(srv);
}

unsigned nbd_server_connections(struct nbd_server *srv)
{
  unsigned n;

  pthread_mutex_lock(&srv->lock);
  n = srv->nconns;
  pthread_mutex_unlock(&srv->lock);
  return n;
}

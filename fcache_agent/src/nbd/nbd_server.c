/* SPDX-License-Identifier: Apache-2.0 */
/* NBD server: one listening unix socket, an accept thread, and per
 * connection a thread that negotiates and then serves requests together
 * with threads_per_conn - 1 sibling workers.
 *
 * A connection's own work (handshake, workers, replies) is in nbd_conn.c.
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
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/lockcheck.h"
#include "common/log.h"
#include "nbd_conn.h"
#include "nbd_request.h"

/* Each connection costs threads_per_conn threads; a local client must not
 * be able to make us spawn thousands (NBD_MAX_CONNS in nbd_conn.h). */
#define MAX_THREADS_PER_CONN 64u

static void conn_free(struct conn *c)
{
  pthread_mutex_destroy(&c->read_lock);
  pthread_mutex_destroy(&c->write_lock);
  pthread_mutex_destroy(&c->budget_lock);
  pthread_cond_destroy(&c->budget_cond);
  free(c);
}

static long long ms_until(const struct timespec *t, const struct timespec *now)
{
  return (long long)(t->tv_sec - now->tv_sec) * 1000 +
         (t->tv_nsec - now->tv_nsec) / 1000000;
}

/* Shuts down the connections past their handshake deadline; returns the
 * milliseconds until the next deadline, or -1 if none is pending.  Run
 * by the accept thread, so one slow client costs no thread of its own to
 * watch. */
static int expire_handshakes(struct nbd_server *srv)
{
  struct timespec now;
  long long next = -1;

  clock_gettime(CLOCK_MONOTONIC, &now);
  pthread_mutex_lock(&srv->lock);
  for (struct conn *c = srv->conns; c; c = c->next) {
    long long left;

    if (!c->in_handshake || c->fd < 0)
      continue;
    left = ms_until(&c->hs_deadline, &now);
    if (left <= 0) {
      log_info("nbd: volume %s: connection %u did not finish its handshake within "
               "%d s, closing it", nbd_server_volume(srv), c->id, NBD_HANDSHAKE_TIMEOUT_S);
      c->in_handshake = false;
      shutdown(c->fd, SHUT_RDWR);
    } else if (next < 0 || left < next) {
      next = left;
    }
  }
  pthread_mutex_unlock(&srv->lock);
  return next < 0 ? -1 : (int)(next + 1);
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

/* The session of the client on fd (its pid at connect()), or -1 with
 * the reason logged.  The pid is looked up at once, so a reused pid
 * would need the client to exit in between. */
static pid_t peer_session(struct nbd_server *srv, int fd, pid_t *pid)
{
  struct ucred cred;
  socklen_t len = sizeof cred;
  pid_t sid;

  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
      (sid = getsid(cred.pid)) < 0) {
    log_warning("nbd: volume %s: cannot tell which session a client belongs to "
                "(%s); refused", nbd_server_volume(srv), strerror(errno));
    return -1;
  }
  *pid = cred.pid;
  return sid;
}

/* Under srv->lock: does the export's holder still count?  It does while
 * one of its connections is open and it has not exited: connections still
 * closing after their client died (a QEMU destroyed and started again at
 * once) do not hold it.  Not the session's leader: libvirt's is the
 * short-lived parent of QEMU. */
static bool owner_holds_locked(const struct nbd_server *srv)
{
  FC_ASSERT_HELD(&srv->lock);
  return srv->nowned > 0 &&
         !(kill(srv->owner_pid, 0) < 0 && errno == ESRCH);
}

/* Under srv->lock, for an export that serves one session at a time: may
 * the client on fd start a handshake?  Only if nobody holds the export or
 * it is of the holder's session.  A session is what the kernel groups a
 * process and its children in; a process cannot join another's, so
 * another VM's QEMU (libvirt starts each in its own) is refused however
 * it got to the socket.  Nothing is pinned here: a client that connects
 * first but cannot name the export must not lock out the one that can. */
static bool admit_session_locked(struct nbd_server *srv, int fd)
{
  FC_ASSERT_HELD(&srv->lock);
  pid_t pid, sid = peer_session(srv, fd, &pid);

  if (sid < 0)
    return false;
  if (!owner_holds_locked(srv) || sid == srv->owner_sid)
    return true;
  log_warning("nbd: volume %s: refused a client (pid %d, session %d): the export "
              "is held by session %d, and serves one session at a time",
              nbd_server_volume(srv), (int)pid, (int)sid, (int)srv->owner_sid);
  return false;
}

bool nbd_server_claim_locked(struct nbd_server *srv, struct conn *c)
{
  FC_ASSERT_HELD(&srv->lock);
  pid_t pid, sid;

  if (!srv->exp.one_session)
    return true;
  if ((sid = peer_session(srv, c->fd, &pid)) < 0)
    return false;
  /* The first client to open the export pins it to its session until all
   * of that session's connections are gone (or its first client exited).
   * Two sessions that knew the name and raced through their handshakes:
   * the second is refused here. */
  if (!owner_holds_locked(srv)) {
    srv->owner_sid = sid;
    srv->owner_pid = pid;
  } else if (sid != srv->owner_sid) {
    log_warning("nbd: volume %s: refused connection %u (pid %d, session %d) after "
                "its handshake: the export is held by session %d, and serves "
                "one session at a time", nbd_server_volume(srv), c->id, (int)pid, (int)sid,
                (int)srv->owner_sid);
    return false;
  }
  c->owned = true;
  srv->nowned++;
  return true;
}

/* Serve fd (ours from here on): a handshake first unless preconnected.
 * 0 or -errno (logged), fd then closed. */
static int add_conn(struct nbd_server *srv, int fd, bool preconnected)
{
  struct conn *c = calloc(1, sizeof *c);
  int r, err;

  if (!c) {
    log_error("nbd: out of memory accepting a connection");
    close(fd);
    return -ENOMEM;
  }
  c->srv = srv;
  c->fd = fd;
  c->preconnected = preconnected;
  atomic_init(&c->quit, false);
  pthread_mutex_init(&c->read_lock, NULL);
  pthread_mutex_init(&c->write_lock, NULL);
  pthread_mutex_init(&c->budget_lock, NULL);
  pthread_cond_init(&c->budget_cond, NULL);

  pthread_mutex_lock(&srv->lock);
  if (atomic_load(&srv->stopping) || srv->nconns >= NBD_MAX_CONNS) {
    err = atomic_load(&srv->stopping) ? -ESHUTDOWN : -EBUSY;
    pthread_mutex_unlock(&srv->lock);
    if (err == -EBUSY)
      log_warning("nbd: volume %s: %u connections already (the limit per export), "
                  "refusing another", nbd_server_volume(srv), NBD_MAX_CONNS);
    goto fail;
  }
  if (srv->exp.one_session && !admit_session_locked(srv, fd)) {
    pthread_mutex_unlock(&srv->lock);
    err = -EACCES;
    goto fail;
  }
  c->id = ++srv->next_id;
  /* A preconnected socket has no handshake, so no deadline for it. */
  c->in_handshake = !preconnected;
  clock_gettime(CLOCK_MONOTONIC, &c->hs_deadline);
  c->hs_deadline.tv_sec += NBD_HANDSHAKE_TIMEOUT_S;
  /* Created under the lock so the list never holds a conn without a
   * thread; the new thread takes the lock only when it finishes. */
  if ((r = pthread_create(&c->thread, NULL, nbd_conn_main, c))) {
    pthread_mutex_unlock(&srv->lock);
    log_error("nbd: cannot start connection thread: %s", strerror(r));
    err = -EAGAIN;
    goto fail;
  }
  c->next = srv->conns;
  srv->conns = c;
  srv->nconns++;
  pthread_mutex_unlock(&srv->lock);
  log_info("nbd: volume %s: connection %u opened%s", nbd_server_volume(srv), c->id,
           preconnected ? " (in transmission, no handshake)" : "");
  return 0;
fail:
  close(fd);
  conn_free(c);
  return err;
}

static void *accept_main(void *arg)
{
  struct nbd_server *srv = arg;
  struct pollfd pfd[2] = { { .fd = srv->listen_fd, .events = POLLIN },
                           { .fd = srv->stop_fd, .events = POLLIN } };
  bool starved = false;

  for (;;) {
    int fd, timeout = expire_handshakes(srv);

    if (poll(pfd, 2, timeout) < 0) {
      if (errno == EINTR)
        continue;
      log_error("nbd: volume %s: poll: %s", nbd_server_volume(srv), strerror(errno));
      break;
    }
    if (pfd[1].revents)
      break;
    if (!(pfd[0].revents & POLLIN))
      continue;                 /* a handshake deadline passed */
    fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED)
        continue;
      /* Out of fds or memory: the client stays queued and poll would
       * report it again at once, so back off instead of spinning, and
       * log only the first failure of a streak. */
      if (!starved)
        log_error("nbd: volume %s: accept: %s", nbd_server_volume(srv), strerror(errno));
      starved = true;
      (void)poll(&pfd[1], 1, 100);
      if (pfd[1].revents)
        break;
      continue;
    }
    starved = false;
    reap(srv);
    (void)add_conn(srv, fd, false);
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

/* What a listening server and one fed connected sockets share: the
 * export checked, no socket yet (the caller opens the listener, or the
 * sockets arrive by nbd_server_serve_socket). */
static int server_new(const char *path, const struct fc_export *exp,
                      unsigned threads_per_conn, struct nbd_server **out,
                      const char **why)
{
  struct nbd_server *srv;
  int err = nbd_export_check(exp, why);

  if (err < 0)
    return err;
  if (!(srv = calloc(1, sizeof *srv)))
    return -ENOMEM;
  srv->listen_fd = srv->stop_fd = -1;
  atomic_init(&srv->stopping, false);
  pthread_mutex_init(&srv->lock, NULL);
  srv->exp = *exp;
  srv->nthreads = threads_per_conn;
  *out = srv;
  if (!(srv->path = strdup(path)))
    return -ENOMEM;
  return 0;
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
  if ((err = server_new(socket_path, exp, threads_per_conn, &srv, &why)) < 0)
    goto fail;
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
  log_info("nbd: serving export '%s' (%llu bytes%s) on %s",
           exp->secret_name ? "(secret name)" : exp->name,
           (unsigned long long)fc_export_size(exp), exp->read_only ? ", read-only" : "",
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

struct nbd_server *nbd_server_start_connected(const char *label,
                                              const struct fc_export *exp,
                                              unsigned threads_per_conn)
{
  struct nbd_server *srv = NULL;
  const char *why = NULL;
  int err;

  if (!label || threads_per_conn < 1 ||
      threads_per_conn > MAX_THREADS_PER_CONN || (exp && exp->one_session)) {
    why = "bad label, thread count, or a one-session export";
    err = -EINVAL;
    goto fail;
  }
  if ((err = server_new(label, exp, threads_per_conn, &srv, &why)) < 0)
    goto fail;
  log_info("nbd: serving %s (%llu bytes%s) on sockets in transmission",
           label, (unsigned long long)fc_export_size(exp),
           exp->read_only ? ", read-only" : "");
  return srv;
fail:
  log_error("nbd: cannot serve %s: %s", label ? label : "(null)",
            why ? why : strerror(-err));
  if (srv)
    server_free(srv);
  errno = -err;
  return NULL;
}

int nbd_server_serve_socket(struct nbd_server *srv, int fd)
{
  if (srv->exp.one_session) {
    close(fd);
    return -EINVAL;
  }
  /* No accept thread reaps a server that does not listen: the finished
   * connections (a socket the kernel gave up) are joined here. */
  if (srv->listen_fd < 0)
    reap(srv);
  return add_conn(srv, fd, true);
}

uint16_t nbd_server_tflags(const struct fc_export *exp)
{
  return nbd_export_tflags(exp);
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
  if (srv->listen_fd >= 0) {
    if (write(srv->stop_fd, &one, sizeof one) < 0)
      log_error("nbd: volume %s: waking accept thread: %s", nbd_server_volume(srv),
                strerror(errno));
    pthread_join(srv->accept_thread, NULL);
    unlink_own_socket(srv);
  }

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

void nbd_server_grow(struct nbd_server *srv, uint64_t size)
{
  __atomic_store_n(&srv->exp.size, size, __ATOMIC_RELEASE);
  log_info("nbd: export %s grew to %llu bytes", srv->path,
           (unsigned long long)size);
}

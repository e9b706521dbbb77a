/* SPDX-License-Identifier: Apache-2.0 */
/* Control socket server: see control.h for the protocol.
 *
 * One accept thread plus one thread per connection: control traffic is
 * rare and handlers may block (a volume create can wait on the origin), so
 * this is simpler than an event loop and a slow handler never stalls other
 * operators.  Connections are capped so a runaway script cannot exhaust
 * threads in the data-plane process, and shared so that nobody else can
 * keep the agent's masters out: ADMIN_RESERVED slots are only for admins
 * (root, the agent's user, control_admin_group: nova-compute), and any
 * other user holds at most PER_UID_MAX.  fc_control_stop() wakes the
 * accept thread through an eventfd, then shutdown()s every client socket,
 * which makes a blocked recv() return 0 and a blocked send() fail.
 *
 * One connection's requests and replies are in control_conn.c.
 */
#include "control.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "control_conn.h"

#define MAX_CONNECTIONS 32
/* Slots that only admins may take, whatever the others hold. */
#define ADMIN_RESERVED 8
/* Connections one non-admin uid may hold: its clients send one request
 * per connection, so a few cover a monitoring agent and a shell. */
#define PER_UID_MAX 4
#define LISTEN_BACKLOG 64

/* Joins and frees the connections whose threads have finished. */
static void reap_connections(struct fc_control *ctl, bool all)
{
  struct fc_conn *dead = NULL, **pp;

  pthread_mutex_lock(&ctl->lock);
  for (pp = &ctl->conns; *pp;) {
    struct fc_conn *c = *pp;
    if (all || c->done) {
      *pp = c->next;
      c->next = dead;
      dead = c;
    } else {
      pp = &c->next;
    }
  }
  pthread_mutex_unlock(&ctl->lock);

  while (dead) {
    struct fc_conn *c = dead;
    dead = c->next;
    pthread_join(c->thread, NULL);
    free(c);
  }
}

/* Starts a thread with every signal blocked, so that signals keep going to
 * main(), which is where the agent handles them. */
static int start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
  sigset_t all, old;
  int r;

  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  r = pthread_create(t, NULL, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return -r;
}

/* Why the connection of peer must wait, in msg; false if it may be
 * served.  Called with ctl->lock held. */
static bool over_limit(const struct fc_control *ctl,
                       const struct fc_peer *peer, char *msg, size_t size)
{
  unsigned others = 0, same_uid = 0;

  if (ctl->n_active >= MAX_CONNECTIONS) {
    snprintf(msg, size, "too many control connections (limit %d); "
             "try again later", MAX_CONNECTIONS);
    return true;
  }
  if (peer->admin)
    return false;
  for (const struct fc_conn *c = ctl->conns; c; c = c->next) {
    if (c->done || c->peer.admin)
      continue;
    others++;
    if (c->peer.uid == peer->uid)
      same_uid++;
  }
  if (same_uid >= PER_UID_MAX) {
    snprintf(msg, size, "too many control connections from uid %ld "
             "(limit %d per user); try again later", (long)peer->uid,
             PER_UID_MAX);
    return true;
  }
  if (others >= MAX_CONNECTIONS - ADMIN_RESERVED) {
    snprintf(msg, size, "too many control connections (limit %d, the "
             "other %d are kept for control_admin_group); try again later",
             MAX_CONNECTIONS - ADMIN_RESERVED, ADMIN_RESERVED);
    return true;
  }
  return false;
}

static void add_connection(struct fc_control *ctl, int fd)
{
  struct fc_conn *conn = calloc(1, sizeof *conn);
  char msg[ERR_MSG_MAX];
  bool full = false;
  int r = -ENOMEM;

  if (conn == NULL)
    goto fail_unlocked;
  conn->ctl = ctl;
  conn->fd = fd;
  /* Before the slot is chosen: which pool it comes from depends on who
   * the peer is. */
  fc_control_peer_identify(ctl, fd, &conn->peer);
  pthread_mutex_lock(&ctl->lock);
  full = over_limit(ctl, &conn->peer, msg, sizeof msg);
  r = -EAGAIN;
  if (full)
    goto fail;
  r = start_thread(&conn->thread, fc_control_conn_main, conn);
  if (r < 0)
    goto fail;
  conn->next = ctl->conns;
  ctl->conns = conn;
  ctl->n_active++;
  pthread_mutex_unlock(&ctl->lock);
  return;

fail:
  pthread_mutex_unlock(&ctl->lock);
fail_unlocked:
  if (!full)
    snprintf(msg, sizeof msg, "agent cannot serve the connection: %s",
             strerror(-r));
  log_warning("control: refusing connection from uid %ld: %s",
              conn ? (long)conn->peer.uid : -1L, msg);
  free(conn);
  if (full)
    fc_control_send_busy(fd, msg);
  else
    fc_control_send_error(fd, -r, "%s", msg);
  close(fd);
}

static void *accept_main(void *arg)
{
  struct fc_control *ctl = arg;
  struct pollfd pfd[2] = {
    { .fd = ctl->listen_fd, .events = POLLIN },
    { .fd = ctl->wake_fd, .events = POLLIN },
  };
  int timeout = -1;

  for (;;) {
    int fd;

    if (poll(pfd, 2, timeout) < 0) {
      if (errno == EINTR)
        continue;
      log_error("control: poll failed: %s", strerror(errno));
      break;
    }
    if (pfd[1].revents)
      break;
    timeout = -1;
    reap_connections(ctl, false);
    if (!(pfd[0].revents & POLLIN))
      continue;
    fd = accept4(ctl->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM) {
        /* Back off instead of spinning on a queue we cannot drain. */
        log_warning("control: accept failed: %s", strerror(errno));
        timeout = 100;
      }
      continue;                 /* EAGAIN, ECONNABORTED, EINTR: harmless */
    }
    add_connection(ctl, fd);
  }
  return NULL;
}

/* A socket file left by a crashed agent is removed; a live agent (one that
 * accepts connections) or a non-socket file at the path is not touched. */
static int remove_stale_socket(const struct sockaddr_un *addr)
{
  struct stat st;
  int fd, r;

  if (lstat(addr->sun_path, &st) < 0)
    return errno == ENOENT ? 0 : -errno;
  if (!S_ISSOCK(st.st_mode)) {
    log_error("control: %s exists and is not a socket; not removing it",
              addr->sun_path);
    return -EEXIST;
  }
  /* Non-blocking: a live agent with a full backlog answers EAGAIN. */
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -errno;
  r = connect(fd, (const struct sockaddr *)addr, sizeof *addr);
  if (r < 0 && errno == EAGAIN)
    r = 0;
  close(fd);
  if (r == 0) {
    log_error("control: another process is listening on %s",
              addr->sun_path);
    return -EADDRINUSE;
  }
  if (unlink(addr->sun_path) < 0 && errno != ENOENT)
    return -errno;
  return 0;
}

/* The socket is bound under a temporary name, given its permissions and
 * put to listen(), and only then renamed to its path: a client (or a test,
 * or nova-compute) that sees the path can connect at once, and there is
 * no window with the umask's looser mode. */
static int create_socket(struct fc_control *ctl, const char *group)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  struct sockaddr_un tmp = { .sun_family = AF_UNIX };
  struct stat st;
  bool bound = false;
  gid_t gid = 0;
  int r;

  if (group[0] != '\0') {
    r = fc_control_lookup_group(group, &gid);
    if (r < 0) {
      log_error("control: cannot use group '%s' for %s: %s", group,
                ctl->path, r == -ENOENT ? "no such group" : strerror(-r));
      return r;
    }
  }
  memcpy(addr.sun_path, ctl->path, sizeof addr.sun_path);
  r = snprintf(tmp.sun_path, sizeof tmp.sun_path, "%s~", ctl->path);
  if (r < 0 || (size_t)r >= sizeof tmp.sun_path) {
    log_error("control: socket path %s is too long to create it atomically",
              ctl->path);
    return -ENAMETOOLONG;
  }
  r = remove_stale_socket(&addr);
  if (r < 0) {
    if (r != -EEXIST && r != -EADDRINUSE)
      log_error("control: cannot remove old socket %s: %s", ctl->path,
                strerror(-r));
    return r;
  }
  unlink(tmp.sun_path);   /* left by an agent that crashed right here */
  ctl->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
                          SOCK_NONBLOCK, 0);
  if (ctl->listen_fd < 0)
    goto fail_errno;
  if (bind(ctl->listen_fd, (struct sockaddr *)&tmp, sizeof tmp) < 0)
    goto fail_errno;
  bound = true;
  /* The owner stays the creating user: root in production, which makes
   * it root:<group>, and tests can still run unprivileged. */
  if (group[0] != '\0' && chown(tmp.sun_path, (uid_t)-1, gid) < 0)
    goto fail_errno;
  if (chmod(tmp.sun_path, group[0] != '\0' ? 0660 : 0600) < 0 ||
      listen(ctl->listen_fd, LISTEN_BACKLOG) < 0 ||
      rename(tmp.sun_path, ctl->path) < 0)
    goto fail_errno;
  bound = false;
  if (stat(ctl->path, &st) < 0)
    goto fail_errno;
  ctl->sock_dev = st.st_dev;
  ctl->sock_ino = st.st_ino;
  return 0;

fail_errno:
  r = -errno;
  log_error("control: cannot set up socket %s: %s", ctl->path, strerror(-r));
  if (bound)
    unlink(tmp.sun_path);
  if (ctl->listen_fd >= 0)
    close(ctl->listen_fd);
  ctl->listen_fd = -1;
  return r;
}

static void unlink_own_socket(struct fc_control *ctl)
{
  struct stat st;

  if (lstat(ctl->path, &st) == 0 && st.st_dev == ctl->sock_dev &&
      st.st_ino == ctl->sock_ino)
    unlink(ctl->path);
}

/* Resolved once at start: a group that does not exist is a configuration
 * error to report now, not a refusal to puzzle over later. */
static int set_group(struct fc_access_group *g, const char *name,
                     const char *key)
{
  int r;

  if (!name || !name[0])
    return 0;
  if (strlen(name) >= sizeof g->name) {
    log_error("control: %s '%s' is too long", key, name);
    return -ENAMETOOLONG;
  }
  r = fc_control_lookup_group(name, &g->gid);
  if (r < 0) {
    log_error("control: cannot use group '%s' (%s): %s", name, key,
              r == -ENOENT ? "no such group" : strerror(-r));
    return r;
  }
  strcpy(g->name, name);
  g->set = true;
  return 0;
}

void fc_control_set_idle_timeout(struct fc_control *ctl, unsigned idle_s)
{
  atomic_store(&ctl->idle_s, idle_s ? idle_s : FC_CONTROL_IDLE_S);
}

struct fc_control *fc_control_start(const char *socket_path, const char *group,
                                    const char *admin_group,
                                    const struct fc_control_op *ops,
                                    void *opaque)
{
  struct fc_control *ctl;
  int r;

  if (strlen(socket_path) >= sizeof ctl->path) {
    log_error("control: socket path %s is longer than %zu bytes",
              socket_path, sizeof ctl->path - 1);
    errno = ENAMETOOLONG;
    return NULL;
  }
  ctl = calloc(1, sizeof *ctl);
  if (ctl == NULL) {
    log_error("control: out of memory");
    return NULL;                /* errno is ENOMEM */
  }
  ctl->ops = ops;
  ctl->opaque = opaque;
  ctl->listen_fd = -1;
  atomic_init(&ctl->idle_s, FC_CONTROL_IDLE_S);
  strcpy(ctl->path, socket_path);
  pthread_mutex_init(&ctl->lock, NULL);

  ctl->wake_fd = eventfd(0, EFD_CLOEXEC);
  if (ctl->wake_fd < 0) {
    r = -errno;
    log_error("control: eventfd: %s", strerror(-r));
    goto fail;
  }
  if ((r = set_group(&ctl->readers, group, "control_group")) < 0 ||
      (r = set_group(&ctl->admins, admin_group, "control_admin_group")) < 0)
    goto fail;
  r = create_socket(ctl, group ? group : "");
  if (r < 0)
    goto fail;
  r = start_thread(&ctl->accept_thread, accept_main, ctl);
  if (r < 0) {
    log_error("control: cannot start thread: %s", strerror(-r));
    unlink_own_socket(ctl);
    goto fail;
  }
  log_info("control: listening on %s", ctl->path);
  return ctl;

fail:
  if (ctl->listen_fd >= 0)
    close(ctl->listen_fd);
  if (ctl->wake_fd >= 0)
    close(ctl->wake_fd);
  pthread_mutex_destroy(&ctl->lock);
  free(ctl);
  errno = -r;
  return NULL;
}

void fc_control_stop(struct fc_control *ctl)
{
  uint64_t one = 1;

  if (ctl == NULL)
    return;
  if (write(ctl->wake_fd, &one, sizeof one) != sizeof one)
    log_error("control: cannot wake accept thread: %s", strerror(errno));
  pthread_join(ctl->accept_thread, NULL);

  /* No new connections can appear now; kick the remaining ones. */
  pthread_mutex_lock(&ctl->lock);
  for (struct fc_conn *c = ctl->conns; c; c = c->next)
    if (c->fd >= 0)
      shutdown(c->fd, SHUT_RDWR);
  pthread_mutex_unlock(&ctl->lock);
  reap_connections(ctl, true);

  unlink_own_socket(ctl);
  close(ctl->listen_fd);
  close(ctl->wake_fd);
  pthread_mutex_destroy(&ctl->lock);
  log_info("control: stopped");
  free(ctl);
}

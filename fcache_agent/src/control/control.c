/* Control socket server: see control.h for the protocol.
 *
 * One accept thread plus one thread per connection: control traffic is
 * rare and handlers may block (a volume create can wait on the origin), so
 * this is simpler than an event loop and a slow handler never stalls other
 * operators.  Connections are capped so a runaway script cannot exhaust
 * threads in the data-plane process.  fc_control_stop() wakes the accept
 * thread through an eventfd, then shutdown()s every client socket, which
 * makes a blocked recv() return 0 and a blocked send() fail.
 */
#include "control.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
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

#define MAX_CONNECTIONS 32
#define LISTEN_BACKLOG 64
#define ERR_MSG_MAX 512

struct fc_conn {
  struct fc_conn *next;
  struct fc_control *ctl;
  pthread_t thread;
  int fd;                       /* -1 once the thread has closed it */
  bool done;                    /* thread finished; join and free it */
};

struct fc_control {
  const struct fc_control_op *ops;
  void *opaque;
  int listen_fd;
  int wake_fd;                  /* eventfd: readable means "stop" */
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  dev_t sock_dev;               /* identity of our socket inode, so stop */
  ino_t sock_ino;               /* never unlinks someone else's socket */
  pthread_t accept_thread;
  pthread_mutex_t lock;         /* protects conns, n_active, conn->fd/done */
  struct fc_conn *conns;
  unsigned n_active;
};

/* Consumes the reference to resp.  MSG_NOSIGNAL: a client that hung up
 * must not kill the agent with SIGPIPE. */
static int send_json(int fd, json_t *resp)
{
  char *text = resp ? json_dumps(resp, JSON_COMPACT) : NULL;
  size_t len = text ? strlen(text) : 0;
  char *line = text ? realloc(text, len + 2) : NULL;
  size_t done = 0;
  int r = 0;

  json_decref(resp);
  if (line == NULL) {
    free(text);                 /* still ours if realloc failed */
    return -ENOMEM;
  }
  line[len++] = '\n';           /* one buffer, so the reply is one line */
  while (r == 0 && done < len) {
    ssize_t n = send(fd, line + done, len - done, MSG_NOSIGNAL);
    if (n >= 0)
      done += (size_t)n;
    else if (errno != EINTR)
      r = -errno;
  }
  free(line);
  return r;
}

static json_t *error_response(const char *msg, int err)
{
  json_t *jmsg = json_string(msg);

  /* Messages may quote the client's bytes (a parse error, a name cut in
   * the middle of a character): if that is not valid UTF-8, degrade to
   * ASCII rather than fail to answer at all. */
  if (jmsg == NULL) {
    char ascii[ERR_MSG_MAX];
    snprintf(ascii, sizeof ascii, "%s", msg);
    for (char *c = ascii; *c; c++)
      if ((unsigned char)*c >= 0x80)
        *c = '?';
    jmsg = json_string(ascii);
  }
  return json_pack("{s:b, s:o, s:i}", "ok", 0, "error", jmsg, "errno", err);
}

__attribute__((format(printf, 3, 4)))
static int send_error(int fd, int err, const char *fmt, ...)
{
  char msg[ERR_MSG_MAX];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return send_json(fd, error_response(msg, err));
}

static void list_ops(const struct fc_control *ctl, char *buf, size_t size)
{
  size_t len = 0;

  buf[0] = '\0';
  for (const struct fc_control_op *op = ctl->ops; op->name; op++) {
    int n = snprintf(buf + len, size - len, "%s%s", len ? ", " : "",
                     op->name);
    if (n < 0 || (size_t)n >= size - len)
      return;                   /* truncated list is still useful */
    len += (size_t)n;
  }
}

/* Handles one request line; returns < 0 only if the reply could not be
 * sent (the connection is then dead). */
static int handle_request(struct fc_control *ctl, int fd, const char *line,
                          size_t len)
{
  json_error_t jerr;
  json_t *req, *jop, *args, *result = NULL, *resp;
  const struct fc_control_op *op;
  char err[ERR_MSG_MAX];
  const char *name;
  int r;

  if (len == 0 || (len == 1 && line[0] == '\r'))
    return 0;                   /* friendly to people typing into socat */
  /* DECODE_ANY so that "5" gets "must be an object", not a parse error. */
  req = json_loadb(line, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES,
                   &jerr);
  if (req == NULL)
    return send_error(fd, EINVAL, "invalid JSON: %s (column %d)", jerr.text,
                      jerr.column);
  if (!json_is_object(req)) {
    r = send_error(fd, EINVAL, "request must be a JSON object");
    goto out;
  }
  jop = json_object_get(req, "op");
  if (!json_is_string(jop)) {
    r = send_error(fd, EINVAL, "request needs a string member 'op'");
    goto out;
  }
  name = json_string_value(jop);
  for (op = ctl->ops; op->name && strcmp(op->name, name) != 0; op++)
    ;
  if (op->name == NULL) {
    char known[ERR_MSG_MAX / 2];
    list_ops(ctl, known, sizeof known);
    r = send_error(fd, EOPNOTSUPP, "unknown operation '%.64s'; known: %s",
                   name, known);
    goto out;
  }
  args = json_object_get(req, "args");
  if (args == NULL) {
    /* Handlers always get an object, so they need no NULL checks. */
    json_object_set_new(req, "args", json_object());
    args = json_object_get(req, "args");
  }
  if (!json_is_object(args)) {
    r = send_error(fd, EINVAL, "'args' must be a JSON object");
    goto out;
  }

  log_debug("control: request '%s'", name);
  err[0] = '\0';
  r = op->handler(ctl->opaque, args, &result, err, sizeof err);
  err[sizeof err - 1] = '\0';

  if (r < 0) {
    json_decref(result);
    if (err[0] == '\0')
      snprintf(err, sizeof err, "%s", strerror(-r));
    log_info("control: '%s' failed: %s", name, err);
    resp = error_response(err, -r);
  } else {
    resp = json_pack("{s:b, s:o}", "ok", 1, "result",
                     result ? result : json_object());
  }
  r = send_json(fd, resp);
out:
  json_decref(req);
  return r;
}

static void log_peer(int fd)
{
  struct ucred cred;
  socklen_t len = sizeof cred;

  if (fc_log_enabled(FC_LOG_DEBUG) &&
      getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
    log_debug("control: connection from pid %ld uid %ld gid %ld",
              (long)cred.pid, (long)cred.uid, (long)cred.gid);
}

/* Reads newline-delimited requests.  The buffer holds one maximal message
 * plus its newline; if it fills up without a newline the message is too
 * big and, since we cannot find where it ends, the connection is closed. */
static void serve_connection(struct fc_control *ctl, int fd)
{
  const size_t cap = FC_CONTROL_MAX_MSG + 1;
  char *buf = malloc(cap);
  size_t len = 0;

  if (buf == NULL) {
    send_error(fd, ENOMEM, "out of memory");
    return;
  }
  for (;;) {
    ssize_t n = recv(fd, buf + len, cap - len, 0);
    size_t start = 0;
    char *nl;

    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;                    /* peer reset: nobody left to answer */
    if (n == 0) {
      /* A last request without newline, e.g. from "printf ... | socat". */
      if (len > 0)
        handle_request(ctl, fd, buf, len);
      break;
    }
    len += (size_t)n;
    while ((nl = memchr(buf + start, '\n', len - start)) != NULL) {
      size_t line_len = (size_t)(nl - (buf + start));
      if (handle_request(ctl, fd, buf + start, line_len) < 0)
        goto out;
      start += line_len + 1;
    }
    memmove(buf, buf + start, len - start);
    len -= start;
    if (len == cap) {
      send_error(fd, EMSGSIZE, "request larger than %d bytes",
                 FC_CONTROL_MAX_MSG);
      log_info("control: closing connection after oversized request");
      break;
    }
  }
out:
  free(buf);
}

static void *conn_main(void *arg)
{
  struct fc_conn *conn = arg;
  struct fc_control *ctl = conn->ctl;

  log_peer(conn->fd);
  serve_connection(ctl, conn->fd);

  /* Closed under the lock so fc_control_stop never shutdown()s an fd
   * number that has already been reused elsewhere. */
  pthread_mutex_lock(&ctl->lock);
  close(conn->fd);
  conn->fd = -1;
  conn->done = true;
  ctl->n_active--;
  pthread_mutex_unlock(&ctl->lock);
  return NULL;
}

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

static void add_connection(struct fc_control *ctl, int fd)
{
  struct fc_conn *conn = NULL;
  char msg[ERR_MSG_MAX];
  bool full;
  int r = -EAGAIN;

  pthread_mutex_lock(&ctl->lock);
  full = ctl->n_active >= MAX_CONNECTIONS;
  if (full)
    goto fail;
  conn = calloc(1, sizeof *conn);
  r = -ENOMEM;
  if (conn == NULL)
    goto fail;
  conn->ctl = ctl;
  conn->fd = fd;
  r = start_thread(&conn->thread, conn_main, conn);
  if (r < 0)
    goto fail;
  conn->next = ctl->conns;
  ctl->conns = conn;
  ctl->n_active++;
  pthread_mutex_unlock(&ctl->lock);
  return;

fail:
  pthread_mutex_unlock(&ctl->lock);
  free(conn);
  if (full)
    snprintf(msg, sizeof msg, "too many control connections (limit %d); "
             "try again later", MAX_CONNECTIONS);
  else
    snprintf(msg, sizeof msg, "agent cannot serve the connection: %s",
             strerror(-r));
  log_warning("control: refusing connection: %s", msg);
  send_error(fd, -r, "%s", msg);
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

static int lookup_group(const char *name, gid_t *gid)
{
  struct group grp, *res = NULL;
  char *buf = NULL;
  int r = ERANGE;

  /* A group with many members needs more than any fixed buffer. */
  for (size_t size = 1024; r == ERANGE && size <= (1u << 20); size *= 2) {
    char *nbuf = realloc(buf, size);
    if (nbuf == NULL) {
      r = ENOMEM;
      break;
    }
    buf = nbuf;
    r = getgrnam_r(name, &grp, buf, size, &res);
  }
  if (r == 0 && res == NULL)
    r = ENOENT;
  if (r == 0)
    *gid = grp.gr_gid;
  free(buf);
  return -r;
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
    r = lookup_group(group, &gid);
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

struct fc_control *fc_control_start(const char *socket_path, const char *group,
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
  strcpy(ctl->path, socket_path);
  pthread_mutex_init(&ctl->lock, NULL);

  ctl->wake_fd = eventfd(0, EFD_CLOEXEC);
  if (ctl->wake_fd < 0) {
    r = -errno;
    log_error("control: eventfd: %s", strerror(-r));
    goto fail;
  }
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

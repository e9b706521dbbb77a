/* SPDX-License-Identifier: Apache-2.0 */
/* One control connection: reading newline-delimited JSON requests,
 * finding each one's handler in the op table, and sending its reply.
 * Separate from control.c, which only owns the socket, accepts and keeps
 * the list of connections. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "control_conn.h"

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
int fc_control_send_error(int fd, int err, const char *fmt, ...)
{
  char msg[ERR_MSG_MAX];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return send_json(fd, error_response(msg, err));
}

int fc_control_send_busy(int fd, const char *msg)
{
  json_t *resp = error_response(msg, EAGAIN);

  if (resp)
    json_object_set_new(resp, "busy", json_true());
  return send_json(fd, resp);
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

/* Handles one request line; returns < 0 if the reply could not be sent
 * (the connection is then dead), 1 if the connection is to be closed
 * after it: a refused peer may not keep a slot by asking again. */
static int handle_request(struct fc_conn *conn, const char *line, size_t len)
{
  struct fc_control *ctl = conn->ctl;
  int fd = conn->fd;
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
    return fc_control_send_error(fd, EINVAL, "invalid JSON: %s (column %d)",
                                 jerr.text, jerr.column);
  if (!json_is_object(req)) {
    r = fc_control_send_error(fd, EINVAL, "request must be a JSON object");
    goto out;
  }
  jop = json_object_get(req, "op");
  if (!json_is_string(jop)) {
    r = fc_control_send_error(fd, EINVAL, "request needs a string member 'op'");
    goto out;
  }
  name = json_string_value(jop);
  for (op = ctl->ops; op->name && strcmp(op->name, name) != 0; op++)
    ;
  if (op->name == NULL) {
    char known[ERR_MSG_MAX / 2];
    list_ops(ctl, known, sizeof known);
    r = fc_control_send_error(fd, EOPNOTSUPP,
                              "unknown operation '%.64s'; known: %s", name,
                              known);
    goto out;
  }
  err[0] = '\0';
  r = fc_control_peer_allowed(ctl, &conn->peer, op, err, sizeof err);
  if (r < 0) {
    /* A warning: someone without the right asked; the volume, if any, is
     * named so that the refusal shows up in its history too. */
    const char *vol = json_string_value(json_object_get(json_object_get(req, "args"),
                                                        "volume_id"));
    log_warning("control: refused '%s'%s%s to pid %ld uid %ld", op->name,
                vol ? " of volume " : "", vol ? vol : "", (long)conn->peer.pid,
                (long)conn->peer.uid);
    r = fc_control_send_error(fd, -r, "%s", err);
    if (r == 0)
      r = 1;
    goto out;
  }
  args = json_object_get(req, "args");
  if (args == NULL) {
    /* Handlers always get an object, so they need no NULL checks. */
    json_object_set_new(req, "args", json_object());
    args = json_object_get(req, "args");
  }
  if (!json_is_object(args)) {
    r = fc_control_send_error(fd, EINVAL, "'args' must be a JSON object");
    goto out;
  }

  err[0] = '\0';
  /* Refused arguments are answered and logged as the handler's own
   * refusals are. */
  r = op->args ? fc_control_args_check(op->name, op->args, args, err, sizeof err) : 0;
  if (r == 0) {
    log_debug("control: request '%s'", name);
    r = op->handler(ctl->opaque, args, &result, err, sizeof err);
  }
  err[sizeof err - 1] = '\0';
  if (r >= 0 && result && op->redact && !conn->peer.admin)
    op->redact(result);

  if (r < 0) {
    json_decref(result);
    if (err[0] == '\0')
      snprintf(err, sizeof err, "%s", strerror(-r));
    /* A refused request about a volume names it, so that
     * `journalctl -p warning | grep VOLUME` finds its failed attach.  A
     * warning, not an error: the agent is fine, its caller is told. */
    const char *vol = json_string_value(json_object_get(args, "volume_id"));
    if (vol)
      log_warning("control: '%s' of volume %s failed: %s", name, vol, err);
    else
      log_warning("control: '%s' failed: %s", name, err);
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

/* Milliseconds until `deadline` (CLOCK_MONOTONIC), at least 0. */
static int ms_left(const struct timespec *deadline)
{
  struct timespec now;
  long long ms;

  clock_gettime(CLOCK_MONOTONIC, &now);
  ms = (long long)(deadline->tv_sec - now.tv_sec) * 1000 +
       (deadline->tv_nsec - now.tv_nsec) / 1000000;
  return ms < 0 ? 0 : ms > INT_MAX ? INT_MAX : (int)ms;
}

static void restart_idle_clock(struct timespec *deadline, unsigned idle_s)
{
  clock_gettime(CLOCK_MONOTONIC, deadline);
  deadline->tv_sec += idle_s;
}

/* Reads newline-delimited requests.  The buffer holds one maximal message
 * plus its newline; if it fills up without a newline the message is too
 * big and, since we cannot find where it ends, the connection is closed. */
static void serve_connection(struct fc_conn *conn)
{
  const size_t cap = FC_CONTROL_MAX_MSG + 1;
  const unsigned idle_s = atomic_load(&conn->ctl->idle_s);
  char *buf = malloc(cap);
  size_t len = 0;
  int fd = conn->fd;
  struct timespec idle_deadline;

  if (buf == NULL) {
    fc_control_send_error(fd, ENOMEM, "out of memory");
    return;
  }
  restart_idle_clock(&idle_deadline, idle_s);
  for (;;) {
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    size_t start = 0;
    ssize_t n;
    char *nl;
    int p;

    /* A deadline for the whole request, however slowly it trickles in:
     * a client holding one of the few connections without asking
     * anything would keep operators out. */
    p = poll(&pfd, 1, ms_left(&idle_deadline));
    if (p < 0 && errno == EINTR)
      continue;
    if (p == 0) {
      fc_control_send_error(fd, ETIMEDOUT, "no complete request within %d s; "
                            "closing the connection", idle_s);
      log_info("control: closing connection from pid %ld: idle for %d s",
               (long)conn->peer.pid, idle_s);
      break;
    }
    n = recv(fd, buf + len, cap - len, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n < 0)
      break;                    /* peer reset: nobody left to answer */
    if (n == 0) {
      /* A last request without newline, e.g. from "printf ... | socat". */
      if (len > 0)
        handle_request(conn, buf, len);
      break;
    }
    len += (size_t)n;
    while ((nl = memchr(buf + start, '\n', len - start)) != NULL) {
      size_t line_len = (size_t)(nl - (buf + start));
      if (handle_request(conn, buf + start, line_len) != 0)
        goto out;
      start += line_len + 1;
    }
    /* Only admins' requests buy more time: anyone else could hold a
     * slot forever with a stream of cheap requests, and their clients
     * send one request per connection anyway. */
    if (start > 0 && conn->peer.admin)
      restart_idle_clock(&idle_deadline, idle_s);
    memmove(buf, buf + start, len - start);
    len -= start;
    if (len == cap) {
      fc_control_send_error(fd, EMSGSIZE, "request larger than %d bytes",
                            FC_CONTROL_MAX_MSG);
      log_info("control: closing connection after oversized request");
      break;
    }
  }
out:
  free(buf);
}

void *fc_control_conn_main(void *arg)
{
  struct fc_conn *conn = arg;
  struct fc_control *ctl = conn->ctl;

  struct timeval send_timeout = { .tv_sec = atomic_load(&ctl->idle_s) };

  /* A client that stops reading its replies is dropped, not waited on. */
  (void)setsockopt(conn->fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout,
                   sizeof send_timeout);
  serve_connection(conn);

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

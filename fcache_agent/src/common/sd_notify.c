/* SPDX-License-Identifier: Apache-2.0 */
/* sd_notify(3) without libsystemd: the protocol is one datagram of
 * "KEY=VALUE" lines to a Unix socket, and the agent needs no more of
 * libsystemd than that. */
#include "sd_notify.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A decimal number with nothing around it, as systemd writes them. */
static int parse_u64(const char *s, uint64_t *out)
{
  uintmax_t v;
  char *end;

  if (!s || *s < '0' || *s > '9')
    return -EINVAL;
  errno = 0;
  v = strtoumax(s, &end, 10);
  if (errno || *end != '\0' || v > UINT64_MAX)
    return -EINVAL;
  *out = (uint64_t)v;
  return 0;
}

int fc_notify_open(struct fc_notify *n, const char *notify_socket,
                   const char *watchdog_usec, const char *watchdog_pid, pid_t pid)
{
  size_t len;
  uint64_t wpid;
  int r;

  memset(n, 0, sizeof *n);
  n->fd = -1;
  if (!notify_socket || !*notify_socket)
    return 0;

  if (watchdog_usec && *watchdog_usec) {
    r = parse_u64(watchdog_usec, &n->watchdog_usec);
    if (r < 0)
      goto out;
    /* WATCHDOG_PID keeps a child that inherited the variables from
     * answering for its parent. */
    if (watchdog_pid && *watchdog_pid) {
      r = parse_u64(watchdog_pid, &wpid);
      if (r < 0)
        goto out;
      if (wpid != (uint64_t)pid)
        n->watchdog_usec = 0;
    }
  }

  if (notify_socket[0] != '/' && notify_socket[0] != '@') {
    r = -EINVAL;
    goto out;
  }
  len = strlen(notify_socket);
  if (len >= sizeof n->addr.sun_path) {
    r = -EINVAL;
    goto out;
  }
  n->addr.sun_family = AF_UNIX;
  memcpy(n->addr.sun_path, notify_socket, len);
  /* An abstract address starts with a NUL byte and is not terminated:
   * its length is part of the name. */
  if (notify_socket[0] == '@')
    n->addr.sun_path[0] = '\0';
  n->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
                           (notify_socket[0] == '/'));

  n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (n->fd < 0) {
    r = -errno;
    goto out;
  }
  r = 0;
out:
  if (r < 0) {
    n->watchdog_usec = 0;
    n->fd = -1;
  }
  return r;
}

int fc_notify_send(const struct fc_notify *n, const char *msg)
{
  ssize_t sent;

  if (n->fd < 0)
    return 0;
  do {
    sent = sendto(n->fd, msg, strlen(msg), MSG_NOSIGNAL,
                  (const struct sockaddr *)&n->addr, n->addrlen);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0)
    return -errno;
  return 0;
}

uint64_t fc_notify_watchdog_interval_usec(const struct fc_notify *n)
{
  if (n->fd < 0 || n->watchdog_usec == 0)
    return 0;
  /* WATCHDOG_USEC=1 still asks for pings: as often as we can. */
  return n->watchdog_usec / 2 ? n->watchdog_usec / 2 : 1;
}

void fc_notify_close(struct fc_notify *n)
{
  if (n->fd >= 0)
    close(n->fd);
  n->fd = -1;
}

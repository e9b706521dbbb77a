/* SPDX-License-Identifier: Apache-2.0 */
/* The systemd notification protocol (sd_notify(3)), written by hand: one
 * datagram per message to the AF_UNIX socket named by NOTIFY_SOCKET.  The
 * agent says READY=1 once its control socket listens (the unit is
 * Type=notify) and WATCHDOG=1 at half of WATCHDOG_USEC (WatchdogSec=).
 * Without NOTIFY_SOCKET every call is a no-op, so the agent runs the same
 * by hand, under a test or under another supervisor. */
#ifndef FCACHE_SD_NOTIFY_H
#define FCACHE_SD_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

struct fc_notify {
  int fd;                       /* -1: no NOTIFY_SOCKET, nothing to send */
  struct sockaddr_un addr;
  socklen_t addrlen;
  uint64_t watchdog_usec;       /* 0: no watchdog asked for */
};

/* Reads the protocol's three variables, passed in (main() gives getenv()'s
 * values) so that tests need not change the environment.  notify_socket is
 * a path, or "@name" for an abstract socket.  The watchdog applies only if
 * watchdog_pid is unset or names pid.  Returns 0 (also when notify_socket
 * is unset: n->fd is then -1) or a negative errno: -EINVAL for a value
 * that cannot be used, or socket(2)'s error. */
int fc_notify_open(struct fc_notify *n, const char *notify_socket,
                   const char *watchdog_usec, const char *watchdog_pid, pid_t pid);

/* Sends one message ("READY=1", "WATCHDOG=1", "STOPPING=1", "STATUS=...",
 * newline-separated assignments).  0 or a negative errno; 0 when there is
 * no socket. */
int fc_notify_send(const struct fc_notify *n, const char *msg);

/* How often to send WATCHDOG=1, in microseconds: half of WATCHDOG_USEC, as
 * sd_watchdog_enabled(3) advises; 0 when there is no watchdog. */
uint64_t fc_notify_watchdog_interval_usec(const struct fc_notify *n);

void fc_notify_close(struct fc_notify *n);

#endif

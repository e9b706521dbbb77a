/* SPDX-License-Identifier: Apache-2.0 */
/* What the control server (control.c) and its connections
 * (control_conn.c) share: the server's and a connection's state, the
 * connection thread's entry point, and the error reply.  Not a public
 * header. */
#ifndef FCACHE_CONTROL_CONN_H
#define FCACHE_CONTROL_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "control.h"

#define ERR_MSG_MAX 512

/* What the peer of one connection may do (control_peer.c). */
struct fc_peer {
  pid_t pid;
  uid_t uid;
  gid_t gid;
  bool reader;                  /* read-only operations */
  bool admin;                   /* every operation */
};

/* A group the server checks peers against; none = the agent's user only. */
struct fc_access_group {
  char name[64];
  gid_t gid;
  bool set;
};

struct fc_conn {
  struct fc_conn *next;
  struct fc_control *ctl;
  pthread_t thread;
  int fd;                       /* -1 once the thread has closed it */
  bool done;                    /* thread finished; join and free it */
  struct fc_peer peer;
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
  struct fc_access_group readers;   /* control_group */
  struct fc_access_group admins;    /* control_admin_group */
  /* A client without a complete request, or not reading its reply, for
   * this long is closed (fc_control_set_idle_timeout). */
  atomic_uint idle_s;
};

/* Looks group `name` up; -ENOENT if there is none. */
int fc_control_lookup_group(const char *name, gid_t *gid);

/* Who is at the other end of fd and what it may do.  A peer whose
 * credentials cannot be read may do nothing. */
void fc_control_peer_identify(const struct fc_control *ctl, int fd,
                              struct fc_peer *peer);

/* 0 if peer may call op, else -EPERM with the group it needs in err. */
int fc_control_peer_allowed(const struct fc_control *ctl,
                            const struct fc_peer *peer,
                            const struct fc_control_op *op,
                            char *err, size_t errlen);

/* The thread of connection arg (a struct fc_conn *, whose peer the
 * accept thread identified): serves its requests, then closes its fd and
 * marks it done. */
void *fc_control_conn_main(void *arg);

/* Sends {"ok": false, "error": <message>, "errno": err} on fd. */
__attribute__((format(printf, 3, 4)))
int fc_control_send_error(int fd, int err, const char *fmt, ...);
/* Sends {"ok": false, "error": msg, "errno": EAGAIN, "busy": true}: the
 * connection is refused before its request is read, so the client may
 * send the same request again (nova_ext's client does, within its
 * timeout). */
int fc_control_send_busy(int fd, const char *msg);

#endif

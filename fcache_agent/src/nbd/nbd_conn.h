/* SPDX-License-Identifier: Apache-2.0 */
/* What the NBD server (nbd_server.c) and its connections (nbd_conn.c)
 * share: the server's and a connection's state, and the connection
 * thread's entry point.  Not a public header. */
#ifndef FCACHE_NBD_CONN_H
#define FCACHE_NBD_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "nbd_inbuf.h"
#include "nbd_server.h"
#include "nbd_session.h"

struct nbd_server;

/* Connections per export, handshaking or not.  The VM's QEMU opens one
 * (two briefly around a reconnect); more is a client we do not serve. */
#define NBD_MAX_CONNS 16u
/* A client must finish option negotiation within this. */
#define NBD_HANDSHAKE_TIMEOUT_S 10
/* Bytes of payloads and replies one connection may have queued in the
 * agent: the largest request (32 MiB) fits, and a client that stops
 * reading its replies pins no more than this. */
#define NBD_CONN_INFLIGHT_MAX (32u << 20)
/* A client that does not read a reply for this long is dropped, unless
 * the export says otherwise (fc_export.send_timeout_s, from
 * export_send_timeout_s).  There is no idle timeout in transmission: an
 * idle VM disk is normal. */
#define NBD_SEND_TIMEOUT_DEFAULT_S 30

struct conn {
  struct nbd_server *srv;
  struct conn *next;
  unsigned id;
  int fd;                     /* -1 once closed; close under srv->lock */
  pthread_t thread;           /* handshake, worker 0, joins its siblings */
  pthread_mutex_t read_lock;  /* one reader of the request stream */
  struct nbd_inbuf in;        /* that stream, in transmission; read_lock */
  uint8_t *obuf;              /* replies the reader gathered (nbd_conn.c), */
  size_t olen;                /* not sent yet; read_lock */
  pthread_mutex_t write_lock; /* one writer of the reply stream */
  atomic_bool quit;           /* stop reading requests */
  bool done;                  /* thread finished; under srv->lock */
  /* Handshake deadline, enforced by the accept thread (nbd_server.c):
   * absolute, however slowly the client trickles its options in. */
  bool in_handshake;          /* under srv->lock */
  bool owned;                 /* counted in srv->nowned; under srv->lock */
  /* In transmission from its first byte, with nothing negotiated (simple
   * replies): the kernel's NBD client, given its end of the socket by
   * netlink (nbd_server_serve_socket).  Set before the thread starts. */
  bool preconnected;
  struct timespec hs_deadline;  /* CLOCK_MONOTONIC */
  /* What the handshake negotiated; read-only in transmission. */
  struct nbd_session sess;
  /* Bytes of request payloads and read replies this connection holds
   * (nbd_conn.c): at most NBD_CONN_INFLIGHT_MAX, or one request. */
  pthread_mutex_t budget_lock;
  pthread_cond_t budget_cond;
  uint64_t inflight;
  /* Pending reads ended by another thread (the origin's), whose replies
   * this connection's own sender thread sends (nbd_conn.c): a client
   * that stops reading then holds up nobody else's replies. */
  pthread_mutex_t ended_lock;
  pthread_cond_t ended_cond;
  struct pending_read *ended;     /* oldest first */
  struct pending_read **ended_tail;
  bool sender_stop;               /* under ended_lock */
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
  pid_t owner_sid;            /* exp.one_session: the holder's session, */
  pid_t owner_pid;            /* and its first client; under lock */
  unsigned nowned;            /* its open connections past the handshake */
  atomic_bool stopping;       /* written under lock, read anywhere */
};

/* Under srv->lock, once c finished its handshake: may it go on?  For an
 * exp.one_session export the first connection to get here pins the
 * export to its client's session (nbd_server.c); false (logged): close
 * c.  The connection's end must then drop c->owned from srv->nowned. */
bool nbd_server_claim_locked(struct nbd_server *srv, struct conn *c);

/* The thread of connection arg (a struct conn *): handshake, then serve
 * requests with srv->nthreads workers; marks it done when it ends. */
void *nbd_conn_main(void *arg);

/* The volume a server exports, as its log lines name it (the export's
 * NBD name may be its secret, so never that); "-" if not told. */
static inline const char *nbd_server_volume(const struct nbd_server *srv)
{
  return srv->exp.volume ? srv->exp.volume : "-";
}

#endif

/* What the NBD server (nbd_server.c) and its connections (nbd_conn.c)
 * share: the server's and a connection's state, and the connection
 * thread's entry point.  Not a public header. */
#ifndef FCACHE_NBD_CONN_H
#define FCACHE_NBD_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#include "nbd_server.h"

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

/* The thread of connection arg (a struct conn *): handshake, then serve
 * requests with srv->nthreads workers; marks it done when it ends. */
void *nbd_conn_main(void *arg);

#endif

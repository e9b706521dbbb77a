/* SPDX-License-Identifier: Apache-2.0 */
/* The NBD origin's insides, shared by its three files:
 *
 *   origin_nbd.c       the fc_origin operations, open and close;
 *   origin_nbd_cmd.c   one caller's request: split into commands, each
 *                      started on a live connection with libnbd's
 *                      asynchronous API, and the wait for all of them;
 *   origin_nbd_conn.c  one connection: its libnbd handle, the event-loop
 *                      thread that drives it, and its re-establishment;
 *   origin_nbd_redo.c  the changes no flush has covered yet, written again
 *                      on every new connection.
 *
 * Glossary.  A *request* is one fc_origin_pread/pwrite/flush/trim/zero
 * call; it
 * becomes one or more *commands* (nbd_aio_*), at most max_request bytes
 * each.  A command is *in flight* on a connection from the moment
 * nbd_aio_* accepted it until libnbd frees its completion callback, which
 * it does exactly once, whatever happens to the connection.
 */
#ifndef FCACHE_ORIGIN_NBD_PRIV_H
#define FCACHE_ORIGIN_NBD_PRIV_H

#include <libnbd.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "origin.h"

#define NBD_ORIGIN_MAX_CONNS 32

/* Commands in flight on one connection at most.  The agent's callers are
 * already bounded (NBD workers, write-back, migration threads), so this is
 * a backstop; a caller that finds every connection full waits for a slot. */
#define NBD_CONN_MAX_IN_FLIGHT 256

/* Commands in flight on a connection before the next one is used. */
#define NBD_CONN_SPILL 16

/* A connection with commands in flight and no completion for this long is
 * declared dead (its socket is shut down, which fails every command on it)
 * and re-established: a server that stops answering must not hang the VM.
 * origin_stall_timeout_s sets it; this when no policy says. */
#define NBD_CONN_STALL_DEFAULT_MS 30000
/* How often an idle loop looks anyway: a command started without waking
 * it (nothing to write) meets the stall detector at most this late. */
#define NBD_CONN_IDLE_WAKE_MS 5000

/* One attempt to re-establish a connection; then back off, doubling from
 * the first to the last figure. */
#define NBD_CONN_CONNECT_MS 10000
/* Writing the redo log again on a new connection, at most (64 MiB). */
#define NBD_CONN_REPLAY_MS 30000
#define NBD_CONN_BACKOFF_MIN_MS 100
#define NBD_CONN_BACKOFF_MAX_MS 2000

/* The redo log's bound (origin_nbd_redo.c): a write that would pass it
 * flushes the origin first; the write that passes half of it flushes
 * after itself, so that the others rarely wait.  64 MiB is a few seconds of a VM's writes at
 * full speed, and a flush per 64 MiB costs a busy volume little. */
#define NBD_REDO_MAX_BYTES (64u << 20)
#define NBD_REDO_MAX_ENTRIES 65536u

struct nbd_redo_entry;

struct nbd_redo {
  /* Read-held by a write or trim from before it is started until it is
   * recorded, and to drop entries; write-held by a replay. */
  pthread_rwlock_t order;
  pthread_mutex_t lock;         /* the list and its counts */
  pthread_mutex_t room;         /* one writer at a time flushes to make room */
  struct nbd_redo_entry *head, **tail;
  uint64_t next_seq;
  uint64_t bytes;               /* data held */
  uint32_t nr;                  /* entries held */
};

/* What a change of the log was, and is done again as. */
enum nbd_redo_op {
  NBD_REDO_WRITE,               /* data: the write's bytes */
  NBD_REDO_TRIM,
  NBD_REDO_ZERO,                /* zeroes; the server may punch a hole */
  NBD_REDO_ZERO_NO_HOLE,        /* zeroes, kept allocated */
};

/* One change again, on the new connection: buf is the data of a write,
 * NULL otherwise.  0 or -errno. */
typedef int nbd_redo_apply_fn(void *ctx, enum nbd_redo_op op, const void *buf,
                              uint32_t count, uint64_t off);

int nbd_redo_init(struct nbd_redo *r);
void nbd_redo_destroy(struct nbd_redo *r);
/* True when a change of `count` bytes fits in the bound. */
bool nbd_redo_has_room(struct nbd_redo *r, uint32_t count);
/* True past half the bound: time to flush, before writers must wait. */
bool nbd_redo_half_full(struct nbd_redo *r);
/* Around a write, trim or zero: begin before it is started, record once
 * the server acknowledged it, end after.  buf: a write's data (copied),
 * NULL for the others.  nbd_redo_record returns 1 when the log is now
 * past half its bound (as nbd_redo_half_full, without asking again on a
 * write's path), 0, or -ENOMEM. */
void nbd_redo_begin(struct nbd_redo *r);
int nbd_redo_record(struct nbd_redo *r, enum nbd_redo_op op, const void *buf,
                    uint32_t count, uint64_t off);
void nbd_redo_end(struct nbd_redo *r);
/* Before a flush is started: what it will cover.  After it succeeded:
 * nbd_redo_flushed drops what was recorded before the mark. */
uint64_t nbd_redo_mark(struct nbd_redo *r);
void nbd_redo_flushed(struct nbd_redo *r, uint64_t mark);
/* Apply every change held, oldest first, with no write going on.  0, or
 * the first error (the rest not applied); *replayed counts the applied. */
int nbd_redo_replay(struct nbd_redo *r, nbd_redo_apply_fn *apply, void *ctx,
                    unsigned *replayed);

struct nbd_origin;

struct nbd_conn {
  struct nbd_origin *origin;
  unsigned index;
  int efd;                      /* eventfd: wakes the loop (new direction, stop) */
  pthread_t thread;
  bool thread_started;
  /* Read-held by a caller for the length of one nbd_aio_* call on `h`,
   * write-held by the loop only to swap a dead handle out: a handle is
   * never closed under a caller. */
  pthread_rwlock_t hlock;
  struct nbd_handle *h;         /* NULL while the connection is down */
  atomic_bool live;             /* h is set and was ready when installed */
  atomic_bool stopping;
  atomic_bool cancelled;        /* stopping without a goodbye (nbd_conn_cancel) */
  atomic_bool kicked;           /* an eventfd write is pending: skip another */
  atomic_uint in_flight;
  atomic_uint completions;      /* for the loop's stall detector */
  /* Commands libnbd is done with, whose callers are still to be woken:
   * the waking (a futex syscall, often a cross-CPU wake-up) happens after
   * libnbd let go of its handle lock, so callers starting commands do not
   * queue behind it. */
  _Atomic(struct nbd_cmd *) done;
  /* The same for asynchronous requests (fc_origin_pread_async), whose
   * ends run only on the loop's thread: never inside a caller's call,
   * which may hold what the end wants. */
  _Atomic(struct nbd_cmd *) done_async;
};

/* Longest volume id an origin's log lines show; longer ones are cut. */
#define NBD_ORIGIN_VOLUME_MAX 80

struct nbd_origin {
  struct fc_origin base;
  char *uri;
  char volume[NBD_ORIGIN_VOLUME_MAX + 1];    /* for log lines; "-": none */
  /* TLS credentials for nbds:// (NULL: libnbd's default, no PSK). */
  char *tls_dir, *tls_psk_file;
  bool can_fua;
  bool can_flush;
  bool can_zero;                /* NBD_CMD_WRITE_ZEROES */
  bool can_block_status;        /* the server agreed to base:allocation */
  uint32_t max_request;
  unsigned stall_ms;            /* see NBD_CONN_STALL_DEFAULT_MS */
  unsigned nr_conns;
  /* Callers waiting because every live connection is full. */
  pthread_mutex_t slot_lock;
  pthread_cond_t slot_cond;
  atomic_uint slot_waiters;
  /* Changes to write again on a new connection (only with can_flush:
   * without FLUSH nothing could ever be dropped from it). */
  struct nbd_redo redo;
  bool redo_ready;
  struct nbd_conn conns[NBD_ORIGIN_MAX_CONNS];
};

enum nbd_cmd_op {
  NBD_OP_READ, NBD_OP_WRITE, NBD_OP_FLUSH, NBD_OP_TRIM, NBD_OP_ZERO,
  NBD_OP_BLOCK_STATUS
};

/* A block-status command's answer (its buf): libnbd's extent callback
 * fills it, on the connection's thread, before the command completes. */
struct nbd_extents {
  struct fc_origin_extent *ext;
  uint32_t max;
  uint32_t n;
  uint64_t off, end;            /* what was asked */
  bool got;                     /* base:allocation's answer came */
};

/* One caller's request: done when `remaining` reaches zero.  A caller
 * waits on sem; an asynchronous request has `done` instead, called then
 * with the result. */
struct nbd_wait {
  sem_t sem;
  atomic_uint remaining;
  atomic_int err;               /* first error, positive errno; 0 if none */
  fc_origin_done_fn *done;      /* asynchronous: NULL for a waiting caller */
  void *ctx;
};

/* One command; lives on the caller's stack until its wait is done, or
 * (asynchronous) on the heap until its end. */
struct nbd_cmd {
  enum nbd_cmd_op op;
  void *buf;
  uint64_t count;
  uint64_t off;
  uint32_t flags;
  struct nbd_wait *w;
  struct nbd_conn *conn;
  int err;                      /* from the completion callback */
  struct nbd_cmd *next;         /* on conn->done */
  bool completed;
};

/* origin_nbd_cmd.c */
int nbdo_run(struct nbd_origin *n, enum nbd_cmd_op op, void *buf,
             uint64_t count, uint64_t off, uint32_t flags);
/* One read of at most max_request bytes, ended by done(ctx, err) on a
 * connection's thread.  0 once started, or -errno (nothing started):
 * -EAGAIN rather than wait for a connection with room. */
int nbdo_read_async(struct nbd_origin *n, void *buf, uint32_t count,
                    uint64_t off, fc_origin_done_fn *done, void *ctx);

/* origin_nbd_conn.c */
struct nbd_handle *nbd_conn_create_handle(const struct nbd_origin *n);
int nbd_conn_connect(struct nbd_origin *n, struct nbd_handle **out,
                     char *err, size_t errlen);
int nbd_conn_start(struct nbd_conn *c, struct nbd_origin *n, unsigned index,
                   struct nbd_handle *h);
void nbd_conn_stop(struct nbd_conn *c);
/* Have the connection's loop end without waiting for it: its commands in
 * flight fail (the handle is closed) and it does not reconnect.
 * nbd_conn_stop still joins it. */
void nbd_conn_cancel(struct nbd_conn *c);
/* Start `k` on `c`.  0: `k` is in flight and will finish through
 * nbd_cmd_finish, exactly once.  -ENOTCONN: `c` is down, nothing was
 * started.  Any other -errno: libnbd refused the command. */
int nbd_conn_submit(struct nbd_conn *c, struct nbd_cmd *k);
void nbd_cmd_finish(struct nbd_cmd *k, int err);

#endif

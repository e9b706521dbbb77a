/* SPDX-License-Identifier: Apache-2.0 */
/* Inside the destination side of a migration: shared by migr_dest.c (the
 * receiver and worker threads) and migr_dest_remote.c (the VM threads'
 * fetches and reads from the source).  Not for other modules. */
#ifndef FCACHE_MIGR_DEST_PRIV_H
#define FCACHE_MIGR_DEST_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "migration.h"

/* Background data in flight per stream (credits, in blocks of the
 * volume's size, at least one frame's worth): what bounds the memory a
 * migration's destination holds for blocks not yet installed. */
#define CREDIT_BYTES (8u << 20)
/* Threads installing batches at once: the cache write of one batch
 * overlaps the receive and the other's record and publish step. */
#define INSTALLERS 2
/* Full-size receive buffers kept for reuse rather than freed: a fresh
 * megabyte costs 256 page faults. */
#define FRAME_POOL (INSTALLERS + 2)
#define FETCH_TIMEOUT_S 10
/* A clean block is at the origin too: past this many fetches in flight,
 * or this long, the origin is the faster way. */
#define FETCH_CLEAN_MAX_INFLIGHT 16
#define FETCH_CLEAN_TIMEOUT_MS 500
/* cachemior on an engine without a warmer (in_warm): threads preloading
 * one block at a time each. */
#define PRELOAD_THREADS 4
/* A read before the switchover is one the hypervisor (or the guest, in
 * the moment between the hypervisor's switch and ours) waits on. */
#define READ_TIMEOUT_S 30

/* One BLOCK frame as it arrived: n entries of (id, data). */
struct dest_batch {
  struct dest_batch *next;
  uint8_t *frame;
  uint32_t n;
  bool full;                   /* frame holds FC_XFER_MAX_PAYLOAD bytes */
};

/* Background blocks between the receiver and the installers; under
 * m->lock (migr_dest_install.c). */
struct dest_queue {
  struct dest_batch *head, *tail;
  uint32_t credits;            /* granted in WELCOME */
  uint32_t outstanding;        /* received, credit not yet returned */
  uint32_t busy;               /* installers inside a batch */
  bool stopped;                /* installers take no more batches */
  uint8_t *pool[FRAME_POOL];
  unsigned npool;
  pthread_t thr[INSTALLERS];
  unsigned nthr;
};

/* migr_dest_install.c.  queue_new sets m->dst.inq_free to queue_free. */
int fc_migr_dest_queue_new(struct fc_migration *m);
void fc_migr_dest_queue_free(struct fc_migration *m);
/* Receiver: a background BLOCK frame of len bytes in *buf.  The frame is
 * queued as it is and *buf replaced by a fresh buffer; -EPROTO if it is
 * malformed or exceeds the credit. */
int fc_migr_dest_queue_frame(struct fc_migration *m, uint8_t **buf, uint32_t len);
int fc_migr_dest_installers_start(struct fc_migration *m);
/* Installers take no more batches; returns once none is inside one. */
void fc_migr_dest_installers_stop(struct fc_migration *m);
void fc_migr_dest_installers_join(struct fc_migration *m);
/* Under m->lock: every block received so far is installed and its credit
 * returned. */
bool fc_migr_dest_installed_locked(const struct fc_migration *m);
/* Under m->lock: ob, a dirty block installed here, goes in the next ACK.
 * 0, or -ENOMEM (then it is never acknowledged: the source keeps it until
 * COMPLETE). */
int fc_migr_dest_to_ack_locked(struct fc_migration *m, uint64_t ob);
/* Acknowledge the dirty blocks installed (once durable) and return
 * credits. */
void fc_migr_dest_flush_acks(struct fc_migration *m, uint32_t credits);
/* Stop relying on the source, and say why: the receiver (migr_dest.c)
 * or the acknowledger, whichever sees the stream go first. */
void fc_migr_dest_source_lost(struct fc_migration *m, const char *when, const char *why);

/* Fetches in flight at once past which fc_migr_dest_fetch_start declines:
 * bounds the memory and the source's queue a relay can cause.  The
 * synchronous fetch is bounded by the threads that wait in it. */
#define FETCH_MAX_INFLIGHT 256

/* One fetch in flight (m->dst.waiters, under m->lock), ended by done. */
struct fetch_wait {
  struct fetch_wait *next;
  uint64_t ob;
  void *data;
  fc_engine_fetch_done_fn *done;
  void *arg;
  struct timespec until;       /* gives up then (CLOCK_REALTIME) */
  uint64_t sent_gen;           /* m->dst.conn_gen it was sent on; 0: not sent */
  bool dirty;
  int r;
};

struct read_wait {
  struct read_wait *next;
  uint64_t tag;
  void *buf;
  uint32_t len;
  bool done;
  int r;
};

/* A DATA frame: the answer to one of our READs.  A reply for a read that
 * gave up waiting is dropped; one that does not fit its read ends the
 * stream (-EPROTO). */
int fc_migr_dest_deliver_data(struct fc_migration *m, uint16_t flags, const uint8_t *p,
                              uint32_t len);
/* A fetched block (or F_ABSENT) for the fetches waiting on it: ended
 * here, in the receiver's thread. */
void fc_migr_dest_deliver_reply(struct fc_migration *m, uint64_t id, uint16_t flags,
                                const uint8_t *data);

#endif

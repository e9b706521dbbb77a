/* SPDX-License-Identifier: Apache-2.0 */
/* Inside the composite origin of a move (origin_move.h): shared by
 * origin_move.c (the requests and their routing), move_copy.c (the
 * copier, the switch, the fallback to A), move_bwrite.c (B's writers, for
 * writes to B made together), move_mirror.c (mirroring's duplicates,
 * written in parallel) and move_aio.c (AIO's background duplicates).
 * Private to origin/. */
#ifndef FCACHE_MOVE_PRIV_H
#define FCACHE_MOVE_PRIV_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "move_bitmap.h"
#include "move_log.h"
#include "origin_move.h"

/* What the bitmaps and the ranges count in: the cache's block size, so
 * that a write-back block is one grain. */
#define MOVE_GRAIN 4096u
/* What the copier claims and copies at once. */
#define MOVE_CHUNK (1u << 20)
/* AIO, before the switch (aio_drain): the duplicates B may owe when
 * the switch holds requests, if the queue drained on its own ... */
#define AIO_SWITCH_PENDING 1u
/* ... which it is given while it does not grow, at most so long ... */
#define AIO_DRAIN_FREE_NS (2000ull * 1000000ull)
/* ... else new duplicates are held to this many until it has. */
#define AIO_DRAIN_PENDING 4u
/* B's writers (move_bwrite.c), mirroring and LR: as many as the VM's
 * writes in flight usually are (the cache's origin connections, a guest's
 * queue), and as many as LR's copier has runs to write in most chunks. */
#define MOVE_B_WRITERS 8u

/* A request's (or an AIO duplicate's) hold on grains [lo, hi].  A reader
 * changes no grain: it waits for no other reader and for no claim of the
 * copier, which reads A and writes only B (the grains a reader of B could
 * see, LR's and SLR's, are the ones the copier skips or has not reached). */
struct mv_range {
  uint64_t lo, hi;
  bool reader;
  /* An AIO duplicate whose half on A (on B) is written: a reader of A
   * (of B) need not wait for its other half. */
  bool a_settled, b_settled;
  /* An AIO reader of the copied region on B, the faster side: it waits
   * for the B halves of duplicates in its grains, not for their A's. */
  bool reads_b;
  /* An AIO write that does not wait for the copier's claim: its half on
   * B waits instead (move_aio.c) ... */
  bool passes_claim;
  /* ... for the claim it passed (its claim_seq), or 0: that claim does
   * not wait for it either. */
  uint64_t passed_claim;
  struct mv_range *next;
};

/* One write to B by B's writers: the caller's, with its buffer, until
 * done. */
struct mv_bwrite {
  struct mv_bwrite *next;
  const void *buf;
  uint32_t count;
  uint64_t off;
  bool fua;
  bool done;                    /* under mu */
  int r;
};

struct aio_job {
  struct mv_range range;        /* held until both halves are written */
  struct aio_job *next;
  struct fc_origin *dst;        /* the half the worker writes */
  bool dst_is_b;
  unsigned halves;              /* left to complete, under mu */
  uint32_t count;
  uint64_t off;
  char data[];
};

struct move_origin {
  struct fc_origin base;
  pthread_mutex_t mu;
  pthread_cond_t cond;
  /* Where requests go when no move runs; A during a move. */
  struct fc_origin *cur;
  struct fc_origin *b;          /* the destination, during a move */
  bool moving;                  /* requests are routed by p.scheme */
  bool paused;                  /* held for a switch or a fallback */
  unsigned passers;             /* requests in flight on cur, unrouted */
  struct mv_range *ranges;      /* routed requests in flight */
  bool claimed;                 /* the copier's grains, no request in them */
  uint64_t claim_lo, claim_hi;
  uint64_t claim_seq;           /* counts claims: which one a write passed */
  uint64_t nr_grains;
  uint64_t cursor;              /* grains below it are copied */
  struct move_bitmap bm;        /* dbt: dirty; lr, slr: B holds the newest */
  struct fc_move_params p;
  char log_path[PATH_MAX];
  char a_uri[1024];
  struct move_log log;
  bool logging;
  int b_error;                  /* B failed: the move falls back to A */
  int a_error;                  /* aio: a background write to A failed */
  bool stop;                    /* abort asked */
  pthread_t thread;
  bool thread_running;
  /* aio */
  struct aio_job *q_head, *q_tail;
  unsigned pending;             /* duplicates with a half not written */
  bool aio_draining;            /* the switch is near: pending kept low */
  bool aio_stop;
  pthread_t aio_thread;
  bool aio_running;
  uint64_t lat_a_ns, lat_b_ns;  /* write latency, moving average */
  /* B's writers: mirror, lr */
  struct mv_bwrite *bw_head, *bw_tail;
  bool bw_stop;
  pthread_t bw_threads[MOVE_B_WRITERS];
  unsigned bw_running;
  /* status, under mu */
  struct fc_move_status st;
  uint64_t start_ns;
  uint64_t first_copy_bytes;    /* written to B by the first pass */
  /* dbt, the copier's: the last held round's bytes and copying time,
   * and the rounds' progress across held rounds cut short */
  uint64_t held_bytes, held_ns, last_dirty;
  unsigned stalled_rounds;
};

/* dbt and dbt_capped: the writes on A, the grains written behind the
 * cursor copied again in merge rounds. */
static inline bool
mv_scheme_is_dbt(enum fc_move_scheme s)
{
  return s == FC_MOVE_DBT || s == FC_MOVE_DBT_CAPPED;
}

/* lr, slr, aio: an acknowledged write may be on B alone for a while, so
 * it is logged for a crash. */
static inline bool
mv_scheme_logs(enum fc_move_scheme s)
{
  return s == FC_MOVE_LR || s == FC_MOVE_SLR || s == FC_MOVE_AIO;
}

uint64_t mv_now_ns(void);
/* Under mu: wait until nothing routed or passing is in flight. */
void mv_drain_locked(struct move_origin *m);
/* Under mu: hold grains [lo, hi] against requests (the copier). */
void mv_claim_locked(struct move_origin *m, uint64_t lo, uint64_t hi);
void mv_unclaim_locked(struct move_origin *m);
/* Under mu, with a move running: wait until no request, claim or pause
 * holds any of r's grains, then hold them.  false: the move ended while
 * waiting (the caller serves the request unrouted). */
bool mv_range_acquire_locked(struct move_origin *m, struct mv_range *r);
/* Under mu, AIO: has B written faster than A lately (both measured)?
 * Then a duplicate's request writes B and the worker A, and reads of the
 * copied region go to B. */
bool mv_aio_b_faster_locked(const struct move_origin *m);
/* Under mu: does the copier's claim cover any of r's grains? */
bool mv_claimed_locked(const struct move_origin *m, const struct mv_range *r);
void mv_range_release_locked(struct move_origin *m, struct mv_range *r);
/* Under mu: B failed with r; the copier falls back to A. */
void mv_b_failed_locked(struct move_origin *m, int r);

/* The copier thread (move_copy.c). */
void *mv_copier(void *arg);

/* B's writers (move_bwrite.c), for mirror and lr.  A job queued is
 * written by one of them; the caller waits for it (under mu) and returns
 * its result, 0 or -errno. */
int mv_bwriters_start(struct move_origin *m);
void mv_bwriters_stop(struct move_origin *m);
void mv_bwrite_queue_locked(struct move_origin *m, struct mv_bwrite *job);
int mv_bwrite_wait_locked(struct move_origin *m, struct mv_bwrite *job);
/* Does the scheme write to B through B's writers? */
static inline bool
mv_scheme_uses_bwriters(enum fc_move_scheme s)
{
  return s == FC_MOVE_MIRROR || s == FC_MOVE_LR;
}

/* Mirroring (move_mirror.c): write A and B at once, both waited for.
 * Returns A's result, *rb B's. */
int mv_mirror_write(struct move_origin *m, const void *buf, uint32_t count,
                    uint64_t off, bool fua, int *rb);

/* AIO (move_aio.c). */
int mv_aio_start(struct move_origin *m);
void mv_aio_stop(struct move_origin *m);
/* A write during an AIO move: a write touching the copied region goes to
 * both, acknowledged when the faster completes, its grains held until
 * both are written.  1: the move ended meanwhile (serve it unrouted);
 * else 0 or -errno. */
int mv_aio_write(struct move_origin *m, const void *buf, uint32_t count,
                 uint64_t off, bool fua);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Live storage migration of an origin: a composite origin that serves
 * as one origin ("cur") and, while a move runs, routes every request
 * between the source A and the destination B by the move's scheme and
 * copies A to B in a background thread (doc/reference/storage-migration.rst).
 *
 * The cache above keeps this one origin for the rest of the volume's
 * life, so the swap of its origin pointer happens once, when the first
 * move begins; a done move leaves it forwarding to B, a failed or aborted
 * one to A.  All calls are thread-safe.
 */
#ifndef FCACHE_ORIGIN_MOVE_H
#define FCACHE_ORIGIN_MOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "origin.h"

/* The values are the recovery log's (move_log.h): a new scheme is added
 * at the end. */
enum fc_move_scheme {
  FC_MOVE_DBT,          /* dirty block tracking: merge rounds until the dirty
                         * set stops shrinking, then one pause however long */
  FC_MOVE_MIRROR,       /* synchronous duplicate writes to the copied region,
                         * issued to A and B at once */
  FC_MOVE_LR,           /* every write to B, bitmap redirects reads */
  FC_MOVE_SLR,          /* uncopied region on A, copied region's writes to B */
  FC_MOVE_AIO,          /* duplicate writes acked by the faster side, whose
                         * copied region also serves reads */
  FC_MOVE_DBT_CAPPED,   /* fcache's DBT: the pause capped at downtime_ms, the
                         * move failed when the rounds do not converge */
  FC_MOVE_NR_SCHEMES,
};

enum fc_move_state {
  FC_MOVE_NONE,         /* no move ran */
  FC_MOVE_COPYING,
  FC_MOVE_SWITCHING,
  FC_MOVE_DONE,
  FC_MOVE_FAILED,
  FC_MOVE_ABORTED,
};

struct fc_move_params {
  enum fc_move_scheme scheme;
  unsigned max_rounds;          /* dbt: merge rounds before the pause at the
                                 * latest; dbt_capped: before giving up */
  uint64_t converge_bytes;      /* dbt_capped: dirty bytes small enough to
                                 * pause */
  unsigned downtime_ms;         /* dbt_capped: the longest pause the last
                                 * round may be expected to take */
  unsigned aio_threshold;       /* aio: pending duplicates before delaying */
  unsigned aio_delay_us;        /* aio: the delay */
  uint64_t rate_limit_bps;      /* the copy's bytes per second; 0: unlimited */
  /* lr, slr, aio: the recovery log's path (required for them). */
  const char *log_path;
  const char *a_uri;            /* recorded in the log: whose log it is */
  const char *b_uri;            /* recorded in the log, for the status */
  /* Called by the copier, with every request held, once B holds all of
   * the volume: make B the volume's origin durably (its state file).
   * 0 switches; -errno fails the move and the volume stays on A.  It may
   * return -EAGAIN while it cannot take what it needs yet: it is called
   * again, 1 ms later, unless the move is being stopped. */
  int (*commit)(void *ctx);
  void *ctx;
};

struct fc_move_status {
  enum fc_move_state state;
  enum fc_move_scheme scheme;
  uint64_t bytes_total, bytes_copied, dirty_bytes;
  unsigned rounds;
  uint64_t pause_estimate_ms;   /* dbt_capped: what copying the dirty grains with
                                 * requests held would take now, at the
                                 * last held round's pace (0: not known) */
  unsigned held_rounds_cut;     /* dbt_capped: last rounds that reached downtime_ms
                                 * with grains left, the VM let go on */
  uint64_t aio_delay_us;        /* aio: time VM writes were delayed by
                                 * aio_threshold during the copy, summed */
  uint64_t downtime_us;         /* requests held for the switch (or fallback) */
  uint64_t elapsed_ms;
  uint64_t eta_s;
  uint64_t a_read, a_write, b_read, b_write, vm_write, redundant_write;
  char error[256];
};

/* The composite over `cur` (owned from now on, also on failure). */
int fc_origin_move_wrap(struct fc_origin *cur, struct fc_origin **out);
bool fc_origin_is_move(const struct fc_origin *o);

/* Start moving to `to` (owned from now on, also on failure): -EBUSY while
 * a move runs, -EINVAL (with a message) for bad parameters or a `to`
 * smaller than the volume. */
int fc_origin_move_start(struct fc_origin *o, struct fc_origin *to,
                         const struct fc_move_params *p, char *err, size_t errlen);
/* Stop a running move and serve from A, consistent; waits for it.
 * -ENOENT when none runs. */
int fc_origin_move_abort(struct fc_origin *o);
/* Is a move running (copying or switching)? */
bool fc_origin_move_running(struct fc_origin *o);
void fc_origin_move_status(struct fc_origin *o, struct fc_move_status *st);

const char *fc_move_scheme_name(enum fc_move_scheme s);
int fc_move_scheme_parse(const char *s, enum fc_move_scheme *out);
const char *fc_move_state_name(enum fc_move_state s);

/* The move a recovery log was written for. */
struct fc_move_recovered {
  bool found;                   /* a log of a move from a_uri was replayed */
  enum fc_move_scheme scheme;
  char to[1024];
};

/* After a crash mid-move (lr, slr, aio): write what the log says B had
 * back to `a` and flush it.  `a_uri` is the volume's origin now: a log of
 * a move from elsewhere is stale (the move committed) and only removed.
 * Removes the log when done.  Returns how many records were replayed
 * (>= 0), 0 with no log, or -errno with a message (logged too for
 * -EPROTONOSUPPORT: a log of a move from a_uri by a scheme other than lr,
 * slr or aio, which is neither replayed nor removed). */
int fc_origin_move_recover(const char *log_path, const char *a_uri,
                           struct fc_origin *a, struct fc_move_recovered *out,
                           char *err, size_t errlen);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Fetching blocks of a source's frozen cache over a settle session, for
 * a destination whose engine finishes the copy itself once its migration
 * failed (dmcache's hybrid: doc/reference/dmcache.rst, "Settling on
 * dmcache").  The source was asked to serve (settle step "serve"); each
 * fetch is a FETCH frame of one block, answered by a BLOCK (or ABSENT)
 * frame in the order asked, so answers end the oldest fetch. */
#ifndef FCACHE_MIGR_SETTLE_FETCH_H
#define FCACHE_MIGR_SETTLE_FETCH_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "xfer_conn.h"

struct fc_settle_fetch;

/* Over c (which stays the caller's, and must outlive the fetcher), blocks
 * of bs bytes.  0, or -errno. */
int fc_settle_fetch_open(struct fc_xfer_conn *c, uint32_t bs, struct fc_settle_fetch **out);

/* fc_engine_fetch_start_fn: 0 (done called once, from the receiver),
 * -ENOTCONN once the session broke or closing began, -ENOMEM. */
int fc_settle_fetch_start(void *ctx, oblock_t ob, void *data, bool required,
                          fc_engine_fetch_done_fn *done, void *arg);

/* Blocks answered so far, and whether the session broke. */
uint64_t fc_settle_fetch_count(struct fc_settle_fetch *f, bool *broken);

/* Waits for the fetches in flight to be answered (or the session to
 * break), then frees f; the stream is left between frames, ready for the
 * next STEP, unless it broke (then -EPIPE). */
int fc_settle_fetch_close(struct fc_settle_fetch *f);

#endif

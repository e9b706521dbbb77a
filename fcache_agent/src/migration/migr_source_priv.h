/* SPDX-License-Identifier: Apache-2.0 */
/* Inside the source side of a migration: migr_source.c (the receiver and
 * sender threads) and migr_source_pipe.c (the background copy's pipeline).
 * Not for other modules. */
#ifndef FCACHE_MIGR_SOURCE_PRIV_H
#define FCACHE_MIGR_SOURCE_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "migration.h"

struct fc_src_pipe;

/* The pipeline of m's background copy, its sending thread started. */
int fc_src_pipe_start(struct fc_migration *m, struct fc_src_pipe **out);
/* Blocks per frame. */
uint32_t fc_src_pipe_max(const struct fc_src_pipe *p);
/* Read obs[0..n) (n <= fc_src_pipe_max) into the next free frame,
 * waiting for one, and queue it; their credit is taken already.  0, or
 * -errno (the read failed, or an earlier send did). */
int fc_src_pipe_push(struct fc_src_pipe *p, const uint64_t *obs, uint32_t n);
/* Wait until every queued frame is sent: 0 or the send's -errno. */
int fc_src_pipe_drain(struct fc_src_pipe *p);
/* Stop the sending thread (queued frames are not sent) and free. */
void fc_src_pipe_stop(struct fc_src_pipe *p);

/* Wait until the rate limit lets bytes go, and charge them: the pipe's
 * sending thread and the sender (fetch replies, read answers) share one
 * budget, taken under m->lock. */
void fc_migr_src_pace(struct fc_migration *m, uint64_t bytes);

/* Add ob to *set (made at the first), under m->lock: 0 or -errno. */
int fc_migr_src_record_locked(struct fc_migration *m, struct fc_invfilter **set, uint64_t ob);

/* migr_source.c, under m->lock.  The sender is about to answer a FETCH
 * of ob with the block (dirty: its only current copy is here): recorded
 * for on_demand's copy after its hold, and for the destination's ACK
 * where it sends one (m->src.ack_fetched).  0 or -errno. */
int fc_migr_src_serving_locked(struct fc_migration *m, uint64_t ob, bool dirty);
/* The destination acknowledged ob: true if it may (ob was sent dirty in
 * the background, or served dirty to a FETCH where the destination
 * acknowledges those, and is not acknowledged yet), and takes it out of
 * its set; false for any other block, which fails the migration. */
bool fc_migr_src_acked_locked(struct fc_migration *m, oblock_t ob);

#endif

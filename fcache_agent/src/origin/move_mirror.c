/* SPDX-License-Identifier: Apache-2.0 */
/* IO mirroring's duplicate writes (move_priv.h): a VM write to the copied
 * region goes to A and to B at the same time and is acknowledged when
 * both have it, so that it costs the slower of the two writes, not their
 * sum (the paper's synchronous mirroring, §2: "the two write requests are
 * synchronized").  The request writes A itself and hands B's half to
 * B's writers (move_bwrite.c); a request that finds them all busy waits
 * in their queue, which is still no longer than writing B after A.  The
 * request's grains stay held (origin_move.c) until both halves are done,
 * so overlapping writes reach both sides in the same order. */
#include <errno.h>
#include <stdlib.h>

#include "move_priv.h"

int
mv_mirror_write(struct move_origin *m, const void *buf, uint32_t count, uint64_t off,
                bool fua, int *rb)
{
  struct mv_bwrite job = {
    .buf = buf, .count = count, .off = off, .fua = fua,
  };
  int ra;

  pthread_mutex_lock(&m->mu);
  mv_bwrite_queue_locked(m, &job);
  pthread_mutex_unlock(&m->mu);
  ra = fc_origin_pwrite(m->cur, buf, count, off, fua);
  pthread_mutex_lock(&m->mu);
  *rb = mv_bwrite_wait_locked(m, &job);
  pthread_mutex_unlock(&m->mu);
  return ra;
}

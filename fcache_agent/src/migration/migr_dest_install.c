/* SPDX-License-Identifier: Apache-2.0 */
/* The destination's installers: background BLOCK frames go from the
 * receiver to a queue as they arrived, and INSTALLERS threads each take a
 * whole frame and hand it to the engine as one batch (in_install_many),
 * then acknowledge its dirty blocks and return its credit.
 *
 * One frame is one batch: the source fills frames to the payload limit
 * (255 blocks of 4 KiB), so the engine writes a batch with a few vectored
 * writes and one metadata update, and the receiver hands a frame over by
 * pointer instead of copying it block by block.  The queue is bounded by
 * the credit, so the receiver never blocks on it and a slow destination
 * slows the source; its memory by twice the credit (a frame at least half
 * full keeps its whole buffer, a smaller one is shrunk to its length) plus
 * the FRAME_POOL buffers kept for reuse.
 * An engine without the batch call gets one installer calling in_install
 * per block, as before.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "engine/engine.h"
#include "migr_dest_priv.h"
#include "migration.h"
#include "common/lockcheck.h"

#define OPS(m) ((m)->agent->host.ops->migr)

int
fc_migr_dest_queue_new(struct fc_migration *m)
{
  struct dest_queue *q = calloc(1, sizeof *q);
  uint32_t per_frame = FC_XFER_MAX_PAYLOAD / (8 + m->bs);

  if (!q)
    return -ENOMEM;
  q->credits = CREDIT_BYTES / m->bs;
  if (q->credits < per_frame)
    q->credits = per_frame ? per_frame : 1;
  m->dst.inq = q;
  m->dst.inq_free = fc_migr_dest_queue_free;
  return 0;
}

void
fc_migr_dest_queue_free(struct fc_migration *m)
{
  struct dest_queue *q = m->dst.inq;

  if (!q)
    return;
  while (q->head) {
    struct dest_batch *b = q->head;
    q->head = b->next;
    free(b->frame);
    free(b);
  }
  while (q->npool)
    free(q->pool[--q->npool]);
  free(q);
  m->dst.inq = NULL;
}

int
fc_migr_dest_queue_frame(struct fc_migration *m, uint8_t **buf, uint32_t len)
{
  struct dest_queue *q = m->dst.inq;
  uint32_t stride = 8 + m->bs, n = len / stride;
  struct dest_batch *b;
  uint8_t *fresh, *frame;
  int r = 0;

  if (len == 0 || len % stride)
    return -EPROTO;
  pthread_mutex_lock(&m->lock);
  if (q->outstanding + n > q->credits)
    r = -EPROTO;                  /* the source ignored our credit */
  else
    q->outstanding += n;
  pthread_mutex_unlock(&m->lock);
  if (r)
    return r;
  pthread_mutex_lock(&m->lock);
  fresh = q->npool ? q->pool[--q->npool] : NULL;
  pthread_mutex_unlock(&m->lock);
  b = malloc(sizeof *b);
  if (!fresh)
    fresh = malloc(FC_XFER_MAX_PAYLOAD);
  if (!b || !fresh) {
    free(b);
    free(fresh);
    return -ENOMEM;
  }
  b->full = len >= FC_XFER_MAX_PAYLOAD / 2;
  /* Shrinking gives the allocator back the unused tail (in place). */
  frame = b->full ? NULL : realloc(*buf, len);
  b->frame = frame ? frame : *buf;
  b->n = n;
  b->next = NULL;
  *buf = fresh;
  pthread_mutex_lock(&m->lock);
  if (q->tail)
    q->tail->next = b;
  else
    q->head = b;
  q->tail = b;
  m->bytes_done += (uint64_t)n * m->bs;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->lock);
  return 0;
}

bool
fc_migr_dest_installed_locked(const struct fc_migration *m)
{
  FC_ASSERT_HELD(&m->lock);
  return !m->dst.inq->head && !m->dst.inq->busy && !m->dst.inq->outstanding;
}

void
fc_migr_dest_flush_acks(struct fc_migration *m, uint32_t credits)
{
  uint8_t *ids = NULL;
  uint32_t n;
  int r = 0;

  pthread_mutex_lock(&m->lock);
  n = m->dst.to_ack_n;
  if (n && (ids = malloc((size_t)n * 8)))
    for (uint32_t i = 0; i < n; i++)
      fc_put_le64(ids + 8 * i, m->dst.to_ack[i]);
  m->dst.to_ack_n = 0;
  pthread_mutex_unlock(&m->lock);
  if (n) {
    /* Acknowledged means durable: the source frees these next. */
    r = OPS(m)->in_durable(&m->e, false);
    if (!r && ids)
      r = fc_xfer_send(&m->conn, FC_XFER_ACK, 0, ids, n * 8, NULL, 0);
  }
  free(ids);
  if (!r && credits) {
    uint8_t c[4];
    fc_put_le32(c, credits);
    r = fc_xfer_send(&m->conn, FC_XFER_CREDIT, 0, c, 4, NULL, 0);
  }
  if (r) {
    /* Usually the link broke and the receiver is about to notice too: say
     * the same thing, and stop relying on the source at once. */
    fc_migr_dest_source_lost(m, " while acknowledging blocks", strerror(-r));
  }
}

/* Under m->lock. */
static bool
over_locked(const struct fc_migration *m)
{
  FC_ASSERT_HELD(&m->lock);
  return m->stopping || m->dst.inq->stopped || m->state == FC_MS_FAILED ||
         m->state == FC_MS_ABORTED || m->state == FC_MS_COMPLETED;
}

int
fc_migr_dest_to_ack_locked(struct fc_migration *m, uint64_t ob)
{
  FC_ASSERT_HELD(&m->lock);
  if (m->dst.to_ack_n == m->dst.to_ack_cap) {
    uint32_t cap = m->dst.to_ack_cap ? m->dst.to_ack_cap * 2 : 256;
    uint64_t *a = realloc(m->dst.to_ack, cap * sizeof *a);

    if (!a)
      return -ENOMEM;   /* unacknowledged: the source keeps it until COMPLETE */
    m->dst.to_ack = a;
    m->dst.to_ack_cap = cap;
  }
  m->dst.to_ack[m->dst.to_ack_n++] = ob;
  return 0;
}

/* Under m->lock: note the dirty blocks installed for the next ACK. */
static void
note_installed_locked(struct fc_migration *m, const uint64_t *ids, const int *res,
                      uint32_t n)
{
  FC_ASSERT_HELD(&m->lock);
  m->blocks_done += n;
  for (uint32_t i = 0; i < n; i++)
    if ((ids[i] & FC_XFER_DIRTY_BIT) && res[i] == 0)
      (void)fc_migr_dest_to_ack_locked(m, ids[i] & ~FC_XFER_DIRTY_BIT);
}

/* The engine's batch call, or its per-block call when it has none. */
static int
install(struct fc_migration *m, const uint64_t *ids, const void *const *data,
        uint32_t n, int *res)
{
  if (OPS(m)->in_install_many)
    return OPS(m)->in_install_many(&m->e, ids, data, n, res);
  for (uint32_t i = 0; i < n; i++) {
    int r = OPS(m)->in_install(&m->e, to_oblock(ids[i] & ~FC_XFER_DIRTY_BIT),
                               data[i], ids[i] & FC_XFER_DIRTY_BIT);
    if (r < 0)
      return r;
    res[i] = r;
  }
  return 0;
}

static void *
installer(void *arg)
{
  struct fc_migration *m = arg;
  struct dest_queue *q = m->dst.inq;
  uint32_t cap = FC_XFER_MAX_PAYLOAD / (8 + m->bs), stride = 8 + m->bs;
  uint64_t *ids = malloc(cap * sizeof *ids);
  const void **data = malloc(cap * sizeof *data);
  int *res = malloc(cap * sizeof *res);

  fc_migr_thread_setup("fc-migr-install");
  if (!ids || !data || !res) {
    fc_migr_fail(m, "cannot start installing blocks: %s", strerror(ENOMEM));
    goto out;
  }
  for (;;) {
    struct dest_batch *b;
    int r;

    pthread_mutex_lock(&m->lock);
    while (!q->head && !over_locked(m))
      pthread_cond_wait(&m->cond, &m->lock);
    if (over_locked(m)) {
      pthread_mutex_unlock(&m->lock);
      break;
    }
    b = q->head;
    if (!(q->head = b->next))
      q->tail = NULL;
    q->busy++;
    pthread_mutex_unlock(&m->lock);

    for (uint32_t i = 0; i < b->n; i++) {
      ids[i] = fc_get_le64(b->frame + (size_t)i * stride);
      data[i] = b->frame + (size_t)i * stride + 8;
    }
    r = install(m, ids, data, b->n, res);
    if (r < 0)
      fc_migr_fail(m, "cannot install a batch of %u blocks from block %llu: %s",
                   b->n, (unsigned long long)(ids[0] & ~FC_XFER_DIRTY_BIT),
                   strerror(-r));
    pthread_mutex_lock(&m->lock);
    if (!r)
      note_installed_locked(m, ids, res, b->n);
    /* Before the CREDIT goes out: the source may answer it at once. */
    q->outstanding -= b->n;
    pthread_mutex_unlock(&m->lock);
    if (!r)
      fc_migr_dest_flush_acks(m, b->n);
    pthread_mutex_lock(&m->lock);
    q->busy--;
    if (b->full && q->npool < FRAME_POOL) {
      q->pool[q->npool++] = b->frame;
      b->frame = NULL;
    }
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    free(b->frame);
    free(b);
    if (r < 0)
      break;
  }
out:
  free(ids);
  free(data);
  free(res);
  return NULL;
}

int
fc_migr_dest_installers_start(struct fc_migration *m)
{
  struct dest_queue *q = m->dst.inq;
  unsigned want = OPS(m)->in_install_many ? INSTALLERS : 1;
  int r = 0;

  while (q->nthr < want && !r) {
    r = -pthread_create(&q->thr[q->nthr], NULL, installer, m);
    if (!r)
      q->nthr++;
  }
  /* One installer is enough to make progress. */
  return q->nthr ? 0 : r;
}

void
fc_migr_dest_installers_stop(struct fc_migration *m)
{
  pthread_mutex_lock(&m->lock);
  m->dst.inq->stopped = true;
  pthread_cond_broadcast(&m->cond);
  while (m->dst.inq->busy)
    pthread_cond_wait(&m->cond, &m->lock);
  pthread_mutex_unlock(&m->lock);
}

void
fc_migr_dest_installers_join(struct fc_migration *m)
{
  struct dest_queue *q = m->dst.inq;

  fc_migr_dest_installers_stop(m);
  for (unsigned i = 0; i < q->nthr; i++)
    pthread_join(q->thr[i], NULL);
  q->nthr = 0;
}

/* Both the receiver and the acknowledger can be first to see the link go:
 * whichever it is stops relying on the source at once (clean remote blocks
 * fall back to the origin, dirty ones fail until the source's copy is back)
 * and tells the operator the same thing. */
void
fc_migr_dest_source_lost(struct fc_migration *m, const char *when, const char *why)
{
  OPS(m)->in_lost(&m->e);
  fc_migr_fail(m, "transfer stream from the source lost%s: %s%s", when, why,
               OPS(m)->in_remote_dirty(&m->e) ?
               "; dirty blocks still on the source are unreadable here until "
               "they are written back there" : "");
}

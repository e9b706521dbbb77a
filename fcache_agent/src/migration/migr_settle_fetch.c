/* SPDX-License-Identifier: Apache-2.0 */
/* See migr_settle_fetch.h. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "migr_settle_fetch.h"

struct pending {
  struct pending *next;
  uint64_t ob;
  void *data;
  fc_engine_fetch_done_fn *done;
  void *arg;
};

struct fc_settle_fetch {
  struct fc_xfer_conn *c;
  uint32_t bs;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  /* Asked, not answered, in the order asked: the source answers so. */
  struct pending *head, *tail;
  bool closing, broken;
  uint64_t answered;
  pthread_t rx;
  uint8_t *buf;                 /* 8 + bs: one answer */
};

static void
fail_all_locked(struct fc_settle_fetch *f, int err)
{
  struct pending *p;

  f->broken = true;
  while ((p = f->head)) {
    f->head = p->next;
    pthread_mutex_unlock(&f->lock);
    p->done(p->arg, err, false);
    free(p);
    pthread_mutex_lock(&f->lock);
  }
  f->tail = NULL;
  pthread_cond_broadcast(&f->cond);
}

/* The receiver reads only while a fetch is outstanding: with none, the
 * source sends nothing, and the stream is left between frames. */
static void *
rx_main(void *arg)
{
  struct fc_settle_fetch *f = arg;
  struct fc_xfer_header h;
  struct pending *p;
  int r;

  pthread_mutex_lock(&f->lock);
  for (;;) {
    while (!f->head && !f->closing && !f->broken)
      pthread_cond_wait(&f->cond, &f->lock);
    if (!f->head)
      break;
    pthread_mutex_unlock(&f->lock);
    r = fc_xfer_recv(f->c, &h, f->buf, 8 + f->bs);
    pthread_mutex_lock(&f->lock);
    p = f->head;
    if (!r && (h.type != FC_XFER_BLOCK || h.length < 8 ||
               (fc_get_le64(f->buf) & ~FC_XFER_DIRTY_BIT) != p->ob ||
               (h.flags & FC_XFER_F_ABSENT ? h.length != 8 : h.length != 8 + f->bs)))
      r = -EPROTO;
    if (r) {
      log_error("settle session: fetching block %llu from the source failed: %s",
                (unsigned long long)p->ob, strerror(-r));
      fail_all_locked(f, r == -EPROTO ? -EPROTO : -EIO);
      break;
    }
    if (!(f->head = p->next))
      f->tail = NULL;
    f->answered++;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    if (h.flags & FC_XFER_F_ABSENT) {
      p->done(p->arg, -ENOENT, false);
    } else {
      memcpy(p->data, f->buf + 8, f->bs);
      p->done(p->arg, 0, (fc_get_le64(f->buf) & FC_XFER_DIRTY_BIT) != 0);
    }
    free(p);
    pthread_mutex_lock(&f->lock);
  }
  pthread_mutex_unlock(&f->lock);
  return NULL;
}

int
fc_settle_fetch_open(struct fc_xfer_conn *c, uint32_t bs, struct fc_settle_fetch **out)
{
  struct fc_settle_fetch *f = calloc(1, sizeof *f);
  int r;

  if (!f || !(f->buf = malloc(8 + (size_t)bs))) {
    free(f);
    return -ENOMEM;
  }
  f->c = c;
  f->bs = bs;
  pthread_mutex_init(&f->lock, NULL);
  pthread_cond_init(&f->cond, NULL);
  r = -pthread_create(&f->rx, NULL, rx_main, f);
  if (r) {
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->lock);
    free(f->buf);
    free(f);
    return r;
  }
  *out = f;
  return 0;
}

int
fc_settle_fetch_start(void *ctx, oblock_t ob, void *data, bool required,
                      fc_engine_fetch_done_fn *done, void *arg)
{
  struct fc_settle_fetch *f = ctx;
  struct pending *p = malloc(sizeof *p);
  uint8_t id[8];
  int r;

  (void)required;
  if (!p)
    return -ENOMEM;
  *p = (struct pending){ .ob = ob.n, .data = data, .done = done, .arg = arg };
  fc_put_le64(id, ob.n);
  /* Queued and sent in one order: the lock is held across the send (a
   * send waits only for the socket, never for an answer). */
  pthread_mutex_lock(&f->lock);
  if (f->closing || f->broken) {
    pthread_mutex_unlock(&f->lock);
    free(p);
    return -ENOTCONN;
  }
  r = fc_xfer_send(f->c, FC_XFER_FETCH, 0, id, 8, NULL, 0);
  if (r) {
    pthread_mutex_unlock(&f->lock);
    free(p);
    return -ENOTCONN;
  }
  if (f->tail)
    f->tail->next = p;
  else
    f->head = p;
  f->tail = p;
  pthread_cond_broadcast(&f->cond);
  pthread_mutex_unlock(&f->lock);
  return 0;
}

uint64_t
fc_settle_fetch_count(struct fc_settle_fetch *f, bool *broken)
{
  uint64_t n;

  pthread_mutex_lock(&f->lock);
  n = f->answered;
  if (broken)
    *broken = f->broken;
  pthread_mutex_unlock(&f->lock);
  return n;
}

int
fc_settle_fetch_close(struct fc_settle_fetch *f)
{
  bool broken;

  if (!f)
    return 0;
  pthread_mutex_lock(&f->lock);
  f->closing = true;
  pthread_cond_broadcast(&f->cond);
  pthread_mutex_unlock(&f->lock);
  pthread_join(f->rx, NULL);
  broken = f->broken;
  pthread_cond_destroy(&f->cond);
  pthread_mutex_destroy(&f->lock);
  free(f->buf);
  free(f);
  return broken ? -EPIPE : 0;
}

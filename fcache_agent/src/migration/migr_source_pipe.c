/* SPDX-License-Identifier: Apache-2.0 */
/* The source's background copy as a two-stage pipeline: the sender thread
 * (migr_source.c) reads the next batch of blocks into a frame while a
 * second thread, fc-migr-src-out, sends the previous one.  Reading a
 * batch (one preadv per run of adjacent cache blocks, straight into the
 * frame) and sending it (checksum, copy into the socket, TLS) each cost
 * about as much; one after the other in one thread they made the source
 * the slowest stage of an unthrottled copy (perf: 40 % of both agents'
 * CPU in that one thread).
 *
 * Two frames, used in turn: one being filled, one being sent.  Frames go
 * out in the order they were filled; fetch replies and read answers are
 * sent directly by the sender thread and may pass them, which the
 * protocol allows; DONE waits for the pipe to drain.  A frame's dirty
 * blocks are recorded as sent before it is queued, since the ACK may come
 * back before the send returns.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "common/invfilter.h"
#include "common/lockcheck.h"
#include "migr_source_priv.h"

#define SLOTS 2

struct slot {
  uint64_t *obs;
  uint8_t *frame;        /* entries of (id, data) */
  void **data;
  bool *dirty;
  int *res;
  uint32_t n, k;         /* blocks asked for, entries in the frame */
  bool ready;            /* filled, not yet sent */
};

struct fc_src_pipe {
  struct fc_migration *m;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct slot s[SLOTS];
  unsigned fill, send;   /* next slot to fill, to send */
  uint32_t max;          /* blocks per frame */
  bool stop;
  int err;               /* the first send error */
  pthread_t thr;
  bool running;
};

int
fc_migr_src_record_locked(struct fc_migration *m, struct fc_invfilter **set, uint64_t ob)
{
  FC_ASSERT_HELD(&m->lock);
  int r;

  if (!*set) {
    if (!(*set = calloc(1, sizeof **set)))
      return -ENOMEM;
    if ((r = fc_invfilter_init(*set, 1024))) {
      free(*set);
      *set = NULL;
      return r;
    }
  }
  r = fc_invfilter_add(*set, to_oblock(ob));
  return r < 0 ? r : 0;
}

/* Read s->obs[0..s->n) into the frame, in one pass when the engine can,
 * and pack it: blocks the source no longer holds (fetched, acked and
 * forgotten) are left out. */
static int
read_batch(struct fc_migration *m, struct slot *s)
{
  const struct fc_engine_migr_ops *ops = m->agent->host.ops->migr;
  uint32_t stride = 8 + m->bs, k = 0;
  int r = 0;

  if (ops->out_read_many) {
    for (uint32_t i = 0; i < s->n; i++)
      s->data[i] = s->frame + (size_t)i * stride + 8;
    r = ops->out_read_many(&m->e, s->obs, s->n, s->data, s->dirty, s->res);
    if (r)
      return r;
  } else {
    for (uint32_t i = 0; i < s->n; i++) {
      s->res[i] = ops->out_read(&m->e, to_oblock(s->obs[i]),
                                s->frame + (size_t)i * stride + 8, &s->dirty[i]);
      if (s->res[i] && s->res[i] != -ENOENT)
        return s->res[i];
    }
  }
  for (uint32_t i = 0; i < s->n; i++) {
    uint8_t *e = s->frame + (size_t)k * stride;

    if (s->res[i] == -ENOENT)
      continue;
    if (s->res[i])
      return s->res[i];
    if (k != i)
      memmove(e + 8, s->frame + (size_t)i * stride + 8, m->bs);
    fc_put_le64(e, s->obs[i] | (s->dirty[i] ? FC_XFER_DIRTY_BIT : 0));
    k++;
  }
  s->k = k;
  return 0;
}

void
fc_migr_src_pace(struct fc_migration *m, uint64_t bytes)
{
  for (;;) {
    uint64_t wait;

    pthread_mutex_lock(&m->lock);
    wait = fc_ratelimit_reserve(&m->src.rl, bytes);
    pthread_mutex_unlock(&m->lock);
    if (!wait)
      return;
    m->src.rl.sleep_ns(wait);
  }
}

/* CloudCache's source vacates each block as it moves: a clean one as soon
 * as it is sent after the switchover (the origin holds it too, so the
 * destination dropping it loses nothing), a dirty one on its ACK. */
static bool
frees_as_sent(struct fc_migration *m)
{
  bool after_switch;

  if (!fc_strategy(m->e.strategy)->background_variant)
    return false;
  pthread_mutex_lock(&m->lock);
  after_switch = m->src.switch_begun && m->state == FC_MS_SWITCHED;
  pthread_mutex_unlock(&m->lock);
  return after_switch;
}

static void
forget_clean(struct fc_migration *m, const struct slot *s)
{
  uint32_t stride = 8 + m->bs;

  for (uint32_t i = 0; i < s->k && m->e.vol; i++) {
    uint64_t id = fc_get_le64(s->frame + (size_t)i * stride);

    if (!(id & FC_XFER_DIRTY_BIT))
      (void)m->agent->host.ops->migr->out_forget(&m->e, to_oblock(id));
  }
}

static void *
sender(void *arg)
{
  struct fc_src_pipe *p = arg;
  struct fc_migration *m = p->m;
  uint32_t stride = 8 + m->bs;

  fc_migr_thread_setup("fc-migr-src-out");
  for (;;) {
    struct slot *s;
    int r = 0;

    pthread_mutex_lock(&p->lock);
    while (!p->s[p->send].ready && !p->stop)
      pthread_cond_wait(&p->cond, &p->lock);
    s = &p->s[p->send];
    if (p->stop) {      /* the migration ended: what is queued stays here */
      pthread_mutex_unlock(&p->lock);
      break;
    }
    pthread_mutex_unlock(&p->lock);
    if (s->k) {
      fc_migr_src_pace(m, FC_XFER_HEADER_SIZE + (uint64_t)s->k * stride);
      r = fc_xfer_send(&m->conn, FC_XFER_BLOCK, 0, s->frame, s->k * stride, NULL, 0);
    }
    if (!r && s->k && frees_as_sent(m))
      forget_clean(m, s);
    pthread_mutex_lock(&m->lock);
    if (!r) {
      m->bytes_done += (uint64_t)s->k * m->bs;
      m->blocks_done += s->n;
    }
    m->credits += s->n - s->k;    /* the blocks left out cost nothing */
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_lock(&p->lock);
    s->ready = false;
    p->send = (p->send + 1) % SLOTS;
    if (r && !p->err)
      p->err = r;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    if (r) {
      if (!m->stopping)
        fc_migr_fail(m, "sending to %s failed: %s", m->peer, strerror(-r));
      break;
    }
  }
  return NULL;
}

static void
slot_free(struct slot *s)
{
  free(s->obs);
  free(s->frame);
  free(s->data);
  free(s->dirty);
  free(s->res);
}

int
fc_src_pipe_start(struct fc_migration *m, struct fc_src_pipe **out)
{
  struct fc_src_pipe *p = calloc(1, sizeof *p);
  uint32_t max = FC_XFER_MAX_PAYLOAD / (8 + m->bs);
  int r = 0;

  if (!p)
    return -ENOMEM;
  p->m = m;
  p->max = max ? max : 1;
  for (unsigned i = 0; i < SLOTS && !r; i++) {
    struct slot *s = &p->s[i];

    s->obs = malloc(p->max * sizeof *s->obs);
    s->frame = malloc((size_t)p->max * (8 + m->bs));
    s->data = malloc(p->max * sizeof *s->data);
    s->dirty = malloc(p->max * sizeof *s->dirty);
    s->res = malloc(p->max * sizeof *s->res);
    if (!s->obs || !s->frame || !s->data || !s->dirty || !s->res)
      r = -ENOMEM;
  }
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->cond, NULL);
  if (!r && (r = -pthread_create(&p->thr, NULL, sender, p)) == 0)
    p->running = true;
  if (r) {
    fc_src_pipe_stop(p);
    return r;
  }
  *out = p;
  return 0;
}

uint32_t
fc_src_pipe_max(const struct fc_src_pipe *p)
{
  return p->max;
}

int
fc_src_pipe_push(struct fc_src_pipe *p, const uint64_t *obs, uint32_t n)
{
  struct fc_migration *m = p->m;
  uint32_t stride = 8 + m->bs;
  struct slot *s;
  int r;

  pthread_mutex_lock(&p->lock);
  while (p->s[p->fill].ready && !p->err && !p->stop)
    pthread_cond_wait(&p->cond, &p->lock);
  r = p->err ? p->err : p->stop ? -ECANCELED : 0;
  s = &p->s[p->fill];
  pthread_mutex_unlock(&p->lock);
  if (r)
    return r;
  memcpy(s->obs, obs, (size_t)n * sizeof *obs);
  s->n = n;
  r = read_batch(m, s);
  if (r)
    return r;
  pthread_mutex_lock(&m->lock);
  for (uint32_t i = 0; i < s->k && !r; i++) {
    uint64_t id = fc_get_le64(s->frame + (size_t)i * stride);
    if (id & FC_XFER_DIRTY_BIT)
      r = fc_migr_src_record_locked(m, &m->src.sent_dirty, id & ~FC_XFER_DIRTY_BIT);
  }
  pthread_mutex_unlock(&m->lock);
  if (r)
    return r;
  pthread_mutex_lock(&p->lock);
  s->ready = true;
  p->fill = (p->fill + 1) % SLOTS;
  pthread_cond_broadcast(&p->cond);
  pthread_mutex_unlock(&p->lock);
  return 0;
}

int
fc_src_pipe_drain(struct fc_src_pipe *p)
{
  int r;

  pthread_mutex_lock(&p->lock);
  for (;;) {
    bool busy = false;

    for (unsigned i = 0; i < SLOTS; i++)
      busy |= p->s[i].ready;
    if (!busy || p->err || p->stop)
      break;
    pthread_cond_wait(&p->cond, &p->lock);
  }
  r = p->err ? p->err : p->stop ? -ECANCELED : 0;
  pthread_mutex_unlock(&p->lock);
  return r;
}

void
fc_src_pipe_stop(struct fc_src_pipe *p)
{
  if (!p)
    return;
  pthread_mutex_lock(&p->lock);
  p->stop = true;
  pthread_cond_broadcast(&p->cond);
  pthread_mutex_unlock(&p->lock);
  if (p->running)
    pthread_join(p->thr, NULL);
  for (unsigned i = 0; i < SLOTS; i++)
    slot_free(&p->s[i]);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->cond);
  free(p);
}

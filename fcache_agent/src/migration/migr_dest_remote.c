/* SPDX-License-Identifier: Apache-2.0 */
/* The destination's requests to the source, made from the VM's threads:
 * fetching a block the source's cache holds (on-demand strategies: in the
 * caller's thread, or ended by a call, for dmcache's relay) and reading
 * the source's volume before the switchover; and their answers, which the
 * receiver thread (migr_dest.c) hands over.  A dirty block fetched and
 * installed here is acknowledged by the fetcher thread, where the source
 * accepts that (HELLO's "ack_fetched"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/deadline.h"
#include "common/lockcheck.h"
#include "common/log.h"
#include "migration.h"
#include "migr_dest_priv.h"

/* Fetches.  Every fetch is a fetch_wait on m->dst.waiters, ended exactly
 * once by its done call: by the receiver (the source's BLOCK or ABSENT,
 * fc_migr_dest_deliver_reply), or by the fetcher thread below when its
 * time is up or the migration has ended.  A fetch started while no
 * stream is connected, or sent on a stream that has since gone, is sent
 * by the fetcher on the next one (m->dst.conn_gen), within its time: a
 * reconnect of the source costs the fetch a wait, not a failure.  The
 * synchronous fetch is a wait on the same. */

static bool
fetch_live_locked(const struct fc_migration *m)
{
  FC_ASSERT_HELD(&m->lock);
  return !m->stopping && m->state != FC_MS_FAILED && m->state != FC_MS_ABORTED;
}

static int
fetch_send(struct fc_migration *m, uint64_t ob)
{
  uint8_t id[8];

  fc_put_le64(id, ob);
  return fc_xfer_send(&m->conn, FC_XFER_FETCH, 0, id, 8, NULL, 0);
}

/* End the fetches of the list, under no lock: their done may start
 * others. */
static void
fetch_end_all(struct fetch_wait *w)
{
  while (w) {
    struct fetch_wait *next = w->next;

    w->done(w->arg, w->r, w->dirty);
    free(w);
    w = next;
  }
}

static bool
ts_before(const struct timespec *a, const struct timespec *b)
{
  return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Fetched dirty blocks wait in m->dst.to_ack for their ACK, and the
 * stream is there to take it.  Not once COMPLETE is on its way: that
 * lets the source forget everything, and it may close the stream. */
static bool
acks_due_locked(const struct fc_migration *m)
{
  FC_ASSERT_HELD(&m->lock);
  return m->dst.fetched_to_ack && m->connected && fetch_live_locked(m) &&
         m->state != FC_MS_COMPLETED && !m->dst.complete_sending &&
         !m->dst.complete_sent;
}

/* Fetches sent again at once by one pass of the fetcher. */
#define RESEND_BATCH 64

static void *
fetcher_main(void *arg)
{
  struct fc_migration *m = arg;

  fc_migr_thread_setup("fc-migr-fetch");
  pthread_mutex_lock(&m->lock);
  for (;;) {
    struct fetch_wait *ended = NULL, **p = &m->dst.waiters;
    uint64_t resend[RESEND_BATCH];
    unsigned n = 0;
    bool live = fetch_live_locked(m);
    struct timespec now, next = { 0, 0 };

    clock_gettime(CLOCK_REALTIME, &now);
    while (*p) {
      struct fetch_wait *w = *p;

      if (!live || !ts_before(&now, &w->until)) {
        w->r = live ? -ETIMEDOUT : -ECONNRESET;
        *p = w->next;
        w->next = ended;
        ended = w;
        continue;
      }
      if (m->connected && w->sent_gen != m->dst.conn_gen && n < RESEND_BATCH) {
        w->sent_gen = m->dst.conn_gen;
        resend[n++] = w->ob;
      }
      if (!next.tv_sec || ts_before(&w->until, &next))
        next = w->until;
      p = &w->next;
    }
    if (ended || n) {
      pthread_mutex_unlock(&m->lock);
      /* A send that fails leaves the fetch to the next stream, or to its
       * time. */
      for (unsigned i = 0; i < n; i++)
        (void)fetch_send(m, resend[i]);
      fetch_end_all(ended);
      pthread_mutex_lock(&m->lock);
      continue;
    }
    if (acks_due_locked(m)) {
      /* Here rather than in the VM's thread that installed them: making
       * them durable is a sync, and the ones noted meanwhile share it. */
      m->dst.fetched_to_ack = false;
      pthread_mutex_unlock(&m->lock);
      fc_migr_dest_flush_acks(m, 0);
      pthread_mutex_lock(&m->lock);
      continue;
    }
    if (m->dst.fetcher_stop)
      break;
    if (m->dst.waiters)
      pthread_cond_timedwait(&m->cond, &m->lock, &next);
    else
      pthread_cond_wait(&m->cond, &m->lock);
  }
  pthread_mutex_unlock(&m->lock);
  return NULL;
}

/* fc_migr_join, once m->stopping is set: every fetch left ends with
 * -ECONNRESET, then the thread. */
static void
fetcher_join(struct fc_migration *m)
{
  pthread_mutex_lock(&m->lock);
  m->dst.fetcher_stop = true;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->lock);
  if (m->dst.fetcher_running)
    pthread_join(m->dst.fetcher, NULL);
  m->dst.fetcher_running = false;
}

/* bounded: at most FETCH_MAX_INFLIGHT in flight.  A caller that waits
 * for its fetch in its own thread is bounded by its threads instead. */
static int
fetch_start(struct fc_migration *m, oblock_t ob, void *data, bool required, bool bounded,
            fc_engine_fetch_done_fn *done, void *arg)
{
  struct fetch_wait *w = NULL;
  unsigned inflight = 0;
  bool send = false;
  int r = 0;

  pthread_mutex_lock(&m->lock);
  for (struct fetch_wait *x = m->dst.waiters; x; x = x->next)
    inflight++;
  if (!fetch_live_locked(m) || m->dst.fetcher_stop)
    r = -ENOTCONN;
  else if ((bounded && inflight >= FETCH_MAX_INFLIGHT) ||
           (!required && inflight >= FETCH_CLEAN_MAX_INFLIGHT))
    r = -EBUSY;
  else if (!(w = calloc(1, sizeof *w)))
    r = -ENOMEM;
  if (!r && !m->dst.fetcher_running) {
    r = -pthread_create(&m->dst.fetcher, NULL, fetcher_main, m);
    if (!r) {
      m->dst.fetcher_running = true;
      m->dst.fetcher_join = fetcher_join;
    }
  }
  if (r) {
    pthread_mutex_unlock(&m->lock);
    free(w);
    return r;
  }
  w->ob = ob.n;
  w->data = data;
  w->done = done;
  w->arg = arg;
  w->until = fc_deadline_ms(required ? FETCH_TIMEOUT_S * 1000 : FETCH_CLEAN_TIMEOUT_MS);
  if (m->connected) {
    w->sent_gen = m->dst.conn_gen;
    send = true;
  }
  w->next = m->dst.waiters;
  m->dst.waiters = w;
  pthread_cond_broadcast(&m->cond);     /* the fetcher's next deadline */
  pthread_mutex_unlock(&m->lock);
  /* w may have ended already: only ob is used from here.  A send that
   * fails leaves the fetch to the next stream, or to its time. */
  if (send)
    (void)fetch_send(m, ob.n);
  return 0;
}

void
fc_migr_dest_fetched(void *ctx, oblock_t ob)
{
  struct fc_migration *m = ctx;

  pthread_mutex_lock(&m->lock);
  if (m->dst.ack_fetched && fetch_live_locked(m) &&
      fc_migr_dest_to_ack_locked(m, ob.n) == 0) {
    m->dst.fetched_to_ack = true;
    pthread_cond_broadcast(&m->cond);   /* the fetcher sends it */
  }
  pthread_mutex_unlock(&m->lock);
}

int
fc_migr_dest_fetch_start(void *ctx, oblock_t ob, void *data, bool required,
                         fc_engine_fetch_done_fn *done, void *arg)
{
  return fetch_start(ctx, ob, data, required, true, done, arg);
}

struct fetch_sync {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool ended, dirty;
  int r;
};

static void
fetch_sync_done(void *arg, int r, bool dirty)
{
  struct fetch_sync *s = arg;

  pthread_mutex_lock(&s->lock);
  s->r = r;
  s->dirty = dirty;
  s->ended = true;
  pthread_cond_signal(&s->cond);
  pthread_mutex_unlock(&s->lock);
}

/* The engine's way to ask the source for one block and wait (ucache's
 * on-demand strategies; see fc_ucache_fetch_fn).  With no stream
 * connected it declines at once (-ENOTCONN): ucache then reads the
 * origin, or fails the VM's read of a dirty block, rather than wait. */
int
fc_migr_dest_fetch(void *ctx, oblock_t ob, void *data, bool *dirty, bool required)
{
  struct fc_migration *m = ctx;
  struct fetch_sync s = { .r = 0 };
  bool connected;
  int r;

  pthread_mutex_lock(&m->lock);
  connected = m->connected;
  pthread_mutex_unlock(&m->lock);
  if (!connected)
    return -ENOTCONN;
  pthread_mutex_init(&s.lock, NULL);
  pthread_cond_init(&s.cond, NULL);
  r = fetch_start(m, ob, data, required, false, fetch_sync_done, &s);
  if (!r) {
    pthread_mutex_lock(&s.lock);
    while (!s.ended)
      pthread_cond_wait(&s.cond, &s.lock);
    pthread_mutex_unlock(&s.lock);
    r = s.r;
    *dirty = s.dirty;
  }
  pthread_cond_destroy(&s.cond);
  pthread_mutex_destroy(&s.lock);
  return r;
}

static bool
read_live_locked(const struct fc_migration *m)
{
  FC_ASSERT_HELD(&m->lock);
  return !m->stopping && m->state != FC_MS_FAILED && m->state != FC_MS_ABORTED;
}

/* One READ of at most FC_XFER_READ_MAX bytes. */
static int
read_chunk(struct fc_migration *m, void *buf, uint32_t count, uint64_t off,
           const struct timespec *until)
{
  struct read_wait w = { .buf = buf, .len = count };
  uint8_t req[FC_XFER_READ_SIZE];
  int r = 0;

  pthread_mutex_lock(&m->lock);
  /* In accept, the engine hears of the source just before the stream is
   * marked connected. */
  while (read_live_locked(m) && !m->dst.switch_received &&
         (!m->connected || m->dst.reads_inflight >= FC_XFER_READS_INFLIGHT))
    if (pthread_cond_timedwait(&m->cond, &m->lock, until) == ETIMEDOUT) {
      r = -ETIMEDOUT;
      break;
    }
  if (!r && !read_live_locked(m))
    r = -EIO;
  else if (!r && (m->dst.switch_received || !m->dst.peer_reads))
    r = -EAGAIN;
  if (r) {
    pthread_mutex_unlock(&m->lock);
    return r;
  }
  w.tag = ++m->dst.next_read_tag;
  w.next = m->dst.read_waiters;
  m->dst.read_waiters = &w;
  m->dst.reads_inflight++;
  pthread_mutex_unlock(&m->lock);

  fc_put_le64(req, w.tag);
  fc_put_le64(req + 8, off);
  fc_put_le32(req + 16, count);
  r = fc_xfer_send(&m->conn, FC_XFER_READ, 0, req, sizeof req, NULL, 0);
  pthread_mutex_lock(&m->lock);
  while (!r && !w.done && read_live_locked(m))
    if (pthread_cond_timedwait(&m->cond, &m->lock, until) == ETIMEDOUT)
      r = -ETIMEDOUT;
  for (struct read_wait **p = &m->dst.read_waiters; *p; p = &(*p)->next)
    if (*p == &w) {
      *p = w.next;
      break;
    }
  m->dst.reads_inflight--;
  if (!r)
    r = w.done ? w.r : -EIO;
  if (!r)
    m->dst.forwarded_reads++;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->lock);
  return r;
}

int
fc_migr_dest_read(void *ctx, void *vbuf, uint32_t count, uint64_t off)
{
  struct fc_migration *m = ctx;
  struct timespec until = fc_deadline_ms(READ_TIMEOUT_S * 1000);
  char *buf = vbuf;
  int r = 0;

  for (uint32_t done = 0; done < count && !r;) {
    uint32_t k = count - done < FC_XFER_READ_MAX ? count - done : FC_XFER_READ_MAX;

    r = read_chunk(m, buf + done, k, off + done, &until);
    done += k;
  }
  if (r && r != -EAGAIN)
    log_warning("migration %s of volume %s: a read of %u bytes at %llu before the switchover "
                "could not be answered by the source: %s", m->e.id, m->e.volume_id, count,
                (unsigned long long)off, strerror(-r));
  return r;
}

/* A DATA frame: the answer to one of our READs.  A reply for a read that
 * gave up waiting is dropped; one that does not fit its read ends the
 * stream. */
int
fc_migr_dest_deliver_data(struct fc_migration *m, uint16_t flags, const uint8_t *p, uint32_t len)
{
  uint64_t tag;
  int r = 0;

  if (len < 8)
    return -EPROTO;
  tag = fc_get_le64(p);
  pthread_mutex_lock(&m->lock);
  for (struct read_wait *w = m->dst.read_waiters; w; w = w->next) {
    if (w->tag != tag || w->done)
      continue;
    if (flags & FC_XFER_F_RETRY) {
      w->r = len == 8 ? -EAGAIN : -EPROTO;
    } else if (flags & FC_XFER_F_ERROR) {
      uint32_t e = len == 12 ? fc_get_le32(p + 8) : 0;
      /* The source's errno, kept only if it is one. */
      w->r = e > 0 && e < 4096 ? -(int)e : -EIO;
      if (len != 12)
        w->r = -EPROTO;
    } else if (len == 8 + w->len) {
      memcpy(w->buf, p + 8, w->len);
      w->r = 0;
    } else {
      w->r = -EPROTO;
    }
    r = w->r == -EPROTO ? -EPROTO : 0;
    w->done = true;
    break;
  }
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->lock);
  return r;
}

void
fc_migr_dest_deliver_reply(struct fc_migration *m, uint64_t id, uint16_t flags, const uint8_t *data)
{
  uint64_t ob = id & ~FC_XFER_DIRTY_BIT;
  struct fetch_wait *ended = NULL, **p;

  pthread_mutex_lock(&m->lock);
  for (p = &m->dst.waiters; *p;) {
    struct fetch_wait *w = *p;

    if (w->ob != ob) {
      p = &w->next;
      continue;
    }
    if (flags & FC_XFER_F_ABSENT) {
      w->r = -ENOENT;
    } else {
      memcpy(w->data, data, m->bs);
      w->dirty = id & FC_XFER_DIRTY_BIT;
      w->r = 0;
    }
    *p = w->next;
    w->next = ended;
    ended = w;
  }
  pthread_mutex_unlock(&m->lock);
  fetch_end_all(ended);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The destination's requests to the source, made from the VM's threads:
 * fetching a block the source's cache holds (on-demand strategies) and
 * reading the source's volume before the switchover; and their answers,
 * which the receiver thread (migr_dest.c) hands over. */
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

/* The engine's way to ask the source for one block (ucache's on-demand
 * strategies); see fc_ucache_fetch_fn. */
int
fc_migr_dest_fetch(void *ctx, oblock_t ob, void *data, bool *dirty, bool required)
{
  struct fc_migration *m = ctx;
  struct fetch_wait w = { .ob = ob.n, .data = data };
  struct timespec until;
  unsigned inflight = 0;
  uint8_t id[8];
  int r = 0;

  pthread_mutex_lock(&m->lock);
  if (!m->connected || m->state == FC_MS_FAILED || m->state == FC_MS_ABORTED) {
    pthread_mutex_unlock(&m->lock);
    return -ENOTCONN;
  }
  for (struct fetch_wait *x = m->dst.waiters; x; x = x->next)
    inflight++;
  if (!required && inflight >= FETCH_CLEAN_MAX_INFLIGHT) {
    pthread_mutex_unlock(&m->lock);
    return -EBUSY;
  }
  w.next = m->dst.waiters;
  m->dst.waiters = &w;
  pthread_mutex_unlock(&m->lock);

  fc_put_le64(id, ob.n);
  r = fc_xfer_send(&m->conn, FC_XFER_FETCH, 0, id, 8, NULL, 0);
  until = fc_deadline_ms(required ? FETCH_TIMEOUT_S * 1000 : FETCH_CLEAN_TIMEOUT_MS);
  pthread_mutex_lock(&m->lock);
  while (!r && !w.done && m->state != FC_MS_FAILED && m->state != FC_MS_ABORTED)
    if (pthread_cond_timedwait(&m->cond, &m->lock, &until) == ETIMEDOUT)
      r = -ETIMEDOUT;
  for (struct fetch_wait **p = &m->dst.waiters; *p; p = &(*p)->next)
    if (*p == &w) {
      *p = w.next;
      break;
    }
  if (!r)
    r = w.done ? w.r : -ECONNRESET;
  *dirty = w.dirty;
  pthread_mutex_unlock(&m->lock);
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

  pthread_mutex_lock(&m->lock);
  for (struct fetch_wait *w = m->dst.waiters; w; w = w->next) {
    if (w->ob != ob || w->done)
      continue;
    if (flags & FC_XFER_F_ABSENT) {
      w->r = -ENOENT;
    } else {
      memcpy(w->data, data, m->bs);
      w->dirty = id & FC_XFER_DIRTY_BIT;
      w->r = 0;
    }
    w->done = true;
  }
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->lock);
}

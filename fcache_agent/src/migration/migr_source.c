/* SPDX-License-Identifier: Apache-2.0 */
/* The source side of a cache migration: one thread receives (FETCH, READ,
 * CREDIT, ACK, COMPLETE), one sends.  The sender serves on-demand fetches
 * first, then the destination's reads before the switchover, then
 * background blocks while the receiver has credit, all under one rate
 * limit (CloudCache §5.2). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include "agent/agent.h"
#include "common/deadline.h"
#include "common/invfilter.h"
#include "common/lockcheck.h"
#include "common/log.h"
#include "common/random_hex.h"
#include "migration.h"
#include "migr_source_priv.h"
#include "xfer_tls.h"
#include "engine/engine.h"

#define HANDSHAKE_TIMEOUT_S 10
/* What the destination may take to serve the volume after SWITCH: a
 * dmcache destination loads its final table there (firepan: after a
 * cache_restore of what is not yet committed).  The VM stays paused. */
#define FC_SWITCH_ACK_TIMEOUT_S 60
/* Waits between tries of a stream the destination's busy listener shut. */
#define DIAL_RETRY_FIRST_MS 20
#define DIAL_RETRY_MAX_MS 640

/* A destination read before the switchover, waiting for the sender. */
struct peek_req {
  uint64_t tag, off;
  uint32_t len;
};

static bool
live(struct fc_migration *m)
{
  return !m->stopping && m->state != FC_MS_FAILED && m->state != FC_MS_ABORTED;
}

/* Under m->lock.  The destination keeps at most FC_XFER_READS_INFLIGHT
 * reads outstanding: a peer that sends more breaks the protocol. */
static int
queue_read(struct fc_migration *m, const uint8_t *p, uint32_t len)
{
  struct peek_req *q;

  if (len != FC_XFER_READ_SIZE || !m->agent->host.ops->migr->out_peek)
    return -EPROTO;
  if (m->src.readq_n >= FC_XFER_READS_INFLIGHT)
    return -EPROTO;
  if (!m->src.readq && !(m->src.readq = calloc(FC_XFER_READS_INFLIGHT, sizeof *m->src.readq)))
    return -ENOMEM;
  q = &m->src.readq[m->src.readq_n++];
  q->tag = fc_get_le64(p);
  q->off = fc_get_le64(p + 8);
  q->len = fc_get_le32(p + 16);
  return 0;
}

static void *
source_rx(void *arg)
{
  struct fc_migration *m = arg;
  uint8_t *buf = malloc(FC_XFER_MAX_PAYLOAD);
  struct fc_xfer_header h;
  int r = buf ? 0 : -ENOMEM;

  fc_migr_thread_setup("fc-migr-src-rx");
  while (!r) {
    r = fc_xfer_recv(&m->conn, &h, buf, FC_XFER_MAX_PAYLOAD);
    if (r)
      break;
    pthread_mutex_lock(&m->lock);
    switch (h.type) {
    case FC_XFER_FETCH:
      for (uint32_t i = 0; i + 8 <= h.length; i += 8) {
        if (m->src.fetchq_n == m->src.fetchq_cap) {
          uint32_t cap = m->src.fetchq_cap ? m->src.fetchq_cap * 2 : 64;
          uint64_t *q = cap <= 1u << 20 ? realloc(m->src.fetchq, cap * sizeof *q) : NULL;
          if (!q) {
            r = -ENOMEM;
            break;
          }
          m->src.fetchq = q;
          m->src.fetchq_cap = cap;
        }
        m->src.fetchq[m->src.fetchq_n++] = fc_get_le64(buf + i);
      }
      break;
    case FC_XFER_READ:
      r = queue_read(m, buf, h.length);
      break;
    case FC_XFER_CREDIT:
      if (h.length == 4)
        m->credits += fc_get_le32(buf);
      else
        r = -EPROTO;
      break;
    case FC_XFER_ACK: {
      /* The destination made these durable: CloudCache frees each block
       * as it moves, which gives the source's space back early.  Only
       * after the switchover, though: before it (firepan) the migration
       * can still be aborted, and then the source's copy is the only one
       * that counts.  And only blocks this source sent dirty (in the
       * background, or to a FETCH where WELCOME said such ACKs come): an
       * ACK for any other is a peer asking it to drop data nobody else
       * holds. */
      bool release = m->state == FC_MS_SWITCHED;
      uint32_t n = 0;
      uint64_t *obs = h.length % 8 ? NULL : malloc(h.length + 8);

      if (!obs) {
        r = h.length % 8 ? -EPROTO : -ENOMEM;
        break;
      }
      for (uint32_t i = 0; i + 8 <= h.length; i += 8) {
        oblock_t ob = to_oblock(fc_get_le64(buf + i));
        if (!fc_migr_src_acked_locked(m, ob)) {
          r = -EPROTO;
          break;
        }
        obs[n++] = ob.n;
      }
      if (r) {
        bool fetched = m->src.ack_fetched;

        free(obs);
        pthread_mutex_unlock(&m->lock);
        fc_migr_fail(m, "destination acknowledged a block this source did not "
                     "send dirty%s", fetched ? " nor serve dirty to a fetch" : "");
        pthread_mutex_lock(&m->lock);
        r = -ECONNABORTED;
        break;
      }
      pthread_mutex_unlock(&m->lock);
      for (uint32_t i = 0; release && i < n && m->e.vol; i++)
        m->agent->host.ops->migr->out_forget(&m->e, to_oblock(obs[i]));
      free(obs);
      pthread_mutex_lock(&m->lock);
      break;
    }
    case FC_XFER_COMPLETE:
      /* COMPLETE lets the source forget everything: only once everything
       * it had to send was sent. */
      if (m->src.bg_started && !m->src.done_sent) {
        pthread_mutex_unlock(&m->lock);
        fc_migr_fail(m, "destination said COMPLETE before this source sent "
                     "every block");
        pthread_mutex_lock(&m->lock);
        r = -ECONNABORTED;
        break;
      }
      m->src.complete_received = true;
      if (m->state == FC_MS_SWITCHED) {
        m->state = FC_MS_COMPLETED;
        m->completed_ns = fc_monotonic_ns();
        fc_migr_account_locked(m);
      }
      break;
    case FC_XFER_SWITCHED: {
      json_t *o;
      const char *why;

      if (!m->src.switch_ack || !m->src.switch_begun || m->src.switch_acked ||
          h.length > FC_XFER_MAX_JSON) {
        r = -EPROTO;
        break;
      }
      buf[h.length] = 0;
      o = json_loads((const char *)buf, 0, NULL);
      if (!json_is_object(o)) {
        json_decref(o);
        r = -EPROTO;
        break;
      }
      why = json_string_value(json_object_get(o, "error"));
      if (why) {
        pthread_mutex_unlock(&m->lock);
        fc_migr_fail(m, "destination could not take the volume over: %.200s", why);
        pthread_mutex_lock(&m->lock);
        r = -ECONNABORTED;
      } else
        m->src.switch_acked = true;
      json_decref(o);
      break;
    }
    case FC_XFER_ERROR:
      buf[h.length < FC_XFER_MAX_PAYLOAD ? h.length : FC_XFER_MAX_PAYLOAD - 1] = 0;
      pthread_mutex_unlock(&m->lock);
      fc_migr_fail(m, "destination gave up: %.200s", (char *)buf);
      pthread_mutex_lock(&m->lock);
      r = -ECONNABORTED;
      break;
    default:
      r = -EPROTO;
    }
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
  }
  free(buf);
  if (r != -ECONNABORTED && !m->stopping && m->state != FC_MS_COMPLETED)
    fc_migr_fail(m, "transfer stream to %s lost: %s", m->peer, strerror(-r));
  return NULL;
}

/* The answer to one FETCH: the block, or ABSENT if it moved already. */
static int
send_reply(struct fc_migration *m, uint64_t ob, uint8_t *data)
{
  const uint16_t flags = FC_XFER_F_REPLY;
  uint8_t id[8];
  bool dirty = false;
  int r;

  r = m->agent->host.ops->migr->out_read(&m->e, to_oblock(ob), data, &dirty);
  if (r == -ENOENT) {
    fc_put_le64(id, ob);
    return fc_xfer_send(&m->conn, FC_XFER_BLOCK, flags | FC_XFER_F_ABSENT, id, 8, NULL, 0);
  }
  if (r)
    return r;
  fc_migr_src_pace(m, FC_XFER_HEADER_SIZE + 8 + m->bs);
  pthread_mutex_lock(&m->lock);
  r = fc_migr_src_serving_locked(m, ob, dirty);
  pthread_mutex_unlock(&m->lock);
  if (r)
    return r;
  fc_put_le64(id, ob | (dirty ? FC_XFER_DIRTY_BIT : 0));
  r = fc_xfer_send(&m->conn, FC_XFER_BLOCK, flags, id, 8, data, m->bs);
  if (!r) {
    pthread_mutex_lock(&m->lock);
    m->bytes_done += m->bs;
    pthread_mutex_unlock(&m->lock);
  }
  return r;
}

int
fc_migr_src_serving_locked(struct fc_migration *m, uint64_t ob, bool dirty)
{
  FC_ASSERT_HELD(&m->lock);
  if (!dirty)
    return 0;
  /* Not to be sent again once on_demand's hold ends.  Out of memory, it
   * is (and the destination discards the copy). */
  if (m->src.bg_hold_until_ns)
    (void)fc_migr_src_record_locked(m, &m->src.fetched_dirty, ob);
  /* Before the send: the destination may install the block, make it
   * durable and acknowledge it before the send returns here. */
  return m->src.ack_fetched ? fc_migr_src_record_locked(m, &m->src.served_dirty, ob) : 0;
}

bool
fc_migr_src_acked_locked(struct fc_migration *m, oblock_t ob)
{
  FC_ASSERT_HELD(&m->lock);
  if (m->src.sent_dirty && fc_invfilter_remove(m->src.sent_dirty, ob))
    return true;
  return m->src.served_dirty && fc_invfilter_remove(m->src.served_dirty, ob);
}

/* The answer to one READ: the bytes as the VM sees them here, or RETRY
 * once the switchover has begun (from then on the destination answers for
 * the volume, and its own read path serves the request after SWITCH).
 * buf holds 8 + FC_XFER_READ_MAX bytes. */
static int
serve_read(struct fc_migration *m, const struct peek_req *q, uint8_t *buf)
{
  bool switching;
  uint8_t e[4];
  int r;

  fc_put_le64(buf, q->tag);
  pthread_mutex_lock(&m->lock);
  switching = m->src.switch_begun;
  pthread_mutex_unlock(&m->lock);
  if (switching)
    return fc_xfer_send(&m->conn, FC_XFER_DATA, FC_XFER_F_RETRY, buf, 8, NULL, 0);
  if (q->len == 0 || q->len > FC_XFER_READ_MAX)
    r = -EINVAL;
  else if (!m->e.vol)
    r = -ENODEV;
  else
    r = m->agent->host.ops->migr->out_peek(&m->e, buf + 8, q->len, q->off);
  if (r) {
    log_warning("migration %s of volume %s: destination read of %u bytes at %llu: %s",
                m->e.id, m->e.volume_id, q->len, (unsigned long long)q->off, strerror(-r));
    fc_put_le32(e, (uint32_t)-r);
    return fc_xfer_send(&m->conn, FC_XFER_DATA, FC_XFER_F_ERROR, buf, 8, e, 4);
  }
  fc_migr_src_pace(m, FC_XFER_HEADER_SIZE + 8 + (uint64_t)q->len);
  return fc_xfer_send(&m->conn, FC_XFER_DATA, 0, buf, 8 + q->len, NULL, 0);
}

/* After a copy in the device's order, the hot list as it is now, most
 * recent first, for the destination's LRU.  The source is frozen: only
 * the dirty blocks the destination already acknowledged (and this host
 * forgot) are missing from it, and they stay hotter there. */
static int
send_order(struct fc_migration *m)
{
  enum { PER_FRAME = 65536 };
  uint64_t *list = NULL;
  uint8_t *buf = NULL;
  uint32_t n = 0, i = 0;
  int r = m->agent->host.ops->migr->out_list(&m->e, &list, &n, false, FC_LIST_HOTTEST);

  if (!r && !(buf = malloc((size_t)PER_FRAME * 8)))
    r = -ENOMEM;
  while (!r) {
    uint32_t k = n - i < PER_FRAME ? n - i : PER_FRAME;

    for (uint32_t j = 0; j < k; j++)
      fc_put_le64(buf + (size_t)j * 8, list[i + j]);
    i += k;
    r = fc_xfer_send(&m->conn, FC_XFER_LIST,
                     FC_XFER_F_ORDER | (i == n ? FC_XFER_F_LAST : 0), buf, k * 8, NULL, 0);
    if (i == n)
      break;
  }
  free(buf);
  free(list);
  return r;
}

static int queue_background(struct fc_migration *m);

static void *
source_tx(void *arg)
{
  struct fc_migration *m = arg;
  struct fc_src_pipe *pipe = NULL;
  uint32_t batch_max = 1;
  uint64_t *batch = NULL;
  uint8_t *data = malloc(m->bs), *readbuf = NULL;
  int r;

  fc_migr_thread_setup("fc-migr-src-tx");
  r = data ? fc_src_pipe_start(m, &pipe) : -ENOMEM;
  if (!r) {
    /* As many blocks as a frame holds (255 of 4 KiB): per-block frames
     * cost a syscall and a wake-up on each side for every 4 KiB, and a
     * full frame is a batch the destination installs with a few writes. */
    batch_max = fc_src_pipe_max(pipe);
    if (!(batch = malloc(batch_max * sizeof *batch)))
      r = -ENOMEM;
  }
  while (!r) {
    uint64_t ob = 0;
    uint32_t nbatch = 0;
    struct peek_req rq;
    int what = 0;     /* 1 fetch, 2 background, 3 done, 4 read, 5 list */

    pthread_mutex_lock(&m->lock);
    for (;;) {
      if (!live(m))
        break;
      /* Nothing to copy (the destination fetches every block itself):
       * DONE at once, not behind a queue of FETCHes that may never
       * empty while the destination's copy runs. */
      if (m->src.bg_started && m->src.no_background && !m->src.done_sent) {
        m->src.done_sent = true;
        what = 3;
        break;
      }
      if (m->src.fetchq_n) {
        ob = m->src.fetchq[0];
        memmove(m->src.fetchq, m->src.fetchq + 1, --m->src.fetchq_n * sizeof *m->src.fetchq);
        what = 1;
        break;
      }
      if (m->src.readq_n) {
        rq = m->src.readq[0];
        memmove(m->src.readq, m->src.readq + 1, --m->src.readq_n * sizeof *m->src.readq);
        what = 4;
        break;
      }
      if (m->src.bg_started && m->src.bg_next < m->src.bg_n && m->credits) {
        /* Under a low rate limit, no more than one period's budget per
         * frame, so the copy moves smoothly rather than in bursts a
         * second apart. */
        uint32_t most = batch_max;

        if (m->src.rl.budget && m->src.rl.budget / (8 + m->bs) < most)
          most = m->src.rl.budget / (8 + m->bs) ? (uint32_t)(m->src.rl.budget / (8 + m->bs)) : 1;
        nbatch = 0;
        while (nbatch < most && m->src.bg_next < m->src.bg_n && m->credits) {
          batch[nbatch++] = m->src.bg[m->src.bg_next++] & ~FC_XFER_DIRTY_BIT;
          m->credits--;
        }
        what = 2;
        break;
      }
      if (m->src.bg_hold_until_ns) {
        uint64_t now = fc_monotonic_ns();

        if (now >= m->src.bg_hold_until_ns) {
          m->src.bg_hold_until_ns = 0;
          what = 5;
          break;
        }
        {
          struct timespec until =
            fc_deadline_ms((unsigned long)((m->src.bg_hold_until_ns - now) / 1000000 + 1));

          pthread_cond_timedwait(&m->cond, &m->lock, &until);
        }
        continue;
      }
      if (m->src.bg_started && m->src.bg_next >= m->src.bg_n && !m->src.done_sent) {
        m->src.done_sent = true;
        /* Sent: the device-order list is not needed any more. */
        free(m->src.bg);
        m->src.bg = NULL;
        m->src.bg_n = m->src.bg_next = 0;
        what = 3;
        break;
      }
      pthread_cond_wait(&m->cond, &m->lock);
    }
    pthread_mutex_unlock(&m->lock);
    if (!what)
      break;
    if (what == 5) {
      /* A failure is the migration's, not the stream's: it ends the loop
       * (no longer live) with its own message. */
      r = queue_background(m);
      if (r)
        fc_migr_fail(m, "cannot list the dirty blocks left after the on-demand period: %s",
                     strerror(-r));
      r = 0;
    } else if (what == 4) {
      if (!readbuf && !(readbuf = malloc(8 + FC_XFER_READ_MAX)))
        r = -ENOMEM;
      else
        r = serve_read(m, &rq, readbuf);
    } else if (what == 3) {
      /* DONE follows every background frame (and the hot list, which the
       * destination applies once they are all installed). */
      r = fc_src_pipe_drain(pipe);
      if (!r && m->order_after)
        r = send_order(m);
      if (!r)
        r = fc_xfer_send(&m->conn, FC_XFER_DONE, 0, NULL, 0, NULL, 0);
    } else if (what == 2) {
      /* Read while the previous frame is being sent. */
      r = fc_src_pipe_push(pipe, batch, nbatch);
    } else {
      r = send_reply(m, ob, data);
    }
  }
  fc_src_pipe_stop(pipe);
  free(readbuf);
  free(data);
  free(batch);
  if (r && !m->stopping)
    fc_migr_fail(m, "sending to %s failed: %s", m->peer, strerror(-r));
  return NULL;
}

/* Authenticate the destination before it sees anything of the migration
 * (xfer_tls.h): only the agent holding the private key of the certificate
 * pinned for this migration (pinned), this migration's token (psk) or a
 * certificate for the host dialled (x509) completes the handshake. */
static int
start_tls(struct fc_migration *m, char *err, size_t errlen)
{
  struct fc_xfer_auth auth = { .key = m->key };
  char host[256], port[16];
  int r;

  if (!m->agent->tls)
    return 0;
  memcpy(auth.peer_fp, m->peer_fp, sizeof auth.peer_fp);
  r = fc_split_hostport(m->peer, host, sizeof host, port, sizeof port);
  if (!r && !fc_xfer_tls_pinned(m->agent->tls))
    r = fc_xfer_tls_psk(m->token, m->e.id, auth.psk);
  if (r) {
    snprintf(err, errlen, "cannot derive the stream's key for %s", m->peer);
    return r;
  }
  r = fc_xfer_tls_client(m->agent->tls, &m->conn, host, m->e.id, &auth,
                         HANDSHAKE_TIMEOUT_S * 1000, err, errlen);
  explicit_bzero(&auth, sizeof auth);
  return r;
}

/* Connects m->conn to the destination and authenticates it.  A
 * destination whose listener is full (connections naming no prepared
 * migration hold its handshake slots: migr_listen.c) closes the stream
 * before the TLS handshake, which then fails with -ECONNRESET: that is
 * tried again, the wait doubling, until the handshake's own time is up.
 * Nothing of the migration was sent on a stream refused so: a refusal of
 * this source's credentials comes later, after the handshake. */
static int
dial(struct fc_migration *m, char *err, size_t errlen)
{
  struct timeval tv = { HANDSHAKE_TIMEOUT_S, 0 };
  uint64_t deadline = fc_monotonic_ns() + HANDSHAKE_TIMEOUT_S * 1000000000ull;
  unsigned wait_ms = DIAL_RETRY_FIRST_MS;
  int fd, r;

  for (;;) {
    r = fc_xfer_connect(m->peer, HANDSHAKE_TIMEOUT_S * 1000, &fd, err, errlen);
    if (r)
      return r;
    fc_xfer_conn_init(&m->conn, fd);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    r = start_tls(m, err, errlen);
    if (r != -ECONNRESET || m->stopping ||
        fc_monotonic_ns() + wait_ms * 1000000ull >= deadline)
      break;
    log_info("migration %s of volume %s: %s closed the stream before its TLS "
             "handshake (its listener is busy); trying again in %u ms",
             m->e.id, m->e.volume_id, m->peer, wait_ms);
    fc_xfer_conn_destroy(&m->conn);
    nanosleep(&(struct timespec){ wait_ms / 1000, (wait_ms % 1000) * 1000000L },
              NULL);
    wait_ms = wait_ms * 2 > DIAL_RETRY_MAX_MS ? DIAL_RETRY_MAX_MS : wait_ms * 2;
  }
  if (!r && (r = fc_xfer_conn_read_ahead(&m->conn)))
    snprintf(err, errlen, "cannot set up the stream to %s: %s", m->peer, strerror(-r));
  if (r)
    fc_xfer_conn_destroy(&m->conn);
  return r;
}

int
fc_migr_source_connect(struct fc_migration *m, char *err, size_t errlen)
{
  struct timeval tv = { 0, 0 };
  struct fc_xfer_header h;
  uint8_t buf[FC_XFER_MAX_JSON + 1];
  json_t *hello, *welcome;
  char *text;
  int r;

  r = dial(m, err, errlen);
  if (r) {
    fc_migr_fail(m, "%s", err);
    return r;
  }
  /* ack_fetched: this source frees a block it served dirty to a FETCH
   * on the destination's ACK of it (an older one fails the migration on
   * such an ACK, so the destination sends one only when offered). */
  hello = json_pack("{s:s, s:s, s:s, s:i, s:s, s:b, s:b, s:s, s:I, s:b}", "migration_id",
                    m->e.id, "volume_id", m->e.volume_id, "token", m->token, "block_size", m->bs,
                    "strategy", fc_strategy_name(m->e.strategy),
                    "reads", m->agent->host.ops->migr->out_peek != NULL,
                    "switch_ack", 1,
                    "settle_address", m->agent->host.cfg.migration_listen,
                    "rate_limit_bps", (json_int_t)m->src.rate_limit_bps,
                    "ack_fetched", 1);
  if (hello && m->agent->host.ops->migr->out_allocation) {
    json_t *alloc = m->agent->host.ops->migr->out_allocation(&m->e);

    if (alloc)
      json_object_set_new(hello, "allocation", alloc);
  }
  text = json_dumps(hello, JSON_COMPACT);
  /* The account is at most 64 numbers: should it ever outgrow a HELLO,
   * the destination starts as a new volume rather than the stream fail. */
  if (text && strlen(text) > FC_XFER_MAX_JSON) {
    free(text);
    json_object_del(hello, "allocation");
    text = json_dumps(hello, JSON_COMPACT);
  }
  json_decref(hello);
  r = text ? fc_xfer_send_json(&m->conn, FC_XFER_HELLO, text) : -ENOMEM;
  free(text);
  if (!r)
    r = fc_xfer_recv(&m->conn, &h, buf, FC_XFER_MAX_JSON);
  if (r || h.type != FC_XFER_WELCOME) {
    if (!r && h.type == FC_XFER_ERROR) {
      buf[h.length] = 0;
      snprintf(err, errlen, "destination %s refused the stream: %s", m->peer, buf);
      r = -EACCES;
    } else if (r == -ECONNRESET && m->agent->tls) {
      /* TLS 1.3 ends the client's handshake before the server has checked
       * the client's certificate: a destination that refuses this source
       * can only close the stream. */
      snprintf(err, errlen, "handshake with %s failed: the destination closed "
               "the stream without accepting it (it refused this source's "
               "certificate, key or HELLO; the destination agent's log says why)",
               m->peer);
    } else {
      snprintf(err, errlen, "handshake with %s failed: %s", m->peer,
               r ? strerror(-r) : "unexpected frame");
      r = r ? r : -EPROTO;
    }
    fc_migr_fail(m, "%s", err);
    fc_xfer_conn_destroy(&m->conn);
    return r;
  }
  buf[h.length] = 0;
  welcome = json_loads((const char *)buf, 0, NULL);
  setsockopt(m->conn.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  pthread_mutex_lock(&m->lock);
  m->credits = (uint32_t)json_integer_value(json_object_get(welcome, "credits"));
  /* Taken only for a copy nobody uses before it ends (migr_dest.c). */
  m->order_after = json_is_true(json_object_get(welcome, "order")) &&
                   fc_strategy(m->e.strategy)->copy_may_reorder;
  /* An older destination handles the SWITCH without saying when it is
   * done: the switchover then returns once SWITCH is sent, as it did. */
  m->src.switch_ack = json_is_true(json_object_get(welcome, "switch_ack"));
  /* A destination that copies by fetching (engine.h, fetch_hydrates)
   * wants no background copy: DONE follows the SWITCH at once. */
  m->src.no_background = json_is_false(json_object_get(welcome, "background"));
  /* The destination acknowledges the dirty blocks it fetches: the sender
   * records them (served_dirty) so that those ACKs are accepted. */
  m->src.ack_fetched = json_is_true(json_object_get(welcome, "ack_fetched"));
  m->connected = true;
  m->state = FC_MS_CONNECTED;
  /* Persisted with the "out" mark at the switchover; a destination that
   * predates settling through the agents sends none. */
  {
    const char *secret = json_string_value(json_object_get(welcome, "settle_secret"));

    if (secret && fc_hex_valid(secret, FC_SETTLE_SECRET_HEX)) {
      snprintf(m->settle_secret, sizeof m->settle_secret, "%s", secret);
      snprintf(m->settle_peer, sizeof m->settle_peer, "%s", m->peer);
    }
  }
  pthread_mutex_unlock(&m->lock);
  explicit_bzero(buf, h.length);
  json_decref(welcome);
  if ((r = -pthread_create(&m->rx_thread, NULL, source_rx, m)) == 0)
    m->rx_running = true;
  if (!r && (r = -pthread_create(&m->worker_thread, NULL, source_tx, m)) == 0)
    m->worker_running = true;
  if (r) {
    snprintf(err, errlen, "cannot start transfer threads: %s", strerror(-r));
    fc_migr_fail(m, "%s", err);
  } else {
    log_info("migration %s of volume %s: connected to %s (%s)", m->e.id, m->e.volume_id, m->peer,
             fc_strategy_name(m->e.strategy));
  }
  return r;
}

/* Queue every cached block for the background sender: most recent first,
 * the order the destination's LRU takes them in; or, where nothing uses
 * the copy before it ends and the destination puts its LRU in the hot
 * list's order afterwards (order_after), in the cache device's order: a
 * cache larger than memory is then read sequentially, not in 4 KiB runs
 * all over the device. */
/* N of RWS_N for the background copy: the volume's, under admission rws,
 * else 1 (a block used twice in the window). */
static unsigned
reuse_n(const struct fc_migration *m)
{
  return m->e.vol->p.admission == FC_ADMIT_RWS && m->e.vol->p.rws_n ? m->e.vol->p.rws_n : 1;
}

/* What the background copy sends: the whole cache, or (CloudCache's,
 * background_variant) what the agent's cloudcache_variant names. */
static int
background_list(struct fc_migration *m, uint64_t **list, uint32_t *n)
{
  const struct fc_engine_migr_ops *ops = m->agent->host.ops->migr;
  const char *variant = m->agent->host.cfg.cloudcache_variant;

  if (fc_strategy(m->e.strategy)->background_variant) {
    /* on_demand's copy, once its hold is over: the dirty blocks the
     * destination did not fetch (those it did were freed on their ACK). */
    if (!strcmp(variant, "bg_dirty") || !strcmp(variant, "on_demand"))
      return ops->out_list(&m->e, list, n, true, FC_LIST_HOTTEST);
    if (!strcmp(variant, "bg_rws") && ops->out_list_reused)
      return ops->out_list_reused(&m->e, reuse_n(m), list, n);
  }
  return ops->out_list(&m->e, list, n, false,
                       m->order_after ? FC_LIST_DEVICE : FC_LIST_HOTTEST);
}

static int
queue_background(struct fc_migration *m)
{
  uint64_t *list = NULL;
  uint32_t n = 0;
  int r = m->src.no_background ? 0 : background_list(m, &list, &n);

  if (r)
    return r;
  pthread_mutex_lock(&m->lock);
  if (m->src.fetched_dirty) {
    uint32_t k = 0;

    for (uint32_t i = 0; i < n; i++)
      if (!fc_invfilter_contains(m->src.fetched_dirty, to_oblock(list[i] & ~FC_XFER_DIRTY_BIT)))
        list[k++] = list[i];
    n = k;
  }
  free(m->src.bg);
  m->src.bg = list;
  m->src.bg_n = n;
  m->src.bg_next = 0;
  m->blocks_total = n;
  m->src.bg_started = true;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->lock);
  return 0;
}

int
fc_migr_source_copy_before_switch(struct fc_migration *m, char *err, size_t errlen)
{
  uint64_t t0 = fc_monotonic_ns();
  int r;

  /* The caller keeps the VM paused: freeze so nothing can diverge. */
  r = m->agent->host.ops->migr->out_freeze(&m->e, false, err, errlen);
  if (r)
    return r;
  r = queue_background(m);
  if (r) {
    snprintf(err, errlen, "cannot list the cache: %s", strerror(-r));
    return r;
  }
  pthread_mutex_lock(&m->lock);
  while (live(m) && !m->src.complete_received)
    pthread_cond_wait(&m->cond, &m->lock);
  m->downtime_ns = fc_monotonic_ns() - t0;
  m->src.firepan_copied = m->src.complete_received;
  pthread_mutex_unlock(&m->lock);
  if (!m->src.firepan_copied) {
    snprintf(err, errlen, "firepan copy failed: %s", m->error);
    return -EIO;
  }
  log_info("migration %s of volume %s: firepan copied %llu blocks in %.3f s",
           m->e.id, m->e.volume_id, (unsigned long long)m->blocks_done,
           (double)m->downtime_ns / 1e9);
  return 0;
}

static int
send_list(struct fc_migration *m, const uint64_t *list, uint32_t n)
{
  const uint32_t per_frame = 65536;
  uint8_t *buf = malloc((size_t)per_frame * 8);
  uint32_t i = 0;
  int r = 0;

  if (!buf)
    return -ENOMEM;
  do {
    uint32_t k = n - i < per_frame ? n - i : per_frame;
    for (uint32_t j = 0; j < k; j++)
      fc_put_le64(buf + 8 * j, list[i + j]);
    i += k;
    r = fc_xfer_send(&m->conn, FC_XFER_LIST, i >= n ? FC_XFER_F_LAST : 0,
                     buf, k * 8, NULL, 0);
  } while (!r && i < n);
  free(buf);
  return r;
}

/* The caller resumes the VM on the destination when this returns: only
 * once the destination serves the volume (SWITCHED).  Its time is
 * downtime; the destination's table load or cache_restore is in it. */
static int
wait_switched(struct fc_migration *m, char *err, size_t errlen)
{
  struct timespec until = fc_deadline_ms(FC_SWITCH_ACK_TIMEOUT_S * 1000ul);
  int r = 0;

  pthread_mutex_lock(&m->lock);
  while (live(m) && !m->src.switch_acked && r != ETIMEDOUT)
    r = pthread_cond_timedwait(&m->cond, &m->lock, &until);
  if (m->src.switch_acked)
    r = 0;
  else if (!live(m)) {
    snprintf(err, errlen, "%s", m->error[0] ? m->error : "migration ended");
    r = -EIO;
  } else {
    snprintf(err, errlen, "destination %s did not confirm the switchover within %d s",
             m->peer, FC_SWITCH_ACK_TIMEOUT_S);
    r = -ETIMEDOUT;
  }
  pthread_mutex_unlock(&m->lock);
  return r;
}

int
fc_migr_source_switch(struct fc_migration *m, char *err, size_t errlen)
{
  const struct fc_engine_migr_ops *ops = m->agent->host.ops->migr;
  const struct fc_strategy_desc *how = fc_strategy(m->e.strategy);
  uint64_t t0 = fc_monotonic_ns();
  uint64_t *list = NULL;
  uint32_t n = 0;
  int r = 0;

  /* From here on the destination answers for the volume: after SWITCH it
   * may let the source forget blocks, so a read served here then could
   * come from an older copy. */
  pthread_mutex_lock(&m->lock);
  m->src.switch_begun = true;
  pthread_mutex_unlock(&m->lock);

  /* A VM that reads the origin on the destination needs every dirty
   * block there first.  This is downtime. */
  r = ops->out_freeze(&m->e, how->flush_at_switch &&
                      m->e.vol->p.write_policy == FC_WRITE_BACK, err, errlen);
  if (r)
    goto out;
  if (how->list != FC_SWITCH_LIST_NONE)
    r = ops->out_list(&m->e, &list, &n, how->list == FC_SWITCH_LIST_DIRTY,
                      FC_LIST_HOTTEST);
  if (!r && list)
    r = send_list(m, list, n);
  if (!r && how->preload) {
    pthread_mutex_lock(&m->lock);
    m->blocks_total = n;
    m->bytes_done = (uint64_t)n * 8;
    pthread_mutex_unlock(&m->lock);
  }
  free(list);
  /* From the SWITCH on, the destination owns the volume: say so on disk
   * first, so a crash here never leads to writing back blocks the
   * destination may have rewritten. */
  if (!r)
    r = fc_migr_mark_volume(m, "out");
  if (!r)
    r = fc_xfer_send_json(&m->conn, FC_XFER_SWITCH, "{}");
  if (r) {
    snprintf(err, errlen, "cannot switch over to %s: %s", m->peer, strerror(-r));
    goto out;
  }
  if (m->src.switch_ack && (r = wait_switched(m, err, errlen)))
    goto out;
  pthread_mutex_lock(&m->lock);
  m->switched_ns = fc_monotonic_ns();
  m->downtime_ns += m->switched_ns - t0;
  /* COMPLETE may be in already: firepan's came before the SWITCH, and a
   * strategy with nothing to copy after the switch (none, cachemior) may
   * answer the SWITCH before this thread gets the lock back.  The
   * receiver moves only a SWITCHED migration on, so it is done here. */
  if (m->state == FC_MS_CONNECTED)
    m->state = m->src.complete_received ? FC_MS_COMPLETED : FC_MS_SWITCHED;
  if (m->state == FC_MS_COMPLETED) {
    m->completed_ns = m->switched_ns;
    fc_migr_account_locked(m);
  }
  pthread_mutex_unlock(&m->lock);
  if (how->background_copy && how->background_variant &&
      !strcmp(m->agent->host.cfg.cloudcache_variant, "on_demand")) {
    /* Figure 11's "On-demand": for a while only what the VM asks for
     * moves.  The migration ends only once every dirty block has, so the
     * ones it did not ask for follow in the background after that. */
    pthread_mutex_lock(&m->lock);
    m->src.bg_hold_until_ns =
      fc_monotonic_ns() + (uint64_t)m->agent->host.cfg.cloudcache_on_demand_s * 1000000000ull;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
  } else if (how->background_copy) {
    r = queue_background(m);
  }
  log_info("migration %s of volume %s: switched over in %.3f s", m->e.id, m->e.volume_id,
           (double)(m->switched_ns - t0) / 1e9);
out:
  if (r)
    fc_migr_fail(m, "%s", err);
  return r;
}

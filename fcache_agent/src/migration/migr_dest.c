/* SPDX-License-Identifier: Apache-2.0 */
/* The destination side of a cache migration: the receiver thread reads
 * frames (lists, switch, blocks, data, done) and queues background blocks
 * for the installers (migr_dest_install.c), which install them, return
 * credit and acknowledge durable dirty blocks; the worker thread finishes
 * the migration once every block is in, or (cachemior) preloads the hot
 * list from the origin through the engine's warmer.  What the VM's threads ask of the source (a
 * fetch, a read before the switchover) is in migr_dest_remote.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/agent.h"
#include "common/deadline.h"
#include "common/lockcheck.h"
#include "common/log.h"
#include "migration.h"
#include "engine/engine.h"
#include "migr_dest_priv.h"

#define OPS(m) ((m)->agent->host.ops->migr)

/* The most entries a source may list: its cache is the size of ours. */
static uint64_t
list_bound(const struct fc_migration *m)
{
  return m->e.vol && m->bs ? m->e.vol->p.cache_size / m->bs : 0;
}

/* The source lists what its cache holds: a longer list (or a ragged one)
 * is a peer growing our memory. */
static int
on_list(struct fc_migration *m, const uint8_t *p, uint32_t len)
{
  uint64_t most = list_bound(m);
  int r = 0;

  if (len % 8 || m->dst.listed + len / 8 > most) {
    log_warning("migration %s of volume %s: LIST of %u bytes after %llu entries: more than "
                "the %llu blocks of the volume's cache, or not whole entries",
                m->e.id, m->e.volume_id, len, (unsigned long long)m->dst.listed,
                (unsigned long long)most);
    return -EPROTO;
  }
  m->dst.listed += len / 8;

  for (uint32_t i = 0; i + 8 <= len && !r; i += 8) {
    uint64_t id = fc_get_le64(p + i);

    if (fc_strategy(m->e.strategy)->preload) {
      pthread_mutex_lock(&m->lock);
      if (m->dst.hot_n == m->dst.hot_cap) {
        uint32_t cap = m->dst.hot_cap ? m->dst.hot_cap * 2 : 4096;
        uint64_t *h = realloc(m->dst.hot, cap * sizeof *h);
        if (!h)
          r = -ENOMEM;
        else {
          m->dst.hot = h;
          m->dst.hot_cap = cap;
        }
      }
      if (!r)
        m->dst.hot[m->dst.hot_n++] = id & ~FC_XFER_DIRTY_BIT;
      m->blocks_total = m->dst.hot_n;
      pthread_mutex_unlock(&m->lock);
    } else {
      r = OPS(m)->in_add_remote(&m->e, to_oblock(id & ~FC_XFER_DIRTY_BIT),
                                id & FC_XFER_DIRTY_BIT);
    }
  }
  return r;
}

/* The hot list of a copy that came in the device's order (F_ORDER), a
 * part at a time, after every block.  Applied once every frame before it
 * is installed, so each listed block is where the list says; as long as
 * on_list's, and only where WELCOME offered it. */
static int
on_order(struct fc_migration *m, uint8_t *p, uint32_t len)
{
  uint64_t most = list_bound(m);
  uint64_t *ids = (uint64_t *)(void *)p;    /* the receive buffer: malloc'd */
  bool go;

  if (!m->order_after || len % 8 || m->dst.ordered + len / 8 > most) {
    log_warning("migration %s of volume %s: ordering LIST of %u bytes after %llu entries: %s",
                m->e.id, m->e.volume_id, len, (unsigned long long)m->dst.ordered,
                !m->order_after ? "not offered" : "more than the volume's cache holds, "
                "or not whole entries");
    return -EPROTO;
  }
  m->dst.ordered += len / 8;
  pthread_mutex_lock(&m->lock);
  while (!fc_migr_dest_installed_locked(m) && !m->stopping && m->state != FC_MS_FAILED &&
         m->state != FC_MS_ABORTED)
    pthread_cond_wait(&m->cond, &m->lock);
  go = fc_migr_dest_installed_locked(m);
  pthread_mutex_unlock(&m->lock);
  if (!go)
    return -ECANCELED;
  for (uint32_t i = 0; i < len / 8; i++)
    ids[i] = fc_get_le64(p + (size_t)i * 8);
  return OPS(m)->in_order(&m->e, ids, len / 8);
}

static void
complete(struct fc_migration *m)
{
  fc_migr_mark_volume(m, NULL);   /* the volume is wholly ours now */
  if (m->e.vol)
    OPS(m)->in_completed(&m->e);
  pthread_mutex_lock(&m->lock);
  if (m->state == FC_MS_SWITCHED || m->state == FC_MS_CONNECTED) {
    m->state = FC_MS_COMPLETED;
    m->completed_ns = fc_monotonic_ns();
    fc_migr_account_locked(m);
  }
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->lock);
  log_info("migration %s: volume %s complete (%llu blocks, %llu invalidated)", m->e.id,
           m->e.volume_id, (unsigned long long)m->blocks_done,
           (unsigned long long)m->invalidated);
}

/* SWITCHED: {} once the volume is served here, or why it is not. */
static int
send_switched(struct fc_migration *m)
{
  json_t *o;
  char *text;
  int r;

  pthread_mutex_lock(&m->lock);
  o = m->state == FC_MS_FAILED || m->state == FC_MS_ABORTED ?
    json_pack("{s:s}", "error", m->error[0] ? m->error : "migration ended") : json_object();
  pthread_mutex_unlock(&m->lock);
  text = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  r = text ? fc_xfer_send_json(&m->conn, FC_XFER_SWITCHED, text) : -ENOMEM;
  free(text);
  return r;
}

static int
send_complete(struct fc_migration *m)
{
  int r;

  /* Everything acknowledged must survive a crash of this host before
   * the source forgets it. */
  r = OPS(m)->in_durable(&m->e, true);
  if (r)
    return r;
  pthread_mutex_lock(&m->lock);
  m->dst.complete_sending = true;
  pthread_mutex_unlock(&m->lock);
  r = fc_xfer_send(&m->conn, FC_XFER_COMPLETE, 0, NULL, 0, NULL, 0);
  pthread_mutex_lock(&m->lock);
  m->dst.complete_sent = r == 0;
  m->dst.complete_sending = false;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->lock);
  return r;
}

/* The source copies nothing in the background: this engine fetches
 * every listed block itself (engine.h, fetch_hydrates). */
static bool
fetch_hydrates(const struct fc_migration *m)
{
  return OPS(m)->fetch_hydrates && fc_strategy(m->e.strategy)->on_demand;
}

/* SWITCH: the engine serves the volume first (gate open, final table):
 * what waits for the SWITCH -- the worker finishing the migration,
 * forwarded reads, the source's switchover -- then finds it served here.
 * A failing engine fails the migration (m->fail). */
static int
switch_here(struct fc_migration *m)
{
  OPS(m)->in_switch(&m->e);
  pthread_mutex_lock(&m->lock);
  m->dst.switch_received = true;
  m->switched_ns = fc_monotonic_ns();
  if (m->state == FC_MS_CONNECTED)
    m->state = FC_MS_SWITCHED;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->lock);
  return m->dst.peer_switch_ack ? send_switched(m) : 0;
}

static void *
switcher(void *arg)
{
  struct fc_migration *m = arg;
  int r;

  fc_migr_thread_setup("fc-migr-dst-sw");
  r = switch_here(m);
  /* The receiver sees the broken stream too, and fails the migration. */
  if (r)
    log_warning("migration %s of volume %s: cannot confirm the switchover: %s", m->e.id,
                m->e.volume_id, strerror(-r));
  return NULL;
}

static void *
dest_rx(void *arg)
{
  struct fc_migration *m = arg;
  uint8_t *buf = malloc(FC_XFER_MAX_PAYLOAD);
  struct fc_xfer_header h;
  bool lost;
  int r = buf ? 0 : -ENOMEM;

  fc_migr_thread_setup("fc-migr-dst-rx");
  while (!r) {
    r = fc_xfer_recv(&m->conn, &h, buf, FC_XFER_MAX_PAYLOAD);
    if (r)
      break;
    switch (h.type) {
    case FC_XFER_LIST:
      r = (h.flags & FC_XFER_F_ORDER) ? on_order(m, buf, h.length) : on_list(m, buf, h.length);
      break;
    case FC_XFER_SWITCH:
      if (m->dst.switcher_running) {
        r = -EPROTO;
        break;
      }
      /* An engine whose switch fetches needs this thread to go on
       * delivering the answers meanwhile. */
      if (fetch_hydrates(m) &&
          pthread_create(&m->dst.switcher, NULL, switcher, m) == 0) {
        m->dst.switcher_running = true;
        break;
      }
      r = switch_here(m);
      break;
    case FC_XFER_BLOCK:
      if (h.flags & FC_XFER_F_REPLY) {
        if (h.length != 8 + ((h.flags & FC_XFER_F_ABSENT) ? 0 : m->bs)) {
          r = -EPROTO;
          break;
        }
        fc_migr_dest_deliver_reply(m, fc_get_le64(buf), h.flags, buf + 8);
        break;
      }
      /* Background: one or more (id, data) entries, a batch. */
      r = (h.flags & FC_XFER_F_ABSENT) ? -EPROTO : fc_migr_dest_queue_frame(m, &buf, h.length);
      break;
    case FC_XFER_DATA:
      r = fc_migr_dest_deliver_data(m, h.flags, buf, h.length);
      break;
    case FC_XFER_DONE:
      pthread_mutex_lock(&m->lock);
      m->dst.done_received = true;
      pthread_cond_broadcast(&m->cond);
      pthread_mutex_unlock(&m->lock);
      break;
    case FC_XFER_ERROR:
      buf[h.length < FC_XFER_MAX_PAYLOAD ? h.length : FC_XFER_MAX_PAYLOAD - 1] = 0;
      fc_migr_fail(m, "source gave up: %.200s", (char *)buf);
      r = -ECONNABORTED;
      break;
    default:
      r = -EPROTO;
    }
  }
  free(buf);
  /* After COMPLETE the source owes us nothing: its going away is normal. */
  pthread_mutex_lock(&m->lock);
  while (m->dst.complete_sending)
    pthread_cond_wait(&m->cond, &m->lock);
  lost = !m->stopping && !m->dst.complete_sent && m->state != FC_MS_COMPLETED &&
         m->state != FC_MS_ABORTED;
  pthread_mutex_unlock(&m->lock);
  if (lost) {
    /* in_end stops recording the VM's writes: no batch may be installed
     * after it, judged against a filter that no longer records them. */
    fc_migr_dest_installers_stop(m);
    if (fc_strategy(m->e.strategy)->invalidation_filter && m->dst.switch_received)
      m->invalidated += OPS(m)->in_end(&m->e);
    fc_migr_dest_source_lost(m, "", r == -ECONNABORTED ? "source aborted" : strerror(-r));
    /* A stream that broke its rules (a bad frame, a record that failed its
     * authentication) is read no further, and the source must learn now,
     * not when it next waits on us, that it is over. */
    fc_xfer_conn_shutdown(&m->conn);
  }
  pthread_mutex_lock(&m->lock);
  m->connected = false;
  pthread_cond_broadcast(&m->cond);
  pthread_mutex_unlock(&m->lock);
  return NULL;
}

struct preload_ctx {
  struct fc_migration *m;
  pthread_mutex_t lock;
  uint32_t next;
};

static void *
preload_thread(void *arg)
{
  struct preload_ctx *p = arg;
  struct fc_migration *m = p->m;

  for (;;) {
    uint32_t i;
    int r;

    pthread_mutex_lock(&p->lock);
    i = p->next++;
    pthread_mutex_unlock(&p->lock);
    if (i >= m->dst.hot_n || m->stopping || m->state == FC_MS_ABORTED)
      break;
    r = OPS(m)->in_preload(&m->e, to_oblock(m->dst.hot[i]));
    pthread_mutex_lock(&m->lock);
    m->blocks_done++;
    if (r == 0)
      m->bytes_done += m->bs;
    pthread_mutex_unlock(&m->lock);
  }
  return NULL;
}

/* One preloaded block, in the hot list's order: counted; false once the
 * migration is stopping or aborted, which ends the warm-up. */
static bool
warmed(void *arg, int r)
{
  struct fc_migration *m = arg;
  bool go;

  pthread_mutex_lock(&m->lock);
  m->blocks_done++;
  if (r == 0)
    m->bytes_done += m->bs;
  go = !m->stopping && m->state != FC_MS_ABORTED;
  pthread_mutex_unlock(&m->lock);
  return go;
}

/* cachemior: the hot list is here; warm up from the origin, hottest first.
 * The paper's warmer is one thread with up to 128 reads of the shared
 * storage in flight (migration_preload_depth); an engine that can only
 * preload a block at a time (dmcache, whose reads are synchronous on the
 * origin device) gets PRELOAD_THREADS threads doing so. */
static void
preload(struct fc_migration *m)
{
  struct preload_ctx p = { .m = m, .next = 0 };
  pthread_t t[PRELOAD_THREADS];
  int started = 0;

  if (OPS(m)->in_warm) {
    unsigned peak = 0;
    int r = OPS(m)->in_warm(&m->e, m->dst.hot, m->dst.hot_n, m->agent->host.cfg.migration_preload_depth,
                            warmed, m, &peak);

    pthread_mutex_lock(&m->lock);
    m->dst.preload_peak = peak;
    pthread_mutex_unlock(&m->lock);
    if (r)
      log_warning("migration %s of volume %s: the preload stopped: %s", m->e.id,
                  m->e.volume_id, strerror(-r));
    return;
  }
  pthread_mutex_init(&p.lock, NULL);
  for (int i = 0; i < PRELOAD_THREADS; i++)
    if (pthread_create(&t[i], NULL, preload_thread, &p) == 0)
      started++;
  for (int i = 0; i < started; i++)
    pthread_join(t[i], NULL);
  pthread_mutex_destroy(&p.lock);
  pthread_mutex_lock(&m->lock);
  m->dst.preload_peak = (unsigned)started;
  pthread_mutex_unlock(&m->lock);
}

/* Strategies with no background copy are done once the switch arrived
 * (firepan copied before it).  Under m->lock. */
static bool
done_at_switch_locked(const struct fc_migration *m)
{
  FC_ASSERT_HELD(&m->lock);
  return m->dst.switch_received && m->state == FC_MS_SWITCHED &&
         !fc_strategy(m->e.strategy)->background_copy;
}

static void *
dest_worker(void *arg)
{
  struct fc_migration *m = arg;
  const struct fc_strategy_desc *how = fc_strategy(m->e.strategy);
  int r = fc_migr_dest_installers_start(m);

  if (r) {
    fc_migr_fail(m, "cannot start installing blocks: %s", strerror(-r));
    return NULL;
  }
  for (;;) {
    bool finish = false;

    pthread_mutex_lock(&m->lock);
    for (;;) {
      if (m->stopping || m->state == FC_MS_FAILED || m->state == FC_MS_ABORTED ||
          m->state == FC_MS_COMPLETED)
        break;
      /* Every block the source had is here (or was superseded). */
      if ((m->dst.done_received && !m->dst.complete_sent && fc_migr_dest_installed_locked(m) &&
           (m->dst.switch_received || how->copy_before_switch)) ||
          done_at_switch_locked(m)) {
        finish = true;
        break;
      }
      pthread_cond_wait(&m->cond, &m->lock);
    }
    pthread_mutex_unlock(&m->lock);
    if (!finish)
      break;
    if (how->copy_before_switch) {
      if (!m->dst.switch_received) {
        send_complete(m);         /* the source's start() returns */
        continue;
      }
      OPS(m)->in_end(&m->e);
    } else if (how->preload) {
      OPS(m)->in_end(&m->e);
      send_complete(m);           /* the source holds nothing we need */
      preload(m);
      if (OPS(m)->in_preloaded)
        m->invalidated += OPS(m)->in_preloaded(&m->e);
    } else {
      /* Only a copy that ran beside the VM can have lost blocks to its
       * writes. */
      uint32_t invalidated = OPS(m)->in_end(&m->e);
      bool failed = false;

      if (how->background_copy)
        m->invalidated += invalidated;
      /* An engine's own copy (fetch_hydrates) may have failed in in_end:
       * then the source still holds what this host needs. */
      if (fetch_hydrates(m)) {
        pthread_mutex_lock(&m->lock);
        failed = m->stopping || m->state == FC_MS_FAILED || m->state == FC_MS_ABORTED;
        pthread_mutex_unlock(&m->lock);
      }
      if (failed)
        break;
      send_complete(m);
    }
    complete(m);
    break;
  }
  fc_migr_dest_installers_join(m);
  return NULL;
}

int
fc_migr_dest_begin(struct fc_migration *m)
{
  int r = fc_migr_dest_queue_new(m);

  return r ? r : OPS(m)->in_begin(&m->e);
}

void
fc_migr_dest_allocation(struct fc_migration *m, json_t *state)
{
  /* An older source sends none; a malformed one is the engine's to
   * refuse value by value, and costs only the volume's history. */
  if (json_is_object(state) && OPS(m)->in_allocation)
    OPS(m)->in_allocation(&m->e, state);
}

void
fc_migr_dest_hello_locked(struct fc_migration *m, json_t *hello)
{
  json_int_t rate = json_integer_value(json_object_get(hello, "rate_limit_bps"));

  FC_ASSERT_HELD(&m->lock);
  /* An older source does not answer READ: reads then wait for SWITCH. */
  m->dst.peer_reads = json_is_true(json_object_get(hello, "reads"));
  /* An older source returns from its switchover at once and would take
   * SWITCHED for a broken stream. */
  m->dst.peer_switch_ack = json_is_true(json_object_get(hello, "switch_ack"));
  /* What paces the answers to our fetches: an engine that copies by
   * fetching sizes its requests in flight by it. */
  m->e.rate_limit_bps = rate > 0 ? (uint64_t)rate : 0;
  /* An older source fails the migration on an ACK of a block it served
   * to a FETCH: it gets none, and frees those blocks at COMPLETE. */
  m->dst.ack_fetched = json_is_true(json_object_get(hello, "ack_fetched")) &&
                       OPS(m)->acks_fetched;
}

int
fc_migr_dest_accept(struct fc_migration *m, struct fc_xfer_conn *c)
{
  char welcome[160 + FC_SETTLE_SECRET_HEX + 32];
  int r;

  fc_xfer_conn_move(&m->conn, c);
  r = fc_xfer_conn_read_ahead(&m->conn);
  if (r) {
    fc_migr_fail(m, "cannot set up the stream: %s", strerror(-r));
    return r;
  }
  OPS(m)->in_connected(&m->e);
  /* A copy nobody uses before it ends may come in the cache device's
   * order if this engine can put the LRU back in the hot list's order
   * afterwards (on_order); a source that does not know "order" ignores
   * it and copies hottest first. */
  m->order_after = OPS(m)->in_order && fc_strategy(m->e.strategy)->copy_may_reorder;
  /* The settle secret goes to a source that said where it listens, once
   * it is durable here beside the volume's mark: a settle after a crash
   * of either host finds it on both. */
  if (!m->settle_peer[0] || fc_migr_mark_volume(m, "in"))
    explicit_bzero(m->settle_secret, sizeof m->settle_secret);
  snprintf(welcome, sizeof welcome, "{\"credits\": %u%s%s%s%s%s%s%s}", m->dst.inq->credits,
           m->order_after ? ", \"order\": true" : "",
           fetch_hydrates(m) ? ", \"background\": false" : "",
           m->dst.peer_switch_ack ? ", \"switch_ack\": true" : "",
           m->dst.ack_fetched ? ", \"ack_fetched\": true" : "",
           m->settle_secret[0] ? ", \"settle_secret\": \"" : "", m->settle_secret,
           m->settle_secret[0] ? "\"" : "");
  r = fc_xfer_send_json(&m->conn, FC_XFER_WELCOME, welcome);
  explicit_bzero(welcome, sizeof welcome);
  if (r) {
    fc_migr_fail(m, "cannot welcome the source: %s", strerror(-r));
    return r;
  }
  pthread_mutex_lock(&m->lock);
  m->connected = true;
  m->dst.conn_gen++;            /* fetches waiting for a stream are sent */
  m->state = FC_MS_CONNECTED;
  pthread_cond_broadcast(&m->cond);     /* reads waiting to be forwarded */
  pthread_mutex_unlock(&m->lock);
  if ((r = -pthread_create(&m->rx_thread, NULL, dest_rx, m)) == 0)
    m->rx_running = true;
  if (!r && (r = -pthread_create(&m->worker_thread, NULL, dest_worker, m)) == 0)
    m->worker_running = true;
  if (r)
    fc_migr_fail(m, "cannot start transfer threads: %s", strerror(-r));
  return 0;
}


/* SPDX-License-Identifier: Apache-2.0 */
/* The destination's fetches from the source (migr_dest_remote.c) over a
 * plaintext stream on a socketpair, the test playing the source: a fetch
 * ended by its call (data and dirty bit, ABSENT), one that waits for a
 * stream and is sent when the source connects again, one sent on a
 * stream that went and sent again on the next, the time bound and the
 * in-flight bounds, the end of the migration, and the synchronous fetch
 * ucache uses, a wait on the same; and the ACK of a dirty block fetched
 * and installed, sent only to a source whose HELLO accepts it. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/agent.h"
#include "migration/migr_dest_priv.h"
#include "migration/migration.h"
#include "testutil.h"

#define BS 4096u

/* The engine, as far as an ACK needs one: it reports the dirty blocks it
 * fetched (acks_fetched), and in_durable counts its calls. */
static unsigned durable_calls;

static int
stub_in_durable(struct fc_engine_migr *e, bool final)
{
  (void)e, (void)final;
  __atomic_add_fetch(&durable_calls, 1, __ATOMIC_SEQ_CST);
  return 0;
}

static struct fc_engine_migr_ops stub_migr = {
  .acks_fetched = true,
  .in_durable = stub_in_durable,
};
static const struct fc_engine_ops stub_engine = { .name = "stub", .migr = &stub_migr };

struct fix {
  struct fc_migration m;
  struct fc_agent agent;
  struct fc_xfer_conn src;      /* the source's end */
};

struct ended {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  unsigned n;
  int r;
  bool dirty;
};

static void
on_done(void *arg, int r, bool dirty)
{
  struct ended *e = arg;

  pthread_mutex_lock(&e->lock);
  e->n++;
  e->r = r;
  e->dirty = dirty;
  pthread_cond_broadcast(&e->cond);
  pthread_mutex_unlock(&e->lock);
}

static void
ended_init(struct ended *e)
{
  memset(e, 0, sizeof *e);
  pthread_mutex_init(&e->lock, NULL);
  pthread_cond_init(&e->cond, NULL);
}

/* Wait (at most 5 s) until e has ended n times; how many it has. */
static unsigned
ended_wait(struct ended *e, unsigned n)
{
  struct timespec until;
  unsigned got;

  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 5;
  pthread_mutex_lock(&e->lock);
  while (e->n < n && pthread_cond_timedwait(&e->cond, &e->lock, &until) != ETIMEDOUT)
    ;
  got = e->n;
  pthread_mutex_unlock(&e->lock);
  return got;
}

static struct fix *
fix_new(bool connected)
{
  struct fix *f = calloc(1, sizeof *f);
  int sv[2];

  assert_non_null(f);
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  fc_xfer_conn_init(&f->m.conn, sv[0]);
  fc_xfer_conn_init(&f->src, sv[1]);
  pthread_mutex_init(&f->m.lock, NULL);
  pthread_cond_init(&f->m.cond, NULL);
  f->agent.host.ops = &stub_engine;
  f->m.agent = &f->agent;
  f->m.e.role = FC_MIGR_DEST;
  f->m.bs = BS;
  f->m.state = FC_MS_SWITCHED;
  f->m.connected = connected;
  f->m.dst.conn_gen = connected ? 1 : 0;
  return f;
}

static void
fix_free(struct fix *f)
{
  pthread_mutex_lock(&f->m.lock);
  f->m.stopping = true;
  pthread_cond_broadcast(&f->m.cond);
  pthread_mutex_unlock(&f->m.lock);
  if (f->m.dst.fetcher_join)
    f->m.dst.fetcher_join(&f->m);
  assert_null(f->m.dst.waiters);
  fc_xfer_conn_destroy(&f->m.conn);
  fc_xfer_conn_destroy(&f->src);
  free(f->m.dst.to_ack);
  free(f);
}

/* The source goes, or comes back: what the receiver and the accept do. */
static void
set_connected(struct fix *f, bool on)
{
  pthread_mutex_lock(&f->m.lock);
  f->m.connected = on;
  if (on)
    f->m.dst.conn_gen++;
  pthread_cond_broadcast(&f->m.cond);
  pthread_mutex_unlock(&f->m.lock);
}

/* Whether the source has a frame to read within ms. */
static bool
frame_within(struct fix *f, int ms)
{
  struct pollfd p = { .fd = f->src.fd, .events = POLLIN };

  return poll(&p, 1, ms) == 1;
}

/* The next frame must be a FETCH of one block: which. */
static uint64_t
recv_fetch(struct fix *f)
{
  struct fc_xfer_header h;
  uint8_t buf[64];

  assert_true(frame_within(f, 5000));
  assert_int_equal(fc_xfer_recv(&f->src, &h, buf, sizeof buf), 0);
  assert_int_equal(h.type, FC_XFER_FETCH);
  assert_int_equal(h.length, 8);
  return fc_get_le64(buf);
}

static void
answer(struct fix *f, uint64_t ob, bool dirty, uint8_t fill)
{
  uint8_t data[BS];

  memset(data, fill, sizeof data);
  fc_migr_dest_deliver_reply(&f->m, ob | (dirty ? FC_XFER_DIRTY_BIT : 0), 0, data);
}

static void
test_fetch_ends_by_call(void **state)
{
  struct fix *f = fix_new(true);
  uint8_t a[BS], b[BS];
  struct ended ea, eb;

  ended_init(&ea);
  ended_init(&eb);
  assert_int_equal(fc_migr_dest_fetch_start(&f->m, to_oblock(7), a, true, on_done, &ea), 0);
  assert_int_equal(fc_migr_dest_fetch_start(&f->m, to_oblock(9), b, true, on_done, &eb), 0);
  assert_int_equal(recv_fetch(f), 7);
  assert_int_equal(recv_fetch(f), 9);
  assert_int_equal(ea.n + eb.n, 0);
  /* Out of order, as a rate-limited source may answer. */
  answer(f, 9, false, 0x99);
  assert_int_equal(ended_wait(&eb, 1), 1);
  assert_int_equal(eb.r, 0);
  assert_false(eb.dirty);
  assert_int_equal(b[0], 0x99);
  assert_int_equal(b[BS - 1], 0x99);
  assert_int_equal(ea.n, 0);
  answer(f, 7, true, 0x77);
  assert_int_equal(ended_wait(&ea, 1), 1);
  assert_int_equal(ea.r, 0);
  assert_true(ea.dirty);
  assert_int_equal(a[BS / 2], 0x77);
  /* A reply nobody waits for any more changes nothing. */
  answer(f, 7, true, 0x11);
  assert_int_equal(a[0], 0x77);
  assert_int_equal(ea.n, 1);
  fix_free(f);
}

static void
test_absent(void **state)
{
  struct fix *f = fix_new(true);
  uint8_t a[BS];
  struct ended e;

  ended_init(&e);
  assert_int_equal(fc_migr_dest_fetch_start(&f->m, to_oblock(3), a, true, on_done, &e), 0);
  assert_int_equal(recv_fetch(f), 3);
  fc_migr_dest_deliver_reply(&f->m, 3, FC_XFER_F_ABSENT, NULL);
  assert_int_equal(ended_wait(&e, 1), 1);
  assert_int_equal(e.r, -ENOENT);
  fix_free(f);
}

/* Started with no stream: nothing is sent, and the fetch goes out when
 * the source connects, within its time. */
static void
test_waits_for_a_stream(void **state)
{
  struct fix *f = fix_new(false);
  uint8_t a[BS];
  struct ended e;

  ended_init(&e);
  assert_int_equal(fc_migr_dest_fetch_start(&f->m, to_oblock(5), a, true, on_done, &e), 0);
  assert_false(frame_within(f, 300));
  assert_int_equal(e.n, 0);
  set_connected(f, true);
  assert_int_equal(recv_fetch(f), 5);
  answer(f, 5, false, 0x55);
  assert_int_equal(ended_wait(&e, 1), 1);
  assert_int_equal(e.r, 0);
  assert_int_equal(a[1], 0x55);
  fix_free(f);
}

/* Sent on a stream that went before the answer came: sent again on the
 * next one, and a fetch started meanwhile waits for it too. */
static void
test_sent_again_after_reconnect(void **state)
{
  struct fix *f = fix_new(true);
  uint8_t a[BS], b[BS];
  struct ended ea, eb;

  ended_init(&ea);
  ended_init(&eb);
  assert_int_equal(fc_migr_dest_fetch_start(&f->m, to_oblock(11), a, true, on_done, &ea), 0);
  assert_int_equal(recv_fetch(f), 11);
  set_connected(f, false);
  assert_int_equal(fc_migr_dest_fetch_start(&f->m, to_oblock(12), b, true, on_done, &eb), 0);
  assert_false(frame_within(f, 300));
  assert_int_equal(ea.n + eb.n, 0);
  set_connected(f, true);
  {
    uint64_t x = recv_fetch(f), y = recv_fetch(f);

    assert_true((x == 11 && y == 12) || (x == 12 && y == 11));
  }
  assert_false(frame_within(f, 200));     /* each once */
  answer(f, 11, false, 0x1b);
  answer(f, 12, true, 0x1c);
  assert_int_equal(ended_wait(&ea, 1), 1);
  assert_int_equal(ended_wait(&eb, 1), 1);
  assert_int_equal(ea.r, 0);
  assert_int_equal(eb.r, 0);
  assert_true(eb.dirty);
  assert_int_equal(a[0], 0x1b);
  assert_int_equal(b[0], 0x1c);
  fix_free(f);
}

/* A clean block's fetch gives up after FETCH_CLEAN_TIMEOUT_MS whether or
 * not a stream is there, and past FETCH_CLEAN_MAX_INFLIGHT clean
 * fetches are declined (the origin is faster); a required one is not
 * declined before FETCH_MAX_INFLIGHT. */
static void
test_time_and_inflight_bounds(void **state)
{
  struct fix *f = fix_new(false);
  static uint8_t data[FETCH_MAX_INFLIGHT + 1][BS];
  struct ended e;
  struct timespec t0, t1;
  double ms;

  ended_init(&e);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (unsigned i = 0; i < FETCH_CLEAN_MAX_INFLIGHT; i++)
    assert_int_equal(fc_migr_dest_fetch_start(&f->m, to_oblock(i), data[i], false, on_done, &e), 0);
  assert_int_equal(fc_migr_dest_fetch_start(&f->m, to_oblock(99), data[99], false, on_done, &e),
                   -EBUSY);
  for (unsigned i = FETCH_CLEAN_MAX_INFLIGHT; i < FETCH_MAX_INFLIGHT; i++)
    assert_int_equal(fc_migr_dest_fetch_start(&f->m, to_oblock(i), data[i], true, on_done, &e), 0);
  assert_int_equal(fc_migr_dest_fetch_start(&f->m, to_oblock(FETCH_MAX_INFLIGHT),
                                            data[FETCH_MAX_INFLIGHT], true, on_done, &e), -EBUSY);
  assert_int_equal(ended_wait(&e, FETCH_CLEAN_MAX_INFLIGHT), FETCH_CLEAN_MAX_INFLIGHT);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
  assert_int_equal(e.r, -ETIMEDOUT);
  assert_true(ms >= FETCH_CLEAN_TIMEOUT_MS - 5);
  assert_true(ms < FETCH_TIMEOUT_S * 1000);
  /* The required ones still wait; the migration's end ends them. */
  assert_false(frame_within(f, 100));
  assert_int_equal(e.n, FETCH_CLEAN_MAX_INFLIGHT);
  pthread_mutex_lock(&f->m.lock);
  f->m.state = FC_MS_FAILED;
  pthread_cond_broadcast(&f->m.cond);
  pthread_mutex_unlock(&f->m.lock);
  assert_int_equal(ended_wait(&e, FETCH_MAX_INFLIGHT), FETCH_MAX_INFLIGHT);
  assert_int_equal(e.r, -ECONNRESET);
  assert_int_equal(fc_migr_dest_fetch_start(&f->m, to_oblock(1), data[0], true, on_done, &e),
                   -ENOTCONN);
  fix_free(f);
}

/* fc_migr_join ends what is still in flight. */
static void
test_join_ends_fetches(void **state)
{
  struct fix *f = fix_new(true);
  uint8_t a[BS];
  struct ended e;

  ended_init(&e);
  assert_int_equal(fc_migr_dest_fetch_start(&f->m, to_oblock(1), a, true, on_done, &e), 0);
  assert_int_equal(recv_fetch(f), 1);
  pthread_mutex_lock(&f->m.lock);
  f->m.stopping = true;
  pthread_mutex_unlock(&f->m.lock);
  f->m.dst.fetcher_join(&f->m);
  assert_int_equal(e.n, 1);
  assert_int_equal(e.r, -ECONNRESET);
  fix_free(f);
}

struct sync_call {
  struct fix *f;
  uint64_t ob;
  uint8_t data[BS];
  bool dirty;
  int r;
};

static void *
sync_thread(void *arg)
{
  struct sync_call *c = arg;

  c->r = fc_migr_dest_fetch(&c->f->m, to_oblock(c->ob), c->data, &c->dirty, true);
  return NULL;
}

/* ucache's fetch: waits in its thread for the same answer; declines at
 * once with no stream (ucache then reads the origin). */
static void
test_sync_fetch(void **state)
{
  struct fix *f = fix_new(true);
  struct sync_call c = { .f = f, .ob = 21 };
  pthread_t t;
  bool dirty;

  assert_int_equal(pthread_create(&t, NULL, sync_thread, &c), 0);
  assert_int_equal(recv_fetch(f), 21);
  answer(f, 21, true, 0x21);
  pthread_join(t, NULL);
  assert_int_equal(c.r, 0);
  assert_true(c.dirty);
  assert_int_equal(c.data[BS - 1], 0x21);
  set_connected(f, false);
  assert_int_equal(fc_migr_dest_fetch(&f->m, to_oblock(22), c.data, &dirty, true), -ENOTCONN);
  fix_free(f);
}

/* The source's HELLO, as the listener hands it over (text: its JSON). */
static void
hello(struct fix *f, const char *text)
{
  json_t *o = json_loads(text, 0, NULL);

  assert_non_null(o);
  pthread_mutex_lock(&f->m.lock);
  fc_migr_dest_hello_locked(&f->m, o);
  pthread_mutex_unlock(&f->m.lock);
  json_decref(o);
}

/* What ucache does with a dirty block: fetch it (synchronously, as
 * test_sync_fetch), install it, then report it (fetched_dirty). */
static void
fetch_dirty_and_install(struct fix *f, uint64_t ob)
{
  struct sync_call c = { .f = f };
  pthread_t t;

  c.ob = ob;
  assert_int_equal(pthread_create(&t, NULL, sync_thread, &c), 0);
  assert_int_equal(recv_fetch(f), ob);
  answer(f, ob, true, 0x3c);
  pthread_join(t, NULL);
  assert_int_equal(c.r, 0);
  assert_true(c.dirty);
  fc_migr_dest_fetched(&f->m, to_oblock(ob));
}

/* A source whose HELLO says "ack_fetched": true gets an ACK of each dirty
 * block fetched and installed, sent by the fetcher once in_durable has
 * returned, and nothing else. */
static void
test_fetched_dirty_acked(void **state)
{
  struct fix *f = fix_new(true);
  struct fc_xfer_header h;
  uint8_t buf[64];
  unsigned durable_before;

  hello(f, "{\"reads\": true, \"switch_ack\": true, \"rate_limit_bps\": 1000000,"
           " \"ack_fetched\": true}");
  assert_true(f->m.dst.ack_fetched);
  assert_true(f->m.dst.peer_reads);
  assert_true(f->m.dst.peer_switch_ack);
  assert_int_equal(f->m.e.rate_limit_bps, 1000000);
  durable_before = __atomic_load_n(&durable_calls, __ATOMIC_SEQ_CST);
  fetch_dirty_and_install(f, 31);
  assert_true(frame_within(f, 5000));
  assert_int_equal(fc_xfer_recv(&f->src, &h, buf, sizeof buf), 0);
  assert_int_equal(h.type, FC_XFER_ACK);
  assert_int_equal(h.length, 8);
  assert_int_equal(fc_get_le64(buf), 31);
  assert_true(__atomic_load_n(&durable_calls, __ATOMIC_SEQ_CST) > durable_before);
  assert_false(frame_within(f, 200));       /* once */
  fix_free(f);
}

/* An older source (no "ack_fetched" in its HELLO), one that says
 * something else than true, or an engine that does not report its
 * fetched blocks: no ACK of a fetched block, which such a source would
 * take for a forged one.  It frees the block at COMPLETE instead. */
static void
test_fetched_dirty_not_acked_unless_offered(void **state)
{
  static const char *const hellos[] = {
    "{\"reads\": true, \"switch_ack\": true}",
    "{\"reads\": true, \"switch_ack\": true, \"ack_fetched\": \"yes\"}",
    "{\"reads\": true, \"switch_ack\": true, \"ack_fetched\": 1}",
    "{\"reads\": true, \"switch_ack\": true, \"ack_fetched\": true}",
  };

  for (unsigned i = 0; i < sizeof hellos / sizeof hellos[0]; i++) {
    struct fix *f = fix_new(true);
    bool last = i == sizeof hellos / sizeof hellos[0] - 1;

    /* The last: the source offers, the engine cannot report. */
    stub_migr.acks_fetched = !last;
    hello(f, hellos[i]);
    assert_false(f->m.dst.ack_fetched);
    assert_true(f->m.dst.peer_reads);
    fetch_dirty_and_install(f, 40 + i);
    assert_false(frame_within(f, 300));
    assert_int_equal(f->m.dst.to_ack_n, 0);
    fix_free(f);
  }
  stub_migr.acks_fetched = true;
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_fetch_ends_by_call),
    cmocka_unit_test(test_absent),
    cmocka_unit_test(test_waits_for_a_stream),
    cmocka_unit_test(test_sent_again_after_reconnect),
    cmocka_unit_test(test_time_and_inflight_bounds),
    cmocka_unit_test(test_join_ends_fetches),
    cmocka_unit_test(test_sync_fetch),
    cmocka_unit_test(test_fetched_dirty_acked),
    cmocka_unit_test(test_fetched_dirty_not_acked_unless_offered),
  };

  return tu_run_isolated("migr_fetch", tests, sizeof tests / sizeof tests[0], 30);
}

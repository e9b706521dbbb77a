/* SPDX-License-Identifier: Apache-2.0 */
/* Fetching from a frozen source over a settle session
 * (migration/migr_settle_fetch.c), on a plaintext socketpair with the
 * test playing the source: answers end fetches in the order asked (data,
 * dirty bit, ABSENT), close waits for the fetches in flight and leaves the
 * stream between frames, and an answer for another block or a broken
 * stream fails every fetch in flight and refuses new ones. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "migration/migr_settle_fetch.h"
#include "migration/xfer_conn.h"
#include "testutil.h"

#define BS 4096u

struct ended {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  unsigned n;
  int r[8];
  bool dirty[8];
};

struct slot {
  struct ended *e;
  unsigned i;
};

static void
on_done(void *arg, int r, bool dirty)
{
  struct slot *s = arg;

  pthread_mutex_lock(&s->e->lock);
  s->e->r[s->i] = r;
  s->e->dirty[s->i] = dirty;
  s->e->n++;
  pthread_cond_broadcast(&s->e->cond);
  pthread_mutex_unlock(&s->e->lock);
}

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

struct fix {
  struct fc_xfer_conn dst, src;
  struct fc_settle_fetch *f;
  struct ended e;
  struct slot s[8];
  uint8_t data[8][BS];
};

static struct fix *
fix_new(void)
{
  struct fix *x = calloc(1, sizeof *x);
  int sv[2];

  assert_non_null(x);
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  fc_xfer_conn_init(&x->dst, sv[0]);
  fc_xfer_conn_init(&x->src, sv[1]);
  pthread_mutex_init(&x->e.lock, NULL);
  pthread_cond_init(&x->e.cond, NULL);
  for (unsigned i = 0; i < 8; i++)
    x->s[i] = (struct slot){ &x->e, i };
  assert_int_equal(fc_settle_fetch_open(&x->dst, BS, &x->f), 0);
  return x;
}

static void
fix_free(struct fix *x)
{
  fc_xfer_conn_destroy(&x->dst);
  fc_xfer_conn_destroy(&x->src);
  free(x);
}

static uint64_t
recv_fetch(struct fix *x)
{
  uint8_t buf[64];
  struct fc_xfer_header h;

  assert_int_equal(fc_xfer_recv(&x->src, &h, buf, sizeof buf), 0);
  assert_int_equal(h.type, FC_XFER_FETCH);
  assert_int_equal(h.length, 8);
  return fc_get_le64(buf);
}

static void
answer(struct fix *x, uint64_t ob, bool dirty, int fill, bool absent)
{
  static uint8_t block[8 + BS];

  fc_put_le64(block, ob | (dirty ? FC_XFER_DIRTY_BIT : 0));
  memset(block + 8, fill, BS);
  assert_int_equal(fc_xfer_send(&x->src, FC_XFER_BLOCK, absent ? FC_XFER_F_ABSENT : 0,
                                block, absent ? 8 : 8 + BS, NULL, 0), 0);
}

static void
start(struct fix *x, unsigned i, uint64_t ob)
{
  assert_int_equal(fc_settle_fetch_start(x->f, to_oblock(ob), x->data[i], true, on_done,
                                         &x->s[i]), 0);
}

static void
test_answers_in_order(void **state)
{
  struct fix *x = fix_new();
  struct fc_xfer_header h;
  uint8_t buf[64];
  bool broken = true;

  (void)state;
  start(x, 0, 7);
  start(x, 1, 9);
  start(x, 2, 7);            /* the same block twice: two answers */
  assert_int_equal(recv_fetch(x), 7);
  assert_int_equal(recv_fetch(x), 9);
  assert_int_equal(recv_fetch(x), 7);
  answer(x, 7, true, 0x71, false);
  answer(x, 9, false, 0, true);
  answer(x, 7, false, 0x72, false);
  assert_int_equal(ended_wait(&x->e, 3), 3);
  assert_int_equal(x->e.r[0], 0);
  assert_true(x->e.dirty[0]);
  assert_int_equal(x->data[0][BS - 1], 0x71);
  assert_int_equal(x->e.r[1], -ENOENT);
  assert_int_equal(x->e.r[2], 0);
  assert_false(x->e.dirty[2]);
  assert_int_equal(x->data[2][0], 0x72);
  assert_int_equal(fc_settle_fetch_count(x->f, &broken), 3);
  assert_false(broken);
  /* Closing with nothing in flight leaves the stream between frames: the
   * next frame the source sends is read whole by its next reader. */
  assert_int_equal(fc_settle_fetch_close(x->f), 0);
  assert_int_equal(fc_xfer_send_json(&x->src, FC_XFER_STEP_DONE, "{}"), 0);
  assert_int_equal(fc_xfer_recv(&x->dst, &h, buf, sizeof buf), 0);
  assert_int_equal(h.type, FC_XFER_STEP_DONE);
  fix_free(x);
}

struct closer {
  struct fc_settle_fetch *f;
  int r;
};

static void *
close_thread(void *arg)
{
  struct closer *c = arg;

  c->r = fc_settle_fetch_close(c->f);
  return NULL;
}

static void
test_close_waits_for_fetches_in_flight(void **state)
{
  struct fix *x = fix_new();
  struct closer c;
  pthread_t t;

  (void)state;
  start(x, 0, 3);
  assert_int_equal(recv_fetch(x), 3);
  c = (struct closer){ x->f, -1 };
  assert_int_equal(pthread_create(&t, NULL, close_thread, &c), 0);
  usleep(100 * 1000);
  assert_int_equal(ended_wait(&x->e, 0), 0);   /* not ended by the close */
  answer(x, 3, false, 0x33, false);
  pthread_join(t, NULL);
  assert_int_equal(c.r, 0);
  assert_int_equal(x->e.n, 1);
  assert_int_equal(x->e.r[0], 0);
  assert_int_equal(x->data[0][7], 0x33);
  fix_free(x);
}

static void
test_wrong_block_fails_everything(void **state)
{
  struct fix *x = fix_new();
  bool broken = false;

  (void)state;
  start(x, 0, 5);
  start(x, 1, 6);
  assert_int_equal(recv_fetch(x), 5);
  assert_int_equal(recv_fetch(x), 6);
  answer(x, 6, false, 0x66, false);      /* out of order: not the one asked first */
  assert_int_equal(ended_wait(&x->e, 2), 2);
  assert_int_equal(x->e.r[0], -EPROTO);
  assert_int_equal(x->e.r[1], -EPROTO);
  (void)fc_settle_fetch_count(x->f, &broken);
  assert_true(broken);
  assert_int_equal(fc_settle_fetch_start(x->f, to_oblock(8), x->data[2], true, on_done,
                                         &x->s[2]), -ENOTCONN);
  assert_int_equal(fc_settle_fetch_close(x->f), -EPIPE);
  fix_free(x);
}

static void
test_broken_stream_fails_fetches(void **state)
{
  struct fix *x = fix_new();

  (void)state;
  start(x, 0, 1);
  assert_int_equal(recv_fetch(x), 1);
  fc_xfer_conn_shutdown(&x->src);
  assert_int_equal(ended_wait(&x->e, 1), 1);
  assert_int_equal(x->e.r[0], -EIO);
  assert_int_equal(fc_settle_fetch_close(x->f), -EPIPE);
  fix_free(x);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_answers_in_order),
    cmocka_unit_test(test_close_waits_for_fetches_in_flight),
    cmocka_unit_test(test_wrong_block_fails_everything),
    cmocka_unit_test(test_broken_stream_fails_fetches),
  };

  return tu_run_isolated("migr_settle_fetch", tests, sizeof tests / sizeof tests[0], 30);
}

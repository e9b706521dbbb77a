/* SPDX-License-Identifier: Apache-2.0 */
/* dmcache's relay (dm_relay.c) with a fake fetch standing for the
 * migration: the device's layout (destination cache block c at c x block
 * size holds the origin block the map gives, unmapped blocks read as
 * zeros without a fetch), reads that cross blocks and are not aligned to
 * them, the bound on fetches in flight, reads handed to a worker
 * (FC_IO_NOWAIT), fetch errors as EIO, and writes refused. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "dmcache/dm_relay.h"
#include "testutil.h"

#define BS 4096u
#define NB 16u
#define MAXQ 64

/* The source's origin blocks: byte i of block ob. */
static uint8_t
src_byte(uint64_t ob, uint64_t i)
{
  return (uint8_t)(ob * 37 + i * 7 + (i >> 9));
}

struct pending {
  uint64_t ob;
  uint8_t *data;
  fc_engine_fetch_done_fn *done;
  void *arg;
};

struct fake {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct pending q[MAXQ];
  unsigned n, started, max_seen;
  bool inline_end;              /* end each fetch inside its start */
  uint64_t refuse_ob;           /* fetch_start fails for this one */
  uint64_t absent_ob;           /* the source answers ABSENT for this one */
};

static void
fake_end(const struct pending *p, const struct fake *fk)
{
  if (p->ob == fk->absent_ob) {
    p->done(p->arg, -ENOENT, false);
    return;
  }
  for (uint32_t i = 0; i < BS; i++)
    p->data[i] = src_byte(p->ob, i);
  p->done(p->arg, 0, p->ob & 1);
}

static int
fake_fetch(void *ctx, oblock_t ob, void *data, bool required, fc_engine_fetch_done_fn *done,
           void *arg)
{
  struct fake *fk = ctx;
  struct pending p = { ob.n, data, done, arg };

  assert_true(required);
  if (ob.n == fk->refuse_ob)
    return -ENOTCONN;
  if (fk->inline_end) {
    fake_end(&p, fk);
    return 0;
  }
  pthread_mutex_lock(&fk->lock);
  assert_true(fk->n < MAXQ);
  fk->q[fk->n++] = p;
  fk->started++;
  if (fk->n > fk->max_seen)
    fk->max_seen = fk->n;
  pthread_cond_broadcast(&fk->cond);
  pthread_mutex_unlock(&fk->lock);
  return 0;
}

/* End the oldest fetch waiting, once there is one; false if none came
 * within 5 s. */
static bool
fake_end_one(struct fake *fk)
{
  struct pending p;
  struct timespec until;

  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 5;
  pthread_mutex_lock(&fk->lock);
  while (!fk->n && pthread_cond_timedwait(&fk->cond, &fk->lock, &until) != ETIMEDOUT)
    ;
  if (!fk->n) {
    pthread_mutex_unlock(&fk->lock);
    return false;
  }
  p = fk->q[0];
  memmove(fk->q, fk->q + 1, --fk->n * sizeof fk->q[0]);
  pthread_mutex_unlock(&fk->lock);
  fake_end(&p, fk);
  return true;
}

/* Wait (at most 5 s) until k fetches are waiting. */
static bool
fake_wait_queued(struct fake *fk, unsigned k)
{
  struct timespec until;
  bool ok;

  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 5;
  pthread_mutex_lock(&fk->lock);
  while (fk->n < k && pthread_cond_timedwait(&fk->cond, &fk->lock, &until) != ETIMEDOUT)
    ;
  ok = fk->n >= k;
  pthread_mutex_unlock(&fk->lock);
  return ok;
}

static void
fake_init(struct fake *fk)
{
  memset(fk, 0, sizeof *fk);
  pthread_mutex_init(&fk->lock, NULL);
  pthread_cond_init(&fk->cond, NULL);
  fk->refuse_ob = fk->absent_ob = DM_RELAY_UNMAPPED;
}

/* Cache blocks 0..NB-1: every third unmapped, the others holding origin
 * blocks 1000 - 3c (not in the cache's order, as smq leaves them). */
static uint64_t
map_of(uint64_t c)
{
  return c % 3 == 2 ? DM_RELAY_UNMAPPED : 1000 - 3 * c;
}

static struct dm_relay *
relay_new(struct fake *fk, unsigned max_inflight, struct fc_export *exp)
{
  uint64_t map[NB];
  struct dm_relay_params p = {
    .volume = "v", .block_size = BS, .nr_blocks = NB, .oblock = map,
    .max_inflight = max_inflight, .fetch = fake_fetch, .fetch_ctx = fk,
  };
  struct dm_relay *r;

  for (unsigned c = 0; c < NB; c++)
    map[c] = map_of(c);
  assert_int_equal(dm_relay_new(&p, &r), 0);
  map[0] = 7;                   /* copied: the caller's array is not kept */
  dm_relay_export(r, exp);
  return r;
}

/* What the device must hold at byte off: the oracle. */
static uint8_t
dev_byte(uint64_t off)
{
  uint64_t c = off / BS, ob = map_of(c);

  return ob == DM_RELAY_UNMAPPED ? 0 : src_byte(ob, off % BS);
}

struct read_end {
  unsigned calls;
  int err;
};

static void
on_read_end(void *ctx, int err)
{
  struct read_end *e = ctx;

  e->calls++;
  e->err = err;
}

/* A read the fake ends inline: the relay returns 0 (never calls done
 * from inside pread_start), buf against the oracle. */
static void
check_read_inline(const struct fc_export *exp, uint64_t off, uint32_t count)
{
  uint8_t *buf = malloc(count);
  struct read_end e = { 0, 0 };

  memset(buf, 0xee, count);
  assert_int_equal(exp->ops->pread_start(exp->handle, buf, count, off, on_read_end, &e, 0), 0);
  assert_int_equal(e.calls, 0);
  for (uint32_t i = 0; i < count; i++)
    if (buf[i] != dev_byte(off + i))
      fail_msg("byte %llu: %u, expected %u", (unsigned long long)(off + i), buf[i],
               dev_byte(off + i));
  free(buf);
}

static void
test_layout(void **state)
{
  struct fake fk;
  struct fc_export exp;
  struct dm_relay *r;
  struct dm_relay_stats st;

  fake_init(&fk);
  fk.inline_end = true;
  r = relay_new(&fk, 4, &exp);
  assert_int_equal(exp.size, (uint64_t)NB * BS);
  assert_true(exp.read_only);
  assert_int_equal(exp.min_block, 512);
  assert_int_equal(exp.pref_block, BS);
  assert_int_equal(exp.max_block, 32u << 20);
  check_read_inline(&exp, 0, NB * BS);                  /* the whole device */
  check_read_inline(&exp, BS, BS);                      /* one block */
  check_read_inline(&exp, 512, 512);                    /* inside one */
  check_read_inline(&exp, 3 * BS - 1536, 2 * BS + 1024); /* across three, unaligned */
  check_read_inline(&exp, 5 * BS, 3 * BS);              /* an unmapped one inside */
  dm_relay_stats(r, &st);
  assert_int_equal(st.reads, 5);
  assert_int_equal(st.fetch_errors, 0);
  /* Whole device: 11 mapped, 5 zeros; then 1; 1; 3 with one zero; 2 and
   * one zero. */
  assert_int_equal(st.fetched, 11 + 1 + 1 + 2 + 2);
  assert_int_equal(st.zero_blocks, 5 + 0 + 0 + 1 + 1);
  dm_relay_free(r);
}

/* Unmapped blocks are zeros at once, without a fetch, even for a read
 * that may not wait. */
static void
test_unmapped_reads_zeros(void **state)
{
  struct fake fk;
  struct fc_export exp;
  struct dm_relay *r;
  uint8_t buf[BS];
  struct read_end e = { 0, 0 };

  fake_init(&fk);
  r = relay_new(&fk, 4, &exp);
  memset(buf, 0xee, sizeof buf);
  assert_int_equal(exp.ops->pread_start(exp.handle, buf, BS, 2 * BS, on_read_end, &e,
                                        FC_IO_NOWAIT), 0);
  for (unsigned i = 0; i < BS; i++)
    assert_int_equal(buf[i], 0);
  assert_int_equal(fk.started, 0);
  /* A mapped one may wait: handed on, nothing started or changed. */
  memset(buf, 0xee, sizeof buf);
  assert_int_equal(exp.ops->pread_start(exp.handle, buf, BS, 0, on_read_end, &e, FC_IO_NOWAIT),
                   -EAGAIN);
  assert_int_equal(fk.started, 0);
  assert_int_equal(buf[0], 0xee);
  assert_int_equal(e.calls, 0);
  dm_relay_free(r);
}

struct reader {
  const struct fc_export *exp;
  uint8_t *buf;
  uint32_t count;
  uint64_t off;
  int r;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct read_end e;
};

static void
on_reader_end(void *ctx, int err)
{
  struct reader *rd = ctx;

  pthread_mutex_lock(&rd->lock);
  rd->e.calls++;
  rd->e.err = err;
  pthread_cond_broadcast(&rd->cond);
  pthread_mutex_unlock(&rd->lock);
}

static void *
reader_main(void *arg)
{
  struct reader *rd = arg;

  rd->r = rd->exp->ops->pread_start(rd->exp->handle, rd->buf, rd->count, rd->off, on_reader_end,
                                    rd, 0);
  return NULL;
}

/* The whole device read by a worker with room for 3 fetches: never more
 * in flight, the read ends once (by done) when the last one does. */
static void
test_inflight_bound(void **state)
{
  struct fake fk;
  struct fc_export exp;
  struct dm_relay *r;
  struct dm_relay_stats st;
  struct reader rd = { .count = NB * BS, .off = 0 };
  pthread_t t;

  fake_init(&fk);
  r = relay_new(&fk, 3, &exp);
  rd.exp = &exp;
  rd.buf = malloc(rd.count);
  pthread_mutex_init(&rd.lock, NULL);
  pthread_cond_init(&rd.cond, NULL);
  assert_int_equal(pthread_create(&t, NULL, reader_main, &rd), 0);
  /* Each fetch ended only once as many as may be are in flight, and
   * at least 2 ms after it started. */
  for (unsigned i = 0; i < 11; i++) {
    assert_true(fake_wait_queued(&fk, 11 - i < 3 ? 11 - i : 3));
    nanosleep(&(struct timespec){ 0, 2000000L }, NULL);
    assert_true(fake_end_one(&fk));
  }
  pthread_join(t, NULL);
  /* Ended by done, or (the last fetch ending before the reader let go of
   * the read) filled when pread_start returned: never both. */
  pthread_mutex_lock(&rd.lock);
  if (rd.r == 1) {
    assert_int_equal(rd.e.calls, 1);
    assert_int_equal(rd.e.err, 0);
  } else {
    assert_int_equal(rd.r, 0);
    assert_int_equal(rd.e.calls, 0);
  }
  pthread_mutex_unlock(&rd.lock);
  assert_int_equal(fk.started, 11);
  assert_int_equal(fk.max_seen, 3);
  dm_relay_stats(r, &st);
  assert_int_equal(st.inflight_peak, 3);
  assert_int_equal(st.inflight, 0);
  /* The fetch times (what sizes dm-clone's hydration threshold): each at
   * least the 2 ms the test held it, the shortest no longer than the
   * mean. */
  assert_int_equal(st.fetched, 11);
  assert_true(st.fetch_ns_min >= 2000000u);
  assert_true(st.fetch_ns >= 11 * 2000000ull);
  assert_true(st.fetch_ns_min <= st.fetch_ns / st.fetched);
  for (uint32_t i = 0; i < rd.count; i++)
    if (rd.buf[i] != dev_byte(i))
      fail_msg("byte %u differs", i);
  free(rd.buf);
  dm_relay_free(r);
}

/* A fetch that fails fails its read (EIO, never zeros), whether it fails
 * at its start or at its end; the other fetches of the read still end
 * before the read does. */
static void
test_fetch_errors(void **state)
{
  struct fake fk;
  struct fc_export exp;
  struct dm_relay *r;
  struct dm_relay_stats st;
  uint8_t buf[4 * BS];
  struct read_end e = { 0, 0 };

  fake_init(&fk);
  r = relay_new(&fk, 8, &exp);
  /* The first block's fetch refused: nothing pending, failed now. */
  fk.refuse_ob = map_of(0);
  assert_int_equal(exp.ops->pread_start(exp.handle, buf, BS, 0, on_read_end, &e, 0), -EIO);
  assert_int_equal(e.calls, 0);
  /* The second block's refused after the first started: the read ends
   * by done once the first ends. */
  fk.refuse_ob = map_of(1);
  assert_int_equal(exp.ops->pread_start(exp.handle, buf, 2 * BS, 0, on_read_end, &e, 0), 1);
  assert_int_equal(e.calls, 0);
  assert_true(fake_end_one(&fk));
  assert_int_equal(e.calls, 1);
  assert_int_equal(e.err, -EIO);
  /* The source says it does not hold a block (ABSENT). */
  fk.refuse_ob = DM_RELAY_UNMAPPED;
  fk.absent_ob = map_of(3);
  e.calls = 0;
  assert_int_equal(exp.ops->pread_start(exp.handle, buf, 2 * BS, 3 * BS, on_read_end, &e, 0), 1);
  assert_true(fake_end_one(&fk));
  assert_true(fake_end_one(&fk));
  assert_int_equal(e.calls, 1);
  assert_int_equal(e.err, -EIO);
  dm_relay_stats(r, &st);
  assert_int_equal(st.fetch_errors, 3);
  assert_int_equal(st.inflight, 0);
  /* The synchronous way (the NBD layer without memory to keep a read
   * pending) ends the same. */
  fk.absent_ob = DM_RELAY_UNMAPPED;
  fk.inline_end = true;
  assert_int_equal(exp.ops->pread(exp.handle, buf, BS, BS), 0);
  assert_int_equal(buf[5], dev_byte(BS + 5));
  dm_relay_free(r);
}

static void
test_writes_refused(void **state)
{
  struct fake fk;
  struct fc_export exp;
  struct dm_relay *r;
  uint8_t buf[BS] = { 0 };

  fake_init(&fk);
  r = relay_new(&fk, 1, &exp);
  assert_int_equal(exp.ops->pwrite(exp.handle, buf, BS, 0, false), -EPERM);
  assert_int_equal(exp.ops->trim(exp.handle, BS, 0, false), -EPERM);
  assert_int_equal(exp.ops->zero(exp.handle, BS, 0, false, true), -EPERM);
  assert_int_equal(exp.ops->flush(exp.handle), 0);
  assert_int_equal(fk.started, 0);
  dm_relay_free(r);
}

static void
test_params(void **state)
{
  struct fake fk;
  uint64_t map[1] = { 1 };
  struct dm_relay_params p = {
    .block_size = BS, .nr_blocks = 1, .oblock = map, .max_inflight = 1,
    .fetch = fake_fetch, .fetch_ctx = &fk,
  };
  struct dm_relay *r;

  fake_init(&fk);
  p.block_size = 1000;
  assert_int_equal(dm_relay_new(&p, &r), -EINVAL);
  p.block_size = BS;
  p.max_inflight = 0;
  assert_int_equal(dm_relay_new(&p, &r), -EINVAL);
  p.max_inflight = 1;
  p.nr_blocks = 0;
  assert_int_equal(dm_relay_new(&p, &r), -EINVAL);
  p.nr_blocks = 1;
  assert_int_equal(dm_relay_new(&p, &r), 0);
  dm_relay_free(r);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_layout),
    cmocka_unit_test(test_unmapped_reads_zeros),
    cmocka_unit_test(test_inflight_bound),
    cmocka_unit_test(test_fetch_errors),
    cmocka_unit_test(test_writes_refused),
    cmocka_unit_test(test_params),
  };

  return tu_run_isolated("dm_relay", tests, sizeof tests / sizeof tests[0], 30);
}

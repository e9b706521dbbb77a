/* SPDX-License-Identifier: Apache-2.0 */
/* The NBD origin's redo log: changes come back oldest first, trims and
 * writes of zeroes among them, each as what it was; a flush drops only
 * what was recorded before its mark; the bound asks for a flush, half of
 * it for an early one; a failed replay stops at the change that failed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "origin/origin_nbd_priv.h"

#define DISK 4096

/* A trimmed range reads as this on the memory disk: anything, but not
 * the zeroes a write of zeroes promises. */
#define TRIMMED 0xee

/* Applies changes to a memory disk, as a restarted server would get them. */
struct disk {
  unsigned char b[DISK];
  unsigned applied;
  unsigned fail_at;             /* 1-based; 0: never */
  enum nbd_redo_op ops[16];     /* the first 16 applied */
};

static int
apply(void *ctx, enum nbd_redo_op op, const void *buf, uint32_t count,
      uint64_t off)
{
  struct disk *d = ctx;

  if (d->fail_at && d->applied + 1 == d->fail_at)
    return -EIO;
  assert_true(off + count <= DISK);
  /* Data for a write and only for a write. */
  assert_true((op == NBD_REDO_WRITE) == (buf != NULL));
  if (buf)
    memcpy(d->b + off, buf, count);
  else
    memset(d->b + off, op == NBD_REDO_TRIM ? TRIMMED : 0, count);
  if (d->applied < 16)
    d->ops[d->applied] = op;
  d->applied++;
  return 0;
}

static void
record(struct nbd_redo *r, enum nbd_redo_op op, uint32_t count, uint64_t off)
{
  nbd_redo_begin(r);
  assert_int_equal(nbd_redo_record(r, op, NULL, count, off), 0);
  nbd_redo_end(r);
}

static void
write_rec(struct nbd_redo *r, struct disk *want, unsigned char v,
          uint32_t count, uint64_t off)
{
  unsigned char buf[DISK];

  memset(buf, v, count);
  nbd_redo_begin(r);
  assert_int_equal(nbd_redo_record(r, NBD_REDO_WRITE, buf, count, off), 0);
  nbd_redo_end(r);
  memcpy(want->b + off, buf, count);
}

static void
test_replay_in_order(void **state)
{
  struct nbd_redo r;
  struct disk want = { 0 }, got = { 0 };
  unsigned n;

  (void)state;
  assert_int_equal(nbd_redo_init(&r), 0);
  write_rec(&r, &want, 1, 1024, 0);
  write_rec(&r, &want, 2, 512, 512);      /* over part of the first */
  record(&r, NBD_REDO_TRIM, 256, 768);
  memset(want.b + 768, TRIMMED, 256);
  write_rec(&r, &want, 3, 128, 896);      /* into the trimmed range */
  assert_int_equal(nbd_redo_replay(&r, apply, &got, &n), 0);
  assert_int_equal(n, 4);
  assert_memory_equal(got.b, want.b, DISK);
  /* A replay keeps the changes: only a flush covers them. */
  memset(&got, 0, sizeof got);
  assert_int_equal(nbd_redo_replay(&r, apply, &got, &n), 0);
  assert_int_equal(n, 4);
  nbd_redo_destroy(&r);
}

/* A write of zeroes comes back as one, in its place among the others
 * and with its NO_HOLE, and holds no data in the log. */
static void
test_zero_replayed_as_zero(void **state)
{
  struct nbd_redo r;
  struct disk want = { 0 }, got = { 0 };
  unsigned n;

  (void)state;
  assert_int_equal(nbd_redo_init(&r), 0);
  write_rec(&r, &want, 1, 2048, 0);
  record(&r, NBD_REDO_ZERO, 512, 512);
  memset(want.b + 512, 0, 512);
  record(&r, NBD_REDO_TRIM, 512, 1536);
  memset(want.b + 1536, TRIMMED, 512);
  record(&r, NBD_REDO_ZERO_NO_HOLE, 1024, 1024);     /* over the trim */
  memset(want.b + 1024, 0, 1024);
  write_rec(&r, &want, 2, 256, 1280);                /* into the zeroes */
  assert_int_equal(r.nr, 5);
  assert_int_equal(r.bytes, 2048 + 256);
  /* Start from what the lost server may have had instead. */
  memset(got.b, 0x55, sizeof got.b);
  memset(want.b + 2048, 0x55, DISK - 2048);
  assert_int_equal(nbd_redo_replay(&r, apply, &got, &n), 0);
  assert_int_equal(n, 5);
  assert_memory_equal(got.b, want.b, DISK);
  assert_int_equal(got.ops[0], NBD_REDO_WRITE);
  assert_int_equal(got.ops[1], NBD_REDO_ZERO);
  assert_int_equal(got.ops[2], NBD_REDO_TRIM);
  assert_int_equal(got.ops[3], NBD_REDO_ZERO_NO_HOLE);
  assert_int_equal(got.ops[4], NBD_REDO_WRITE);
  nbd_redo_flushed(&r, nbd_redo_mark(&r));
  assert_int_equal(r.nr, 0);
  assert_int_equal(r.bytes, 0);
  nbd_redo_destroy(&r);
}

static void
test_flush_drops_before_its_mark(void **state)
{
  struct nbd_redo r;
  struct disk want = { 0 }, got = { 0 };
  uint64_t mark;
  unsigned n;

  (void)state;
  assert_int_equal(nbd_redo_init(&r), 0);
  write_rec(&r, &want, 1, 512, 0);
  write_rec(&r, &want, 2, 512, 512);
  mark = nbd_redo_mark(&r);
  /* Acknowledged while the flush was on its way: not covered by it. */
  write_rec(&r, &want, 3, 512, 1024);
  nbd_redo_flushed(&r, mark);
  assert_int_equal(r.nr, 1);
  assert_int_equal(r.bytes, 512);
  assert_int_equal(nbd_redo_replay(&r, apply, &got, &n), 0);
  assert_int_equal(n, 1);
  assert_memory_equal(got.b + 1024, want.b + 1024, 512);
  assert_int_equal(got.b[0], 0);
  nbd_redo_flushed(&r, nbd_redo_mark(&r));
  assert_int_equal(r.nr, 0);
  assert_int_equal(r.bytes, 0);
  /* Empty, and recording goes on at the tail. */
  write_rec(&r, &want, 4, 512, 2048);
  assert_int_equal(r.nr, 1);
  nbd_redo_destroy(&r);
}

static void
test_bound_asks_for_a_flush(void **state)
{
  struct nbd_redo r;

  (void)state;
  assert_int_equal(nbd_redo_init(&r), 0);
  /* An empty log takes any change, however large: it must go somewhere. */
  assert_true(nbd_redo_has_room(&r, UINT32_MAX));
  assert_false(nbd_redo_half_full(&r));
  r.bytes = NBD_REDO_MAX_BYTES / 2 - 1;
  r.nr = 1;
  assert_false(nbd_redo_half_full(&r));
  r.bytes++;
  assert_true(nbd_redo_half_full(&r));
  /* Recording says so too: the writer that passes half flushes. */
  r.bytes = NBD_REDO_MAX_BYTES / 2 - 512;
  assert_int_equal(nbd_redo_record(&r, NBD_REDO_WRITE, (char[511]){ 0 }, 511,
                                   0), 0);
  assert_int_equal(nbd_redo_record(&r, NBD_REDO_TRIM, NULL, 4096, 0), 0);
  assert_int_equal(nbd_redo_record(&r, NBD_REDO_WRITE, (char[1]){ 0 }, 1, 0),
                   1);
  r.bytes = NBD_REDO_MAX_BYTES - 4096;
  assert_true(nbd_redo_has_room(&r, 4096));
  assert_false(nbd_redo_has_room(&r, 4097));
  r.bytes = 0;
  r.nr = NBD_REDO_MAX_ENTRIES / 2;
  assert_true(nbd_redo_half_full(&r));
  r.nr = NBD_REDO_MAX_ENTRIES;
  assert_false(nbd_redo_has_room(&r, 0));
  r.nr = 0;
  nbd_redo_destroy(&r);
}

static void
test_failed_replay_stops(void **state)
{
  struct nbd_redo r;
  struct disk want = { 0 }, got = { .fail_at = 2 };
  unsigned n;

  (void)state;
  assert_int_equal(nbd_redo_init(&r), 0);
  write_rec(&r, &want, 1, 512, 0);
  write_rec(&r, &want, 2, 512, 512);
  write_rec(&r, &want, 3, 512, 1024);
  assert_int_equal(nbd_redo_replay(&r, apply, &got, &n), -EIO);
  assert_int_equal(n, 1);
  assert_int_equal(r.nr, 3);      /* all kept for the next connection */
  nbd_redo_destroy(&r);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_replay_in_order),
    cmocka_unit_test(test_zero_replayed_as_zero),
    cmocka_unit_test(test_flush_drops_before_its_mark),
    cmocka_unit_test(test_bound_asks_for_a_flush),
    cmocka_unit_test(test_failed_replay_stops),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}

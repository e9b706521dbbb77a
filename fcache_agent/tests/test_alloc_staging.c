/* SPDX-License-Identifier: Apache-2.0 */
/* Admission staging of alloc/ (CloudCache §4.3): admission after reuse_n
 * reuses, the byte bound with 24 B per address, data staging hits, the
 * hybrid's 1:7 split and its demotions, invalidation, resize, bad
 * arguments; with the reuse history beneath, reused sets far larger than
 * the area admitted and a scan still kept out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "alloc/staging.h"

#define BS 4096u
#define A FC_STAGING_ADDR_BYTES

/* The stage under test; teardown frees it even when an assertion fails. */
static struct fc_staging *stage;

static int
teardown(void **state)
{
  fc_staging_free(stage);
  stage = NULL;
  return 0;
}

static struct fc_staging *
mk(enum fc_staging_kind kind, size_t area, unsigned n)
{
  assert_int_equal(fc_staging_new(kind, area, BS, n, &stage), 0);
  return stage;
}

static struct fc_staging_stats
stats(void)
{
  struct fc_staging_stats s;

  fc_staging_get_stats(stage, &s);
  return s;
}

static void
fill(unsigned char *buf, unsigned char v)
{
  memset(buf, v, BS);
}

static void
test_address_admits_second_access(void **state)
{
  struct fc_staging *st = mk(FC_STAGING_ADDRESS, 100 * A, 1);

  assert_false(fc_staging_access(st, 5, false));
  assert_false(fc_staging_access(st, 6, true));
  assert_true(fc_staging_access(st, 5, false));
  /* Admitted entries leave the stage: the next miss starts over. */
  assert_false(fc_staging_access(st, 5, false));
  /* Writes count as reuses just as reads do. */
  assert_true(fc_staging_access(st, 6, true));
  assert_int_equal(stats().accesses, 5);
  assert_int_equal(stats().admitted, 2);
  assert_int_equal(stats().addresses, 1);
  assert_int_equal(stats().used_bytes, A);
}

static void
test_block_zero_and_large(void **state)
{
  struct fc_staging *st = mk(FC_STAGING_ADDRESS, 100 * A, 1);

  assert_false(fc_staging_access(st, 0, false));
  assert_false(fc_staging_access(st, UINT64_MAX, false));
  assert_true(fc_staging_access(st, 0, false));
  assert_true(fc_staging_access(st, UINT64_MAX, false));
}

static void
test_reuse_n2(void **state)
{
  struct fc_staging *st = mk(FC_STAGING_ADDRESS, 100 * A, 2);

  assert_false(fc_staging_access(st, 9, false));
  assert_false(fc_staging_access(st, 9, false));
  assert_true(fc_staging_access(st, 9, false));
  assert_int_equal(stats().admitted, 1);
}

static void
test_address_bound_lru(void **state)
{
  struct fc_staging *st = mk(FC_STAGING_ADDRESS, 4 * A, 1);

  for (uint64_t b = 1; b <= 4; b++)
    assert_false(fc_staging_access(st, b, false));
  assert_false(fc_staging_access(st, 100, false));   /* evicts 1 */
  assert_int_equal(stats().evicted, 1);
  assert_int_equal(stats().addresses, 4);
  assert_int_equal(stats().used_bytes, 4 * A);
  assert_false(fc_staging_access(st, 1, false));     /* gone: restaged, evicts 2 */
  assert_true(fc_staging_access(st, 3, false));      /* still staged */
  assert_false(fc_staging_access(st, 2, false));     /* was evicted */
}

static void
test_many_entries(void **state)
{
  /* Past several pool and bucket doublings, and a scan never admits. */
  struct fc_staging *st = mk(FC_STAGING_ADDRESS, 5000 * A, 1);

  for (uint64_t b = 0; b < 20000; b++)
    assert_false(fc_staging_access(st, b, false));
  assert_int_equal(stats().addresses, 5000);
  assert_int_equal(stats().evicted, 15000);
  for (uint64_t b = 15000; b < 20000; b++)
    assert_true(fc_staging_access(st, b, false));
  assert_int_equal(stats().addresses, 0);
  assert_int_equal(stats().used_bytes, 0);
}

static void
test_data_hits(void **state)
{
  struct fc_staging *st = mk(FC_STAGING_DATA, 4 * (A + BS), 2);
  unsigned char in[BS], out[BS];

  assert_false(fc_staging_read_data(st, 7, out));
  assert_false(fc_staging_access(st, 7, false));
  assert_false(fc_staging_read_data(st, 7, out));   /* no data yet */
  fill(in, 0xab);
  fc_staging_put_data(st, 7, in);
  assert_int_equal(stats().data_blocks, 1);
  assert_int_equal(stats().used_bytes, A + BS);
  fill(out, 0);
  assert_true(fc_staging_read_data(st, 7, out));
  assert_memory_equal(in, out, BS);
  assert_int_equal(stats().data_hits, 1);
  assert_false(fc_staging_access(st, 7, false));   /* second access, N = 2 */
  assert_true(fc_staging_access(st, 7, false));    /* admitted: data dropped */
  assert_false(fc_staging_read_data(st, 7, out));
  assert_int_equal(stats().data_blocks, 0);
  assert_int_equal(stats().used_bytes, 0);
}

static void
test_data_put_unstaged_or_address(void **state)
{
  struct fc_staging *st = mk(FC_STAGING_DATA, 4 * (A + BS), 1);
  unsigned char in[BS];

  fill(in, 1);
  fc_staging_put_data(st, 3, in);                  /* not staged: no-op */
  assert_int_equal(stats().data_blocks, 0);
  fc_staging_free(stage);
  st = mk(FC_STAGING_ADDRESS, 4 * A, 1);
  assert_false(fc_staging_access(st, 3, false));
  fc_staging_put_data(st, 3, in);                  /* address kind: no-op */
  assert_false(fc_staging_read_data(st, 3, NULL));
  assert_int_equal(stats().used_bytes, A);
}

static void
test_data_bound(void **state)
{
  /* Room for two blocks with data, or for 2 + BS / A addresses. */
  struct fc_staging *st = mk(FC_STAGING_DATA, 2 * (A + BS), 1);
  unsigned char in[BS];

  fill(in, 2);
  for (uint64_t b = 1; b <= 3; b++) {
    assert_false(fc_staging_access(st, b, false));
    fc_staging_put_data(st, b, in);
  }
  /* The third block's data pushed out block 1, entry and all. */
  assert_int_equal(stats().addresses, 2);
  assert_int_equal(stats().data_blocks, 2);
  assert_int_equal(stats().evicted, 1);
  assert_false(fc_staging_read_data(st, 1, NULL));
  assert_true(fc_staging_read_data(st, 2, NULL));
  assert_true(stats().used_bytes <= stats().area_bytes);
  /* A write miss stages only its address (and pushes out block 2). */
  assert_false(fc_staging_access(st, 50, true));
  assert_int_equal(stats().used_bytes, 2 * A + BS);
  assert_int_equal(stats().addresses, 2);
}

static void
test_null_data_accounts_only(void **state)
{
  struct fc_staging *st = mk(FC_STAGING_DATA, 4 * (A + BS), 1);
  unsigned char out[BS];

  assert_false(fc_staging_access(st, 4, false));
  fc_staging_put_data(st, 4, NULL);
  assert_int_equal(stats().used_bytes, A + BS);
  fill(out, 0xff);
  assert_true(fc_staging_read_data(st, 4, out));
  assert_int_equal(out[0], 0);
  assert_true(fc_staging_read_data(st, 4, NULL));
  assert_int_equal(stats().data_hits, 2);
}

static void
test_invalidate(void **state)
{
  struct fc_staging *st = mk(FC_STAGING_DATA, 64 * (A + BS), 2);
  unsigned char in[BS];

  fill(in, 3);
  for (uint64_t b = 10; b < 20; b++) {
    assert_false(fc_staging_access(st, b, false));
    fc_staging_put_data(st, b, in);
  }
  fc_staging_invalidate(st, 12, 3);               /* walks the range */
  assert_int_equal(stats().data_blocks, 7);
  assert_false(fc_staging_read_data(st, 12, NULL));
  assert_false(fc_staging_read_data(st, 14, NULL));
  assert_true(fc_staging_read_data(st, 15, NULL));
  fc_staging_invalidate(st, 0, UINT64_MAX);       /* walks the stage */
  assert_int_equal(stats().data_blocks, 0);
  assert_int_equal(stats().addresses, 10);
  assert_int_equal(stats().used_bytes, 10 * A);
  /* Counts survive: one more access each makes N = 2. */
  assert_false(fc_staging_access(st, 12, false));
  assert_true(fc_staging_access(st, 12, false));
  fc_staging_invalidate(st, 0, 0);
}

static void
test_write_access_drops_data(void **state)
{
  struct fc_staging *st = mk(FC_STAGING_DATA, 4 * (A + BS), 2);

  assert_false(fc_staging_access(st, 1, false));
  fc_staging_put_data(st, 1, NULL);
  assert_false(fc_staging_access(st, 1, true));
  assert_false(fc_staging_read_data(st, 1, NULL));
  assert_int_equal(stats().used_bytes, A);
}

static void
test_hybrid_split_and_demotion(void **state)
{
  /* Data list: 7/8 of the area = room for 2 blocks with data (and a
   * little slack for rounding); address list: 1/8 = 49 addresses. */
  size_t area = 8 * (2 * (A + BS) + 8) / 7;
  struct fc_staging *st;

  assert_true(area - area / 8 >= 2 * (A + BS));
  assert_true(area - area / 8 < 2 * (A + BS) + A);
  assert_int_equal(area / 8 / A, 49);
  st = mk(FC_STAGING_HYBRID, area, 1);
  for (uint64_t b = 1; b <= 3; b++) {
    assert_false(fc_staging_access(st, b, false));
    fc_staging_put_data(st, b, NULL);
  }
  /* Block 1 was demoted: no data, but still staged with its count. */
  assert_int_equal(stats().data_blocks, 2);
  assert_int_equal(stats().addresses, 3);
  assert_int_equal(stats().evicted, 0);
  assert_false(fc_staging_read_data(st, 1, NULL));
  assert_true(fc_staging_read_data(st, 3, NULL));
  assert_true(fc_staging_access(st, 1, false));
  /* Write misses go to the address list and never push data out. */
  for (uint64_t b = 100; b < 200; b++)
    assert_false(fc_staging_access(st, b, true));
  assert_int_equal(stats().data_blocks, 2);
  assert_true(fc_staging_read_data(st, 2, NULL));
  assert_int_equal(stats().addresses, 2 + 49);
  assert_int_equal(stats().evicted, 100 - 49);
  assert_true(stats().used_bytes <= area);
}

static void
test_hybrid_read_after_write_moves_to_data(void **state)
{
  struct fc_staging *st = mk(FC_STAGING_HYBRID, 64 * (A + BS), 3);

  assert_false(fc_staging_access(st, 8, true));
  fc_staging_put_data(st, 8, NULL);               /* moves it to the data list */
  assert_true(fc_staging_read_data(st, 8, NULL));
  assert_false(fc_staging_access(st, 8, true));   /* stale: address only */
  assert_false(fc_staging_read_data(st, 8, NULL));
  assert_false(fc_staging_access(st, 8, false));
  assert_true(fc_staging_access(st, 8, false));   /* fourth access, N = 3 */
}

static void
test_resize(void **state)
{
  struct fc_staging *st = mk(FC_STAGING_ADDRESS, 10 * A, 1);

  for (uint64_t b = 1; b <= 10; b++)
    assert_false(fc_staging_access(st, b, false));
  fc_staging_resize(st, 3 * A);
  assert_int_equal(stats().addresses, 3);
  assert_int_equal(stats().area_bytes, 3 * A);
  assert_int_equal(stats().evicted, 7);
  assert_true(fc_staging_access(st, 10, false));  /* the most recent stay */
  assert_false(fc_staging_access(st, 1, false));
  fc_staging_resize(st, 100 * A);
  for (uint64_t b = 20; b < 60; b++)
    assert_false(fc_staging_access(st, b, false));
  assert_int_equal(stats().addresses, 43);
  /* Down to nothing: nothing can be staged, so nothing is admitted. */
  fc_staging_resize(st, 0);
  assert_int_equal(stats().addresses, 0);
  assert_false(fc_staging_access(st, 1, false));
  assert_false(fc_staging_access(st, 1, false));
}

static void
test_resize_hybrid_demotes(void **state)
{
  struct fc_staging *st = mk(FC_STAGING_HYBRID, 80 * (A + BS), 1);

  for (uint64_t b = 1; b <= 8; b++) {
    assert_false(fc_staging_access(st, b, false));
    fc_staging_put_data(st, b, NULL);
  }
  assert_int_equal(stats().data_blocks, 8);
  fc_staging_resize(st, 8 * (A + BS));           /* data list: 7 blocks */
  assert_int_equal(stats().data_blocks, 7);
  assert_int_equal(stats().addresses, 8);
  assert_true(fc_staging_access(st, 1, false));  /* demoted, still counted */
}


/* A set 8 times the area, read twice: the area alone forgets every block
 * before its reuse; with a history of one share it admits them all. */
static void
test_history_sees_reuse_beyond_the_area(void **state)
{
  static const enum fc_staging_kind kinds[] = {
    FC_STAGING_ADDRESS, FC_STAGING_DATA, FC_STAGING_HYBRID,
  };

  for (size_t k = 0; k < 3; k++) {
    size_t area = 16 * (A + BS);
    struct fc_staging *st = mk(kinds[k], area, 1);
    uint64_t set = 8 * (area / A), admitted = 0;

    for (int pass = 0; pass < 2; pass++)
      for (uint64_t b = 0; b < set; b++)
        admitted += fc_staging_access(st, b, false);
    assert_int_equal(admitted, 0);                /* the area alone */
    fc_staging_free(stage);
    stage = NULL;

    st = mk(kinds[k], area, 1);
    assert_int_equal(fc_staging_set_history(st, (uint32_t)set), 0);
    for (uint64_t b = 0; b < set; b++) {
      assert_false(fc_staging_access(st, b, false));
      fc_staging_put_data(st, b, NULL);
    }
    for (uint64_t b = 0; b < set; b++)
      admitted += fc_staging_access(st, b, false);
    assert_int_equal(admitted, set);
    assert_int_equal(stats().admitted, set);
    assert_true(stats().recalled > set / 2);
    assert_int_equal(stats().addresses + stats().history_blocks, 0);
    fc_staging_free(stage);
    stage = NULL;
  }
}

/* A scan as long as ten shares beside a reused set: the set is admitted,
 * no block of the scan is. */
static void
test_history_keeps_a_scan_out(void **state)
{
  const uint64_t set = 3000, scan = 10 * 4096;
  struct fc_staging *st = mk(FC_STAGING_HYBRID, 16 * (A + BS), 1);
  uint64_t s = 1u << 30, admitted = 0;

  assert_int_equal(fc_staging_set_history(st, 4096), 0);
  /* As the agent does: a read miss not admitted leaves its data. */
#define READ(b) do { \
    if (fc_staging_access(st, (b), false)) \
      admitted++; \
    else \
      fc_staging_put_data(st, (b), NULL); \
  } while (0)
  for (uint64_t b = 0; b < scan; b++)
    READ(s + b);
  assert_int_equal(admitted, 0);
  for (int pass = 0; pass < 2; pass++)
    for (uint64_t b = 0; b < set; b++) {
      READ(b);
      /* Interleaved: one scan block per set block, read once. */
      READ(s + scan + pass * set + b);
    }
#undef READ
  /* The area holds some 2,760 entries: most of the set came back from
   * the history, and only the set got in. */
  assert_int_equal(admitted, set);
  assert_int_equal(stats().admitted, set);
  assert_true(stats().recalled > set / 2);
  assert_true(stats().history_bytes <= 22 * 4096 + 1024);
}

/* Counts carry through the history: with N = 2 the third access admits,
 * wherever the first two were remembered. */
static void
test_history_keeps_counts(void **state)
{
  struct fc_staging *st = mk(FC_STAGING_ADDRESS, 2 * A, 2);

  assert_int_equal(fc_staging_set_history(st, 100), 0);
  assert_false(fc_staging_access(st, 1, false));
  assert_false(fc_staging_access(st, 2, false));
  assert_false(fc_staging_access(st, 3, true));    /* 1 pushed out */
  assert_int_equal(stats().history_blocks, 1);
  assert_false(fc_staging_access(st, 1, false));   /* count 2, back in */
  assert_int_equal(stats().recalled, 1);
  assert_false(fc_staging_access(st, 4, false));
  assert_false(fc_staging_access(st, 5, false));   /* 1 out again */
  assert_true(fc_staging_access(st, 1, false));    /* third access */
  /* A share past 2^32 blocks is clamped, not truncated to a few blocks;
   * a share of 1 still remembers FC_RHIST_MIN_GEN. */
  assert_int_equal(fc_staging_set_history(st, (UINT64_C(1) << 32) + 5), 0);
  assert_int_equal(fc_staging_set_history(st, 1), 0);
  for (uint64_t b = 100; b < 100 + 1000; b++)
    assert_false(fc_staging_access(st, b, false));
  assert_false(fc_staging_access(st, 100, false)); /* N = 2: count 2 */
  assert_true(fc_staging_access(st, 100, false));
  /* Removing the history: the area alone again. */
  assert_int_equal(fc_staging_set_history(st, 0), 0);
  assert_int_equal(stats().history_bytes, 0);
  assert_false(fc_staging_access(st, 2, false));
}

/* Nothing pushed out two windows ago admits a block. */
static void
test_history_ages_with_windows(void **state)
{
  struct fc_staging *st = mk(FC_STAGING_ADDRESS, A, 1);

  assert_int_equal(fc_staging_set_history(st, 100), 0);
  assert_false(fc_staging_access(st, 1, false));
  assert_false(fc_staging_access(st, 2, false));   /* 1 to the history */
  fc_staging_end_window(st);
  assert_true(fc_staging_access(st, 1, false));    /* last window: seen */
  assert_false(fc_staging_access(st, 3, false));   /* 2 to the history */
  fc_staging_end_window(st);
  fc_staging_end_window(st);
  assert_false(fc_staging_access(st, 2, false));   /* too long ago */
}

static void
test_bad_args(void **state)
{
  struct fc_staging *st = NULL;
  enum fc_staging_kind k;

  assert_int_equal(fc_staging_new(FC_STAGING_ADDRESS, 100 * A, BS, 0, &st), -EINVAL);
  assert_int_equal(fc_staging_new(FC_STAGING_ADDRESS, 100 * A, BS, 8, &st), -EINVAL);
  assert_int_equal(fc_staging_new(FC_STAGING_ADDRESS, 100 * A, 0, 1, &st), -EINVAL);
  assert_int_equal(fc_staging_new(FC_STAGING_ADDRESS, A - 1, BS, 1, &st), -EINVAL);
  assert_int_equal(fc_staging_new(FC_STAGING_DATA, A + BS - 1, BS, 1, &st), -EINVAL);
  assert_int_equal(fc_staging_new(FC_STAGING_HYBRID, A + BS, BS, 1, &st), -EINVAL);
  assert_int_equal(fc_staging_new((enum fc_staging_kind)42, 100 * A, BS, 1, &st),
                   -EINVAL);
  assert_int_equal(fc_staging_new(FC_STAGING_ADDRESS, 100 * A, BS, 1, NULL), -EINVAL);
  assert_null(st);
  assert_int_equal(fc_staging_new(FC_STAGING_ADDRESS, A, BS, 7, &stage), 0);
  fc_staging_free(NULL);

  assert_int_equal(fc_staging_kind_parse("hybrid", &k), 0);
  assert_int_equal(k, FC_STAGING_HYBRID);
  assert_int_equal(fc_staging_kind_parse("address", &k), 0);
  assert_int_equal(k, FC_STAGING_ADDRESS);
  assert_int_equal(fc_staging_kind_parse("data", &k), 0);
  assert_int_equal(k, FC_STAGING_DATA);
  assert_int_equal(fc_staging_kind_parse("Data", &k), -EINVAL);
  assert_int_equal(fc_staging_kind_parse("", &k), -EINVAL);
  assert_int_equal(fc_staging_kind_parse(NULL, &k), -EINVAL);
  assert_string_equal(fc_staging_kind_name(FC_STAGING_DATA), "data");
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_teardown(test_address_admits_second_access, teardown),
    cmocka_unit_test_teardown(test_block_zero_and_large, teardown),
    cmocka_unit_test_teardown(test_reuse_n2, teardown),
    cmocka_unit_test_teardown(test_address_bound_lru, teardown),
    cmocka_unit_test_teardown(test_many_entries, teardown),
    cmocka_unit_test_teardown(test_data_hits, teardown),
    cmocka_unit_test_teardown(test_data_put_unstaged_or_address, teardown),
    cmocka_unit_test_teardown(test_data_bound, teardown),
    cmocka_unit_test_teardown(test_null_data_accounts_only, teardown),
    cmocka_unit_test_teardown(test_invalidate, teardown),
    cmocka_unit_test_teardown(test_write_access_drops_data, teardown),
    cmocka_unit_test_teardown(test_hybrid_split_and_demotion, teardown),
    cmocka_unit_test_teardown(test_hybrid_read_after_write_moves_to_data, teardown),
    cmocka_unit_test_teardown(test_resize, teardown),
    cmocka_unit_test_teardown(test_resize_hybrid_demotes, teardown),
    cmocka_unit_test_teardown(test_history_sees_reuse_beyond_the_area, teardown),
    cmocka_unit_test_teardown(test_history_keeps_a_scan_out, teardown),
    cmocka_unit_test_teardown(test_history_keeps_counts, teardown),
    cmocka_unit_test_teardown(test_history_ages_with_windows, teardown),
    cmocka_unit_test_teardown(test_bad_args, teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}

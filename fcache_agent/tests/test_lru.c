/* SPDX-License-Identifier: Apache-2.0 */
/* LRU list threaded through the block table: push/remove/touch order and
 * head/tail/count with 0, 1, 2 and many entries, checked against the
 * links in both directions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <string.h>

#include "common/lru.h"

#define N 64

static struct fc_entry table[N];

static void
reset_table(void)
{
  for (unsigned i = 0; i < N; i++) {
    memset(&table[i], 0, sizeof table[i]);
    table[i].hash_next = table[i].lru_prev = table[i].lru_next = CBLOCK_NONE;
  }
}

/* The list must read exactly `want` (head first) forwards and backwards. */
static void
assert_order(const struct fc_lru *lru, const uint32_t *want, uint32_t n)
{
  uint32_t i, k;

  assert_int_equal(lru->count, n);
  if (n == 0) {
    assert_int_equal(lru->head, CBLOCK_NONE);
    assert_int_equal(lru->tail, CBLOCK_NONE);
    return;
  }
  assert_int_equal(lru->head, want[0]);
  assert_int_equal(lru->tail, want[n - 1]);
  assert_int_equal(table[lru->head].lru_prev, CBLOCK_NONE);
  assert_int_equal(table[lru->tail].lru_next, CBLOCK_NONE);
  for (i = lru->head, k = 0; i != CBLOCK_NONE; i = table[i].lru_next, k++) {
    assert_true(k < n);
    assert_int_equal(i, want[k]);
  }
  assert_int_equal(k, n);
  for (i = lru->tail, k = n; i != CBLOCK_NONE; i = table[i].lru_prev) {
    assert_true(k > 0);
    assert_int_equal(i, want[--k]);
  }
  assert_int_equal(k, 0);
}

static int
setup(void **state)
{
  reset_table();
  return 0;
}

static void
test_init_empty(void **state)
{
  struct fc_lru lru;

  memset(&lru, 0xab, sizeof lru);
  fc_lru_init(&lru);
  assert_order(&lru, NULL, 0);
}

static void
test_push_one(void **state)
{
  struct fc_lru lru;

  fc_lru_init(&lru);
  fc_lru_push_head(&lru, table, to_cblock(5));
  assert_order(&lru, (uint32_t[]){ 5 }, 1);
}

static void
test_push_two_newest_at_head(void **state)
{
  struct fc_lru lru;

  fc_lru_init(&lru);
  fc_lru_push_head(&lru, table, to_cblock(5));
  fc_lru_push_head(&lru, table, to_cblock(9));
  assert_order(&lru, (uint32_t[]){ 9, 5 }, 2);
}

static void
test_push_many(void **state)
{
  struct fc_lru lru;
  uint32_t want[N];

  fc_lru_init(&lru);
  for (uint32_t i = 0; i < N; i++) {
    fc_lru_push_head(&lru, table, to_cblock(i));
    want[N - 1 - i] = i;
  }
  assert_order(&lru, want, N);
}

static void
test_remove_only_entry(void **state)
{
  struct fc_lru lru;

  fc_lru_init(&lru);
  fc_lru_push_head(&lru, table, to_cblock(3));
  fc_lru_remove(&lru, table, to_cblock(3));
  assert_order(&lru, NULL, 0);
  assert_int_equal(table[3].lru_prev, CBLOCK_NONE);
  assert_int_equal(table[3].lru_next, CBLOCK_NONE);
}

static void
test_remove_of_two(void **state)
{
  struct fc_lru lru;

  fc_lru_init(&lru);
  fc_lru_push_head(&lru, table, to_cblock(1));
  fc_lru_push_head(&lru, table, to_cblock(2));
  fc_lru_remove(&lru, table, to_cblock(2));        /* the head */
  assert_order(&lru, (uint32_t[]){ 1 }, 1);

  fc_lru_push_head(&lru, table, to_cblock(2));
  fc_lru_remove(&lru, table, to_cblock(1));        /* the tail */
  assert_order(&lru, (uint32_t[]){ 2 }, 1);
}

static void
test_remove_head_middle_tail(void **state)
{
  struct fc_lru lru;

  fc_lru_init(&lru);
  for (uint32_t i = 0; i < 5; i++)
    fc_lru_push_head(&lru, table, to_cblock(i));   /* 4 3 2 1 0 */
  fc_lru_remove(&lru, table, to_cblock(2));
  assert_order(&lru, (uint32_t[]){ 4, 3, 1, 0 }, 4);
  fc_lru_remove(&lru, table, to_cblock(4));
  assert_order(&lru, (uint32_t[]){ 3, 1, 0 }, 3);
  fc_lru_remove(&lru, table, to_cblock(0));
  assert_order(&lru, (uint32_t[]){ 3, 1 }, 2);
  fc_lru_remove(&lru, table, to_cblock(3));
  fc_lru_remove(&lru, table, to_cblock(1));
  assert_order(&lru, NULL, 0);
}

static void
test_touch_single_is_noop(void **state)
{
  struct fc_lru lru;

  fc_lru_init(&lru);
  fc_lru_push_head(&lru, table, to_cblock(7));
  fc_lru_touch(&lru, table, to_cblock(7));
  assert_order(&lru, (uint32_t[]){ 7 }, 1);
}

static void
test_touch_two(void **state)
{
  struct fc_lru lru;

  fc_lru_init(&lru);
  fc_lru_push_head(&lru, table, to_cblock(1));
  fc_lru_push_head(&lru, table, to_cblock(2));
  fc_lru_touch(&lru, table, to_cblock(1));         /* tail to head */
  assert_order(&lru, (uint32_t[]){ 1, 2 }, 2);
  fc_lru_touch(&lru, table, to_cblock(1));         /* head stays */
  assert_order(&lru, (uint32_t[]){ 1, 2 }, 2);
}

static void
test_touch_tail_middle_head(void **state)
{
  struct fc_lru lru;

  fc_lru_init(&lru);
  for (uint32_t i = 0; i < 5; i++)
    fc_lru_push_head(&lru, table, to_cblock(i));   /* 4 3 2 1 0 */
  fc_lru_touch(&lru, table, to_cblock(0));
  assert_order(&lru, (uint32_t[]){ 0, 4, 3, 2, 1 }, 5);
  fc_lru_touch(&lru, table, to_cblock(3));
  assert_order(&lru, (uint32_t[]){ 3, 0, 4, 2, 1 }, 5);
  fc_lru_touch(&lru, table, to_cblock(3));
  assert_order(&lru, (uint32_t[]){ 3, 0, 4, 2, 1 }, 5);
}

/* Random pushes, removes and touches against a plain array model. */
static void
test_random_against_model(void **state)
{
  struct fc_lru lru;
  uint32_t model[N], n = 0;
  uint64_t x = 42;
  bool linked[N] = { false };

  fc_lru_init(&lru);
  for (int step = 0; step < 20000; step++) {
    uint32_t cb;

    x = x * 6364136223846793005ull + 1442695040888963407ull;
    cb = (uint32_t)(x >> 33) % N;
    if (!linked[cb]) {
      fc_lru_push_head(&lru, table, to_cblock(cb));
      memmove(model + 1, model, n * sizeof *model);
      model[0] = cb;
      n++;
      linked[cb] = true;
    } else {
      uint32_t k = 0;

      while (model[k] != cb)
        k++;
      memmove(model + k, model + k + 1, (n - k - 1) * sizeof *model);
      n--;
      if ((x >> 20) & 1) {
        fc_lru_touch(&lru, table, to_cblock(cb));
        memmove(model + 1, model, n * sizeof *model);
        model[0] = cb;
        n++;
      } else {
        fc_lru_remove(&lru, table, to_cblock(cb));
        linked[cb] = false;
      }
    }
    if (step % 97 == 0)
      assert_order(&lru, model, n);
  }
  assert_order(&lru, model, n);
}

/* Preloaded blocks keep their own order just below one another, wherever
 * the first went, including when the one before is the tail. */
static void
test_insert_after(void **state)
{
  struct fc_lru lru;

  fc_lru_init(&lru);
  fc_lru_push_head(&lru, table, to_cblock(1));
  fc_lru_push_head(&lru, table, to_cblock(0));
  fc_lru_insert_after(&lru, table, to_cblock(0), to_cblock(5));
  fc_lru_insert_after(&lru, table, to_cblock(5), to_cblock(6));
  assert_order(&lru, (uint32_t[]){ 0, 5, 6, 1 }, 4);
  fc_lru_insert_after(&lru, table, to_cblock(1), to_cblock(7));
  assert_order(&lru, (uint32_t[]){ 0, 5, 6, 1, 7 }, 5);
  fc_lru_remove(&lru, table, to_cblock(5));
  fc_lru_insert_after(&lru, table, to_cblock(7), to_cblock(8));
  assert_order(&lru, (uint32_t[]){ 0, 6, 1, 7, 8 }, 5);
}

struct seen {
  uint32_t rank_of[N];
  uint32_t visits;
};

static void
note_visit(void *ctx, uint32_t cb, uint32_t rank)
{
  struct seen *s = ctx;

  assert_true(cb < N);
  assert_int_equal(s->rank_of[cb], CBLOCK_NONE);   /* once each */
  s->rank_of[cb] = rank;
  s->visits++;
}

/* The walk from both ends meets in the middle for every length, odd and
 * even (0 to N): each linked block visited once, with its place from the
 * head, and nothing else. */
static void
test_walk_both_ends(void **state)
{
  for (uint32_t n = 0; n <= N; n++) {
    struct fc_lru lru;
    struct seen s = { .visits = 0 };
    uint32_t order[N];

    reset_table();
    fc_lru_init(&lru);
    /* A scattered order: block (7 i) mod N at rank i. */
    for (uint32_t i = n; i-- > 0;)
      fc_lru_push_head(&lru, table, to_cblock(order[i] = 7 * i % N));
    memset(s.rank_of, 0xff, sizeof s.rank_of);
    fc_lru_walk_both_ends(&lru, table, note_visit, &s);
    assert_int_equal(s.visits, n);
    for (uint32_t i = 0; i < n; i++)
      assert_int_equal(s.rank_of[order[i]], i);
  }
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup(test_walk_both_ends, setup),
    cmocka_unit_test_setup(test_init_empty, setup),
    cmocka_unit_test_setup(test_push_one, setup),
    cmocka_unit_test_setup(test_push_two_newest_at_head, setup),
    cmocka_unit_test_setup(test_push_many, setup),
    cmocka_unit_test_setup(test_remove_only_entry, setup),
    cmocka_unit_test_setup(test_remove_of_two, setup),
    cmocka_unit_test_setup(test_remove_head_middle_tail, setup),
    cmocka_unit_test_setup(test_touch_single_is_noop, setup),
    cmocka_unit_test_setup(test_touch_two, setup),
    cmocka_unit_test_setup(test_touch_tail_middle_head, setup),
    cmocka_unit_test_setup(test_random_against_model, setup),
    cmocka_unit_test_setup(test_insert_after, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

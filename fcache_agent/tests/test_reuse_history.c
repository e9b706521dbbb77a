/* SPDX-License-Identifier: Apache-2.0 */
/* The reuse history beneath admission staging (alloc/reuse_history.h):
 * counts kept and forgotten on take, how long an entry is remembered
 * (at least one generation of later entries, at most two, at most two
 * windows), deletion against a reference model, resize, and the memory
 * per remembered block. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/reuse_history.h"

static struct fc_rhist *hist;

static int
teardown(void **state)
{
  fc_rhist_free(hist);
  hist = NULL;
  return 0;
}

static struct fc_rhist *
mk(uint32_t gen)
{
  assert_int_equal(fc_rhist_new(gen, &hist), 0);
  return hist;
}

static void
test_put_take(void **state)
{
  struct fc_rhist *h = mk(0);

  assert_int_equal(fc_rhist_take(h, 5), 0);       /* empty */
  fc_rhist_put(h, 5, 1);
  fc_rhist_put(h, 0, 3);
  fc_rhist_put(h, 6, 0);                          /* clamped up to 1 */
  fc_rhist_put(h, 7, 99);                         /* clamped down to 7 */
  assert_int_equal(fc_rhist_entries(h), 4);
  assert_int_equal(fc_rhist_take(h, 5), 1);
  assert_int_equal(fc_rhist_take(h, 5), 0);       /* taken: forgotten */
  assert_int_equal(fc_rhist_take(h, 0), 3);
  assert_int_equal(fc_rhist_take(h, 6), 1);
  assert_int_equal(fc_rhist_take(h, 7), FC_RHIST_MAX_COUNT);
  assert_int_equal(fc_rhist_entries(h), 0);
  /* Put again: the newer count wins, one entry. */
  fc_rhist_put(h, 9, 1);
  fc_rhist_put(h, 9, 2);
  assert_int_equal(fc_rhist_entries(h), 1);
  assert_int_equal(fc_rhist_take(h, 9), 2);
}

static void
test_block_limit(void **state)
{
  struct fc_rhist *h = mk(0);

  /* The largest block kept, with the largest count: all bits but one set,
   * never mistaken for an empty slot. */
  fc_rhist_put(h, FC_RHIST_BLOCK_LIMIT - 1, FC_RHIST_MAX_COUNT);
  fc_rhist_put(h, FC_RHIST_BLOCK_LIMIT, 1);
  fc_rhist_put(h, UINT64_MAX, 1);
  assert_int_equal(fc_rhist_entries(h), 1);
  assert_int_equal(fc_rhist_take(h, FC_RHIST_BLOCK_LIMIT), 0);
  assert_int_equal(fc_rhist_take(h, UINT64_MAX), 0);
  assert_int_equal(fc_rhist_take(h, FC_RHIST_BLOCK_LIMIT - 1), FC_RHIST_MAX_COUNT);
}

/* An entry outlives `gen` later entries and not 2 * gen: the bounds of
 * two generations. */
static void
test_remembered_one_generation_at_least(void **state)
{
  const uint32_t gen = 5000;
  struct fc_rhist *h = mk(gen);

  /* Block gen - 1 is the last of the first generation: the one that
   * has the fewest later entries when that generation is forgotten. */
  for (uint64_t b = 0; b < gen; b++)
    fc_rhist_put(h, b, 1);
  for (uint64_t b = gen; b < 2ull * gen; b++)
    fc_rhist_put(h, b, 1);
  /* Block gen - 1 has seen gen later entries: still there. */
  assert_int_equal(fc_rhist_take(h, gen - 1), 1);
  /* One more generation and all of the first one is gone. */
  for (uint64_t b = 2ull * gen; b < 3ull * gen; b++)
    fc_rhist_put(h, b, 1);
  for (uint64_t b = 0; b < gen; b++)
    assert_int_equal(fc_rhist_take(h, b), 0);
  /* The second generation (gen later entries each) is all there. */
  for (uint64_t b = gen; b < 2ull * gen; b++)
    assert_int_equal(fc_rhist_take(h, b), 1);
  assert_true(fc_rhist_entries(h) <= 2ull * gen);
}

static void
test_age(void **state)
{
  struct fc_rhist *h = mk(0);

  fc_rhist_put(h, 1, 2);
  fc_rhist_put(h, 2, 1);
  fc_rhist_age(h);                                /* one window ago */
  assert_int_equal(fc_rhist_take(h, 1), 2);
  fc_rhist_put(h, 3, 1);
  fc_rhist_age(h);
  fc_rhist_age(h);                                /* two windows ago */
  assert_int_equal(fc_rhist_take(h, 2), 0);
  assert_int_equal(fc_rhist_take(h, 3), 0);
  assert_int_equal(fc_rhist_entries(h), 0);
  /* An entry taken from the older generation and put back is current. */
  fc_rhist_put(h, 4, 1);
  fc_rhist_age(h);
  assert_int_equal(fc_rhist_take(h, 4), 1);
  fc_rhist_put(h, 4, 2);
  fc_rhist_age(h);
  assert_int_equal(fc_rhist_take(h, 4), 2);
}

/* Puts and takes at random against a plain array: the backward-shift
 * deletion and the growing rehashes lose nothing and invent nothing. */
static void
test_against_model(void **state)
{
  enum { SPAN = 6000, OPS = 300000 };
  static unsigned char model[SPAN];
  struct fc_rhist *h = mk(1u << 20);   /* no rotation in this test */
  uint64_t entries = 0;

  memset(model, 0, sizeof model);
  srand(34);
  for (int op = 0; op < OPS; op++) {
    /* Blocks spread over a large range, so homes differ from order. */
    uint32_t i = (uint32_t)rand() % SPAN;
    uint64_t block = (uint64_t)i * 7919u + ((uint64_t)i << 40);

    if (rand() % 3) {
      unsigned c = 1 + (unsigned)rand() % FC_RHIST_MAX_COUNT;

      if (!model[i])
        entries++;
      model[i] = (unsigned char)c;
      fc_rhist_put(h, block, c);
    } else {
      assert_int_equal(fc_rhist_take(h, block), model[i]);
      if (model[i])
        entries--;
      model[i] = 0;
    }
    if (op % 1000 == 0)
      assert_int_equal(fc_rhist_entries(h), entries);
  }
  for (uint32_t i = 0; i < SPAN; i++)
    assert_int_equal(fc_rhist_take(h, (uint64_t)i * 7919u + ((uint64_t)i << 40)),
                     model[i]);
  assert_int_equal(fc_rhist_entries(h), 0);
}

static void
test_resize(void **state)
{
  struct fc_rhist *h = mk(20000);
  size_t big;

  for (uint64_t b = 0; b < 30000; b++)
    fc_rhist_put(h, b, 1);
  big = fc_rhist_memory(h);
  /* Still a share that holds them all: nothing lost. */
  fc_rhist_resize(h, 40000);
  assert_int_equal(fc_rhist_entries(h), 30000);
  /* A share of 5,000: neither generation fits, both are forgotten, and
   * their memory goes back. */
  fc_rhist_resize(h, 5000);
  assert_int_equal(fc_rhist_entries(h), 0);
  assert_true(fc_rhist_memory(h) <= fc_rhist_memory_max(5000));
  assert_true(fc_rhist_memory(h) < big);
  for (uint64_t b = 0; b < 12000; b++)
    fc_rhist_put(h, b, 1);
  assert_true(fc_rhist_entries(h) <= 10000);
  assert_int_equal(fc_rhist_take(h, 11999), 1);
  /* Below the minimum: clamped, still works. */
  fc_rhist_resize(h, 1);
  fc_rhist_put(h, 1, 1);
  assert_int_equal(fc_rhist_take(h, 1), 1);
}

/* Memory per block of generation: at most 2 * 8 * 4/3 = 21.3 bytes once
 * both generations are full, and linear in the generation (the share). */
static void
test_memory_per_block(void **state)
{
  static const uint32_t gens[] = { 4096, 65536, 1u << 20 };

  for (size_t k = 0; k < sizeof gens / sizeof gens[0]; k++) {
    uint32_t gen = gens[k];
    double per;

    assert_int_equal(fc_rhist_new(gen, &hist), 0);
    assert_true(fc_rhist_memory(hist) < 256);     /* quiet: nearly nothing */
    for (uint64_t b = 0; b < 2ull * gen; b++)
      fc_rhist_put(hist, b * 3, 1);
    assert_int_equal(fc_rhist_entries(hist), 2ull * gen);
    per = (double)fc_rhist_memory(hist) / gen;
    printf("reuse history: generation %u blocks, %zu bytes, %.2f B per block "
           "of share (bound %zu)\n", gen, fc_rhist_memory(hist), per,
           fc_rhist_memory_max(gen));
    assert_true(fc_rhist_memory(hist) <= fc_rhist_memory_max(gen));
    assert_true(per <= 21.34 + 256.0 / gen);
    assert_true(per >= 21.3);
    fc_rhist_free(hist);
    hist = NULL;
  }
  assert_true(fc_rhist_memory_max(2u << 20) <= 2 * fc_rhist_memory_max(1u << 20));
}

static void
test_bad_args(void **state)
{
  assert_int_equal(fc_rhist_new(100, NULL), -EINVAL);
  fc_rhist_free(NULL);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_teardown(test_put_take, teardown),
    cmocka_unit_test_teardown(test_block_limit, teardown),
    cmocka_unit_test_teardown(test_remembered_one_generation_at_least, teardown),
    cmocka_unit_test_teardown(test_age, teardown),
    cmocka_unit_test_teardown(test_against_model, teardown),
    cmocka_unit_test_teardown(test_resize, teardown),
    cmocka_unit_test_teardown(test_memory_per_block, teardown),
    cmocka_unit_test_teardown(test_bad_args, teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* oblock -> cblock hash map chained through the block table: insert,
 * lookup, remove (including of absent blocks), long collision chains in a
 * tiny bucket array, long runs of sequential and random oblocks
 * compared with a plain reference array, and a resize of a full map. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/blockmap.h"

#define NOT_MAPPED UINT64_MAX

struct fx {
  struct fc_blockmap map;
  struct fc_entry *table;
  uint64_t *ref;            /* ref[cb] = oblock mapped there, or NOT_MAPPED */
  uint32_t n;
};

static struct fx *
fx_new(uint32_t nr_entries, uint32_t capacity)
{
  struct fx *f = calloc(1, sizeof *f);

  assert_non_null(f);
  f->n = nr_entries;
  f->table = calloc(nr_entries, sizeof *f->table);
  f->ref = malloc(nr_entries * sizeof *f->ref);
  assert_non_null(f->table);
  assert_non_null(f->ref);
  for (uint32_t i = 0; i < nr_entries; i++) {
    f->table[i].hash_next = f->table[i].lru_prev = f->table[i].lru_next = CBLOCK_NONE;
    f->ref[i] = NOT_MAPPED;
  }
  assert_int_equal(fc_blockmap_init(&f->map, capacity), 0);
  return f;
}

static void
fx_free(struct fx *f)
{
  fc_blockmap_destroy(&f->map);
  assert_null(f->map.buckets);
  free(f->table);
  free(f->ref);
  free(f);
}

static void
put(struct fx *f, uint32_t cb, uint64_t ob)
{
  f->table[cb].oblock = ob;
  fc_blockmap_insert(&f->map, f->table, to_cblock(cb));
  f->ref[cb] = ob;
}

static void
del(struct fx *f, uint32_t cb)
{
  assert_int_equal(fc_blockmap_remove(&f->map, f->table, to_cblock(cb)), 0);
  f->ref[cb] = NOT_MAPPED;
}

static uint32_t
get(struct fx *f, uint64_t ob)
{
  return fc_blockmap_lookup(&f->map, f->table, to_oblock(ob)).n;
}

/* Every mapped block is found where the reference says, and the count
 * matches. */
static void
check_all(struct fx *f)
{
  uint32_t mapped = 0;

  for (uint32_t cb = 0; cb < f->n; cb++) {
    if (f->ref[cb] == NOT_MAPPED)
      continue;
    mapped++;
    assert_int_equal(get(f, f->ref[cb]), cb);
  }
  assert_int_equal(f->map.count, mapped);
}

/* splitmix64's finalizer: a bijection, so distinct inputs never collide. */
static uint64_t
mix(uint64_t z)
{
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void
test_empty_lookup(void **state)
{
  struct fx *f = fx_new(4, 4);

  assert_int_equal(f->map.count, 0);
  assert_int_equal(get(f, 0), CBLOCK_NONE);
  assert_int_equal(get(f, 12345), CBLOCK_NONE);
  fx_free(f);
}

static void
test_insert_lookup_remove(void **state)
{
  struct fx *f = fx_new(8, 8);

  put(f, 3, 100);
  assert_int_equal(f->map.count, 1);
  assert_int_equal(get(f, 100), 3);
  assert_int_equal(get(f, 101), CBLOCK_NONE);
  del(f, 3);
  assert_int_equal(f->map.count, 0);
  assert_int_equal(get(f, 100), CBLOCK_NONE);
  assert_int_equal(f->table[3].hash_next, CBLOCK_NONE);
  fx_free(f);
}

static void
test_extreme_oblocks(void **state)
{
  struct fx *f = fx_new(4, 4);

  put(f, 0, 0);
  put(f, 1, UINT64_MAX - 1);
  put(f, 2, 1ull << 63);
  assert_int_equal(get(f, 0), 0);
  assert_int_equal(get(f, UINT64_MAX - 1), 1);
  assert_int_equal(get(f, 1ull << 63), 2);
  check_all(f);
  fx_free(f);
}

static void
test_remove_absent_enoent(void **state)
{
  struct fx *f = fx_new(8, 8);

  put(f, 1, 10);
  f->table[2].oblock = 20;              /* never inserted */
  assert_int_equal(fc_blockmap_remove(&f->map, f->table, to_cblock(2)), -ENOENT);
  f->table[5].oblock = 10;              /* same oblock, different block */
  assert_int_equal(fc_blockmap_remove(&f->map, f->table, to_cblock(5)), -ENOENT);
  assert_int_equal(f->map.count, 1);
  assert_int_equal(get(f, 10), 1);
  del(f, 1);
  assert_int_equal(fc_blockmap_remove(&f->map, f->table, to_cblock(1)), -ENOENT);
  assert_int_equal(f->map.count, 0);
  fx_free(f);
}

/* 16 buckets at least, 200 entries: every chain is long.  Remove from the
 * chains' heads, middles and tails in several orders. */
static void
test_collisions_tiny_table(void **state)
{
  struct fx *f = fx_new(200, 1);

  assert_true(fc_blockmap_memory(&f->map) <= 64 * sizeof(uint32_t));
  for (uint32_t cb = 0; cb < 200; cb++)
    put(f, cb, cb * 7 + 3);
  check_all(f);
  /* Most recently inserted first (chain heads)... */
  for (uint32_t cb = 199; cb >= 150; cb--)
    del(f, cb);
  check_all(f);
  /* ...oldest first (chain tails)... */
  for (uint32_t cb = 0; cb < 50; cb++)
    del(f, cb);
  check_all(f);
  /* ...and every other one of the rest (middles). */
  for (uint32_t cb = 50; cb < 150; cb += 2)
    del(f, cb);
  check_all(f);
  for (uint32_t cb = 0; cb < 200; cb++)
    if (f->ref[cb] == NOT_MAPPED)
      assert_int_equal(get(f, cb * 7 + 3), CBLOCK_NONE);
  /* Reinsert into the holes. */
  for (uint32_t cb = 0; cb < 50; cb++)
    put(f, cb, 100000 + cb);
  check_all(f);
  fx_free(f);
}

static void
test_memory_scales_with_capacity(void **state)
{
  struct fc_blockmap small, big;

  assert_int_equal(fc_blockmap_init(&small, 10), 0);
  assert_int_equal(fc_blockmap_init(&big, 100000), 0);
  assert_true(fc_blockmap_memory(&small) >= 10 * sizeof(uint32_t));
  assert_true(fc_blockmap_memory(&big) >= 100000 * sizeof(uint32_t));
  assert_true(fc_blockmap_memory(&big) <= 4 * 100000 * sizeof(uint32_t));
  fc_blockmap_destroy(&small);
  fc_blockmap_destroy(&big);
}

static void
test_sequential(void **state)
{
  const uint32_t n = 8192;
  struct fx *f = fx_new(n, n);

  /* Sequential oblocks in reverse cblock order, as a scan would install. */
  for (uint32_t i = 0; i < n; i++)
    put(f, n - 1 - i, i);
  check_all(f);
  for (uint64_t ob = n; ob < 2 * n; ob++)
    assert_int_equal(get(f, ob), CBLOCK_NONE);
  for (uint32_t cb = 0; cb < n; cb += 2)
    del(f, cb);
  check_all(f);
  for (uint32_t cb = 0; cb < n; cb += 2)
    assert_int_equal(get(f, n - 1 - cb), CBLOCK_NONE);
  fx_free(f);
}

/* Random inserts and removes, map sized below its fill so chains grow. */
static void
test_random_against_reference(void **state)
{
  const uint32_t n = 4096;
  struct fx *f = fx_new(n, n / 8);
  uint64_t x = 7, next = 1;

  for (int step = 0; step < 100000; step++) {
    uint32_t cb;

    x = x * 6364136223846793005ull + 1442695040888963407ull;
    cb = (uint32_t)(x >> 33) % n;
    if (f->ref[cb] != NOT_MAPPED) {
      uint64_t old = f->ref[cb];
      del(f, cb);
      assert_int_equal(get(f, old), CBLOCK_NONE);
    } else {
      /* Half small sequential numbers, half anywhere in 64 bits; unique
       * either way (mix is a bijection, and the two ranges are kept
       * apart by the top bit). */
      uint64_t ob = (x >> 7) & 1 ? next++ : (mix(next++) | (1ull << 63));
      if (ob == NOT_MAPPED)
        ob = 1ull << 62;
      put(f, cb, ob);
      assert_int_equal(get(f, ob), cb);
    }
    if (step % 5000 == 0)
      check_all(f);
  }
  check_all(f);
  fx_free(f);
}

/* A map filled past its size, resized up (a grown quota) and down: every
 * mapping stays, and removes and inserts go on as before. */
static void
test_resize_keeps_every_mapping(void **state)
{
  const uint32_t n = 4096;
  struct fx *f = fx_new(n, 64);

  for (uint32_t cb = 0; cb < n; cb++)
    put(f, cb, mix(cb) >> 2);
  check_all(f);
  assert_int_equal(fc_blockmap_resize(&f->map, f->table, n), 0);
  assert_true(fc_blockmap_memory(&f->map) >= n * sizeof(uint32_t));
  assert_int_equal(f->map.count, n);
  check_all(f);
  for (uint32_t cb = 0; cb < n; cb += 3)
    del(f, cb);
  check_all(f);
  assert_int_equal(fc_blockmap_resize(&f->map, f->table, 16), 0);
  check_all(f);
  for (uint32_t cb = 0; cb < n; cb += 3)
    put(f, cb, (1ull << 62) + cb);
  check_all(f);
  fx_free(f);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_empty_lookup),
    cmocka_unit_test(test_insert_lookup_remove),
    cmocka_unit_test(test_extreme_oblocks),
    cmocka_unit_test(test_remove_absent_enoent),
    cmocka_unit_test(test_collisions_tiny_table),
    cmocka_unit_test(test_memory_scales_with_capacity),
    cmocka_unit_test(test_sequential),
    cmocka_unit_test(test_random_against_reference),
    cmocka_unit_test(test_resize_keeps_every_mapping),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

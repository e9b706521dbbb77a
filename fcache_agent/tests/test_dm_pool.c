/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the dmcache engine's pure parts: the flash pool's
 * extent accounting and persistence, the cache table line and the status
 * parsing (libdevmapper's dm_get_status_cache, no kernel needed). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dmcache/dm_cache.h"
#include "dmcache/flash_pool.h"

#define X FC_FLASH_EXTENT

static void
test_pool_exact_accounting(void **state)
{
  struct fc_flash_pool p;

  fc_flash_pool_init(&p, 10ull * X + 123);     /* partial extent not counted */
  assert_int_equal(p.nr_extents, 10);
  assert_int_equal(fc_flash_pool_alloc(&p, "a/cmeta", 4 * X + 1), 0);   /* 5 */
  assert_int_equal(fc_flash_pool_alloc(&p, "a/cdata", 3 * X), 0);       /* 3 */
  assert_int_equal(fc_flash_pool_used(&p), 8);
  assert_int_equal(fc_flash_pool_owned(&p, "a/cmeta"), 5);
  assert_int_equal(fc_flash_pool_alloc(&p, "b/cdata", 3 * X), -ENOSPC);
  assert_int_equal(fc_flash_pool_used(&p), 8);                        /* unchanged */
  assert_int_equal(fc_flash_pool_alloc(&p, "a/cdata", X), -EEXIST);
  assert_int_equal(fc_flash_pool_alloc(&p, "b/cdata", 2 * X), 0);
  assert_int_equal(fc_flash_pool_used(&p), 10);
  assert_int_equal(fc_flash_pool_free(&p, "a/cmeta"), 5);
  assert_int_equal(fc_flash_pool_used(&p), 5);
  fc_flash_pool_fini(&p);
}

static void
test_pool_fragmented_alloc_keeps_order(void **state)
{
  struct fc_flash_pool p;
  const struct fc_flash_seg *segs[8];

  fc_flash_pool_init(&p, 10ull * X);
  assert_int_equal(fc_flash_pool_alloc(&p, "a", 2 * X), 0);   /* 0-1 */
  assert_int_equal(fc_flash_pool_alloc(&p, "b", 2 * X), 0);   /* 2-3 */
  assert_int_equal(fc_flash_pool_alloc(&p, "c", 2 * X), 0);   /* 4-5 */
  fc_flash_pool_free(&p, "a");
  fc_flash_pool_free(&p, "c");
  /* 6 free extents in two holes: 0-1 and 4-9. */
  assert_int_equal(fc_flash_pool_alloc(&p, "d", 5 * X), 0);
  assert_int_equal(fc_flash_pool_segments(&p, "d", segs, 8), 2);
  assert_int_equal(segs[0]->start, 0);
  assert_int_equal(segs[0]->len, 2);
  assert_int_equal(segs[1]->start, 4);
  assert_int_equal(segs[1]->len, 3);
  assert_int_equal(fc_flash_pool_used(&p), 7);
  fc_flash_pool_fini(&p);
}

static void
test_pool_save_load_roundtrip(void **state)
{
  char dir[] = "/tmp/fcpoolXXXXXX", path[64], err[256];
  struct fc_flash_pool p, q;
  const struct fc_flash_seg *segs[4];

  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/pool", dir);
  fc_flash_pool_init(&p, 8ull * X);
  assert_int_equal(fc_flash_pool_alloc(&p, "v/cmeta", X), 0);
  assert_int_equal(fc_flash_pool_alloc(&p, "v/cdata", 3 * X), 0);
  assert_int_equal(fc_flash_pool_save(&p, path, err, sizeof err), 0);
  fc_flash_pool_init(&q, 8ull * X);
  assert_int_equal(fc_flash_pool_load(&q, path, err, sizeof err), 0);
  assert_int_equal(fc_flash_pool_used(&q), 4);
  assert_int_equal(fc_flash_pool_segments(&q, "v/cdata", segs, 4), 1);
  assert_int_equal(segs[0]->start, 1);
  fc_flash_pool_fini(&q);
  /* A smaller capacity cannot hold the table: refused, says why. */
  fc_flash_pool_init(&q, 2ull * X);
  assert_int_equal(fc_flash_pool_load(&q, path, err, sizeof err), -ERANGE);
  assert_non_null(strstr(err, "past the flash capacity"));
  fc_flash_pool_fini(&q);
  fc_flash_pool_fini(&p);
  unlink(path);
  rmdir(dir);
}

static void
test_pool_load_rejects_overlap(void **state)
{
  char dir[] = "/tmp/fcpoolXXXXXX", path[64], err[256];
  struct fc_flash_pool q;
  FILE *f;

  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/pool", dir);
  f = fopen(path, "w");
  fputs("a/cdata 0 4\nb/cdata 3 2\n", f);
  fclose(f);
  fc_flash_pool_init(&q, 8ull * X);
  assert_int_equal(fc_flash_pool_load(&q, path, err, sizeof err), -EUCLEAN);
  assert_non_null(strstr(err, "overlaps"));
  fc_flash_pool_fini(&q);
  unlink(path);
  rmdir(dir);
}

static void
test_cache_table_and_modes(void **state)
{
  char buf[256];

  assert_int_equal(fc_dmc_mode_for(FC_WRITE_READ_ONLY), FC_DMC_WRITETHROUGH);
  assert_int_equal(fc_dmc_mode_for(FC_WRITE_THROUGH), FC_DMC_WRITETHROUGH);
  assert_int_equal(fc_dmc_mode_for(FC_WRITE_BACK), FC_DMC_WRITEBACK);
  assert_true(fc_dmc_block_sectors_valid(64));
  assert_false(fc_dmc_block_sectors_valid(96));
  assert_false(fc_dmc_block_sectors_valid(32));
  assert_int_equal(fc_dmc_table_params(&(struct fc_dmc_table){
                     "254:0", "254:1", "/dev/ubda", 64, FC_DMC_PASSTHROUGH, NULL },
                   buf, sizeof buf), 0);
  assert_string_equal(buf, "254:0 254:1 /dev/ubda 64 1 passthrough smq 0");
  assert_int_equal(fc_dmc_table_params(&(struct fc_dmc_table){
                     "254:0", "254:1", "/dev/ubda", 64, FC_DMC_WRITEBACK, "cleaner" },
                   buf, 10), -ENAMETOOLONG);
  /* cache_metadata_size --nr-blocks 32768 says 9984 sectors. */
  assert_true(fc_dmc_metadata_bytes(32768) >= 9984ull * 512);
}

static void
test_status_parse(void **state)
{
  struct fc_dmc_status st;
  /* A line seen from the 6.1 UML kernel (kernel_facts.py). */
  const char *line = "8 7/1024 64 8/64 11 3 2 1 4 8 1 1 writeback 2 "
                     "migration_threshold 2048 smq 0 rw -";

  assert_int_equal(fc_dmc_status_parse(line, &st), 0);
  assert_int_equal(st.block_sectors, 64);
  assert_int_equal(st.used_blocks, 8);
  assert_int_equal(st.total_blocks, 64);
  assert_int_equal(st.read_hits, 11);
  assert_int_equal(st.read_misses, 3);
  assert_int_equal(st.write_hits, 2);
  assert_int_equal(st.write_misses, 1);
  assert_int_equal(st.demotions, 4);
  assert_int_equal(st.promotions, 8);
  assert_int_equal(st.dirty_blocks, 1);
  assert_int_equal(st.mode, FC_DMC_WRITEBACK);
  assert_string_equal(st.policy, "smq");
  assert_false(st.fail);
  assert_int_equal(fc_dmc_status_parse("Fail", &st), 0);
  assert_true(st.fail);
  assert_int_equal(fc_dmc_status_parse("garbage", &st), -EINVAL);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_pool_exact_accounting),
    cmocka_unit_test(test_pool_fragmented_alloc_keeps_order),
    cmocka_unit_test(test_pool_save_load_roundtrip),
    cmocka_unit_test(test_pool_load_rejects_overlap),
    cmocka_unit_test(test_cache_table_and_modes),
    cmocka_unit_test(test_status_parse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

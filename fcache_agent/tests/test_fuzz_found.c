/* Inputs the fuzzers (fuzz/) found to crash the agent or trip a sanitizer,
 * each fed to the function that owns the bug, exactly as the fuzzer found
 * it (less the harness's own selector byte).  Every test here failed (a
 * sanitizer report, or a wrong result) before the fix its comment names. */
#include "testutil.h"

#include "dmcache/dm_xml.h"
#include "origin/origin.h"
#include "ucache/cachedev.h"
#include "ucache/metadata.h"
#include "ucache/ucache.h"

static char dir[256];

static const char *
file_with(const char *name, const void *data, size_t len)
{
  static char path[512];
  FILE *f;

  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  fclose(f);
  return path;
}

/* fuzz_dm_xml: a cache dump with two <superblock> lines.  The second
 * replaced the map without resetting its count: the first map leaked (what
 * LeakSanitizer reported for this input, which the parser then refused
 * anyway) and mappings after it were written past the end of the new one
 * (the next test).  Fixed in dm_xml.c by refusing a second superblock. */
static const uint8_t two_superblocks[] = {
  0x3c, 0x73, 0x75, 0x70, 0x65, 0x72, 0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x20,
  0x75, 0x75, 0x69, 0x64, 0x3d, 0x22, 0x22, 0x20, 0x62, 0x6c, 0x6f, 0x63,
  0x6b, 0x5f, 0x73, 0x69, 0x7a, 0x65, 0x3d, 0x22, 0x31, 0x32, 0x38, 0x22,
  0x20, 0x6e, 0x72, 0x5f, 0x63, 0x61, 0x63, 0x68, 0x65, 0x5f, 0x62, 0x6c,
  0x6f, 0x63, 0x6b, 0x73, 0x3d, 0x22, 0x34, 0x22, 0x20, 0x70, 0x6f, 0x6c,
  0x69, 0x63, 0x79, 0x00, 0xff, 0x20, 0x6f, 0x72, 0x69, 0x67, 0x69, 0x6e,
  0x5f, 0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x3d, 0x22, 0x39, 0x22, 0x20, 0x64,
  0x69, 0x72, 0x74, 0x79, 0x3d, 0x22, 0x66, 0x61, 0x6c, 0x73, 0x65, 0x22,
  0x2f, 0x3e, 0x0a, 0x20, 0x20, 0x3c, 0x2f, 0x6d, 0x61, 0x70, 0x70, 0x69,
  0x6e, 0x67, 0x73, 0x3e, 0x0a, 0x20, 0x20, 0x3c, 0x3c, 0x73, 0x75, 0x70,
  0x65, 0x72, 0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x20, 0x75, 0x75, 0x69, 0x64,
  0x3d, 0x22, 0x22, 0x20, 0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x5f, 0x73, 0x69,
  0x7a, 0x65, 0x3d, 0x22, 0x31, 0x32, 0x38, 0x22, 0x20, 0x6e, 0x72, 0x5f,
  0x63, 0x61, 0x63, 0x68, 0x65, 0x5f, 0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x73,
  0x3d, 0x22, 0x34, 0x22, 0x20, 0x70, 0x6f, 0x6c, 0x69, 0x63, 0x79, 0x00,
  0xff, 0x00, 0x6f, 0x63, 0x6b, 0x3d, 0x22, 0x32, 0x22, 0x20, 0x6f, 0x72,
  0x69, 0x67, 0x69, 0x6e, 0x5f, 0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x3d, 0x22,
  0x39, 0x22, 0x20, 0x64, 0x69, 0x72, 0x74, 0x79, 0x3d, 0x22, 0x66, 0x61,
  0x6c, 0x73, 0x65, 0x22, 0x2f, 0x3e, 0x0a, 0x20, 0x20, 0x3c, 0x2f, 0x6d,
  0x61, 0x70, 0x70, 0x69, 0x6e, 0x68, 0x69, 0x6e, 0x74, 0x73, 0x3e, 0x0a,
  0x20, 0x20, 0x20, 0x20, 0x3c, 0x68, 0x69, 0x6e, 0x74, 0x20, 0x63, 0x61,
  0x63, 0x68, 0x65, 0x5f, 0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x3d, 0x74, 0x72,
  0x75, 0x65, 0x64, 0x61, 0x74, 0x61, 0x74, 0x72, 0x75, 0x65, 0x64, 0x61,
  0x74, 0x61, 0x3d, 0x22, 0x50, 0x77, 0x01, 0x41, 0x41, 0x41, 0x3d, 0x3d,
  0x22, 0x20, 0x20, 0x0a, 0x20, 0x20, 0x20, 0x20, 0x3c, 0x68, 0x69, 0x6e,
  0x74, 0x00,
};

static void
test_dm_xml_two_superblocks(void **state)
{
  struct fc_dmc_dump d;
  char err[256];

  assert_int_equal(fc_dmc_xml_read(file_with("fuzz.xml", two_superblocks,
                                             sizeof two_superblocks),
                                   &d, err, sizeof err), -EINVAL);
  assert_null(d.map);
  assert_int_equal(d.n, 0);
}

/* The same bug in its plainest form: two mappings under a superblock of
 * two blocks, then a superblock of one block and a mapping, which landed
 * in map[2] of a map of 2 entries. */
static void
test_dm_xml_smaller_second_superblock(void **state)
{
  static const char text[] =
    "<superblock block_size=\"8\" nr_cache_blocks=\"2\">\n"
    "<mapping cache_block=\"0\" origin_block=\"1\" dirty=\"true\"/>\n"
    "<mapping cache_block=\"1\" origin_block=\"2\" dirty=\"true\"/>\n"
    "<superblock block_size=\"8\" nr_cache_blocks=\"1\">\n"
    "<mapping cache_block=\"0\" origin_block=\"3\" dirty=\"true\"/>\n";
  struct fc_dmc_dump d;
  char err[256];

  assert_int_equal(fc_dmc_xml_read(file_with("two.xml", text, strlen(text)),
                                   &d, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "line 4"));
}

/* fuzz_dm_xml: a superblock claiming 3,170,187,183 cache blocks made the
 * parser allocate a map of that many entries before reading one mapping:
 * libFuzzer's out-of-memory.  Refused now, with the reason. */
static void
test_dm_xml_huge_superblock(void **state)
{
  static const char text[] =
    "<superblock uuid=\"\" block_size=\"64\" nr_cache_blocks=\"3170187183\" "
    "policy=\"smq\" hint_width=\"4\">\n"
    "<mapping cache_block=\"0\" origin_block=\"3\" dirty=\"true\"/>\n"
    "</superblock>\n";
  struct fc_dmc_dump d;
  char err[256];

  assert_int_equal(fc_dmc_xml_read(file_with("huge.xml", text, strlen(text)),
                                   &d, err, sizeof err), -E2BIG);
  assert_non_null(strstr(err, "nr_cache_blocks 3170187183"));
}

/* fuzz_xfer_source: a destination's FETCH of block 0xffffffffffffffff
 * (the input's second frame; the first gave credit).  The source's sender
 * read the block, and taking its stripe lock looped forever in
 * lock_stripes(), whose "b <= last" cannot end at last = UINT64_MAX; the
 * migration then never stopped.  Fixed in ucache/stripes.c.  The same
 * lock is taken for the other block numbers a peer chooses (an ACK's
 * forget); both must now return at once. */
static void
test_ucache_block_2_64_minus_1(void **state)
{
  static const char prefixes[1][FC_PATH_MAX] = { "/" };
  struct fc_origin_policy pol = { .prefixes = prefixes, .n_prefixes = 1,
                                  .state_dir = "/nonexistent",
                                  .cache_path = "/nonexistent" };
  struct fc_ucache_params p = { .quota_blocks = 8, .write_policy = FC_WRITE_BACK,
                                .volume_tag = 1, .writeback_interval_ms = 1000,
                                .dirty_high_percent = 100 };
  static uint8_t zero[1 << 16], block[4096];
  char opath[512], cpath[512], mpath[512], err[512] = "";
  struct fc_origin *origin;
  struct fc_cachedev *dev;
  struct fc_metadata *md;
  struct fc_ucache *uc;
  bool was_clean, dirty = false;

  tu_path(opath, sizeof opath, dir, "origin");
  tu_path(cpath, sizeof cpath, dir, "cache");
  tu_path(mpath, sizeof mpath, dir, "cache.meta");
  tu_write_file(opath, zero, sizeof zero);
  assert_int_equal(fc_origin_open_path(opath, &pol, &origin, err, sizeof err), 0);
  assert_int_equal(fc_cachedev_open(cpath, 16 * 4096, 4096, &dev, err, sizeof err), 0);
  assert_int_equal(fc_md_open(mpath, 4096, dev->nr_blocks, &was_clean, &md, err,
                              sizeof err), 0);
  assert_int_equal(fc_cachedev_reserve(dev, p.quota_blocks), 0);
  assert_int_equal(fc_ucache_create(dev, md, origin, &p, &uc), 0);

  assert_int_equal(fc_ucache_migr_read_block(uc, to_oblock(UINT64_MAX), block,
                                             &dirty), -ENOENT);
  assert_int_equal(fc_ucache_migr_forget(uc, to_oblock(UINT64_MAX)), 0);

  fc_ucache_destroy(uc);
  fc_md_close(md);
  fc_cachedev_close(dev);
  fc_origin_close(origin);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_dm_xml_two_superblocks),
    cmocka_unit_test(test_dm_xml_smaller_second_superblock),
    cmocka_unit_test(test_dm_xml_huge_superblock),
    cmocka_unit_test(test_ucache_block_2_64_minus_1),
  };
  int failed;

  tu_mkdtemp(dir, sizeof dir);
  /* Each test in its own process with a time limit: the bugs found
   * include a hang, which must fail its test, not stall `make check`. */
  failed = tu_run_isolated("fuzz_found", tests, sizeof tests / sizeof tests[0], 30);
  tu_rmrf(dir);
  return failed ? 1 : 0;
}

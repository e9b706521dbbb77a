/* SPDX-License-Identifier: Apache-2.0 */
/* Inputs the fuzzers (fuzz/) found to crash the agent or trip a sanitizer,
 * each fed to the function that owns the bug, exactly as the fuzzer found
 * it (less the harness's own selector byte).  Every test here failed (a
 * sanitizer report, or a wrong result) before the fix its comment names. */
#include "testutil.h"

#include <math.h>
#include <time.h>

#include "alloc/predict.h"
#include "common/config.h"
#include "common/crc32c.h"
#include "dmcache/dm_xml.h"
#include "dmcache/flash_pool.h"
#include "engine/engine.h"
#include "origin/origin.h"
#include "origin/origin_move.h"
#include "replay/replay.h"
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

/* The first request of a csv trace (fcache-replay), or its error. */
static int
first_csv_request(const char *text, struct fc_trace_req *req, char *err, size_t len)
{
  struct fc_trace *t;
  int r;

  assert_int_equal(fc_trace_open(file_with("t.csv", text, strlen(text)),
                                 FC_TRACE_CSV, 4096, 0, &t), 0);
  r = fc_trace_next(t, req);
  snprintf(err, len, "%s", fc_trace_error(t));
  fc_trace_close(t);
  return r;
}

/* fuzz_trace: a csv line of length 2^64-1 bytes was a request of 2^52
 * blocks, which the replay visited one by one (years; 1.9 GB of RSS for
 * the demand tracker before it was stopped).  Fixed in trace_csv.c: a
 * length over FC_TRACE_REQUEST_MAX is refused with the line. */
static void
test_trace_csv_huge_length(void **state)
{
  struct fc_trace_req req;
  char err[600];

  assert_int_equal(first_csv_request("0,v,R,0,18446744073709551615\n", &req, err,
                                     sizeof err), -EINVAL);
  assert_non_null(strstr(err, ":1: length 18446744073709551615 bytes is more "
                              "than a request can be"));
  assert_int_equal(first_csv_request("0,v,R,0,67108864\n", &req, err, sizeof err), 1);
  assert_int_equal(req.nr_blocks, 16384);
}

/* fuzz_trace: a volume id of bytes that are not UTF-8 ("vo\xf0\xf0\xf0l-b")
 * was replayed, and the JSON report then failed (jansson refuses the key):
 * fcache-replay said "out of memory" after the whole replay.  Fixed in
 * trace_csv.c: such an id is refused at its line; so are control
 * characters. */
static void
test_trace_csv_volume_not_text(void **state)
{
  struct fc_trace_req req;
  char err[600];

  assert_int_equal(first_csv_request("1.25,vo\xf0\xf0\xf0l-b,read,512,1024\n", &req,
                                     err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "volume id is not text"));
  assert_int_equal(first_csv_request("1,a\x1b[2J,R,0,1\n", &req, err, sizeof err),
                   -EINVAL);
  assert_int_equal(first_csv_request("1,caf\xc3\xa9,R,0,1\n", &req, err, sizeof err), 1);
}

static int
replay_csv(const char *text, double window_s, char *err, size_t len)
{
  struct fc_replay_result *res = NULL;
  struct fc_replay_config c;
  struct fc_trace *t;
  int r;

  fc_replay_config_default(&c);
  c.cache_blocks = 64;
  c.volume_limit_blocks = 16;
  c.window_s = window_s;
  assert_int_equal(fc_trace_open(file_with("t.csv", text, strlen(text)),
                                 FC_TRACE_CSV, 4096, 0, &t), 0);
  r = fc_replay_run(&c, t, &res, err, len);
  fc_replay_result_free(res);
  fc_trace_close(t);
  return r;
}

static double
now_s(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* fuzz_trace: a time of 1e300 after 0 with one-second windows closed a
 * million windows (13 s under ASan) before it was refused as a jump; and a
 * time of 1e20, where adding a second leaves a double as it is, made every
 * later request close windows that never ended.  Fixed in sim.c: the jump
 * is measured before a window closes, and a time too large for its
 * windows is refused. */
static void
test_trace_time_jumps(void **state)
{
  char err[600];
  double t0 = now_s();

  assert_int_equal(replay_csv("0,v,R,0,4096\n1e300,v,R,0,4096\n", 1, err, sizeof err),
                   -EINVAL);
  assert_non_null(strstr(err, ":2: time 1.0000000000000001e+300 is more than "
                              "100000 windows of 1 s after the trace's first"));
  assert_int_equal(replay_csv("1e20,v,R,0,4096\n1e20,v,R,0,4096\n", 1, err,
                              sizeof err), -EINVAL);
  assert_non_null(strstr(err, ":1: time 1e+20 is too large for windows of 1 s"));
  assert_true(now_s() - t0 < 1.0);
  /* A jump within the bound is still a long idle stretch, replayed. */
  assert_int_equal(replay_csv("0,v,R,0,4096\n1000,v,R,0,4096\n", 1, err, sizeof err), 0);
}

/* fuzz_alloc_state: a volume's .alloc with a history value of 1e308 was
 * fed to the outlier filter and the predictor as it was: the prediction
 * of ~1e308 blocks was converted to an integer (undefined: UBSan in
 * ucache/allocator.c's shares) and volume-show reported INT64_MIN bytes.
 * Fixed in alloc/: filter and predictors take and give demands in
 * [0, FC_DEMAND_MAX].  Fed here as allocator.c's observe() feeds them. */
static void
test_alloc_history_1e308(void **state)
{
  static const double hist[] = { 1e308, 1.8e19, 1e15 };
  struct fc_outlier_filter f;
  struct fc_predictor p;
  double pred = 0;

  for (int kind = FC_PRED_LAST; kind <= FC_PRED_DEXP_SELF; kind++) {
    assert_int_equal(fc_predictor_init(&p, (enum fc_predictor_kind)kind, 0.3, 0.3), 0);
    assert_int_equal(fc_outlier_filter_init(&f, 20, 5.0), 0);
    for (size_t i = 0; i < sizeof hist / sizeof hist[0]; i++) {
      pred = fc_predictor_observe(&p, fc_outlier_filter_apply(&f, hist[i], NULL));
      assert_true(pred >= 0 && pred <= FC_DEMAND_MAX);
    }
    /* What volume-show makes of it at 4 KiB blocks: a positive int64. */
    assert_true(llround(pred * 4096) > 0);
  }
}

/* fuzz_move_log: a recovery log whose header gives the source URI a
 * length of 255 but holds "/fuzz/a" and NULs was taken for a log of
 * "/fuzz/a" (read up to the NUL) and its records written over that
 * origin.  Fixed in move_log.c: a URI with a NUL inside its length is no
 * header the agent wrote. */
static void
test_move_log_nul_in_uri(void **state)
{
  static const char prefixes[1][FC_PATH_MAX] = { "/" };
  struct fc_origin_policy pol = { .prefixes = prefixes, .n_prefixes = 1,
                                  .state_dir = "/nonexistent",
                                  .cache_path = "/nonexistent" };
  static uint8_t log[2072 + 24 + 16], zero[65536], got[16];
  struct { uint32_t magic, len; uint64_t off; uint32_t crc, pad; } rec =
    { .magic = 0x4d52, .len = 16, .off = 0 };
  uint64_t magic = 0x46434d4f56454c47ull;
  uint32_t hdr[4] = { 1, 2, 255, 9 };   /* version, scheme, uri_len, b_len */
  struct fc_move_recovered out;
  char apath[512], lpath[512], err[1024];
  struct fc_origin *a;

  memcpy(log, &magic, 8);
  memcpy(log + 8, hdr, sizeof hdr);
  memcpy(log + 24, "/fuzz/a", 7);
  memcpy(log + 1048, "nbd://b/x", 9);
  memset(log + 2072 + 24, 'D', 16);
  rec.crc = crc32c(crc32c(crc32c(0, &rec.len, 4), &rec.off, 8), log + 2072 + 24, 16);
  memcpy(log + 2072, &rec, sizeof rec);
  snprintf(lpath, sizeof lpath, "%s", file_with("vol.movelog", log, sizeof log));
  tu_path(apath, sizeof apath, dir, "a.img");
  tu_write_file(apath, zero, sizeof zero);
  assert_int_equal(fc_origin_open_path(apath, &pol, &a, err, sizeof err), 0);
  assert_int_equal(fc_origin_move_recover(lpath, "/fuzz/a", a, &out, err, sizeof err), 0);
  assert_false(out.found);
  fc_origin_close(a);
  tu_read_file(apath, got, sizeof got, 0);
  assert_memory_equal(got, zero, sizeof got);
}

/* fuzz_flash_pool: the line " #41#t 4 4" (a blank first) loaded as a
 * segment of owner "#41#t" (sscanf skips the blank), which the next save
 * wrote as "#41#t 4 4", a comment to the load after it: the segment was
 * lost and its extents free for another volume.  Fixed in flash_pool.c: a
 * '#' after blanks starts a comment too. */
static void
test_flash_pool_comment_after_blank(void **state)
{
  static const char text[] = "# f 1 of 1\n #41#t 4 4\nvol-1/data 8 2\n";
  struct fc_flash_pool p, q;
  char err[1024], path[512];

  fc_flash_pool_init(&p, 64ull * FC_FLASH_EXTENT);
  assert_int_equal(fc_flash_pool_load(&p, file_with("pool", text, strlen(text)),
                                      err, sizeof err), 0);
  tu_path(path, sizeof path, dir, "pool.again");
  assert_int_equal(fc_flash_pool_save(&p, path, err, sizeof err), 0);
  fc_flash_pool_init(&q, 64ull * FC_FLASH_EXTENT);
  assert_int_equal(fc_flash_pool_load(&q, path, err, sizeof err), 0);
  assert_int_equal(p.nr_segs, 1);
  assert_int_equal(q.nr_segs, p.nr_segs);
  fc_flash_pool_fini(&p);
  fc_flash_pool_fini(&q);
}

/* A volume-attach with cache_size "18446744073709551615" (2^64 - 1; a
 * control client's string is parsed by fc_parse_size): both
 * engines round the size up to their block, which wrapped to 0, and the
 * volume was attached with a cache_size of 0 that its state file could
 * not load again at the next start.  Fixed in engine/host.c: the size is
 * checked before any engine rounds it. */
static void
test_attach_cache_size_2_64_minus_1(void **state)
{
  struct fc_attach_request req = { .volume_id = "vol-1", .origin = "/dev/x" };
  char err[512];

  assert_int_equal(fc_parse_size("18446744073709551615", &req.cache_size), 0);
  assert_true(req.cache_size == UINT64_MAX);
  assert_int_equal(fc_attach_request_check(&req, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "cache_size 18446744073709551615 bytes is more"));
  req.cache_size = 1ull << 62;
  assert_int_equal(fc_attach_request_check(&req, err, sizeof err), 0);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_dm_xml_two_superblocks),
    cmocka_unit_test(test_dm_xml_smaller_second_superblock),
    cmocka_unit_test(test_dm_xml_huge_superblock),
    cmocka_unit_test(test_ucache_block_2_64_minus_1),
    cmocka_unit_test(test_trace_csv_huge_length),
    cmocka_unit_test(test_trace_csv_volume_not_text),
    cmocka_unit_test(test_trace_time_jumps),
    cmocka_unit_test(test_alloc_history_1e308),
    cmocka_unit_test(test_move_log_nul_in_uri),
    cmocka_unit_test(test_flash_pool_comment_after_blank),
    cmocka_unit_test(test_attach_cache_size_2_64_minus_1),
  };
  int failed;

  tu_mkdtemp(dir, sizeof dir);
  /* Each test in its own process with a time limit: the bugs found
   * include a hang, which must fail its test, not stall `make check`. */
  failed = tu_run_isolated("fuzz_found", tests, sizeof tests / sizeof tests[0], 30);
  tu_rmrf(dir);
  return failed ? 1 : 0;
}

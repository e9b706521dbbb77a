/* SPDX-License-Identifier: Apache-2.0 */
/* ucache's block status (ucache_status.c) over a sparse file origin: the
 * origin's holes come through, a dirty block over a hole is data, an
 * answer never claims a hole it cannot be sure of (a failing origin, a
 * migration), and REQ_ONE-sized answers stop at the first change.  Also
 * the prefetch (NBD_CMD_CACHE) filling the cache. */
#include "testutil.h"

#include <fcntl.h>
#include <linux/falloc.h>

#include "common/log.h"
#include "origin/origin.h"
#include "ucache/cachedev.h"
#include "ucache/metadata.h"
#include "ucache/ucache.h"

#define BS 4096u
#define KiB 1024u
#define SIZE (1024u * KiB)
#define TAG 0x5eed0000b10cull
#define HOLE_START (256u * KiB)
#define HOLE_END (512u * KiB)
#define H (FC_EXTENT_HOLE | FC_EXTENT_ZERO)

/* A file origin whose block status can be made to fail. */
struct test_origin {
  struct fc_origin base;
  struct fc_origin *inner;
  int fail_bs;
  /* If set, the map the origin tells, from offset 0 on, in place of the
   * file's (which a filesystem keeps in whole pages). */
  const struct fc_origin_extent *script;
  uint32_t nscript;
};

static struct test_origin *to(struct fc_origin *o)
{
  return (struct test_origin *)o;
}

static int t_pread(struct fc_origin *o, void *buf, uint32_t n, uint64_t off)
{
  return fc_origin_pread(to(o)->inner, buf, n, off);
}

static int t_pwrite(struct fc_origin *o, const void *buf, uint32_t n,
                    uint64_t off, bool fua)
{
  return fc_origin_pwrite(to(o)->inner, buf, n, off, fua);
}

static int t_flush(struct fc_origin *o)
{
  return fc_origin_flush(to(o)->inner);
}

static int t_trim(struct fc_origin *o, uint32_t n, uint64_t off)
{
  return fc_origin_trim(to(o)->inner, n, off);
}

static int scripted_bs(const struct test_origin *t, uint32_t n, uint64_t off,
                       struct fc_origin_extent *ext, uint32_t max)
{
  uint64_t start = 0, end = off + n;
  uint32_t got = 0;

  for (uint32_t i = 0; i < t->nscript && got < max && start < end; i++) {
    uint64_t e = start + t->script[i].length;

    if (e > off) {
      uint64_t s = start > off ? start : off, stop = e < end ? e : end;

      ext[got++] = (struct fc_origin_extent){
        .length = (uint32_t)(stop - s), .flags = t->script[i].flags };
    }
    start = e;
  }
  return (int)got;
}

static int t_bs(struct fc_origin *o, uint32_t n, uint64_t off,
                struct fc_origin_extent *ext, uint32_t max)
{
  if (to(o)->fail_bs)
    return to(o)->fail_bs;
  if (to(o)->script)
    return scripted_bs(to(o), n, off, ext, max);
  return fc_origin_block_status(to(o)->inner, n, off, ext, max);
}

static void t_close(struct fc_origin *o)
{
  fc_origin_close(to(o)->inner);
  free(o);
}

static const struct fc_origin_ops t_ops = {
  .pread = t_pread, .pwrite = t_pwrite, .flush = t_flush, .trim = t_trim,
  .block_status = t_bs, .close = t_close,
};

struct env {
  char dir[256], opath[512], cpath[512], mpath[512];
  struct test_origin *origin;
  struct fc_cachedev *dev;
  struct fc_metadata *md;
  struct fc_ucache *uc;
};

static struct env E;
static unsigned char buf[SIZE];

/* A volume over the origin, cache blocks of `bs` bytes. */
static void env_open_bs(enum fc_write_policy policy, uint32_t bs)
{
  static const char prefixes[1][FC_PATH_MAX] = { "/" };
  struct fc_origin_policy pol = { .prefixes = prefixes, .n_prefixes = 1,
                                  .state_dir = "/nonexistent",
                                  .cache_path = "/nonexistent" };
  struct fc_ucache_params p = {
    .quota_blocks = 128, .write_policy = policy, .admission = FC_ADMIT_ALL,
    .volume_tag = TAG, .writeback_interval_ms = 100000,
    .dirty_high_percent = 100,
  };
  char err[512] = "";
  bool was_clean;
  uint64_t seed = 42;
  int fd;

  tu_mkdtemp(E.dir, sizeof E.dir);
  tu_path(E.opath, sizeof E.opath, E.dir, "origin");
  tu_path(E.cpath, sizeof E.cpath, E.dir, "cache");
  tu_path(E.mpath, sizeof E.mpath, E.dir, "cache.meta");
  tu_fill(buf, SIZE, &seed);
  tu_write_file(E.opath, buf, SIZE);
  /* The origin's one hole. */
  fd = open(E.opath, O_RDWR);
  assert_true(fd >= 0);
  assert_int_equal(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                             HOLE_START, HOLE_END - HOLE_START), 0);
  close(fd);
  E.origin = calloc(1, sizeof *E.origin);
  assert_non_null(E.origin);
  assert_int_equal(fc_origin_open_path(E.opath, &pol, &E.origin->inner, err,
                                       sizeof err), 0);
  E.origin->base = (struct fc_origin){ .ops = &t_ops,
                                       .size = E.origin->inner->size,
                                       .can_trim = true };
  assert_int_equal(fc_cachedev_open(E.cpath, 256 * bs, bs, &E.dev, err,
                                    sizeof err), 0);
  assert_int_equal(fc_md_open(E.mpath, bs, E.dev->nr_blocks, &was_clean,
                              &E.md, err, sizeof err), 0);
  assert_int_equal(fc_cachedev_reserve(E.dev, p.quota_blocks), 0);
  assert_int_equal(fc_ucache_create(E.dev, E.md, &E.origin->base, &p, &E.uc),
                   0);
}

static void env_open(enum fc_write_policy policy)
{
  env_open_bs(policy, BS);
}

static int teardown(void **state)
{
  if (E.uc)
    fc_ucache_destroy(E.uc);
  if (E.md)
    fc_md_close(E.md);
  if (E.dev)
    fc_cachedev_close(E.dev);
  if (E.origin)
    fc_origin_close(&E.origin->base);
  tu_rmrf(E.dir);
  memset(&E, 0, sizeof E);
  return 0;
}

/* The answer for [off, off+count) with room for max extents must be
 * exactly the `n` (length, flags) pairs that follow. */
static void expect(uint64_t off, uint32_t count, uint32_t max, int n, ...)
{
  struct fc_extent ext[64];
  va_list ap;
  int got = fc_ucache_io_ops.block_status(E.uc, count, off, ext, max);

  assert_int_equal(got, n);
  va_start(ap, n);
  for (int i = 0; i < n; i++) {
    uint32_t len = va_arg(ap, uint32_t), flags = va_arg(ap, uint32_t);

    assert_int_equal(ext[i].length, len);
    assert_int_equal(ext[i].flags, flags);
  }
  va_end(ap);
}

static void write_at(uint64_t off, uint32_t len)
{
  memset(buf, 0xab, len);
  assert_int_equal(fc_ucache_io_ops.pwrite(E.uc, buf, len, off, false), 0);
}

static void test_origin_holes(void **state)
{
  env_open(FC_WRITE_THROUGH);
  expect(0, SIZE, 64, 3, HOLE_START, 0, HOLE_END - HOLE_START, H,
         SIZE - HOLE_END, 0);
  /* From an offset inside a block; a count inside one. */
  expect(HOLE_START + 512, 3 * 512, 64, 1, 3 * 512, H);
  expect(HOLE_START - 512, 1024, 64, 2, 512, 0, 512, H);
  /* Room for one: the first extent, no longer than asked. */
  expect(0, SIZE, 1, 1, HOLE_START, 0);
  expect(HOLE_START, SIZE - HOLE_START, 1, 1, HOLE_END - HOLE_START, H);
  /* Clean cached blocks change nothing: they are the origin's data. */
  assert_int_equal(fc_ucache_io_ops.pread(E.uc, buf, 64 * KiB,
                                          HOLE_START - 32 * KiB), 0);
  expect(0, SIZE, 64, 3, HOLE_START, 0, HOLE_END - HOLE_START, H,
         SIZE - HOLE_END, 0);
}

static void test_dirty_over_hole_is_data(void **state)
{
  env_open(FC_WRITE_BACK);
  write_at(HOLE_START + 44 * KiB, 8 * KiB);
  assert_int_equal(fc_ucache_dirty(E.uc), 2);
  expect(HOLE_START, HOLE_END - HOLE_START, 64, 3, 44 * KiB, H, 8 * KiB, 0,
         HOLE_END - HOLE_START - 52 * KiB, H);
  expect(HOLE_START, HOLE_END - HOLE_START, 1, 1, 44 * KiB, H);
  expect(HOLE_START + 44 * KiB, KiB, 1, 1, KiB, 0);
  /* Written back: the origin has the data now, the answer is the same. */
  assert_int_equal(fc_ucache_writeback_all(E.uc), 0);
  assert_int_equal(fc_ucache_dirty(E.uc), 0);
  expect(HOLE_START, HOLE_END - HOLE_START, 64, 3, 44 * KiB, H, 8 * KiB, 0,
         HOLE_END - HOLE_START - 52 * KiB, H);
}

/* Cache blocks larger than the origin's: the origin's map comes through
 * to the sector, not rounded out to whole cache blocks, except where a
 * block is dirty. */
static void test_origin_map_finer_than_a_block(void **state)
{
  int fd;

  env_open_bs(FC_WRITE_BACK, 64 * KiB);
  /* A 4 KiB hole inside the first 64 KiB block, data around it. */
  fd = open(E.opath, O_RDWR);
  assert_true(fd >= 0);
  assert_int_equal(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                             8 * KiB, 4 * KiB), 0);
  close(fd);
  expect(0, 64 * KiB, 64, 3, 8 * KiB, 0, 4 * KiB, H, 52 * KiB, 0);
  expect(HOLE_START, 320 * KiB, 64, 2, HOLE_END - HOLE_START, H,
         64 * KiB, 0);
  /* Cached clean: the same; dirty: the whole block is data. */
  assert_int_equal(fc_ucache_io_ops.pread(E.uc, buf, 64 * KiB, 0), 0);
  expect(0, 64 * KiB, 64, 3, 8 * KiB, 0, 4 * KiB, H, 52 * KiB, 0);
  write_at(HOLE_START + 64 * KiB, 64 * KiB);
  expect(HOLE_START, 256 * KiB, 64, 3, 64 * KiB, H, 64 * KiB, 0,
         128 * KiB, H);
  /* A count that ends inside a sector-aligned piece, and REQ_ONE. */
  expect(8 * KiB, 2 * KiB, 64, 1, 2 * KiB, H);
  expect(0, 64 * KiB, 1, 1, 8 * KiB, 0);
}

/* An origin that describes its map in pieces smaller than a sector (an
 * NBD server may): each sector is a hole only if all of it is, so every
 * extent but the export's last is whole sectors. */
static void test_origin_map_in_sectors(void **state)
{
  static const struct fc_origin_extent script[] = {
    { 1000, 0 }, { 3096, H }, { 512, 0 }, { 100, H }, { 412, H },
    { SIZE - 5120, 0 },
  };

  env_open_bs(FC_WRITE_THROUGH, 64 * KiB);
  E.origin->script = script;
  E.origin->nscript = sizeof script / sizeof script[0];
  /* 0-1000 data, so sector 1 (512-1024) is data; 1024-4096 a hole;
   * 4096-4608 data; 4608-5120 a hole in two pieces. */
  expect(0, 8 * KiB, 64, 5, 1024, 0, 3072, H, 512, 0, 512, H, 3072, 0);
  expect(512, 1024, 64, 2, 512, 0, 512, H);
  expect(4608, 512, 1, 1, 512, H);
}

static void test_unsure_is_data(void **state)
{
  env_open(FC_WRITE_BACK);
  /* The origin cannot answer. */
  E.origin->fail_bs = -EIO;
  expect(0, SIZE, 64, 1, SIZE, 0);
  E.origin->fail_bs = 0;
  /* A migration (here a frozen source): the cache may not know. */
  fc_ucache_migr_freeze(E.uc, true);
  expect(0, SIZE, 64, 1, SIZE, 0);
  fc_ucache_migr_freeze(E.uc, false);
  expect(HOLE_START, 4096, 64, 1, 4096, H);
}

static void test_cache_prefetches(void **state)
{
  struct fc_ucache_info info;

  env_open(FC_WRITE_THROUGH);
  assert_int_equal(fc_ucache_io_ops.cache(E.uc, 64 * KiB, 128 * KiB), 0);
  fc_ucache_info(E.uc, &info);
  assert_int_equal(info.cached_blocks, 16);
  assert_int_equal(fc_ucache_io_ops.cache(E.uc, 256 * KiB, 512 * KiB), 0);
  fc_ucache_info(E.uc, &info);
  assert_int_equal(info.cached_blocks, 16 + 64);
  /* The data is the origin's, now read from the cache. */
  assert_int_equal(fc_ucache_io_ops.pread(E.uc, buf, 4096, 128 * KiB), 0);
  tu_read_file(E.opath, buf + 4096, 4096, 128 * KiB);
  assert_memory_equal(buf, buf + 4096, 4096);
}

int main(void)
{
#define T(fn) cmocka_unit_test_teardown(fn, teardown)
  const struct CMUnitTest tests[] = {
    T(test_origin_holes),
    T(test_dirty_over_hole_is_data),
    T(test_origin_map_finer_than_a_block),
    T(test_origin_map_in_sectors),
    T(test_unsure_is_data),
    T(test_cache_prefetches),
  };
#undef T
  fc_log_setup(FC_LOG_STDERR, FC_LOG_ERROR);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

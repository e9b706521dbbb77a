/* SPDX-License-Identifier: Apache-2.0 */
/* Cache device: creating and allocating the cache file, quota
 * reservations, the free list (alloc, free, claim + rebuild), data I/O at
 * offsets inside a block, and the error messages of the ways opening it
 * can fail. */
#include "testutil.h"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/resource.h>

#include "ucache/cachedev.h"
#include "common/log.h"

#define BS 4096u
#define NB 64u

struct fx {
  char dir[256];
  char path[512];
  struct fc_cachedev *dev;
};

static int
setup(void **state)
{
  struct fx *f = calloc(1, sizeof *f);
  char err[256] = "";

  assert_non_null(f);
  tu_mkdtemp(f->dir, sizeof f->dir);
  tu_path(f->path, sizeof f->path, f->dir, "cache");
  assert_int_equal(fc_cachedev_open(f->path, (uint64_t)NB * BS, BS, &f->dev,
                                    err, sizeof err), 0);
  *state = f;
  return 0;
}

static int
teardown(void **state)
{
  struct fx *f = *state;

  fc_cachedev_close(f->dev);
  tu_rmrf(f->dir);
  free(f);
  return 0;
}

static void
test_open_creates_and_allocates(void **state)
{
  struct fx *f = *state;
  struct stat st;

  assert_int_equal(stat(f->path, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(st.st_size, (off_t)NB * BS);
  /* Really allocated, not sparse. */
  assert_true((uint64_t)st.st_blocks * 512 >= (uint64_t)NB * BS);
  assert_int_equal(f->dev->block_size, BS);
  assert_int_equal(f->dev->nr_blocks, NB);
  assert_int_equal(f->dev->nr_free, NB);
  assert_int_equal(f->dev->reserved, 0);
  assert_int_equal(fc_cachedev_used(f->dev), 0);
  assert_true(fc_cachedev_memory(f->dev) >= NB * sizeof(struct fc_entry));
  for (uint32_t i = 0; i < NB; i++) {
    assert_int_equal(f->dev->table[i].flags, 0);
    assert_int_equal(f->dev->table[i].hash_next, CBLOCK_NONE);
    assert_int_equal(f->dev->table[i].lru_prev, CBLOCK_NONE);
    assert_int_equal(f->dev->table[i].lru_next, CBLOCK_NONE);
  }
}

/* Reopening an existing, larger file keeps its contents. */
static void
test_reopen_keeps_data(void **state)
{
  struct fx *f = *state;
  char buf[BS], back[BS], err[256] = "";
  uint64_t seed = 3;
  struct fc_cachedev *dev2;

  tu_fill(buf, sizeof buf, &seed);
  assert_int_equal(fc_cachedev_write(f->dev, to_cblock(7), 0, buf, BS), 0);
  fc_cachedev_close(f->dev);
  f->dev = NULL;
  assert_int_equal(fc_cachedev_open(f->path, (uint64_t)NB / 2 * BS, BS, &dev2,
                                    err, sizeof err), 0);
  assert_int_equal(dev2->nr_blocks, NB / 2);
  assert_int_equal(fc_cachedev_read(dev2, to_cblock(7), 0, back, BS), 0);
  assert_memory_equal(buf, back, BS);
  f->dev = dev2;
}

static void
test_reserve_unreserve(void **state)
{
  struct fx *f = *state;

  assert_int_equal(fc_cachedev_reserve(f->dev, 40), 0);
  assert_int_equal(fc_cachedev_reserve(f->dev, 25), -ENOSPC);
  assert_int_equal(f->dev->reserved, 40);
  assert_int_equal(fc_cachedev_reserve(f->dev, 24), 0);
  assert_int_equal(f->dev->reserved, NB);
  assert_int_equal(fc_cachedev_reserve(f->dev, 1), -ENOSPC);
  assert_int_equal(fc_cachedev_reserve(f->dev, 0), 0);
  fc_cachedev_unreserve(f->dev, 24);
  assert_int_equal(f->dev->reserved, 40);
  assert_int_equal(fc_cachedev_reserve(f->dev, 24), 0);
  fc_cachedev_unreserve(f->dev, NB);
  assert_int_equal(f->dev->reserved, 0);
  assert_int_equal(fc_cachedev_reserve(f->dev, NB + 1), -ENOSPC);
  assert_int_equal(fc_cachedev_reserve(f->dev, UINT32_MAX), -ENOSPC);
  assert_int_equal(f->dev->reserved, 0);
}

static void
test_alloc_until_enospc(void **state)
{
  struct fx *f = *state;
  bool seen[NB] = { false };
  cblock_t cb;

  for (uint32_t i = 0; i < NB; i++) {
    assert_int_equal(fc_cachedev_alloc(f->dev, &cb), 0);
    assert_true(cb.n < NB);
    assert_false(seen[cb.n]);
    seen[cb.n] = true;
    /* A young cache file fills from block 0 upwards. */
    assert_int_equal(cb.n, i);
    assert_int_equal(f->dev->table[cb.n].flags, FC_ENTRY_ALLOCATED);
    assert_int_equal(fc_cachedev_used(f->dev), i + 1);
  }
  cb = to_cblock(12345);
  assert_int_equal(fc_cachedev_alloc(f->dev, &cb), -ENOSPC);
  assert_int_equal(cb.n, 12345);          /* untouched on failure */
  assert_int_equal(fc_cachedev_used(f->dev), NB);
}

static void
test_free_and_realloc(void **state)
{
  struct fx *f = *state;
  cblock_t cb;

  for (uint32_t i = 0; i < NB; i++)
    assert_int_equal(fc_cachedev_alloc(f->dev, &cb), 0);
  f->dev->table[10].flags |= FC_ENTRY_VALID | FC_ENTRY_DIRTY;
  f->dev->table[10].lru_next = 3;
  fc_cachedev_free(f->dev, to_cblock(10));
  assert_int_equal(f->dev->table[10].flags, 0);
  assert_int_equal(fc_cachedev_used(f->dev), NB - 1);
  assert_int_equal(fc_cachedev_alloc(f->dev, &cb), 0);
  assert_int_equal(cb.n, 10);
  assert_int_equal(f->dev->table[10].flags, FC_ENTRY_ALLOCATED);
  assert_int_equal(f->dev->table[10].lru_next, CBLOCK_NONE);
  assert_int_equal(fc_cachedev_alloc(f->dev, &cb), -ENOSPC);
}

static void
test_claim_and_rebuild_free(void **state)
{
  struct fx *f = *state;
  cblock_t cb;
  uint32_t prev = 0;

  fc_cachedev_claim(f->dev, to_cblock(0));
  fc_cachedev_claim(f->dev, to_cblock(5));
  fc_cachedev_claim(f->dev, to_cblock(NB - 1));
  fc_cachedev_rebuild_free(f->dev);
  assert_int_equal(fc_cachedev_used(f->dev), 3);
  for (uint32_t i = 0; i < NB - 3; i++) {
    assert_int_equal(fc_cachedev_alloc(f->dev, &cb), 0);
    assert_true(cb.n != 0 && cb.n != 5 && cb.n != NB - 1);
    assert_true(cb.n > prev);               /* ascending, none twice */
    prev = cb.n;
  }
  assert_int_equal(fc_cachedev_alloc(f->dev, &cb), -ENOSPC);
  /* Claimed blocks stay claimed across another rebuild; freed ones come
   * back. */
  fc_cachedev_free(f->dev, to_cblock(5));
  fc_cachedev_rebuild_free(f->dev);
  assert_int_equal(fc_cachedev_used(f->dev), NB - 1);
  assert_int_equal(fc_cachedev_alloc(f->dev, &cb), 0);
  assert_int_equal(cb.n, 5);
}

static void
test_read_write_inside_block(void **state)
{
  struct fx *f = *state;
  unsigned char data[1024], back[BS], zero[BS] = { 0 };
  uint64_t seed = 11;

  tu_fill(data, sizeof data, &seed);
  assert_int_equal(fc_cachedev_write(f->dev, to_cblock(3), 512, data, 1024), 0);
  assert_int_equal(fc_cachedev_read(f->dev, to_cblock(3), 512, back, 1024), 0);
  assert_memory_equal(back, data, 1024);
  /* Where it landed in the file, and nothing around it. */
  tu_read_file(f->path, back, BS, 3 * BS);
  assert_memory_equal(back, zero, 512);
  assert_memory_equal(back + 512, data, 1024);
  assert_memory_equal(back + 1536, zero, BS - 1536);
  tu_read_file(f->path, back, BS, 2 * BS);
  assert_memory_equal(back, zero, BS);
  tu_read_file(f->path, back, BS, 4 * BS);
  assert_memory_equal(back, zero, BS);

  /* The last 512 bytes of the last block. */
  assert_int_equal(fc_cachedev_write(f->dev, to_cblock(NB - 1), BS - 512, data, 512), 0);
  assert_int_equal(fc_cachedev_read(f->dev, to_cblock(NB - 1), BS - 512, back, 512), 0);
  assert_memory_equal(back, data, 512);
  tu_read_file(f->path, back, 512, (off_t)NB * BS - 512);
  assert_memory_equal(back, data, 512);
  assert_int_equal(fc_cachedev_sync(f->dev), 0);
}

static void
test_open_nonexistent_dir(void **state)
{
  char dir[256], path[512], err[512] = "";
  struct fc_cachedev *dev = NULL;

  tu_mkdtemp(dir, sizeof dir);
  tu_path(path, sizeof path, dir, "no/such/dir/cache");
  assert_int_equal(fc_cachedev_open(path, 16 * BS, BS, &dev, err, sizeof err), -ENOENT);
  assert_null(dev);
  assert_non_null(strstr(err, path));
  assert_non_null(strstr(err, strerror(ENOENT)));
  tu_rmrf(dir);
}

static void
test_open_too_many_blocks(void **state)
{
  char err[512] = "";
  struct fc_cachedev *dev = NULL;

  /* Rejected before anything is created or allocated. */
  assert_int_equal(fc_cachedev_open("/nonexistent/cache", (uint64_t)UINT32_MAX * 512,
                                    512, &dev, err, sizeof err), -EINVAL);
  assert_null(dev);
  assert_non_null(strstr(err, "exceeds"));
}

/* A device that is not a regular file cannot grow: /dev/null holds 0. */
static void
test_open_char_device_too_small(void **state)
{
  char err[512] = "";
  struct fc_cachedev *dev = NULL;

  assert_int_equal(fc_cachedev_open("/dev/null", 16 * BS, BS, &dev, err, sizeof err),
                   -ENOSPC);
  assert_null(dev);
  assert_non_null(strstr(err, "/dev/null"));
  assert_non_null(strstr(err, "holds 0 bytes"));
}

/* A block device smaller than the cache size: set up a 1 MiB loop device
 * (root only; skipped where loop devices are unavailable). */
static void
test_open_block_device_too_small(void **state)
{
  char dir[256], backing[512], loopdev[64], err[512] = "", want[64];
  struct fc_cachedev *dev = NULL;
  struct loop_info64 info;
  unsigned char data[BS], back[BS];
  uint64_t seed = 5;
  int ctl, bfd = -1, lfd = -1, nr;
  bool ok = false;

  tu_mkdtemp(dir, sizeof dir);
  tu_path(backing, sizeof backing, dir, "backing");
  bfd = open(backing, O_RDWR | O_CREAT, 0600);
  assert_true(bfd >= 0);
  assert_int_equal(ftruncate(bfd, 1 << 20), 0);
  ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  for (int attempt = 0; ctl >= 0 && attempt < 5 && !ok; attempt++) {
    nr = ioctl(ctl, LOOP_CTL_GET_FREE);
    if (nr < 0)
      break;
    snprintf(loopdev, sizeof loopdev, "/dev/loop%d", nr);
    lfd = open(loopdev, O_RDWR | O_CLOEXEC);
    if (lfd < 0)
      break;
    if (ioctl(lfd, LOOP_SET_FD, bfd) == 0) {
      ok = true;
      memset(&info, 0, sizeof info);
      info.lo_flags = LO_FLAGS_AUTOCLEAR;
      ioctl(lfd, LOOP_SET_STATUS64, &info);
    } else {
      close(lfd);
      lfd = -1;
    }
  }
  if (ctl >= 0)
    close(ctl);
  close(bfd);
  if (!ok) {
    tu_rmrf(dir);
    skip();
  }

  assert_int_equal(fc_cachedev_open(loopdev, 2 << 20, BS, &dev, err, sizeof err),
                   -ENOSPC);
  assert_null(dev);
  snprintf(want, sizeof want, "holds %d bytes", 1 << 20);
  assert_non_null(strstr(err, loopdev));
  assert_non_null(strstr(err, want));

  /* The exact size works, and data goes to the device. */
  assert_int_equal(fc_cachedev_open(loopdev, 1 << 20, BS, &dev, err, sizeof err), 0);
  assert_int_equal(dev->nr_blocks, (1 << 20) / BS);
  tu_fill(data, sizeof data, &seed);
  assert_int_equal(fc_cachedev_write(dev, to_cblock(2), 0, data, BS), 0);
  assert_int_equal(fc_cachedev_read(dev, to_cblock(2), 0, back, BS), 0);
  assert_memory_equal(data, back, BS);
  fc_cachedev_close(dev);

  ioctl(lfd, LOOP_CLR_FD, 0);
  close(lfd);
  tu_rmrf(dir);
}

/* A regular file that cannot be allocated (here: over RLIMIT_FSIZE)
 * is refused at open with the reason, not on the first cache write. */
static void
test_open_cannot_allocate(void **state)
{
  char dir[256], path[512], err[512] = "";
  struct fc_cachedev *dev = NULL;
  struct rlimit old, lim;
  void (*oldsig)(int);
  int r;

  tu_mkdtemp(dir, sizeof dir);
  tu_path(path, sizeof path, dir, "cache");
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
  lim = old;
  lim.rlim_cur = 1 << 20;
  oldsig = signal(SIGXFSZ, SIG_IGN);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  r = fc_cachedev_open(path, 4 << 20, BS, &dev, err, sizeof err);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, oldsig);
  assert_int_equal(r, -EFBIG);
  assert_null(dev);
  assert_non_null(strstr(err, "cannot allocate"));
  assert_non_null(strstr(err, path));
  tu_rmrf(dir);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_open_creates_and_allocates, setup, teardown),
    cmocka_unit_test_setup_teardown(test_reopen_keeps_data, setup, teardown),
    cmocka_unit_test_setup_teardown(test_reserve_unreserve, setup, teardown),
    cmocka_unit_test_setup_teardown(test_alloc_until_enospc, setup, teardown),
    cmocka_unit_test_setup_teardown(test_free_and_realloc, setup, teardown),
    cmocka_unit_test_setup_teardown(test_claim_and_rebuild_free, setup, teardown),
    cmocka_unit_test_setup_teardown(test_read_write_inside_block, setup, teardown),
    cmocka_unit_test(test_open_nonexistent_dir),
    cmocka_unit_test(test_open_too_many_blocks),
    cmocka_unit_test(test_open_char_device_too_small),
    cmocka_unit_test(test_open_block_device_too_small),
    cmocka_unit_test(test_open_cannot_allocate),
  };

  fc_log_setup(FC_LOG_STDERR, FC_LOG_ERROR);
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cachedev.h"
#include "common/bigtable.h"
#include "common/fdio.h"
#include "common/log.h"

static int
size_of_fd(int fd, uint64_t *size)
{
  struct stat st;

  if (fstat(fd, &st) == -1)
    return -errno;
  if (S_ISBLK(st.st_mode))
    return ioctl(fd, BLKGETSIZE64, size) == -1 ? -errno : 0;
  *size = (uint64_t)st.st_size;
  return 0;
}

int
fc_cachedev_open(const char *path, uint64_t size, uint32_t block_size,
                 struct fc_cachedev **out, char *err, size_t errlen)
{
  struct fc_cachedev *dev = NULL;
  struct stat st;
  uint64_t have;
  int r;

  if (size / block_size > CBLOCK_NONE - 1) {
    snprintf(err, errlen, "cache_size %llu with block_size %u exceeds %u blocks",
             (unsigned long long)size, block_size, CBLOCK_NONE - 1);
    return -EINVAL;
  }
  dev = calloc(1, sizeof *dev);
  if (!dev)
    return -ENOMEM;
  dev->fd = -1;
  dev->block_size = block_size;
  dev->nr_blocks = (uint32_t)(size / block_size);
  dev->table = fc_bigtable_alloc(dev->nr_blocks, sizeof *dev->table);
  dev->free_stack = fc_bigtable_alloc(dev->nr_blocks, sizeof *dev->free_stack);
  if (!dev->table || !dev->free_stack) {
    r = -ENOMEM;
    goto out;
  }
  pthread_mutex_init(&dev->lock, NULL);

  dev->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (dev->fd == -1) {
    r = -errno;
    snprintf(err, errlen, "cannot open cache device %s: %s", path, strerror(-r));
    goto out;
  }
  if (fstat(dev->fd, &st) == -1) {
    r = -errno;
    goto out;
  }
  /* Cache blocks are read where they are, not in file order: the kernel's
   * readahead (8 MiB on some hosts) would fetch neighbours nobody asked
   * for.  A migration copy asks for exactly what it reads next
   * (fc_cachedev_prefetch); with readahead on as well, a copy in the
   * device's order ran at a third of its speed one time in two. */
  (void)posix_fadvise(dev->fd, 0, 0, POSIX_FADV_RANDOM);
  if (S_ISREG(st.st_mode)) {
    /* posix_fallocate returns the error instead of setting errno. */
    r = -posix_fallocate(dev->fd, 0, (off_t)size);
    if (r) {
      snprintf(err, errlen, "cannot allocate %llu bytes for cache file %s: %s",
               (unsigned long long)size, path, strerror(-r));
      goto out;
    }
  }
  r = size_of_fd(dev->fd, &have);
  if (r)
    goto out;
  if (have < size) {
    r = -ENOSPC;
    snprintf(err, errlen, "cache device %s holds %llu bytes, cache_size asks for %llu",
             path, (unsigned long long)have, (unsigned long long)size);
    goto out;
  }
  for (uint32_t i = 0; i < dev->nr_blocks; i++) {
    dev->table[i].hash_next = dev->table[i].lru_prev =
      dev->table[i].lru_next = CBLOCK_NONE;
  }
  fc_cachedev_rebuild_free(dev);
  *out = dev;
  return 0;

out:
  fc_cachedev_close(dev);
  return r;
}

void
fc_cachedev_close(struct fc_cachedev *dev)
{
  if (!dev)
    return;
  if (dev->fd >= 0)
    close(dev->fd);
  if (dev->table)
    pthread_mutex_destroy(&dev->lock);
  fc_bigtable_free(dev->table, dev->nr_blocks, sizeof *dev->table);
  fc_bigtable_free(dev->free_stack, dev->nr_blocks, sizeof *dev->free_stack);
  free(dev);
}

int
fc_cachedev_reserve(struct fc_cachedev *dev, uint32_t nblocks)
{
  int r = 0;

  pthread_mutex_lock(&dev->lock);
  if (nblocks > dev->nr_blocks - dev->reserved)
    r = -ENOSPC;
  else
    dev->reserved += nblocks;
  pthread_mutex_unlock(&dev->lock);
  return r;
}

void
fc_cachedev_unreserve(struct fc_cachedev *dev, uint32_t nblocks)
{
  pthread_mutex_lock(&dev->lock);
  dev->reserved -= nblocks;
  pthread_mutex_unlock(&dev->lock);
}

int
fc_cachedev_alloc(struct fc_cachedev *dev, cblock_t *out)
{
  int r = -ENOSPC;

  pthread_mutex_lock(&dev->lock);
  if (dev->nr_free) {
    uint32_t n = dev->free_stack[--dev->nr_free];
    struct fc_entry *e = &dev->table[n];

    e->flags = FC_ENTRY_ALLOCATED;
    e->hash_next = e->lru_prev = e->lru_next = CBLOCK_NONE;
    *out = to_cblock(n);
    r = 0;
  }
  pthread_mutex_unlock(&dev->lock);
  return r;
}

void
fc_cachedev_free(struct fc_cachedev *dev, cblock_t cb)
{
  pthread_mutex_lock(&dev->lock);
  dev->table[cb.n].flags = 0;
  dev->free_stack[dev->nr_free++] = cb.n;
  pthread_mutex_unlock(&dev->lock);
}

void
fc_cachedev_claim(struct fc_cachedev *dev, cblock_t cb)
{
  dev->table[cb.n].flags |= FC_ENTRY_ALLOCATED;
}

void
fc_cachedev_rebuild_free(struct fc_cachedev *dev)
{
  /* Push in descending order so allocation starts at block 0: easier to
   * read in dumps and keeps a young cache file's writes sequential. */
  pthread_mutex_lock(&dev->lock);
  dev->nr_free = 0;
  for (uint32_t i = dev->nr_blocks; i-- > 0;)
    if (!(dev->table[i].flags & FC_ENTRY_ALLOCATED))
      dev->free_stack[dev->nr_free++] = i;
  pthread_mutex_unlock(&dev->lock);
}

int
fc_cachedev_read(struct fc_cachedev *dev, cblock_t cb, uint32_t off,
                 void *buf, uint32_t len)
{
  return fc_full_pread(dev->fd, buf, len,
                    (off_t)cb.n * dev->block_size + off);
}

int
fc_cachedev_read_nowait(struct fc_cachedev *dev, cblock_t cb, uint32_t off,
                        void *buf, uint32_t len)
{
  struct iovec iov = { .iov_base = buf, .iov_len = len };
  ssize_t n = preadv2(dev->fd, &iov, 1,
                      (off_t)cb.n * dev->block_size + off, RWF_NOWAIT);

  if (n == (ssize_t)len)
    return 0;
  /* EOPNOTSUPP: a file system without RWF_NOWAIT; the reader's caller
   * reads again, waiting. */
  return n < 0 && errno != EOPNOTSUPP && errno != EAGAIN ? -errno : -EAGAIN;
}

int
fc_cachedev_write(struct fc_cachedev *dev, cblock_t cb, uint32_t off,
                  const void *buf, uint32_t len)
{
  return fc_full_pwrite(dev->fd, buf, len,
                     (off_t)cb.n * dev->block_size + off);
}

int
fc_cachedev_readv(struct fc_cachedev *dev, cblock_t first, struct iovec *iov, int n)
{
  return fc_full_preadv(dev->fd, iov, n, (off_t)first.n * dev->block_size);
}

int
fc_cachedev_readv_nowait(struct fc_cachedev *dev, cblock_t first,
                         const struct iovec *iov, int n)
{
  size_t want = 0;
  ssize_t got;

  for (int i = 0; i < n; i++)
    want += iov[i].iov_len;
  got = preadv2(dev->fd, iov, n, (off_t)first.n * dev->block_size, RWF_NOWAIT);
  if (got == (ssize_t)want)
    return 0;
  return got < 0 && errno != EOPNOTSUPP && errno != EAGAIN ? -errno : -EAGAIN;
}

void
fc_cachedev_prefetch(struct fc_cachedev *dev, cblock_t first, uint32_t count)
{
  (void)posix_fadvise(dev->fd, (off_t)first.n * dev->block_size,
                      (off_t)count * dev->block_size, POSIX_FADV_WILLNEED);
}

int
fc_cachedev_writev(struct fc_cachedev *dev, cblock_t first, struct iovec *iov, int n)
{
  return fc_full_pwritev(dev->fd, iov, n, (off_t)first.n * dev->block_size);
}

int
fc_cachedev_sync(struct fc_cachedev *dev)
{
  return fdatasync(dev->fd) == -1 ? -errno : 0;
}

uint32_t
fc_cachedev_used(struct fc_cachedev *dev)
{
  uint32_t used;

  pthread_mutex_lock(&dev->lock);
  used = dev->nr_blocks - dev->nr_free;
  pthread_mutex_unlock(&dev->lock);
  return used;
}

size_t
fc_cachedev_memory(const struct fc_cachedev *dev)
{
  return (size_t)dev->nr_blocks * (sizeof *dev->table + sizeof *dev->free_stack);
}

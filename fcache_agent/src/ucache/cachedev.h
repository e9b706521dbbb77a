/* SPDX-License-Identifier: Apache-2.0 */
/* The host's cache device: one file (or block device) of local flash
 * shared by every attached volume, cut into cache blocks.
 *
 * It owns the block table (struct fc_entry per cblock), the free list and
 * the capacity accounting.  Space is handed out in two steps: a volume
 * reserves its quota at attach (so a full device is refused up front with a
 * clear error instead of failing I/O later) and then allocates blocks
 * within that quota as it fills.
 */
#ifndef FCACHE_CACHEDEV_H
#define FCACHE_CACHEDEV_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include "common/entry.h"

struct fc_cachedev {
  int fd;
  uint32_t block_size;
  uint32_t nr_blocks;
  struct fc_entry *table;       /* nr_blocks entries */
  pthread_mutex_t lock;         /* protects the free list and reservations */
  uint32_t *free_stack;
  uint32_t nr_free;
  uint32_t reserved;            /* sum of the volumes' quotas, in blocks */
};

/* Open (creating if needed) the cache file and make sure `size` bytes are
 * really allocated, so a full filesystem is found now and not on the first
 * cache write.  All blocks start free: recovery claims blocks with
 * fc_cachedev_claim() and then calls fc_cachedev_rebuild_free(). */
int fc_cachedev_open(const char *path, uint64_t size, uint32_t block_size,
                     struct fc_cachedev **out, char *err, size_t errlen);
void fc_cachedev_close(struct fc_cachedev *dev);

int fc_cachedev_reserve(struct fc_cachedev *dev, uint32_t nblocks);
void fc_cachedev_unreserve(struct fc_cachedev *dev, uint32_t nblocks);

/* Take a free block; -ENOSPC if none. The entry comes back ALLOCATED. */
int fc_cachedev_alloc(struct fc_cachedev *dev, cblock_t *out);
void fc_cachedev_free(struct fc_cachedev *dev, cblock_t cb);
void fc_cachedev_claim(struct fc_cachedev *dev, cblock_t cb);
void fc_cachedev_rebuild_free(struct fc_cachedev *dev);

/* Data I/O at a byte offset inside one cache block. */
int fc_cachedev_read(struct fc_cachedev *dev, cblock_t cb, uint32_t off,
                     void *buf, uint32_t len);
/* fc_cachedev_read only from the page cache: -EAGAIN where it would wait
 * for the device (or the file system cannot tell, or the read came out
 * short), else 0 or -errno. */
int fc_cachedev_read_nowait(struct fc_cachedev *dev, cblock_t cb, uint32_t off,
                            void *buf, uint32_t len);
int fc_cachedev_write(struct fc_cachedev *dev, cblock_t cb, uint32_t off,
                      const void *buf, uint32_t len);
/* Whole blocks first, first+1, ... scattered to / gathered from iov[0..n)
 * (one buffer per block): one system call for a run of adjacent blocks.
 * iov is consumed. */
struct iovec;
int fc_cachedev_readv(struct fc_cachedev *dev, cblock_t first, struct iovec *iov, int n);
int fc_cachedev_writev(struct fc_cachedev *dev, cblock_t first, struct iovec *iov, int n);
/* fc_cachedev_readv only from the page cache: -EAGAIN where any of it
 * would wait for the device (iov is then left as it was), else 0 or
 * -errno. */
int fc_cachedev_readv_nowait(struct fc_cachedev *dev, cblock_t first,
                             const struct iovec *iov, int n);
/* Start reading blocks [first, first+count) from the device into the page
 * cache, without waiting.  Only advice: nothing fails. */
void fc_cachedev_prefetch(struct fc_cachedev *dev, cblock_t first, uint32_t count);
int fc_cachedev_sync(struct fc_cachedev *dev);

uint32_t fc_cachedev_used(struct fc_cachedev *dev);
size_t fc_cachedev_memory(const struct fc_cachedev *dev);

#endif

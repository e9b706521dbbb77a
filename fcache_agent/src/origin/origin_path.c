/* SPDX-License-Identifier: Apache-2.0 */
/* Origin on a local block device or file. */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/fdio.h"
#include "origin.h"

struct path_origin {
  struct fc_origin base;
  int fd;
  bool is_block;
};

static struct path_origin *
po(struct fc_origin *o)
{
  return (struct path_origin *)o;
}

static int
path_pread(struct fc_origin *o, void *buf, uint32_t count, uint64_t off)
{
  return fc_full_pread(po(o)->fd, buf, count, (off_t)off);
}

static int
path_pwrite(struct fc_origin *o, const void *buf, uint32_t count,
            uint64_t off, bool fua)
{
  int r = fc_full_pwrite(po(o)->fd, buf, count, (off_t)off);

  /* FUA on a file: this write only, but fdatasync is what we have that
   * works on every filesystem and block device. */
  if (!r && fua && fdatasync(po(o)->fd) == -1)
    r = -errno;
  return r;
}

static int
path_flush(struct fc_origin *o)
{
  return fdatasync(po(o)->fd) == -1 ? -errno : 0;
}

static int
path_trim(struct fc_origin *o, uint32_t count, uint64_t off)
{
  struct path_origin *p = po(o);

  if (p->is_block) {
    uint64_t range[2] = { off, count };
    return ioctl(p->fd, BLKDISCARD, range) == -1 ? -errno : 0;
  }
  if (fallocate(p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                (off_t)off, count) == -1)
    return -errno;
  return 0;
}

/* Zeroes in place.  A file punches a hole where the client allows one
 * (it reads as zeroes and takes no space) and otherwise zeroes a range
 * that stays allocated; a block device discards with zeroes guaranteed
 * (fallocate on a block device refuses when the device cannot promise
 * them) or has the kernel write zeroes (BLKZEROOUT, which keeps the
 * blocks mapped and falls back to writing them itself). */
static int
path_zero(struct fc_origin *o, uint32_t count, uint64_t off, bool may_trim)
{
  struct path_origin *p = po(o);

  if (may_trim &&
      fallocate(p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                (off_t)off, count) == 0)
    return 0;
  if (may_trim && errno != EOPNOTSUPP && errno != ENODEV && errno != EINVAL)
    return -errno;
  if (p->is_block) {
    uint64_t range[2] = { off, count };

    return ioctl(p->fd, BLKZEROOUT, range) == -1 ? -errno : 0;
  }
  if (fallocate(p->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
                (off_t)off, count) == 0)
    return 0;
  /* tmpfs and others: no ZERO_RANGE; fc_origin_zero writes them. */
  return errno == EOPNOTSUPP || errno == ENODEV || errno == EINVAL
         ? -EOPNOTSUPP : -errno;
}

/* Holes of a regular file, from SEEK_DATA / SEEK_HOLE; a block device
 * (or a filesystem without them) is all data. */
static int
path_block_status(struct fc_origin *o, uint32_t count, uint64_t off,
                  struct fc_origin_extent *ext, uint32_t max)
{
  struct path_origin *p = po(o);
  uint64_t end = off + count, pos = off;
  uint32_t n = 0;

  while (pos < end && n < max) {
    uint64_t data = pos, hole = end, stop;

    if (!p->is_block) {
      off_t d = lseek(p->fd, (off_t)pos, SEEK_DATA);

      if (d >= 0)
        data = (uint64_t)d;
      else if (errno == ENXIO)
        data = end;             /* a hole up to the end of the file */
      else if (errno != EINVAL && errno != EOPNOTSUPP)
        return n ? (int)n : -errno;
      /* EINVAL, EOPNOTSUPP: no SEEK_DATA here; data. */
    }
    if (data > pos) {
      stop = data < end ? data : end;
      ext[n++] = (struct fc_origin_extent){
        .length = (uint32_t)(stop - pos),
        .flags = FC_ORIGIN_HOLE | FC_ORIGIN_ZERO };
      pos = stop;
      continue;
    }
    if (!p->is_block) {
      off_t h = lseek(p->fd, (off_t)pos, SEEK_HOLE);

      if (h > (off_t)pos)
        hole = (uint64_t)h;     /* otherwise: cannot tell, data */
    }
    stop = hole < end ? hole : end;
    ext[n++] = (struct fc_origin_extent){ .length = (uint32_t)(stop - pos),
                                          .flags = 0 };
    pos = stop;
  }
  return (int)n;
}

/* Clean pages only: this host's own writes are already in (flushed
 * first), what is dropped is read again from the disk. */
static void
path_invalidate(struct fc_origin *o)
{
  int fd = po(o)->fd;

  (void)fdatasync(fd);
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}

/* The device's size as the kernel knows it now: after os-brick's rescan
 * of an extended LUN (or a file grown by its NFS server) it is larger. */
static int
path_size_now(struct fc_origin *o, uint64_t *size)
{
  struct path_origin *p = po(o);
  struct stat st;

  if (p->is_block)
    return ioctl(p->fd, BLKGETSIZE64, size) == -1 ? -errno : 0;
  if (fstat(p->fd, &st) == -1)
    return -errno;
  *size = (uint64_t)st.st_size;
  return 0;
}

static void
path_close(struct fc_origin *o)
{
  close(po(o)->fd);
  free(o);
}

static const struct fc_origin_ops path_ops = {
  .pread = path_pread,
  .pwrite = path_pwrite,
  .flush = path_flush,
  .trim = path_trim,
  .zero = path_zero,
  .block_status = path_block_status,
  .invalidate = path_invalidate,
  .size_now = path_size_now,
  .close = path_close,
};

int
fc_origin_open_path(const char *path, const struct fc_origin_policy *pol,
                    struct fc_origin **out, char *err, size_t errlen)
{
  struct path_origin *p;
  struct stat st;
  int r;

  p = calloc(1, sizeof *p);
  if (!p)
    return -ENOMEM;
  p->fd = -1;
  /* Exclusive: a mounted filesystem's device, or one another device or
   * process holds, must not be written behind its owner's back. */
  r = fc_origin_policy_open(pol, path, O_RDWR | O_EXCL, &p->fd, err, errlen);
  if (r < 0)
    goto out;
  if (fstat(p->fd, &st) == -1) {
    r = -errno;
    goto out;
  }
  if (S_ISBLK(st.st_mode)) {
    p->is_block = true;
    if (ioctl(p->fd, BLKGETSIZE64, &p->base.size) == -1) {
      r = -errno;
      snprintf(err, errlen, "cannot get size of origin %s: %s", path, strerror(-r));
      goto out;
    }
  } else if (S_ISREG(st.st_mode)) {
    p->base.size = (uint64_t)st.st_size;
  } else {
    r = -EINVAL;
    snprintf(err, errlen, "origin %s is neither a block device nor a regular file",
             path);
    goto out;
  }
  if (p->base.size == 0) {
    r = -EINVAL;
    snprintf(err, errlen, "origin %s is empty", path);
    goto out;
  }
  p->base.ops = &path_ops;
  p->base.can_trim = true;
  *out = &p->base;
  return 0;

out:
  if (p->fd >= 0)
    close(p->fd);
  free(p);
  return r;
}

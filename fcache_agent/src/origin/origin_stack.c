/* SPDX-License-Identifier: Apache-2.0 */
/* Block devices built on other block devices, from sysfs.
 *
 * Why: refusing the cache device by number is not enough.  Its whole disk,
 * a device-mapper device over it (dmcache's own "-cdata" segments), a loop
 * device over it or over the cache file, or the disk under the filesystem
 * that holds state_dir expose the same bytes under another number.  The
 * kernel lists what a device is built on in /sys/dev/block/MAJ:MIN/slaves,
 * a partition's disk is its parent directory, and a loop device names its
 * backing file in loop/backing_file (a block device there is what the loop
 * is built on; a regular file is judged by fc_blockdev_backing_file).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "origin_policy.h"

/* Device-mapper over md over partitions is three; eight is plenty and
 * bounds the walk whatever sysfs says. */
#define MAX_DEPTH 8

/* Reads "MAJ:MIN" from <dir>/dev. */
static int read_dev(const char *dir, dev_t *out)
{
  char path[PATH_MAX], buf[32];
  unsigned maj, min;
  ssize_t n;
  int fd;

  if (snprintf(path, sizeof path, "%s/dev", dir) >= (int)sizeof path)
    return -ENAMETOOLONG;
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return -EIO;
  buf[n] = '\0';
  if (sscanf(buf, "%u:%u", &maj, &min) != 2)
    return -EIO;
  *out = makedev(maj, min);
  return 0;
}

/* The disk of partition `d`, or 0 if d is not a partition. */
static dev_t whole_disk(dev_t d)
{
  char link[64], dir[PATH_MAX], probe[PATH_MAX + 16];
  char *slash;
  dev_t disk;

  snprintf(link, sizeof link, "/sys/dev/block/%u:%u", major(d), minor(d));
  if (!realpath(link, dir))
    return 0;
  snprintf(probe, sizeof probe, "%s/partition", dir);
  if (access(probe, F_OK) != 0)
    return 0;
  slash = strrchr(dir, '/');
  if (!slash)
    return 0;
  *slash = '\0';
  return read_dev(dir, &disk) == 0 ? disk : 0;
}

/* The file a loop device reads and writes, from sysfs: 0 with *st set, or
 * -errno (not a loop device, detached, or its file gone). */
static int loop_backing(dev_t d, struct stat *st, char *path, size_t pathlen)
{
  char name[96];
  ssize_t n;
  int fd;

  snprintf(name, sizeof name, "/sys/dev/block/%u:%u/loop/backing_file",
           major(d), minor(d));
  fd = open(name, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  n = read(fd, path, pathlen - 1);
  close(fd);
  if (n <= 0)
    return -ENOENT;
  path[n] = '\0';
  if (path[n - 1] == '\n')
    path[n - 1] = '\0';
  return stat(path, st) == 0 ? 0 : -errno;
}

/* Bounds the walk whatever sysfs says. */
#define MAX_LEAVES 32

struct leaves {
  dev_t dev[MAX_LEAVES];
  unsigned n;
};

/* The devices at the bottom of d's stack (d itself if it is built on
 * nothing): where its bytes are actually stored. */
static void collect_leaves(dev_t d, unsigned depth, struct leaves *out)
{
  char dir[64];
  struct dirent *e;
  bool any = false;
  DIR *dp;

  snprintf(dir, sizeof dir, "/sys/dev/block/%u:%u/slaves", major(d),
           minor(d));
  dp = depth > 0 ? opendir(dir) : NULL;
  while (dp && (e = readdir(dp)) != NULL) {
    char sub[PATH_MAX];
    dev_t s;

    if (e->d_name[0] == '.')
      continue;
    if (snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) >= (int)sizeof sub)
      continue;
    if (read_dev(sub, &s) == 0) {
      any = true;
      collect_leaves(s, depth - 1, out);
    }
  }
  if (dp)
    closedir(dp);
  if (!any && depth > 0) {
    char backing[PATH_MAX];
    struct stat st;

    /* A loop device over a block device is built on it. */
    if (loop_backing(d, &st, backing, sizeof backing) == 0 &&
        S_ISBLK(st.st_mode)) {
      collect_leaves(st.st_rdev, depth - 1, out);
      return;
    }
  }
  if (!any && out->n < MAX_LEAVES)
    out->dev[out->n++] = d;
}

/* Two leaves share bytes if they are one device or one is the disk the
 * other is a partition of. */
static bool leaves_overlap(dev_t a, dev_t b)
{
  return a == b || whole_disk(a) == b || whole_disk(b) == a;
}

bool fc_blockdev_overlap(dev_t a, dev_t b)
{
  struct leaves la = { .n = 0 }, lb = { .n = 0 };

  if (a == b)
    return true;
  collect_leaves(a, MAX_DEPTH, &la);
  collect_leaves(b, MAX_DEPTH, &lb);
  for (unsigned i = 0; i < la.n; i++)
    for (unsigned j = 0; j < lb.n; j++)
      if (leaves_overlap(la.dev[i], lb.dev[j]))
        return true;
  return false;
}

/* Walks d's stack (slaves, loop devices over block devices) for a loop
 * device over a regular file that `match` accepts. */
static bool backed_by(dev_t d, unsigned depth,
                      bool (*match)(const struct stat *, const char *, void *),
                      void *ctx)
{
  char dir[64], backing[PATH_MAX];
  struct dirent *e;
  struct stat st;
  bool found = false;
  DIR *dp;

  if (loop_backing(d, &st, backing, sizeof backing) == 0) {
    if (S_ISREG(st.st_mode))
      return match(&st, backing, ctx);
    if (S_ISBLK(st.st_mode) && depth > 0)
      return backed_by(st.st_rdev, depth - 1, match, ctx);
    return false;
  }
  if (depth == 0)
    return false;
  snprintf(dir, sizeof dir, "/sys/dev/block/%u:%u/slaves", major(d),
           minor(d));
  dp = opendir(dir);
  while (dp && !found && (e = readdir(dp)) != NULL) {
    char sub[PATH_MAX];
    dev_t s;

    if (e->d_name[0] == '.')
      continue;
    if (snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) < (int)sizeof sub &&
        read_dev(sub, &s) == 0)
      found = backed_by(s, depth - 1, match, ctx);
  }
  if (dp)
    closedir(dp);
  return found;
}

bool fc_blockdev_backing_file(dev_t d,
                              bool (*match)(const struct stat *, const char *,
                                            void *),
                              void *ctx)
{
  return backed_by(d, MAX_DEPTH, match, ctx);
}

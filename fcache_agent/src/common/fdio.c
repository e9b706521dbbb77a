/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fdio.h"

int
fc_full_pread(int fd, void *buf, size_t len, off_t off)
{
  while (len) {
    ssize_t n = pread(fd, buf, len, off);
    if (n == -1) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (n == 0)
      return -EIO;       /* reading past the end: the file shrank under us */
    buf = (char *)buf + n;
    len -= (size_t)n;
    off += n;
  }
  return 0;
}

int
fc_full_pwrite(int fd, const void *buf, size_t len, off_t off)
{
  while (len) {
    ssize_t n = pwrite(fd, buf, len, off);
    if (n == -1) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    buf = (const char *)buf + n;
    len -= (size_t)n;
    off += n;
  }
  return 0;
}

void
fc_iov_advance(struct iovec **iov, int *cnt, size_t n)
{
  while (*cnt > 0 && n >= (*iov)->iov_len) {
    n -= (*iov)->iov_len;
    (*iov)++;
    (*cnt)--;
  }
  if (*cnt > 0) {
    (*iov)->iov_base = (char *)(*iov)->iov_base + n;
    (*iov)->iov_len -= n;
  }
}

int
fc_full_sendmsg(int fd, struct iovec *iov, int n)
{
  while (n > 0) {
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = (size_t)n };
    ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL);

    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    /* Partial send: skip what went out and resume mid-iovec. */
    fc_iov_advance(&iov, &n, (size_t)w);
  }
  return 0;
}

static int
full_v(int fd, struct iovec *iov, int cnt, off_t off, bool writing)
{
  while (cnt > 0) {
    int k = cnt < IOV_MAX ? cnt : IOV_MAX;
    ssize_t n = writing ? pwritev(fd, iov, k, off) : preadv(fd, iov, k, off);

    if (n == -1) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (n == 0 && !writing)
      return -EIO;
    fc_iov_advance(&iov, &cnt, (size_t)n);
    off += n;
  }
  return 0;
}

int
fc_full_preadv(int fd, struct iovec *iov, int n, off_t off)
{
  return full_v(fd, iov, n, off, false);
}

int
fc_full_pwritev(int fd, struct iovec *iov, int n, off_t off)
{
  return full_v(fd, iov, n, off, true);
}

int
fc_fsync_dir(const char *dir)
{
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int r = 0;

  if (fd == -1)
    return -errno;
  if (fsync(fd) == -1)
    r = -errno;
  close(fd);
  return r;
}

int
fc_replace_file_durable(const char *dir, const char *path, const void *data, size_t len)
{
  char tmp[PATH_MAX + 8];
  int fd, r;

  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
    return -ENAMETOOLONG;
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd == -1)
    return -errno;
  /* A leftover tmp of another mode keeps it through O_TRUNC; what is
   * written here (a volume's export secret) is the agent's alone. */
  r = fchmod(fd, 0600) == -1 ? -errno : 0;
  if (!r)
    r = fc_full_pwrite(fd, data, len, 0);
  if (!r && fsync(fd) == -1)
    r = -errno;
  close(fd);
  if (!r && rename(tmp, path) == -1)
    r = -errno;
  if (r) {
    unlink(tmp);
    return r;
  }
  return fc_fsync_dir(dir);
}

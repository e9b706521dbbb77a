#include <errno.h>
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

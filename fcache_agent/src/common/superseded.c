/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"
#include "superseded.h"

int
fc_superseded_create(const char *path)
{
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  int r;

  if (fd < 0)
    return -errno;
  /* The file must exist after a crash even if nothing was appended: its
   * absence would not be an empty record but a lost one. */
  if (fsync(fd) < 0) {
    r = -errno;
    close(fd);
    return r;
  }
  return fd;
}

int
fc_superseded_append(int fd, uint64_t ob)
{
  uint8_t rec[8];

  for (int i = 0; i < 8; i++)
    rec[i] = (uint8_t)(ob >> (8 * i));
  if (write(fd, rec, sizeof rec) != (ssize_t)sizeof rec)
    return errno ? -errno : -EIO;
  return fdatasync(fd) < 0 ? -errno : 0;
}

int
fc_superseded_load(const char *path, uint64_t **list, uint32_t *n)
{
  struct stat st;
  uint8_t *raw = NULL;
  uint64_t *v = NULL;
  uint32_t k;
  int fd, r = 0;

  *list = NULL;
  *n = 0;
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : -errno;
  if (fstat(fd, &st) < 0) {
    r = -errno;
    goto out;
  }
  /* A torn last record (crash mid-append) was never acted on: ignore it. */
  k = (uint32_t)(st.st_size / 8);
  raw = malloc((size_t)k * 8 + 1);
  v = malloc(((size_t)k + 1) * sizeof *v);
  if (!raw || !v) {
    r = -ENOMEM;
    goto out;
  }
  r = fc_full_pread(fd, raw, (size_t)k * 8, 0);
  if (r)
    goto out;
  for (uint32_t i = 0; i < k; i++) {
    v[i] = 0;
    for (int b = 0; b < 8; b++)
      v[i] |= (uint64_t)raw[8 * i + b] << (8 * b);
  }
  *list = v;
  *n = k;
  v = NULL;
out:
  free(raw);
  free(v);
  close(fd);
  return r;
}

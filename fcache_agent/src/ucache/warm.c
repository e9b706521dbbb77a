/* SPDX-License-Identifier: Apache-2.0 */
/* The warm-restart marker: see warm.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/fdio.h"
#include "warm.h"

#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"
#define BOOT_ID_LEN 36

static int
read_id(const char *path, char id[BOOT_ID_LEN + 1])
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  if (fd == -1)
    return -errno;
  n = read(fd, id, BOOT_ID_LEN);
  close(fd);
  if (n != BOOT_ID_LEN)
    return -EINVAL;
  id[BOOT_ID_LEN] = '\0';
  return 0;
}

void
uc_warm_marker_path(const char *state_dir, char *buf, size_t len)
{
  snprintf(buf, len, "%s/cache.boot", state_dir);
}

bool
uc_warm_same_boot(const char *marker)
{
  char now[BOOT_ID_LEN + 1], then[BOOT_ID_LEN + 1];

  return read_id(BOOT_ID_PATH, now) == 0 && read_id(marker, then) == 0 &&
         !strcmp(now, then);
}

int
uc_warm_arm(const char *marker)
{
  char id[BOOT_ID_LEN + 1], tmp[4400];
  int fd, r;

  r = read_id(BOOT_ID_PATH, id);
  if (r)
    return r;
  snprintf(tmp, sizeof tmp, "%s.tmp", marker);
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd == -1)
    return -errno;
  /* Not synced: a reboot that loses it only makes the next start cold,
   * and one that keeps it cannot match the new boot's id. */
  r = fc_full_pwrite(fd, id, BOOT_ID_LEN, 0);
  close(fd);
  if (!r && rename(tmp, marker) == -1)
    r = -errno;
  if (r)
    unlink(tmp);
  return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* nbd_kdev: a kernel NBD device (/dev/nbdN) served from a file (or a block
 * device) by the agent's dmcache/dm_nbd.c, to test that module against the real kernel
 * (tests/functional/test_dmcache_uml.py, inside user-mode Linux).
 *
 *   nbd_kdev [-r] [-b BLOCK] [-i INDEX] [-t TIMEOUT_S] [-d DEAD_S] [-a] FILE
 *
 * -r: read-only (FILE opened read-only, the device exported read-only);
 * -b: the device's logical block (default 4096); -i: which /dev/nbdN
 * (default: a free one); -d: the dead-connection timeout; -a: reattach
 * device -i (a new socket for the dead one of an earlier nbd_kdev that
 * died) instead of connecting it.
 *
 * Prints "DEVICE /dev/nbdN" once the device serves, then reads commands,
 * one a line, from stdin:
 *   stats       "STATS reads R read_bytes B writes W flushes F"
 *   disconnect  disconnect the device and exit ("DISCONNECTED rc"); also
 *               at the end of stdin
 *   release     stop serving, leaving the device connected, and exit
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fdio.h"
#include "common/log.h"
#include "dmcache/dm_nbd.h"

struct filedisk {
  int fd;
  atomic_ullong reads, read_bytes, writes, flushes;
};

static int file_pread(void *h, void *buf, uint32_t count, uint64_t offset)
{
  struct filedisk *d = h;

  atomic_fetch_add(&d->reads, 1);
  atomic_fetch_add(&d->read_bytes, count);
  return fc_full_pread(d->fd, buf, count, (off_t)offset);
}

static int file_pwrite(void *h, const void *buf, uint32_t count,
                       uint64_t offset, bool fua)
{
  struct filedisk *d = h;
  int r;

  atomic_fetch_add(&d->writes, 1);
  r = fc_full_pwrite(d->fd, buf, count, (off_t)offset);
  if (r == 0 && fua && fdatasync(d->fd) < 0)
    r = -errno;
  return r;
}

static int file_flush(void *h)
{
  struct filedisk *d = h;

  atomic_fetch_add(&d->flushes, 1);
  return fdatasync(d->fd) < 0 ? -errno : 0;
}

static const struct fc_io_ops rw_ops = {
  .pread = file_pread, .pwrite = file_pwrite, .flush = file_flush,
};
static const struct fc_io_ops ro_ops = {
  .pread = file_pread, .flush = file_flush,
};

static void usage(const char *prog)
{
  fprintf(stderr, "usage: %s [-r] [-b BLOCK] [-i INDEX] [-t TIMEOUT_S] "
          "[-d DEAD_S] [-a] FILE\n", prog);
  exit(2);
}

int main(int argc, char **argv)
{
  struct filedisk disk = { .fd = -1 };
  struct fc_export exp = {
    .name = "", .volume = "nbd_kdev", .min_block = 4096, .pref_block = 4096,
    .max_block = 32u << 20, .handle = &disk,
  };
  struct dm_nbd_params p = { .index = -1, .threads = 4 };
  bool reattach = false;
  struct dm_nbd *d;
  off_t size;
  char line[64];
  int opt, r;

  fc_log_setup(FC_LOG_STDERR, FC_LOG_INFO);
  while ((opt = getopt(argc, argv, "rb:i:t:d:a")) != -1) {
    switch (opt) {
    case 'r': exp.read_only = true; break;
    case 'b': exp.min_block = (uint32_t)strtoul(optarg, NULL, 10); break;
    case 'i': p.index = atoi(optarg); break;
    case 't': p.timeout_s = (unsigned)strtoul(optarg, NULL, 10); break;
    case 'd': p.dead_conn_timeout_s = (unsigned)strtoul(optarg, NULL, 10); break;
    case 'a': reattach = true; break;
    default: usage(argv[0]);
    }
  }
  if (optind + 1 != argc)
    usage(argv[0]);
  exp.pref_block = exp.min_block;
  exp.ops = exp.read_only ? &ro_ops : &rw_ops;
  disk.fd = open(argv[optind], (exp.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  /* A file or a block device: its size either way. */
  if (disk.fd < 0 || (size = lseek(disk.fd, 0, SEEK_END)) < 0) {
    perror(argv[optind]);
    return 1;
  }
  exp.size = (uint64_t)size;
  r = reattach ? dm_nbd_reattach(&exp, &p, &d) : dm_nbd_connect(&exp, &p, &d);
  if (r < 0) {
    fprintf(stderr, "nbd_kdev: %s\n", strerror(-r));
    return 1;
  }
  printf("DEVICE /dev/nbd%d\n", dm_nbd_index(d));
  fflush(stdout);
  while (fgets(line, sizeof line, stdin)) {
    if (!strcmp(line, "stats\n")) {
      printf("STATS reads %llu read_bytes %llu writes %llu flushes %llu\n",
             atomic_load(&disk.reads), atomic_load(&disk.read_bytes),
             atomic_load(&disk.writes), atomic_load(&disk.flushes));
    } else if (!strcmp(line, "release\n")) {
      dm_nbd_release(d);
      printf("RELEASED\n");
      return 0;
    } else if (!strcmp(line, "disconnect\n")) {
      break;
    } else {
      printf("ERROR unknown command\n");
    }
    fflush(stdout);
  }
  r = dm_nbd_disconnect(d);
  printf("DISCONNECTED %d\n", r);
  close(disk.fd);
  return r < 0 ? 1 : 0;
}

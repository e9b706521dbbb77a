/* SPDX-License-Identifier: Apache-2.0 */
/* nbd_memserver: serve an in-memory disk through nbd_server, to test and
 * benchmark the NBD layer alone.  Runs until SIGTERM or SIGINT.
 *
 *   nbd_memserver -s SOCKET [-S SIZE] [-t THREADS] [-n NAME] [-d DESC]
 *                 [-b MIN] [-B MAX] [-r] [-v]
 *
 * SIZE, MIN and MAX take K/M/G/T suffixes.  Prints "ready" on stdout once
 * the socket accepts connections.
 *
 * Concurrent overlapping requests race on the buffer exactly as they
 * would on a real disk; clients must not rely on their ordering anyway.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/log.h"
#include "nbd/nbd_server.h"

struct memdisk {
  uint8_t *mem;
  uint64_t size;
};

static int mem_pread(void *h, void *buf, uint32_t count, uint64_t offset)
{
  struct memdisk *d = h;
  memcpy(buf, d->mem + offset, count);
  return 0;
}

static int mem_pwrite(void *h, const void *buf, uint32_t count,
                      uint64_t offset, bool fua)
{
  struct memdisk *d = h;
  memcpy(d->mem + offset, buf, count);
  return 0;
}

static int mem_flush(void *h)
{
  return 0;
}

static int mem_trim(void *h, uint32_t count, uint64_t offset, bool fua)
{
  struct memdisk *d = h;
  memset(d->mem + offset, 0, count);
  return 0;
}

static int mem_zero(void *h, uint32_t count, uint64_t offset, bool fua,
                    bool may_trim)
{
  return mem_trim(h, count, offset, fua);
}

static const struct fc_io_ops mem_ops = {
  .pread = mem_pread,
  .pwrite = mem_pwrite,
  .flush = mem_flush,
  .trim = mem_trim,
  .zero = mem_zero,
};

static int parse_size(const char *s, uint64_t *out)
{
  char *end;
  unsigned long long v;
  unsigned shift = 0;

  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno || end == s)
    return -EINVAL;
  switch (*end) {
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  case 't': case 'T': shift = 40; end++; break;
  }
  if (*end || (shift && v > (UINT64_MAX >> shift)))
    return -EINVAL;
  *out = (uint64_t)v << shift;
  return 0;
}

static void usage(const char *prog)
{
  fprintf(stderr, "usage: %s -s SOCKET [-S SIZE] [-t THREADS] [-n NAME] "
          "[-d DESC] [-b MIN] [-B MAX] [-r] [-v]\n", prog);
  exit(2);
}

int main(int argc, char **argv)
{
  struct memdisk disk = { .size = 256u << 20 };
  struct fc_export exp = {
    .name = "", .min_block = 512, .pref_block = 4096,
    .max_block = 32u << 20, .ops = &mem_ops, .handle = &disk,
  };
  const char *sock = NULL;
  unsigned threads = 8;
  uint64_t v;
  struct nbd_server *srv;
  sigset_t sigs;
  int opt, sig;

  while ((opt = getopt(argc, argv, "s:S:t:n:d:b:B:rv")) != -1) {
    switch (opt) {
    case 's': sock = optarg; break;
    case 'S': if (parse_size(optarg, &disk.size)) usage(argv[0]); break;
    case 't': threads = (unsigned)strtoul(optarg, NULL, 10); break;
    case 'n': exp.name = optarg; break;
    case 'd': exp.description = optarg; break;
    case 'b':
      if (parse_size(optarg, &v) || v > UINT32_MAX) usage(argv[0]);
      exp.min_block = (uint32_t)v;
      break;
    case 'B':
      if (parse_size(optarg, &v) || v > UINT32_MAX) usage(argv[0]);
      exp.max_block = (uint32_t)v;
      break;
    case 'r': exp.read_only = true; break;
    case 'v': fc_log_setup(FC_LOG_STDERR, FC_LOG_DEBUG); break;
    default: usage(argv[0]);
    }
  }
  if (!sock || optind != argc)
    usage(argv[0]);
  exp.size = disk.size;
  /* Anonymous memory is zero-filled and only committed when touched. */
  disk.mem = mmap(NULL, disk.size ? disk.size : 1, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (disk.mem == MAP_FAILED) {
    perror("mmap");
    return 1;
  }

  /* Block the signals before any thread exists so only sigwait sees them. */
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);

  srv = nbd_server_start(sock, 0600, &exp, threads);
  if (!srv)
    return 1;
  printf("ready\n");
  fflush(stdout);
  sigwait(&sigs, &sig);
  nbd_server_stop(srv);
  munmap(disk.mem, disk.size ? disk.size : 1);
  return 0;
}

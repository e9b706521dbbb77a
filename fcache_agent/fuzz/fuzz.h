/* SPDX-License-Identifier: Apache-2.0 */
/* What the libFuzzer harnesses share: a scratch directory for the inputs
 * that the agent reads from files, a way to hand an input to code that
 * reads a socket, and quiet logging.
 *
 * Each harness is one fuzz_<surface>.c defining LLVMFuzzerTestOneInput
 * (and, where it needs a set-up done once, LLVMFuzzerInitialize).  A
 * harness calls the agent's own parsing code exactly as the agent does;
 * only what surrounds it (an engine, a peer) is replaced by something
 * small, so that a crash is always in the agent's code.
 */
#ifndef FCACHE_FUZZ_H
#define FCACHE_FUZZ_H

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/fdio.h"
#include "common/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char fuzz_dirs[2][256];

static void fuzz_cleanup(void)
{
  char cmd[300];

  /* The directories hold only files the harness wrote; rm -r keeps this
   * short and runs once, at exit. */
  for (int i = 0; i < 2; i++) {
    if (!fuzz_dirs[i][0])
      continue;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dirs[i]);
    if (system(cmd) != 0)
      fprintf(stderr, "fuzz: could not remove %s\n", fuzz_dirs[i]);
  }
}

static inline const char *fuzz_mkdtemp(char *dir, const char *base)
{
  snprintf(dir, 256, "%s/fcache-fuzz-XXXXXX", base);
  if (!mkdtemp(dir)) {
    perror("fuzz: mkdtemp");
    abort();
  }
  return dir;
}

static inline const char *fuzz_tmpdir(void)
{
  const char *tmp = getenv("TMPDIR");

  return tmp && *tmp ? tmp : "/tmp";
}

/* A private scratch directory, removed at exit: $FUZZ_TMPDIR, else
 * /dev/shm, else $TMPDIR.  A tmpfs because the agent syncs its state
 * files and metadata as it should, and on a disk those syncs, not the
 * code, would set the pace.  Logging is cut to errors: a message per
 * input would make the run I/O-bound and drown the sanitizer's report;
 * FUZZ_DEBUG=1 brings everything back. */
static inline const char *fuzz_setup(void)
{
  const char *base = getenv("FUZZ_TMPDIR");

  if (fuzz_dirs[0][0])
    return fuzz_dirs[0];
  if (!base || !*base)
    base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : fuzz_tmpdir();
  fuzz_mkdtemp(fuzz_dirs[0], base);
  atexit(fuzz_cleanup);
  fc_log_setup(FC_LOG_STDERR,
               getenv("FUZZ_DEBUG") ? FC_LOG_DEBUG : FC_LOG_ERROR);
  return fuzz_dirs[0];
}

/* A second scratch directory, under $TMPDIR: for files that must not be
 * under /dev (the agent admits only block devices there as origins). */
static inline const char *fuzz_setup_tmp(void)
{
  fuzz_setup();
  if (!fuzz_dirs[1][0])
    fuzz_mkdtemp(fuzz_dirs[1], fuzz_tmpdir());
  return fuzz_dirs[1];
}

/* Write the input to <scratch>/name and return its path (static buffer). */
static inline const char *fuzz_file(const char *name, const uint8_t *data,
                                    size_t size)
{
  static char path[512];
  int fd;

  snprintf(path, sizeof path, "%s/%s", fuzz_setup(), name);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size)) {
    perror("fuzz: writing input file");
    abort();
  }
  close(fd);
  return path;
}

/* Send all of buf to a peer of the harness (fc_full_sendmsg); on a
 * non-blocking socket, as much as fits.  What did not go is the peer's
 * business: it sees the stream end early. */
static inline void fuzz_send(int fd, const void *buf, size_t len)
{
  struct iovec iov = { (void *)buf, len };

  (void)fc_full_sendmsg(fd, &iov, 1);
}

/* A unix socket pair whose first end already holds the input and then
 * EOF, as if a peer had sent it and hung up: the code under test reads
 * the second end and runs to the end of the stream in this thread.  Both
 * ends are non-blocking, so a reply the harness never reads fails with
 * EAGAIN once the buffer is full instead of blocking forever; an input
 * longer than the socket buffer is cut there (libFuzzer's -max_len keeps
 * inputs well below it).  Returns the end to serve; the harness closes
 * both (*peer is the end that holds the replies). */
static inline int fuzz_socket(const uint8_t *data, size_t size, int *peer)
{
  int sv[2], buf = 1 << 20;

  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv)) {
    perror("fuzz: socketpair");
    abort();
  }
  (void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  (void)setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  (void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  (void)setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  fuzz_send(sv[0], data, size);
  shutdown(sv[0], SHUT_WR);
  *peer = sv[0];
  return sv[1];
}

#endif

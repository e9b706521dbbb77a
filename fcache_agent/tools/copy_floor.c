/* SPDX-License-Identifier: Apache-2.0 */
/* The least a cache copy between two hosts can do, the peer that shows
 * how much of the migration benchmark's gap to a plain TCP stream
 * (tcp_blast) is the copy's own work and how much is the agent's: read
 * the blocks out of one file, frame them as the transfer protocol does
 * (BLOCK frames of 255 (id, 4 KiB) entries, the same header and CRC-32C,
 * xfer_frame.h), send them over plain TCP, check each frame's checksum,
 * and write the blocks into another file.  One thread per side, blocking
 * calls, no locks, no metadata, no flow control: four copies of each
 * byte (file to frame, frame to socket, socket to frame, frame to file)
 * and two checksum passes, as in the agents.
 *
 *   copy_floor recv PORT FILE          accept one connection, write what
 *                                      arrives into FILE, print
 *                                      "bytes seconds"
 *   copy_floor send HOST PORT FILE N   send FILE's first N bytes
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/fdio.h"
#include "migration/xfer_frame.h"

#define BS 4096u
#define STRIDE (8u + BS)
#define PER_FRAME (FC_XFER_MAX_PAYLOAD / STRIDE)   /* 255 */

static double
now_s(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The data parts of a frame's n entries, skipping their ids. */
static void
data_iov(uint8_t *frame, uint32_t n, struct iovec *iov)
{
  for (uint32_t i = 0; i < n; i++)
    iov[i] = (struct iovec){ frame + (size_t)i * STRIDE + 8, BS };
}

static int
recv_full(int fd, void *buf, size_t len)
{
  size_t got = 0;

  while (got < len) {
    ssize_t n = recv(fd, (uint8_t *)buf + got, len - got, 0);

    if (n == 0)
      return got ? -EPROTO : 1;     /* 1: the sender is done */
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    got += (size_t)n;
  }
  return 0;
}

static int
do_recv(int port, const char *path)
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  struct iovec iov[PER_FRAME];
  uint8_t hdr[FC_XFER_HEADER_SIZE], *frame = malloc(FC_XFER_MAX_PAYLOAD);
  int one = 1, l = socket(AF_INET, SOCK_STREAM, 0), c = -1, fd = -1, r = 0;
  uint64_t total = 0;
  double t0 = 0;

  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (!frame || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||
      (fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) < 0) {
    perror("copy_floor: recv");
    return 1;
  }
  printf("ready\n");
  fflush(stdout);
  if ((c = accept(l, NULL, NULL)) < 0) {
    perror("copy_floor: accept");
    return 1;
  }
  for (;;) {
    struct fc_xfer_header h;
    uint32_t n;

    if ((r = recv_full(c, hdr, sizeof hdr)))
      break;
    if (!total)
      t0 = now_s();
    if ((r = fc_xfer_decode_header(hdr, &h)) || (r = recv_full(c, frame, h.length)) ||
        (r = fc_xfer_check_payload(hdr, &h, frame)))
      break;
    if (h.length % STRIDE) {
      r = -EPROTO;
      break;
    }
    n = h.length / STRIDE;
    data_iov(frame, n, iov);
    if (pwritev(fd, iov, (int)n, (off_t)(fc_get_le64(frame) * BS)) != (ssize_t)(n * BS)) {
      r = -EIO;
      break;
    }
    total += (uint64_t)n * BS;
  }
  if (r < 0) {
    fprintf(stderr, "copy_floor: recv: %s\n", strerror(-r));
    return 1;
  }
  printf("%llu %.6f\n", (unsigned long long)total, now_s() - t0);
  free(frame);
  close(fd);
  close(c);
  close(l);
  return 0;
}

static int
do_send(const char *host, int port, const char *path, uint64_t bytes)
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
  struct iovec iov[PER_FRAME];
  uint8_t hdr[FC_XFER_HEADER_SIZE], *frame = malloc(FC_XFER_MAX_PAYLOAD);
  int s = socket(AF_INET, SOCK_STREAM, 0), fd = open(path, O_RDONLY | O_CLOEXEC);
  uint64_t block = 0, blocks = bytes / BS;

  if (!frame || fd < 0 || inet_pton(AF_INET, host, &a.sin_addr) != 1 ||
      connect(s, (struct sockaddr *)&a, sizeof a)) {
    perror("copy_floor: send");
    return 1;
  }
  while (block < blocks) {
    uint32_t n = blocks - block < PER_FRAME ? (uint32_t)(blocks - block) : PER_FRAME;
    struct iovec out[2];

    for (uint32_t i = 0; i < n; i++)
      fc_put_le64(frame + (size_t)i * STRIDE, block + i);
    data_iov(frame, n, iov);
    if (preadv(fd, iov, (int)n, (off_t)(block * BS)) != (ssize_t)(n * BS)) {
      perror("copy_floor: preadv");
      return 1;
    }
    fc_xfer_encode_header(hdr, FC_XFER_BLOCK, 0, frame, n * STRIDE);
    out[0] = (struct iovec){ hdr, sizeof hdr };
    out[1] = (struct iovec){ frame, n * STRIDE };
    if (fc_full_sendmsg(s, out, 2)) {
      perror("copy_floor: send");
      return 1;
    }
    block += n;
  }
  close(s);
  close(fd);
  free(frame);
  return 0;
}

int
main(int argc, char **argv)
{
  if (argc == 4 && !strcmp(argv[1], "recv"))
    return do_recv(atoi(argv[2]), argv[3]);
  if (argc == 6 && !strcmp(argv[1], "send"))
    return do_send(argv[2], atoi(argv[3]), argv[4], strtoull(argv[5], NULL, 10));
  fprintf(stderr, "usage: copy_floor recv PORT FILE | send HOST PORT FILE BYTES\n");
  return 2;
}

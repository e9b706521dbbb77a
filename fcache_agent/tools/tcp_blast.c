/* SPDX-License-Identifier: Apache-2.0 */
/* A plain TCP stream, the peer the migration benchmark compares the
 * transfer protocol against: the same bytes over the same loopback with
 * nothing but send/recv.
 *
 *   tcp_blast recv PORT           accept one connection, read to EOF,
 *                                 print "bytes seconds"
 *   tcp_blast send HOST PORT N    send N bytes in 1 MiB writes
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (1 << 20)

static double
now_s(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
do_recv(int port)
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  int one = 1, l = socket(AF_INET, SOCK_STREAM, 0), c;
  char *buf = malloc(CHUNK);
  uint64_t total = 0;
  double t0 = 0;
  ssize_t n;

  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (!buf || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1)) {
    perror("tcp_blast: listen");
    return 1;
  }
  printf("ready\n");
  fflush(stdout);
  c = accept(l, NULL, NULL);
  if (c < 0) {
    perror("tcp_blast: accept");
    return 1;
  }
  while ((n = recv(c, buf, CHUNK, 0)) > 0) {
    if (!total)
      t0 = now_s();
    total += (uint64_t)n;
  }
  printf("%llu %.6f\n", (unsigned long long)total, now_s() - t0);
  free(buf);
  return 0;
}

static int
do_send(const char *host, int port, uint64_t bytes)
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
  int s = socket(AF_INET, SOCK_STREAM, 0);
  char *buf = calloc(1, CHUNK);

  if (!buf || inet_pton(AF_INET, host, &a.sin_addr) != 1 ||
      connect(s, (struct sockaddr *)&a, sizeof a)) {
    perror("tcp_blast: connect");
    return 1;
  }
  while (bytes) {
    size_t len = bytes < CHUNK ? (size_t)bytes : CHUNK;
    ssize_t n = send(s, buf, len, MSG_NOSIGNAL);
    if (n <= 0) {
      perror("tcp_blast: send");
      return 1;
    }
    bytes -= (uint64_t)n;
  }
  close(s);
  free(buf);
  return 0;
}

int
main(int argc, char **argv)
{
  if (argc == 3 && !strcmp(argv[1], "recv"))
    return do_recv(atoi(argv[2]));
  if (argc == 5 && !strcmp(argv[1], "send"))
    return do_send(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10));
  fprintf(stderr, "usage: tcp_blast recv PORT | send HOST PORT BYTES\n");
  return 2;
}

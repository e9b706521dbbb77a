/* SPDX-License-Identifier: Apache-2.0 */
/* A connection's request stream read through a buffer (nbd_inbuf.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "nbd_handshake.h"
#include "nbd_inbuf.h"

int nbd_inbuf_init(struct nbd_inbuf *in, int fd)
{
  *in = (struct nbd_inbuf){ .fd = fd, .buf = malloc(NBD_INBUF_SIZE) };
  return in->buf ? 0 : -ENOMEM;
}

void nbd_inbuf_free(struct nbd_inbuf *in)
{
  free(in->buf);
  in->buf = NULL;
  in->pos = in->len = 0;
}

/* Whatever the client has sent, up to a buffer's worth, waiting for at
 * least one byte.  0, -ENODATA at the end of the stream, or -errno. */
static int refill(struct nbd_inbuf *in)
{
  for (;;) {
    ssize_t n = recv(in->fd, in->buf, NBD_INBUF_SIZE, 0);

    if (n > 0) {
      in->pos = 0;
      in->len = (size_t)n;
      return 0;
    }
    if (n == 0)
      return -ENODATA;
    if (errno != EINTR)
      return -errno;
  }
}

/* Consume up to len bytes into dst (NULL: drop them); how many. */
static size_t take(struct nbd_inbuf *in, uint8_t *dst, uint64_t len)
{
  size_t n = in->len - in->pos;

  if (n > len)
    n = (size_t)len;
  if (dst)
    memcpy(dst, in->buf + in->pos, n);
  in->pos += n;
  return n;
}

int nbd_inbuf_read(struct nbd_inbuf *in, void *dst, size_t len)
{
  uint8_t *d = dst;
  size_t got = take(in, d, len);

  while (got < len) {
    int r;

    if (len - got >= NBD_INBUF_SIZE) {
      /* A large payload: no detour through the buffer. */
      r = nbd_recv_full(in->fd, d + got, len - got);
      if (r == -ENODATA && got > 0)
        r = -ECONNRESET;
      return r;
    }
    if ((r = refill(in)) < 0)
      return r == -ENODATA && got > 0 ? -ECONNRESET : r;
    got += take(in, d + got, len - got);
  }
  return 0;
}

int nbd_inbuf_skip(struct nbd_inbuf *in, uint64_t len)
{
  uint64_t got = take(in, NULL, len);

  while (got < len) {
    int r = refill(in);

    if (r < 0)
      return r == -ENODATA ? -ECONNRESET : r;
    got += take(in, NULL, len - got);
  }
  return 0;
}

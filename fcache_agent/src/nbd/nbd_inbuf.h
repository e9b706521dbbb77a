/* SPDX-License-Identifier: Apache-2.0 */
/* The request stream of one connection, read through a buffer: one recv()
 * brings in every request the client has queued (a 28-byte header each),
 * where reading them one by one costs a system call per header.  Used by
 * one reader at a time (the connection's read_lock).  Not a public
 * header. */
#ifndef FCACHE_NBD_INBUF_H
#define FCACHE_NBD_INBUF_H

#include <stddef.h>
#include <stdint.h>

/* Big enough for a deep queue of headers and small writes; a payload at
 * least this large is received straight into its own buffer. */
#define NBD_INBUF_SIZE (64u * 1024)

struct nbd_inbuf {
  int fd;
  uint8_t *buf;               /* NBD_INBUF_SIZE bytes */
  size_t pos, len;            /* buf[pos, len) is received, not consumed */
};

/* 0, or -errno (ENOMEM). */
int nbd_inbuf_init(struct nbd_inbuf *in, int fd);
void nbd_inbuf_free(struct nbd_inbuf *in);
/* Exactly `len` bytes of the stream, waiting for them: 0, -ENODATA if the
 * stream ended before the first of them, -ECONNRESET if it ended within
 * them, or -errno of recv(). */
int nbd_inbuf_read(struct nbd_inbuf *in, void *dst, size_t len);
/* The same, dropping the bytes. */
int nbd_inbuf_skip(struct nbd_inbuf *in, uint64_t len);
/* Bytes received and not consumed yet: reading fewer than this never
 * waits for the client. */
static inline size_t nbd_inbuf_buffered(const struct nbd_inbuf *in)
{
  return in->len - in->pos;
}

#endif

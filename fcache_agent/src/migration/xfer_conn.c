/* SPDX-License-Identifier: Apache-2.0 */
/* A framed transfer stream: frames over TCP, through TLS when the stream
 * has a session (xfer_tls.c). */
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/fdio.h"
#include "common/lockcheck.h"
#include "common/ratelimit.h"
#include "xfer_conn.h"

/* Bytes of TLS records read from the socket and not yet taken by GnuTLS;
 * bytes of records GnuTLS made for the frame being sent, not yet sent. */
#define READAHEAD (256u << 10)
#define WRITEBEHIND (256u << 10)

struct fc_xfer_readahead {
  int fd;
  size_t pos, len;
  uint8_t buf[READAHEAD];
  /* GnuTLS pushes one 16 KiB record per call, a system call each; the
   * records of one frame are gathered here and sent together.  Locked:
   * the receiving thread's GnuTLS may write too (a TLS 1.3 KeyUpdate
   * answer), and that is sent at once, in order. */
  pthread_mutex_t wlock;
  size_t wlen;
  uint8_t wbuf[WRITEBEHIND];
};

/* This thread is inside fc_xfer_send: what GnuTLS pushes may wait for the
 * end of the frame. */
static _Thread_local bool sending_frame;

void
fc_xfer_conn_init(struct fc_xfer_conn *c, int fd)
{
  int one = 1;

  c->fd = fd;
  c->tls = NULL;
  c->tls_psk = NULL;
  c->ra = NULL;
  c->bytes_sent = c->bytes_received = 0;
  pthread_mutex_init(&c->send_lock, NULL);
  /* Fetch requests and replies are small and latency-bound. */
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void
fc_xfer_conn_shutdown(struct fc_xfer_conn *c)
{
  if (c->fd >= 0)
    shutdown(c->fd, SHUT_RDWR);
}

static void
tls_free(struct fc_xfer_conn *c)
{
  if (c->tls)
    gnutls_deinit(c->tls);
  if (c->tls_psk)
    gnutls_psk_free_client_credentials(c->tls_psk);
  if (c->ra)
    pthread_mutex_destroy(&c->ra->wlock);
  free(c->ra);
  c->tls = NULL;
  c->tls_psk = NULL;
  c->ra = NULL;
}

static ssize_t
ra_pull(gnutls_transport_ptr_t p, void *data, size_t len)
{
  struct fc_xfer_readahead *ra = p;

  if (ra->pos == ra->len) {
    ssize_t n = recv(ra->fd, ra->buf, sizeof ra->buf, 0);

    if (n <= 0)
      return n;        /* GnuTLS reads errno: EINTR, EAGAIN (SO_RCVTIMEO) */
    ra->pos = 0;
    ra->len = (size_t)n;
  }
  if (len > ra->len - ra->pos)
    len = ra->len - ra->pos;
  memcpy(data, ra->buf + ra->pos, len);
  ra->pos += len;
  return (ssize_t)len;
}

/* GnuTLS's wait for data under gnutls_record_set_timeout: what is read
 * ahead counts. */
static int
ra_pull_timeout(gnutls_transport_ptr_t p, unsigned ms)
{
  struct fc_xfer_readahead *ra = p;
  struct pollfd pfd = { ra->fd, POLLIN, 0 };

  if (ra->pos < ra->len)
    return 1;
  return poll(&pfd, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
}

/* Under ra->wlock. */
static int
wflush_locked(struct fc_xfer_readahead *ra)
{
  FC_ASSERT_HELD(&ra->wlock);
  size_t off = 0;

  while (off < ra->wlen) {
    ssize_t n = send(ra->fd, ra->wbuf + off, ra->wlen - off, MSG_NOSIGNAL);

    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -errno;
    off += (size_t)n;
  }
  ra->wlen = 0;
  return 0;
}

static ssize_t
ra_push(gnutls_transport_ptr_t p, const giovec_t *iov, int cnt)
{
  struct fc_xfer_readahead *ra = p;
  size_t total = 0;
  int r = 0;

  pthread_mutex_lock(&ra->wlock);
  for (int i = 0; i < cnt && !r; i++) {
    const uint8_t *b = iov[i].iov_base;
    size_t len = iov[i].iov_len;

    if (ra->wlen + len > sizeof ra->wbuf)
      r = wflush_locked(ra);
    while (!r && len > sizeof ra->wbuf) {       /* too big to gather */
      ssize_t n = send(ra->fd, b, len, MSG_NOSIGNAL);
      if (n < 0 && errno != EINTR)
        r = -errno;
      else if (n > 0) {
        b += n;
        len -= (size_t)n;
      }
    }
    if (!r) {
      memcpy(ra->wbuf + ra->wlen, b, len);
      ra->wlen += len;
    }
    total += iov[i].iov_len;
  }
  if (!r && !sending_frame)
    r = wflush_locked(ra);
  pthread_mutex_unlock(&ra->wlock);
  if (r) {
    errno = -r;
    return -1;
  }
  return (ssize_t)total;
}

int
fc_xfer_conn_read_ahead(struct fc_xfer_conn *c)
{
  if (!c->tls || c->ra)
    return 0;
  if (!(c->ra = malloc(sizeof *c->ra)))
    return -ENOMEM;
  c->ra->fd = c->fd;
  c->ra->pos = c->ra->len = 0;
  c->ra->wlen = 0;
  pthread_mutex_init(&c->ra->wlock, NULL);
  gnutls_transport_set_ptr(c->tls, c->ra);
  gnutls_transport_set_pull_function(c->tls, ra_pull);
  gnutls_transport_set_pull_timeout_function(c->tls, ra_pull_timeout);
  gnutls_transport_set_vec_push_function(c->tls, ra_push);
  return 0;
}

void
fc_xfer_conn_destroy(struct fc_xfer_conn *c)
{
  tls_free(c);
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
  pthread_mutex_destroy(&c->send_lock);
}

void
fc_xfer_conn_move(struct fc_xfer_conn *dst, struct fc_xfer_conn *src)
{
  fc_xfer_conn_init(dst, src->fd);
  dst->tls = src->tls;
  dst->tls_psk = src->tls_psk;
  dst->ra = src->ra;
  src->tls = NULL;
  src->tls_psk = NULL;
  src->ra = NULL;
  src->fd = -1;
}

/* GnuTLS's verdict as an errno: the peer went away, or the stream is
 * not what its keys say (tampered with, or not TLS at all). */
static int
tls_errno(ssize_t r)
{
  switch (r) {
  case GNUTLS_E_TIMEDOUT:
  case GNUTLS_E_AGAIN:
    return -ETIMEDOUT;
  case GNUTLS_E_PREMATURE_TERMINATION:
  case GNUTLS_E_PUSH_ERROR:
  case GNUTLS_E_PULL_ERROR:
    return -ECONNRESET;
  default:
    return -EBADMSG;
  }
}

/* Header and payload into as few records as fit: one send per frame, not
 * one per piece, and full-size records for the encryption to work on. */
static int
tls_send_all(struct fc_xfer_conn *c, const struct iovec *iov, int n)
{
  gnutls_session_t s = c->tls;
  ssize_t w;
  int r;

  sending_frame = c->ra != NULL;
  gnutls_record_cork(s);
  for (int i = 0; i < n; i++) {
    const char *p = iov[i].iov_base;
    size_t left = iov[i].iov_len;

    while (left) {
      w = gnutls_record_send(s, p, left);
      if (w == GNUTLS_E_INTERRUPTED || w == GNUTLS_E_AGAIN)
        continue;
      if (w < 0) {
        gnutls_record_uncork(s, 0);
        sending_frame = false;
        return tls_errno(w);
      }
      p += w;
      left -= (size_t)w;
    }
  }
  do {
    w = gnutls_record_uncork(s, GNUTLS_RECORD_WAIT);
  } while (w == GNUTLS_E_INTERRUPTED || w == GNUTLS_E_AGAIN);
  sending_frame = false;
  r = w < 0 ? tls_errno(w) : 0;
  if (c->ra) {
    /* The frame's records, gathered by ra_push: out in one go. */
    pthread_mutex_lock(&c->ra->wlock);
    if (!r)
      r = wflush_locked(c->ra);
    c->ra->wlen = 0;
    pthread_mutex_unlock(&c->ra->wlock);
  }
  return r;
}

int
fc_xfer_send(struct fc_xfer_conn *c, uint8_t type, uint16_t flags,
             const void *p1, uint32_t l1, const void *p2, uint32_t l2)
{
  uint8_t hdr[FC_XFER_HEADER_SIZE];
  struct iovec iov[3];
  uint32_t crc;
  int r;

  if ((uint64_t)l1 + l2 > FC_XFER_MAX_PAYLOAD)
    return -EMSGSIZE;
  fc_xfer_encode_header(hdr, type, flags, NULL, l1 + l2);
  crc = crc32c(0, hdr, 12);
  if (l1)
    crc = crc32c(crc, p1, l1);
  if (l2)
    crc = crc32c(crc, p2, l2);
  fc_put_le32(hdr + 12, crc);
  iov[0] = (struct iovec){ hdr, sizeof hdr };
  iov[1] = (struct iovec){ (void *)p1, l1 };
  iov[2] = (struct iovec){ (void *)p2, l2 };
  pthread_mutex_lock(&c->send_lock);
  r = c->tls ? tls_send_all(c, iov, 3) : fc_full_sendmsg(c->fd, iov, 3);
  if (!r)
    c->bytes_sent += sizeof hdr + l1 + l2;
  pthread_mutex_unlock(&c->send_lock);
  return r;
}

int
fc_xfer_send_json(struct fc_xfer_conn *c, uint8_t type, const char *json)
{
  return fc_xfer_send(c, type, 0, json, (uint32_t)strlen(json), NULL, 0);
}

static int
recv_all(int fd, void *buf, size_t len)
{
  while (len) {
    ssize_t n = recv(fd, buf, len, 0);

    if (n == 0)
      return -ECONNRESET;
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    buf = (char *)buf + n;
    len -= (size_t)n;
  }
  return 0;
}

/* recv_all, but the whole of it by `until` (CLOCK_MONOTONIC ns): a peer
 * that sends a byte now and then must not hold the reader longer. */
static int
recv_all_by(int fd, void *buf, size_t len, uint64_t until)
{
  while (len) {
    uint64_t now = fc_monotonic_ns();
    struct pollfd p = { fd, POLLIN, 0 };
    ssize_t n;
    int r;

    if (now >= until)
      return -ETIMEDOUT;
    r = poll(&p, 1, (int)((until - now + 999999) / 1000000));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return -errno;
    if (r == 0)
      return -ETIMEDOUT;
    n = recv(fd, buf, len, MSG_DONTWAIT);
    if (n == 0)
      return -ECONNRESET;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      return -errno;
    }
    buf = (char *)buf + n;
    len -= (size_t)n;
  }
  return 0;
}

/* recv_all through TLS; until as in recv_all_by, or 0. */
static int
tls_recv_all(gnutls_session_t s, void *buf, size_t len, uint64_t until)
{
  if (!until)
    gnutls_record_set_timeout(s, 0);    /* a deadline of an earlier frame */
  while (len) {
    ssize_t n;

    if (until) {
      uint64_t now = fc_monotonic_ns();

      if (now >= until)
        return -ETIMEDOUT;
      gnutls_record_set_timeout(s, (unsigned)((until - now + 999999) / 1000000));
    }
    n = gnutls_record_recv(s, buf, len);
    if (n == 0)
      return -ECONNRESET;
    if (n == GNUTLS_E_INTERRUPTED || (n == GNUTLS_E_AGAIN && until))
      continue;
    if (n < 0)
      return tls_errno(n);
    buf = (char *)buf + n;
    len -= (size_t)n;
  }
  return 0;
}

static int
recv_bytes(struct fc_xfer_conn *c, void *buf, size_t len, uint64_t until)
{
  if (c->tls)
    return tls_recv_all(c->tls, buf, len, until);
  return until ? recv_all_by(c->fd, buf, len, until) : recv_all(c->fd, buf, len);
}

/* One frame; until (CLOCK_MONOTONIC ns) bounds the whole of it, or 0 for
 * no bound of our own (the socket's SO_RCVTIMEO, if any, per recv). */
static int
recv_frame(struct fc_xfer_conn *c, struct fc_xfer_header *h, uint8_t *buf,
           uint32_t cap, uint64_t until)
{
  uint8_t hdr[FC_XFER_HEADER_SIZE];
  int r;

  r = recv_bytes(c, hdr, sizeof hdr, until);
  if (r)
    return r;
  r = fc_xfer_decode_header(hdr, h);
  if (r)
    return r;
  if (h->length > cap)
    return -EMSGSIZE;
  r = recv_bytes(c, buf, h->length, until);
  if (r)
    return r;
  c->bytes_received += sizeof hdr + h->length;
  return fc_xfer_check_payload(hdr, h, buf);
}

int
fc_xfer_recv(struct fc_xfer_conn *c, struct fc_xfer_header *h, uint8_t *buf,
             uint32_t cap)
{
  return recv_frame(c, h, buf, cap, 0);
}

int
fc_xfer_recv_by(struct fc_xfer_conn *c, struct fc_xfer_header *h, uint8_t *buf,
                uint32_t cap, unsigned timeout_ms)
{
  return recv_frame(c, h, buf, cap,
                    fc_monotonic_ns() + (uint64_t)timeout_ms * 1000000u);
}


int
fc_split_hostport(const char *hostport, char *host, size_t hostlen,
                  char *port, size_t portlen)
{
  const char *colon = strrchr(hostport, ':');
  const char *h = hostport;
  size_t hl;

  if (!colon || !colon[1])
    return -EINVAL;
  hl = (size_t)(colon - hostport);
  if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {   /* [::1]:7440 */
    h++;
    hl -= 2;
  }
  if (hl == 0 || hl >= hostlen || strlen(colon + 1) >= portlen)
    return -EINVAL;
  memcpy(host, h, hl);
  host[hl] = '\0';
  strcpy(port, colon + 1);
  return 0;
}

int
fc_xfer_connect(const char *hostport, int timeout_ms, int *fd_out,
                char *err, size_t errlen)
{
  struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
  struct addrinfo *res = NULL, *ai;
  char host[256], port[16];
  int r = -EHOSTUNREACH, fd = -1;

  if (fc_split_hostport(hostport, host, sizeof host, port, sizeof port)) {
    snprintf(err, errlen, "'%s' is not host:port", hostport);
    return -EINVAL;
  }
  r = getaddrinfo(host, port, &hints, &res);
  if (r) {
    snprintf(err, errlen, "cannot resolve %s: %s", hostport, gai_strerror(r));
    return -EHOSTUNREACH;
  }
  r = -EHOSTUNREACH;
  for (ai = res; ai; ai = ai->ai_next) {
    struct pollfd pfd;
    socklen_t len = sizeof r;
    int soerr = 0;

    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
      continue;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
      pfd = (struct pollfd){ .fd = fd, .events = POLLOUT };
      if (poll(&pfd, 1, timeout_ms) == 1 &&
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0) {
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        r = 0;
        break;
      }
      r = soerr ? -soerr : -ETIMEDOUT;
    } else {
      r = -errno;
    }
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (r) {
    snprintf(err, errlen, "cannot connect to migration peer %s: %s", hostport,
             strerror(-r));
    return r;
  }
  *fd_out = fd;
  return 0;
}

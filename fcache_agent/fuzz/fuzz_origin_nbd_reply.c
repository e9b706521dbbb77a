/* SPDX-License-Identifier: Apache-2.0 */
/* NBD origin: what a server sends back in transmission, as the agent
 * handles it (origin/origin_nbd*.c over libnbd).
 *
 * A stub server on a unix socket (a thread of the harness) answers a
 * fixed, valid fixed-newstyle negotiation with the agent's own server
 * code (nbd_handshake(): structured replies and base:allocation on offer,
 * a 1 MiB export that can flush, FUA, trim and zero), and then replays the
 * input as its replies.  fc_origin_open_nbd() opens the origin against it
 * as the agent does, one connection; a few requests chosen by the input
 * run on it, then it is closed.
 *
 * Input:
 *   byte 0:   which requests run, in this order: bit 0 a 4 KiB read, 1 a
 *             write (bit 7: FUA), 2 a flush, 3 a block status of 64 KiB
 *             (up to 8 extents), 4 one with REQ_ONE, 5 a trim, 6 a zero,
 *             then a read of the export's last 32 KiB
 *   then records {u8 ctl, u16 len (little-endian), len bytes}: each is
 *   sent as it is, after the server read the client's next request
 *   unless ctl bit 1 (another chunk for the same request) or none came
 *   within 20 ms (the client is waiting for the rest of a reply); ctl bit 0
 *   writes that request's cookie at bytes 8..15 (where simple and
 *   structured replies both carry it), which random bytes never match.
 * When the records run out (at most 64 are used) or the origin says
 * goodbye (NBD_CMD_DISC) the server hangs up.
 *
 * libnbd parses the replies (its parser is libnbd's); what is checked is
 * the agent's side of it: every request ends, with 0 or a negative errno,
 * and a block status answers 1..max extents, in order, each of at least
 * one byte, within what was asked, with known flags only (the contract of
 * fc_origin_block_status).  A connection the replies break is given up
 * and reconnection fails at once (the socket is gone by then), so later
 * requests fail fast; a reply that never comes ends at the stall limit
 * (200 ms here, origin_stall_timeout_s in the agent), which bounds an
 * input.
 */
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/un.h>

#include "common/fdio.h"
#include "fuzz.h"
#include "nbd/nbd_handshake.h"
#include "origin/origin.h"
#include "origin/origin_policy.h"

#define EXPORT_SIZE (1u << 20)
#define REQ_HDR 28u
#define CMD_WRITE 1u
#define CMD_DISC 2u
/* More replies than the requests that run could use: a bound on the
 * time an input of tiny records costs. */
#define MAX_RECORDS 64
#define REQUEST_WAIT_MS 20

static char sock_path[256];

/* The stub export: only what the handshake advertises matters; no
 * callback runs (the harness, not the agent's server, serves requests). */
static int nop_pread(void *h, void *buf, uint32_t count, uint64_t offset)
{
  return -EIO;
}

static int nop_pwrite(void *h, const void *buf, uint32_t count,
                      uint64_t offset, bool fua)
{
  return -EIO;
}

static int nop_flush(void *h)
{
  return -EIO;
}

static int nop_trim(void *h, uint32_t count, uint64_t offset, bool fua)
{
  return -EIO;
}

static int nop_zero(void *h, uint32_t count, uint64_t offset, bool fua,
                    bool may_trim)
{
  return -EIO;
}

static int nop_block_status(void *h, uint32_t count, uint64_t offset,
                            struct fc_extent *ext, uint32_t max)
{
  return -EIO;
}

static const struct fc_io_ops nop_ops = {
  .pread = nop_pread, .pwrite = nop_pwrite, .flush = nop_flush,
  .trim = nop_trim, .zero = nop_zero, .block_status = nop_block_status,
};

struct stub {
  int lfd;
  const uint8_t *rec, *end;     /* the records */
};

static bool recv_all(int fd, uint8_t *buf, size_t len)
{
  return nbd_recv_full(fd, buf, len) == 0;
}

static bool send_all(int fd, uint8_t *buf, size_t len)
{
  struct iovec iov = { buf, len };

  return fc_full_sendmsg(fd, &iov, 1) == 0;
}

/* The client's next request: its cookie; a write's payload is read and
 * dropped.  False once the client is gone or sent garbage. */
static bool next_request(int fd, uint8_t cookie[8])
{
  uint8_t hdr[REQ_HDR], sink[4096];
  uint32_t len;

  if (!recv_all(fd, hdr, sizeof hdr))
    return false;
  memcpy(cookie, hdr + 8, 8);
  len = (uint32_t)hdr[24] << 24 | (uint32_t)hdr[25] << 16 |
        (uint32_t)hdr[26] << 8 | hdr[27];
  /* The origin is closing: nothing more to answer. */
  if (((uint32_t)hdr[6] << 8 | hdr[7]) == CMD_DISC)
    return false;
  if (((uint32_t)hdr[6] << 8 | hdr[7]) != CMD_WRITE)
    return true;
  /* The harness's writes are 4 KiB; anything larger is not its client. */
  if (len > EXPORT_SIZE)
    return false;
  while (len > 0) {
    size_t n = len < sizeof sink ? len : sizeof sink;
    if (!recv_all(fd, sink, n))
      return false;
    len -= (uint32_t)n;
  }
  return true;
}

static void *stub_main(void *arg)
{
  struct stub *s = arg;
  struct fc_export exp = {
    .name = "", .size = EXPORT_SIZE, .min_block = 512, .pref_block = 4096,
    .max_block = 64 * 1024, .ops = &nop_ops,
  };
  struct timeval tv = { .tv_sec = 2 };
  struct nbd_session sess;
  struct pollfd p = { .fd = s->lfd, .events = POLLIN };
  uint8_t cookie[8] = { 0 }, buf[65536 + 8];
  int fd;

  /* The main thread gives up on the socket once the open returned. */
  if (poll(&p, 1, 5000) != 1 || (fd = accept4(s->lfd, NULL, NULL,
                                              SOCK_CLOEXEC)) < 0)
    return NULL;
  /* A backstop: the client's stall limit ends any wait well before. */
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (nbd_handshake(fd, &exp, &sess) != 1)
    goto out;
  for (unsigned i = 0; i < MAX_RECORDS && s->end - s->rec >= 3; i++) {
    uint8_t ctl = s->rec[0];
    size_t len = (size_t)s->rec[1] | (size_t)s->rec[2] << 8;

    s->rec += 3;
    if (len > (size_t)(s->end - s->rec))
      len = (size_t)(s->end - s->rec);
    /* A reply the records left unfinished keeps the client waiting for
     * the rest, not sending: after a short wait the next record goes out
     * anyway (as more of that reply), instead of both sides waiting for
     * the stall limit. */
    if (!(ctl & 2) && poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1,
                           REQUEST_WAIT_MS) == 1 &&
        !next_request(fd, cookie))
      break;
    memcpy(buf, s->rec, len);
    if ((ctl & 1) && len >= 16)
      memcpy(buf + 8, cookie, 8);
    s->rec += len;
    if (!send_all(fd, buf, len))
      break;
  }
out:
  shutdown(fd, SHUT_RDWR);
  close(fd);
  return NULL;
}

/* fc_origin_block_status's promise, for what the server said. */
static void check_extents(int r, uint32_t count, uint32_t max,
                          const struct fc_origin_extent *ext)
{
  uint64_t sum = 0;

  if (r < 0)
    return;
  if (r < 1 || (uint32_t)r > max)
    abort();
  for (int i = 0; i < r; i++) {
    if (ext[i].length == 0 ||
        (ext[i].flags & ~(uint32_t)(FC_ORIGIN_HOLE | FC_ORIGIN_ZERO)))
      abort();
    sum += ext[i].length;
  }
  if (sum > count)
    abort();
}

static void check(int r)
{
  if (r > 0)
    abort();
}

static void run_requests(struct fc_origin *o, uint8_t ops)
{
  static uint8_t buf[32 * 1024];
  struct fc_origin_extent ext[8];
  int r;

  if (o->size != EXPORT_SIZE)
    abort();
  if (ops & 1)
    check(fc_origin_pread(o, buf, 4096, 0));
  if (ops & 2)
    check(fc_origin_pwrite(o, buf, 4096, 4096, ops & 0x80));
  if (ops & 4)
    check(fc_origin_flush(o));
  if (ops & 8) {
    r = fc_origin_block_status(o, 64 * 1024, 0, ext, 8);
    check_extents(r, 64 * 1024, 8, ext);
  }
  if (ops & 16) {
    r = fc_origin_block_status(o, 64 * 1024, 8192, ext, 1);
    check_extents(r, 64 * 1024, 1, ext);
  }
  if (ops & 32)
    check(fc_origin_trim(o, 4096, 8192));
  if (ops & 64)
    check(fc_origin_zero(o, 4096, 12288, true));
  check(fc_origin_pread(o, buf, sizeof buf, EXPORT_SIZE - sizeof buf));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  snprintf(sock_path, sizeof sock_path, "%s/origin.sock", fuzz_setup_tmp());
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static const char prefixes[1][FC_PATH_MAX] = { "/" };
  struct fc_origin_policy pol = { .prefixes = prefixes, .n_prefixes = 1,
                                  .state_dir = "/nonexistent",
                                  .cache_path = "/nonexistent",
                                  .stall_ms = 200 };
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  struct stub s;
  struct fc_origin *o = NULL;
  pthread_t t;
  char uri[300], err[1024];
  int r;

  if (size < 1)
    return 0;
  s = (struct stub){ .rec = data + 1, .end = data + size };
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
  unlink(sock_path);
  s.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s.lfd < 0 || bind(s.lfd, (struct sockaddr *)&sa, sizeof sa) ||
      listen(s.lfd, 4) || pthread_create(&t, NULL, stub_main, &s)) {
    perror("fuzz: stub server");
    abort();
  }
  snprintf(uri, sizeof uri, "nbd+unix:///?socket=%s", sock_path);
  r = fc_origin_open_nbd(uri, 1, &pol, &o, err, sizeof err);
  /* No second connection: a reconnection fails at once. */
  unlink(sock_path);
  shutdown(s.lfd, SHUT_RDWR);
  if (r == 0) {
    run_requests(o, data[0]);
    fc_origin_close(o);
  } else if (r > 0) {
    abort();
  }
  pthread_join(t, NULL);
  close(s.lfd);
  return 0;
}

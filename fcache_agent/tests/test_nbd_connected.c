/* SPDX-License-Identifier: Apache-2.0 */
/* nbd_server_start_connected / nbd_server_serve_socket: a socket in the
 * transmission phase from its first byte, as the kernel's NBD client
 * speaks once netlink handed it the other end.  Raw requests on a
 * socketpair, as the kernel sends them: served, refused with the error
 * the policy of nbd_request.h names (the stream going on after each), or,
 * for what cannot be parsed or skipped, the connection closed. */
#include "testutil.h"

#include <sys/socket.h>
#include <sys/time.h>

#include "common/log.h"
#include "nbd/nbd_proto.h"
#include "nbd/nbd_request.h"
#include "nbd/nbd_server.h"

#define SIZE (1u << 20)
#define BLOCK 4096u
#define MAX_BLOCK (256u << 10)
#define TIMEOUT_S 60

static uint8_t disk[SIZE];

static int mem_pread(void *h, void *buf, uint32_t count, uint64_t offset)
{
  memcpy(buf, disk + offset, count);
  return 0;
}

static int mem_pwrite(void *h, const void *buf, uint32_t count,
                      uint64_t offset, bool fua)
{
  memcpy(disk + offset, buf, count);
  return 0;
}

static int mem_flush(void *h)
{
  return 0;
}

static const struct fc_io_ops rw_ops = {
  .pread = mem_pread, .pwrite = mem_pwrite, .flush = mem_flush,
};
static const struct fc_io_ops ro_ops = { .pread = mem_pread, .flush = mem_flush };

static struct fc_export export_of(bool read_only)
{
  return (struct fc_export){
    .name = "", .volume = "test", .size = SIZE, .min_block = BLOCK,
    .pref_block = BLOCK, .max_block = MAX_BLOCK, .read_only = read_only,
    .ops = read_only ? &ro_ops : &rw_ops,
  };
}

/* A server of exp serving one end of a socketpair; the other end is
 * the test's (the kernel's), with a receive timeout so that a missing
 * reply fails the test rather than hanging it. */
static struct nbd_server *serve(const struct fc_export *exp, int *client)
{
  struct timeval tv = { .tv_sec = 10 };
  struct nbd_server *srv = nbd_server_start_connected("test relay", exp, 2);
  int sv[2];

  assert_non_null(srv);
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  assert_int_equal(nbd_server_serve_socket(srv, sv[1]), 0);
  assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  *client = sv[0];
  return srv;
}

static void send_all(int fd, const void *p, size_t n)
{
  const uint8_t *b = p;

  while (n > 0) {
    ssize_t w = send(fd, b, n, MSG_NOSIGNAL);

    assert_true(w > 0);
    b += w;
    n -= (size_t)w;
  }
}

static void recv_all(int fd, void *p, size_t n)
{
  uint8_t *b = p;

  while (n > 0) {
    ssize_t r = recv(fd, b, n, 0);

    assert_true(r > 0);
    b += r;
    n -= (size_t)r;
  }
}

static void request(int fd, uint16_t flags, uint16_t type, uint64_t cookie,
                    uint64_t offset, uint32_t count)
{
  uint8_t h[NBD_REQUEST_SIZE];

  nbd_put32(h, NBD_REQUEST_MAGIC);
  nbd_put16(h + 4, flags);
  nbd_put16(h + 6, type);
  nbd_put64(h + 8, cookie);
  nbd_put64(h + 16, offset);
  nbd_put32(h + 24, count);
  send_all(fd, h, sizeof h);
}

/* The next reply: its error (a wire value), for cookie. */
static uint32_t reply(int fd, uint64_t cookie)
{
  uint8_t r[NBD_SIMPLE_REPLY_SIZE];

  recv_all(fd, r, sizeof r);
  assert_int_equal(nbd_get32(r), NBD_SIMPLE_REPLY_MAGIC);
  assert_int_equal(nbd_get64(r + 8), cookie);
  return nbd_get32(r + 4);
}

/* The peer closed: recv ends (0) rather than timing out. */
static void assert_closed(int fd)
{
  uint8_t b[64];
  ssize_t r;

  while ((r = recv(fd, b, sizeof b, 0)) > 0)
    ;
  assert_int_equal(r, 0);
}

static void test_reads_writes_flush(void **state)
{
  struct fc_export exp = export_of(false);
  uint64_t seed = 36;
  uint8_t *buf = malloc(MAX_BLOCK), *data = malloc(MAX_BLOCK);
  int fd;
  struct nbd_server *srv;

  tu_fill(disk, sizeof disk, &seed);
  srv = serve(&exp, &fd);
  request(fd, 0, NBD_CMD_READ, 1, 8 * BLOCK, 2 * BLOCK);
  assert_int_equal(reply(fd, 1), 0);
  recv_all(fd, buf, 2 * BLOCK);
  assert_memory_equal(buf, disk + 8 * BLOCK, 2 * BLOCK);

  /* A write with FUA, the kernel's way of a synchronous write, and the
   * whole largest request. */
  tu_fill(data, MAX_BLOCK, &seed);
  request(fd, NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, 2, SIZE - MAX_BLOCK, MAX_BLOCK);
  send_all(fd, data, MAX_BLOCK);
  assert_int_equal(reply(fd, 2), 0);
  request(fd, 0, NBD_CMD_READ, 3, SIZE - MAX_BLOCK, MAX_BLOCK);
  assert_int_equal(reply(fd, 3), 0);
  recv_all(fd, buf, MAX_BLOCK);
  assert_memory_equal(buf, data, MAX_BLOCK);
  request(fd, 0, NBD_CMD_FLUSH, 4, 0, 0);
  assert_int_equal(reply(fd, 4), 0);
  assert_int_equal(nbd_server_connections(srv), 1);

  /* The kernel's disconnect: the connection ends, the server serves on. */
  request(fd, 0, NBD_CMD_DISC, 5, 0, 0);
  assert_closed(fd);
  close(fd);
  for (int i = 0; i < 100 && nbd_server_connections(srv) > 0; i++)
    usleep(10000);
  assert_int_equal(nbd_server_connections(srv), 0);
  nbd_server_stop(srv);
  free(buf);
  free(data);
}

/* Each refused request is answered with its error and the stream goes
 * on: a read after them all still works. */
static void test_bad_requests_are_answered(void **state)
{
  struct fc_export exp = export_of(false);
  uint8_t *payload = calloc(1, 2 * MAX_BLOCK);
  uint8_t buf[BLOCK];
  int fd;
  struct nbd_server *srv = serve(&exp, &fd);

  request(fd, 0, NBD_CMD_READ, 1, SIZE, BLOCK);                /* past the end */
  assert_int_equal(reply(fd, 1), NBD_EINVAL);
  request(fd, 0, NBD_CMD_READ, 2, UINT64_MAX - 511, BLOCK);    /* wraps */
  assert_int_equal(reply(fd, 2), NBD_EINVAL);
  request(fd, 0, NBD_CMD_READ, 3, 512, BLOCK);                 /* misaligned */
  assert_int_equal(reply(fd, 3), NBD_EINVAL);
  request(fd, 0, NBD_CMD_READ, 4, 0, 2 * MAX_BLOCK);           /* too large */
  assert_int_equal(reply(fd, 4), NBD_EINVAL);
  request(fd, 0, NBD_CMD_READ, 5, 0, 0);                       /* empty */
  assert_int_equal(reply(fd, 5), NBD_EINVAL);
  request(fd, 0, 42, 6, 0, BLOCK);                             /* unknown */
  assert_int_equal(reply(fd, 6), NBD_EINVAL);
  request(fd, 0, NBD_CMD_TRIM, 7, 0, BLOCK);                   /* no callback */
  assert_int_equal(reply(fd, 7), NBD_EINVAL);
  /* No structured replies were negotiated: no block status. */
  request(fd, 0, NBD_CMD_BLOCK_STATUS, 8, 0, BLOCK);
  assert_int_equal(reply(fd, 8), NBD_EINVAL);
  request(fd, NBD_CMD_FLAG_DF, NBD_CMD_READ, 9, 0, BLOCK);     /* bad flag */
  assert_int_equal(reply(fd, 9), NBD_EINVAL);
  request(fd, 0, NBD_CMD_FLUSH, 10, 0, BLOCK);
  assert_int_equal(reply(fd, 10), NBD_EINVAL);
  /* A write past the end: its payload is read, then refused. */
  request(fd, 0, NBD_CMD_WRITE, 11, SIZE, BLOCK);
  send_all(fd, payload, BLOCK);
  assert_int_equal(reply(fd, 11), NBD_ENOSPC);
  /* A write larger than max_block: its payload is skipped. */
  request(fd, 0, NBD_CMD_WRITE, 12, 0, 2 * MAX_BLOCK);
  send_all(fd, payload, 2 * MAX_BLOCK);
  assert_int_equal(reply(fd, 12), NBD_EINVAL);

  request(fd, 0, NBD_CMD_READ, 13, 0, BLOCK);
  assert_int_equal(reply(fd, 13), 0);
  recv_all(fd, buf, BLOCK);
  assert_memory_equal(buf, disk, BLOCK);
  close(fd);
  nbd_server_stop(srv);
  free(payload);
}

static void test_read_only(void **state)
{
  struct fc_export exp = export_of(true);
  uint8_t payload[BLOCK] = { 0 }, before[BLOCK];
  int fd;
  struct nbd_server *srv = serve(&exp, &fd);

  assert_int_equal(nbd_server_tflags(&exp),
                   NBD_FLAG_HAS_FLAGS | NBD_FLAG_READ_ONLY |
                   NBD_FLAG_SEND_FLUSH | NBD_FLAG_CAN_MULTI_CONN);
  memcpy(before, disk, BLOCK);
  request(fd, 0, NBD_CMD_WRITE, 1, 0, BLOCK);
  send_all(fd, payload, BLOCK);
  assert_int_equal(reply(fd, 1), NBD_EPERM);
  assert_memory_equal(disk, before, BLOCK);
  request(fd, 0, NBD_CMD_FLUSH, 2, 0, 0);
  assert_int_equal(reply(fd, 2), 0);
  close(fd);
  nbd_server_stop(srv);
}

/* What cannot be parsed (a bad magic) or skipped (a payload beyond 32
 * MiB) ends the connection; the server stays usable for a new socket. */
static void test_unparsable_requests_close(void **state)
{
  struct fc_export exp = export_of(false);
  uint8_t junk[NBD_REQUEST_SIZE];
  int fd, sv[2];
  struct nbd_server *srv = serve(&exp, &fd);

  memset(junk, 0xa5, sizeof junk);
  send_all(fd, junk, sizeof junk);
  assert_closed(fd);
  close(fd);

  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  assert_int_equal(nbd_server_serve_socket(srv, sv[1]), 0);
  fd = sv[0];
  request(fd, 0, NBD_CMD_WRITE, 1, 0, 64u << 20);
  assert_closed(fd);
  close(fd);

  /* A socket the kernel closes half-way through a request. */
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  assert_int_equal(nbd_server_serve_socket(srv, sv[1]), 0);
  send_all(sv[0], junk, 10);
  close(sv[0]);
  nbd_server_stop(srv);
}

/* At most NBD_MAX_CONNS sockets at once (16): the kernel's relay needs
 * one, and a caller handing over sockets without end is refused. */
static void test_bounded_connections(void **state)
{
  struct fc_export exp = export_of(false);
  struct nbd_server *srv = nbd_server_start_connected("test relay", &exp, 1);
  int mine[17], sv[2];

  assert_non_null(srv);
  for (int i = 0; i < 17; i++) {
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    mine[i] = sv[0];
    assert_int_equal(nbd_server_serve_socket(srv, sv[1]), i < 16 ? 0 : -EBUSY);
  }
  for (int i = 0; i < 17; i++)
    close(mine[i]);
  nbd_server_stop(srv);
}

static void test_bad_servers_refused(void **state)
{
  struct fc_export exp = export_of(false);

  exp.one_session = true;
  errno = 0;
  assert_null(nbd_server_start_connected("test relay", &exp, 1));
  assert_int_equal(errno, EINVAL);
  exp = export_of(false);
  exp.min_block = 3000;
  assert_null(nbd_server_start_connected("test relay", &exp, 1));
  assert_int_equal(errno, EINVAL);
  exp = export_of(false);
  assert_null(nbd_server_start_connected("test relay", &exp, 0));
  assert_null(nbd_server_start_connected(NULL, &exp, 1));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_reads_writes_flush),
    cmocka_unit_test(test_bad_requests_are_answered),
    cmocka_unit_test(test_read_only),
    cmocka_unit_test(test_unparsable_requests_close),
    cmocka_unit_test(test_bounded_connections),
    cmocka_unit_test(test_bad_servers_refused),
  };

  fc_log_setup(FC_LOG_STDERR, FC_LOG_WARNING);
  return tu_run_isolated("nbd_connected", tests, sizeof tests / sizeof tests[0],
                         TIMEOUT_S);
}

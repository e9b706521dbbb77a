/* SPDX-License-Identifier: Apache-2.0 */
/* The connection's buffered request stream (nbd/nbd_inbuf.c) over a real
 * socket pair: requests split across and packed into segments, payloads
 * larger than the buffer, skipping, and the two ends of a stream (between
 * requests, inside one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nbd/nbd_inbuf.h"

static int sv[2];
static struct nbd_inbuf in;

static int
setup(void **state)
{
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  assert_int_equal(nbd_inbuf_init(&in, sv[0]), 0);
  return 0;
}

static int
teardown(void **state)
{
  nbd_inbuf_free(&in);
  close(sv[0]);
  if (sv[1] >= 0)
    close(sv[1]);
  return 0;
}

static void
put(const void *p, size_t n)
{
  assert_int_equal(write(sv[1], p, n), (ssize_t)n);
}

static void
end_stream(void)
{
  close(sv[1]);
  sv[1] = -1;
}

/* Many small records in one segment, then one split over two: each read
 * gets exactly its bytes, in order. */
static void
test_packed_and_split(void **state)
{
  uint8_t seg[28 * 5], got[28];

  for (size_t i = 0; i < sizeof seg; i++)
    seg[i] = (uint8_t)i;
  put(seg, sizeof seg);
  for (int r = 0; r < 5; r++) {
    assert_int_equal(nbd_inbuf_read(&in, got, sizeof got), 0);
    assert_memory_equal(got, seg + 28 * r, sizeof got);
  }
  put(seg, 10);
  put(seg + 10, 18);
  assert_int_equal(nbd_inbuf_read(&in, got, sizeof got), 0);
  assert_memory_equal(got, seg, sizeof got);
}

/* A payload larger than the buffer whose start was buffered with the
 * header before it; then a skip across the buffer's edge. */
static void
test_large_payload_and_skip(void **state)
{
  size_t big = 3 * NBD_INBUF_SIZE + 123;
  uint8_t *data = malloc(big + 64), *got = malloc(big);
  uint8_t hdr[28];
  pid_t pid;

  assert_non_null(data);
  assert_non_null(got);
  for (size_t i = 0; i < big + 64; i++)
    data[i] = (uint8_t)(i * 7 + 1);
  /* A writer of its own: the socket holds less than this. */
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    size_t off = 0;

    while (off < big + 64) {
      ssize_t n = write(sv[1], data + off, big + 64 - off);

      if (n <= 0)
        _exit(1);
      off += (size_t)n;
    }
    _exit(0);
  }
  assert_int_equal(nbd_inbuf_read(&in, hdr, sizeof hdr), 0);
  assert_memory_equal(hdr, data, sizeof hdr);
  assert_int_equal(nbd_inbuf_read(&in, got, big - sizeof hdr), 0);
  assert_memory_equal(got, data + sizeof hdr, big - sizeof hdr);
  assert_int_equal(nbd_inbuf_skip(&in, 40), 0);
  assert_int_equal(nbd_inbuf_read(&in, hdr, 24), 0);
  assert_memory_equal(hdr, data + big + 40, 24);
  free(data);
  free(got);
}

/* The client closing between requests is -ENODATA; inside a request,
 * or inside a skipped payload, -ECONNRESET. */
static void
test_stream_ends(void **state)
{
  uint8_t got[28];

  put("abcdefgh", 8);
  assert_int_equal(nbd_inbuf_read(&in, got, 4), 0);
  end_stream();
  assert_int_equal(nbd_inbuf_read(&in, got, 28), -ECONNRESET);
  assert_int_equal(nbd_inbuf_read(&in, got, 28), -ENODATA);
  assert_int_equal(nbd_inbuf_skip(&in, 1), -ECONNRESET);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_packed_and_split, setup, teardown),
    cmocka_unit_test_setup_teardown(test_large_payload_and_skip, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(test_stream_ends, setup, teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}

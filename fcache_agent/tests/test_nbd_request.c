/* SPDX-License-Identifier: Apache-2.0 */
/* NBD request decoding, validation and errno mapping: every rule of the
 * policy in nbd_request.h has a test, including the overflow-prone range
 * check and the FUA rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "nbd/nbd_request.h"

static int nop_rw(void *h, void *buf, uint32_t count, uint64_t offset)
{
  return 0;
}
static int nop_w(void *h, const void *buf, uint32_t count, uint64_t offset,
                 bool fua)
{
  return 0;
}
static int nop_flush(void *h)
{
  return 0;
}
static int nop_range(void *h, uint32_t count, uint64_t offset, bool fua)
{
  return 0;
}
static int nop_zero(void *h, uint32_t count, uint64_t offset, bool fua,
                    bool may_trim)
{
  return 0;
}

static const struct fc_io_ops all_ops = {
  .pread = nop_rw, .pwrite = nop_w, .flush = nop_flush,
  .trim = nop_range, .zero = nop_zero,
};
static int nop_bs(void *h, uint32_t count, uint64_t offset,
                  struct fc_extent *ext, uint32_t max)
{
  return 0;
}
static int nop_cache(void *h, uint32_t count, uint64_t offset)
{
  return 0;
}
static const struct fc_io_ops bs_ops = {
  .pread = nop_rw, .pwrite = nop_w, .flush = nop_flush,
  .block_status = nop_bs, .cache = nop_cache,
};
static const struct fc_io_ops rw_only_ops = { .pread = nop_rw, .pwrite = nop_w };
static const struct fc_io_ops read_only_ops = { .pread = nop_rw };

#define MiB (1024u * 1024)
#define SIZE (1024ull * MiB)   /* 1 GiB */

static struct fc_export export(void)
{
  return (struct fc_export){
    .name = "vol", .size = SIZE, .min_block = 512, .pref_block = 4096,
    .max_block = 32 * MiB, .ops = &all_ops,
  };
}

static int check(const struct fc_export *e, uint16_t type, uint16_t flags,
                 uint64_t offset, uint32_t count)
{
  struct nbd_request r = { .flags = flags, .type = type, .cookie = 1,
                           .offset = offset, .count = count };
  return nbd_request_validate(&r, e, NULL);
}

static int check_sess(const struct fc_export *e, const struct nbd_session *s,
                      uint16_t type, uint16_t flags, uint64_t offset,
                      uint32_t count)
{
  struct nbd_request r = { .flags = flags, .type = type, .cookie = 1,
                           .offset = offset, .count = count };
  return nbd_request_validate(&r, e, s);
}

static void test_decode_good(void **state)
{
  /* Written out byte by byte so the test does not share the encoder's
   * idea of byte order. */
  const uint8_t buf[NBD_REQUEST_SIZE] = {
    0x25, 0x60, 0x95, 0x13,                         /* magic */
    0x00, 0x01,                                     /* flags: FUA */
    0x00, 0x01,                                     /* type: WRITE */
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* cookie */
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x02, 0x00, /* offset */
    0x00, 0x00, 0x10, 0x00,                         /* count */
  };
  struct nbd_request r;

  assert_int_equal(nbd_request_decode(buf, &r), 0);
  assert_int_equal(r.flags, NBD_CMD_FLAG_FUA);
  assert_int_equal(r.type, NBD_CMD_WRITE);
  assert_true(r.cookie == 0x0102030405060708ull);
  assert_true(r.offset == 0x100000200ull);
  assert_int_equal(r.count, 4096);
  assert_int_equal(nbd_request_payload_len(&r), 4096);
  r.type = NBD_CMD_READ;
  assert_int_equal(nbd_request_payload_len(&r), 0);
}

static void test_decode_bad_magic(void **state)
{
  uint8_t buf[NBD_REQUEST_SIZE] = { 0 };
  struct nbd_request r;

  assert_int_equal(nbd_request_decode(buf, &r), -EPROTO);
  /* The magic in host (little-endian) order must not be accepted. */
  buf[0] = 0x13; buf[1] = 0x95; buf[2] = 0x60; buf[3] = 0x25;
  assert_int_equal(nbd_request_decode(buf, &r), -EPROTO);
  /* The historic pre-2.1.116 magic either. */
  nbd_put32(buf, 0x12560953);
  assert_int_equal(nbd_request_decode(buf, &r), -EPROTO);
}

static void test_valid_commands(void **state)
{
  struct fc_export e = export();

  assert_int_equal(check(&e, NBD_CMD_READ, 0, 0, 4096), 0);
  assert_int_equal(check(&e, NBD_CMD_WRITE, 0, 4096, 512), 0);
  assert_int_equal(check(&e, NBD_CMD_FLUSH, 0, 0, 0), 0);
  assert_int_equal(check(&e, NBD_CMD_TRIM, 0, 0, 1 * MiB), 0);
  assert_int_equal(check(&e, NBD_CMD_WRITE_ZEROES, 0, 0, 1 * MiB), 0);
  /* DISC has no reply, so nothing about it can be refused. */
  assert_int_equal(check(&e, NBD_CMD_DISC, 0xffff, 7, 9), 0);
}

static void test_unknown_command(void **state)
{
  struct fc_export e = export();

  assert_int_equal(check(&e, NBD_CMD_CACHE, 0, 0, 512), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_BLOCK_STATUS, 0, 0, 512), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_RESIZE, 0, 0, 512), -EINVAL);
  assert_int_equal(check(&e, 42, 0, 0, 512), -EINVAL);
  assert_int_equal(check(&e, 0xffff, 0, 0, 512), -EINVAL);
}

static void test_missing_callback(void **state)
{
  struct fc_export e = export();

  e.ops = &rw_only_ops;
  assert_int_equal(check(&e, NBD_CMD_FLUSH, 0, 0, 0), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_TRIM, 0, 0, 512), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_WRITE_ZEROES, 0, 0, 512), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_WRITE, 0, 0, 512), 0);
}

static void test_unknown_flags(void **state)
{
  struct fc_export e = export();

  assert_int_equal(check(&e, NBD_CMD_READ, NBD_CMD_FLAG_DF, 0, 512), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_READ, NBD_CMD_FLAG_REQ_ONE, 0, 512),
                   -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_WRITE, 0x8000, 0, 512), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_WRITE, NBD_CMD_FLAG_PAYLOAD_LEN, 0, 512),
                   -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_FLUSH, 0x0040, 0, 0), -EINVAL);
  /* NO_HOLE belongs to WRITE_ZEROES only. */
  assert_int_equal(check(&e, NBD_CMD_WRITE, NBD_CMD_FLAG_NO_HOLE, 0, 512),
                   -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_TRIM, NBD_CMD_FLAG_NO_HOLE, 0, 512),
                   -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_NO_HOLE, 0,
                         512), 0);
  /* FAST_ZERO is never advertised, so the spec asks for EINVAL. */
  assert_int_equal(check(&e, NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_FAST_ZERO, 0,
                         512), -EINVAL);
}

static void test_fua(void **state)
{
  struct fc_export e = export();
  uint16_t fua = NBD_CMD_FLAG_FUA;

  assert_int_equal(check(&e, NBD_CMD_WRITE, fua, 0, 512), 0);
  assert_int_equal(check(&e, NBD_CMD_TRIM, fua, 0, 512), 0);
  assert_int_equal(check(&e, NBD_CMD_WRITE_ZEROES,
                         fua | NBD_CMD_FLAG_NO_HOLE, 0, 512), 0);
  /* Spec: with SEND_FUA advertised the server MUST accept FUA on every
   * command, because real clients set it on reads and flushes. */
  assert_int_equal(check(&e, NBD_CMD_READ, fua, 0, 512), 0);
  assert_int_equal(check(&e, NBD_CMD_FLUSH, fua, 0, 0), 0);
  /* FUA does not excuse other mistakes. */
  assert_int_equal(check(&e, NBD_CMD_READ, fua | NBD_CMD_FLAG_DF, 0, 512),
                   -EINVAL);
}

static void test_flush_fields(void **state)
{
  struct fc_export e = export();

  assert_int_equal(check(&e, NBD_CMD_FLUSH, 0, 512, 0), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_FLUSH, 0, 0, 512), -EINVAL);
}

static void test_read_only(void **state)
{
  struct fc_export e = export();

  e.read_only = true;
  assert_int_equal(check(&e, NBD_CMD_WRITE, 0, 0, 512), -EPERM);
  assert_int_equal(check(&e, NBD_CMD_TRIM, 0, 0, 512), -EPERM);
  assert_int_equal(check(&e, NBD_CMD_WRITE_ZEROES, 0, 0, 512), -EPERM);
  assert_int_equal(check(&e, NBD_CMD_READ, 0, 0, 512), 0);
  assert_int_equal(check(&e, NBD_CMD_FLUSH, 0, 0, 0), 0);
  /* Without a pwrite at all a write is still a permission error. */
  e.ops = &read_only_ops;
  assert_int_equal(check(&e, NBD_CMD_WRITE, 0, 0, 512), -EPERM);
}

static void test_zero_count(void **state)
{
  struct fc_export e = export();

  assert_int_equal(check(&e, NBD_CMD_READ, 0, 0, 0), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_WRITE, 0, 0, 0), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_TRIM, 0, 0, 0), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_WRITE_ZEROES, 0, 0, 0), -EINVAL);
}

static void test_alignment(void **state)
{
  struct fc_export e = export();

  assert_int_equal(check(&e, NBD_CMD_READ, 0, 1, 512), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_READ, 0, 511, 512), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_READ, 0, 0, 513), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_WRITE, 0, 0, 100), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_TRIM, 0, 256, 512), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_WRITE_ZEROES, 0, 0, 1000), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_READ, 0, 512, 1024), 0);
  e.min_block = 4096;
  assert_int_equal(check(&e, NBD_CMD_READ, 0, 512, 4096), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_READ, 0, 8192, 4096), 0);
  e.min_block = 1;
  assert_int_equal(check(&e, NBD_CMD_READ, 0, 3, 7), 0);
}

/* A size that is not a multiple of min_block: the request that ends at
 * the size may be short (QEMU cuts its last sector there); no other. */
static void test_unaligned_size(void **state)
{
  struct fc_export e = export();

  e.size = SIZE + 1000;
  assert_int_equal(check(&e, NBD_CMD_READ, 0, SIZE, 1000), 0);
  assert_int_equal(check(&e, NBD_CMD_READ, 0, SIZE - 512, 1512), 0);
  assert_int_equal(check(&e, NBD_CMD_WRITE, 0, SIZE + 512, 488), 0);
  assert_int_equal(check(&e, NBD_CMD_WRITE_ZEROES, 0, SIZE, 1000), 0);
  assert_int_equal(check(&e, NBD_CMD_TRIM, 0, 0, SIZE + 1000), 0);
  /* Short but not at the end, unaligned offset, or past the end. */
  assert_int_equal(check(&e, NBD_CMD_READ, 0, SIZE, 999), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_READ, 0, SIZE + 1, 999), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_READ, 0, SIZE, 1024), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_WRITE, 0, SIZE, 1024), -ENOSPC);
  assert_int_equal(check(&e, NBD_CMD_READ, 0, SIZE + 1000, 0), -EINVAL);
}

/* ESHUTDOWN on the wire is this server's stop only (nbd_conn.c admit()). */
static void test_export_errno(void **state)
{
  assert_int_equal(nbd_export_errno(-ESHUTDOWN), -EIO);
  assert_int_equal(nbd_export_errno(0), 0);
  assert_int_equal(nbd_export_errno(-ENOSPC), -ENOSPC);
  assert_int_equal(nbd_export_errno(-ENOTCONN), -ENOTCONN);
  assert_int_equal(nbd_errno_to_wire(nbd_export_errno(-ESHUTDOWN)), NBD_EIO);
}

static void test_max_block(void **state)
{
  struct fc_export e = export();

  assert_int_equal(check(&e, NBD_CMD_READ, 0, 0, 32 * MiB), 0);
  assert_int_equal(check(&e, NBD_CMD_WRITE, 0, 0, 32 * MiB), 0);
  assert_int_equal(check(&e, NBD_CMD_READ, 0, 0, 32 * MiB + 512), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_WRITE, 0, 0, 32 * MiB + 512), -EINVAL);
  /* Payload-less commands may cover up to 4 GiB - 1 (the callbacks chunk). */
  e.size = 8ull << 30;
  assert_int_equal(check(&e, NBD_CMD_TRIM, 0, 0, 0xfffffe00u), 0);
  assert_int_equal(check(&e, NBD_CMD_WRITE_ZEROES, 0, 0, 0xfffffe00u), 0);
}

static void test_bounds(void **state)
{
  struct fc_export e = export();

  assert_int_equal(check(&e, NBD_CMD_READ, 0, SIZE - 512, 512), 0);
  assert_int_equal(check(&e, NBD_CMD_WRITE, 0, SIZE - 512, 512), 0);
  assert_int_equal(check(&e, NBD_CMD_READ, 0, SIZE, 512), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_READ, 0, SIZE - 512, 1024), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_TRIM, 0, SIZE - 512, 1024), -EINVAL);
  /* Spec "Error values": writes past the end are ENOSPC. */
  assert_int_equal(check(&e, NBD_CMD_WRITE, 0, SIZE, 512), -ENOSPC);
  assert_int_equal(check(&e, NBD_CMD_WRITE, 0, SIZE - 512, 1024), -ENOSPC);
  assert_int_equal(check(&e, NBD_CMD_WRITE_ZEROES, 0, SIZE, 512), -ENOSPC);
  assert_int_equal(check(&e, NBD_CMD_WRITE_ZEROES, 0, 0, 0xfffffe00u),
                   -ENOSPC);
}

static void test_overflow(void **state)
{
  struct fc_export e = export();
  uint64_t top = UINT64_MAX & ~(uint64_t)511;   /* aligned, near 2^64 */

  assert_int_equal(check(&e, NBD_CMD_READ, 0, top, 512), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_WRITE, 0, top, 1024), -ENOSPC);
  /* With a (theoretical) export that large, offset + count wraps to a
   * small number; a naive "offset + count > size" check would pass it. */
  e.size = top;
  assert_int_equal(check(&e, NBD_CMD_READ, 0, top, 1024), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_TRIM, 0, top - 512, 0xfffffe00u),
                   -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_READ, 0, top - 512, 512), 0);
}

static void test_errno_to_wire(void **state)
{
  static const struct { int err; uint32_t wire; } map[] = {
    { 0, 0 },
    { EPERM, NBD_EPERM }, { EACCES, NBD_EPERM }, { EROFS, NBD_EPERM },
    { EIO, NBD_EIO }, { ENOMEM, NBD_ENOMEM }, { EINVAL, NBD_EINVAL },
    { ENOSPC, NBD_ENOSPC }, { EDQUOT, NBD_ENOSPC }, { EFBIG, NBD_ENOSPC },
    { EOVERFLOW, NBD_EOVERFLOW }, { ENOTSUP, NBD_ENOTSUP },
    { EOPNOTSUPP, NBD_ENOTSUP }, { ESHUTDOWN, NBD_ESHUTDOWN },
    { ETIMEDOUT, NBD_EIO }, { ECONNRESET, NBD_EIO }, { EPROTO, NBD_EIO },
    { EAGAIN, NBD_EIO }, { 4095, NBD_EIO },
  };
  size_t i;

  for (i = 0; i < sizeof map / sizeof map[0]; i++) {
    assert_int_equal(nbd_errno_to_wire(-map[i].err), map[i].wire);
    assert_int_equal(nbd_errno_to_wire(map[i].err), map[i].wire);
  }
  assert_int_equal(nbd_errno_to_wire(INT_MIN), NBD_EIO);
  assert_int_equal(nbd_errno_to_wire(INT_MAX), NBD_EIO);
}

static void test_reply_encode(void **state)
{
  const uint8_t want[NBD_SIMPLE_REPLY_SIZE] = {
    0x67, 0x44, 0x66, 0x98, 0x00, 0x00, 0x00, 0x16,
    0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x01,
  };
  uint8_t buf[NBD_SIMPLE_REPLY_SIZE];

  nbd_reply_encode(buf, NBD_EINVAL, 0xdeadbeef00000001ull);
  assert_memory_equal(buf, want, sizeof want);
}

static void test_tflags(void **state)
{
  struct fc_export e = export();
  uint16_t f = nbd_export_tflags(&e);

  assert_int_equal(f, NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH |
                   NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_TRIM |
                   NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_CAN_MULTI_CONN);
  e.read_only = true;
  assert_true(nbd_export_tflags(&e) & NBD_FLAG_READ_ONLY);
  e.ops = &rw_only_ops;
  f = nbd_export_tflags(&e);
  assert_false(f & (NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_TRIM |
                    NBD_FLAG_SEND_WRITE_ZEROES));
}

/* BLOCK_STATUS needs the callback, structured replies and the context;
 * it is not bounded by max_block; REQ_ONE is its flag only. */
static void test_block_status(void **state)
{
  struct fc_export e = export();
  struct nbd_session none = { 0 }, sr = { .structured = true },
                     both = { .structured = true, .base_allocation = true };
  const uint16_t bs = NBD_CMD_BLOCK_STATUS;

  e.ops = &bs_ops;
  assert_int_equal(check_sess(&e, NULL, bs, 0, 0, 512), -EINVAL);
  assert_int_equal(check_sess(&e, &none, bs, 0, 0, 512), -EINVAL);
  assert_int_equal(check_sess(&e, &sr, bs, 0, 0, 512), -EINVAL);
  assert_int_equal(check_sess(&e, &both, bs, 0, 0, 512), 0);
  assert_int_equal(check_sess(&e, &both, bs, NBD_CMD_FLAG_REQ_ONE, 0, 512), 0);
  assert_int_equal(check_sess(&e, &both, bs, NBD_CMD_FLAG_REQ_ONE |
                              NBD_CMD_FLAG_FUA, 0, 512), 0);
  assert_int_equal(check_sess(&e, &both, bs, NBD_CMD_FLAG_DF, 0, 512), -EINVAL);
  assert_int_equal(check_sess(&e, &both, bs, 0, 0, 0), -EINVAL);
  assert_int_equal(check_sess(&e, &both, bs, 0, 100, 512), -EINVAL);
  assert_int_equal(check_sess(&e, &both, bs, 0, 0, 100), -EINVAL);
  assert_int_equal(check_sess(&e, &both, bs, 0, 0, 64 * MiB), 0);  /* > max */
  assert_int_equal(check_sess(&e, &both, bs, 0, SIZE - 512, 1024), -EINVAL);
  assert_int_equal(check_sess(&e, &both, bs, 0, UINT64_MAX - 511, 1024),
                   -EINVAL);
  /* Read-only exports answer it too. */
  e.read_only = true;
  assert_int_equal(check_sess(&e, &both, bs, 0, 0, 512), 0);
  /* No callback: refused even once negotiated. */
  e.ops = &all_ops;
  assert_int_equal(check_sess(&e, &both, bs, 0, 0, 512), -EINVAL);
  /* REQ_ONE stays refused elsewhere. */
  e.ops = &bs_ops;
  assert_int_equal(check_sess(&e, &both, NBD_CMD_READ, NBD_CMD_FLAG_REQ_ONE,
                              0, 512), -EINVAL);
}

static void test_cache(void **state)
{
  struct fc_export e = export();

  e.ops = &bs_ops;
  assert_int_equal(check(&e, NBD_CMD_CACHE, 0, 0, 512), 0);
  assert_int_equal(check(&e, NBD_CMD_CACHE, NBD_CMD_FLAG_FUA, 0, 512), 0);
  assert_int_equal(check(&e, NBD_CMD_CACHE, 0, 0, 64 * MiB), 0);
  assert_int_equal(check(&e, NBD_CMD_CACHE, NBD_CMD_FLAG_REQ_ONE, 0, 512),
                   -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_CACHE, 0, 0, 0), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_CACHE, 0, 512, 100), -EINVAL);
  assert_int_equal(check(&e, NBD_CMD_CACHE, 0, SIZE, 512), -EINVAL);
  e.read_only = true;
  assert_int_equal(check(&e, NBD_CMD_CACHE, 0, 0, 512), 0);
  assert_true(nbd_export_tflags(&e) & NBD_FLAG_SEND_CACHE);
  e.ops = &all_ops;
  assert_false(nbd_export_tflags(&e) & NBD_FLAG_SEND_CACHE);
}

static void test_extents_check(void **state)
{
  struct fc_export e = export();
  struct nbd_request r = { .type = NBD_CMD_BLOCK_STATUS, .offset = 4096,
                           .count = 8192 };
  struct fc_extent ok[2] = { { 4096, FC_EXTENT_HOLE | FC_EXTENT_ZERO },
                             { 4096, 0 } };
  struct fc_extent x[2];

  assert_int_equal(nbd_extents_check(&r, &e, ok, 2, 2), 0);
  assert_int_equal(nbd_extents_check(&r, &e, ok, 1, 2), 0);   /* shorter */
  assert_int_equal(nbd_extents_check(&r, &e, ok, 0, 2), -EIO);
  assert_int_equal(nbd_extents_check(&r, &e, ok, 2, 1), -EIO); /* > max */
  assert_int_equal(nbd_extents_check(&r, &e, ok, -5, 2), -EIO);
  memcpy(x, ok, sizeof x);
  x[1].length = 0;
  assert_int_equal(nbd_extents_check(&r, &e, x, 2, 2), -EIO);
  memcpy(x, ok, sizeof x);
  x[1].length = 8192;                         /* more than asked */
  assert_int_equal(nbd_extents_check(&r, &e, x, 2, 2), -EIO);
  memcpy(x, ok, sizeof x);
  x[0].flags = 4;
  assert_int_equal(nbd_extents_check(&r, &e, x, 2, 2), -EIO);
  memcpy(x, ok, sizeof x);
  x[0].length = 100;                          /* under min_block */
  assert_int_equal(nbd_extents_check(&r, &e, x, 2, 2), -EIO);
  /* ... except at the export's end. */
  e.size = 4096 + 4096 + 100;
  r.count = 4096 + 100;
  x[0] = (struct fc_extent){ 4096, 0 };
  x[1] = (struct fc_extent){ 100, 0 };
  assert_int_equal(nbd_extents_check(&r, &e, x, 2, 2), 0);
}

static void test_chunk_and_extents_encode(void **state)
{
  const uint8_t want[NBD_CHUNK_HDR_SIZE] = {
    0x66, 0x8e, 0x33, 0xef,                           /* magic */
    0x00, 0x01,                                       /* flags: DONE */
    0x00, 0x05,                                       /* BLOCK_STATUS */
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,   /* cookie */
    0x00, 0x00, 0x00, 0x14,                           /* length 20 */
  };
  const uint8_t want_ext[16] = {
    0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03,
    0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
  };
  struct fc_extent ext[2] = { { 1u << 20, 3 }, { 512, 0 } };
  uint8_t buf[NBD_CHUNK_HDR_SIZE];

  nbd_chunk_encode(buf, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_BLOCK_STATUS,
                   0x0102030405060708ull, 20);
  assert_memory_equal(buf, want, sizeof want);
  nbd_extents_encode(ext, 2);
  assert_memory_equal(ext, want_ext, sizeof want_ext);
}

static void test_export_check(void **state)
{
  struct fc_export e = export(), b;
  const char *why = NULL;

  assert_int_equal(nbd_export_check(&e, &why), 0);
  assert_null(why);
#define BAD(stmt) do { b = e; stmt; why = NULL; \
    assert_int_equal(nbd_export_check(&b, &why), -EINVAL); \
    assert_non_null(why); } while (0)
  BAD(b.ops = NULL);
  BAD(b.ops = &read_only_ops);          /* writable without pwrite */
  BAD(b.name = NULL);
  BAD(b.min_block = 0);
  BAD(b.min_block = 1000);
  BAD(b.min_block = 131072);
  BAD(b.pref_block = 256);
  BAD(b.pref_block = 6000);
  BAD(b.max_block = 32 * MiB + 100);
  BAD(b.max_block = 128 * MiB);
  BAD(b.max_block = 0);
  BAD(b.max_block = 512);               /* below pref_block */
#undef BAD
  e.read_only = true;
  e.ops = &read_only_ops;
  assert_int_equal(nbd_export_check(&e, NULL), 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_decode_good),
    cmocka_unit_test(test_decode_bad_magic),
    cmocka_unit_test(test_valid_commands),
    cmocka_unit_test(test_unknown_command),
    cmocka_unit_test(test_missing_callback),
    cmocka_unit_test(test_unknown_flags),
    cmocka_unit_test(test_fua),
    cmocka_unit_test(test_flush_fields),
    cmocka_unit_test(test_read_only),
    cmocka_unit_test(test_zero_count),
    cmocka_unit_test(test_alignment),
    cmocka_unit_test(test_unaligned_size),
    cmocka_unit_test(test_export_errno),
    cmocka_unit_test(test_max_block),
    cmocka_unit_test(test_bounds),
    cmocka_unit_test(test_overflow),
    cmocka_unit_test(test_errno_to_wire),
    cmocka_unit_test(test_reply_encode),
    cmocka_unit_test(test_tflags),
    cmocka_unit_test(test_block_status),
    cmocka_unit_test(test_cache),
    cmocka_unit_test(test_extents_check),
    cmocka_unit_test(test_chunk_and_extents_encode),
    cmocka_unit_test(test_export_check),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

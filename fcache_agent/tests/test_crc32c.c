/* SPDX-License-Identifier: Apache-2.0 */
/* CRC-32C: published check values, chaining, and agreement with a
 * bit-at-a-time reference over every length and alignment the slicing-by-8
 * loop treats differently. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/crc32c.h"

static uint32_t crc32c_bitwise(uint32_t crc, const void *buf, size_t len)
{
  const unsigned char *p = buf;

  crc = ~crc;
  while (len--) {
    crc ^= *p++;
    for (int k = 0; k < 8; k++)
      crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
  }
  return ~crc;
}

static void test_check_value(void **state)
{
  assert_int_equal(crc32c(0, "123456789", 9), 0xE3069283u);
  assert_int_equal(crc32c(0, "", 0), 0);
  assert_int_equal(crc32c(0, "a", 1), 0xC1D04330u);
}

/* Test vectors from RFC 3720 (iSCSI), appendix B.4. */
static void test_rfc3720_vectors(void **state)
{
  unsigned char buf[32];

  memset(buf, 0, sizeof buf);
  assert_int_equal(crc32c(0, buf, sizeof buf), 0x8A9136AAu);
  memset(buf, 0xff, sizeof buf);
  assert_int_equal(crc32c(0, buf, sizeof buf), 0x62A8AB43u);
  for (int i = 0; i < 32; i++)
    buf[i] = (unsigned char)i;
  assert_int_equal(crc32c(0, buf, sizeof buf), 0x46DD794Eu);
  for (int i = 0; i < 32; i++)
    buf[i] = (unsigned char)(31 - i);
  assert_int_equal(crc32c(0, buf, sizeof buf), 0x113FDB5Cu);
}

static void test_chaining(void **state)
{
  const char *s = "The quick brown fox jumps over the lazy dog";
  size_t n = strlen(s);
  uint32_t whole = crc32c(0, s, n);

  for (size_t cut = 0; cut <= n; cut++)
    assert_int_equal(crc32c(crc32c(0, s, cut), s + cut, n - cut), whole);
}

static void test_matches_reference(void **state)
{
  static unsigned char buf[4096 + 64];
  uint32_t x = 12345;

  for (size_t i = 0; i < sizeof buf; i++) {
    x = x * 1103515245u + 12345u;     /* deterministic pseudo-random */
    buf[i] = (unsigned char)(x >> 16);
  }
  for (size_t off = 0; off < 8; off++)
    for (size_t len = 0; len < 80; len++)
      assert_int_equal(crc32c(0, buf + off, len),
                       crc32c_bitwise(0, buf + off, len));
  assert_int_equal(crc32c(0, buf + 3, 4096), crc32c_bitwise(0, buf + 3, 4096));
  assert_int_equal(crc32c(0xdeadbeef, buf, 1000),
                   crc32c_bitwise(0xdeadbeef, buf, 1000));
}

/* Both implementations, whichever crc32c() picks on this CPU. */
static void test_tables_match_hardware(void **state)
{
  static unsigned char buf[3 * 6144 + 64];

  for (size_t i = 0; i < sizeof buf; i++)
    buf[i] = (unsigned char)(i * 131 + (i >> 7));
  for (size_t off = 0; off < 8; off++)
    for (size_t len = 0; len < 300; len += 7)
      assert_int_equal(crc32c(7, buf + off, len), crc32c_sw(7, buf + off, len));
  /* Around one and several three-chunk strides of the hardware path. */
  for (size_t len = 6144 - 9; len < 3 * 6144 + 9; len += 6144 / 4 - 1)
    for (size_t off = 0; off < 3; off++)
      assert_int_equal(crc32c(~0u, buf + off, len), crc32c_sw(~0u, buf + off, len));
  assert_int_equal(crc32c(0, buf + 5, 8192), crc32c_sw(0, buf + 5, 8192));
  assert_int_equal(crc32c(0, buf, 3 * 6144), crc32c_bitwise(0, buf, 3 * 6144));
  assert_int_equal(crc32c_sw(0, "123456789", 9), 0xE3069283u);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_check_value),
    cmocka_unit_test(test_rfc3720_vectors),
    cmocka_unit_test(test_chaining),
    cmocka_unit_test(test_matches_reference),
    cmocka_unit_test(test_tables_match_hardware),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

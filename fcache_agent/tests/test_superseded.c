/* SPDX-License-Identifier: Apache-2.0 */
/* The destination's record of superseded pinned blocks: what was appended
 * comes back in order, a fresh record is empty (not absent), a torn last
 * record is ignored, and a missing file reads as nothing recorded. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/superseded.h"

static void make_path(char *buf, size_t len)
{
  snprintf(buf, len, "/tmp/fc-superseded-XXXXXX");
  int fd = mkstemp(buf);
  assert_true(fd >= 0);
  close(fd);
}

static void test_round_trip(void **state)
{
  char path[64];
  uint64_t want[] = { 0, 7, 1ull << 40, 3 }, *got;
  uint32_t n;
  int fd;

  make_path(path, sizeof path);
  fd = fc_superseded_create(path);
  assert_true(fd >= 0);
  assert_int_equal(fc_superseded_load(path, &got, &n), 0);
  assert_int_equal(n, 0);
  free(got);
  for (size_t i = 0; i < 4; i++)
    assert_int_equal(fc_superseded_append(fd, want[i]), 0);
  close(fd);
  assert_int_equal(fc_superseded_load(path, &got, &n), 0);
  assert_int_equal(n, 4);
  assert_memory_equal(got, want, sizeof want);
  free(got);
  /* A crash in the middle of an append leaves a partial record. */
  fd = open(path, O_WRONLY | O_APPEND);
  assert_int_equal(write(fd, "\x01\x02\x03", 3), 3);
  close(fd);
  assert_int_equal(fc_superseded_load(path, &got, &n), 0);
  assert_int_equal(n, 4);
  free(got);
  /* Creating again starts an empty record. */
  fd = fc_superseded_create(path);
  close(fd);
  assert_int_equal(fc_superseded_load(path, &got, &n), 0);
  assert_int_equal(n, 0);
  free(got);
  unlink(path);
}

static void test_missing_file(void **state)
{
  uint64_t *got = (uint64_t *)1;
  uint32_t n = 9;

  assert_int_equal(fc_superseded_load("/nonexistent/fc-superseded", &got, &n), 0);
  assert_int_equal(n, 0);
  assert_null(got);
  assert_true(fc_superseded_create("/nonexistent/dir/x") < 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_round_trip),
    cmocka_unit_test(test_missing_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

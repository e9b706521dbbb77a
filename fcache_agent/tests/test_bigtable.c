/* SPDX-License-Identifier: Apache-2.0 */
/* Tables that grow with the cache: a small one comes zeroed from the heap;
 * one of FC_BIGTABLE_MIN or more is zeroed, writable to its last byte, 2 MiB-aligned
 * and marked for transparent huge pages (VmFlags "hg" in smaps) where the
 * kernel has them; a size that overflows is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/bigtable.h"

static bool
all_zero(const uint8_t *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (p[i])
      return false;
  return true;
}

/* The VmFlags line of the mapping that holds addr, or "" if none. */
static void
vm_flags_of(const void *addr, char *flags, size_t len)
{
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[512];
  bool in_it = false;

  flags[0] = '\0';
  assert_non_null(f);
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;

    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
      in_it = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
      continue;
    }
    if (in_it && !strncmp(line, "VmFlags:", 8)) {
      snprintf(flags, len, "%s", line + 8);
      break;
    }
  }
  fclose(f);
}

static void
test_small_table_from_heap(void **state)
{
  uint32_t *t = fc_bigtable_alloc(1000, sizeof *t);
  char flags[256];

  assert_non_null(t);
  assert_true(all_zero((const uint8_t *)t, 1000 * sizeof *t));
  t[999] = 7;
  fc_bigtable_free(t, 1000, sizeof *t);
  /* Just below the threshold: the heap's, not marked for huge pages. */
  t = fc_bigtable_alloc(FC_BIGTABLE_MIN / sizeof *t - 1, sizeof *t);
  assert_non_null(t);
  vm_flags_of(t, flags, sizeof flags);
  assert_null(strstr(flags, " hg"));
  fc_bigtable_free(t, FC_BIGTABLE_MIN / sizeof *t - 1, sizeof *t);
  /* Zero entries still give a pointer that can be freed. */
  t = fc_bigtable_alloc(0, sizeof *t);
  assert_non_null(t);
  fc_bigtable_free(t, 0, sizeof *t);
  fc_bigtable_free(NULL, 5, 4);
}

static void
test_large_table_huge_pages(void **state)
{
  /* Not a multiple of 2 MiB: the tail page must be mapped too. */
  size_t n = FC_BIGTABLE_MIN / 24 + 5;
  uint8_t *t = fc_bigtable_alloc(n, 24);
  bool thp = access("/sys/kernel/mm/transparent_hugepage", F_OK) == 0;
  char flags[256];

  assert_non_null(t);
  assert_int_equal((uintptr_t)t % FC_BIGTABLE_HUGE, 0);
  assert_true(all_zero(t, n * 24));
  memset(t, 0xa5, n * 24);
  /* The whole rounded table, its last huge page included, is one
   * mapping marked for huge pages. */
  for (size_t at = 0; at < FC_BIGTABLE_MIN + FC_BIGTABLE_HUGE; at += FC_BIGTABLE_HUGE / 2) {
    vm_flags_of(t + at, flags, sizeof flags);
    assert_true(flags[0] != '\0');
    if (thp)
      assert_non_null(strstr(flags, " hg"));
  }
  fc_bigtable_free(t, n, 24);
  vm_flags_of(t, flags, sizeof flags);
  assert_true(flags[0] == '\0' || !strstr(flags, " hg"));
}

static void
test_overflow_refused(void **state)
{
  errno = 0;
  assert_null(fc_bigtable_alloc(SIZE_MAX / 2, 4));
  assert_int_equal(errno, ENOMEM);
  errno = 0;
  assert_null(fc_bigtable_alloc(SIZE_MAX / 4, 4));
  assert_int_equal(errno, ENOMEM);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_small_table_from_heap),
    cmocka_unit_test(test_large_table_huge_pages),
    cmocka_unit_test(test_overflow_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

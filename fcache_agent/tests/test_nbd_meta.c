/* SPDX-License-Identifier: Apache-2.0 */
/* NBD_OPT_LIST_META_CONTEXT / NBD_OPT_SET_META_CONTEXT payload parsing:
 * what matches base:allocation for LIST and for SET, and every way a
 * payload's lengths can fail to add up. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "nbd/nbd_meta.h"
#include "nbd/nbd_proto.h"
#include "nbd/nbd_request.h"

/* Build a payload: export name, then the queries (NULL-terminated). */
static uint32_t payload(uint8_t *buf, const char *name, const char **q)
{
  uint32_t pos = 0, n = 0;

  nbd_put32(buf, (uint32_t)strlen(name));
  memcpy(buf + 4, name, strlen(name));
  pos = 4 + (uint32_t)strlen(name);
  while (q && q[n])
    n++;
  nbd_put32(buf + pos, n);
  pos += 4;
  for (uint32_t i = 0; i < n; i++) {
    nbd_put32(buf + pos, (uint32_t)strlen(q[i]));
    memcpy(buf + pos + 4, q[i], strlen(q[i]));
    pos += 4 + (uint32_t)strlen(q[i]);
  }
  return pos;
}

static bool matches(bool set, const char **q)
{
  uint8_t buf[1024];
  uint32_t len = payload(buf, "vol", q);
  struct nbd_meta_request m;

  assert_int_equal(nbd_meta_parse(buf, len, set, &m), 0);
  assert_int_equal(m.namelen, 3);
  assert_memory_equal(m.name, "vol", 3);
  return m.base_allocation;
}

static void test_list(void **state)
{
  const char *all[] = { NULL };
  const char *ns[] = { "base:", NULL };
  const char *exact[] = { "qemu:dirty-bitmap:a", "base:allocation", NULL };
  const char *other[] = { "qemu:dirty-bitmap:a", "base:allocationx",
                          "base", "", NULL };

  assert_true(matches(false, all));
  assert_true(matches(false, ns));
  assert_true(matches(false, exact));
  assert_false(matches(false, other));
}

static void test_set(void **state)
{
  const char *none[] = { NULL };
  const char *ns[] = { "base:", NULL };
  const char *exact[] = { "qemu:x", "base:allocation", "base:allocation",
                          NULL };
  const char *other[] = { "qemu:x", NULL };

  assert_false(matches(true, none));
  assert_false(matches(true, ns));
  assert_true(matches(true, exact));
  assert_false(matches(true, other));
}

static void test_malformed(void **state)
{
  const char *q[] = { "base:allocation", NULL };
  uint8_t buf[1024];
  uint32_t len = payload(buf, "vol", q);
  struct nbd_meta_request m;

  /* Every truncation of a good payload is refused. */
  for (uint32_t cut = 0; cut < len; cut++)
    assert_int_equal(nbd_meta_parse(buf, cut, true, &m), -EINVAL);
  /* Trailing bytes. */
  assert_int_equal(nbd_meta_parse(buf, len + 1, true, &m), -EINVAL);
  /* A query count the payload cannot hold. */
  nbd_put32(buf + 7, 0xffffffffu);
  assert_int_equal(nbd_meta_parse(buf, len, true, &m), -EINVAL);
  nbd_put32(buf + 7, 2);
  assert_int_equal(nbd_meta_parse(buf, len, true, &m), -EINVAL);
  /* A query running past the end, and a huge one. */
  nbd_put32(buf + 7, 1);
  nbd_put32(buf + 11, 16);
  assert_int_equal(nbd_meta_parse(buf, len, true, &m), -EINVAL);
  nbd_put32(buf + 11, 0xfffffff0u);
  assert_int_equal(nbd_meta_parse(buf, len, true, &m), -EINVAL);
  /* A name running past the end. */
  nbd_put32(buf, 0xffffffffu);
  assert_int_equal(nbd_meta_parse(buf, len, true, &m), -EINVAL);
}

static void test_too_long(void **state)
{
  static uint8_t buf[2 * NBD_MAX_STRING + 64];
  struct nbd_meta_request m;
  uint32_t qlen = NBD_MAX_STRING + 1;

  /* A query over the spec's string limit that is otherwise well formed. */
  memset(buf, 'a', sizeof buf);
  nbd_put32(buf, 0);
  nbd_put32(buf + 4, 1);
  nbd_put32(buf + 8, qlen);
  assert_int_equal(nbd_meta_parse(buf, 12 + qlen, false, &m), -E2BIG);
  /* And a name. */
  nbd_put32(buf, qlen);
  nbd_put32(buf + 4 + qlen, 0);
  assert_int_equal(nbd_meta_parse(buf, 8 + qlen, false, &m), -E2BIG);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_list),
    cmocka_unit_test(test_set),
    cmocka_unit_test(test_malformed),
    cmocka_unit_test(test_too_long),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* NBD URIs as the agent judges them: transport, export, socket or host
 * and port, decoded; what it cannot read is refused, never guessed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/nbd_uri.h"

static void
test_unix(void **state)
{
  struct fc_nbd_uri u;

  (void)state;
  assert_int_equal(fc_nbd_uri_parse("nbd+unix:///?socket=/run/o.sock", &u), 0);
  assert_true(u.is_unix);
  assert_false(u.tls);
  assert_string_equal(u.socket, "/run/o.sock");
  assert_string_equal(u.export, "");
  assert_int_equal(fc_nbd_uri_parse("nbds+unix:///vol%201?tls-username=x&"
                                    "socket=/run/a%2Fb.sock", &u), 0);
  assert_true(u.tls);
  assert_string_equal(u.export, "vol 1");
  assert_string_equal(u.socket, "/run/a/b.sock");
  /* No socket, an authority, a NUL smuggled in: refused. */
  assert_int_equal(fc_nbd_uri_parse("nbd+unix:///vol", &u), -EINVAL);
  assert_int_equal(fc_nbd_uri_parse("nbd+unix://host/?socket=/s", &u), -EINVAL);
  assert_int_equal(fc_nbd_uri_parse("nbd+unix:///?socket=/s%00x", &u), -EINVAL);
}

static void
test_tcp(void **state)
{
  struct fc_nbd_uri u;

  (void)state;
  assert_int_equal(fc_nbd_uri_parse("nbd://storage/vol", &u), 0);
  assert_false(u.is_unix);
  assert_string_equal(u.host, "storage");
  assert_string_equal(u.port, "10809");
  assert_string_equal(u.export, "vol");
  assert_int_equal(fc_nbd_uri_parse("nbds://[fd00::1]:10810", &u), 0);
  assert_true(u.tls);
  assert_string_equal(u.host, "[fd00::1]");
  assert_string_equal(u.port, "10810");
  assert_string_equal(u.export, "");
  assert_int_equal(fc_nbd_uri_parse("nbd://[::1]/x", &u), 0);
  assert_string_equal(u.host, "[::1]");
  assert_string_equal(u.port, "10809");
  assert_int_equal(fc_nbd_uri_parse("nbd://host:port/x", &u), -EINVAL);
  assert_int_equal(fc_nbd_uri_parse("nbd:///x", &u), -EINVAL);
  assert_int_equal(fc_nbd_uri_parse("rbd:pool/image", &u), -EINVAL);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_unix),
    cmocka_unit_test(test_tcp),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}

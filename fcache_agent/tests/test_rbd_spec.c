/* SPDX-License-Identifier: Apache-2.0 */
/* rbd: origins as QEMU writes them: pool, namespace, image and the four
 * options the agent takes; everything else is refused with a reason. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/rbd_spec.h"

static void
test_names(void **state)
{
  struct fc_rbd_spec s;
  char err[512];

  (void)state;
  assert_int_equal(fc_rbd_spec_parse("rbd:volumes/volume-1", &s, err,
                                     sizeof err), 0);
  assert_string_equal(s.pool, "volumes");
  assert_string_equal(s.ns, "");
  assert_string_equal(s.image, "volume-1");
  assert_string_equal(s.id, "");
  assert_int_equal(fc_rbd_spec_parse("rbd:p/tenant/img", &s, err,
                                     sizeof err), 0);
  assert_string_equal(s.pool, "p");
  assert_string_equal(s.ns, "tenant");
  assert_string_equal(s.image, "img");
  /* An escaped ':' belongs to the name. */
  assert_int_equal(fc_rbd_spec_parse("rbd:p/a\\:b", &s, err, sizeof err), 0);
  assert_string_equal(s.image, "a:b");
}

static void
test_options(void **state)
{
  struct fc_rbd_spec s;
  char err[512];

  (void)state;
  /* Every ':' inside a value is escaped, an IPv6 address's too. */
  assert_int_equal(fc_rbd_spec_parse(
      "rbd:volumes/v:id=cinder:conf=/etc/ceph/ceph.conf"
      ":keyring=/run/fcache/ceph/v.keyring"
      ":mon_host=10.0.0.1\\:6789;[\\:\\:1]\\:3300", &s, err, sizeof err), 0);
  assert_string_equal(s.id, "cinder");
  assert_string_equal(s.conf, "/etc/ceph/ceph.conf");
  assert_string_equal(s.keyring, "/run/fcache/ceph/v.keyring");
  assert_string_equal(s.mon_host, "10.0.0.1:6789;[::1]:3300");
}

static void
test_refused(void **state)
{
  static const char *const bad[] = {
    "rbd:", "rbd:pool", "rbd:/img", "rbd:pool/", "rbd:a/b/c/d",
    "rbd:pool/img@snap",                        /* read-only */
    "rbd:pool/img:log_file=/etc/passwd",        /* not ours to set */
    "rbd:pool/img:admin_socket=/tmp/x",
    "rbd:pool/img:id",                          /* no '=' */
    "rbd:pool/img:id=",                         /* empty */
    "rbd:pool/img:id=a:id=b",                   /* twice */
    "rbd:pool/img\\",                           /* lone backslash */
    "nbd://host/x",
  };
  struct fc_rbd_spec s;
  char err[512];

  (void)state;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = '\0';
    if (fc_rbd_spec_parse(bad[i], &s, err, sizeof err) != -EINVAL)
      fail_msg("accepted %s", bad[i]);
    assert_non_null(strstr(err, "RBD origin"));
  }
  fc_rbd_spec_parse("rbd:pool/img:log_file=/x", &s, err, sizeof err);
  assert_non_null(strstr(err, "unknown option 'log_file'"));
  fc_rbd_spec_parse("rbd:pool/img@s", &s, err, sizeof err);
  assert_non_null(strstr(err, "snapshot"));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_names),
    cmocka_unit_test(test_options),
    cmocka_unit_test(test_refused),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}

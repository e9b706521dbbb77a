/* SPDX-License-Identifier: Apache-2.0 */
/* One volume per disk: fc_volume_same_origin sees through the spellings of
 * one origin (links, doubled slashes, device nodes of one device number,
 * percent-encoding, host case and the default NBD port) and keeps apart
 * origins that differ (another file, device, export, port). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "engine/volume.h"

static char dir[64];

static void
path(char *out, size_t len, const char *name)
{
  snprintf(out, len, "%s/%s", dir, name);
}

static void
test_files(void **state)
{
  char a[128], b[128], twice[160], link[128];
  FILE *f;

  (void)state;
  path(a, sizeof a, "vol-a");
  path(b, sizeof b, "vol-b");
  path(link, sizeof link, "link-to-a");
  assert_non_null(f = fopen(a, "w"));
  fclose(f);
  assert_non_null(f = fopen(b, "w"));
  fclose(f);
  assert_int_equal(symlink(a, link), 0);
  snprintf(twice, sizeof twice, "%s//vol-a", dir);
  assert_true(fc_volume_same_origin(a, a));
  assert_true(fc_volume_same_origin(a, twice));
  assert_true(fc_volume_same_origin(link, a));
  assert_false(fc_volume_same_origin(a, b));
  /* Not there: compared by spelling only. */
  assert_false(fc_volume_same_origin(a, "/nonexistent/vol-a"));
}

static void
test_block_devices(void **state)
{
  char sd[128], nvme[128], other[128];

  (void)state;
  /* Device nodes named as os-brick names them, made here for the test:
   * identity is the device number, whatever the node is called. */
  path(sd, sizeof sd, "sdzz");
  path(nvme, sizeof nvme, "nvme99n1");
  path(other, sizeof other, "sdzy");
  assert_int_equal(mknod(sd, S_IFBLK | 0600, makedev(7, 200)), 0);
  assert_int_equal(mknod(nvme, S_IFBLK | 0600, makedev(7, 200)), 0);
  assert_int_equal(mknod(other, S_IFBLK | 0600, makedev(7, 201)), 0);
  assert_true(fc_volume_same_origin(sd, nvme));
  assert_false(fc_volume_same_origin(sd, other));
}

static void
test_nbd_unix(void **state)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  char u1[300], u2[300], u3[300], u4[300];
  int s;

  (void)state;
  path(sa.sun_path, sizeof sa.sun_path, "origin.sock");
  s = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_true(s >= 0);
  assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
  snprintf(u1, sizeof u1, "nbd+unix:///?socket=%s", sa.sun_path);
  snprintf(u2, sizeof u2, "nbds+unix:///?socket=%s//origin.sock", dir);
  snprintf(u3, sizeof u3, "nbd+unix:///other?socket=%s", sa.sun_path);
  snprintf(u4, sizeof u4, "nbd+unix:///%%6F?socket=%s", sa.sun_path);
  assert_true(fc_volume_same_origin(u1, u2));
  assert_false(fc_volume_same_origin(u1, u3));
  /* "%6F" is "o": export "o" is not the default export, nor "other". */
  assert_false(fc_volume_same_origin(u4, u3));
  snprintf(u1, sizeof u1, "nbd+unix:///o?socket=%s", sa.sun_path);
  assert_true(fc_volume_same_origin(u4, u1));
  close(s);
  unlink(sa.sun_path);
}

static void
test_nbd_tcp(void **state)
{
  (void)state;
  assert_true(fc_volume_same_origin("nbd://Storage.Example:10809/vol",
                                    "nbds://storage.example/vol"));
  assert_true(fc_volume_same_origin("nbd://[::1]/vol", "nbd://[::1]:10809/vol"));
  assert_false(fc_volume_same_origin("nbd://storage:10810/vol",
                                     "nbd://storage/vol"));
  assert_false(fc_volume_same_origin("nbd://storage/vol1", "nbd://storage/vol2"));
  /* A path and a URI never name the same disk here. */
  assert_false(fc_volume_same_origin("nbd://storage/vol", "/dev/sda"));
}

static int
setup(void **state)
{
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/fcache-ident-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int
teardown(void **state)
{
  char cmd[128];

  (void)state;
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_files),
    cmocka_unit_test(test_block_devices),
    cmocka_unit_test(test_nbd_unix),
    cmocka_unit_test(test_nbd_tcp),
  };

  return cmocka_run_group_tests(tests, setup, teardown);
}

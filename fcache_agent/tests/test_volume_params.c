/* SPDX-License-Identifier: Apache-2.0 */
/* A volume's state file and the settle secret kept with its migration
 * mark (engine/volume.h): written with the mark and read back, never
 * written without it, in a file only the agent reads, and a damaged
 * secret refuses the file rather than being taken for another. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "engine/volume.h"

#define SECRET "a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5"

static char dir[64];
static char path[128];

static int setup(void **state)
{
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/fc-volparams-XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/vol-1.json", dir);
  return 0;
}

static int teardown(void **state)
{
  (void)state;
  unlink(path);
  rmdir(dir);
  return 0;
}

static struct fc_volume_params params(const char *mark)
{
  struct fc_volume_params p = { 0 };

  snprintf(p.id, sizeof p.id, "vol-1");
  snprintf(p.origin, sizeof p.origin, "/dev/x");
  p.cache_size = 1 << 20;
  p.tag = 0x0123456789abcdefull;
  p.rws_n = 1;         /* what an attach gives */
  snprintf(p.migration, sizeof p.migration, "%s", mark);
  snprintf(p.settle_secret, sizeof p.settle_secret, "%s", SECRET);
  snprintf(p.settle_peer, sizeof p.settle_peer, "192.0.2.7:7440");
  return p;
}

static void test_kept_with_the_mark(void **state)
{
  struct fc_volume_params p = params("out:m-1"), q;
  char err[256];
  struct stat st;

  (void)state;
  assert_int_equal(fc_volume_params_save(dir, &p, err, sizeof err), 0);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(fc_volume_params_load(path, &q, err, sizeof err), 0);
  assert_string_equal(q.migration, "out:m-1");
  assert_string_equal(q.settle_secret, SECRET);
  assert_string_equal(q.settle_peer, "192.0.2.7:7440");
}

static void test_gone_with_the_mark(void **state)
{
  struct fc_volume_params p = params(""), q;
  char err[256], text[4096];
  FILE *f;
  size_t n;

  (void)state;
  assert_int_equal(fc_volume_params_save(dir, &p, err, sizeof err), 0);
  f = fopen(path, "r");
  assert_non_null(f);
  n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  assert_null(strstr(text, SECRET));
  assert_null(strstr(text, "settle"));
  assert_int_equal(fc_volume_params_load(path, &q, err, sizeof err), 0);
  assert_string_equal(q.settle_secret, "");
  assert_string_equal(q.settle_peer, "");
}

static void write_file(const char *extra)
{
  FILE *f = fopen(path, "w");

  assert_non_null(f);
  fprintf(f, "{\"volume_id\": \"vol-1\", \"origin\": \"/dev/x\", \"cache_size\": "
          "1048576, \"write_policy\": \"write_back\", \"admission\": \"all\", "
          "\"tag\": \"0123456789abcdef\", \"migration\": \"in:m-1\"%s}", extra);
  fclose(f);
}

static void test_damaged_secret_refused(void **state)
{
  static const char *const bad[] = {
    ", \"settle_secret\": \"A5\", \"settle_peer\": \"h:1\"",
    ", \"settle_secret\": 7, \"settle_peer\": \"h:1\"",
    ", \"settle_secret\": \"" SECRET "\"",              /* no peer */
    ", \"settle_secret\": \"" SECRET "0\", \"settle_peer\": \"h:1\"",
  };
  struct fc_volume_params q;
  char err[256];

  (void)state;
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    write_file(bad[i]);
    assert_int_equal(fc_volume_params_load(path, &q, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "settle_secret"));
  }
  /* An older agent's file: a mark and no secret. */
  write_file("");
  assert_int_equal(fc_volume_params_load(path, &q, err, sizeof err), 0);
  assert_string_equal(q.migration, "in:m-1");
  assert_string_equal(q.settle_secret, "");
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_kept_with_the_mark, setup, teardown),
    cmocka_unit_test_setup_teardown(test_gone_with_the_mark, setup, teardown),
    cmocka_unit_test_setup_teardown(test_damaged_secret_refused, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

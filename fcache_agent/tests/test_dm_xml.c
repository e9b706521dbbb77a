/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the dmcache engine's metadata XML (dm_xml.h): what
 * cache_dump 0.9.0 wrote inside UML is read back exactly, what the agent
 * writes for cache_restore reads back the same, era_invalidate's block
 * list expands its ranges, and text that is not metadata is refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dmcache/dm_xml.h"

static char dir[] = "/tmp/fcxmlXXXXXX";

static const char *
file_with(const char *name, const char *text)
{
  static char path[128];
  FILE *f;

  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

/* Verbatim from cache_dump after a suspend with one dirty block. */
static const char dumped[] =
  "<superblock uuid=\"\" block_size=\"128\" nr_cache_blocks=\"128\" policy=\"smq\" "
  "hint_width=\"4\">\n"
  "  <mappings>\n"
  "    <mapping cache_block=\"0\" origin_block=\"0\" dirty=\"false\"/>\n"
  "    <mapping cache_block=\"1\" origin_block=\"3\" dirty=\"true\"/>\n"
  "  </mappings>\n"
  "  <hints>\n"
  "    <hint cache_block=\"0\" data=\"PwAAAA==\"/>\n"
  "    <hint cache_block=\"1\" data=\"BQAAAA==\"/>\n"
  "  </hints>\n"
  "</superblock>\n";

static void
test_read_cache_dump(void **state)
{
  struct fc_dmc_dump d;
  char err[256];

  assert_int_equal(fc_dmc_xml_read(file_with("d.xml", dumped), &d, err, sizeof err), 0);
  assert_int_equal(d.block_sectors, 128);
  assert_int_equal(d.nr_cache_blocks, 128);
  assert_string_equal(d.policy, "smq");
  assert_int_equal(d.n, 2);
  assert_int_equal(d.map[1].cblock.n, 1);
  assert_int_equal(d.map[1].oblock.n, 3);
  assert_true(d.map[1].dirty);
  assert_false(d.map[0].dirty);
  assert_int_equal(d.map[0].hint, 63);      /* smq's top level */
  assert_int_equal(d.map[1].hint, 5);
  fc_dmc_dump_free(&d);
}

static void
test_write_reads_back(void **state)
{
  struct fc_dmc_mapping m[3] = {
    { .oblock = { 700 }, .cblock = { 0 }, .hint = 63, .dirty = true },
    { .oblock = { 5 }, .cblock = { 1 }, .hint = 0 },
    { .oblock = { 1ull << 40 }, .cblock = { 2 }, .hint = 17 },
  };
  struct fc_dmc_dump d;
  char path[128], err[256];

  snprintf(path, sizeof path, "%s/w.xml", dir);
  assert_int_equal(fc_dmc_xml_write(path, 64, 300, m, 3, err, sizeof err), 0);
  assert_int_equal(fc_dmc_xml_read(path, &d, err, sizeof err), 0);
  assert_int_equal(d.nr_cache_blocks, 300);
  assert_int_equal(d.n, 3);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(d.map[i].oblock.n, m[i].oblock.n);
    assert_int_equal(d.map[i].cblock.n, m[i].cblock.n);
    assert_int_equal(d.map[i].hint, m[i].hint);
    assert_int_equal(d.map[i].dirty, m[i].dirty);
  }
  fc_dmc_dump_free(&d);
}

static void
test_b64_roundtrip(void **state)
{
  uint32_t vals[] = { 0, 1, 63, 0x12345678, UINT32_MAX };
  char s[9];
  uint32_t v;

  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
    fc_b64_le32(vals[i], s);
    assert_int_equal(fc_b64_to_le32(s, &v), 0);
    assert_int_equal(v, vals[i]);
  }
  fc_b64_le32(63, s);
  assert_string_equal(s, "PwAAAA==");
  assert_int_equal(fc_b64_to_le32("P!AAAA==", &v), -EINVAL);
  assert_int_equal(fc_b64_to_le32("Pw==", &v), -EINVAL);   /* too short */
}

static void
test_era_list(void **state)
{
  /* era_invalidate writes `end = "12"`, exclusive. */
  const char *p = file_with("e.xml", "<blocks>\n  <block block=\"6\"/>\n"
                            "  <range begin=\"10\" end = \"12\"/>\n"
                            "  <range begin=\"1020\" end = \"1030\"/>\n</blocks>\n");
  uint64_t *b;
  uint32_t n;
  char err[256];

  assert_int_equal(fc_era_xml_read(p, 1024, &b, &n, err, sizeof err), 0);
  assert_int_equal(n, 1 + 2 + 4);         /* clipped at the origin's end */
  assert_int_equal(b[0], 6);
  assert_int_equal(b[1], 10);
  assert_int_equal(b[2], 11);
  assert_int_equal(b[6], 1023);
  free(b);
  p = file_with("e0.xml", "<blocks>\n</blocks>\n");
  assert_int_equal(fc_era_xml_read(p, 1024, &b, &n, err, sizeof err), 0);
  assert_int_equal(n, 0);
  free(b);
}

static void
test_refuses_what_is_not_metadata(void **state)
{
  struct fc_dmc_dump d;
  uint64_t *b;
  uint32_t n;
  char err[256];

  assert_int_equal(fc_dmc_xml_read(file_with("x1", "hello\n"), &d, err, sizeof err),
                   -EINVAL);
  assert_non_null(strstr(err, "not cache metadata XML"));
  /* A mapping past nr_cache_blocks, and one listed twice. */
  assert_int_equal(fc_dmc_xml_read(file_with("x2",
    "<superblock block_size=\"64\" nr_cache_blocks=\"2\" policy=\"smq\">\n"
    "<mapping cache_block=\"2\" origin_block=\"1\" dirty=\"false\"/>\n"), &d, err,
    sizeof err), -EINVAL);
  assert_int_equal(fc_dmc_xml_read(file_with("x3",
    "<superblock block_size=\"64\" nr_cache_blocks=\"2\" policy=\"smq\">\n"
    "<mapping cache_block=\"1\" origin_block=\"1\" dirty=\"false\"/>\n"
    "<mapping cache_block=\"1\" origin_block=\"2\" dirty=\"false\"/>\n"), &d, err,
    sizeof err), -EINVAL);
  assert_int_equal(fc_dmc_xml_read("/nonexistent/x.xml", &d, err, sizeof err), -ENOENT);
  assert_int_equal(fc_era_xml_read(file_with("x4", "<range begin=\"5\" end = \"x\"/>\n"),
                                   100, &b, &n, err, sizeof err), -EINVAL);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_read_cache_dump),
    cmocka_unit_test(test_write_reads_back),
    cmocka_unit_test(test_b64_roundtrip),
    cmocka_unit_test(test_era_list),
    cmocka_unit_test(test_refuses_what_is_not_metadata),
  };
  int r;

  if (!mkdtemp(dir))
    return 1;
  r = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd))
    r = r ? r : 1;
  return r;
}

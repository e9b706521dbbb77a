/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus text writer (common/prom_text.c): HELP/TYPE lines, label
 * values and help text escaped as the exposition format says, values
 * exact for counters and spelled NaN/+Inf for ratios of nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/prom_text.h"

static char *
take(struct fc_prom *p)
{
  char *text;
  size_t len;

  assert_int_equal(fc_prom_take(p, &text, &len), 0);
  assert_int_equal(len, strlen(text));
  return text;
}

static void
family_and_samples(void **state)
{
  struct fc_prom p;
  char *text;

  fc_prom_init(&p);
  fc_prom_family(&p, "fcache_volume_cache_hits_total", "counter",
                 "Hits \\ with a\nnewline and \"quotes\".");
  fc_prom_u64(&p, "fcache_volume_cache_hits_total",
              (struct fc_prom_label[]){ { "volume", "v1" } }, 1, UINT64_MAX);
  fc_prom_u64(&p, "fcache_volume_cache_hits_total", NULL, 0, 0);
  text = take(&p);
  assert_string_equal(text,
      "# HELP fcache_volume_cache_hits_total Hits \\\\ with a\\nnewline and \"quotes\".\n"
      "# TYPE fcache_volume_cache_hits_total counter\n"
      "fcache_volume_cache_hits_total{volume=\"v1\"} 18446744073709551615\n"
      "fcache_volume_cache_hits_total 0\n");
  free(text);
}

/* A volume id may only hold [A-Za-z0-9._-], but the writer must not rely
 * on it: every byte a label may carry comes out escaped. */
static void
label_values_are_escaped(void **state)
{
  struct fc_prom p;
  char *text;

  fc_prom_init(&p);
  fc_prom_double(&p, "m", (struct fc_prom_label[]){
                   { "a", "x\"y\\z\nw" }, { "b", "" } }, 2, 0.5);
  text = take(&p);
  assert_string_equal(text, "m{a=\"x\\\"y\\\\z\\nw\",b=\"\"} 0.5\n");
  free(text);
}

static void
special_values(void **state)
{
  struct fc_prom p;
  char *text;

  fc_prom_init(&p);
  fc_prom_double(&p, "r", NULL, 0, NAN);
  fc_prom_double(&p, "r", NULL, 0, INFINITY);
  fc_prom_double(&p, "r", NULL, 0, -INFINITY);
  fc_prom_double(&p, "r", NULL, 0, 1795896352.3849313);
  text = take(&p);
  assert_string_equal(text, "r NaN\nr +Inf\nr -Inf\nr 1795896352.3849313\n");
  free(text);
}

static void
empty_text_is_an_empty_string(void **state)
{
  struct fc_prom p;
  char *text;

  fc_prom_init(&p);
  text = take(&p);
  assert_string_equal(text, "");
  free(text);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(family_and_samples),
    cmocka_unit_test(label_values_are_escaped),
    cmocka_unit_test(special_values),
    cmocka_unit_test(empty_text_is_an_empty_string),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}

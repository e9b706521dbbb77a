/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus text exposition format (prom_text.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prom_text.h"

void
fc_prom_init(struct fc_prom *p)
{
  memset(p, 0, sizeof *p);
}

void
fc_prom_free(struct fc_prom *p)
{
  free(p->buf);
  fc_prom_init(p);
}

static void
append(struct fc_prom *p, const char *s, size_t n)
{
  if (p->err)
    return;
  if (p->len + n + 1 > p->cap) {
    size_t cap = p->cap ? p->cap : 4096;
    char *b;

    while (p->len + n + 1 > cap)
      cap *= 2;
    b = realloc(p->buf, cap);
    if (!b) {
      p->err = -ENOMEM;
      return;
    }
    p->buf = b;
    p->cap = cap;
  }
  memcpy(p->buf + p->len, s, n);
  p->len += n;
  p->buf[p->len] = 0;
}

static void
append_str(struct fc_prom *p, const char *s)
{
  append(p, s, strlen(s));
}

/* s with '\\' and newline escaped, and '"' too in a label value (HELP
 * text may hold a bare '"'). */
static void
append_escaped(struct fc_prom *p, const char *s, int quote)
{
  for (; *s; s++) {
    size_t n = strcspn(s, quote ? "\\\n\"" : "\\\n");

    append(p, s, n);
    s += n;
    if (!*s)
      break;
    append_str(p, *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : "\\\"");
  }
}

void
fc_prom_family(struct fc_prom *p, const char *name, const char *type, const char *help)
{
  append_str(p, "# HELP ");
  append_str(p, name);
  append_str(p, " ");
  append_escaped(p, help, 0);
  append_str(p, "\n# TYPE ");
  append_str(p, name);
  append_str(p, " ");
  append_str(p, type);
  append_str(p, "\n");
}

static void
series(struct fc_prom *p, const char *name, const struct fc_prom_label *l, unsigned nl)
{
  append_str(p, name);
  if (nl == 0)
    return;
  append_str(p, "{");
  for (unsigned i = 0; i < nl; i++) {
    append_str(p, i ? ",": "");
    append_str(p, l[i].name);
    append_str(p, "=\"");
    append_escaped(p, l[i].value, 1);
    append_str(p, "\"");
  }
  append_str(p, "}");
}

void
fc_prom_u64(struct fc_prom *p, const char *name, const struct fc_prom_label *l,
            unsigned nl, uint64_t value)
{
  char v[32];

  series(p, name, l, nl);
  snprintf(v, sizeof v, " %llu\n", (unsigned long long)value);
  append_str(p, v);
}

void
fc_prom_double(struct fc_prom *p, const char *name, const struct fc_prom_label *l,
               unsigned nl, double value)
{
  char v[48];

  series(p, name, l, nl);
  if (isnan(value))
    snprintf(v, sizeof v, " NaN\n");
  else if (isinf(value))
    snprintf(v, sizeof v, " %cInf\n", value > 0 ? '+' : '-');
  else
    snprintf(v, sizeof v, " %.17g\n", value);
  append_str(p, v);
}

int
fc_prom_take(struct fc_prom *p, char **text, size_t *len)
{
  int r = p->err;

  if (!r && !p->buf)
    append(p, "", 0);
  r = p->err;
  if (r) {
    fc_prom_free(p);
    return r;
  }
  *text = p->buf;
  *len = p->len;
  fc_prom_init(p);
  return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The values of configuration keys that need more than a string copy:
 * byte sizes with units, unsigned integers, lists of path prefixes.  The
 * INI file itself is read by config.c. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"

bool
fc_path_has_dot_component(const char *path)
{
  for (const char *c = path; *c; ) {
    size_t n;

    while (*c == '/')
      c++;
    n = strcspn(c, "/");
    if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
      return true;
    c += n;
  }
  return false;
}

int fc_parse_prefixes(const char *value,
                      char out[FC_ORIGIN_PREFIXES_MAX][FC_PATH_MAX],
                      unsigned *n_out, char *err, size_t errlen)
{
  char list[FC_ORIGIN_PREFIXES_MAX][FC_PATH_MAX];
  unsigned n = 0;
  const char *p = value;

  memset(list, 0, sizeof list);
  while (*p == ' ' || *p == '\t')
    p++;
  /* An empty list is allowed: then only NBD origins may be attached. */
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);

    while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
      len--;
    if (len == 0) {
      snprintf(err, errlen, "empty entry in the list; separate absolute "
               "paths with single commas");
      return -EINVAL;
    }
    if (n == FC_ORIGIN_PREFIXES_MAX) {
      snprintf(err, errlen, "more than %d prefixes", FC_ORIGIN_PREFIXES_MAX);
      return -EINVAL;
    }
    if (len >= FC_PATH_MAX) {
      snprintf(err, errlen, "prefix '%.40s...' is longer than %d bytes", p,
               FC_PATH_MAX - 1);
      return -EINVAL;
    }
    memcpy(list[n], p, len);
    if (list[n][0] != '/' || fc_path_has_dot_component(list[n])) {
      snprintf(err, errlen, "'%s' is not an absolute path without '.' or "
               "'..' components", list[n]);
      return -EINVAL;
    }
    n++;
    p += len;
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p == ',') {
      p++;
      while (*p == ' ' || *p == '\t')
        p++;
      if (*p == '\0') {
        snprintf(err, errlen, "empty entry at the end of the list");
        return -EINVAL;
      }
    }
  }
  memcpy(out, list, sizeof list);
  *n_out = n;
  return 0;
}

/* Accepts "", "B", and K/M/G/T each optionally followed by "B" or "iB",
 * case-insensitively; all units are binary (K = 1024). */
static int unit_shift(const char *u, unsigned *shift)
{
  static const char units[] = "KMGT";
  const char *hit;

  *shift = 0;
  if (*u == '\0' || strcasecmp(u, "B") == 0)
    return 0;
  hit = memchr(units, toupper((unsigned char)u[0]), sizeof units - 1);
  if (hit == NULL)
    return -EINVAL;
  *shift = 10 * (unsigned)(hit - units + 1);
  u++;
  if (*u == '\0' || strcasecmp(u, "B") == 0 || strcasecmp(u, "iB") == 0)
    return 0;
  return -EINVAL;
}

int fc_parse_size(const char *s, uint64_t *out)
{
  uint64_t v = 0;
  unsigned shift;
  const char *p = s;

  /* Digits first: strtoull would accept "-1", " 1" and "0x10". */
  if (*p < '0' || *p > '9')
    return -EINVAL;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10)
      return -ERANGE;
    v = v * 10 + d;
  }
  while (*p == ' ' || *p == '\t')
    p++;
  if (unit_shift(p, &shift) < 0)
    return -EINVAL;
  if (shift > 0 && v > (UINT64_MAX >> shift))
    return -ERANGE;
  *out = v << shift;
  return 0;
}

int fc_parse_uint(const char *s, unsigned *out)
{
  unsigned long long v = 0;

  if (*s == '\0')
    return -EINVAL;
  for (; *s; s++) {
    if (*s < '0' || *s > '9')
      return -EINVAL;
    v = v * 10 + (unsigned)(*s - '0');
    if (v > UINT_MAX)
      return -ERANGE;
  }
  *out = (unsigned)v;
  return 0;
}

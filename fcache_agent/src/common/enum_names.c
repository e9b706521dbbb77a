/* SPDX-License-Identifier: Apache-2.0 */
/* Enum name tables; see enum_names.h. */
#include "enum_names.h"

#include <errno.h>
#include <string.h>

const char *
fc_enum_name(const char *const *names, size_t n, unsigned v)
{
  return v < n && names[v] ? names[v] : "?";
}

int
fc_enum_parse(const char *const *names, size_t n, const char *s)
{
  for (size_t i = 0; s && i < n; i++)
    if (names[i] && strcmp(s, names[i]) == 0)
      return (int)i;
  return -EINVAL;
}

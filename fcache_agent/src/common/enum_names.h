/* SPDX-License-Identifier: Apache-2.0 */
/* An enum's names, written once as a table indexed by the value and read
 * both ways: the value's name (configuration, JSON, logs) and the value a
 * name stands for.  Each module keeps its table and its typed
 * fc_<thing>_name / fc_<thing>_parse, which call these. */
#ifndef FCACHE_ENUM_NAMES_H
#define FCACHE_ENUM_NAMES_H

#include <stddef.h>

/* The number of entries of a table (an array, not a pointer). */
#define FC_NAMES_COUNT(names) (sizeof (names) / sizeof (names)[0])

/* names[v], or "?" for a value the table does not name (out of range, or
 * a NULL entry). */
const char *fc_enum_name(const char *const *names, size_t n, unsigned v);

/* The value whose name is s (exactly, case included), or -EINVAL for
 * NULL or a name not in the table. */
int fc_enum_parse(const char *const *names, size_t n, const char *s);

/* Defines a module's typed pair over its table, as its header declares
 * them: `const char *<fn>_name(type)` and
 * `int <fn>_parse(const char *, type *out)` (0, or -EINVAL leaving *out
 * alone).  For example, in alloc/share.c:
 *
 *   FC_DEFINE_ENUM_NAMES(fc_spare_mode, enum fc_spare_mode, spare_names)
 */
#define FC_DEFINE_ENUM_NAMES(fn, type, names)                            \
  const char *fn##_name(type v)                                         \
  {                                                                     \
    return fc_enum_name(names, FC_NAMES_COUNT(names), (unsigned)v);     \
  }                                                                     \
  int fn##_parse(const char *s, type *out)                              \
  {                                                                     \
    int v = fc_enum_parse(names, FC_NAMES_COUNT(names), s);             \
                                                                        \
    if (v < 0)                                                          \
      return v;                                                         \
    *out = (type)v;                                                     \
    return 0;                                                           \
  }

#endif

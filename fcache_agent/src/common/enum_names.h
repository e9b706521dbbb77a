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

#endif

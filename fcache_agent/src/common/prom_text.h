/* SPDX-License-Identifier: Apache-2.0 */
/* Writing the Prometheus text exposition format (version 0.0.4, what
 * node-exporter's textfile collector reads): HELP and TYPE lines, samples
 * with labels, label values and help text escaped as the format says.
 * Only writes; the agent parses no metrics.
 *
 * The text grows in a heap buffer; a failed allocation is remembered and
 * reported once, by fc_prom_take. */
#ifndef FCACHE_PROM_TEXT_H
#define FCACHE_PROM_TEXT_H

#include <stddef.h>
#include <stdint.h>

struct fc_prom {
  char *buf;
  size_t len, cap;
  int err;              /* 0, or -ENOMEM once an append failed */
};

/* A label: name (a valid label name, the caller's constant) = value (any
 * bytes but NUL, escaped here). */
struct fc_prom_label {
  const char *name, *value;
};

void fc_prom_init(struct fc_prom *p);
void fc_prom_free(struct fc_prom *p);
/* "# HELP name help" and "# TYPE name type"; type is "counter" or
 * "gauge".  Every sample of the family follows before the next family. */
void fc_prom_family(struct fc_prom *p, const char *name, const char *type,
                    const char *help);
/* name{labels} value: an exact integer, or a double ("NaN" for a ratio of
 * nothing, "+Inf"/"-Inf" as the format spells them). */
void fc_prom_u64(struct fc_prom *p, const char *name, const struct fc_prom_label *l,
                 unsigned nl, uint64_t value);
void fc_prom_double(struct fc_prom *p, const char *name, const struct fc_prom_label *l,
                    unsigned nl, double value);
/* The text so far, NUL-terminated, handed to the caller (free it), and
 * *len its length; or -ENOMEM.  p is empty afterwards. */
int fc_prom_take(struct fc_prom *p, char **text, size_t *len);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The arguments a control operation takes, described once: the server
 * refuses a request whose arguments do not match its operation's table
 * (an unknown name, a missing required one, a wrong type, a number out of
 * bounds) before the handler runs, `capabilities` and `fcache-agent
 * --control-schema` publish the tables, and nova_ext's client checks its
 * requests against that published copy (nova_ext/control_schema.py). */
#ifndef FCACHE_CONTROL_ARGS_H
#define FCACHE_CONTROL_ARGS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/json_args.h"

enum fc_control_arg_type {
  FC_ARG_STRING,     /* a JSON string */
  FC_ARG_UINT,       /* an integer from min to max */
  FC_ARG_SIZE,       /* bytes, above 0: an integer or "64M" (K/M/G/T) */
  FC_ARG_BOOL,       /* true or false */
  FC_ARG_UINT_LIST,  /* an array of integers, each from min to max */
};

struct fc_control_arg {
  const char *name;
  enum fc_control_arg_type type;
  bool required;
  uint64_t min, max;             /* FC_ARG_UINT and FC_ARG_UINT_LIST */
  const char *help;              /* one line, for the reference */
};

/* Terminates every table; a table of just this takes no argument. */
#define FC_CONTROL_ARGS_END { NULL, FC_ARG_STRING, false, 0, 0, NULL }

/* 0 when args (a JSON object; null members count as absent) matches
 * spec, else -EINVAL with a message naming op and the argument. */
int fc_control_args_check(const char *op, const struct fc_control_arg *spec,
                          json_t *args, char *err, size_t errlen);

/* {name: {"type", "required", "min", "max", "help"}} for one table. */
json_t *fc_control_args_json(const struct fc_control_arg *spec);

/* {op: {"access": "read" or "admin", "arguments": {...}}} for an op
 * table (control.h), what `capabilities` and --control-schema print. */
struct fc_control_op;
json_t *fc_control_ops_json(const struct fc_control_op *ops);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Checking a request's arguments against its operation's table, and the
 * table as JSON. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "control.h"
#include "control_args.h"

static const char *const type_names[] = {
  [FC_ARG_STRING] = "string",
  [FC_ARG_UINT] = "integer",
  [FC_ARG_SIZE] = "size",
  [FC_ARG_BOOL] = "boolean",
  [FC_ARG_UINT_LIST] = "integer list",
};

static const struct fc_control_arg *
find(const struct fc_control_arg *spec, const char *name)
{
  for (; spec->name; spec++)
    if (!strcmp(spec->name, name))
      return spec;
  return NULL;
}

static bool
uint_in(const json_t *v, const struct fc_control_arg *a)
{
  json_int_t n;

  if (!json_is_integer(v))
    return false;
  n = json_integer_value(v);
  return n >= 0 && (uint64_t)n >= a->min && (uint64_t)n <= a->max;
}

static bool
size_ok(const json_t *v)
{
  uint64_t bytes;

  if (json_is_integer(v))
    return json_integer_value(v) > 0;
  return json_is_string(v) && fc_parse_size(json_string_value(v), &bytes) == 0 &&
         bytes > 0;
}

static bool
uint_list_ok(const json_t *v, const struct fc_control_arg *a)
{
  size_t i;
  json_t *e;

  if (!json_is_array(v))
    return false;
  json_array_foreach(v, i, e)
    if (!uint_in(e, a))
      return false;
  return true;
}

/* What a value of a's type must be, for the refusal. */
static void
expected(const struct fc_control_arg *a, char *buf, size_t len)
{
  switch (a->type) {
  case FC_ARG_UINT:
    snprintf(buf, len, "an integer from %llu to %llu", (unsigned long long)a->min,
             (unsigned long long)a->max);
    break;
  case FC_ARG_UINT_LIST:
    snprintf(buf, len, "a list of integers from %llu to %llu",
             (unsigned long long)a->min, (unsigned long long)a->max);
    break;
  case FC_ARG_SIZE:
    snprintf(buf, len, "a positive size in bytes (or with a K/M/G/T suffix)");
    break;
  case FC_ARG_BOOL:
    snprintf(buf, len, "true or false");
    break;
  case FC_ARG_STRING:
  default:
    snprintf(buf, len, "a string");
    break;
  }
}

static bool
value_ok(const json_t *v, const struct fc_control_arg *a)
{
  switch (a->type) {
  case FC_ARG_STRING:    return json_is_string(v);
  case FC_ARG_UINT:      return uint_in(v, a);
  case FC_ARG_SIZE:      return size_ok(v);
  case FC_ARG_BOOL:      return json_is_boolean(v);
  case FC_ARG_UINT_LIST: return uint_list_ok(v, a);
  }
  return false;
}

/* "a, b, c": the names an operation takes, for an unknown one's refusal. */
static void
names(const struct fc_control_arg *spec, char *buf, size_t len)
{
  size_t used = 0;

  snprintf(buf, len, "no arguments");
  for (; spec->name && used < len; spec++) {
    int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", spec->name);
    if (n < 0)
      return;
    used += (size_t)n;
  }
}

int
fc_control_args_check(const char *op, const struct fc_control_arg *spec,
                      json_t *args, char *err, size_t errlen)
{
  const char *key;
  json_t *v;

  json_object_foreach(args, key, v) {
    const struct fc_control_arg *a = find(spec, key);
    char want[96];

    if (!a) {
      char known[512];

      names(spec, known, sizeof known);
      snprintf(err, errlen, "'%s' takes no argument '%.64s'; it takes: %s", op, key,
               known);
      return -EINVAL;
    }
    if (json_is_null(v) || value_ok(v, a))
      continue;
    expected(a, want, sizeof want);
    snprintf(err, errlen, "argument '%s' of '%s' must be %s", key, op, want);
    return -EINVAL;
  }
  for (; spec->name; spec++) {
    if (spec->required && !fc_arg_present(args, spec->name)) {
      char want[96];

      expected(spec, want, sizeof want);
      snprintf(err, errlen, "missing argument '%s' of '%s' (%s)", spec->name, op, want);
      return -EINVAL;
    }
  }
  return 0;
}

json_t *
fc_control_args_json(const struct fc_control_arg *spec)
{
  json_t *o = json_object();

  for (; o && spec->name; spec++) {
    json_t *a = json_pack("{s:s, s:b, s:s}", "type", type_names[spec->type],
                          "required", spec->required, "help",
                          spec->help ? spec->help : "");

    if (a && (spec->type == FC_ARG_UINT || spec->type == FC_ARG_UINT_LIST) &&
        (json_object_set_new(a, "min", json_integer((json_int_t)spec->min)) ||
         json_object_set_new(a, "max", json_integer((json_int_t)spec->max)))) {
      json_decref(a);
      a = NULL;
    }
    if (!a || json_object_set_new(o, spec->name, a)) {
      json_decref(o);
      return NULL;
    }
  }
  return o;
}

json_t *
fc_control_ops_json(const struct fc_control_op *ops)
{
  json_t *o = json_object();

  for (; o && ops->name; ops++) {
    json_t *op = json_pack("{s:s, s:o*}", "access",
                           ops->access == FC_CONTROL_READ ? "read" : "admin",
                           "arguments", ops->args ? fc_control_args_json(ops->args)
                                                  : json_null());

    if (!op || json_object_set_new(o, ops->name, op)) {
      json_decref(o);
      return NULL;
    }
  }
  return o;
}

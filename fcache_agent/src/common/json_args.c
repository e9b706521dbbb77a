/* SPDX-License-Identifier: Apache-2.0 */
#include "common/config.h"
#include "common/json_args.h"

bool
fc_arg_present(json_t *args, const char *key)
{
  json_t *v = json_object_get(args, key);

  return v && !json_is_null(v);
}

const char *
fc_arg_string(json_t *args, const char *key)
{
  return json_string_value(json_object_get(args, key));
}

uint64_t
fc_arg_uint(json_t *args, const char *key, uint64_t dflt)
{
  json_t *v = json_object_get(args, key);

  return json_is_integer(v) ? (uint64_t)json_integer_value(v) : dflt;
}

uint64_t
fc_arg_size(json_t *args, const char *key)
{
  json_t *v = json_object_get(args, key);
  uint64_t bytes = 0;

  if (json_is_integer(v))
    return (uint64_t)json_integer_value(v);
  if (json_is_string(v) && fc_parse_size(json_string_value(v), &bytes) == 0)
    return bytes;
  return 0;
}

bool
fc_arg_bool(json_t *args, const char *key)
{
  return json_is_true(json_object_get(args, key));
}

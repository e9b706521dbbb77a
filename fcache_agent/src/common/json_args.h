/* SPDX-License-Identifier: Apache-2.0 */
/* Reading the members of a JSON object of arguments that have been
 * checked already (control/control_args.h checks a control request's
 * against its operation's table): an absent or null member gives NULL,
 * the default, 0 or false, and so does one of another type. */
#ifndef FCACHE_COMMON_JSON_ARGS_H
#define FCACHE_COMMON_JSON_ARGS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

bool fc_arg_present(json_t *args, const char *key);
const char *fc_arg_string(json_t *args, const char *key);
uint64_t fc_arg_uint(json_t *args, const char *key, uint64_t dflt);
/* An integer, or a string with a K/M/G/T suffix (fc_parse_size). */
uint64_t fc_arg_size(json_t *args, const char *key);
bool fc_arg_bool(json_t *args, const char *key);

#endif

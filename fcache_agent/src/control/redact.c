/* SPDX-License-Identifier: Apache-2.0 */
/* What a read-only control client may not see: the export names in
 * export_uri (common/export_secret.h).  The name is what lets a process
 * that can reach the export's socket open it; control_group is for
 * monitoring, not for reading every volume, so readers get the URI with
 * the name replaced and the socket kept (it names the volume). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "control_ops.h"

#define NBD_UNIX_PREFIX "nbd+unix:///"

/* "nbd+unix:///NAME?socket=P" -> "nbd+unix:///REDACTED?socket=P"; other
 * strings (a dmcache device path, a URI without a name) as they are. */
static void redact_uri(json_t *holder, const char *key, json_t *val)
{
  const char *uri = json_string_value(val), *q;
  size_t plen = strlen(NBD_UNIX_PREFIX);
  char out[1024];

  if (!uri || strncmp(uri, NBD_UNIX_PREFIX, plen) != 0)
    return;
  q = strchr(uri + plen, '?');
  if (q == uri + plen || (!q && !uri[plen]))
    return;
  if (snprintf(out, sizeof out, NBD_UNIX_PREFIX "REDACTED%s", q ? q : "") >=
      (int)sizeof out)
    snprintf(out, sizeof out, NBD_UNIX_PREFIX "REDACTED");
  json_object_set_new(holder, key, json_string(out));
}

void fc_redact_export_names(json_t *result)
{
  const char *key;
  json_t *val;
  size_t i;

  if (json_is_array(result)) {
    json_array_foreach(result, i, val)
      fc_redact_export_names(val);
    return;
  }
  if (!json_is_object(result))
    return;
  json_object_foreach(result, key, val) {
    if (strcmp(key, "export_uri") == 0)
      redact_uri(result, key, val);
    else
      fc_redact_export_names(val);
  }
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The control operations of the metrics (metrics.h): `metrics` returns
 * the Prometheus text the textfile holds, `volume-stats-reset` zeroes a
 * volume's counters (or every volume's and the host's). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent/agent.h"
#include "control_ops.h"
#include "metrics.h"

int
fc_op_metrics(void *opaque, json_t *args, json_t **result, char *err, size_t errlen)
{
  struct fc_agent *agent = opaque;
  char *text = NULL;
  size_t len = 0;
  int r;

  if (!agent->metrics) {
    snprintf(err, errlen, "the metrics sampler is not running");
    return -EAGAIN;
  }
  r = fc_metrics_render(agent->metrics, &text, &len);
  if (r) {
    snprintf(err, errlen, "cannot render the metrics: out of memory");
    return r;
  }
  /* Plain JSON string: the reply is one line whatever the text holds. */
  *result = json_pack("{s:s, s:s%}", "content_type",
                      "text/plain; version=0.0.4; charset=utf-8", "text", text, len);
  free(text);
  return *result ? 0 : -ENOMEM;
}

int
fc_op_volume_stats_reset(void *opaque, json_t *args, json_t **result, char *err,
                         size_t errlen)
{
  struct fc_agent *agent = opaque;
  json_t *id = json_object_get(args, "volume_id");
  json_t *all = json_object_get(args, "all");

  if (!agent->metrics) {
    snprintf(err, errlen, "the metrics sampler is not running");
    return -EAGAIN;
  }
  /* Every volume only when asked for by name: a missing volume_id is a
   * caller's mistake, not a wish to lose the whole host's figures. */
  if (id && !json_is_null(id) && !json_is_string(id)) {
    snprintf(err, errlen, "argument 'volume_id' must be a string");
    return -EINVAL;
  }
  if (all && !json_is_boolean(all)) {
    snprintf(err, errlen, "argument 'all' must be true or false");
    return -EINVAL;
  }
  if (json_is_string(id) == json_is_true(all)) {
    snprintf(err, errlen, "give either 'volume_id' or 'all': true");
    return -EINVAL;
  }
  return fc_metrics_reset(agent->metrics, json_is_string(id) ? json_string_value(id) : NULL,
                          result, err, errlen);
}

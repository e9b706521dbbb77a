/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's metrics (doc/admin/monitoring.rst): per-volume and per-host
 * counters and gauges in the Prometheus text format, written atomically
 * to metrics_path every metrics_interval seconds for node-exporter's
 * textfile collector, and returned by the `metrics` control operation.
 *
 * A sampler reads what volume-show and agent-status read (the engines'
 * own figures, so both engines are covered), every metrics_interval
 * seconds and on each `metrics` request.  Counters are the sums of the
 * increases it saw since the last reset, so a reset (volume-stats-reset)
 * zeroes them without touching the engines, a detached volume's I/O stays
 * in the host's totals, and a counter never goes back except at a reset,
 * whose time is exposed.  Hit ratios over 5 min / 1 h / 1 day come from a
 * per-volume ring of per-minute snapshots (common/stat_ring.h). */
#ifndef FCACHE_CONTROL_METRICS_H
#define FCACHE_CONTROL_METRICS_H

#include <jansson.h>
#include <stddef.h>

struct fc_agent;
struct fc_metrics;

/* Start sampling agent's volumes, and writing the text to
 * cfg.metrics_path (unless ""), every cfg.metrics_interval seconds.
 * 0 or -errno with a message. */
int fc_metrics_start(struct fc_agent *agent, struct fc_metrics **out, char *err,
                     size_t errlen);
void fc_metrics_stop(struct fc_metrics *mt);
/* Sample now and render: *text (caller frees) of *len bytes, or -errno. */
int fc_metrics_render(struct fc_metrics *mt, char **text, size_t *len);
/* Zero the counters of volume_id (NULL: of every volume and of the
 * host's totals) and restart its windows.  *result says what was reset
 * and when; -ENOENT with a message for a volume not attached. */
int fc_metrics_reset(struct fc_metrics *mt, const char *volume_id, json_t **result,
                     char *err, size_t errlen);

#endif

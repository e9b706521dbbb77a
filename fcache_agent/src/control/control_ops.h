/* SPDX-License-Identifier: Apache-2.0 */
/* The control operations the `fcache` CLI and nova_ext call, as JSON
 * handlers over struct fc_agent; doc/cli/fcache.rst is their reference
 * from the command line's side. */
#ifndef FCACHE_CONTROL_OPS_H
#define FCACHE_CONTROL_OPS_H

#include <stddef.h>
#include "control.h"

/* {NULL, NULL}-terminated; the opaque pointer is the struct fc_agent. */
extern const struct fc_control_op fc_agent_control_ops[];

/* The control_group readers' view of a result: every export_uri's
 * export name replaced (redact.c). */
void fc_redact_export_names(json_t *result);

/* Live migration operations (control_migr.c). */
int fc_op_migration_key(void *, json_t *, json_t **, char *, size_t);
int fc_op_migration_incoming(void *, json_t *, json_t **, char *, size_t);
int fc_op_migration_outgoing(void *, json_t *, json_t **, char *, size_t);
int fc_op_migration_start(void *, json_t *, json_t **, char *, size_t);
int fc_op_migration_switchover(void *, json_t *, json_t **, char *, size_t);
int fc_op_migration_finish(void *, json_t *, json_t **, char *, size_t);
int fc_op_migration_abort(void *, json_t *, json_t **, char *, size_t);
int fc_op_migration_status(void *, json_t *, json_t **, char *, size_t);
int fc_op_migration_settle(void *, json_t *, json_t **, char *, size_t);

/* What this agent runs and the bounds it enforces (control_caps.c). */
int fc_op_capabilities(void *, json_t *, json_t **, char *, size_t);

/* Metrics (control_metrics.c). */
int fc_op_metrics(void *, json_t *, json_t **, char *, size_t);
int fc_op_volume_stats_reset(void *, json_t *, json_t **, char *, size_t);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Control operations of live storage migration (control_move.c); private
 * to control/. */
#ifndef FCACHE_CONTROL_MOVE_H
#define FCACHE_CONTROL_MOVE_H

#include <jansson.h>
#include <stddef.h>

struct fc_agent;
struct fc_volume;

/* The bounds of volume-move's tuning arguments (control_ops.c's table). */
#define FC_MOVE_MAX_ROUNDS 1000u
#define FC_MOVE_MAX_CONVERGE_BYTES (1ull << 40)
#define FC_MOVE_MAX_DOWNTIME_MS 60000u
#define FC_MOVE_MAX_AIO_THRESHOLD 1000000u
#define FC_MOVE_MAX_AIO_DELAY_US 1000000u
#define FC_MOVE_MAX_RATE_MBPS 1000000u

int fc_op_volume_move(void *, json_t *, json_t **, char *, size_t);
int fc_op_volume_move_status(void *, json_t *, json_t **, char *, size_t);
int fc_op_volume_move_abort(void *, json_t *, json_t **, char *, size_t);
/* Under host.lock: the volume's running or last move for volume-show, or
 * NULL. */
json_t *fc_move_json_locked(struct fc_agent *agent, struct fc_volume *v);
/* migration-outgoing: -EBUSY with a message while the volume named by
 * args moves its origin. */
int fc_move_check_no_move(struct fc_agent *agent, json_t *args, char *err,
                          size_t errlen);

#endif

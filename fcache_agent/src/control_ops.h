/* The control operations the `fcache` CLI and nova_ext call, as JSON
 * handlers over struct fc_agent (ARCHITECTURE.md §3). */
#ifndef FCACHE_CONTROL_OPS_H
#define FCACHE_CONTROL_OPS_H

#include "control.h"

/* {NULL, NULL}-terminated; the opaque pointer is the struct fc_agent. */
extern const struct fc_control_op fc_agent_control_ops[];

#endif

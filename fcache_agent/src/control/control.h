/* SPDX-License-Identifier: Apache-2.0 */
/* Control socket: newline-delimited JSON requests and responses on a unix
 * stream socket.
 *
 * Request:  {"op": "volume-show", "args": {...}}\n   (at most 64 KiB)
 * Response: {"ok": true, "result": {...}}\n
 *       or  {"ok": false, "error": "one line an operator can act on",
 *            "errno": 22}\n
 * A malformed or oversized request gets an error response (oversized: the
 * connection is then closed) and changes nothing.  Each connection may
 * send several requests.  The socket is created mode 0660 (0600 when no
 * group is configured) and chown'ed to root:<group>.  Operations that
 * change state need root or the admin group (else EPERM, naming it).
 */
#ifndef FCACHE_CONTROL_H
#define FCACHE_CONTROL_H

#include <jansson.h>

#include "control_args.h"

#define FC_CONTROL_MAX_MSG (64 * 1024)

/* A connection that has not sent a complete request for this long is
 * closed (the CLI and nova_ext send one request per connection); one that
 * does not read its reply for this long is dropped.  The default of
 * control_idle_timeout_s (fc_control_set_idle_timeout). */
#define FC_CONTROL_IDLE_S 30

/* A handler fills *result (a new reference) and returns 0, or returns a
 * negative errno and writes a message into err. */
typedef int (*fc_control_handler)(void *opaque, json_t *args,
                                  json_t **result, char *err, size_t errlen);

/* Who may call an operation.  The zero value is the strict one, so an
 * operation added without a thought about access is admin-only. */
enum fc_control_access {
  FC_CONTROL_ADMIN = 0,   /* changes state: root or control_admin_group */
  FC_CONTROL_READ,        /* read-only: root or control_group (or admin) */
};

/* What a caller with read-only rights may not see of a result (a
 * volume's export secret): removed from *result in place. */
typedef void (*fc_control_redactor)(json_t *result);

struct fc_control_op {
  const char *name;
  fc_control_handler handler;
  enum fc_control_access access;
  /* For FC_CONTROL_READ operations: applied to the result for a caller
   * who is not an admin; NULL when the whole result is for readers. */
  fc_control_redactor redact;
  /* The arguments it takes, ending in FC_CONTROL_ARGS_END: a request
   * that does not match is refused before the handler runs.  NULL leaves
   * every check to the handler (the server's own test doubles; every
   * operation of the agent has a table). */
  const struct fc_control_arg *args;
};

struct fc_control;

/* ops is an array terminated by {NULL, NULL}; it must outlive the server.
 * group (the socket's group: read-only operations) and admin_group (every
 * other operation) may be "" (the agent's own user, root in production,
 * only).  Each connection's peer is identified with SO_PEERCRED and its
 * groups from the group database.  Returns NULL with errno set (logged). */
struct fc_control *fc_control_start(const char *socket_path, const char *group,
                                    const char *admin_group,
                                    const struct fc_control_op *ops,
                                    void *opaque);
void fc_control_stop(struct fc_control *ctl);
/* Connections accepted from now on use idle_s instead of
 * FC_CONTROL_IDLE_S. */
void fc_control_set_idle_timeout(struct fc_control *ctl, unsigned idle_s);

#endif

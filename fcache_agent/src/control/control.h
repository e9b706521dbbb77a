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
 * group is configured) and chown'ed to root:<group>.
 */
#ifndef FCACHE_CONTROL_H
#define FCACHE_CONTROL_H

#include <jansson.h>

#define FC_CONTROL_MAX_MSG (64 * 1024)

/* A handler fills *result (a new reference) and returns 0, or returns a
 * negative errno and writes a message into err. */
typedef int (*fc_control_handler)(void *opaque, json_t *args,
                                  json_t **result, char *err, size_t errlen);

struct fc_control_op {
  const char *name;
  fc_control_handler handler;
};

struct fc_control;

/* ops is an array terminated by {NULL, NULL}; it must outlive the server.
 * group may be "" (root only).  Returns NULL with errno set (logged). */
struct fc_control *fc_control_start(const char *socket_path, const char *group,
                                    const struct fc_control_op *ops,
                                    void *opaque);
void fc_control_stop(struct fc_control *ctl);

#endif

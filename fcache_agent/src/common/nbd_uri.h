/* SPDX-License-Identifier: Apache-2.0 */
/* The parts of an NBD URI (the NBD project's URI specification) the agent
 * judges an origin by: its transport, the export name, and the server's
 * address (host and port) or unix socket.  libnbd parses the URI again to
 * connect; this is only for policy and identity. */
#ifndef FCACHE_NBD_URI_H
#define FCACHE_NBD_URI_H

#include <stdbool.h>

#define FC_NBD_URI_PART_MAX 256

struct fc_nbd_uri {
  bool tls;                             /* nbds:// or nbds+unix:// */
  bool is_unix;                         /* nbd+unix:// or nbds+unix:// */
  char export[FC_NBD_URI_PART_MAX];     /* decoded; "" for the default */
  char socket[FC_NBD_URI_PART_MAX];     /* is_unix: the socket= path, decoded */
  char host[FC_NBD_URI_PART_MAX];       /* TCP: as written, brackets kept */
  char port[8];                         /* TCP: "10809" when absent */
};

/* 0, or -EINVAL when uri is not an nbd[s][+unix]:// URI this can read (a
 * unix one without socket=, a part too long, a bad port). */
int fc_nbd_uri_parse(const char *uri, struct fc_nbd_uri *out);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* What one connection negotiated during the handshake, which decides the
 * shape of its replies and the commands it may send.  Not a public
 * header. */
#ifndef FCACHE_NBD_SESSION_H
#define FCACHE_NBD_SESSION_H

#include <stdbool.h>

struct nbd_session {
  /* NBD_OPT_STRUCTURED_REPLY was acknowledged: reads (and block status)
   * are answered with structured reply chunks. */
  bool structured;
  /* "base:allocation" is selected (NBD_OPT_SET_META_CONTEXT, which needs
   * structured replies): NBD_CMD_BLOCK_STATUS is allowed. */
  bool base_allocation;
};

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* An RBD origin in QEMU's own filename syntax, the one Nova and operators
 * already write:
 *
 *   rbd:POOL[/NAMESPACE]/IMAGE[:id=USER][:conf=PATH][:keyring=PATH]
 *       [:mon_host=HOST\:PORT;HOST\:PORT]
 *
 * A backslash makes the next character literal (QEMU escapes the ':' of
 * mon_host's ports so).  Only these options: QEMU hands any other key to
 * librados as a setting, which from a control-socket client would let it
 * point the root agent's log file or admin socket anywhere.  Snapshots
 * (@SNAP) are read-only and refused: a cache origin is written. */
#ifndef FCACHE_RBD_SPEC_H
#define FCACHE_RBD_SPEC_H

#include <stddef.h>

#include "config.h"

#define FC_RBD_NAME_MAX 128
#define FC_RBD_MON_HOST_MAX 512

struct fc_rbd_spec {
  char pool[FC_RBD_NAME_MAX];
  char ns[FC_RBD_NAME_MAX];             /* "" for the default namespace */
  char image[FC_RBD_NAME_MAX];
  char id[FC_RBD_NAME_MAX];             /* cephx user without "client."; "" */
  char conf[FC_PATH_MAX];               /* "" when not given */
  char keyring[FC_PATH_MAX];            /* "" when not given */
  char mon_host[FC_RBD_MON_HOST_MAX];   /* unescaped, ';'-separated; "" */
};

/* 0, or -EINVAL with a one-line reason in err. */
int fc_rbd_spec_parse(const char *s, struct fc_rbd_spec *out,
                      char *err, size_t errlen);

static inline int
fc_rbd_spec_is_rbd(const char *s)
{
  return s[0] == 'r' && s[1] == 'b' && s[2] == 'd' && s[3] == ':';
}

#endif

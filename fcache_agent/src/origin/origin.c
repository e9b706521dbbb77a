/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rbd_spec.h"
#include "origin.h"

int
fc_origin_open(const char *uri, unsigned connections,
               const struct fc_origin_policy *pol, struct fc_origin **out,
               char *err, size_t errlen)
{
  if (uri[0] == '/')
    return fc_origin_open_path(uri, pol, out, err, errlen);
  if (!strncmp(uri, "nbd://", 6) || !strncmp(uri, "nbd+unix://", 11) ||
      !strncmp(uri, "nbds://", 7) || !strncmp(uri, "nbds+unix://", 12))
    return fc_origin_open_nbd(uri, connections, pol, out, err, errlen);
  if (fc_rbd_spec_is_rbd(uri))
    return fc_origin_open_rbd(uri, pol, out, err, errlen);
  snprintf(err, errlen, "origin '%s' is neither an absolute path, an "
           "nbd://, nbd+unix://, nbds:// or nbds+unix:// URI, nor an "
           "rbd:pool/image origin", uri);
  return -EINVAL;
}

/* Zeroes written, at most this much at a time. */
#define ZERO_WRITE_CHUNK (1u << 20)

int
fc_origin_zero(struct fc_origin *o, uint32_t count, uint64_t off,
               bool may_trim)
{
  uint32_t chunk = count < ZERO_WRITE_CHUNK ? count : ZERO_WRITE_CHUNK;
  void *zeroes;
  int r = -EOPNOTSUPP;

  if (o->ops->zero)
    r = o->ops->zero(o, count, off, may_trim);
  if (r != -EOPNOTSUPP)
    return r;
  /* The slow way, but the zeroes are there all the same. */
  zeroes = calloc(1, chunk);
  if (!zeroes)
    return -ENOMEM;
  r = 0;
  while (count && !r) {
    uint32_t len = count < chunk ? count : chunk;

    r = fc_origin_pwrite(o, zeroes, len, off, false);
    off += len;
    count -= len;
  }
  free(zeroes);
  return r;
}

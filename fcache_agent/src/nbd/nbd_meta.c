/* SPDX-License-Identifier: Apache-2.0 */
/* Metadata-context option payloads; see nbd_meta.h. */
#include "nbd_meta.h"

#include <errno.h>
#include <string.h>

#include "nbd_proto.h"
#include "nbd_request.h"

static bool is(const uint8_t *q, uint32_t qlen, const char *s)
{
  return qlen == strlen(s) && memcmp(q, s, qlen) == 0;
}

int nbd_meta_parse(const uint8_t *data, uint32_t len, bool set,
                   struct nbd_meta_request *out)
{
  uint32_t pos, i;

  memset(out, 0, sizeof *out);
  if (len < 8)
    return -EINVAL;
  out->namelen = nbd_get32(data);
  if (out->namelen > len - 8)
    return -EINVAL;
  if (out->namelen > NBD_MAX_STRING)
    return -E2BIG;
  out->name = data + 4;
  pos = 4 + out->namelen;
  out->nqueries = nbd_get32(data + pos);
  pos += 4;
  /* Each query takes at least its 4-byte length: a count the payload
   * cannot hold is refused before the loop, however large. */
  if (out->nqueries > (len - pos) / 4)
    return -EINVAL;
  for (i = 0; i < out->nqueries; i++) {
    uint32_t qlen;
    const uint8_t *q;

    if (len - pos < 4)
      return -EINVAL;
    qlen = nbd_get32(data + pos);
    pos += 4;
    if (qlen > len - pos)
      return -EINVAL;
    if (qlen > NBD_MAX_STRING)
      return -E2BIG;
    q = data + pos;
    pos += qlen;
    if (is(q, qlen, NBD_META_BASE_ALLOCATION) || (!set && is(q, qlen, "base:")))
      out->base_allocation = true;
  }
  if (pos != len)
    return -EINVAL;
  /* LIST with no query asks for every context the server has. */
  if (!set && out->nqueries == 0)
    out->base_allocation = true;
  return 0;
}

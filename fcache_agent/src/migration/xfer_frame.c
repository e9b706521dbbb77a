/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>

#include "common/crc32c.h"
#include "xfer_frame.h"

void
fc_put_le32(uint8_t *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

uint32_t
fc_get_le32(const uint8_t *p)
{
  uint32_t v = 0;

  for (int i = 0; i < 4; i++)
    v |= (uint32_t)p[i] << (8 * i);
  return v;
}

void
fc_put_le64(uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t
fc_get_le64(const uint8_t *p)
{
  uint64_t v = 0;

  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

void
fc_xfer_encode_header(uint8_t out[FC_XFER_HEADER_SIZE], uint8_t type,
                      uint16_t flags, const void *payload, uint32_t len)
{
  uint32_t crc;

  fc_put_le32(out, FC_XFER_MAGIC);
  out[4] = FC_XFER_VERSION;
  out[5] = type;
  out[6] = (uint8_t)flags;
  out[7] = (uint8_t)(flags >> 8);
  fc_put_le32(out + 8, len);
  crc = crc32c(0, out, 12);
  /* payload NULL: the caller seals a scattered payload itself. */
  if (len && payload)
    crc = crc32c(crc, payload, len);
  fc_put_le32(out + 12, crc);
}

int
fc_xfer_decode_header(const uint8_t in[FC_XFER_HEADER_SIZE], struct fc_xfer_header *h)
{
  if (fc_get_le32(in) != FC_XFER_MAGIC || in[4] != FC_XFER_VERSION)
    return -EPROTO;
  h->type = in[5];
  if (h->type == 0 || h->type > FC_XFER_TYPE_MAX)
    return -EPROTO;
  h->flags = (uint16_t)(in[6] | in[7] << 8);
  h->length = fc_get_le32(in + 8);
  h->crc = fc_get_le32(in + 12);
  if (h->length > FC_XFER_MAX_PAYLOAD)
    return -EMSGSIZE;
  return 0;
}

int
fc_xfer_check_payload(const uint8_t in[FC_XFER_HEADER_SIZE],
                      const struct fc_xfer_header *h, const void *payload)
{
  uint32_t crc = crc32c(0, in, 12);

  if (h->length)
    crc = crc32c(crc, payload, h->length);
  return crc == h->crc ? 0 : -EBADMSG;
}

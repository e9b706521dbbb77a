/* SPDX-License-Identifier: Apache-2.0 */
/* The migration-stream harnesses' input format: records that the harness
 * seals into frames, since random bytes would almost never carry a right
 * CRC-32C.  A record is u8 type, u16 flags (LE), u16 length (LE), then the
 * payload (cut at the end of the input); a type with bit 7 set sends the
 * payload as raw bytes instead, so that the frame checks themselves are
 * reached too. */
#ifndef FCACHE_FUZZ_FRAMES_H
#define FCACHE_FUZZ_FRAMES_H

#include <stdlib.h>
#include <string.h>

#include "migration/xfer_frame.h"

/* Append the frames data describes to out (room: 4 * size + 16 bytes);
 * returns the end of what was written. */
static inline uint8_t *fuzz_frames(uint8_t *out, const uint8_t *data, size_t size)
{
  while (size >= 5) {
    uint8_t type = data[0];
    uint16_t flags = (uint16_t)(data[1] | data[2] << 8);
    size_t len = (size_t)(data[3] | data[4] << 8);

    data += 5;
    size -= 5;
    if (len > size)
      len = size;
    if (type & 0x80) {
      memcpy(out, data, len);
      out += len;
    } else {
      fc_xfer_encode_header(out, type, flags, data, (uint32_t)len);
      memcpy(out + FC_XFER_HEADER_SIZE, data, len);
      out += FC_XFER_HEADER_SIZE + len;
    }
    data += len;
    size -= len;
  }
  return out;
}

#endif
